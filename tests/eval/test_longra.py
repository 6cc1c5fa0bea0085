"""LongRA's ground-truth check (aieg_fast.eval.longra): the span metrics on hand-built scores
whose answer is known, the token spans of the relative word and the distractor, the protocol's
filter, and a resumable run on the tiny model with its predictions scripted."""
from __future__ import annotations

import json
import math
import re

import matplotlib
import matplotlib.figure
import pytest

from aieg_fast import eval as E
from aieg_fast.eval import longra as L
from aieg_fast.eval.longra_report import summarise_longra
from aieg_fast.eval.report import run_title

PROMPT = "the movie is good . (a terrible story) . the film was"
REC = {"id": "t0", "index": 0, "prompt": PROMPT, "target": "great", "reference": " great", "relative": "good",
       "distractor": "(a terrible story) ."}


def test_metrics_on_hand_built_scores():
    # position 0 fixed (a BOS); the relative word at 2; the distractor at 3 and 4
    scores = [5.0, 0.9, 0.2, -0.5, 0.3, 0.0]
    attributable = [False, True, True, True, True, True]
    m = L.longra_metrics(scores, attributable, relative_pos=2, distractor_pos=[3, 4], ks=(1, 3, 5))
    # tokens scoring at least 0.2 besides it: 0.9 and 0.3 -> rank 3
    assert m["relative_rank"] == 3 and (m["relative_top1"], m["relative_top3"], m["relative_top5"]) == (0.0, 1.0, 1.0)
    # |scores| on the distractor over |scores| on the attributable tokens (the fixed 5.0 left out)
    assert m["distractor_mass"] == pytest.approx((0.5 + 0.3) / (0.9 + 0.2 + 0.5 + 0.3 + 0.0))
    best = L.longra_metrics([0, 1.0, 9.0, 0.1, 0.1, 0.1], attributable, 2, [3, 4], ks=(1,))
    assert best["relative_rank"] == 1 and best["relative_top1"] == 1.0
    flat = L.longra_metrics([0, 1, 1, 1, 1, 1], attributable, 2, [3, 4], ks=(1,))
    assert flat["relative_rank"] == 5 and flat["distractor_mass"] == pytest.approx(2 / 5)  # ties count against it
    assert math.isnan(L.longra_metrics([0.0] * 6, attributable, 2, [3], ks=(1,))["distractor_mass"])
    with pytest.raises(ValueError, match="relative_pos must be an attributable position"):
        L.longra_metrics(scores, attributable, 0, [3])
    with pytest.raises(ValueError, match=r"relative_pos must be an attributable position .* got True"):
        L.longra_metrics(scores, attributable, True, [3])
    with pytest.raises(ValueError, match=r"scores must be 1-D .* shape \(2, 3\)"):
        L.longra_metrics([[0.0, 1, 2], [3, 4, 5]], attributable, 2, [3])
    with pytest.raises(ValueError, match="distractor_pos must be positions"):
        L.longra_metrics(scores, attributable, 2, [9])


@pytest.mark.parametrize("scores", [[0, math.nan] * 3, [0, 5, math.nan, 3, 2, 1], [0, 5, 1, math.inf, 2, 1]])
def test_non_finite_scores_rank_nothing(scores, tmp_path):
    """NaN compares False with everything: it ranked the relative word first (top-1 = 1). A
    non-finite attributable score now gives NaN metrics flagged non_finite, which the summary
    leaves out of its n and mean."""
    attributable = [False, True, True, True, True, True]
    m = L.longra_metrics(scores, attributable, 2, [4, 5], ks=(1, 3))
    assert m["non_finite"] is True
    assert all(math.isnan(m[k]) for k in ("relative_rank", "relative_top1", "relative_top3", "distractor_mass"))
    # a fixed position's score is no mass and no rival, finite or not
    ok = L.longra_metrics([math.nan, 1.0, 9.0, 0.1, 0.1, 0.1], attributable, 2, [3, 4], ks=(1,))
    assert ok["relative_rank"] == 1 and ok["distractor_mass"] == pytest.approx(0.2 / 10.3) and "non_finite" not in ok
    good = {"methods": {"saliency": L.longra_metrics([0, 1.0, 9.0, 0.1, 0.1, 0.1], attributable, 2, [3, 4], ks=(1,))},
            "n_attributable": 5, "distractor_share": 0.4}
    bad = {"methods": {"saliency": m}, "n_attributable": 5, "distractor_share": 0.4}
    config = {"ks": [1], "model": "m", "dataset": "longra", "target_fn": "logit", "n_steps": 4, "seed": 0}
    res = summarise_longra(tmp_path, [good, bad], ["saliency"], config, "saliency", plot=False)
    top1 = next(r for r in res["rows"] if r["method"] == "saliency" and r["metric"] == "relative_top1")
    assert top1["n"] == 1 and top1["mean"] == 1.0


