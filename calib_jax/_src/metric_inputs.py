"""Shared pieces of the metrics and of the inference layer: input checks, the weighted mean,
the default log clip and the names of the gap norms.

Private plumbing (``calib_jax._src``): the public surface is listed in :mod:`calib_jax.metrics`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax._src import validation as V

GAP_NORMS = ("l1", "l2", "max")


def weighted_mean(x: jax.Array, w: jax.Array | None) -> jax.Array:
    if w is None:
        return jnp.mean(x)
    return jnp.sum(w * x) / jnp.sum(w)


def check_probs_labels(probs, labels, weights):
    return V.check_sample(probs, labels, weights, scores_kind="probs")


def check_logits_labels(logits, labels, weights):
    return V.check_sample(logits, labels, weights)


def check_probs_oracle(probs, oracle, weights):
    return V.check_sample(probs, oracle, weights, scores_kind="probs", target_kind="oracle")


def clip_probs(p: jax.Array, eps: float | None) -> jax.Array:
    """``p`` clipped to ``[eps, 1 - eps]``; ``eps`` defaults to 1e-12 in float64, 1e-7 otherwise."""
    if eps is None:
        eps = 1e-12 if jnp.dtype(p.dtype) == jnp.float64 else 1e-7
    return jnp.clip(p, eps, 1.0 - eps)


def check_eps(eps: float | None, name: str = "eps") -> float | None:
    """A log-loss clip in (0, 1/2) (``None``: the dtype's default). Concrete: ``ValueError``
    naming the argument (NaN fails the comparison); traced: the checked call's output is NaN."""
    if eps is None:
        return None
    if V.is_concrete(eps):
        e = np.asarray(jax.device_get(eps), np.float64)
        if e.shape != () or not 0.0 < float(e) < 0.5:
            raise ValueError(f"`{name}` must be a number in (0, 0.5), got {eps!r}")
        return eps
    V.check_condition(~((eps > 0.0) & (eps < 0.5)), f"`{name}` must be a number in (0, 0.5)")
    return eps
