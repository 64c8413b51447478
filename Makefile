# benchslice — the README's commands. Python 3.11 with venv/pip is all `make run` needs.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.DEFAULT_GOAL := help
.PHONY: help install install-dev run serve worker migrate test test-core openapi lint format bench mutation clean

help:
	@echo "make run      start the API and one Celery worker (SQLite + embedded broker by default)"
	@echo "make test     run the whole test suite (needs Postgres and Redis on 127.0.0.1)"
	@echo "make openapi  regenerate openapi/openapi.json"
	@echo "make lint     ruff check + format check"
	@echo "make bench    run the benchmark scripts in bench/"
	@echo "make mutation mutation testing of app/core (mutmut; not in CI, ~30+ min on 2 cores)"

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# Re-install when pyproject.toml changes (the stamp files record the last install).
$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e .
	@touch $@

$(VENV)/.installed-dev: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[dev]'
	@touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

run: install
	$(PY) -m app.launcher

serve: install
	$(PY) -m app.cli serve

worker: install
	$(PY) -m app.cli worker

migrate: install
	$(PY) -m app.cli migrate

# Two xdist workers by default (the machine has two cores); each worker is its own pytest
# session with its own database, Celery queue and Redis prefix (tests/conftest.py). Files stay
# whole on one worker (--dist loadfile) so module fixtures start once. PYTEST_WORKERS=0 runs serially.
PYTEST_WORKERS ?= 2

test: install-dev
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

test-core: install-dev
	$(PY) -m pytest tests/core $(PYTEST_ARGS)

openapi: install
	$(PY) openapi/export.py

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: install-dev
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: install-dev
	@set -e; for script in bench/bench_*.py; do \
		[ -e "$$script" ] || { echo "no bench/bench_*.py scripts yet"; break; }; \
		echo "== $$script"; $(PY) "$$script"; \
	done

mutation: install-dev
	$(PY) bench/mutation.py $(MUTATION_ARGS)

clean:
	rm -rf var/*.sqlite3* .pytest_cache .ruff_cache
