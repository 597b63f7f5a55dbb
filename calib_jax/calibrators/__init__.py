"""Calibrators: pure ``fit(logits, labels, *, weights=None, key=None, context=None,
**hyper) -> params`` / ``predict(params, logits, *, context=None) -> probs`` pairs, a
registry to loop over them, and a scikit-learn style wrapper.

Each submodule is one calibrator (``temperature.fit``, ``platt.predict``, ...);
``REGISTRY[name]`` holds its :class:`Calibrator` record.

Fits are fail-safe (``_failsafe``): a fit the data cannot support (too few events, not
converged, a map that would reverse the ranking, groups without support) is replaced by the
identity or a simpler calibrator, ``params.fallback`` records why
(``FALLBACK_REASONS[code]``) and eager calls warn with :class:`CalibrationFallbackWarning`.
"""

from calib_jax.calibrators import beta as beta
from calib_jax.calibrators import histogram as histogram
from calib_jax.calibrators import ilps as ilps
from calib_jax.calibrators import isotonic as isotonic
from calib_jax.calibrators import platt as platt
from calib_jax.calibrators import ranking_scores as ranking_scores
from calib_jax.calibrators import temperature as temperature
from calib_jax.calibrators._base import REGISTRY as REGISTRY
from calib_jax.calibrators._base import Calibrator as Calibrator
from calib_jax.calibrators._base import get as get
from calib_jax.calibrators._base import register as register
from calib_jax.calibrators._failsafe import REASONS as FALLBACK_REASONS
from calib_jax.calibrators._failsafe import CalibrationFallbackWarning as CalibrationFallbackWarning

__all__ = [
    "Calibrator",
    "REGISTRY",
    "register",
    "get",
    "SklearnCalibrator",
    "CalibrationFallbackWarning",
    "FALLBACK_REASONS",
    "temperature",
    "platt",
    "beta",
    "histogram",
    "isotonic",
    "ilps",
    "ranking_scores",
    "vad",
]

# SAG / VR-SAG, Neural Calibration and top-N (TNF) calibrators, and the MCGrad
# baseline (wraps the optional `mcgrad` package, imported on first fit).
from calib_jax.calibrators import multicalibration as multicalibration  # noqa: E402
from calib_jax.calibrators import neural_calibration as neural_calibration  # noqa: E402
from calib_jax.calibrators import sag as sag  # noqa: E402
from calib_jax.calibrators import top_n as top_n  # noqa: E402
from calib_jax.calibrators import vad as vad  # noqa: E402


def __getattr__(name: str):
    """``SklearnCalibrator`` on first use (it imports scikit-learn: ``pip install calib_jax[sklearn]``)."""
    if name == "SklearnCalibrator":
        import importlib

        try:
            module = importlib.import_module("calib_jax.calibrators.sklearn_api")
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("calib_jax.calibrators.SklearnCalibrator needs scikit-learn >= 1.6: "
                              "pip install 'calib_jax[sklearn]'") from exc
        return module.SklearnCalibrator
    raise AttributeError(f"module 'calib_jax.calibrators' has no attribute {name!r}")
