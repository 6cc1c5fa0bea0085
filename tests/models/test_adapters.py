"""Every registered model family, through its adapter: the hook points exist and capture what the
model computes, F equals the model's own output, captured attention equals eager attention, the
grouped-query mapping is the model's; and a user can add a family with ``register_adapter``.

Each test builds its own tiny model: ``output_attentions=True`` leaves recording hooks behind.
"""
from __future__ import annotations

import re

import pytest
import torch

import aieg_fast
from aieg_fast.core.capture import AttentionCapture, ProjectionCapture
from aieg_fast.models import LlamaAdapter, adapter_class, adapter_for, register_adapter, unregister_adapter
from builders import make_tiny_gpt2, make_tiny_llama

TEXT = "the movie is good and the actors are great"
FAMILIES = {
    "gpt2": lambda: make_tiny_gpt2(seed=3),
    "gpt2_clf": lambda: make_tiny_gpt2(seed=3, classifier=True),
    "llama": lambda: make_tiny_llama(seed=3),
    "llama_clf": lambda: make_tiny_llama(seed=3, classifier=True),
}


def _ids(tok):
    return torch.tensor([tok(TEXT)["input_ids"]])


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_F_equals_model_output(family):
    model, tok = FAMILIES[family]()
    ad = adapter_for(model)
    ids = _ids(tok)
    with torch.no_grad():
        logits = model(ids).logits[0, -1] if ad.kind == "causal_lm" else model(ids).logits[0]
        h = ad.hidden_last(ad.embeddings(ids), None, None, None)
        for t in (0, 1, int(logits.argmax())):
            f = ad.target_scores(h, torch.tensor([t]), "logit")
            torch.testing.assert_close(f[0], logits[t], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(ad.full_logits(h)[0], logits, atol=1e-5, rtol=1e-5)
        lp = ad.target_scores(h, torch.tensor([1]), "logprob")
        torch.testing.assert_close(lp[0], torch.log_softmax(logits, -1)[1], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_hook_points_capture_the_model(family):
    model, tok = FAMILIES[family]()
    ad = adapter_for(model)
    mods = set(model.modules())
    for l in range(ad.n_layers):
        assert ad.attn_modules[l] in mods and ad.o_proj(l) in mods
        for module, reader in ad.qkv_points(l):
            assert module in mods and callable(reader)
    ids = _ids(tok)
    layers = list(range(ad.n_layers))
    with ProjectionCapture(ad, layers, "pre_o", ad.has_rope) as cap, torch.no_grad():
        model(ids)
        q, k, v, pe = cap.projections(layers)
        A = dict(cap.A)
    L = ids.shape[1]
    for l in layers:
        assert q[l].shape == (1, L, ad.n_heads * ad.head_dim)
        assert k[l].shape == v[l].shape == (1, L, ad.n_kv_heads * ad.head_dim)
        assert A[l].shape == (1, L, ad.n_heads * ad.head_dim)
        # the output projection of the captured pre-o tensor is the attention module's output
        with torch.no_grad():
            out = ad.o_proj(l)(A[l])
        with ProjectionCapture(ad, [l], "post_o", False) as cap2, torch.no_grad():
            model(ids)
            torch.testing.assert_close(cap2.A[l], out, atol=1e-5, rtol=1e-5)
        if ad.has_rope:
            cos, sin = pe[l]
            assert cos.shape[-1] == ad.head_dim
    assert sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules()) == 0


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_captured_attention_equals_eager_attention(family):
    model, tok = FAMILIES[family]()
    model.set_attn_implementation("eager")
    ad = adapter_for(model)
    ids = _ids(tok)
    layers = list(range(ad.n_layers))
    with AttentionCapture(ad, layers) as cap, torch.no_grad():
        cap.last_index = torch.tensor([ids.shape[1] - 1])
        model(ids)
        rows = cap.pop()
    with torch.no_grad():
        ref = model(ids, output_attentions=True).attentions
    for l in layers:
        torch.testing.assert_close(rows[l], ref[l][:, :, -1], atol=1e-6, rtol=1e-5)


def test_gqa_mapping_is_the_models():
    """Query head h reads KV head h // (H / H_kv) in the model; the ``grouped`` expansion does the
    same, so per-head attention rebuilt from captured (rotated) q and k equals the model's."""
    from aieg_fast.methods.grad_ellm import expand_kv

    model, tok = make_tiny_llama(seed=4)
    model.set_attn_implementation("eager")
    ad = adapter_for(model)
    assert ad.n_kv_heads < ad.n_heads
    ids = _ids(tok)
    l = ad.n_layers - 1
    with ProjectionCapture(ad, [l], "pre_o", True) as cap, torch.no_grad():
        model(ids)
        q, k, _, pe = cap.projections([l])
    with torch.no_grad():
        ref = model(ids, output_attentions=True).attentions[l][0, :, -1]  # [H, L]
    cos, sin = pe[l]
    qr = ad.apply_rope(q[l], cos, sin, ad.n_heads)[0, -1].view(ad.n_heads, ad.head_dim)
    kr = expand_kv(ad.apply_rope(k[l], cos, sin, ad.n_kv_heads), ad.n_heads, ad.n_kv_heads, "grouped")[0]
    kr = kr.view(-1, ad.n_heads, ad.head_dim).transpose(0, 1)  # [H, L, d]
    att = torch.softmax((kr @ qr.unsqueeze(-1)).squeeze(-1) * ad.attention_scaling(l), -1)
    torch.testing.assert_close(att, ref, atol=1e-5, rtol=1e-4)


def test_falcon_loads_eager_and_an_sdpa_object_says_so(tmp_path):
    """load_model loads Falcon with eager attention; a Falcon object built with SDPA runs the
    gradient methods, and the methods that read attention either stop with a message (transformers
    up to 5.24: Falcon cannot switch its attention implementation at run time) or, where it can
    switch (5.25), give the eager model's scores; either way the model is left as it was."""
    from builders import family_specs, model_state

    model, tok = family_specs()["falcon"].build()
    model.set_attn_implementation("sdpa")
    if model.config._attn_implementation != "sdpa":
        pytest.skip("this transformers builds Falcon with eager attention only")
    ex = aieg_fast.load_model(model, tok)
    assert torch.isfinite(ex.attribute(TEXT, method="integrated_gradients", n_steps=8).scores).all()
    before = model_state(ex)
    try:
        switched = ex.attribute(TEXT, method="attention").scores
    except RuntimeError as err:
        assert re.search("cannot switch to eager attention at run time.*attn_implementation='eager'", str(err)), err
        switched = None
    assert model_state(ex) == before and model.config._attn_implementation == "sdpa"
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded = aieg_fast.load_model(str(tmp_path))
    assert loaded.model.config._attn_implementation == "eager"
    eager = loaded.attribute(TEXT, method="attention").scores
    assert torch.isfinite(eager).all()
    if switched is not None:
        torch.testing.assert_close(switched, eager)


def test_register_adapter_bad_input():
    with pytest.raises(TypeError, match="DecoderAdapter subclass"):
        register_adapter("x", object)
    with pytest.raises(ValueError, match="no adapter is registered"):
        unregister_adapter("no-such-family")
    from aieg_fast.models import DecoderAdapter, LlamaAdapter, supported_architectures

    before = supported_architectures()
    # a str matched by substring (and listed letter by letter); a class object is not a name
    for archs, shown in (("MyLlamaForCausalLM", "'MyLlamaForCausalLM'"), ((LlamaAdapter,), "LlamaAdapter")):
        bad = type("Bad", (LlamaAdapter,), {"architectures": archs})
        with pytest.raises(TypeError, match=rf"Bad.architectures must be a tuple of transformers class names .*{shown}"):
            register_adapter("my-llama", bad)
    # the base class's hooks: a bare NotImplementedError at load time
    bare = type("Bare", (DecoderAdapter,), {"architectures": ("MyLlamaForCausalLM",)})
    with pytest.raises(ValueError, match=r"adapter Bare does not implement \['decoder', 'blocks', 'config_sizes', "
                                         r"'attention', 'qkv_points', 'o_proj'\]"):
        register_adapter("my-llama", bare)
    assert supported_architectures() == before


def test_register_adapter_replace_must_be_a_bool():
    """replace='yes' (or any truthy value) replaced the registered adapter."""
    from aieg_fast.models import GPT2Adapter

    before = adapter_class(make_tiny_llama()[0].config)
    for bad in ("yes", 1, None):
        with pytest.raises(ValueError, match=rf"^replace must be True or False, got {bad!r}$"):
            register_adapter("llama", GPT2Adapter, replace=bad)
    assert adapter_class(make_tiny_llama()[0].config) is before


def test_renamed_subclass_of_a_supported_model():
    """A subclass of a supported class (same model_type) is served by the family's adapter; a
    user's own model_type needs one register_adapter call naming the adapter and its class."""
    from transformers import LlamaConfig, LlamaForCausalLM

    class MyLlamaForCausalLM(LlamaForCausalLM):
        pass

    base, tok = make_tiny_llama(seed=6)
    renamed = MyLlamaForCausalLM(base.config).eval()
    renamed.load_state_dict(base.state_dict())
    ex = aieg_fast.load_model(renamed, tok)
    assert type(ex.adapter).__name__ == "LlamaAdapter"
    torch.testing.assert_close(ex.attribute(TEXT, method="integrated_gradients", n_steps=8).scores,
                               aieg_fast.load_model(base, tok).attribute(TEXT, method="integrated_gradients", n_steps=8).scores)

    class MyConfig(LlamaConfig):
        model_type = "my-llama"

    class MyLM(LlamaForCausalLM):
        config_class = MyConfig

    cfg = {k: v for k, v in base.config.to_dict().items() if k != "model_type"}
    own = MyLM(MyConfig(**cfg)).eval()
    assert own.config.model_type == "my-llama"
    own.load_state_dict(base.state_dict())
    with pytest.raises(ValueError, match=r"model_type 'my-llama' \(class 'MyLM'\) is not supported"):
        aieg_fast.load_model(own, tok)

    class MyAdapter(LlamaAdapter):
        architectures = ("MyLM",)

    register_adapter("my-llama", MyAdapter)
    try:
        ex2 = aieg_fast.load_model(own, tok)
        res = ex2.attribute(TEXT, method="grad_ellm", preset="corrected")
        ref = aieg_fast.load_model(base, tok).attribute(TEXT, method="grad_ellm", preset="corrected")
        torch.testing.assert_close(res.scores, ref.scores)
    finally:
        unregister_adapter("my-llama")


def test_a_subclass_that_overrides_forward_is_explained_as_its_parent():
    """F is computed from the decoder and the head's target row, not by the model's forward: a
    subclass whose forward scales the logits by 2 is explained as its parent (F is the parent's
    logit). The README says exactly which subclasses work as is (it said every subclass did)."""
    from pathlib import Path

    from transformers import LlamaForCausalLM

    class ScaledLlama(LlamaForCausalLM):
        def forward(self, *args, **kwargs):
            out = super().forward(*args, **kwargs)
            out.logits = out.logits * 2
            return out

    base, tok = make_tiny_llama(seed=6)
    scaled = ScaledLlama(base.config).eval()
    scaled.load_state_dict(base.state_dict())
    res = aieg_fast.load_model(scaled, tok).attribute(TEXT, method="integrated_gradients", n_steps=4)
    ids, t = torch.tensor([res.token_ids]), res.target["id"]
    with torch.no_grad():
        parent, own = float(base(ids).logits[0, -1, t]), float(scaled(ids).logits[0, -1, t])
    assert res.info["F_input"] == pytest.approx(parent, rel=1e-5, abs=1e-6) and own == pytest.approx(2 * parent, rel=1e-5)
    readme = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8").split())
    assert "subclass of a supported model class works as is;" not in readme
    assert "a subclass of a supported model class that keeps its parent's forward and head works as is" in readme
    assert "one that overrides `forward` (e.g. to scale the logits) is explained as its parent, without a warning" in readme


def test_check_config_must_be_a_classmethod():
    """An instance-method check_config registered fine and crashed at load (it reads the config
    before any model exists)."""
    class Plain(LlamaAdapter):
        architectures = ("LlamaForCausalLM",)

        def check_config(self, config):
            pass

    with pytest.raises(TypeError, match=r"Plain.check_config must be a @classmethod or @staticmethod"):
        register_adapter("plainllama", Plain)

    class Static(LlamaAdapter):  # a staticmethod is called the same way: accepted
        architectures = ("LlamaForCausalLM",)

        @staticmethod
        def check_config(config):
            if getattr(config, "refuse_me", False):
                raise ValueError("refuse_me is set")

    register_adapter("staticllama", Static)
    unregister_adapter("staticllama")


def test_a_renamed_classifier_subclass_is_a_classifier():
    """A subclass of a supported classification head under another name was taken for a causal
    LM (the kind read the class's own name): attribute crashed in the logits."""
    from aieg_fast.models import model_kind
    from transformers import LlamaForSequenceClassification

    base, tok = make_tiny_llama(seed=3, classifier=True)

    class MyClf(LlamaForSequenceClassification):
        pass

    model = MyClf(base.config).eval()
    model.load_state_dict(base.state_dict())
    ex = aieg_fast.load_model(model, tok)
    assert ex.adapter.kind == model_kind(model) == "classifier"
    torch.testing.assert_close(ex.attribute(TEXT, method="saliency", target=1).scores,
                               aieg_fast.load_model(base, tok).attribute(TEXT, method="saliency", target=1).scores)


def test_unsupported_family_message_names_the_model_type_and_how_to_add_one():
    """transformers builds a plain LlamaForCausalLM for some other model_types (exaone, internlm3):
    the refusal names the model_type refused (not the class, which LLaMA's adapter serves), lists
    the supported families by model_type (not every class) and points to register_adapter."""
    from transformers import LlamaConfig, LlamaForCausalLM

    class OtherConfig(LlamaConfig):
        model_type = "exaone-like"

    base, tok = make_tiny_llama(seed=6)
    model = LlamaForCausalLM(OtherConfig(**{k: v for k, v in base.config.to_dict().items() if k != "model_type"})).eval()
    with pytest.raises(ValueError) as err:
        aieg_fast.load_model(model, tok)
    msg = str(err.value)
    assert msg.startswith("model_type 'exaone-like' (class 'LlamaForCausalLM') is not supported"), msg
    assert "'LlamaForCausalLM' is served only for model_type 'llama'" in msg
    assert "Supported model_types: gpt2, llama," in msg and "qwen3_moe" in msg and "Qwen3MoeForCausalLM" not in msg
    assert "register_adapter(model_type, adapter)" in msg and "Adding a model family" in msg
    assert len(msg) < 700, len(msg)
    # a config alone (load_model of a saved folder) is refused by its model_type the same way
    with pytest.raises(ValueError, match=r"^model_type 'exaone-like' is not supported\. Supported model_types: gpt2, llama,.*"
                                         r"register_adapter"):
        adapter_class(model.config)


@pytest.mark.parametrize("classifier", [False, True])
def test_F_is_the_model_logit_with_a_lora_adapter_on_the_output_head(classifier):
    """A peft LoRA layer on the LM head (or the classification head) adds to the head's weight
    rows: F reads the head's output, not its weight rows (they gave the base head's logit, and the
    completeness check, measured against that F, flagged nothing). Contrast targets too."""
    peft = pytest.importorskip("peft")
    model, tok = make_tiny_llama(seed=3, classifier=classifier)
    head = "score" if classifier else "lm_head"
    torch.manual_seed(1)
    cfg = peft.LoraConfig(r=4, lora_alpha=8, target_modules=[head], init_lora_weights=False)
    wrapped = peft.get_peft_model(model, cfg).eval()
    base = wrapped.get_base_model()
    ids = _ids(tok)
    with torch.no_grad():
        logits = base(ids).logits[0, -1] if not classifier else base(ids).logits[0]
    ex = aieg_fast.load_model(base, tok)
    t, c = int(logits.argmax()), int(logits.argmin())
    res = ex.attribute(input_ids=ids[0].tolist(), method="integrated_gradients", n_steps=8, target=t)
    assert res.info["F_input"] == pytest.approx(float(logits[t]), abs=1e-4)
    res = ex.attribute(input_ids=ids[0].tolist(), method="saliency", target=t, contrast_target=c)
    assert res.info["F_input"] == pytest.approx(float(logits[t] - logits[c]), abs=1e-4)
    with pytest.raises(ValueError, match=r"peft wrapper .*get_base_model\(\)"):
        aieg_fast.load_model(wrapped, tok)


@pytest.mark.parametrize("classifier", [False, True])
@pytest.mark.parametrize("change", ["forward_hook", "pre_hook", "instance_forward", "global_hook"])
def test_F_is_the_model_logit_with_a_hook_on_the_output_head(classifier, change):
    """A hook on the output head (or a forward set on the instance) changes the model's logits:
    F calls the head instead of reading its weight rows, which skipped the hook."""
    model, tok = make_tiny_llama(seed=3, classifier=classifier)
    head = model.score if classifier else model.lm_head
    if change == "forward_hook":
        handle = head.register_forward_hook(lambda m, i, o: o * 0.5)
    elif change == "pre_hook":
        handle = head.register_forward_pre_hook(lambda m, i: (i[0] * 0.5,))
    elif change == "global_hook":
        handle = torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: o * 0.5 if m is head else None)
    else:
        head.forward = lambda x, f=head.forward: f(x) * 0.5
    try:
        ids = _ids(tok)
        with torch.no_grad():
            logits = model(ids).logits[0, -1] if not classifier else model(ids).logits[0]
        ad = adapter_for(model)
        with torch.no_grad():
            h = ad.hidden_last(ad.embeddings(ids), None, None, None)
            for t in (0, int(logits.argmax())):
                torch.testing.assert_close(ad.target_scores(h, torch.tensor([t]), "logit")[0], logits[t], atol=1e-5, rtol=1e-5)
    finally:
        if change != "instance_forward":
            handle.remove()


