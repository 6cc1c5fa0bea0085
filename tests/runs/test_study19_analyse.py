"""benchmarks/study19/analyse.py: the pre-registered selection and decision rules must do what
RESULTS_faithfulness.md §4.1 says (written before any test number was read)."""
import importlib.util
from pathlib import Path

import numpy as np

_SPEC = importlib.util.spec_from_file_location(
    "study19_analyse", Path(__file__).resolve().parents[2] / "benchmarks" / "study19" / "analyse.py")
analyse = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(analyse)


def _fam(v, ref, diffs, ps):
    """A family with one comparison: mean differences (variant - ref) and Holm p per hard metric."""
    return {(v, ref, m): (p, d) for m, d, p in zip(analyse.HARD, diffs, ps)}


def test_beats_needs_two_significant_wins_and_no_significant_loss():
    # log-odds lower, comprehensiveness higher, sufficiency lower are better
    assert analyse.beats(_fam("V2", "IG", (-0.2, 0.1, 0.3), (0.01, 0.01, 0.5)), "V2", "IG")
    assert not analyse.beats(_fam("V2", "IG", (-0.2, 0.1, 0.3), (0.01, 0.01, 0.01)), "V2", "IG")  # worse on sufficiency
    assert not analyse.beats(_fam("V2", "IG", (-0.2, 0.1, -0.3), (0.01, 0.2, 0.2)), "V2", "IG")  # one significant win
    assert not analyse.beats(_fam("V2", "IG", (0.2, -0.1, 0.3), (0.01, 0.01, 0.01)), "V2", "IG")  # all worse


def test_decide_follows_the_protocol():
    nano = ["gpt-nano-s0", "gpt-nano-s1", "gpt-nano-s2", "llama-nano-s0"]
    everyone = nano + ["smollm2-sst2"]
    win = _fam("V2", "IG", (-0.2, 0.1, -0.1), (0.01, 0.01, 0.01))
    lose = _fam("V2", "IG", (0.2, -0.1, 0.1), (0.01, 0.01, 0.01))
    over_v1 = {**_fam("V3", "V1", (-0.2, 0.1, -0.1), (0.001, 0.001, 0.001)),
               **_fam("V2", "V1", (-0.2, 0.1, -0.1), (0.001, 0.001, 0.001))}
    far = {"V1": 9.0, "V2": 8.5, "V3": 3.0, "IG": 1.0}  # no missing model can reorder V3 and the rest
    # three of five models already hold: decided
    assert analyse.decide({m: win for m in nano[:3]}, far, "V2")[1] == "V2"
    # two of four hold, one model missing: undecided
    assert analyse.decide({m: f for m, f in zip(nano, (win, win, lose, lose))}, far, "V2")[1] is None
    # none hold: V3 has the best test criterion and beats V1 on three of five models
    fams = {m: ({**lose, **over_v1} if i < 3 else lose) for i, m in enumerate(everyone)}
    assert analyse.decide(fams, far, "V2")[1] == "V3"
    # ... but on none: the default stays V1
    assert analyse.decide({m: lose for m in everyone}, far, "V2")[1] == "V1"
    # one model missing and V2 close behind V3: both beat V1, so V1 goes, but which one waits
    close = {"V1": 9.0, "V2": 3.5, "V3": 3.0, "IG": 1.0}
    lines, default = analyse.decide({m: {**lose, **over_v1} for m in nano}, close, "V2")
    assert default is None and any("could still put V2" in x for x in lines) and "changes from V1" in lines[-1]
    # the same with every model run: V3 is final
    assert analyse.decide({m: {**lose, **over_v1} for m in everyone}, close, "V2")[1] == "V3"


def test_select_breaks_ties_towards_the_simpler_variant():
    crit = {"IG": 2.0, "V1": 6.0, "V2": 4.05, "V3": 4.0, "V8": 3.0}
    tight = {v: 0.01 for v in crit}
    assert analyse.select({"m": (crit, tight)})[4] == "V8"
    wide = {v: 1.5 for v in crit}  # V2, V3 and V8 within one SE of V8
    score, se, best, tied, winner = analyse.select({"m": (crit, wide)})
    assert best == "V8" and winner == "V2"
    assert np.isclose(score["V8"], 3.0)


def test_a_run_short_of_the_protocols_size_is_not_read(tmp_path):
    """A test run is read only when complete (the protocol: no peeking at part of it)."""
    import json

    folder = tmp_path / "test" / "smollm2-sst2"
    folder.mkdir(parents=True)
    metrics = {m: -0.123 for m in list(analyse.HARD) + analyse.SECONDARY}
    with open(folder / "records.jsonl", "w") as fh:
        for i in range(3):
            fh.write(json.dumps({"id": f"sst2-test:{i}", "methods": {s: metrics for s in analyse.PROTOCOL["variants"].values()}}) + "\n")
    out = tmp_path / "t.md"
    analyse.main(["--root", str(tmp_path), "--phase", "test", "--out", str(out)])
    text = out.read_text()
    assert "smollm2-sst2: 3 of 500 examples; not read until complete" in text and "-0.123" not in text
    analyse.main(["--root", str(tmp_path), "--phase", "test", "--out", str(out), "--partial"])
    assert "#### smollm2-sst2 (n = 3)" in out.read_text()


def test_imdb_buckets_are_read_with_the_holm_family(tmp_path):
    """--phase imdb: one table per bucket (IG, V1, V3; hard metrics only), the Holm-corrected
    family against IG and V1; the 50-token bucket only once it holds the protocol's 200, the
    longer buckets on exactly their first n_read reviews (dataset order, not file order)."""
    import json

    rng = np.random.default_rng(0)
    spec = analyse.PROTOCOL["variants"]

    def write(bucket, n, shift, late_shift=None):
        folder = tmp_path / "imdb" / f"smollm2-sst2_{bucket}"
        folder.mkdir(parents=True)
        with open(folder / "records.jsonl", "w") as fh:
            for i in reversed(range(n)):  # file order is not dataset order (as with two processes)
                s = shift if late_shift is None or i < analyse.PROTOCOL["imdb"]["n_read"][str(bucket)] else late_shift
                base = rng.normal(size=3)
                methods = {spec[v]: dict(zip(analyse.HARD, base + (s if v == "V3" else 0.0) * np.array([-1, 1, -1])))
                           for v in ("IG", "V1", "V3")}
                fh.write(json.dumps({"id": f"imdb:{i}", "index": i, "methods": methods}) + "\n")

    assert analyse.PROTOCOL["imdb"]["n_read"] == {"200": 100, "400": 50}
    write(50, 199, 0.5)
    write(200, 130, 0.5, late_shift=50.0)  # reviews past the first 100 must not move the table
    write(400, 49, 0.5)
    out = tmp_path / "imdb.md"
    analyse.main(["--root", str(tmp_path), "--phase", "imdb", "--out", str(out)])
    text = out.read_text()
    assert "smollm2-sst2, 50-token bucket: 199 of 200 examples; not read until complete" in text
    assert "#### smollm2-sst2, 200-token bucket (n = 100)" in text
    assert "400-token bucket: 49 of 50 examples; not read until complete" in text
    v3_ig = next(line for line in text.splitlines() if line.startswith("| V3 | IG |"))
    assert v3_ig.startswith("| V3 | IG | -0.500 (p ") and "| – / – |" in text  # better by 0.5 on each; no soft metrics
    assert "The criterion over the models" not in text  # the selection and decision are SST-2's
