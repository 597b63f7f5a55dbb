r"""Calibration metrics (SPEC §4): label-based and oracle-based.

All functions are pure and jit/vmap-able (sizes that shape arrays are static keyword
arguments).  On concrete inputs they validate eagerly and raise ``ValueError`` naming the
argument; under tracing value checks cannot raise and every division is guarded so that
empty bins/groups contribute 0 and no NaN appears.

Label-based ("insufficient information") metrics compare scores with 0/1 labels; oracle
metrics ("sufficient information", seeds/000 Appendix C) compare them with the true
probabilities π, available only in simulation.

Conventions that depart from a printed formula are stated in the function's docstring
(``bias``/``abs_bias`` report the deviation from 1; ``oracle_kl`` is the full Bernoulli KL;
``oracle_alpha_divergence`` uses the Amari/Cichocki α-family).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax import _validation as V
from calib_jax._ranks import average_ranks, rank_within_groups, tie_bounds
from calib_jax._sorting import argsort
from calib_jax.groupstats import (
    GroupStats,
    _check_groups,
    _columns,
    _raw_stats,
    _safe_div,
    gap_sums,
    summarize,
)
from calib_jax.partitions import (
    _iterate_to_fixed_point,
    _prefix,
    assign_1d,
    histogram_1d,
    interval_sums,
    kmeans_1d,
    kmeans_hist,
    quantile_bins,
    random_groups,
    uniform_bins,
)

__all__ = [
    "brier",
    "mse",
    "mae",
    "nll",
    "nll_logits",
    "ece",
    "gce",
    "lcce",
    "lcce_random",
    "field_ece",
    "field_rce",
    "bias",
    "abs_bias",
    "auc",
    "accuracy",
    "acc_diff",
    "auc_diff",
    "ece_at_n",
    "rdece_at_n",
    "fit_logit_bias",
    "calibrated_log_loss",
    "calibrated_quadratic_loss",
    "oracle_brier",
    "oracle_mae",
    "oracle_kl",
    "oracle_alpha_divergence",
    "oracle_chebyshev",
    "pearson",
    "spearman",
    "gap_norm",
]

_NORMS = ("l1", "l2", "max")


# ----------------------------------------------------------------------------- helpers
def _wmean(x: jax.Array, w: jax.Array | None) -> jax.Array:
    if w is None:
        return jnp.mean(x)
    return jnp.sum(w * x) / jnp.sum(w)


def _pl(probs, labels, weights):
    p = V.check_probs(probs, "probs")
    y = V.check_labels(labels, "labels")
    V.check_same_length(p.shape[0], labels=y)
    w = V.check_weights(weights, p.shape[0])
    return p, y, w


def _ol(logits, labels, weights):
    o = V.check_logits(logits, "logits")
    y = V.check_labels(labels, "labels")
    V.check_same_length(o.shape[0], labels=y)
    w = V.check_weights(weights, o.shape[0])
    return o, y, w


def _po(probs, oracle, weights):
    p = V.check_probs(probs, "probs")
    t = V.check_oracle(oracle, "oracle")
    V.check_same_length(p.shape[0], oracle=t)
    w = V.check_weights(weights, p.shape[0])
    return p, t, w


def _eps(dtype, eps: float | None) -> float:
    if eps is not None:
        return eps
    return 1e-12 if jnp.dtype(dtype) == jnp.float64 else 1e-7


def gap_norm(stats: GroupStats, *, norm: str = "l2") -> jax.Array:
    r"""Aggregate per-group calibration gaps :math:`\mu_k - \pi_k` of a partition.

    * ``"l2"``: :math:`\sum_k w_k (\mu_k-\pi_k)^2` — GCE (seeds/000 eq. 7), LCCE (eq. 12) and
      the squared ECE; no square root is taken.
    * ``"l1"``: :math:`\sum_k w_k |\mu_k-\pi_k|` — ECE (eq. 2), Field-ECE (seeds/001 eq. 5).
    * ``"max"``: :math:`\max_{k: w_k>0} |\mu_k-\pi_k|` — MCE.
    """
    return _gap(stats.weight, stats.sum_p, stats.sum_y, norm)


def _gap(weight: jax.Array, sum_p: jax.Array, sum_y: jax.Array, norm: str) -> jax.Array:
    mass = weight / jnp.sum(weight)
    gap = _safe_div(sum_p - sum_y, weight)
    if norm == "l2":
        return jnp.sum(mass * gap * gap)
    if norm == "l1":
        return jnp.sum(mass * jnp.abs(gap))
    return jnp.max(jnp.where(weight > 0, jnp.abs(gap), 0.0))


def _hard_gap(p, y, w, ids, K, norm):
    return _gap(*gap_sums(p, y, ids, K, w), norm)


# --------------------------------------------------------------------- pointwise scores
def brier(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None) -> jax.Array:
    r"""Brier score :math:`\frac{1}{n}\sum_i (y_i - p_i)^2` (weighted mean if ``weights``)."""
    p, y, w = _pl(probs, labels, weights)
    return _wmean((y - p) ** 2, w)


def mse(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None) -> jax.Array:
    """Mean squared error against labels (seeds/000 App. C "MSE"); identical to :func:`brier`."""
    return brier(probs, labels, weights=weights)


def mae(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None) -> jax.Array:
    r"""Mean absolute error :math:`\frac{1}{n}\sum_i |y_i - p_i|` (seeds/000 App. C)."""
    p, y, w = _pl(probs, labels, weights)
    return _wmean(jnp.abs(y - p), w)


def nll(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None,
        eps: float | None = None) -> jax.Array:
    r"""Negative log-likelihood (log loss, seeds/000 eq. 1) from probabilities.

    .. math:: -\frac{1}{n}\sum_i y_i\log p_i + (1-y_i)\log(1-p_i)

    Probabilities are clipped to ``[eps, 1 - eps]`` (default 1e-7 in float32, 1e-12 in
    float64) so a confident wrong prediction costs a large finite amount.  Use
    :func:`nll_logits` for the exact value from logits.
    """
    p, y, w = _pl(probs, labels, weights)
    e = _eps(p.dtype, eps)
    pc = jnp.clip(p, e, 1.0 - e)
    return _wmean(-(y * jnp.log(pc) + (1.0 - y) * jnp.log1p(-pc)), w)


def nll_logits(logits: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None) -> jax.Array:
    r"""Exact log loss from logits: :math:`-\frac1n\sum_i y_i\log\sigma(o_i) + (1-y_i)\log\sigma(-o_i)`.

    Computed with ``log_sigmoid`` (never ``log(1 - sigmoid)``), exact for any finite logit.
    """
    o, y, w = _ol(logits, labels, weights)
    return _wmean(-(y * jax.nn.log_sigmoid(o) + (1.0 - y) * jax.nn.log_sigmoid(-o)), w)


# ------------------------------------------------------------------------ binned metrics
def ece(probs: jax.Array, labels: jax.Array, *, n_bins: int = 15, strategy: str = "uniform",
        norm: str = "l1", weights: jax.Array | None = None) -> jax.Array:
    r"""Expected calibration error over probability bins (seeds/000 eq. 2).

    .. math:: \mathrm{ECE} = \sum_{m=1}^{M} \frac{|B_m|}{n}\,\bigl|\mathrm{acc}(B_m) - \mathrm{conf}(B_m)\bigr|

    Args:
      strategy: ``"uniform"`` — equal-width bins :math:`[m/M,(m+1)/M)`, p = 1 in the last
        bin; ``"quantile"`` — equal-mass bins (ECE⁺ of Appendix C; ties kept together, see
        :func:`calib_jax.partitions.quantile_bins`).
      norm: ``"l1"`` (ECE), ``"l2"`` (squared ECE :math:`\sum w_m\,\mathrm{gap}_m^2`, no
        root), ``"max"`` (MCE: largest gap over non-empty bins).

    Empty bins contribute nothing.
    """
    p, y, w = _pl(probs, labels, weights)
    V.check_positive_int(n_bins, "n_bins")
    V.check_choice(strategy, "strategy", ("uniform", "quantile"))
    V.check_choice(norm, "norm", _NORMS)
    if strategy == "uniform":
        ids = uniform_bins(p, n_bins=n_bins)
    else:
        ids = quantile_bins(p, n_bins=n_bins, weights=w)
    return _hard_gap(p, y, w, ids, n_bins, norm)


def gce(probs: jax.Array, labels: jax.Array, groups: jax.Array, *, n_groups: int | None = None,
        weights: jax.Array | None = None, norm: str = "l2") -> jax.Array:
    r"""Grouping calibration error for any hard or soft partition (seeds/000 eq. 7).

    .. math:: \mathrm{GCE} = \sum_k w_k (\mu_k - \pi_k)^2

    With singleton groups it equals the Brier score; with probability bins it is the
    squared ECE.  ``norm="l1"`` gives absolute gaps (Field-ECE style).
    """
    p, y, w = _pl(probs, labels, weights)
    V.check_choice(norm, "norm", _NORMS)
    g = _check_groups(groups, p.shape[0], n_groups)
    if g.ndim == 1:
        return _hard_gap(p, y, w, g, n_groups, norm)
    return gap_norm(_raw_stats(_columns(p, y, w), g, n_groups), norm=norm)


def lcce(logits: jax.Array, labels: jax.Array, *, n_clusters: int = 4, n_restarts: int = 4,
         key: jax.Array | None = None, init: str = "random", norm: str = "l2",
         probs: jax.Array | None = None, subsample: int | None = None,
         weights: jax.Array | None = None, exact: bool = False, n_bins: int = 4096) -> jax.Array:
    r"""Logit-cluster calibration error (seeds/000 eq. 12, §2.5).

    K-means with ``n_clusters`` clusters on the 1-D logits gives a fixed partition
    :math:`\{M_j\}`; LCCE is the GCE on it:

    .. math:: \mathrm{LCCE}_K = \sum_j w_j (\mu_j - \pi_j)^2

    with :math:`\mu_j` the mean of :math:`\hat p_i = \sigma(o_i)` (or of ``probs`` when given —
    e.g. calibrated outputs evaluated on the backbone's logit clusters) and :math:`\pi_j`
    the click rate in cluster j.

    Computation.  One pass builds an ``n_bins``-bin histogram of the logits carrying, per bin
    and label, the weight, the logit moments and the score sums.  By default (``exact=False``)
    k-means runs on the histogram (:func:`calib_jax.partitions.kmeans_hist`) and each bin
    joins the cluster of its mean, so every restart costs O(n_bins K) and the whole metric
    one pass over the data; cluster boundaries are resolved to one bin width
    (range/4096 ≈ 0.003 logits for a typical CTR model).  With ``exact=True`` the centroids
    are polished by Lloyd steps on the raw logits and every point is assigned to its
    nearest centroid (a few passes per restart).

    Args:
      init: ``"random"`` — the paper's form: k-means++ seeding, the metric averaged over
        ``n_restarts`` runs (keys split from ``key``); ``"quantile"`` or ``"optimal"`` —
        deterministic, seed-free variants (one run; ``n_restarts`` is ignored).
        See :func:`calib_jax.partitions.kmeans_1d`.
      subsample: estimate centroids from this many points drawn uniformly with replacement
        (Appendix H.1, Table 6); every point is then assigned to its nearest centroid.
        Needs ``key``.
      norm: ``"l2"`` (eq. 12), ``"l1"`` or ``"max"``.
    """
    o = V.check_logits(logits, "logits")
    y = V.check_labels(labels, "labels")
    n = o.shape[0]
    V.check_same_length(n, labels=y)
    p = jax.nn.sigmoid(o) if probs is None else V.check_probs(probs, "probs")
    V.check_same_length(n, probs=p)
    w = V.check_weights(weights, n)
    V.check_positive_int(n_clusters, "n_clusters", maximum=n)
    V.check_positive_int(n_restarts, "n_restarts")
    V.check_choice(init, "init", ("random", "quantile", "optimal"))
    V.check_choice(norm, "norm", _NORMS)
    if (init == "random" or subsample is not None) and key is None:
        raise ValueError("`key` is required for init='random' or subsample (or use init='quantile')")
    if subsample is not None:
        V.check_positive_int(subsample, "subsample")
    K = n_clusters
    nb = n_bins if init != "optimal" else min(n_bins, 512)
    hist = histogram_1d(o, n_bins=nb, weights=w, probs=p, labels=y)
    # bin means are non-decreasing: cluster sums of (v, v p, v y) are prefix-sum differences
    prefix = _prefix(jnp.stack([hist.weight, hist.sum_p, hist.sum_y], axis=1))  # type: ignore[list-item]

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
                s = jax.ops.segment_sum(jnp.stack([v, v * o], axis=1), ids, num_segments=K)
                return jnp.sort(jnp.where(s[:, 0] > 0, s[:, 1] / jnp.where(s[:, 0] > 0, s[:, 0], 1.0), c))

            c = _iterate_to_fixed_point(polish, c, 100)
        th = 0.5 * (c[1:] + c[:-1])
        if exact:
            return _hard_gap(p, y, w, assign_1d(o, th), K, norm)
        sums = interval_sums(hist.mean, prefix, th)  # each bin joins the cluster of its mean
        return _gap(sums[:, 0], sums[:, 1], sums[:, 2], norm)

    if init != "random" and subsample is None:
        return one(jax.random.PRNGKey(0))
    if init != "random":
        return one(key)
    assert key is not None  # checked above for init='random'
    keys = jax.random.split(key, n_restarts)
    return jnp.mean(jnp.stack([one(k) for k in keys]) if exact else jax.vmap(one)(keys))


def lcce_random(probs: jax.Array, labels: jax.Array, *, key: jax.Array, n_groups: int = 4,
                weights: jax.Array | None = None) -> jax.Array:
    r"""Calibration error on a uniformly random partition, absolute gaps (seeds/000 App. C).

    .. math:: \mathrm{LCCE}_{\mathrm{rand}} = \sum_k w_k |\mu_k - \pi_k|

    A control: random groups carry no information about where the model is miscalibrated.
    """
    p, y, w = _pl(probs, labels, weights)
    V.check_positive_int(n_groups, "n_groups", maximum=p.shape[0])
    g = random_groups(key, p.shape[0], n_groups=n_groups)
    return _hard_gap(p, y, w, g, n_groups, "l1")


def _field_ids(field, n, n_groups):
    arr = field if isinstance(field, jax.Array) else jnp.asarray(field)
    if n_groups is None:
        if not V.is_concrete(arr):
            raise ValueError("`n_groups` (static) is required when `field` is traced")
        n_groups = int(np.asarray(jax.device_get(arr)).max()) + 1 if arr.size else 1
    return V.check_hard_groups(arr, n, n_groups, "field"), n_groups


def field_ece(probs: jax.Array, labels: jax.Array, field: jax.Array, *, n_groups: int | None = None,
              weights: jax.Array | None = None) -> jax.Array:
    r"""Field-level ECE (seeds/001 eq. 5) = LCCE_field of seeds/000 Appendix C.

    .. math:: \mathrm{Field\text{-}ECE} = \frac{1}{|D|}\sum_{z}\Bigl|\sum_{i: z_i = z}(y_i - p_i)\Bigr|
              = \sum_z w_z |\mu_z - \pi_z|

    ``field`` holds integer category codes in ``[0, n_groups)``; ``n_groups`` defaults to
    ``max(field) + 1`` on concrete input (pass it explicitly under ``jit``).
    """
    p, y, w = _pl(probs, labels, weights)
    g, K = _field_ids(field, p.shape[0], n_groups)
    return _hard_gap(p, y, w, g, K, "l1")


def field_rce(probs: jax.Array, labels: jax.Array, field: jax.Array, *, eps: float = 0.01,
              n_groups: int | None = None, weights: jax.Array | None = None) -> jax.Array:
    r"""Field-level relative calibration error (seeds/001 eq. 6).

    .. math:: \mathrm{Field\text{-}RCE} = \frac{1}{|D|}\sum_z N_z
              \frac{\bigl|\sum_{i:z_i=z}(y_i - p_i)\bigr|}{\sum_{i:z_i=z}(y_i + \epsilon)}

    :math:`\epsilon` keeps categories without clicks finite (the paper suggests 0.01 and
    warns against much smaller values).  With weights, :math:`N_z` and the sums are weighted.
    """
    p, y, w = _pl(probs, labels, weights)
    if not eps > 0:
        raise ValueError(f"`eps` must be positive, got {eps}")
    g, K = _field_ids(field, p.shape[0], n_groups)
    s = _raw_stats(_columns(p, y, w), g, K)
    total = jnp.sum(s.weight)
    rel = _safe_div(jnp.abs(s.sum_y - s.sum_p), s.sum_y + eps * s.weight)
    return jnp.sum(s.weight * rel) / total


def bias(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None) -> jax.Array:
    r"""Relative global bias :math:`\bar p / \bar y - 1` (seeds/000 Appendix E).

    The paper prints the ratio :math:`\bar p/\bar y` (PCOC) but its tables only make sense as
    the deviation from 1: we report the deviation (0 = unbiased, > 0 over-estimation).
    Raises if there is no positive label (under ``jit`` that case returns ``inf``).
    """
    p, y, w = _pl(probs, labels, weights)
    my = _wmean(y, w)
    if V.is_concrete(my) and float(my) <= 0.0:
        raise ValueError("`labels` has no positive label: bias p̄/ȳ - 1 is undefined")
    mp = _wmean(p, w)
    return jnp.where(my > 0, mp / jnp.where(my > 0, my, 1.0) - 1.0, jnp.inf)


def abs_bias(probs: jax.Array, labels: jax.Array, field: jax.Array, *, n_groups: int | None = None,
             weights: jax.Array | None = None) -> jax.Array:
    r"""Field-wise absolute bias (seeds/000 Appendix E), as a deviation from 1.

    .. math:: \mathrm{abs\_bias} = \sum_k \tilde w_k \,\Bigl|\frac{\bar p_k}{\bar y_k} - 1\Bigr|

    (the paper prints :math:`|\bar p_k/\bar y_k|`; see :func:`bias`).  Groups with no positive
    label have an undefined ratio: they are left out and the masses :math:`\tilde w_k` are
    renormalised over the groups that have clicks.  Returns 0 if no group has a click.
    """
    p, y, w = _pl(probs, labels, weights)
    g, K = _field_ids(field, p.shape[0], n_groups)
    s = _raw_stats(_columns(p, y, w), g, K)
    ok = s.sum_y > 0
    ratio = _safe_div(s.sum_p, s.sum_y)
    mass = jnp.where(ok, s.weight, 0.0)
    return _safe_div(jnp.sum(mass * jnp.abs(ratio - 1.0)), jnp.sum(mass))


# ------------------------------------------------------------------------------ ranking
def auc(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None) -> jax.Array:
    r"""Exact (weighted) area under the ROC curve; tied scores count one half.

    .. math:: \mathrm{AUC} = \frac{\sum_{i:y_i=1}\sum_{j:y_j=0} v_i v_j
              \bigl([s_i > s_j] + \tfrac12[s_i = s_j]\bigr)}{\sum_{i:y_i=1} v_i \sum_{j:y_j=0} v_j}

    One sort; each positive is credited with the weight of negatives strictly below it plus
    half of those tied with it (prefix sums over the sorted scores).  Accepts any real
    scores (probabilities or logits).  Raises if only one class is present (under ``jit``
    that case returns 0.5).
    """
    s = V.as_float_array(probs, "probs")
    y = V.check_labels(labels, "labels")
    n = s.shape[0]
    V.check_same_length(n, labels=y)
    w = V.check_weights(weights, n)
    v = jnp.ones_like(s) if w is None else w
    if V.is_concrete(y):
        yy = np.asarray(jax.device_get(y))
        if yy.min() == yy.max():
            raise ValueError("`labels` contains a single class: AUC is undefined")
    order = argsort(s)
    first, last = tie_bounds(s[order])
    ys, vs = y[order], v[order]
    pos, neg = vs * ys, vs * (1.0 - ys)
    cneg = jnp.cumsum(neg)
    below = jnp.where(first > 0, cneg[jnp.maximum(first - 1, 0)], 0.0)  # negatives strictly below
    tied = cneg[last] - below  # negatives tied with this score
    P, N = jnp.sum(pos), cneg[-1]
    num = jnp.sum(pos * (below + 0.5 * tied))
    ok = (P > 0) & (N > 0)
    return jnp.where(ok, num / jnp.where(ok, P * N, 1.0), 0.5)


def accuracy(probs: jax.Array, labels: jax.Array, *, threshold: float = 0.5,
             weights: jax.Array | None = None) -> jax.Array:
    """Accuracy of the decision ``p > threshold`` (strict, as scikit-learn's ``predict``)."""
    p, y, w = _pl(probs, labels, weights)
    return _wmean(((p > threshold).astype(p.dtype) == y).astype(p.dtype), w)


def acc_diff(probs: jax.Array, base_probs: jax.Array, labels: jax.Array, *,
             weights: jax.Array | None = None) -> jax.Array:
    r"""Relative accuracy change (seeds/000 App. E.1).

    .. math:: \mathrm{AccDiff} = (\mathrm{Acc}(p) - \mathrm{Acc}(p_0)) / \mathrm{Acc}(p_0)
    """
    a = accuracy(probs, labels, weights=weights)
    a0 = accuracy(base_probs, labels, weights=weights)
    return _safe_div(a - a0, a0)


def auc_diff(probs: jax.Array, base_probs: jax.Array, labels: jax.Array, *,
             weights: jax.Array | None = None) -> jax.Array:
    r"""Relative AUC change (seeds/000 App. E.1): :math:`(\mathrm{AUC}(p) - \mathrm{AUC}(p_0))/\mathrm{AUC}(p_0)`."""
    a = auc(probs, labels, weights=weights)
    a0 = auc(base_probs, labels, weights=weights)
    return _safe_div(a - a0, a0)


# ----------------------------------------------------------------------------- top-N
def _topn_ranks(probs, users, scores, ranks):
    if ranks is not None:
        return jnp.asarray(ranks, jnp.int32)
    if users is None:
        raise ValueError("pass either `ranks` or `users` (to rank items within each user)")
    s = probs if scores is None else jnp.asarray(scores, probs.dtype)
    return rank_within_groups(s, jnp.asarray(users))


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


# ------------------------------------------------------------- calibrated loss metrics
def fit_logit_bias(logits: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None,
                   n_iter: int = 40) -> jax.Array:
    r"""The logit shift c* minimising the log loss of :math:`\sigma(o_i + c)` (seeds/002 eq. 6).

    The objective is convex in c with derivative :math:`\sum_i v_i(\sigma(o_i + c) - y_i)`,
    so c* solves :math:`\sum_i v_i \sigma(o_i + c) = \sum_i v_i y_i` (the bias-adjusted
    predictions are calibrated in the mean on this split).  Solved by a safeguarded Newton
    iteration (steps clipped to ±4, fixed ``n_iter``: jit/vmap-able).  If all labels are 0
    (1) the optimum is at -inf (+inf); the iteration then stops at a large finite shift.
    """
    o = V.check_logits(logits, "logits")
    y = V.check_labels(labels, "labels")
    v = jnp.ones_like(o) if weights is None else jnp.asarray(weights, o.dtype)
    target = jnp.sum(v * y)

    def step(_, c):
        q = jax.nn.sigmoid(o + c)
        g = jnp.sum(v * q) - target
        h = jnp.sum(v * q * (1.0 - q))
        d = jnp.where(h > 0, g / jnp.where(h > 0, h, 1.0), jnp.sign(g) * 4.0)
        return c - jnp.clip(d, -4.0, 4.0)

    return jax.lax.fori_loop(0, n_iter, step, jnp.zeros((), o.dtype))


def _split_mask(n, key, val_fraction, val_mask):
    if val_mask is not None:
        m = jnp.asarray(val_mask).astype(bool)
        if m.shape != (n,):
            raise ValueError(f"`val_mask` must have shape ({n},), got {m.shape}")
        if V.is_concrete(m):
            k = int(np.asarray(jax.device_get(m)).sum())
            if k == 0 or k == n:
                raise ValueError("`val_mask` must select a non-empty, proper subset")
        return m
    if key is None:
        raise ValueError("pass `val_mask` or a `key` to draw the test-validation split")
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"`val_fraction` must lie in (0, 1), got {val_fraction}")
    return jax.random.uniform(key, (n,)) < val_fraction


def calibrated_log_loss(logits: jax.Array, labels: jax.Array, *, key: jax.Array | None = None,
                        val_fraction: float = 0.5, val_mask: jax.Array | None = None,
                        weights: jax.Array | None = None) -> jax.Array:
    r"""Calibrated Log Loss (seeds/002 §3, Algorithm 1).

    Split the test data into a test-validation part :math:`D_v` (``val_mask``, or a random
    ``val_fraction`` drawn with ``key``) and the rest :math:`D_r`; fit one logit shift c* on
    :math:`D_v` (:func:`fit_logit_bias`) and return the log loss of :math:`\sigma(o_i + c^*)`
    on :math:`D_r`.  Removing the volatile global bias lowers the metric's variance across
    training runs.
    """
    o, y, w = _ol(logits, labels, weights)
    n = o.shape[0]
    m = _split_mask(n, key, val_fraction, val_mask).astype(o.dtype)
    v = jnp.ones_like(o) if w is None else w
    c = fit_logit_bias(o, y, weights=v * m)
    oc = o + c
    ll = -(y * jax.nn.log_sigmoid(oc) + (1.0 - y) * jax.nn.log_sigmoid(-oc))
    r = v * (1.0 - m)
    return jnp.sum(r * ll) / jnp.sum(r)


def calibrated_quadratic_loss(preds: jax.Array, targets: jax.Array, *, key: jax.Array | None = None,
                              val_fraction: float = 0.5, val_mask: jax.Array | None = None,
                              weights: jax.Array | None = None) -> jax.Array:
    r"""Calibrated Quadratic Loss (seeds/002 §3): fit an additive shift on the
    test-validation part, :math:`b^* = \overline{(t - \hat t)}_{D_v}`, and return
    :math:`\overline{(t_i - \hat t_i - b^*)^2}` on the rest.  Targets may be any real numbers.
    """
    f = V.as_float_array(preds, "preds")
    t = V.as_float_array(targets, "targets")
    n = f.shape[0]
    V.check_same_length(n, targets=t)
    w = V.check_weights(weights, n)
    m = _split_mask(n, key, val_fraction, val_mask).astype(f.dtype)
    v = jnp.ones_like(f) if w is None else w
    b = jnp.sum(v * m * (t - f)) / jnp.sum(v * m)
    r = v * (1.0 - m)
    return jnp.sum(r * (t - f - b) ** 2) / jnp.sum(r)


# ------------------------------------------------------------------------ oracle metrics
def oracle_brier(probs: jax.Array, oracle: jax.Array, *, weights: jax.Array | None = None) -> jax.Array:
    r"""Oracle Brier score :math:`\frac1n\sum_i(\pi_i - p_i)^2` against true probabilities (Table 1)."""
    p, t, w = _po(probs, oracle, weights)
    return _wmean((t - p) ** 2, w)


def oracle_mae(probs: jax.Array, oracle: jax.Array, *, weights: jax.Array | None = None) -> jax.Array:
    r"""Brier⁺ :math:`\frac1n\sum_i|\pi_i - p_i|` (seeds/000 Table 1 and App. C)."""
    p, t, w = _po(probs, oracle, weights)
    return _wmean(jnp.abs(t - p), w)


def oracle_kl(probs: jax.Array, oracle: jax.Array, *, weights: jax.Array | None = None,
              eps: float | None = None) -> jax.Array:
    r"""Mean Bernoulli KL divergence :math:`\mathrm{KL}(\pi_i \| p_i)`.

    .. math:: \frac1n\sum_i \pi_i\log\frac{\pi_i}{p_i} + (1-\pi_i)\log\frac{1-\pi_i}{1-p_i}

    seeds/000 App. C prints only the first half, which is not a divergence between the two
    Bernoulli laws (it can be negative); we use the full divergence (≥ 0, = 0 iff p = π).
    ``0 log 0 = 0``; p is clipped to ``[eps, 1-eps]``.
    """
    p, t, w = _po(probs, oracle, weights)
    e = _eps(p.dtype, eps)
    pc = jnp.clip(p, e, 1.0 - e)
    xlogy = jax.scipy.special.xlogy
    kl = xlogy(t, t) - t * jnp.log(pc) + xlogy(1.0 - t, 1.0 - t) - (1.0 - t) * jnp.log1p(-pc)
    return _wmean(jnp.maximum(kl, 0.0), w)


def oracle_alpha_divergence(probs: jax.Array, oracle: jax.Array, *, alpha: float = 0.5,
                            weights: jax.Array | None = None, eps: float | None = None) -> jax.Array:
    r"""Mean Amari α-divergence between Bernoulli(π_i) and Bernoulli(p_i).

    .. math:: D_\alpha(\pi\|p) = \frac{1}{\alpha(\alpha-1)}\Bigl(\pi^\alpha p^{1-\alpha}
              + (1-\pi)^\alpha (1-p)^{1-\alpha} - 1\Bigr)

    (the Amari/Cichocki α-family for normalised measures; α → 1 gives KL(π‖p), α → 0 gives
    KL(p‖π), α = ½ gives 4 × the squared Hellinger distance).  The formula printed in
    seeds/000 App. C is malformed (it is not zero at p = π); this is the divergence it names.
    ``alpha`` must lie in (0, 1) (the limits are the two KL divergences: :func:`oracle_kl`).
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"`alpha` must lie in (0, 1), got {alpha} (use oracle_kl for the limits)")
    p, t, w = _po(probs, oracle, weights)
    e = _eps(p.dtype, eps)
    pc = jnp.clip(p, e, 1.0 - e)
    a = alpha
    s = t**a * pc ** (1.0 - a) + (1.0 - t) ** a * (1.0 - pc) ** (1.0 - a)
    d = (s - 1.0) / (a * (a - 1.0))
    return _wmean(jnp.maximum(d, 0.0), w)


def oracle_chebyshev(probs: jax.Array, oracle: jax.Array) -> jax.Array:
    r"""Chebyshev distance :math:`\max_i |\pi_i - p_i|` (seeds/000 App. C)."""
    p, t, _ = _po(probs, oracle, None)
    return jnp.max(jnp.abs(t - p))


def _pearson(a, b, w):
    ma, mb = _wmean(a, w), _wmean(b, w)
    da, db = a - ma, b - mb
    cov = _wmean(da * db, w)
    va, vb = _wmean(da * da, w), _wmean(db * db, w)
    den = jnp.sqrt(va * vb)
    return jnp.where(den > 0, cov / jnp.where(den > 0, den, 1.0), 0.0)


def pearson(probs: jax.Array, oracle: jax.Array, *, weights: jax.Array | None = None) -> jax.Array:
    r"""Pearson correlation between true probabilities π and scores p (higher is better).

    Returns 0 when either input is constant (the correlation is undefined there).
    """
    p, t, w = _po(probs, oracle, weights)
    return _pearson(p, t, w)


def spearman(probs: jax.Array, oracle: jax.Array) -> jax.Array:
    r"""Spearman rank correlation between π and p (average ranks for ties; higher is better).

    Equals ``scipy.stats.spearmanr``; 0 when either input is constant.
    """
    p, t, _ = _po(probs, oracle, None)
    return _pearson(average_ranks(p), average_ranks(t), None)
