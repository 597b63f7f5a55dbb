"""Input checks and the checked-call wrapper of the library's metrics, for your own metrics.

A metric written with these gets what every :mod:`calib_jax.metrics` function has:

* called eagerly on concrete arrays, bad input raises ``ValueError`` naming the argument
  (NaN, a probability outside [0, 1], a label other than 0/1, a negative weight, a group id
  out of range, a bad option);
* under ``jit`` / ``vmap`` / ``grad``, where values cannot raise, :func:`checked` makes
  every floating output NaN when a check fails, instead of a plausible number;
* an eager call of a :func:`checked` function runs as one compiled computation (with its
  checks), so it costs what a jitted call costs.

Shape and option checks (rank, length, ``n_groups``, ``norm``) raise while tracing too.
Inside the Monte Carlo engine (``calib_jax.montecarlo``) the checks are skipped
(``unchecked()``): its trial data are valid by construction.

Example, a metric of one's own (ECE on equal-width bins of the logit)::

    import jax.numpy as jnp
    from calib_jax import metrics, validation

    @validation.checked
    def logit_ece(probs, labels, *, n_bins=15, weights=None):
        p = validation.check_probs(probs)
        y = validation.check_labels(labels)
        validation.check_same_length(p.shape[0], labels=y)
        w = validation.check_weights(weights, p.shape[0])
        n_bins = validation.check_positive_int(n_bins, "n_bins")
        z = jnp.log(p) - jnp.log1p(-p)
        ids = jnp.clip(jnp.floor((z + 8.0) / 8.0 * n_bins), 0, n_bins - 1).astype(jnp.int32)
        return metrics.gce(p, y, ids, n_groups=n_bins, norm="l1", weights=w)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import jax

from calib_jax._src import validation as _V
from calib_jax._src.eager import compiled

__all__ = [
    "checked",
    "check_probs",
    "check_labels",
    "check_logits",
    "check_weights",
    "check_group_ids",
    "check_same_length",
    "check_condition",
    "check_positive_int",
    "check_choice",
]

F = TypeVar("F", bound=Callable[..., Any])


def checked(fn: F) -> F:
    """Decorate a metric so that its checks behave as the library's: an eager call runs one
    compiled computation and raises the checks' ``ValueError`` on bad input; under ``jit`` /
    ``vmap`` / ``grad`` a failed check makes every floating output NaN.

    Args:
      fn: a function of arrays and static options (strings, ints, floats, ``None``) whose
        checks are the ``check_*`` functions of this module. A signature with ``*args``,
        ``**kwargs`` or positional-only parameters is returned unwrapped.

    Returns:
      The wrapped function (same signature and docstring); its results equal ``fn``'s own
      under ``jax.jit``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax import validation
      >>> @validation.checked
      ... def mean_gap(probs, labels):
      ...     p, y = validation.check_probs(probs), validation.check_labels(labels)
      ...     return jnp.abs(jnp.mean(p) - jnp.mean(y))
      >>> round(float(mean_gap(jnp.array([0.2, 0.6]), jnp.array([0.0, 1.0]))), 4)
      0.1
      >>> mean_gap(jnp.array([0.2, 1.5]), jnp.array([0.0, 1.0]))
      Traceback (most recent call last):
      ...
      ValueError: `probs` must lie in [0, 1], got values in [0.2, 1.5]
      >>> float(jax.jit(mean_gap)(jnp.array([0.2, 1.5]), jnp.array([0.0, 1.0])))  # traced: NaN
      nan
    """
    return compiled(fn)


def check_probs(x: Any, name: str = "probs") -> jax.Array:
    """Probabilities: a 1-D, non-empty, finite array with values in [0, 1].

    Args:
      x: array-like of shape (n,).
      name: the argument's name in the error message.

    Returns:
      ``x`` as a floating JAX array (float32 unless x64 is enabled). Concrete values outside
      the contract raise ``ValueError`` naming ``name``; traced values are checked by
      :func:`checked` (NaN output). A wrong rank or an empty array raises either way.

    Example:
      >>> from calib_jax.validation import check_probs
      >>> check_probs([0.1, 0.9]).tolist()
      [0.10000000149011612, 0.8999999761581421]
      >>> check_probs([0.1, 1.2], "scores")
      Traceback (most recent call last):
      ...
      ValueError: `scores` must lie in [0, 1], got values in [0.1, 1.2]
    """
    return _V.check_probs(x, name)


def check_labels(x: Any, name: str = "labels") -> jax.Array:
    """Binary labels: a 1-D, non-empty array of 0s and 1s.

    Args:
      x: array-like of shape (n,) (bool, int or float).
      name: the argument's name in the error message.

    Returns:
      ``x`` as a floating array of 0.0 / 1.0. Another value raises ``ValueError`` naming
      ``name`` (eagerly) or makes a :func:`checked` call NaN (traced).

    Example:
      >>> from calib_jax.validation import check_labels
      >>> check_labels([0, 1, 1]).tolist()
      [0.0, 1.0, 1.0]
      >>> check_labels([0, 2])
      Traceback (most recent call last):
      ...
      ValueError: `labels` must be 0 or 1, found values such as [2.0]
    """
    return _V.check_labels(x, name)


def check_logits(x: Any, name: str = "logits") -> jax.Array:
    """Logits (scores on the real line): a 1-D, non-empty, finite array.

    Args:
      x: array-like of shape (n,).
      name: the argument's name in the error message.

    Returns:
      ``x`` as a floating array; NaN or inf raises ``ValueError`` naming ``name`` (eagerly)
      or makes a :func:`checked` call NaN (traced).

    Example:
      >>> import math
      >>> from calib_jax.validation import check_logits
      >>> check_logits([-2.0, 3.0]).tolist()
      [-2.0, 3.0]
      >>> check_logits([0.0, math.nan])
      Traceback (most recent call last):
      ...
      ValueError: `logits` contains 1 NaN/inf value(s)
    """
    return _V.check_logits(x, name)


def check_weights(x: Any, n: int, name: str = "weights") -> jax.Array | None:
    r"""Optional row weights: ``None``, or n finite non-negative values with a positive total,
    inside the range their dtype computes exactly.

    A metric forms products of two weights (AUC's pairs) and of two totals, so every positive
    weight must be at least :math:`2\sqrt{t}` and the total at most :math:`\sqrt{m}/2`, with
    :math:`t` and :math:`m` the smallest normal and the largest number of the dtype: about
    [2.2e-19, 9.2e18] in float32, [3e-154, 6.7e153] in float64
    (:func:`calib_jax._src.validation.weight_range`). Outside it a product underflows or
    overflows and AUC, ECE or Brier would come out 0, 0.5 or NaN; such weights are refused, not
    rescaled (multiply them all by one number: every metric depends on the weights only
    through their ratios).

    Args:
      x: ``None`` or array-like of shape (n,).
      n: the number of rows (the length of the scores).
      name: the argument's name in the error message.

    Returns:
      ``None`` for ``None``, else a floating array. A wrong length raises ``ValueError``
      always; a negative, non-finite or all-zero weight, a positive weight below the range or
      a total above it raises eagerly and makes a :func:`checked` call NaN when traced.

    Example:
      >>> from calib_jax.validation import check_weights
      >>> check_weights(None, 3) is None, check_weights([1, 0, 2], 3).tolist()
      (True, [1.0, 0.0, 2.0])
      >>> check_weights([1.0, -1.0], 2)
      Traceback (most recent call last):
      ...
      ValueError: `weights` must be non-negative, got minimum -1
      >>> check_weights([1.0, 1e-30], 2)  # in float32, 1e-30 * 1e-30 underflows to 0
      Traceback (most recent call last):
      ...
      ValueError: `weights` holds a positive weight 1e-30, below 2.17e-19: float32 products of two such weights ...
    """
    return _V.check_weights(x, n, name)


def check_group_ids(x: Any, n: int, n_groups: int, name: str = "groups") -> jax.Array:
    """Hard group ids: n integers (or integer-valued floats) in ``[0, n_groups)``.

    Args:
      x: array-like of shape (n,).
      n: the number of rows.
      n_groups: the number of groups K (static).
      name: the argument's name in the error message.

    Returns:
      The ids as an int32 array. An id out of range or not an integer raises ``ValueError``
      naming ``name`` (eagerly) or makes a :func:`checked` call NaN (traced); a wrong shape
      raises always.

    Example:
      >>> from calib_jax.validation import check_group_ids
      >>> check_group_ids([0, 2, 1], 3, n_groups=3).tolist()
      [0, 2, 1]
      >>> check_group_ids([0, 3], 2, n_groups=3, name="segment")
      Traceback (most recent call last):
      ...
      ValueError: `segment` ids must lie in [0, 3), got range [0, 3]
    """
    return _V.check_hard_groups(x, n, n_groups, name)


def check_same_length(n: int, **arrays: Any) -> None:
    """Every given array (by keyword: its name in the message) has leading dimension ``n``.

    Args:
      n: the expected length (of the first argument).
      **arrays: the arrays to compare, by their argument names; ``None`` is skipped.

    Returns:
      ``None``; raises ``ValueError`` naming the first array of another length (a shape
      check: it raises while tracing too).

    Example:
      >>> import numpy as np
      >>> from calib_jax.validation import check_same_length
      >>> check_same_length(3, labels=np.zeros(3), weights=None)
      >>> check_same_length(3, labels=np.zeros(2))
      Traceback (most recent call last):
      ...
      ValueError: `labels` has length 2, expected 3 (length of the first argument)
    """
    _V.check_same_length(n, **arrays)


def check_condition(bad: Any, message: str) -> None:
    """A check of one's own: ``bad`` (a boolean array) must be false everywhere.

    Args:
      bad: a boolean (array); true marks invalid input.
      message: the ``ValueError`` message (name the argument in it).

    Returns:
      ``None``. On concrete values a true ``bad`` raises ``ValueError(message)``; under
      tracing it is recorded, so a :func:`checked` call returns NaN.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.validation import check_condition
      >>> z = jnp.array([0.5, -1.0])
      >>> check_condition(z < -5.0, "`z` must be >= -5")
      >>> check_condition(z < 0.0, "`z` must be >= 0")
      Traceback (most recent call last):
      ...
      ValueError: `z` must be >= 0
    """
    _V.check_condition(bad, message)


def check_positive_int(value: Any, name: str) -> int:
    """A static size option (a number of bins, groups, steps, ...): a Python int from 1 to
    2**31 - 1 (JAX counts in int32).

    Args:
      value: the option's value.
      name: the option's name in the error message.

    Returns:
      ``int(value)``; anything else raises ``ValueError`` naming ``name`` (while tracing
      too: sizes are static).

    Example:
      >>> from calib_jax.validation import check_positive_int
      >>> check_positive_int(15, "n_bins")
      15
      >>> check_positive_int(0, "n_bins")
      Traceback (most recent call last):
      ...
      ValueError: `n_bins` must be >= 1, got 0
    """
    return _V.check_positive_int(value, name)


def check_choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    """A static string option from a fixed set.

    Args:
      value: the option's value.
      name: the option's name in the error message.
      choices: the allowed strings.

    Returns:
      ``str(value)``; another value raises ``ValueError`` naming ``name`` and the choices.

    Example:
      >>> from calib_jax.validation import check_choice
      >>> check_choice("l1", "norm", ("l1", "l2"))
      'l1'
      >>> check_choice("l3", "norm", ("l1", "l2"))
      Traceback (most recent call last):
      ...
      ValueError: `norm` must be one of ('l1', 'l2'), got 'l3'
    """
    return _V.check_choice(value, name, choices)