@pytest.mark.parametrize("family", ["llama", "gemma", "gemma2", "gemma3_text"])
def test_F_is_the_model_logit_with_a_hook_on_the_embeddings(family):
    """A forward hook on the model's embedding module (a steering vector) runs as in the model's
    call: Gemma's adapter, which reads the table unscaled, skipped it."""
    from builders import family_specs

    model, tok = family_specs()[family].build()
    ad = adapter_for(model)
    torch.manual_seed(1)
    off = torch.randn(model.config.hidden_size)
    handle = model.get_input_embeddings().register_forward_hook(lambda m, i, o: o + off)
    try:
        ids = _ids(tok)
        with torch.no_grad():
            logits = model(ids).logits[0, -1]
            h = ad.hidden_last(ad.embeddings(ids), None, None, None)
            for t in (0, int(logits.argmax())):
                torch.testing.assert_close(ad.target_scores(h, torch.tensor([t]), "logit")[0], logits[t], atol=1e-5, rtol=1e-5)
    finally:
        handle.remove()


def test_a_torch_compile_wrapper_is_refused_with_what_to_pass():
    model, tok = make_tiny_llama(seed=3)
    with pytest.raises(ValueError, match=r"torch.compile wrapper \(OptimizedModule of LlamaForCausalLM\); pass the model "
                                         r"inside it, model._orig_mod \(load_model\(\.\.\., compile=True\)"):
        aieg_fast.load_model(torch.compile(model), tok)


