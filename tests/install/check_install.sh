#!/usr/bin/env bash
# Installs aieg_fast as a user would into an environment that already has torch, and checks that
# it runs there. Run by tests/install/test_install.py (so by `make test`); on its own:
#
#   bash tests/install/check_install.sh [PYTHON]     # PYTHON: the environment with the user's torch (default python3)
#
# Steps (in a temporary folder, removed at the end unless KEEP=1):
#   1. sdist      a source archive of this checkout (python setup.py sdist; nothing is written in the checkout)
#   2. wheel      a wheel built from that archive against PYTHON's torch, as the README says:
#                 pip wheel --no-build-isolation --no-deps (compiles the extension: 1 to 3 minutes)
#   3. venv       a fresh venv that already has the user's torch and the dependencies: PYTHON's
#                 site-packages reached through a .pth file (FULL=1: `pip install torch==<PYTHON's>`
#                 and the dependencies from the package index instead)
#   4. installed  the wheel installed there with `pip install --no-index` (pip checks that every
#                 dependency is already there and may download nothing); `aieg-fast info` shows the
#                 extension loaded and built against the running torch; one attribution on a tiny
#                 model runs the compiled kernels
#   5. fallback   a wheel whose compilation fails (CC=CXX=false): it builds and installs, importing
#                 warns, and the attribution runs on the reference kernels
#   6. isolated   plain `pip wheel` of the archive (pip's build isolation, no --no-build-isolation):
#                 no torch is downloaded, the package comes without the extension (skipped when pip
#                 cannot get setuptools and wheel for the isolated build environment)
# Prints "check_install: OK" last and exits 0 when every step passed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
PY=${1:-${PYTHON:-python3}}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/aieg-install-XXXXXX")
if [ "${KEEP:-0}" != 1 ]; then trap 'rm -rf "$WORK"' EXIT; fi
unset PYTHONPATH
export PIP_DISABLE_PIP_VERSION_CHECK=1 AIEG_FAST_NO_EXT_WARNING=
step() { echo "== check_install: $*"; }
fail() { echo "check_install: FAILED: $*" >&2; exit 1; }

TORCH=$("$PY" -c "import torch; print(torch.__version__)")
step "user's environment: $("$PY" -c 'import sys; print(sys.executable)') with torch $TORCH; work in $WORK"

step "1. sdist"
mkdir -p "$WORK/egg"  # the metadata goes there, not into the checkout
(cd "$ROOT" && "$PY" setup.py -q egg_info --egg-base "$WORK/egg" sdist -d "$WORK/sdist" >"$WORK/sdist.log" 2>&1) \
  || { cat "$WORK/sdist.log"; fail "sdist"; }
SDIST=$(ls "$WORK"/sdist/aieg_fast-*.tar.gz)
tar -tzf "$SDIST" >"$WORK/sdist.txt"
grep -q "csrc/cuda/posnorm_kernel.cu" "$WORK/sdist.txt" || fail "the source archive lacks csrc/cuda (MANIFEST.in)"
grep -q "^aieg_fast-[^/]*/LICENSE$" "$WORK/sdist.txt" || fail "the source archive lacks the licence text (MANIFEST.in)"
! grep -q "^aieg_fast-[^/]*/tests/" "$WORK/sdist.txt" || fail "the source archive holds a fragment of tests/ (MANIFEST.in prunes it)"

step "2. wheel from the sdist against torch $TORCH (pip wheel --no-build-isolation --no-deps)"
"$PY" -m pip wheel -v --no-build-isolation --no-deps -w "$WORK/wheel" "$SDIST" >"$WORK/wheel.log" 2>&1 \
  || { tail -n 40 "$WORK/wheel.log"; fail "wheel build"; }
grep "aieg_fast setup:" "$WORK/wheel.log" || true
WHEEL=$(ls "$WORK"/wheel/aieg_fast-*.whl)
"$PY" -m zipfile -l "$WHEEL" >"$WORK/wheel.txt"
grep -q "aieg_fast/_C" "$WORK/wheel.txt" || fail "the wheel holds no compiled extension"
grep -q "licenses/aieg_fast/data/LICENSES.md" "$WORK/wheel.txt" || fail "the wheel lacks the data licences (pyproject license-files)"
grep -q "aieg_fast/data/LICENSES.md" "$WORK/sdist.txt" || fail "the source archive lacks the data licences (package-data)"

step "3. a fresh venv with the user's torch"
VPY=$WORK/venv/bin/python
if [ "${FULL:-0}" = 1 ]; then
  "$PY" -m venv "$WORK/venv"
  "$VPY" -m pip install -q "torch==$TORCH" || fail "pip install torch==$TORCH"
  INSTALL=("$VPY" -m pip install -q)
