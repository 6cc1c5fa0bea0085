"""Where and in which dtype a model is loaded: load_model(device=, dtype=, device_map=,
model_kwargs=). device_map goes to from_pretrained; accelerate may then offload blocks, whose
weights sit on the meta device between forwards: every method reads them where they are
(models.base.materialized), and gives the scores of the model loaded whole."""
from __future__ import annotations

import pytest
import torch

import aieg_fast
from builders import make_tiny_gpt2, make_tiny_llama

TEXTS = ["the movie is good", "a positive review of a negative film"]


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def saved(request, tmp_path_factory):
    """A tiny model saved with its tokenizer, and the Explainer of it loaded whole."""
    model, tok = (make_tiny_gpt2 if request.param == "gpt2" else make_tiny_llama)()
    folder = tmp_path_factory.mktemp(request.param)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder, aieg_fast.load_model(str(folder))


def _split(folder):
    """The model loaded with device_map="auto" and 3/4 of its bytes allowed on the CPU: accelerate
    offloads the rest (to disk, the only other device a CPU machine has)."""
    ref = aieg_fast.load_model(str(folder))
    size = sum(p.numel() * p.element_size() for p in ref.model.parameters())
    return aieg_fast.load_model(str(folder), device_map="auto",
                                model_kwargs={"max_memory": {"cpu": size * 3 // 4}, "offload_folder": str(folder / "offload")})


def test_device_map_split_model_gives_the_same_scores(saved):
    folder, whole = saved
    ex = _split(folder)
    placed = set(ex.model.hf_device_map.values())
    assert {"cpu", "disk"} <= placed, ex.model.hf_device_map  # really split: some blocks are not loaded
    assert any(p.device.type == "meta" for p in ex.model.parameters())
    assert ex.device == torch.device("cpu")
    for method in aieg_fast.list_methods():
        kw = {"n_steps": 4} if method != "heta" else {"n_probes": 2}
        want = whole.attribute(TEXTS, method=method, **kw)
        got = ex.attribute(TEXTS, method=method, **kw)
        for a, b in zip(want, got):
            torch.testing.assert_close(b.scores, a.scores, rtol=1e-4, atol=1e-5, msg=method)
            assert b.target["id"] == a.target["id"]
    gen_w = whole.attribute_generation("the movie is", max_new_tokens=2, method="integrated_gradients", n_steps=4)
    gen_s = ex.attribute_generation("the movie is", max_new_tokens=2, method="integrated_gradients", n_steps=4)
    assert gen_s.token_ids == gen_w.token_ids
    torch.testing.assert_close(gen_s.scores, gen_w.scores, rtol=1e-4, atol=1e-5, equal_nan=True)
    with pytest.raises(ValueError, match="several devices by device_map"):
        aieg_fast.load_model(ex.model, ex.tokenizer, device="cpu")


@pytest.mark.parametrize("family", ["gemma", "gemma3_text"])
def test_gemma_with_offloaded_embeddings_gives_the_same_scores(family, tmp_path):
    """Gemma's adapter reads the embedding table through a view (unscaled rows): the view stands
    for the model's module, whose accelerate hook loads the offloaded weights (they were read on
    the meta device: the reference token and the input device failed)."""
    from builders import family_specs

    model, tok = family_specs()[family].build()
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    whole = aieg_fast.load_model(str(tmp_path))
    dm = {"model.embed_tokens": "disk", "model.layers": "cpu", "model.norm": "cpu", "model.rotary_emb": "cpu", "lm_head": "disk"}
    ex = aieg_fast.load_model(str(tmp_path), device_map=dm, model_kwargs={"offload_folder": str(tmp_path / "offload")})
    assert ex.model.get_input_embeddings().weight.is_meta and ex.device == torch.device("cpu")
    for method in ("integrated_gradients", "saliency", "aieg"):
        want = whole.attribute(TEXTS, method=method, n_steps=4)
        got = ex.attribute(TEXTS, method=method, n_steps=4)
        for a, b in zip(want, got):
            torch.testing.assert_close(b.scores, a.scores, rtol=1e-4, atol=1e-5, msg=method)
            assert b.target["id"] == a.target["id"]


def test_dtype_bfloat16(saved):
    folder, whole = saved
    ex = aieg_fast.load_model(str(folder), dtype="bfloat16")
    assert {p.dtype for p in ex.model.parameters()} == {torch.bfloat16}
    a = whole.attribute(TEXTS[0], method="integrated_gradients", n_steps=8)
    b = ex.attribute(TEXTS[0], method="integrated_gradients", n_steps=8, target=a.target["id"])
    assert b.scores.dtype == torch.float32 and bool(torch.isfinite(b.scores).all())
    # bf16 keeps 8 bits of mantissa: the scores agree to a few per cent of the largest one
    assert float((a.scores - b.scores).abs().max()) < 0.1 * float(a.scores.abs().max())


def test_bad_placement_is_refused_before_loading(tmp_path):
    nowhere = str(tmp_path / "no-model")  # loading it would fail: each error must come first
    with pytest.raises(ValueError, match="dtype must be one of"):
        aieg_fast.load_model(nowhere, dtype="int8")
    with pytest.raises(ValueError, match="device must be"):
        aieg_fast.load_model(nowhere, device="gpu0")
    with pytest.raises(ValueError, match="device_map must be one of"):
        aieg_fast.load_model(nowhere, device_map="everywhere")
    with pytest.raises(ValueError, match="exclude each other"):
        aieg_fast.load_model(nowhere, device="cpu", device_map="auto")
    with pytest.raises(ValueError, match=r"model_kwargs: pass \['dtype'\]"):
        aieg_fast.load_model(nowhere, model_kwargs={"dtype": torch.float16})
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device 'cuda': CUDA is not available"):
            aieg_fast.load_model(nowhere, device="cuda")
    m, t = make_tiny_gpt2()
    with pytest.raises(ValueError, match="apply to models loaded by name"):
        aieg_fast.load_model(m, t, device_map="auto")
    with pytest.raises(ValueError, match=r"dtype=torch.bfloat16 applies to models loaded by name"):
        aieg_fast.load_model(m, t, dtype="bfloat16")
    ex = aieg_fast.load_model(m, t, device="auto", dtype="float32")  # auto: CUDA when available, else the CPU
    assert ex.device.type == ("cuda" if torch.cuda.is_available() else "cpu")


def test_a_tokenizer_that_does_not_load_is_named(tmp_path):
    from builders import make_tiny_gpt2

    m, _ = make_tiny_gpt2()
    with pytest.raises(ValueError, match=r"tokenizer must be a tokenizer object, a hub id or a local tokenizer directory; "
                                         r"'.*' is a local directory without a loadable tokenizer"):
        aieg_fast.load_model(m, tmp_path)


def test_a_tokenizer_of_another_type_is_refused_naming_it(tmp_path):
    """tokenizer=5 was taken as the tokenizer: the next use failed with "'int' object is not
    callable". Refused first (by name, before the model's folder is read), naming the type."""
    m, t = make_tiny_gpt2()

    class NotCallable:
        convert_ids_to_tokens = t.convert_ids_to_tokens

    for bad, kind in ((5, "int"), ({"vocab": 1}, "dict"), (NotCallable(), "NotCallable"), (t.convert_ids_to_tokens, "method")):
        with pytest.raises(TypeError, match=rf"tokenizer must be a tokenizer object .*got {kind}"):
            aieg_fast.load_model(m, bad)
    with pytest.raises(TypeError, match=r"tokenizer must be .*got int 5"):
        aieg_fast.load_model(str(tmp_path / "no-model"), tokenizer=5)
    assert aieg_fast.load_model(m, t).tokenizer is t


def test_a_hub_model_in_a_cache_dir_loads_with_its_config_and_tokenizer(tmp_path, monkeypatch):
    """model_kwargs={"cache_dir": ...} reached the weights' from_pretrained only: the config and the
    tokenizer were looked for in the default cache (offline: "could not be loaded from the hub").
    A model in a hub cache layout under cache_dir loads by its id, with its own tokenizer."""
    import huggingface_hub.constants

    model, tok = make_tiny_gpt2()
    snap = tmp_path / "cache" / "models--someorg--tiny" / "snapshots" / "0123abcd"
    model.save_pretrained(snap)
    tok.save_pretrained(snap)
    (snap.parents[1] / "refs").mkdir()
    (snap.parents[1] / "refs" / "main").write_text("0123abcd")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "someorg").mkdir()  # a folder named like the org: the id is still a hub id, cached in cache_dir
    ex = aieg_fast.load_model("someorg/tiny", model_kwargs={"cache_dir": str(tmp_path / "cache")})
    want = aieg_fast.load_model(str(snap))
    assert ex.tokenizer("the movie is good")["input_ids"] == tok("the movie is good")["input_ids"]
    torch.testing.assert_close(ex.attribute(TEXTS[0], method="saliency").scores,
                               want.attribute(TEXTS[0], method="saliency").scores, rtol=0, atol=0)
    # cached by its commit only (no refs/main): the hub-cache check looks for that revision too
    (snap.parents[1] / "refs" / "main").unlink()
    ex = aieg_fast.load_model("someorg/tiny", model_kwargs={"cache_dir": str(tmp_path / "cache"), "revision": "0123abcd"})
    assert ex.model.config.n_layer == model.config.n_layer
    # the weights in a subfolder of the repository (the tokenizer given): the check looks there too
    model.save_pretrained(snap / "sub")
    (snap / "config.json").unlink()
    ex = aieg_fast.load_model("someorg/tiny", tokenizer=str(snap),
                              model_kwargs={"cache_dir": str(tmp_path / "cache"), "revision": "0123abcd", "subfolder": "sub"})
    assert ex.model.config.n_layer == model.config.n_layer
    with pytest.raises(ValueError, match=r"model 'someorg/tiny' loaded, but no tokenizer loaded from it .*pass tokenizer="):
        aieg_fast.load_model("someorg/tiny", model_kwargs={"cache_dir": str(tmp_path / "cache"), "revision": "0123abcd",
                                                            "subfolder": "sub"})  # was transformers' OSError about the hub
