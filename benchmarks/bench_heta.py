"""Benchmark: HETA (issue 20) against a straightforward implementation, and next to IG at 50 steps.

The straightforward implementation below is written for this comparison only (it is not part of
the package): it does what the public HETA code does, one step at a time — one model forward
returning the logits of every position, the attentions and the hidden states; the gate with a
full L×L rollout per head; one Hessian-vector product per (token, probe) on the whole sequence,
each read back to the host with ``.item()``; one whole masked forward per token. It computes the
``preset="official"`` quantities (per-head rollout, values from the residual stream before the
norm, M_T normalised over the context) with the same probes, so both give the same scores
(checked: max |Δ| on the tokens it scores); unlike the public code it maps grouped-query heads
correctly (SmolLM2 has 9 query and 3 KV heads).

Ours is timed on a full call: every token of the input attributable, m probes each. The
straightforward implementation's cost per token does not depend on the token (every HVP and
masked forward runs the whole sequence), so with ``--sample k`` it scores k tokens spread over
the input and its full-call time is extrapolated (labelled) as its fixed part plus n times its
measured cost per token; ``--sample all`` scores every token (no extrapolation). The two run in
alternating order (``--repeats``), the fastest of each counts, and the ratio comes from one run.
Times are given as CPU time of the process (the work done, with one torch thread; robust to
other jobs on a shared machine) and as wall time.

    python benchmarks/bench_heta.py                                  # L = 32 (all tokens) and 128 (4 sampled), m = 10
    python benchmarks/bench_heta.py --lengths 128 --sample all       # no extrapolation (slow on a CPU)
    python benchmarks/bench_heta.py --lengths 128 --profile          # where one token's HVPs spend their time, both ways
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

import aieg_fast
from aieg_fast.core.curvature import rademacher_probes
from aieg_fast.core.model_state import model_prepared

sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine  # noqa: E402

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
def now():
    """(wall seconds, this process's CPU seconds). On a shared machine the CPU time is the work
    done (one torch thread); the wall time also counts the waits for a core."""
    return time.perf_counter(), time.process_time()


def since(t0):
    """(wall, CPU) seconds since ``t0`` (:func:`now`)."""
    w, c = now()
    return w - t0[0], c - t0[1]


def straightforward_heta(ex, ids, fixed, target: int, m: int, tokens=None, seed: int = 0, beta: float = 0.5, gamma: float = 0.5):
    """HETA (official preset) one step at a time, S and I of ``tokens`` (default every attributable
    one); returns (scores Tensor[L], 0 at tokens not scored; (wall, CPU) seconds per phase)."""
    model, ad = ex.model, ex.adapter
    t0 = now()
    ids_t = torch.tensor([ids])
    L, H, Hkv, hd = len(ids), ad.n_heads, ad.n_kv_heads, ad.head_dim
    scored = [i for i, f in enumerate(fixed) if not f] if tokens is None else list(tokens)
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
        times["gate"] = since(t0)
        # curvature: one HVP at a time, each read back with .item()
        t1 = now()
        logp = torch.log_softmax(out.logits[0, t].float(), -1)[target]
        (grad,) = torch.autograd.grad(logp, E, create_graph=True)
        times["curvature_graph"] = since(t1)
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
        times["curvature"] = since(t1)
        # information: one masked forward per token (zero embedding)
        t2 = now()
        Ikl = torch.zeros(L)
        with torch.no_grad():
            p = torch.softmax(out.logits[0, t].float(), -1)
            for i in scored:
                Xm = E.detach().clone()
                Xm[0, i] = 0.0
                q = torch.softmax(model(inputs_embeds=Xm, use_cache=False).logits[0, t].float(), -1)
                Ikl[i] = (p * (p.log() - q.log())).sum()
        times["information"] = since(t2)
    keep = torch.zeros(L, dtype=torch.bool)
    keep[scored] = True
    scores = torch.where(keep, mt * (beta * S + gamma * Ikl), torch.zeros(L))
    times["total"] = since(t0)
    return scores, times


# ------------------------------------------------------------------------------------------
def _spread(n_scored: int, k: int):
    """k indices spread over 0 … n − 1 (first and last included), or all when k >= n."""
    if k >= n_scored:
        return list(range(n_scored))
    return sorted({round(j * (n_scored - 1) / (k - 1)) for j in range(k)}) if k > 1 else [n_scored // 2]


def run_one(ex, L: int, sample, m: int, repeats: int = 1):
    template, text = make_input(ex, L, L)
    ids, fixed = ex.encode(text, template)
    attr = [i for i, f in enumerate(fixed) if not f]
    n = len(attr)
    tokens = [attr[j] for j in _spread(n, n if sample == "all" else int(sample))]
    with torch.no_grad():
        target = int(ex.model(torch.tensor([ids])).logits[0, -1].argmax())
    res_ours, res_straight = [], []
    for rep in range(repeats):  # alternate the order: straightforward first, then ours first, ...
        for which in (("s", "o") if rep % 2 == 0 else ("o", "s")):
            if which == "o":
                t = now()
                r = ex.attribute(text, template=template, method="heta", preset="official", n_probes=m, target=target)
                res_ours.append((since(t), r))
            else:
                res_straight.append(straightforward_heta(ex, ids, fixed, target, m, tokens))
            print(f"  [{which} done]", flush=True)
    out = dict(L=len(ids), n=n, m=m, k=len(tokens), extrapolated=len(tokens) < n)
    for c, clock in enumerate(("wall", "cpu")):  # the fastest run of each, by each clock
        t_o = min(x[0][c] for x in res_ours)
        tim_s = min((x[1] for x in res_straight), key=lambda d: d["total"][c])
        fixed_s = tim_s["gate"][c] + tim_s["curvature_graph"][c]
        per_token = (tim_s["curvature"][c] - tim_s["curvature_graph"][c] + tim_s["information"][c]) / len(tokens)
        t_s = fixed_s + n * per_token  # = the measured total when every token is scored
        out[clock] = dict(ours=t_o, straight=t_s, measured_straight=tim_s["total"][c], ratio=t_s / t_o, per_token=per_token,
                          gate=tim_s["gate"][c], graph=tim_s["curvature_graph"][c])
    r = res_ours[0][1]
    s_scores = res_straight[0][0]
    sel = torch.tensor(tokens)
    diff = float((r.scores[sel] - s_scores[sel]).abs().max())
    scale = float(s_scores[sel].abs().max())
    t = now()
    ex.attribute(text, template=template, method="integrated_gradients", n_steps=50, target=target)
    out.update(max_abs_diff=diff, rel_diff=diff / scale, ig50=since(t), n_hvp=r.info["n_hvp"], n_forwards=r.info["n_forwards"],
               hvp_batches=r.info["hvp_batches"], timing_ours=min((x[1].timing for x in res_ours), key=lambda d: d["total"]))
    return out


def profile_hvps(ex, L: int, m: int, top: int = 8):
    """torch.profiler tables of one token's m HVPs (the middle token): the straightforward way
    (whole sequence, one double backward per probe, full logits) and ours (from the token on,
    one batched double backward)."""
    from torch.profiler import ProfilerActivity, profile

    from aieg_fast.core.curvature import token_hvp_l1

    template, text = make_input(ex, L, L)
    ids, _ = ex.encode(text, template)
    ad, model = ex.adapter, ex.model
    i = len(ids) // 2
    E0 = ad.embeddings(torch.tensor([ids])).detach()
    with torch.no_grad():
        target = int(model(torch.tensor([ids])).logits[0, -1].argmax())
    r = rademacher_probes([i], m, E0.shape[-1], 0)

    def straight():
        E = E0.clone().requires_grad_(True)
        with torch.enable_grad():
            out = model(inputs_embeds=E, use_cache=False)
            (g,) = torch.autograd.grad(torch.log_softmax(out.logits[0, -1].float(), -1)[target], E, create_graph=True)
            for k in range(m):
                R = torch.zeros_like(E)
                R[0, i] = r[0, k]
                (hv,) = torch.autograd.grad((g * R).sum(), E, retain_graph=True)
                hv[0, i].abs().sum().item()

    def ours():
        kv = ad.prefix_keys_values(E0)

        def f(start, rows):
            return torch.log_softmax(ad.full_logits(ad.hidden_last_after(kv, start, rows)).float(), -1)[:, target]

        token_hvp_l1(f, E0[0], [i], r, 10 ** 9, True)

    with model_prepared(model, eager=True):
        for name, fn in (("straightforward", straight), ("ours", ours)):
            fn()  # warm-up
            t = time.perf_counter()
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                fn()
            wall = time.perf_counter() - t
            ev = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
            total = sum(e.self_cpu_time_total for e in ev)
            print(f"\n{name}: token {i} of {len(ids)}, {m} HVPs with their graph: {wall:.2f} s (profiled)")
            for e in ev[:top]:
                print(f"  {e.key:<36} {e.self_cpu_time_total / 1e6:7.2f} s  {100 * e.self_cpu_time_total / total:5.1f} %  {e.count} calls")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", default="32,128")
    ap.add_argument("--sample", default="all,4", help="tokens the straightforward implementation scores, per length ('all' or k)")
    ap.add_argument("--probes", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=1, help="runs of each implementation (alternating order); the fastest counts")
    ap.add_argument("--profile", action="store_true", help="profile one token's HVPs both ways instead")
    args = ap.parse_args()
    machine.print_header()
    lengths = [int(x) for x in args.lengths.split(",")]
    sample = args.sample.split(",")
    sample += [sample[-1]] * (len(lengths) - len(sample))
    ex = aieg_fast.load_model()
    print(f"model: {ex.name}")
    if args.profile:
        for L in lengths:
            profile_hvps(ex, L, args.probes)
        return 0
    for L, k in zip(lengths, sample):
        r = run_one(ex, L, k, args.probes, args.repeats)
        print(f"\nL = {r['L']}, {r['n']} tokens scored, m = {r['m']}: ours {r['n_hvp']} HVPs in {r['hvp_batches']} batched "
              f"calls, {r['n_forwards']} forwards (whole or partial)")
        for clock in ("cpu", "wall"):
            c = r[clock]
            how = f"extrapolated from {r['k']} tokens (measured {c['measured_straight']:.1f} s)" if r["extrapolated"] else "measured"
            print(f"  {clock:>4} time: straightforward {c['straight']:.1f} s ({how})   ours {c['ours']:.1f} s (measured)   "
                  f"ratio {c['ratio']:.2f}x   [straightforward gate {c['gate']:.1f} s, graph {c['graph']:.1f} s, "
                  f"{c['per_token']:.2f} s per token: {r['m']} HVPs + 1 masked forward]")
        print(f"  scores on the {r['k']} tokens both computed: max |diff| {r['max_abs_diff']:.2e} (relative {r['rel_diff']:.1e})")
        to = r["timing_ours"]
        print(f"  ours by phase (wall): reference+gate {to['reference_gate'] + to['gate']:.1f} s, information {to['information']:.1f} s, "
              f"curvature {to['curvature']:.1f} s")
        print(f"  IG 50 steps (measured) {r['ig50'][1]:.2f} s CPU ({r['ig50'][0]:.2f} s wall) -> HETA = "
              f"{r['cpu']['ours'] / r['ig50'][1]:.0f}x IG (CPU time)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
