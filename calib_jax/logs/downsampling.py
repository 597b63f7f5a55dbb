r"""Negative downsampling: logs that keep every click but only a fraction of the non-clicks.

CTR models are often trained, and their logs stored, with each negative row (label 0) kept
with probability :math:`w \in (0, 1]` and every positive kept. A kept row then stands for one
positive or :math:`1/w` negatives of the full population, so every metric of the population is
the kept rows' metric with the negatives weighted :math:`1/w` (:func:`population_weights`; the
engine does this when given ``negative_rate``). A model trained on the kept rows predicts the
kept population's click probability :math:`p`; the full population's probability of the same
impression is (Bayes' rule with the prior odds scaled by :math:`w`)

.. math:: q = \frac{p}{p + (1 - p)/w}, \qquad \operatorname{logit} q = \operatorname{logit} p + \ln w,

(He et al., "Practical Lessons from Predicting Clicks on Ads at Facebook", ADKDD 2014, §6,
the recalibration of a negatively downsampled model), and conversely a population probability
:math:`q` is the kept rows' probability :math:`p = q / (q + (1 - q)\,w)`
(:func:`kept_probability`): what a calibrated model's clicks look like among the kept rows.

The functions are arithmetic only, so they take floats, NumPy or JAX arrays, pandas or polars
columns alike (a list becomes a NumPy array); a NaN, or a probability outside [0, 1], is refused
by name wherever the values can be read (not inside ``jax.jit``), and the SQL engines compute
the same weights in the query (:func:`weight_sql`).
"""

from __future__ import annotations

import math
import numbers
import sys
from typing import Any

__all__ = ["MIN_RATE", "OUTSIDE_RATES", "check_negative_rate", "check_rate_options", "recalibrate_probability",
           "recalibrate_logit", "kept_probability", "weight_items_sql",
           "population_weights", "weight_sql", "rate_note"]


#: the problem of a row whose rate (a rate column) is not in [MIN_RATE, 1], as every engine words it
OUTSIDE_RATES = "outside [1e-09, 1]"
#: the smallest kept-negative rate taken: a kept non-click weighs at most 1e9 rows, so a log of
#: 1e9 rows stays within the 1e18 total weight the report accepts
#: (:data:`calib_jax.logs.validate.WEIGHT_TOTAL_RANGE`)
MIN_RATE = 1e-9


def check_negative_rate(rate: Any, name: str = "negative_rate") -> float | None:
    """``rate`` as a float in (0, 1], or ``None`` when no rate is given.

    Args:
      rate: the kept-negative rate :math:`w`, or ``None``.
      name: the argument's name for the message (``--negative-rate`` for the command).

    Returns:
      ``float(rate)``, or ``None``.

    Raises:
      ValueError: naming ``name``, when ``rate`` is not a number in [:data:`MIN_RATE`, 1] (a
        boolean, a string, 0, a negative or NaN rate).

    Example:
      >>> from calib_jax.logs.downsampling import check_negative_rate
      >>> check_negative_rate(0.25)
      0.25
      >>> check_negative_rate(0.0)
      Traceback (most recent call last):
      ...
      ValueError: negative_rate must be a number in (0, 1] (the fraction of label-0 rows kept), got 0.0
    """
    if rate is None:
        return None
    # any real number: NumPy's float32 was refused as "not a number" (its float64 is a float)
    ok = isinstance(rate, numbers.Real) and not isinstance(rate, bool) and type(rate).__name__ != "bool_"
    if ok:
        rate = float(rate)
    if not ok or not (0.0 < rate <= 1.0):
        raise ValueError(f"{name} must be a number in (0, 1] (the fraction of label-0 rows kept), got {rate!r}")
    if rate < MIN_RATE:
        raise ValueError(f"{name} must be at least {MIN_RATE:g}, got {rate!r}: a kept non-click would weigh more "
                         f"than {1 / MIN_RATE:g} rows, and the weights' totals of a large log would overflow")
    return rate


def check_rate_options(negative_rate: Any, negative_rate_column: Any, *, flags: bool = True) -> None:
    """Refuse a rate given both as a number and as a column, and check the number.

    Args:
      negative_rate: the constant rate, or ``None``.
      negative_rate_column: the column of per-row rates, or ``None``.
      flags: name the command's flags (``--negative-rate``) rather than the library's arguments.

    Returns:
      None: it only raises.

    Raises:
      ValueError: naming both, when both are given; naming the rate when it is bad.

    Example:
      >>> from calib_jax.logs.downsampling import check_rate_options
      >>> check_rate_options(0.5, None)
      >>> check_rate_options(0.5, "rate")
      Traceback (most recent call last):
      ...
      ValueError: give --negative-rate W or --negative-rate-column COL, not both
    """
    rate, column = ("--negative-rate", "--negative-rate-column") if flags else ("negative_rate",
                                                                               "negative_rate_column")
    if negative_rate is not None and negative_rate_column is not None:
        raise ValueError(f"give {rate} W or {column} COL, not both")
    check_negative_rate(negative_rate, rate)


