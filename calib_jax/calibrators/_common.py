"""Shared pieces of the classic calibrators: input preparation, the weighted logistic loss,
a damped Newton solver (for the 1-2 parameter fits) and an optax L-BFGS driver.

Private module: the public surface is listed in :mod:`calib_jax.calibrators`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

import jax
import jax.numpy as jnp
import numpy as np
import optax

from calib_jax._src.eager import compiled
from calib_jax._src.linalg import spd_solve
from calib_jax._src.validation import check_flag_option, check_number_option, check_positive_int, check_sample

__all__ = [
    "check_number_option",
    "check_flag_option",
    "check_newton_options",
    "ArrayLike",
    "KeyArg",
    "Context",
    "prepare",
    "prepared_fit",
    "weighted_mean",
    "bce_with_logits",
    "has_both_classes",
    "newton_logistic",
    "EXTRA_NEWTON_STEPS",
    "DECREMENT_TOL",
    "MIN_STEP",
    "logistic_gradient",
    "fit_shift",
    "lbfgs_minimize",
]


#: the most Newton steps :func:`newton_logistic` adds to its fixed ones while not converged
EXTRA_NEWTON_STEPS = 48
#: the squared Newton decrement (twice the predicted decrease of the mean log loss) below
#: which :func:`newton_logistic` counts a fit as converged: far below any difference a mean
#: log loss can show, above the float32 rounding of the gradient at 10^7 rows
DECREMENT_TOL = 1e-10
#: the step length (after shortenings by ``shrink``) below which a fit stops trying
MIN_STEP = 1e-6

#: the calibrator protocol's common argument types:
#: ``fit(logits, labels, *, weights=None, key=None, context=None, **hyper)``
ArrayLike: TypeAlias = Any
KeyArg: TypeAlias = jax.Array | None
Context: TypeAlias = Mapping[str, Any] | None


def check_newton_options(n_steps: Any, min_events: Any) -> int:
    """The options every Newton-step calibrator shares, checked: ``n_steps`` a positive int as
    given (``2.5`` was read as 2, ``True`` as 1, infinity failed in ``int()``), ``min_events`` a
    finite number >= 0 (a NaN or infinite threshold made every fit fall back, a negative one
    meant 0) or a traced value. Returns ``n_steps``."""
    steps = check_positive_int(n_steps, "n_steps")
    check_number_option(min_events, "min_events", "a finite number >= 0", lambda v: 0.0 <= v < np.inf,
                        traced_ok=True)
    return steps


def prepare(logits: Any, labels: Any, weights: Any) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Validate ``(logits, labels, weights)`` and return float arrays; weights default to 1.

    On concrete input the checks of :func:`calib_jax._src.validation.check_sample` raise
    ``ValueError`` naming the argument; under tracing only shapes are checked.
    """
    z, y, w = check_sample(logits, labels, weights)
    if w is None:
        w = jnp.ones_like(z)
    dtype = jnp.result_type(z.dtype, y.dtype, w.dtype)
    return z.astype(dtype), y.astype(dtype), w.astype(dtype)


def _prepared_fit(logits: Any, labels: Any, weights: Any, core: Callable[..., Any], n_steps: int,
                  min_events: Any, smooth_targets: bool | None = None) -> Any:
    """:func:`prepare` then ``core(z, y, w, n_steps, [smooth_targets,] min_events)``: the
    checked fit of the Newton-step calibrators (temperature, Platt, beta)."""
    z, y, w = prepare(logits, labels, weights)
    options = () if smooth_targets is None else (smooth_targets,)
    return core(z, y, w, n_steps, *options, jnp.asarray(min_events, z.dtype))


#: an eager call runs the checks and the fit as one compiled program (calib_jax._src.eager; the
#: jitted ``core`` is its static part); under a user's jit / vmap it is the function above
prepared_fit = compiled(_prepared_fit)


def weighted_mean(v: jax.Array, w: jax.Array) -> jax.Array:
    """``sum(w v) / sum(w)`` with a guard against a zero total (returns 0 then)."""
    tot = jnp.sum(w)
    return jnp.sum(w * v) / jnp.where(tot > 0, tot, 1.0)


def bce_with_logits(u: jax.Array, y: jax.Array) -> jax.Array:
    r"""Per-example log loss of ``sigmoid(u)`` computed in log space.

    .. math:: \ell(u, y) = -y \log\sigma(u) - (1 - y) \log\sigma(-u)

    Finite for any finite ``u`` (no ``log(1 - sigmoid)``).
    """
    return -(y * jax.nn.log_sigmoid(u) + (1.0 - y) * jax.nn.log_sigmoid(-u))


def has_both_classes(y: jax.Array, w: jax.Array) -> jax.Array:
    """True when both labels carry positive weight (a logistic fit has a finite optimum
    only then, barring perfect separation)."""
    pos = jnp.sum(w * y)
    neg = jnp.sum(w * (1.0 - y))
    return (pos > 0) & (neg > 0)


