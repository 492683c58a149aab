# Two entry points a newcomer needs; both create the virtualenv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/infscale: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

.PHONY: demo test lint bench
demo: $(BIN)/infscale  ## the main job on the embedded default: compare autoscalers offline
	$(BIN)/infscale replay compare --out replay-out

lint: $(BIN)/infscale
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint  ## ruff, mypy, pytest
	$(BIN)/pytest -q

bench: $(BIN)/infscale
	$(BIN)/python -m bench
