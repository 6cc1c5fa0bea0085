"""benchmarks/study19/run.py: the protocol's variant specs keep the meaning they had when the
protocol was fixed (AIEG's default reading then, preset v1) whatever the package default is,
and a run folder started before the pin resumes with its records unchanged."""
import importlib.util
import json
from pathlib import Path

from aieg_fast.eval.checks import method_only
from aieg_fast.methods.registry import parse_method_spec, resolved_options

_SPEC = importlib.util.spec_from_file_location(
    "study19_run", Path(__file__).resolve().parents[2] / "benchmarks" / "study19" / "run.py")
run = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(run)


def test_variant_specs_resolve_to_the_protocols_readings():
    pinned = run.PROTOCOL["settings"]["method_options"]
    for vid, spec in run.PROTOCOL["variants"].items():
        if spec == "random":
            continue
        name, opts = parse_method_spec(spec)
        now = resolved_options(name, {**pinned.get(name, {}), **method_only(opts)})
        then = resolved_options(name, {**({"preset": "v1"} if name == "aieg" else {}), **method_only(opts)})
        assert now == then, vid
    v1, v3 = (resolved_options("aieg", {**pinned["aieg"], **parse_method_spec(run.PROTOCOL["variants"][v])[1]}) for v in ("V1", "V3"))
    assert (v1["posnorm"], v1["attn_source"]) == ("minmax", "input")
    assert (v3["posnorm"], v3["attn_source"]) == ("relu_max", "path")


def test_a_folder_from_before_the_pin_is_migrated_once(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model": "m", "method_options": {}}))
    run._pin_method_options(tmp_path, {"aieg": {"preset": "v1"}})
    assert json.loads(cfg.read_text()) == {"model": "m", "method_options": {"aieg": {"preset": "v1"}}}
    cfg.write_text(json.dumps({"model": "m", "method_options": {"aieg": {"ef_mode": "none"}}}))
    run._pin_method_options(tmp_path, {"aieg": {"preset": "v1"}})  # other options: left for evaluate to refuse
    assert json.loads(cfg.read_text())["method_options"] == {"aieg": {"ef_mode": "none"}}
    run._pin_method_options(tmp_path / "absent", {"aieg": {"preset": "v1"}})  # no folder: nothing to do


def test_n_examples_is_the_spelling_torchrun_lets_through():
    import pytest
    from torch.distributed.run import get_args_parser

    script = ["--standalone", "--nproc-per-node", "2", "run.py", "imdb", "--bucket", "400"]
    with pytest.raises(SystemExit):  # torchrun takes --n for an abbreviation of its own options
        get_args_parser().parse_args(script + ["--n", "50"])
    args = get_args_parser().parse_args(script + ["--n-examples", "50"])
    assert args.training_script_args[-2:] == ["--n-examples", "50"]
    with pytest.raises(SystemExit, match="--n 100000 is beyond the protocol's"):  # --n-examples is --n
        run.main(["test", "--model", "smollm2-sst2", "--n-examples", "100000"])
