"""A NumPy integer (``np.int64(3)``, an item of ``np.arange``) or a one-element integer tensor is
taken wherever the public API takes an int, as ``Explainer.attribute`` already did: the views,
``predict``, ``top_tokens``, ``continuation_ids`` and the three evaluation runners refused
``np.int64`` ("must be a positive int, got np.int64(2)"), and the runners' files must hold plain
JSON numbers."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest
import torch

from aieg_fast.display import show
from aieg_fast.display.terminal import Heatmap
from aieg_fast.eval import evaluate, evaluate_longra
from aieg_fast.eval.generation_runner import evaluate_generation
from aieg_fast.generation import continuation_ids

INTS = [np.int64, np.int32, lambda v: torch.tensor(v)]


@pytest.fixture(scope="module")
def attr(tiny_gpt2):
    return tiny_gpt2.attribute("the movie is good", method="saliency", target=5)


@pytest.mark.parametrize("as_int", INTS)
def test_views_predict_and_top_tokens_take_numpy_ints(tiny_gpt2, attr, as_int):
    assert tiny_gpt2.predict("the movie is", top_k=as_int(2)) == tiny_gpt2.predict("the movie is", top_k=2)
    assert attr.top_tokens(as_int(2)) == attr.top_tokens(2)
    gen = tiny_gpt2.attribute_generation("the movie", method="saliency", max_new_tokens=2)
    assert gen.top_tokens(2, row=as_int(1)) == gen.top_tokens(2, row=1)
    for a in (attr, gen):
        shown = [io.StringIO(), io.StringIO()]
        show(a, file=shown[0], width=as_int(60), top_k=as_int(2))
        show(a, file=shown[1], width=60, top_k=2)
        assert shown[0].getvalue() == shown[1].getvalue()
    assert Heatmap(gen, top_k=as_int(3)).top_k == 3 and type(Heatmap(gen, top_k=as_int(3)).top_k) is int
    assert continuation_ids(tiny_gpt2, "the movie", as_int(2), generated_text=" is good and fun") == \
        continuation_ids(tiny_gpt2, "the movie", 2, generated_text=" is good and fun")


def test_plot_wrap_takes_a_numpy_int(attr):
    pytest.importorskip("matplotlib")
    from aieg_fast.display import plot

    assert len(plot(attr, words=False, wrap=np.int64(2)).figure.axes) >= 1


def test_numpy_floats_and_bools_are_still_refused(tiny_gpt2, attr):
    with pytest.raises(ValueError, match=r"top_k must be a positive int, got np.float64\(2.0\)"):
        tiny_gpt2.predict("the movie is", top_k=np.float64(2.0))
    with pytest.raises(ValueError, match="k must be a positive int"):
        attr.top_tokens(np.bool_(True))
    with pytest.raises(ValueError, match="width must be"):
        show(attr, file=io.StringIO(), width=np.float32(60))


def _ints_only(path):
    """Every number in the JSON file ``path`` as json wrote it (json refuses NumPy ints)."""
    return json.loads(path.read_text())


def test_evaluate_takes_numpy_ints_and_records_plain_ones(tiny_gpt2, tmp_path):
    kw = dict(dataset="sst2-sample", methods="saliency,random", progress=False, plot=False, labels=(10, 11),
              template="{text} :", pis=(0.5,))
    i = np.int64
    res = evaluate(tiny_gpt2, n=i(3), start=i(1), n_steps=i(4), n_samples=i(1), max_tokens=i(20), seed=i(1),
                   internal_batch_size=i(8), out_dir=tmp_path / "np", **kw)
    assert res["computed"] == 2
    config = _ints_only(tmp_path / "np" / "config.json")
    assert (config["n_steps"], config["n_samples"], config["max_tokens"], config["seed"]) == (4, 1, 20, 1)
    again = evaluate(tiny_gpt2, n=3, start=1, n_steps=4, n_samples=1, max_tokens=20, seed=1, internal_batch_size=8,
                     out_dir=tmp_path / "np", **kw)
    assert again["computed"] == 0  # the same settings: the run resumes


def test_evaluate_generation_takes_numpy_ints(tiny_gpt2, tmp_path):
    prompts = [{"id": "a", "prompt": "the movie is good"}, {"id": "b", "prompt": "the actors are great"}]
    i = np.int64
    res = evaluate_generation(tiny_gpt2, prompts, methods="saliency", n=i(1), n_new_tokens=i(2), n_steps=i(4),
                              n_samples=i(1), seed=i(0), pis=(0.5,), progress=False, plot=False, out_dir=tmp_path / "g")
    assert res["computed"] == 1
    config = _ints_only(tmp_path / "g" / "config.json")
    assert config["n_new_tokens"] == 2 and config["n_steps"] == 4
    assert evaluate_generation(tiny_gpt2, prompts, methods="saliency", n=1, n_new_tokens=2, n_steps=4, n_samples=1,
                               seed=0, pis=(0.5,), progress=False, plot=False, out_dir=tmp_path / "g")["computed"] == 0


def test_evaluate_longra_takes_numpy_ints(tiny_gpt2, tmp_path):
    i = np.int64
    evaluate_longra(tiny_gpt2, dataset="longra", methods="saliency", n=i(2), n_steps=i(4), seed=i(0),
                    ks=[i(1), i(3)], progress=False, plot=False, out_dir=tmp_path / "l")
    config = _ints_only(tmp_path / "l" / "config.json")
    assert config["ks"] == [1, 3] and config["n_steps"] == 4 and config["seed"] == 0


@pytest.mark.parametrize("as_int", INTS)
def test_load_model_quadrature_and_generated_ids_take_numpy_ints(tiny_gpt2, as_int):
    """``load_model``'s ``ref_token_id``, ``quadrature``'s ``n_steps`` and a list of NumPy token ids
    as ``generated_text`` (``list(np.array(ids))``) were refused."""
    import aieg_fast

    assert aieg_fast.load_model(tiny_gpt2.model, tiny_gpt2.tokenizer, ref_token_id=as_int(3)).ref_token_id == 3
    assert all(torch.equal(a, b) for a, b in zip(aieg_fast.quadrature("gausslegendre", as_int(4)), aieg_fast.quadrature("gausslegendre", 4)))
    assert continuation_ids(tiny_gpt2, "the movie", generated_text=[as_int(5), as_int(6)]) == [5, 6]
    gen = tiny_gpt2.attribute_generation("the movie", method="saliency", generated_text=[as_int(5), as_int(6)])
    assert gen.info["generated_ids"] == [5, 6] and all(type(i) is int for i in gen.info["generated_ids"])


@pytest.mark.parametrize("as_int", INTS)
def test_eval_helpers_take_numpy_ints(tiny_gpt2, attr, as_int, tmp_path):
    """The public helpers of aieg_fast.eval refused NumPy ints (``step_attribution``'s ``t``,
    ``bootstrap_ci``'s ``n_boot`` and seed, ``longra_metrics``' ``relative_pos``, the soft metrics'
    ``n_samples``, ``top_k_positions``' ``tie_seed``, ``load_prompts``' ``limit`` of a file)."""
    from aieg_fast import eval as E

    gen = tiny_gpt2.attribute_generation("the movie", method="saliency", max_new_tokens=2)
    assert torch.equal(E.step_attribution(gen, as_int(1)).scores, E.step_attribution(gen, 1).scores)
    assert E.bootstrap_ci([1.0, 2.0, 4.0], n_boot=as_int(50), seed=as_int(1)) == E.bootstrap_ci([1.0, 2.0, 4.0], n_boot=50, seed=1)
    assert E.mean_ci([1.0, 2.0, 4.0], seed=as_int(1)) == E.mean_ci([1.0, 2.0, 4.0], seed=1)
    s = torch.tensor([0.1, 0.5, 0.2, 0.3])
    assert E.longra_metrics(s, [True] * 4, as_int(1), [as_int(2)], ks=[as_int(1)]) == E.longra_metrics(s, [True] * 4, 1, [2], ks=[1])
    assert torch.equal(E.top_k_positions(s, torch.ones(4, dtype=torch.bool), 0.5, tie_seed=as_int(3)),
                       E.top_k_positions(s, torch.ones(4, dtype=torch.bool), 0.5, tie_seed=3))
    for f, kw in ((E.soft_metrics, {}), (E.pi_soft, {"pis": (0.5,)})):  # repr: NaN where degenerate
        assert repr(f(tiny_gpt2, attr, n_samples=as_int(2), **kw)) == repr(f(tiny_gpt2, attr, n_samples=2, **kw))
    assert E.evaluate_attribution(tiny_gpt2, attr, pis=(0.5,), n_samples=as_int(2)).keys() == \
        E.evaluate_attribution(tiny_gpt2, attr, pis=(0.5,), n_samples=2).keys()
    f = tmp_path / "p.jsonl"
    f.write_text('{"text": "the movie"}\n{"text": "a film"}\n')
    assert len(E.load_prompts(str(f), limit=as_int(1))[1]) == 1


def test_longra_ks_as_an_array_and_generation_chunks_as_numpy_ints(tiny_gpt2, tmp_path):
    """``ks=np.arange(1, 4)`` was refused ("ks must be a positive int, got np.int64(1)"), and no
    test passed ``evaluate_generation`` a NumPy ``internal_batch_size``."""
    evaluate_longra(tiny_gpt2, dataset="longra", methods="saliency", n=1, n_steps=4, ks=np.arange(1, 4), progress=False,
                    plot=False, out_dir=tmp_path / "l")
    assert _ints_only(tmp_path / "l" / "config.json")["ks"] == [1, 2, 3]
    res = evaluate_generation(tiny_gpt2, [{"id": "a", "prompt": "the movie is good"}], methods="integrated_gradients", n_new_tokens=1,
                              n_steps=4, n_samples=1, internal_batch_size=np.int64(2), pis=(0.5,), progress=False, plot=False,
                              out_dir=tmp_path / "g")
    assert res["computed"] == 1


def test_training_entry_points_take_numpy_ints(tmp_path):
    """train_nano and train_sentiment refused NumPy counts and seeds ("epochs must be a positive
    int, got np.int64(1)"); here they pass those checks and stop at the next refusal, before any
    data or model is read."""
    from aieg_fast.training.nano import train_nano
    from aieg_fast.training.sentiment import train_sentiment

    i = np.int64
    with pytest.raises(ValueError, match="arch must be one of"):
        train_nano(out_dir=tmp_path / "n", epochs=i(1), batch_size=i(2), max_length=i(8), n_positions=i(16), max_train=i(4),
                   seed=i(0), arch="no-such-arch")
    with pytest.raises(ValueError, match="task must be one of"):
        train_sentiment(task="no-such-task", out_dir=tmp_path / "s", epochs=i(1), n_train=i(4), batch_size=i(2), seed=i(0),
                        checkpoint_every=i(5), max_steps=i(3), n_dev=i(2), micro_batch_size=i(1))


def test_numpy_and_tensor_floats_taken_where_a_float_is(tiny_gpt2):
    """np.float32 / a one-element float tensor (from ``tensor.numpy()``) were refused by alpha_range,
    tolerance and topk ("must be (alpha0, 1) ..., got (np.float32(0.1), 1)") though check_number's
    settings took them; each now gives what the Python float it holds gives."""
    from aieg_fast.eval.checks import check_topk

    kw = dict(method="integrated_gradients", n_steps=4)
    want = tiny_gpt2.attribute("the movie is", alpha_range=(0.1, 1), **kw).scores  # the number typed, not float32's
    for start in (np.float32(0.1), torch.tensor(0.1, dtype=torch.float32)):
        assert torch.equal(tiny_gpt2.attribute("the movie is", alpha_range=(start, 1), **kw).scores, want)
    auto = dict(method="integrated_gradients", n_steps="auto", max_steps=8)
    got = tiny_gpt2.attribute("the movie is", tolerance=np.float32(0.5), **auto)
    assert torch.equal(got.scores, tiny_gpt2.attribute("the movie is", tolerance=float(np.float32(0.5)), **auto).scores)
    # recorded as the float it holds (as alpha_range is), not as the np.float32 / tensor given
    assert type(got.options["tolerance"]) is float and got.options["tolerance"] == float(np.float32(0.5))
    one = tiny_gpt2.attribute("the movie is", tolerance=torch.tensor(0.5), **auto)
    assert type(one.options["tolerance"]) is float
    assert check_topk(np.float32(0.25)) == 0.25 and type(check_topk(np.float32(0.25))) is float
    # float32's nearest value to 0.7 is 0.699999988: as a top-k fraction of 10 tokens it kept 6
    assert [check_topk(v) for v in (np.float32(0.7), np.float16(0.7), torch.tensor(0.7), torch.tensor(0.9, dtype=torch.float16))] \
        == [0.7, 0.7, 0.7, 0.9]
    assert check_topk(np.float64(0.7)) == 0.7 and check_topk(torch.tensor(0.7, dtype=torch.float64)) == 0.7
    for bad in (np.float32(1.5), np.bool_(True), torch.tensor([0.1, 0.2])):
        with pytest.raises(ValueError, match="topk must be a fraction"):
            check_topk(bad)


def test_arrays_of_layers_and_of_target_words(tiny_gpt2):
    """attn_layers=np.arange(2) crashed in AIEG's options ("The truth value of an array ... is
    ambiguous"); target / label_set as a NumPy array of words crashed in torch ("can't convert
    np.ndarray of type numpy.str_"). They are the lists they hold."""
    kw = dict(method="aieg", n_steps=4)
    want = tiny_gpt2.attribute("the movie is", attn_layers=[0, 1], **kw)
    got = tiny_gpt2.attribute("the movie is", attn_layers=np.arange(2), **kw)
    assert torch.equal(got.scores, want.scores) and got.options["attn_layers"] == [0, 1]
    texts, words = ["the movie is", "the film was"], [" good", " bad"]
    want = tiny_gpt2.attribute(texts, method="saliency", target=words)
    got = tiny_gpt2.attribute(texts, method="saliency", target=np.array(words))
    assert [r.target for r in got] == [r.target for r in want]
    assert all(torch.equal(g.scores, w.scores) for g, w in zip(got, want))
    one = tiny_gpt2.attribute("the movie is", method="saliency", target=" good", label_set=np.array(words),
                              target_fn="label_logprob")
    assert one.target == tiny_gpt2.attribute("the movie is", method="saliency", target=" good", label_set=words,
                                             target_fn="label_logprob").target


def test_names_of_other_calls_get_a_hint(tiny_gpt2):
    with pytest.raises(ValueError, match=r"contrast: did you mean contrast_target"):
        tiny_gpt2.attribute("the movie is", method="saliency", contrast=5)
    with pytest.raises(ValueError, match=r"labels: did you mean label_set"):
        tiny_gpt2.attribute("the movie is", method="saliency", labels=[" good", " bad"])


def test_longra_distractor_positions_of_other_libraries():
    """Tensor distractor positions indexed through a list of tensors (a torch deprecation
    warning: such a list is read as a multidimensional index); a float position reached torch."""
    import warnings

    from aieg_fast import eval as E

    s = torch.tensor([0.1, 0.5, 0.2, 0.3])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = E.longra_metrics(s, [True] * 4, 1, [torch.tensor(2), np.int64(3)], ks=[1])
    assert got == E.longra_metrics(s, [True] * 4, 1, [2, 3], ks=[1])
    for bad in ([1.5], [True]):
        with pytest.raises(ValueError, match=r"distractor_pos must be positions in \[0, 4\)"):
            E.longra_metrics(s, [True] * 4, 1, bad, ks=[1])


def test_pandas_and_numpy_columns_of_texts_and_words(tiny_gpt2):
    """ex.attribute(df["text"], target=df["word"]) was refused ("text must be a str or a list of
    str, got Series"); a column, or a NumPy array of texts, is the list it holds."""
    pd = pytest.importorskip("pandas")
    texts, words = ["the movie is", "the film was"], [" good", " bad"]
    want = tiny_gpt2.attribute(texts, method="saliency", target=words)
    for t, w in ((pd.Series(texts), pd.Series(words)), (np.array(texts), np.array(words)),
                 (pd.DataFrame({"t": texts})["t"], pd.Index(words))):
        got = tiny_gpt2.attribute(t, method="saliency", target=w)
        assert [r.target for r in got] == [r.target for r in want]
        assert all(torch.equal(g.scores, r.scores) for g, r in zip(got, want))
    one = tiny_gpt2.attribute("the movie is", method="saliency", target=" good", label_set=pd.Series(words),
                              target_fn="label_logprob")
    assert one.target == want[0].target
    with pytest.raises(TypeError, match=r"text\[1\] must be a str"):
        tiny_gpt2.attribute(pd.Series(["the movie", 3]), method="saliency")


def test_numpy_bools_are_the_bools_they_hold(tiny_gpt2, tmp_path):
    """np.bool_ (a mask's .any(), a DataFrame cell) was refused by every flag ("must be True or
    False, got np.False_"); it is taken as the bool it holds and recorded as one."""
    from aieg_fast import eval as E

    text = "the movie is good"
    res = tiny_gpt2.attribute(text, method="aieg", n_steps=4, adaptive=np.False_, progress=torch.tensor([0, 0]).bool().any())
    assert res.options["adaptive"] is False
    gen = tiny_gpt2.attribute_generation(text, generated_text=" and", method="saliency", interpolate_generated=np.True_,
                                         shared=np.True_)
    assert gen.options["interpolate_generated"] is True and gen.options["shared"] is True
    assert "aieg-fast" in res.to_html(words=np.False_, values=np.True_)
    run = E.evaluate(tiny_gpt2, methods="saliency", n=1, out_dir=tmp_path / "run", n_steps=4, n_samples=1, pis=(0.5,),
                     progress=np.False_, plot=np.False_, labels=(10, 11), template="{text} :", metrics="hard")
    assert run["computed"] == 1
