"""The evaluate driver (aieg_fast.eval.runner): resume, settings, method variants, k sweep,
hard-only runs, classifiers and shards, on the tiny random models."""
from __future__ import annotations

import json
import math

import pytest
import torch

from aieg_fast import eval as E
from aieg_fast.datasets import load_dataset
from aieg_fast.eval import metrics as M
from aieg_fast.eval import runner
from aieg_fast.methods.registry import parse_method_spec, split_method_specs


def test_evaluate_resume(tiny_gpt2, tmp_path, monkeypatch, capsys):
    calls = []
    orig = runner.evaluate_example

    def counting(ex, settings, eid, *args, **kw):
        calls.append(eid)
        return orig(ex, settings, eid, *args, **kw)

    monkeypatch.setattr(runner, "evaluate_example", counting)
    # the tiny tokenizer has no single-token " negative"/" positive": two token ids stand in
    kw = dict(dataset="sst2-sample", methods="integrated_gradients,saliency,random", out_dir=tmp_path, n_steps=4,
              n_samples=1, pis=(0.5,), progress=False, plot=False, labels=(10, 11),
              template="{text} :", max_tokens=20)
    r1 = E.evaluate(tiny_gpt2, n=2, **kw)
    assert r1["computed"] == 2 and calls == ["sst2-sample:0", "sst2-sample:1"]
    r2 = E.evaluate(tiny_gpt2, n=4, **kw)
    assert r2["computed"] == 2 and r2["skipped"] == 2
    assert calls[2:] == ["sst2-sample:2", "sst2-sample:3"]
    lines = (tmp_path / "records.jsonl").read_text().strip().splitlines()
    assert len(lines) == 4
    recs = [json.loads(l) for l in lines]
    assert [r["id"] for r in recs] == [f"sst2-sample:{i}" for i in range(4)]
    assert set(recs[0]["methods"]) == {"integrated_gradients", "saliency", "random"}
    assert "uniform" in recs[0]["controls"]
    # summary files: one row per (method, metric) plus the uniform control's π rows
    csv_text = (tmp_path / "summary.csv").read_text()
    assert "saliency,comprehensiveness" in csv_text and "uniform,pi_soft_nc_auc" in csv_text
    assert "| saliency |" in (tmp_path / "summary.md").read_text()
    # every line names the machine that computed it, and the summary counts them
    from aieg_fast.runs.machine import machine_tag

    assert {r["machine"] for r in recs} == {machine_tag()}
    assert f"Computed on: 4 record(s) on {machine_tag()!r}." in (tmp_path / "summary.md").read_text()
    # a cut last line (interrupt while writing) is ignored and recomputed
    with open(tmp_path / "records.jsonl", "a") as fh:
        fh.write('{"id": "sst2-sample:4", "meth')
    r3 = E.evaluate(tiny_gpt2, n=5, **kw)
    assert r3["computed"] == 1
    # ... and its new record is kept: before, it was appended to the cut line and lost with it,
    # so every rerun computed it again while reporting success
    assert "sst2-sample:4" in E.read_records(tmp_path / "records.jsonl")
    assert all(json.loads(l) for l in (tmp_path / "records.jsonl").read_text().splitlines())
    assert (tmp_path / "records.jsonl.torn").read_text() == '{"id": "sst2-sample:4", "meth\n'
    capsys.readouterr()
    assert E.evaluate(tiny_gpt2, n=5, **kw)["computed"] == 0
    assert "note:" not in capsys.readouterr().err
    # a rerun of fewer methods and examples summarises its own selection and says what the records hold besides
    r4 = E.evaluate(tiny_gpt2, n=2, **dict(kw, methods="saliency"))
    assert r4["computed"] == 0 and {r["method"] for r in r4["rows"]} <= {"saliency", "uniform"}
    assert ("note: the summary covers this run's 1 method(s) and 2 example(s); the records also hold the method(s) "
            "['integrated_gradients', 'random'] and 3 other example(s)") in capsys.readouterr().err
    # other settings in the same folder are refused
    with pytest.raises(ValueError, match="out_dir"):
        E.evaluate(tiny_gpt2, n=2, **dict(kw, n_samples=2))


