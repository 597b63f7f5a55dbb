r"""Bootstrap intervals for any statistic of a sample: rows (or blocks) resampled as weights.

A bootstrap resample of n rows is a vector of non-negative integer counts :math:`c_i`
(how often row i is drawn). A statistic whose weights are frequency counts (every
decomposition of the library and every metric but five) evaluated with ``weights = v * c``
equals the statistic of the explicitly duplicated rows, so a resample never materialises
the rows. Five metrics weight rows otherwise (effective counts, pairs of distinct rows, a
scale from :math:`\sum v^2`), so for them ``v * c`` is not the duplicated rows:
``debiased_ece_sq``, ``skce``, ``ici``, ``cumulative_calibration_error(normalize=True)`` and
``multicalibration_error``; bootstrap them with ``duplicate_rows=True`` (the drawn rows
gathered). The resamples run inside one compiled ``lax.map`` (batched ``vmap``), so
B = 1000 resamples of a metric cost B evaluations of the weighted metric and no Python loop.

Schemes (Efron & Tibshirani 1993, ch. 6; Chamandy et al. 2012 for the Poisson form):

* ``"multinomial"`` — the classical bootstrap: n row indices drawn uniformly with
  replacement, :math:`c \sim \mathrm{Multinomial}(n, \mathbf 1/n)`.
* ``"poisson"`` — :math:`c_i \sim \mathrm{Poisson}(1)` independently per row. Row i's count
  in resample b is a function of ``(key, b, i)`` alone (a counter-based draw), so a log
  streamed in chunks (``row_offset``) gets exactly the counts it would get in memory, and
  statistics merged across chunks or devices equal the in-memory resample. Asymptotically
  equivalent to the multinomial scheme.

Blocks (``blocks``, ``n_blocks``): the *cluster* bootstrap. Whole blocks (users, days, the
levels of any field) are drawn — multinomially over the ``n_blocks`` levels, or Poisson(1)
per level — and every row of a block gets its block's count. Use it when rows of one block
are dependent (several impressions of one user).

Intervals are percentile intervals of the replicates. A comparison of two methods on the
*same* rows is :func:`difference`: both results must come from the same key, scheme and
rows, so that replicate b of each is the same resample (a paired bootstrap).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax._src import validation as V
from calib_jax._src.host_stats import bias_corrected_interval, percentile_interval

__all__ = [
    "SCHEMES",
    "BootstrapResult",
    "Difference",
    "percentile_interval",
    "resample_counts",
    "COUNT_BATCH",
    "bootstrap",
    "difference",
    "rank_methods",
    "debiased_gap",
    "bias_corrected_interval",
]

SCHEMES = ("multinomial", "poisson")

#: Poisson(1) inverse CDF on [0, 20]: P(X > 20) < 1e-19, below float32 resolution of u.
_POISSON_CDF = np.cumsum([math.exp(-1.0) / math.factorial(k) for k in range(21)])[:-1]


class BootstrapResult(NamedTuple):
    """A statistic on the sample, with bootstrap replicates.

    Attributes:
      estimate: the statistic on the original sample (a dict ``name -> float`` or a float).
      lo, hi: percentile interval at ``level`` (same structure as ``estimate``).
      replicates: the statistic on every resample, ``name -> (B,)`` (or a (B,) array).
      level: the interval's coverage.
      fingerprint: ``(key data, n, scheme, n_boot, blocks?)``; two results with equal
        fingerprints were computed on the same resamples and can be paired.
    """

    estimate: Any
    lo: Any
    hi: Any
    replicates: Any
    level: float
    fingerprint: tuple


class Difference(NamedTuple):
    """``a - b`` on the sample, its percentile interval over paired resamples, and the
    share of resamples in which ``a < b`` (``a`` better for a loss; ties count half).

    Returned by :func:`difference`; plain Python floats.

    Attributes:
      diff: the statistic of ``a`` minus that of ``b`` on the original sample.
      lo: lower end of the percentile interval of the paired differences, at the results'
        ``level``.
      hi: upper end of that interval.
      share_a_lower: share of resamples in which ``a``'s statistic is below ``b``'s, in
        [0, 1] (ties count one half).
    """

    diff: float
    lo: float
    hi: float
    share_a_lower: float


def _poisson1(u: jax.Array) -> jax.Array:
    """Poisson(1) draws from uniforms by the inverse CDF (20 comparisons, elementwise)."""
    cdf = jnp.asarray(_POISSON_CDF, u.dtype)
    return jnp.sum(u[..., None] > cdf[None, :], axis=-1).astype(jnp.int32)


def _counter_uniform(key: jax.Array, index: jax.Array) -> jax.Array:
    """Uniforms that depend only on ``(key, index)``: one counter-based draw per index."""
    return jax.vmap(lambda i: jax.random.uniform(jax.random.fold_in(key, i)))(index)


def _unit_counts(key: jax.Array, b: jax.Array, n_units: int, scheme: str, offset: jax.Array
                 ) -> jax.Array:
    """Counts of ``n_units`` resampling units (rows or blocks) in resample ``b``."""
    kb = jax.random.fold_in(key, b)
    if scheme == "multinomial":
        idx = jax.random.randint(kb, (n_units,), 0, n_units)
        return jnp.zeros((n_units,), jnp.int32).at[idx].add(1)
    return _poisson1(_counter_uniform(kb, offset + jnp.arange(n_units, dtype=jnp.uint32)))


def _counts(key, b, n, scheme, blocks, n_blocks, row_offset):
    if blocks is None:
        return _unit_counts(key, b, n, scheme, row_offset)
    return _unit_counts(key, b, n_blocks, scheme, jnp.uint32(0))[blocks]


def _check_scheme_blocks(n: int, scheme: str, blocks: Any, n_blocks: int | None, row_offset: int):
    scheme = V.check_choice(scheme, "scheme", SCHEMES)
    if blocks is not None:
        if n_blocks is None:
            raise ValueError("`n_blocks` is required with `blocks` (the number of block levels)")
        n_blocks = V.check_positive_int(n_blocks, "n_blocks")
        blocks = V.check_hard_groups(blocks, n, n_blocks, name="blocks", count_name="n_blocks")
    if row_offset and scheme != "poisson":
        raise ValueError("`row_offset` (streamed chunks) needs scheme='poisson': multinomial "
                         "counts depend on the whole sample")
    return scheme, blocks, n_blocks


def resample_counts(key: jax.Array, n: int, n_boot: int, *, scheme: str = "multinomial",
                    blocks: Any = None, n_blocks: int | None = None, row_offset: int = 0,
                    dtype: Any = jnp.int32) -> jax.Array:
    """(n_boot, n) resample counts, exactly the ones :func:`bootstrap` uses.

    Row ``i`` of a chunk starting at global row ``row_offset`` gets, under
    ``scheme="poisson"``, the count that row ``row_offset + i`` of the whole log gets.

    Args:
      key: PRNG key of the resamples (the one passed to :func:`bootstrap`).
      n: number of rows, an int >= 1.
      n_boot: number of resamples B, an int >= 1.
      scheme: ``"multinomial"`` (each resample draws n rows with replacement: counts sum to
        n) or ``"poisson"`` (independent Poisson(1) counts per row).
      blocks: optional (n,) int block ids in ``[0, n_blocks)``: whole blocks are drawn and
        each row gets its block's count (cluster bootstrap).
      n_blocks: number of block levels, an int >= 1; required with ``blocks``.
      row_offset: global index of the first row, a non-negative int (streamed chunks; only
        with ``scheme="poisson"``).
      dtype: an integer dtype of the result. ``jnp.uint8`` takes a quarter of the memory
        (1000 resamples of 2.75M rows: 2.75 GB instead of 11): the counts are then drawn
        :data:`COUNT_BATCH` resamples at a time, and a count above 255 (it would take more
        than 255 draws of one row) raises ``ValueError`` rather than wrap.

    Returns:
      (n_boot, n) counts of ``dtype``, row b being resample b (pass them to :func:`bootstrap`'s
      ``counts`` to share one draw among several statistics of the same rows). Options are checked in Python and
      raise ``ValueError`` (an unknown scheme, ``blocks`` without ``n_blocks``, block ids out
      of range when concrete, ``row_offset`` with the multinomial scheme); the counts come
      from one jitted computation with ``n``, ``n_boot``, ``scheme`` and ``n_blocks`` static.
      Inside a user's ``jit`` these must be Python values; ``key`` may be traced.

    Example:
      >>> import jax
      >>> from calib_jax.bootstrap import resample_counts
      >>> c = resample_counts(jax.random.key(0), 5, 3)
      >>> c.shape, c.sum(axis=1).tolist()  # multinomial: every resample has 5 rows
      ((3, 5), [5, 5, 5])
    """
    n = V.check_positive_int(n, "n")
    n_boot = V.check_positive_int(n_boot, "n_boot")
    scheme, blocks, n_blocks = _check_scheme_blocks(n, scheme, blocks, n_blocks, row_offset)
    dtype = np.dtype(dtype)
    if not np.issubdtype(dtype, np.integer):
        raise ValueError(f"`dtype` must be an integer dtype, got {dtype}")
    b_idx = None if blocks is None else jnp.asarray(blocks, jnp.int32)
    draw = functools.partial(_counts_matrix, key, offset=jnp.uint32(row_offset), blocks=b_idx, n=n, scheme=scheme,
                             n_blocks=n_blocks)
    if dtype == np.int32:
        return draw(jnp.arange(n_boot))
    top = np.iinfo(dtype).max
    parts = []
    for b0 in range(0, n_boot, COUNT_BATCH):  # int32 counts of every resample at once would defeat the point
        c = draw(jnp.arange(b0, min(b0 + COUNT_BATCH, n_boot)))
        if int(jnp.max(c)) > top:
            raise ValueError(f"a resample count exceeds {top}, the largest {dtype}: use a wider `dtype`")
        parts.append(c.astype(dtype))
    return jnp.concatenate(parts)


#: resamples drawn together by :func:`resample_counts` with a narrow ``dtype``
COUNT_BATCH = 16


@functools.partial(jax.jit, static_argnames=("n", "scheme", "n_blocks"))
def _counts_matrix(key, bs, offset, blocks, *, n, scheme, n_blocks):
    return jax.vmap(lambda b: _counts(key, b, n, scheme, blocks, n_blocks, offset))(bs)


def _replicate(stat, args, base_w, c, order, length=None):
    """One replicate: ``stat`` with the base weights times resample counts ``c`` (drawn in the
    sample's row order, put in ``args``' order by ``order``); with ``length``, ``stat`` of the
    drawn rows themselves, each copy once, padded to ``length`` rows of weight 0 (NaN when the
    draw has more rows than that)."""
    c = c if order is None else c[order]
    if length is None:
        return stat(*args, weights=base_w * c.astype(base_w.dtype))
    idx = jnp.repeat(jnp.arange(c.shape[0]), c, total_repeat_length=length)
    live = jnp.arange(length) < jnp.sum(c)
    rows = jax.tree_util.tree_map(lambda a: a[idx], args)
    out = stat(*rows, weights=jnp.where(live, base_w[idx], 0.0))
    fits = jnp.sum(c) <= length
    return jax.tree_util.tree_map(lambda x: jnp.where(fits, x, jnp.nan), out)


@functools.partial(jax.jit, static_argnames=("stat", "n", "scheme", "n_blocks", "batch", "length"))
def _replicates(stat, args, base_w, blocks, key, offset, bs, order, *, n, scheme, n_blocks, batch, length=None):
    return jax.lax.map(lambda b: _replicate(stat, args, base_w, _counts(key, b, n, scheme, blocks, n_blocks, offset),
                                            order, length), bs, batch_size=batch)


@functools.partial(jax.jit, static_argnames=("stat", "batch", "length"))
def _replicates_given(stat, args, base_w, counts, order, *, batch, length=None):
    """:func:`_replicates` with the counts given: the same program, its draws replaced by the
    rows of ``counts`` (the same bits: tested)."""
    return jax.lax.map(lambda c: _replicate(stat, args, base_w, c, order, length), counts, batch_size=batch)


def _drawn_rows(n: int, scheme: str) -> int:
    """The rows a duplicated resample holds at most: n for the multinomial scheme (exactly n);
    for Poisson(1) counts n + 8 sqrt(n) + 16, which a draw passes with probability below 1e-14
    (its replicate is then NaN, never a number from a truncated resample)."""
    return n if scheme == "multinomial" else n + 8 * math.isqrt(n) + 16


@functools.partial(jax.jit, static_argnames=("stat",))
def _estimate(stat, args, base_w):
    return stat(*args, weights=base_w)


def _key_data(key: jax.Array) -> tuple[int, ...]:
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    return tuple(int(x) for x in np.asarray(key).ravel())


def bootstrap(stat: Callable[..., Any], *args: Any, key: jax.Array, n_boot: int = 1000,
              scheme: str = "multinomial", weights: Any = None, blocks: Any = None,
              n_blocks: int | None = None, level: float = 0.95, batch: int = 16,
              row_offset: int = 0, row_order: Any = None, counts: Any = None,
              duplicate_rows: bool = False) -> BootstrapResult:
    r"""Percentile bootstrap of ``stat(*args, weights=w)`` over rows (or blocks).

    .. math:: \hat\theta^{*b} = \mathrm{stat}\big(x;\, v\odot c^{b}\big),\qquad
              [\hat\theta^{*}_{(\alpha/2)},\ \hat\theta^{*}_{(1-\alpha/2)}]

    with :math:`c^b` the resample counts of the chosen ``scheme`` (module docstring) and
    :math:`v` the user's ``weights`` (default 1).

    Args:
      stat: a function of the row arrays ``*args`` and a keyword ``weights`` (n,) returning
        a scalar or a dict of scalars (e.g. several metrics at once). Pass the same function
        object across calls (a module-level function, not a fresh lambda) so its compiled
        replicate loop is reused.
      *args: arrays whose leading axis is the n rows (or any pytree ``stat`` takes).
      key: PRNG key of the resamples; equal keys give equal (pairable) resamples.
      n_boot: number of resamples B.
      scheme: ``"multinomial"`` or ``"poisson"``.
      weights: optional (n,) non-negative base weights.
      blocks, n_blocks: optional (n,) int block ids in ``[0, n_blocks)`` (cluster bootstrap).
      level: interval coverage.
      batch: resamples evaluated together (bounds memory: ``batch * n`` floats).
      row_offset: global index of the first row (streamed chunks; ``scheme="poisson"``).
      row_order: optional (n,) permutation: row ``i`` of ``*args`` is row ``row_order[i]``
        of the sample the counts are drawn for (``blocks`` and ``weights`` are given in
        ``*args`` order). Statistics computed on differently sorted copies of the same rows
        (e.g. each method's scores sorted once for a presorted AUC) then use the same
        resamples and can be paired.
      counts: optional (n_boot, n) integer counts from :func:`resample_counts` with the same
        ``key``, ``n_boot``, ``scheme``, ``blocks`` and ``row_offset`` (in the sample's row
        order, as drawn), used instead of drawing them again: several statistics of the same
        rows then share one draw, which is most of the cost of a cheap statistic (at 2.75M
        rows the draw is 47 ms of integers and a 26 ms scatter per resample). The replicates
        are the same bits as without them.
      duplicate_rows: evaluate each replicate on the drawn rows themselves (gathered, each copy
        once with its base weight), not on the sample with weights ``v * c``. Needed for a
        statistic whose weights are not frequency counts, where ``v * c`` is not the duplicated
        rows: :func:`~calib_jax.metrics.debiased_ece_sq` (effective bin counts),
        :func:`~calib_jax.metrics.skce` (pairs weighted :math:`v_i v_j`, no pair of a row with
        itself, so two copies of a row are never paired), :func:`~calib_jax.metrics.ici` (its
        bandwidth from the effective size), ``cumulative_calibration_error(normalize=True)``
        and :func:`~calib_jax.metrics.multicalibration_error` (their scale sums
        :math:`v^2 p(1 - p)`). Without blocks only; a replicate costs a gather of every row
        array.

    Returns:
      :class:`BootstrapResult` (floats / NumPy arrays, float64). The function runs on the
      host (checks, NumPy quantiles) and is not jit-able itself; ``stat`` is traced and
      compiled once per (``stat``, n, ``scheme``, ``n_blocks``, ``batch``) and the B
      resamples run in one jitted ``lax.map``. Bad options, a ``row_order`` that is not a
      permutation, rows of unequal length or invalid ``weights`` raise ``ValueError``.

    Example:
      >>> import jax, jax.numpy as jnp, numpy as np
      >>> from calib_jax.bootstrap import bootstrap
      >>> def click_rate(y, *, weights):  # any statistic of weighted rows
      ...     return jnp.sum(weights * y) / jnp.sum(weights)
      >>> y = (np.arange(100) % 4 == 0).astype(float)  # 25 clicks in 100 rows
      >>> r = bootstrap(click_rate, y, key=jax.random.key(0), n_boot=200)
      >>> r.estimate, r.replicates.shape, bool(r.lo < 0.25 < r.hi)
      (0.25, (200,), True)
    """
    n_boot = V.check_positive_int(n_boot, "n_boot")
    if n_boot < 2:
        raise ValueError(f"`n_boot` must be >= 2, got {n_boot}")
    batch = V.check_positive_int(batch, "batch")
    leaves = jax.tree_util.tree_leaves(args)
    if not leaves:
        raise ValueError("`bootstrap` needs at least one row array in `*args`")
    n = int(np.shape(leaves[0])[0])
    for i, a in enumerate(leaves):
        if np.ndim(a) == 0 or int(np.shape(a)[0]) != n:
            raise ValueError(f"argument {i} of `*args` has shape {np.shape(a)}, expected {n} rows")
    scheme, blocks, n_blocks = _check_scheme_blocks(n, scheme, blocks, n_blocks, row_offset)
    if not isinstance(duplicate_rows, bool):
        raise ValueError(f"`duplicate_rows` must be True or False, got {duplicate_rows!r}")
    if duplicate_rows and blocks is not None:
        raise ValueError("`duplicate_rows` draws rows, not blocks: give no `blocks` with it")
    length = _drawn_rows(n, scheme) if duplicate_rows else None
    w = V.check_weights(weights, n)
    dtype = jnp.result_type(float)
    base_w = jnp.ones((n,), dtype) if w is None else jnp.asarray(w, dtype)
    b_idx = None if blocks is None else jnp.asarray(blocks, jnp.int32)
    args = jax.tree_util.tree_map(jnp.asarray, args)
    est = _estimate(stat, args, base_w)
    order = None
    if row_order is not None:
        order_np = np.asarray(row_order)
        if order_np.shape != (n,) or not np.array_equal(np.sort(order_np), np.arange(n)):
            raise ValueError(f"`row_order` must be a permutation of range({n})")
        if b_idx is not None:  # block counts are looked up per row: undo the permutation
            inv = np.empty(n, np.int64)
            inv[order_np] = np.arange(n)
            b_idx = b_idx[jnp.asarray(inv)]
        order = jnp.asarray(order_np, jnp.int32)
    if counts is None:
        reps = _replicates(stat, args, base_w, b_idx, key, jnp.uint32(row_offset),
                           jnp.arange(n_boot), order, n=n, scheme=scheme, n_blocks=n_blocks, batch=batch,
                           length=length)
    else:
        counts_dtype = getattr(counts, "dtype", None)  # a plain list has none: refused, not converted
        integer = counts_dtype is not None and jnp.issubdtype(counts_dtype, jnp.integer)
        if tuple(np.shape(counts)) != (n_boot, n) or not integer:
            raise ValueError(f"`counts` must be ({n_boot}, {n}) integer resample counts, got "
                             f"{np.shape(counts)} {getattr(counts, 'dtype', type(counts))}")
        reps = _replicates_given(stat, args, base_w, jnp.asarray(counts), order, batch=batch, length=length)
    est = jax.tree_util.tree_map(lambda x: float(np.asarray(x, np.float64)), est)
    reps = jax.tree_util.tree_map(lambda x: np.asarray(x, np.float64), reps)
    lo = jax.tree_util.tree_map(lambda r: float(percentile_interval(r, level)[0]), reps)
    hi = jax.tree_util.tree_map(lambda r: float(percentile_interval(r, level)[1]), reps)
    fp = (_key_data(key), n, scheme, n_boot, None if blocks is None else n_blocks, int(row_offset))
    return BootstrapResult(estimate=est, lo=lo, hi=hi, replicates=reps, level=float(level),
                           fingerprint=fp)


def _pick(x: Any, name: str | None) -> Any:
    if name is None:
        return x
    if not isinstance(x, Mapping) or name not in x:
        raise ValueError(f"statistic {name!r} is not in the bootstrap result")
    return x[name]


def difference(a: BootstrapResult, b: BootstrapResult, name: str | None = None) -> Difference:
    r"""Paired bootstrap of ``a - b`` (statistic ``name`` of a dict result).

    .. math:: \hat\theta_a - \hat\theta_b,\quad
              [q_{\alpha/2},\, q_{1-\alpha/2}]\big(\hat\theta_a^{*b} - \hat\theta_b^{*b}\big)

    Both results must come from :func:`bootstrap` with the same key, rows, scheme and
    ``n_boot`` (their ``fingerprint`` is compared), so resample b is the same rows in both.

    Args:
      a: a :class:`BootstrapResult`.
      b: a :class:`BootstrapResult` with the same ``fingerprint`` as ``a``.
      name: the statistic to compare when ``stat`` returned a dict; ``None`` for a scalar
        statistic.

    Returns:
      :class:`Difference` of Python floats; the interval is at ``a.level``. Runs on the host
      (NumPy); not jit-able. Unequal fingerprints, or a ``name`` missing from the results,
      raise ``ValueError``.

    Example:
      >>> import numpy as np
      >>> from calib_jax.bootstrap import BootstrapResult, difference
      >>> fp = ("same resamples",)  # set by bootstrap(); here two hand-made results
      >>> a = BootstrapResult(0.10, 0.09, 0.12, np.array([0.09, 0.10, 0.11, 0.12]), 0.5, fp)
      >>> b = BootstrapResult(0.12, 0.10, 0.13, np.array([0.10, 0.13, 0.12, 0.13]), 0.5, fp)
      >>> d = difference(a, b)  # paired differences -0.01, -0.03, -0.01, -0.01
      >>> round(d.diff, 4), round(d.lo, 4), round(d.hi, 4), d.share_a_lower
      (-0.02, -0.015, -0.01, 1.0)
    """
    if a.fingerprint != b.fingerprint:
        raise ValueError("`a` and `b` were not computed on the same resamples (different key, "
                         "rows, scheme or n_boot): they cannot be paired")
    ra, rb = np.asarray(_pick(a.replicates, name)), np.asarray(_pick(b.replicates, name))
    d = ra - rb
    lo, hi = percentile_interval(d, a.level)
    share = float(np.mean(np.where(d < 0, 1.0, np.where(d == 0, 0.5, 0.0))))
    return Difference(diff=float(_pick(a.estimate, name) - _pick(b.estimate, name)),
                      lo=float(lo), hi=float(hi), share_a_lower=share)


def rank_methods(results: Mapping[str, BootstrapResult], name: str | None = None, *,
                 better: str = "lower") -> dict[str, dict[str, Any]]:
    """Best method and significance marks from paired bootstrap differences.

    ``better``: ``"lower"`` (a loss), ``"higher"`` (e.g. AUC) or ``"abs"`` (closest to 0,
    e.g. a signed bias; the comparison uses ``|statistic|`` on every resample).

    Returns ``method -> {"estimate", "lo", "hi", "diff_vs_best", "diff_lo", "diff_hi",
    "share_better_than_best", "mark"}`` where ``mark`` is ``"best"`` for the method with the
    best estimate, ``"significantly best"`` when in addition every paired interval of
    (other − best) excludes 0 on the side of the best, ``"tie"`` for a method whose paired
    interval against the best contains 0, and ``""`` otherwise.

    Args:
      results: ``method -> BootstrapResult``, all with the same ``fingerprint`` (same key,
        rows, scheme and ``n_boot``), non-empty.
      name: the statistic to rank when ``stat`` returned a dict; ``None`` for a scalar.
      better: ``"lower"``, ``"higher"`` or ``"abs"`` (above).

    Returns:
      A dict ``method -> dict`` of Python floats and the ``mark`` string, as above; the
      differences are oriented so that a positive ``diff_vs_best`` means worse than the best.
      Runs on the host (NumPy); not jit-able. An unknown ``better``, empty ``results`` or
      unequal fingerprints raise ``ValueError``.

    Example:
      >>> import numpy as np
      >>> from calib_jax.bootstrap import BootstrapResult, rank_methods
      >>> fp = ("same resamples",)  # set by bootstrap(); here two hand-made results
      >>> a = BootstrapResult(0.10, 0.09, 0.12, np.array([0.09, 0.10, 0.11, 0.12]), 0.5, fp)
      >>> b = BootstrapResult(0.12, 0.10, 0.13, np.array([0.10, 0.13, 0.12, 0.13]), 0.5, fp)
      >>> r = rank_methods({"a": a, "b": b})  # b - a > 0 on every resample
      >>> r["a"]["mark"], r["b"]["mark"], round(r["b"]["diff_vs_best"], 4)
      ('significantly best', '', 0.02)
    """
    better = V.check_choice(better, "better", ("lower", "higher", "abs"))
    if not results:
        raise ValueError("`results` is empty")
    sign = -1.0 if better == "higher" else 1.0

    def loss(r: BootstrapResult) -> tuple[float, np.ndarray]:
        e, reps = float(_pick(r.estimate, name)), np.asarray(_pick(r.replicates, name), np.float64)
        if better == "abs":
            return abs(e), np.abs(reps)
        return sign * e, sign * reps

    losses = {m: loss(r) for m, r in results.items()}
    fps = {r.fingerprint for r in results.values()}
    if len(fps) != 1:
        raise ValueError("`results` were not computed on the same resamples: they cannot be paired")
    level = next(iter(results.values())).level
    best = min(losses, key=lambda m: losses[m][0])
    out: dict[str, dict[str, Any]] = {}
    all_beaten = True
    for m, r in results.items():
        d = losses[m][1] - losses[best][1]  # > 0: m worse than the best
        lo, hi = percentile_interval(d, level)
        share = float(np.mean(np.where(d < 0, 1.0, np.where(d == 0, 0.5, 0.0))))
        out[m] = {"estimate": float(_pick(r.estimate, name)), "lo": float(_pick(r.lo, name)),
                  "hi": float(_pick(r.hi, name)), "diff_vs_best": losses[m][0] - losses[best][0],
                  "diff_lo": float(lo), "diff_hi": float(hi), "share_better_than_best": share,
                  "mark": ""}
        if m != best:
            if lo <= 0.0:
                out[m]["mark"] = "tie"
                all_beaten = False
    out[best]["mark"] = "significantly best" if all_beaten and len(results) > 1 else "best"
    return out


# ----------------------------------------------------------- biased plug-in estimators
def debiased_gap(weight: Any, sum_p: Any, sum_y: Any, norm: str = "l1") -> jax.Array:
    r"""A gap-norm calibration error (ECE, ECE⁺, LCCE, Field-ECE, GCE) with its plug-in bias
    removed, from group sums along the last axis.

    With group masses :math:`m_k = n_k / \sum_j n_j`, gaps :math:`\hat g_k = (S^p_k - S^y_k)/n_k`
    and the unbiased variance of a group's click rate
    :math:`\hat s_k^2 = \bar y_k(1-\bar y_k)/(n_k - 1)` (0 for :math:`n_k \le 1`):

    .. math::

        \ell_2:\ \sum_k m_k\,(\hat g_k^2 - \hat s_k^2),\qquad
        \ell_1:\ \sum_k m_k\,\big(2|\hat g_k| - \mathbb E|N(\hat g_k, \hat s_k^2)|\big),

    with :math:`\mathbb E|N(\mu,s^2)| = s\sqrt{2/\pi}\,e^{-\mu^2/2s^2} + \mu(1 - 2\Phi(-\mu/s))`.
    The plug-in :math:`\sum_k m_k|\hat g_k|^q` over-states the error, by
    :math:`\sum_k m_k s_k^2` in the squared norm (the debiased estimator of Kumar, Liang & Ma
    2019, "Verified Uncertainty Calibration", NeurIPS) and, in the ℓ1 norm, by the
    amount :math:`\mathbb E|\hat g| - |g|` that the ℓ1 term corrects to first order (the
    bootstrap bias correction of Efron & Tibshirani 1993, "An Introduction to the Bootstrap",
    ch. 10, with the group's normal law in place of resamples). The result can be negative
    when every gap is within its noise; report ``max(·, 0)``. The ℓ1 correction is first
    order: where the gaps are smaller than their noise part of the bias remains (measured on
    groups of 60 rows with gaps up to 0.05: 57% of the plug-in's bias removed; tests/test_practitioner.py).

    Args:
      weight, sum_p, sum_y: (..., K) group weights (frequency weights: row counts when
        unweighted), sums of scores and of labels.
      norm: ``"l1"`` or ``"l2"``.

    Returns:
      (...,) the debiased error (jit- and vmap-able).

    Example:
      >>> import numpy as np
      >>> from calib_jax.bootstrap import debiased_gap
      >>> w = np.array([100., 100.]); sp = np.array([20., 50.]); sy = np.array([20., 40.])
      >>> round(float(debiased_gap(w, sp, sy, "l2")), 5)  # plug-in 0.005
      0.00298
    """
    norm = V.check_choice(norm, "norm", ("l1", "l2"))
    w = jnp.asarray(weight, jnp.result_type(float))
    sp, sy = jnp.asarray(sum_p, w.dtype), jnp.asarray(sum_y, w.dtype)
    safe = jnp.where(w > 0, w, 1.0)
    m = w / jnp.maximum(jnp.sum(w, axis=-1, keepdims=True), 1e-30)
    g = jnp.where(w > 0, (sp - sy) / safe, 0.0)
    ybar = jnp.where(w > 0, sy / safe, 0.0)
    s2 = jnp.where(w > 1, ybar * (1.0 - ybar) / jnp.where(w > 1, w - 1.0, 1.0), 0.0)
    if norm == "l2":
        return jnp.sum(m * (g * g - s2), axis=-1)
    s = jnp.sqrt(s2)
    safe_s = jnp.where(s > 0, s, 1.0)
    folded = jnp.where(s > 0, s * np.sqrt(2.0 / np.pi) * jnp.exp(-0.5 * (g / safe_s) ** 2)
                       + g * (1.0 - 2.0 * jax.scipy.stats.norm.cdf(-g / safe_s)), jnp.abs(g))
    return jnp.sum(m * (2.0 * jnp.abs(g) - folded), axis=-1)
