"""Ranking and decision metrics: exact AUC, accuracy and their relative changes.

Private module: the public surface is listed in :mod:`calib_jax.metrics`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax._src import validation as V
from calib_jax._src.eager import flag
from calib_jax._src.ranks import tie_bounds
from calib_jax._src.sorting import argsort_with_ties
from calib_jax.groupstats import _safe_div
from calib_jax.metrics._common import _pl, _wmean


def auc(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None,
        presorted: bool = False) -> jax.Array:
    r"""Exact (weighted) area under the ROC curve; tied scores count one half.

    .. math:: \mathrm{AUC} = \frac{\sum_{i:y_i=1}\sum_{j:y_j=0} v_i v_j
              \bigl([s_i > s_j] + \tfrac12[s_i = s_j]\bigr)}{\sum_{i:y_i=1} v_i \sum_{j:y_j=0} v_j}

    One sort; each positive is credited with the weight of negatives strictly below it plus
    half of those tied with it (prefix sums over the sorted scores).  Accepts any real
    scores (probabilities or logits).  Raises if only one class is present (under ``jit``
    that case returns NaN, as every failed input check does there).

    ``presorted=True`` declares that the rows are already in ascending order of ``probs``
    and skips the sort (checked on concrete input): a bootstrap that reweights the same
    rows many times sorts them once (``calib_jax.bootstrap``).
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
    if presorted:
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
    """Accuracy of the decision ``p > threshold`` (strict, as scikit-learn's ``predict``)."""
    p, y, w = _pl(probs, labels, weights)
    return _wmean(((p > threshold).astype(p.dtype) == y).astype(p.dtype), w)


def acc_diff(probs: jax.Array, base_probs: jax.Array, labels: jax.Array, *,
             weights: jax.Array | None = None) -> jax.Array:
    r"""Relative accuracy change (seeds/000 App. E.1).

    .. math:: \mathrm{AccDiff} = (\mathrm{Acc}(p) - \mathrm{Acc}(p_0)) / \mathrm{Acc}(p_0)
    """
    V.check_probs(base_probs, "base_probs")
    a = accuracy(probs, labels, weights=weights)
    a0 = accuracy(base_probs, labels, weights=weights)
    return _safe_div(a - a0, a0)


def auc_diff(probs: jax.Array, base_probs: jax.Array, labels: jax.Array, *,
             weights: jax.Array | None = None) -> jax.Array:
    r"""Relative AUC change (seeds/000 App. E.1): :math:`(\mathrm{AUC}(p) - \mathrm{AUC}(p_0))/\mathrm{AUC}(p_0)`."""
    V.as_float_array(base_probs, "base_probs")
    a = auc(probs, labels, weights=weights)
    a0 = auc(base_probs, labels, weights=weights)
    return _safe_div(a - a0, a0)