def test_encoder_and_encoder_decoder_models_are_refused_as_not_decoder_only():
    from transformers import BertConfig, BertForSequenceClassification, T5Config, T5ForConditionalGeneration

    bert = BertForSequenceClassification(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                                    intermediate_size=32))
    t5 = T5ForConditionalGeneration(T5Config(vocab_size=50, d_model=16, d_ff=32, num_layers=1, num_heads=2, d_kv=8))
    for model, what in ((bert, r"'bert' \(class 'BertForSequenceClassification'\) is not supported: it is an encoder "),
                        (t5, r"'t5' \(class 'T5ForConditionalGeneration'\) is not supported: it is an encoder-decoder ")):
        with pytest.raises(ValueError, match=f"^model_type {what}model type; aieg_fast explains decoder-only language models$"):
            adapter_for(model)
    with pytest.raises(ValueError, match=r"^model_type 't5' is not supported: it is an encoder-decoder model type"):
        adapter_class(t5.config)


def test_gemma3_image_text_model_is_refused_and_its_text_model_explained():
    """Gemma3ForConditionalGeneration is refused with where its text model is; the README's
    Gemma3ForCausalLM around its modules gives its logits on text."""
    from transformers import Gemma3Config, Gemma3ForCausalLM, Gemma3ForConditionalGeneration

    text = dict(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                num_key_value_heads=1, head_dim=16)
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=28, patch_size=14)
    torch.manual_seed(0)
    mm = Gemma3ForConditionalGeneration(Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=4,
                                                     image_token_index=299, boi_token_index=297, eoi_token_index=298)).eval()
    with pytest.raises(ValueError, match=r"^model_type 'gemma3' \(class 'Gemma3ForConditionalGeneration'\) is not supported: "
                                         r"it is Gemma 3's image-text model; its text model, Gemma3ForCausalLM"):
        adapter_for(mm)
    with torch.device("meta"):
        lm = Gemma3ForCausalLM(mm.config.text_config)
    lm.model, lm.lm_head = mm.model.language_model, mm.lm_head
    ad = adapter_for(lm.eval())
    ids = torch.tensor([[2, 5, 7, 9, 11]])
    with torch.no_grad():
        logits = mm(ids).logits[0, -1]
        h = ad.hidden_last(ad.embeddings(ids), None, None, None)
        torch.testing.assert_close(ad.full_logits(h)[0], logits, atol=1e-5, rtol=1e-5)


