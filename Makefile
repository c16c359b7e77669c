# Two commands matter: `make run` and `make test`. Both set up the virtual environment first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The CPU build of torch; on these machines it installs from local disk. Override for CUDA builds.
TORCH_SPEC ?= torch==2.13.0
PYTEST_ARGS ?=

.PHONY: help venv run test test-fast lint typecheck bench images reap clean sglang-wheel

help:
	@echo "make run        set up, build what is needed, run the main job on the embedded default"
	@echo "make test       set up, then run the whole test suite (needs a Docker engine)"
	@echo "make test-fast  the suite without tests marked slow"
	@echo "make lint       ruff (lint + format check), mypy, import-layer contracts"
	@echo "make bench      side-by-side benchmarks (env pool, KV cache)"
	@echo "make reap       remove leftover containers of this project"
	@echo "make sglang-wheel  cache SGLang's wheel (its HTTP test kits run against serve-sim)"

# SGLang's own HTTP test kits come from its wheel (read, not installed): tests that find no
# wheel skip locally and fail in CI.
SGLANG_VERSION ?= 0.5.23
SGLANG_WHEEL_DIR := .cache/sglang
SGLANG_WHEEL_STAMP := $(SGLANG_WHEEL_DIR)/.sglang-$(SGLANG_VERSION)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH_SPEC)"
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(BIN)/conductor run

test: $(STAMP)
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy harness envs rollout kvcache
	$(BIN)/lint-imports --no-cache

bench: $(STAMP)
	$(BIN)/conductor bench env

images: $(STAMP)
	$(BIN)/conductor images build

$(SGLANG_WHEEL_STAMP): $(STAMP)
	mkdir -p $(SGLANG_WHEEL_DIR)
	$(BIN)/pip download -q --no-deps --only-binary=:all: -d $(SGLANG_WHEEL_DIR) "sglang==$(SGLANG_VERSION)"
	touch $(SGLANG_WHEEL_STAMP)

sglang-wheel: $(SGLANG_WHEEL_STAMP)

reap: $(STAMP)
	$(BIN)/conductor envs reap

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache *.egg-info
