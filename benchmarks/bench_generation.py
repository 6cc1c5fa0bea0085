"""Attribution of generated text: our shared path vs our own per-step loop vs Inseq.

Setting (issue "Grad-ELLM, attention baselines, and per-step attribution of generated text"):
the embedded SmolLM2-135M-Instruct, a 64-token prompt (shipped SST-2 sentences), 16 generated
tokens (greedy, decoded once; every run then explains exactly those token ids by teacher
forcing), CPU.

* ``shared``   — ``Explainer.attribute_generation(..., shared=True)`` (default);
* ``per_step`` — the same method called once per generated token on its own prefix (our own
  loop: one ``Explainer`` method call per step, batch of one);
* ``inseq``    — Inseq 0.7.1 with the same method and step count where it has one
  (``integrated_gradients``, ``saliency``, ``input_x_gradient``, ``attention``), the target logit
  (``attributed_fn="logit"``), forced decoding of the same continuation text.

The tools alternate within each run (the order rotated from run to run), so that a change of
load on a shared machine hits them alike; Inseq's model wrapper is made once per method, before
the timed calls. Prints wall-time medians over ``--runs`` runs, ratios (of the medians, and
Inseq / shared per run), and the rank agreement (Spearman, per
row over the attributed prompt tokens, averaged) of the scores between the runs that compute
the same quantity. Usage::

    python benchmarks/bench_generation.py [--runs 3] [--n-steps 10] [--methods ...] [--no-inseq]

Inseq is optional (``pip install --no-deps inseq`` plus captum jaxtyping "typeguard<=2.13.3"
treescope rich matplotlib); without it that column is skipped.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

import aieg_fast
from aieg_fast import METHODS, get_method
from aieg_fast.core.context import run_method
from aieg_fast.datasets import sst2_sample
from aieg_fast.verify import spearman

sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine  # noqa: E402

PROMPT_TOKENS = 64
NEW_TOKENS = 16
#: options that match Inseq's settings: its integrated_gradients uses Gauss-Legendre points and
#: interpolates the whole prefix, generated tokens included (its baseline is set to our reference token)
METHOD_OPTIONS = {"integrated_gradients": {"integration": "gausslegendre", "interpolate_generated": True}}


def make_prompt(ex) -> str:
    text = ""
    for s, _ in sst2_sample():
        cand = (text + " " + s.strip()).strip()
        if len(ex.tokenizer(cand, add_special_tokens=False)["input_ids"]) > PROMPT_TOKENS:
            break
        text = cand
    ids = ex.tokenizer(text, add_special_tokens=False)["input_ids"]
    # pad with words up to exactly PROMPT_TOKENS tokens
    while len(ids) < PROMPT_TOKENS:
        text += " good"
        ids = ex.tokenizer(text, add_special_tokens=False)["input_ids"]
    return text


def per_step(ex, prompt, gen_ids, method, n_steps, ibs, options):
    """Our own loop: the method on each prefix alone (batch of one)."""
    options = dict(options)
    interp = options.pop("interpolate_generated", False)
    prompt_ids, prompt_fixed = ex.encode(prompt)
    rows = []
    for t, y in enumerate(gen_ids):
        batch = ex.build_batch([(prompt_ids + gen_ids[:t], prompt_fixed + [not interp] * t)])
        ctx = ex.context(batch, [y], n_steps=n_steps, internal_batch_size=ibs)
        m = get_method(method)
        out, _ = run_method(m, ctx, m.options(**options))
        rows.append(out.scores[0][: len(prompt_ids)].detach().float().cpu())
    return torch.stack(rows)


_INSEQ_MODELS = {}


def inseq_model(model, tok, method, ref_token_id):
    """Inseq's wrapper of ``model`` for ``method``, made once per method (outside the timed
    calls, as bench_peers.py does)."""
    key = (id(model), method)
    if key not in _INSEQ_MODELS:
        import inseq

        from bench_peers import copy_tokenizer

        if tok.unk_token_id != ref_token_id:  # Inseq's IG baseline is the UNK token: make it our reference token
            tok = copy_tokenizer(tok)
            tok.unk_token = tok.convert_ids_to_tokens(ref_token_id)
        _INSEQ_MODELS[key] = inseq.load_model(model, method, tokenizer=tok)
    return _INSEQ_MODELS[key]


def run_inseq(model, tok, prompt, gen_text, method, n_steps, ibs, ref_token_id):
    m = inseq_model(model, tok, method, ref_token_id)
    kw = dict(generated_texts=prompt + gen_text, attributed_fn="logit", show_progress=False, skip_special_tokens=False)
    if method == "integrated_gradients":  # Inseq's (Captum's) default rule, Gauss-Legendre, as ours below
        kw.update(n_steps=n_steps, internal_batch_size=ibs)
    out = m.attribute(prompt, **kw)
    a = out.sequence_attributions[0].target_attributions  # [L_total, T, (d)]
    if a.dim() == 3:
        a = a.sum(-1) if method != "saliency" else a.norm(dim=-1)
    return a.T.float()  # [T, L_total]


def run_inseq_eager(ex, prompt, gen_text, method, n_steps, ibs):
    """:func:`run_inseq`, with the model switched to eager attention for Inseq's attention
    method (which reads the attention probabilities) and back."""
    if method == "attention":
        ex.model.set_attn_implementation("eager")
    try:
        return run_inseq(ex.model, ex.tokenizer, prompt, gen_text, method, n_steps, ibs, ex.ref_token_id)
    finally:
        if method == "attention":
            ex.model.set_attn_implementation("sdpa")


def timed_alternating(fns, runs):
    """Time every tool ``runs`` times, the tools alternating within each run (the order rotated
    from run to run), so that a change of load on a shared machine hits them alike.

    Returns:
        {name: (median s, min s, max s, the last result, [s per run])}
    """
    names = list(fns)
    times = {n: [] for n in names}
    last = {}
    for r in range(runs):
        for n in names[r % len(names):] + names[: r % len(names)]:
            t = time.perf_counter()
            last[n] = fns[n]()
            times[n].append(time.perf_counter() - t)
        print(f"  run {r + 1}/{runs}: " + ", ".join(f"{n} {times[n][-1]:.2f}s" for n in names), flush=True)
    return {n: (statistics.median(times[n]), min(times[n]), max(times[n]), last[n], times[n]) for n in names}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--n-steps", type=int, default=10, help="steps for integrated_gradients / aieg")
    p.add_argument("--internal-batch-size", type=int, default=10)
    p.add_argument("--methods", default="saliency,input_x_gradient,attention,scaled_attention,grad_ellm,integrated_gradients")
    p.add_argument("--no-inseq", action="store_true")
    p.add_argument("--no-per-step", action="store_true")
    args = p.parse_args(argv)
    machine.print_header(argv, script=__file__)
    torch.manual_seed(0)
    ex = aieg_fast.load_model()
    prompt = make_prompt(ex)
    res = ex.attribute_generation(prompt, max_new_tokens=NEW_TOKENS, method="attention")
    gen_ids = res.info["generated_ids"]
    gen_text = res.info["generated_text"]
    Lp = res.info["prompt_length"]
    print(f"# model {ex.name}; prompt {Lp} tokens; {len(gen_ids)} generated tokens: {gen_text!r}")
    print(f"# torch {torch.__version__}, threads {torch.get_num_threads()}, extension {aieg_fast.HAS_EXT}, runs {args.runs}, n_steps {args.n_steps}")
    have_inseq = False
    if not args.no_inseq:
        try:
            import inseq  # noqa: F401

            have_inseq = True
        except Exception as err:  # pragma: no cover - optional
            print(f"# inseq not available: {err}")
    inseq_methods = {"integrated_gradients", "saliency", "input_x_gradient", "attention"}
    rows = []
    for method in [m for m in args.methods.split(",") if m]:
        if method not in METHODS:
            print(f"# skip {method}: not registered")
            continue
        ns = args.n_steps
        ibs = args.internal_batch_size
        opts = METHOD_OPTIONS.get(method, {})
        fns = {"shared": lambda: ex.attribute_generation(prompt, generated_text=gen_ids, method=method, n_steps=ns, internal_batch_size=ibs, **opts)}
        if not args.no_per_step:
            fns["per_step"] = lambda: per_step(ex, prompt, gen_ids, method, ns, ibs, opts)
        if have_inseq and method in inseq_methods:
            if method == "attention":  # wrapped as it runs: with eager attention
                ex.model.set_attn_implementation("eager")
            try:
                inseq_model(ex.model, ex.tokenizer, method, ex.ref_token_id)  # wrapped before the timed calls
            finally:
                if method == "attention":
                    ex.model.set_attn_implementation("sdpa")
            fns["inseq"] = lambda: run_inseq_eager(ex, prompt, gen_text, method, ns, ibs)
        res = timed_alternating(fns, args.runs)
        sh = res["shared"]
        ours = sh[3].scores[:, :Lp]
        line = {"method": method, "shared": sh[0], "shared_range": (sh[1], sh[2]), "shared_runs": sh[4]}
        if "per_step" in res:
            ps = res["per_step"]
            line["per_step"] = ps[0]
            line["per_step_runs"] = ps[4]
            mask = torch.isfinite(ours)
            line["max_abs_diff_per_step"] = float((ours[mask] - ps[3][mask]).abs().max())
        if "inseq" in res:
            iq = res["inseq"]
            line["inseq"] = iq[0]
            line["inseq_runs"] = iq[4]
            line["inseq_over_shared_per_run"] = [b / a for a, b in zip(sh[4], iq[4])]
            ia = iq[3]
            rhos = []
            T = min(ia.shape[0], ours.shape[0])
            for t in range(T):
                a = ours[t][torch.isfinite(ours[t])]
                b = ia[t][: Lp][torch.isfinite(ours[t])] if ia.shape[1] >= Lp else None
                if b is not None and a.numel() == b.numel() and a.numel() > 1:
                    rhos.append(spearman(a, b))
            line["spearman_inseq"] = statistics.mean(rhos) if rhos else float("nan")
        rows.append(line)
        print(line, flush=True)
    print()
    print("| method | shared (s) | per-step loop (s) | per-step / shared | Inseq (s) | Inseq / shared | Inseq / shared, per run | Spearman vs Inseq | max abs diff vs per-step |")
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|")
    for r in rows:
        ps, iq, sh = r.get("per_step"), r.get("inseq"), r["shared"]
        cells = [
            r["method"],
            f"{sh:.2f}",
            "" if ps is None else f"{ps:.2f}",
            "" if ps is None else f"{ps / sh:.1f}x",
            "" if iq is None else f"{iq:.2f}",
            "" if iq is None else f"{iq / sh:.2f}x",
            "" if iq is None else ", ".join(f"{x:.2f}" for x in r["inseq_over_shared_per_run"]),
            "" if iq is None else f"{r['spearman_inseq']:.3f}",
            "" if ps is None else f"{r['max_abs_diff_per_step']:.1e}",
        ]
        print("| " + " | ".join(cells) + " |")

if __name__ == "__main__":
    sys.exit(main())
