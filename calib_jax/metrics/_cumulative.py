r"""Cumulative calibration errors (Arrieta-Ibarra, Gujral, Tannenbaum & Tygert 2022) and the
multicalibration error over categorical segments (Guy, Haimovich, Linder, Okati, Perini,
Tax & Tygert 2025).

Both read the walk of cumulative differences between labels and scores, sorted by score;
neither has a binning or smoothing parameter.  Sorting goes through
:func:`calib_jax._src.sorting.argsort` (NumPy on CPU, stable), and the walk is read only at the
end of each block of tied scores, so the result does not depend on how tied rows are
ordered.

Private module: the public surface is listed in :mod:`calib_jax.metrics`.
"""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax._src import validation as V
from calib_jax._src.arrays import safe_div
from calib_jax._src.metric_inputs import check_probs_labels
from calib_jax._src.sorting import argsort, argsort_small_ints


def _ratio(stat: jax.Array, sd: jax.Array) -> jax.Array:
    """stat / sd, with 0/0 = 0 and x/0 = inf for x > 0 (never NaN)."""
    ok = sd > 0
    return jnp.where(ok, stat / jnp.where(ok, sd, 1.0), jnp.where(stat > 0, jnp.inf, 0.0))


@functools.partial(jax.jit, static_argnames=("statistic", "normalize"))
def _cumulative_core(p, y, w, *, statistic, normalize):
    v = jnp.ones_like(p) if w is None else w.astype(p.dtype)
    total = jnp.sum(v)
    order = argsort(p)
    ps = p[order]
    c = jnp.cumsum((v * (y - p))[order]) / total
    end = jnp.concatenate([ps[1:] != ps[:-1], jnp.ones((1,), bool)])
    c_max = jnp.maximum(jnp.max(jnp.where(end, c, -jnp.inf)), 0.0)  # C_0 = 0 is part of the walk
    c_min = jnp.minimum(jnp.min(jnp.where(end, c, jnp.inf)), 0.0)
    stat = c_max - c_min if statistic == "kuiper" else jnp.maximum(c_max, -c_min)
    if not normalize:
        return stat
    sd = jnp.sqrt(jnp.sum(v * v * p * (1.0 - p))) / total
    return _ratio(stat, sd)


def cumulative_calibration_error(probs: jax.Array, labels: jax.Array, *, statistic: str = "kuiper",
                                 normalize: bool = False, weights: jax.Array | None = None) -> jax.Array:
    r"""Cumulative calibration error (Arrieta-Ibarra, Gujral, Tannenbaum & Tygert 2022,
    "Metrics of calibration for probabilistic predictions", JMLR 23: the cumulative
    differences of their §2 and the Kolmogorov-Smirnov and Kuiper metrics of §3).

    Sort the rows by score and walk the cumulative differences

    .. math:: C_k = \frac{1}{\sum_i v_i}\sum_{j \le k} v_{(j)}\,(y_{(j)} - p_{(j)}), \qquad C_0 = 0.

    ``statistic="ks"``: Kolmogorov-Smirnov :math:`\max_k |C_k|`; ``"kuiper"`` (default):
    Kuiper :math:`\max_k C_k - \min_k C_k` (the range, which also catches a walk that
    drifts up and then down).  This Kuiper value is what ``mcgrad.metrics.ecce`` reports as
    ECCE; the KS value is ``probcal.metrics.ecce(...).stat_max``.

    ``normalize=True`` divides by the standard deviation of :math:`C_n` for a calibrated
    model, :math:`\sigma = \sqrt{\sum_i v_i^2 p_i(1-p_i)}\,/\sum_i v_i` (unweighted:
    :math:`\sqrt{\sum_i p_i(1-p_i)}/n`), giving the metric in units of standard deviations
    (``mcgrad.metrics.ecce_sigma``); when σ = 0 (all scores 0 or 1) it returns 0 for a zero
    statistic and ``inf`` otherwise.

    Ties: :math:`C_k` is read only at the end of each block of tied scores, so the value
    does not depend on the order of tied rows (with distinct scores every k is read).

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) labels in {0, 1}.
      statistic: ``"kuiper"`` (default, range of the walk) or ``"ks"`` (largest absolute
        value); static under ``jit``.
      normalize: if True (static), divide by the null standard deviation σ (above).
      weights: optional (n,) non-negative row weights (the walk and σ as above; the value is
        invariant to rescaling them).

    Returns:
      A scalar array >= 0 (on the probability scale, or in units of σ with
      ``normalize=True``, possibly ``inf``). Called eagerly, invalid input (NaN, a probability
      outside [0, 1], a label other than 0/1, a negative weight, a bad option) raises
      ``ValueError`` naming the argument; under ``jit`` / ``vmap`` / ``grad``, where values
      cannot raise, the same checks make the result NaN instead. The sort runs inside the
      computation, so the function is jit- and vmap-able.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import cumulative_calibration_error as cce
      >>> p = jnp.array([0.1, 0.3, 0.6, 0.8]); y = jnp.array([0.0, 1.0, 0.0, 1.0])
      >>> # y - p = (-0.1, 0.7, -0.6, 0.2): C = (-0.025, 0.15, 0.0, 0.05)
      >>> round(float(cce(p, y)), 4), round(float(cce(p, y, statistic="ks")), 4)  # 0.15 + 0.025; 0.15
      (0.175, 0.15)
    """
    p, y, w = check_probs_labels(probs, labels, weights)
    V.check_choice(statistic, "statistic", ("ks", "kuiper"))
    return _cumulative_core(p, y, w, statistic=statistic, normalize=V.check_flag_option(normalize, "normalize"))