def _saved(tmp_path, family, edit=None, **config):
    """A tiny model of ``family`` saved to ``tmp_path``, its config.json changed by ``edit``."""
    import json

    from builders import family_specs

    model, tok = family_specs()[family].build()
    for k, v in config.items():
        setattr(model.config, k, v)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    if edit is not None:
        path = tmp_path / "config.json"
        path.write_text(json.dumps(edit(json.loads(path.read_text()))))
    return str(tmp_path)


def _spy_loading(monkeypatch):
    """Record each from_pretrained of a model (weights loaded)."""
    import transformers

    calls = []
    for auto in (transformers.AutoModelForCausalLM, transformers.AutoModelForSequenceClassification):
        real = auto.from_pretrained.__func__
        monkeypatch.setattr(auto, "from_pretrained", classmethod(lambda c, *a, _r=real, **k: calls.append(c) or _r(c, *a, **k)))
    return calls


@pytest.mark.parametrize("family, setting", [("falcon", {"alibi": True}), ("gemma", {"use_bidirectional_attention": True})])
def test_a_refused_family_setting_is_refused_before_the_weights_load(tmp_path, monkeypatch, family, setting):
    path = _saved(tmp_path, family, **setting)
    calls = _spy_loading(monkeypatch)
    with pytest.raises(ValueError, match="ALiBi|use_bidirectional_attention=True is not causal"):
        aieg_fast.load_model(path)
    assert calls == []


