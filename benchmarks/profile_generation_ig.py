"""Profile: where generation IG spends its time, and the batched VJP against one backward per step.

The setting of ``bench_generation.py`` (the embedded SmolLM2-135M-Instruct, a 64-token prompt,
its 16 greedy tokens teacher-forced, IG with 10 Gauss–Legendre points in one chunk of 10, the
generated tokens interpolated too): one chunk's forward over the full sequence (10 path points ×
79 positions) gives F of every step, Tensor[10, 16]; every step's input gradients then come from

* ``batched``: one backward with 16 cotangents (``core.vjp.each_row_vjp(..., batched=True)``,
  ``torch.autograd.grad(..., is_grads_batched=True)``), or
* ``per_step``: 16 backwards over the kept graph (``each_row_vjp(..., batched=False)``, what IG
  uses on a CPU).

The two alternate, ``--runs`` times each, in one process; the forward and the backward are
timed apart, and the gradients of the two ways are compared. One torch thread by default.

    python benchmarks/profile_generation_ig.py [--runs 3]
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
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0 = torch default)")
    args = ap.parse_args(argv)
    import torch

    import aieg_fast
    import bench_generation as bg
    from aieg_fast import ops
    from aieg_fast.core.model_state import model_prepared
    from aieg_fast.core.quadrature import quadrature
    from aieg_fast.core.vjp import each_row_vjp, sequence_scores

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    machine.print_header(argv, script=__file__)
    ex = aieg_fast.load_model()
    prompt = bg.make_prompt(ex)
    gen_ids = ex.attribute_generation(prompt, max_new_tokens=bg.NEW_TOKENS, method="attention").info["generated_ids"]
    prompt_ids = ex.encode(prompt)[0]
    full = prompt_ids + gen_ids[:-1]
    Lp, T = len(prompt_ids), len(gen_ids)
    seq = ex.build_batch([(full, [i in ex.special_ids for i in full])])
    E, Eb, fixed = seq.embeds[0], seq.baseline[0], seq.fixed[0]
    q, y = torch.arange(Lp - 1, Lp - 1 + T), torch.tensor(gen_ids)
    alphas, _ = quadrature("gausslegendre", 10, torch.float32)
    times = {"batched": [], "per_step": []}
    grads = {}
    print(f"# {ex.name}: {len(full)} positions, {T} steps, 10 path points; torch threads {torch.get_num_threads()}")
    with model_prepared(ex.model):
        for r in range(args.runs):
            for way in ("batched", "per_step") if r % 2 == 0 else ("per_step", "batched"):
                X = ops.interpolate_path(E, Eb, alphas, fixed).requires_grad_(True)
                t0 = time.perf_counter()
                with torch.enable_grad():
                    F = sequence_scores(ex.adapter, X, q, y, "logit")
                    t1 = time.perf_counter()
                    G = torch.stack([g for _, (g,) in each_row_vjp(F, X, T, batched=way == "batched")])
                t2 = time.perf_counter()
                times[way].append((t1 - t0, t2 - t1))
                grads[way] = G
                print(f"  run {r + 1} {way:8s}: forward {t1 - t0:.2f} s, backward {t2 - t1:.2f} s", flush=True)
    diff = float((grads["batched"] - grads["per_step"]).abs().max())
    scale = float(grads["batched"].abs().max())
    med = {w: (statistics.median(f for f, _ in v), statistics.median(b for _, b in v)) for w, v in times.items()}
    for w, (f, b) in med.items():
        print(f"{w:8s}: forward {f:.2f} s, backward {b:.2f} s (medians of {args.runs})")
    print(f"per-step backward ÷ batched backward: {med['per_step'][1] / med['batched'][1]:.3f}; "
          f"per-step backward ÷ forward: {med['per_step'][1] / T / med['per_step'][0]:.2f} per step; "
          f"max |gradient difference| {diff:.1e} (max |gradient| {scale:.1e})")


if __name__ == "__main__":
    main()
