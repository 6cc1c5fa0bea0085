"""Benchmark: the compiled path (``compile=True``) against eager and the eager lower bound, in a
loop of repeated IG calls on one prompt (issue 18, item 2).

Three ways to compute the same next-token IG, side by side in one process:

* ``bound``: the eager lower bound of ``bench_peers.py`` (``Tools.bound``): the batched forward
  plus input-gradient backward of the same interpolation points, frozen parameters, only the
  target logit computed;
* ``eager``: ``Explainer.attribute(method="integrated_gradients", integration="trapezoid")``;
* ``compiled``: the same call with ``compile=True`` (``torch.compile``, backend inductor, of the
  decoder stack's forward and backward on each chunk; :mod:`aieg_fast.core.compiled`).

One warm-up call each (the compiled one compiles here; its ``info["compile_seconds"]`` is
reported), then ``--calls`` rounds, the three in a rotated order each round; each call's wall
time is taken with ``time.perf_counter``. Reported: medians, the ratios of the medians, and the
median of the per-round ratios (robust to a busy machine, as each round's three calls are close
in time). The compiled scores are compared with the eager ones (largest difference over the
largest score, Spearman).

    python benchmarks/bench_compile.py                          # SmolLM2, L = 128, 20 calls, n_steps 50, ibs 10
    python benchmarks/bench_compile.py --model tiny-gpt2 --calls 5 --out compile.json
    python benchmarks/bench_compile.py --n-steps 50 --check-points   # F and gradients per path point
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import machine  # noqa: E402
from bench_peers import Tools, load_explainer, make_prompt, pick_target  # noqa: E402

TOOLS = ("bound", "eager", "compiled")


def run(args):
    import torch

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    ex = load_explainer(args.model, args.L)
    prompt = make_prompt(ex, args.L)
    tid, _ = pick_target(ex, prompt)
    T = Tools(ex, prompt, tid, None, args.n_steps, args.ibs)

    def ours(compile):
        r = ex.attribute(prompt, method="integrated_gradients", target=tid, n_steps=args.n_steps, internal_batch_size=args.ibs,
                         integration="trapezoid", compile=compile)
        return r

    calls = {"bound": lambda: T.bound("ig"), "eager": lambda: ours(False), "compiled": lambda: ours(args.backend)}
    warm = {}
    for t in TOOLS:
        t0 = time.perf_counter()
        out = calls[t]()
        warm[t] = time.perf_counter() - t0
        print(f"  warm-up {t}: {warm[t]:.1f} s", file=sys.stderr, flush=True)
        if t == "compiled":
            compile_seconds = out.info["compile_seconds"]
    times = {t: [] for t in TOOLS}
    last = {}
    for r in range(args.calls):
        order = TOOLS[r % 3:] + TOOLS[: r % 3]
        for t in order:
            t0 = time.perf_counter()
            out = calls[t]()
            times[t].append(time.perf_counter() - t0)
            last[t] = out
        print(f"  round {r + 1}/{args.calls}: " + ", ".join(f"{t} {times[t][-1]:.2f}s" for t in TOOLS), file=sys.stderr, flush=True)
    a, b = last["eager"], last["compiled"]
    mask = torch.tensor(a.attributable)
    from scipy.stats import spearmanr

    med = {t: statistics.median(v) for t, v in times.items()}
    paired = {f"{x}/{y}": statistics.median(p / q for p, q in zip(times[x], times[y]))
              for x, y in (("compiled", "bound"), ("eager", "bound"), ("compiled", "eager"))}
    return {
        "model": args.model, "L": T.L, "n_steps": args.n_steps, "ibs": args.ibs, "calls": args.calls, "backend": args.backend,
        "threads": torch.get_num_threads(), "warm_up_s": warm, "compile_seconds": compile_seconds, "times": times, "median_s": med,
        "ratio_of_medians": {k: med[k.split("/")[0]] / med[k.split("/")[1]] for k in paired}, "median_paired_ratio": paired,
        "compiled_vs_eager": {
            "max_abs_diff_over_max_abs": float((a.scores - b.scores).abs().max() / a.scores.abs().max()),
            "spearman": float(spearmanr(a.scores[mask].numpy(), b.scores[mask].numpy()).statistic),
            "delta_eager": a.info["convergence_delta"], "delta_compiled": b.info["convergence_delta"],
        },
        "compiled_info": {k: b.info[k] for k in ("compiled", "compile_backend", "compile_seconds")},
    }


def check_points(args):
    """F and ∂F/∂x of every path point, compiled against eager, printed one line per point."""
    import torch

    from aieg_fast import ops
    from aieg_fast.core.compiled import compiled_stack, stack_at

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    ex = load_explainer(args.model, args.L)
    prompt = make_prompt(ex, args.L)
    tid, _ = pick_target(ex, prompt)
    batch = ex.build_batch([ex.encode(prompt)])
    comp = compiled_stack(ex.compiled_stacks, ex.adapter, args.backend)
    w = ex.adapter.head.weight[tid].detach()
    alphas = torch.linspace(0, 1, args.n_steps)
    L = batch.ids.shape[1]
    for s in range(0, args.n_steps, args.ibs):
        a = alphas[s : s + args.ibs]
        X = ops.interpolate_path(batch.embeds[0], batch.baseline[0], a, batch.fixed[0]).requires_grad_(True)
        q = torch.full((a.numel(), 1), L - 1)
        out = []
        for fn in (lambda: stack_at(ex.adapter, X, None, None, q), lambda: comp.hidden(X, None, None, q)):
            with torch.enable_grad():
                f = fn()[:, 0] @ w
                (g,) = torch.autograd.grad(f.sum(), X)
            out.append((f.detach(), g))
        (f1, g1), (f2, g2) = out
        for i in range(a.numel()):
            print(f"alpha {float(a[i]):.3f}  F {float(f1[i]):9.3f}  F diff {float(f2[i] - f1[i]):+.1e}  |grad| {float(g1[i].norm()):.2e}  "
                  f"grad diff / |grad| {float((g2[i] - g1[i]).norm() / g1[i].norm()):.1e}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm", choices=["smollm", "tiny-gpt2"])
    ap.add_argument("--L", type=int, default=128)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--n-steps", type=int, default=50)
    ap.add_argument("--ibs", type=int, default=10, help="internal batch size (path points per forward/backward)")
    ap.add_argument("--backend", default="inductor", help="torch.compile backend of the compiled calls")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0 = torch default)")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    ap.add_argument("--check-points", action="store_true", help="only compare F and gradients of each path point, compiled against eager")
    args = ap.parse_args(argv)
    info = machine.print_header(argv, script=__file__, threads=args.threads or "default")
    if args.check_points:
        return check_points(args)
    res = run(args)
    print(f"\n{res['model']}, L = {res['L']}, IG n_steps {res['n_steps']}, internal batch {res['ibs']}, {res['calls']} calls each "
          f"after one warm-up call; compiling ({res['backend']}) took {res['compile_seconds']:.1f} s in the warm-up call\n")
    print("| | median s | ÷ bound (ratio of medians) | ÷ bound (median of paired ratios) |")
    print("|---|---|---|---|")
    for t in TOOLS:
        rm = res["ratio_of_medians"].get(f"{t}/bound")
        pr = res["median_paired_ratio"].get(f"{t}/bound")
        print(f"| {t} | {res['median_s'][t]:.3f} | {'' if rm is None else f'{rm:.3f}'} | {'' if pr is None else f'{pr:.3f}'} |")
    print(f"\ncompiled ÷ eager: {res['ratio_of_medians']['compiled/eager']:.3f} (ratio of medians), "
          f"{res['median_paired_ratio']['compiled/eager']:.3f} (median of paired ratios)")
    c = res["compiled_vs_eager"]
    print(f"compiled vs eager scores: max |diff| / max |score| = {c['max_abs_diff_over_max_abs']:.2e}, Spearman {c['spearman']:.6f}; "
          f"convergence delta {c['delta_eager']:+.4e} / {c['delta_compiled']:+.4e}")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"machine": info, "args": vars(args), "result": res}, indent=1))


if __name__ == "__main__":
    main()
