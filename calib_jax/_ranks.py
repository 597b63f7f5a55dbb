"""Sort-derived primitives: tie groups, average ranks, ranks within groups."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from calib_jax._sorting import argsort

__all__ = ["tie_groups", "average_ranks", "rank_within_groups"]


def tie_groups(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Stable sort order of ``x`` and, for each sorted position, the id of its tie group.

    Returns ``(order, tie_id)`` where ``x[order]`` is ascending and ``tie_id`` (int32,
    non-decreasing, starting at 0) is constant across equal values.
    """
    order = argsort(x)
    xs = x[order]
    new = jnp.concatenate([jnp.zeros((1,), bool), xs[1:] != xs[:-1]])
    return order, jnp.cumsum(new).astype(jnp.int32)


def average_ranks(x: jax.Array) -> jax.Array:
    """Ranks 1..n with ties given their average rank (``scipy.stats.rankdata`` 'average')."""
    n = x.shape[0]
    order, tid = tie_groups(x)
    pos = jnp.arange(1, n + 1, dtype=jnp.result_type(float))
    s = jax.ops.segment_sum(pos, tid, num_segments=n, indices_are_sorted=True)
    c = jax.ops.segment_sum(jnp.ones_like(pos), tid, num_segments=n, indices_are_sorted=True)
    avg = s / jnp.maximum(c, 1.0)
    return jnp.zeros_like(pos).at[order].set(avg[tid])


def rank_within_groups(scores: jax.Array, groups: jax.Array) -> jax.Array:
    """1-based rank of each item by descending score inside its group (e.g. per user).

    Ties in score are broken by position (stable).  Uses one lexicographic sort.
    """
    n = scores.shape[0]
    idx = jnp.arange(n, dtype=jnp.int32)
    g, _, perm = jax.lax.sort((groups.astype(jnp.int32), -scores, idx), num_keys=2)
    start = jnp.concatenate([jnp.ones((1,), bool), g[1:] != g[:-1]])
    first = jax.lax.cummax(jnp.where(start, idx, 0))
    return jnp.zeros((n,), jnp.int32).at[perm].set(idx - first + 1)
