# CaptionLab. The README's Quick start is two commands:
#
#   make run    set up, migrate, load the demo, serve http://127.0.0.1:8000/ (SQLite, Celery eager)
#   make test   set up and run the whole test suite (PostgreSQL and Redis when this machine has them)
#
# Other targets: lint (ruff, import floors, migrations, mypy), setup, serve (runserver with your
# DATABASE_URL/REDIS_URL), demo, worker, gpu-worker, beat, bench, clean, distclean.

SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
CELERY := $(VENV)/bin/celery
HOST ?= 127.0.0.1
PORT ?= 8000
PYTEST_ARGS ?=
export PYTEST_ARGS

.DEFAULT_GOAL := help
.PHONY: help setup run serve demo test lint need-redis worker gpu-worker beat bench clean distclean

help:
	@sed -n '1,8p' Makefile | sed 's/^# \{0,1\}//'

setup:
	@bash scripts/setup.sh

# The embedded default: no DATABASE_URL, no REDIS_URL -> SQLite in var/ and Celery in eager mode.
run:
	@env -u DATABASE_URL -u REDIS_URL bash scripts/setup.sh
	@env -u DATABASE_URL -u REDIS_URL $(PY) manage.py demo --base-url http://$(HOST):$(PORT)
	@echo "CaptionLab at http://$(HOST):$(PORT)/ (Ctrl-C stops it)"
	@env -u DATABASE_URL -u REDIS_URL $(PY) manage.py runserver $(HOST):$(PORT)

# Like run, but on whatever DATABASE_URL / REDIS_URL the environment names (start `make worker` too).
serve: setup
	@$(PY) manage.py demo --base-url http://$(HOST):$(PORT)
	@$(PY) manage.py runserver $(HOST):$(PORT)

demo: setup
	@$(PY) manage.py demo --base-url http://$(HOST):$(PORT)

test:
	@SETUP_MIGRATE=0 bash scripts/setup.sh
	@bash scripts/test.sh

# The static checks CI runs before the tests (configured in pyproject.toml). Each runs even when an
# earlier one fails; the target fails when any does. makemigrations needs a database setting only
# (SQLite in var/ here, whatever DATABASE_URL says).
lint:
	@SETUP_MIGRATE=0 bash scripts/setup.sh
	@rc=0; \
	echo "[lint] ruff check"; $(VENV)/bin/ruff check --output-format concise . || { echo "[lint] ruff check failed"; rc=1; }; \
	echo "[lint] lint-imports (the floors)"; $(VENV)/bin/lint-imports || { echo "[lint] lint-imports failed"; rc=1; }; \
	echo "[lint] makemigrations --check --dry-run"; \
	env -u DATABASE_URL -u REDIS_URL $(PY) manage.py makemigrations --check --dry-run \
	    || { echo "[lint] a model change has no migration (run manage.py makemigrations)"; rc=1; }; \
	echo "[lint] mypy"; $(VENV)/bin/mypy || { echo "[lint] mypy failed"; rc=1; }; \
	exit $$rc

need-redis:
	@if [ -z "$${REDIS_URL:-}" ]; then \
	  echo "REDIS_URL is not set: without a broker tasks run eagerly in the web process and need no worker."; \
	  echo "Export REDIS_URL=redis://127.0.0.1:6379/0 (and DATABASE_URL=postgres://...) first."; exit 1; fi

worker: need-redis setup
	$(CELERY) -A config worker -Q default,filters,aggregate -l info

gpu-worker: need-redis setup
	$(CELERY) -A config worker -Q gpu -l info --concurrency 1 -n gpu@%h

beat: need-redis setup
	@mkdir -p var
	$(CELERY) -A config beat -l info --schedule var/celerybeat-schedule

# Benchmarks print their figures; all but web_memory.py need PostgreSQL (found at 127.0.0.1:5432 if unset).
bench: setup
	@rc=0; $(PY) benchmarks/web_memory.py || rc=1; \
	. scripts/services.sh && use_local_services && { \
	  for script in ingest filters annotate_load export loop; do \
	    [ -f benchmarks/$$script.py ] && { $(PY) benchmarks/$$script.py || rc=1; }; \
	  done; }; \
	exit $$rc

# Generated files; keeps .venv and var/ (your database and media). distclean removes those too.
clean:
	rm -rf node_modules staticfiles static/vendor/htmx.min.js .pytest_cache .ruff_cache .mypy_cache .import_linter_cache
	find . -path ./.venv -prune -o -name __pycache__ -type d -print0 | xargs -0 rm -rf

distclean: clean
	rm -rf $(VENV) var
