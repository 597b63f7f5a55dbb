"""What "the same bits" means on the backend the tests run on.

On XLA:CPU a float32 reduction is summed in one fixed order, so two programs that sum the same
numbers (a fit from rows and one from their aggregated cells, an early-exit loop and the fixed
loop) agree bit for bit, and the tests say so. On a GPU, fusion and the reduction trees reorder
float32 sums: the same computations agree to a few units in the last place (measured on an
NVIDIA H100: at most 2 ulp). ``assert_same_bits`` asserts the first where it holds and the
second elsewhere.
"""

from __future__ import annotations

import jax
import numpy as np

BITWISE = jax.default_backend() == "cpu"
ULPS = 4  # the tolerance off the CPU, in float32 units in the last place of the larger value


def assert_same_bits(actual, desired, err_msg: str = "") -> None:
    """Bit-equal on the CPU; within ``ULPS`` float32 ulps elsewhere."""
    if BITWISE:
        np.testing.assert_array_equal(actual, desired, err_msg=err_msg)
        return
    a, d = np.asarray(actual, np.float64), np.asarray(desired, np.float64)
    ulp = np.spacing(np.maximum(np.abs(a), np.abs(d)).astype(np.float32)).astype(np.float64)
    assert np.all(np.abs(a - d) <= ULPS * ulp), (err_msg, float(np.max(np.abs(a - d) / ulp)))


#: ``jax.jit(..., compiler_options=OPTIMIZED)`` compiles one program at XLA:CPU's default LLVM
#: level although the suite runs at level 0 (tests/conftest.py): for a test that runs one
#: program many times, where level 0's machine code costs more than its faster compile saves
#: (the CORP test's null, 99 PAV fits: 0.11 s a call at level 0, 0.03 s at the default level)
OPTIMIZED = {"xla_backend_optimization_level": 3}
