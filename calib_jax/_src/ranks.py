"""Sort-derived primitives: tie groups, average ranks, ranks within groups.

After one sort, tie groups are handled with scans (``cummax``/``cummin``/``cumsum``) and
gathers rather than scatters over n segments, which are slow on XLA:CPU.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from calib_jax._src.sorting import argsort_with_ties, tie_bounds

__all__ = ["tie_groups", "tie_bounds", "average_ranks", "rank_within_groups"]


def tie_groups(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Sort order of ``x`` and, for each sorted position, the id of its tie group.

    Returns ``(order, tie_id)`` where ``x[order]`` is ascending and ``tie_id`` (int32,
    non-decreasing, starting at 0) is constant across equal values.
    """
    order, first, _ = argsort_with_ties(x)
    new = jnp.concatenate([jnp.zeros((1,), bool), first[1:] != first[:-1]])
    return order, jnp.cumsum(new).astype(jnp.int32)


def average_ranks(x: jax.Array) -> jax.Array:
    """Ranks 1..n with ties given their average rank (``scipy.stats.rankdata`` 'average')."""
    order, first, last = argsort_with_ties(x)
    dt = x.dtype if jnp.issubdtype(x.dtype, jnp.floating) else jnp.result_type(float)
    avg = 0.5 * (first + last).astype(dt) + 1.0
    return jnp.zeros(x.shape, dt).at[order].set(avg)


def rank_within_groups(scores: jax.Array, groups: jax.Array) -> jax.Array:
    """1-based rank of each item by descending score inside its group (e.g. per user).

    Ties in score are broken by position.  Uses one lexicographic sort.
    """
    n = scores.shape[0]
    idx = jnp.arange(n, dtype=jnp.int32)
    g, _, perm = jax.lax.sort((groups.astype(jnp.int32), -scores, idx), num_keys=2)
    start = jnp.concatenate([jnp.ones((1,), bool), g[1:] != g[:-1]])
    first = jax.lax.cummax(jnp.where(start, idx, 0))
    return jnp.zeros((n,), jnp.int32).at[perm].set(idx - first + 1)
