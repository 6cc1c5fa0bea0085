"""Benchmark: aieg_fast extension kernels vs the pure-PyTorch reference composition, per op.

Times ``aieg_fast.ops.<op>(..., backend="ext")`` (the wrapper users call, argument checks
included) against ``aieg_fast.reference.<op>`` with torch.utils.benchmark, and prints a markdown
table: median time, effective bandwidth (bytes the op must read and write once / time) and the
ratio ref/ext. A read-bandwidth line (``torch.sum`` over a large tensor) gives the roofline.

Sizes: m = 50 path steps; L in {128, 1024, 4096}; d in {576, 768, 4096}. attention_gradient_product
uses B = 50, H = 9 (SmolLM2-135M) or 12 (GPT-2 sized), the last query row (Q = 1, K = L), and the
full Q = K = L map for L <= 1024. hvp_l1_mean uses m = 10 probes over n in {1, 64, 512} tokens.
Cases whose inputs plus the reference's temporaries would exceed
--max-gb are skipped.

    python benchmarks/bench_ops.py                 # CPU (and CUDA when available), float32 + bfloat16
    python benchmarks/bench_ops.py --quick         # a small subset, seconds
    python benchmarks/bench_ops.py --device cuda --dtypes float32,bfloat16,float16
"""
from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional

import torch
from torch.utils.benchmark import Timer

from aieg_fast import ops, reference
from aieg_fast import EXT_ERROR, HAS_EXT, build_info

sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine  # noqa: E402

DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _median(fn: Callable[[], object], min_run_time: float) -> float:
    fn()  # warm-up (allocator, lazy init)
    return Timer("fn()", globals={"fn": fn}).blocked_autorange(min_run_time=min_run_time).median


def _cases(quick: bool, m: int):
    """(op, shape label, bytes moved, make(device, dtype) -> (ext_fn, ref_fn), peak GB estimate per dtype size)."""
    Ls = (128, 1024) if quick else (128, 1024, 4096)
    ds = (576,) if quick else (576, 768, 4096)
    for L, d in itertools.product(Ls, ds):

        def integ(dev, dt, L=L, d=d):
            g = torch.randn(m, L, d, device=dev, dtype=dt)
            w = torch.rand(m, device=dev)
            dl = torch.randn(L, d, device=dev, dtype=dt)
            return (lambda: ops.integrate_gradients(g, w, dl, backend="ext"),
                    lambda: reference.integrate_gradients(g, w, dl))

        yield ("integrate_gradients", f"m={m} L={L} d={d}", lambda es, L=L, d=d: (m * L * d + L * d) * es + L * 4,
               integ, lambda es, L=L, d=d: m * L * d * (es + 4) / 1e9)

        def interp(dev, dt, L=L, d=d):
            e = torch.randn(L, d, device=dev, dtype=dt)
            b = torch.randn(L, d, device=dev, dtype=dt)
            a = torch.linspace(0, 1, m, device=dev)
            return (lambda: ops.interpolate_path(e, b, a, backend="ext"), lambda: reference.interpolate_path(e, b, a))

        yield ("interpolate_path", f"m={m} L={L} d={d}", lambda es, L=L, d=d: (2 * L * d + m * L * d) * es,
               interp, lambda es, L=L, d=d: m * L * d * (es + 3 * 4) / 1e9)

    for L, H in itertools.product(Ls, (9,) if quick else (9, 12)):
        for Q in (1, L):
            if Q == L and (L > 1024 or quick):
                continue
            for red in ("product_of_means", "mean_of_products"):

                def agp(dev, dt, L=L, H=H, Q=Q, red=red):
                    A = torch.rand(m, H, Q, L, device=dev, dtype=dt)
                    G = torch.randn(m, H, Q, L, device=dev, dtype=dt)
                    w = torch.rand(m, device=dev)
                    return (lambda: ops.attention_gradient_product(A, G, w, red, backend="ext"),
                            lambda: reference.attention_gradient_product(A, G, w, red))

                n = m * H * Q * L
                tmp = 1 if red == "mean_of_products" else 0
                yield ("attention_gradient_product", f"{red} B={m} H={H} Q={Q} K={L}",
                       lambda es, n=n, Q=Q, L=L: 2 * n * es + Q * L * 4, agp,
                       lambda es, n=n, tmp=tmp: n * (2 * es + tmp * 4 + (4 if es != 4 else 0) * 2) / 1e9)

    for L in Ls:

        def pn(dev, dt, L=L):
            s = torch.randn(m, L, device=dev, dtype=dt)
            v = torch.rand(m, L, device=dev) > 0.1
            return (lambda: ops.posnorm(s, v, backend="ext"), lambda: reference.posnorm(s, v))

        yield ("posnorm", f"rows={m} L={L}", lambda es, L=L: m * L * (es + 1 + 4), pn, lambda es: 0.0)

    # HETA's curvature: m = 10 probes (the paper's default) x n tokens x d; the per-token blocks of
    # one batched double backward (n = 1: one token, as on a CPU; n = 64: many tokens per call)
    for n, d in itertools.product((1, 64) if quick else (1, 64, 512), ds):

        def hvp(dev, dt, n=n, d=d):
            x = torch.randn(10, n, d, device=dev, dtype=dt)
            return (lambda: ops.hvp_l1_mean(x, backend="ext"), lambda: reference.hvp_l1_mean(x))

        yield ("hvp_l1_mean", f"m=10 n={n} d={d}", lambda es, n=n, d=d: 10 * n * d * es + n * 4, hvp,
               lambda es, n=n, d=d: 10 * n * d * (es + 2 * 4) / 1e9)

    def ef(dev, dt):
        f = torch.randn(m, device=dev, dtype=dt).cumsum(0)
        a = torch.linspace(0, 1, m, device=dev)
        w = torch.full((m,), 1.0 / (m - 1), device=dev)
        return (lambda: ops.emphasis_factors(f, a, w, backend="ext"), lambda: reference.emphasis_factors(f, a, w))

    yield ("emphasis_factors", f"M={m}", lambda es: m * (es + 8 + 4), ef, lambda es: 0.0)

    def aa(dev, dt):
        p = torch.randn(64, device=dev, dtype=dt).cumsum(0)
        return (lambda: ops.adaptive_alphas(p, m, backend="ext"), lambda: reference.adaptive_alphas(p, m))

    yield ("adaptive_alphas", f"N=64 M={m}", lambda es: 64 * es + 2 * m * 4, aa, lambda es: 0.0)


