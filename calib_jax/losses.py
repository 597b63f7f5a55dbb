"""Training objectives of SAG and VR-SAG.

"Calibration is Grouping" (VR-SAG; anonymous authors, under review), §2.2-2.4; the equation
numbers below are that paper's.

The whole objective of eq. 11 as one differentiable loss, :func:`vrsag_loss` (SAG's eq. 5 with
``lam_v = 0``), for training a grouping head -- or a model -- with optax; and its three pure
building blocks, each jit-, vmap- and grad-able:

* :func:`grouped_nll` -- the soft-grouped negative log-likelihood of eq. 5 / eq. 11,
  evaluated in log space (``logsumexp`` over groups of ``log q + log-likelihood``) so that
  it stays finite for saturated memberships and extreme logits;
* :func:`l2_penalty` -- ``lam * mean(W^2)`` (or the sum) on the grouping head;
* :func:`within_group_variance` / :func:`variance_penalty` -- the soft within-group variance
  ``sum_k w_k sigma_k^2`` of the *uncalibrated* scores (eq. 9-10), the quantity VR-SAG
  shrinks.

Conventions: ``logits`` (n,), ``labels`` (n,) in [0, 1] (binary, or soft labels such as
smoothed ones: the loss is linear in the label, see :func:`grouped_nll_terms`), memberships (n, K) with rows on the
simplex (pass ``log_memberships`` = ``jax.nn.log_softmax(head_logits)`` to keep the log
exact), optional non-negative ``weights`` (n,).  Inputs are validated eagerly when concrete
(``ValueError`` naming the argument); under ``jit`` / ``grad`` a failed value check makes the
loss and its gradient NaN (:mod:`calib_jax._src.eager`), and on valid input every ratio is
guarded so that no 0/0 appears.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax._src import validation as V
from calib_jax._src.eager import compiled, flag
from calib_jax._src.precision import MATMUL

__all__ = [
    "vrsag_loss",
    "grouped_nll",
    "grouped_nll_terms",
    "l2_penalty",
    "within_group_variance",
    "variance_penalty",
]


def _check_group_vector(x: Any, k: int, name: str, *, positive: bool = False) -> jax.Array:
    arr = V.as_float_array(x, name, ndim=1)
    if arr.shape[0] != k:
        raise ValueError(f"`{name}` has length {arr.shape[0]}, expected {k} (one per group)")
    if positive:
        # raises on concrete values, flags the condition while traced (a concrete ``tau`` closed
        # over by a user's jit is traced there too: ``bool()`` of it would fail)
        V.check_condition(~jnp.all(arr > 0), f"`{name}` must be strictly positive")
    return arr


def _check_penalty_weight(x: Any, name: str) -> Any:
    """A penalty weight: a finite number >= 0. Concrete: ``ValueError`` naming the argument;
    traced: the checked call's output (and gradient) is NaN."""
    if V.is_concrete(x):
        v = np.asarray(jax.device_get(x), np.float64)
        if v.shape != () or not (np.isfinite(v) and v >= 0.0):
            raise ValueError(f"`{name}` must be a finite number >= 0, got {x!r}")
        return x
    V.check_condition(~((x >= 0.0) & (x < jnp.inf)), f"`{name}` must be a finite number >= 0")
    return x


def _weighted_mean(x: jax.Array, weights: jax.Array | None) -> jax.Array:
    if weights is None:
        return jnp.mean(x)
    total = jnp.sum(weights)
    return jnp.sum(weights * x) / jnp.where(total > 0, total, 1.0)


