"""Side by side: the AIEG study's ten attributed variants of one sentence as separate calls (A)
and inside ``Explainer.shared_paths()`` (B), which ``evaluate`` now uses for the methods of an
example. Same model, sentences, settings and process; A and B alternate per sentence.

    OMP_NUM_THREADS=1 python benchmarks/bench_shared_paths.py [--model smollm2-sst2] [--n 4] [--n-steps 50]

Settings are the study's (benchmarks/study19/protocol.json): 50 steps, the contrast target (the
predicted label word's logit minus the other's), the sentiment prompt, the pinned method options
(``settings.method_options``: AIEG's preset v1, as ``evaluate`` applies them); sentences are the
first ``--n`` of SST-2 dev. Prints per sentence the seconds of A and B and checks that every
variant's scores are equal (torch.equal) between A and B; the last line gives the median ratio A/B.
"""
from __future__ import annotations

import argparse
import warnings
import json
import statistics
import sys
import time
from pathlib import Path

import torch

import aieg_fast
from aieg_fast.datasets import SENTIMENT_LABELS, SENTIMENT_TEMPLATE, load_dataset
from aieg_fast.methods import parse_method_spec

sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine  # noqa: E402

PROTOCOL = json.loads((Path(__file__).resolve().parent / "study19" / "protocol.json").read_text(encoding="utf-8"))


def _run(ex, text, specs, kw, shared: bool):
    t = time.perf_counter()
    if shared:
        with ex.shared_paths():
            out = [ex.attribute(text, method=name, **kw, **opts).scores for name, opts in specs]
    else:
        out = [ex.attribute(text, method=name, **kw, **opts).scores for name, opts in specs]
    return time.perf_counter() - t, out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="smollm2-sst2")
    p.add_argument("--n", type=int, default=4)
    p.add_argument("--n-steps", type=int, default=PROTOCOL["settings"]["n_steps"])
    a = p.parse_args(argv)
    machine.print_header(argv, script=__file__)
    warnings.simplefilter("ignore")  # the attributions' own findings (e.g. PosNorm inflation) are not timed here
    ex = aieg_fast.load_model(a.model)
    pinned = PROTOCOL["settings"]["method_options"]  # the study's reading of each method (aieg: preset v1), as evaluate applies it
    specs = [(name, {**pinned.get(name, {}), **opts})
             for name, opts in (parse_method_spec(s) for v, s in PROTOCOL["variants"].items() if v != "random")]
    label_ids = [ex.tokenizer.encode(w, add_special_tokens=False)[-1] for w in SENTIMENT_LABELS]
    print(f"# {a.model}, {len(specs)} variants, n_steps {a.n_steps}, torch threads {torch.get_num_threads()}")
    ratios = []
    for i, (text, _) in enumerate(load_dataset("sst2-dev")[: a.n]):
        ids, _ = ex.encode(SENTIMENT_TEMPLATE.format(text=text))
        with torch.no_grad():
            z = ex.model(torch.tensor([ids], device=ex.device)).logits[0, -1]
        pred = int(z[label_ids[1]] > z[label_ids[0]])
        kw = dict(template=SENTIMENT_TEMPLATE, n_steps=a.n_steps, target=label_ids[pred], contrast_target=label_ids[1 - pred])
        order = (False, True) if i % 2 == 0 else (True, False)
        res = {shared: _run(ex, text, specs, kw, shared) for shared in order}
        same = all(torch.equal(x, y) for x, y in zip(res[False][1], res[True][1]))
        ratios.append(res[False][0] / res[True][0])
        print(f"sentence {i}: separate {res[False][0]:.1f} s, shared {res[True][0]:.1f} s, "
              f"ratio {ratios[-1]:.2f}, scores equal: {same}", flush=True)
        if not same:
            print("!! scores differ between separate and shared calls", file=sys.stderr)
            return 1
    print(f"median ratio separate/shared over {len(ratios)} sentences: {statistics.median(ratios):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
