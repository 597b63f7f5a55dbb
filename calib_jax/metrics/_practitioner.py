r"""The production panel: normalized entropy, the calibration ratio and group AUC.

These are the numbers ads and recommendation teams read first (they are what torchrec's
metric modules and TFMA's calibration metrics report), beside the research metrics.

Weights are frequency weights throughout, as in :mod:`calib_jax.bootstrap`: a row of weight
``w`` counts as ``w`` copies of the row, so integer weights give exactly the values of the
duplicated rows.

Private module: the public surface is listed in :mod:`calib_jax.metrics`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from calib_jax._src import validation as V
from calib_jax._src.metric_inputs import check_eps, check_probs_labels, clip_probs
from calib_jax._src.sorting import argsort, argsort_small_ints, run_bounds
from calib_jax.groupstats import segment_sums, segmented_prefix_sums

USER_WEIGHTS = ("impressions", "clicks", "equal")


class PerGroup(NamedTuple):
    """A metric per group level.

    Attributes:
      value: (K,) the metric of each level; NaN where it is undefined (see ``defined``).
      weight: (K,) the level's total weight (its impressions when unweighted).
      defined: (K,) bool, where the metric is defined (e.g. the level has a click).
    """

    value: jax.Array
    weight: jax.Array
    defined: jax.Array


class GAUC(NamedTuple):
    """Group AUC and what it averaged over.

    Attributes:
      value: the user-weighted mean of the per-user AUCs.
      users: number of users with both a click and a non-click (the users averaged).
      skipped: number of users with one class only, left out (their AUC is undefined).
      weight_share: share of the total weight in the averaged users' rows.
    """

    value: jax.Array
    users: jax.Array
    skipped: jax.Array
    weight_share: jax.Array


def _entropy(q: jax.Array) -> jax.Array:
    """Binary entropy in nats, :math:`-q\\log q - (1-q)\\log(1-q)` (0 at q in {0, 1})."""
    return -(jax.scipy.special.xlogy(q, q) + jax.scipy.special.xlogy(1.0 - q, 1.0 - q))


def _sums(p: jax.Array, y: jax.Array, w: jax.Array | None, eps: float | None) -> tuple[jax.Array, ...]:
    v = jnp.ones_like(p) if w is None else w
    pc = clip_probs(p, eps)
    ll = -(y * jnp.log(pc) + (1.0 - y) * jnp.log1p(-pc))
    return v, v * y, v * p, v * ll


def normalized_entropy(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None,
                       eps: float | None = None) -> jax.Array:
    r"""Normalized entropy: the log loss divided by the entropy of the base rate.

    .. math::

        \mathrm{NE} = \frac{-\frac{1}{W}\sum_i v_i\,[y_i\log p_i + (1-y_i)\log(1-p_i)]}
                           {-\bar y\log\bar y - (1-\bar y)\log(1-\bar y)},\qquad
        \bar y = \frac{1}{W}\sum_i v_i y_i,\ W = \sum_i v_i

    (He et al. 2014, "Practical Lessons from Predicting Clicks on Ads at Facebook",
    "Normalized Entropy"; torchrec's ``NEMetric`` computes the same ratio). NE < 1 means the
    model predicts better than the constant base rate; 1 is the base rate itself. It mixes
    ranking and calibration: a model with NE 0.8 can still be miscalibrated.

    Args:
      probs: (n,) predicted probabilities in [0, 1]; clipped to ``[eps, 1 - eps]`` in the log
        loss as in :func:`calib_jax.metrics.nll`.
      labels: (n,) labels in {0, 1} with both classes present.
      weights: optional (n,) non-negative frequency weights (a weight of k counts as k
        copies of the row).
      eps: the log-loss clip, a float in (0, 0.5) (default 1e-7 in float32, 1e-12 in
        float64); static, or a traced scalar.

    Returns:
      A scalar array, NE >= 0. Called eagerly, invalid input (NaN, a probability outside
      [0, 1], a label other than 0/1, a negative weight, an ``eps`` outside (0, 0.5)) or
      labels of a single class (the base-rate entropy is 0) raise ``ValueError`` naming the
      argument; under ``jit`` / ``vmap`` / ``grad``, where values cannot raise, each of these
      makes the result NaN instead.

    Example:
      >>> import numpy as np, calib_jax as cj
      >>> p = np.array([0.1, 0.2, 0.7, 0.4]); y = np.array([0., 0., 1., 1.])
      >>> # log loss -(log 0.9 + log 0.8 + log 0.7 + log 0.4) / 4 = 0.4004 over H(0.5) = log 2
      >>> round(float(cj.metrics.normalized_entropy(p, y)), 4)
      0.5776
    """
    p, y, w = check_probs_labels(probs, labels, weights)
    v, vy, _, vll = _sums(p, y, w, check_eps(eps))
    sw, sy = jnp.sum(v), jnp.sum(vy)
    V.check_condition((sy <= 0) | (sy >= sw), "`labels` contains a single class: normalized entropy is undefined")
    h = _entropy(sy / sw)
    return jnp.sum(vll) / sw / jnp.where(h > 0, h, 1.0)


def calibration_ratio(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None
                      ) -> jax.Array:
    r"""The calibration ratio (predicted over observed clicks, "PCOC"):

    .. math:: \mathrm{PCOC} = \frac{\sum_i v_i p_i}{\sum_i v_i y_i}

    1 is calibrated in the large, above 1 over-predicts (torchrec's ``CalibrationMetric``;
    TFMA's ``Calibration``). It equals ``1 + bias`` of :func:`calib_jax.metrics.bias`.

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) labels in {0, 1} with at least one click.
      weights: optional (n,) non-negative frequency weights.

    Returns:
      A scalar array, the ratio >= 0. Called eagerly, invalid input (NaN, a probability
      outside [0, 1], a label other than 0/1, a negative weight) or labels without a click
      raise ``ValueError``; under ``jit`` / ``vmap`` / ``grad``, where values cannot raise,
      each of these makes the result NaN instead.

    Example:
      >>> import numpy as np, calib_jax as cj
      >>> p, y = np.array([0.2, 0.4]), np.array([0., 1.])
      >>> round(float(cj.metrics.calibration_ratio(p, y)), 4)  # 0.6 predicted clicks for 1 observed
      0.6
    """
    p, y, w = check_probs_labels(probs, labels, weights)
    v = jnp.ones_like(p) if w is None else w
    sy = jnp.sum(v * y)
    V.check_condition(~(sy > 0), "`labels` has no click: the calibration ratio is undefined")
    return jnp.sum(v * p) / jnp.where(sy > 0, sy, 1.0)


def _per_group(probs, labels, groups, n_groups, weights, eps):
    p, y, w = check_probs_labels(probs, labels, weights)
    n_groups = V.check_positive_int(n_groups, "n_groups")
    g = V.check_hard_groups(groups, p.shape[0], n_groups)
    cols = jnp.stack(_sums(p, y, w, check_eps(eps)), axis=1)
    s = segment_sums(cols, g, n_groups)
    return s[:, 0], s[:, 1], s[:, 2], s[:, 3]


def normalized_entropy_by_group(probs: jax.Array, labels: jax.Array, groups: jax.Array, *,
                                n_groups: int, weights: jax.Array | None = None,
                                eps: float | None = None) -> PerGroup:
    r"""Normalized entropy of every level of a field (:func:`normalized_entropy` per group):
    :math:`\mathrm{NE}_k = \overline{\ell}_k / H(\bar y_k)`, each level against its own base
    rate (torchrec's segmented NE).

    Args:
      probs: (n,) predicted probabilities in [0, 1] (clipped in the log loss, as
        :func:`normalized_entropy`).
      labels: (n,) labels in {0, 1}.
      groups: (n,) integer level ids in ``[0, n_groups)``.
      n_groups: number of levels K, an int >= 1 (static under ``jit``).
      weights: optional (n,) non-negative frequency weights.
      eps: the log-loss clip, a float in (0, 0.5) (default 1e-7 in float32, 1e-12 in
        float64); static, or a traced scalar.

    Returns:
      :class:`PerGroup` with fields of shape (K,): ``value`` the NE of each level (NaN,
      ``defined`` False, for a level without rows or with a single class), ``weight`` its
      total weight, ``defined``. Called eagerly, invalid input (NaN, a probability outside
      [0, 1], a label other than 0/1, a group id outside ``[0, n_groups)``, a negative
      weight, an ``eps`` outside (0, 0.5)) raises ``ValueError`` naming the argument; under
      ``jit`` / ``vmap`` / ``grad``, where values cannot raise, the same checks make ``value``
      and ``weight`` NaN instead.

    Example:
      >>> import numpy as np, calib_jax as cj
      >>> r = cj.metrics.normalized_entropy_by_group(
      ...     np.array([.1, .2, .7, .4]), np.array([0., 1., 1., 0.]), np.array([0, 0, 1, 1]), n_groups=2)
      >>> # level 0: -(log 0.9 + log 0.2) / 2 / log 2; level 1: -(log 0.7 + log 0.6) / 2 / log 2
      >>> r.defined.tolist(), [round(float(x), 4) for x in r.value]
      ([True, True], [1.237, 0.6258])
    """
    sw, sy, _, sll = _per_group(probs, labels, groups, n_groups, weights, eps)
    q = jnp.where(sw > 0, sy / jnp.where(sw > 0, sw, 1.0), 0.0)
    h = _entropy(q)
    ok = (sw > 0) & (h > 0)
    ne = jnp.where(ok, sll / jnp.where(ok, sw * h, 1.0), jnp.nan)
    return PerGroup(ne, sw, ok)


def calibration_ratio_by_group(probs: jax.Array, labels: jax.Array, groups: jax.Array, *,
                               n_groups: int, weights: jax.Array | None = None) -> PerGroup:
    r"""The calibration ratio :math:`\sum_{i\in k} v_i p_i / \sum_{i\in k} v_i y_i` of every
    level k of a field.

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) labels in {0, 1}.
      groups: (n,) integer level ids in ``[0, n_groups)``.
      n_groups: number of levels K, an int >= 1 (static under ``jit``).
      weights: optional (n,) non-negative frequency weights.

    Returns:
      :class:`PerGroup` with fields of shape (K,): ``value`` the ratio of each level (NaN,
      ``defined`` False, for a level without a click), ``weight`` its total weight,
      ``defined``. Called eagerly, invalid input (NaN, a probability outside [0, 1], a label
      other than 0/1, a group id outside ``[0, n_groups)``, a negative weight) raises
      ``ValueError`` naming the argument; under ``jit`` / ``vmap`` / ``grad``, where values
      cannot raise, the same checks make ``value`` and ``weight`` NaN instead.

    Example:
      >>> import numpy as np, calib_jax as cj
      >>> r = cj.metrics.calibration_ratio_by_group(
      ...     np.array([.1, .2, .7, .4]), np.array([0., 1., 1., 0.]), np.array([0, 0, 1, 1]), n_groups=2)
      >>> [round(float(x), 3) for x in r.value]  # (0.1 + 0.2) / 1 and (0.7 + 0.4) / 1
      [0.3, 1.1]
    """
    sw, sy, sp, _ = _per_group(probs, labels, groups, n_groups, weights, None)
    ok = sy > 0
    return PerGroup(jnp.where(ok, sp / jnp.where(ok, sy, 1.0), jnp.nan), sw, ok)


def gauc(scores: jax.Array, labels: jax.Array, users: jax.Array, *,
         weights: jax.Array | None = None, user_weight: str = "impressions") -> GAUC:
    r"""Group AUC: the AUC of each user's own impressions, averaged with user weights.

    .. math::

        \mathrm{GAUC} = \frac{\sum_{u\in U_2} \omega_u\,\mathrm{AUC}_u}{\sum_{u\in U_2}\omega_u},

    with :math:`\mathrm{AUC}_u` the weighted AUC (ties count one half, as
    :func:`calib_jax.metrics.auc`) over user u's rows, :math:`U_2` the users with both a click
    and a non-click (the others have no AUC; they are counted in ``skipped``), and
    :math:`\omega_u` the user's impressions :math:`\sum_{i\in u} v_i` (Zhou et al. 2018,
    "Deep Interest Network for Click-Through Rate Prediction", after Zhu et al. 2017),
    clicks, or 1 (``user_weight``). It measures ranking within a user, which a global AUC
    mixes with ranking across users.

    Args:
      scores: (n,) finite scores (probabilities or logits; only their order matters).
      labels: (n,) labels in {0, 1}.
      users: (n,) integer user ids (any integers; float ids must be integer-valued).
      weights: optional (n,) non-negative frequency weights.
      user_weight: ``"impressions"`` (default), ``"clicks"`` or ``"equal"``: the user weight
        :math:`\omega_u` above (static under ``jit``).

    Returns:
      :class:`GAUC` of scalar arrays: ``value`` (float), ``users`` and ``skipped`` (int32),
      ``weight_share`` (float). Called eagerly, invalid input (a non-finite score, a label
      other than 0/1, a non-integer user id, a negative weight, a bad option) or no user with
      both classes raise ``ValueError``; under ``jit`` / ``vmap``, where values cannot raise,
      each of these makes ``value`` and ``weight_share`` NaN instead (the integer counts are
      returned as computed).

    One stable sort by score, then one by user, and segmented prefix sums within users: the
    cost of one global AUC plus a sort of the user ids.

    Example:
      >>> import numpy as np, calib_jax as cj
      >>> s = np.array([.9, .1, .8, .3, .5]); y = np.array([1., 0., 0., 1., 1.])
      >>> r = cj.metrics.gauc(s, y, np.array([0, 0, 1, 1, 2]))
      >>> float(r.value), int(r.users), int(r.skipped)  # user 0: AUC 1, user 1: AUC 0, user 2: one class
      (0.5, 2, 1)
    """
    s = V.as_float_array(scores, "scores")
    y = V.check_labels(labels, "labels")
    n = s.shape[0]
    V.check_same_length(n, labels=y)
    u = V.check_integer_ids(users, n, "users", dense=True)
    w = V.check_weights(weights, n)
    user_weight = V.check_choice(user_weight, "user_weight", USER_WEIGHTS)
    v = jnp.ones_like(s) if w is None else w
    o1 = argsort(s)
    uu = u[o1]
    # each id's offset from the smallest, in uint32: exact for any two int32 ids (their int32
    # difference overflows when they are more than 2**31 - 1 apart)
    o2 = argsort_small_ints(uu.astype(jnp.uint32) - jnp.min(uu).astype(jnp.uint32))
    order = o1[o2]
    us, ss, ys, vs = u[order], s[order], y[order], v[order]
    edge = jnp.ones((1,), bool)
    new_user = jnp.concatenate([edge, us[1:] != us[:-1]])
    end_user = jnp.concatenate([us[1:] != us[:-1], edge])
    new_tie = new_user | jnp.concatenate([edge, ss[1:] != ss[:-1]])
    end_tie = end_user | jnp.concatenate([ss[1:] != ss[:-1], edge])
    pos, neg = vs * ys, vs * (1.0 - ys)
    cneg = segmented_prefix_sums(neg, new_user)  # negatives up to here, within the user
    first, last = run_bounds(new_tie, end_tie)
    below = cneg[first] - neg[first]  # within-user negatives strictly below the tie block
    tied = cneg[last] - below
    uid = jnp.cumsum(new_user.astype(jnp.int32)) - 1
    sums = segment_sums(jnp.stack([pos * (below + 0.5 * tied), pos, neg], axis=1), uid, n)
    num, P, N = sums[:, 0], sums[:, 1], sums[:, 2]
    present = (P + N) > 0  # a user whose rows all weigh 0 is no user (as if the rows were dropped)
    both = (P > 0) & (N > 0)
    auc_u = jnp.where(both, num / jnp.where(both, P * N, 1.0), 0.0)
    omega = {"impressions": P + N, "clicks": P, "equal": jnp.ones_like(P)}[user_weight]
    omega = jnp.where(both, omega, 0.0)
    total = jnp.sum(omega)
    V.check_condition(~(total > 0), "no user has both a click and a non-click: GAUC is undefined")
    value = jnp.sum(omega * auc_u) / jnp.where(total > 0, total, 1.0)
    n_users = jnp.sum(both.astype(jnp.int32))
    skipped = jnp.sum((present & ~both).astype(jnp.int32))
    share = jnp.sum(jnp.where(both, P + N, 0.0)) / jnp.sum(v)
    return GAUC(value, n_users, skipped, share)
