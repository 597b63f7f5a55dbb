"""Shared pieces of the metrics: input checks, the weighted mean, the default log clip and
the names of the gap norms.

Private module: the public surface is listed in :mod:`calib_jax.metrics`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from calib_jax._src import validation as V

_NORMS = ("l1", "l2", "max")


def _wmean(x: jax.Array, w: jax.Array | None) -> jax.Array:
    if w is None:
        return jnp.mean(x)
    return jnp.sum(w * x) / jnp.sum(w)


def _pl(probs, labels, weights):
    return V.check_sample(probs, labels, weights, scores_kind="probs")


def _ol(logits, labels, weights):
    return V.check_sample(logits, labels, weights)


def _po(probs, oracle, weights):
    return V.check_sample(probs, oracle, weights, scores_kind="probs", target_kind="oracle")


def _clip(p: jax.Array, eps: float | None) -> jax.Array:
    """``p`` clipped to ``[eps, 1 - eps]``; ``eps`` defaults to 1e-12 in float64, 1e-7 otherwise."""
    if eps is None:
        eps = 1e-12 if jnp.dtype(p.dtype) == jnp.float64 else 1e-7
    return jnp.clip(p, eps, 1.0 - eps)