def test_spans_of_relative_word_and_distractor(tiny_gpt2):
    ids, fixed, full, offsets = tiny_gpt2.encode_with_offsets(PROMPT)
    pos = L.longra_spans(offsets, full, "good", REC["distractor"])
    assert len(pos["relative"]) == 1 and tiny_gpt2.token_texts([ids[pos["relative"][0]]]) == [" good"]
    d = pos["distractor"]
    assert d == list(range(d[0], d[-1] + 1))  # one contiguous run of tokens, covering the clause exactly
    assert tiny_gpt2.tokenizer.decode([ids[k] for k in d]).strip() == REC["distractor"]
    assert not any(PROMPT[o[0]:o[1]].strip() in ("the", "film", "was") for o in (offsets[k] for k in d))
    # the first whole-word occurrence before the distractor: "good" inside "goodness" is not it
    _, _, full2, off2 = tiny_gpt2.encode_with_offsets("goodness , good . (a story) . so")
    rel = L.longra_spans(off2, full2, "good", "(a story) .")["relative"]
    assert [full2[off2[k][0]:off2[k][1]].strip() for k in rel] == ["good"]
    with pytest.raises(ValueError, match="not in the prompt before its distractor"):
        L.longra_spans(offsets, full, "story", REC["distractor"])


def _scripted(ex, monkeypatch, answers):
    """Make ``ex.predict`` answer from ``answers``: text → the token string predicted."""
    def predict(text, template=None, top_k=5):
        word = answers(text)
        tid = ex.tokenizer.encode(word, add_special_tokens=False)[0]
        return [(word, tid, 0.9)]
    monkeypatch.setattr(ex, "predict", predict)


def test_filter_reasons(tiny_gpt2, monkeypatch):
    _scripted(tiny_gpt2, monkeypatch, lambda text: " great")
    kept = L.longra_filter(tiny_gpt2, REC)
    assert "skipped" not in kept and kept["target_id"] == tiny_gpt2.tokenizer.encode(" great")[0]
    assert sum(kept["attributable"]) == kept["n_tokens"]
    _scripted(tiny_gpt2, monkeypatch, lambda text: " great" if "(" in text else " bad")
    assert L.longra_filter(tiny_gpt2, REC)["filter"] == "wrong_without_distractor"
    _scripted(tiny_gpt2, monkeypatch, lambda text: " bad")
    assert L.longra_filter(tiny_gpt2, REC)["filter"] == "wrong_with_distractor"
    assert L.longra_filter(tiny_gpt2, dict(REC, target="positive", reference=" positive"))["filter"] == "target_not_one_token"
    bad_rel = dict(REC, prompt="a positive film . (a terrible story) . the film was", relative="positive")
    assert L.longra_filter(tiny_gpt2, bad_rel)["filter"] == "relative_not_one_token"