else  # no pip or setuptools of its own: those of the user's environment are seen, as torch is
  "$PY" -m venv --without-pip "$WORK/venv"
  SITE=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  VSITE=$("$VPY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  echo "$SITE" > "$VSITE/user_environment.pth"
  INSTALL=("$PY" -m pip --python "$VPY" install -q --no-index)
fi

# probe NAME EXPECT_EXT: aieg-fast info and one attribution in the venv, from a folder without the checkout
probe() {
  local name=$1 expect=$2
  mkdir -p "$WORK/probe" && cp "$ROOT/tests/builders.py" "$WORK/probe/"
  (cd "$WORK/probe" && "$WORK/venv/bin/aieg-fast" info >"$WORK/info_$name.json" 2>"$WORK/info_$name.err") \
    || { cat "$WORK/info_$name.err"; fail "$name: aieg-fast info"; }
  (cd "$WORK/probe" && "$VPY" - "$expect" "$WORK/venv" "$WORK/info_$name.json" <<'EOF'
import json, sys, warnings
expect, venv, info_file = sys.argv[1] == "1", sys.argv[2], sys.argv[3]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import aieg_fast
ext_warnings = [w for w in caught if issubclass(w.category, aieg_fast.ExtensionWarning)]
assert aieg_fast.__file__.startswith(venv), f"aieg_fast imported from {aieg_fast.__file__}, not from the venv"
info = json.load(open(info_file))["extension"]
assert info["has_ext"] is expect, f"aieg-fast info: has_ext={info['has_ext']} ({info['ext_error']}), expected {expect}"
assert bool(ext_warnings) is not expect, f"ExtensionWarning at import: {[str(w.message) for w in ext_warnings]}"
if expect:
    assert info["torch_version"].split("+")[0] == info["torch_runtime"].split("+")[0], info
from builders import make_tiny_gpt2
ex = aieg_fast.load_model(*make_tiny_gpt2())
res = ex.attribute("the movie is good", method="integrated_gradients", n_steps=8)
used = set(res.backend.values())
assert used == ({"ext"} if expect else {"reference"}), f"kernels used: {res.backend}"
print(f"  aieg-fast info: has_ext={info['has_ext']}, built against torch {info.get('torch_version')}, "
      f"running {info['torch_runtime']}; attribution backends {sorted(used)}; "
      f"warning at import: {str(ext_warnings[0].message)[:90] + '...' if ext_warnings else 'none'}")
EOF
  ) || fail "$name: probe"
}

step "4. the wheel installed in the venv"
"${INSTALL[@]}" "$WHEEL" || fail "pip install of the wheel"
probe installed 1

step "5. a wheel whose compilation fails (CC=CXX=false)"
CC=false CXX=false "$PY" -m pip wheel -v --no-build-isolation --no-deps -w "$WORK/wheel_fail" "$SDIST" >"$WORK/wheel_fail.log" 2>&1 \
  || { tail -n 40 "$WORK/wheel_fail.log"; fail "a failed compilation stopped the installation"; }
grep -q "the extension could not be built" "$WORK/wheel_fail.log" || fail "no warning line for the failed compilation"
grep -h "WARNING: the extension could not be built" "$WORK/wheel_fail.log" | cut -c1-160
"${INSTALL[@]}" --force-reinstall --no-deps "$WORK"/wheel_fail/aieg_fast-*.whl || fail "pip install of the fallback wheel"
probe fallback 0

step "6. plain pip wheel (build isolation)"
if "$PY" -m pip wheel -v --no-deps -w "$WORK/wheel_iso" "$SDIST" >"$WORK/wheel_iso.log" 2>&1; then
  if grep -Eq "Downloading torch|Collecting torch" "$WORK/wheel_iso.log"; then fail "the isolated build fetched torch"; fi
  grep -q "torch is not importable in this build environment" "$WORK/wheel_iso.log" || fail "no line about the missing torch"
  "${INSTALL[@]}" --force-reinstall --no-deps "$WORK"/wheel_iso/aieg_fast-*.whl || fail "pip install of the isolated wheel"
  probe isolated 0
elif grep -Eqi "setuptools|wheel" "$WORK/wheel_iso.log" && grep -Eqi "no matching distribution|could not find a version|network|connection" "$WORK/wheel_iso.log"; then
  echo "  skipped: pip could not get setuptools and wheel for an isolated build (no package index)"
else
  tail -n 40 "$WORK/wheel_iso.log"; fail "isolated build"
fi
echo "check_install: OK"
