r"""The groups of SAG / VR-SAG: the heads' memberships, the reference protocol's second stage
and the fail-safe support checks that both protocols run after a fit.

"Calibration is Grouping" (VR-SAG; anonymous authors, under review), §2.2-2.4 and App. F, and
the public code its App. I.1 says it modified (ThyrixYang/group_calibration,
``methods/group_calibration.py``). A head maps the standardised embedding ``zs`` (n, m) of
every row to its group logits :math:`h_i = z_i^\top W_p + b_p` (K of them per partition p):

* **memberships** (eq. 3): soft :math:`q_{ik} = \mathrm{softmax}(h_i)_k` (the paper's
  protocol), or hard, all of a row's weight on its arg-max group (the reference protocol at
  serving);
* **second stage** (reference protocol): per partition, every row of the hold-out split is
  put in its arg-max group and one base calibrator per (partition, group) is fitted on those
  rows, temperature scaling (TS) or Platt scaling (PS) by exact Newton fits;
* **fail-safe**: a (partition, group) with fewer than ``min_support`` effective rows, or fewer
  than ``min_events`` effective clicks or non-clicks, in the split its calibrator was fitted
  on takes the global calibrator of the same variant (fitted on every row of that split);
  a group's own base-calibrator fallback is kept. :mod:`calib_jax.calibrators.sag` says why
  this departs from the paper and the reference.

:mod:`calib_jax.calibrators.sag` validates the input and calls these on arrays.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp

import calib_jax.calibrators._failsafe as F
from calib_jax._src.precision import MATMUL
from calib_jax.calibrators import platt as _platt
from calib_jax.calibrators import temperature as _temperature

__all__ = ["NEG", "head_logits", "log_memberships", "group_checks", "hard_base_fits", "checked", "refit"]

#: log of a hard zero membership (finite: keeps logsumexp and its gradient clean)
NEG = -1e30


def head_logits(W: jax.Array, b: jax.Array, zs: jax.Array) -> jax.Array:
    r"""One partition's group logits :math:`h = z_s W + b`, (n, K).

    Args:
      W: (m, K) head weights.
      b: (K,) head bias.
      zs: (n, m) standardised embedding.

    Returns:
      (n, K) logits; the matrix product at :data:`calib_jax._src.precision.MATMUL`.

    Example:
      >>> import jax.numpy as jnp
      >>> head_logits(jnp.eye(2), jnp.array([0.0, 1.0]), jnp.array([[2.0, 0.0]])).tolist()
      [[2.0, 1.0]]
    """
    return jnp.matmul(zs, W, precision=MATMUL) + b[None, :]


def log_memberships(W: jax.Array, b: jax.Array, zs: jax.Array, hard: Any) -> jax.Array:
    r"""Log memberships of one partition (eq. 3), (n, K): ``log_softmax`` of the head logits,
    or 0 on the arg-max group and :data:`NEG` elsewhere when ``hard``.

    Args:
      W, b, zs: as :func:`head_logits`.
      hard: a Python bool (one branch traced: the fit) or a traced bool (both, selected:
        the predictions of a params whose protocol is data).

    Returns:
      (n, K) log memberships.

    Example:
      >>> import jax.numpy as jnp
      >>> lq = log_memberships(jnp.eye(2), jnp.zeros(2), jnp.array([[2.0, 0.0]]), True)
      >>> lq[0, 0].item(), lq[0, 1].item() < -1e29
      (0.0, True)
    """
    h = head_logits(W, b, zs)
    if hard is False:
        return jax.nn.log_softmax(h, axis=1)
    onehot = jax.nn.one_hot(jnp.argmax(h, axis=1), h.shape[1], dtype=h.dtype)
    hard_lq = jnp.where(onehot > 0, 0.0, NEG)
    if hard is True:
        return hard_lq
    return jnp.where(hard, hard_lq, jax.nn.log_softmax(h, axis=1))


def _global_params(o, y, v, use_beta: bool, min_events):
    """(log tau, beta, code) of the global calibrator of the variant (fail-safe itself)."""
    if use_beta:
        g = _platt._fit(o, y, v, 12, False, min_events)
        return -jnp.log(g.a), g.b, g.fallback
    g = _temperature._fit(o, y, v, 12, min_events)
    return -jnp.log(g.beta), jnp.zeros_like(g.beta), g.fallback


@functools.partial(jax.jit, static_argnames=("use_beta",))
def group_checks(q, o, y, v, min_support, min_events, *, use_beta: bool):
    r"""Per (partition, group) support checks on memberships ``q`` (P, n, K), and the global
    calibrator that failing groups fall back to.

    A group passes when :math:`\sum_i v_i q_{ik} / \bar v \ge` ``min_support`` and
    :math:`\min(\sum_i v_i q_{ik} y_i, \sum_i v_i q_{ik} (1 - y_i)) / \bar v \ge` ``min_events``.

    Args:
      q: (P, n, K) memberships.
      o, y, v: (n,) logits, labels, weights of the split the group calibrators were fitted on.
      min_support, min_events: thresholds (scalars).
      use_beta: Platt scaling (PS) as the global calibrator, else temperature scaling (TS).

    Returns:
      ``(code, g_log_tau, g_beta)``: (P, K) int32 codes (``F.OK`` or ``F.TOO_FEW_EVENTS``), the
      global calibrator's log temperature and bias (scalars).

    Example:
      >>> import jax.numpy as jnp
      >>> q = jnp.array([[[1.0, 0.0]] * 40 + [[0.0, 1.0]] * 2])        # P = 1, n = 42, K = 2
      >>> y = jnp.array([0.0, 1.0] * 21)
      >>> code, _, _ = group_checks(q, jnp.zeros(42), y, jnp.ones(42), 10.0, 5.0, use_beta=False)
      >>> code.tolist()  # group 1 has two rows
      [[0, 1]]
    """
    vq = v[None, :, None] * q
    support = jnp.sum(vq, axis=1) / jnp.mean(v)
    events = jnp.minimum(jnp.sum(vq * y[None, :, None], axis=1),
                         jnp.sum(vq * (1.0 - y)[None, :, None], axis=1)) / jnp.mean(v)
    ok = (support >= min_support) & (events >= jnp.maximum(min_events, 1e-12))
    code = jnp.where(ok, F.OK, F.TOO_FEW_EVENTS).astype(jnp.int32)
    g_log_tau, g_beta, _ = _global_params(o, y, v, use_beta, min_events)
    return code, g_log_tau, g_beta


@functools.partial(jax.jit, static_argnames=("use_beta",))
def hard_base_fits(W, b, o, y, zs, v, min_events, *, use_beta: bool):
    r"""The reference protocol's second stage: one base calibrator per (partition, arg-max
    group), fitted on the rows of the hold-out split in that group.

    Row i is in group :math:`g_p(i) = \arg\max_k (z_i^\top W_p + b_p)_k` of partition p; the
    base calibrator of (p, k) is temperature scaling, or Platt scaling with ``use_beta``,
    fitted on the weights :math:`v_i [g_p(i) = k]` (each fail-safe itself).

    Args:
      W, b: (P, m, K) and (P, K) heads.
      o, y, zs, v: the hold-out split's logits, labels, standardised embedding, weights.
      min_events: the base fits' fail-safe threshold.
      use_beta: Platt scaling per group, else temperature scaling.

    Returns:
      ``(log_tau, beta, code)``, each (P, K): :math:`-\log` of the fitted slope, the bias
      (0 for TS) and the base fit's fallback code.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> z = jax.random.normal(jax.random.key(0), (4000, 2))
      >>> o = 2.0 * z[:, 0]                                            # twice too confident
      >>> y = (jax.random.uniform(jax.random.key(1), (4000,)) < jax.nn.sigmoid(z[:, 0])).astype(jnp.float32)
      >>> W = jnp.array([[[0.0, 0.0], [1.0, -1.0]]])                  # groups: the sign of z_2
      >>> log_tau, _, code = hard_base_fits(W, jnp.zeros((1, 2)), o, y, z, jnp.ones(4000), 5.0,
      ...                                   use_beta=False)
      >>> [round(float(t)) for t in jnp.exp(log_tau[0])], code.tolist()  # the true T = 2 in both
      ([2, 2], [[0, 0]])
    """
    K = W.shape[2]

    def per_partition(W_p, b_p):
        g = jnp.argmax(head_logits(W_p, b_p, zs), axis=1)

        def per_group(k):
            w = v * (g == k).astype(v.dtype)
            if use_beta:
                pr = _platt._fit(o, y, w, 12, False, min_events)
                return -jnp.log(pr.a), pr.b, pr.fallback
            t = _temperature._fit(o, y, w, 12, min_events)
            return -jnp.log(t.beta), jnp.zeros_like(t.beta), t.fallback

        return jax.vmap(per_group)(jnp.arange(K))

    return jax.vmap(per_partition)(W, b)


def checked(params: Any, o, y, v, zs, base_code, variant: str, min_support, min_events, protocol: str) -> Any:
    """The fail-safe support checks (:func:`group_checks`) on the split the group calibrators
    were fitted on: a group without support takes the global calibrator of the variant, and a
    group's own base-calibrator fallback (``base_code``) is kept.

    Args:
      params: a :class:`~calib_jax.calibrators.sag.SAGParams` (its ``hard`` concrete).
      o, y, v, zs: that split's logits, labels, weights and standardised embedding.
      base_code: (P, K) fallback codes of the groups' own fits (zeros: none).
      variant: ``"ts"`` or ``"ps"``.
      min_support, min_events: the thresholds.
      protocol: ``"paper"`` or ``"reference"``, for the warning.

    Returns:
      ``params`` with ``log_tau``, ``beta`` and ``fallback`` (P, K) replaced; an eager call on
      concrete data warns with :class:`~calib_jax.calibrators.CalibrationFallbackWarning` when
      a group fell back.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.calibrators.sag import SAGParams
      >>> W = jnp.array([[[0.0, 0.0], [1.0, -1.0]]])                  # P = 1: groups by the sign of z_2
      >>> zs = jnp.array([[0.0, 1.0]] * 60 + [[0.0, -1.0]] * 3)        # group 1 has three rows
      >>> params = SAGParams(W=W, b=jnp.zeros((1, 2)), log_tau=jnp.zeros((1, 2)), beta=jnp.zeros((1, 2)),
      ...                    z_mean=jnp.zeros(2), z_scale=jnp.ones(2), hard=jnp.asarray(True),
      ...                    fallback=jnp.zeros((1, 2), jnp.int32))
      >>> y = jnp.array([0.0, 1.0] * 31 + [1.0])
      >>> import warnings
      >>> with warnings.catch_warnings(record=True) as caught:  # a fallback warns
      ...     warnings.simplefilter("always")
      ...     out = checked(params, jnp.zeros(63), y, jnp.ones(63), zs, jnp.zeros((1, 2), jnp.int32), "ts",
      ...                   10.0, 5.0, "reference")
      >>> out.fallback.tolist(), type(caught[0].message).__name__
      ([[0, 1]], 'CalibrationFallbackWarning')
    """
    use_beta = variant == "ps"
    hard = bool(params.hard)
    q = jnp.exp(jax.vmap(lambda W, b: log_memberships(W, b, zs, hard))(params.W, params.b))
    code, g_log_tau, g_beta = group_checks(q, o, y, v, jnp.asarray(min_support, o.dtype),
                                           jnp.asarray(min_events, o.dtype), use_beta=use_beta)
    keep = code == F.OK
    log_tau = jnp.where(keep, params.log_tau, g_log_tau)
    beta = jnp.where(keep, params.beta, g_beta) if use_beta else jnp.zeros_like(params.beta)
    code = jnp.where(keep, base_code, code)
    F.warn_if_fallback(f"SAG ({protocol} protocol, {variant.upper()})", code,
                       fallback="the global calibrator for groups without support, or the "
                                "base calibrator's own fallback")
    return params._replace(log_tau=log_tau, beta=beta, fallback=code)


def refit(params: Any, o, y, v, z, variant: str, min_support, min_events) -> Any:
    """The reference protocol's second stage on validated arrays (the body of
    :func:`calib_jax.calibrators.sag.refit_groups`): :func:`hard_base_fits` on the hold-out
    split, then :func:`checked`.

    Args:
      params: a :class:`~calib_jax.calibrators.sag.SAGParams` (heads and embedding moments).
      o, y, v: (n,) the hold-out split's logits, labels, weights.
      z: (n, m) its raw embedding (standardised here with the params' moments).
      variant: ``"ts"`` or ``"ps"``.
      min_support, min_events: the fail-safe thresholds.

    Returns:
      ``params`` with the group calibrators refitted, ``hard = True`` and new fallback codes.

    Example:
      >>> import numpy as np
      >>> import jax.numpy as jnp
      >>> from calib_jax.calibrators.sag import SAGParams
      >>> rng = np.random.default_rng(0)
      >>> z = jnp.asarray(rng.normal(size=(4000, 2)), jnp.float32)
      >>> o = 2.0 * z[:, 0]                                            # twice too confident
      >>> y = jnp.asarray(rng.random(4000) < 1 / (1 + np.exp(-np.asarray(z[:, 0]))), jnp.float32)
      >>> zeros = jnp.zeros((1, 2))
      >>> params = SAGParams(W=jnp.array([[[0.0, 0.0], [1.0, -1.0]]]), b=zeros, log_tau=zeros, beta=zeros,
      ...                    z_mean=jnp.zeros(2), z_scale=jnp.ones(2), hard=jnp.asarray(False),
      ...                    fallback=jnp.zeros((1, 2), jnp.int32))
      >>> out = refit(params, o, y, jnp.ones(4000), z, "ts", 10.0, 5.0)
      >>> bool(out.hard), out.fallback.tolist(), [round(float(t)) for t in jnp.exp(out.log_tau[0])]
      (True, [[0, 0]], [2, 2])
    """
    zs = (z - params.z_mean[None, :]) / params.z_scale[None, :]
    log_tau, beta, base_code = hard_base_fits(params.W, params.b, o, y, zs, v, jnp.asarray(min_events, o.dtype),
                                              use_beta=variant == "ps")
    fitted = params._replace(log_tau=log_tau, beta=beta, hard=jnp.asarray(True))
    return checked(fitted, o, y, v, zs, base_code, variant, min_support, min_events, "reference")