@jax.custom_jvp
def _softplus(u: jax.Array) -> jax.Array:
    return jnp.logaddexp(u, 0.0)


@_softplus.defjvp
def _softplus_jvp(primals, tangents):
    # d softplus / du = sigmoid(u); differentiating again gives sigmoid (1 - sigmoid) through
    # the `logistic` primitive, so jax.grad / jax.hessian below compile to lean kernels.
    (u,), (du,) = primals, tangents
    return _softplus(u), jax.nn.sigmoid(u) * du


def _bce_scalar(u: jax.Array, y: jax.Array) -> jax.Array:
    # softplus(u) - y u  ==  -y log sigma(u) - (1 - y) log sigma(-u)
    return _softplus(u) - y * u


_d1 = jax.vmap(jax.grad(_bce_scalar))
_d2 = jax.vmap(jax.hessian(_bce_scalar))


def newton_logistic(
    columns: tuple[jax.Array, ...],
    y: jax.Array,
    w: jax.Array,
    theta0: jax.Array,
    *,
    n_steps: int,
    project: Callable[[jax.Array], jax.Array] | None = None,
    damping: float = 1e-6,
    shrink: float = 0.25,
    offset: jax.Array | None = None,
    extra_steps: int = EXTRA_NEWTON_STEPS,
    keep_going: jax.Array | bool = True,
) -> jax.Array:
    r"""Weighted logistic regression :math:`\sigma(X\theta)` by damped Newton: ``n_steps``
    steps, then up to ``extra_steps`` more until converged (jit- and vmap-able; one fused pass
    over the data per step).

    The per-example derivatives :math:`\ell'(u), \ell''(u)` of the log loss in the linear
    predictor :math:`u = X\theta` come from ``jax.grad`` / ``jax.hessian``; the gradient and
    Hessian in :math:`\theta` are :math:`X^\top v \ell' / \sum v` and
    :math:`X^\top \operatorname{diag}(v \ell'') X / \sum v`, with the ``d`` columns of ``X``
    kept as separate vectors so that XLA fuses all ``d + d^2 + 1`` sums into one pass.
    A step solves :math:`(H + \epsilon(1 + \operatorname{tr}H/d) I)\Delta = g`.  Step control
    costs no extra pass: the loss of a trial point is computed together with its gradient in
    the next step; if it increased (beyond a few ulps of rounding noise), the trial is
    discarded and the step from the last accepted point is shortened by ``shrink``.
    ``project`` maps a point onto the feasible set (e.g. ``beta >= 0``); ``offset`` (n,) is a
    fixed term added to the linear predictor (:math:`u = X\theta + \text{offset}`).

    Convergence: after the ``n_steps`` fixed steps the loop goes on (``lax.while_loop``, at
    most ``extra_steps`` more) while the squared Newton decrement of the last accepted point,
    :math:`\lambda^2 = g^\top(\theta - \Pi(\theta - \Delta))` (twice the loss decrease the
    quadratic model predicts; :math:`\Pi` the projection, so a bound optimum counts as
    converged), exceeds ``DECREMENT_TOL`` and the step length has not shrunk below
    ``MIN_STEP``. A fit that the fixed steps converged is therefore bit for bit what the fixed
    steps alone return. From the identity start, logits of spread 10 whose best slope is 0.1
    need about 30 steps where 12 left the fit far off (Platt's fail-safe then fell back to a
    logit shift), and with 1% clicks 12 steps could stop 4% off in the slope with a gradient
    small enough to pass the fail-safe's test (both measured 2026-12-07, the tests of
    ``tests/test_newton_convergence.py``). ``keep_going`` (a boolean scalar, traced or not)
    turns the extra steps off for a fit whose result will be discarded anyway (the fail-safe's
    too-few-events case), so under ``vmap`` such members do not hold the batch in the loop.

    Args:
      columns: the ``d`` columns of the design matrix ``X``, each (n,).
      y, w: (n,) labels and weights.
      theta0: (d,) start.
      n_steps: steps always taken (static).
      project, damping, shrink, offset: as above.
      extra_steps: the most steps after ``n_steps`` (static).
      keep_going: whether the extra steps may run.

    Returns:
      (d,) the fitted :math:`\theta`.
    """
    proj = project if project is not None else (lambda t: t)
    d = len(columns)
    dtype = theta0.dtype
    wsum = jnp.sum(w)
    wn = w / jnp.where(wsum > 0, wsum, 1.0)
    eye = jnp.eye(d, dtype=dtype)
    # Near the optimum the loss changes by less than its own float32 rounding noise; a slack
    # of a few ulps stops that noise from rejecting the (then tiny, safe) Newton steps.
    slack = 16 * jnp.finfo(dtype).eps

    def predictor(theta):
        return _linear(columns, theta, offset)

    def evaluate(theta):
        u = predictor(theta)
        a = wn * _d1(u, y)
        b = wn * _d2(u, y)
        f = jnp.sum(wn * _bce_scalar(u, y))
        g = jnp.stack([jnp.sum(a * c) for c in columns])
        h = jnp.stack([jnp.stack([jnp.sum(b * ci * cj) for cj in columns]) for ci in columns])
        return f, g, h

    def direction(g, h):
        reg = damping * (1.0 + jnp.trace(h) / d)
        delta = spd_solve(h + reg * eye, g)  # no LAPACK call: see calib_jax._src.linalg
        return jnp.where(jnp.all(jnp.isfinite(delta)), delta, jnp.zeros_like(delta))

    def step(carry):
        base, f_base, delta, t, trial, decrement = carry
        f, g, h = evaluate(trial)
        ok = jnp.isfinite(f) & (f <= f_base + slack * (1.0 + jnp.abs(f_base)))
        new_delta = direction(g, h)
        new_decrement = jnp.sum(g * (trial - proj(trial - new_delta)))
        base = jnp.where(ok, trial, base)
        f_base = jnp.where(ok, f, f_base)
        delta = jnp.where(ok, new_delta, delta)
        decrement = jnp.where(ok, new_decrement, decrement)
        t = jnp.where(ok, jnp.ones_like(t), t * shrink)
        return base, f_base, delta, t, proj(base - t * delta), decrement

    def unconverged(carry):
        _, _, _, t, _, decrement = carry
        return ~(decrement <= DECREMENT_TOL) & (t >= MIN_STEP)

    theta0 = proj(theta0)
    inf = jnp.asarray(jnp.inf, dtype)
    init = (theta0, inf, jnp.zeros_like(theta0), jnp.ones((), dtype), theta0, inf)
    go = jnp.asarray(keep_going, bool)

    def more(c):  # one loop for the fixed and the extra steps: one copy of the step to compile
        i, carry = c
        return (i < n_steps) | (go & (i < n_steps + extra_steps) & unconverged(carry))

    _, last = jax.lax.while_loop(more, lambda c: (c[0] + 1, step(c[1])), (jnp.zeros((), jnp.int32), init))
    base, f_base, _, _, trial, _ = last
    # The last trial has not been scored yet: score it once and keep the better point.
    f_last = jnp.sum(wn * _bce_scalar(predictor(trial), y))
    ok = jnp.isfinite(f_last) & (f_last <= f_base + slack * (1.0 + jnp.abs(f_base)))
    return jnp.where(ok, trial, base)


