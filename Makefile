# dpsense: `make demo` and `make test` work from a fresh clone; each creates .venv when missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo demo-math test test-fast lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The demo's own environment holds only what a user of the embedded CLI installs: the `duckdb` and
# `cli` extras (no Spark, browser, service or developer tools); `make test` uses .venv with `dev`.
DEMO_VENV := .venv-demo
DEMO_STAMP := $(DEMO_VENV)/.installed

$(DEMO_STAMP): pyproject.toml
	test -x $(DEMO_VENV)/bin/python || $(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(DEMO_VENV)/bin/python -m pip install --quiet -e '.[duckdb,cli]'
	touch $(DEMO_STAMP)

# The main job: a synthetic health-events dataset registered in a local SQLite ledger and released
# on DuckDB; the second run returns the stored release and leaves the budget unchanged.
demo: $(DEMO_STAMP)
	$(DEMO_VENV)/bin/dpsense demo --dir build/demo
	@echo "--- the same request again: the stored release, no new charge ---"
	$(DEMO_VENV)/bin/dpsense demo --dir build/demo

demo-math: $(STAMP)
	$(BIN)/python examples/seed_demo.py
	$(BIN)/python examples/beyond_global.py

# Two pytest workers (the machine's two cores), each taking whole files: a file's tests share its
# module fixtures and run in order, as they do serially. PYTEST_WORKERS=0 runs in one process.
PYTEST_WORKERS ?= 2
PYTEST_PARALLEL := $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadfile)

test: $(STAMP)
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL)

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL) -m "not statistical"

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples tools
	$(BIN)/ruff format --check src tests benchmarks examples tools
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python tools/check_cycles.py

bench: $(STAMP)
	$(BIN)/python benchmarks/noise.py
	$(BIN)/python benchmarks/smooth_speed.py
	$(BIN)/python benchmarks/estimators.py
	$(BIN)/python -m pip install --quiet -e '.[bench-anchors]'
	$(BIN)/python benchmarks/accuracy.py
	$(BIN)/python benchmarks/mean_split.py
	$(BIN)/python benchmarks/replace_median.py
	$(BIN)/python benchmarks/median_interval.py
	$(BIN)/python benchmarks/median_rates.py
	$(BIN)/python benchmarks/unseen_median.py
	$(BIN)/python benchmarks/decimal_points.py
	$(BIN)/python benchmarks/joint_quantiles.py
	$(BIN)/python benchmarks/adaptive_default.py
	$(BIN)/python benchmarks/ledger.py
	$(BIN)/python benchmarks/release.py
	$(BIN)/python benchmarks/spark.py
	$(BIN)/python benchmarks/service_load.py

clean:
	rm -rf $(VENV) $(DEMO_VENV) .pytest_cache .mypy_cache .ruff_cache build
