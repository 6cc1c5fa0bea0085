"""Benchmark: time to a converged IG, ``n_steps="auto"`` against fixed step counts (issue 18).

"Converged" = relative completeness error |Σ IG − (F(x) − F(x′))| / |F(x) − F(x′)| ≤ the
tolerance (default 0.05) and Spearman ≥ 0.99 against a reference IG of ``--ref-steps`` uniform
trapezoid points (default 513, i.e. 512 intervals).

For each sentence, in one process and one after the other (so the ratios are side by side):

1. the reference: one pass over ``--ref-steps`` uniform points (forward + backward each), keeping
   F and the per-token contribution Σ_d ∇F ⊙ Δ of every point. Because the trapezoid grids of
   9, 17, 33, …, 513 points are subsets of it, this pass also gives, exactly, what a fixed
   ``n_steps`` trapezoid call of each of those sizes returns (the "trapezoid sweep");
2. ``n_steps="auto"`` with ``refine="adaptive"`` and with ``refine="uniform"`` (timed calls);
3. a fixed trapezoid call at the smallest sweep size that converges on this sentence (timed);
4. Gauss–Legendre, the default rule of Captum and of Inseq (our ``integration="gausslegendre"``
   has Captum's points and weights), at n = 8, 16, 32, … until it converges (timed calls).
   Captum and Inseq themselves are not run by this script; at equal settings they took
   0.98–1.10× and 1.13–1.19× our time (``bench_peers.py``, benchmarks/RESULTS.md), so the rule's
   step count, not the tool, sets their time to convergence.

Reported: per method the steps and seconds to convergence per sentence; for the fixed rules also
the one n_steps that converges on every sentence (what a user who must pick one n_steps for a
data set needs); error-against-time curves (``--plot``).

    nice -n 19 env OMP_NUM_THREADS=1 python benchmarks/bench_auto_steps.py --n 20 --out benchmarks/auto_steps/sst2_20.json --plot benchmarks/auto_steps.png
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

from aieg_fast.verify import spearman

sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine  # noqa: E402

HERE = Path(__file__).resolve().parent
TEMPLATE = "Review: {text}\nIs this review positive or negative? Answer:"


def rel_error(scores: torch.Tensor, dF: float) -> float:
    return abs(float(scores.sum()) - dF) / max(abs(dF), 1e-6)


def dense_pass(ex, text: str, target: str, n: int, ibs: int):
    """F [n] and token contributions [n, L] at linspace(0, 1, n), the attributable mask, seconds."""
    from aieg_fast.core.model_state import model_prepared
    from aieg_fast.core.path import path_chunks

    ids, fixed, full, _ = ex.encode_with_offsets(text, TEMPLATE)
    tid = ex.resolve_target(target, context=full)["id"]
    batch = ex.build_batch([(ids, fixed)])
    ctx = ex.context(batch, [tid], internal_batch_size=ibs)
    a = torch.linspace(0, 1, n, dtype=torch.float64)
    F = torch.empty(n, dtype=torch.float64)
    C = torch.empty(n, len(ids))
    delta = batch.delta[0].float()
    t = time.perf_counter()
    with model_prepared(ex.model):
        for _, ms, f, g in path_chunks(ctx, [a.float()], True):
            F[ms] = f.double()
            C[ms] = torch.einsum("mld,ld->ml", g.float(), delta)
    return F, C, ~batch.fixed[0], time.perf_counter() - t


def trapezoid_subset(F, C, n: int):
    """The fixed-n trapezoid IG from the dense grid (n − 1 must divide its intervals)."""
    stride = (F.numel() - 1) // (n - 1)
    c = C[::stride]
    w = torch.full((n,), 1.0 / (n - 1), dtype=torch.float64)
    w[0] = w[-1] = 0.5 / (n - 1)
    return (w.float() @ c), float(F[-1] - F[0])


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def run_sentence(ex, text, args):
    kw = dict(method="integrated_gradients", template=TEMPLATE, target=args.target, internal_batch_size=args.ibs)
    F, C, valid, t_ref = dense_pass(ex, text, args.target, args.ref_steps, args.ibs)
    ref, dF = trapezoid_subset(F, C, args.ref_steps)
    rec = {"text": text, "L": int(valid.numel()), "dF": dF, "ref_seconds": t_ref, "ref_error": rel_error(ref, dF),
           "seconds_per_point": t_ref / args.ref_steps, "ref_scores": ref.tolist(), "attributable": valid.tolist()}

    def judge(scores):
        err, rho = rel_error(scores, dF), spearman(scores[valid], ref[valid])
        return {"error": err, "spearman": rho, "ok": err <= args.tolerance and rho >= args.min_spearman}

    sweep = {}
    n = 9
    while n <= args.ref_steps:
        s, _ = trapezoid_subset(F, C, n)
        sweep[n] = judge(s)
        n = 2 * n - 1
    rec["trapezoid_sweep"] = sweep
    for refine in ("adaptive", "uniform"):
        r, sec = timed(lambda: ex.attribute(text, n_steps="auto", tolerance=args.tolerance, max_steps=args.max_steps, refine=refine, **kw))
        rec[f"auto_{refine}"] = dict(judge(r.scores), seconds=sec, steps=r.info["n_steps_used"], converged=r.info["converged"],
                                     history=r.info["error_history"])
    n_ok = next((n for n, v in sweep.items() if v["ok"]), None)
    if n_ok is not None and n_ok < args.ref_steps:
        r, sec = timed(lambda: ex.attribute(text, n_steps=n_ok, **kw))
        rec["trapezoid_timed"] = dict(judge(r.scores), steps=n_ok, seconds=sec)
    gl = {}
    n = 8
    while n <= args.gl_max:
        r, sec = timed(lambda: ex.attribute(text, n_steps=n, integration="gausslegendre", **kw))
        gl[n] = dict(judge(r.scores), seconds=sec)
        if gl[n]["ok"]:
            break
        n *= 2
    rec["gausslegendre_sweep"] = gl
    return rec


def summarise(recs, args):
    out = {}
    for refine in ("adaptive", "uniform"):
        rs = [r[f"auto_{refine}"] for r in recs]
        out[f"auto_{refine}"] = {"seconds": sum(r["seconds"] for r in rs), "ok": sum(r["ok"] for r in rs),
                                 "converged": sum(r["converged"] for r in rs),
                                 "steps_median": statistics.median(r["steps"] for r in rs),
                                 "steps_max": max(r["steps"] for r in rs)}
    # fixed trapezoid: per sentence the oracle n (timed), and the one n that converges everywhere
    sizes = sorted(recs[0]["trapezoid_sweep"], key=int)
    common = next((n for n in sizes if all(r["trapezoid_sweep"][n]["ok"] for r in recs)), None)
    timed_rs = [r.get("trapezoid_timed") for r in recs]
    out["trapezoid_oracle"] = {"ok": sum(t is not None for t in timed_rs),
                               "seconds": sum(t["seconds"] for t in timed_rs if t is not None),
                               "steps": [None if t is None else t["steps"] for t in timed_rs]}
    out["trapezoid_one_n"] = {"n": common, "seconds_estimated": None if common is None else
                              sum(int(common) * r["seconds_per_point"] for r in recs)}
    gl_ok = [next((dict(v, n=int(n)) for n, v in r["gausslegendre_sweep"].items() if v["ok"]), None) for r in recs]
    out["gausslegendre_oracle"] = {"ok": sum(g is not None for g in gl_ok),
                                   "seconds": sum(g["seconds"] for g in gl_ok if g is not None),
                                   "steps": [None if g is None else g["n"] for g in gl_ok]}
    return out


def plot(recs, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, r in enumerate(recs):
        tp = r["seconds_per_point"]
        sw = r["trapezoid_sweep"]
        ax.plot([int(n) * tp for n in sw], [sw[n]["error"] for n in sw], "-", color="tab:gray", alpha=0.4,
                label="fixed trapezoid (sweep)" if i == 0 else None)
        gl = r["gausslegendre_sweep"]
        ax.plot([v["seconds"] for v in gl.values()], [v["error"] for v in gl.values()], "-", color="tab:orange", alpha=0.5,
                label="fixed Gauss–Legendre (Captum/Inseq default rule)" if i == 0 else None)
        a = r["auto_adaptive"]
        ax.plot([a["seconds"]], [a["error"]], "o", color="tab:blue", ms=4, label="ours, n_steps='auto'" if i == 0 else None)
    ax.axhline(0.05, color="k", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("seconds per sentence (one thread)")
    ax.set_ylabel("|Σ IG − ΔF| / |ΔF|")
    ax.set_title("IG completeness error against time, SmolLM2-135M, SST-2")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def gl_followup(ex, path: str, n: int, args):
    """Gauss–Legendre with ``n`` points on the sentences where the stored run's sweep did not
    converge: its completeness error, and its Spearman against the stored reference scores
    when the file has them (runs before they were stored: NaN, judged on the error alone)."""
    d = json.loads(Path(path).read_text())
    out = []
    for r in d["records"]:
        if any(v["ok"] for v in r["gausslegendre_sweep"].values()):
            continue
        dF = r["dF"]
        res, sec = timed(lambda: ex.attribute(r["text"], method="integrated_gradients", template=TEMPLATE, target=args.target,
                                              internal_batch_size=args.ibs, n_steps=n, integration="gausslegendre"))
        err, rho = rel_error(res.scores, dF), float("nan")
        if "ref_scores" in r:
            valid = torch.tensor(r["attributable"])
            rho = spearman(res.scores[valid], torch.tensor(r["ref_scores"])[valid])
        out.append({"text": r["text"], "n": n, "error": err, "spearman": rho, "seconds": sec,
                    "ok": err <= args.tolerance and (rho != rho or rho >= args.min_spearman)})
        print(f"GL {n}: err {err:.3f} rho {rho:.3f} ok {out[-1]['ok']} {sec:.1f} s", flush=True)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=20, help="SST-2 dev sample sentences")
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--target", default=" positive")
    p.add_argument("--tolerance", type=float, default=0.05)
    p.add_argument("--min-spearman", type=float, default=0.99)
    p.add_argument("--max-steps", type=int, default=257)
    p.add_argument("--ref-steps", type=int, default=513, help="2^k + 1 uniform points")
    p.add_argument("--gl-max", type=int, default=128)
    p.add_argument("--ibs", type=int, default=16, help="internal batch size")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=None)
    p.add_argument("--plot", default=None)
    p.add_argument("--gl-followup", nargs=2, metavar=("JSON", "N"), default=None,
                   help="only: Gauss–Legendre with N points where the sweep stored in JSON found no n")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    info = machine.print_header(argv, script=__file__)
    warnings.simplefilter("ignore")
    import aieg_fast
    from aieg_fast.datasets import sst2_sample

    ex = aieg_fast.load_model()
    if args.gl_followup:
        out = gl_followup(ex, args.gl_followup[0], int(args.gl_followup[1]), args)
        print(json.dumps({"n": len(out), "ok": sum(o["ok"] for o in out), "err_le_tol": sum(o["error"] <= args.tolerance for o in out)}))
        if args.out:
            Path(args.out).write_text(json.dumps({"argv": sys.argv[1:], "machine": info["cpu"], "records": out}, indent=1))
        return
    recs = []
    for text, _ in sst2_sample()[args.start : args.start + args.n]:
        recs.append(run_sentence(ex, text, args))
        r = recs[-1]
        a, u = r["auto_adaptive"], r["auto_uniform"]
        ok_n = next((n for n, v in r["trapezoid_sweep"].items() if v["ok"]), None)
        gl_n = next((n for n, v in r["gausslegendre_sweep"].items() if v["ok"]), None)
        print(f"L={r['L']:3d} dF={r['dF']:+8.3f} ref err {r['ref_error']:.2g} | auto adaptive {a['steps']:3d} pts {a['seconds']:6.1f} s "
              f"err {a['error']:.3f} rho {a['spearman']:.3f} | uniform {u['steps']:3d} pts {u['seconds']:6.1f} s err {u['error']:.3f} "
              f"| trapezoid ok at {ok_n} | GL ok at {gl_n}", flush=True)
    summary = summarise(recs, args)
    print(json.dumps(summary, indent=1))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        meta = {"torch": torch.__version__, "machine": info["cpu"], "cores": info["cores"], "transformers": info["transformers"],
                "threads": torch.get_num_threads(),
                "argv": sys.argv[1:], "template": TEMPLATE}
        Path(args.out).write_text(json.dumps({"meta": meta, "args": vars(args), "summary": summary, "records": recs}, indent=1))
    if args.plot:
        plot(recs, args.plot)


if __name__ == "__main__":
    main()