def test_run_resume_and_summary(tiny_gpt2, tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    rows = [dict(REC, id=f"t{i}") for i in range(3)]
    rows[2] = dict(rows[2], prompt=PROMPT.replace("the movie", "a film"))
    (data / "longra_full.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    _scripted(tiny_gpt2, monkeypatch, lambda text: " bad" if text.startswith("a film") else " great")
    kw = dict(dataset="longra", data_dir=data, n=3, out_dir=tmp_path / "run", progress=False, plot=True, n_steps=4, ks=(1, 2))
    titles = []
    savefig = matplotlib.figure.Figure.savefig
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig",
                        lambda fig, *a, **k: (titles.append(fig.axes[0].get_title()), savefig(fig, *a, **k))[1])
    res = E.evaluate_longra(tiny_gpt2, methods="saliency,random", **kw)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert titles == [run_title(config)] and res["summary_md"].startswith(f"# LongRA: {run_title(config)}\n")  # the plot names the run
    assert res["computed"] == 2 and res["kept"] == 2 and res["filtered"] == {"wrong_with_distractor": 1}
    recs = {r["id"]: r for r in map(json.loads, (tmp_path / "run" / "records.jsonl").read_text().splitlines())}
    assert recs["t2"]["filter"] == "wrong_with_distractor" and recs["t2"]["methods"] == {}
    a = tiny_gpt2.attribute(PROMPT, method="saliency", target=recs["t0"]["target_id"], target_fn="logprob")
    want = L.longra_metrics(a.scores, a.attributable, recs["t0"]["relative_pos"], recs["t0"]["distractor_pos"], (1, 2))
    got = recs["t0"]["methods"]["saliency"]
    assert {k: got[k] for k in want} == pytest.approx(want)
    md = res["summary_md"]
    assert "3 instances looked at; 2 kept by the filter" in md and "wrong_with_distractor: 1" in md
    assert "| saliency |" in md and "| uniform |" in md and "relative_top2 ↑" in md
    assert (tmp_path / "run" / "longra_topk.png").exists() and (tmp_path / "run" / "summary.csv").exists()
    again = E.evaluate_longra(tiny_gpt2, methods="saliency,random", **kw)
    assert again["computed"] == 0 and again["kept"] == 2
    more = E.evaluate_longra(tiny_gpt2, methods="saliency,random,input_x_gradient,recency", **kw)  # only the new ones are computed
    assert more["computed"] == 2 and "| input_x_gradient |" in more["summary_md"] and "| recency |" in more["summary_md"]
    tested = E.evaluate_longra(tiny_gpt2, methods="saliency,random", **dict(kw, out_dir=tmp_path / "tested"), reference="saliency")
    assert re.search(r"paired test against saliency p < 0\.05 / p < 0\.01 \([^)]*each p uncorrected for "
                     r"the number of comparisons\)", tested["summary_md"])  # which test, and that the p-values stand alone
    # the recency control is scored on the instance's input like any method
    r = E.recency_attribution(a)
    want = L.longra_metrics(r.scores, r.attributable, recs["t0"]["relative_pos"], recs["t0"]["distractor_pos"], (1, 2))
    got = E.read_records(tmp_path / "run" / "records.jsonl")["t0"]["methods"]["recency"]
    assert {k: got[k] for k in want} == pytest.approx(want)
    with pytest.raises(ValueError, match="out_dir .* other settings"):
        E.evaluate_longra(tiny_gpt2, methods="saliency", **dict(kw, n_steps=5))
    with pytest.raises(ValueError, match="target_fn must be one of .* for LongRA, got 'contrast'"):
        E.evaluate_longra(tiny_gpt2, methods="saliency", target_fn="contrast", **kw)
    with pytest.raises(ValueError, match=r"dataset must be one of \['longra', 'longra-reagent'\], got 'boolq'"):
        E.evaluate_longra(tiny_gpt2, methods="saliency", **dict(kw, dataset="boolq"))


def test_cli_nothing_passes_the_filter(tiny_gpt2_dir, tmp_path, capsys):
    """When no instance passes the filter the summary gives the filter's own reasons (here: the
    prompts are longer than the tiny model's positions) and the command exits 1, as a run that
    evaluated nothing."""
    from aieg_fast import cli

    rc = cli.main(["evaluate", "--model", str(tiny_gpt2_dir), "--dataset", "longra", "--n", "2", "--methods", "saliency",
                   "--n-steps", "2", "--out", str(tmp_path / "o"), "--no-progress"])
    out = capsys.readouterr()
    assert rc == 1 and "error: no instance passed the filter" in out.err
    assert "No instance passed the filter (input: 2): the model refused the input" in out.out
    assert "does not predict" not in out.out


@pytest.mark.parametrize("kw, match", [
    (dict(seed=-1), r"seed must be an int >= 0, got -1"),
    (dict(seed="x"), r"seed must be an int >= 0, got 'x'"),
    (dict(n_steps=1), r"n_steps must be an int >= 2 \(path steps\), got 1"),
])
def test_bad_settings_refused_before_any_work(tiny_gpt2, tmp_path, monkeypatch, kw, match):
    """Checked with the other arguments: before the model is touched and before any folder
    or file is written (a negative seed failed in the bootstrap after every record was written)."""
    from aieg_fast.eval import runner

    monkeypatch.setattr(runner, "load_model", lambda *a, **k: (_ for _ in ()).throw(AssertionError("loaded")))
    with pytest.raises(ValueError, match=match):
        E.evaluate_longra("some-model", dataset="longra", methods="saliency", n=2, out_dir=tmp_path / "o", progress=False, **kw)
    assert not (tmp_path / "o").exists()


def test_refused_model_leaves_no_folder(tiny_gpt2_clf, tmp_path):
    with pytest.raises(ValueError, match="LongRA needs a causal language model"):
        E.evaluate_longra(tiny_gpt2_clf, dataset="longra", methods="saliency", n=2, out_dir=tmp_path / "o", progress=False)
    assert not (tmp_path / "o").exists()


def test_the_summary_counts_flagged_attributions(tmp_path):
    """LongRA records hold each method's signal_flags (completeness, ...) as the other runs' do,
    but its summary left out the line that counts them."""
    attributable = [False, True, True, True, True, True]
    metrics = L.longra_metrics([0, 1.0, 9.0, 0.1, 0.1, 0.1], attributable, 2, [3, 4], ks=(1,))
    rec = {"methods": {"integrated_gradients": dict(metrics, signal_flags=["completeness"]), "saliency": dict(metrics)},
           "n_attributable": 5, "distractor_share": 0.4}
    config = {"ks": [1], "model": "m", "dataset": "longra", "target_fn": "logit", "n_steps": 4, "seed": 0}
    res = summarise_longra(tmp_path, [rec, rec], ["integrated_gradients", "saliency"], config, "saliency", plot=False)
    assert "Attributions flagged (AttributionWarning; 'signal_flags' in records.jsonl): integrated_gradients: completeness × 2." \
        in res["summary_md"].splitlines()
    assert "Attributions flagged" not in summarise_longra(tmp_path, [dict(rec, methods={"saliency": metrics})], ["saliency"], config,
                                                          "saliency", plot=False)["summary_md"]
    # a rerun summarising fewer methods of the folder: the flags of a method left out are not counted
    only = summarise_longra(tmp_path, [rec, rec], ["saliency"], config, "saliency", plot=False)["summary_md"]
    assert "integrated_gradients" not in only and "Attributions flagged" not in only


def test_longra_metrics_names_bad_ks_and_takes_one_k():
    """ks=(0, "a") gave "'<=' not supported between int and str"; one k (an int) is the list of it."""
    with pytest.raises(ValueError, match=r"ks must be positive ints \(the k of relative_top<k>\), got \[0, 'a'\]"):
        L.longra_metrics([0, 1.0, 9.0, 0.1], [False, True, True, True], 2, [3], ks=(0, "a"))
    one = L.longra_metrics([0, 1.0, 9.0, 0.1], [False, True, True, True], 2, [3], ks=1)
    assert one["relative_top1"] == 1.0 and "relative_top3" not in one