def test_evaluate_takes_over_a_folder_without_results(tiny_gpt2, tmp_path, capsys):
    """A run stopped after it wrote its settings and before its first record leaves a folder
    holding only config.json and methods.json: a rerun with other settings runs there (said on
    stderr) instead of being refused for results that do not exist."""
    kw = dict(dataset="sst2-sample", methods="saliency", out_dir=tmp_path, n_steps=4, n_samples=1, pis=(0.5,),
              progress=False, plot=False, labels=(10, 11), template="{text} :", max_tokens=20)
    E.evaluate(tiny_gpt2, n=1, **kw)
    for p in tmp_path.iterdir():
        if p.name not in ("config.json", "methods.json"):
            p.unlink()
    capsys.readouterr()
    assert E.evaluate(tiny_gpt2, n=1, **dict(kw, n_samples=2))["computed"] == 1
    assert "wrote no results" in capsys.readouterr().err
    assert json.loads((tmp_path / "config.json").read_text())["n_samples"] == 2
    # with a record there, other settings are refused again; a default left out of config.json
    # is said as such (it was "None recorded")
    with pytest.raises(ValueError, match="other settings"):
        E.evaluate(tiny_gpt2, n=1, **kw)
    with pytest.raises(ValueError, match=r"metrics: its default \(not written\) recorded, 'hard' now"):
        E.evaluate(tiny_gpt2, n=1, **dict(kw, n_samples=2, metrics="hard"))
    # the other way round the new default is None, which is said ("'hard' recorded, None now" alone)
    hard = tmp_path.with_name(tmp_path.name + "_hard")
    E.evaluate(tiny_gpt2, n=1, **dict(kw, out_dir=hard, metrics="hard"))
    with pytest.raises(ValueError, match=r"metrics: 'hard' recorded, None now\); use another out_dir; metrics None means 'all', the default"):
        E.evaluate(tiny_gpt2, n=1, **dict(kw, out_dir=hard))
    # records without config.json: their settings are unknown, so the folder is refused
    (tmp_path / "config.json").unlink()
    with pytest.raises(ValueError, match=r"holds results \(records.jsonl.*\) but no config.json"):
        E.evaluate(tiny_gpt2, n=1, **kw)


def test_evaluate_bad_arguments(tiny_gpt2, tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="dataset"):
        E.evaluate(tiny_gpt2, dataset="mnist", out_dir=tmp_path, progress=False)
    with pytest.raises(ValueError, match="methods"):
        E.evaluate(tiny_gpt2, methods="nope", out_dir=tmp_path, progress=False)
    with pytest.raises(ValueError, match="methods: 'random:seed=3': the control 'random' takes no options"):  # was "unknown name(s)"
        E.evaluate(tiny_gpt2, methods="saliency,random:seed=3", out_dir=tmp_path, progress=False)
    with pytest.raises(ValueError, match="n must"):
        E.evaluate(tiny_gpt2, n=0, out_dir=tmp_path, progress=False)
    with pytest.raises(ValueError, match="max_tokens"):
        E.evaluate(tiny_gpt2, max_tokens=0, out_dir=tmp_path, progress=False)
    monkeypatch.delenv("AIEG_FAST_DATA", raising=False)
    with pytest.raises(FileNotFoundError, match="data-dir"):
        load_dataset("sst2-dev", data_dir=tmp_path / "missing")


def test_parse_method_spec():
    assert parse_method_spec("aieg") == ("aieg", {})
    assert parse_method_spec("aieg:ef_mode=none:n_pilot=4:adaptive=false") == (
        "aieg", {"ef_mode": "none", "n_pilot": 4, "adaptive": False})
    with pytest.raises(ValueError, match="NAME=VALUE"):
        parse_method_spec("aieg:ef_mode")
    with pytest.raises(ValueError, match="empty"):
        parse_method_spec(":ef_mode=none")


