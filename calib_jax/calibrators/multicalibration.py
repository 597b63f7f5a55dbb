r"""MCGrad, the production multicalibration method, as a baseline calibrator.

MCGrad (Tax, Perini, Linder, Haimovich, Karamshuk, Okati, Vojnovic & Apostolopoulos, "MCGrad:
Multicalibration at Web Scale", KDD 2026, arXiv:2509.19884) boosts the logit of the model it
calibrates: round :math:`t` fits gradient-boosted trees :math:`h_t` on the features *and* the
current prediction to the log-loss gradient, so that after :math:`T` rounds

.. math:: \tilde p_i = \sigma\bigl(z_i + \textstyle\sum_{t \le T} \alpha_t h_t(x_i, z^{(t-1)}_i)\bigr),

with :math:`T` chosen by cross-validated early stopping and :math:`\alpha_t` an un-shrinking
scale (their §3). Trees that split on segment features find the segments whose calibration
is off, which is what multicalibration asks for (every segment calibrated, their eq. 1).

This module wraps the ``mcgrad`` package (``pip install "calib_jax[mcgrad]"``; LightGBM and
PyTorch, so kept out of the base install) in the calibrator protocol of
:mod:`calib_jax.calibrators._base`. It is not jit-able: fit and predict run on the host.

Features (``context``): the categorical ``"fields"`` (n, F) are MCGrad's segment features and
the ``"embedding"`` (n, m) its numerical features, by default both (``features="both"``), so it
sees what SAG sees (the embedding) plus what Field-ECE / Neural Calibration see (the fields).

Fail-safe (:mod:`calib_jax.calibrators._failsafe`): with fewer than ``min_events`` effective
rows in the minority class the fit is the identity (``fallback = TOO_FEW_EVENTS``), with a
:class:`~calib_jax.calibrators._failsafe.CalibrationFallbackWarning`; MCGrad's own early
stopping already returns the input unchanged when no round improves the held-out log loss.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import numpy as np

import calib_jax.calibrators._failsafe as F
from calib_jax._src.validation import check_logits
from calib_jax.calibrators._base import Calibrator, public_entry, register
from calib_jax.calibrators._common import ArrayLike, Context, KeyArg, check_number_option

__all__ = ["MCGradParams", "available", "fit", "predict", "CALIBRATOR"]

#: ``features`` values: which context columns MCGrad may split on
FEATURES = ("both", "fields", "embedding")
_PRED, _LABEL, _WEIGHT = "prediction", "label", "weight"


class MCGradParams(NamedTuple):
    """A fitted MCGrad model (host object) with its feature layout.

    Attributes:
      model: the fitted ``mcgrad.methods.MCGrad`` (``None`` for the identity fallback).
      features: which context columns it uses (one of :data:`FEATURES`).
      n_fields / n_embedding: the context widths it was fitted on.
      n_rounds: boosting rounds kept by early stopping (0 for the identity).
      fallback: fail-safe code (``_failsafe.REASONS``).

    It pickles (a study's checkpoint holds fitted calibrators) through ``mcgrad``'s own JSON
    serialisation of the model: the fitted model keeps an early-stopping metric that is a
    class local to a function, which ``pickle`` refuses. The boosters travel as LightGBM model
    text (full precision), so the unpickled model predicts the same bits (tested).
    """

    model: Any
    features: str
    n_fields: int
    n_embedding: int
    n_rounds: int
    fallback: int

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        model = None if self.model is None else self.model.serialize()
        return _unpickle_params, (model, *self[1:])


def _unpickle_params(model: str | None, *rest: Any) -> MCGradParams:
    """:class:`MCGradParams` from its pickled form (the model as ``mcgrad``'s JSON)."""
    if model is not None:
        from mcgrad.methods import MCGrad

        model = MCGrad.deserialize(model)
    return MCGradParams(model, *rest)


def available() -> bool:
    """True when the optional ``mcgrad`` package can be imported.

    :func:`fit` needs it (``pip install "calib_jax[mcgrad]"``) unless it falls back to the
    identity; use this to skip MCGrad where it is not installed. Runs on the host.

    Returns:
      ``bool``: whether ``import mcgrad.methods`` succeeds.

    Example:
      >>> from calib_jax.calibrators.multicalibration import available
      >>> isinstance(available(), bool)   # True or False, depending on the installation
      True
    """
    try:
        import mcgrad.methods  # noqa: F401
    except ImportError:
        return False
    return True


def _frame(probs: np.ndarray, context: Context, features: str, n_fields: int, n_embedding: int,
           *, labels: np.ndarray | None = None, weights: np.ndarray | None = None):
    import pandas as pd

    cols: dict[str, Any] = {_PRED: probs.astype(np.float64)}
    cat, num = [], []
    ctx = dict(context or {})
    if features in ("both", "fields") and n_fields:
        fields = np.asarray(ctx["fields"])
        if fields.ndim != 2 or fields.shape[1] != n_fields:
            raise ValueError(f"`context['fields']` must have shape (n, {n_fields}), got {fields.shape}")
        for j in range(n_fields):
            cols[f"field_{j}"] = fields[:, j].astype(np.int64)
            cat.append(f"field_{j}")
    if features in ("both", "embedding") and n_embedding:
        emb = np.asarray(ctx["embedding"], np.float32)
        if emb.ndim != 2 or emb.shape[1] != n_embedding:
            raise ValueError(f"`context['embedding']` must have shape (n, {n_embedding}), got {emb.shape}")
        for j in range(n_embedding):
            cols[f"emb_{j}"] = emb[:, j]
            num.append(f"emb_{j}")
    if labels is not None:
        cols[_LABEL] = labels.astype(np.float64)
    if weights is not None:
        cols[_WEIGHT] = weights.astype(np.float64)
    return pd.DataFrame(cols), cat, num


def _seed(key: KeyArg) -> int:
    if key is None:
        return 42
    try:
        data = jax.random.key_data(key)
    except TypeError:
        data = key
    return int(np.asarray(data, np.uint32).ravel()[-1])


def _widths(context: Context, features: str) -> tuple[int, int]:
    if features not in FEATURES:
        raise ValueError(f"`features` must be one of {FEATURES}, got {features!r}")
    ctx = dict(context or {})
    need = {"both": ("fields", "embedding"), "fields": ("fields",), "embedding": ("embedding",)}[features]
    missing = [k for k in need if k not in ctx or ctx[k] is None]
    if missing:
        raise ValueError(f"`context` lacks {missing} needed by MCGrad with features={features!r}")
    n_f = int(np.asarray(ctx["fields"]).shape[1]) if "fields" in need else 0
    n_e = int(np.asarray(ctx["embedding"]).shape[1]) if "embedding" in need else 0
    return n_f, n_e


@public_entry
def fit(logits: ArrayLike, labels: ArrayLike, *, weights: ArrayLike | None = None, key: KeyArg = None,
        context: Context = None, features: str = "both", min_events: float = F.MIN_EVENTS,
        hyper: Mapping[str, Any] | None = None) -> MCGradParams:
    r"""Fit MCGrad on ``(logits, labels)`` with the context columns as segment features.

    Needs the optional ``mcgrad`` package (``pip install "calib_jax[mcgrad]"``; see
    :func:`available`), except when the fit falls back to the identity (too few events).

    Args:
      logits: (n,) model logits :math:`z_i`, real.
      labels: (n,) labels in {0, 1}.
      weights: optional (n,) non-negative row weights.
      key: seeds MCGrad's folds and LightGBM (``random_state``; 42, the package's default,
        when ``None``). LightGBM runs with ``deterministic=True``, so a fit is reproducible.
      context: ``{"fields": (n, F) int, "embedding": (n, m)}``, as :data:`features` needs.
      features: ``"both"`` (default), ``"fields"`` or ``"embedding"``.
      min_events: minimum effective minority-class count; below it the fit is the identity.
      hyper: keyword arguments of ``mcgrad.methods.MCGrad`` (default: the package's tuned
        defaults, 5-fold early stopping).

    Returns:
      :class:`MCGradParams` (a host object: the fitted model, the feature layout, the number
      of boosting rounds kept and the ``fallback`` code). Runs on the host (pandas, LightGBM,
      PyTorch); not jit-able. Invalid input (NaN or inf logits, labels other than 0/1,
      negative or non-finite weights, a context without the columns ``features`` needs, a
      bad ``features``) raises ``ValueError``; a missing ``mcgrad`` raises ``ImportError``.
      With too few events an eager fit warns with
      :class:`~calib_jax.calibrators.CalibrationFallbackWarning` and returns the identity.

    Example:
      >>> import warnings
      >>> import numpy as np
      >>> from calib_jax.calibrators import multicalibration as mc
      >>> rng = np.random.default_rng(0)
      >>> z = rng.normal(size=500).astype(np.float32)
      >>> y = (rng.random(500) < 1 / (1 + np.exp(-z))).astype(np.float32)
      >>> ctx = {"fields": rng.integers(0, 3, (500, 2)), "embedding": rng.normal(size=(500, 4))}
      >>> params = mc.fit(z, y, context=ctx)  # doctest: +SKIP
      >>> params.fallback, params.n_rounds >= 0  # doctest: +SKIP
      (0, True)

      Too few events fall back to the identity before ``mcgrad`` is imported:

      >>> with warnings.catch_warnings(record=True) as caught:
      ...     warnings.simplefilter("always")
      ...     ident = mc.fit(z[:8], y[:8], context={k: v[:8] for k, v in ctx.items()})
      >>> [w.category.__name__ for w in caught], ident.model, ident.fallback  # 1: too few events
      (['CalibrationFallbackWarning'], None, 1)
    """
    z = np.asarray(check_logits(logits, "logits"), np.float64)
    y = np.asarray(labels, np.float64)
    if y.shape != z.shape:
        raise ValueError(f"`labels` must have the shape of `logits` {z.shape}, got {y.shape}")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("`labels` must be 0 or 1")
    w = np.ones_like(z) if weights is None else np.asarray(weights, np.float64)
    if w.shape != z.shape or np.any(w < 0) or not np.all(np.isfinite(w)):
        raise ValueError(f"`weights` must be finite, non-negative and of shape {z.shape}")
    n_f, n_e = _widths(context, features)
    check_number_option(min_events, "min_events", "a finite number >= 0", lambda v: 0.0 <= v < np.inf)
    if hyper is not None and not isinstance(hyper, Mapping):
        raise ValueError(f"`hyper` must be a mapping of MCGrad's keyword arguments, got {type(hyper).__name__}")
    events = min(float(np.sum(w * y)), float(np.sum(w * (1 - y))))
    if events < max(min_events, 1e-12):
        F.warn_if_fallback("mcgrad", jax.numpy.asarray(F.TOO_FEW_EVENTS), fallback="the identity")
        return MCGradParams(None, features, n_f, n_e, 0, F.TOO_FEW_EVENTS)
    try:
        from mcgrad.methods import MCGrad
    except ImportError as err:
        raise ImportError("MCGrad needs the optional `mcgrad` package: pip install 'calib_jax[mcgrad]'") from err
    probs = 1.0 / (1.0 + np.exp(-z))
    df, cat, num = _frame(probs, context, features, n_f, n_e, labels=y, weights=w)
    model = MCGrad(**{"random_state": _seed(key), **dict(hyper or {})})
    model.fit(df, prediction_column_name=_PRED, label_column_name=_LABEL, weight_column_name=_WEIGHT,
              categorical_feature_column_names=cat or None, numerical_feature_column_names=num or None)
    rounds = len(getattr(model, "mr", []) or [])
    return MCGradParams(model, features, n_f, n_e, rounds, F.OK)


@public_entry
def predict(params: MCGradParams, logits: ArrayLike, *, context: Context = None) -> np.ndarray:
    r"""Calibrated probabilities of the fitted MCGrad model (the identity after a fallback).

    Needs the optional ``mcgrad`` package (``pip install "calib_jax[mcgrad]"``) for a fitted
    model; the identity fallback (``params.model is None``) does not.

    Args:
      params: :class:`MCGradParams` from :func:`fit`.
      logits: (n,) model logits, real.
      context: the context columns the fit used (``"fields"`` (n, F) int and/or
        ``"embedding"`` (n, m), as ``params.features`` says); unused after a fallback.

    Returns:
      (n,) float32 NumPy array of probabilities in [0, 1] (:math:`\sigma(z)` after a
      fallback). Runs on the host; not jit-able. NaN or inf logits, or context columns of the
      wrong width, raise ``ValueError``.

    Example:
      >>> import numpy as np
      >>> from calib_jax.calibrators import multicalibration as mc
      >>> rng = np.random.default_rng(0)
      >>> z = rng.normal(size=500).astype(np.float32)
      >>> y = (rng.random(500) < 1 / (1 + np.exp(-z))).astype(np.float32)
      >>> ctx = {"fields": rng.integers(0, 3, (500, 2)), "embedding": rng.normal(size=(500, 4))}
      >>> params = mc.fit(z, y, context=ctx)  # doctest: +SKIP
      >>> mc.predict(params, z, context=ctx).shape  # doctest: +SKIP
      (500,)
      >>> ident = mc.MCGradParams(model=None, features="both", n_fields=2, n_embedding=4, n_rounds=0,
      ...                         fallback=1)          # the identity fallback: no mcgrad needed
      >>> [round(float(p), 4) for p in mc.predict(ident, np.array([0.0, 1.0]))]  # sigma(z)
      [0.5, 0.7311]
    """
    z = np.asarray(check_logits(logits, "logits"), np.float64)
    probs = 1.0 / (1.0 + np.exp(-z))
    if params.model is None:
        return probs.astype(np.float32)
    df, cat, num = _frame(probs, context, params.features, params.n_fields, params.n_embedding)
    out = params.model.predict(df, prediction_column_name=_PRED, categorical_feature_column_names=cat or None,
                               numerical_feature_column_names=num or None)
    return np.clip(np.asarray(out, np.float32), 0.0, 1.0)


CALIBRATOR = register(Calibrator("mcgrad", fit, predict, monotone=False, needs=("fields", "embedding"),
                                 defaults={"features": "both"}))
