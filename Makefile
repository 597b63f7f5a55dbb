# The two set-up commands of the README:
#   make run    builds the environment, then runs the main job (quick studies on the simulator)
#   make test   builds the environment, then runs lint, type check, proofs and the test suite
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: run test test-slow test-gpu bench docs env clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[test]"
	touch $(STAMP)

env: $(STAMP)

run: $(STAMP)
	$(BIN)/python -m experiments.main

test: $(STAMP)
	$(BIN)/ruff check calib_jax experiments proofs tests benchmarks docs
	$(BIN)/mypy
	$(MAKE) docs
	$(BIN)/python -m pytest -q -n 2 -m "not slow"

# The documentation site, offline: warnings are errors, every tutorial is executed; then every
# public docstring is checked for Args/Returns/Example and its example run (docs/test_docstrings.py,
# spread over the cores by pytest-xdist; Sphinx's doctest builder would run them one by one)
docs: $(STAMP)
	rm -rf docs/_build
	$(BIN)/sphinx-build -q -W --keep-going -b html docs docs/_build/html
	$(BIN)/python -m pytest -q -n 2 -p no:cacheprovider docs/test_docstrings.py

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 -m slow

# On a machine with an NVIDIA GPU: the same suite on the GPU backend (CUDA wheels of jax). The
# CPU platform stays listed: host callbacks (SciPy's PAV, the host fits) place their operands
# on it, as they do for users, whose default lists both
test-gpu: $(STAMP)
	$(BIN)/pip install -q "jax[cuda12]"
	JAX_PLATFORMS=cuda,cpu $(BIN)/python -m pytest -q -m "not slow"

bench: $(STAMP)
	$(BIN)/pip install -q torch==2.13.0 && $(BIN)/pip install -q -e ".[bench]"
	$(BIN)/python -m benchmarks.run_all

clean:
	rm -rf $(VENV)