def test_a_list_of_specs_splits_outside_json_values():
    """``--methods aieg:attn_layers=[0,1],saliency`` was split at every comma ("unknown name(s)
    ['1]']"): a list or a quoted string with commas could not be an option of a listed method."""
    text = 'aieg:attn_layers=[0, 1],heta:components="gate,information" , saliency,,x:d=[[0,1],[2]]'
    assert split_method_specs(text) == ["aieg:attn_layers=[0, 1]", 'heta:components="gate,information"', "saliency",
                                        "x:d=[[0,1],[2]]"]
    assert split_method_specs("x:l=[0,1]],y,z") == ["x:l=[0,1]]", "y", "z"]  # a stray "]" closes nothing
    assert [parse_method_spec(s)[1] for s in split_method_specs(text)[:2]] == [{"attn_layers": [0, 1]},
                                                                               {"components": "gate,information"}]
    assert split_method_specs(r'a:s="x\",y",b') == [r'a:s="x\",y"', "b"]  # an escaped quote stays inside
    assert split_method_specs("a:l=[0,1,b") == ["a:l=[0,1,b"]  # unbalanced: one spec, refused by its option check
    with pytest.raises(ValueError, match=r"unknown name\(s\) \[\"information'\"\].*double quotes"):  # single quotes split
        E.evaluate("some-model", methods="heta:components='gate,information'", out_dir="unused")
    # a list (a --config file's) is one spec per item, stripped as the text's are
    from aieg_fast.eval.run_checks import check_methods
    assert check_methods([" saliency", "heta:components=gate,information "], "saliency")[0] == [
        "saliency", "heta:components=gate,information"]


def test_evaluate_takes_list_and_comma_values_in_its_method_list(tiny_gpt2, tmp_path):
    methods = 'aieg:attn_layers=[0,1]:n_pilot=4,heta:components="gate,information":gate_layers=1,saliency'
    res = E.evaluate(tiny_gpt2, dataset="sst2-sample", methods=methods, n=1, out_dir=tmp_path, n_steps=4, progress=False,
                     plot=False, labels=(10, 11), template="{text} :", max_tokens=20, metrics="hard")
    assert res["computed"] == 1
    got = json.loads((tmp_path / "records.jsonl").read_text().splitlines()[0])["methods"]
    assert set(got) == {"aieg:attn_layers=[0,1]:n_pilot=4", 'heta:components="gate,information":gate_layers=1', "saliency"}