NON_CAUSAL = "with config.is_causal=False is not causal: transformers builds a bidirectional attention mask"


@pytest.mark.parametrize("family", ["llama", "phi", "smollm3", "cohere2", "granite", "olmo3", "starcoder2"])
def test_a_config_made_bidirectional_by_is_causal_false_is_refused(tmp_path, monkeypatch, family):
    """config.is_causal = False (on the object or in config.json) makes transformers' mask
    functions bidirectional for every family using them: position 2's logits then change with the
    tokens after it, which no attribution here can explain (generated rows from one forward,
    cached prefixes, Grad-ELLM's causal λ). Refused for a model object and, from a folder,
    before the weights load."""
    from builders import family_specs

    model, tok = family_specs()[family].build()
    model.config.is_causal = False
    ids = torch.tensor([tok(TEXT)["input_ids"]])
    with torch.no_grad():  # the setting is live: the model reads later tokens
        assert not torch.allclose(model(ids).logits[0, 2], model(ids[:, :3]).logits[0, 2], atol=1e-5)
    with pytest.raises(ValueError, match=NON_CAUSAL):
        aieg_fast.load_model(model, tok)
    path = _saved(tmp_path, family, is_causal=False)
    calls = _spy_loading(monkeypatch)
    with pytest.raises(ValueError, match=NON_CAUSAL):
        aieg_fast.load_model(path)
    assert calls == []
    model.config.is_causal = True  # a causal config with the attribute set is explained
    aieg_fast.load_model(model, tok)