def _segment_kuiper(ids, ids_o, K, dp_o, d, q, v):
    """Per-segment Kuiper range, null variance numerator and row count for hard ``ids``.

    ``dp_o`` (n, 2): the differences ``v (y - p)`` and the scores in score order, and ``ids_o``
    the segment ids in that order (both shared by every segmentation). Rows are put in
    (segment, score) order by one stable sort of ``ids_o`` (a radix sort of small integer codes
    on the CPU) and one gather of the two columns; within-segment cumulative sums come from one
    global cumsum minus its value before the segment's first row. That base, and the division
    by the segment's weight, are applied to each segment's extremes rather than to every row:
    both are monotone in the cumulative sum, so the extremes are the same floats as those of
    the per-row walk (two gathers of n rows fewer per segmentation, and the maximum and the
    minimum are one scatter of two columns).
    """
    n = dp_o.shape[0]
    if K == 1:  # the whole sample: no segment bookkeeping (constant ids would be constant-folded by XLA)
        ps = dp_o[:, 1]
        c = jnp.cumsum(dp_o[:, 0]) / jnp.sum(v)
        end = jnp.concatenate([ps[1:] != ps[:-1], jnp.ones((1,), bool)])
        cmax = jnp.maximum(jnp.max(jnp.where(end, c, -jnp.inf)), 0.0)
        cmin = jnp.minimum(jnp.min(jnp.where(end, c, jnp.inf)), 0.0)
        sd = jnp.sqrt(jnp.sum(q)) / jnp.sum(v)
        return (cmax - cmin)[None], sd[None], jnp.full((1,), n, dp_o.dtype)
    inner = argsort_small_ints(ids_o)
    sid = ids_o[inner]
    dp = dp_o[inner]
    cs = jnp.cumsum(dp[:, 0])
    ps = dp[:, 1]
    # each segment starts where a binary search of the sorted ids finds its id (K searches; a
    # running maximum of the start positions over all n rows took 12x as long on XLA:CPU), and
    # its walk subtracts the cumulative sum before that start
    starts = jnp.searchsorted(sid, jnp.arange(K, dtype=sid.dtype), side="left", method="scan").astype(jnp.int32)
    base = jnp.where(starts > 0, cs[jnp.maximum(starts - 1, 0)], 0.0)
    end = jnp.concatenate([(sid[1:] != sid[:-1]) | (ps[1:] != ps[:-1]), jnp.ones((1,), bool)])
    ext = jax.ops.segment_max(jnp.stack([jnp.where(end, cs, -jnp.inf), jnp.where(end, -cs, -jnp.inf)], 1), sid,
                              num_segments=K, indices_are_sorted=True)  # (K, 2): max and -min; -inf if empty
    tot = jax.ops.segment_sum(jnp.stack([v, q, jnp.ones_like(v), jnp.abs(d)], 1), ids, num_segments=K)
    vs = tot[:, 0]
    cmax = jnp.maximum(safe_div(ext[:, 0] - base, vs), 0.0)
    cmin = jnp.minimum(safe_div(-ext[:, 1] - base, vs), 0.0)
    sd = safe_div(jnp.sqrt(tot[:, 1]), vs)
    # a segment whose differences are all zero has a flat walk, range exactly 0; the global
    # cumulative sum (a tree of partial sums on XLA) minus its base can leave a few ulps of
    # the global sum there, which over sigma = 0 (every score 0 or 1) would read as inf
    return jnp.where(tot[:, 3] > 0, cmax - cmin, 0.0), sd, tot[:, 2]