def test_evaluate_variants_sweep_hard_only(tiny_gpt2, tmp_path):
    """A method spec with options runs that variant; the k sweep is stored and summarised."""
    variant = "aieg:ef_mode=none:posnorm=none"
    kw = dict(dataset="sst2-sample", methods=f"integrated_gradients,{variant},random", out_dir=tmp_path, n_steps=4,
              progress=False, labels=(10, 11), template="{text} :", max_tokens=20, metrics="hard",
              topk_sweep=(0.1, 0.2, 0.5))
    res = E.evaluate(tiny_gpt2, n=3, **kw)
    assert res["computed"] == 3 and res["plot"] is None
    text = (tmp_path / "records.jsonl").read_text()
    recs = [json.loads(l, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c} in records")) for l in text.splitlines()]
    r0 = recs[0]
    assert set(r0["methods"]) == {"integrated_gradients", variant, "random"}
    # the variant's scores are those of the method called with the options
    # (evaluate explains the label log-probability its metrics score: target_fn="auto" → label_logprob)
    lab = dict(target_fn="label_logprob", label_set=[10, 11])
    a = tiny_gpt2.attribute(r0["text"], method="aieg", target=r0["target"], template="{text} :", n_steps=4,
                            ef_mode="none", posnorm="none", **lab)
    assert r0["methods"][variant]["scores"] == pytest.approx(a.scores.tolist(), rel=1e-5, abs=1e-7)
    logit = tiny_gpt2.attribute(r0["text"], method="aieg", target=r0["target"], template="{text} :", n_steps=4,
                                ef_mode="none", posnorm="none")
    assert r0["methods"][variant]["scores"] != pytest.approx(logit.scores.tolist(), rel=1e-3)
    assert json.loads((tmp_path / "config.json").read_text())["target_fn"] == "label_logprob"
    ref = tiny_gpt2.attribute(r0["text"], method="aieg", target=r0["target"], template="{text} :", n_steps=4, **lab)
    assert r0["methods"][variant]["scores"] != pytest.approx(ref.scores.tolist(), rel=1e-3)
    # hard-only: no soft metrics, no uniform control; the sweep entry at the main k equals the main metrics
    m = r0["methods"]["integrated_gradients"]
    assert "soft_nc" not in m and "pi_soft_nc_auc" not in m and "uniform" not in r0["controls"]
    assert set(m["topk_sweep"]) == {"0.1", "0.2", "0.5"}
    assert all(list(h) == [*M.HARD_METRICS, "k"] for h in m["topk_sweep"].values())  # was a set's order (hash seed)
    assert m["topk_sweep"]["0.2"]["comprehensiveness"] == m["comprehensiveness"]
    assert m["topk_sweep"]["0.5"]["k"] >= m["topk_sweep"]["0.1"]["k"]
    # a sweep value equals a direct hard-metric call at that k (label words: the default for
    # label tasks; the same tie seed as recorded)
    b = tiny_gpt2.attribute(r0["text"], method="integrated_gradients", target=r0["target"], template="{text} :", n_steps=4, **lab)
    ctx = M.prepare(tiny_gpt2, b, label_ids=(10, 11), seed=0, instance_id=r0["id"])
    assert ctx.prob_space == "labels" and r0["tie_seed"] == ctx.tie_seed
    h = M.hard_metrics(tiny_gpt2, b, 0.5, ctx=ctx)
    assert m["topk_sweep"]["0.5"]["log_odds"] == pytest.approx(h["log_odds"], rel=1e-5, abs=1e-7)
    md = (tmp_path / "summary.md").read_text()
    assert "Top-k sweep" in md and f"| {variant} |" in md and "soft_nc" not in md
    rows = (tmp_path / "summary_topk.csv").read_text().splitlines()
    assert len(rows) == 1 + 3 * 3 * 3  # header + methods × k × metrics
    with pytest.raises(ValueError, match="topk"):
        E.evaluate(tiny_gpt2, n=1, **dict(kw, out_dir=tmp_path / "b", topk_sweep=(0.0,)))
    with pytest.raises(ValueError, match="metrics"):
        E.evaluate(tiny_gpt2, n=1, **dict(kw, out_dir=tmp_path / "c", metrics="soft"))
    # paired tests against another method (e.g. the full AIEG for an ablation table)
    res2 = E.evaluate(tiny_gpt2, n=3, **dict(kw, reference=variant))
    assert res2["computed"] == 0
    assert f"paired test against {variant}" in res2["summary_md"]
    rows = {(r["method"], r["metric"]): r for r in res2["rows"]}
    assert rows[("integrated_gradients", "log_odds")]["reference"] == variant
    assert math.isnan(rows[(variant, "log_odds")]["p_vs_reference"])
    with pytest.raises(ValueError, match="reference"):
        E.evaluate(tiny_gpt2, n=1, **dict(kw, reference="saliency"))
    with pytest.raises(ValueError, match="unknown option"):
        E.evaluate(tiny_gpt2, n=1, **dict(kw, out_dir=tmp_path / "e", methods="aieg:ef_mod=none"))


def test_evaluate_classifier_defaults(tiny_gpt2_clf, tmp_path):
    """A classification head: no prompt, classes 0/1 as labels, class probability as p."""
    res = E.evaluate(tiny_gpt2_clf, dataset="sst2-sample", n=2, methods="saliency,random", out_dir=tmp_path, n_steps=2,
                     n_samples=1, pis=(0.5,), progress=False, plot=False, max_tokens=20)
    assert res["computed"] == 2
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["template"] is None and cfg["labels"] == [0, 1]
    r = json.loads((tmp_path / "records.jsonl").read_text().splitlines()[0])
    with torch.no_grad():
        ids = tiny_gpt2_clf.encode(r["text"])[0]
        probs = torch.softmax(tiny_gpt2_clf.model(torch.tensor([ids])).logits[0].double(), -1)
    assert r["label_probs"] == pytest.approx(probs.tolist(), rel=1e-5)
    assert r["target"] == int(probs.argmax()) and r["p"] == pytest.approx(float(probs.max()), rel=1e-4)


def test_evaluate_shards_merge(tiny_gpt2, tmp_path):
    """Two shards (start=…) concatenated give the records and summary of one run."""
    kw = dict(dataset="sst2-sample", methods="saliency,random", n_steps=2, n_samples=1, pis=(0.5,), progress=False,
              plot=False, labels=(10, 11), template="{text} :", max_tokens=20)
    E.evaluate(tiny_gpt2, n=2, out_dir=tmp_path / "a", **kw)
    rb = E.evaluate(tiny_gpt2, n=4, start=2, out_dir=tmp_path / "b", **kw)
    assert rb["computed"] == 2 and rb["skipped"] == 0
    ids_b = [json.loads(l)["id"] for l in (tmp_path / "b" / "records.jsonl").read_text().splitlines()]
    assert ids_b == ["sst2-sample:2", "sst2-sample:3"]
    with open(tmp_path / "a" / "records.jsonl", "a") as fh:
        fh.write((tmp_path / "b" / "records.jsonl").read_text())
    merged = E.evaluate(tiny_gpt2, n=4, out_dir=tmp_path / "a", **kw)
    assert merged["computed"] == 0
    whole = E.evaluate(tiny_gpt2, n=4, out_dir=tmp_path / "c", **kw)
    key = lambda rows: {(r["method"], r["metric"]): (r["n"], r["mean"]) for r in rows}  # noqa: E731
    assert key(merged["rows"]).keys() == key(whole["rows"]).keys()
    for (m, k), (n, mean) in key(whole["rows"]).items():
        n2, mean2 = key(merged["rows"])[(m, k)]
        assert n2 == n and (mean2 == pytest.approx(mean, rel=1e-6, abs=1e-9) or (math.isnan(mean) and math.isnan(mean2)))
    with pytest.raises(ValueError, match="start"):
        E.evaluate(tiny_gpt2, n=2, start=2, out_dir=tmp_path / "d", **kw)


def test_evaluate_input_errors_before_work(tiny_gpt2, tmp_path):
    """Bad --start / --out / --topk-sweep / duplicate options fail with the argument named."""
    kw = dict(dataset="sst2-sample", methods="saliency", n_steps=2, progress=False, labels=(10, 11), template="{text} :")
    with pytest.raises(ValueError, match="start must be below the number of examples"):
        E.evaluate(tiny_gpt2, n=100, start=30, out_dir=tmp_path / "a", **kw)  # the sample has 24
    afile = tmp_path / "file.txt"
    afile.write_text("x")
    with pytest.raises(ValueError, match="out_dir"):
        E.evaluate(tiny_gpt2, n=1, out_dir=afile / "sub", **kw)
    with pytest.raises(ValueError, match="topk_sweep"):
        E.evaluate(tiny_gpt2, n=1, out_dir=tmp_path / "b", topk_sweep=(0.1, 1.5), **kw)
    with pytest.raises(ValueError, match="n_steps"):
        E.evaluate(tiny_gpt2, n=1, out_dir=tmp_path / "c", **dict(kw, n_steps=0))
    with pytest.raises(ValueError, match="twice"):
        parse_method_spec("aieg:attn_layers=none:attn_layers=last")
    with pytest.raises(ValueError, match="methods: 'aieg:ef_mode=bogus'"):
        E.evaluate(tiny_gpt2, n=1, out_dir=tmp_path / "d", **dict(kw, methods="aieg:ef_mode=bogus"))


def test_evaluate_defaults_soft_maps_ties_prob_space(tiny_gpt2, tmp_path):
    """Both soft maps are reported (the min-max one in columns ending in _minmax), each record
    holds its tie seed, p is over the label words, and all three are recorded settings, so a
    folder written before them is refused rather than mixed."""
    kw = dict(dataset="sst2-sample", methods="saliency,random", n_steps=2, n_samples=1, pis=(0.5,), progress=False,
              plot=False, labels=(10, 11), template="{text} :", max_tokens=20)
    res = E.evaluate(tiny_gpt2, n=2, out_dir=tmp_path / "a", **kw)
    cfg = json.loads((tmp_path / "a" / "config.json").read_text())
    assert cfg["prob_space"] == "labels" and cfg["soft_maps"] == ["relu", "minmax"] and cfg["ties"] == "random"
    recs = [json.loads(l) for l in (tmp_path / "a" / "records.jsonl").read_text().splitlines()]
    for r in recs:
        assert r["tie_seed"] == M.prepare(tiny_gpt2, random_attr(tiny_gpt2, r), label_ids=(10, 11), seed=0,
                                          instance_id=r["id"]).tie_seed
        m = r["methods"]["saliency"]
        assert {"soft_nc", "soft_nc_minmax", "pi_soft_ns_auc", "pi_soft_ns_auc_minmax"} <= set(m)
        assert "soft_nc_abs" not in m
        # p is the probability over the two label words: p(10) + p(11) = 1 on the full input
        assert sum(r["label_probs"]) == pytest.approx(1.0) and r["p"] == pytest.approx(max(r["label_probs"]), rel=1e-4)
    assert len({r["tie_seed"] for r in recs}) == 2
    rows = {(r["method"], r["metric"]): r for r in res["rows"]}
    assert ("saliency", "soft_nc_minmax") in rows and ("saliency", "soft_nc_abs") not in rows
    u, um = rows[("uniform", "pi_soft_nc_auc")], rows[("uniform", "pi_soft_nc_auc_minmax")]
    assert um["n"] == u["n"] >= 1 and um["mean"] == u["mean"]  # the control ignores the map
    md = res["summary_md"]
    assert "soft_nc_minmax ↑" in md and "`_minmax`" in md and "tie_seed" in md and "prob_space = labels" in md
    assert "Prompt template: '{text} :' (None: the text alone); label words: [10, 11]; every method explains F = label_logprob." in md
    # one map only: its columns alone
    only = E.evaluate(tiny_gpt2, n=1, out_dir=tmp_path / "b", soft_maps="minmax", **kw)
    assert {r["metric"] for r in only["rows"]} == {"log_odds", "comprehensiveness", "sufficiency", "soft_nc_minmax",
                                                   "soft_ns_minmax", "pi_soft_nc_auc_minmax", "pi_soft_ns_auc_minmax"}
    # a folder whose config predates soft maps and random ties is refused, naming them
    cfg_old = {k: v for k, v in cfg.items() if k not in ("soft_maps", "ties")}
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "config.json").write_text(json.dumps(cfg_old))
    (tmp_path / "c" / "records.jsonl").write_text((tmp_path / "a" / "records.jsonl").read_text())
    with pytest.raises(ValueError, match=r"soft_maps: its default \(not written\) recorded, \[.relu., .minmax.\] now; ties: "):
        E.evaluate(tiny_gpt2, n=1, out_dir=tmp_path / "c", **kw)
    with pytest.raises(ValueError, match="soft_maps"):
        E.evaluate(tiny_gpt2, n=1, out_dir=tmp_path / "d", soft_maps="relu,clip", **kw)
    with pytest.raises(ValueError, match="ties"):
        E.evaluate(tiny_gpt2, n=1, out_dir=tmp_path / "e", ties="last", **kw)
    with pytest.raises(ValueError, match="prob_space"):
        E.evaluate(tiny_gpt2, n=1, out_dir=tmp_path / "f", prob_space="words", **kw)


