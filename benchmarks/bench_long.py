"""Benchmark: long sequences (peak memory of AIEG) and tight loops (per-call latency), on the CPU
(memory is the process's resident memory; no GPU option).

Long sequences
    Next-token AIEG on the embedded SmolLM2-135M-Instruct at L in {1024, 2048, 4096}. Every
    configuration runs in its own subprocess; its peak resident memory is the subprocess's
    ``resource.getrusage(RUSAGE_SELF).ru_maxrss``, and the RSS right after the model is loaded is
    reported next to it. A configuration can be given an address-space cap (``--budget-gib``,
    ``resource.setrlimit(RLIMIT_AS)``) so that one that does not fit fails cleanly with an
    allocation error instead of pushing the machine into swap or the OOM killer.

    On a CPU, AIEG with n_steps = 50 at L = 4096 takes far longer than a benchmark run should
    (about 50 pilot forwards + 50 forward/backward passes of a 4096-token input). ``--long-steps``
    (default 2) runs fewer steps; the report gives the measured seconds per path point (pilot
    forward and forward+backward separately, from ``Attribution.timing``) and an *extrapolation*
    to n_steps = 50, labelled as such. Peak memory does not depend on n_steps (shown below), so the
    memory figures hold for n_steps = 50.

    n_steps does not govern memory: AIEG at n_steps 50 and 200 with the same internal batch size
    (``--nsteps-L``, default 64, internal batch size 10), peak RSS of each.

Tight loops
    Saliency and input×gradient on a 32-token input, many calls: per-call latency of
    ``Explainer.attribute`` against the bare forward + input-gradient backward of the same input
    (frozen parameters, only the target logit), alternating call by call, medians; then a
    cProfile of our calls (where the time besides the model goes) and the ``timing`` split.

    python benchmarks/bench_long.py                       # everything (tens of minutes on 2 CPU cores)
    python benchmarks/bench_long.py --only tight          # tight loops only (about a minute)
    python benchmarks/bench_long.py --only long --lengths 1024,2048 --long-steps 4
    python benchmarks/bench_long.py --only long --lengths 4096 --long-steps 50 --long-ibs 1   # one full call, about 1 h here
    python benchmarks/bench_long.py --only nsteps
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _rss_mib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


# ============================================================================================
# worker: one AIEG call in a fresh process
# ============================================================================================
def worker_long(args):
    if args.budget_gib:
        lim = int(args.budget_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    import torch
    import bench_peers as bp

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    ex = bp.load_explainer("smollm")
    prompt = bp.make_prompt(ex, args.L)
    tid, _ = bp.pick_target(ex, prompt) if args.L <= 256 else (ex.predict(prompt, top_k=1)[0][1], None)
    opts = json.loads(args.options) if args.options else {}
    rss_loaded = _rss_mib()
    out = {"L": args.L, "n_steps": args.n_steps, "ibs": args.ibs, "options": opts, "rss_loaded_mib": rss_loaded,
           "budget_gib": args.budget_gib}
    t = time.perf_counter()
    try:
        r = ex.attribute(prompt, method="aieg", target=tid, n_steps=args.n_steps, internal_batch_size=args.ibs, **opts)
        out["timing"] = dict(r.timing)
        out["ok"] = True
    except (RuntimeError, MemoryError) as e:
        out["ok"] = False
        out["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    out["wall_s"] = time.perf_counter() - t
    out["ru_maxrss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    Path(args.json).write_text(json.dumps(out))


def run_long(L, n_steps, ibs, threads, options=None, budget_gib=None, timeout=None):
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    cmd = [sys.executable, __file__, "--worker", "--L", str(L), "--n-steps", str(n_steps), "--ibs", str(ibs),
           "--threads", str(threads), "--json", path]
    if options:
        cmd += ["--options", json.dumps(options)]
    if budget_gib:
        cmd += ["--budget-gib", str(budget_gib)]
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", TOKENIZERS_PARALLELISM="false")
    t = time.perf_counter()
    try:
        p = subprocess.run(cmd, env=env, timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
    try:
        out = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        out = {"L": L, "n_steps": n_steps, "ibs": ibs, "options": options or {}, "ok": False,
               "error": f"child ended with {rc} after {time.perf_counter() - t:.0f} s (killed or out of memory)"}
    os.unlink(path)
    print(f"  L={L} n_steps={n_steps} ibs={ibs} {options or ''}: {'ok' if out.get('ok') else out.get('error')} "
          f"{out.get('wall_s', 0):.1f} s, ru_maxrss {out.get('ru_maxrss_mib', float('nan')):.0f} MiB", file=sys.stderr, flush=True)
    return out


def long_table(rows, target_steps=50):
    lines = ["| L | options | n_steps run | ibs | wall s | s / pilot fwd | s / fwd+bwd point | s at n_steps=50 | RSS loaded MiB | peak RSS MiB | budget |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        opt = ",".join(f"{k}={v}" for k, v in r.get("options", {}).items()) or "defaults"
        if not r.get("ok"):
            lines.append(f"| {r['L']} | {opt} | {r['n_steps']} | {r['ibs']} | failed: {r.get('error', '')[:90]} | | | | "
                         f"{r.get('rss_loaded_mib', float('nan')):.0f} | {r.get('ru_maxrss_mib', float('nan')):.0f} | {r.get('budget_gib') or '-'} GiB |")
            continue
        tm = r["timing"]
        n = r["n_steps"]
        pilot = tm.get("pilot", 0.0) / n
        path = tm.get("path", 0.0) / n
        extra = tm.get("total", r["wall_s"]) - tm.get("pilot", 0.0) - tm.get("path", 0.0)
        at50 = f"{tm.get('total', r['wall_s']):.0f} (measured)" if n == target_steps else f"{extra + target_steps * (pilot + path):.0f} (extrapolated)"
        lines.append(f"| {r['L']} | {opt} | {n} | {r['ibs']} | {r['wall_s']:.1f} | {pilot:.2f} | {path:.2f} | "
                     f"{at50} | {r['rss_loaded_mib']:.0f} | {r['ru_maxrss_mib']:.0f} | {r.get('budget_gib') or '-'} |")
    return "\n".join(lines)


# ============================================================================================
# tight loops
# ============================================================================================
def tight(args):
    import torch
    import bench_peers as bp

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    ex = bp.load_explainer("smollm")
    prompt = bp.make_prompt(ex, 32)
    tid, ttext = bp.pick_target(ex, prompt)
    T = bp.Tools(ex, prompt, tid, ttext, 50, 10)
    rows = []
    for method in ("saliency", "ixg"):
        name = bp.METHOD_NAMES[method]
        call_ours = lambda: ex.attribute(prompt, method=name, target=tid)  # noqa: E731
        call_bare = lambda: T.bound(method)  # noqa: E731
        for _ in range(3):
            call_ours(), call_bare()
        to, tb = [], []
        for i in range(args.calls):
            for which, fn, acc in (("ours", call_ours, to), ("bare", call_bare, tb))[:: 1 if i % 2 == 0 else -1]:
                t = time.perf_counter()
                fn()
                acc.append(time.perf_counter() - t)
        mo, mb = statistics.median(to), statistics.median(tb)
        rows.append((method, mo, mb))
        print(f"  tight {method}: ours {mo * 1e3:.1f} ms, bare {mb * 1e3:.1f} ms, ratio {mo / mb:.2f}", file=sys.stderr, flush=True)
    print(f"\nTight loop, SmolLM2-135M-Instruct, 32 tokens, {args.calls} calls each, alternating, medians:\n")
    print("| method | ours ms/call | bare fwd+bwd ms/call | ratio |")
    print("|---|---|---|---|")
    for m, mo, mb in rows:
        print(f"| {bp.METHOD_NAMES[m]} | {mo * 1e3:.1f} | {mb * 1e3:.1f} | {mo / mb:.2f} |")

    # where our time goes: the timing split and a cProfile of 10 calls
    splits = []
    for _ in range(10):
        r = ex.attribute(prompt, method="saliency", target=tid)
        splits.append(r.timing)
    keys = splits[0].keys()
    med = {k: statistics.median(s[k] for s in splits) for k in keys}
    print("\nsaliency timing split (median of 10 calls, ms): " + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in med.items()))
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(10):
        ex.attribute(prompt, method="saliency", target=tid)
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(35)
    print("\ncProfile of 10 saliency calls (cumulative):\n")
    print("\n".join(l for l in s.getvalue().splitlines() if l.strip())[:6000])

    # the pieces of the call, timed alone
    from aieg_fast.core.model_state import model_prepared

    ids, fixed = ex.encode(prompt)
    batch = ex.build_batch([(ids, fixed)])

    def piece(fn, n=20):
        fn()
        ts = []
        for _ in range(n):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        return statistics.median(ts) * 1e3

    def ref_fwd():
        with model_prepared(ex.model):
            ex.context(batch, [tid]).reference_forward()

    def fwd_one():
        with torch.no_grad():
            T._f_last(T.W[T.ids].detach())

    def fwd_two():
        with torch.no_grad():
            T._f_last(torch.cat([T.W[T.ids].detach()] * 2))

    def prepared():
        with model_prepared(ex.model):
            pass

    def encode_batch():
        e = ex.encode(prompt)
        ex.build_batch([e])

    def result_build():
        [ex.tokenizer.decode([i]) for i in ids]
        ex.tokenizer.convert_ids_to_tokens(ids)

    print("\npieces (median ms): " + ", ".join(
        f"{k} {piece(f):.1f}" for k, f in (
            ("bare fwd+bwd", lambda: T.bound("saliency")), ("reference forward [x; x'] + full logits", ref_fwd),
            ("no-grad forward of x alone", fwd_one), ("no-grad forward of [x; x']", fwd_two),
            ("model_prepared enter/exit", prepared), ("encode + build_batch", encode_batch),
            ("decode tokens for the result", result_build))))
    return [{"method": m, "ours_ms": mo * 1e3, "bare_ms": mb * 1e3, "ratio": mo / mb, "calls": args.calls} for m, mo, mb in rows]


# ============================================================================================
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=["long", "nsteps", "tight"], default=None)
    ap.add_argument("--lengths", default="1024,2048,4096")
    ap.add_argument("--long-steps", type=int, default=2, help="n_steps actually run at long L (below 50 the time is extrapolated to 50; 50 = one full, measured run)")
    ap.add_argument("--long-ibs", type=int, default=1)
    ap.add_argument("--budget-gib", type=float, default=16.0, help="address-space cap of each long-sequence child")
    ap.add_argument("--nsteps-L", type=int, default=64)
    ap.add_argument("--nsteps-ibs", type=int, default=10)
    ap.add_argument("--calls", type=int, default=30, help="calls per method in the tight loop")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0 = torch default); see bench_peers.py")
    ap.add_argument("--out", default=None)
    # worker
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--L", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--n-steps", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--ibs", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--options", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--json", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker_long(args)
    import machine

    info = machine.print_header(argv, script=__file__, threads=args.threads or "default")
    results = {"machine": info, "args": vars(args)}  # the command, as bench_peers records it
    if args.only in (None, "tight"):
        results["tight"] = tight(args)
    if args.only in (None, "nsteps"):
        rows = [run_long(args.nsteps_L, n, args.nsteps_ibs, args.threads) for n in (50, 200)]
        results["nsteps"] = rows
        print(f"\nAIEG peak memory against n_steps, L={args.nsteps_L}, internal_batch_size={args.nsteps_ibs}:\n")
        print("| n_steps | wall s | RSS loaded MiB | peak RSS MiB | peak − loaded MiB |")
        print("|---|---|---|---|---|")
        for r in rows:
            if r.get("ok"):
                print(f"| {r['n_steps']} | {r['wall_s']:.1f} | {r['rss_loaded_mib']:.0f} | {r['ru_maxrss_mib']:.0f} | {r['ru_maxrss_mib'] - r['rss_loaded_mib']:.0f} |")
            else:
                print(f"| {r['n_steps']} | failed: {r.get('error')} | | | |")
    if args.only in (None, "long"):
        rows = []
        for L in [int(x) for x in args.lengths.split(",")]:
            rows.append(run_long(L, args.long_steps, args.long_ibs, args.threads, budget_gib=args.budget_gib))
            if (L >= 4096 and args.long_steps < 50) or not rows[-1].get("ok"):
                # the path without eager attention (no attention term): what the gradient passes need with SDPA
                rows.append(run_long(L, args.long_steps, args.long_ibs, args.threads, {"attn_layers": "none"}, budget_gib=args.budget_gib))
        results["long"] = rows
        how = "measured" if args.long_steps == 50 else "time per point measured, n_steps=50 EXTRAPOLATED"
        print(f"\nAIEG on SmolLM2-135M-Instruct, long inputs, n_steps={args.long_steps} run ({how}), "
              f"internal_batch_size={args.long_ibs}, address-space cap {args.budget_gib} GiB per run:\n")
        print(long_table(rows))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
