"""Benchmark: aieg_fast against Captum and Inseq on next-token attributions, on the CPU (no GPU option).

For each model and prompt length L, the same attribution is computed by

* ``ours``: ``aieg_fast.Explainer.attribute`` (integrated_gradients with integration="trapezoid",
  saliency, input_x_gradient);
* ``captum``: ``LayerIntegratedGradients`` on the input embedding layer with
  ``method="riemann_trapezoid"`` (the points of our "trapezoid"; Captum's weights are 1/n with
  halved ends, so they sum to (n - 1)/n and its scores are ours times (n - 1)/n), baseline ids = the
  reference token at every attributable position, ``return_convergence_delta=True`` (we always
  compute F(x) and F(x') too); ``Saliency`` / ``InputXGradient`` on the token embeddings. The
  forward function returns the target logit at the last position and asks the model for the last
  position's logits only (``logits_to_keep=1``);
* ``inseq``: ``inseq.load_model(model, "integrated_gradients" | "saliency" | "input_x_gradient")``
  with ``attributed_fn="logit"`` and the target forced as a one-token generation
  (``generated_texts=prompt + target_text``). Inseq's baseline is the tokenizer's UNK token; it is
  set to our reference token by pointing the tokenizer's ``unk_token`` at it. Inseq uses the
  keyword ``method`` for itself, so Captum's integration rule cannot be passed through
  ``attribute``; the wrapped Captum object's ``attribute`` is given
  ``method="riemann_trapezoid"`` with ``functools.partial``;
* ``bound``: the lower bound, a batched forward plus input-gradient backward of the same
  interpolation batches (IG) or of the input (saliency / input×gradient), parameters frozen, only
  the target logit computed from the last hidden state.

Settings matched: same model object with frozen parameters, same baseline token, same target
token (the model's greedy next token, checked to tokenize back as one token after the prompt so
Inseq sees the same target), same step rule, same n_steps and internal batch size.

Each (model, L) runs in its own subprocess. Inside it, the tools alternate (rotated order per
run) and each call's wall time is taken with time.perf_counter; after one warm-up call per tool
(n_steps = internal batch size). The children use one torch thread by default (``--threads``):
on a shared 2-core machine, two OpenMP threads wait for each other at every parallel region
whenever the other core is busy (a tiny GPT-2 forward+backward took 300 ms with 2 threads and
2.5 ms with 1 while other jobs ran); on a dedicated machine pass ``--threads 0``. Peak resident memory of each call: the kernel's high-water mark
(VmHWM) is reset with ``/proc/self/clear_refs`` before the call and read after it; the subprocess's
``resource.getrusage(RUSAGE_SELF).ru_maxrss`` is reported too. The child runs with
``MALLOC_MMAP_THRESHOLD_=65536`` so freed blocks go back to the OS between calls.

    python benchmarks/bench_peers.py --quick             # tiny GPT-2 + SmolLM at L=64, 3 runs
    python benchmarks/bench_peers.py --full              # L in {64, 256, 1024}, + completeness
    python benchmarks/bench_peers.py --models smollm --lengths 256 --runs 3 --out peers.json
    python benchmarks/bench_peers.py --completeness-only --models smollm

Scores are compared with Spearman's rank correlation over the attributable positions.
"""
from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
import machine  # noqa: E402

MODELS = ("tiny-gpt2", "smollm")
TOOLS = ("ours", "captum", "inseq", "bound")
PEER_TOOLS = ("captum", "inseq")  # the ones that need a package of their own
METHOD_NAMES = {"ig": "integrated_gradients", "saliency": "saliency", "ixg": "input_x_gradient"}
INSEQ_NAMES = {"ig": "integrated_gradients", "saliency": "saliency", "ixg": "input_x_gradient"}


