"""Ranking and decision metrics: exact AUC, accuracy and their relative changes.

Private module: the public surface is listed in :mod:`calib_jax.metrics`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax._src import validation as V
from calib_jax._src.arrays import safe_div
from calib_jax._src.eager import flag
from calib_jax._src.metric_inputs import check_probs_labels, weighted_mean
from calib_jax._src.ranks import tie_bounds
from calib_jax._src.sorting import argsort_with_ties


def auc(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None,
        presorted: bool = False) -> jax.Array:
    r"""Exact (weighted) area under the ROC curve; tied scores count one half.

    .. math:: \mathrm{AUC} = \frac{\sum_{i:y_i=1}\sum_{j:y_j=0} v_i v_j
              \bigl([s_i > s_j] + \tfrac12[s_i = s_j]\bigr)}{\sum_{i:y_i=1} v_i \sum_{j:y_j=0} v_j}

    One sort; each positive is credited with the weight of negatives strictly below it plus
    half of those tied with it (prefix sums over the sorted scores).  Accepts any real
    scores (probabilities or logits).

    ``presorted=True`` declares that the rows are already in ascending order of ``probs``
    and skips the sort (checked on concrete input): a bootstrap that reweights the same
    rows many times sorts them once (``calib_jax.bootstrap``).

    Args:
      probs: (n,) finite real scores :math:`s_i` (probabilities, logits or any monotone
        transform of them: only their order and ties matter).
      labels: (n,) labels in {0, 1}; both classes must be present.
      weights: optional (n,) non-negative row weights :math:`v_i` with a positive sum (a
        weight of k counts as k copies).
      presorted: static bool; ``True`` promises that ``probs`` is non-decreasing, so no sort
        is done (a violated promise raises eagerly and gives NaN under ``jit``).

    Returns:
      A scalar array in [0, 1] (0.5 for constant scores). Called eagerly, invalid input (a
      NaN or infinite score, a label other than 0/1, a single class, a negative weight,
      unsorted ``probs`` with ``presorted=True``) raises ``ValueError`` naming the argument;
      under ``jit`` / ``vmap`` / ``grad``, where values cannot raise, the same checks make the
      result NaN. Weights that leave one class with zero total weight are not caught: the
      result is then 0.5.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax.metrics import auc
      >>> s = jnp.array([0.1, 0.5, 0.5, 0.9]); y = jnp.array([0.0, 1.0, 0.0, 1.0])
      >>> round(float(auc(s, y)), 4)  # pairs (pos, neg): 0.5>0.1, 0.5=0.5 (1/2), 0.9>both: 3.5/4
      0.875
      >>> bool(jnp.isnan(jax.jit(auc)(s, jnp.ones(4))))  # one class only: NaN under jit
      True
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
    else:
        flag(jnp.min(y) == jnp.max(y))
    if V.check_flag_option(presorted, "presorted"):
        if V.is_concrete(s):  # on the host: inside a trace, jnp ops on a constant are traced
            ss = np.asarray(jax.device_get(s))
            if np.any(ss[1:] < ss[:-1]):
                raise ValueError("`probs` is not in ascending order (presorted=True)")
        flag(jnp.any(s[1:] < s[:-1]))
        ys, vs = y, v
        first, last = tie_bounds(s)
    else:
        order, first, last = argsort_with_ties(s)
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
    """Accuracy of the decision ``p > threshold`` (strict, as scikit-learn's ``predict``).

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) labels in {0, 1}.
      threshold: the decision threshold, a real number (a Python float or a traced scalar;
        a concrete NaN, text or boolean raises); a row is predicted positive when its
        probability is strictly above it.
      weights: optional (n,) non-negative row weights with a positive sum (weighted share of
        correct decisions).

    Returns:
      A scalar array in [0, 1]. Called eagerly, invalid input (NaN, a probability outside
      [0, 1], a label other than 0/1, a negative weight) raises ``ValueError`` naming the
      argument; under ``jit`` / ``vmap`` / ``grad``, where values cannot raise, the same checks
      make the result NaN. Its gradient with respect to ``probs`` is zero.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import accuracy
      >>> p = jnp.array([0.1, 0.2, 0.8, 0.9, 0.5]); y = jnp.array([0.0, 1.0, 1.0, 1.0, 1.0])
      >>> round(float(accuracy(p, y)), 4)  # decisions 0, 0, 1, 1, 0 (0.5 is not > 0.5): 3 of 5
      0.6
    """
    p, y, w = check_probs_labels(probs, labels, weights)
    # a NaN threshold predicted every row negative without a word; text and booleans were numbers
    V.check_number_option(threshold, "threshold", "a real number, not NaN", lambda v: v == v, traced_ok=True)
    if isinstance(threshold, int):  # as a float: the int 2**40 overflowed JAX's int32
        threshold = float(threshold)
    return weighted_mean(((p > threshold).astype(p.dtype) == y).astype(p.dtype), w)