def grouped_nll_terms(
    logits: Any,
    labels: Any,
    log_memberships: Any,
    tau: Any,
    beta: Any = None,
) -> jax.Array:
    r"""Per-row soft-grouped negative log-likelihood (the summand of eq. 5 / eq. 11).

    .. math::

        \ell_i = -\log \sum_{k=1}^K q_{ik}\,
                 \Pr\nolimits_k(y_i \mid o_i),\qquad
        \log \Pr\nolimits_k(y \mid o) = y \log\sigma(s_k) + (1-y)\log\sigma(-s_k),\quad
        s_k = o/\tau_k + \beta_k,

    evaluated as ``-logsumexp_k(log q_ik + log Pr_k)`` with ``jax.nn.log_sigmoid`` of
    ``±s`` (never ``log(1 - sigmoid)``).  For binary labels this equals the log-loss of the
    mixture prediction ``sum_k q_ik sigma(s_ik)`` of eq. 8.

    Soft labels ``y`` in [0, 1] (label smoothing, averaged clicks) get the loss that is linear
    in the label, :math:`\ell_i(y) = y\,\ell_i(1) + (1-y)\,\ell_i(0)`: the expected binary
    loss when :math:`y_i \sim \mathrm{Bernoulli}(y)`, i.e. the cross-entropy of the soft label
    against the mixture prediction.  (Inserting a soft ``y`` into the per-group likelihood,
    or the form ``log sigma((2y - 1) s)``, is not a cross-entropy; both agree with this one
    only at 0 and 1.)

    Args:
      logits: (n,) backbone logits ``o``.
      labels: (n,) labels in [0, 1].
      log_memberships: (n, K) log soft memberships ``log q_ik`` (``-inf`` allowed for hard
        zeros, as long as each row keeps one finite entry).
      tau: (K,) positive per-group temperatures.
      beta: (K,) per-group biases, or ``None`` for the temperature-only (TS) variant.

    Returns:
      (n,) array of per-row losses.  Eagerly, labels outside [0, 1] (or NaN) raise
      ``ValueError``; under ``jit`` every row is NaN instead (as for every failed input
      check of a public function, :mod:`calib_jax._src.eager`).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax.losses import grouped_nll_terms
      >>> o = jnp.array([0.0]); lq = jax.nn.log_softmax(jnp.zeros((1, 2)))
      >>> float(grouped_nll_terms(o, jnp.array([0.9]), lq, jnp.ones(2))[0])  # log 2 at p = 1/2
      0.6931...
    """
    o = V.check_logits(logits)
    n = o.shape[0]
    y = V.check_probs(labels, "labels")
    V.check_same_length(n, labels=y)
    lq, t, b = _group_arguments(o, log_memberships, tau, beta)
    s = o[:, None] / t[None, :] + b[None, :]
    one = -jax.nn.logsumexp(lq + jax.nn.log_sigmoid(s), axis=1)
    zero = -jax.nn.logsumexp(lq + jax.nn.log_sigmoid(-s), axis=1)
    # the ends exactly (no 0 * inf when a saturated group makes the other side infinite)
    return jnp.where(y >= 1.0, one, jnp.where(y <= 0.0, zero, y * one + (1.0 - y) * zero))


def _group_arguments(o: jax.Array, log_memberships: Any, tau: Any, beta: Any, *, check: bool = True
                     ) -> tuple[jax.Array, jax.Array, jax.Array]:
    n = o.shape[0]
    if log_memberships is None:
        raise ValueError("`log_memberships` is required, got None")
    lq = jnp.asarray(log_memberships)
    if lq.ndim != 2 or lq.shape[0] != n:
        raise ValueError(f"`log_memberships` must have shape (n={n}, K), got {tuple(lq.shape)}")
    # rows of memberships on the simplex: each row's logsumexp is 0 (NaN, +inf or a row of
    # -inf fail)
    gap = jnp.abs(jax.nn.logsumexp(lq.astype(o.dtype), axis=1)) if check else None
    if gap is None:
        pass
    elif V.is_concrete(gap):
        if not bool(jnp.all(gap <= 1e-4)):
            raise ValueError("`log_memberships` rows must be log-probabilities: "
                             "logsumexp over the groups must be 0 (no NaN, no row of -inf)")
    else:
        flag(~jnp.all(gap <= 1e-4))
    k = lq.shape[1]
    t = _check_group_vector(tau, k, "tau", positive=True)
    b = jnp.zeros((k,), o.dtype) if beta is None else _check_group_vector(beta, k, "beta")
    return lq, t, b