@functools.partial(jax.jit, static_argnames=("n_levels", "max_depth", "min_samples", "scale"))
def _mce_core(p: jax.Array, y: jax.Array, fields: jax.Array, w: jax.Array | None, *, n_levels: int,
              max_depth: int, min_samples: int, scale: str) -> jax.Array:
    n, F = fields.shape
    L = n_levels
    v = jnp.ones_like(p) if w is None else w.astype(p.dtype)
    d = v * (y - p)
    q = v * v * p * (1.0 - p)
    order = argsort(p)
    dp_o = jnp.stack([d, p], axis=1)[order]  # one gather of both columns, shared by every segmentation
    f_o = fields[order]
    segs: list[tuple[jax.Array, jax.Array, int]] = [(jnp.zeros((n,), jnp.int32), jnp.zeros((n,), jnp.int32), 1)]
    if max_depth >= 1:
        segs += [(fields[:, f], f_o[:, f], L) for f in range(F)]
    if max_depth >= 2:
        segs += [(fields[:, a] * L + fields[:, b], f_o[:, a] * L + f_o[:, b], L * L)
                 for a, b in itertools.combinations(range(F), 2)]
    sig = []
    for ids, ids_o, K in segs:
        kuiper, sd, count = _segment_kuiper(ids, ids_o, K, dp_o, d, q, v)
        sig.append(jnp.where(count >= min_samples, _ratio(kuiper, sd), 0.0))
    mce_sigma = jnp.max(jnp.concatenate(sig))
    if scale == "sigma":
        return mce_sigma
    total = jnp.sum(v)
    sd_global = jnp.sqrt(jnp.sum(q)) / total
    absolute = jnp.where(sd_global > 0, mce_sigma * sd_global, jnp.where(mce_sigma > 0, jnp.inf, 0.0))
    if scale == "absolute":
        return absolute
    prev = jnp.sum(v * y) / total
    prev = jnp.minimum(prev, 1.0 - prev)
    return 100.0 * _ratio(absolute, prev)


