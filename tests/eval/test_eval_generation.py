"""Faithfulness of attributions of generated text, per step (aieg_fast.eval.generation_runner),
on the tiny random GPT-2: the step instance, resume by (example, method), teacher forcing,
the perturbed positions, the per-step summary, where the prompts come from, bad input, and the
command line."""
from __future__ import annotations

import json
import math

import pytest
import torch

from aieg_fast import cli
from aieg_fast.eval import generation_runner as G
from aieg_fast.eval import metrics as M
from aieg_fast.eval import read_records, step_attribution
from aieg_fast.generation import continuation_ids

PROMPTS = [{"id": "a", "prompt": "the movie is good", "reference": " and the actors are great"},
           {"id": "b", "prompt": "the actors are great and the movie", "references": [" is good", " is bad"]}]
FAST = dict(n_new_tokens=3, n_steps=4, n_samples=1, pis=(0.3, 0.7), progress=False, plot=False)


def _lines(out):
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("interpolate_generated", [True, False])
def test_step_is_the_next_token_instance_of_its_context(tiny_gpt2, interpolate_generated):
    """Step t of a generation result is the next-token attribution of prompt ⊕ y_<t with target
    y_t: same ids, scores, target and perturbed positions, hence the same metrics."""
    ex = tiny_gpt2
    gen = ex.attribute_generation("the movie is good", max_new_tokens=3, method="saliency", target_fn="logprob",
                                  interpolate_generated=interpolate_generated)
    Lp, ids = gen.prompt_length, gen.info["generated_ids"]
    p_ids, p_fixed = ex.encode("the movie is good")
    for t in range(len(ids)):
        v = step_attribution(gen, t)
        assert v.token_ids == p_ids + ids[:t] and v.target["id"] == ids[t]
        assert v.attributable == [not f for f in p_fixed] + [interpolate_generated] * t
        torch.testing.assert_close(v.scores, torch.nan_to_num(gen.scores[t, : Lp + t], nan=0.0))
        # the same instance attributed on its own: the metrics agree
        own = ex.attribute(input_ids=p_ids + ids[:t], method="saliency", target=ids[t], target_fn="logprob")
        if interpolate_generated:
            torch.testing.assert_close(own.scores, v.scores, atol=1e-5, rtol=1e-4)
            own_m = M.evaluate_attribution(ex, own, n_samples=1, pis=(0.5,), prob_space="vocab", seed=3, instance_id="x")
            step_m = M.evaluate_attribution(ex, v, n_samples=1, pis=(0.5,), prob_space="vocab", seed=3, instance_id="x")
            for k in ("comprehensiveness", "sufficiency", "log_odds", "soft_nc", "pi_soft_ns_auc"):
                assert (math.isnan(own_m[k]) and math.isnan(step_m[k])) or own_m[k] == pytest.approx(step_m[k], abs=1e-6), k
    with pytest.raises(ValueError, match="t must be a step"):
        step_attribution(gen, len(ids))
    with pytest.raises(ValueError, match="generation Attribution"):
        step_attribution(ex.attribute("the movie", method="saliency"), 0)


