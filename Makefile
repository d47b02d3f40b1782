# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DB ?= demo.duckdb

.PHONY: demo test test-fast bench lint clean

$(STAMP): pyproject.toml constraints.txt
	@echo "Installing looptrace and its dependencies into $(VENV) (first time only: ~30 s to 2 min)..."
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/looptrace demo --db $(DB)

# lint-imports first: a back-arrow between layers (pyproject.toml, [tool.importlinter]) fails the run.
test: $(STAMP)
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache $(DB) $(DB).wal $(DB).segments