# ============================================================================================
# memory helpers (Linux)
# ============================================================================================
def _status_kb(key: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def reset_peak() -> bool:
    """Reset the resident high-water mark to the current RSS (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def measure(fn):
    """Run fn(); return (result, seconds, rss before [MiB], peak rss during [MiB])."""
    import gc

    gc.collect()
    ok = reset_peak()
    before = _status_kb("VmRSS") / 1024
    t = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t
    peak = _status_kb("VmHWM") / 1024 if ok else float("nan")
    return out, dt, before, peak


# ============================================================================================
# models and prompts
# ============================================================================================
def load_explainer(name: str, max_len: int = 64):
    """``smollm``: the embedded SmolLM2-135M-Instruct. ``tiny-gpt2``: the GPT-2 of
    tests/builders.py (2 layers, 2 heads, d=32, 300-token BPE, seed 0), n_positions raised to fit L."""
    import torch
    import aieg_fast

    if name == "smollm":
        ex = aieg_fast.load_model()
    elif name == "tiny-gpt2":
        sys.path.insert(0, str(ROOT / "tests"))
        from builders import byte_level_tokenizer  # noqa: E402
        from transformers import GPT2Config, GPT2LMHeadModel

        tok = byte_level_tokenizer()
        cfg = GPT2Config(
            n_layer=2, n_head=2, n_embd=32, vocab_size=len(tok), n_positions=max(64, max_len + 8),
            bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id, initializer_range=0.1,
            pad_token_id=tok.eos_token_id,
        )
        torch.manual_seed(0)
        ex = aieg_fast.load_model(GPT2LMHeadModel(cfg).eval(), tok)
    else:
        raise ValueError(f"model must be 'smollm' or 'tiny-gpt2', got {name!r}")
    ex.model.eval()
    for p in ex.model.parameters():
        p.requires_grad_(False)
    return ex


def _source_words():
    words = []
    path = ROOT / "aieg_fast" / "data" / "sst2_dev_sample.tsv"
    for line in path.read_text().splitlines()[1:]:
        words += line.split("\t")[0].split()
    return words


def make_prompt(ex, L: int) -> str:
    """A text of exactly L tokens (no special tokens) made of SST-2 dev sentences."""
    tok = ex.tokenizer
    words = _source_words()
    n = lambda s: len(ex.encode(s)[0])  # noqa: E731
    text, i = "", 0
    while True:
        cand = (text + " " + words[i % len(words)]) if text else words[i % len(words)]
        i += 1
        if n(cand) > L:
            break
        text = cand
        if n(text) == L:
            return text
    for filler in (" .", " ,", " a", " the", " it"):
        while n(text + filler) <= L:
            text += filler
            if n(text) == L:
                return text
    raise RuntimeError(f"could not build a prompt of {L} tokens for {ex.name}")


def pick_target(ex, prompt: str):
    """The greedy next token, or the best of the top 10 whose text re-tokenizes as one extra token."""
    ids = ex.encode(prompt)[0]
    for text, tid, _ in ex.predict(prompt, top_k=10):
        if ex.tokenizer(prompt + text, add_special_tokens=True)["input_ids"] == ids + [tid]:
            return tid, text
    text, tid, _ = ex.predict(prompt, top_k=1)[0]
    return tid, None  # Inseq cannot be given this target exactly


# ============================================================================================
# the tools
# ============================================================================================
class Tools:
    def __init__(self, ex, prompt, tid, ttext, n_steps, ibs):
        import torch

        self.torch = torch
        self.ex, self.prompt, self.tid, self.ttext = ex, prompt, tid, ttext
        self.n_steps, self.ibs = n_steps, ibs
        self.ids = torch.tensor([ex.encode(prompt)[0]])
        self.L = self.ids.shape[1]
        self.ref = ex.ref_token_id
        self.model = ex.model
        self.emb = ex.adapter.embeddings
        self.W = self.emb.weight
        self.head_w = ex.adapter.head.weight[tid].detach()
        self.head_b = getattr(ex.adapter.head, "bias", None)
        self._inseq = {}

    # ---------------------------------------------------------------- ours
    def ours(self, method, n_steps=None):
        kw = {"integration": "trapezoid", "n_steps": n_steps or self.n_steps} if method == "ig" else {}
        r = self.ex.attribute(self.prompt, method=METHOD_NAMES[method], target=self.tid, internal_batch_size=self.ibs, **kw)
        extra = {"delta": float(r.info["convergence_delta"])} if method == "ig" else {}
        return r.scores.float(), extra

    # ---------------------------------------------------------------- lower bound
    def _f_last(self, X):
        h = self.ex.adapter.base(inputs_embeds=X, use_cache=False).last_hidden_state[:, -1]
        f = h @ self.head_w
        return f + self.head_b[self.tid] if self.head_b is not None else f

    def bound(self, method, n_steps=None):
        torch = self.torch
        E = self.W[self.ids[0]].detach()
        if method == "ig":
            n = n_steps or self.n_steps
            Eb = self.W[self.ref].detach().expand_as(E)
            D = E - Eb
            alphas = torch.linspace(0, 1, n)
            for s in range(0, n, self.ibs):
                a = alphas[s : s + self.ibs].view(-1, 1, 1)
                X = (Eb + a * D).requires_grad_(True)
                with torch.enable_grad():
                    (g,) = torch.autograd.grad(self._f_last(X).sum(), X)
            return None, {}
        X = E.unsqueeze(0).clone().requires_grad_(True)
        with torch.enable_grad():
            (g,) = torch.autograd.grad(self._f_last(X).sum(), X)
        return None, {}

    # ---------------------------------------------------------------- captum
    def _fwd_ids(self, ids):
        return self.model(input_ids=ids, logits_to_keep=1, use_cache=False).logits[:, -1, self.tid]

    def _fwd_emb(self, e):
        return self.model(inputs_embeds=e, logits_to_keep=1, use_cache=False).logits[:, -1, self.tid]

    def captum(self, method, n_steps=None, rule="riemann_trapezoid"):
        from captum.attr import InputXGradient, LayerIntegratedGradients, Saliency

        torch = self.torch
        if method == "ig":
            lig = LayerIntegratedGradients(self._fwd_ids, self.emb)
            base = torch.full_like(self.ids, self.ref)
            attr, delta = lig.attribute(
                self.ids, baselines=base, n_steps=n_steps or self.n_steps, method=rule,
                internal_batch_size=self.ibs, return_convergence_delta=True,
            )
            return attr[0].sum(-1).detach().float(), {"delta": float(delta)}
        E = self.W[self.ids].detach().clone().requires_grad_(True)
        if method == "saliency":
            g = Saliency(self._fwd_emb).attribute(E, abs=True)
            return g[0].norm(dim=-1).detach().float(), {}
        a = InputXGradient(self._fwd_emb).attribute(E)
        return a[0].sum(-1).detach().float(), {}

    # ---------------------------------------------------------------- inseq
    def _inseq_model(self, method):
        if method not in self._inseq:
            import inseq

            tok = self.ex.tokenizer
            ref_tok = tok.convert_ids_to_tokens(self.ref)
            if tok.unk_token_id != self.ref:
                tok = copy_tokenizer(tok)
                tok.unk_token = ref_tok
            m = inseq.load_model(self.model, INSEQ_NAMES[method], tokenizer=tok)
            if method == "ig":
                cm = m.attribution_method.method
                cm.attribute = functools.partial(cm.attribute, method="riemann_trapezoid")
            self._inseq[method] = m
        return self._inseq[method]

    def inseq(self, method, n_steps=None):
        if self.ttext is None:
            raise RuntimeError("target does not re-tokenize as one token after the prompt")
        m = self._inseq_model(method)
        kw = {"n_steps": n_steps or self.n_steps, "internal_batch_size": self.ibs} if method == "ig" else {}
        out = m.attribute(
            input_texts=self.prompt, generated_texts=self.prompt + self.ttext, attributed_fn="logit",
            show_progress=False, pretty_progress=False, **kw,
        )
        ta = out.sequence_attributions[0].target_attributions  # [prefix + generated, generated, (d)]
        a = ta[: self.L, 0]
        a = a.float()
        if a.dim() == 2:
            a = a.norm(dim=-1) if method == "saliency" else a.sum(-1)
        return a.detach(), {}


def copy_tokenizer(tok):
    import copy

    return copy.deepcopy(tok)


def spearman(a, b, mask):
    from scipy.stats import spearmanr

    a = a[mask].numpy()
    b = b[mask].numpy()
    if len(a) < 3:
        return float("nan")
    return float(spearmanr(a, b).statistic)


# ============================================================================================
# workers (run in a subprocess)
# ============================================================================================
def worker_time(args):
    import torch

    torch.manual_seed(0)
    ex = load_explainer(args.model, args.L)
    prompt = make_prompt(ex, args.L)
    tid, ttext = pick_target(ex, prompt)
    T = Tools(ex, prompt, tid, ttext, args.n_steps, args.ibs)
    mask = torch.tensor([not f for f in ex.encode(prompt)[1]])
    methods = args.methods.split(",")
    tools = args.tools.split(",")
    res = {
        "model": args.model, "L": T.L, "n_steps": args.n_steps, "ibs": args.ibs, "target_id": tid,
        "target_text": ttext, "ref_token_id": T.ref, "threads": torch.get_num_threads(),
        "rss_loaded_mib": _status_kb("VmRSS") / 1024, "results": {},
    }
    for method in methods:
        cands = [t for t in tools if not (t == "inseq" and ttext is None)]
        # warm-up: one small call per tool
        for t in cands:
            try:
                getattr(T, t)(method, n_steps=args.ibs if method == "ig" else None)
            except Exception as e:  # a peer that fails is reported, the rest goes on
                res["results"].setdefault(method, {})[t] = {"error": f"{type(e).__name__}: {e}"}
        cands = [t for t in cands if "error" not in res["results"].get(method, {}).get(t, {})]
        rec = {t: {"times": [], "peak_mib": [], "rss_before_mib": []} for t in cands}
        scores = {}
        for r in range(args.runs):
            order = cands[r % len(cands):] + cands[: r % len(cands)]
            for t in order:
                (sc, extra), dt, before, peak = measure(lambda: getattr(T, t)(method))
                rec[t]["times"].append(dt)
                rec[t]["peak_mib"].append(peak)
                rec[t]["rss_before_mib"].append(before)
                rec[t].update(extra)
                if sc is not None:
                    scores[t] = sc
            print(f"  [{args.model} L={T.L} {method}] run {r + 1}/{args.runs}: "
                  + ", ".join(f"{t} {rec[t]['times'][-1]:.2f}s" for t in cands), file=sys.stderr, flush=True)
        for t in cands:
            rec[t]["median_s"] = statistics.median(rec[t]["times"])
            if t in scores and t != "ours" and "ours" in scores:
                rec[t]["spearman_vs_ours"] = spearman(scores["ours"], scores[t], mask)
        res["results"].setdefault(method, {}).update(rec)
        res["results"][method]["_scores"] = {t: s.tolist() for t, s in scores.items()}
    res["ru_maxrss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    Path(args.json).write_text(json.dumps(res))


def worker_completeness(args):
    """|ΣIG − (F(x) − F(x'))| / |F(x) − F(x')| against n_steps."""
    import torch

    ex = load_explainer(args.model, args.L)
    prompt = make_prompt(ex, args.L)
    tid, ttext = pick_target(ex, prompt)
    T = Tools(ex, prompt, tid, ttext, 50, args.ibs)
    steps = [int(s) for s in args.steps.split(",")]
    rows = []
    for n in steps:
        row = {"n_steps": n}
        for rule in ("trapezoid", "gausslegendre", "uniform"):
            r = ex.attribute(prompt, method="integrated_gradients", target=tid, n_steps=n, internal_batch_size=args.ibs, integration=rule)
            dF = r.info["F_input"] - r.info["F_baseline"]
            row[f"ours_{rule}"] = abs(r.info["convergence_delta"]) / abs(dF)
            row["dF"] = dF
        r = ex.attribute(prompt, method="integrated_decision_gradients", target=tid, n_steps=n, internal_batch_size=args.ibs)
        row["ours_idg"] = abs(float(r.scores.sum()) - dF) / abs(dF)
        r = ex.attribute(prompt, method="aieg", target=tid, n_steps=n, internal_batch_size=args.ibs)
        row["ours_aieg_ieg"] = abs(sum(r.info["ieg"]) - dF) / abs(dF)
        if installed("captum"):
            for rule in ("gausslegendre", "riemann_trapezoid"):
                _, extra = T.captum("ig", n_steps=n, rule=rule)
                row[f"captum_{rule}"] = abs(extra["delta"]) / abs(dF)
        rows.append(row)
        print(f"  completeness n_steps={n}: " + ", ".join(f"{k}={v:.2e}" for k, v in row.items() if k not in ("n_steps", "dF")), file=sys.stderr, flush=True)
    Path(args.json).write_text(json.dumps({"model": args.model, "L": args.L, "target_id": tid, "rows": rows}))


# ============================================================================================
# parent
# ============================================================================================
def run_child(argv, timeout=None):
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", TOKENIZERS_PARALLELISM="false")
    cmd = [sys.executable, __file__, *argv, "--json", path]
    p = subprocess.run(cmd, env=env, timeout=timeout)
    if p.returncode != 0:
        os.unlink(path)
        return {"error": f"child exited with {p.returncode}: {' '.join(argv)}"}
    out = json.loads(Path(path).read_text())
    os.unlink(path)
    return out


machine_info = machine.info  # kept for scripts that imported it from here


def installed(tool: str) -> bool:
    """Whether a peer tool's package can be imported (ours and bound need nothing extra)."""
    return tool not in PEER_TOOLS or importlib.util.find_spec(tool) is not None


def not_installed_msg(tool: str) -> str:
    return f"{tool} not installed (pip install {tool})"


def _fmt_mem(rec):
    if not rec.get("peak_mib"):
        return "-"
    return f"{max(rec['peak_mib']):.0f}"


def table(all_res):
    lines = [
        "| model | L | method | tool | median s (runs) | peak RSS MiB | tool ÷ ours (time) | ours ÷ bound | Spearman vs ours |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for res in all_res:
        if "error" in res:
            lines.append(f"| {res['error']} |||||||||")
            continue
        for t in res.get("not_installed", ()):
            lines.append(f"| {res['model']} | {res['L']} | all | {t} | {not_installed_msg(t)} |||||")
        for method, recs in res["results"].items():
            ours = recs.get("ours", {})
            bound = recs.get("bound", {})
            for t in ("ours", "captum", "inseq", "bound"):
                rec = recs.get(t)
                if rec is None:
                    continue
                if "error" in rec:
                    lines.append(f"| {res['model']} | {res['L']} | {method} | {t} | failed: {rec['error'][:80]} |||||")
                    continue
                med = rec["median_s"]
                ratio = f"{med / ours['median_s']:.2f}" if ours.get("median_s") and t != "ours" else ""
                ob = f"{ours['median_s'] / bound['median_s']:.3f}" if t == "ours" and bound.get("median_s") else ""
                sp = f"{rec['spearman_vs_ours']:.3f}" if "spearman_vs_ours" in rec else ""
                times = "/".join(f"{x:.2f}" for x in rec["times"])
                lines.append(f"| {res['model']} | {res['L']} | {method} | {t} | {med:.3f} ({times}) | {_fmt_mem(rec)} | {ratio} | {ob} | {sp} |")
    return "\n".join(lines)


def completeness_table(res):
    cols = ["ours_trapezoid", "ours_gausslegendre", "ours_uniform", "ours_idg", "ours_aieg_ieg", "captum_riemann_trapezoid", "captum_gausslegendre"]
    lines = ["| n_steps | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for row in res["rows"]:
        lines.append(f"| {row['n_steps']} | " + " | ".join(f"{row[c]:.2e}" if c in row else "n/a" for c in cols) + " |")
    if not installed("captum"):
        lines.append(f"\ncaptum columns n/a: {not_installed_msg('captum')}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="tiny GPT-2 + SmolLM at L=64, n_steps 50 (cannot be combined with --lengths, --n-steps or --full)")
    ap.add_argument("--full", action="store_true", help="L in {64, 256, 1024} and the completeness table")
    ap.add_argument("--models", default="tiny-gpt2,smollm", type=machine.csv_of(MODELS, joined=True), help=f"comma-separated, from {', '.join(MODELS)}")
    ap.add_argument("--lengths", default=None, help="comma-separated prompt lengths (default 64 quick, 64,256,1024 full)")
    ap.add_argument("--methods", default="ig,saliency,ixg", type=machine.csv_of(tuple(METHOD_NAMES), joined=True),
                    help=f"comma-separated, from {', '.join(METHOD_NAMES)}")
    ap.add_argument("--tools", default="ours,captum,inseq,bound", type=machine.csv_of(TOOLS, joined=True),
                    help=f"comma-separated, from {', '.join(TOOLS)}; a peer whose package is missing is reported, not run")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--n-steps", type=int, default=None, help="IG path points (default 50)")
    ap.add_argument("--ibs", type=int, default=10, help="internal batch size (path points per forward/backward)")
    ap.add_argument("--completeness", action="store_true", help="also the completeness table")
    ap.add_argument("--completeness-only", action="store_true")
    ap.add_argument("--completeness-L", type=int, default=16)
    ap.add_argument("--steps", default="4,8,16,32,64,128,256", help="n_steps of the completeness table")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads in the children (0 = torch default)")
    ap.add_argument("--out", default=None, help="write all results as JSON here")
    ap.add_argument("--worker", choices=["time", "completeness"], help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--L", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--json", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.worker and args.threads > 0:
        import torch

        torch.set_num_threads(args.threads)
    if args.worker == "time":
        return worker_time(args)
    if args.worker == "completeness":
        return worker_completeness(args)

    if args.quick and (args.lengths is not None or args.n_steps is not None or args.full):
        ap.error("--quick fixes L=64 and n_steps=50: drop --lengths / --n-steps / --full, or drop --quick")
    if args.quick:
        args.lengths = "64"
    if args.n_steps is None:
        args.n_steps = 50
    lengths = args.lengths or ("64,256,1024" if args.full else "64")
    try:
        lengths = [int(x) for x in lengths.split(",")]
    except ValueError:
        ap.error(f"--lengths must be comma-separated integers, got {args.lengths!r}")
    info = machine.print_header(argv, script=__file__, threads=args.threads or "default")
    if not args.completeness_only:
        print(f"# timing settings (what runs): models {args.models}, lengths {','.join(map(str, lengths))}, methods {args.methods}, "
              f"tools {args.tools}, runs {args.runs}, n_steps {args.n_steps}, ibs {args.ibs}")
    if args.completeness or args.completeness_only or args.full:
        print(f"# completeness settings: models {args.models}, L {args.completeness_L}, n_steps {args.steps}, ibs 32")
    missing = [t for t in args.tools.split(",") if not installed(t)]
    for t in missing:
        print(f"# {not_installed_msg(t)}: its column is left out", flush=True)
    tools = ",".join(t for t in args.tools.split(",") if t not in missing)
    failed = 0
    all_res, comp = [], []
    if not args.completeness_only and tools:
        for model in args.models.split(","):
            for L in lengths:
                t0 = time.perf_counter()
                res = run_child(["--worker", "time", "--model", model, "--L", str(L), "--methods", args.methods, "--tools", tools,
                                 "--runs", str(args.runs), "--n-steps", str(args.n_steps), "--ibs", str(args.ibs), "--threads", str(args.threads)])
                print(f"  ({model}, L={L}) done in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
                if "error" in res:
                    failed += 1
                else:
                    res["not_installed"] = missing
                all_res.append(res)
        print()
        print(f"n_steps={args.n_steps}, internal_batch_size={args.ibs}, median of {args.runs} runs (all runs listed); "
              "peak RSS = max over runs of the call's resident high-water mark (process total, model included)")
        print()
        print(table(all_res))
        for res in all_res:
            if "rss_loaded_mib" in res:
                print(f"\n{res['model']} L={res['L']}: RSS with model loaded {res['rss_loaded_mib']:.0f} MiB, child ru_maxrss {res['ru_maxrss_mib']:.0f} MiB, "
                      f"target id {res['target_id']} ({res['target_text']!r}), ref token {res['ref_token_id']}")
                ig = res["results"].get("ig", {})
                for t in ("ours", "captum"):
                    if "delta" in ig.get(t, {}):
                        print(f"  {t} IG convergence delta: {ig[t]['delta']:+.3e}")
    if args.completeness or args.completeness_only or args.full:
        for model in args.models.split(","):
            r = run_child(["--worker", "completeness", "--model", model, "--L", str(args.completeness_L), "--steps", args.steps, "--ibs", "32", "--threads", str(args.threads)])
            comp.append(r)
            if "error" in r:
                failed += 1
                print(f"\ncompleteness, {model}: {r['error']}")
            else:
                print(f"\ncompleteness error |ΣIG − ΔF| / |ΔF|, {model}, L={r['L']}:\n")
                print(completeness_table(r))
    if args.out:
        Path(args.out).write_text(json.dumps({"machine": info, "args": vars(args), "timing": all_res, "completeness": comp}, indent=1))
    if failed:
        print(f"\n{failed} child run(s) failed (see above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
