"""Profile: where an attribution call spends the time that is not the model's forward and backward.

Times one ``Explainer.attribute`` call (``--method ig``: integrated_gradients, the default;
``saliency``; ``ixg``: input_x_gradient; the settings of ``bench_peers.py``) and, inside it, the
model's forward (``adapter.base.forward``), the input-gradient backward (``torch.autograd.grad``),
the kernel ops (``ops.interpolate_path``, ``ops.integrate_gradients``), the target logit
(``adapter.target_scores``), tokenising (``Explainer.encode_with_offsets``), building the batch
(``Explainer.build_batch``), the method's run with the model prepared (``run_method``) and the
degenerate-signal flags (``flag_rows``), by wrapping each with ``time.perf_counter``. The same
split is taken of the lower bound of ``bench_peers.py`` (forward + backward only). Calls
alternate with the bound; medians over ``--runs`` calls. "outside the model" = total − forward −
backward; "rest of the call" = total − tokenise − batch − method run − flags (argument checks,
targets, the context, building the result).

    python benchmarks/profile_ig_overhead.py                   # tiny GPT-2, L = 64, IG, 60 calls
    python benchmarks/profile_ig_overhead.py --method saliency --runs 400
    python benchmarks/profile_ig_overhead.py --model smollm --L 64 --runs 5
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="tiny-gpt2", choices=["tiny-gpt2", "smollm"])
    ap.add_argument("--method", default="ig", choices=["ig", "saliency", "ixg"])
    ap.add_argument("--L", type=int, default=64)
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--n-steps", type=int, default=50)
    ap.add_argument("--ibs", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0 = torch default)")
    args = ap.parse_args(argv)
    import torch

    import bench_peers as bp
    import aieg_fast.explainer as explainer_module
    from aieg_fast import ops

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    machine.print_header(argv, script=__file__)
    ex = bp.load_explainer(args.model, args.L)
    prompt = bp.make_prompt(ex, args.L)
    tid, ttext = bp.pick_target(ex, prompt)
    tools = bp.Tools(ex, prompt, tid, ttext, args.n_steps, args.ibs)

    acc = {}

    def wrap(obj, name, label):
        orig = getattr(obj, name)

        def timed(*a, **k):
            t = time.perf_counter()
            r = orig(*a, **k)
            acc[label] = acc.get(label, 0.0) + time.perf_counter() - t
            return r

        setattr(obj, name, timed)

    wrap(ex.adapter.base, "forward", "model forward")
    wrap(torch.autograd, "grad", "backward (autograd.grad)")
    wrap(ops, "interpolate_path", "interpolate_path op")
    wrap(ops, "integrate_gradients", "integrate_gradients op")
    wrap(ex.adapter, "target_scores", "target logit")
    wrap(ex, "encode_with_offsets", "tokenise (encode_with_offsets)")
    wrap(ex, "build_batch", "batch + embeddings (build_batch)")
    wrap(explainer_module, "run_method", "method run, model prepared (run_method)")
    wrap(explainer_module, "flag_rows", "flags (flag_rows)")
    top = ("tokenise (encode_with_offsets)", "batch + embeddings (build_batch)", "method run, model prepared (run_method)", "flags (flag_rows)")

    warm = 3 if args.method == "ig" else 30
    for _ in range(warm):
        tools.ours(args.method)
        tools.bound(args.method)
    rows = {"ours": [], "bound": []}
    for _ in range(args.runs):
        for name in ("ours", "bound"):
            acc.clear()
            t = time.perf_counter()
            getattr(tools, name)(args.method)
            acc["total"] = time.perf_counter() - t
            acc["outside the model"] = acc["total"] - acc.get("model forward", 0.0) - acc.get("backward (autograd.grad)", 0.0)
            if name == "ours":
                acc["rest of the call"] = acc["total"] - sum(acc.get(k, 0.0) for k in top)
            rows[name].append(dict(acc))
    what = f"IG n_steps {args.n_steps}, internal batch {args.ibs}" if args.method == "ig" else bp.METHOD_NAMES[args.method]
    print(f"{args.model}, L = {args.L}, {what}, torch threads {args.threads or 'default'}, "
          f"medians of {args.runs} alternating calls (ms per call):\n")
    keys = sorted({k for r in rows["ours"] + rows["bound"] for k in r}, key=lambda k: (k != "total", k))
    print("| piece | ours | bound |")
    print("|---|---|---|")
    for k in keys:
        cells = [f"{statistics.median(r.get(k, 0.0) for r in rows[n]) * 1e3:.3f}" for n in ("ours", "bound")]
        print(f"| {k} | {cells[0]} | {cells[1]} |")
    ratios = [o["total"] / b["total"] for o, b in zip(rows["ours"], rows["bound"])]
    med = [statistics.median(r["total"] for r in rows[n]) for n in ("ours", "bound")]
    print(f"\nours ÷ bound: {med[0] / med[1]:.3f} (medians), {statistics.median(ratios):.3f} (median of the paired ratios)")


if __name__ == "__main__":
    main()
