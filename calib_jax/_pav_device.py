"""Weighted isotonic regression on the device, through the greatest convex minorant.

Not wired in yet: :func:`calib_jax._pav.isotonic_fit_values` still goes through SciPy's PAV
on the host on every backend. This is the accelerator path of issue 15 item 8, correct
(``tests/test_pav_device.py`` against SciPy) but unfinished: its hull levels are unrolled in
Python, so its program grows as log^2 n and compiling it at n = 10^5 on the CPU took minutes
and gigabytes. The next step is one level loop over a fixed flat layout (one compile).

Method. Sort by x (stable). The cumulative-sum diagram has the points
:math:`P_k = (W_k, S_k)`, the weight and the weighted label sum of the first k sorted
elements; the isotonic fit is the slope of its greatest convex minorant (the lower convex
hull) over each element (Barlow et al. 1972, Thm 1.1). Only the end points of tie groups of
positive weight can be hull vertices, which pools ties. The hull is built by merging the
hulls of adjacent runs of 1, 2, 4, ... points: the bridge of two hulls is found by a binary
search for every left vertex's tangent point on the right hull, then the first left vertex
whose next vertex lies on or above its tangent line. The points' coordinates are prefix sums
kept as unevaluated (hi, lo) float32 pairs, so differences of nearby points are accurate;
the fitted values are the blocks' weighted means by segmented sums. Parallel rounds of
merging adjacent violating blocks, the obvious alternative, needed 101, 579 and 1372 rounds
at n = 10^3, 10^4, 10^5 on calibration data (the count grows like n^0.6).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from calib_jax.groupstats import segmented_prefix_sums

__all__ = ["device_isotonic_fit_values"]


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _df_cumsum(v):
    """Inclusive prefix sums of ``v`` as unevaluated (hi, lo) pairs: ~48-bit sums, fixed tree."""

    def combine(x, y):
        (ah, al), (bh, bl) = x, y
        s, e = _two_sum(ah, bh)
        return _two_sum(s, e + (al + bl))

    return jax.lax.associative_scan(combine, (v, jnp.zeros_like(v)))


def _block_totals(v, start):
    """Each position's total of ``v`` over its block (blocks begin where ``start``)."""
    m = v.shape[0]
    scan = segmented_prefix_sums(v, start)
    end = jnp.concatenate([start[1:], jnp.ones((1,), bool)])
    idx = jnp.arange(m, dtype=jnp.int32)
    return scan[jax.lax.cummin(jnp.where(end, idx, m - 1), reverse=True)]


