"""Small array helpers shared by several layers (group statistics, partitions, metrics).

Private plumbing: nothing here validates its input; the public functions that call these do.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def safe_div(num: jax.Array, den: jax.Array) -> jax.Array:
    """num / den where den > 0, else 0 (double-where: no NaN in values or gradients)."""
    ok = den > 0
    return jnp.where(ok, num / jnp.where(ok, den, 1.0), 0.0)


def stat_columns(probs: jax.Array, labels: jax.Array, weights: jax.Array | None) -> jax.Array:
    """The per-row columns ``[v, v p, v y, v p^2, v p y]`` (``v`` the weight, 1 without
    weights) whose group sums are the group statistics."""
    v = jnp.ones_like(probs) if weights is None else weights.astype(probs.dtype)
    vp = v * probs
    return jnp.stack([v, vp, v * labels, vp * probs, vp * labels], axis=1)


def prefix_sums(x: jax.Array) -> jax.Array:
    """Cumulative sums along axis 0 with a leading zero row: ``out[i] = sum(x[:i])``."""
    return jnp.concatenate([jnp.zeros((1,) + x.shape[1:], x.dtype), jnp.cumsum(x, axis=0)])


def iterate_to_fixed_point(step, c0: jax.Array, max_iter: int) -> jax.Array:
    """Apply ``step`` until the centroids stop changing (or ``max_iter`` steps)."""

    def cond(state):
        i, c, prev = state
        return (i < max_iter) & jnp.any(c != prev)

    def body(state):
        i, c, _ = state
        return i + 1, step(c), c

    _, c, _ = jax.lax.while_loop(cond, body, (jnp.int32(1), step(c0), c0))
    return c