def _binary_grouped_nll_terms(o: jax.Array, y: jax.Array, lq: jax.Array, tau: jax.Array,
                             beta: jax.Array | None = None) -> jax.Array:
    r""":func:`grouped_nll_terms` for labels the caller has already checked to be 0 or 1
    (the SAG fits): one log-sigmoid and one ``logsumexp`` per row instead of two, through
    :math:`y\log\sigma(x) + (1-y)\log\sigma(-x) = \log\sigma((2y-1)x)` for binary y.
    No input checks; a soft label gives a wrong loss here (use the public function)."""
    lq, t, b = _group_arguments(o, lq, tau, beta, check=False)
    s = o[:, None] / t[None, :] + b[None, :]
    ll = jax.nn.log_sigmoid((2.0 * y - 1.0)[:, None] * s)
    return -jax.nn.logsumexp(lq + ll, axis=1)


def grouped_nll(
    logits: Any,
    labels: Any,
    log_memberships: Any,
    tau: Any,
    beta: Any = None,
    *,
    weights: Any = None,
) -> jax.Array:
    r"""Soft-grouped negative log-likelihood, the data term of eq. 5 (SAG) and eq. 11 (VR-SAG).

    .. math::

        \mathcal{L}_{\mathrm{NLL}} = -\frac{\sum_i v_i
            \log\sum_k q_{ik}\,\tilde p_{ik}^{\,y_i}(1-\tilde p_{ik})^{1-y_i}}{\sum_i v_i},
        \qquad \tilde p_{ik} = \sigma(o_i/\tau_k + \beta_k)

    computed stably in log space (see :func:`grouped_nll_terms`).  ``weights`` ``v``
    default to 1 (then this is the plain mean of eq. 5).

    Args:
      logits: (n,) finite backbone logits :math:`o`.
      labels: (n,) labels in [0, 1] (soft labels: see :func:`grouped_nll_terms`).
      log_memberships: (n, K) log soft memberships :math:`\log q_{ik}`, each row's
        ``logsumexp`` 0 (e.g. ``jax.nn.log_softmax(head_logits)``; ``-inf`` allowed for hard
        zeros).
      tau: (K,) positive per-group temperatures :math:`\tau_k`.
      beta: (K,) finite per-group biases :math:`\beta_k`, or ``None`` for the
        temperature-only (TS) variant.
      weights: optional (n,) non-negative row weights :math:`v_i` with a positive sum.

    Returns:
      A scalar (0-d array), differentiable in every argument. Called eagerly, invalid input
      (NaN or infinite logits, labels outside [0, 1], memberships whose rows are not on the
      simplex, a non-positive ``tau``, a negative weight) raises ``ValueError`` naming the
      argument; under ``jit`` / ``vmap`` / ``grad`` the same checks make the loss and its
      gradient NaN. Shape mismatches raise while tracing.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax.losses import grouped_nll
      >>> o = jnp.array([-2.0, 0.5, 1.0]); y = jnp.array([0.0, 1.0, 1.0])
      >>> lq = jax.nn.log_softmax(jnp.zeros((3, 2)))
      >>> float(grouped_nll(o, y, lq, jnp.ones(2)))  # K identical groups: plain log-loss
      0.3047...
    """
    terms = grouped_nll_terms(logits, labels, log_memberships, tau, beta)
    w = V.check_weights(weights, terms.shape[0])
    return _weighted_mean(terms, w)


