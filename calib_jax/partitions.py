r"""Partitions of the data: the grouping is the metric.

"Calibration is Grouping" (VR-SAG; anonymous authors, under review), §2.3; the equation and
appendix numbers below are that paper's.

* :func:`uniform_bins` — equal-width bins :math:`[m/M, (m+1)/M)` of the scores, p = 1 in the
  last bin (eq. 2).
* :func:`quantile_bins` — equal-mass bins (ECE⁺, Appendix C); ties are kept together.
* :func:`kmeans_1d` / :func:`assign_1d` — 1-D k-means on logits (LCCE, eq. 12): random
  restarts (k-means++ seeding, the paper's form), a deterministic quantile seeding, or the
  optimal 1-D k-means (dynamic programme) — see :func:`kmeans_1d`.
* :func:`random_groups` — a uniformly random partition (LCCE_rand, Appendix C).

Categorical fields need no function: their integer codes are already group ids.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax._src import validation as V
from calib_jax._src.arrays import iterate_to_fixed_point, prefix_sums
from calib_jax._src.eager import compiled
from calib_jax._src.sorting import argsort
from calib_jax.groupstats import segment_sums

__all__ = [
    "uniform_bins",
    "quantile_bins",
    "KMeans1D",
    "kmeans_1d",
    "assign_1d",
    "Histogram1D",
    "histogram_1d",
    "kmeans_hist",
    "interval_sums",
    "random_groups",
]


def uniform_bins(probs: jax.Array, *, n_bins: int) -> jax.Array:
    r"""Equal-width bin ids: bin m holds :math:`m/M \le p < (m+1)/M`; p = 1 goes to bin M-1.

    Edges are the floating-point numbers ``m / M`` correctly rounded to the working dtype,
    so ``p = 0.7`` written as a literal of that dtype lies *on* the edge ``7/10`` and goes to
    the upper bin.  Values are clipped into [0, M-1].

    Args:
      probs: (n,) scores, probabilities in [0, 1] (integer input is cast to float; a value
        below 0 lands in bin 0, above 1 in bin M-1).
      n_bins: number of bins M, an int >= 1 (static under ``jit``).

    Returns:
      (n,) int32 bin ids in ``[0, n_bins)``. The binning is jitted and works inside ``jit`` /
      ``vmap``; it checks no values (a building block: :func:`calib_jax.metrics.ece` validates
      its inputs first), so a NaN score gets some bin id, not an error. ``n_bins`` and the
      rank of ``probs`` are checked (``ValueError`` naming them); float16 and bfloat16 scores
      are binned in float32 (as the metrics compute them), on float32's edges.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.partitions import uniform_bins
      >>> uniform_bins(jnp.array([0.0, 0.25, 0.5, 0.7, 1.0]), n_bins=10).tolist()  # 0.7 on an edge
      [0, 2, 5, 7, 9]
    """
    return _uniform_bins(V.block_values(probs, "probs", ndims=(1,)), n_bins=V.check_positive_int(n_bins, "n_bins"))


@functools.partial(jax.jit, static_argnames=("n_bins",))
def _uniform_bins(probs: jax.Array, *, n_bins: int) -> jax.Array:
    p = jnp.asarray(probs)
    dt = p.dtype if jnp.issubdtype(p.dtype, jnp.floating) else jnp.result_type(float)
    p = p.astype(dt)
    M = n_bins
    m = jnp.clip(jnp.floor(p * M).astype(jnp.int32), 0, M - 1)
    # floor(p * M) can be off by one next to an edge because p * M rounds; fix with exact
    # comparisons against the edges m / M.  The edges are computed by NumPy (correctly
    # rounded division; XLA may divide via a reciprocal) and embedded as constants.
    edges = jnp.asarray(np.arange(M + 1, dtype=np.float64) / M, dtype=dt)
    m = jnp.where(p < edges[m], m - 1, m)
    m = jnp.where((p >= edges[m + 1]) & (m < M - 1), m + 1, m)
    return jnp.clip(m, 0, M - 1)


def quantile_bins(probs: jax.Array, *, n_bins: int, weights: jax.Array | None = None) -> jax.Array:
    r"""Equal-mass bin ids (ECE⁺ of "Calibration is Grouping", Appendix C).

    Sort the scores; block m starts at sorted position :math:`\lfloor m n / M \rfloor`
    (weighted: where the cumulative weight first reaches :math:`m/M` of the total).  The
    block's first score is its lower threshold :math:`t_m` and a score p goes to bin
    :math:`\#\{m \ge 1 : t_m \le p\}`, so tied scores always share a bin (a bin can then be
    larger than n/M, or empty).

    Args:
      probs: (n,) scores; any reals (only their order matters).
      n_bins: number of bins M, an int >= 1 (static under ``jit``).
      weights: optional (n,) non-negative row weights: bins then hold equal shares of the
        total weight instead of equal row counts.

    Returns:
      (n,) int32 bin ids in ``[0, n_bins)`` (none for no scores). The binning is jitted and
      works inside ``jit`` / ``vmap``; it checks no values (a building block: the metrics
      validate their inputs first). ``n_bins``, the rank of ``probs`` and the length of
      ``weights`` are checked (``ValueError`` naming them). Finite scores given on the host
      that float32 cannot tell apart (float64 values closer than its spacing) are binned by
      their own order (:func:`calib_jax._src.validation.order_in_float32`), not tied.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.partitions import quantile_bins
      >>> quantile_bins(jnp.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6]), n_bins=3).tolist()
      [0, 0, 1, 1, 2, 2]
      >>> quantile_bins(jnp.array([0.1, 0.1, 0.1, 0.4]), n_bins=2).tolist()  # ties together: bin 0 empty
      [1, 1, 1, 1]
    """
    M = V.check_positive_int(n_bins, "n_bins")
    p = V.block_values(V.order_in_float32(V.on_host(probs, "probs")), "probs", ndims=(1,))
    if weights is not None:
        weights = V.block_values(weights, "weights", ndims=(1,))
        if weights.shape != p.shape:
            raise ValueError(f"`weights` has shape {tuple(weights.shape)}, expected {tuple(p.shape)} (one per score)")
    if p.shape[0] == 0:
        return jnp.zeros((0,), jnp.int32)
    return _quantile_bins(p, n_bins=M, weights=weights)


@functools.partial(jax.jit, static_argnames=("n_bins",))
def _quantile_bins(p: jax.Array, *, n_bins: int, weights: jax.Array | None) -> jax.Array:
    n = p.shape[0]
    M = n_bins
    order = argsort(p)
    ps = p[order]
    if weights is None:
        starts = (jnp.arange(1, M) * n) // M
    else:
        cw = jnp.cumsum(jnp.asarray(weights, p.dtype)[order])
        targets = cw[-1] * jnp.arange(1, M, dtype=p.dtype) / M
        starts = jnp.minimum(jnp.searchsorted(cw, targets, side="right"), n - 1)
    thresholds = ps[starts]
    # few thresholds: compare each score with all of them (one vectorised pass; 8x faster
    # than the binary search's loop on XLA:CPU at 15 bins, and the same ids by definition)
    method = "compare_all" if M <= 64 else "scan"
    return jnp.searchsorted(thresholds, p, side="right", method=method).astype(jnp.int32)


class KMeans1D(NamedTuple):
    """A 1-D k-means solution: sorted centroids (K,) and Voronoi thresholds (K-1,).

    Returned by :func:`kmeans_1d`; pass ``thresholds`` to :func:`assign_1d` for cluster ids.

    Attributes:
      centroids: (K,) cluster centres in non-decreasing order (coinciding when there are
        fewer distinct values than K).
      thresholds: (K-1,) midpoints between consecutive centroids; cluster j holds the
        values x with ``thresholds[j-1] <= x < thresholds[j]``.
    """

    centroids: jax.Array
    thresholds: jax.Array


def assign_1d(x: jax.Array, thresholds: jax.Array) -> jax.Array:
    """Cluster ids of ``x`` for sorted thresholds: ``#{j : thresholds[j] <= x}``.

    Args:
      x: (n,) real values (the logits or scores the thresholds were fitted on).
      thresholds: (K-1,) thresholds in non-decreasing order (e.g. ``KMeans1D.thresholds``).

    Returns:
      (n,) int32 cluster ids in ``[0, K)``; a value on a threshold goes to the upper cluster.
      Works inside ``jit`` / ``vmap``, and an eager call runs one compiled computation; no
      values are checked (a NaN in ``x`` gets id 0).

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.partitions import assign_1d
      >>> assign_1d(jnp.array([-1.0, 0.3, 0.5, 2.0]), jnp.array([0.0, 0.5])).tolist()
      [0, 1, 2, 2]
    """
    x = jnp.asarray(V.block_values(x, "x", ndims=(1,)))
    thresholds = jnp.asarray(V.block_values(thresholds, "thresholds", ndims=(1,)))
    return jnp.sum(x[:, None] >= thresholds[None, :], axis=1).astype(jnp.int32)


def _thresholds(c: jax.Array) -> jax.Array:
    return 0.5 * (c[1:] + c[:-1])


def interval_sums(sorted_x: jax.Array, prefix: jax.Array, thresholds: jax.Array) -> jax.Array:
    """Sums over the clusters cut by ``thresholds`` of values whose prefix sums are ``prefix``.

    ``sorted_x`` (B,) must be non-decreasing (e.g. histogram bin means) and ``prefix`` (B+1, C)
    the prefix sums of the per-element values in the same order.  Cluster j holds the
    elements with ``thresholds[j-1] <= x < thresholds[j]`` (as :func:`assign_1d`).  Costs
    O(K log B): no scatter.

    Args:
      sorted_x: (B,) non-decreasing values.
      prefix: (B+1, C) prefix sums, ``prefix[0] = 0`` and ``prefix[i]`` the sum of the first
        i elements' values.
      thresholds: (K-1,) non-decreasing cut points.

    Returns:
      (K, C) per-cluster sums. Works inside ``jit`` / ``vmap``, and an eager call runs one
      compiled computation; nothing is checked (unsorted ``sorted_x`` gives wrong sums).

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.partitions import interval_sums
      >>> x = jnp.array([1.0, 2.0, 3.0, 4.0])
      >>> pre = jnp.array([[0.0], [1.0], [2.0], [3.0], [4.0]])  # prefix sums of ones: counts
      >>> interval_sums(x, pre, jnp.array([2.5])).tolist()  # {1, 2} and {3, 4}
      [[2.0], [2.0]]
    """
    sorted_x = V.block_values(sorted_x, "sorted_x", ndims=(1,))
    prefix = V.block_values(prefix, "prefix", ndims=(2,))
    thresholds = V.block_values(thresholds, "thresholds", ndims=(1,))
    B = sorted_x.shape[0]
    if prefix.shape[0] != B + 1:
        raise ValueError(f"`prefix` must have {B + 1} rows (one more than `sorted_x`), got {prefix.shape[0]}")
    cut = jnp.searchsorted(sorted_x, thresholds, side="left")
    edges = jnp.concatenate([jnp.zeros((1,), cut.dtype), cut, jnp.full((1,), B, cut.dtype)])
    return prefix[edges[1:]] - prefix[edges[:-1]]


def _lloyd_hist(c0: jax.Array, cnt: jax.Array, mean: jax.Array, n_iter: int) -> jax.Array:
    """Lloyd iterations on histogram bins (weight ``cnt``, sorted bin means ``mean``).

    Bin means are non-decreasing, so cluster sums are differences of prefix sums at the
    thresholds: each iteration is O(K log B).  Runs until the centroids stop changing.
    """
    pre = prefix_sums(jnp.stack([cnt, cnt * mean], axis=1))

    def step(c):
        s = interval_sums(mean, pre, _thresholds(c))
        return jnp.sort(jnp.where(s[:, 0] > 0, s[:, 1] / jnp.where(s[:, 0] > 0, s[:, 0], 1.0), c))

    return iterate_to_fixed_point(step, jnp.sort(c0), n_iter)


def kmeanspp_hist(key: jax.Array, cnt: jax.Array, mean: jax.Array, K: int) -> jax.Array:
    """k-means++ seeding (D^2 sampling) over histogram bins weighted by their counts.

    Draw j picks ``categorical(key_j, logits_j)``, i.e. ``argmax(gumbel(key_j) + logits_j)``
    (``jax.random.categorical``'s definition), with ``key_0, key = split(key)`` and then
    ``key, key_j = split(key)``. All K Gumbel vectors are drawn before the loop: inside it
    XLA:CPU fused each draw (hash, two logs) into the argmax reduction, which it does not
    vectorise (1.9 ms of a Fig 3 trial's LCCE at n = 10^5, 0.6 ms drawn outside). The
    picks are the same, bit for bit.
    """
    k0, key = jax.random.split(key)
    subs = [k0]
    for _ in range(1, K):
        key, sub = jax.random.split(key)
        subs.append(sub)
    gumbel = jnp.stack([jax.random.gumbel(s, mean.shape, mean.dtype) for s in subs])
    log_cnt = jnp.where(cnt > 0, jnp.log(jnp.maximum(cnt, 1e-30)), -jnp.inf)

    # d2: each bin's squared distance to its nearest chosen centroid, updated with each new
    # centroid (O(B K) in all, not O(B K^2); a min is exact, so the values are the same).
    # d2 = inf before the first draw, whose logits are the log counts.
    def body(j, carry):
        c, d2 = carry
        wt = cnt * d2
        logits = jnp.where(wt > 0, jnp.log(jnp.where(wt > 0, wt, 1.0)), -jnp.inf)
        # all mass on existing centroids (fewer distinct values than K): duplicate a centroid
        # (max(wt) <= 0, not all(wt <= 0): the same test for wt >= 0, a float reduction)
        logits = jnp.where(jnp.max(wt) <= 0, jnp.where(cnt > 0, 0.0, -jnp.inf), logits)
        logits = jnp.where(j == 0, log_cnt, logits)
        pick = mean[jnp.argmax(gumbel[j] + logits)]
        return c.at[j].set(pick), jnp.minimum(d2, (mean - pick) ** 2)

    c, _ = jax.lax.fori_loop(0, K, body, (jnp.zeros((K,), mean.dtype), jnp.full_like(mean, jnp.inf)))
    return jnp.sort(c)


def _quantile_init_hist(cnt: jax.Array, mean: jax.Array, K: int) -> jax.Array:
    """Centroids at the bins holding the (k + 1/2)/K quantiles of the histogram."""
    cdf = jnp.cumsum(cnt)
    targets = cdf[-1] * (jnp.arange(K, dtype=cnt.dtype) + 0.5) / K
    idx = jnp.minimum(jnp.searchsorted(cdf, targets, side="left"), cnt.shape[0] - 1)
    return mean[idx]


def _optimal_hist(cnt: jax.Array, mean: jax.Array, m2: jax.Array, K: int) -> jax.Array:
    """Optimal K-partition of histogram bins into contiguous runs (dynamic programme).

    ``m2`` holds each bin's within-bin sum of squares around its mean, so the cost of a run
    i..j is its exact within-cluster sum of squares.  O(K B^2) with B bins.
    """
    B = cnt.shape[0]
    ref = jnp.sum(cnt * mean) / jnp.maximum(jnp.sum(cnt), 1e-30)
    x = mean - ref  # centre for numerical stability
    S0, S1, S2 = prefix_sums(cnt), prefix_sums(cnt * x), prefix_sums(cnt * x * x + m2)
    i = jnp.arange(B)[:, None]  # run start (inclusive)
    j = jnp.arange(B)[None, :]  # run end (inclusive)
    w = S0[j + 1] - S0[i]
    s = S1[j + 1] - S1[i]
    cost = S2[j + 1] - S2[i] - jnp.where(w > 0, s * s / jnp.where(w > 0, w, 1.0), 0.0)
    cost = jnp.where(j >= i, jnp.maximum(cost, 0.0), jnp.inf)
    D = cost[0]  # D[j]: best cost of bins 0..j with 1 cluster
    args = []
    for _ in range(1, K):
        # D_new[j] = min_{i >= 1} D[i-1] + cost[i, j]
        inf_row = jnp.full((1, B), jnp.inf, cnt.dtype)
        tot = jnp.concatenate([inf_row, D[:-1, None] + cost[1:]], axis=0)
        arg = jnp.argmin(tot, axis=0)
        D = jnp.min(tot, axis=0)
        args.append(arg)
    # backtrack run starts
    start_list: list[jax.Array] = []
    end: jax.Array | int = B - 1
    for arg in reversed(args):
        st = arg[end]
        start_list.append(st)
        end = st - 1
    starts = jnp.stack(start_list[::-1]) if start_list else jnp.zeros((0,), jnp.int32)
    bounds = jnp.concatenate([jnp.zeros(1, jnp.int32), starts.astype(jnp.int32), jnp.full((1,), B, jnp.int32)])
    lo, hi = bounds[:-1], bounds[1:]
    wk = S0[hi] - S0[lo]
    sk = S1[hi] - S1[lo]
    c = jnp.where(wk > 0, sk / jnp.where(wk > 0, wk, 1.0), jnp.nan) + ref
    # empty runs (fewer distinct values than K): copy a neighbour so thresholds stay ordered
    c = _fill_nan_forward(c)
    return jnp.sort(c)


def _fill_nan_forward(c: jax.Array) -> jax.Array:
    def body(carry, v):
        out = jnp.where(jnp.isnan(v), carry, v)
        return out, out

    first = c[jnp.argmax(~jnp.isnan(c))]
    _, out = jax.lax.scan(body, first, c)
    return out


class Histogram1D(NamedTuple):
    r"""Equal-width histogram of a 1-D sample: per-bin weight, mean and within-bin sum of squares.

    When built with ``probs`` and ``labels`` it also carries per-bin score and label sums
    (``sum_p``, ``sum_y``), so group metrics over unions of bins need no further pass.
    Returned by :func:`histogram_1d`.

    Attributes:
      bin_index: (n,) int32 bin of each point, in ``[0, B)``.
      weight: (B,) total weight per bin (counts when unweighted).
      mean: (B,) weighted mean of the points in each bin (the bin centre if it is empty).
      m2: (B,) within-bin weighted sum of squares around the bin mean.
      sum_p: (B,) per-bin :math:`\sum v p`, or ``None`` when built without ``probs``/``labels``.
      sum_y: (B,) per-bin :math:`\sum v y`, or ``None`` likewise.
    """

    bin_index: jax.Array  # (n,) bin of each point
    weight: jax.Array  # (B,) weight per bin
    mean: jax.Array  # (B,) weighted mean of the points in each bin (bin centre if empty)
    m2: jax.Array  # (B,) within-bin sum of squares around the bin mean
    sum_p: jax.Array | None = None  # (B,) sum v p
    sum_y: jax.Array | None = None  # (B,) sum v y


def histogram_1d(x: jax.Array, *, n_bins: int, weights: jax.Array | None = None,
                 probs: jax.Array | None = None, labels: jax.Array | None = None) -> Histogram1D:
    r"""One pass: equal-width bins over [min x, max x] with exact per-bin moments.

    Point i falls in bin :math:`\min(\lfloor (x_i - \min x)\,B / (\max x - \min x)\rfloor, B - 1)`
    (a product by the scalar ``B / span``, so the bin does not depend on how XLA compiles
    the surrounding program).

    With ``probs`` and ``labels`` the same pass accumulates per-bin sums of v p and v y
    (rows are scattered into (bin, label) cells so v y needs no column of its own).

    Args:
      x: (n,) real values (logits or scores).
      n_bins: number of bins B, an int >= 1 (static under ``jit``).
      weights: optional (n,) finite non-negative row weights v (default 1; checked).
      probs: optional (n,) probabilities in [0, 1] whose per-bin sums to accumulate.
      labels: optional (n,) labels in {0, 1} (exactly 0 or 1: they index the label cell);
        used only together with ``probs``.

    Returns:
      :class:`Histogram1D` with (n,) ``bin_index`` and (B,) ``weight``, ``mean``, ``m2``
      (and ``sum_p``, ``sum_y`` when both ``probs`` and ``labels`` are given, else ``None``).
      Works inside ``jit`` / ``vmap``, and an eager call runs one compiled computation. The
      weights are checked (``ValueError`` eagerly, NaN outputs under ``jit``); the values of
      ``x``, ``probs`` and ``labels`` are not (a building block of :func:`kmeans_1d` and the
      metrics, which check them), but ``n_bins``, their shapes (1-D, non-empty, one per value
      of ``x``) are, with a ``ValueError`` naming the argument. Float16 and bfloat16 values are
      binned and summed in float32.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.partitions import histogram_1d
      >>> h = histogram_1d(jnp.array([0.0, 1.0, 2.0, 3.0, 4.0]), n_bins=2)  # bins [0, 2), [2, 4]
      >>> h.bin_index.tolist(), h.weight.tolist(), h.mean.tolist(), h.m2.tolist()
      ([0, 0, 1, 1, 1], [2.0, 3.0], [0.5, 3.0], [0.5, 2.0])
    """
    n_bins = V.check_positive_int(n_bins, "n_bins")
    x = jnp.asarray(V.block_values(x, "x", ndims=(1,)))
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    if x.shape[0] == 0:
        raise ValueError("`x` is empty: a histogram needs at least one value")
    for name, a in (("probs", probs), ("labels", labels)):
        if a is not None and jnp.shape(V.on_host(a, name)) != x.shape:
            raise ValueError(f"`{name}` has shape {tuple(jnp.shape(a))}, expected {tuple(x.shape)} "
                             "(one per value of `x`)")
    weights = V.check_nonnegative(weights, x.shape[0])
    v = jnp.ones_like(x) if weights is None else jnp.asarray(weights, x.dtype)
    lo, hi = jnp.min(x), jnp.max(x)
    span = jnp.where(hi > lo, hi - lo, 1.0)
    width = span / n_bins
    # the bin of x is floor((x - lo) * (B / span)), a product: XLA:CPU rewrites a division by
    # a broadcast scalar into this product only when its pattern matcher sees the broadcast,
    # which depends on the surrounding program (1 vs 2 devices moved points across bin edges)
    scale = n_bins / span
    b = jnp.clip(jnp.floor((x - lo) * scale).astype(jnp.int32), 0, n_bins - 1)
    # centre each point on its bin's left edge before squaring: keeps float32 sums accurate
    d = x - (lo + b.astype(x.dtype) * width)
    cols = [v, v * d, v * d * d]
    if probs is not None and labels is not None:
        cols.append(v * jnp.asarray(probs, x.dtype))
        seg = b + n_bins * jnp.asarray(labels).astype(jnp.int32)
        s2 = segment_sums(jnp.stack(cols, axis=1), seg, 2 * n_bins).reshape(2, n_bins, -1)
        s = s2[0] + s2[1]
        sum_p, sum_y = s[:, 3], s2[1, :, 0]
    else:
        s = segment_sums(jnp.stack(cols, axis=1), b, n_bins)
        sum_p = sum_y = None  # type: ignore[assignment]
    cnt = s[:, 0]
    md = _safe_mean(s[:, 1], cnt)
    left = lo + jnp.arange(n_bins, dtype=x.dtype) * width
    mean = jnp.where(cnt > 0, left + md, left + 0.5 * width)
    m2 = jnp.maximum(s[:, 2] - cnt * md * md, 0.0)
    return Histogram1D(bin_index=b, weight=cnt, mean=mean, m2=m2, sum_p=sum_p, sum_y=sum_y)


def _safe_mean(s: jax.Array, w: jax.Array) -> jax.Array:
    return jnp.where(w > 0, s / jnp.where(w > 0, w, 1.0), 0.0)


def kmeans_hist(hist: Histogram1D, *, n_clusters: int, key: jax.Array | None = None, init: str = "random",
                n_iter: int = 300) -> jax.Array:
    """Sorted k-means centroids of a :class:`Histogram1D` (bins weighted by their counts).

    The histogram stage of :func:`kmeans_1d` (without its polish on the raw points).

    Args:
      hist: a :class:`Histogram1D` with B bins (from :func:`histogram_1d`).
      n_clusters: number of clusters K, an int >= 1 (static under ``jit``).
      key: PRNG key of the k-means++ seeding; required for ``init="random"``, unused
        otherwise.
      init: ``"random"`` (k-means++ seeding from ``key``, then Lloyd), ``"quantile"``
        (seeds at the (k + ½)/K quantiles, then Lloyd) or ``"optimal"`` (the optimal
        partition of the bins into K contiguous runs, O(K B²)). Static; another string
        raises ``ValueError``.
      n_iter: at most this many Lloyd iterations (static), stopping at a fixed point.

    Returns:
      (K,) sorted centroids. Works inside ``jit`` / ``vmap`` (``key`` may be traced), and an
      eager call runs one compiled computation; the options are checked (``ValueError``), the
      histogram's values are not (it comes from :func:`histogram_1d`).

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.partitions import histogram_1d, kmeans_hist
      >>> h = histogram_1d(jnp.array([0.0, 0.1, 0.2, 1.0, 1.1, 1.2]), n_bins=12)
      >>> [round(float(c), 4) for c in kmeans_hist(h, n_clusters=2, init="quantile")]
      [0.1, 1.1]
    """
    K = V.check_positive_int(n_clusters, "n_clusters")
    V.check_choice(init, "init", ("random", "quantile", "optimal"))
    cnt, mean = hist.weight, hist.mean
    if init == "random":
        if key is None:
            raise ValueError("`key` is required for init='random' (or use init='quantile'/'optimal')")
        return _lloyd_hist(kmeanspp_hist(key, cnt, mean, K), cnt, mean, n_iter)
    if init == "quantile":
        return _lloyd_hist(_quantile_init_hist(cnt, mean, K), cnt, mean, n_iter)
    return _optimal_hist(cnt, mean, hist.m2, K)


def kmeans_1d(
    x: jax.Array,
    *,
    n_clusters: int,
    key: jax.Array | None = None,
    init: str = "random",
    weights: jax.Array | None = None,
    n_bins: int = 4096,
    n_iter: int = 300,
    exact: bool = True,
    n_polish: int = 100,
) -> KMeans1D:
    r"""1-D k-means (Lloyd) on scores/logits ``x``; returns sorted centroids and thresholds.

    In one dimension clusters are intervals, cut at the midpoints between sorted centroids.
    The solver is sort-free:

    1. one pass builds an equal-width histogram of ``x`` with ``n_bins`` bins holding each
       bin's weight, exact mean and within-bin sum of squares;
    2. seeding and Lloyd iterations run on the bin means, O(n_bins K) each, until the
       centroids stop changing (at most ``n_iter``);
    3. if ``exact``, Lloyd iterations on the raw points follow (assignment by thresholds,
       centroid = weighted mean of the assigned points) until a fixed point of Lloyd's map
       for the raw data is reached (at most ``n_polish``; typically 1-3 passes since the
       histogram solution is already within a bin width).  With ``exact=False`` the
       centroids are those of the binned data (within a bin width of the raw solution).

    ``init``:
      * ``"random"`` — k-means++ (D² sampling) seeding from ``key``: the paper's random-restart
        k-means (VR-SAG paper, §2.5).
      * ``"quantile"`` — deterministic seeding at the (k + ½)/K quantiles; seed-free.
      * ``"optimal"`` — the globally optimal K-partition of the histogram (dynamic programme
        over contiguous runs of at most 512 bins, O(K n_bins²), exact within-bin variances),
        then polished; equals the optimal 1-D k-means (Ckmeans.1d.dp) whenever no histogram bin
        straddles an optimal cut, and is seed-free.

    Empty clusters keep their previous centroid.  With fewer distinct values than K some
    centroids coincide (their clusters are empty).

    Args:
      x: (n,) finite real values to cluster (logits for LCCE).
      n_clusters: number of clusters K, an int in ``[1, n]`` (static under ``jit``).
      key: PRNG key of the seeding; required for ``init="random"``, unused otherwise.
      init: ``"random"``, ``"quantile"`` or ``"optimal"`` (above; static).
      weights: optional (n,) finite non-negative row weights, not all zero.
      n_bins: histogram bins of step 1 (static; at most 512 are used for ``"optimal"``).
      n_iter: at most this many Lloyd iterations on the histogram (static).
      exact: whether to polish on the raw points (step 3; static).
      n_polish: at most this many polishing passes (static).

    Returns:
      :class:`KMeans1D` with (K,) sorted ``centroids`` and (K-1,) ``thresholds``. Called
      eagerly, a NaN or infinite ``x``, weights that are negative or all zero, a bad
      ``n_clusters``, ``n_bins``, ``n_iter`` or ``n_polish``, an unknown ``init`` or a
      ``key`` that is not one PRNG key raises ``ValueError`` naming the argument (and
      ``init="random"`` without ``key`` raises);
      under ``jit`` / ``vmap`` the same value checks make the centroids and thresholds NaN,
      while option errors still raise while tracing. ``key`` may be traced.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax.partitions import kmeans_1d, assign_1d
      >>> x = jnp.array([0.0, 0.1, 0.2, 1.0, 1.1, 1.2])
      >>> km = kmeans_1d(x, n_clusters=2, key=jax.random.key(0))  # two well-separated clusters
      >>> [round(float(c), 4) for c in km.centroids], [round(float(t), 4) for t in km.thresholds]
      ([0.1, 1.1], [0.6])
      >>> assign_1d(x, km.thresholds).tolist()
      [0, 0, 0, 1, 1, 1]
    """
    x = V.check_logits(x, "x")
    dt = x.dtype
    V.check_positive_int(n_clusters, "n_clusters", maximum=x.shape[0])
    V.check_choice(init, "init", ("random", "quantile", "optimal"))
    n_bins, n_iter = V.check_positive_int(n_bins, "n_bins"), V.check_positive_int(n_iter, "n_iter")
    n_polish = V.check_positive_int(n_polish, "n_polish")
    if key is not None:
        key = V.check_key(key)
    weights = V.check_weights(weights, x.shape[0])
    nb = n_bins if init != "optimal" else min(n_bins, 512)
    hist = histogram_1d(x, n_bins=nb, weights=weights)
    c = kmeans_hist(hist, n_clusters=n_clusters, key=key, init=init, n_iter=n_iter)
    if exact:
        v = jnp.ones_like(x) if weights is None else jnp.asarray(weights, dt)

        def polish(c):
            ids = assign_1d(x, _thresholds(c))
            s = segment_sums(jnp.stack([v, v * x], axis=1), ids, n_clusters)
            return jnp.sort(jnp.where(s[:, 0] > 0, _safe_mean(s[:, 1], s[:, 0]), c))

        c = iterate_to_fixed_point(polish, c, n_polish)
    return KMeans1D(centroids=c, thresholds=_thresholds(c))


def random_groups(key: jax.Array, n: int, *, n_groups: int) -> jax.Array:
    """A uniformly random partition of n items into ``n_groups`` groups (ids in [0, K)).

    Each item draws its group independently and uniformly (LCCE_rand of the VR-SAG paper,
    Appendix C), so group sizes vary and a group can be empty.

    Args:
      key: PRNG key; equal keys give equal partitions.
      n: number of items, an int >= 1 (static under ``jit``).
      n_groups: number of groups K, an int >= 1 (static under ``jit``).

    Returns:
      (n,) int32 group ids in ``[0, n_groups)``. Works inside ``jit`` / ``vmap`` (``key``
      may be traced), and an eager call runs one compiled computation. ``n``, ``n_groups`` and
      the key's type are checked (``ValueError`` naming them).

    Example:
      >>> import jax
      >>> from calib_jax.partitions import random_groups
      >>> g = random_groups(jax.random.key(0), 1000, n_groups=4)
      >>> g.shape, int(g.min()), int(g.max())
      ((1000,), 0, 3)
    """
    n, n_groups = V.check_positive_int(n, "n"), V.check_positive_int(n_groups, "n_groups")
    return jax.random.randint(V.check_key(key), (n,), 0, n_groups, dtype=jnp.int32)


# Eager calls run one compiled computation each (calib_jax._src.eager): op by op, kmeans_1d
# retraced its Lloyd and polish loops (fresh closures) and compiled them on every call.
# Inside a user's jit / vmap these are the functions above, unchanged.
histogram_1d = compiled(histogram_1d)
kmeans_hist = compiled(kmeans_hist)
kmeans_1d = compiled(kmeans_1d)
assign_1d = compiled(assign_1d)
interval_sums = compiled(interval_sums)
random_groups = compiled(random_groups)
