r"""Modern label-based calibration metrics beyond the source papers:
smooth ECE, the Integrated Calibration Index, SKCE, the debiased squared ECE and ECE-sweep.

Each public function validates concrete input eagerly and then calls one module-level
jitted core whose static arguments are the options that shape arrays, so eager calls
compile once per configuration and the functions are jit- and vmap-able.  The cumulative
and multicalibration errors live in :mod:`calib_jax.metrics._cumulative`.

Weights are optional everywhere; unit weights give the unweighted values exactly.  How they
enter is stated per function (sums become weighted sums; SKCE weights pairs by
:math:`v_i v_j`; the debiased ECE uses effective bin counts).  Every result is invariant to
rescaling all weights except smooth ECE, where weights are row counts (relplot's fixed
density floor is not scale-free).

Private module: the public surface is listed in :mod:`calib_jax.metrics`.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Literal, overload

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax._src import validation as V
from calib_jax._src.arrays import safe_div
from calib_jax._src.metric_inputs import check_probs_labels
from calib_jax._src.sorting import argsort
from calib_jax.partitions import quantile_bins, uniform_bins

_HI = jax.lax.Precision.HIGHEST


# ====================================================================== smooth ECE


def _smece_sizes(n_steps: int) -> tuple[int, int, int]:
    """Largest grid, evaluation-mesh and FFT sizes the bandwidth search can reach."""
    s_min = 2.0 ** -n_steps
    g = max(2000, round(20.0 / s_min)) // 2 + 1
    ev = max(round(10.0 / s_min), 200)
    nfft = 1 << int(math.ceil(math.log2(4 * g)))
    return g, ev, nfft


def _smece_at(f: jax.Array, r: jax.Array, v: jax.Array, sigma: jax.Array, *, g_max: int, ev_max: int,
              nfft: int) -> jax.Array:
    """smECE at bandwidth ``sigma`` (traced) with the σ-dependent grid of relplot 1.0.

    Grid of G = max(2000, round(20/σ)) // 2 + 1 points on [0, 1]; residuals ``r`` and masses
    ``v`` are split linearly between the two nearest grid points, convolved with the
    Gaussian density of scale σ truncated to |t| ≤ 1/2 and reflected at 0 and 1, then
    interpolated linearly onto an evaluation mesh of max(200, round(10/σ)) points.
    Arrays are padded to the largest sizes the search can reach (``g_max``, ``ev_max``).
    """
    dt = f.dtype
    G = (jnp.maximum(2000.0, jnp.round(20.0 / sigma)) // 2 + 1).astype(jnp.int32)
    ev = jnp.maximum(jnp.round(10.0 / sigma), 200.0).astype(jnp.int32)
    gm1 = (G - 1).astype(dt)
    # linear splatting onto the grid
    pos = f * gm1
    lo = jnp.clip(jnp.floor(pos).astype(jnp.int32), 0, G - 2)
    fr = pos - lo.astype(dt)
    ids = jnp.concatenate([lo, lo + 1])
    data = jnp.concatenate([jnp.stack([(1 - fr) * r, (1 - fr) * v], 1), jnp.stack([fr * r, fr * v], 1)])
    vals = jax.ops.segment_sum(data, ids, num_segments=g_max)  # (g_max, 2)
    # reflected extension ext[q] = vals[refl(q - (G - 1))], q < 3G - 2
    q = jnp.arange(3 * g_max, dtype=jnp.int32)
    rr = q - (G - 1)
    rr = jnp.where(rr < 0, -rr, rr)
    rr = jnp.where(rr > G - 1, 2 * (G - 1) - rr, rr)
    ext = jnp.where((q < 3 * G - 2)[:, None], vals[jnp.clip(rr, 0, g_max - 1)], 0.0)
    k = jnp.arange(g_max, dtype=dt)
    t = k / gm1 - 0.5
    ker = jnp.where(k < G, jnp.exp(-t * t / (2 * sigma * sigma)) / (math.sqrt(2 * math.pi) * sigma), 0.0)
    full = jnp.fft.irfft(jnp.fft.rfft(ext, nfft, axis=0) * jnp.fft.rfft(ker, nfft)[:, None], nfft, axis=0)
    j = jnp.arange(g_max, dtype=jnp.int32)
    sm = full[jnp.clip(j + G // 2 + G - 1, 0, nfft - 1)]  # smoothed (residual, mass) on the grid
    # linear interpolation onto the evaluation mesh
    m = jnp.arange(ev_max, dtype=dt)
    te = m / (ev - 1).astype(dt)
    ii = jnp.clip(jnp.floor(te * gm1).astype(jnp.int32), 0, G - 2)
    res = (te - ii.astype(dt) / gm1) * gm1
    at = sm[ii] * (1 - res)[:, None] + sm[ii + 1] * res[:, None]
    mask = m < ev.astype(dt)
    num = jnp.sum(jnp.where(mask, jnp.abs(at[:, 0]), 0.0))
    den = jnp.sum(jnp.where(mask, at[:, 1] + 1e-4, 0.0))
    return num / den


@functools.partial(jax.jit, static_argnames=("bandwidth", "n_steps", "min_bandwidth", "return_bandwidth"))
def _smece_core(p, y, w, *, bandwidth, n_steps, min_bandwidth, return_bandwidth):
    v = jnp.ones_like(p) if w is None else w.astype(p.dtype)
    r = v * (p - y)
    if bandwidth is not None:
        g_max, ev_max, nfft = _smece_sizes(max(0, math.ceil(-math.log2(bandwidth))))
        s = jnp.asarray(bandwidth, p.dtype)
        val = _smece_at(p, r, v, s, g_max=g_max, ev_max=ev_max, nfft=nfft)
        return (val, s) if return_bandwidth else val
    g_max, ev_max, nfft = _smece_sizes(n_steps)
    at = functools.partial(_smece_at, p, r, v, g_max=g_max, ev_max=ev_max, nfft=nfft)

    def step(_, se):
        start, end = se
        mid = 0.5 * (start + end)
        ok = (mid < min_bandwidth) | (mid < at(mid))
        return jnp.where(ok, start, mid), jnp.where(ok, mid, end)

    one, zero = jnp.ones((), p.dtype), jnp.zeros((), p.dtype)
    sigma, _ = jax.lax.fori_loop(0, n_steps, step, (one, zero))
    val = at(sigma)
    return (val, sigma) if return_bandwidth else val


@overload
def smooth_ece(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = ...,
               bandwidth: float | None = ..., n_steps: int = ..., min_bandwidth: float = ...,
               return_bandwidth: Literal[False] = ...) -> jax.Array: ...


@overload
def smooth_ece(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = ...,
               bandwidth: float | None = ..., n_steps: int = ..., min_bandwidth: float = ...,
               return_bandwidth: Literal[True]) -> tuple[jax.Array, jax.Array]: ...


def smooth_ece(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None,
               bandwidth: float | None = None, n_steps: int = 10, min_bandwidth: float = 0.001,
               return_bandwidth: bool = False) -> jax.Array | tuple[jax.Array, jax.Array]:
    r"""Smooth ECE (smECE) of Błasiok & Nakkiran (2023), with its fixed-point bandwidth.

    The residuals :math:`r_i = p_i - y_i` are kernel-smoothed in the score with a
    reflected Gaussian kernel :math:`\tilde K_\sigma` on [0, 1] (their Definition of
    smECE_σ, eq. (3)–(4) of "Smooth ECE: principled reliability diagrams via kernel
    smoothing"):

    .. math:: \hat r(t) = \frac{\sum_i v_i \tilde K_\sigma(t, p_i)\, r_i}{\sum_i v_i \tilde K_\sigma(t, p_i)},
              \qquad
              \mathrm{smECE}_\sigma = \int_0^1 |\hat r(t)|\, \hat\delta(t)\,dt

    with :math:`\hat\delta` the smoothed density of the scores; smECE is
    :math:`\mathrm{smECE}_{\sigma^*}` at the fixed point :math:`\sigma^* = \mathrm{smECE}_{\sigma^*}`
    (their Theorem on the unique fixed point), found by bisection on [0, 1].

    Convention: identical to the reference package ``relplot.smECE`` (version 1.0, default
    reflected-Gaussian kernel): the same σ-dependent grid (linear splatting on
    max(2000, round(20/σ))//2 + 1 points, Gaussian truncated at ±1/2, reflection at 0 and
    1), the same evaluation mesh of max(200, round(10/σ)) points with its 1e-4 density
    floor, and the same search: ``n_steps`` bisection steps (jit-able: a fixed count),
    accepting σ while σ < ``min_bandwidth`` or σ < smECE_σ, returning the upper end.
    (relplot first tests σ = 1; smECE_σ < 1 always, so that test never succeeds and is
    skipped.)  The convolution runs as an FFT on arrays padded to the largest grid the
    search can reach (``n_steps=10``: 10241 points).

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) labels in {0, 1}.
      weights: optional (n,) non-negative row weights. Row ``i`` contributes mass
        :math:`v_i` and residual :math:`v_i r_i`, i.e. weights act as row counts: integer
        weights give exactly relplot's value on the sample with rows repeated.  Rescaling all
        weights changes the value only through relplot's fixed 1e-4 density floor (negligible
        unless the total weight is tiny).
      bandwidth: a fixed σ in :math:`[2^{-16}, 1]` (a Python float, static under ``jit``)
        instead of the fixed-point search; ``None`` (default) searches.
      n_steps: bisection steps of the search, an int in [1, 16] (static; σ is resolved to
        ``2 ** -n_steps``, and the grid the arrays are padded to grows as ``2 ** n_steps``).
      min_bandwidth: a floor for σ, a float >= 0 (static): the search always moves above a
        σ below it, so a nearly calibrated sample does not drive σ towards 0 (relplot's
        default 0.001).
      return_bandwidth: if True (static), also return the σ used.

    Returns:
      A scalar array, the smECE in [0, 1]; with ``return_bandwidth=True`` a tuple
      ``(smece, sigma)`` of scalar arrays. Called eagerly, invalid input (NaN, a probability
      outside [0, 1], a label other than 0/1, a negative weight, a bad option) raises
      ``ValueError`` naming the argument; under ``jit`` / ``vmap`` / ``grad``, where values
      cannot raise, the same checks make the result NaN instead (bad options still raise while
      tracing).  The bisection has a fixed step count, so the function is jit- and vmap-able.

    Note:
      Under ``jit``, float32 and float64 may stop the bisection on different sides of a
      comparison that is within rounding, giving a σ one bisection step apart.  Compiling the
      search (an FFT per step) takes a few seconds; an eager call compiles once per static
      configuration and input shape.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import smooth_ece
      >>> p = jnp.full(4, 0.7); y = jnp.array([0.0, 1.0, 0.0, 1.0])
      >>> val, sigma = smooth_ece(p, y, return_bandwidth=True)
      >>> round(float(val), 4), round(float(sigma), 2)  # the smoothed residual is 0.7 - 0.5 everywhere
      (0.2, 0.2)
    """
    p, y, w = check_probs_labels(probs, labels, weights)
    V.check_positive_int(n_steps, "n_steps")
    if n_steps > 16:
        raise ValueError(f"`n_steps` must be <= 16 (grid sizes grow as 2**n_steps), got {n_steps}")
    if bandwidth is not None:
        V.check_number_option(bandwidth, "bandwidth", "a number in [2**-16, 1]", lambda v: 2.0 ** -16 <= v <= 1.0)
        bandwidth = float(bandwidth)
    # at most 1, the largest bandwidth the fixed point searches (an infinite floor gave a value
    # for a bandwidth the metric never uses); text and booleans were numbers
    V.check_number_option(min_bandwidth, "min_bandwidth", "a number in [0, 1]", lambda v: 0.0 <= v <= 1.0)
    return _smece_core(p, y, w, bandwidth=bandwidth, n_steps=n_steps, min_bandwidth=float(min_bandwidth),
                       return_bandwidth=V.check_flag_option(return_bandwidth, "return_bandwidth"))


# ====================================================================== ICI


def _linear_bin(x: jax.Array, lo: jax.Array, delta: jax.Array, m: int) -> tuple[jax.Array, jax.Array]:
    # a product by 1 / delta (as histogram_1d): XLA rewrites a division by a broadcast
    # scalar into it only in some programs, which would move points across grid nodes
    pos = (x - lo) * (1.0 / delta)
    i0 = jnp.clip(jnp.floor(pos).astype(jnp.int32), 0, m - 2)
    return i0, jnp.clip(pos - i0.astype(x.dtype), 0.0, 1.0)


def _check_bandwidth(bandwidth: Any) -> None:
    """A kernel scale must be a finite positive number (NaN is not; an infinite one gave a value
    for a kernel that is constant, text and booleans were numbers): ``ValueError`` on a concrete
    value, and a recorded check under tracing, so a traced bad bandwidth makes the public call's
    result NaN."""
    if V.is_concrete(bandwidth):
        V.check_number_option(bandwidth, "bandwidth", "a finite number > 0", lambda v: 0.0 < v < np.inf)
        return
    bw = jnp.asarray(bandwidth)
    V.check_condition(~((bw > 0) & jnp.isfinite(bw)), "`bandwidth` must be a finite number > 0")


@functools.partial(jax.jit, static_argnames=("n_grid", "has_bw"))
def _ici_core(p, y, w, bandwidth, *, n_grid, has_bw):
    M = n_grid
    v = jnp.ones_like(p) if w is None else w.astype(p.dtype)
    V_ = jnp.sum(v)
    lo, hi = jnp.min(p), jnp.max(p)
    span = hi - lo
    delta = jnp.where(span > 0, span, 1.0) / (M - 1)
    if has_bw:
        h = jnp.asarray(bandwidth, p.dtype)
    else:
        mean = jnp.sum(v * p) / V_
        sd = jnp.sqrt(jnp.sum(v * (p - mean) ** 2) / V_)
        n_eff = V_ * V_ / jnp.sum(v * v)
        h = 1.06 * sd * n_eff ** -0.2
    h = jnp.maximum(h, delta)
    i0, fr = _linear_bin(p, lo, delta, M)
    ids = jnp.concatenate([i0, i0 + 1])
    c = jax.ops.segment_sum(jnp.concatenate([jnp.stack([(1 - fr) * v, (1 - fr) * v * y], 1),
                                             jnp.stack([fr * v, fr * v * y], 1)]), ids, num_segments=M)
    x = lo + jnp.arange(M, dtype=p.dtype) * delta
    d = x[None, :] - x[:, None]  # (node g, node m): x_m - x_g
    K = jnp.exp(-0.5 * (d / h) ** 2)
    Kd = K * d
    s0, t0 = jnp.dot(K, c, precision=_HI).T
    s1, t1 = jnp.dot(Kd, c, precision=_HI).T
    s2 = jnp.dot(Kd * d, c[:, 0], precision=_HI)
    det = s0 * s2 - s1 * s1
    ll = det > 1e-6 * s0 * s2
    fit = jnp.where(ll, (s2 * t0 - s1 * t1) / jnp.where(ll, det, 1.0), safe_div(t0, s0))
    curve = fit[i0] * (1 - fr) + fit[i0 + 1] * fr
    return jnp.sum(v * jnp.abs(p - curve)) / V_


def ici(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None,
        bandwidth: float | jax.Array | None = None, n_grid: int = 512) -> jax.Array:
    r"""Integrated Calibration Index (Austin & Steyerberg 2019, eq. (1) of "The Integrated
    Calibration Index (ICI) and related metrics for quantifying the calibration of logistic
    regression models").

    .. math:: \mathrm{ICI} = \frac{\sum_i v_i\,|p_i - \hat c(p_i)|}{\sum_i v_i}

    with :math:`\hat c` a smooth calibration curve, the regression of :math:`y` on
    :math:`p`.  Austin & Steyerberg fit it with loess; a jit-able smoother is used here: a
    local-linear Gaussian-kernel regression

    .. math:: \hat c(x) = \arg\min_{a}\min_b \sum_i v_i K_h(p_i - x)\,(y_i - a - b(p_i - x))^2,
              \quad K_h(u) = e^{-u^2/(2h^2)},

    computed on a fixed grid of ``n_grid`` nodes spanning [min p, max p] with linear binning
    (each row's weight split between its two nearest nodes, Fan & Marron 1994), and
    interpolated linearly back to the rows.  Where the local design is degenerate
    (:math:`s_0 s_2 - s_1^2 \le 10^{-6} s_0 s_2`, e.g. all scores equal) the local-constant
    (Nadaraya-Watson) fit is used.  The curve is not clipped to [0, 1].

    Against loess (``probcal.metrics.ici``, span 0.75-style smoothing) the value agrees to a
    few 1e-3 on smooth miscalibration; the two smoothers are not the same estimator.

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) labels in {0, 1}.
      weights: optional (n,) non-negative row weights; they weight both the kernel regression
        and the mean over rows (invariant to rescaling).
      bandwidth: the kernel scale h > 0 on the probability scale (a float, or an array that
        may be traced under ``jit``); default the normal-reference rule
        :math:`h = 1.06\,\hat s_p\, n_{\mathrm{eff}}^{-1/5}` (weighted standard deviation,
        Kish effective size).  h is floored at one grid step.
      n_grid: grid nodes, an int >= 2 (static under ``jit``; the cost is O(n + n_grid²)).

    Returns:
      A scalar array >= 0. Called eagerly, invalid input (NaN, a probability outside [0, 1], a
      label other than 0/1, a negative weight, a non-positive ``bandwidth``) raises
      ``ValueError`` naming the argument; under ``jit`` / ``vmap`` / ``grad``, where values
      cannot raise, the same checks (a traced ``bandwidth`` included) make the result NaN
      instead.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import ici
      >>> p = jnp.array([0.2, 0.2, 0.8, 0.8]); y = jnp.array([0.0, 1.0, 1.0, 1.0])
      >>> round(float(ici(p, y)), 4)  # two scores: the curve meets their click rates, (0.3 + 0.2) / 2
      0.25
    """
    p, y, w = check_probs_labels(probs, labels, weights)
    V.check_positive_int(n_grid, "n_grid")
    if n_grid < 2:
        raise ValueError(f"`n_grid` must be >= 2, got {n_grid}")
    has_bw = bandwidth is not None
    if has_bw:
        _check_bandwidth(bandwidth)
    bw = jnp.asarray(bandwidth if has_bw else 0.0, p.dtype)
    return _ici_core(p, y, w, bw, n_grid=n_grid, has_bw=has_bw)


# ====================================================================== SKCE


def _kernel(a: jax.Array, b: jax.Array, kind: str, bw: jax.Array) -> jax.Array:
    d = a - b
    if kind == "gaussian":
        return jnp.exp(-(d * d) / (2 * bw * bw))
    return jnp.exp(-jnp.abs(d) / bw)


@functools.partial(jax.jit, static_argnames=("estimator", "kernel", "block_size", "chunk"))
def _skce_core(p, y, w, bw, *, estimator, kernel, block_size, chunk):
    n = p.shape[0]
    v = jnp.ones_like(p) if w is None else w.astype(p.dtype)
    u = v * (y - p)
    if estimator == "unbiased":
        n_pad = -n % chunk
        pp = jnp.concatenate([p, jnp.zeros((n_pad,), p.dtype)]).reshape(-1, chunk)
        up = jnp.concatenate([u, jnp.zeros((n_pad,), p.dtype)]).reshape(-1, chunk)

        def rows(args):
            pc, uc = args
            return jnp.dot(uc, jnp.dot(_kernel(pc[:, None], p[None, :], kernel, bw), u, precision=_HI),
                           precision=_HI)

        num = jnp.sum(jax.lax.map(rows, (pp, up))) - jnp.sum(u * u)  # drop i == j (kernel(0) = 1)
        den = jnp.sum(v) ** 2 - jnp.sum(v * v)
        return safe_div(num, den)
    B = block_size
    nb = n // B
    if nb == 0:
        return jnp.zeros((), p.dtype)
    pb, ub, vb = (a[: nb * B].reshape(nb, B) for a in (p, u, v))
    Kb = _kernel(pb[:, :, None], pb[:, None, :], kernel, bw)
    off = 1.0 - jnp.eye(B, dtype=p.dtype)
    num = jnp.sum(ub[:, :, None] * ub[:, None, :] * Kb * off[None])
    den = jnp.sum(vb[:, :, None] * vb[:, None, :] * off[None])
    return safe_div(num, den)


def skce(probs: jax.Array, labels: jax.Array, *, estimator: str = "unbiased", kernel: str = "gaussian",
         bandwidth: float | jax.Array = 0.1, block_size: int = 2, weights: jax.Array | None = None,
         chunk: int = 256) -> jax.Array:
    r"""Squared kernel calibration error for binary classification (Widmann, Lindsten &
    Zachariah 2019, "Calibration tests in multi-class classification: a unifying framework",
    eq. (3) and the estimators of their Lemma/Section 3).

    With :math:`u_i = y_i - p_i` and a scalar kernel :math:`\kappa` on the probability,

    .. math:: h_{ij} = u_i\,u_j\,\kappa(p_i, p_j), \qquad
              \widehat{\mathrm{SKCE}}_{uq} = \frac{\sum_{i\ne j} v_i v_j h_{ij}}{\sum_{i \ne j} v_i v_j}

    (unbiased quadratic U-statistic, :math:`\binom n2^{-1}\sum_{i<j} h_{ij}` unweighted).
    ``estimator="block"`` averages the U-statistic over consecutive blocks of
    ``block_size`` rows (pooled: :math:`\sum_b \mathrm{num}_b / \sum_b \mathrm{den}_b`; the
    last ``n mod block_size`` rows are dropped); ``"linear"`` is the block estimator with
    blocks of 2, Widmann's :math:`\widehat{\mathrm{SKCE}}_{ul}` over pairs (2i, 2i+1).  The
    block/linear estimators use the rows in the given order: shuffle first if the order
    is not random.

    Kernels: ``"gaussian"`` :math:`\exp(-(p-q)^2/(2\nu^2))`, ``"laplacian"``
    :math:`\exp(-|p-q|/\nu)`, with bandwidth ν (``bandwidth``, may be traced).

    Convention: Widmann et al. state SKCE for the probability vector with a matrix kernel
    :math:`\kappa\,I_2`; for two classes :math:`(e_y - \mathbf p)^\top(e_{y'} - \mathbf q) = 2u u'`,
    so their value is twice the scalar form reported here.  With fewer than 2 rows (or no
    complete block) the estimate is 0.  The unbiased estimator costs O(n²) time and
    O(``chunk`` · n) memory.

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) labels in {0, 1}.
      estimator: ``"unbiased"`` (default; all pairs, O(n²)), ``"block"`` (pairs within
        consecutive blocks of ``block_size`` rows, O(n · block_size)) or ``"linear"`` (blocks
        of 2, O(n)); static under ``jit``.
      kernel: ``"gaussian"`` or ``"laplacian"`` (static).
      bandwidth: the kernel scale ν > 0 (a float, or an array that may be traced under
        ``jit``, e.g. to take a gradient or ``vmap`` over it).
      block_size: rows per block for ``estimator="block"``, an int >= 2 (static; ignored
        otherwise).
      weights: optional (n,) non-negative row weights; pair (i, j) is weighted by
        :math:`v_i v_j`.
      chunk: rows per step of the unbiased estimator's O(n²) sum, an int >= 1 (static;
        bounds the memory, not the value).

    Returns:
      A scalar array; the unbiased and block estimates can be negative for a calibrated
      model. Called eagerly, invalid input (NaN, a probability outside [0, 1], a label other
      than 0/1, a negative weight, a non-positive ``bandwidth``, a bad option) raises
      ``ValueError`` naming the argument; under ``jit`` / ``vmap`` / ``grad``, where values
      cannot raise, the same checks (a traced ``bandwidth`` included) make the result NaN
      instead.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import skce
      >>> p = jnp.array([0.2, 0.4]); y = jnp.array([1.0, 0.0])
      >>> round(float(skce(p, y)), 4)  # u = (0.8, -0.4), kernel exp(-0.2**2 / (2 * 0.1**2)): -0.32 * e**-2
      -0.0433
    """
    p, y, w = check_probs_labels(probs, labels, weights)
    V.check_choice(estimator, "estimator", ("unbiased", "linear", "block"))
    V.check_choice(kernel, "kernel", ("gaussian", "laplacian"))
    V.check_positive_int(block_size, "block_size")
    V.check_positive_int(chunk, "chunk")
    _check_bandwidth(bandwidth)
    if estimator == "linear":
        estimator, block_size = "block", 2
    elif estimator == "block" and block_size < 2:
        raise ValueError(f"`block_size` must be >= 2, got {block_size}")
    bw = jnp.asarray(bandwidth, p.dtype)
    return _skce_core(p, y, w, bw, estimator=estimator, kernel=kernel, block_size=block_size,
                      chunk=min(chunk, p.shape[0]) if estimator == "unbiased" else 1)


# ====================================================================== debiased ECE², ECE-sweep


@functools.partial(jax.jit, static_argnames=("n_bins", "strategy"))
def _debiased_core(p, y, w, *, n_bins, strategy):
    M = n_bins
    v = jnp.ones_like(p) if w is None else w.astype(p.dtype)
    ids = uniform_bins(p, n_bins=M) if strategy == "uniform" else quantile_bins(p, n_bins=M, weights=w)
    s = jax.ops.segment_sum(jnp.stack([v, v * v, v * p, v * y], 1), ids, num_segments=M)
    W, W2, SP, SY = s.T
    mass = W / jnp.sum(W)
    rate = safe_div(SY, W)
    gap = safe_div(SP, W) - rate
    n_eff = safe_div(W * W, W2)
    corr = safe_div(rate * (1 - rate), n_eff - 1.0)
    corr = jnp.where(n_eff > 1.0, corr, 0.0)
    return jnp.sum(mass * (gap * gap - corr))


def debiased_ece_sq(probs: jax.Array, labels: jax.Array, *, n_bins: int = 15, strategy: str = "quantile",
                    weights: jax.Array | None = None) -> jax.Array:
    r"""Debiased squared ECE (Kumar, Liang & Ma 2019, "Verified uncertainty calibration",
    the debiased plug-in estimator of §5, their eq. for :math:`\hat E^2_{\mathrm{db}}`).

    .. math:: \widehat{\mathrm{ECE}}^2_{\mathrm{db}} = \sum_b w_b\Bigl[(\bar p_b - \bar y_b)^2
              - \frac{\bar y_b(1-\bar y_b)}{n_b - 1}\Bigr]

    The plug-in squared gap over-estimates :math:`(\mathbb E[p|b] - \mathbb E[y|b])^2` by
    the sampling variance of :math:`\bar y_b`; the second term removes it.  The value is the
    *squared* error (no root, no flooring at 0: it can be slightly negative for a calibrated
    model, which is what makes it unbiased).

    Bins: ``strategy="quantile"`` (default; Kumar et al.'s uniform-mass bins) is the
    library's equal-mass binning (ties kept together, see
    :func:`calib_jax.partitions.quantile_bins`), ``"uniform"`` equal-width bins.  With
    weights, :math:`w_b` is the bin's weight share and :math:`n_b` its effective count
    :math:`(\sum_b v)^2/\sum_b v^2` (the raw count for unit weights).  Bins with
    :math:`n_b \le 1` get no correction; empty bins contribute 0.

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) labels in {0, 1}.
      n_bins: number of bins, an int >= 1 (static under ``jit``).
      strategy: ``"quantile"`` (default, equal-mass bins) or ``"uniform"`` (equal-width bins
        :math:`[m/M, (m+1)/M)`); static.
      weights: optional (n,) non-negative row weights (bin masses, means and effective counts
        as above).

    Returns:
      A scalar array, the debiased *squared* ECE (may be slightly negative). Called eagerly,
      invalid input (NaN, a probability outside [0, 1], a label other than 0/1, a negative
      weight, a bad option) raises ``ValueError`` naming the argument; under ``jit`` /
      ``vmap`` / ``grad``, where values cannot raise, the same checks make the result NaN
      instead.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import debiased_ece_sq
      >>> p = jnp.array([0.2, 0.2, 0.8, 0.8]); y = jnp.array([0.0, 1.0, 1.0, 1.0])
      >>> # bin 1: 0.3**2 - 0.5 * 0.5 / (2 - 1) = -0.16; bin 2: 0.2**2 - 0 = 0.04; each weighs 1/2
      >>> round(float(debiased_ece_sq(p, y, n_bins=2)), 4)
      -0.06
    """
    p, y, w = check_probs_labels(probs, labels, weights)
    V.check_positive_int(n_bins, "n_bins")
    V.check_choice(strategy, "strategy", ("uniform", "quantile"))
    return _debiased_core(p, y, w, n_bins=n_bins, strategy=strategy)


@functools.partial(jax.jit, static_argnames=("max_bins", "norm", "return_bins"))
def _sweep_core(p, y, w, keep=None, *, max_bins, norm, return_bins):
    n = p.shape[0]
    dt = p.dtype
    v = jnp.ones_like(p) if w is None else w.astype(dt)
    if keep is None:
        m = jnp.asarray(n, jnp.int32)
        order = argsort(p)
    else:  # only the kept rows are binned: sorted first, the others after them (key 2 > any p)
        v = jnp.where(keep, v, 0.0)
        m = jnp.sum(keep.astype(jnp.int32))
        order = argsort(jnp.where(keep, p, 2.0))
    cols = jnp.stack([v, v * p, v * y], 1)[order]
    pre = jnp.concatenate([jnp.zeros((1, 3), dt), jnp.cumsum(cols, axis=0)])
    bs = jnp.arange(1, max_bins + 1, dtype=jnp.int32)[:, None]  # candidate bin counts
    k = jnp.arange(max_bins + 1, dtype=jnp.int32)[None, :]
    kk = jnp.minimum(k, bs)
    starts = (kk * m + bs - 1) // bs  # bin k of b holds sorted positions [ceil(km/b), ceil((k+1)m/b))
    cum = pre[starts]  # (B, B+1, 3)
    sums = cum[:, 1:] - cum[:, :-1]
    valid = k[:, 1:] <= bs  # bins 1..b
    W = sums[..., 0]
    rate = safe_div(sums[..., 2], W)
    nonempty = jnp.all(jnp.where(valid, W > 0, True), axis=1)
    up = rate[:, 1:] >= rate[:, :-1]
    mono = jnp.all(jnp.where(valid[:, 1:], up, True), axis=1) & nonempty & (bs[:, 0] <= m)
    # first-violation rule: b* = largest b with every b' <= b monotone
    b_star = jnp.sum(jnp.cumprod(mono.astype(jnp.int32)))
    b_star = jnp.maximum(b_star, 1)
    # final error at b* from one exact segment pass (no prefix-sum cancellation); rows past
    # the m kept ones have weight 0 and are clipped into the last bin
    pos = jnp.arange(n, dtype=jnp.int32)
    ids = jnp.minimum((pos * b_star) // jnp.maximum(m, 1), max_bins - 1)
    s = jax.ops.segment_sum(cols, ids, num_segments=max_bins)
    mass = s[:, 0] / jnp.sum(s[:, 0])
    gap = safe_div(s[:, 1] - s[:, 2], s[:, 0])
    val = jnp.sum(mass * (jnp.abs(gap) if norm == "l1" else gap * gap))
    return (val, b_star) if return_bins else val


@overload
def ece_sweep(probs: jax.Array, labels: jax.Array, *, max_bins: int = ..., norm: str = ...,
              weights: jax.Array | None = ..., return_bins: Literal[False] = ...) -> jax.Array: ...


@overload
def ece_sweep(probs: jax.Array, labels: jax.Array, *, max_bins: int = ..., norm: str = ...,
              weights: jax.Array | None = ..., return_bins: Literal[True]) -> tuple[jax.Array, jax.Array]: ...


def ece_sweep(probs: jax.Array, labels: jax.Array, *, max_bins: int = 100, norm: str = "l1",
              weights: jax.Array | None = None, return_bins: bool = False
              ) -> jax.Array | tuple[jax.Array, jax.Array]:
    r"""ECE-sweep (Roelofs, Cain, Shlens & Mozer 2022, "Mitigating bias in calibration error
    estimation", §4, the monotonic sweep :math:`\mathrm{ECE}_{\mathrm{sweep}}`).

    .. math:: b^* = \max\{b \le B : \forall b' \le b,\ \bar y_1 \le \dots \le \bar y_{b'}\}, \qquad
              \mathrm{ECE}_{\mathrm{sweep}} = \sum_{k=1}^{b^*} w_k\,|\bar p_k - \bar y_k|

    over equal-mass bins: the sweep grows the number of bins from 1 and stops before the
    first count whose bin label rates are not non-decreasing.

    Conventions: equal-*count* bins of the stably sorted scores (ties broken by row
    index, so tied rows may straddle a bin edge), bin k of b holding sorted positions
    :math:`[\lceil kn/b\rceil, \lceil (k+1)n/b\rceil)`; weights enter the bin masses and
    rates, not the edges.  The sweep is capped at ``max_bins`` (static; the paper goes up to
    n) and at n.  ``norm="l2"`` gives the squared form :math:`\sum_k w_k\,\mathrm{gap}_k^2`
    (no root, as :func:`calib_jax.metrics.ece`).  ``return_bins`` also returns :math:`b^*`.
    The monotonicity test uses prefix sums (float32 rounding can flip a near-tie); the
    reported error is recomputed exactly at :math:`b^*`.

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) labels in {0, 1}.
      max_bins: the largest bin count B tried, an int >= 1 (static under ``jit``; the sweep
        costs O(n log n + B²)).
      norm: ``"l1"`` (default, ECE) or ``"l2"`` (squared ECE, no root); static.
      weights: optional (n,) non-negative row weights (bin masses and rates; the edges are
        by row count).
      return_bins: if True (static), also return :math:`b^*`.

    Returns:
      A scalar array; with ``return_bins=True`` a tuple ``(ece, b_star)``, ``b_star`` an int32
      scalar in [1, min(max_bins, n)]. Called eagerly, invalid input (NaN, a probability
      outside [0, 1], a label other than 0/1, a negative weight, a bad option) raises
      ``ValueError`` naming the argument; under ``jit`` / ``vmap`` / ``grad``, where values
      cannot raise, the same checks make the error NaN instead (``b_star``, an integer, is
      returned as computed).

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import ece_sweep
      >>> p = jnp.array([0.1, 0.2, 0.3, 0.4]); y = jnp.array([0.0, 1.0, 0.0, 1.0])
      >>> val, b = ece_sweep(p, y, max_bins=4, return_bins=True)
      >>> round(float(val), 4), int(b)  # 3 bins: rates 0.5, 0, 1 break; 2 bins: (|0.15-0.5| + |0.35-0.5|) / 2
      (0.25, 2)
    """
    p, y, w = check_probs_labels(probs, labels, weights)
    V.check_positive_int(max_bins, "max_bins")
    V.check_choice(norm, "norm", ("l1", "l2"))
    return _sweep_core(p, y, w, max_bins=max_bins, norm=norm, return_bins=V.check_flag_option(return_bins,
                                                                                              "return_bins"))


def sweep_over_kept_rows(probs: jax.Array, labels: jax.Array, weights: jax.Array | None,
                         keep: jax.Array, *, max_bins: int, norm: str = "l1"
                         ) -> tuple[jax.Array, jax.Array]:
    r""":func:`ece_sweep` over the rows where ``keep`` is true only, with a shape that does not
    depend on how many are kept (so it runs under ``jit`` and ``vmap``).

    .. math:: b^* = \max\{b \le B : \forall b' \le b,\ \bar y_1 \le \dots \le \bar y_{b'}\},
              \qquad \sum_{k=1}^{b^*} w_k\,|\bar p_k - \bar y_k|

    over the equal-count bins of the :math:`m` kept rows sorted by probability (Roelofs,
    Cain, Shlens & Mozer 2022, "Mitigating bias in calibration error estimation", §4): the
    rows outside ``keep`` are sorted after the kept ones with weight 0. With every row kept it
    is :func:`ece_sweep`. The building block of the adaptive ECE@N
    (:func:`calib_jax.metrics.ece_at_n` with ``strategy="sweep"``). No input checks: the
    callers check their arguments.

    Args:
      probs: (n,) probabilities in [0, 1].
      labels: (n,) labels in {0, 1}.
      weights: (n,) non-negative row weights, or None (unit weights).
      keep: (n,) booleans, the rows to bin; at least one should be true.
      max_bins: the largest bin count tried, an int >= 1 (static).
      norm: ``"l1"`` or ``"l2"`` (static).

    Returns:
      ``(error, b_star)``: the error (a scalar array) and the bin count chosen (int32).

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics._modern import sweep_over_kept_rows
      >>> p = jnp.array([0.1, 0.9, 0.2, 0.3, 0.4]); y = jnp.array([0.0, 1.0, 1.0, 0.0, 1.0])
      >>> keep = jnp.array([True, False, True, True, True])  # the ece_sweep example's rows
      >>> val, b = sweep_over_kept_rows(p, y, None, keep, max_bins=4)
      >>> round(float(val), 4), int(b)
      (0.25, 2)
    """
    return _sweep_core(probs, labels, weights, keep, max_bins=max_bins, norm=norm, return_bins=True)


__all__ = ["smooth_ece", "ici", "skce", "debiased_ece_sq", "ece_sweep"]
