r"""Semantic-Aware Grouping (SAG) and Variance-Reduced SAG (VR-SAG) calibrators.

"Calibration is Grouping" (VR-SAG; anonymous authors, under review), §2.2-2.4. A grouping
head maps the frozen backbone embedding ``z`` (n, m) to soft
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
with independent random heads are fitted one after another inside one compiled program
(``lax.map``; the reference code loops over them too) and averaged.

Two protocols (``protocol=``), both with the paper's and the reference code's defaults:

* ``"paper"`` — the paper's §2.2-2.4: K = 3 groups, P = 10 partitions, a head *with* bias,
  every parameter fitted jointly on the calibration split (D_val) by eq. 11, and the soft
  mixture of eq. 8 at serving.
* ``"reference"`` — the public code the paper says it modified (the paper's App. I.1:
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
initialised at 1.5, and full-batch L-BFGS with a strong-Wolfe (zoom) line search for at
most 100 iterations with torch's stopping rules (``optax.lbfgs``, memory 100 as torch's
default history; the reference runs ``torch.optim.LBFGS(max_iter=100)`` with its default
tolerances and evaluation budget: see :func:`fit`'s ``tol_grad``). The objective is evaluated in
a fused form equal to the log-space one to float32 rounding (``_objective``: the mixture as
a ratio of sums, the embedding transposed), full batch on every row unless ``max_rows`` asks
for a subsample: 4.8 s for 100 steps at n = 10^5 rows, m = 64, P = 10, K = 3 on two CPU
cores, 55 s at n = 10^6 (``benchmarks/bench_vrsag.py``). The base calibrators of the
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

Layout: the heads' memberships, the reference protocol's second stage and the fail-safe
checks are in :mod:`calib_jax.calibrators._sag_groups`; the L-BFGS drivers and their stopping
rules in :mod:`calib_jax.calibrators._lbfgs`; this module holds the objective, the
hyper-parameters (:class:`SAGConfig`), the fits, the predictions and the registry entries.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import calib_jax.calibrators._failsafe as F
import calib_jax.calibrators._sag_groups as G
from calib_jax._src import validation as V
from calib_jax._src.precision import MATMUL
from calib_jax.calibrators._base import Calibrator, public_entry, register
from calib_jax.calibrators._common import ArrayLike, Context, KeyArg, check_flag_option, check_number_option
from calib_jax.calibrators._lbfgs import TORCH_TOL_CHANGE, TORCH_TOL_GRAD, StopRule, minimize, minimize_lockstep

__all__ = [
    "PROTOCOLS",
    "PROTOCOL_DEFAULTS",
    "SAGParams",
    "SAGConfig",
    "SOLVERS",
    "DEFAULT_SOLVER",
    "init_params",
    "fit",
    "fit_sag",
    "fit_vrsag",
    "fit_many",
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
#: how the P partitions' L-BFGS fits run: one after another (``lax.map``), or all stepping
#: together with one pass over the embedding per evaluation (:func:`fit`'s ``solver``)
SOLVERS = ("sequential", "lockstep")
#: the solver :func:`fit` and :func:`fit_many` use unless told (``"sequential"`` before 2026-12-05)
DEFAULT_SOLVER = "lockstep"
#: per-protocol defaults: groups K, partitions P, head bias, L-BFGS iterations
PROTOCOL_DEFAULTS: dict[str, dict[str, Any]] = {
    "paper": {"n_groups": 3, "n_partitions": 10, "head_bias": True, "n_steps": 100},
    "reference": {"n_groups": 2, "n_partitions": 20, "head_bias": False, "n_steps": 100},
}
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


def init_params(key: jax.Array, m: int, *, n_groups: int = 3, n_partitions: int = 10,
                head_bias: bool = True, tau_init: float = _TAU_INIT) -> _Theta:
    r"""Random initial heads for ``n_partitions`` partitions, initialised as
    ``torch.nn.Linear(m, K)`` is (:math:`W, b \sim U(-1/\sqrt m, 1/\sqrt m)`; ``b = 0``
    without a head bias), with group temperatures ``tau_init`` and biases 0.
    Partition ``p`` uses ``jax.random.fold_in(key, p)``.

    Args:
      key: a PRNG key (``jax.random.key``).
      m: embedding width, an int >= 1.
      n_groups: K, an int >= 1.
      n_partitions: P, an int >= 1.
      head_bias: draw the head bias ``b`` (True) or set it to 0 (False, the reference
        protocol's head).
      tau_init: initial group temperature, > 0 (the reference code's 1.5).

    Returns:
      A NamedTuple ``(W, b, log_tau, beta)`` of float32 arrays: ``W`` (P, m, K), ``b``,
      ``log_tau`` (all :math:`\log \tau_{init}`) and ``beta`` (zeros), each (P, K); pass it
      as ``init=`` to :func:`fit`. ``m``, ``n_groups`` and ``n_partitions`` are shapes (static
      under ``jit``).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax.calibrators.sag import init_params
      >>> theta = init_params(jax.random.key(0), 4, n_groups=3, n_partitions=2)
      >>> theta.W.shape, theta.b.shape, theta.log_tau.shape
      ((2, 4, 3), (2, 3), (2, 3))
      >>> bool(jnp.all(jnp.abs(theta.W) <= 0.5))                 # U(-1/sqrt(4), 1/sqrt(4))
      True
      >>> round(float(jnp.exp(theta.log_tau[0, 0])), 4), float(jnp.abs(theta.beta).max())
      (1.5, 0.0)
    """
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


def _group_weights(rows: list[jax.Array]) -> tuple[jax.Array, list[jax.Array], jax.Array]:
    r"""The mixture weights of eq. 8 from the K rows of head logits, unnormalised:
    ``(top, e, den)`` with :math:`top = \max_k h_k`, :math:`e_k = e^{h_k - top}` and
    :math:`den = \sum_k e_k`, so :math:`q_k = e_k / den`. The maximum is a constant of the
    gradient (``stop_gradient``: the softmax does not depend on it). Shared by the fit's
    objective and the predictions, so both evaluate the same mixture."""
    top = jax.lax.stop_gradient(functools.reduce(jnp.maximum, rows))
    e = [jnp.exp(r - top) for r in rows]
    return top, e, functools.reduce(jnp.add, e)


_CLIP = -80.0  # sigmoid argument floor of the fast objective: sigma(-80) = 1.8e-35 > 0 in float32


def _observed_mixture(e: list[jax.Array], sgn, o, inv_tau: list[Any], beta: list[Any]) -> jax.Array:
    r""":math:`\sum_k e_k\,\sigma(\max((2y - 1)(o/\tau_k + \beta_k), -80))`: the mixture's
    probability of the observed labels times the softmax's denominator (``e`` from
    :func:`_group_weights`; ``inv_tau[k]``, ``beta[k]`` broadcast against the rows). The
    objective of one partition and of all partitions at once share it."""
    return functools.reduce(jnp.add, [e_k * jax.nn.sigmoid(jnp.maximum(sgn * (o * inv_tau[k] + beta[k]), _CLIP))
                                      for k, e_k in enumerate(e)])


def _objective(theta: _Theta, o, sgn, zt, p_unc, v, lam, lam_v, use_beta: bool, head_bias: bool):
    r"""Eq. 11 for one partition, written for speed (the fit's only hot loop).

    Same function as ``losses.grouped_nll(o, y, log_softmax(zW + b), tau, beta) +
    l2_penalty(W, mean) + variance_penalty(sigma(o), softmax(zW + b))`` (tested to float32
    rounding in value and gradient), evaluated as

    .. math::

        e_{ik} = e^{h_{ik} - \max_k h_{ik}},\quad
        \ell_i = \log\sum_k e_{ik} - \log\sum_k e_{ik}\,
                 \sigma\big(\max((2y_i - 1)(o_i/\tau_k + \beta_k), -80)\big),

    i.e. the mixture of eq. 8 as a ratio of sums. Per (row, group) entry that is two
    exponentials and a division (the log-space form -- log-softmax, log-sigmoid, logsumexp and
    their backward passes -- takes about eight transcendentals), and the backward pass adds
    none. The floor at -80 changes a term only where a group gives the observed label a
    probability below 1.8e-35, and the loss only where every group does (it keeps ``log`` of
    the mixture finite).

    Layout: the embedding is passed transposed, ``zt`` (m, n), and every (row, group)
    quantity is a list of K row vectors with the sums over groups unrolled. Measured on
    XLA:CPU at n = 10^5, K = 3: a sum over the short group axis of an (n, K) or (K, n) array
    costs 0.4-1.9 ms against 0.04 ms unrolled, and the head's products with ``zt`` cost 3 ms
    against 7 ms with ``z`` (n, m).  ``sgn = 2y - 1``; ``p_unc = sigma(o)``.
    """
    W = theta.W
    b = theta.b if head_bias else jax.lax.stop_gradient(theta.b)
    beta = theta.beta if use_beta else jnp.zeros_like(theta.beta)
    inv_tau = jnp.exp(-theta.log_tau)
    h = jnp.matmul(W.T, zt, precision=MATMUL) + b[:, None]  # (K, n)
    _, e, den = _group_weights([h[k] for k in range(h.shape[0])])
    num = _observed_mixture(e, sgn, o, [inv_tau[k] for k in range(len(e))], [beta[k] for k in range(len(e))])
    total = jnp.sum(v)
    nll = jnp.sum(v * (jnp.log(den) - jnp.log(num))) / total
    # soft within-group variance of the uncalibrated scores (eq. 9-10), two-pass per group
    v_den = v / den
    var = jnp.zeros((), o.dtype)
    for e_k in e:
        vq = v_den * e_k
        mass = jnp.sum(vq)
        mu = jnp.sum(vq * p_unc) / jnp.where(mass > 0, mass, 1.0)
        var = var + jnp.sum(vq * jnp.square(p_unc - mu))
    return nll + lam * jnp.mean(jnp.square(W)) + lam_v * var / total


#: rows per block of :func:`_objective_all` (its (P, K, block) intermediates stay in cache)
_ROW_BLOCK = 4096


def _blocked_terms(theta: _Theta, o, p_unc, v, use_beta: bool, block: int, rows=None):
    """What :func:`_objective_all` and :func:`_value_and_grad_stored` both set up: the rows per
    block (at most n), the number of full blocks and the rows of the shorter last one, the total
    weight, the weighted mean ``c`` of the uncalibrated scores, the offsets (zero without
    ``use_beta``) and the inverse temperatures. With ``rows`` (B,) (problem b fits the weights
    ``v[rows[b]]`` of a (H, n) ``v``) the total and ``c`` are (B,), else scalars."""
    n = o.shape[0]
    block = min(block, n)
    n_full, tail = divmod(n, block)
    beta = theta.beta if use_beta else jnp.zeros_like(theta.beta)
    if rows is not None:
        totals = jnp.sum(v, axis=1)
        return (block, n_full, tail, totals[rows], (jnp.sum(v * p_unc[None, :], axis=1) / totals)[rows], beta,
                jnp.exp(-theta.log_tau))
    total = jnp.sum(v)
    return block, n_full, tail, total, jnp.sum(v * p_unc) / total, beta, jnp.exp(-theta.log_tau)


def _block_weights(v, rows, at, size: int):
    """The weights of one block of rows, (1, size) when every problem shares ``v`` (n,), else
    (B, size): problem b's row ``rows[b]`` of ``v`` (H, n)."""
    if rows is None:
        return jax.lax.dynamic_slice_in_dim(v, at, size)[None, :]
    return jax.lax.dynamic_slice_in_dim(v, at, size, axis=1)[rows]


def _per_problem(x, ndim: int):
    """A scalar as it is; a (B,) per-problem quantity with ``ndim - 1`` trailing unit axes, to
    broadcast against (B, ...) arrays of ``ndim`` axes."""
    return x if x.ndim == 0 else x.reshape(x.shape + (1,) * (ndim - 1))


def _objective_all(theta: _Theta, o, sgn, zt, p_unc, v, lam, lam_v, use_beta: bool, head_bias: bool,
                   block: int = _ROW_BLOCK, rows=None):
    r"""Eq. 11 for every problem of ``theta``'s leading axis at once, (B,) values: the function
    of :func:`_objective` per problem, evaluated over blocks of rows.

    Each block of rows (the last one shorter when ``block`` does not divide n) is read once for
    all B problems (one product of the block's embedding with every head), and no array of
    size B x n is written: the sums over rows (the log loss,
    and per group the mass and the first two moments of the uncalibrated scores about their
    weighted mean ``c``) are carried from block to block, and the backward pass recomputes a
    block (``jax.checkpoint``) instead of storing it. The soft within-group variance is
    :math:`\sum q v (p - c)^2 - (\sum q v (p - c))^2 / \sum q v`, equal to the two-pass form of
    :func:`_objective` up to float32 rounding (``c`` is close to every group's mean, so the
    difference does not cancel). ``rows``: as :func:`_blocked_terms` (each problem its own
    weights)."""
    block, n_full, tail, total, c, beta, inv_tau = _blocked_terms(theta, o, p_unc, v, use_beta, block, rows)
    c = _per_problem(c, 2)
    W = theta.W
    b = theta.b if head_bias else jax.lax.stop_gradient(theta.b)
    K = W.shape[2]

    def block_sums(carry, at, size: int):
        nll, mass, s1, s2 = carry
        z_b = jax.lax.dynamic_slice_in_dim(zt, at, size, axis=1)
        o_b, sgn_b, p_b = (jax.lax.dynamic_slice_in_dim(a, at, size)[None, :] for a in (o, sgn, p_unc))
        v_b = _block_weights(v, rows, at, size)
        h = jnp.einsum("bmk,mn->bkn", W, z_b, precision=MATMUL) + b[:, :, None]  # (B, K, block)
        _, e, den = _group_weights([h[:, k] for k in range(K)])
        num = _observed_mixture(e, sgn_b, o_b, [inv_tau[:, k, None] for k in range(K)],
                                [beta[:, k, None] for k in range(K)])
        nll = nll + jnp.sum(v_b * (jnp.log(den) - jnp.log(num)), axis=1)
        v_den = v_b / den
        vq = jnp.stack([v_den * e_k for e_k in e], axis=1)  # (B, K, block)
        d = (p_b - c)[:, None, :]
        return nll, mass + jnp.sum(vq, axis=2), s1 + jnp.sum(vq * d, axis=2), s2 + jnp.sum(vq * d * d, axis=2)

    B = W.shape[0]
    zero_bk = jnp.zeros((B, K), o.dtype)
    carry = (jnp.zeros((B,), o.dtype), zero_bk, zero_bk, zero_bk)
    carry, _ = jax.lax.scan(jax.checkpoint(lambda acc, i: (block_sums(acc, i * block, block), None)), carry,
                            jnp.arange(n_full))
    if tail:  # the last rows as one shorter block: padding them to a full block copied the whole embedding
        carry = jax.checkpoint(lambda acc: block_sums(acc, n_full * block, tail))(carry)
    nll, mass, s1, s2 = carry
    var = jnp.sum(s2 - jnp.where(mass > 0, s1 * s1 / jnp.where(mass > 0, mass, 1.0), 0.0), axis=1)
    return nll / total + lam * jnp.mean(jnp.square(W), axis=(1, 2)) + lam_v * var / total


#: the softmax weights kept between the two passes of :func:`_value_and_grad_stored`, float32,
#: one per (problem, group, row), and one ratio per (problem, row) (:func:`_kept_bytes`), at
#: most this many bytes in all; above it the lock-step fit
#: differentiates :func:`_objective_all` instead (each block recomputed, nothing of size n
#: kept). ``benchmarks/results/vrsag_kept.md`` (m = 64, 10 partitions, K = 3, on the 2-core
#: CPU, two runs, the softmax weights alone kept): one evaluation 1.05-1.16 times as fast from
#: 10^5 rows (11 MiB kept) to 10^6 (114 MiB), a 100-step fit 1.02-1.28 times. The limit leaves
#: room for twice 10^6 rows with the ratios kept too (305 MiB; 256 MiB before they were kept)
_KEPT_BYTES_PER_ENTRY = 4
_KEEP_LIMIT_BYTES = 320 * 2 ** 20


def _stored_block(n_problems: int, n_groups: int) -> int:
    """Rows per block of :func:`_value_and_grad_stored`: 8,192 while every block's
    (B, K, block) arrays are at most 64 x 8,192 entries (one fit's partitions), else 4,096.
    Measured on the 2-core Xeon (AVX-512), 100-step lock-step fits at 10^5 rows, interleaved
    rounds in one process: with 10 partitions of K = 3 (the paper protocol's one fit), 8,192 rows
    a block 1.12 times as fast as 4,096 (16,384: 1.13; 32,768: 0.87); with 20 partitions of
    K = 2 (the reference protocol's) 1.14 times; with 100 problems of K = 3 (ten fits
    together) 0.94-0.96 times, so those keep 4,096."""
    return 8192 if n_problems * n_groups <= 64 else 4096


def _kept_bytes(n_problems: int, n_groups: int, n_rows: int) -> int:
    """The bytes :func:`_value_and_grad_stored` keeps between its passes: the (B, K, n) softmax
    weights and the (B, n) ratios of the softmax's denominator to the mixture's numerator."""
    return _KEPT_BYTES_PER_ENTRY * n_problems * (n_groups + 1) * n_rows


def _keeps_weights(n_problems: int, n_groups: int, n_rows: int) -> bool:
    """Whether the lock-step evaluation of these problems is :func:`_value_and_grad_stored`
    (its kept arrays within ``_KEEP_LIMIT_BYTES``), not autodiff of :func:`_objective_all`."""
    return _kept_bytes(n_problems, n_groups, n_rows) <= _KEEP_LIMIT_BYTES


def _value_and_grad_stored(theta: _Theta, o, sgn, zt, p_unc, v, lam, lam_v, use_beta: bool, head_bias: bool,
                           block: int | None = None, rows=None, z_rows=None):
    r"""The values of :func:`_objective_all` and their gradients, derived by hand: one forward
    pass over the embedding that keeps the (B, K, n) softmax weights and a (B, n) ratio, then one
    backward pass.

    Automatic differentiation of :func:`_objective_all` recomputes every block (its
    ``jax.checkpoint``): it forms the head's product with the embedding twice per evaluation
    besides the gradient's product. Here the forward pass keeps, per (problem, group, row), the
    softmax weight :math:`q_{ik} = e_{ik}/\sum_j e_{ij}`, and per (problem, row) the inverse
    :math:`\rho_i = 1/\sum_k q_{ik}\sigma_{ik}` of the mixture's probability of the observed
    label (the softmax's denominator over the mixture's numerator, one division), and it
    accumulates the log loss :math:`\sum_i v_i \log\rho_i` and each group's mass and first two
    moments. The variance's gradient needs each group's weighted mean
    :math:`a_k` of :math:`d_i = p_i - c` (the uncalibrated scores about their mean), known only
    after every row; with it the backward pass forms per row

    .. math::

        \frac{\partial L}{\partial h_{ij}} = \frac{v_i}{T}\Big[(q_{ij} - r_{ij})
            + \lambda_v q_{ij}\big((d_i - a_j)^2 - \textstyle\sum_k q_{ik}(d_i - a_k)^2\big)\Big],
        \qquad r_{ij} = \frac{q_{ij}\,\sigma_{ij}}{\sum_k q_{ik}\,\sigma_{ik}} = q_{ij}\,\sigma_{ij}\,\rho_i,

    (:math:`r` the groups' posterior weights of the observed label, :math:`\sigma_{ij}` the
    observed label's probability under group j, :math:`T = \sum_i v_i`; eq. 8-11 of
    "Calibration is Grouping", anonymous authors, under review), and the head's gradient
    :math:`\sum_i z_i\,\partial L/\partial h_i^\top` in one product per block, and from the same
    posterior weights the gradients of the temperatures and offsets,
    :math:`\partial L/\partial s_{ik} = -(v_i/T)\,r_{ik}(1 - \sigma_{ik})` with
    :math:`s_{ik} = (2y_i - 1)(o_i/\tau_k + \beta_k)`. (Those were accumulated in the forward pass
    until 2026-12-04; there they cost a stacked (B, K, block) array of their own: one
    evaluation 1.07 times as fast at 2 x 10^5 rows and 1.16 times at 10^6 with them in the
    backward pass, five rounds interleaved on the 2-core CPU. Until 2026-12-05 the backward pass
    summed :math:`q\sigma` over the groups again and the forward pass took two logarithms; with
    :math:`\rho` kept, one evaluation is 1.07 times as fast at 10^5 rows and 1.05 times at 10^6,
    interleaved rounds on the 2-core Xeon. Writing the sums over the K groups as elementwise adds
    instead of ``jnp.sum`` made it 0.83 times as fast: XLA:CPU then recomputes the fused
    producers for every group.) Equal to
    ``jax.value_and_grad`` of :func:`_objective_all` up to float32 rounding (tested); the
    gradient of the ``-80`` floor is zero below it, as autodiff's. Returns ``(values (B,),
    grads)``, grads a :class:`_Theta` of theta's shapes. ``rows``: as :func:`_blocked_terms`.

    The two head products read the embedding in two layouts: the logits from ``zt`` (m, n), the
    head's gradient from ``z_rows`` (n, m), the same embedding with a block's rows contiguous
    (``zt.T`` when not given, a copy made in this call: the lock-step fit passes the caller's
    (n, m) array, made once). Measured on the 2-core Xeon, a block of 8,192 rows: the gradient's
    product with 30 head columns takes 0.26 ms from (n, m) against 0.43 ms from (m, n), while
    the logits' product takes 0.19 ms from (m, n) against 0.23 ms from (n, m); the gradients are
    the same bits either way. With :func:`_stored_block`'s blocks the 100-step fit of 10
    partitions is 1.22 times as fast at 10^5 and at 10^6 rows as with (m, n) alone and blocks
    of 4,096 (interleaved rounds in one process, 2026-12-05). ``block``: rows per block
    (default :func:`_stored_block`)."""
    W = theta.W
    b = theta.b
    B, m, K = W.shape
    block = _stored_block(B, K) if block is None else block
    block, n_full, tail, total, c, beta, inv_tau = _blocked_terms(theta, o, p_unc, v, use_beta, block, rows)
    z_rows = zt.T if z_rows is None else z_rows
    c_rows, c_groups = _per_problem(c, 2), _per_problem(c, 3)  # against (B, block), (B, K, block)

    def forward(carry, at, size: int):
        nll, mass, s1, s2 = carry
        z_b = jax.lax.dynamic_slice_in_dim(zt, at, size, axis=1)
        o_b, sgn_b, p_b = (jax.lax.dynamic_slice_in_dim(a, at, size)[None, :] for a in (o, sgn, p_unc))
        v_b = _block_weights(v, rows, at, size)
        h = jnp.einsum("bmk,mn->bkn", W, z_b, precision=MATMUL) + b[:, :, None]  # (B, K, block)
        _, e, den = _group_weights([h[:, k] for k in range(K)])
        s = [sgn_b * (o_b * inv_tau[:, k, None] + beta[:, k, None]) for k in range(K)]
        sig = [jax.nn.sigmoid(jnp.maximum(s_k, _CLIP)) for s_k in s]
        es = [e_k * sig_k for e_k, sig_k in zip(e, sig)]
        num = functools.reduce(jnp.add, es)
        rho = den / num  # 1 / the mixture's probability of the observed label
        nll = nll + jnp.sum(v_b * jnp.log(rho), axis=1)
        inv_den = 1.0 / den
        q = jnp.stack([e_k * inv_den for e_k in e], axis=1)  # (B, K, block)
        vq = v_b[:, None, :] * q
        d = (p_b - c_rows)[:, None, :]
        carry = (nll, mass + jnp.sum(vq, axis=2), s1 + jnp.sum(vq * d, axis=2), s2 + jnp.sum(vq * d * d, axis=2))
        return carry, (q, rho)

    zero_bk = jnp.zeros((B, K), o.dtype)
    carry = (jnp.zeros((B,), o.dtype), zero_bk, zero_bk, zero_bk)
    carry, kept = jax.lax.scan(lambda acc, i: forward(acc, i * block, block), carry, jnp.arange(n_full))
    if tail:
        carry, kept_tail = forward(carry, n_full * block, tail)
    nll, mass, s1, s2 = carry
    has = mass > 0
    a = jnp.where(has, s1 / jnp.where(has, mass, 1.0), 0.0)  # (B, K) the groups' means of d
    var = jnp.sum(s2 - jnp.where(has, s1 * s1 / jnp.where(has, mass, 1.0), 0.0), axis=1)
    values = nll / total + lam * jnp.mean(jnp.square(W), axis=(1, 2)) + lam_v * var / total

    def backward(acc, at, size: int, kept):
        q, rho = kept
        g_w, g_b, g_u, g_uo = acc
        z_b = jax.lax.dynamic_slice_in_dim(z_rows, at, size, axis=0)  # (size, m)
        o_b, sgn_b, p_b = (jax.lax.dynamic_slice_in_dim(x, at, size)[None, None, :] for x in (o, sgn, p_unc))
        v_b = _block_weights(v, rows, at, size)[:, None, :]
        # the posterior weights again from q and rho: r_k = q_k sigma_k rho (K sigmoids a row)
        s = sgn_b * (o_b * inv_tau[:, :, None] + beta[:, :, None])
        sig = jax.nn.sigmoid(jnp.maximum(s, _CLIP))
        r = q * sig * rho[:, None, :]
        # d(-log num)/d s_k = -r_k (1 - sigma_k) where s_k is above the floor (the temperatures and offsets)
        g_s = jnp.where(s > _CLIP, -v_b * sgn_b * r * (1.0 - sig), 0.0)
        g_u = g_u + jnp.sum(g_s, axis=2)
        g_uo = g_uo + jnp.sum(g_s * o_b, axis=2)
        sq = jnp.square((p_b - c_groups) - a[:, :, None])  # (B, K, block): (d_i - a_k)^2
        spread = sq - jnp.sum(q * sq, axis=1, keepdims=True)
        dh = (v_b / _per_problem(total, 3)) * (q - r + lam_v * q * spread)
        g_w = g_w + jnp.einsum("nm,bkn->bmk", z_b, dh, precision=MATMUL)
        return g_w, g_b + jnp.sum(dh, axis=2), g_u, g_uo

    acc = (jnp.zeros_like(W), zero_bk, zero_bk, zero_bk)
    acc, _ = jax.lax.scan(lambda g, x: (backward(g, x[0] * block, block, x[1]), None), acc,
                          (jnp.arange(n_full), kept))
    if tail:
        acc = backward(acc, n_full * block, tail, kept_tail)
    g_w, g_b, g_u, g_uo = acc
    g_w = g_w + (2.0 * lam / (m * K)) * W
    g_beta = g_u / _per_problem(total, 2) if use_beta else jnp.zeros_like(theta.beta)
    g_log_tau = -(g_uo * inv_tau) / _per_problem(total, 2)
    grads = _Theta(W=g_w, b=g_b if head_bias else jnp.zeros_like(b), log_tau=g_log_tau, beta=g_beta)
    return values, grads


def _value_and_grad_all(use_beta: bool, head_bias: bool):
    """The value and gradient of one problem's objective (:func:`_objective`), which under
    ``vmap`` over problems evaluates all of them at once (a ``custom_vmap`` rule): how the
    lock-step solver reads the embedding once per evaluation. The batched rule is the
    hand-derived :func:`_value_and_grad_stored` while its kept weights fit in
    ``_KEEP_LIMIT_BYTES``, else autodiff of :func:`_objective_all`.

    ``vg(theta, data, row)``: ``data`` is ``(o, sgn, zt, p_unc, v, lam, lam_v)``, optionally
    followed by the embedding in rows, (n, m) (``zt.T``; the hand-derived rule's gradient
    product reads it, and without it that rule transposes ``zt`` in every evaluation). ``row``
    is None when every problem fits the weights ``v`` (n,) of ``data``, else the index of the
    problem's own row of ``v`` (H, n), batched with ``theta``."""

    @jax.custom_batching.custom_vmap
    def vg(theta, data, row):
        o, sgn, zt, p_unc, v, lam, lam_v = data[:7]
        v = v if row is None else v[row]
        return jax.value_and_grad(_objective)(theta, o, sgn, zt, p_unc, v, lam, lam_v, use_beta, head_bias)

    @vg.def_vmap
    def _batched(axis_size, in_batched, theta, data, row):
        theta_batched, data_batched, row_batched = in_batched
        if any(jax.tree.leaves(data_batched)):
            raise NotImplementedError("the problems of a lock-step fit share their rows")
        theta = jax.tree.map(lambda a, bt: a if bt else jnp.broadcast_to(a, (axis_size, *a.shape)),
                             theta, theta_batched)
        rows = None if row is None else (row if row_batched else jnp.broadcast_to(row, (axis_size,)))
        o, sgn, zt, p_unc, v, lam, lam_v = data[:7]
        if _keeps_weights(axis_size, theta.W.shape[2], o.shape[0]):
            values, grads = _value_and_grad_stored(theta, o, sgn, zt, p_unc, v, lam, lam_v, use_beta, head_bias,
                                                   rows=rows, z_rows=data[7] if len(data) > 7 else None)
            return (values, grads), (True, jax.tree.map(lambda _: True, grads))

        def total_and_values(t):
            values = _objective_all(t, o, sgn, zt, p_unc, v, lam, lam_v, use_beta, head_bias, rows=rows)
            return jnp.sum(values), values

        # the problems are independent: the gradient of the sum is each one's gradient
        (_, values), grads = jax.value_and_grad(total_and_values, has_aux=True)(theta)
        return (values, grads), (True, jax.tree.map(lambda _: True, grads))

    return vg


@functools.partial(jax.jit, static_argnames=("n_steps", "use_beta", "head_bias", "solver"))
def _fit_soft(theta0: _Theta, o, y, zt, v, lam, lam_v, stop, *, n_steps: int, use_beta: bool,
              head_bias: bool, solver: str = "sequential", v_rows=None, z_rows=None):
    """Fit every problem of the leading axis of ``theta0`` (partitions, or heads x
    partitions) on the same rows, one after another inside one compiled program.

    ``v``: the row weights, (n,) for every problem, or, for the lock-step solver, (H, n) with
    ``v_rows`` (B,) the row of ``v`` each problem fits (a head's P partitions its own weights).

    ``lax.map``, not ``vmap``: optax's zoom line search branches with ``lax.cond``, which
    ``vmap`` turns into a ``select`` that evaluates both branches, and so does the
    first-step ``cond`` of ``value_and_grad_from_state``: measured at n = 10^5, P = 10, the
    vmapped fit made 4.1 batched evaluations per L-BFGS step where one partition alone needs
    1.5, and took 3x as long. The reference code also fits its partitions one by one.
    ``stop``: the :class:`~calib_jax.calibrators._lbfgs.StopRule` (its fields arrays).

    ``solver="lockstep"``: the problems advance by batched evaluations
    (:func:`~calib_jax.calibrators._lbfgs.minimize_lockstep`), each one pass over ``zt`` that
    evaluates every problem's next trial point, each problem at its own pace through its
    iterations and line searches; the same algorithm, its iterates equal to the sequential
    fit's up to float32 rounding of the batched arithmetic. ``z_rows``: the embedding as
    (n, m), ``zt.T``, for the lock-step evaluation's gradient product (:func:`_value_and_grad_stored`);
    when not given and that evaluation is the one used, ``zt.T`` is made once per fit."""
    p_unc = jax.nn.sigmoid(o)
    sgn = 2.0 * y - 1.0
    if solver == "lockstep":
        vg = _value_and_grad_all(use_beta, head_bias)
        data: tuple[Any, ...] = (o, sgn, zt, p_unc, v, lam, lam_v)
        if _keeps_weights(theta0.W.shape[0], theta0.W.shape[2], o.shape[0]):  # its gradient reads rows
            data = data + (zt.T if z_rows is None else z_rows,)
        if v_rows is None:
            f = lambda t: _objective(t, o, sgn, zt, p_unc, v, lam, lam_v, use_beta, head_bias)  # noqa: E731
            return minimize_lockstep(f, theta0, n_steps, stop, value_and_grad=lambda t: vg(t, data, None))
        f_row = lambda t, r: _objective(t, o, sgn, zt, p_unc, v[r], lam, lam_v, use_beta, head_bias)  # noqa: E731
        return minimize_lockstep(f_row, theta0, n_steps, stop, value_and_grad=lambda t, r: vg(t, data, r),
                                 aux=v_rows)

    if v_rows is not None:
        raise NotImplementedError("a weight row per problem is a lock-step fit's (fit_many runs the "
                                  "sequential fits one call each)")

    def one(th):
        f = lambda t: _objective(t, o, sgn, zt, p_unc, v, lam, lam_v, use_beta, head_bias)
        return minimize(f, th, n_steps, stop)

    return jax.lax.map(one, theta0)


@dataclasses.dataclass(frozen=True)
class SAGConfig:
    """The hyper-parameters of a SAG/VR-SAG fit, resolved once by :meth:`resolve` (the
    protocol's defaults filled in, every value checked) and shared by :func:`fit` and
    :func:`fit_many`.

    Attributes:
      protocol, variant, lam, lam_v, n_groups, n_partitions, n_steps, head_bias, tau_init,
      standardize, min_support, min_events, max_rows: :func:`fit`'s arguments of the same
        names, with the protocol's defaults (:data:`PROTOCOL_DEFAULTS`) in place of ``None``.
      stop: the L-BFGS stopping rule, ``StopRule(tol_grad, tol_change, max_evals)`` (torch's
        defaults unless given).
      solver: ``"lockstep"`` (all P partitions evaluated together, one pass over the
        embedding per evaluation; :data:`DEFAULT_SOLVER`) or ``"sequential"`` (the partitions
        fitted one after another), :data:`SOLVERS`.

    Example:
      >>> from calib_jax.calibrators.sag import SAGConfig
      >>> cfg = SAGConfig.resolve(protocol="reference", variant="ps")
      >>> cfg.n_groups, cfg.n_partitions, cfg.head_bias, cfg.stop.max_evals
      (2, 20, False, 125.0)
    """

    protocol: str
    variant: str
    lam: float
    lam_v: float
    n_groups: int
    n_partitions: int
    n_steps: int
    head_bias: bool
    tau_init: float
    standardize: bool
    min_support: float
    min_events: float
    max_rows: int | None
    stop: StopRule
    solver: str = DEFAULT_SOLVER

    @classmethod
    def resolve(cls, *, protocol: str = "paper", variant: str = "ts", lam: float = 0.1, lam_v: float = 0.0,
                n_groups: int | None = None, n_partitions: int | None = None, n_steps: int | None = None,
                head_bias: bool | None = None, tau_init: float = _TAU_INIT, standardize: bool = False,
                min_support: float = 10.0, min_events: float = F.MIN_EVENTS, max_rows: int | None = None,
                tol_grad: float = TORCH_TOL_GRAD, tol_change: float = TORCH_TOL_CHANGE,
                max_evals: float | None = None, solver: str = DEFAULT_SOLVER) -> SAGConfig:
        """The checked configuration of :func:`fit`'s keywords (``ValueError`` naming a bad
        one; ``TypeError`` for a keyword :func:`fit` does not take).

        Example:
          >>> from calib_jax.calibrators.sag import SAGConfig
          >>> SAGConfig.resolve(n_steps=40).stop.max_evals
          50.0
        """
        protocol = V.check_choice(protocol, "protocol", PROTOCOLS)
        variant = V.check_choice(variant, "variant", ("ps", "ts"))
        d = PROTOCOL_DEFAULTS[protocol]
        n_groups = V.check_positive_int(d["n_groups"] if n_groups is None else n_groups, "n_groups")
        n_partitions = V.check_positive_int(d["n_partitions"] if n_partitions is None else n_partitions,
                                            "n_partitions")
        n_steps = V.check_positive_int(d["n_steps"] if n_steps is None else n_steps, "n_steps")
        # finite numbers, not text or booleans: an infinite `lam` or `lam_v` made the objective
        # infinite and the fit returned its random initial heads, an infinite `tau_init` predicted
        # 0.5 for every row, both without a word; `tau_init="1.5"` failed inside NumPy's log
        for name, val in (("lam", lam), ("lam_v", lam_v), ("min_support", min_support),
                          ("min_events", min_events)):
            check_number_option(val, name, "a finite number >= 0", lambda v: 0.0 <= v < np.inf, traced_ok=True)
        check_number_option(tau_init, "tau_init", "a finite number > 0", lambda v: 0.0 < v < np.inf)
        for name, val in (("tol_grad", tol_grad), ("tol_change", tol_change)):
            check_number_option(val, name, "a finite number >= 0", lambda v: 0.0 <= v < np.inf)
        if max_evals is not None:
            # infinity is no cap (the study's `sag_stop="none"`, the benchmarks' every-step fits)
            check_number_option(max_evals, "max_evals", "a number >= 1 (infinity: no cap)", lambda v: v >= 1.0)
        max_evals = 1.25 * n_steps if max_evals is None else float(max_evals)
        for name, flag in (("head_bias", head_bias), ("standardize", standardize)):
            if flag is not None:  # "no" is true
                check_flag_option(flag, name)
        if max_rows is not None:
            max_rows = V.check_positive_int(max_rows, "max_rows")
        return cls(protocol=protocol, variant=variant, lam=lam, lam_v=lam_v, n_groups=n_groups,
                   n_partitions=n_partitions, n_steps=n_steps,
                   head_bias=bool(d["head_bias"] if head_bias is None else head_bias), tau_init=tau_init,
                   standardize=bool(standardize), min_support=min_support, min_events=min_events,
                   max_rows=max_rows, stop=StopRule(tol_grad, tol_change, max_evals),
                   solver=V.check_choice(solver, "solver", SOLVERS))


def _prepare(logits, labels, weights, context, name_prefix=""):
    o, y, w = V.check_sample(logits, labels, weights, prefix=name_prefix)
    n = o.shape[0]
    z = _embedding(context, n, f"{name_prefix}context['embedding']" if not name_prefix
                   else f"{name_prefix}embedding")
    v = jnp.ones_like(o) if w is None else w
    return o, y, v, z


# --------------------------------------------------------------------------- public API


@public_entry
def fit(logits: ArrayLike, labels: ArrayLike, *, weights: ArrayLike | None = None, key: KeyArg = None,
        context: Context = None, protocol: str = "paper", variant: str = "ts", lam: float = 0.1,
        lam_v: float = 0.0, n_groups: int | None = None, n_partitions: int | None = None,
        n_steps: int | None = None, head_bias: bool | None = None, tau_init: float = _TAU_INIT,
        standardize: bool = False, holdout: Mapping[str, Any] | None = None,
        min_support: float = 10.0, min_events: float = F.MIN_EVENTS, init: _Theta | None = None,
        max_rows: int | None = None, tol_grad: float = TORCH_TOL_GRAD,
        tol_change: float = TORCH_TOL_CHANGE, max_evals: float | None = None,
        solver: str = DEFAULT_SOLVER) -> SAGParams:
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
      standardize: centre and scale ``z`` with the calibration split's moments (under ``weights``) first.
      holdout: ``{"logits", "labels", "embedding"[, "weights"]}``, the hold-out split D_ho on
        which the reference protocol fits its per-group base calibrators (default: the
        calibration split itself).
      min_support, min_events: fail-safe thresholds per group (effective rows; effective
        clicks and non-clicks), module docstring.
      init: optional initial ``_Theta`` (from :func:`init_params`) instead of ``key``.
      max_rows: fit the head on at most this many rows drawn uniformly (from ``key``); the
        support checks still use every row. ``None`` (default) uses every row, as the paper.
      tol_grad, tol_change, max_evals: the stopping rules of ``torch.optim.LBFGS``, which the
        reference code uses with its defaults (1e-7, 1e-9 and 1.25 ``n_steps`` evaluations):
        the fit stops early when the largest gradient entry, the largest step entry or the
        change of the objective is that small. ``0, 0, float("inf")`` run all ``n_steps``
        iterations (this module before 2026-11: about 4x the evaluations on converged
        fits, final objectives lower by at most 2e-5 on the simulator's D_val).
      solver: ``"lockstep"`` (:data:`DEFAULT_SOLVER`, since 2026-12-05): the P partitions'
        L-BFGS fits are evaluated together, each evaluation one pass over the embedding for all
        of them (the same L-BFGS and zoom line search, each partition at its own pace: a fit
        makes as many batched evaluations as its slowest partition makes evaluations);
        ``"sequential"`` (the default before): they run one after another inside one program,
        each evaluation reading the embedding once per partition. The fits equal each other up
        to float32 rounding of the batched sums, which the non-convex objective can amplify
        into another optimum of a partition. The four studies rerun both ways kept every
        ledger verdict and all but a few paired differences, whose intervals touched 0, on
        their side (``benchmarks/results/*solver_rerun*.md``: about as much as a change of
        CPU type moves them). The lock-step fit was faster at every size measured: 1.1-1.3x
        for one fit of 10^5-10^6 rows (``benchmarks/bench_vrsag.py`` measures both), 1.9x for
        the ablation study's fits, 2.1-2.4x for a field_calibration refit on 600,000 rows.

    Returns:
      :class:`SAGParams` with a leading partition axis P (``W`` (P, m, K); ``b``,
      ``log_tau``, ``beta``, ``fallback`` (P, K); ``hard`` True for the reference protocol).
      Not jit-able: the options, the support checks and the fallback warning run on the
      host; the L-BFGS fits of the P partitions run inside one compiled program. Invalid
      input (NaN or inf logits or embedding, labels other than 0/1, negative weights, a
      missing or misshapen ``context["embedding"]``, a bad option, ``n_groups > n``) raises
      ``ValueError`` naming the argument. An eager fit whose groups fall back warns with
      :class:`~calib_jax.calibrators.CalibrationFallbackWarning`.

    Example:
      >>> import numpy as np
      >>> from calib_jax.calibrators import sag
      >>> rng = np.random.default_rng(0)
      >>> emb = rng.normal(size=(400, 2)).astype(np.float32)     # (n, m) backbone embedding
      >>> o = (2 * emb[:, 0]).astype(np.float32)                 # logits, twice too confident
      >>> y = (rng.random(400) < 1 / (1 + np.exp(-emb[:, 0]))).astype(np.float32)
      >>> small = dict(n_groups=2, n_partitions=2, n_steps=5)    # K, P and L-BFGS steps kept tiny
      >>> params = sag.fit(o, y, context={"embedding": emb}, **small)  # paper protocol, SAG-TS
      >>> params.W.shape, params.log_tau.shape, bool(params.hard)
      ((2, 2, 2), (2, 2), False)
      >>> params.fallback.tolist()                               # every group kept its own fit
      [[0, 0], [0, 0]]
      >>> p = sag.predict(params, o, context={"embedding": emb})
      >>> p.shape, bool((p > 0).all() & (p < 1).all())
      ((400,), True)
    """
    config = SAGConfig.resolve(protocol=protocol, variant=variant, lam=lam, lam_v=lam_v, n_groups=n_groups,
                               n_partitions=n_partitions, n_steps=n_steps, head_bias=head_bias,
                               tau_init=tau_init, standardize=standardize, min_support=min_support,
                               min_events=min_events, max_rows=max_rows, tol_grad=tol_grad,
                               tol_change=tol_change, max_evals=max_evals, solver=solver)
    return _fit_many(logits, labels, [key], [init], config, weights=weights, context=context, holdout=holdout)[0]


@public_entry
def fit_many(logits: ArrayLike, labels: ArrayLike, *, keys: Any, **kwargs: Any) -> list[SAGParams]:
    r"""H independent fits of :func:`fit`, one per key in ``keys``, in one compiled program.

    With ``solver="sequential"``, ``fit_many(o, y, keys=[k_1, ..., k_H], **kw)[h]`` equals
    ``fit(o, y, key=k_h, **kw)`` (tested bit for bit on CPU): the H x P L-BFGS problems run one
    after another inside one ``lax.map`` (see ``_fit_soft`` for why not ``vmap``), and the
    support checks and the reference protocol's per-group base fits run once on all H x P
    partitions. With the lock-step solver (the default) it equals those fits to float32
    rounding of the batched sums: the H x P problems are evaluated together (below). With
    ``max_rows`` each fit draws its own subsample of the rows from its key, and the fits run
    as H calls of one compiled program.

    ``weights`` of shape (H, n) give fit h its own row weights (for example the row
    multiplicities of its own bootstrap draw): ``fit_many(o, y, keys=ks, weights=w)[h]`` equals
    ``fit(o, y, key=ks[h], weights=w[h])``, bit for bit with the sequential solver (the H fits
    are then H calls of one compiled program: a weight row read by index inside one program
    rounds differently). The support checks, and the reference protocol's base fits when no
    ``holdout`` is given, run once per fit on its own weights.

    The saving over H calls of :func:`fit` is one compilation and one dispatch instead of H;
    the arithmetic is the same (on a CPU it dominates from about 10^4 rows on). With
    ``solver="lockstep"`` all H x P problems are evaluated together, each evaluation one pass
    over the embedding for all of them: ``benchmarks/results/sag_heads.md`` measures what that
    saves over H lock-step fits one by one (it depends on P and K: every problem is evaluated
    until the slowest has stopped, the stopped ones as wasted work).

    Args:
      logits, labels: as :func:`fit`.
      keys: a sequence of H PRNG keys, or a key array of shape (H,).
      weights: optional (n,) weights shared by every fit, or (H, n), one row per fit; each row
        checked as :func:`fit` checks its weights (``ValueError`` naming ``weights[h]``).
      **kwargs: every other argument of :func:`fit` except ``key`` and ``init``.

    Returns:
      A list of H :class:`SAGParams`, each as :func:`fit` returns it (leading axis P). Not
      jit-able, as :func:`fit`. ``ValueError`` for an empty ``keys``, a ``key`` or ``init``
      argument, or the invalid input :func:`fit` rejects.

    Example:
      >>> import jax
      >>> import numpy as np
      >>> from calib_jax.calibrators import sag
      >>> rng = np.random.default_rng(0)
      >>> emb = rng.normal(size=(400, 2)).astype(np.float32)     # (n, m) backbone embedding
      >>> o = (2 * emb[:, 0]).astype(np.float32)                 # logits, twice too confident
      >>> y = (rng.random(400) < 1 / (1 + np.exp(-emb[:, 0]))).astype(np.float32)
      >>> keys = jax.random.split(jax.random.key(0), 2)          # H = 2 independent fits
      >>> fits = sag.fit_many(o, y, keys=keys, context={"embedding": emb}, n_groups=2, n_partitions=1,
      ...                     n_steps=5)
      >>> len(fits), fits[0].W.shape
      (2, (1, 2, 2))
    """
    for bad in ("key", "init"):
        if bad in kwargs:
            raise ValueError(f"`{bad}` is not an argument of fit_many (use `keys`)")
    key_list = list(keys)
    if not key_list:
        raise ValueError("`keys` must hold at least one PRNG key")
    data = {k: kwargs.pop(k, None) for k in ("weights", "context", "holdout")}
    return _fit_many(logits, labels, key_list, [None] * len(key_list), SAGConfig.resolve(**kwargs), **data,
                     per_fit_weights=True)


def _fit_many(logits, labels, keys: list[Any], inits: list[Any], config: SAGConfig, *, weights=None,
              context=None, holdout: Mapping[str, Any] | None = None,
              per_fit_weights: bool = False) -> list[SAGParams]:
    """The fits of :func:`fit` (one key) and :func:`fit_many` (H keys) under one ``config``;
    ``per_fit_weights``: (H, n) ``weights`` give each fit its own row (:func:`fit_many`)."""
    c = config
    n_groups, n_partitions, n_steps, head_bias = c.n_groups, c.n_partitions, c.n_steps, c.head_bias
    variant, protocol = c.variant, c.protocol
    own = per_fit_weights and weights is not None and np.ndim(weights) == 2  # each fit its own row of weights
    o, y, v, z = _prepare(logits, labels, None if own else weights, context)
    n, m = z.shape
    if own:
        if np.shape(weights) != (len(keys), n):
            raise ValueError(f"`weights` has shape {np.shape(weights)}; give (n,) = ({n},) weights for every fit, "
                             f"or one row per key, ({len(keys)}, {n})")
        fit_weights = [jnp.asarray(V.check_weights(weights[h], n, f"weights[{h}]"), o.dtype)
                       for h in range(len(keys))]
    else:
        fit_weights = [v] * len(keys)  # each fit's (n,) weights
    if n_groups > n:
        raise ValueError(f"`n_groups`={n_groups} is larger than the number of samples ({n})")
    if own and c.standardize:
        # each fit standardises with the moments under its own weights: the fits of fit, one by one
        return [_fit_many(logits, labels, [key], [init], c, weights=w_h, context=context, holdout=holdout)[0]
                for key, init, w_h in zip(keys, inits, fit_weights)]
    if c.standardize:
        z_mean, z_scale = _embedding_moments(z, None if weights is None else v)
    else:
        z_mean = jnp.zeros((m,), z.dtype)
        z_scale = jnp.ones((m,), z.dtype)
    # no copy of the embedding unless it is standardised (it is the largest input: 10^7 x 64)
    zs = (z - z_mean[None, :]) / z_scale[None, :] if c.standardize else z
    keys = [jax.random.key(0) if k is None else k for k in keys]
    theta0s = []
    for key, init in zip(keys, inits):
        if init is None:
            theta0s.append(init_params(key, m, n_groups=n_groups, n_partitions=n_partitions,
                                       head_bias=head_bias, tau_init=c.tau_init))
            continue
        theta0 = _Theta(*(jnp.asarray(a) for a in init))
        if theta0.W.shape[1:] != (m, n_groups):
            raise ValueError(f"`init` W has shape {theta0.W.shape}, expected (P, {m}, {n_groups})")
        theta0s.append(theta0)
    use_beta = variant == "ps"
    lam_ = jnp.asarray(c.lam, o.dtype)
    lam_v_ = jnp.asarray(c.lam_v, o.dtype)
    stop = StopRule(*(jnp.asarray(a, o.dtype) for a in c.stop))
    soft = functools.partial(_fit_soft, lam=lam_, lam_v=lam_v_, stop=stop, n_steps=n_steps,
                             use_beta=use_beta, head_bias=head_bias, solver=c.solver)
    max_rows = c.max_rows
    subsample = max_rows is not None and max_rows < n
    if subsample or (own and c.solver != "lockstep"):
        # H calls of one compiled program: each fit on its own subsample, or on its own weights
        # one after another as fit runs it (its bits)
        thetas, zt = [], (None if subsample else zs.T)  # the transposed embedding once, when every fit reads it
        for key, theta0, v_h in zip(keys, theta0s, fit_weights):
            if subsample:
                assert max_rows is not None  # what subsample says
                rows = jax.random.choice(jax.random.fold_in(key, 1), n, (max_rows,), replace=False)
                z_h = zs[rows]
                thetas.append(soft(theta0, o[rows], y[rows], z_h.T, v_h[rows], z_rows=z_h)[0])
            else:  # every row, not a copy of the embedding per fit
                thetas.append(soft(theta0, o, y, zt, v_h, z_rows=zs)[0])
        theta = jax.tree.map(lambda *a: jnp.concatenate(a), *thetas)
    else:
        stacked = jax.tree.map(lambda *a: jnp.concatenate(a), *theta0s)
        if own:  # all H x P problems evaluated together, problem b of fit h on row h of the (H, n) weights
            v_rows = jnp.concatenate([jnp.full((t.W.shape[0],), h, jnp.int32) for h, t in enumerate(theta0s)])
            theta, _ = soft(stacked, o, y, zs.T, jnp.stack(fit_weights), v_rows=v_rows, z_rows=zs)
        else:
            theta, _ = soft(stacked, o, y, zs.T, v, z_rows=zs)
    sizes = np.cumsum([t.W.shape[0] for t in theta0s])[:-1]
    ho = holdout if holdout is not None else (context or {}).get("holdout")
    if own and (protocol != "reference" or ho is None):
        # the support checks (and the reference protocol's base fits on the calibration split)
        # read each fit's own weights: one call per fit
        per_fit_theta = [_Theta(*parts) for parts in zip(*(jnp.split(a, sizes) for a in theta))]
        return [_checked_or_refit(t, o, y, v_h, z, zs, z_mean, z_scale, c, None)
                for t, v_h in zip(per_fit_theta, fit_weights)]
    params = _checked_or_refit(theta, o, y, v, z, zs, z_mean, z_scale, c, ho)
    shared = ("z_mean", "z_scale", "hard")
    per_fit = {f: ([a] * len(keys) if f in shared else jnp.split(a, sizes))
               for f, a in params._asdict().items()}
    return [SAGParams(**{f: parts[h] for f, parts in per_fit.items()}) for h in range(len(keys))]


def _embedding_moments(z, v):
    """The centre and scale of ``standardize=True``: the embedding's column means and standard
    deviations under the weights ``v`` (``None``: every row once), a scale of 1 for a constant
    column. Weights count as repeated rows, as everywhere in the fit."""
    if v is None:
        z_mean, sd = jnp.mean(z, axis=0), jnp.std(z, axis=0)
    else:
        z_mean = jnp.average(z, axis=0, weights=v)
        sd = jnp.sqrt(jnp.average(jnp.square(z - z_mean[None, :]), axis=0, weights=v))
    return z_mean, jnp.where(sd > 1e-12, sd, 1.0)


def _checked_or_refit(theta: _Theta, o, y, v, z, zs, z_mean, z_scale, config: SAGConfig,
                      ho: Mapping[str, Any] | None) -> SAGParams:
    """The fitted soft heads ``theta`` made parameters: under the reference protocol the per-group
    base calibrators fitted on the hold-out split ``ho`` (default: the calibration split with
    weights ``v``), under the paper protocol the support checks on the calibration split."""
    c = config
    if c.protocol == "reference":
        if ho is None:
            ho = {"logits": o, "labels": y, "weights": v, "embedding": z}
        return _refit_groups(_as_params(theta, z_mean, z_scale, hard=True), ho.get("logits"),
                             ho.get("labels"), ho.get("weights"), {"embedding": ho.get("embedding")},
                             c.variant, c.min_support, c.min_events)
    return G.checked(_as_params(theta, z_mean, z_scale, hard=False), o, y, v, zs,
                     jnp.zeros(theta.log_tau.shape, jnp.int32), c.variant, c.min_support, c.min_events, "paper")


def _as_params(theta: _Theta, z_mean, z_scale, *, hard: bool) -> SAGParams:
    return SAGParams(W=theta.W, b=theta.b, log_tau=theta.log_tau, beta=theta.beta, z_mean=z_mean,
                     z_scale=z_scale, hard=jnp.asarray(hard),
                     fallback=jnp.zeros(theta.log_tau.shape, jnp.int32))


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
      params: fitted :class:`SAGParams` (its heads ``W``, ``b`` and the embedding moments are
        used; any protocol).
      logits: (n,) the hold-out split's backbone logits, real.
      labels: (n,) its labels in {0, 1}.
      weights: optional (n,) non-negative row weights.
      context: ``{"embedding": (n, m)}`` of the hold-out split (the m of ``params``).
      variant: ``"ts"`` (temperature scaling per group) or ``"ps"`` (Platt scaling per group).
      min_support, min_events: fail-safe thresholds per group (effective rows; effective
        clicks and non-clicks), >= 0; a group below either takes the global calibrator.

    Returns:
      A copy of ``params`` with ``log_tau`` and ``beta`` (P, K) refitted, ``hard = True``
      (arg-max groups at prediction) and the new ``fallback`` codes (P, K). Not jit-able (the
      support checks and the warning run on the host; the per-group fits are one compiled
      program). Invalid input raises ``ValueError`` naming the argument; an eager refit
      whose groups fall back warns with
      :class:`~calib_jax.calibrators.CalibrationFallbackWarning`.

    Example:
      >>> import numpy as np
      >>> from calib_jax.calibrators import sag
      >>> rng = np.random.default_rng(0)
      >>> emb = rng.normal(size=(400, 2)).astype(np.float32)     # (n, m) backbone embedding
      >>> o = (2 * emb[:, 0]).astype(np.float32)                 # logits, twice too confident
      >>> y = (rng.random(400) < 1 / (1 + np.exp(-emb[:, 0]))).astype(np.float32)
      >>> import jax.numpy as jnp
      >>> from calib_jax.calibrators.sag import SAGParams
      >>> zeros = jnp.zeros((1, 2))                              # P = 1 partition, K = 2 groups
      >>> params = SAGParams(W=jnp.array([[[0.0, 0.0], [1.0, -1.0]]]),  # head logits (e_2, -e_2)
      ...                    b=zeros, log_tau=zeros, beta=zeros, z_mean=jnp.zeros(2), z_scale=jnp.ones(2),
      ...                    hard=jnp.asarray(False), fallback=jnp.zeros((1, 2), jnp.int32))
      >>> refit = sag.refit_groups(params, o, y, context={"embedding": emb})  # groups: sign of e_2
      >>> bool(refit.hard), refit.fallback.tolist()
      (True, [[0, 0]])
      >>> [round(float(t)) for t in jnp.exp(refit.log_tau[0])]  # both groups: the true T = 2
      [2, 2]
    """
    return _refit_groups(params, logits, labels, weights, context, variant, min_support, min_events)


def _refit_groups(params: SAGParams, logits, labels, weights, context, variant: str,
                  min_support, min_events) -> SAGParams:
    variant = V.check_choice(variant, "variant", ("ps", "ts"))
    o, y, v, z = _prepare(logits, labels, weights, context, "holdout.")
    if z.shape[1] != params.W.shape[1]:
        raise ValueError(f"`holdout.embedding` has {z.shape[1]} columns, expected {params.W.shape[1]}")
    return G.refit(params, o, y, v, z, variant, min_support, min_events)


def fit_sag(logits: Any, labels: Any, **kwargs: Any) -> SAGParams:
    """SAG ("Calibration is Grouping" (VR-SAG; anonymous authors, under review), eq. 5, with
    per-group biases for ``variant="ps"``): :func:`fit` with ``lam_v = 0`` by default.

    Args:
      logits: (n,) backbone logits, real.
      labels: (n,) labels in {0, 1}.
      **kwargs: every keyword of :func:`fit` (``context={"embedding": (n, m)}`` is
        required); ``lam_v`` defaults to 0 (no variance penalty).

    Returns:
      :class:`SAGParams`, as :func:`fit`. Not jit-able (see :func:`fit`).

    Example:
      >>> import numpy as np
      >>> from calib_jax.calibrators import sag
      >>> rng = np.random.default_rng(0)
      >>> emb = rng.normal(size=(400, 2)).astype(np.float32)     # (n, m) backbone embedding
      >>> o = (2 * emb[:, 0]).astype(np.float32)                 # logits, twice too confident
      >>> y = (rng.random(400) < 1 / (1 + np.exp(-emb[:, 0]))).astype(np.float32)
      >>> small = dict(n_groups=2, n_partitions=2, n_steps=5)    # K, P and L-BFGS steps kept tiny
      >>> params = sag.fit_sag(o, y, context={"embedding": emb}, **small)
      >>> same = sag.fit(o, y, context={"embedding": emb}, lam_v=0.0, **small)
      >>> bool((params.W == same.W).all() & (params.log_tau == same.log_tau).all())
      True
    """
    kwargs.setdefault("lam_v", 0.0)
    return fit(logits, labels, **kwargs)


def fit_vrsag(logits: Any, labels: Any, **kwargs: Any) -> SAGParams:
    """VR-SAG ("Calibration is Grouping" (VR-SAG; anonymous authors, under review), eq. 11):
    SAG plus the within-group variance penalty, :func:`fit` with ``lam_v = 0.5`` by default.

    Args:
      logits: (n,) backbone logits, real.
      labels: (n,) labels in {0, 1}.
      **kwargs: every keyword of :func:`fit` (``context={"embedding": (n, m)}`` is
        required); ``lam_v`` (>= 0) defaults to 0.5.

    Returns:
      :class:`SAGParams`, as :func:`fit`. Not jit-able (see :func:`fit`).

    Example:
      >>> import numpy as np
      >>> from calib_jax.calibrators import sag
      >>> rng = np.random.default_rng(0)
      >>> emb = rng.normal(size=(400, 2)).astype(np.float32)     # (n, m) backbone embedding
      >>> o = (2 * emb[:, 0]).astype(np.float32)                 # logits, twice too confident
      >>> y = (rng.random(400) < 1 / (1 + np.exp(-emb[:, 0]))).astype(np.float32)
      >>> small = dict(n_groups=2, n_partitions=2, n_steps=5)    # K, P and L-BFGS steps kept tiny
      >>> params = sag.fit_vrsag(o, y, context={"embedding": emb}, **small)
      >>> same = sag.fit(o, y, context={"embedding": emb}, lam_v=0.5, **small)
      >>> bool((params.W == same.W).all() & (params.log_tau == same.log_tau).all())
      True
    """
    kwargs.setdefault("lam_v", 0.5)
    return fit(logits, labels, **kwargs)


def memberships(params: SAGParams, embedding: Any) -> jax.Array:
    r"""Group memberships ``q`` (P, n, K) of rows with embedding (n, m) (eq. 3; one-hot if hard).

    :math:`q^{(p)}_{ik} = \mathrm{softmax}_k(\tilde z_i^\top W_p + b_p)`, with
    :math:`\tilde z_i` the embedding row centred by ``params.z_mean`` and divided by
    ``params.z_scale``; with ``params.hard`` the one-hot of the arg-max group (ties go to the
    first group).

    Args:
      params: fitted :class:`SAGParams` (P partitions, K groups, width m).
      embedding: (n, m) backbone embedding, real.

    Returns:
      (P, n, K) float memberships; each row sums to 1. The computation is one compiled
      program and jit-able; eager calls raise ``ValueError`` for an embedding that is not 2-D
      or has the wrong width.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.calibrators.sag import SAGParams, memberships
      >>> zeros = jnp.zeros((1, 2))                              # P = 1 partition, K = 2 groups
      >>> params = SAGParams(W=jnp.array([[[0.0, 0.0], [1.0, -1.0]]]),  # head logits (e_2, -e_2)
      ...                    b=zeros, log_tau=zeros, beta=zeros, z_mean=jnp.zeros(2), z_scale=jnp.ones(2),
      ...                    hard=jnp.asarray(False), fallback=jnp.zeros((1, 2), jnp.int32))
      >>> q = memberships(params, jnp.array([[0.0, 0.0], [5.0, 1.0]]))
      >>> q.shape
      (1, 2, 2)
      >>> [round(float(v), 4) for v in q[0, 1]]               # softmax(1, -1) = (e^2, 1) / (e^2 + 1)
      [0.8808, 0.1192]
      >>> memberships(params._replace(hard=jnp.asarray(True)), jnp.array([[5.0, 1.0]]))[0, 0].tolist()
      [1.0, 0.0]
    """
    z = V.as_float_array(embedding, "embedding", ndim=2)
    if z.shape[1] != params.W.shape[1]:
        raise ValueError(f"`embedding` has {z.shape[1]} columns, expected {params.W.shape[1]}")
    return _memberships(params, z)


@jax.jit
def _memberships(params: SAGParams, z: jax.Array) -> jax.Array:
    zs = (z - params.z_mean[None, :]) / params.z_scale[None, :]
    return jnp.exp(jax.vmap(lambda W, b: G.log_memberships(W, b, zs, params.hard))(params.W, params.b))


def group_support(params: SAGParams, embedding: Any, *, weights: Any = None) -> jax.Array:
    """Effective row count ``sum_i v_i q_ik / mean(v)`` per partition and group, (P, K).

    The support the fail-safe checks (``min_support``) count, with the memberships of
    :func:`memberships`.

    Args:
      params: fitted :class:`SAGParams`.
      embedding: (n, m) backbone embedding, real.
      weights: optional (n,) non-negative row weights (default 1); they are normalised by
        their mean, so the supports of a partition sum to n.

    Returns:
      (P, K) float array. jit-able; eager calls raise ``ValueError`` for a misshapen
      embedding or invalid weights.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.calibrators.sag import SAGParams, group_support
      >>> zeros = jnp.zeros((1, 2))                              # P = 1 partition, K = 2 groups
      >>> params = SAGParams(W=jnp.array([[[0.0, 0.0], [1.0, -1.0]]]),  # head logits (e_2, -e_2)
      ...                    b=zeros, log_tau=zeros, beta=zeros, z_mean=jnp.zeros(2), z_scale=jnp.ones(2),
      ...                    hard=jnp.asarray(False), fallback=jnp.zeros((1, 2), jnp.int32))
      >>> emb = jnp.array([[0.0, 0.0], [0.0, 0.0], [0.0, 5.0], [0.0, -5.0]])
      >>> [[round(float(v), 4) for v in row] for row in group_support(params, emb)]  # halves, then ~1, ~0
      [[2.0, 2.0]]
      >>> group_support(params._replace(hard=jnp.asarray(True)), emb).tolist()  # ties: the first group
      [[3.0, 1.0]]
    """
    q = memberships(params, embedding)
    w = V.check_weights(weights, q.shape[1])
    v = jnp.ones((q.shape[1],), q.dtype) if w is None else w
    return jnp.einsum("n,pnk->pk", v, q, precision=MATMUL) / jnp.mean(v)


@functools.partial(jax.jit, static_argnames=("hard",))
def _predict(params: SAGParams, o: jax.Array, z: jax.Array, hard: bool | None = None) -> jax.Array:
    """Eq. 8 averaged over partitions, in the layout of ``_objective``: head logits (P, K, n)
    from one product for all partitions, the groups unrolled (XLA:CPU reduces over a short
    axis 10-40x slower than it adds rows), the arg-max group of the reference protocol
    chosen by a chain of selects (the first maximal group, as ``argmax``). ``hard``: a
    Python bool when ``params.hard`` is concrete (one branch compiled), else None."""
    zs = (z - params.z_mean[None, :]) / params.z_scale[None, :]
    h = jnp.einsum("nm,pmk->pkn", zs, params.W, precision=MATMUL)
    h = h + params.b[:, :, None]
    K = h.shape[1]
    rows = [h[:, k, :] for k in range(K)]  # each (P, n)
    inv_tau = jnp.exp(-params.log_tau)
    sig = [jax.nn.sigmoid(o[None, :] * inv_tau[:, k, None] + params.beta[:, k, None]) for k in range(K)]
    top, e, den = _group_weights(rows)

    def soft():
        return functools.reduce(jnp.add, [e_k * s_k for e_k, s_k in zip(e, sig)]) / den

    def arg_max():
        chosen = sig[K - 1]
        for k in reversed(range(K - 1)):
            chosen = jnp.where(rows[k] == top, sig[k], chosen)
        return chosen

    per_partition = (arg_max() if hard else soft()) if hard is not None else jnp.where(params.hard, arg_max(), soft())
    return functools.reduce(jnp.add, [per_partition[p] for p in range(per_partition.shape[0])]) / per_partition.shape[0]


@public_entry
def predict(params: SAGParams, logits: Any, *, context: Mapping[str, Any] | None = None) -> jax.Array:
    r"""Calibrated probabilities averaged over the P partitions: the soft mixture of eq. 8
    (paper protocol) or the arg-max group's base calibrator (reference protocol).

    .. math:: \hat p_i = \frac{1}{P}\sum_{p=1}^P \sum_k q^{(p)}_{ik}\,
              \sigma(o_i/\tau^{(p)}_k + \beta^{(p)}_k)

    ``context["embedding"]`` (n, m) is required.

    Args:
      params: fitted :class:`SAGParams` (``params.hard`` picks the arg-max group's
        calibrator instead of the soft mixture).
      logits: (n,) backbone logits ``o``, real.
      context: ``{"embedding": (n, m)}``, the width m of the fit.

    Returns:
      (n,) probabilities in [0, 1]. jit-able. Called eagerly, NaN or inf logits and a missing
      or misshapen embedding raise ``ValueError``; under ``jit`` values are not checked and a
      NaN logit gives NaN in its row.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.calibrators.sag import SAGParams, predict
      >>> zeros = jnp.zeros((1, 2))                              # P = 1 partition, K = 2 groups
      >>> params = SAGParams(W=jnp.array([[[0.0, 0.0], [1.0, -1.0]]]),  # head logits (e_2, -e_2)
      ...                    b=zeros, log_tau=jnp.log(jnp.array([[1.0, 2.0]])),  # tau = (1, 2)
      ...                    beta=zeros, z_mean=jnp.zeros(2), z_scale=jnp.ones(2),
      ...                    hard=jnp.asarray(False), fallback=jnp.zeros((1, 2), jnp.int32))
      >>> emb = jnp.zeros((2, 2))                                # e_2 = 0: q = (1/2, 1/2)
      >>> p = predict(params, jnp.array([0.0, 2.0]), context={"embedding": emb})
      >>> [round(float(v), 4) for v in p]                        # (sigma(2) + sigma(1)) / 2 = 0.8059
      [0.5, 0.8059]
    """
    o = V.check_logits(logits)
    z = _embedding(context, o.shape[0])
    if z.shape[1] != params.W.shape[1]:
        raise ValueError(f"`context['embedding']` has {z.shape[1]} columns, expected {params.W.shape[1]}")
    hard = bool(params.hard) if V.is_concrete(jnp.asarray(params.hard)) else None
    return _predict(params, o, z, hard)


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