def l2_penalty(W: Any, *, lam: float, reduction: str = "mean") -> jax.Array:
    r"""Weight penalty of the grouping head, the second term of eq. 5 and eq. 11.

    .. math:: \lambda\,\mathrm{mean}(W^2) = \frac{\lambda}{mK}\sum_{j,k} W_{jk}^2
              \quad(\texttt{reduction="mean"}),\qquad
              \lambda\,\|W\|_2^2 \quad(\texttt{reduction="sum"}).

    The default ``"mean"`` is the normalisation of the reference code the paper modified
    (ThyrixYang/group_calibration: ``weight_decay * torch.mean(W**2)``); eq. 5 prints the
    sum, which with the paper's ``lambda = 0.1`` is ``m K`` times stronger and keeps the
    head near uniform.

    Args:
      W: the head's weight matrix, (m, K) (any shape with at least one entry), finite;
        float16 and bfloat16 entries are squared in float32.
      lam: penalty weight :math:`\lambda` (a finite float >= 0, or a traced scalar).
      reduction: ``"mean"`` (default) or ``"sum"`` over the entries of ``W``.

    Returns:
      A scalar (0-d array). An unknown ``reduction``, an empty ``W``, a concrete ``lam`` that
      is negative, NaN or infinite, or a NaN or infinite entry of a concrete ``W`` raises
      ``ValueError`` naming the argument. Under ``jit`` / ``grad`` no value check runs (the
      function is not wrapped): a NaN or infinite entry simply propagates into the penalty.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.losses import l2_penalty
      >>> W = jnp.array([[1.0, 2.0], [3.0, 4.0]])  # squares sum to 30
      >>> round(float(l2_penalty(W, lam=0.1)), 4), round(float(l2_penalty(W, lam=0.1, reduction="sum")), 4)
      (0.75, 3.0)
    """
    if reduction not in ("mean", "sum"):
        raise ValueError(f"`reduction` must be 'mean' or 'sum', got {reduction!r}")
    w = jnp.asarray(W)
    if w.size == 0:
        raise ValueError(f"`W` is empty (shape {tuple(w.shape)}): its mean square is undefined")
    if jnp.issubdtype(w.dtype, jnp.floating) and jnp.finfo(w.dtype).bits < 32:
        w = w.astype(jnp.float32)  # 300 squared overflows float16
    if V.is_concrete(w) and not bool(np.all(np.isfinite(np.asarray(jax.device_get(w))))):
        raise ValueError("`W` contains NaN/inf values")
    if V.is_concrete(lam):
        value = np.asarray(jax.device_get(lam), np.float64)
        if value.shape != () or not (np.isfinite(value) and value >= 0.0):
            raise ValueError(f"`lam` must be a finite number >= 0, got {lam!r}")
    sq = jnp.square(w)
    return lam * (jnp.mean(sq) if reduction == "mean" else jnp.sum(sq))


def within_group_variance(probs: Any, memberships: Any, *, weights: Any = None) -> jax.Array:
    r"""Soft within-group variance of the scores, :math:`\sum_k \hat w_k \hat\sigma_k^2` (eq. 9).

    .. math::

        \hat w_k = \frac{\sum_i v_i q_{ik}}{\sum_i v_i},\quad
        \hat\mu_k = \frac{\sum_i v_i q_{ik} p_i}{\sum_i v_i q_{ik}},\quad
        \hat\sigma^2_k = \frac{\sum_i v_i q_{ik} (p_i - \hat\mu_k)^2}{\sum_i v_i q_{ik}},

    so that :math:`\sum_k \hat w_k\hat\sigma^2_k = \sum_{i,k} v_i q_{ik}(p_i-\hat\mu_k)^2 /
    \sum_i v_i`.  The second moment is taken around the group means (two passes) rather
    than as ``E[p^2] - mu^2``, which loses digits in float32 when the scores are small
    (CTR ~ 1e-2).  Groups with zero mass contribute 0 (guarded, no NaN).  Gradients flow
    through the memberships; in VR-SAG ``probs`` are the fixed, uncalibrated backbone scores.

    Args:
      probs: (n,) scores in [0, 1] (VR-SAG: uncalibrated ``sigmoid(o)``).
      memberships: (n, K) soft (rows on the simplex: non-negative, summing to 1 within 1e-4)
        or one-hot memberships.
      weights: optional (n,) non-negative sample weights.

    Returns:
      A scalar (0-d array), >= 0, differentiable in ``memberships`` (and ``probs``). Called
      eagerly, invalid input (NaN, a score outside [0, 1], a membership row off the simplex,
      a negative weight) raises ``ValueError`` naming the argument; under ``jit`` / ``vmap`` /
      ``grad`` the same checks make the value and its gradient NaN.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.losses import within_group_variance
      >>> p = jnp.array([0.1, 0.3, 0.6, 0.8])
      >>> hard = jnp.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
      >>> round(float(within_group_variance(p, hard)), 4)  # each pair is its mean ± 0.1
      0.01
      >>> round(float(within_group_variance(p, jnp.full((4, 2), 0.5))), 4)  # one pooled group
      0.0725
    """
    p = V.check_probs(probs)
    n = p.shape[0]
    q = V.check_soft_groups(memberships, n, "memberships")
    w = V.check_weights(weights, n)
    v = jnp.ones_like(p) if w is None else w
    vq = v[:, None] * q  # (n, K)
    mass = jnp.sum(vq, axis=0)  # (K,)
    safe = jnp.where(mass > 0, mass, 1.0)
    mu = jnp.where(mass > 0, jnp.matmul(p, vq, precision=MATMUL) / safe, 0.0)
    dev2 = jnp.square(p[:, None] - mu[None, :])
    total = jnp.sum(v)
    return jnp.sum(vq * dev2) / jnp.where(total > 0, total, 1.0)