def test_a_classification_head_the_adapter_does_not_serve_is_refused_by_name(tmp_path, monkeypatch):
    """Mamba has no classification head in transformers: a config naming one gets the package's
    refusal (the class, the adapter's classes), not transformers' list of every config class."""
    path = _saved(tmp_path, "mamba", edit=lambda c: dict(c, architectures=["MambaForSequenceClassification"]))
    calls = _spy_loading(monkeypatch)
    with pytest.raises(ValueError, match=r"^class 'MambaForSequenceClassification' is not supported for model_type "
                                         r"'mamba' \(its adapter MambaAdapter serves MambaForCausalLM"):
        aieg_fast.load_model(path)
    assert calls == []


def test_a_model_type_transformers_does_not_know_is_named(tmp_path, monkeypatch):
    """A folder whose config.json has a model_type the installed transformers lacks: for a family
    with an adapter, the message says to upgrade transformers; for another, the registry's refusal
    (supported model_types); not "could not be loaded from the hub"."""
    from transformers.models.auto import configuration_auto

    path = _saved(tmp_path, "olmo2")
    monkeypatch.delitem(configuration_auto.CONFIG_MAPPING_NAMES, "olmo2")
    with pytest.raises(ValueError, match=r"model_type 'olmo2': aieg_fast has an adapter for it, but the installed "
                                         r"transformers \S+ does not know that model type: upgrade transformers"):
        aieg_fast.load_model(path)
    _saved(tmp_path, "olmo2", edit=lambda c: dict(c, model_type="olmo9"))
    with pytest.raises(ValueError, match=r"^model_type 'olmo9' is not supported\. Supported model_types: "):
        aieg_fast.load_model(path)


