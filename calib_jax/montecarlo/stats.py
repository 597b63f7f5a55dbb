"""Rank statistics for the Monte Carlo metric studies.

* :func:`rankdata` — ranks with ties averaged (scipy's ``method="average"``), jit-able, along
  the leading axis.
* :func:`spearman_matrix` — the Spearman correlation matrix of the columns of a
  (trials, metrics) table: average-tie ranks, then Pearson on the ranks.
* :func:`spearman_with` — Spearman of every column with one reference column, with a
  Fisher-z standard error.
* :func:`metric_accuracy` — the pairwise estimator of a metric's accuracy for comparing two
  pipelines ("Calibration-then-Calculation", 2024, Definition 3, eq. 8).

Conventions.  A column that is constant across trials carries no ordering information; its
correlation with anything is reported as 0 (not NaN) and its diagonal entry as 1.  The
functions here work on small tables (trials x metrics), so they are written for clarity; all
are jit-able.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax._src import validation as V
from calib_jax._src.precision import MATMUL
from calib_jax._src.ranks import average_ranks

__all__ = [
    "rankdata",
    "pearson_matrix",
    "spearman_matrix",
    "spearman_with",
    "fisher_se",
    "metric_accuracy",
]


def _rank_1d(x: jax.Array) -> jax.Array:
    # the exact primitive: (first + last) / 2 + 1 of the tie run, no float segment sums
    return average_ranks(x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.result_type(float)))


def rankdata(x: Any) -> jax.Array:
    r"""Ranks 1..n of the entries of ``x`` along axis 0, ties replaced by their mean rank.

    For a tie run occupying sorted positions :math:`a..b`, every member gets
    :math:`(a + b) / 2`; this equals ``scipy.stats.rankdata(x, method="average", axis=0)``.

    Args:
      x: (n,) or (n, m) real array (integers are ranked as floats); the columns of a 2-D
        array are ranked independently. No input checks: a NaN is ranked as the largest value.
        Finite values given on the host (NumPy, lists) that float32 cannot tell apart (float64
        values closer than its spacing, integers above 2**24) are ranked by their own order
        (:func:`calib_jax._src.validation.order_in_float32`), not tied.

    Returns:
      A float array of the shape of ``x`` (float32 unless x64 is on and ``x`` is float64),
      with values in ``{1, 1.5, ..., n}``. Raises ``ValueError`` for ``x`` of any other rank.
      Jit- and vmap-able (the sort runs on the host on the CPU backend).

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.montecarlo import rankdata
      >>> rankdata(jnp.array([3.0, 1.0, 3.0, 2.0])).tolist()  # the two 3s share ranks 3 and 4
      [3.5, 1.0, 3.5, 2.0]
    """
    x = jnp.asarray(V.order_in_float32(x))
    if x.ndim == 1:
        return _rank_1d(x)
    if x.ndim != 2:
        raise ValueError(f"`x` must be 1-D or 2-D, got shape {x.shape}")
    return jax.vmap(_rank_1d, in_axes=1, out_axes=1)(x)


def pearson_matrix(x: Any) -> jax.Array:
    r"""Pearson correlation matrix of the columns of ``x`` (n, m).

    .. math:: R_{jk} = \frac{\sum_t (x_{tj}-\bar x_j)(x_{tk}-\bar x_k)}
              {\sqrt{\sum_t (x_{tj}-\bar x_j)^2 \sum_t (x_{tk}-\bar x_k)^2}}

    Constant columns get correlation 0 with every other column and 1 with themselves.

    Args:
      x: (n, m) real array, n >= 2 rows (trials) and m columns (metrics). A column holding a
        NaN or an infinity gets NaN in its row and column of the result (diagonal included).
        Finite values given on the host that float32 cannot tell apart (float64 values closer
        than its spacing) are centred and scaled per column in float64 first.

    Returns:
      An (m, m) float array, symmetric, entries in [-1, 1], ones on the diagonal. Raises
      ``ValueError`` when ``x`` is not 2-D or has fewer than 2 rows (a correlation of one
      trial is undefined). One compiled program; jit- and vmap-able.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.montecarlo import pearson_matrix
      >>> x = jnp.array([[1.0, 2.0, 5.0], [2.0, 4.0, 5.0], [3.0, 6.0, 5.0]])
      >>> pearson_matrix(x).round(4).tolist()  # column 1 = 2 x column 0; column 2 is constant
      [[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """
    x = jnp.asarray(V.scaled_in_float64(x), dtype=jnp.result_type(float))
    if x.ndim != 2:
        raise ValueError(f"`x` must be 2-D (trials, metrics), got shape {x.shape}")
    if x.shape[0] < 2:
        raise ValueError(f"`x` needs at least 2 trials (rows), got {x.shape[0]}")
    return _pearson_matrix(x)


@jax.jit
def _pearson_matrix(x: jax.Array) -> jax.Array:
    return _nan_for_nonfinite_columns(_pearson_core(x), x)


def _nan_for_nonfinite_columns(r: jax.Array, x: jax.Array) -> jax.Array:
    """NaN in the rows and columns of ``r`` whose column of ``x`` is not all finite: a
    correlation computed around a NaN would be a plausible number (0, or a rank of the NaN)."""
    bad = ~jnp.all(jnp.isfinite(x), axis=0)
    return jnp.where(bad[:, None] | bad[None, :], jnp.nan, r)


def _pearson_core(x: jax.Array) -> jax.Array:
    # one compiled program (op by op, the first call of a study's analysis compiled each
    # operation: 2.0 s for a 5000 x 26 Spearman matrix, 0.4 s compiled)
    xc = x - x.mean(axis=0, keepdims=True)
    ss = jnp.sum(xc * xc, axis=0)
    # a constant column (every value equal) has no correlation: its deviations from its rounded
    # mean are a few ulps, not 0, and two constant columns correlated to -0.99999964
    ok = (ss > 0) & (jnp.max(x, axis=0) > jnp.min(x, axis=0))
    z = xc / jnp.where(ok, jnp.sqrt(jnp.where(ok, ss, 1.0)), 1.0)[None, :]
    r = jnp.clip(jnp.matmul(z.T, z, precision=MATMUL), -1.0, 1.0)
    r = jnp.where(ok[:, None] & ok[None, :], r, 0.0)
    return r.at[jnp.diag_indices(x.shape[1])].set(1.0)


def spearman_matrix(x: Any) -> jax.Array:
    r"""Spearman rank-correlation matrix of the columns of ``x`` (trials, metrics).

    Each column is ranked with ties averaged (:func:`rankdata`) and the Pearson correlation
    of the ranks is taken ("Calibration is Grouping", VR-SAG; anonymous authors, under review;
    App. C.1, the Spearman formula):

    .. math:: \rho_s = \operatorname{corr}\big(\operatorname{rank}(x_{\cdot j}),
              \operatorname{rank}(x_{\cdot k})\big)

    Matches ``scipy.stats.spearmanr(x).statistic`` (constant columns: 0 instead of NaN).

    Args:
      x: (T, M) real array of M metrics over T >= 2 trials. A column holding a NaN or an
        infinity gets NaN in its row and column of the result (diagonal included). Host values
        float32 cannot tell apart are ranked by their own order, as :func:`rankdata` ranks them.

    Returns:
      An (M, M) float array, symmetric, entries in [-1, 1], ones on the diagonal. Raises
      ``ValueError`` when ``x`` is not 2-D or has fewer than 2 rows. Jit- and vmap-able
      (the shape checks run while tracing).

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.montecarlo import spearman_matrix
      >>> x = jnp.array([[1.0, 10.0, 4.0], [2.0, 20.0, 3.0], [3.0, 90.0, 2.0], [4.0, 95.0, 1.0]])
      >>> spearman_matrix(x).round(4).tolist()  # same order, then the reversed order
      [[1.0, 1.0, -1.0], [1.0, 1.0, -1.0], [-1.0, -1.0, 1.0]]
    """
    x = jnp.asarray(V.order_in_float32(x))
    if x.ndim != 2:
        raise ValueError(f"`x` must be 2-D (trials, metrics), got shape {x.shape}")
    if x.shape[0] < 2:
        raise ValueError(f"`x` needs at least 2 trials (rows), got {x.shape[0]}")
    return _spearman_matrix(x)


@jax.jit
def _spearman_matrix(x: jax.Array) -> jax.Array:
    return _nan_for_nonfinite_columns(_pearson_core(rankdata(x).astype(jnp.result_type(float))), x)


def spearman_with(x: Any, ref: Any) -> jax.Array:
    """Spearman correlation of every column of ``x`` (n, m) with the vector ``ref`` (n,).

    Row 0 (without its diagonal entry) of :func:`spearman_matrix` of ``[ref, x]``: a column
    constant over the trials gets 0.

    Args:
      x: (n, m) real array, e.g. m metrics over n >= 2 trials.
      ref: (n,) real reference column, e.g. the oracle Brier score of each trial. A NaN or
        infinity in ``ref`` makes every coefficient NaN; in a column of ``x``, that column's.
        Host values float32 cannot tell apart are ranked by their own order, as
        :func:`rankdata` ranks them.

    Returns:
      An (m,) float array of coefficients in [-1, 1]. Raises ``ValueError`` on mismatched
      shapes. Jit- and vmap-able.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.montecarlo import spearman_with
      >>> ref = jnp.array([0.1, 0.2, 0.3, 0.4])
      >>> x = jnp.array([[1.0, 4.0], [2.0, 3.0], [3.0, 1.0], [4.0, 2.0]])
      >>> [round(float(r), 4) for r in spearman_with(x, ref)]  # 1 - 6 (9+1+4+4) / (4 (16-1)) = -0.8
      [1.0, -0.8]
    """
    x = jnp.asarray(V.order_in_float32(x))
    ref = jnp.asarray(V.order_in_float32(ref))
    if ref.ndim != 1 or x.ndim != 2 or x.shape[0] != ref.shape[0]:
        raise ValueError(
            f"`x` must be (n, m) and `ref` (n,), got {tuple(x.shape)} and {tuple(ref.shape)}")
    return spearman_matrix(jnp.concatenate([ref[:, None], x], axis=1))[0, 1:]


def fisher_se(rho: Any, n: int) -> np.ndarray:
    r"""Approximate standard error of a Spearman coefficient from ``n`` trials.

    Delta method on the Fisher transform with the Fieller-Hartley-Pearson variance
    :math:`\operatorname{Var}(\operatorname{atanh}\hat\rho_s) \approx 1.06/(n-3)`:
    :math:`\operatorname{se}(\hat\rho_s) \approx (1-\rho^2)\sqrt{1.06/(n-3)}`.

    Args:
      rho: scalar or array of Spearman coefficients in [-1, 1] (NaN, an undefined coefficient,
        gives NaN); a value outside it raises ``ValueError`` naming ``rho``.
      n: number of trials behind each coefficient (int >= 1; ``n - 3`` is floored at 1).

    Returns:
      A float64 NumPy array of the shape of ``rho``. Runs on the host (NumPy); not jit-able.

    Example:
      >>> from calib_jax.montecarlo import fisher_se
      >>> fisher_se([0.0, 0.5], 109).round(4).tolist()  # sqrt(1.06 / 106) = 0.1, times 1 - rho^2
      [0.1, 0.075]
    """
    rho = np.asarray(rho, dtype=float)
    if np.any(np.abs(rho) > 1.0):
        raise ValueError(f"`rho` must hold coefficients in [-1, 1], got one of size {np.nanmax(np.abs(rho)):g}")
    n = V.check_positive_int(n, "n")
    return (1.0 - rho**2) * np.sqrt(1.06 / max(n - 3, 1))


def metric_accuracy(metric_a: Any, metric_b: Any, *, lower_is_better: bool = True) -> jax.Array:
    r"""Accuracy of a metric for ranking pipeline A above pipeline B.

    "Calibration-then-Calculation" (2024), Definition 3, eq. 8.

    Given metric values of ``N_A`` independent runs of pipeline A and ``N_B`` runs of B, where A
    is the better pipeline under the ground-truth metric, the unbiased estimator of
    :math:`P(M(f_A) < M(f_B))` over all run pairs is

    .. math:: \widehat{\mathrm{Acc}} = \frac{1}{N_A N_B}\sum_{i=1}^{N_A}\sum_{j=1}^{N_B}
              \mathbb 1\{M(f_A^i) < M(f_B^j)\}

    (ties count one half).  With ``lower_is_better=False`` the inequality is reversed (for
    AUC or correlations with the oracle).

    Args:
      metric_a: (N_A,) metric values of the runs of pipeline A, the better one (any shape;
        flattened; non-empty).
      metric_b: (N_B,) metric values of the runs of pipeline B (flattened; non-empty).
      lower_is_better: ``True`` for a loss (count :math:`M_A < M_B`), ``False`` for a score
        (count :math:`M_A > M_B`). Static under ``jit``.

    Returns:
      A float scalar array in [0, 1]. Raises ``ValueError`` for an empty input. Jit- and
      vmap-able (with ``lower_is_better`` static); no NaN check: a pair involving a NaN counts 0.
      Finite values of both pipelines given on the host that float32 cannot tell apart (float64
      values closer than its spacing) are compared by their own order, not counted as ties.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.montecarlo import metric_accuracy
      >>> a, b = jnp.array([1.0, 2.0]), jnp.array([2.0, 3.0])
      >>> round(float(metric_accuracy(a, b)), 4)  # pairs (1,2) (1,3) (2,3) win, (2,2) ties: 3.5 / 4
      0.875
    """
    host_a, host_b = (None if isinstance(m, jax.Array | jax.core.Tracer) else np.ravel(np.asarray(m))
                      for m in (metric_a, metric_b))
    if host_a is not None and host_b is not None and host_a.size and host_b.size:
        # host values float32 cannot tell apart are compared by their own order (one ranking of both)
        both = V.order_in_float32(np.concatenate([host_a, host_b]))
        metric_a, metric_b = both[:host_a.size], both[host_a.size:]
    a = jnp.asarray(metric_a, dtype=jnp.result_type(float)).ravel()
    b = jnp.asarray(metric_b, dtype=jnp.result_type(float)).ravel()
    if a.shape[0] == 0 or b.shape[0] == 0:
        raise ValueError("`metric_a` and `metric_b` must be non-empty")
    d = b[None, :] - a[:, None]
    if not lower_is_better:
        d = -d
    return jnp.mean(jnp.where(d > 0, 1.0, jnp.where(d == 0, 0.5, 0.0)))
