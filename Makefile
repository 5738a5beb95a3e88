# gbx developer entry points. `make test` and `make run` set everything up first.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
GBX := $(PY) -m gbx
TORCH_VERSION := 2.13.0
STAMP := $(VENV)/.gbx-setup.stamp
PACKAGES := core $(patsubst %/pyproject.toml,%,$(wildcard plugins/*/pyproject.toml))
PYPROJECTS := pyproject.toml $(addsuffix /pyproject.toml,$(PACKAGES))
TEST_PATHS := core/tests $(wildcard plugins/*/tests) tests
RUN_STEPS ?= 30000
# PPO settings that solve the toy env in about 20k steps on a CPU.
PPO_TOY_ARGS ?= --set algo.num_envs=32 --set algo.rollout_steps=64

.PHONY: setup run test lint roms clean-runs

setup: $(STAMP)

# Rebuilt only when a pyproject (or this file) changes. torch and warp are
# installed only when missing: pip then picks the CPU or CUDA wheel for this box.
$(STAMP): $(PYPROJECTS) Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -c "import setuptools" 2>/dev/null || $(PIP) install setuptools
	@$(PY) -c "import torch" 2>/dev/null || $(PIP) install torch==$(TORCH_VERSION)
	@$(PY) -c "import warp" 2>/dev/null || $(PIP) install warp-lang
	$(PIP) install --no-build-isolation $(addprefix -e ,$(PACKAGES)) -e ".[dev]"
	@touch $@

# The main job: PPO on the toy env when the PPO plugin is installed, else the
# example algorithm (installed on demand; it is not part of a default setup).
# Observers: console + jsonl (+ plot) when the observers plugin is installed.
PICK_OBSERVERS := from gbx.plugins import get_host; \
  o = get_host().registry.observers; \
  print(",".join(n for n in ("console", "jsonl", "plot") if n in o) or "print")

run: setup
	@observers=$$($(PY) -c '$(PICK_OBSERVERS)'); \
	if $(PY) -c "import sys; from gbx.plugins import get_host; \
	    sys.exit('ppo' not in get_host().registry.algorithms)"; then \
	  $(GBX) run --algo ppo --env toy --steps $(RUN_STEPS) --observer $$observers $(PPO_TOY_ARGS); \
	else \
	  $(PIP) install --no-deps --no-build-isolation -q -e examples/third_party_algo && \
	  $(GBX) run --algo random --env toy --steps $(RUN_STEPS) --observer $$observers; \
	fi

test: setup
	$(PY) -m pytest -q $(TEST_PATHS)

PLUGIN_SRC := $(wildcard plugins/*/src)

lint: setup
	$(PY) -m ruff check core $(wildcard plugins/*/src plugins/*/tests) examples tests
	$(PY) -m mypy core/src/gbx
	@set -e; for src in $(PLUGIN_SRC); do \
	  echo "mypy $$src"; MYPYPATH=core/src:$$src $(PY) -m mypy $$src; \
	done

# Test/conformance ROMs are built by the Game Boy plugin.
roms: setup
	$(GBX) gameboy build-roms

clean-runs:
	rm -rf runs