def multicalibration_error(probs: jax.Array, labels: jax.Array, fields: jax.Array, *, n_levels: int | None = None,
                           max_depth: int = 1, min_samples: int = 10, scale: str = "sigma",
                           weights: jax.Array | None = None) -> jax.Array:
    r"""Multicalibration error over segments of categorical fields (Guy, Haimovich, Linder,
    Okati, Perini, Tax & Tygert 2025, "Measuring multi-calibration": the maximum over
    segments of the normalised Kuiper metric, as the ``mcgrad`` package reports it in
    ``MulticalibrationError``).

    Segments are the whole sample (depth 0), every level of every field (depth 1) and,
    with ``max_depth=2``, every pair of levels of two different fields.  In segment
    :math:`s`, with the rows sorted by score, the Kuiper range of the cumulative
    differences (:func:`cumulative_calibration_error`) is divided by its null standard
    deviation:

    .. math:: \mathrm{MCE}_\sigma = \max_{s:\ |s| \ge m}
              \frac{\max_k C^{(s)}_k - \min_k C^{(s)}_k}{\sigma_s},\qquad
              \sigma_s = \frac{\sqrt{\sum_{i\in s} v_i^2 p_i(1-p_i)}}{\sum_{i \in s} v_i}

    ``scale``: ``"sigma"`` (default, :math:`\mathrm{MCE}_\sigma`, mcgrad's ``mce_sigma``),
    ``"absolute"`` (:math:`\mathrm{MCE}_\sigma\,\sigma_{\mathrm{global}}`, mcgrad's
    ``mce``), ``"relative"`` (absolute as a percentage of :math:`\min(\bar y, 1-\bar y)`,
    mcgrad's ``mce_relative``).

    Args:
      fields: (n,) or (n, F) integer codes in ``[0, n_levels)``.
      n_levels: number of levels per field (static; defaults to ``max(fields) + 1`` on
        concrete input).
      min_samples: segments with fewer rows (unweighted count, as mcgrad) are left out.
      max_depth: 0, 1 or 2 (mcgrad's default is 3; depth 3 is not implemented here).

    Differences from mcgrad: no collapsing of rare levels (mcgrad keeps the 3 most
    frequent values of each field by default and merges the rest: pass
    ``max_values_per_segment_feature`` >= the number of levels to compare), and the walk is
    read at the end of each tie block (mcgrad reads every row in its sort order, which
    is arbitrary among ties).  Segments with σ = 0 count as ``inf`` if their range is
    positive, else 0; with no eligible segment the result is 0.

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) labels in {0, 1}.
      fields: (n,) or (n, F) integer codes in ``[0, n_levels)``, one column per categorical
        field.
      n_levels: number of levels per field, an int >= 1 (static under ``jit``; defaults to
        ``max(fields) + 1`` on concrete input and is required when ``fields`` is traced).
        ``n_levels ** max_depth`` must be below :math:`2^{31}`.
      max_depth: 0 (whole sample only), 1 (default; also each level of each field) or 2
        (also each pair of levels of two fields); static. mcgrad's default is 3; depth 3 is
        not implemented here.
      min_samples: segments with fewer rows (unweighted count, as mcgrad) are left out; an
        int >= 1 (static; default 10).
      scale: ``"sigma"``, ``"absolute"`` or ``"relative"`` (above); static.
      weights: optional (n,) non-negative row weights (the walks, σ and the prevalence are
        weighted; ``min_samples`` counts rows).

    Returns:
      A scalar array >= 0 (possibly ``inf``, see above). Called eagerly, invalid input (NaN,
      a probability outside [0, 1], a label other than 0/1, a field code outside
      ``[0, n_levels)``, a negative weight, a bad option) raises ``ValueError`` naming the
      argument; under ``jit`` / ``vmap`` / ``grad``, where values cannot raise, the same
      checks make the result NaN instead (shape and option errors, and a missing
      ``n_levels``, still raise while tracing).

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import multicalibration_error
      >>> p = jnp.array([0.1, 0.3, 0.6, 0.8]); y = jnp.array([0.0, 1.0, 0.0, 1.0])
      >>> f = jnp.array([0, 0, 1, 1])
      >>> # worst segment f = 0: C = (-0.05, 0.3), range 0.35, sigma = sqrt(0.09 + 0.21) / 2
      >>> round(float(multicalibration_error(p, y, f, n_levels=2, min_samples=1)), 4)
      1.278
    """
    p, y, w = check_probs_labels(probs, labels, weights)
    n = p.shape[0]
    arr = V.host_ids(fields, "fields", dense=n_levels is None)  # ids beyond int32 ranked, or refused
    arr = arr if isinstance(arr, jax.Array | jax.core.Tracer) else np.asarray(arr)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"`fields` must be (n,) or (n, F) integer codes, got shape {tuple(arr.shape)}")
    columns = [arr[:, f] for f in range(arr.shape[1])]
    if n_levels is None:
        if not V.is_concrete(arr):
            raise ValueError("`n_levels` (static) is required when `fields` is traced")
        inferred = [V.inferred_levels(c, "fields", n) for c in columns]
        columns, n_levels = [c for c, _ in inferred], max((k for _, k in inferred), default=1)
    V.check_positive_int(n_levels, "n_levels")
    cols = [V.check_hard_groups(c, n, n_levels, "fields", "n_levels") for c in columns]
    if isinstance(max_depth, bool) or not isinstance(max_depth, int | np.integer) or max_depth not in (0, 1, 2):
        raise ValueError(f"`max_depth` must be 0, 1 or 2, got {max_depth}")
    V.check_positive_int(min_samples, "min_samples")
    V.check_choice(scale, "scale", ("sigma", "absolute", "relative"))
    if n_levels ** max_depth >= 2**31:
        raise ValueError(f"n_levels**max_depth must be < 2**31 (int32 segment ids), got {n_levels ** max_depth}")
    f = jnp.stack(cols, axis=1).astype(jnp.int32)
    return _mce_core(p, y, f, w, n_levels=n_levels, max_depth=max_depth, min_samples=min_samples, scale=scale)


__all__ = ["cumulative_calibration_error", "multicalibration_error"]
