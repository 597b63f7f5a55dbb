"""The calibrator protocol and the registry.

A calibrator is a pair of pure functions::

    params = fit(logits, labels, *, weights=None, key=None, context=None, **hyper)
    probs  = predict(params, logits, *, context=None)

``params`` is a pytree.  ``context`` is an optional dict of side information
(``"embedding"`` (n, m), ``"fields"`` (n, F) int, ``"ranks"`` (n,) int); calibrators that do
not need it ignore it.  The registry maps a name to a :class:`Calibrator` so experiments
can loop over ``REGISTRY.items()``.
"""

from __future__ import annotations

import difflib
import functools
import warnings
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, TypeVar

import jax
import numpy as np

__all__ = ["Calibrator", "REGISTRY", "register", "get", "public_entry"]

#: the side information a calibrator may take, always inside ``context=``
CONTEXT_KEYS = ("embedding", "fields", "ranks")
_F = TypeVar("_F", bound=Callable[..., Any])


class Calibrator(NamedTuple):
    """A named fit/predict pair.

    Attributes:
      name: registry key.
      fit: ``fit(logits, labels, *, weights=None, key=None, context=None, **hyper) -> params``.
      predict: ``predict(params, logits, *, context=None) -> probs``.
      monotone: True when the map logits -> probs is non-decreasing (AUC-preserving).
      needs: context keys the calibrator requires (e.g. ``("embedding",)``).
      defaults: default hyper-parameters passed to ``fit``.
    """

    name: str
    fit: Callable[..., Any]
    predict: Callable[..., Any]
    monotone: bool = True
    needs: tuple[str, ...] = ()
    defaults: Mapping[str, Any] = {}


REGISTRY: dict[str, Calibrator] = {}


def register(cal: Calibrator) -> Calibrator:
    """Add ``cal`` to :data:`REGISTRY` (name must be unique) and return it.

    Registering the same record twice is a no-op; a *different* record under a name already
    taken raises. Plain Python (a dict insertion): not jit-able, and nothing to trace.

    Args:
      cal: a :class:`Calibrator` record; ``cal.name`` becomes its registry key.

    Returns:
      ``cal`` itself, so that a module can write ``CALIBRATOR = register(Calibrator(...))``.

    Raises:
      ValueError: when another record is already registered under ``cal.name``.

    Example:
      >>> import jax
      >>> from calib_jax.calibrators import REGISTRY, Calibrator, get, register
      >>> def fit(logits, labels, *, weights=None, key=None, context=None):
      ...     return None                                  # nothing to learn
      >>> def predict(params, logits, *, context=None):
      ...     return jax.nn.sigmoid(logits)                # the identity on the logit scale
      >>> cal = register(Calibrator(name="doc_identity", fit=fit, predict=predict))
      >>> get("doc_identity") is cal
      True
      >>> register(Calibrator(name="doc_identity", fit=fit, predict=predict))  # a new record, same name
      Traceback (most recent call last):
      ...
      ValueError: calibrator name 'doc_identity' is already registered
      >>> del REGISTRY["doc_identity"]                     # leave the registry as it was
    """
    if cal.name in REGISTRY and REGISTRY[cal.name] is not cal:
        raise ValueError(f"calibrator name {cal.name!r} is already registered")
    REGISTRY[cal.name] = cal
    return cal


def get(name: str) -> Calibrator:
    """Look up a calibrator by name with a helpful error (the closest known names first).

    Plain Python (a dict lookup): not jit-able, and nothing to trace.

    Args:
      name: a registry key, e.g. ``"temperature"``, ``"platt"``, ``"beta"``,
        ``"histogram_binning"``, ``"isotonic"``, ``"ilps"``, ``"sag_ts"``, ``"vrsag_ps"``,
        ``"neural_calibration"``, ``"top_n"``, ``"mcgrad"`` (``sorted(REGISTRY)`` lists them).

    Returns:
      The :class:`Calibrator` record registered under ``name``.

    Raises:
      ValueError: for an unknown name (or a non-string); the message suggests up to three
        close names and lists every known one.

    Example:
      >>> from calib_jax.calibrators import get
      >>> cal = get("platt")
      >>> cal.name, cal.monotone, cal.needs
      ('platt', True, ())
      >>> get("vrsag_ts").needs                  # VR-SAG groups rows by the backbone embedding
      ('embedding',)
      >>> get("plat")
      Traceback (most recent call last):
      ...
      ValueError: unknown calibrator 'plat'; did you mean 'platt'? known: [...]
    """
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        close = difflib.get_close_matches(str(name), list(REGISTRY), n=3, cutoff=0.5)
        hint = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
        raise ValueError(f"unknown calibrator {name!r}; {hint}known: {sorted(REGISTRY)}") from None


def _looks_like_probabilities(logits: Any) -> bool:
    """True for a concrete 1-D array of 20+ numbers, all in [0, 1], not all equal (only the
    minimum and the maximum leave the device)."""
    if isinstance(logits, jax.core.Tracer):
        return False
    if isinstance(logits, jax.Array):
        if logits.ndim != 1 or logits.size < 20 or not jax.numpy.issubdtype(logits.dtype, jax.numpy.number):
            return False
        # evaluated now even inside a user's jit, where a closed-over concrete array would
        # otherwise give traced min / max
        with jax.ensure_compile_time_eval():
            lo, hi = (float(v) for v in jax.device_get((jax.numpy.min(logits), jax.numpy.max(logits))))
    else:
        try:
            x = np.asarray(logits)
        except (TypeError, ValueError):
            return False
        if x.dtype.kind not in "fiu" or x.ndim != 1 or x.size < 20:
            return False
        lo, hi = float(np.min(x)), float(np.max(x))
    return 0.0 <= lo < hi <= 1.0


def public_entry(fn: _F) -> _F:
    """Decorate a calibrator's public ``fit`` / ``predict``: side information given as a
    keyword (``embedding=``, ``fields=``) gets a ``ValueError`` saying it goes in ``context``,
    and a ``fit`` whose logits all lie in [0, 1] warns that they look like probabilities."""
    is_fit = fn.__name__.startswith("fit")

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        misplaced = [k for k in kwargs if k in CONTEXT_KEYS]
        if misplaced:
            k = misplaced[0]
            raise ValueError(f"`{k}` is side information: pass it as context={{{k!r}: ...}}, "
                             f"not as the keyword {k}=")
        if is_fit and args and _looks_like_probabilities(args[0]):
            from calib_jax.calibrators._failsafe import caller_stacklevel

            warnings.warn("every logit passed to the calibrator lies in [0, 1]: these look like "
                          "probabilities; calibrators take logits log(p / (1 - p)) "
                          "(SklearnCalibrator(input='prob') converts them)", UserWarning,
                          stacklevel=caller_stacklevel())
        return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
