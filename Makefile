# Two commands on a fresh machine:  `make demo` (set up + run the quickstart job) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# `make test`: every test not marked alone runs on $(WORKERS) pytest-xdist workers (independent: tmp paths,
# free ports, per-test environment), the slow ones (multi-process TensorFlow, subprocess CLIs) too; worksteal
# hands a worker that ran out the other's remaining tests. Then the `alone` ones one at a time, with the
# machine to themselves: they signal a process tree under way, or time it, and a busy CPU would change what
# they see. Both parts always run; --durations lists each part's slowest.
WORKERS ?= 2
PYTEST  := $(BIN)/python -m pytest -q --durations=30
# The files that hold `alone` tests: that part runs one test at a time, so collecting only these (~2 s, not the
# whole suite's ~6) is time off the run. tests/conftest.py refuses an `alone` test this grep would not find.
# (`=`, not `:=`: the grep runs only in the targets that use it.)
ALONE_FILES = $(shell grep -rl --include='test_*.py' 'pytest.mark.alone' tests)
# The manual's strict build (a broken link, a missing anchor, a stale generated page fail), into build/site.
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs
# Python writes each module's bytecode the first time it imports it, under every target here: a machine that
# sets PYTHONDONTWRITEBYTECODE (this one does) would otherwise compile TensorFlow's ~3,100 modules again in
# each process that imports it (`import tensorflow`: ~20 CPU-s without its bytecode, ~5.5 with; the suite
# starts hundreds of Python processes). Not all at install (compileall would compile all ~15,000 files of the
# environment, most never imported): the install imports what the suite's processes import (below).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test test-fast test-fresh lint bench docs install lock lock-upgrade clean

# The environment is uv.lock: what pyproject.toml asks for (the `dev` group: vtrain with its extras dev, tf, docs and
# pipelines, and the tools below), resolved once for every platform and Python vtrain supports, with hashes. `make
# install` installs exactly that (uv sync --locked: a pyproject.toml the lock no longer matches is an error, not a
# fresh resolve), so a release on the index changes nothing until `make lock-upgrade` takes it on purpose. pip puts
# the lock's own uv into the venv first; uv then installs the rest (~20 s here where pip took ~85) and removes what
# the lock does not name. uv writes no bytecode: the imports at the end of the install do (see above).
UV_VERSION = $(shell awk '$$0 == "name = \"uv\"" { getline; gsub(/[^0-9.]/, ""); print; exit }' uv.lock)
SYNC := UV_PROJECT_ENVIRONMENT=$(VENV) $(BIN)/uv sync --locked --quiet

$(BIN)/uv: uv.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	touch $@

$(STAMP): pyproject.toml uv.lock $(BIN)/uv
	$(SYNC) || { echo "make: uv.lock does not match pyproject.toml; 'make lock' resolves it again" >&2; exit 1; }
	# The bytecode of what the suite's processes import, written once now by two imports side by side (~20 s): a
	# cold TensorFlow import costs ~20 CPU-s (~5.5 warm), a cold aiplatform + kfp one ~19 (~4.6 warm), and the
	# processes that start together at the top of `make test` would each compile the same modules.
	$(BIN)/python -c "import tensorflow as tf; tf.keras.layers.Dense; import tf_keras, vtrain.runtime" >/dev/null 2>&1 & \
	  $(BIN)/python -c "import google.cloud.aiplatform, google.cloud.storage, kfp, vtrain.cli, vtrain.emulator"; \
	  b=$$?; wait $$!; a=$$?; test $$a = 0 -a $$b = 0 || echo "make: the bytecode warm-up import failed ($$a, $$b)" >&2
	touch $(STAMP)

# After a change to pyproject.toml's requirements: resolve again, moving only what the change needs.
lock: $(BIN)/uv
	$(BIN)/uv lock

# Every package to the newest release pyproject.toml allows (then `make test`, and commit uv.lock).
lock-upgrade: $(BIN)/uv
	$(BIN)/uv lock --upgrade

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/vtrain validate configs/quickstart.yaml
	$(BIN)/vtrain local configs/quickstart.yaml --output-dir vtrain-out/quickstart

# mypy and the manual's strict build run beside the suite's parallel part, whose workers wait on processes and
# sockets part of the time: their ~37 CPU-s fill those waits instead of running alone. What they said is printed
# after that part, before the alone one, and either failing fails the target. (`make lint` and `make test-fast`
# run them first, for the quick loop.)
test: $(STAMP)
	$(BIN)/ruff check vtrain tests benchmarks docs/generate.py docs/roles.py
	@mkdir -p build
	@( $(BIN)/python -m mypy > build/mypy.out 2>&1; echo $$? > build/mypy.rc ) & \
	( $(MKDOCS) build --strict --quiet > build/mkdocs.out 2>&1; echo $$? > build/mkdocs.rc ) & \
	$(PYTEST) -n $(WORKERS) --dist worksteal -m "not alone"; a=$$?; wait; \
	echo "== mypy"; cat build/mypy.out; echo "== mkdocs build --strict"; cat build/mkdocs.out; \
	m=$$(cat build/mypy.rc); d=$$(cat build/mkdocs.rc); \
	$(PYTEST) -m alone $(ALONE_FILES); b=$$?; exit $$((a || b || m || d))

# The quick loop: everything but the tests marked slow (CI runs `make test`).
test-fast: $(STAMP)
	$(BIN)/ruff check vtrain tests benchmarks docs/generate.py docs/roles.py
	$(BIN)/python -m mypy
	$(MKDOCS) build --strict --quiet
	$(BIN)/python -m pytest -q -n $(WORKERS) -m "not slow and not alone"; a=$$?; \
	  $(BIN)/python -m pytest -q -m "alone and not slow" $(ALONE_FILES); b=$$?; exit $$((a || b))

# The whole suite on a fresh resolve, to try the index's newest releases on purpose: a copy of the working tree in
# build/fresh takes `uv lock --upgrade` (its lines say what moved) and runs `make test` in an environment of its own.
# uv.lock here is left as it is; when the run is green, `make lock-upgrade` takes the same versions.
FRESH := build/fresh
test-fresh: $(BIN)/uv
	rm -rf $(FRESH) && mkdir -p $(FRESH)
	git ls-files -z --cached --others --exclude-standard | tar --null -T - --ignore-failed-read -cf - | tar -xf - -C $(FRESH)
	cd $(FRESH) && $(abspath $(BIN))/uv lock --upgrade
	$(MAKE) -C $(FRESH) test

# Lint and the type check ([tool.mypy] in pyproject.toml: strict for vtrain/, 0 errors).
lint: $(STAMP)
	$(BIN)/ruff check vtrain tests benchmarks docs/generate.py docs/roles.py
	$(BIN)/python -m mypy

# The manual at http://127.0.0.1:8000, rebuilt as docs/ changes.
docs: $(STAMP)
	$(MKDOCS) serve

bench: $(STAMP)
	$(BIN)/python benchmarks/startup.py
	$(BIN)/python benchmarks/render_cold.py
	$(BIN)/python benchmarks/emulator.py
	$(BIN)/python benchmarks/hostile_input.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache .mypy_cache
