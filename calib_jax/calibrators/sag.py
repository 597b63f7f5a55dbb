r"""Semantic-Aware Grouping (SAG) and Variance-Reduced SAG (VR-SAG) calibrators.

seeds/000 §2.2-2.4. A grouping head maps the frozen backbone embedding ``z`` (n, m) to soft
memberships over K latent groups (eq. 3); each group owns a temperature
:math:`\tau_k > 0` and (PS variant) a bias :math:`\beta_k`:

.. math::

    q_{ik} = \mathrm{softmax}(z_i^\top W + b)_k,\qquad
    \tilde p_i = \sum_{k=1}^K q_{ik}\,\sigma(o_i/\tau_k + \beta_k)\quad\text{(eq. 8)}.

The head and the group calibrators are fitted by minimising (eq. 11, with the weight penalty
normalised as in the reference code, see below)

.. math::

    \mathcal{L} = -\frac{1}{\sum_i v_i}\sum_i v_i \log\sum_k q_{ik}
        \Pr(y_i \mid \sigma(o_i/\tau_k+\beta_k))
        + \lambda\,\mathrm{mean}(W^2) + \lambda_v \sum_k \hat w_k \hat\sigma_k^2,

with the soft within-group variance (eq. 9-10) of the *uncalibrated* scores
:math:`\sigma(o)`. SAG is :math:`\lambda_v = 0`, VR-SAG :math:`\lambda_v = 0.5`. P partitions
with independent random heads are fitted together in one ``jax.vmap`` and averaged.

Two protocols (``protocol=``), both with the paper's and the reference code's defaults:

* ``"paper"`` — seeds/000 §2.2-2.4: K = 3 groups, P = 10 partitions, a head *with* bias,
  every parameter fitted jointly on the calibration split (D_val) by eq. 11, and the soft
  mixture of eq. 8 at serving.
* ``"reference"`` — the public code the paper says it modified (seeds/000 App. I.1:
  ThyrixYang/group_calibration, ``methods/group_calibration.py`` with
  ``conf/method/group_calibration_combine_ts.yaml``): K = 2 groups, P = 20 partitions, a
  linear head *without* bias on the raw embedding, trained with soft groups on D_val (group
  temperatures, plus biases for PS, plus the variance penalty for VR-SAG); then, per
  partition, every row of the hold-out split D_ho is put in its arg-max group and one base
  calibrator per group (temperature scaling for TS, Platt scaling for PS) is fitted on those
  rows; a test row is calibrated by the base calibrator of its arg-max group, and the P
  predictions are averaged.

Both follow the reference code where the paper is silent: weight decay
``lam * mean(W^2)`` (the reference's ``weight_decay: 1e-1`` on ``torch.mean(W**2)``; a sum
over W is m·K times stronger and keeps the head uniform), raw embeddings (no
standardisation; ``standardize=True`` is an option), the head initialised as
``torch.nn.Linear`` does (:math:`W, b \sim U(-1/\sqrt m, 1/\sqrt m)`), group temperatures
initialised at 1.5, and full-batch L-BFGS with a strong-Wolfe (zoom) line search for a fixed
100 iterations (``optax.lbfgs``, memory 100 as torch's default history; the reference runs
``torch.optim.LBFGS(max_iter=100)``, which may stop earlier at its tolerances — a fixed
count keeps the fit a pure function that ``vmap`` batches). The base calibrators of the
reference protocol are :mod:`~calib_jax.calibrators.temperature` /
:mod:`~calib_jax.calibrators.platt` (exact Newton fits of the same objective the reference
minimises with 50 L-BFGS steps).

Fail-safe (:mod:`calib_jax.calibrators._failsafe`; a departure from the paper's App. F and
the reference, both of which keep any non-empty group and reset only empty ones to the
identity): a group whose support in the split its calibrator is fitted on has fewer than
``min_support`` effective rows or fewer than ``min_events`` effective clicks (or
non-clicks) gets the *global* calibrator of the same variant (temperature or Platt scaling
fitted on all rows of that split), itself fail-safe. ``params.fallback`` (P, K) records the
groups that fell back and an eager call warns. ``min_support=0, min_events=0`` reproduce the
reference's behaviour except that an empty group gets the global calibrator rather than the
identity.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from calib_jax import _validation as V
from calib_jax import losses
from calib_jax._eager import unchecked
from calib_jax.calibrators import _failsafe as F
from calib_jax.calibrators import platt as _platt
from calib_jax.calibrators import temperature as _temperature
from calib_jax.calibrators._base import Calibrator, register
from calib_jax.calibrators._common import ArrayLike, Context, KeyArg

__all__ = [
    "PROTOCOLS",
    "PROTOCOL_DEFAULTS",
    "SAGParams",
    "init_params",
    "fit",
    "fit_sag",
    "fit_vrsag",
    "refit_groups",
    "predict",
    "memberships",
    "group_support",
    "SAG_TS",
    "SAG_PS",
    "VRSAG_TS",
    "VRSAG_PS",
]

PROTOCOLS = ("paper", "reference")
#: per-protocol defaults: groups K, partitions P, head bias, L-BFGS iterations
PROTOCOL_DEFAULTS: dict[str, dict[str, Any]] = {
    "paper": {"n_groups": 3, "n_partitions": 10, "head_bias": True, "n_steps": 100},
    "reference": {"n_groups": 2, "n_partitions": 20, "head_bias": False, "n_steps": 100},
}
_NEG = -1e30  # log of a hard zero membership (finite: keeps logsumexp and its gradient clean)
_TAU_INIT = 1.5  # the reference code's initial group temperature


class SAGParams(NamedTuple):
    """Fitted SAG/VR-SAG parameters; every field but the embedding moments has a leading
    partition axis P.

    Attributes:
      W: (P, m, K) grouping-head weights.
      b: (P, K) grouping-head biases (zeros for a head without bias).
      log_tau: (P, K) log temperatures.
      beta: (P, K) biases (zeros for the TS variant).
      z_mean, z_scale: (m,) embedding centre and scale applied before the head (0 and 1
        unless ``standardize=True``).
      hard: () bool; True for the reference protocol (arg-max groups at prediction).
      fallback: (P, K) int32 fail-safe codes (0: the group's own fit was kept).
    """

    W: jax.Array
    b: jax.Array
    log_tau: jax.Array
    beta: jax.Array
    z_mean: jax.Array
    z_scale: jax.Array
    hard: jax.Array
    fallback: jax.Array


class _Theta(NamedTuple):
    W: jax.Array
    b: jax.Array
    log_tau: jax.Array
    beta: jax.Array


# --------------------------------------------------------------------------- helpers


def _embedding(context: Mapping[str, Any] | None, n: int, name: str = "context['embedding']"):
    if context is None or "embedding" not in context or context["embedding"] is None:
        raise ValueError(f"`{name}` is required: SAG/VR-SAG group rows by the backbone embedding")
    z = V.as_float_array(context["embedding"], name, ndim=2)
    if z.shape[0] != n:
        raise ValueError(f"`{name}` has {z.shape[0]} rows, expected {n} (one per logit)")
    return z


def _head_logits(W: jax.Array, b: jax.Array, zs: jax.Array) -> jax.Array:
    return jnp.matmul(zs, W, precision=jax.lax.Precision.HIGHEST) + b[None, :]


def _log_q(W, b, zs, hard):
    """Log memberships; ``hard`` is a Python bool (fit) or a traced bool (predict)."""
    h = _head_logits(W, b, zs)
    if hard is False:
        return jax.nn.log_softmax(h, axis=1)
    onehot = jax.nn.one_hot(jnp.argmax(h, axis=1), h.shape[1], dtype=h.dtype)
    hard_lq = jnp.where(onehot > 0, 0.0, _NEG)
    if hard is True:
        return hard_lq
    return jnp.where(hard, hard_lq, jax.nn.log_softmax(h, axis=1))


def _lbfgs(fun, x0, n_steps: int):
    """Fixed-iteration full-batch L-BFGS (optax, zoom line search = strong Wolfe) inside
    ``lax.scan``; returns the last iterate and the objective values."""
    opt = optax.lbfgs(
        memory_size=100, linesearch=optax.scale_by_zoom_linesearch(max_linesearch_steps=25)
    )
    vg = optax.value_and_grad_from_state(fun)

    def body(carry, _):
        x, state = carry
        value, grad = vg(x, state=state)
        updates, state = opt.update(grad, state, x, value=value, grad=grad, value_fn=fun)
        x_new = optax.apply_updates(x, updates)
        # A failed line search must never poison the fit: keep the old iterate on non-finite.
        ok = jnp.all(jnp.array([jnp.all(jnp.isfinite(leaf)) for leaf in jax.tree.leaves(x_new)]))
        x = jax.tree.map(lambda a, b: jnp.where(ok, a, b), x_new, x)
        return (x, state), value

    (x, _), values = jax.lax.scan(body, (x0, opt.init(x0)), None, length=n_steps)
    return x, values


def init_params(key: jax.Array, m: int, *, n_groups: int = 3, n_partitions: int = 10,
                head_bias: bool = True, tau_init: float = _TAU_INIT) -> _Theta:
    """Random initial heads for ``n_partitions`` partitions, initialised as
    ``torch.nn.Linear(m, K)`` is (:math:`W, b \\sim U(-1/\\sqrt m, 1/\\sqrt m)`; ``b = 0``
    without a head bias), with group temperatures ``tau_init`` and biases 0.
    Partition ``p`` uses ``jax.random.fold_in(key, p)``."""
    n_groups = V.check_positive_int(n_groups, "n_groups")
    n_partitions = V.check_positive_int(n_partitions, "n_partitions")
    bound = 1.0 / np.sqrt(m)

    def one(p):
        kw, kb = jax.random.split(jax.random.fold_in(key, p))
        W = jax.random.uniform(kw, (m, n_groups), minval=-bound, maxval=bound)
        b = jax.random.uniform(kb, (n_groups,), minval=-bound, maxval=bound)
        return W, b if head_bias else jnp.zeros_like(b)

    W, b = jax.vmap(one)(jnp.arange(n_partitions))
    log_tau = jnp.full((n_partitions, n_groups), np.log(tau_init), W.dtype)
    return _Theta(W=W, b=b, log_tau=log_tau, beta=jnp.zeros_like(log_tau))


def _objective(theta: _Theta, o, y, zs, p_unc, v, lam, lam_v, use_beta: bool, head_bias: bool):
    # the fit checked its inputs eagerly (labels 0 or 1, weights, memberships are softmax
    # rows by construction): the losses are traced without their checks
    b = theta.b if head_bias else jax.lax.stop_gradient(theta.b)
    lq = _log_q(theta.W, b, zs, False)
    beta = theta.beta if use_beta else jnp.zeros_like(theta.beta)
    with unchecked():
        terms = losses._binary_grouped_nll_terms(o, y, lq, jnp.exp(theta.log_tau), beta)
        nll = jnp.sum(v * terms) / jnp.sum(v)
        pen = losses.l2_penalty(theta.W, lam=lam, reduction="mean")
        return nll + pen + losses.variance_penalty(p_unc, jnp.exp(lq), lam_v=lam_v, weights=v)


@functools.partial(jax.jit, static_argnames=("n_steps", "use_beta", "head_bias"))
def _fit_soft(theta0: _Theta, o, y, zs, v, lam, lam_v, *, n_steps: int, use_beta: bool,
              head_bias: bool):
    p_unc = jax.nn.sigmoid(o)

    def one(th):
        f = lambda t: _objective(t, o, y, zs, p_unc, v, lam, lam_v, use_beta, head_bias)
        return _lbfgs(f, th, n_steps)

    return jax.vmap(one)(theta0)


def _global_params(o, y, v, use_beta: bool, min_events):
    """(log tau, beta, code) of the global calibrator of the variant (fail-safe itself)."""
    if use_beta:
        g = _platt._fit(o, y, v, 12, False, min_events)
        return -jnp.log(g.a), g.b, g.fallback
    g = _temperature._fit(o, y, v, 12, min_events)
    return -jnp.log(g.beta), jnp.zeros_like(g.beta), g.fallback


@functools.partial(jax.jit, static_argnames=("use_beta",))
def _group_checks(q, o, y, v, min_support, min_events, *, use_beta: bool):
    """Per (partition, group) support checks on memberships ``q`` (P, n, K) and the global
    calibrator that failing groups fall back to."""
    vq = v[None, :, None] * q
    support = jnp.sum(vq, axis=1) / jnp.mean(v)
    events = jnp.minimum(jnp.sum(vq * y[None, :, None], axis=1),
                         jnp.sum(vq * (1.0 - y)[None, :, None], axis=1)) / jnp.mean(v)
    ok = (support >= min_support) & (events >= jnp.maximum(min_events, 1e-12))
    code = jnp.where(ok, F.OK, F.TOO_FEW_EVENTS).astype(jnp.int32)
    g_log_tau, g_beta, _ = _global_params(o, y, v, use_beta, min_events)
    return code, g_log_tau, g_beta


@functools.partial(jax.jit, static_argnames=("use_beta",))
def _hard_base_fits(W, b, o, y, zs, v, min_events, *, use_beta: bool):
    """Reference protocol: one base calibrator per (partition, arg-max group) on the rows of
    the hold-out split in that group; returns (log tau, beta, code), each (P, K)."""
    K = W.shape[2]

    def per_partition(W_p, b_p):
        g = jnp.argmax(_head_logits(W_p, b_p, zs), axis=1)

        def per_group(k):
            w = v * (g == k).astype(v.dtype)
            if use_beta:
                pr = _platt._fit(o, y, w, 12, False, min_events)
                return -jnp.log(pr.a), pr.b, pr.fallback
            t = _temperature._fit(o, y, w, 12, min_events)
            return -jnp.log(t.beta), jnp.zeros_like(t.beta), t.fallback

        return jax.vmap(per_group)(jnp.arange(K))

    return jax.vmap(per_partition)(W, b)


def _prepare(logits, labels, weights, context, name_prefix=""):
    o, y, w = V.check_sample(logits, labels, weights, prefix=name_prefix)
    n = o.shape[0]
    z = _embedding(context, n, f"{name_prefix}context['embedding']" if not name_prefix
                   else f"{name_prefix}embedding")
    v = jnp.ones_like(o) if w is None else w
    return o, y, v, z


# --------------------------------------------------------------------------- public API


def fit(logits: ArrayLike, labels: ArrayLike, *, weights: ArrayLike | None = None, key: KeyArg = None,
        context: Context = None, protocol: str = "paper", variant: str = "ts", lam: float = 0.1,
        lam_v: float = 0.0, n_groups: int | None = None, n_partitions: int | None = None,
        n_steps: int | None = None, head_bias: bool | None = None, tau_init: float = _TAU_INIT,
        standardize: bool = False, holdout: Mapping[str, Any] | None = None,
        min_support: float = 10.0, min_events: float = F.MIN_EVENTS, init: _Theta | None = None,
        max_rows: int | None = None) -> SAGParams:
    r"""Fit SAG (``lam_v = 0``) or VR-SAG (``lam_v > 0``) under ``protocol`` (module docstring).

    .. math::

        \min_{W,b,\tau,\beta}\; -\frac{1}{\sum_i v_i}\sum_i v_i
            \log\sum_k q_{ik}\,\Pr(y_i\mid\sigma(o_i/\tau_k+\beta_k))
            + \lambda\,\mathrm{mean}(W^2) + \lambda_v\sum_k\hat w_k\hat\sigma_k^2

    Args:
      logits: (n,) backbone logits ``o`` of the calibration split (D_val).
      labels: (n,) binary labels.
      weights: optional (n,) sample weights.
      key: PRNG key of the random initial heads (default ``jax.random.key(0)``).
      context: ``{"embedding": (n, m)}``, the frozen backbone embedding ``z``; optionally
        ``"holdout"`` (as ``holdout``).
      protocol: ``"paper"`` or ``"reference"``.
      variant: ``"ts"`` (group temperatures; reference base calibrator: temperature scaling)
        or ``"ps"`` (temperatures and biases; reference base calibrator: Platt scaling).
      lam: weight decay on ``mean(W^2)``. lam_v: variance-penalty weight (eq. 10).
      n_groups, n_partitions, n_steps, head_bias: K, P, L-BFGS iterations and whether the head
        has a bias; ``None`` takes the protocol's default (:data:`PROTOCOL_DEFAULTS`).
      tau_init: initial group temperature (the reference code's 1.5).
      standardize: centre and scale ``z`` with the calibration-split moments first.
      holdout: ``{"logits", "labels", "embedding"[, "weights"]}``, the hold-out split D_ho on
        which the reference protocol fits its per-group base calibrators (default: the
        calibration split itself).
      min_support, min_events: fail-safe thresholds per group (effective rows; effective
        clicks and non-clicks), module docstring.
      init: optional initial ``_Theta`` (from :func:`init_params`) instead of ``key``.
      max_rows: fit the head on at most this many rows drawn uniformly (from ``key``); the
        support checks still use every row. ``None`` (default) uses every row, as the paper.

    Returns:
      :class:`SAGParams` with a leading partition axis.
    """
    protocol = V.check_choice(protocol, "protocol", PROTOCOLS)
    variant = V.check_choice(variant, "variant", ("ps", "ts"))
    d = PROTOCOL_DEFAULTS[protocol]
    n_groups = V.check_positive_int(d["n_groups"] if n_groups is None else n_groups, "n_groups")
    n_partitions = V.check_positive_int(d["n_partitions"] if n_partitions is None else n_partitions,
                                        "n_partitions")
    n_steps = V.check_positive_int(d["n_steps"] if n_steps is None else n_steps, "n_steps")
    head_bias = bool(d["head_bias"] if head_bias is None else head_bias)
    for name, val in (("lam", lam), ("lam_v", lam_v), ("min_support", min_support),
                      ("min_events", min_events)):
        if V.is_concrete(jnp.asarray(val)) and not float(val) >= 0.0:
            raise ValueError(f"`{name}` must be non-negative, got {val}")
    if not float(tau_init) > 0.0:
        raise ValueError(f"`tau_init` must be positive, got {tau_init}")
    o, y, v, z = _prepare(logits, labels, weights, context)
    n, m = z.shape
    if n_groups > n:
        raise ValueError(f"`n_groups`={n_groups} is larger than the number of samples ({n})")
    if standardize:
        z_mean = jnp.mean(z, axis=0)
        sd = jnp.std(z, axis=0)
        z_scale = jnp.where(sd > 1e-12, sd, 1.0)
    else:
        z_mean = jnp.zeros((m,), z.dtype)
        z_scale = jnp.ones((m,), z.dtype)
    zs = (z - z_mean[None, :]) / z_scale[None, :]
    key = jax.random.key(0) if key is None else key
    if init is None:
        theta0 = init_params(key, m, n_groups=n_groups, n_partitions=n_partitions,
                             head_bias=head_bias, tau_init=tau_init)
    else:
        theta0 = _Theta(*(jnp.asarray(a) for a in init))
        if theta0.W.shape[1:] != (m, n_groups):
            raise ValueError(f"`init` W has shape {theta0.W.shape}, expected (P, {m}, {n_groups})")
    use_beta = variant == "ps"
    lam_ = jnp.asarray(lam, o.dtype)
    lam_v_ = jnp.asarray(lam_v, o.dtype)
    rows: Any = slice(None)
    if max_rows is not None and V.check_positive_int(max_rows, "max_rows") < n:
        rows = jax.random.choice(jax.random.fold_in(key, 1), n, (max_rows,), replace=False)
    theta, _ = _fit_soft(theta0, o[rows], y[rows], zs[rows], v[rows], lam_, lam_v_,
                         n_steps=n_steps, use_beta=use_beta, head_bias=head_bias)
    if protocol == "reference":
        ho = holdout if holdout is not None else (context or {}).get("holdout")
        if ho is None:
            ho = {"logits": o, "labels": y, "weights": v, "embedding": z}
        return refit_groups(_as_params(theta, z_mean, z_scale, hard=True), ho.get("logits"),
                            ho.get("labels"), weights=ho.get("weights"),
                            context={"embedding": ho.get("embedding")}, variant=variant,
                            min_support=min_support, min_events=min_events)
    return _checked(_as_params(theta, z_mean, z_scale, hard=False), o, y, v, zs,
                    jnp.zeros(theta.log_tau.shape, jnp.int32), variant, min_support, min_events,
                    "paper")


def _as_params(theta: _Theta, z_mean, z_scale, *, hard: bool) -> SAGParams:
    return SAGParams(W=theta.W, b=theta.b, log_tau=theta.log_tau, beta=theta.beta, z_mean=z_mean,
                     z_scale=z_scale, hard=jnp.asarray(hard),
                     fallback=jnp.zeros(theta.log_tau.shape, jnp.int32))


def _checked(params: SAGParams, o, y, v, zs, base_code, variant: str, min_support, min_events,
             protocol: str) -> SAGParams:
    """Fail-safe support checks on the split the group calibrators were fitted on; failing
    groups take the global calibrator of the variant (module docstring)."""
    use_beta = variant == "ps"
    hard = bool(params.hard)
    q = jnp.exp(jax.vmap(lambda W, b: _log_q(W, b, zs, hard))(params.W, params.b))
    code, g_log_tau, g_beta = _group_checks(q, o, y, v, jnp.asarray(min_support, o.dtype),
                                            jnp.asarray(min_events, o.dtype), use_beta=use_beta)
    # a group's own base-calibrator fallback (flat or non-converged fit) is kept; a group
    # without support takes the global calibrator
    keep = code == F.OK
    log_tau = jnp.where(keep, params.log_tau, g_log_tau)
    beta = jnp.where(keep, params.beta, g_beta) if use_beta else jnp.zeros_like(params.beta)
    code = jnp.where(keep, base_code, code)
    F.warn_if_fallback(f"SAG ({protocol} protocol, {variant.upper()})", code,
                       fallback="the global calibrator for groups without support, or the "
                                "base calibrator's own fallback", stacklevel=4)
    return params._replace(log_tau=log_tau, beta=beta, fallback=code)


def refit_groups(params: SAGParams, logits: ArrayLike, labels: ArrayLike, *,
                 weights: ArrayLike | None = None, context: Context = None, variant: str = "ts",
                 min_support: float = 10.0, min_events: float = F.MIN_EVENTS) -> SAGParams:
    r"""The reference protocol's second stage on a (new) hold-out split, heads kept.

    Every row is put in the arg-max group of each partition's head
    :math:`g_p(i) = \arg\max_k (z_i^\top W_p + b_p)_k` and one base calibrator per
    (partition, group) — temperature scaling (``variant="ts"``) or Platt scaling (``"ps"``) —
    is fitted on that group's rows; groups without support take the global calibrator.
    :func:`fit` with ``protocol="reference"`` calls it with D_ho; calling it again with
    another hold-out split refits the group calibrators without retraining the heads.

    Args:
      params: fitted :class:`SAGParams` (its heads are used; any protocol).
      logits, labels, weights: the hold-out split's backbone logits, labels, weights.
      context: ``{"embedding": (n, m)}`` of the hold-out split.
    """
    variant = V.check_choice(variant, "variant", ("ps", "ts"))
    o, y, v, z = _prepare(logits, labels, weights, context, "holdout.")
    if z.shape[1] != params.W.shape[1]:
        raise ValueError(f"`holdout.embedding` has {z.shape[1]} columns, expected {params.W.shape[1]}")
    zs = (z - params.z_mean[None, :]) / params.z_scale[None, :]
    log_tau, beta, base_code = _hard_base_fits(params.W, params.b, o, y, zs, v,
                                               jnp.asarray(min_events, o.dtype),
                                               use_beta=variant == "ps")
    fitted = params._replace(log_tau=log_tau, beta=beta, hard=jnp.asarray(True))
    return _checked(fitted, o, y, v, zs, base_code, variant, min_support, min_events, "reference")


def fit_sag(logits: Any, labels: Any, **kwargs: Any) -> SAGParams:
    """SAG (seeds/000 eq. 5, with per-group biases for ``variant="ps"``): ``lam_v = 0``."""
    kwargs.setdefault("lam_v", 0.0)
    return fit(logits, labels, **kwargs)


def fit_vrsag(logits: Any, labels: Any, **kwargs: Any) -> SAGParams:
    """VR-SAG (seeds/000 eq. 11): SAG plus the variance penalty, ``lam_v = 0.5`` by default."""
    kwargs.setdefault("lam_v", 0.5)
    return fit(logits, labels, **kwargs)


def memberships(params: SAGParams, embedding: Any) -> jax.Array:
    """Group memberships ``q`` (P, n, K) of rows with embedding (n, m) (eq. 3; one-hot if hard)."""
    z = V.as_float_array(embedding, "embedding", ndim=2)
    if z.shape[1] != params.W.shape[1]:
        raise ValueError(f"`embedding` has {z.shape[1]} columns, expected {params.W.shape[1]}")
    return _memberships(params, z)


@jax.jit
def _memberships(params: SAGParams, z: jax.Array) -> jax.Array:
    zs = (z - params.z_mean[None, :]) / params.z_scale[None, :]
    return jnp.exp(jax.vmap(lambda W, b: _log_q(W, b, zs, params.hard))(params.W, params.b))


def group_support(params: SAGParams, embedding: Any, *, weights: Any = None) -> jax.Array:
    """Effective row count ``sum_i v_i q_ik / mean(v)`` per partition and group, (P, K)."""
    q = memberships(params, embedding)
    w = V.check_weights(weights, q.shape[1])
    v = jnp.ones((q.shape[1],), q.dtype) if w is None else w
    return jnp.einsum("n,pnk->pk", v, q, precision=jax.lax.Precision.HIGHEST) / jnp.mean(v)


@jax.jit
def _predict(params: SAGParams, o: jax.Array, z: jax.Array) -> jax.Array:
    q = _memberships(params, z)  # (P, n, K)
    s = o[None, :, None] * jnp.exp(-params.log_tau)[:, None, :] + params.beta[:, None, :]
    return jnp.mean(jnp.sum(q * jax.nn.sigmoid(s), axis=2), axis=0)


def predict(params: SAGParams, logits: Any, *, context: Mapping[str, Any] | None = None) -> jax.Array:
    r"""Calibrated probabilities averaged over the P partitions: the soft mixture of eq. 8
    (paper protocol) or the arg-max group's base calibrator (reference protocol).

    .. math:: \hat p_i = \frac{1}{P}\sum_{p=1}^P \sum_k q^{(p)}_{ik}\,
              \sigma(o_i/\tau^{(p)}_k + \beta^{(p)}_k)

    ``context["embedding"]`` (n, m) is required.
    """
    o = V.check_logits(logits)
    z = _embedding(context, o.shape[0])
    if z.shape[1] != params.W.shape[1]:
        raise ValueError(f"`context['embedding']` has {z.shape[1]} columns, expected {params.W.shape[1]}")
    return _predict(params, o, z)


def _make(name: str, variant: str, lam_v: float) -> Calibrator:
    defaults = dict(protocol="paper", variant=variant, lam=0.1, lam_v=lam_v)

    def _fit(logits, labels, *, weights=None, key=None, context=None, **hyper):
        return fit(logits, labels, weights=weights, key=key, context=context,
                   **{**defaults, **hyper})

    _fit.__doc__ = f"{name}: :func:`calib_jax.calibrators.sag.fit` with defaults {defaults}."
    return register(Calibrator(name=name, fit=_fit, predict=predict, monotone=False,
                               needs=("embedding",), defaults=defaults))


SAG_TS = _make("sag_ts", "ts", 0.0)
SAG_PS = _make("sag_ps", "ps", 0.0)
VRSAG_TS = _make("vrsag_ts", "ts", 0.5)
VRSAG_PS = _make("vrsag_ps", "ps", 0.5)
