"""Plot wall time against prompt length L for aieg_fast, Captum, Inseq and the lower bound.

Reads one or more JSON files written by ``bench_peers.py --out FILE`` (results of several runs
are merged; a later file wins for the same model, L, method and tool) and writes a PNG with one
panel per (model, method), log-log axes, the median time of each tool.

    python benchmarks/bench_peers.py --quick --out quick.json
    python benchmarks/bench_peers.py --models tiny-gpt2 --lengths 64,256,1024 --out tiny.json
    python benchmarks/plot_scaling.py quick.json tiny.json            # -> benchmarks/scaling.png
    python benchmarks/plot_scaling.py benchmarks/peers/*.json         # the plot in RESULTS.md
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
TOOLS = {"ours": ("aieg_fast", "o-"), "captum": ("Captum", "s--"), "inseq": ("Inseq", "^--"), "bound": ("lower bound", "k:")}
METHODS = {"ig": "integrated gradients (50 steps)", "saliency": "saliency", "ixg": "input×gradient"}


def load(paths):
    data = defaultdict(dict)  # (model, method) -> tool -> {L: median}
    for p in paths:
        for res in json.loads(Path(p).read_text()).get("timing", []):
            if "results" not in res:
                continue
            for method, recs in res["results"].items():
                for tool, rec in recs.items():
                    if isinstance(rec, dict) and "median_s" in rec:
                        data[(res["model"], method)].setdefault(tool, {})[res["L"]] = rec["median_s"]
    return data


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", help="JSON files from bench_peers.py --out")
    ap.add_argument("--out", default=str(HERE / "scaling.png"))
    args = ap.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = load(args.inputs)
    keys = sorted(data)
    if not keys:
        raise SystemExit("no timing results in the inputs")
    cols = min(3, len(keys))
    rows = (len(keys) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.8 * rows), squeeze=False)
    for ax, key in zip(axes.flat, keys):
        model, method = key
        for tool, (label, style) in TOOLS.items():
            pts = data[key].get(tool)
            if not pts:
                continue
            Ls = sorted(pts)
            ax.plot(Ls, [pts[L] for L in Ls], style, label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("prompt length L (tokens)")
        ax.set_ylabel("wall time per call (s), median")
        ax.set_title(f"{model}: {METHODS.get(method, method)}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
