"""Strict test environment shared by every test module.

* matplotlib renders off-screen (Agg), so figure code never needs a display.
* ``jax_numpy_rank_promotion="raise"``: implicit broadcasting between arrays of different
  rank is an error inside JAX code (third-party NumPy code is unaffected).
* ``key`` / ``rng`` fixtures give explicit, per-test deterministic randomness.
* ``tol`` gives comparison tolerances per dtype (float32 / float64).
* The session keeps one CPU device (``$CALIB_JAX_CPU_DEVICES=1``): a study run in-process
  would otherwise expose every core as a host device for the rest of its worker, and the
  engine's chunk rounding (a multiple of 2 x devices x trials per step) would then depend on
  test order. Several devices are tested in subprocesses that set the count themselves.
* No persistent XLA compilation cache (``$CALIB_JAX_XLA_CACHE=""``): the studies' cache is a
  user convenience, and tests stay hermetic (one shared by the whole run was measured slower,
  see the Makefile).
* On a CPU-only session (:func:`_cpu_only_session`; a GPU session keeps XLA's defaults),
  XLA:CPU compiles machine code at LLVM optimization level 0
  (``--xla_backend_optimization_level=0`` appended to ``$XLA_FLAGS`` unless it names a level):
  most of the suite's time is compiling small programs run once, and level 0 compiles them
  about 40% faster (four of the slowest tests: 136 s -> 83 s, 2026-11-27). XLA's own
  optimizations of the program (fusion, algebraic simplification) still run; only the machine
  code is less tuned, and its float rounding can differ from the default level's in the last
  bits (float32 values by up to 1e-6 relative): a value computed here is compared bit for bit
  only with values computed at the same level. The tests that check bit-identity across
  device counts (``test_sharding``, ``test_montecarlo_engine``) compare subprocesses started
  without ``$XLA_FLAGS``, i.e. at the default level users run; ``test_distributed`` compares
  its workers with this process, so they inherit its level. The few tests whose compiled
  programs run long enough that level 0's slower machine code outweighs its quicker compile
  (marked ``optimized_codegen``: a regularized incomplete beta inverse at 5,000 rows ran 3.6 s
  at level 0 and 0.36 s at level 1) compile at level 1 instead (:func:`_optimized_codegen`);
  the 32 slowest tests of the suite run one by one at both levels (2026-12-04) chose them.
* On a CPU-only session with jaxlib 0.10, XLA:CPU's older fusion code generator
  (``--xla_cpu_use_fusion_emitters=false`` appended unless ``$XLA_FLAGS`` names the option): the
  MLIR fusion emitters of jaxlib 0.10 spend most of the compile time of the small programs the
  tests compile once each, and the older emitter compiles them with about 36% fewer CPU-seconds
  (the ``field_calibration`` smoke: 60.5 -> 38.8 CPU-s, 2026-12-02); a run of the whole suite
  went from 42 to under 39 minutes of pytest while a second job loaded the machine. Its float
  rounding differs from the default emitters' in the last bits, so the few tests that assert
  bit-identity between two differently compiled programs (marked ``default_codegen``) run in a
  child pytest process at the default code generator (:func:`pytest_pyfunc_call` below), as
  users run them.
* After a test (at most once every ``MAPPING_CHECK_INTERVAL_S`` seconds), a worker that holds
  more than half of the kernel's cap on memory mappings (``vm.max_map_count``, 65,530) empties
  JAX's caches of compiled programs (:func:`calib_jax._src.mappings.release_compiled_if_near_limit`;
  a test or a few seconds of them compile a few hundred programs at most). XLA:CPU keeps each
  compiled program's machine code in 6 to 24 mappings of its own and JAX keeps the programs
  for the life of the worker; at the cap the next compilation's ``mmap`` fails and XLA
  segfaults inside ``backend_compile_and_load`` (or aborts loading a cache entry). That was the
  cause of the worker crashes seen after many hundreds of tests in one worker (the
  ``field_calibration`` smoke, ``test_jit_vmap_equals_loop_and_float64[lcce_quantile]``):
  ``benchmarks/repro/xla_map_exhaustion.py`` reproduces the same stack in a fresh process.
* Spark's JVM (the engine tests, the commands' ``--engine spark``) runs with the quick JIT
  compiler only (``-XX:TieredStopAtLevel=1``), one compiler thread and the serial garbage
  collector (``$PYSPARK_SUBMIT_ARGS``, unless set): most of a Spark test's CPU time is the JVM
  compiling Spark's own code for queries of a few thousand rows, which the optimizing compiler
  never pays back. The query plans and their arithmetic do not change. Measured on the 2-core
  machine, JVM included (2026-12-07): ``test_engine_contract.py`` 242 -> 174 CPU-s,
  ``test_cli_compare.py::test_spark_gives_the_same_numbers`` 87 -> 48.
* Under CI (``$CALIB_JAX_CI=1``, set by ``.ci/run``) Hypothesis draws its examples from a seed
  fixed per test (profile ``ci``: ``derandomize=True``, no example database), so whether a
  commit lands depends on the commit alone. Elsewhere each run draws fresh examples; an example
  that fails there is pinned to its test with ``@example`` (a model named ``"=*.csv"`` in
  ``test_cli_outputs_guard`` was found that way, 2026-12-03).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

#: the JVM of the Spark tests (module docstring): set before any session starts, since a worker's
#: JVM outlives ``SparkSession.stop()`` and every later session of the worker reuses it
SPARK_TEST_JVM = ('--driver-java-options "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:CICompilerCount=1" '
                  "pyspark-shell")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("CALIB_JAX_CPU_DEVICES", "1")
os.environ["CALIB_JAX_XLA_CACHE"] = ""
os.environ.setdefault("PYSPARK_SUBMIT_ARGS", SPARK_TEST_JVM)


def _cpu_only_session() -> bool:
    """Whether this test session's JAX runs on the CPU alone: ``$JAX_PLATFORMS`` names only
    ``cpu``, or is unset and no accelerator plugin (CUDA, ROCm, TPU) is installed. The two
    code-generation flags below are for XLA:CPU; on a GPU session the LLVM level would also
    slow the GPU's kernels, and with both flags every pytest worker of the first H200 run
    (jaxlib 0.11, 2026-12-04) died at start, most likely because that XLA no longer knows the
    fusion-emitter option (an unknown XLA flag aborts the process)."""
    platforms = os.environ.get("JAX_PLATFORMS", "").strip()
    if platforms:
        return {p.strip() for p in platforms.split(",") if p.strip()} == {"cpu"}
    from importlib import metadata

    names = {(d.metadata["Name"] or "").lower() for d in metadata.distributions()}
    return not any(n.startswith(("jax-cuda", "jax_cuda", "jax-rocm", "jax_rocm", "libtpu")) for n in names)


def _jaxlib_minor() -> tuple[int, int]:
    from importlib import metadata

    major, minor = metadata.version("jaxlib").split(".")[:2]
    return int(major), int(minor)


#: the older fusion code generator (module docstring); jaxlib 0.10's XLA knows the option
OLD_FUSION_EMITTER = "--xla_cpu_use_fusion_emitters=false"
#: whether the code-generation flags below apply to this session
CPU_ONLY_SESSION = _cpu_only_session()
if CPU_ONLY_SESSION:
    # XLA:CPU's LLVM back end at optimization level 0 (module docstring), unless the caller chose one
    if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0").strip()
    if "xla_cpu_use_fusion_emitters" not in os.environ["XLA_FLAGS"] and _jaxlib_minor() <= (0, 10):
        os.environ["XLA_FLAGS"] += " " + OLD_FUSION_EMITTER

import matplotlib  # noqa: E402

matplotlib.use("Agg")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import settings as hypothesis_settings  # noqa: E402

from calib_jax._src import mappings  # noqa: E402

hypothesis_settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CALIB_JAX_CI") == "1":
    hypothesis_settings.load_profile("ci")

jax.config.update("jax_numpy_rank_promotion", "raise")

# Tolerances: float32 results are compared with float64 references at 1e-5 relative
# (SPEC §2); float64 results at 1e-12 (SPEC §5 identities).
TOLERANCES = {
    np.dtype(np.float32): {"rtol": 1e-5, "atol": 1e-6},
    np.dtype(np.float64): {"rtol": 1e-12, "atol": 1e-13},
}


def tolerance(dtype) -> dict[str, float]:
    """``dict(rtol=..., atol=...)`` for results of the given floating dtype."""
    return dict(TOLERANCES[np.dtype(dtype)])


def pytest_configure(config):
    config.addinivalue_line("markers", "default_codegen: asserts bit-identity between two compiled "
                                       "programs; runs in a child process at XLA:CPU's default fusion emitters")
    config.addinivalue_line("markers", "optimized_codegen: runs its compiled programs long enough that "
                                       "machine code at LLVM level 1 saves more than it costs to compile")


#: the LLVM level of the tests marked ``optimized_codegen`` (module docstring)
OPTIMIZED_LEVEL = 1


@pytest.fixture(autouse=True)
def _optimized_codegen(request, monkeypatch):
    """A test marked ``optimized_codegen`` compiles at LLVM level ``OPTIMIZED_LEVEL``: in this
    process through every compilation's options (JAX reads ``$XLA_FLAGS`` once per process), in
    the processes it starts through ``$XLA_FLAGS``. Programs it compiles stay in JAX's caches
    for the worker's later tests, as any program does. The marker is the form, for programs
    compiled inside library calls, of ``jax.jit(..., compiler_options=backend.OPTIMIZED)``
    (tests/backend.py), which a test that jits one program itself can pass."""
    if (request.node.get_closest_marker("optimized_codegen") is None
            or "--xla_backend_optimization_level=0" not in os.environ["XLA_FLAGS"].split()):
        yield
        return
    from jax._src import compiler

    plain = compiler.get_compile_options

    def at_level(*args, env_options_overrides=None, **kwargs):
        overrides = {"xla_backend_optimization_level": OPTIMIZED_LEVEL, **(env_options_overrides or {})}
        return plain(*args, env_options_overrides=overrides, **kwargs)

    monkeypatch.setattr(compiler, "get_compile_options", at_level)
    monkeypatch.setenv("XLA_FLAGS", re.sub(r"--xla_backend_optimization_level=\d+",
                                           f"--xla_backend_optimization_level={OPTIMIZED_LEVEL}",
                                           os.environ["XLA_FLAGS"]))
    yield


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """A test marked ``default_codegen`` runs again, alone, in a child pytest process whose
    ``$XLA_FLAGS`` turn the default fusion emitters back on (module docstring); its failure is
    this test's failure, with the child's output."""
    if pyfuncitem.get_closest_marker("default_codegen") is None or OLD_FUSION_EMITTER not in os.environ["XLA_FLAGS"]:
        return None
    env = dict(os.environ, XLA_FLAGS=os.environ["XLA_FLAGS"].replace(OLD_FUSION_EMITTER,
                                                                     "--xla_cpu_use_fusion_emitters=true"))
    child = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            pyfuncitem.nodeid], cwd=pyfuncitem.config.rootpath, env=env,
                           capture_output=True, text=True, timeout=900)
    if child.returncode != 0 or " passed" not in child.stdout:
        pytest.fail(f"at the default fusion emitters (child process, exit {child.returncode}):\n"
                    f"{child.stdout[-6000:]}\n{child.stderr[-2000:]}", pytrace=False)
    return True


#: seconds between two counts of the worker's memory mappings: a count reads /proc/self/maps,
#: 50 ms at 30,000 mappings (measured on a busy 2-core machine; once per test, an estimated
#: CPU-minute over the suite), and a few seconds of tests compile a few hundred programs at
#: most, far below the half of the cap left as margin
MAPPING_CHECK_INTERVAL_S = 5.0
_last_mapping_check = [-MAPPING_CHECK_INTERVAL_S]


@pytest.fixture(autouse=True)
def _release_compiled_programs_near_the_mapping_cap():
    """Module docstring: keeps a long-lived worker clear of the cap on memory mappings."""
    yield
    now = time.monotonic()
    if now - _last_mapping_check[0] >= MAPPING_CHECK_INTERVAL_S:
        _last_mapping_check[0] = now
        mappings.release_compiled_if_near_limit()


@pytest.fixture(scope="module")
def spark():
    """One local Spark session for a test module (its first start costs ~30 s); the command's
    ``--engine spark`` finds it active. Stopped at the module's end."""
    pyspark = pytest.importorskip("pyspark")
    assert pyspark.__version__.startswith("3.5")
    from calib_jax.logs.engines import spark_session

    s = spark_session("local[1]", [("spark.ui.enabled", "false"), ("spark.sql.shuffle.partitions", "2")])
    yield s
    s.stop()


