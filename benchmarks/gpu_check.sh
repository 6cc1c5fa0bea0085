#!/usr/bin/env bash
# GPU check of the aieg_fast kernels, prepared for a CUDA machine (H200: python3 with torch
# 2.11+cu130, pytest, hypothesis, ninja, nvcc 13.0; nothing is installed by this script).
#
#   bash benchmarks/gpu_check.sh            # from anywhere; logs to $OUT (if set) or ./gpu_check_logs
#   STEPS=env,build,tests,product bash benchmarks/gpu_check.sh   # a subset (names below)
#
# The timeouts (upper bounds) add up to more than one 10-minute device call: run it as three
# calls on a warm machine, STEPS=env,build (at most 360 s), then STEPS=tests,product (540 s),
# then STEPS=bench,d2d,dataset,verify (510 s); the in-place build stays, and a call without
# `build` first checks that the built extension loads (60 s of each). Steps, in order:
#   1. environment      nvidia-smi, torch / CUDA versions
#   2. build (+ load)   AIEG_FAST_CUDA=1 TORCH_CUDA_ARCH_LIST=9.0 python3 setup.py build_ext --inplace
#   3. tests            pytest tests/ops/ (CPU and CUDA parametrisations; CUDA ones are marked `cuda`)
#   4. bench            benchmarks/bench_ops.py --device cuda (ext vs reference per op)
#   5. d2d copy         device-to-device copy bandwidth of the card, for comparison with the bench GB/s
#   6. dataset          aieg-fast attribute-dataset --device cuda on a tiny saved model (needs transformers)
#   7. product (runs after 3) benchmarks/gpu_product_check.py --device cuda: every method on a tiny model of
#                       every family, CUDA against CPU (targets, padded batch, generated text,
#                       classification head), bfloat16 and torch.compile on CUDA, an evaluation run
#   8. verify           aieg-fast verify --device cuda on the tiny GPT-2, float32 and bfloat16
# A failed step does not stop the later ones that can still run; the exit status is non-zero if
# any step failed. A short summary table is printed last.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
LOG=${OUT:-$ROOT/gpu_check_logs}
mkdir -p "$LOG"
PY=${PYTHON:-python3}
ARCH=${TORCH_CUDA_ARCH_LIST:-9.0}
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
T0=$(date +%s)

declare -a SUMMARY=()
FAILED=0
STEPS=${STEPS:-env,build,tests,product,bench,d2d,dataset,verify}
want() { [[ ",$STEPS," == *",$1,"* ]]; }

# run_step NAME TIMEOUT_S CMD... : runs CMD with a timeout, logs to $LOG/NAME.log, records the result.
run_step() {
  local name=$1 limit=$2 start rc
  shift 2
  start=$(date +%s)
  echo "== $name (timeout ${limit}s): $*" | tee -a "$LOG/summary.txt"
  set +e
  timeout --kill-after=15 "$limit" "$@" >"$LOG/$name.log" 2>&1
  rc=$?
  set -e
  tail -n 25 "$LOG/$name.log"
  if [ "$rc" -ne 0 ]; then
    FAILED=1
    if [ "$rc" -eq 124 ]; then echo "!! $name timed out after ${limit}s"; fi
  fi
  SUMMARY+=("$(printf '%-12s rc=%-4s %5ss' "$name" "$rc" "$(($(date +%s) - start))")")
  return 0
}

last_rc() { [[ ${SUMMARY[-1]} =~ rc=0[[:space:]] ]]; }

