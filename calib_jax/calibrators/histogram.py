r"""Histogram binning (Zadrozny and Elkan, 2001), uniform or equal-mass bins.

The uncalibrated probability :math:`p = \sigma(z)` is assigned to one of :math:`M` bins
:math:`B_m = [e_m, e_{m+1})` (the last bin also holds :math:`p = 1`), and the calibrated
probability is the weighted label rate of the bin on the fitting data:

.. math:: \tilde p(z) = \frac{\sum_{i \in B_m} v_i y_i}{\sum_{i \in B_m} v_i}, \qquad
          \sigma(z) \in B_m,

the binned estimate of Zadrozny and Elkan's histogram binning (ICML 2001; full entry in
docs/references.bib), whose squared gap to the bin mean score
is the reliability term of eq. 2 of "Calibration is Grouping" (VR-SAG; anonymous authors,
under review).  ``strategy="uniform"`` uses :math:`e_m = m/M`;
``strategy="quantile"`` puts the interior edges at the weighted :math:`m/M` quantiles of
the fitting probabilities (the smallest fitted value whose cumulative weight reaches
:math:`m/M` of the total), so tied scores always share a bin and a weight ``k`` acts like
``k`` repeated rows.  Repeated edges (heavy ties) leave some bins empty.

Empty bins (no fitting weight) cannot be estimated.  ``empty="identity"`` (default) returns
the uncalibrated probability there; ``empty="center"`` returns the bin centre
:math:`(e_m + e_{m+1})/2`.  ``params.empty`` records which bins were empty.

The map is piecewise constant and not necessarily monotone (``monotone=False`` in the
registry).  ``fit`` is jit-able with ``n_bins`` static (``quantile`` sorts, which is slow
on XLA:CPU for large ``n``); never NaN.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from calib_jax._src.eager import compiled
from calib_jax._src.validation import check_choice, check_logits, check_positive_int
from calib_jax.calibrators._base import Calibrator, public_entry, register
from calib_jax.calibrators._common import ArrayLike, Context, KeyArg, prepare
from calib_jax.groupstats import deterministic_segment_sum

__all__ = ["HistogramParams", "fit", "predict", "CALIBRATOR"]


class HistogramParams(NamedTuple):
    """Fitted histogram binning.

    Attributes:
      edges: (M + 1,) bin edges on the probability scale, ``edges[0] = 0``, ``edges[-1] = 1``.
      values: (M,) calibrated probability per bin (bin centre for empty bins).
      empty: (M,) True for bins without fitting weight.
      identity: (M,) True where prediction falls back to the uncalibrated probability.
    """

    edges: jax.Array
    values: jax.Array
    empty: jax.Array
    identity: jax.Array


def _bin_index(p: jax.Array, edges: jax.Array) -> jax.Array:
    m = edges.shape[0] - 1
    idx = jnp.searchsorted(edges[1:-1], p, side="right")
    return jnp.clip(idx, 0, m - 1)


@partial(jax.jit, static_argnames=("n_bins", "strategy", "empty"))
def _fit(z, y, w, n_bins: int, strategy: str, empty: str) -> HistogramParams:
    p = jax.nn.sigmoid(z)
    grid = jnp.linspace(0.0, 1.0, n_bins + 1, dtype=z.dtype)
    if strategy == "uniform":
        edges = grid
    else:
        order = jnp.argsort(p)
        ps, ws = p[order], w[order]
        cum = jnp.cumsum(ws)
        # m * W / M (exact for integer weights), nudged down by a few ulps so that the
        # rounding of the cumulative sum cannot push an edge one row too far.
        m = jnp.arange(1, n_bins, dtype=z.dtype)
        targets = m * cum[-1] / n_bins * (1.0 - 8 * jnp.finfo(z.dtype).eps)
        pos = jnp.clip(jnp.searchsorted(cum, targets, side="left"), 0, p.shape[0] - 1)
        edges = jnp.concatenate([grid[:1], ps[pos], grid[-1:]])
    idx = _bin_index(p, edges)
    wsum = deterministic_segment_sum(w, idx, n_bins)
    ysum = deterministic_segment_sum(w * y, idx, n_bins)
    is_empty = wsum <= 0
    centre = 0.5 * (edges[:-1] + edges[1:])
    rate = ysum / jnp.where(is_empty, 1.0, wsum)
    values = jnp.where(is_empty, centre, rate)
    identity = is_empty & (empty == "identity")
    return HistogramParams(edges=edges, values=values, empty=is_empty, identity=identity)


def fit(logits: ArrayLike, labels: ArrayLike, *, weights: ArrayLike | None = None, key: KeyArg = None,
        context: Context = None, n_bins: int = 15, strategy: str = "uniform",
        empty: str = "identity") -> HistogramParams:
    r"""Fit histogram binning on :math:`p = \sigma(z)`: per bin
    :math:`\tilde p_m = \sum_{i \in B_m} v_i y_i / \sum_{i \in B_m} v_i` (Zadrozny and
    Elkan, ICML 2001; the binned rate of eq. 2 of "Calibration is Grouping" (VR-SAG; anonymous
    authors, under review)).

    Args:
      logits: (n,) uncalibrated logits, real.
      labels: (n,) labels in {0, 1}.
      weights: optional (n,) non-negative weights (a weight of ``k`` counts as ``k`` copies
        of the row).
      key, context: unused (protocol compatibility).
      n_bins: number of bins ``M``, an int >= 1 (static under ``jit``).
      strategy: ``"uniform"`` — equal-width bins :math:`[m/M, (m+1)/M)` on the probability
        scale; ``"quantile"`` — equal-mass bins whose interior edges are weighted quantiles of
        the fitting probabilities (tied scores share a bin). Static.
      empty: what a bin without fitting weight predicts: ``"identity"`` — the uncalibrated
        probability :math:`\sigma(z)`; ``"center"`` — the bin centre. Static.

    Returns:
      :class:`HistogramParams` (``edges`` (M + 1,), ``values``, ``empty``, ``identity``
      (M,)); never NaN on valid input. The fit is jit- and vmap-able (``n_bins``,
      ``strategy`` and ``empty`` static). Called eagerly, invalid input (NaN or inf logits, a
      label other than 0/1, a negative weight, a bad option) raises ``ValueError`` naming the
      argument; under ``jit`` / ``vmap`` the same checks make ``edges`` and ``values`` NaN
      (option errors still raise while tracing).

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.calibrators.histogram import fit
      >>> z = jnp.array([-2.0, -1.0, 0.0, 1.0, 2.0, 3.0]); y = jnp.array([0.0, 0.0, 1.0, 0.0, 1.0, 1.0])
      >>> params = fit(z, y, n_bins=2)   # sigma(z) < 1/2 for the first two rows: bins {0, 0}, {1, 0, 1, 1}
      >>> params.edges.tolist(), params.values.tolist()
      ([0.0, 0.5, 1.0], [0.0, 0.75])
    """
    del key, context
    n_bins = check_positive_int(n_bins, "n_bins")
    strategy = check_choice(strategy, "strategy", ("uniform", "quantile"))
    empty = check_choice(empty, "empty", ("identity", "center"))
    z, y, w = prepare(logits, labels, weights)
    return _fit(z, y, w, n_bins, strategy, empty)


def predict(params: HistogramParams, logits: Any, *, context: dict[str, Any] | None = None
            ) -> jax.Array:
    r""":math:`\tilde p_m` of the bin :math:`B_m \ni \sigma(z)` (identity/centre for empty
    bins).

    Args:
      params: a fitted :class:`HistogramParams`.
      logits: (n,) uncalibrated logits, real.
      context: unused (protocol compatibility).

    Returns:
      (n,) probabilities in [0, 1]: the bin's fitted rate, or :math:`\sigma(z)` itself in the
      bins marked ``identity``. jit- and vmap-able (``params`` may be traced too). Called
      eagerly, NaN or inf logits raise ``ValueError`` naming ``logits``; under ``jit`` /
      ``vmap`` the same check makes the output NaN.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.calibrators.histogram import HistogramParams, predict
      >>> params = HistogramParams(edges=jnp.array([0.0, 0.5, 1.0]), values=jnp.array([0.2, 0.9]),
      ...                          empty=jnp.array([False, False]), identity=jnp.array([False, False]))
      >>> [round(float(p), 4) for p in predict(params, jnp.array([-1.0, 0.0, 3.0]))]  # sigma(0) is in bin 2
      [0.2, 0.9, 0.9]
      >>> no_fit = params._replace(identity=jnp.array([True, False]))  # bin 1 was empty at fit time
      >>> [round(float(p), 4) for p in predict(no_fit, jnp.array([-1.0, 3.0]))]  # sigma(-1) = 0.2689
      [0.2689, 0.9]
    """
    del context
    z = check_logits(logits, "logits")
    p = jax.nn.sigmoid(z)
    idx = _bin_index(p, params.edges)
    return jnp.where(params.identity[idx], p, params.values[idx])


# Eager calls run one compiled program each (calib_jax._src.eager): the checks of the inputs,
# the fit and (for predict) the map; under a user's jit / vmap these are the functions above.
fit = public_entry(compiled(fit))
predict = public_entry(compiled(predict))


CALIBRATOR = register(
    Calibrator(name="histogram_binning", fit=fit, predict=predict, monotone=False)
)
