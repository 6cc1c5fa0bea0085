"""Benchmark: HETA (issue 20) against a straightforward implementation, and next to IG at 50 steps.

The straightforward implementation below is written for this comparison only (it is not part of
the package): it does what the public HETA code does, one step at a time — one model forward
returning the logits of every position, the attentions and the hidden states; the gate with a
full L×L rollout per head; one Hessian-vector product per (token, probe), each read back to the
host with ``.item()``; one masked forward per token. It computes the ``preset="official"``
quantities (per-head rollout, values from the residual stream before the norm, M_T normalised
over the context) with the same probes, so both give the same scores (checked: max |Δ|); unlike
the public code it maps grouped-query heads correctly (SmolLM2 has 9 query and 3 KV heads).

On a CPU a full HETA call is long (n·m HVPs of ≈ two backward passes each: at L = 128 with
m = 10, 1280 HVPs), so by default only the last ``--scored`` tokens of each input are
attributed (the tokens before them are a fixed template prefix: every forward still runs on all
L tokens). The report gives the measured times of both implementations on that work, the cost
per HVP and per masked forward, and an extrapolation (labelled) to every token scored with m = 10.

    python benchmarks/bench_heta.py                        # L = 32 and 128, m = 10, a few tokens scored
    python benchmarks/bench_heta.py --lengths 32 --scored 32 --probes 10   # a full HETA call (slow on a CPU)
"""
from __future__ import annotations

import argparse
import platform
import time

import torch

import aieg_fast
from aieg_fast.core.curvature import rademacher_probes
from aieg_fast.core.model_state import model_prepared

WORDS = ("it 's a charming and often affecting journey . unflinchingly bleak and desperate . the acting , costumes , "
         "music , cinematography and sound are all astounding given the production 's austere locales . ").split()


def make_input(ex, L: int, scored: int):
    """(template, text) whose encoding has about L tokens, the last ``scored`` of them attributable."""
    words = list(WORDS)
    while len(ex.tokenizer(" ".join(words))["input_ids"]) < L + 8:
        words += WORDS
    for cut in range(len(words), 0, -1):
        if len(ex.tokenizer(" ".join(words[:cut]))["input_ids"]) <= L:
            words = words[:cut]
            break
    for k in range(1, len(words)):
        text = " ".join(words[-k:])
        if len(ex.tokenizer(" " + text, add_special_tokens=False)["input_ids"]) >= scored:
            return " ".join(words[:-k]) + " {text}", text
    return "{text}", " ".join(words)


# ------------------------------------------------------------------------------------------
# the straightforward implementation (comparison only)
# ------------------------------------------------------------------------------------------
def straightforward_heta(ex, ids, fixed, target: int, m: int, seed: int = 0, beta: float = 0.5, gamma: float = 0.5):
    """HETA (official preset) one step at a time; returns (scores Tensor[L], seconds per phase)."""
    model, ad = ex.model, ex.adapter
    t0 = time.perf_counter()
    ids_t = torch.tensor([ids])
    L, H, Hkv, hd = len(ids), ad.n_heads, ad.n_kv_heads, ad.head_dim
    scored = [i for i, f in enumerate(fixed) if not f]
    times = {}
    with model_prepared(model, eager=True):
        E = ad.embeddings(ids_t).detach().clone().requires_grad_(True)
        with torch.enable_grad():
            out = model(inputs_embeds=E, output_attentions=True, output_hidden_states=True, use_cache=False)
        t = L - 1
        # gate: per head, R <- Â R over full matrices; value norms from the residual stream
        with torch.no_grad():
            norms = []  # [layer][head] -> Tensor[L]
            for l in range(ad.n_layers):
                x = out.hidden_states[l][0].float()  # the residual stream entering block l
                Wv = ad.attn_modules[l].v_proj.weight.float()
                Wo = ad.attn_modules[l].o_proj.weight.float()
                per_head = []
                for h in range(H):
                    g = h // (H // Hkv)
                    v = x @ Wv[g * hd : (g + 1) * hd].T
                    per_head.append((v @ Wo[:, h * hd : (h + 1) * hd].T).abs().sum(-1))
                norms.append(per_head)
            mt = torch.zeros(L)
            eye = torch.eye(L)
            for h in range(H):
                R = eye.clone()
                for l in range(ad.n_layers):
                    A = 0.5 * out.attentions[l][0, h].float() + 0.5 * eye
                    R = (A / A.sum(-1, keepdim=True)) @ R
                    mt += R[t] * norms[l][h]
            mt = mt.clamp_min(0)
            mt = mt / mt.sum()
        times["gate"] = time.perf_counter() - t0
        # curvature: one HVP at a time, each read back with .item()
        t1 = time.perf_counter()
        logp = torch.log_softmax(out.logits[0, t].float(), -1)[target]
        (grad,) = torch.autograd.grad(logp, E, create_graph=True)
        times["curvature_graph"] = time.perf_counter() - t1
        S = torch.zeros(L)
        for i in scored:
            r = rademacher_probes([i], m, E.shape[-1], seed)[0]
            acc = 0.0
            for k in range(m):
                R = torch.zeros_like(E)
                R[0, i] = r[k]
                (hv,) = torch.autograd.grad((grad * R).sum(), E, retain_graph=True)
                acc += hv[0, i].abs().sum().item()
            S[i] = acc / m
        times["curvature"] = time.perf_counter() - t1
        # information: one masked forward per token (zero embedding)
        t2 = time.perf_counter()
        Ikl = torch.zeros(L)
        with torch.no_grad():
            p = torch.softmax(out.logits[0, t].float(), -1)
            for i in scored:
                Xm = E.detach().clone()
                Xm[0, i] = 0.0
                q = torch.softmax(model(inputs_embeds=Xm, use_cache=False).logits[0, t].float(), -1)
                Ikl[i] = (p * (p.log() - q.log())).sum()
        times["information"] = time.perf_counter() - t2
    keep = torch.tensor([not f for f in fixed])
    scores = torch.where(keep, mt * (beta * S + gamma * Ikl), torch.zeros(L))
    times["total"] = time.perf_counter() - t0
    return scores, times


