# The two set-up commands of the README:
#   make run    builds the environment, then runs the main job (quick studies on the simulator)
#   make test   builds the environment, then runs lint, type check, the docs build and every test
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: run test test-fast test-slow test-gpu bench docs env clean

# pipefail: an install that fails stops make even though its output is filtered
SHELL       := /bin/bash
.SHELLFLAGS := -o pipefail -c
# Machines whose pip configuration lists local package folders that do not exist make pip warn
# once per package ("Location 'file:///...' is ignored"); those lines say nothing about this
# project and are dropped. Every other line of pip's output is kept.
QUIET_PIP := { grep -v "^WARNING: Location 'file:.*' is ignored" || true; }
# The kernel that executes the tutorials warns at each start that its loopback TCP transport is
# unencrypted (a one-shot local kernel; nothing leaves the machine): dropped the same way
QUIET_KERNEL := { grep -v "Kernel is running over TCP without encryption" || true; }

# PyTorch first, pinned: netcal and MCGrad (reference implementations the tests compare against)
# need it, and torch 2.13.0 is the release whose CPU build the CI machines keep on disk
# (/opt/wheels), so it is taken from there instead of a CUDA build of several GB downloaded.
# The packages are installed by uv (from PyPI, into the venv, with pip's byte-compilation:
# --compile-bytecode): it unpacks and compiles them on every core where pip uses one. The same
# versions as pip's resolution (the venvs' `pip freeze` compared, 2026-12-07); on a fresh clone
# of the 2-core machine, 106 to 108 s (uv's cache empty or full) against pip's 175 s
UV_INSTALL  := $(BIN)/uv pip install -q --python $(BIN)/python --compile-bytecode
TORCH_WHEELS := $(if $(wildcard /opt/wheels),--find-links /opt/wheels)
$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	@echo "$(BIN)/pip install uv==0.13.10; uv pip install torch==2.13.0; -e .[test]"
	@$(BIN)/pip install -q uv==0.13.10 2>&1 | $(QUIET_PIP)
	$(UV_INSTALL) $(TORCH_WHEELS) torch==2.13.0
	$(UV_INSTALL) -e ".[test]"
	@echo "uv pip install --no-deps recbole==1.2.1  # MovieLens-100K for the tests (pyproject.toml)"
	@$(UV_INSTALL) --no-deps recbole==1.2.1
	touch $(STAMP)

env: $(STAMP)

run: $(STAMP)
	$(BIN)/python -m experiments.main

# Every test in the repository (34 minutes on a fresh clone of the idle 2-core machine, with the
# install, lint, types and the docs build, the tests 27 of them; 57 minutes before the tests and
# the docs compiled at XLA:CPU's LLVM level 0, tests/conftest.py; measured 2026-11-27; on a slower
# 2-core machine on 2026-12-02: 55 minutes, the tests 46, and 53, the tests 42, with --dist loadfile
# below; then the older XLA:CPU fusion emitter, tests/conftest.py: 36% fewer CPU-seconds of
# compilation; on that slower machine on 2026-12-04: 37.7 minutes, the tests 29.3, before the
# tests marked optimized_codegen, tests/conftest.py, and the parallel docs build; on 2026-12-07:
# 51.7 minutes, the tests 41.8; then 46.4, the tests 38.2, after Spark's quick-JIT JVM,
# tests/conftest.py, and fewer recompiles in tests, while the set-up before the tests took 8
# minutes against 10: part of the gain is the machine's; then 40.7, the tests 33.6, with the
# docs build's tutorials dealt to both workers and the type check beside it; on 2026-12-08, with
# the install by uv above: 44.0, the tests 38.2, the machine slower that day: one study smoke took
# 37 s alone against 29 the evening before). No persistent
# compilation cache: one shared by the run was 10% faster on 270 tests but slower on the whole suite, where
# its file lock and eviction scan over ~10,000 small entries ran on every compilation.
# `--dist loadfile`: each test file runs in one worker, so the programs its tests share compile
# once instead of once per worker (the scikit-learn checks and bad-input tests: 6.6% fewer
# CPU-seconds, 2026-12-02); the heaviest files are handed out first (tests/conftest.py). Two
# workers, not three: three ran eleven heavy test files in 703 s against 632 s (1,210 CPU-s
# against 1,054), and a cache of the programs that compile in 0.3 s or more, shared by the two
# workers, in 640 s (2026-12-08)
PYTEST_XDIST := -n 2 --dist loadfile
# The type check (one process, a minute on a fresh clone) runs beside the docs build, whose
# workers leave part of the second core idle; its report is printed after the build's, and either
# failing fails the target
test: $(STAMP)
	$(BIN)/ruff check calib_jax experiments proofs tests benchmarks docs
	@echo "$(BIN)/mypy  # beside make docs"
	@log=$$(mktemp); $(BIN)/mypy > $$log 2>&1 & types=$$!; \
	$(MAKE) docs; docs=$$?; wait $$types; typed=$$?; cat $$log; rm -f $$log; \
	[ $$docs = 0 ] && [ $$typed = 0 ]
	$(BIN)/python -m pytest -q $(PYTEST_XDIST) --durations=20

# The documentation site, offline: warnings are errors, every tutorial is executed; then every
# public docstring is checked for Args/Returns/Example and its example run (docs/test_docstrings.py,
# spread over the cores by pytest-xdist; Sphinx's doctest builder would run them one by one)
# The executed tutorials and docstring examples compile small programs once each: XLA:CPU's
# machine code at LLVM level 0 and its older fusion emitter compile them faster (as the tests
# do, tests/conftest.py). `-j 2`: the tutorials execute side by side (docs/conf.py deals them to
# both workers and sets up the offline MathJax so that it does not hold the reading serial: the
# site 115 s against 225 s with every tutorial in one worker, 2026-12-07)
DOCS_XLA := XLA_FLAGS="$$XLA_FLAGS --xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"

docs: $(STAMP)
	rm -rf docs/_build
	$(DOCS_XLA) $(BIN)/sphinx-build -j 2 -q -W --keep-going -b html docs docs/_build/html 2>&1 | $(QUIET_KERNEL)
	$(DOCS_XLA) $(BIN)/python -m pytest -q -n 2 -p no:cacheprovider docs/test_docstrings.py

# A developer's quicker loop: the tests not marked slow (tests/ci_budget.txt and @pytest.mark.slow),
# and the rest. `make test` runs both, as CI does
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q $(PYTEST_XDIST) -m "not slow"

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q $(PYTEST_XDIST) -m slow

# On a machine with an NVIDIA GPU: the same suite on the GPU backend (CUDA wheels of jax). The
# CPU platform stays listed: host callbacks (SciPy's PAV, the host fits) place their operands
# on it, as they do for users, whose default lists both
test-gpu: $(STAMP)
	$(BIN)/pip install -q "jax[cuda12]"
	JAX_PLATFORMS=cuda,cpu $(BIN)/python -m pytest -q -m "not slow"

bench: $(STAMP)
	$(BIN)/pip install -q -e ".[bench]" 2>&1 | $(QUIET_PIP)
	$(BIN)/python -m benchmarks.run_all

clean:
	rm -rf $(VENV)
