# Two commands on a fresh machine:  `make demo` (set up + run the quickstart job) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast lint bench install clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,tf]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/vtrain validate configs/quickstart.yaml
	$(BIN)/vtrain local configs/quickstart.yaml --output-dir vtrain-out/quickstart

test: $(STAMP)
	$(BIN)/ruff check vtrain tests benchmarks
	$(BIN)/python -m mypy
	$(BIN)/python -m pytest -q

# The quick loop: everything but the tests marked slow (CI runs `make test`).
test-fast: $(STAMP)
	$(BIN)/ruff check vtrain tests benchmarks
	$(BIN)/python -m mypy
	$(BIN)/python -m pytest -q -m "not slow"

# Lint and the type check ([tool.mypy] in pyproject.toml: strict for vtrain/, 0 errors).
lint: $(STAMP)
	$(BIN)/ruff check vtrain tests benchmarks
	$(BIN)/python -m mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/startup.py
	$(BIN)/python benchmarks/emulator.py
	$(BIN)/python benchmarks/hostile_input.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache .mypy_cache
