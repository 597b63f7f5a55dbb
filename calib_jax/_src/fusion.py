"""Keep small computed tables out of the per-row loops XLA fuses them into.

XLA fuses a cheap elementwise producer into each consumer. For a *table* gathered by
row (``a[media]``: 8 coefficients, 10^5 rows) that means the producer is evaluated once per
output row instead of once per entry. When the table is itself a random draw (a Threefry
hash and the erf⁻¹ polynomial of ``jax.random.normal``: ~150 scalar operations), the gather
loop recomputes it for every row and stops vectorising. Measured on the 2-core CPU (one
Monte Carlo population of 2 x 10^5 rows, two trials vmapped): the interaction term
``uv[0][media] * uv[1][cohort]`` alone took 74 ms of CPU time, 12 ms with the table
materialised first.

``lax.optimization_barrier`` does not prevent this on XLA:CPU (the barrier is expanded
before fusion), and ``lax.cond`` turns into a fusible ``select`` under ``vmap``.
:func:`materialize` uses an operation XLA never fuses into a consumer: a sort, keyed on the
entries' positions, which are already in order. The values come out unchanged, bit for
bit, at O(k log k) for a k-entry table, so it is only meant for small tables.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["materialize"]


def materialize(*tables: jax.Array) -> tuple[jax.Array, ...]:
    """The same arrays, computed once into memory before their consumers run.

    All tables go through one sort of their concatenated entries (keys ``0..k-1``, so
    the permutation is the identity); works under ``jit`` and ``vmap`` (batch axes are
    leading and kept). Identity on values: ``materialize(x)[0]`` equals ``x`` bit for bit.
    """
    if not tables:
        return ()
    arrays = [jnp.asarray(t) for t in tables]
    dtype = jnp.result_type(*arrays)
    if any(a.dtype != dtype for a in arrays):
        # one sort per dtype would also work; the callers pass float tables
        raise ValueError(f"`tables` must share one dtype, got {[str(a.dtype) for a in arrays]}")
    flat = jnp.concatenate([a.reshape(-1) for a in arrays])
    keys = jax.lax.iota(jnp.int32, flat.shape[0])
    _, out = jax.lax.sort((keys, flat), num_keys=1, is_stable=True)
    pieces, start = [], 0
    for a in arrays:
        pieces.append(out[start:start + a.size].reshape(a.shape))
        start += a.size
    return tuple(pieces)