def variance_penalty(
    probs: Any, memberships: Any, *, lam_v: float, weights: Any = None
) -> jax.Array:
    r"""VR-SAG variance penalty of eq. 10: :math:`\lambda_v \sum_k \hat w_k \hat\sigma_k^2`.

    See :func:`within_group_variance` for the soft statistics (eq. 9).

    Args:
      probs: (n,) scores in [0, 1] (VR-SAG: the uncalibrated ``sigmoid(o)``).
      memberships: (n, K) soft (rows on the simplex) or one-hot memberships.
      lam_v: penalty weight :math:`\lambda_v` (a float >= 0; 0 gives SAG).
      weights: optional (n,) non-negative sample weights.

    Returns:
      A scalar (0-d array), ``lam_v`` times :func:`within_group_variance`. Called eagerly,
      invalid input (those of :func:`within_group_variance`, a negative or non-finite
      ``lam_v``) raises ``ValueError`` naming the argument; under ``jit`` / ``vmap`` /
      ``grad`` the same checks make the value and its gradient NaN.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.losses import variance_penalty
      >>> p = jnp.array([0.1, 0.3, 0.6, 0.8])
      >>> hard = jnp.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
      >>> round(float(variance_penalty(p, hard, lam_v=0.5)), 4)  # 0.5 * 0.01
      0.005
    """
    return _check_penalty_weight(lam_v, "lam_v") * within_group_variance(probs, memberships, weights=weights)


