"""A scikit-learn style wrapper around any registered calibrator.

>>> import numpy as np
>>> cal = SklearnCalibrator("platt").fit(np.array([-2.0, -1.0, 1.0, 2.0, 0.5]),
...                                      np.array([0, 1, 0, 1, 1]))
>>> cal.predict_proba(np.array([0.0])).shape
(1, 2)

``X`` holds the uncalibrated scores, shape (n,) or (n, 1): logits by default, or
probabilities with ``input="prob"`` (converted to logits after clipping to
``[eps, 1 - eps]``, ``eps`` the float32 resolution; a probability of exactly 0 or 1 has no
finite logit).  The wrapper only converts arrays and stores the fitted params; the work is
done by the pure ``fit`` / ``predict`` of the calibrator.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from calib_jax.calibrators._base import get

__all__ = ["SklearnCalibrator"]

_EPS = float(np.finfo(np.float32).eps)


class SklearnCalibrator:
    """``SklearnCalibrator(name, input="logit", **hyper)`` with ``fit`` / ``predict_proba`` /
    ``predict``; ``hyper`` is passed to the calibrator's ``fit``.

    Attributes (after ``fit``): ``params_`` (the calibrator's params pytree),
    ``classes_ = array([0, 1])``.
    """

    def __init__(self, name: str, input: str = "logit", **hyper: Any) -> None:  # noqa: A002
        self.name = name
        self.input = input
        self.hyper = dict(hyper)

    # -- scikit-learn estimator protocol -------------------------------------------------
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Constructor arguments (scikit-learn ``get_params``)."""
        del deep
        return {"name": self.name, "input": self.input, **self.hyper}

    def set_params(self, **params: Any) -> SklearnCalibrator:
        """Update constructor arguments (scikit-learn ``set_params``)."""
        for k, v in params.items():
            if k in ("name", "input"):
                setattr(self, k, v)
            else:
                self.hyper[k] = v
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.hyper.items())
        return f"SklearnCalibrator({self.name!r}, input={self.input!r}{', ' if args else ''}{args})"

    # -- helpers ----------------------------------------------------------------------------
    def _scores(self, X: Any, name: str = "X") -> np.ndarray:
        x = np.asarray(X, dtype=np.float64)
        if x.ndim == 2 and x.shape[1] == 1:
            x = x[:, 0]
        if x.ndim != 1:
            raise ValueError(f"`{name}` must have shape (n,) or (n, 1), got {x.shape}")
        if self.input == "prob":
            if np.any(~np.isfinite(x)) or x.min() < 0 or x.max() > 1:
                raise ValueError(f"`{name}` must hold probabilities in [0, 1] (input='prob')")
            x = np.clip(x, _EPS, 1.0 - _EPS)
            x = np.log(x) - np.log1p(-x)
        elif self.input != "logit":
            raise ValueError(f"`input` must be 'logit' or 'prob', got {self.input!r}")
        return x

    # -- API ----------------------------------------------------------------------------------
    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> SklearnCalibrator:
        """Fit on scores ``X`` and labels ``y`` in {0, 1}."""
        cal = get(self.name)
        z = self._scores(X)
        labels = np.asarray(y, dtype=np.float64).ravel()
        self.params_ = cal.fit(z, labels, weights=sample_weight, **self.hyper)
        self.classes_ = np.array([0, 1])
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        """(n, 2) array ``[1 - p, p]`` of calibrated probabilities."""
        if not hasattr(self, "params_"):
            raise ValueError("this SklearnCalibrator is not fitted yet; call fit first")
        p = np.asarray(jax.device_get(get(self.name).predict(self.params_, self._scores(X))),
                       dtype=np.float64)
        return np.stack([1.0 - p, p], axis=1)

    def predict(self, X: Any) -> np.ndarray:
        """Hard labels ``1[p >= 0.5]``."""
        return (self.predict_proba(X)[:, 1] >= 0.5).astype(np.int64)
