# gbx developer entry points. `make test` and `make run` set everything up first.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
GBX := $(PY) -m gbx
TORCH_VERSION := 2.13.0
STAMP := $(VENV)/.gbx-setup.stamp
PACKAGES := core toolkit $(patsubst %/pyproject.toml,%,$(wildcard plugins/*/pyproject.toml))
PYPROJECTS := pyproject.toml $(addsuffix /pyproject.toml,$(PACKAGES))
# Optional extras that the test suite exercises (TensorBoard event files, the Gymnasium adapter).
INSTALL_SPECS := $(patsubst plugins/env_gameboy,plugins/env_gameboy[gymnasium],\
	$(patsubst plugins/observers,plugins/observers[tensorboard],$(PACKAGES)))
TEST_PATHS := core/tests toolkit/tests $(wildcard plugins/*/tests) tests

.PHONY: setup run test test-slow wheels-smoke lint roms clean-runs

setup: $(STAMP)

# Rebuilt only when a pyproject (or this file) changes. torch and warp are
# installed only when missing: pip then picks the CPU or CUDA wheel for this box.
$(STAMP): $(PYPROJECTS) Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -c "import setuptools" 2>/dev/null || $(PIP) install setuptools
	@$(PY) -c "import torch" 2>/dev/null || $(PIP) install torch==$(TORCH_VERSION)
	@$(PY) -c "import warp" 2>/dev/null || $(PIP) install warp-lang
	$(PIP) install --no-build-isolation $(addprefix -e ,$(INSTALL_SPECS)) -e ".[dev]"
	@touch $@

# The main job: PPO on the first bundled stage (gbx quest 1, leave the house) on the best
# device present: examples/quest1_gpu.toml (thousands of envs) on a GPU, quest1_cpu.toml on
# a CPU. Default observers: console progress, train_log.jsonl and media/train.png.
# `gbx run` ends by printing where the log, plot and checkpoint are.
# RUN_ARGS adds options, e.g. RUN_ARGS="--steps 20000 --set algo.lr=3e-4".
run: setup
	@device=$$($(PY) -c "import torch; print('gpu' if torch.cuda.is_available() else 'cpu')"); \
	echo "$(GBX) run --config examples/quest1_$$device.toml $(RUN_ARGS)"; \
	$(GBX) run --config examples/quest1_$$device.toml $(RUN_ARGS)

# The fast suite on every core (pytest-xdist): two workers on the 2-core development
# machine keep it under 3 minutes.
test: setup
	$(PY) -m pytest -q -n auto $(TEST_PATHS)

# Long conformance ROM runs and other slow tests (a separate CI step), on every core too:
# 664 s instead of 956 s on the 2-core machine.
test-slow: setup
	$(PY) -m pytest -q -n auto -m slow $(TEST_PATHS)

# Every distribution built as a wheel and installed, non-editable, in fresh venvs without the
# source tree (a CI step); torch and warp are reused from .venv, not downloaded.
wheels-smoke: setup
	bash .ci/wheels_smoke

PLUGIN_SRC := toolkit/src $(wildcard plugins/*/src)

lint: setup
	$(PY) -m ruff check core toolkit $(wildcard plugins/*/src plugins/*/tests) examples tests
	$(PY) -m mypy core/src/gbx
	@set -e; for src in $(PLUGIN_SRC); do \
	  echo "mypy $$src"; MYPYPATH=core/src:toolkit/src:$$src $(PY) -m mypy $$src; \
	done

# The bundled game (gbx quest) assembled from its source by the Game Boy plugin.
roms: setup
	$(GBX) gameboy build-roms

clean-runs:
	rm -rf runs