# ------------------------------------------------------------------------------------------
def run_one(ex, L: int, scored: int, m: int, repeats: int = 1):
    template, text = make_input(ex, L, scored)
    ids, fixed = ex.encode(text, template)
    n = sum(not f for f in fixed)
    with torch.no_grad():
        target = int(ex.model(torch.tensor([ids])).logits[0, -1].argmax())
    res_ours, res_straight = [], []
    for rep in range(repeats):  # alternate the order: straightforward first, then ours first, ...
        for which in (("s", "o") if rep % 2 == 0 else ("o", "s")):
            if which == "o":
                t = time.perf_counter()
                r = ex.attribute(text, template=template, method="heta", preset="official", n_probes=m, target=target)
                res_ours.append((time.perf_counter() - t, r))
            else:
                res_straight.append(straightforward_heta(ex, ids, fixed, target, m))
    t_o = min(x[0] for x in res_ours)
    t_s = min(x[1]["total"] for x in res_straight)
    r = res_ours[0][1]
    s_scores = res_straight[0][0]
    diff = float((r.scores - s_scores).abs().max())
    scale = float(s_scores.abs().max())
    t = time.perf_counter()
    ig = ex.attribute(text, template=template, method="integrated_gradients", n_steps=50, target=target)
    t_ig = time.perf_counter() - t
    t_ig_full = t_ig  # IG attributes every token in one call; its cost does not depend on how many are scored
    tim_o = min((x[1].timing for x in res_ours), key=lambda d: d["total"])
    tim_s = min((x[1] for x in res_straight), key=lambda d: d["total"])
    per = {
        "hvp_ours": (tim_o["curvature"] - tim_o["curvature_graph"]) / (n * m),
        "hvp_straight": (tim_s["curvature"] - tim_s["curvature_graph"]) / (n * m),
        "graph_ours": tim_o["curvature_graph"], "graph_straight": tim_s["curvature_graph"],
        "fwd_ours": tim_o["information"] / n, "fwd_straight": tim_s["information"] / n,
        "fixed_ours": tim_o["reference_gate"] + tim_o["gate"], "fixed_straight": tim_s["gate"],
    }
    n_full = L  # every token scored
    full = {k: per[f"fixed_{k}"] + per[f"graph_{k}"] + n_full * (10 * per[f"hvp_{k}"] + per[f"fwd_{k}"]) for k in ("ours", "straight")}
    del ig
    return dict(L=len(ids), n=n, m=m, t_ours=t_o, t_straight=t_s, ratio=t_s / t_o, max_abs_diff=diff, rel_diff=diff / scale,
                t_ig50=t_ig_full, per=per, full=full, n_hvp=r.info["n_hvp"], n_forwards=r.info["n_forwards"],
                hvp_batches=r.info["hvp_batches"], timing_ours=tim_o, timing_straight=tim_s)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", default="32,128")
    ap.add_argument("--scored", default="4,2", help="tokens scored per length (comma-separated, one per length)")
    ap.add_argument("--probes", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=1, help="runs of each implementation (alternating order); the fastest counts")
    args = ap.parse_args()
    lengths = [int(x) for x in args.lengths.split(",")]
    scored = [int(x) for x in args.scored.split(",")]
    scored += [scored[-1]] * (len(lengths) - len(scored))
    ex = aieg_fast.load_model()
    print(f"model: {ex.name}  torch {torch.__version__}  threads {torch.get_num_threads()}  {platform.processor() or platform.machine()}")
    rows = []
    for L, k in zip(lengths, scored):
        r = run_one(ex, L, k, args.probes, args.repeats)
        rows.append(r)
        p = r["per"]
        print(f"\nL = {r['L']}, {r['n']} tokens scored, m = {r['m']}: {r['n_hvp']} HVPs in {r['hvp_batches']} batched calls, "
              f"{r['n_forwards']} forwards")
        print(f"  straightforward {r['t_straight']:.2f} s   ours {r['t_ours']:.2f} s   ratio {r['ratio']:.2f}x   "
              f"max |diff| {r['max_abs_diff']:.2e} (relative {r['rel_diff']:.1e})")
        print(f"  per HVP: straightforward {p['hvp_straight'] * 1e3:.1f} ms, ours {p['hvp_ours'] * 1e3:.1f} ms "
              f"({p['hvp_straight'] / p['hvp_ours']:.2f}x); per masked forward: {p['fwd_straight'] * 1e3:.1f} ms vs "
              f"{p['fwd_ours'] * 1e3:.1f} ms ({p['fwd_straight'] / p['fwd_ours']:.2f}x); gate: {p['fixed_straight']:.2f} s vs "
              f"{p['fixed_ours']:.2f} s")
        f = r["full"]
        print(f"  extrapolated, every token scored with m = 10: straightforward {f['straight']:.0f} s, ours {f['ours']:.0f} s "
              f"({f['straight'] / f['ours']:.2f}x); IG 50 steps (measured) {r['t_ig50']:.2f} s -> HETA = "
              f"{f['ours'] / r['t_ig50']:.0f}x IG")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