def acc_diff(probs: jax.Array, base_probs: jax.Array, labels: jax.Array, *,
             weights: jax.Array | None = None) -> jax.Array:
    r"""Relative accuracy change of a model against a baseline.

    .. math:: \mathrm{AccDiff} = (\mathrm{Acc}(p) - \mathrm{Acc}(p_0)) / \mathrm{Acc}(p_0)

    App. E.1 of "Calibration is Grouping" (VR-SAG; anonymous authors, under review), where it
    checks that a calibrator does not cost accuracy. Both accuracies use the decision
    ``p > 0.5`` (:func:`accuracy`).

    Args:
      probs: (n,) probabilities :math:`p` of the model evaluated, in [0, 1].
      base_probs: (n,) probabilities :math:`p_0` of the baseline (e.g. the uncalibrated model)
        on the same rows, in [0, 1].
      labels: (n,) labels in {0, 1}.
      weights: optional (n,) non-negative row weights with a positive sum, used by both
        accuracies.

    Returns:
      A scalar array (0 = no change, -0.1 = ten per cent fewer correct decisions); 0 when the
      baseline's accuracy is 0. Called eagerly, invalid input in any argument (NaN, a
      probability outside [0, 1], a label other than 0/1, a negative weight) raises
      ``ValueError`` naming the argument; under ``jit`` / ``vmap`` / ``grad``, where values
      cannot raise, the same checks make the result NaN.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import acc_diff
      >>> y = jnp.array([0.0, 0.0, 1.0, 1.0])
      >>> p = jnp.array([0.1, 0.2, 0.8, 0.9]); p0 = jnp.full(4, 0.6)  # baseline says 1 everywhere
      >>> round(float(acc_diff(p, p0, y)), 4)  # (1 - 0.5) / 0.5
      1.0
    """
    V.check_probs(base_probs, "base_probs")
    a = accuracy(probs, labels, weights=weights)
    a0 = accuracy(base_probs, labels, weights=weights)
    return safe_div(a - a0, a0)


def auc_diff(probs: jax.Array, base_probs: jax.Array, labels: jax.Array, *,
             weights: jax.Array | None = None) -> jax.Array:
    r"""Relative AUC change of a model against a baseline.

    .. math:: \mathrm{AUCDiff} = (\mathrm{AUC}(p) - \mathrm{AUC}(p_0)) / \mathrm{AUC}(p_0)

    App. E.1 of "Calibration is Grouping" (VR-SAG; anonymous authors, under review), where it
    checks that a calibrator keeps the ranking. Both AUCs are exact, ties counting one half
    (:func:`auc`); a strictly increasing calibration map leaves the AUC unchanged.

    Args:
      probs: (n,) finite real scores :math:`p` of the model evaluated (probabilities or
        logits).
      base_probs: (n,) finite real scores :math:`p_0` of the baseline on the same rows.
      labels: (n,) labels in {0, 1}; both classes must be present.
      weights: optional (n,) non-negative row weights with a positive sum, used by both AUCs.

    Returns:
      A scalar array (0 = same ranking quality); 0 when the baseline's AUC is 0. Called
      eagerly, invalid input (a NaN or infinite score, a label other than 0/1, a single
      class, a negative weight) raises ``ValueError`` naming the argument; under ``jit`` /
      ``vmap`` / ``grad``, where values cannot raise, the same checks make the result NaN.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import auc_diff
      >>> y = jnp.array([0.0, 0.0, 1.0, 1.0])
      >>> p0 = jnp.array([0.1, 0.4, 0.35, 0.8])  # AUC 3/4: 0.35 < 0.4 is the one wrong pair
      >>> p = jnp.array([0.1, 0.2, 0.8, 0.9])  # AUC 1
      >>> round(float(auc_diff(p, p0, y)), 4)  # (1 - 3/4) / (3/4)
      0.3333
    """
    V.as_float_array(base_probs, "base_probs")
    a = auc(probs, labels, weights=weights)
    a0 = auc(base_probs, labels, weights=weights)
    return safe_div(a - a0, a0)
