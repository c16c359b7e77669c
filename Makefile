# Two commands matter: `make run` and `make test`. Both set up the virtual environment first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The CPU build of torch; on these machines it installs from local disk. Override for CUDA builds.
TORCH_SPEC ?= torch==2.13.0
PYTEST_ARGS ?=
# pytest-xdist workers (`auto`: one per core); tests sharing Docker or Ray keep to one of them.
TEST_WORKERS ?= auto
PARALLEL := -n $(TEST_WORKERS) --dist loadgroup

.PHONY: help venv venv-sglang venv-skyrl run test test-fast test-sglang lint typecheck bench images reap clean sglang-wheel

help:
	@echo "make run        set up, build what is needed, run the main job on the embedded default"
	@echo "make test       set up, then run the whole test suite (needs a Docker engine)"
	@echo "make test-fast  the suite without tests marked slow"
	@echo "make lint       ruff (lint + format check), mypy, import-layer contracts"
	@echo "make bench      side-by-side benchmarks (env pool, KV cache)"
	@echo "make reap       remove leftover containers of this project"
	@echo "make sglang-wheel  cache SGLang's wheel (its HTTP test kits run against serve-sim)"
	@echo "make test-sglang   the agentkv plugin's tests on real SGLang classes (.venv-sglang)"
	@echo "make venv-skyrl    SkyRL's packages (Python >= 3.12) for the SkyRL adapter's tests"

# SGLang's own HTTP test kits come from its wheel (read, not installed): tests that find no
# wheel skip locally and fail in CI.
SGLANG_VERSION ?= 0.5.23
VERL_VERSION ?= 0.9.1
SGLANG_WHEEL_DIR := .cache/sglang
SGLANG_WHEEL_STAMP := $(SGLANG_WHEEL_DIR)/.sglang-$(SGLANG_VERSION)
# (cachetools and opentelemetry-api, which ray_trainer imports too, come with the trackers' deps.)
VERL_IMPORTS := torchdata==0.11.0 peft==0.21.2 uvicorn fastapi starlette

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH_SPEC)"
	$(BIN)/pip install -q -e '.[dev]'
	# verl's DataProto and RayPPOTrainer's module (the adapter tests run fit's own steps): its
	# own deps would pull a training stack, so verl goes in --no-deps, after the modules
	# ray_trainer imports (with theirs).
	$(BIN)/pip install -q $(VERL_IMPORTS)
	$(BIN)/pip install -q --no-deps "verl==$(VERL_VERSION)"
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(BIN)/conductor run

test: $(STAMP)
	$(BIN)/python -m pytest -q $(PARALLEL) $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" $(PARALLEL) $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy harness envs rollout kvcache
	$(BIN)/lint-imports --no-cache

bench: $(STAMP)
	$(BIN)/conductor bench env

images: $(STAMP)
	$(BIN)/conductor images build

# A second venv with SGLang's real classes (no GPU needed to import and run the radix cache):
# the CUDA build of torch runs on CPU; SGLang installs without its GPU-only dependencies, plus
# the packages its cache, scheduler and server modules import (pins from the wheel's METADATA;
# shared/reference/sglang-cpu.md). About 7 GB and 4-5 minutes; cached by its stamp.
SGLANG_VENV ?= .venv-sglang
SGLANG_BIN := $(SGLANG_VENV)/bin
SGLANG_STAMP := $(SGLANG_VENV)/.installed-$(SGLANG_VERSION)
SGLANG_TORCH_SPEC ?= torch==2.14.1 torchvision==0.29.1
SGLANG_RUNTIME_DEPS := numpy orjson psutil pybase64 requests packaging pillow starlette msgspec \
	pydantic pyzmq tqdm IPython aiohttp transformers==5.19.0 tokenizers==0.23.2 dill \
	apache-tvm-ffi==0.1.11 sentencepiece==0.2.1 compressed-tensors==0.18.0 gguf openai==2.8.0 \
	partial_json_parser setproctitle einops "uvicorn>=0.51" fastapi uvloop jsonschema \
	xgrammar==0.2.7 soundfile==0.13.1 python-multipart

$(SGLANG_STAMP): pyproject.toml
	$(PYTHON) -m venv $(SGLANG_VENV)
	$(SGLANG_BIN)/pip install -q --upgrade pip
	$(SGLANG_BIN)/pip install -q $(SGLANG_TORCH_SPEC)
	$(SGLANG_BIN)/pip install -q --no-deps "sglang==$(SGLANG_VERSION)"
	$(SGLANG_BIN)/pip install -q $(SGLANG_RUNTIME_DEPS)
	$(SGLANG_BIN)/pip install -q -e .  # the project and its own dependencies (torch is there)
	$(SGLANG_BIN)/pip install -q "pytest>=8" "pytest-asyncio>=0.23" "hypothesis>=6.100" "pytest-timeout>=2.3"
	touch $(SGLANG_STAMP)

venv-sglang: $(SGLANG_STAMP)

test-sglang: $(SGLANG_STAMP)
	$(SGLANG_BIN)/python -m pytest -q -m sglang -p no:cacheprovider tests/kvcache/sglang_plugin $(PYTEST_ARGS)

# SkyRL (Python >= 3.12) for the SkyRL adapter's tests: its real GeneratorOutput fields and
# validate_generator_output (tests/rollout/trajectories/skyrl_check.py). --no-deps: the modules
# defining them import Ray, torch (for 3.12 only a CUDA build on the index, several GB) and
# SkyRL's workers, so the check executes SkyRL's own definitions from the installed files, with
# numpy and loguru, all their bodies use. About 18 s (`time make venv-skyrl`: 17.8 s); cached by
# its stamp. Tests that need it skip without it, and fail with CONDUCTOR_REQUIRE_SKYRL=1 (CI).
SKYRL_VERSION ?= 0.4.0
SKYRL_TRAIN_VERSION ?= 0.3.1
SKYRL_VENV ?= .venv-skyrl
SKYRL_STAMP := $(SKYRL_VENV)/.installed-$(SKYRL_VERSION)-$(SKYRL_TRAIN_VERSION)
SKYRL_PYTHON ?= $(shell for p in python3.13 python3.12 $$HOME/.pyenv/versions/3.1[23]*/bin/python3; do \
	$$p -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null && echo $$p && break; done)

$(SKYRL_STAMP):
	@test -n "$(SKYRL_PYTHON)" || { echo "venv-skyrl: no Python >= 3.12 found; set SKYRL_PYTHON=..."; exit 1; }
	$(SKYRL_PYTHON) -m venv $(SKYRL_VENV)
	$(SKYRL_VENV)/bin/pip install -q --no-deps "skyrl==$(SKYRL_VERSION)" "skyrl-train==$(SKYRL_TRAIN_VERSION)" numpy loguru
	touch $(SKYRL_STAMP)

venv-skyrl: $(SKYRL_STAMP)

$(SGLANG_WHEEL_STAMP): $(STAMP)
	mkdir -p $(SGLANG_WHEEL_DIR)
	$(BIN)/pip download -q --no-deps --only-binary=:all: -d $(SGLANG_WHEEL_DIR) "sglang==$(SGLANG_VERSION)"
	touch $(SGLANG_WHEEL_STAMP)

sglang-wheel: $(SGLANG_WHEEL_STAMP)

reap: $(STAMP)
	$(BIN)/conductor envs reap

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache *.egg-info
