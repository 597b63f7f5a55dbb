"""Small symmetric positive-definite solves written in ``jax.numpy``, with no LAPACK call.

Newton steps of the calibrators (``calibrators._common.newton_logistic``: 1-3 parameters)
and the normal equations of the Calibration-then-Calculation pipelines solve :math:`A x = b` with
:math:`A = H + \\lambda I` symmetric positive definite and :math:`d \\le` a few dozen.
``jnp.linalg.solve`` lowers these to a LAPACK ``getrf`` custom call on the CPU. In JAX 0.10,
a batched ``getrf`` (``vmap`` over trials or replicates) splits its batch over XLA's intra-op
thread pool and *blocks the pool thread that runs it* until the pieces finish. When two such
solves are independent in one program, XLA runs them at once, each on one of the pool's
threads; on a 2-core machine both threads then wait for work that no thread is left to
run, and the program never returns (measured: ``experiments run calibrated_logloss --quick``
on 2 host devices hung in 3 of 3 runs, both ``tf_XLAEigen`` threads parked in
``jax::ParallelBatchMap`` under ``LuDecomposition``).

:func:`spd_solve` is a Cholesky factorisation and two triangular substitutions as ``d``
steps of element-wise products and sums (no matrix product, so no precision setting is
involved: every backend rounds the same float32 operations), batched by ``vmap`` like any
other array code, with no custom call and no thread pool of its own.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["spd_solve"]


def spd_solve(a: jax.Array, b: jax.Array) -> jax.Array:
    """:math:`x = A^{-1} b` for symmetric positive-definite ``a`` (d, d) and ``b`` (d,).

    Cholesky :math:`A = L L^\\top`, column by column,
    :math:`L_{ij} = (A_{ij} - \\sum_{k<j} L_{ik} L_{jk}) / L_{jj}` with
    :math:`L_{jj} = (A_{jj} - \\sum_{k<j} L_{jk}^2)^{1/2}`; then :math:`L y = b` forward and
    :math:`L^\\top x = y` backward. Only the lower triangle of ``a`` is read. A matrix that is
    not positive definite gives non-finite entries (the square root of a negative pivot),
    which callers test with ``jnp.isfinite``; nothing raises inside traced code.

    ``vmap``-able and ``jit``-able; leading batch axes are handled by ``vmap``.
    """
    a = jnp.asarray(a)
    b = jnp.asarray(b, a.dtype)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or b.shape != a.shape[:1]:
        raise ValueError(f"spd_solve: a must be (d, d) and b (d,), got a {a.shape} and b {b.shape}")
    d = a.shape[0]
    idx = jnp.arange(d)

    def factor(j, low):
        # columns >= j of ``low`` are still zero, so the full row products sum over k < j
        v = a[:, j] - jnp.sum(low * low[j][None, :], axis=1)
        col = jnp.where(idx >= j, v / jnp.sqrt(v[j]), 0.0)
        return low.at[:, j].set(col)

    low = jax.lax.fori_loop(0, d, factor, jnp.zeros_like(a))

    def forward(j, y):  # entries >= j of y are still zero
        return y.at[j].set((b[j] - jnp.sum(low[j] * y)) / low[j, j])

    y = jax.lax.fori_loop(0, d, forward, jnp.zeros_like(b))

    def backward(i, x):  # j = d-1-i; entries <= j of x are still zero
        j = d - 1 - i
        return x.at[j].set((y[j] - jnp.sum(low[:, j] * x)) / low[j, j])

    return jax.lax.fori_loop(0, d, backward, jnp.zeros_like(b))
