# The entry points a newcomer needs; each creates the virtualenv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# stamps: the package with its development extras (tests, lint), or its dependencies only (demo)
DEV := $(VENV)/.dev-installed
RUNTIME := $(VENV)/.runtime-installed
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
IMAGE ?= ghcr.io/infscale/infscale:$(VERSION)

$(DEV): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@ $(RUNTIME)

$(RUNTIME): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $@

$(BIN)/infscale: $(DEV)  ## the development set-up, by the name the docs use

.PHONY: demo test lint bench compiled manifests image
demo: $(RUNTIME)  ## the main job on the embedded default: compare autoscalers offline
	$(BIN)/infscale replay compare --out replay-out

lint: $(DEV)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint  ## ruff, mypy, pytest
	$(BIN)/pytest -q

bench: $(DEV)
	$(BIN)/python -m bench

compiled: $(DEV)  ## optional: the policy core compiled by mypyc into build/mypyc (INFSCALE_COMPILED_CORE=true loads it)
	$(BIN)/python -m autoscaler.compiledcore build

manifests: $(RUNTIME)  ## deploy/release/infscale.yaml, the one-file install, from the kustomize bases
	$(BIN)/python deploy/build_release.py

image:  ## the container image, with docker or podman, whichever reaches its engine
	@for engine in docker podman; do \
	    command -v $$engine >/dev/null 2>&1 || continue; \
	    if $$engine info >/dev/null 2>&1; then \
	        echo "$$engine build -t $(IMAGE) ."; exec $$engine build -t $(IMAGE) .; \
	    fi; \
	    echo "make image: $$engine is installed but cannot reach its engine ('$$engine info' failed): is the daemon running?" >&2; \
	done; \
	echo "make image: no working docker or podman; install one (podman needs no daemon) and retry" >&2; exit 1