@pytest.fixture
def key() -> jax.Array:
    """An explicit PRNG key (same for every test: tests are deterministic)."""
    return jax.random.key(0)


@pytest.fixture
def rng() -> np.random.Generator:
    """A NumPy generator for building reference data."""
    return np.random.default_rng(20240601)


@pytest.fixture
def tol():
    """``tol(dtype) -> dict(rtol=..., atol=...)`` per-dtype tolerances."""
    return tolerance


# ------------------------------------------------------------------------ the quick selection
# `make test` (and CI) runs every test. The tests listed in tests/ci_budget.txt (the slowest,
# with their seconds, from a `--durations=0` run; see the file's header) are marked slow together
# with the tests marked so in their files, so that `make test-fast` (-m "not slow") gives a
# developer a quicker loop. The list is data, not a judgement per test.
_BUDGET_FILE = os.path.join(os.path.dirname(__file__), "ci_budget.txt")


def _budget_ids() -> set[str]:
    if not os.path.exists(_BUDGET_FILE):
        return set()
    with open(_BUDGET_FILE) as f:
        return {line.split("#", 1)[0].strip() for line in f if line.split("#", 1)[0].strip()}


def _budget_seconds() -> dict[str, float]:
    """Seconds per test file, summed over the file's tests listed in tests/ci_budget.txt."""
    out: dict[str, float] = {}
    if not os.path.exists(_BUDGET_FILE):
        return out
    with open(_BUDGET_FILE) as f:
        for line in f:
            node, _, note = line.partition("#")
            seconds = re.match(r"\s*([0-9.]+) s", note)
            if node.strip() and seconds:
                path = node.strip().split("::", 1)[0]
                out[path] = out.get(path, 0.0) + float(seconds.group(1))
    return out


