"""A few small checks on the real embedded model (SmolLM2-135M-Instruct, LLaMA architecture, GQA)."""
from __future__ import annotations

import pytest
import torch

from aieg_fast.datasets import SENTIMENT_LABELS, SENTIMENT_TEMPLATE, sst2_sample

pytestmark = pytest.mark.real_model


def test_embedded_model_loads(smollm):
    a = smollm.adapter
    assert a.arch == "LlamaForCausalLM"
    assert a.n_kv_heads < a.n_heads  # grouped-query attention
    assert smollm.name == "SmolLM2-135M-Instruct"
    # the reference token is a trained embedding (PAD = <|im_end|>), not a zero row
    assert float(a.embeddings.weight[smollm.ref_token_id].detach().abs().sum()) > 0


def test_aieg_on_real_sentence(smollm):
    text = sst2_sample()[0][0]
    res = smollm.attribute(text, method="aieg", target=SENTIMENT_LABELS[1], template=SENTIMENT_TEMPLATE, n_steps=6)
    assert len(res.scores) == len(res.tokens) == len(res.token_ids)
    assert torch.isfinite(res.scores).all() and float(res.scores.max()) > 0
    attributed = "".join(t for t, a in zip(res.tokens, res.attributable) if a)
    assert attributed.strip() == text.strip()
    words, ws = res.words()
    assert "charming" in words


def test_path_gradient_matches_finite_difference(smollm):
    """∇F·Δ along the IG path equals dF/dα by central differences (the gradients IG integrates).

    IG completeness is not asserted here: on this model F is very rough along the straight path
    from the <|im_end|> baseline (it swings by ~30 logits within α ∈ [0.1, 0.25]), so tens of
    steps do not converge — the gradient pathology AIEG's emphasis factor addresses.
    """
    ex = smollm
    ids, fixed = ex.encode("a charming journey")
    b = ex.build_batch([(ids, fixed)])
    ctx = ex.context(b)
    ctx.reference_forward()  # fills the target with the prediction
    E, Eb = b.embeds[0], b.baseline[0]
    rows = torch.zeros(1, dtype=torch.long)

    def F(a):
        with torch.no_grad():
            return float(ctx.F(rows, (Eb + a * (E - Eb)).unsqueeze(0))[0])

    for a in (0.5, 1.0):
        X = (Eb + a * (E - Eb)).unsqueeze(0).requires_grad_(True)
        (g,) = torch.autograd.grad(ctx.F(rows, X)[0], X)
        directional = float((g[0] * (E - Eb)).sum())
        fd = (F(a + 1e-3) - F(a - 1e-3)) / 2e-3
        assert abs(directional - fd) <= 0.01 * abs(fd) + 1e-2


def test_the_cache_built_on_rank_1_is_whole_and_follows_the_umask(smollm, tmp_path, monkeypatch):
    """One de-quantization, two checks. (1) Under torchrun on a machine without the cache, rank 1
    saved with save_pretrained, which writes nothing on ranks other than 0 once a process group
    exists: the command stopped with 'No such file or directory: ...tmp<pid>/config.json' and
    left the half-written folder; any rank now writes a whole cache, which loads as the model it
    came from. (2) The de-quantized weights were cached 0600 (safetensors' own mode) while the
    other files followed the umask: a cache shared through $AIEG_FAST_CACHE could not be read by
    other users."""
    import os

    from aieg_fast.models.embedded import DEFAULT_MODEL, load_embedded

    monkeypatch.setenv("AIEG_FAST_CACHE", str(tmp_path))
    old = os.umask(0o022)
    try:
        with monkeypatch.context() as m:  # this process is rank 1 of 2 of an initialised group
            m.setattr(torch.distributed, "is_initialized", lambda: True)
            m.setattr(torch.distributed, "get_rank", lambda *a, **k: 1)
            m.setattr(torch.distributed, "get_world_size", lambda *a, **k: 2)
            built, tok, _ = load_embedded(torch.float32)
    finally:
        os.umask(old)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == [DEFAULT_MODEL]  # no temporary folder left
    modes = {f.name: f.stat().st_mode & 0o777 for f in (tmp_path / DEFAULT_MODEL).iterdir()}
    assert modes["model.safetensors"] == modes["config.json"] == 0o644, modes
    cached, _, _ = load_embedded(torch.float32)  # from the cache now
    ids = torch.tensor([tok("a charming journey")["input_ids"]])
    with torch.no_grad():
        assert torch.equal(built(ids).logits, cached(ids).logits)


def test_processes_starting_together_build_the_cache_once(smollm, tmp_path, monkeypatch, capsys):
    """torchrun's ranks (or parallel jobs) on a machine without the cache each de-quantized the
    GGUF file (N times the work and memory, their messages interleaved). One builds it under a
    lock beside the cache; the others wait, then read what it wrote."""
    import fcntl
    import shutil
    import threading
    import time

    from aieg_fast.models import embedded

    built = embedded.cache_dir() / embedded.DEFAULT_MODEL  # the cache the session's model came from
    monkeypatch.setenv("AIEG_FAST_CACHE", str(tmp_path))
    holder = open(tmp_path / f".{embedded.DEFAULT_MODEL}.lock", "a")
    fcntl.flock(holder, fcntl.LOCK_EX)  # another process is building the cache

    def other_process_finishes():
        time.sleep(1)
        shutil.copytree(built, tmp_path / embedded.DEFAULT_MODEL)
        fcntl.flock(holder, fcntl.LOCK_UN)
        holder.close()

    monkeypatch.setattr(embedded, "embedded_model_path", lambda: pytest.fail("this process de-quantized the model too"))
    other = threading.Thread(target=other_process_finishes)
    other.start()
    model, tok, _ = embedded.load_embedded(torch.float32)
    other.join()
    assert "another process is building the cache" in capsys.readouterr().err
    ids = torch.tensor([tok("a charming journey")["input_ids"]])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, smollm.model(ids).logits)
