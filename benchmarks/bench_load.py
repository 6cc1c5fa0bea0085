"""Time to load the embedded model: the first load into an empty cache (de-quantizing the GGUF
file and writing the safetensors cache) and a later one from that cache, each in a fresh process.

    OMP_NUM_THREADS=1 python benchmarks/bench_load.py

The cache is a temporary folder ($AIEG_FAST_CACHE), so the user's own cache is neither used nor
changed. Prints the package's import time and load_model()'s time for each process.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from machine import print_header

CHILD = ("import time; t = time.perf_counter(); import aieg_fast; t1 = time.perf_counter(); "
         "aieg_fast.load_model(); print(f'{t1 - t:.1f} {time.perf_counter() - t1:.1f}')")


def main() -> None:
    print_header()
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, AIEG_FAST_CACHE=cache)
        for name in ("first (empty cache)", "later (from the cache)"):
            out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
            imp, load = out.stdout.split()[-2:]
            print(f"{name}: import {imp} s, load_model() {load} s")


if __name__ == "__main__":
    main()
