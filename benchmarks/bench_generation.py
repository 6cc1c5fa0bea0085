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

Prints wall-time medians over ``--runs`` runs, ratios, and the rank agreement (Spearman, per
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

import torch

import aieg_fast
from aieg_fast import METHODS, get_method
from aieg_fast.core.context import run_method
from aieg_fast.datasets import sst2_sample

PROMPT_TOKENS = 64
NEW_TOKENS = 16
#: options that match Inseq's settings: its integrated_gradients uses Gauss-Legendre points and
#: interpolates the whole prefix, generated tokens included (its baseline is set to our reference token)
METHOD_OPTIONS = {"integrated_gradients": {"integration": "gausslegendre", "interpolate_generated": True}}


def spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    ra, rb = a.argsort().argsort().double(), b.argsort().argsort().double()
    ra, rb = ra - ra.mean(), rb - rb.mean()
    den = float(ra.norm() * rb.norm())
    return float((ra * rb).sum()) / den if den > 0 else float("nan")


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


def run_inseq(model, tok, prompt, gen_text, method, n_steps, ibs, ref_token_id):
    import inseq

    from bench_peers import copy_tokenizer

    if tok.unk_token_id != ref_token_id:  # Inseq's IG baseline is the UNK token: make it our reference token
        tok = copy_tokenizer(tok)
        tok.unk_token = tok.convert_ids_to_tokens(ref_token_id)
    m = inseq.load_model(model, method, tokenizer=tok)
    kw = dict(generated_texts=prompt + gen_text, attributed_fn="logit", show_progress=False, skip_special_tokens=False)
    if method == "integrated_gradients":  # Inseq's (Captum's) default rule, Gauss-Legendre, as ours below
        kw.update(n_steps=n_steps, internal_batch_size=ibs)
    out = m.attribute(prompt, **kw)
    a = out.sequence_attributions[0].target_attributions  # [L_total, T, (d)]
    if a.dim() == 3:
        a = a.sum(-1) if method != "saliency" else a.norm(dim=-1)
    return a.T.float()  # [T, L_total]


def timed(fn, runs):
    times, last = [], None
    for _ in range(runs):
        t = time.perf_counter()
        last = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), min(times), max(times), last


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--n-steps", type=int, default=10, help="steps for integrated_gradients / aieg")
    p.add_argument("--internal-batch-size", type=int, default=10)
    p.add_argument("--methods", default="saliency,input_x_gradient,attention,scaled_attention,grad_ellm,integrated_gradients")
    p.add_argument("--no-inseq", action="store_true")
    p.add_argument("--no-per-step", action="store_true")
    args = p.parse_args(argv)
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
        sh = timed(lambda: ex.attribute_generation(prompt, generated_text=gen_ids, method=method, n_steps=ns, internal_batch_size=ibs, **opts), args.runs)
        ours = sh[3].scores[:, :Lp]
        line = {"method": method, "shared": sh[0], "shared_range": (sh[1], sh[2])}
        if not args.no_per_step:
            ps = timed(lambda: per_step(ex, prompt, gen_ids, method, ns, ibs, opts), args.runs)
            line["per_step"] = ps[0]
            mask = torch.isfinite(ours)
            line["max_abs_diff_per_step"] = float((ours[mask] - ps[3][mask]).abs().max())
        if have_inseq and method in inseq_methods:
            model = ex.model
            if method == "attention":
                model.set_attn_implementation("eager")
            try:
                iq = timed(lambda: run_inseq(model, ex.tokenizer, prompt, gen_text, method, ns, ibs, ex.ref_token_id), args.runs)
            finally:
                if method == "attention":
                    model.set_attn_implementation("sdpa")
            line["inseq"] = iq[0]
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
    print("| method | shared (s) | per-step loop (s) | per-step / shared | Inseq (s) | Inseq / shared | Spearman vs Inseq | max abs diff vs per-step |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        ps, iq, sh = r.get("per_step"), r.get("inseq"), r["shared"]
        cells = [
            r["method"],
            f"{sh:.2f}",
            "" if ps is None else f"{ps:.2f}",
            "" if ps is None else f"{ps / sh:.1f}x",
            "" if iq is None else f"{iq:.2f}",
            "" if iq is None else f"{iq / sh:.1f}x",
            "" if iq is None else f"{r['spearman_inseq']:.3f}",
            "" if ps is None else f"{r['max_abs_diff_per_step']:.1e}",
        ]
        print("| " + " | ".join(cells) + " |")

if __name__ == "__main__":
    sys.exit(main())