def _required(rate: Any) -> float:
    """A given rate, checked (``None`` is refused: these transforms need one)."""
    w = check_negative_rate(rate)
    if w is None:
        raise ValueError("negative_rate must be a number in (0, 1] (the fraction of label-0 rows kept), got None")
    return w


def _checked(x: Any, name: str, *, probabilities: bool) -> Any:
    """``x`` with its values checked where they can be read: not NaN, and for probabilities within
    [0, 1] (``ValueError`` naming ``name``); a list or tuple becomes a NumPy array. Values traced
    inside ``jax.jit`` cannot be read and pass as they are."""
    jax = sys.modules.get("jax")
    if jax is not None and isinstance(x, jax.core.Tracer):
        return x
    import numpy as np

    kind = getattr(getattr(x, "dtype", None), "kind", "f")
    if isinstance(x, str | bytes) or kind not in "biuf":  # "0.5" converted, then failed in p / (...)
        raise ValueError(f"{name}: numbers (a float or an array), got "
                         f"{type(x).__name__ if isinstance(x, str | bytes) else f'values of dtype {x.dtype}'}")
    if isinstance(x, list | tuple):
        x = np.asarray(x, dtype=float)
    try:
        v = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: numbers (a float or an array), got {type(x).__name__}") from None
    bad = np.isnan(v) | ((v < 0.0) | (v > 1.0) if probabilities else False)
    if np.any(bad):
        first = np.flatnonzero(np.ravel(bad))[0]
        what = "missing (NaN) or outside [0, 1]" if probabilities else "missing (NaN)"
        raise ValueError(f"{name}: {int(np.sum(bad))} value(s) {what}, the first {float(np.ravel(v)[first])!r} "
                         f"(at flat index {first})")
    return x


def recalibrate_probability(p: Any, negative_rate: float) -> Any:
    r"""The full population's click probability of a model trained on negatively downsampled rows:
    :math:`q = p / (p + (1 - p)/w)` (He et al. 2014, §6).

    Args:
      p: the model's probabilities on the kept population (a float or an array of any kind).
      negative_rate: the kept-negative rate :math:`w` in (0, 1].

    Returns:
      :math:`q`, of the type and shape of ``p``.

    Example:
      >>> from calib_jax.logs.downsampling import recalibrate_probability
      >>> round(recalibrate_probability(0.5, 0.1), 6)  # even odds among kept rows: 1 to 10 in all
      0.090909
    """
    w = _required(negative_rate)
    p = _checked(p, "p", probabilities=True)
    return p / (p + (1.0 - p) / w)


def recalibrate_logit(z: Any, negative_rate: float) -> Any:
    r"""The recalibration of :func:`recalibrate_probability` on logits:
    :math:`\operatorname{logit} q = z + \ln w` (exact for every logit, no clipping).

    Args:
      z: the model's logits on the kept population.
      negative_rate: the kept-negative rate :math:`w` in (0, 1].

    Returns:
      The population logits, of the type and shape of ``z``.

    Example:
      >>> from calib_jax.logs.downsampling import recalibrate_logit
      >>> round(recalibrate_logit(0.0, 0.1), 6)
      -2.302585
    """
    w = _required(negative_rate)
    return _checked(z, "z", probabilities=False) + math.log(w)


def kept_probability(q: Any, negative_rate: float) -> Any:
    r"""A population probability as the kept rows see it: :math:`p = q / (q + (1 - q)\,w)`, the
    inverse of :func:`recalibrate_probability`.

    Args:
      q: probabilities on the full population.
      negative_rate: the kept-negative rate :math:`w` in (0, 1].

    Returns:
      :math:`p`, of the type and shape of ``q``.

    Example:
      >>> from calib_jax.logs.downsampling import kept_probability, recalibrate_probability
      >>> round(kept_probability(recalibrate_probability(0.3, 0.2), 0.2), 12)
      0.3
    """
    w = _required(negative_rate)
    q = _checked(q, "q", probabilities=True)
    return q / (q + (1.0 - q) * w)