def pytest_collection_modifyitems(config, items):
    ids = _budget_ids()
    for item in items:
        if item.nodeid in ids:
            item.add_marker(pytest.mark.slow)
    # the heaviest files first (a stable sort: each file's tests keep their order): under
    # `--dist loadfile` (the Makefile) a file runs whole in one worker, and a heavy file handed
    # out last would leave the other worker idle for its length
    seconds = _budget_seconds()
    items.sort(key=lambda item: -seconds.get(item.nodeid.split("::", 1)[0], 0.0))


# --------------------------------------------------------- no test skipped for a missing install
# CI (`.ci/run` sets CALIB_JAX_CI=1) installs every module and program the tests use; a test
# that still skips because one is missing (an importorskip, "not installed", no Chromium) makes
# the run fail, listed at the end. Skips that hold on every CI machine (no GPU, a parametrized
# case outside its function's domain, the Open Bandit data where the checkout has none) stay.
_MISSING_INSTALL = re.compile(r"import|install|chromium|docs not built", re.IGNORECASE)


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    return str(longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else longrepr)


def pytest_sessionfinish(session, exitstatus):
    if os.environ.get("CALIB_JAX_CI") != "1" or hasattr(session.config, "workerinput"):
        return  # the xdist controller (or a plain run) sees every worker's skips
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter is not None else []
    missing = sorted({f"{r.nodeid}: {_skip_reason(r)}" for r in skipped
                      if not hasattr(r, "wasxfail") and _MISSING_INSTALL.search(_skip_reason(r))})
    if missing:
        reporter.write_line(f"CI: {len(missing)} test(s) skipped for a missing install:", red=True)
        for line in missing:
            reporter.write_line("  " + line, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