# 1. environment
want env && run_step env 60 bash -c "nvidia-smi || true; nvcc --version || true; $PY -c '
import sys, torch
print(\"python\", sys.version.split()[0], \"torch\", torch.__version__, \"cuda\", torch.version.cuda)
print(\"device\", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
print(\"cpu threads\", torch.get_num_threads())
sys.exit(0 if torch.cuda.is_available() else \"no CUDA device: torch.cuda.is_available() is False\")
'"

# 2. build (in place, CUDA for sm_90 only)
BUILD_OK=0
if want build; then
  # the extension built before is set aside (the load step must see the new build) and put back
  # if the build fails, so a failed build leaves the checkout as it was
  mkdir -p "$LOG/previous_ext" && rm -f "$LOG"/previous_ext/_C*.so
  for f in "$ROOT"/aieg_fast/_C*.so; do [ -e "$f" ] && mv "$f" "$LOG/previous_ext/"; done
  run_step build 240 env AIEG_FAST_CUDA=1 TORCH_CUDA_ARCH_LIST="$ARCH" MAX_JOBS="${MAX_JOBS:-16}" \
    "$PY" setup.py build_ext --inplace
  if ! last_rc; then
    for f in "$LOG"/previous_ext/_C*.so; do [ -e "$f" ] && mv "$f" "$ROOT/aieg_fast/"; done
  fi
  rm -rf "$LOG/previous_ext"  # not sent back with the logs
fi
if ! want build || last_rc; then
  run_step load 60 "$PY" -c "
from aieg_fast import _ext
info = _ext.build_info()
print(info)
assert _ext.HAS_EXT, info['ext_error']
assert _ext.WITH_CUDA, 'built without CUDA'
missing = {'interpolate_path', 'adaptive_alphas', 'emphasis_factors', 'integrate_gradients',
           'attention_gradient_product', 'posnorm', 'hvp_l1_mean'} - set(info['cuda_ops'])
assert not missing, f'no CUDA kernel for {sorted(missing)}'
"
  last_rc && BUILD_OK=1
fi

# 3. tests (CPU and CUDA parametrisations of the op tests; -rs lists the skip reasons)
if [ "$BUILD_OK" -eq 1 ] && want tests; then
  run_step tests 150 "$PY" -m pytest -q -rs -p no:cacheprovider -m "not cuda" tests/ops/test_ops.py tests/ops/test_ext_loading.py
  run_step tests_cuda 90 "$PY" -m pytest -q -rs -p no:cacheprovider -m cuda tests/ops
elif [ "$BUILD_OK" -ne 1 ]; then
  echo "!! skipping tests, product check, bench, dataset and verify: the CUDA extension did not build or load" \
    "(see $LOG/build.log or $LOG/load.log)" | tee -a "$LOG/summary.txt"
fi

# 7 (run fourth). the whole product on CUDA against the CPU (tiny models of every family; table in product_check.csv)
if [ "$BUILD_OK" -eq 1 ] && want product; then
  run_step product 240 "$PY" benchmarks/gpu_product_check.py --device cuda --out "$LOG/product"
fi

# 4. benchmark on CUDA
if [ "$BUILD_OK" -eq 1 ] && want bench; then
  run_step bench 120 "$PY" benchmarks/bench_ops.py --device cuda --dtypes float32,bfloat16 \
    --min-run-time 0.05 --max-gb 40
fi

# 5. device-to-device copy bandwidth (read + write bytes / time), with CUDA events
want d2d && run_step d2d_copy 60 "$PY" -c "
import sys, torch
if not torch.cuda.is_available():
    sys.exit('no CUDA device: the copy bandwidth is not measured')
n = 1 << 30  # 1 GiB
x = torch.empty(n, dtype=torch.uint8, device='cuda'); y = torch.empty_like(x)
for _ in range(3): y.copy_(x)
torch.cuda.synchronize()
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
reps = 20
start.record()
for _ in range(reps): y.copy_(x)
end.record(); torch.cuda.synchronize()
t = start.elapsed_time(end) / 1e3 / reps
print(f'd2d copy 1 GiB: {t * 1e3:.3f} ms, {2 * n / t / 1e9:.1f} GB/s (read + write)')
"

# a tiny random GPT-2 of tests/builders.py, saved, and a small data file (steps 6 and 8)
if [ "$BUILD_OK" -eq 1 ] && { want dataset || want verify; }; then
  cat > "$LOG/dataset_setup.py" <<EOF
import sys
sys.path.insert(0, "$ROOT/tests")
from builders import make_tiny_gpt2
m, t = make_tiny_gpt2()
m.save_pretrained("$LOG/tiny"); t.save_pretrained("$LOG/tiny")
with open("$LOG/data.jsonl", "w") as fh:
    fh.writelines('{"text": "the movie is good %d"}\\n' % i for i in range(32))
EOF
fi

# 6. attribute-dataset on the GPU
if [ "$BUILD_OK" -eq 1 ] && want dataset; then
  run_step dataset 120 bash -c "rm -rf '$LOG/dataset_out' && '$PY' '$LOG/dataset_setup.py' && '$PY' -m aieg_fast.cli attribute-dataset \\
    '$LOG/data.jsonl' --model '$LOG/tiny' --device ${DATASET_DEVICE:-cuda} --batch-size 8 --out '$LOG/dataset_out' --no-progress"
fi

# 8. aieg-fast verify on the GPU, float32 and bfloat16: every method and kernel mode, extension
#    against reference (the max rel diff of bfloat16 measures what aieg_fast.verify.TOLERANCE allows)
if [ "$BUILD_OK" -eq 1 ] && want verify; then
  run_step verify 150 bash -c "'$PY' '$LOG/dataset_setup.py' && rc=0 && for dt in float32 bfloat16; do \\
    '$PY' -m aieg_fast.cli verify --model '$LOG/tiny' --device cuda --dtype \$dt || rc=1; done; exit \$rc"
fi

# Summary
{
  echo
  echo "==================== gpu_check summary ($(($(date +%s) - T0))s, logs in $LOG) ===================="
  printf '%s\n' "${SUMMARY[@]}"
  [ -f "$LOG/tests.log" ] && echo "tests:      $(grep -E '(passed|failed|error)' "$LOG/tests.log" | tail -n 1)"
  [ -f "$LOG/tests_cuda.log" ] && echo "tests_cuda: $(grep -E '(passed|failed|error|deselected)' "$LOG/tests_cuda.log" | tail -n 1)"
  grep -h 'd2d copy' "$LOG/d2d_copy.log" 2>/dev/null || true
  grep -h '^product check' "$LOG/product.log" 2>/dev/null || true
  grep -hE '^model:|MISMATCH' "$LOG/verify.log" 2>/dev/null || true
  grep -h '| NO |' "$LOG/product.log" 2>/dev/null || true
  if [ -f "$LOG/bench.log" ]; then
    grep -h '^# cuda' "$LOG/bench.log" || true
    echo "| op | device | dtype | shape | ext ms | ref ms | ext GB/s | ref GB/s | ref/ext |"
    grep -h '| cuda |' "$LOG/bench.log" || true
  fi
  echo "overall: $([ "$FAILED" -eq 0 ] && echo OK || echo FAILED)"
} | tee -a "$LOG/summary.txt"
exit "$FAILED"
