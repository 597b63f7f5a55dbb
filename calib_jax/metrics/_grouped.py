"""Calibration errors over a partition of the rows: the gap norms, ECE (probability bins),
GCE (any hard or soft groups), LCCE (logit clusters, random groups), the field-level
errors and the global / field-wise bias.

Private module: the public surface is listed in :mod:`calib_jax.metrics`.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax._src import validation as V
from calib_jax._src.arrays import iterate_to_fixed_point, prefix_sums, safe_div, stat_columns
from calib_jax._src.eager import flag
from calib_jax._src.metric_inputs import GAP_NORMS, check_probs_labels, weighted_mean
from calib_jax._src.validation import check_groups
from calib_jax.groupstats import GroupStats, deterministic_segment_sum, gap_sums, raw_group_stats
from calib_jax.partitions import (
    assign_1d,
    histogram_1d,
    interval_sums,
    kmeans_1d,
    kmeans_hist,
    quantile_bins,
    random_groups,
    uniform_bins,
)


def gap_norm(stats: GroupStats, *, norm: str = "l2") -> jax.Array:
    r"""Aggregate per-group calibration gaps :math:`\mu_k - \pi_k` of a partition.

    * ``"l2"``: :math:`\sum_k w_k (\mu_k-\pi_k)^2` — GCE (eq. 7 of "Calibration is Grouping",
      VR-SAG; anonymous authors, under review), LCCE (its eq. 12) and the squared ECE; no
      square root is taken.
    * ``"l1"``: :math:`\sum_k w_k |\mu_k-\pi_k|` — ECE (its eq. 2), Field-ECE (Pan et al.,
      "Field-aware Calibration", WWW 2020, eq. 5).
    * ``"max"``: :math:`\max_{k: w_k>0} |\mu_k-\pi_k|` — MCE.

    Here :math:`w_k` is group k's share of the total weight, :math:`\mu_k` its mean score and
    :math:`\pi_k` its label rate, all read from the sums in ``stats``.  It works on sums, not
    rows, so statistics of several shards can be added (:func:`calib_jax.groupstats.merge`)
    before the norm is taken.

    Args:
      stats: a :class:`calib_jax.groupstats.GroupStats` of K groups (each field of shape
        (K,)), e.g. from :func:`calib_jax.groupstats.group_stats`; the weights must be
        non-negative with a positive total.
      norm: ``"l2"``, ``"l1"`` or ``"max"`` as above (static under ``jit``; another string
        raises ``ValueError``).

    Returns:
      A scalar array. Empty groups (zero weight) contribute nothing. There are no input checks
      (the sums are taken as given, eagerly and under ``jit`` / ``vmap`` / ``grad`` alike): a
      NaN in ``stats`` or a zero total weight gives NaN.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.groupstats import group_stats
      >>> from calib_jax.metrics import gap_norm
      >>> p = jnp.array([0.1, 0.2, 0.8, 0.9]); y = jnp.array([0.0, 1.0, 1.0, 1.0])
      >>> s = group_stats(p, y, jnp.array([0, 0, 1, 1]), n_groups=2)  # gaps 0.15 - 0.5, 0.85 - 1
      >>> round(float(gap_norm(s)), 4)  # (0.35**2 + 0.15**2) / 2
      0.0725
      >>> round(float(gap_norm(s, norm="max")), 4)
      0.35
    """
    V.check_choice(norm, "norm", GAP_NORMS)
    return _gap(stats.weight, stats.sum_p, stats.sum_y, norm)


def _gap(weight: jax.Array, sum_p: jax.Array, sum_y: jax.Array, norm: str) -> jax.Array:
    mass = weight / jnp.sum(weight)
    gap = safe_div(sum_p - sum_y, weight)
    if norm == "l2":
        return jnp.sum(mass * gap * gap)
    if norm == "l1":
        return jnp.sum(mass * jnp.abs(gap))
    return jnp.max(jnp.where(weight > 0, jnp.abs(gap), 0.0))


# Compiled cores (static sizes and options): an eager public call validates its concrete
# inputs, then runs one or two of these instead of dozens of op-by-op dispatches.
@functools.partial(jax.jit, static_argnames=("K", "norm"))
def hard_gap(p, y, w, ids, K, norm):
    return _gap(*gap_sums(p, y, ids, K, w), norm)


@functools.partial(jax.jit, static_argnames=("n_groups", "norm"))
def _soft_gap(p, y, w, g, n_groups, norm):
    return gap_norm(raw_group_stats(stat_columns(p, y, w), g, n_groups), norm=norm)


@functools.partial(jax.jit, static_argnames=("K",))
def _field_rce_core(p, y, w, g, eps, K):
    # the first-order sums of gap_sums are all it needs; the panel's GCE(field) and
    # Field-ECE compute the same call on the same field, so XLA merges the passes
    weight, sum_p, sum_y = gap_sums(p, y, g, K, w)
    rel = safe_div(jnp.abs(sum_y - sum_p), sum_y + eps * weight)
    return jnp.sum(weight * rel) / jnp.sum(weight)


@functools.partial(jax.jit, static_argnames=("K",))
def _abs_bias_core(p, y, w, g, K):
    weight, sum_p, sum_y = gap_sums(p, y, g, K, w)
    ratio = safe_div(sum_p, sum_y)
    mass = jnp.where(sum_y > 0, weight, 0.0)
    return safe_div(jnp.sum(mass * jnp.abs(ratio - 1.0)), jnp.sum(mass))


def ece(probs: jax.Array, labels: jax.Array, *, n_bins: int = 15, strategy: str = "uniform",
        norm: str = "l1", weights: jax.Array | None = None) -> jax.Array:
    r"""Expected calibration error over probability bins.

    .. math:: \mathrm{ECE} = \sum_{m=1}^{M} \frac{|B_m|}{n}\,\bigl|\mathrm{acc}(B_m) - \mathrm{conf}(B_m)\bigr|

    with :math:`\mathrm{conf}(B_m)` the mean score and :math:`\mathrm{acc}(B_m)` the click rate
    of the rows in bin :math:`m` (weighted means with ``weights``). Guo, Pleiss, Sun and
    Weinberger, "On Calibration of Modern Neural Networks" (ICML 2017), §2; eq. 2 of
    "Calibration is Grouping" (VR-SAG; anonymous authors, under review).

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) labels in {0, 1}.
      n_bins: number of bins M (static under ``jit``).
      strategy: ``"uniform"`` — equal-width bins :math:`[m/M,(m+1)/M)`, p = 1 in the last
        bin; ``"quantile"`` — equal-mass bins (ECE⁺; ties kept together, see
        :func:`calib_jax.partitions.quantile_bins`). Equal-mass bins of the logits are the
        same bins (the sigmoid is increasing), so an ECE "on logit quantile bins" is ECE⁺
        (checked in ``tests/test_metric_equivalences.py``).
      norm: ``"l1"`` (ECE), ``"l2"`` (squared ECE :math:`\sum w_m\,\mathrm{gap}_m^2`, no
        root), ``"max"`` (MCE: largest gap over non-empty bins).
      weights: optional (n,) non-negative row weights (a weight of k counts as k copies).

    Returns:
      A scalar array. Empty bins contribute nothing. Called eagerly, invalid input (NaN, a
      probability outside [0, 1], a label other than 0/1, a negative weight, a bad option)
      raises ``ValueError`` naming the argument; under ``jit`` / ``vmap`` / ``grad``, where values
      cannot raise, the same checks make the result NaN instead of a plausible number.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax.metrics import ece
      >>> p = jnp.array([0.1, 0.2, 0.8, 0.9]); y = jnp.array([0.0, 1.0, 1.0, 1.0])
      >>> round(float(ece(p, y, n_bins=2)), 4)  # bins: |0.15 - 0.5| and |0.85 - 1| weighted 1/2 each
      0.25
      >>> round(float(jax.jit(lambda p, y: ece(p, y, n_bins=2))(p, y)), 4)
      0.25
    """
    p, y, w = check_probs_labels(probs, labels, weights)
    V.check_positive_int(n_bins, "n_bins")
    V.check_choice(strategy, "strategy", ("uniform", "quantile"))
    V.check_choice(norm, "norm", GAP_NORMS)
    if strategy == "uniform":
        ids = uniform_bins(p, n_bins=n_bins)
    else:
        ids = quantile_bins(p, n_bins=n_bins, weights=w)
    return hard_gap(p, y, w, ids, n_bins, norm)


def gce(probs: jax.Array, labels: jax.Array, groups: jax.Array, *, n_groups: int | None = None,
        weights: jax.Array | None = None, norm: str = "l2") -> jax.Array:
    r"""Grouping calibration error for any hard or soft partition.

    .. math:: \mathrm{GCE} = \sum_k w_k (\mu_k - \pi_k)^2

    Eq. 7 of "Calibration is Grouping" (VR-SAG; anonymous authors, under review), with
    :math:`w_k` the share of the total weight in group k, :math:`\mu_k` its mean score and
    :math:`\pi_k` its label rate (soft memberships :math:`q_{ik}` weight row i in group k).
    With singleton groups it equals the Brier score; with probability bins it is the
    squared ECE.  ``norm="l1"`` gives absolute gaps (Field-ECE style).

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) labels in {0, 1}.
      groups: hard group ids, (n,) integers in ``[0, n_groups)``, or soft memberships,
        (n, K) non-negative with rows summing to 1 (within 1e-4).
      n_groups: number of groups K (static under ``jit``); required for hard ids, inferred
        from the columns of soft memberships (and must match them if given).
      weights: optional (n,) non-negative row weights with a positive sum (a weight of k
        counts as k copies).
      norm: ``"l2"`` (eq. 7), ``"l1"`` (absolute gaps) or ``"max"`` (largest gap over
        non-empty groups); static. See :func:`gap_norm`.

    Returns:
      A scalar array. Empty groups contribute nothing. Called eagerly, invalid input (NaN, a
      probability outside [0, 1], a label other than 0/1, a group id outside
      ``[0, n_groups)``, memberships whose rows do not sum to 1, a negative weight, a bad
      option) raises ``ValueError`` naming the argument; under ``jit`` / ``vmap`` / ``grad``,
      where values cannot raise, the same checks make the result NaN (shape errors, a missing
      ``n_groups`` and bad options still raise while tracing).

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import gce
      >>> p = jnp.array([0.1, 0.2, 0.8, 0.9]); y = jnp.array([0.0, 1.0, 1.0, 1.0])
      >>> round(float(gce(p, y, jnp.array([0, 0, 1, 1]), n_groups=2)), 4)  # (0.35**2 + 0.15**2) / 2
      0.0725
      >>> round(float(gce(p, y, jnp.full((4, 2), 0.5))), 4)  # two soft groups, both mu=0.5, pi=0.75
      0.0625
    """
    p, y, w = check_probs_labels(probs, labels, weights)
    V.check_choice(norm, "norm", GAP_NORMS)
    g = check_groups(groups, p.shape[0], n_groups)
    if g.ndim == 1:
        return hard_gap(p, y, w, g, n_groups, norm)
    return _soft_gap(p, y, w, g, n_groups, norm)


def lcce(logits: jax.Array, labels: jax.Array, *, n_clusters: int = 4, n_restarts: int = 4,
         key: jax.Array | None = None, init: str = "random", norm: str | tuple[str, ...] = "l2",
         probs: jax.Array | None = None, subsample: int | None = None,
         weights: jax.Array | None = None, exact: bool = False, n_bins: int = 4096) -> jax.Array:
    r"""Logit-cluster calibration error.

    Eq. 12 and §2.5 of "Calibration is Grouping" (VR-SAG; anonymous authors, under review).
    K-means with ``n_clusters`` clusters on the 1-D logits gives a fixed partition
    :math:`\{M_j\}`; LCCE is the GCE on it:

    .. math:: \mathrm{LCCE}_K = \sum_j w_j (\mu_j - \pi_j)^2

    with :math:`\mu_j` the mean of :math:`\hat p_i = \sigma(o_i)` (or of ``probs`` when given —
    e.g. calibrated outputs evaluated on the backbone's logit clusters) and :math:`\pi_j`
    the click rate in cluster j. It is the reliability term REL of the grouping
    decomposition of the Brier score (eq. 6; :func:`calib_jax.decompositions.brier_grouping`)
    on these clusters: a "Brier reliability on logit k-means clusters" is this metric (up to
    the clustering: the default histogram k-means resolves boundaries to a bin width, so
    another k-means can move a few rows and the fourth digit; checked in
    ``tests/test_metric_equivalences.py``).

    Computation.  One pass builds an ``n_bins``-bin histogram of the logits carrying, per bin
    and label, the weight, the logit moments and the score sums.  By default (``exact=False``)
    k-means runs on the histogram (:func:`calib_jax.partitions.kmeans_hist`) and each bin
    joins the cluster of its mean, so every restart costs O(n_bins K) and the whole metric
    one pass over the data; cluster boundaries are resolved to one bin width
    (range/4096 ≈ 0.003 logits for a typical CTR model).  With ``exact=True`` the centroids
    are polished by Lloyd steps on the raw logits and every point is assigned to its
    nearest centroid (a few passes per restart).

    Args:
      logits: (n,) real, finite logits :math:`o_i`; they define the clusters.
      labels: (n,) labels in {0, 1}.
      n_clusters: number of clusters K, an int in [1, n] (static under ``jit``).
      n_restarts: number of k-means runs averaged for ``init="random"``, an int >= 1
        (static).
      key: a JAX PRNG key; required for ``init="random"`` and for ``subsample``, unused
        otherwise. It may be traced.
      init: ``"random"`` — the paper's form: k-means++ seeding, the metric averaged over
        ``n_restarts`` runs (keys split from ``key``); ``"quantile"`` or ``"optimal"`` —
        deterministic, seed-free variants (one run; ``n_restarts`` is ignored).
        See :func:`calib_jax.partitions.kmeans_1d`. Static.
      norm: ``"l2"`` (eq. 12), ``"l1"`` or ``"max"`` (see :func:`gap_norm`); static. A tuple of
        them, e.g. ``("l2", "l1")``, returns one value per norm, shape (len(norm),), from one
        histogram and one clustering, at the cost of one: each value equals the eager call
        with that norm alone bit for bit (the clusters do not depend on the norm); traced
        inside a larger ``jit``, to float rounding (XLA may fuse it differently).
      probs: optional (n,) probabilities in [0, 1] whose calibration is measured on the
        clusters of ``logits``; default :math:`\sigma(o_i)`.
      subsample: estimate centroids from this many points drawn uniformly with replacement
        (Appendix H.1, Table 6); every point is then assigned to its nearest centroid.
        An int >= 1 (static). Needs ``key``.
      weights: optional (n,) non-negative row weights with a positive sum (they weight the
        k-means objective and the gaps).
      exact: static bool; ``True`` polishes the centroids on the raw logits and assigns every
        point exactly (see above), ``False`` works on the histogram.
      n_bins: number of histogram bins, an int >= 1 (static; capped at 512 for
        ``init="optimal"``).

    Returns:
      A scalar array (for ``init="random"``, the mean over the restarts). Called eagerly,
      invalid input (NaN or infinite logits, a label other than 0/1, a probability outside
      [0, 1], a negative weight, ``n_clusters`` > n, a bad option, a missing ``key``) raises
      ``ValueError`` naming the argument; under ``jit`` / ``vmap`` / ``grad``, where values
      cannot raise, the value checks make the result NaN, while shape errors, bad options and
      a missing ``key`` still raise while tracing. The first call for each static
      configuration and input shape compiles the k-means (several seconds); later calls reuse
      it.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import lcce
      >>> o = jnp.array([-2.0, -2.0, 0.0, 0.0, 2.0, 2.0]); y = jnp.array([0.0, 0.0, 0.0, 1.0, 1.0, 1.0])
      >>> # three clusters {-2}, {0}, {2}: gaps sigma(-2) - 0, 0.5 - 0.5, sigma(2) - 1 = -sigma(-2)
      >>> round(float(lcce(o, y, n_clusters=3, init="quantile")), 4)  # (2/3) sigma(-2)**2
      0.0095
    """
    o = V.check_logits(logits, "logits")
    y = V.check_labels(labels, "labels")
    n = o.shape[0]
    V.check_same_length(n, labels=y)
    V.check_positive_int(n_bins, "n_bins")
    p = jax.nn.sigmoid(o) if probs is None else V.check_probs(probs, "probs")
    V.check_same_length(n, probs=p)
    w = V.check_weights(weights, n)
    V.check_positive_int(n_clusters, "n_clusters", maximum=n)
    V.check_positive_int(n_restarts, "n_restarts")
    V.check_choice(init, "init", ("random", "quantile", "optimal"))
    if isinstance(norm, tuple | list):
        if not norm:
            raise ValueError("`norm` must name at least one norm")
        for nm in norm:
            V.check_choice(nm, "norm", GAP_NORMS)
        norm = tuple(norm)
    else:
        V.check_choice(norm, "norm", GAP_NORMS)
    if (init == "random" or subsample is not None) and key is None:
        raise ValueError("`key` is required for init='random' or subsample (or use init='quantile')")
    if subsample is not None:
        V.check_positive_int(subsample, "subsample")
    return _lcce_core(o, y, p, w, key, n_clusters=n_clusters, n_restarts=n_restarts, init=init, norm=norm,
                      subsample=subsample, exact=exact, n_bins=n_bins)


@functools.partial(jax.jit, static_argnames=("n_clusters", "n_restarts", "init", "norm", "subsample", "exact",
                                             "n_bins"))
def _lcce_core(o: jax.Array, y: jax.Array, p: jax.Array, w: jax.Array | None, key: jax.Array | None, *,
               n_clusters: int, n_restarts: int, init: str, norm: str | tuple[str, ...], subsample: int | None,
               exact: bool, n_bins: int) -> jax.Array:
    """The compiled body of :func:`lcce` (one executable per static configuration and input
    shapes: eager calls after the first compile nothing; inside a user's jit it inlines).
    A tuple ``norm`` gives one value per norm from the same clusters."""
    norms = norm if isinstance(norm, tuple) else (norm,)

    def gaps(value):  # value(nm) -> scalar gap for one norm; stacked when several norms are asked
        return jnp.stack([value(nm) for nm in norms]) if isinstance(norm, tuple) else value(norm)

    n = o.shape[0]
    K = n_clusters
    nb = n_bins if init != "optimal" else min(n_bins, 512)
    hist = histogram_1d(o, n_bins=nb, weights=w, probs=p, labels=y)
    # bin means are non-decreasing: cluster sums of (v, v p, v y) are prefix-sum differences
    prefix = prefix_sums(jnp.stack([hist.weight, hist.sum_p, hist.sum_y], axis=1))  # type: ignore[list-item]

    def centroids(k):
        if subsample is None:
            return kmeans_hist(hist, n_clusters=K, key=k, init=init)
        ks, k = jax.random.split(k)
        idx = jax.random.randint(ks, (subsample,), 0, n)
        sub_w = None if w is None else w[idx]
        return kmeans_1d(o[idx], n_clusters=K, key=k, init=init, weights=sub_w, exact=False).centroids

    def one(k):
        c = centroids(k)
        if exact and subsample is None:
            v = jnp.ones_like(o) if w is None else w

            def polish(c):
                ids = assign_1d(o, 0.5 * (c[1:] + c[:-1]))
                s = deterministic_segment_sum(jnp.stack([v, v * o], axis=1), ids, K)
                return jnp.sort(jnp.where(s[:, 0] > 0, s[:, 1] / jnp.where(s[:, 0] > 0, s[:, 0], 1.0), c))

            c = iterate_to_fixed_point(polish, c, 100)
        th = 0.5 * (c[1:] + c[:-1])
        if exact:
            ids = assign_1d(o, th)
            return gaps(lambda nm: hard_gap(p, y, w, ids, K, nm))
        sums = interval_sums(hist.mean, prefix, th)  # each bin joins the cluster of its mean
        return gaps(lambda nm: _gap(sums[:, 0], sums[:, 1], sums[:, 2], nm))

    if init != "random" and subsample is None:
        return one(jax.random.PRNGKey(0))
    if init != "random":
        return one(key)
    assert key is not None  # checked above for init='random'
    keys = jax.random.split(key, n_restarts)
    return jnp.mean(jnp.stack([one(k) for k in keys]) if exact else jax.vmap(one)(keys), axis=0)


def lcce_random(probs: jax.Array, labels: jax.Array, *, key: jax.Array, n_groups: int = 4,
                weights: jax.Array | None = None) -> jax.Array:
    r"""Calibration error on a uniformly random partition, absolute gaps.

    .. math:: \mathrm{LCCE}_{\mathrm{rand}} = \sum_k w_k |\mu_k - \pi_k|

    App. C of "Calibration is Grouping" (VR-SAG; anonymous authors, under review).
    A control: random groups carry no information about where the model is miscalibrated.
    Each row joins one of ``n_groups`` groups uniformly at random (drawn from ``key``).

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) labels in {0, 1}.
      key: a JAX PRNG key that draws the partition (required; may be traced).
      n_groups: number of random groups K, an int in [1, n] (static under ``jit``).
      weights: optional (n,) non-negative row weights with a positive sum.

    Returns:
      A scalar array in [0, 1]; groups that receive no row contribute nothing. Called eagerly,
      invalid input (NaN, a probability outside [0, 1], a label other than 0/1, a negative
      weight, ``n_groups`` > n) raises ``ValueError`` naming the argument; under ``jit`` /
      ``vmap`` / ``grad``, where values cannot raise, the same checks make the result NaN.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax.metrics import lcce_random
      >>> p = jnp.array([0.1, 0.3, 1.0, 1.0]); y = jnp.array([0.0, 0.0, 1.0, 1.0])
      >>> # p >= y on every row, so every group's gap is >= 0 and they add up to mean(p - y) = 0.1,
      >>> # whatever the draw
      >>> round(float(lcce_random(p, y, key=jax.random.PRNGKey(0), n_groups=2)), 4)
      0.1
    """
    p, y, w = check_probs_labels(probs, labels, weights)
    V.check_positive_int(n_groups, "n_groups", maximum=p.shape[0])
    g = random_groups(key, p.shape[0], n_groups=n_groups)
    return hard_gap(p, y, w, g, n_groups, "l1")


def _field_ids(field, n, n_groups):
    if n_groups is None:
        if not V.is_concrete(field):
            raise ValueError("`n_groups` (static) is required when `field` is traced")
        field, n_groups = V.inferred_levels(field, "field", n)
    return V.check_hard_groups(field, n, n_groups, "field"), n_groups


def field_ece(probs: jax.Array, labels: jax.Array, field: jax.Array, *, n_groups: int | None = None,
              weights: jax.Array | None = None) -> jax.Array:
    r"""Field-level ECE: the absolute calibration gap per value of a categorical field.

    .. math:: \mathrm{Field\text{-}ECE} = \frac{1}{|D|}\sum_{z}\Bigl|\sum_{i: z_i = z}(y_i - p_i)\Bigr|
              = \sum_z w_z |\mu_z - \pi_z|

    Pan, Ao, Tang, Lu, Liu, Xiao and He, "Field-aware Calibration" (WWW 2020), eq. 5; it is the
    LCCE_field of "Calibration is Grouping" (VR-SAG; anonymous authors, under review),
    Appendix C.  With weights, the sums and :math:`|D|` are weighted.

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) labels in {0, 1}.
      field: (n,) integer category codes :math:`z_i` in ``[0, n_groups)`` (an integer-valued
        float array is accepted).
      n_groups: number of categories (static under ``jit``); defaults to ``max(field) + 1``
        on concrete input and is required when ``field`` is traced.
      weights: optional (n,) non-negative row weights with a positive sum.

    Returns:
      A scalar array in [0, 1]; categories with no row contribute nothing. Called eagerly,
      invalid input (NaN, a probability outside [0, 1], a label other than 0/1, a code outside
      ``[0, n_groups)`` or not an integer, a negative weight) raises ``ValueError`` naming the
      argument; under ``jit`` / ``vmap`` / ``grad``, where values cannot raise, the same checks
      make the result NaN (a missing ``n_groups`` raises while tracing).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax.metrics import field_ece
      >>> p = jnp.array([0.1, 0.2, 0.8, 0.9]); y = jnp.array([0.0, 1.0, 1.0, 1.0])
      >>> z = jnp.array([0, 0, 1, 1])
      >>> round(float(field_ece(p, y, z)), 4)  # (|1 - 0.3| + |2 - 1.7|) / 4
      0.25
      >>> round(float(jax.jit(lambda p, y, z: field_ece(p, y, z, n_groups=2))(p, y, z)), 4)
      0.25
    """
    p, y, w = check_probs_labels(probs, labels, weights)
    g, K = _field_ids(field, p.shape[0], n_groups)
    return hard_gap(p, y, w, g, K, "l1")


def field_rce(probs: jax.Array, labels: jax.Array, field: jax.Array, *, eps: float = 0.01,
              n_groups: int | None = None, weights: jax.Array | None = None) -> jax.Array:
    r"""Field-level relative calibration error.

    .. math:: \mathrm{Field\text{-}RCE} = \frac{1}{|D|}\sum_z N_z
              \frac{\bigl|\sum_{i:z_i=z}(y_i - p_i)\bigr|}{\sum_{i:z_i=z}(y_i + \epsilon)}

    Pan, Ao, Tang, Lu, Liu, Xiao and He, "Field-aware Calibration" (WWW 2020), eq. 6.  :math:`N_z` is
    the number of rows of category z; each category's gap is taken relative to its number of
    clicks.  :math:`\epsilon` keeps categories without clicks finite (the paper suggests 0.01
    and warns against much smaller values).  With weights, :math:`N_z` and the sums are
    weighted.

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) labels in {0, 1}.
      field: (n,) integer category codes :math:`z_i` in ``[0, n_groups)``.
      eps: :math:`\epsilon`, a positive Python float (a static value: it is checked in Python,
        so it cannot be traced).
      n_groups: number of categories (static under ``jit``); defaults to ``max(field) + 1``
        on concrete input and is required when ``field`` is traced.
      weights: optional (n,) non-negative row weights with a positive sum.

    Returns:
      A non-negative scalar array (it can exceed 1: a category with few clicks and a large
      gap weighs in relative terms). Called eagerly, invalid input (NaN, a probability outside
      [0, 1], a label other than 0/1, a code outside ``[0, n_groups)``, a negative weight,
      ``eps <= 0``) raises ``ValueError`` naming the argument; under ``jit`` / ``vmap`` /
      ``grad``, where values cannot raise, the same checks make the result NaN (a missing
      ``n_groups`` or a bad ``eps`` raises while tracing).

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import field_rce
      >>> p = jnp.array([0.1, 0.2, 0.8, 0.9]); y = jnp.array([0.0, 1.0, 1.0, 1.0])
      >>> z = jnp.array([0, 0, 1, 1])
      >>> round(float(field_rce(p, y, z)), 4)  # (2 * 0.7 / 1.02 + 2 * 0.3 / 2.02) / 4
      0.4174
    """
    p, y, w = check_probs_labels(probs, labels, weights)
    # finite too: an infinite eps gave Field-RCE 0 for any model; text and booleans were numbers
    V.check_number_option(eps, "eps", "a finite number > 0", lambda v: 0.0 < v < np.inf)
    g, K = _field_ids(field, p.shape[0], n_groups)
    return _field_rce_core(p, y, w, g, float(eps), K)  # a float: the int 2**40 overflowed int32


def bias(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None) -> jax.Array:
    r"""Relative global bias :math:`\bar p / \bar y - 1`.

    Appendix E of "Calibration is Grouping" (VR-SAG; anonymous authors, under review).
    The paper prints the ratio :math:`\bar p/\bar y` (PCOC) but its tables only make sense as
    the deviation from 1: we report the deviation (0 = unbiased, > 0 over-estimation).

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) labels in {0, 1}, at least one of them 1 (with positive weight).
      weights: optional (n,) non-negative row weights with a positive sum (weighted means
        :math:`\bar p`, :math:`\bar y`).

    Returns:
      A scalar array in :math:`[-1, \infty)`. Called eagerly, invalid input (NaN, a
      probability outside [0, 1], a label other than 0/1, a negative weight, no positive
      label) raises ``ValueError`` naming the argument; under ``jit`` / ``vmap`` / ``grad``,
      where values cannot raise, the same checks (no positive label included) make the result
      NaN.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax.metrics import bias
      >>> p = jnp.array([0.1, 0.2, 0.8, 0.9]); y = jnp.array([0.0, 1.0, 1.0, 1.0])
      >>> round(float(bias(p, y)), 4)  # 0.5 / 0.75 - 1: under-estimation by a third
      -0.3333
      >>> bool(jnp.isnan(jax.jit(bias)(p, jnp.zeros(4))))  # no click: NaN under jit
      True
    """
    p, y, w = check_probs_labels(probs, labels, weights)
    my = weighted_mean(y, w)
    if V.is_concrete(my) and float(my) <= 0.0:
        raise ValueError("`labels` has no positive label: bias p̄/ȳ - 1 is undefined")
    flag(my <= 0.0)
    mp = weighted_mean(p, w)
    return jnp.where(my > 0, mp / jnp.where(my > 0, my, 1.0) - 1.0, jnp.inf)


def abs_bias(probs: jax.Array, labels: jax.Array, field: jax.Array, *, n_groups: int | None = None,
             weights: jax.Array | None = None) -> jax.Array:
    r"""Field-wise absolute bias, as a deviation from 1.

    .. math:: \mathrm{abs\_bias} = \sum_k \tilde w_k \,\Bigl|\frac{\bar p_k}{\bar y_k} - 1\Bigr|

    Appendix E of "Calibration is Grouping" (VR-SAG; anonymous authors, under review)
    (the paper prints :math:`|\bar p_k/\bar y_k|`; see :func:`bias`).  Groups with no positive
    label have an undefined ratio: they are left out and the masses :math:`\tilde w_k` are
    renormalised over the groups that have clicks.  Returns 0 if no group has a click.

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) labels in {0, 1}.
      field: (n,) integer category codes in ``[0, n_groups)`` (the groups k).
      n_groups: number of categories (static under ``jit``); defaults to ``max(field) + 1``
        on concrete input and is required when ``field`` is traced.
      weights: optional (n,) non-negative row weights with a positive sum.

    Returns:
      A non-negative scalar array. Called eagerly, invalid input (NaN, a probability outside
      [0, 1], a label other than 0/1, a code outside ``[0, n_groups)``, a negative weight)
      raises ``ValueError`` naming the argument; under ``jit`` / ``vmap`` / ``grad``, where
      values cannot raise, the same checks make the result NaN (a missing ``n_groups`` raises
      while tracing).

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import abs_bias
      >>> p = jnp.array([0.1, 0.2, 0.8, 0.9]); y = jnp.array([0.0, 1.0, 1.0, 1.0])
      >>> z = jnp.array([0, 0, 1, 1])  # ratios 0.15 / 0.5 = 0.3 and 0.85 / 1 = 0.85
      >>> round(float(abs_bias(p, y, z)), 4)  # (|0.3 - 1| + |0.85 - 1|) / 2
      0.425
    """
    p, y, w = check_probs_labels(probs, labels, weights)
    g, K = _field_ids(field, p.shape[0], n_groups)
    return _abs_bias_core(p, y, w, g, K)