def _linear(columns: tuple[jax.Array, ...], theta: jax.Array, offset: jax.Array | None) -> jax.Array:
    u = columns[0] * theta[0]
    for j in range(1, len(columns)):
        u = u + columns[j] * theta[j]
    return u if offset is None else u + offset


def logistic_gradient(columns: tuple[jax.Array, ...], y: jax.Array, w: jax.Array, theta: jax.Array,
                      offset: jax.Array | None = None) -> jax.Array:
    r"""Gradient of the weighted *mean* log loss of :math:`\sigma(X\theta + \text{offset})`,
    :math:`X^\top v\,(\sigma(u) - y) / \sum v` (the convergence check of the fail-safe fits)."""
    r = jax.nn.sigmoid(_linear(columns, theta, offset)) - y
    return jnp.stack([weighted_mean(r * c, w) for c in columns])


def fit_shift(z: jax.Array, y: jax.Array, w: jax.Array, *, n_steps: int = 12) -> jax.Array:
    r"""The logit shift :math:`b` of :math:`\sigma(z + b)` that matches the weighted mean label
    rate: the one-parameter calibrator the data still support when a slope is not (the
    fallback of Platt and beta calibration). Convex; damped Newton from ``b = 0``."""
    # with one class present the shift has no finite optimum: no extra steps chasing it
    both = (jnp.sum(w * y) > 0) & (jnp.sum(w * (1.0 - y)) > 0)
    theta = newton_logistic((jnp.ones_like(z),), y, w, jnp.zeros((1,), z.dtype), n_steps=n_steps,
                            offset=z, keep_going=both)
    return theta[0]


def lbfgs_minimize(
    loss: Callable[[Any], jax.Array],
    params0: Any,
    *,
    max_iter: int,
    tol: float,
    memory_size: int = 10,
) -> Any:
    """Minimise ``loss`` with ``optax.lbfgs`` (zoom line search) until the gradient norm
    falls below ``tol`` or ``max_iter`` iterations ran.  jit-able; under ``vmap`` the loop
    runs until every batch member has stopped (stopped members are held fixed)."""
    opt = optax.lbfgs(memory_size=memory_size)
    value_and_grad = optax.value_and_grad_from_state(loss)

    def cond(carry):
        _, state, k = carry
        g = optax.tree.get(state, "grad")
        return (k == 0) | ((k < max_iter) & (optax.tree.norm(g) >= tol))

    def body(carry):
        params, state, k = carry
        value, g = value_and_grad(params, state=state)
        updates, state = opt.update(g, state, params, value=value, grad=g, value_fn=loss)
        return optax.apply_updates(params, updates), state, k + 1

    init = (params0, opt.init(params0), jnp.asarray(0))
    params, _, _ = jax.lax.while_loop(cond, body, init)
    return params
