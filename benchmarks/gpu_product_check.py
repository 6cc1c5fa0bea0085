"""The whole product on a device against the CPU: every method on a tiny model of every family,
targets, batches, generated text, and on one family the call options (steps chosen by accuracy, a
multi-token log-probability target, other and noisy baselines, word occlusion, generated text
with every method), low precision, torch.compile and an evaluation run.

    python benchmarks/gpu_product_check.py --device cuda [--out DIR] [--families llama,gpt2]

Step 7 of ``benchmarks/gpu_check.sh``. Each check runs the same call on the CPU (float32) and
on ``--device`` and compares the scores: the largest absolute difference over the largest CPU
score magnitude (``rel``) must stay under ``--rtol`` (default 1e-3; the device may take other
reduction orders), and the set of attributed positions must be the same. bfloat16 is compared
with the device's own float32 by Spearman rank correlation (at least ``--min-rho``, default
0.8). ``--device cpu`` runs the same checks CPU against CPU (a dry run of the script: every
``rel`` is then 0). A call refused with the same ValueError on both (an attention method on an
attention-free family) is recorded as ``refused`` and passes. Writes ``product_check.csv`` (one row per check) and prints a table; the
exit status is 1 if any check failed or raised.

Models are the random-weight families of ``tests/builders.py`` (two layers, hidden size 32), so
the check needs no download; it covers code paths, not the speed of real models.
"""
from __future__ import annotations

import argparse
import copy
import csv
import math
import sys
import tempfile
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import aieg_fast  # noqa: E402
import machine  # noqa: E402  (benchmarks/machine.py)
from aieg_fast.verify import spearman  # noqa: E402
from builders import family_specs  # noqa: E402  (tests/builders.py)

TEXT = "the movie was good and the acting was great"
TEXTS = [TEXT, "a dull film"]


def _scores(res):
    out = res if isinstance(res, list) else [res]
    return [r.scores.float().nan_to_num(0.0) for r in out], [list(r.attributable) for r in out]


def _rel(a, b) -> float:
    """max |a - b| / max |a| over matching tensors (0 when both are all zero)."""
    num = max(float((x - y).abs().max()) for x, y in zip(a, b))
    den = max(float(x.abs().max()) for x in a)
    return num / den if den > 0 else num


class Refused(Exception):
    """The call was refused with the same ValueError on the CPU and the device (e.g. an
    attention method on an attention-free family): the product's answer, not a failure."""


def _pair(model, tok, device, call):
    """(CPU float32 result, device result) of ``call(explainer)``; Refused when both refuse."""
    try:
        cpu = call(aieg_fast.Explainer(copy.deepcopy(model), tok, device="cpu"))
    except ValueError as e:
        try:
            call(aieg_fast.Explainer(copy.deepcopy(model), tok, device=device))
        except ValueError as e_dev:
            if str(e_dev) == str(e):
                raise Refused(str(e).split(";")[0]) from None
        raise
    return cpu, call(aieg_fast.Explainer(copy.deepcopy(model), tok, device=device))


def _method_calls(methods, n_steps):
    for m in methods:
        yield f"{m}", lambda ex, m=m: ex.attribute(TEXT, method=m, n_steps=n_steps)


def run_checks(device: str, families, methods, n_steps: int):
    """Yield (check, family, method, kind, value) rows; kind "rel" or "rho" or "error"."""
    specs = family_specs()
    for fam in families:
        model, tok = specs[fam].build()
        for name, call in _method_calls(methods, n_steps):
            yield _guard(("method", fam, name), lambda: _compare(*_pair(model, tok, device, call)))
        batch = lambda ex: ex.attribute(TEXTS, method="aieg", n_steps=n_steps)  # noqa: E731
        yield _guard(("batch_padded", fam, "aieg"), lambda: _compare(*_pair(model, tok, device, batch)))
        ids = tok(" good", add_special_tokens=False)["input_ids"][-1], tok(" bad", add_special_tokens=False)["input_ids"][-1]
        contrast = lambda ex: ex.attribute(TEXT, method="integrated_gradients", target=ids[0],  # noqa: E731
                                           contrast_target=ids[1], n_steps=n_steps)
        yield _guard(("contrast_target", fam, "integrated_gradients"), lambda: _compare(*_pair(model, tok, device, contrast)))
        for m in ("aieg", "integrated_gradients", "attention"):
            gen = lambda ex, m=m: ex.attribute_generation(TEXT, max_new_tokens=3, method=m, n_steps=n_steps)  # noqa: E731
            yield _guard(("generation", fam, m), lambda gen=gen: _compare_generation(*_pair(model, tok, device, gen)))
        if specs[fam].classifier is not None:
            cmodel, ctok = specs[fam].build(classifier=True)
            cls = lambda ex: ex.attribute(TEXT, method="aieg", target=1, n_steps=n_steps)  # noqa: E731
            yield _guard(("class_target", fam, "aieg"), lambda: _compare(*_pair(cmodel, ctok, device, cls)))


