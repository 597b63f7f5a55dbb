"""Threefry random bits at full speed on XLA:CPU, with the same bits.

JAX lowers its Threefry-2x32 hash (the default PRNG of ``jax.random``) differently per
backend: on GPU/TPU as 20 unrolled rounds, on the CPU as a rolled loop of 5 iterations of
4 rounds (``jax/_src/random/threefry2x32.py``, ``_threefry2x32_cpu_lowering_rule``), which
keeps compile times short but materialises the whole state between iterations. Measured on
the 2-core CPU (``jax.random.bits`` of 3.2 x 10^6 words): 62 ms rolled, 10 ms unrolled.
The Monte Carlo trials draw ~1.5 x 10^6 numbers each at n = 10^5, so the rolled loop was a
third of a Fig 3 trial.

:func:`unrolled_threefry_on_cpu` registers the unrolled lowering (JAX's own rule, the one
GPUs use) for the CPU backend. The arithmetic is the same uint32 adds, rotations and xors in
the same order, so every random draw is bit-identical to the default lowering
(``tests/test_engine_speed_paths.py`` compares them). It is process-wide (it applies to every
later compilation, including a user's own ``jax.random`` calls) and is switched on by the
Monte Carlo engine and the study entry points; ``CALIB_JAX_UNROLLED_THREEFRY=0`` keeps JAX's
default.
"""

from __future__ import annotations

import os

__all__ = ["unrolled_threefry_on_cpu"]

_ENABLED = False


def unrolled_threefry_on_cpu() -> bool:
    """Lower Threefry-2x32 unrolled on the CPU backend (idempotent). Returns whether the
    unrolled lowering is in use (False when disabled by the environment or unavailable in
    this JAX version)."""
    global _ENABLED
    if _ENABLED:
        return True
    if os.environ.get("CALIB_JAX_UNROLLED_THREEFRY", "1") == "0":
        return False
    try:
        from jax._src.random import threefry2x32 as tf
        from jax.interpreters import mlir

        mlir.register_lowering(tf.threefry2x32_p, tf._threefry2x32_lowering_rule, platform="cpu")
    except (ImportError, AttributeError):  # pragma: no cover - other JAX versions
        return False
    _ENABLED = True
    return True
