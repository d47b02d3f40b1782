# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
DB ?= demo.duckdb

.PHONY: demo test test-fast bench lint clean chromium agent-clis postgresql

# `make demo` installs looptrace alone; `make test` adds the test extras (the real frameworks, Inspect,
# mini-swe-agent and Playwright the tests drive) and the scale extra (pyiceberg, Ray: tests/test_catalog*.py),
# which take most of a first install.
$(STAMP): pyproject.toml constraints.txt
	@echo "Installing looptrace and its dependencies into $(VENV) (first time only: ~30 s to 2 min)..."
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e .
	touch $(STAMP)

$(TEST_STAMP): $(STAMP)
	@echo "Installing the test extras into $(VENV) (first time only)..."
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test,frameworks,scale]'
	touch $(TEST_STAMP)

demo: $(STAMP)
	$(BIN)/looptrace demo --db $(DB)

# The browser tests (report pages, view --web) drive Debian's chromium headless. Where apt-get cannot
# install it (not root, no Debian), they skip and say why; everything else still runs. Under CI=true
# they are required (README, "What CI requires"): a failed install fails here, with apt-get's output.
chromium:
	@command -v chromium >/dev/null 2>&1 || { export DEBIAN_FRONTEND=noninteractive; log=$$(mktemp); \
	  apt-get install -y -qq --no-install-recommends chromium >$$log 2>&1 || \
	  { apt-get update -qq >>$$log 2>&1 && apt-get install -y -qq --no-install-recommends chromium >>$$log 2>&1; } || \
	  case "$${CI:-}" in \
	    ""|0|false) echo "chromium could not be installed (apt-get failed): the browser tests will skip";; \
	    *) cat $$log >&2; echo "error: chromium could not be installed (apt-get failed above), and CI=$$CI" \
	         "requires the browser tests" >&2; rm -f $$log; exit 1;; \
	  esac; rm -f $$log; }

# The coding-agent CLIs whose logs the Codex and Gemini importers are tested on (tests/codex_writer.py,
# tests/gemini_writer.py): OpenAI's and Google's npm packages, driven offline by a scripted model. Installed
# together into build/npm where npm exists (one install: npm prunes what a later --no-save install does not
# name); elsewhere those tests skip and say why. Under CI=true they are required: a failed install fails here.
CODEX_CLI_VERSION := 0.169.0
GEMINI_CLI_VERSION := 0.61.0
AGENT_CLIS := build/npm
agent-clis:
	@grep -qs '"version": "$(CODEX_CLI_VERSION)"' $(AGENT_CLIS)/node_modules/@openai/codex/package.json && \
	 grep -qs '"version": "$(GEMINI_CLI_VERSION)"' $(AGENT_CLIS)/node_modules/@google/gemini-cli/package.json || { \
	  log=$$(mktemp); mkdir -p $(AGENT_CLIS); \
	  npm install --prefix $(AGENT_CLIS) --no-save --no-audit --no-fund --loglevel=error \
	    @openai/codex@$(CODEX_CLI_VERSION) @google/gemini-cli@$(GEMINI_CLI_VERSION) >$$log 2>&1 || \
	  case "$${CI:-}" in \
	    ""|0|false) echo "the agent CLIs could not be installed (npm missing or failed): their importer tests will skip";; \
	    *) cat $$log >&2; echo "error: the agent CLIs could not be installed (npm failed above), and CI=$$CI" \
	         "requires their importer tests" >&2; rm -f $$log; exit 1;; \
	  esac; rm -f $$log; }

# The catalog tests run pyiceberg's SQL catalog on a real PostgreSQL server that they start themselves
# (initdb + pg_ctl in a temporary folder: tests/pg_server.py), from Debian's postgresql. Where apt-get
# cannot install it, those tests skip and say why; under CI=true a failed install fails here.
postgresql:
	@{ command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; } || { \
	  export DEBIAN_FRONTEND=noninteractive; log=$$(mktemp); \
	  apt-get install -y -qq --no-install-recommends postgresql >$$log 2>&1 || \
	  { apt-get update -qq >>$$log 2>&1 && apt-get install -y -qq --no-install-recommends postgresql >>$$log 2>&1; } || \
	  case "$${CI:-}" in \
	    ""|0|false) echo "postgresql could not be installed (apt-get failed): the PostgreSQL catalog tests will skip";; \
	    *) cat $$log >&2; echo "error: postgresql could not be installed (apt-get failed above), and CI=$$CI" \
	         "requires the PostgreSQL catalog tests" >&2; rm -f $$log; exit 1;; \
	  esac; rm -f $$log; }

# lint-imports first: a back-arrow between layers (pyproject.toml, [tool.importlinter]) fails the run.
# The suite runs on every core (pytest-xdist, -n auto); tests that must not share the machine with each
# other carry an xdist_group mark (tests/README.md), and the 20 slowest are listed at the end. The time
# of `import duckdb` is printed first: the suite's time scales with it (most tests start interpreters).
PYTEST_PARALLEL ?= -n auto --dist loadgroup --durations=20
test: $(TEST_STAMP) chromium agent-clis postgresql
	$(BIN)/lint-imports
	@$(BIN)/python -c 'import subprocess, sys, time; t = time.perf_counter(); subprocess.run([sys.executable, "-c", "import duckdb"], check=True); print(f"python -c \"import duckdb\": {time.perf_counter() - t:.2f} s")'
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL)

test-fast: $(TEST_STAMP) chromium agent-clis postgresql
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL) -m "not slow"

# The bench extra: the peers the instrumentor is measured against (bench/instrumentor.py); the scale
# extra: Ray and pyiceberg for bench/ray_analysis.py.
bench: $(STAMP)
	$(BIN)/pip install --quiet -c constraints.txt -e '.[bench,scale]'
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache $(DB) $(DB).wal $(DB).segments