def random_attr(ex, rec):
    """An attribution of the record's text and target (only its input and target matter here)."""
    return ex.attribute(rec["text"], method="saliency", target=rec["target"], template="{text} :")


def test_evaluate_target_fn_choices(tiny_gpt2, tmp_path):
    """target_fn="logit" explains the raw label logit (the papers' F) and is recorded; a bad
    value is refused before any work."""
    kw = dict(dataset="sst2-sample", methods="saliency", n_steps=4, progress=False, labels=(10, 11), template="{text} :",
              max_tokens=20, metrics="hard")
    E.evaluate(tiny_gpt2, n=1, out_dir=tmp_path / "l", target_fn="logit", **kw)
    r0 = json.loads((tmp_path / "l" / "records.jsonl").read_text().splitlines()[0])
    a = tiny_gpt2.attribute(r0["text"], method="saliency", target=r0["target"], template="{text} :")
    assert r0["methods"]["saliency"]["scores"] == pytest.approx(a.scores.tolist(), rel=1e-5, abs=1e-7)
    assert json.loads((tmp_path / "l" / "config.json").read_text())["target_fn"] == "logit"
    assert E.eval_target_fn("auto", "vocab") == "logprob" and E.eval_target_fn("auto", "labels") == "label_logprob"
    E.evaluate(tiny_gpt2, n=1, out_dir=tmp_path / "c", target_fn="contrast", **kw)
    r0 = json.loads((tmp_path / "c" / "records.jsonl").read_text().splitlines()[0])
    assert {r0["target"], r0["contrast"]} == {10, 11}
    a = tiny_gpt2.attribute(r0["text"], method="saliency", target=r0["target"], contrast_target=r0["contrast"], template="{text} :")
    assert r0["methods"]["saliency"]["scores"] == pytest.approx(a.scores.tolist(), rel=1e-5, abs=1e-7)
    with pytest.raises(ValueError, match="target_fn must be one of"):
        E.evaluate(tiny_gpt2, n=1, out_dir=tmp_path / "bad", target_fn="logits", **kw)
    assert not (tmp_path / "bad").exists()