def test_a_registered_model_type_transformers_does_not_know(tmp_path):
    """A family the user registered whose config class transformers lacks: the message says to
    upgrade transformers without calling the adapter's check_config on a stand-in config (a
    check reading another field crashed with AttributeError); with custom code (auto_map)
    upgrading would not help, so transformers' own reason is given."""
    class Strict(LlamaAdapter):
        architectures = ("LlamaForCausalLM",)

        @classmethod
        def check_config(cls, config):
            if config.rope_scaling is not None:
                raise ValueError("no rope scaling")

    register_adapter("strictllama", Strict)
    try:
        path = _saved(tmp_path, "llama", edit=lambda c: dict(c, model_type="strictllama"))
        with pytest.raises(ValueError, match=r"model_type 'strictllama': aieg_fast has an adapter for it, .*upgrade "
                                             r"transformers, or for a family of your own register its classes with "
                                             r"transformers first \(AutoConfig.register.* \(ValueError: "):
            aieg_fast.load_model(path)
        _saved(tmp_path, "llama", edit=lambda c: dict(c, model_type="strictllama", auto_map={"AutoConfig": "x.Config"}))
        with pytest.raises(ValueError, match="could not be loaded from the hub") as err:
            aieg_fast.load_model(path)
        assert "upgrade" not in str(err.value)
    finally:
        unregister_adapter("strictllama")
    # custom code of a family without an adapter: the registry's refusal, not transformers' reason
    _saved(tmp_path, "llama", edit=lambda c: dict(c, model_type="mymodel", auto_map={"AutoConfig": "x.Config"}))
    with pytest.raises(ValueError, match=r"^model_type 'mymodel' is not supported\. Supported model_types: "):
        aieg_fast.load_model(path)