def test_evaluate_generation_records_resume_and_summary(tiny_gpt2, tmp_path, monkeypatch):
    ex, out = tiny_gpt2, tmp_path / "g"
    calls = []
    orig = type(ex).attribute_generation

    def counting(self, prompt, *a, **kw):
        calls.append((prompt, kw["method"]))
        return orig(self, prompt, *a, **kw)

    monkeypatch.setattr(type(ex), "attribute_generation", counting)
    res = G.evaluate_generation(ex, PROMPTS, methods="saliency,random", out_dir=out, topk_sweep=(0.1, 0.5), **FAST)
    assert res["computed"] == 2 and len(calls) == 2
    lines = _lines(out)
    # per example: the example with its steps, one line per method, the uniform control
    assert [(l["id"], sorted(l.get("methods", {})), sorted(l.get("controls", {}))) for l in lines] == [
        ("a", [], []), ("a", ["saliency"], []), ("a", ["random"], []), ("a", [], ["uniform"]),
        ("b", [], []), ("b", ["saliency"], []), ("b", ["random"], []), ("b", [], ["uniform"])]
    recs = read_records(out / "records.jsonl")
    for r in recs.values():
        assert r["generated_ids"] == continuation_ids(ex, r["prompt"], 3) and r["n_generated"] == len(r["steps"]) == 3
        for m in ("saliency", "random"):
            e = r["methods"][m]
            assert [s["step"] for s in e["steps"]] == [0, 1, 2]
            # the example's value is the mean over its steps (soft metrics: over the non-degenerate ones)
            assert e["comprehensiveness"] == pytest.approx(sum(s["comprehensiveness"] for s in e["steps"]) / 3)
            soft = [s["soft_nc"] for s, st in zip(e["steps"], r["steps"]) if not st["degenerate"]]
            assert (math.isnan(e["soft_nc"]) if not soft else e["soft_nc"] == pytest.approx(sum(soft) / len(soft)))
            assert e["n_degenerate_steps"] == sum(st["degenerate"] for st in r["steps"])
        # the attributed matrix: one row per step, NaN (null) where not attributed
        assert len(r["methods"]["saliency"]["scores"]) == 3 and r["methods"]["saliency"]["scores"][0][-1] is None
    rows = {(r["method"], r["metric"]): r for r in res["rows"]}
    assert rows[("saliency", "comprehensiveness")]["mean"] == pytest.approx(
        sum(r["methods"]["saliency"]["comprehensiveness"] for r in recs.values()) / 2)
    md = (out / "summary.md").read_text()
    assert "Faithfulness of generated text" in md and "6 generated steps" in md and "per generated step t" in md
    steps_csv = (out / "summary_steps.csv").read_text().splitlines()
    first = next(l for l in steps_csv if l.startswith("saliency,1,comprehensiveness,"))
    want = sum(r["methods"]["saliency"]["steps"][1]["comprehensiveness"] for r in recs.values()) / 2
    assert float(first.split(",")[5]) == pytest.approx(want)
    # rerun with one more method: only it is attributed, on the continuations already recorded
    calls.clear()
    res2 = G.evaluate_generation(ex, PROMPTS, methods="saliency,random,input_x_gradient", out_dir=out, topk_sweep=(0.1, 0.5), **FAST)
    assert res2["computed"] == 2 and calls == [("the movie is good", "input_x_gradient"), (PROMPTS[1]["prompt"], "input_x_gradient")]
    assert len(_lines(out)) == 10
    assert G.evaluate_generation(ex, PROMPTS, methods="saliency", out_dir=out, topk_sweep=(0.1, 0.5), **FAST)["computed"] == 0
    # another prompt under a recorded id, or other settings, are refused
    with pytest.raises(ValueError, match="another prompt"):
        G.evaluate_generation(ex, [dict(PROMPTS[0], prompt="a new prompt")], methods="saliency", out_dir=out,
                              topk_sweep=(0.1, 0.5), **FAST)
    with pytest.raises(ValueError, match="out_dir"):
        G.evaluate_generation(ex, PROMPTS, methods="saliency", out_dir=out, **dict(FAST, n_new_tokens=2))
    # an id whose first line (prompt and continuation) was taken out by hand: named as such, not as another prompt
    kept = [l for l in (out / "records.jsonl").read_text().splitlines() if not ('"id": "a"' in l and "generated_ids" in l)]
    (out / "records.jsonl").write_text("\n".join(kept) + "\n")
    with pytest.raises(ValueError, match=r"method lines for id 'a' without its first line"):
        G.evaluate_generation(ex, PROMPTS, methods="saliency", out_dir=out, topk_sweep=(0.1, 0.5), **FAST)


