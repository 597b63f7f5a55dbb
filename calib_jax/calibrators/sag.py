r"""Semantic-Aware Grouping (SAG) and Variance-Reduced SAG (VR-SAG) calibrators.

seeds/000 §2.2-2.4.  A grouping head maps the frozen backbone embedding ``z`` (n, m) to
soft memberships over K latent groups (eq. 3), each group owns a temperature
:math:`\tau_k > 0` and (PS variant) a bias :math:`\beta_k`, and the calibrated probability
is the membership-weighted mixture (eq. 8)

.. math::

    q_{ik} = \mathrm{softmax}(z_i^\top W + b)_k,\qquad
    \tilde p_i = \sum_{k=1}^K q_{ik}\,\sigma(o_i/\tau_k + \beta_k).

All of ``(W, b, tau, beta)`` are fitted on the calibration split by minimising (eq. 11)

.. math::

    \mathcal{L} = \mathcal{L}_{\mathrm{NLL}}(q, \tau, \beta)
        + \lambda\|W\|_2^2 + \lambda_v \sum_k \hat w_k \hat\sigma_k^2,

with the grouped NLL of eq. 5 (:func:`calib_jax.losses.grouped_nll`) and the soft
within-group variance (eq. 9-10) of the *uncalibrated* scores ``sigmoid(o)``.  SAG is
``lam_v = 0``, VR-SAG ``lam_v = 0.5``.  P independent partitions (random initial heads)
are fitted together in one ``jax.vmap`` and their predictions averaged.

Design choices (SPEC leaves them open):

* **Optimiser: full-batch L-BFGS (``optax.lbfgs`` with zoom line search) for a fixed number
  of iterations (``n_steps``, default 60), run in a ``lax.scan``.**  The problem has only
  ``K (m + 2)`` parameters per partition and the calibration split fits in memory, so a
  deterministic quasi-Newton method converges in tens of full passes, where Adam needs
  hundreds of passes plus a learning-rate schedule; the fixed iteration count keeps the fit
  a pure function that ``vmap`` batches over partitions (and over Monte Carlo trials).
* **Embedding standardisation (``standardize=True``):** ``z`` is centred and scaled per
  coordinate with the calibration-split moments (stored in the params and reused at
  prediction).  This makes ``lam ||W||^2`` independent of the backbone's activation scale;
  ``standardize=False`` reproduces the raw formulation of eq. 3.
* **Temperatures** are parametrised as ``log tau``; the TS variant keeps ``beta = 0``.
* **Initialisation:** ``W ~ N(0, init_scale^2 / m)``, ``b = 0``, ``tau = 1``, ``beta = 0``
  (identity calibrators); partitions differ only through their key.
* **Empty groups (Appendix F):** after fitting, a group whose soft support
  ``sum_i v_i q_ik / mean(v)`` (an effective row count) is below ``min_support`` is reset
  to the identity (``tau = 1``, ``beta = 0``), so it cannot move any prediction.
* **Reference-code protocol (``protocol="refit"``):** the grouping heads are fitted as
  above on the calibration split; then every row of the hold-out split (``holdout=`` dict
  with ``logits``, ``labels``, ``embedding`` and optional ``weights``, or
  ``context["holdout"]``; default: the calibration split itself) is assigned to its
  arg-max group and a per-group temperature (TS) or Platt (PS) calibrator is refitted on
  those rows only; predictions use hard arg-max groups.

``fit`` validates eagerly on concrete inputs and jit-compiles its inner loop once per
static configuration (``n_groups``, ``n_partitions``, ``n_steps``, variant); ``lam`` and
``lam_v`` are dynamic, so an ablation over them reuses the compiled code.
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
from calib_jax.calibrators._base import Calibrator, register

__all__ = [
    "SAGParams",
    "init_params",
    "fit",
    "fit_sag",
    "fit_vrsag",
    "predict",
    "memberships",
    "group_support",
    "SAG_TS",
    "SAG_PS",
    "VRSAG_TS",
    "VRSAG_PS",
]

_NEG = -1e30  # log of a hard zero membership (finite: keeps logsumexp and its gradient clean)


class SAGParams(NamedTuple):
    """Fitted SAG/VR-SAG parameters; every field has a leading partition axis P.

    Attributes:
      W: (P, m, K) grouping-head weights (on the standardised embedding).
      b: (P, K) grouping-head biases.
      log_tau: (P, K) log temperatures.
      beta: (P, K) biases (zeros for the TS variant).
      z_mean: (m,) embedding centre used at fit time.
      z_scale: (m,) embedding scale used at fit time.
      hard: () bool; True for the reference-code protocol (arg-max groups at prediction).
    """

    W: jax.Array
    b: jax.Array
    log_tau: jax.Array
    beta: jax.Array
    z_mean: jax.Array
    z_scale: jax.Array
    hard: jax.Array


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


def _head_logits(theta_W: jax.Array, theta_b: jax.Array, zs: jax.Array) -> jax.Array:
    return zs @ theta_W + theta_b[None, :]


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
    """Fixed-iteration full-batch L-BFGS (optax) inside ``lax.scan``; returns the last iterate."""
    opt = optax.lbfgs(
        memory_size=10, linesearch=optax.scale_by_zoom_linesearch(max_linesearch_steps=16)
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
                init_scale: float = 1.0) -> _Theta:
    """Random initial heads for ``n_partitions`` partitions (identity calibrators).

    ``W ~ N(0, init_scale^2/m)`` so the initial head logits on standardised ``z`` have unit
    scale; ``b = 0``, ``log tau = 0``, ``beta = 0``.  Partition ``p`` uses
    ``jax.random.fold_in(key, p)``.
    """
    n_groups = V.check_positive_int(n_groups, "n_groups")
    n_partitions = V.check_positive_int(n_partitions, "n_partitions")
    keys = jax.vmap(lambda p: jax.random.fold_in(key, p))(jnp.arange(n_partitions))
    W = jax.vmap(lambda k: jax.random.normal(k, (m, n_groups)))(keys) * (init_scale / np.sqrt(m))
    zeros = jnp.zeros((n_partitions, n_groups), W.dtype)
    return _Theta(W=W, b=zeros, log_tau=zeros, beta=zeros)


def _objective(theta: _Theta, o, y, zs, p_unc, v, lam, lam_v, use_beta: bool, hard: bool):
    lq = _log_q(theta.W, theta.b, zs, hard)
    beta = theta.beta if use_beta else jnp.zeros_like(theta.beta)
    nll = jnp.sum(v * losses.grouped_nll_terms(o, y, lq, jnp.exp(theta.log_tau), beta)) / jnp.sum(v)
    pen = losses.l2_penalty(theta.W, lam=lam)
    if not hard:
        pen = pen + losses.variance_penalty(p_unc, jnp.exp(lq), lam_v=lam_v, weights=v)
    return nll + pen


@functools.partial(jax.jit, static_argnames=("n_steps", "use_beta"))
def _fit_soft(theta0: _Theta, o, y, zs, v, lam, lam_v, *, n_steps: int, use_beta: bool):
    p_unc = jax.nn.sigmoid(o)

    def one(th):
        f = lambda t: _objective(t, o, y, zs, p_unc, v, lam, lam_v, use_beta, False)
        return _lbfgs(f, th, n_steps)

    return jax.vmap(one)(theta0)


@functools.partial(jax.jit, static_argnames=("n_steps", "use_beta"))
def _refit_hard(theta: _Theta, o, y, zs, v, *, n_steps: int, use_beta: bool):
    """Per-group TS/PS refit on hard arg-max groups (heads frozen)."""

    def one(th):
        def f(cal):
            t = th._replace(log_tau=cal[0], beta=cal[1])
            return _objective(t, o, y, zs, o, v, 0.0, 0.0, use_beta, True)

        cal0 = (jnp.zeros_like(th.log_tau), jnp.zeros_like(th.beta))
        cal, values = _lbfgs(f, cal0, n_steps)
        return th._replace(log_tau=cal[0], beta=cal[1]), values

    return jax.vmap(one)(theta)


def _support(W, b, zs, v, hard):
    """Effective row count per group, (P, K)."""
    lq = jax.vmap(lambda W_, b_: _log_q(W_, b_, zs, hard))(W, b)
    return jnp.einsum("n,pnk->pk", v, jnp.exp(lq)) / jnp.mean(v)


def _fallback(theta: _Theta, support: jax.Array, min_support: float) -> _Theta:
    ok = support >= min_support
    return theta._replace(
        log_tau=jnp.where(ok, theta.log_tau, 0.0), beta=jnp.where(ok, theta.beta, 0.0)
    )


def _prepare(logits, labels, weights, context, name_prefix=""):
    o = V.check_logits(logits, name_prefix + "logits")
    n = o.shape[0]
    y = V.check_labels(labels, name_prefix + "labels")
    V.check_same_length(n, labels=y)
    w = V.check_weights(weights, n, name_prefix + "weights")
    z = _embedding(context, n, f"{name_prefix}context['embedding']" if not name_prefix
                   else f"{name_prefix}embedding")
    v = jnp.ones_like(o) if w is None else w
    return o, y, v, z


# --------------------------------------------------------------------------- public API


def fit(
    logits: Any,
    labels: Any,
    *,
    weights: Any = None,
    key: jax.Array | None = None,
    context: Mapping[str, Any] | None = None,
    n_groups: int = 3,
    n_partitions: int = 10,
    lam: float = 0.1,
    lam_v: float = 0.0,
    variant: str = "ps",
    protocol: str = "soft",
    n_steps: int = 60,
    min_support: float = 10.0,
    standardize: bool = True,
    init_scale: float = 1.0,
    init: _Theta | None = None,
    holdout: Mapping[str, Any] | None = None,
    max_rows: int | None = None,
) -> SAGParams:
    r"""Fit SAG (``lam_v = 0``) or VR-SAG (``lam_v > 0``) on a calibration split (eq. 11).

    .. math::

        \min_{W,b,\tau,\beta}\; -\frac{1}{\sum_i v_i}\sum_i v_i
            \log\sum_k q_{ik}\,\Pr(y_i\mid\sigma(o_i/\tau_k+\beta_k))
            + \lambda\|W\|^2 + \lambda_v\sum_k\hat w_k\hat\sigma_k^2

    Args:
      logits: (n,) backbone logits ``o`` of the calibration split.
      labels: (n,) binary labels.
      weights: optional (n,) sample weights.
      key: PRNG key for the random initial heads (default ``jax.random.key(0)``; results
        are a deterministic function of the key).
      context: must hold ``"embedding"`` (n, m), the frozen backbone embedding ``z``;
        optionally ``"holdout"`` (see ``protocol``).
      n_groups: K, groups per partition (static).
      n_partitions: P, independent partitions averaged at prediction (static).
      lam: ridge weight on ``W`` (eq. 5).
      lam_v: variance-penalty weight (eq. 10); 0 gives SAG.
      variant: ``"ps"`` (per-group Platt: tau and beta) or ``"ts"`` (temperature only).
      protocol: ``"soft"`` (paper: soft memberships at fit and serve) or ``"refit"``
        (reference code: arg-max groups, per-group calibrator refitted on ``holdout``).
      n_steps: L-BFGS iterations (static).
      min_support: effective-row threshold below which a group falls back to identity.
      standardize: centre/scale ``z`` with the calibration-split moments.
      init_scale: standard deviation of the initial head logits.
      init: optional initial parameters (as returned by :func:`init_params`) instead of
        drawing them from ``key``; lets a caller fit partitions one by one.
      holdout: ``{"logits", "labels", "embedding"[, "weights"]}`` for ``protocol="refit"``.
      max_rows: if set and the split has more rows, the head, temperatures and biases are
        fitted on ``max_rows`` rows drawn uniformly without replacement (from ``key``); the
        embedding moments and the group-support check still use every row.  The model has
        only P·K·(m+3) parameters, so 10⁵ rows determine it well, and the full-batch L-BFGS
        cost (one (n, m)×(m, P·K) product per function evaluation) drops by n / max_rows.
        ``None`` (default) fits on every row, as the paper does.

    Returns:
      :class:`SAGParams` with a leading partition axis.
    """
    variant = V.check_choice(variant, "variant", ("ps", "ts"))
    protocol = V.check_choice(protocol, "protocol", ("soft", "refit"))
    n_groups = V.check_positive_int(n_groups, "n_groups")
    n_partitions = V.check_positive_int(n_partitions, "n_partitions")
    n_steps = V.check_positive_int(n_steps, "n_steps")
    for name, val in (("lam", lam), ("lam_v", lam_v), ("min_support", min_support)):
        if V.is_concrete(jnp.asarray(val)) and not float(val) >= 0.0:
            raise ValueError(f"`{name}` must be non-negative, got {val}")
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
    if init is None:
        key = jax.random.key(0) if key is None else key
        theta0 = init_params(key, m, n_groups=n_groups, n_partitions=n_partitions,
                             init_scale=init_scale)
    else:
        theta0 = _Theta(*(jnp.asarray(a) for a in init))
        if theta0.W.shape[1:] != (m, n_groups):
            raise ValueError(f"`init` W has shape {theta0.W.shape}, expected (P, {m}, {n_groups})")
    use_beta = variant == "ps"
    lam_ = jnp.asarray(lam, o.dtype)
    lam_v_ = jnp.asarray(lam_v, o.dtype)
    if max_rows is not None and V.check_positive_int(max_rows, "max_rows") < n:
        k_rows = jax.random.fold_in(jax.random.key(0) if key is None else key, 1)
        rows = jax.random.choice(k_rows, n, (max_rows,), replace=False)
        theta, _ = _fit_soft(theta0, o[rows], y[rows], zs[rows], v[rows], lam_, lam_v_,
                             n_steps=n_steps, use_beta=use_beta)
    else:
        theta, _ = _fit_soft(theta0, o, y, zs, v, lam_, lam_v_, n_steps=n_steps, use_beta=use_beta)
    hard = protocol == "refit"
    if hard:
        ho = holdout if holdout is not None else (context or {}).get("holdout")
        if ho is None:
            o_h, y_h, v_h, zs_h = o, y, v, zs
        else:
            o_h, y_h, v_h, z_h = _prepare(
                ho.get("logits"), ho.get("labels"), ho.get("weights"), ho, "holdout."
            )
            if z_h.shape[1] != m:
                raise ValueError(f"`holdout.embedding` has {z_h.shape[1]} columns, expected {m}")
            zs_h = (z_h - z_mean[None, :]) / z_scale[None, :]
        theta, _ = _refit_hard(theta, o_h, y_h, zs_h, v_h, n_steps=n_steps, use_beta=use_beta)
        support = _support(theta.W, theta.b, zs_h, v_h, True)
    else:
        support = _support(theta.W, theta.b, zs, v, False)
    theta = _fallback(theta, support, min_support)
    return SAGParams(
        W=theta.W, b=theta.b, log_tau=theta.log_tau, beta=theta.beta,
        z_mean=z_mean, z_scale=z_scale, hard=jnp.asarray(hard),
    )


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
    zs = (z - params.z_mean[None, :]) / params.z_scale[None, :]
    return jnp.exp(jax.vmap(lambda W, b: _log_q(W, b, zs, params.hard))(params.W, params.b))


def group_support(params: SAGParams, embedding: Any, *, weights: Any = None) -> jax.Array:
    """Effective row count ``sum_i v_i q_ik / mean(v)`` per partition and group, (P, K)."""
    q = memberships(params, embedding)
    w = V.check_weights(weights, q.shape[1])
    v = jnp.ones((q.shape[1],), q.dtype) if w is None else w
    return jnp.einsum("n,pnk->pk", v, q) / jnp.mean(v)


def predict(params: SAGParams, logits: Any, *, context: Mapping[str, Any] | None = None) -> jax.Array:
    r"""Calibrated probabilities (eq. 8), averaged over the P partitions.

    .. math:: \hat p_i = \frac{1}{P}\sum_{p=1}^P \sum_k q^{(p)}_{ik}\,
              \sigma(o_i/\tau^{(p)}_k + \beta^{(p)}_k)

    ``context["embedding"]`` (n, m) is required.
    """
    o = V.check_logits(logits)
    z = _embedding(context, o.shape[0])
    q = memberships(params, z)  # (P, n, K)
    s = o[None, :, None] * jnp.exp(-params.log_tau)[:, None, :] + params.beta[:, None, :]
    return jnp.mean(jnp.sum(q * jax.nn.sigmoid(s), axis=2), axis=0)


def _make(name: str, variant: str, lam_v: float) -> Calibrator:
    defaults = dict(n_groups=3, n_partitions=10, lam=0.1, lam_v=lam_v, variant=variant)

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
