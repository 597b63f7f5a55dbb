"""Calibration of each user's top-N list: ECE@N and rank-discounted ECE@N (Sato, "Calibrating
the Predictions for Top-N Recommendations", RecSys 2024).

Private module: the public surface is listed in :mod:`calib_jax.metrics`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from calib_jax._src import validation as V
from calib_jax._src.arrays import stat_columns
from calib_jax._src.metric_inputs import check_probs_labels
from calib_jax._src.ranks import rank_within_groups
from calib_jax.groupstats import raw_group_stats, summarize
from calib_jax.metrics._grouped import hard_gap
from calib_jax.metrics._modern import sweep_over_kept_rows
from calib_jax.partitions import uniform_bins


def _topn_ranks(probs, users, scores, ranks):
    n = probs.shape[0]
    if ranks is not None:
        return V.check_integer_ids(ranks, n, "ranks", minimum=1)
    if users is None:
        raise ValueError("pass either `ranks` or `users` (to rank items within each user)")
    s = probs if scores is None else V.as_float_array(scores, "scores").astype(probs.dtype)
    V.check_same_length(n, scores=s)
    return rank_within_groups(s, V.check_integer_ids(users, n, "users", dense=True))


def _checked_sample(probs, labels, weights, soft_labels: bool):
    """``check_probs_labels``; with ``soft_labels``, labels may be any value in [0, 1] (a rating
    rescaled to [0, 1], or a probability)."""
    if not soft_labels:
        return check_probs_labels(probs, labels, weights)
    p, y = V.check_probs(probs, "probs"), V.check_probs(labels, "labels")
    V.check_same_length(p.shape[0], labels=y)
    return p, y, V.check_weights(weights, p.shape[0], "weights")


def _check_some_row_in_top_n(ww: jax.Array, top_n: int) -> None:
    """The metric is undefined when no row of positive weight is in a top-N list (0/0):
    ``ValueError`` eagerly, NaN under ``jit``, never a plausible 0."""
    V.check_condition(~(jnp.sum(ww) > 0), f"no row of positive weight has rank <= top_n={top_n}")


def ece_at_n(probs: jax.Array, labels: jax.Array, *, users: jax.Array | None = None,
             top_n: int = 20, n_bins: int = 15, scores: jax.Array | None = None,
             ranks: jax.Array | None = None, weights: jax.Array | None = None,
             strategy: str = "uniform", soft_labels: bool = False) -> jax.Array:
    r"""ECE restricted to each user's top-N items.

    .. math:: \mathrm{ECE@N} = \sum_{m=1}^{M'} \frac{|B'_m|}{n'}\,\bigl|\bar y_{B'_m} - \bar p_{B'_m}\bigr|

    Sato, "Calibrating the Predictions for Top-N Recommendations" (RecSys 2024), eq. 2.
    Items are ranked per user by ``scores`` (default: ``probs``; or pass 1-based ``ranks``
    directly); only ranks :math:`\le N` enter the bins :math:`B'_m`, and :math:`n'` counts
    them. Two bin rules:

    * ``strategy="uniform"`` (default): ``n_bins`` equal-width bins (as :func:`ece` with
      ``strategy="uniform"``, ``norm="l1"``), a fixed count;
    * ``strategy="sweep"``: the paper's rule for its tables (§5.1 and its footnote 7, after
      Roelofs, Cain, Shlens & Mozer 2022, "Mitigating bias in calibration error estimation",
      §4): equal-count bins of the top-N rows sorted by probability, as many as possible up
      to ``n_bins`` while the bins' label rates stay non-decreasing (the monotone sweep of
      :func:`ece_sweep`, over the top-N rows only).

    Args:
      probs: (n,) predicted probabilities in [0, 1], one row per (user, item) pair.
      labels: (n,) labels in {0, 1}.
      users: (n,) integer user ids (any integers; an integer-valued float array is
        accepted); items are ranked within each user by descending score, ties broken by row
        order. Required unless ``ranks`` is given.
      top_n: N, an int >= 1 (static under ``jit``).
      n_bins: number of equal-width probability bins (``"uniform"``) or the largest count the
        sweep tries (``"sweep"``), an int >= 1 (static).
      scores: optional (n,) finite real scores that define the ranking (e.g. the backbone's
        logits when ``probs`` are calibrated outputs); default ``probs``.
      ranks: optional (n,) 1-based integer ranks (>= 1) within each user's list; when given,
        ``users`` and ``scores`` are ignored.
      weights: optional (n,) non-negative row weights with a positive sum (bin masses and
        rates; the sweep's bin edges are by row count).
      strategy: ``"uniform"`` or ``"sweep"``, the bin rule above (static).
      soft_labels: if True, ``labels`` may be any value in [0, 1] (the paper's rating task: a
        five-star rating rescaled to [0, 1], against predictions on the same scale); the bin
        gaps are then between mean target and mean prediction.

    Returns:
      A scalar array in [0, 1]. Called eagerly, invalid input (NaN, a probability outside
      [0, 1], a label other than 0/1, a non-integer user id, a rank < 1, a negative weight,
      neither ``users`` nor ``ranks``, no row of positive weight with rank <= N) raises
      ``ValueError`` naming the argument; under ``jit`` / ``vmap`` /
      ``grad``, where values cannot raise, the same checks make the result NaN (shape errors
      and a missing ``users``/``ranks`` still raise while tracing).

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import ece_at_n
      >>> p = jnp.array([0.9, 0.6, 0.2, 0.8, 0.3, 0.1]); y = jnp.array([1.0, 0.0, 0.0, 1.0, 1.0, 0.0])
      >>> users = jnp.array([0, 0, 0, 1, 1, 1])  # top 2: (0.9, 1), (0.6, 0) and (0.8, 1), (0.3, 1)
      >>> # bin [0, 0.5): |0.3 - 1| for 1/4 of the rows; bin [0.5, 1]: |0.7667 - 2/3| for 3/4
      >>> round(float(ece_at_n(p, y, users=users, top_n=2, n_bins=2)), 4)
      0.25
      >>> # sweep: the top-2 rows sorted, 0.3 (1), 0.6 (0), 0.8 (1), 0.9 (1); three bins have rates
      >>> # 0.5, 1, 1 (monotone), four would not: |0.45 - 0.5| / 2 + |0.8 - 1| / 4 + |0.9 - 1| / 4
      >>> round(float(ece_at_n(p, y, users=users, top_n=2, n_bins=4, strategy="sweep")), 4)
      0.1
    """
    p, y, w = _checked_sample(probs, labels, weights, soft_labels)
    V.check_positive_int(top_n, "top_n")
    V.check_positive_int(n_bins, "n_bins")
    V.check_choice(strategy, "strategy", ("uniform", "sweep"))
    r = _topn_ranks(p, users, scores, ranks)
    keep = (r <= top_n).astype(p.dtype)
    ww = keep if w is None else keep * w
    _check_some_row_in_top_n(ww, top_n)
    if strategy == "sweep":
        return sweep_over_kept_rows(p, y, w, r <= top_n, max_bins=n_bins)[0]
    ids = uniform_bins(p, n_bins=n_bins)
    if soft_labels:  # hard_gap's one-pass sums index a cell by the 0/1 label: sum the targets instead
        s = summarize(raw_group_stats(stat_columns(p, y, ww), ids, n_bins))
        return jnp.sum(s.mass * jnp.abs(s.pi - s.mu))
    return hard_gap(p, y, ww, ids, n_bins, "l1")


def rdece_at_n(probs: jax.Array, labels: jax.Array, *, users: jax.Array | None = None,
               top_n: int = 20, scores: jax.Array | None = None, ranks: jax.Array | None = None,
               weights: jax.Array | None = None, soft_labels: bool = False) -> jax.Array:
    r"""Rank-discounted ECE@N: bins are the ranks r = 1..N, :math:`w_r = 1/r`.

    .. math:: \mathrm{RDECE@N} = \frac{N}{\sum_r w_r}\sum_{r=1}^{N} w_r \frac{|B'_r|}{n'}
              \bigl|\bar y_{B'_r} - \bar p_{B'_r}\bigr|

    Sato, "Calibrating the Predictions for Top-N Recommendations" (RecSys 2024), eq. 3.
    :math:`B'_r` holds the items at rank r of every user's list and :math:`n'` is the number
    of items with rank :math:`\le N` (weighted with ``weights``); miscalibration at the top
    of the lists weighs most.

    Args:
      probs: (n,) predicted probabilities in [0, 1], one row per (user, item) pair.
      labels: (n,) labels in {0, 1}.
      users: (n,) integer user ids; items are ranked within each user by descending score,
        ties broken by row order. Required unless ``ranks`` is given.
      top_n: N, an int >= 1 (static under ``jit``: it sets the number of rank bins).
      scores: optional (n,) finite real scores that define the ranking; default ``probs``.
      ranks: optional (n,) 1-based integer ranks (>= 1); when given, ``users`` and ``scores``
        are ignored.
      weights: optional (n,) non-negative row weights with a positive sum.
      soft_labels: if True, ``labels`` may be any value in [0, 1] (as :func:`ece_at_n`).

    Returns:
      A non-negative scalar array. Called eagerly, invalid input (NaN, a probability outside
      [0, 1], a label other than 0/1, a non-integer user id, a rank < 1, a negative weight,
      neither ``users`` nor ``ranks``, no row of positive weight with rank <= N) raises
      ``ValueError`` naming the argument; under ``jit`` /
      ``vmap`` / ``grad``, where values cannot raise, the same checks make the result NaN.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import rdece_at_n
      >>> p = jnp.array([0.9, 0.6, 0.2, 0.8, 0.3, 0.1]); y = jnp.array([1.0, 0.0, 0.0, 1.0, 1.0, 0.0])
      >>> users = jnp.array([0, 0, 0, 1, 1, 1])
      >>> # rank 1: 0.9, 0.8 (both clicked), gap 0.15; rank 2: 0.6, 0.3 (one click), gap 0.05
      >>> round(float(rdece_at_n(p, y, users=users, top_n=2)), 4)  # 2 / 1.5 * (1 * 0.15 + 0.5 * 0.05) / 2
      0.1167
    """
    p, y, w = _checked_sample(probs, labels, weights, soft_labels)
    V.check_positive_int(top_n, "top_n")
    r = _topn_ranks(p, users, scores, ranks)
    keep = (r <= top_n).astype(p.dtype)
    ww = keep if w is None else keep * w
    _check_some_row_in_top_n(ww, top_n)
    ids = jnp.clip(r - 1, 0, top_n - 1)
    s = summarize(raw_group_stats(stat_columns(p, y, ww), ids, top_n))
    wr = 1.0 / jnp.arange(1, top_n + 1, dtype=p.dtype)
    return top_n / jnp.sum(wr) * jnp.sum(wr * s.mass * jnp.abs(s.pi - s.mu))
