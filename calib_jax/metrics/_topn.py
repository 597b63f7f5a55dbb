"""Calibration of each user's top-N list: ECE@N and rank-discounted ECE@N (seeds/003).

Private module: the public surface is listed in :mod:`calib_jax.metrics`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from calib_jax._src import validation as V
from calib_jax._src.ranks import rank_within_groups
from calib_jax.groupstats import _columns, _raw_stats, summarize
from calib_jax.metrics._common import _pl
from calib_jax.metrics._grouped import _hard_gap
from calib_jax.partitions import uniform_bins


def _topn_ranks(probs, users, scores, ranks):
    n = probs.shape[0]
    if ranks is not None:
        return V.check_integer_ids(ranks, n, "ranks", minimum=1)
    if users is None:
        raise ValueError("pass either `ranks` or `users` (to rank items within each user)")
    s = probs if scores is None else V.as_float_array(scores, "scores").astype(probs.dtype)
    V.check_same_length(n, scores=s)
    return rank_within_groups(s, V.check_integer_ids(users, n, "users"))


def ece_at_n(probs: jax.Array, labels: jax.Array, *, users: jax.Array | None = None,
             top_n: int = 20, n_bins: int = 15, scores: jax.Array | None = None,
             ranks: jax.Array | None = None, weights: jax.Array | None = None) -> jax.Array:
    r"""ECE restricted to each user's top-N items (seeds/003 eq. 2).

    Items are ranked per user by ``scores`` (default: ``probs``; or pass 1-based ``ranks``
    directly); only ranks :math:`\le N` enter an equal-width ECE with ``n_bins`` bins.
    (The paper adapts the bin count to the data; here it is fixed and explicit.)
    """
    p, y, w = _pl(probs, labels, weights)
    V.check_positive_int(top_n, "top_n")
    r = _topn_ranks(p, users, scores, ranks)
    keep = (r <= top_n).astype(p.dtype)
    ww = keep if w is None else keep * w
    ids = uniform_bins(p, n_bins=n_bins)
    return _hard_gap(p, y, ww, ids, n_bins, "l1")


def rdece_at_n(probs: jax.Array, labels: jax.Array, *, users: jax.Array | None = None,
               top_n: int = 20, scores: jax.Array | None = None, ranks: jax.Array | None = None,
               weights: jax.Array | None = None) -> jax.Array:
    r"""Rank-discounted ECE@N (seeds/003 eq. 3): bins are the ranks r = 1..N, :math:`w_r = 1/r`.

    .. math:: \mathrm{RDECE@N} = \frac{N}{\sum_r w_r}\sum_{r=1}^{N} w_r \frac{|B'_r|}{n'}
              \bigl|\bar y_{B'_r} - \bar p_{B'_r}\bigr|
    """
    p, y, w = _pl(probs, labels, weights)
    V.check_positive_int(top_n, "top_n")
    r = _topn_ranks(p, users, scores, ranks)
    keep = (r <= top_n).astype(p.dtype)
    ww = keep if w is None else keep * w
    ids = jnp.clip(r - 1, 0, top_n - 1)
    s = summarize(_raw_stats(_columns(p, y, ww), ids, top_n))
    wr = 1.0 / jnp.arange(1, top_n + 1, dtype=p.dtype)
    return top_n / jnp.sum(wr) * jnp.sum(wr * s.mass * jnp.abs(s.pi - s.mu))