def population_weights(labels: Any, negative_rate: float, weights: Any = None) -> Any:
    r"""Each kept row's weight in the full population: :math:`v_i / w` for a negative,
    :math:`v_i` for a positive (:math:`v_i` the row's own weight, 1 by default).

    Args:
      labels: the 0/1 labels (a NumPy array or anything NumPy reads).
      negative_rate: the kept-negative rate :math:`w` in (0, 1].
      weights: the rows' own weights, or ``None`` (every row weighs 1).

    Returns:
      ``(n,)`` float64 NumPy weights.

    Example:
      >>> from calib_jax.logs.downsampling import population_weights
      >>> population_weights([1, 0, 0], 0.25).tolist()
      [1.0, 4.0, 4.0]
    """
    import numpy as np

    w = _required(negative_rate)
    y = np.asarray(labels, np.float64)
    v = np.ones_like(y) if weights is None else np.asarray(weights, np.float64)
    return np.where(y == 0, v * (1.0 / w), v)


def weight_sql(label: str, negative_rate: float | None, weight: str | None = None, *,
               rate_column: str | None = None) -> str:
    """The SQL of :func:`population_weights`: ``weight`` (an expression, or 1) times ``1/w`` on
    rows whose ``label`` expression is 0, ``w`` the constant ``negative_rate`` or the row's
    ``rate_column`` expression. A missing label gives weight 1 (or ``weight``); a rate outside
    [:data:`MIN_RATE`, 1] (or missing) is read as 1 here, so the weight stays finite; such
    rows are dropped by their own checks.

    Args:
      label: the SQL expression of the label, as a double.
      negative_rate: the kept-negative rate :math:`w` in (0, 1], or ``None`` with ``rate_column``.
      weight: the SQL expression of the row's own weight, or ``None``.
      rate_column: the SQL expression of each row's rate (a double), instead of ``negative_rate``.

    Returns:
      The SQL expression.

    Example:
      >>> from calib_jax.logs.downsampling import weight_sql
      >>> weight_sql("y_in", 0.25)
      '(CASE WHEN y_in = 0 THEN 4.0 ELSE 1.0 END)'
    """
    if rate_column is not None:
        if negative_rate is not None:
            raise ValueError("give negative_rate or rate_column, not both")
        safe = f"(CASE WHEN {rate_column} >= {MIN_RATE!r} AND {rate_column} <= 1.0 THEN {rate_column} ELSE 1.0 END)"
        scale = f"(CASE WHEN {label} = 0 THEN 1.0 / {safe} ELSE 1.0 END)"
    else:
        scale = f"(CASE WHEN {label} = 0 THEN {repr(1.0 / _required(negative_rate))} ELSE 1.0 END)"
    return scale if weight is None else f"{weight} * {scale}"


def weight_items_sql(label: str, weight: str | None, negative_rate: float | None,
                     rate_column: str | None) -> list[str]:
    """The ``SELECT`` items of a query's row weight ``w_in`` (with a rate, the population weight of
    :func:`weight_sql`) and of the rate column ``r_in``, as every query of the engine reads them;
    none when the rows are unweighted.

    Args:
      label: the SQL expression of the label, as a double.
      weight: the SQL expression of the row's own weight (a double), or ``None``.
      negative_rate: the constant kept-negative rate, or ``None``.
      rate_column: the SQL expression of each row's rate (a double), or ``None``.

    Returns:
      The items (``"<expr> AS w_in"``, then ``"<expr> AS r_in"`` with a rate column).

    Example:
      >>> from calib_jax.logs.downsampling import weight_items_sql
      >>> weight_items_sql("y", None, 0.5, None)
      ['(CASE WHEN y = 0 THEN 2.0 ELSE 1.0 END) AS w_in']
      >>> weight_items_sql("y", "w", None, None)
      ['w AS w_in']
    """
    w = weight
    if negative_rate is not None or rate_column is not None:
        w = weight_sql(label, negative_rate, w, rate_column=rate_column)
    return ([] if w is None else [f"{w} AS w_in"]) + ([] if rate_column is None else [f"{rate_column} AS r_in"])


def rate_note(negative_rate: float | None, column: str | None = None) -> str:
    """The sentence a report states for a downsampled log (first of its verdicts; Markdown and
    HTML of the comparison and the slices).

    Args:
      negative_rate: the kept-negative rate :math:`w` in (0, 1], or ``None`` with ``column``.
      column: the column of each row's rate, instead of ``negative_rate``.

    Returns:
      The sentence.

    Example:
      >>> from calib_jax.logs.downsampling import rate_note
      >>> rate_note(0.1)[:66]
      'Negatives kept at rate 0.1: each kept non-click weighs 10 in every'
    """
    if column is not None:
        return (f"Negatives kept at the rate of column {column!r}, row by row: each kept non-click weighs 1/rate in "
                "every metric (the full population); the calibration tests and drift flags need one rate for all "
                "rows and are not computed.")
    w = _required(negative_rate)
    return (f"Negatives kept at rate {w:.6g}: each kept non-click weighs {1.0 / w:.6g} in every metric (the full "
            "population); the calibration tests run on the kept rows.")