def test_teacher_forced_prompt_only_and_refused_input(tiny_gpt2, tmp_path):
    """Teacher forcing explains the reference's first n tokens (only those must fit the model);
    --prompt-only perturbs the prompt at every step; a prompt too long for the model is recorded
    as skipped and the run goes on."""
    ex = tiny_gpt2
    long = {"id": "long", "prompt": " ".join(["good"] * 80), "reference": " yes"}
    long_ref = {"id": "long_ref", "prompt": "the movie is", "reference": " good" * 80}
    res = G.evaluate_generation(ex, PROMPTS + [long, long_ref], methods="saliency", out_dir=tmp_path, teacher_forced=True,
                                interpolate_generated=False, **dict(FAST, n_new_tokens=2))
    recs = read_records(tmp_path / "records.jsonl")
    assert res["failed"] == 1 and res["failures"][0]["id"] == "long" and "positions" in recs["long"]["skipped"]
    assert recs["long_ref"]["generated_ids"] == ex.target_ids(long_ref["reference"], context=long_ref["prompt"])[:2]
    assert "- long: " in res["summary_md"]
    for row in PROMPTS:
        r = recs[row["id"]]
        ref = row.get("reference") or row["references"][0]
        assert r["teacher_forced"] and r["generated_ids"] == ex.target_ids(ref, context=row["prompt"])[:2]
        n_prompt = sum(not f for f in ex.encode(row["prompt"])[1])
        assert [s["n_attributable"] for s in r["steps"]] == [n_prompt, n_prompt]
        assert all(v is None for v in r["methods"]["saliency"]["scores"][1][-2:])  # generated prefix not attributed
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["task"] == "generation" and cfg["teacher_forced"] and not cfg["interpolate_generated"] and cfg["n_new_tokens"] == 2
    # a changed reference is refused: a new method would explain the recorded one
    changed = [dict(PROMPTS[0], reference=" and the plot is thin")]
    with pytest.raises(ValueError, match=r"id 'a' with another reference \(' and the actors are great'\)"):
        G.evaluate_generation(ex, changed, methods="saliency,random", out_dir=tmp_path, teacher_forced=True,
                              interpolate_generated=False, **dict(FAST, n_new_tokens=2))


def test_mean_over_steps():
    nan = float("nan")
    steps = [{"step": 0, "comprehensiveness": 0.2, "soft_nc": nan, "k": 1, "degenerate": True, "pi_soft_nc_curve": [nan, nan],
              "topk_sweep": {"0.1": {"log_odds": -1.0}}},
             {"step": 1, "comprehensiveness": 0.4, "soft_nc": 0.5, "k": 2, "degenerate": False, "pi_soft_nc_curve": [0.6, 0.2],
              "topk_sweep": {"0.1": {"log_odds": -3.0}}}]
    out = G.mean_over_steps(steps)
    assert out == {"comprehensiveness": pytest.approx(0.3), "soft_nc": 0.5, "k": 1.5, "degenerate": False, "n_degenerate_steps": 1,
                   "pi_soft_nc_curve": [0.6, 0.2], "topk_sweep": {"0.1": {"log_odds": -2.0}}}
    assert math.isnan(G.mean_over_steps(steps[:1])["soft_nc"]) and G.mean_over_steps(steps[:1])["degenerate"]


@pytest.mark.parametrize("records, kw, match", [
    ([], {}, "records holds no prompt"),
    ("not a list", {}, "records must be a generation dataset"),
    ([{"id": "x"}], {}, r"records\[0\] needs a non-empty string 'prompt'"),
    ([{"id": "x", "prompt": "a"}, {"id": "x", "prompt": "b"}], {},
     r"dataset 'records': records\[1\] repeats the id 'x' of records\[0\] \(rows counted from 0; a file's ids come from id_field"),
    ([{"prompt": "a"}], {"teacher_forced": True}, r"teacher_forced needs a reference.*records\[0\] \(records:0\)"),
    (PROMPTS, {"n_new_tokens": 0}, "n_new_tokens must be a positive int"),
    (PROMPTS, {"n_new_tokens": None}, "n_new_tokens must be a positive int for greedy decoding"),
    (PROMPTS, {"target_fn": "contrast"}, "target_fn must be one of"),
    (PROMPTS, {"template": "no field"}, "template must contain"),
    (PROMPTS, {"template": "C: {ctx} P: {text}"}, r"template of a generation run takes \{text\} \(the prompt\) only, got the field\(s\) \['ctx'\]"),
    (PROMPTS, {"methods": "saliency:bogus=1"}, "unknown option"),
    (PROMPTS, {"n_samples": 0}, "n_samples must be a positive int"),
])
def test_bad_input_refused_before_work(tiny_gpt2, tmp_path, records, kw, match):
    with pytest.raises(ValueError, match=match):
        G.evaluate_generation(tiny_gpt2, records, out_dir=tmp_path / "o", **{**dict(methods="saliency", progress=False), **kw})
    assert not (tmp_path / "o").exists()


def test_classifier_refused(tiny_gpt2_clf, tmp_path):
    with pytest.raises(ValueError, match="causal language model"):
        G.evaluate_generation(tiny_gpt2_clf, PROMPTS, methods="saliency", out_dir=tmp_path, progress=False)
    assert not (tmp_path / "config.json").exists()