def vrsag_loss(
    logits: Any,
    labels: Any,
    group_logits: Any,
    tau: Any,
    beta: Any = None,
    *,
    head_weights: Any = None,
    lam: float = 0.1,
    lam_v: float = 0.5,
    weights: Any = None,
) -> jax.Array:
    r"""The VR-SAG training objective (eq. 11): soft-grouped NLL + head penalty + variance penalty.

    .. math::

        \mathcal{L} = \underbrace{-\frac{\sum_i v_i \log\sum_k q_{ik}\,
            \Pr\nolimits_k(y_i\mid o_i)}{\sum_i v_i}}_{\text{eq. 5}}
          + \lambda\,\mathrm{mean}(W^2)
          + \lambda_v \sum_k \hat w_k \hat\sigma_k^2,
        \qquad q_{i\cdot} = \mathrm{softmax}(h_{i\cdot}),

    with :math:`\Pr_k(1\mid o) = \sigma(o/\tau_k + \beta_k)` and :math:`\hat w_k,
    \hat\sigma_k^2` the soft weight and within-group variance of the *uncalibrated* scores
    :math:`\sigma(o_i)` (eq. 9). One membership convention throughout: the grouping head's raw
    outputs ``group_logits`` :math:`h` (n, K); the NLL uses ``log_softmax(h)`` (exact in log
    space, :func:`grouped_nll`) and the variance ``softmax(h)`` (:func:`variance_penalty`).
    ``lam_v = 0`` gives SAG's objective (eq. 5); the defaults ``lam = 0.1``, ``lam_v = 0.5`` are
    those of the ``vrsag_ts`` / ``vrsag_ps`` calibrators, whose fit minimises the same function
    (a faster layout of it, tested equal in value and gradient).

    "Calibration is Grouping" (VR-SAG; anonymous authors, under review), eqs. 5 and
    9-11.

    Args:
      logits: (n,) backbone logits :math:`o` (held fixed in post-hoc calibration; gradients flow
        through them when the loss trains a model).
      labels: (n,) labels in [0, 1] (soft labels: see :func:`grouped_nll_terms`).
      group_logits: (n, K) grouping-head outputs :math:`h_{ik}`, any reals (e.g. ``z @ W + b``).
      tau: (K,) positive per-group temperatures.
      beta: (K,) per-group biases, or ``None`` for the temperature-only (TS) variant.
      head_weights: the head's weight matrix :math:`W` for the penalty
        :math:`\lambda\,\mathrm{mean}(W^2)` (:func:`l2_penalty`), or ``None`` for no penalty.
      lam: weight of the head penalty, a finite number >= 0.
      lam_v: weight of the variance penalty, a finite number >= 0 (0: SAG; a negative weight
        would reward within-group variance).
      weights: optional (n,) non-negative sample weights :math:`v_i`.

    Returns:
      A scalar. Eagerly, invalid input (including a negative or non-finite ``lam`` or
      ``lam_v``, and a NaN or infinite entry of ``head_weights``) raises ``ValueError`` naming
      the argument; under ``jit`` / ``grad`` a failed check makes the loss NaN
      (:mod:`calib_jax._src.eager`), and its gradient (all of it under ``grad``; under
      ``jit(grad(...))`` at least the entries that are NaN).

    Example (a grouping head trained with optax):
      >>> import jax, jax.numpy as jnp, optax
      >>> from calib_jax.losses import vrsag_loss
      >>> kz, ko = jax.random.split(jax.random.key(0))
      >>> z = jax.random.normal(kz, (256, 4)); o = jax.random.normal(ko, (256,))
      >>> y = (z[:, 0] + o > 0).astype(jnp.float32)
      >>> theta = {"W": jnp.zeros((4, 3)), "log_tau": jnp.zeros(3), "beta": jnp.zeros(3)}
      >>> def loss(t):
      ...     return vrsag_loss(o, y, z @ t["W"], jnp.exp(t["log_tau"]), t["beta"],
      ...                       head_weights=t["W"])
      >>> opt = optax.adam(0.05); state = opt.init(theta)
      >>> @jax.jit  # one compiled training step
      ... def step(theta, state):
      ...     value, g = jax.value_and_grad(loss)(theta)
      ...     updates, state = opt.update(g, state)
      ...     return optax.apply_updates(theta, updates), state, value
      >>> theta, state, first = step(theta, state)
      >>> for _ in range(50):
      ...     theta, state, last = step(theta, state)
      >>> bool(last < first)
      True
    """
    o = V.check_logits(logits)
    lam, lam_v = _check_penalty_weight(lam, "lam"), _check_penalty_weight(lam_v, "lam_v")
    h = V.as_float_array(group_logits, "group_logits", ndim=2)
    if h.shape[0] != o.shape[0]:
        raise ValueError(f"`group_logits` has {h.shape[0]} rows, expected {o.shape[0]} (one per logit)")
    nll = grouped_nll(o, labels, jax.nn.log_softmax(h, axis=1), tau, beta, weights=weights)
    total = nll + variance_penalty(jax.nn.sigmoid(o), jax.nn.softmax(h, axis=1), lam_v=lam_v, weights=weights)
    if head_weights is not None:
        # checked here, under its own name: inside the one compiled program of an eager call
        # l2_penalty sees a tracer and could not raise (a NaN W made the loss NaN, silently)
        w = V.as_float_array(head_weights, "head_weights", ndim=None)
        if w.size == 0:
            raise ValueError(f"`head_weights` is empty (shape {tuple(w.shape)}): its mean square is undefined")
        total = total + l2_penalty(w, lam=lam, reduction="mean")
    return total


# Eager calls run one compiled program (checks included); under a user's jit / grad a failed
# check makes the output NaN instead of a plausible number (calib_jax._src.eager).
grouped_nll_terms = compiled(grouped_nll_terms)
grouped_nll = compiled(grouped_nll)
within_group_variance = compiled(within_group_variance)
variance_penalty = compiled(variance_penalty)
vrsag_loss = compiled(vrsag_loss)