def device_isotonic_fit_values(x: jax.Array, y: jax.Array, w: jax.Array) -> jax.Array:
    """Fitted values of the weighted isotonic regression of y on x, ties pooled, as
    :func:`calib_jax._pav.np_isotonic_fit_values` (float32: agrees with SciPy's float64 PAV
    to ~1e-6); zero-weight points take the value of the block on their left (or the first
    block). Leading axes are vmapped."""
    if x.ndim > 1:
        return jax.vmap(device_isotonic_fit_values)(x, y, w)
    n = x.shape[0]
    if n == 0:
        return jnp.zeros_like(x)
    dt = jnp.result_type(x.dtype, jnp.float32)
    order = jnp.argsort(x, stable=True)
    xs = x[order]
    ws = w[order].astype(dt)
    wy = ws * y[order].astype(dt)
    idx = jnp.arange(n, dtype=jnp.int32)
    tie_start = jnp.concatenate([jnp.ones((1,), bool), xs[1:] != xs[:-1]])
    tie_end = jnp.concatenate([xs[1:] != xs[:-1], jnp.ones((1,), bool)])
    positive = _block_totals(ws, tie_start) > 0  # the element's tie group has weight

    # cumulative-sum diagram: point k = (W_k, S_k) after the first k sorted elements
    Wh, Wl = _df_cumsum(ws)
    Sh, Sl = _df_cumsum(wy)
    z = jnp.zeros((1,), dt)
    Wh, Wl, Sh, Sl = (jnp.concatenate([z, a]) for a in (Wh, Wl, Sh, Sl))
    N = 1 << max(1, math.ceil(math.log2(n + 1)))
    valid = jnp.concatenate([jnp.ones((1,), bool), tie_end & positive, jnp.zeros((N - n - 1,), bool)])
    pad = lambda a: jnp.concatenate([a, jnp.zeros((N - n - 1,), dt)])
    Wh, Wl, Sh, Sl = (pad(a) for a in (Wh, Wl, Sh, Sl))

    def d(a, b):  # (dW, dS) from point a to point b, accurate to float32 of the difference
        return ((Wh[b] - Wh[a]) + (Wl[b] - Wl[a]), (Sh[b] - Sh[a]) + (Sl[b] - Sl[a]))

    def slope_le(a, b, c):  # slope(a, b) <= slope(a, c), for points b, c right of a
        wb, sb = d(a, b)
        wc, sc = d(a, c)
        return sb * wc <= sc * wb

    # lower convex hull of the valid points by pairwise merges of adjacent hulls
    hull = jnp.arange(N, dtype=jnp.int32)[:, None]
    cnt = valid.astype(jnp.int32)
    L = 1
    while L < N:
        A, B = hull[0::2], hull[1::2]
        ca, cb = cnt[0::2], cnt[1::2]
        P = A.shape[0]
        slots = jnp.arange(L, dtype=jnp.int32)[None, :]
        cb1 = jnp.maximum(cb, 1)[:, None] - 1
        # for every vertex A_i: its tangent point B_j on the right hull (first j whose next
        # vertex is not below the line A_i B_j)
        lo = jnp.zeros((P, L), jnp.int32)
        hi = jnp.broadcast_to(cb1, (P, L))
        for _ in range(max(1, math.ceil(math.log2(L))) + 1):
            mid = (lo + hi) // 2
            nxt = jnp.minimum(mid + 1, cb1)
            q = (mid >= cb1) | slope_le(A, jnp.take_along_axis(B, mid, 1), jnp.take_along_axis(B, nxt, 1))
            go = lo < hi
            hi = jnp.where(go & q, mid, hi)
            lo = jnp.where(go & ~q, mid + 1, lo)
        J = lo
        BJ = jnp.take_along_axis(B, J, 1)
        A_next = jnp.take_along_axis(A, jnp.minimum(slots + 1, jnp.maximum(ca, 1)[:, None] - 1), 1)
        last_a = slots >= ca[:, None] - 1
        R = last_a | slope_le(A, BJ, A_next)
        i_star = jnp.min(jnp.where(R, slots, L), axis=1)
        j_star = jnp.take_along_axis(J, i_star[:, None], 1)[:, 0]
        t = jnp.arange(2 * L, dtype=jnp.int32)[None, :]
        from_a = t <= i_star[:, None]
        ib = t - (i_star[:, None] + 1) + j_star[:, None]
        merged = jnp.where(from_a, jnp.take_along_axis(A, jnp.minimum(t, L - 1), 1),
                           jnp.take_along_axis(B, jnp.clip(ib, 0, L - 1), 1))
        mcount = i_star + 1 + cb - j_star
        only_b = jnp.take_along_axis(B, jnp.minimum(t, L - 1), 1)
        only_a = jnp.take_along_axis(A, jnp.minimum(t, L - 1), 1)
        hull = jnp.where((ca == 0)[:, None], only_b, jnp.where((cb == 0)[:, None], only_a, merged))
        cnt = jnp.where(ca == 0, cb, jnp.where(cb == 0, ca, mcount))
        L *= 2
    V = hull[0]
    c = cnt[0]
    # blocks: the elements after hull vertex m (m = 1 .. c-2) start a block at the first
    # positive-weight tie group from there; zero-weight groups join the block on their left
    cand = tie_start & positive
    next_start = jax.lax.cummin(jnp.where(cand, idx, n), reverse=True)
    m = jnp.arange(N, dtype=jnp.int32)
    use = (m >= 1) & (m <= c - 2)
    pos = jnp.where(use, next_start[jnp.clip(V, 0, n - 1)], n)
    start = jnp.zeros((n,), bool).at[pos].set(True, mode="drop").at[0].set(True)
    W = _block_totals(ws, start)
    S = _block_totals(wy, start)
    fitted = jnp.where(W > 0, S / jnp.where(W > 0, W, 1.0), 0.0).astype(x.dtype)
    return jnp.zeros_like(fitted).at[order].set(fitted, unique_indices=True)