def test_prompts_from_the_registry_a_file_or_a_list(tiny_gpt2, tmp_path):
    """The generation datasets of the registry (WikiText is shipped), a user's file read by
    user_dataset with the prompt and reference columns named, a list of dicts; a dataset of
    another task is refused naming the runner to use."""
    name, rows = G.load_prompts("wikitext")
    assert name == "wikitext" and len(rows) == 22 and rows[0]["id"] == "wikitext_txt_line_0" and rows[0]["reference"] is None
    f = tmp_path / "mine.csv"
    f.write_text("q,a\nthe movie is,good\nthe actors are,great\n", encoding="utf-8")
    name, rows = G.load_prompts(f, text_field="q", target_field="a")
    assert name == "mine.csv" and [(r["id"], r["prompt"], r["reference"]) for r in rows] == [
        ("mine.csv:0", "the movie is", "good"), ("mine.csv:1", "the actors are", "great")]
    assert G.load_prompts(PROMPTS) == ("records", PROMPTS)
    with pytest.raises(ValueError, match="'sst2-dev' is a sentiment dataset; .*use aieg_fast.eval.evaluate$"):
        G.load_prompts("sst2-dev")
    with pytest.raises(ValueError, match="has no field 'text'"):
        G.load_prompts(f)
    res = G.evaluate_generation(tiny_gpt2, "wikitext", n=1, methods="saliency", out_dir=tmp_path / "w", metrics="hard",
                                **dict(FAST, n_new_tokens=2))
    # the tiny model's 64 positions cannot take WikiText's first prompt: recorded as refused, the run goes on
    assert res["failed"] == 1 and "64 positions" in res["failures"][0]["reason"] and "on wikitext" in res["summary_md"]
    assert res["chance"] is None


def test_cli_evaluate_prompt_file(tiny_gpt2_dir, tmp_path, capsys):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("\n".join(json.dumps(p) for p in PROMPTS) + "\n", encoding="utf-8")
    out = tmp_path / "o"
    args = ["evaluate", "--dataset", str(prompts), "--text-field", "prompt", "--id-field", "id", "--model", str(tiny_gpt2_dir),
            "--methods", "saliency,random",
            "--n-new-tokens", "2", "--out", str(out), "--no-progress", "--device", "cpu",
            "--prompt-only", "--metrics", "hard"]
    assert cli.main(args) == 0
    said = capsys.readouterr().out
    assert "Faithfulness of generated text" in said and "| saliency |" in said and "computed 2 example(s)" in said
    assert json.loads((out / "config.json").read_text())["interpolate_generated"] is False
    assert cli.main(args + ["--max-tokens", "5"]) == 2
    assert "--max-tokens: not for generated text (prompts are not cut)" in capsys.readouterr().err
    assert cli.main(args + ["--start", "1", "--labels", " a", " b"]) == 2  # each with its own reason (--start was told of p)
    assert ("--start: not for generated text (use --n for the number of prompts); --labels: not for generated text "
            "(the generated tokens are the targets)") in capsys.readouterr().err
    assert json.loads((out / "config.json").read_text())["dataset"] == "prompts.jsonl"
    # rerun without --prompt-only: refused, and the recorded setting is named by its option too
    assert cli.main(args[:-3] + ["--metrics", "hard"]) == 2
    err = capsys.readouterr().err
    assert "holds results with other settings (interpolate_generated: " in err
    assert "use another --out [options: interpolate_generated is --prompt-only (interpolate_generated is True without it)]" in err


def test_option_names_added_to_library_messages():
    from aieg_fast.cli.evaluate import as_options

    assert as_options("n_steps: 3 recorded, 4 now") == "n_steps: 3 recorded, 4 now"
    assert as_options("method_options differ") == "method_options differ [options: method_options is --methods name:option=value or --method-options]"
    assert as_options("the --out_dir-like word my_out_dir") == "the --out_dir-like word my_out_dir"  # whole names only


