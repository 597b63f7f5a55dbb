"""Sorting that is fast on every backend.

XLA:CPU's sort is several times slower than NumPy's.  On the CPU backend we therefore sort
through a host call into NumPy (``calib_jax._host_call``, safe on several host devices); on
GPU/TPU we use ``lax.sort``.  Both are jit- and vmap-able (the callback is batched along
leading axes).  Every path is stable: tied values
keep their index order (the packed float32 keys carry the index, other dtypes use NumPy's
stable sort, ``jnp.argsort`` is stable by default).  Callers that need tie-invariance
still group ties explicitly.

For float32 the NumPy path sorts packed 64-bit keys (order-preserving bits of the value in
the high word, the index in the low word), ~1.7x faster than ``np.argsort``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax._host_call import host_call

__all__ = ["argsort"]


def _np_argsort_1d(x: np.ndarray) -> np.ndarray:
    if x.dtype == np.float32 and x.shape[0] < 2**32:
        u = x.view(np.uint32)
        # order-preserving map of IEEE-754 bits: flip all bits of negatives, set the sign of positives
        key = np.where(u & np.uint32(0x80000000), ~u, u | np.uint32(0x80000000)).astype(np.uint64)
        packed = (key << np.uint64(32)) | np.arange(x.shape[0], dtype=np.uint64)
        packed.sort()
        return (packed & np.uint64(0xFFFFFFFF)).astype(np.int32)
    return np.argsort(x, kind="stable").astype(np.int32)


def _np_argsort(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim == 1:
        return _np_argsort_1d(x)
    flat = x.reshape(-1, x.shape[-1])
    return np.stack([_np_argsort_1d(r) for r in flat]).reshape(x.shape)


def _np_argsort_tuple(x: np.ndarray) -> tuple[np.ndarray]:
    return (_np_argsort(x),)


def argsort(x: jax.Array) -> jax.Array:
    """Ascending stable argsort along the last axis (int32): ties keep their index order."""
    if jax.default_backend() == "cpu":
        return host_call(_np_argsort_tuple, [jax.ShapeDtypeStruct(x.shape, jnp.int32)], x)[0]
    return jnp.argsort(x, axis=-1).astype(jnp.int32)
