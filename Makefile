# txmq: two commands. `make run` runs the main job, `make test` passes the tests.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: run test install native pure check lint typecheck unit soak chaos bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	@# pure here: pip's isolated build env lacks the dependencies' stubs that mypyc's type check needs;
	@# `native` below compiles in this venv, with the same mypy as `make typecheck`
	TXMQ_PURE=1 $(BIN)/python -m pip install -q -e '.[dev,postgres,bench,spark]'
	@# Spark reads a PostgreSQL ledger through JDBC (tests/spark/test_reconcile.py): the Debian jar
	test -f /usr/share/java/postgresql.jar || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
		&& apt-get install -y -q libpostgresql-jdbc-java >/dev/null; } \
		|| echo "note: /usr/share/java/postgresql.jar missing (apt-get install libpostgresql-jdbc-java)"
	rm -f $(VENV)/.installed-* && touch $(STAMP)

install: $(STAMP) native  ## create .venv and install txmq with its dev tools (hot modules compiled)

# The mypyc-compiled modules (list: build_native.py) are rebuilt in place whenever one of their
# sources, or the list, changed since the last build: a stale .so would run old code (txmq refuses it
# at import). No compiler or a mypyc failure leaves pure Python; TXMQ_PURE=1 compiles nothing.
native: $(STAMP)  ## (re)compile the hot modules with mypyc if their sources changed
	@$(BIN)/python build_native.py --check || $(BIN)/python setup.py -q build_ext --inplace
	@PYTHONPATH=src $(BIN)/python -m txmq.native --summary

pure:  ## remove the compiled modules (pure Python until the next `make install`)
	$(PY) build_native.py --clean

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

chaos: install  ## SIGKILL rounds through the fault proxy, long gRPC/HTTP/2/remoting fuzzing, a faulty transfer demo
	HOME=$$PWD/.venv/home TXMQ_CHAOS_ROUNDS=$${CHAOS_ROUNDS:-20} TXMQ_FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-200} \
		$(BIN)/python -m pytest -q -p no:cacheprovider tests/chaos tests/fuzz
	HOME=$$PWD/.venv/home $(BIN)/txmq demo transfer --data-dir $$PWD/.venv/chaos-demo \
		--transfers $${CHAOS_TRANSFERS:-200} --seed $${CHAOS_SEED:-1} --json

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache build
	$(PY) build_native.py --clean
