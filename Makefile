# txmq: two commands. `make run` runs the main job, `make test` passes the tests.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: run test install check lint typecheck unit soak bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,postgres,bench,spark]'
	rm -f $(VENV)/.installed-* && touch $(STAMP)

install: $(STAMP)  ## create .venv and install txmq with its dev tools

run: install  ## start a broker on the embedded file store and run the transfer demo against it
	HOME=$${TXMQ_HOME:-$$PWD/.venv/home} $(BIN)/txmq demo transfer --data-dir ./demo-data

lint: install
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: install
	$(BIN)/mypy

test: install lint typecheck  ## lint, type-check and run the whole test suite
	HOME=$$PWD/.venv/home $(BIN)/python -m pytest -q -p no:cacheprovider

unit: install
	$(BIN)/python -m pytest -q tests/unit tests/property

soak: install  ## the deterministic simulation over 10,000 seeds (SOAK_SEEDS, SOAK_BUDGET_S to change)
	$(BIN)/python -m txmq.testing.soak --seeds $${SOAK_SEEDS:-10000} --budget-s $${SOAK_BUDGET_S:-0}

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