def test_a_step_with_non_finite_scores_scores_nan(tiny_gpt2, tmp_path, monkeypatch, capsys):
    """A method whose generation scores hold NaN at one step: that step's metrics are NaN and
    counted in n_non_finite_steps, the example's value is the mean of the other steps, and the
    run goes on (before, the whole run stopped there, on every rerun)."""
    orig = type(tiny_gpt2).attribute_generation

    def nan_step(self, *args, **kw):
        res = orig(self, *args, **kw)
        res.scores[1] = float("nan")
        return res

    monkeypatch.setattr(type(tiny_gpt2), "attribute_generation", nan_step)
    res = G.evaluate_generation(tiny_gpt2, PROMPTS[:1], methods="saliency", out_dir=tmp_path, **FAST)
    assert res["computed"] == 1 and "'saliency' gave scores that are not finite on a at step(s) [1]" in capsys.readouterr().err
    e = read_records(tmp_path / "records.jsonl")["a"]["methods"]["saliency"]
    assert e["n_non_finite_steps"] == 1 and "non_finite" not in e
    assert e["steps"][1]["non_finite"] is True and e["steps"][1]["comprehensiveness"] is None
    assert e["comprehensiveness"] == pytest.approx((e["steps"][0]["comprehensiveness"] + e["steps"][2]["comprehensiveness"]) / 2)


def test_a_list_of_dicts_is_read_with_the_fields_given():
    """Given text_field (or target_field / id_field), a list of dicts is read with them, as a
    file or a Dataset is (the fields were ignored: the 'prompt' column was evaluated)."""
    rows = [{"prompt": "ignored", "question": "why is the sky blue", "answer": "light", "key": "k1"}]
    name, got = G.load_prompts(rows, text_field="question", target_field="answer", id_field="key")
    assert [(r["id"], r["prompt"], r["reference"]) for r in got] == [("k1", "why is the sky blue", "light")]


def test_teacher_forced_reference_cautions_are_said_and_recorded(tiny_gpt2, tmp_path, capsys):
    """The cautions about a teacher-forced reference reach the user and the record: the tokeniser
    merging it with the prompt's trailing space, and a reference glued to the prompt's last word;
    a reference that starts with a space has none."""
    ex = tiny_gpt2
    rows = [{"id": "merged", "prompt": "the movie is ", "reference": "good and the actors are great"},
            {"id": "glued", "prompt": "Biography:", "reference": "leonard is a player"},
            {"id": "clean", "prompt": "the movie is", "reference": " good and the actors are great"},
            {"id": "past_cut", "prompt": "the movie is", "reference": " good and <|endoftext|> after the cut"}]
    G.evaluate_generation(ex, rows, methods="saliency", out_dir=tmp_path, teacher_forced=True, metrics="hard",
                          **dict(FAST, n_new_tokens=2))
    err = capsys.readouterr().err
    recs = read_records(tmp_path / "records.jsonl")
    assert any("merge" in n for n in recs["merged"]["notes"]) and "note: merged: " in err
    assert any("no space ('Biography:' + 'leonard is a')" in n for n in recs["glued"]["notes"]) and "note: glued: " in err
    assert "notes" not in recs["clean"] and "note: clean" not in err
    assert "notes" not in recs["past_cut"] and "note: past_cut" not in err  # the special token is not among the 2 explained
    ex.model.train()  # greedy decoding: a model's own cautions are not notes about a reference
    try:
        G.evaluate_generation(ex, rows[2:3], methods="saliency", out_dir=tmp_path / "greedy", metrics="hard", **dict(FAST, n_new_tokens=2))
    finally:
        ex.model.eval()
    assert "notes" not in read_records(tmp_path / "greedy" / "records.jsonl")["clean"] and "note: " not in capsys.readouterr().err


def test_a_step_groups_the_prompts_words_as_its_generation_does(tiny_gpt2):
    """step_attribution left out the generation's character offsets, so its words followed the
    token markers instead (word_rule 'markers'): a double space or a newline of the prompt was
    merged into or dropped from the next word, unlike the generation's own views. (The generated
    tokens before step t, each a word of its own in the generation's rows, are grouped by their
    text in the step, as the context they are there.)"""
    gen = tiny_gpt2.attribute_generation("the movie  is\n\ngood", max_new_tokens=3, method="saliency")
    assert gen.word_rule == "offsets"
    for t in range(3):
        step = step_attribution(gen, t)
        assert step.word_rule == "offsets"
        prefix = [g for g in gen.word_groups() if g[-1] < gen.prompt_length]  # the prompt's words
        assert step.word_groups()[: len(prefix)] == prefix
        assert step.word_labels()[: len(prefix)] == gen.word_labels()[: len(prefix)]