def test_evaluate_runs_heta_and_occlusion(tiny_gpt2, tmp_path):
    """The issue-20 methods are accepted by ``evaluate --methods``, with options, and scored."""
    methods = "heta:n_probes=2,occlusion:measure=kl,occlusion,random"
    out = E.evaluate(tiny_gpt2, dataset="sst2-sample", n=2, methods=methods, out_dir=tmp_path, n_steps=4, n_samples=1,
                     pis=(0.5,), progress=False, plot=False, labels=(10, 11), template="{text} :", max_tokens=12,
                     reference="occlusion")
    assert out["computed"] == 2
    recs = [json.loads(l) for l in (tmp_path / "records.jsonl").read_text().strip().splitlines()]
    for r in recs:
        assert set(r["methods"]) == set(methods.split(","))
        for m in ("heta:n_probes=2", "occlusion:measure=kl", "occlusion"):
            assert math.isfinite(r["methods"][m]["comprehensiveness"])
    assert "| heta:n_probes=2 |" in (tmp_path / "summary.md").read_text()


def test_method_spec_carries_the_baseline(tiny_gpt2, tmp_path):
    """``integrated_gradients:baseline=zero`` in an evaluation attributes from that baseline (the
    recorded scores equal a direct call's), next to the default baseline; a method without a
    baseline refuses the key, naming it."""
    res = E.evaluate(tiny_gpt2, dataset="sst2-sample", n=1, methods="integrated_gradients,integrated_gradients:baseline=zero",
                     out_dir=tmp_path, n_steps=4, metrics="hard", target_fn="logit", labels=(10, 11), template="{text} :",
                     max_tokens=20, progress=False, plot=False)
    assert res["computed"] == 1
    r = json.loads((tmp_path / "records.jsonl").read_text().splitlines()[0])
    kw = dict(method="integrated_gradients", target=r["target"], template="{text} :", n_steps=4)
    zero = tiny_gpt2.attribute(r["text"], baseline="zero", **kw)
    ref = tiny_gpt2.attribute(r["text"], **kw)
    got = r["methods"]["integrated_gradients:baseline=zero"]["scores"]
    assert got == pytest.approx(zero.scores.tolist(), rel=1e-5, abs=1e-7)
    assert r["methods"]["integrated_gradients"]["scores"] == pytest.approx(ref.scores.tolist(), rel=1e-5, abs=1e-7)
    assert max(abs(a - b) for a, b in zip(got, ref.scores.tolist())) > 1e-4
    with pytest.raises(ValueError, match=r"'saliency:baseline=zero' has unknown option\(s\) \['baseline'\]"):
        E.evaluate(tiny_gpt2, n=1, methods="saliency:baseline=zero", out_dir=tmp_path / "b", labels=(10, 11), progress=False, plot=False)


