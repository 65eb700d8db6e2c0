# Two entry points: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Test processes (pytest-xdist): Spark jobs leave a core idle between their stages, in their
# JVM's start and in subprocess runs; a second worker fills it. tests/conftest.py groups the
# tests that share a costly fixture.
TEST_WORKERS ?= 2

.PHONY: demo test lint bench-clean bench-near java

$(STAMP): pyproject.toml
	@$(MAKE) --no-print-directory java
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	@touch $(STAMP)

java:
	@command -v java >/dev/null 2>&1 || { echo "Java 17 is required: apt-get install openjdk-17-jre-headless (see README)"; exit 1; }
	@java -version 2>&1 | grep -qE 'version "(17|21)' || { echo "Java 17 or 21 is required; found: $$(java -version 2>&1 | head -1)"; exit 1; }

demo: $(STAMP)
	$(BIN)/corpusclean demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -n $(TEST_WORKERS)

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .
