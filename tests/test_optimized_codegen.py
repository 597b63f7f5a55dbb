"""The ``optimized_codegen`` marker (tests/conftest.py): a marked test compiles at LLVM level 1,
in its own process and in the processes it starts; the others stay at the suite's level 0."""

from __future__ import annotations

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import CPU_ONLY_SESSION, OPTIMIZED_LEVEL
from jax._src import compiler

pytestmark = pytest.mark.skipif(not CPU_ONLY_SESSION, reason="the suite's XLA:CPU code-generation level is set on "
                                "CPU-only sessions (tests/conftest.py); a GPU session keeps XLA's defaults")

LEVEL_0 = "--xla_backend_optimization_level=0"


def _level_override() -> object:
    options = compiler.get_compile_options(num_replicas=1, num_partitions=1)
    return dict(options.env_option_overrides).get("xla_backend_optimization_level")


def _suite_at_level_0() -> bool:
    return LEVEL_0 in os.environ["XLA_FLAGS"].split()


def test_an_unmarked_test_compiles_at_the_suites_level():
    assert _level_override() is None
    assert _suite_at_level_0()  # tests/conftest.py appends it unless the caller chose a level


@pytest.mark.optimized_codegen
def test_a_marked_test_compiles_at_level_1_here_and_in_its_child_processes():
    assert _level_override() == OPTIMIZED_LEVEL
    flags = os.environ["XLA_FLAGS"].split()
    assert f"--xla_backend_optimization_level={OPTIMIZED_LEVEL}" in flags and LEVEL_0 not in flags
    child = subprocess.run([sys.executable, "-c", "import os; print(os.environ['XLA_FLAGS'])"],
                           capture_output=True, text=True, check=True)
    assert f"--xla_backend_optimization_level={OPTIMIZED_LEVEL}" in child.stdout.split()
    # a program compiled under the marker gives the values of the suite's level, to float rounding
    x = np.linspace(-3.0, 3.0, 1001, dtype=np.float32)
    got = jax.jit(lambda v: jnp.sum(jax.nn.sigmoid(v) * jnp.log1p(jnp.exp(-v))))(x)
    want = np.sum(1 / (1 + np.exp(-x.astype(np.float64))) * np.log1p(np.exp(-x.astype(np.float64))))
    np.testing.assert_allclose(float(got), want, rtol=1e-5)
