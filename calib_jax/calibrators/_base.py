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

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

__all__ = ["Calibrator", "REGISTRY", "register", "get"]


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
    """Add ``cal`` to :data:`REGISTRY` (name must be unique) and return it."""
    if cal.name in REGISTRY and REGISTRY[cal.name] is not cal:
        raise ValueError(f"calibrator name {cal.name!r} is already registered")
    REGISTRY[cal.name] = cal
    return cal


def get(name: str) -> Calibrator:
    """Look up a calibrator by name with a helpful error."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown calibrator {name!r}; known: {sorted(REGISTRY)}") from None
