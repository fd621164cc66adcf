# certlabel developer commands. `make help` lists them; each works on a machine that has only
# Python 3.11 and make: the first one creates .venv and installs the project into it.

SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
# Re-install only when pyproject.toml is newer than the last install. Two stamps: the runtime
# dependencies alone (what `make demo` needs), and those with the dev extras (test, lint, type
# tools); a dev install also satisfies the runtime one.
RUNTIME_STAMP := $(VENV)/.certlabel-runtime-installed
STAMP := $(VENV)/.certlabel-installed
MANAGE := $(BIN)/python manage.py
PYTEST_ARGS ?=
BENCH_ARGS ?=
# pytest-xdist workers for test-fast: auto is one per core.
WORKERS ?= auto
# What test-fast leaves out: the real browser, the real Celery worker, the long simulations and
# the third-party datasets. `make test` runs everything. The reused SQLite test databases live in
# .pytest_cache/d/test-db (one per worker); PYTEST_ARGS=--create-db rebuilds them, e.g. after
# switching to a branch with other migrations. PYTEST_ARGS=--lf reruns only the last failures.
# Property tests run a fifth of their examples there (Hypothesis profile "fast", tests/conftest.py);
# `make test` and CI run them all. test-fast writes bytecode even where
# PYTHONDONTWRITEBYTECODE is set, so that each worker need not rewrite the asserts of every test
# module again (pytest caches them in __pycache__, which git ignores): seconds of CPU per run.
FAST_MARKERS := not browser and not celery_worker and not slow and not shared_data
MYPY_TARGETS := labeling certification manage.py
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: help demo test test-fast install install-runtime fmt lint type check migrations-check bench

help: ## Show this list of targets
	@echo "Usage: make <target>   (variables: PYTHON, VENV, PYTEST_ARGS, WORKERS, BENCH_ARGS)"
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(BIN)/python:
	@test -n "$(PYTHON)" || { echo "Python 3.11 not found: install it or pass PYTHON=/path/to/python3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)

$(RUNTIME_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	@touch $(RUNTIME_STAMP)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP) $(RUNTIME_STAMP)

install: $(STAMP) ## Create .venv (if missing) and install certlabel with dev tools (if pyproject changed)

install-runtime: $(RUNTIME_STAMP) ## Create .venv (if missing) and install certlabel's runtime dependencies only

demo: install-runtime ## Migrate the SQLite database, set up the demo project and users, serve on 127.0.0.1:8000
	$(MANAGE) migrate --noinput
	$(MANAGE) demo_setup
	$(MANAGE) runserver 127.0.0.1:8000

test: install ## Run the whole test suite (SQLite and eager Celery unless DATABASE_URL / CELERY_BROKER_URL are set)
	$(BIN)/pytest $(PYTEST_ARGS)

test-fast: install ## The quick loop: parallel (WORKERS), reused test db, no browser/worker/slow/dataset tests
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n $(WORKERS) --reuse-db -m "$(FAST_MARKERS)" \
		--hypothesis-profile=fast $(PYTEST_ARGS)

fmt: install ## Format the code and apply ruff's safe fixes
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

lint: install ## Check style and formatting with ruff (changes nothing)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

type: install ## Type-check with mypy (django-stubs, drf-stubs; the statistics strictly)
	$(BIN)/mypy $(MYPY_TARGETS)

migrations-check: install-runtime ## Fail if a model change has no migration
	$(MANAGE) makemigrations --check --dry-run

check: lint type migrations-check test ## lint + type + migrations-check + test: what a change must pass

bench: install ## Import benchmark, 10k questions (BENCH_ARGS="--questions 1000 --postgres postgres://postgres@127.0.0.1:5432/postgres")
	$(BIN)/python tests/benchmarks/bench_import.py $(BENCH_ARGS)