def run_options(device: str, family: str, methods, n_steps: int):
    """The call options beyond a method's defaults, on one family, CPU against the device: steps
    chosen by accuracy, a multi-token log-probability target, non-default and noisy baselines,
    word occlusion, and generated text with every method."""
    model, tok = family_specs()[family].build()
    calls = {
        ("n_steps_auto", "integrated_gradients"): lambda ex: ex.attribute(TEXT, method="integrated_gradients", n_steps="auto"),
        ("logprob_multi_token", "integrated_gradients"): lambda ex: ex.attribute(
            TEXT, method="integrated_gradients", target=" so good", target_fn="logprob", n_steps=n_steps),
        ("baseline_mean", "aieg"): lambda ex: ex.attribute(TEXT, method="aieg", baseline="mean", n_steps=n_steps),
        ("noisy_baselines", "integrated_gradients"): lambda ex: ex.attribute(
            TEXT, method="integrated_gradients", n_baseline_samples=2, seed=0, n_steps=n_steps),
        ("word_occlusion", "occlusion"): lambda ex: ex.attribute(TEXT, method="occlusion", granularity="word"),
    }
    for (check, m), call in calls.items():
        yield _guard((check, family, m), lambda call=call: _compare(*_pair(model, tok, device, call)))
    for m in methods:
        gen = lambda ex, m=m: ex.attribute_generation(TEXT, max_new_tokens=2, method=m, n_steps=n_steps)  # noqa: E731
        yield _guard(("generation_every_method", family, m), lambda gen=gen: _compare_generation(*_pair(model, tok, device, gen)))


def run_device_only(device: str, family: str, n_steps: int):
    """bfloat16, float16 and torch.compile on the device against the device's float32 eager result."""
    model, tok = family_specs()[family].build()
    call = lambda ex: ex.attribute(TEXT, method="aieg", n_steps=n_steps)  # noqa: E731
    ref = call(aieg_fast.Explainer(copy.deepcopy(model), tok, device=device))

    def low(dtype):
        res = call(aieg_fast.Explainer(copy.deepcopy(model).to(dtype), tok, device=device))
        flat = [torch.cat([x.flatten() for x in _scores(r)[0]]) for r in (ref, res)]
        return "rho", spearman(*flat)

    def compiled():
        comp = call(aieg_fast.Explainer(copy.deepcopy(model), tok, device=device, compile=True))
        return _compare(ref, comp)
    yield _guard(("bfloat16_vs_float32", family, "aieg"), lambda: low(torch.bfloat16))
    yield _guard(("float16_vs_float32", family, "aieg"), lambda: low(torch.float16))
    yield _guard(("compile_vs_eager", family, "aieg"), compiled)


def run_evaluate(device: str, family: str, out: Path):
    """``aieg_fast.eval.evaluate`` on a saved tiny model, every method, CPU against the device:
    the hard metrics' summary means must agree (same examples, same seeds); ("rel", worst)."""
    from aieg_fast.eval import evaluate

    model, tok = family_specs()[family].build()
    path = out / "tiny_model"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    methods = list(aieg_fast.list_methods()) + ["random"]
    kw = dict(dataset="sst2-sample", methods=methods, n=3, n_steps=8, n_samples=2, pis=(0.3, 0.7),
              progress=False, plot=False, labels=[" bad", " good"], template="{text} It was")
    res = {d: evaluate(str(path), out_dir=out / f"eval_{d}", device=d, **kw) for d in ("cpu", device)}
    means = {d: {(r["method"], r["metric"]): float(r["mean"]) for r in res[d]["rows"]} for d in res}
    if set(means["cpu"]) != set(means[device]):
        raise AssertionError(f"summary rows differ: {sorted(set(means['cpu']) ^ set(means[device]))}")
    worst = 0.0
    for key, x in means["cpu"].items():
        if key[1] in ("log_odds", "comprehensiveness", "sufficiency") and math.isfinite(x):
            worst = max(worst, abs(x - means[device][key]) / max(abs(x), 1e-3))
    return "rel", worst