def _roofline(device: str, min_run_time: float) -> float:
    """Read bandwidth of torch.sum over 512 MiB of float32, in GB/s."""
    x = torch.ones(128 * 1024 * 1024, device=device)
    t = _median(lambda: x.sum(), min_run_time)
    return x.numel() * 4 / t / 1e9


def run(devices: List[str], dtypes: List[str], quick: bool, m: int, min_run_time: float, max_gb: float,
        only: Optional[List[str]]) -> List[Dict]:
    rows = []
    for dev in devices:
        print(f"# {dev}: read roofline (torch.sum, 512 MiB fp32): {_roofline(dev, min_run_time):.1f} GB/s", flush=True)
        for (op, shape, nbytes, make, peak), dname in itertools.product(list(_cases(quick, m)), dtypes):
            if only and op not in only:
                continue
            dt = DTYPES[dname]
            es = torch.empty((), dtype=dt).element_size()
            if peak(es) > max_gb:
                print(f"skip {op} {shape} {dname}: ~{peak(es):.1f} GB > --max-gb {max_gb}", file=sys.stderr)
                continue
            ext_fn, ref_fn = make(dev, dt)
            t_ext = _median(ext_fn, min_run_time)
            t_ref = _median(ref_fn, min_run_time)
            nb = nbytes(es)
            row = dict(op=op, device=dev, dtype=dname, shape=shape, ext_ms=t_ext * 1e3, ref_ms=t_ref * 1e3,
                       ext_gbs=nb / t_ext / 1e9, ref_gbs=nb / t_ref / 1e9, ratio=t_ref / t_ext)
            rows.append(row)
            print(f"| {op} | {dev} | {dname} | {shape} | {row['ext_ms']:.3f} | {row['ref_ms']:.3f} | "
                  f"{row['ext_gbs']:.1f} | {row['ref_gbs']:.1f} | {row['ratio']:.2f} |", flush=True)
            del ext_fn, ref_fn
    return rows


OPS = tuple(dict.fromkeys(c[0] for c in _cases(True, 50)))  # the op names, in table order (no tensors are made here)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto", help="cpu, cuda, or auto (cpu, plus cuda when available); comma list allowed")
    ap.add_argument("--dtypes", default="float32,bfloat16", type=machine.csv_of(tuple(DTYPES)), help="comma list of " + ",".join(DTYPES))
    ap.add_argument("--ops", default=None, type=machine.csv_of(OPS), help="comma list of ops to run (default all): " + ",".join(OPS))
    ap.add_argument("--m", type=int, default=50, help="path steps / batch size (default 50)")
    ap.add_argument("--quick", action="store_true", help="small sizes only")
    ap.add_argument("--min-run-time", type=float, default=None, help="seconds per measurement (default 0.3, quick 0.05)")
    ap.add_argument("--max-gb", type=float, default=6.0, help="skip cases needing more memory than this")
    args = ap.parse_args(argv)
    if args.device == "auto":
        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    else:
        devices = [d.strip() for d in args.device.split(",") if d.strip()]
    for d in devices:
        if d.split(":")[0] not in ("cpu", "cuda"):
            ap.error(f"--device {d!r}: choose cpu, cuda or auto")
        if d.startswith("cuda") and not torch.cuda.is_available():
            raise SystemExit(f"--device {d!r}: CUDA is not available here")
    machine.print_header(argv, script=__file__)
    if not HAS_EXT:
        print(f"aieg_fast._C is not available: {EXT_ERROR}", file=sys.stderr)
        return 1
    mrt = args.min_run_time if args.min_run_time is not None else (0.05 if args.quick else 0.3)
    print(f"# extension: {build_info()}")
    if "cuda" in devices:
        print(f"# cuda: {torch.cuda.get_device_name()}")
    print("| op | device | dtype | shape | ext ms | ref ms | ext GB/s | ref GB/s | ref/ext |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|")
    run(devices, args.dtypes, args.quick, args.m, mrt, args.max_gb, args.ops)
    return 0


if __name__ == "__main__":
    sys.exit(main())