def test_a_method_with_non_finite_scores_scores_nan_and_the_run_goes_on(tiny_gpt2, tmp_path, monkeypatch, capsys):
    """A method whose scores hold NaN on an example (IG from a zero baseline on some models) gets
    NaN metrics flagged non_finite there; the other methods and the control are scored, and the
    summary leaves the NaN out. Before, the whole run stopped at that example, on every rerun."""
    orig = type(tiny_gpt2).attribute

    def nan_ig(self, *args, **kw):
        a = orig(self, *args, **kw)
        if kw.get("method") == "integrated_gradients":
            a.scores = torch.full_like(a.scores, float("nan"))
        return a

    monkeypatch.setattr(type(tiny_gpt2), "attribute", nan_ig)
    res = E.evaluate(tiny_gpt2, dataset="sst2-sample", n=2, methods="integrated_gradients,saliency", out_dir=tmp_path,
                     n_steps=2, n_samples=1, pis=(0.5,), progress=False, plot=False, labels=(10, 11), template="{text} :",
                     max_tokens=20, topk_sweep=(0.1, 0.2))
    assert res["computed"] == 2
    assert "'integrated_gradients' gave scores that are not finite on sst2-sample:0" in capsys.readouterr().err
    for r in E.read_records(tmp_path / "records.jsonl").values():
        ig, sal = r["methods"]["integrated_gradients"], r["methods"]["saliency"]
        assert ig["non_finite"] is True and "non_finite" not in sal
        assert set(ig) - {"non_finite"} == set(sal) - {"non_finite"}  # the same keys as a scored method
        assert ig["log_odds"] is None and ig["pi_soft_nc_auc_minmax"] is None and ig["topk_sweep"]["0.1"]["k"] is None
        assert math.isfinite(sal["log_odds"]) and math.isfinite(sal["sufficiency"])
        assert "uniform" in r["controls"]
    rows = {(r["method"], r["metric"]): r for r in res["rows"]}
    assert rows[("saliency", "log_odds")]["n"] == 2
    assert ("integrated_gradients", "log_odds") not in rows or rows[("integrated_gradients", "log_odds")]["n"] == 0


def test_a_numpy_seed_is_recorded_as_an_int(tiny_gpt2, tmp_path):
    """evaluate(seed=np.int64(1)) passed the seed check and then crashed writing config.json
    ("Object of type int64 is not JSON serializable"); the run's files hold the number, and a
    rerun with the int resumes it."""
    import json

    import numpy as np

    kw = dict(dataset="sst2-sample", methods="saliency,random", out_dir=tmp_path, n_steps=4, n_samples=1, pis=(0.5,),
              progress=False, plot=False, labels=(10, 11), template="{text} :", max_tokens=20)
    assert E.evaluate(tiny_gpt2, n=1, seed=np.int64(1), **kw)["computed"] == 1
    assert json.loads((tmp_path / "config.json").read_text())["seed"] == 1
    assert E.evaluate(tiny_gpt2, n=1, seed=1, **kw)["computed"] == 0