def _compare(cpu, dev):
    ta = [r.target.get("id") for r in (cpu if isinstance(cpu, list) else [cpu])]
    tb = [r.target.get("id") for r in (dev if isinstance(dev, list) else [dev])]
    if ta != tb:
        raise AssertionError(f"predicted targets differ: cpu {ta} vs device {tb} (near-tie logits of a random model)")
    (a, pa), (b, pb) = _scores(cpu), _scores(dev)
    if pa != pb or [x.shape for x in a] != [x.shape for x in b]:
        raise AssertionError(f"attributed positions / shapes differ: cpu {pa} vs device {pb}")
    return "rel", _rel(a, [x.cpu() for x in b])


def _compare_generation(cpu, dev):
    if cpu.token_ids != dev.token_ids:
        raise AssertionError("greedy continuations differ between CPU and device (near-tie logits)")
    return _compare(cpu, dev)


def _guard(key, fn):
    try:
        kind, value = fn()
    except Refused as e:
        return (*key, "refused", str(e))
    except Exception as e:  # a check that raises is a failed check; the traceback is printed
        traceback.print_exc()
        return (*key, "error", f"{type(e).__name__}: {e}")
    return (*key, kind, value)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--families", default="all", help="comma-separated family names of tests/builders.py, or all")
    p.add_argument("--methods", default="all")
    p.add_argument("--n-steps", type=int, default=8)
    p.add_argument("--rtol", type=float, default=1e-3)
    p.add_argument("--min-rho", type=float, default=0.8)
    p.add_argument("--out", default=None, help="folder for product_check.csv (default: a temporary folder)")
    a = p.parse_args(argv)
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(f"--device {a.device!r}: CUDA is not available here")
    header = machine.describe(sys.argv[1:] if argv is None else argv, __file__)
    if a.device.startswith("cuda"):
        header.append(f"# device: {torch.cuda.get_device_name(a.device)}, CUDA {torch.version.cuda}")
    print("\n".join(header), flush=True)
    specs = family_specs()
    families = sorted(specs) if a.families == "all" else a.families.split(",")
    unknown = [f for f in families if f not in specs]
    if unknown:
        raise SystemExit(f"--families: unknown {unknown}; known: {sorted(specs)}")
    methods = aieg_fast.list_methods() if a.methods == "all" else a.methods.split(",")
    out = Path(a.out or tempfile.mkdtemp(prefix="product_check_"))
    out.mkdir(parents=True, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False  # compare float32 with float32

    rows = list(run_checks(a.device, families, methods, a.n_steps))
    main_family = "llama" if "llama" in families else families[0]
    rows += list(run_options(a.device, main_family, methods, a.n_steps))
    rows += list(run_device_only(a.device, main_family, a.n_steps))
    rows.append(_guard(("evaluate", main_family, "all"), lambda: run_evaluate(a.device, main_family, out)))

    def ok(kind, v):
        return kind == "refused" or (kind == "rel" and math.isfinite(v) and v <= a.rtol) or (kind == "rho" and v >= a.min_rho)
    failed = [r for r in rows if not ok(r[3], r[4])]
    with open(out / "product_check.csv", "w", newline="", encoding="utf-8") as f:
        f.write("".join(ln + "\n" for ln in header))  # the machine and the command, as printed
        w = csv.writer(f)
        w.writerow(["check", "family", "method", "kind", "value", "ok"])
        w.writerows([*r, r not in failed] for r in rows)
    print(f"| check | family | method | kind | value | ok |\n|---|---|---|---|---|---|")
    for r in rows:
        v = f"{r[4]:.2e}" if isinstance(r[4], float) else r[4]
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {v} | {'yes' if r not in failed else 'NO'} |")
    print(f"product check on {a.device}: {len(rows) - len(failed)} of {len(rows)} checks passed "
          f"(rel ≤ {a.rtol}, rho ≥ {a.min_rho}); table in {out / 'product_check.csv'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
