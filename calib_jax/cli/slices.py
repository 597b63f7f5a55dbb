r"""``calib-jax evaluate --by COL``: the production panel per slice of a log, and which slices moved.

Logs are partitioned by day or hour, and "when did calibration drift?" is read off a panel per
slice: normalized entropy (He et al., *Practical Lessons from Predicting Clicks on Ads at
Facebook*, 2014, §2.1), the calibration ratio :math:`\sum v p / \sum v y`, ECE over equal-width
bins, the Brier score and AUC, each with its interval, plotted over the slices with bands, and a
change flag on each slice that differs from a baseline slice.

One query. The engine groups the rows by (slice, fine logit bin h, probability bin r, label y)
and returns the sums of the command's main cells (:mod:`calib_jax.cli.accumulate`) per slice;
``--every day|hour|week|month`` buckets a time column (``date_trunc``), otherwise each distinct
value of the column is a slice. Each slice's cells are resampled by the cell bootstrap with its
own seed (``SeedSequence([seed, k])`` for the k-th slice in sorted order), so slices, disjoint
sets of rows, get independent replicates.

Change flag. For slice s and the baseline slice 0 (the first slice, or ``--baseline VALUE``),
the difference :math:`\theta_s - \theta_0` of a metric has the bootstrap replicates
:math:`\theta_s^{*b} - \theta_0^{*b}` (independent samples, independent resamples), whose
standard deviation is its standard error. A slice is flagged on a metric when
:math:`|\theta_s - \theta_0|` exceeds :math:`\Phi^{-1}(1 - \alpha / (2(S - 1)))` standard errors
(Bonferroni over the S - 1 compared slices), so on a log whose slices do not differ the chance
that any slice is flagged on that metric is at most about :math:`\alpha` (``--alpha``, default
0.05). The rate is measured by simulation in ``tests/test_cli_slices.py``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from calib_jax.cli.accumulate import CELL_COLS, Accumulator, Settings, seed_word
from calib_jax.cli.options import EvaluateOptions

__all__ = ["EVERY", "DRIFT_METRICS", "SliceCells", "slice_cells_sql", "slice_cells_from_result",
           "slice_cells_from_rows", "slice_metrics", "drift_flags"]

#: time buckets of ``--every`` (``date_trunc`` units)
EVERY = ("hour", "day", "week", "month")
#: the per-slice metrics with intervals, and whether a change is flagged on each
DRIFT_METRICS = ("ne", "calibration_ratio", "ece", "brier", "auc", "ctr")
FLAGGED = ("ne", "calibration_ratio", "ece")
MISSING_SLICE = "__missing__"
_P_CLIP = 1e-12
_BITS = {1: "label: missing, NaN or not in {0, 1}", 2: "score: missing, NaN or outside [0, 1]",
         4: "weight: missing, NaN, negative or not finite", 8: "by: not a date or time"}
#: slices a report holds at most (each keeps its cells until its panel is computed)
MAX_SLICES = 2000


@dataclasses.dataclass(frozen=True)
class SliceCells:
    """A log's main cells per slice.

    Attributes:
      slices: (S,) slice labels, sorted (ISO times sort in time order).
      cells: per slice, ``(index, sums, n)``: the main cell index ``(h * M + r) * 2 + y`` of
        each non-empty cell, its sums (C, 7) as the accumulator's main cells, and its rows.
      rows_read, rows_used: rows of the log, and the valid ones.
      dropped: invalid rows by problem.
    """

    slices: tuple[str, ...]
    cells: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]
    rows_read: int
    rows_used: int
    dropped: Mapping[str, int] = dataclasses.field(default_factory=dict)


#: DuckDB's types of a time without a zone (read as they are: a cast through TIMESTAMPTZ would
#: cost the calendar arithmetic of the session's zone on every row)
_NAIVE_TIMES = ("TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS", "DATE")


def _slice_expr(by: str, every: str | None, dialect: str) -> tuple[str, str, str, str]:
    """(the extra source column, the slice key of a row, the key's label, the 'not a time' mask)
    as SQL.

    The rows are grouped by the key (a value of ``by``, or its time bucket as a timestamp) and
    only the groups' keys are formatted as labels, once per group rather than once per row. A
    time is bucketed from the column as it is: a time or date column costs no text round trip,
    text is parsed (DuckDB: through TIMESTAMPTZ, so that an offset in the text is honoured,
    read back as the UTC instant by its epoch; a zone-aware column likewise; a naive time as
    written). An empty text value is a missing time."""
    from calib_jax.cli.sql import DIALECTS

    d = DIALECTS[dialect]
    col = d.quote(by)
    if every is None:
        return f"CAST({col} AS {d.string}) AS sl_in", "sl_in", f"COALESCE(sl, '{MISSING_SLICE}')", "0"
    if dialect == "bigquery":
        src = f"SAFE_CAST({col} AS TIMESTAMP) AS ts_in, {col} AS by_in"
        key = f"TIMESTAMP_TRUNC(ts_in, {every.upper()})"
        label = "FORMAT_TIMESTAMP('%Y-%m-%d %H:%M:%S', sl)"
    elif dialect == "spark":
        src = f"TRY_CAST({col} AS TIMESTAMP) AS ts_in, {col} AS by_in"
        key = f"date_trunc('{every}', ts_in)"
        label = "date_format(sl, 'yyyy-MM-dd HH:mm:ss')"
    else:  # typeof() is the column's type, the same on every row: one branch runs
        naive = ", ".join(f"'{t}'" for t in _NAIVE_TIMES)
        src = (f"CASE WHEN typeof({col}) IN ({naive}) THEN TRY_CAST({col} AS TIMESTAMP) "
               f"ELSE make_timestamp(epoch_us(TRY_CAST({col} AS TIMESTAMPTZ))) END AS ts_in, {col} AS by_in")
        key = f"date_trunc('{every}', ts_in)"
        label = "strftime(sl, '%Y-%m-%d %H:%M:%S')"
    # CASE evaluates its branches only on the rows that reach them: the text cast runs on the
    # rows whose value did not parse as a time, not on every row
    bad = (f"CASE WHEN ts_in IS NOT NULL OR by_in IS NULL THEN 0 WHEN CAST(by_in AS {d.string}) = '' THEN 0 "
           "ELSE 8 END")
    return src, key, f"COALESCE({label}, '{MISSING_SLICE}')", bad


def slice_cells_sql(settings: Settings, *, label: str, score: str, weight: str | None, by: str,
                    every: str | None, source: str, dialect: str = "duckdb") -> str:
    r"""One ``GROUP BY`` query of every slice's main cells (module docstring).

    Rows are checked as ``evaluate`` checks them; ``bad`` marks invalid rows (1 the label, 2 the
    score, 4 the weight, 8 a ``--by`` value that is not a time when ``every`` is given). The
    per-row arithmetic is that of :func:`calib_jax.cli.sql.statistics_sql`.

    Args:
      settings: the fine logit grid and probability bins.
      label, score, weight: the columns (``score`` holds probabilities).
      by: the slice column (read as text).
      every: a :data:`EVERY` unit to bucket ``by`` as a time, or ``None`` for its values.
      source: the ``FROM`` item.
      dialect: ``"duckdb"``, ``"spark"`` or ``"bigquery"``.

    Returns:
      The query text; its result has the columns ``sl, bad, hb, rb, y, n`` and the sums
      ``sv, svp, svpp, svo, sbrier, snll, smae``.

    Example:
      >>> q = slice_cells_sql(Settings(), label="click", score="pctr", weight=None, by="ts", every="day",
      ...                     source="events")
      >>> "date_trunc('day'" in q and q.count("GROUP BY") == 1
      True
    """
    from calib_jax.cli.sql import DIALECTS
    from calib_jax.cli.sql import float_literal as _lit

    if dialect not in DIALECTS:
        raise ValueError(f"dialect must be one of {sorted(DIALECTS)}, got {dialect!r}")
    if every is not None and every not in EVERY:
        raise ValueError(f"--every must be one of {', '.join(EVERY)}, got {every!r}")
    d = DIALECTS[dialect]
    q = d.quote
    H, M, L = settings.hist_bins, settings.n_bins, float(settings.logit_range)
    lo, hi = _lit(_P_CLIP), _lit(1.0 - _P_CLIP)
    Ls, L2 = _lit(L), _lit(2 * L)
    missing = lambda x: f"({x} IS NULL OR {d.isnan.format(x=x)})"  # noqa: E731
    by_src, key, label_of_key, not_time = _slice_expr(by, every, dialect)
    src = [f"CAST({q(label)} AS {d.double}) AS y_in", f"CAST({q(score)} AS {d.double}) AS x_in", by_src]
    if weight is not None:
        src.append(f"CAST({q(weight)} AS {d.double}) AS w_in")
    masks = [f"CASE WHEN {missing('y_in')} OR (y_in <> 0 AND y_in <> 1) THEN 1 ELSE 0 END",
             f"CASE WHEN {missing('x_in')} OR x_in < 0 OR x_in > 1 THEN 2 ELSE 0 END",
             not_time]
    if weight is not None:
        masks.append(f"CASE WHEN {missing('w_in')} OR w_in < 0 OR {d.isinf.format(x='w_in')} THEN 4 ELSE 0 END")
    w = "CASE WHEN bad = 0 THEN w_in ELSE 0.0 END" if weight is not None else "CASE WHEN bad = 0 THEN 1.0 ELSE 0.0 END"
    return (f"-- calib-jax evaluate --by: main cells per slice ({d.name})\n"
            f"WITH src AS (SELECT {', '.join(src)} FROM {source}),\n"
            f"chk AS (SELECT *, {' + '.join(f'({m})' for m in masks)} AS bad FROM src),\n"
            f"clean AS (SELECT bad, {key} AS sl, CASE WHEN bad = 0 THEN y_in ELSE 0.0 END AS y, {w} AS w, "
            "CASE WHEN bad = 0 THEN x_in ELSE 0.5 END AS p FROM chk),\n"
            f"logs AS (SELECT *, ln(pc) AS lp, ln(1.0 - pc) AS l1p FROM (SELECT *, GREATEST(LEAST(p, {hi}), {lo}) "
            "AS pc FROM clean) t0),\n"
            f"rowv AS (SELECT *, GREATEST(LEAST(lp - l1p, {Ls}), -{Ls}) AS oc, "
            "CASE WHEN y = 1 THEN -lp ELSE -l1p END AS nll FROM logs),\n"
            f"cells AS (SELECT *, CAST(GREATEST(LEAST(floor(p * {M}), {M - 1}), 0) AS {d.bigint}) AS rb, "
            f"CAST(GREATEST(LEAST(floor((oc + {Ls}) / {L2} * {H}), {H - 1}), 0) AS {d.bigint}) AS hb, "
            f"CAST(y AS {d.bigint}) AS yi FROM rowv)\n"
            f"SELECT {label_of_key} AS sl, bad, hb, rb, y, n, {', '.join(_SUMS)} FROM (\n"
            "SELECT sl, bad, hb, rb, yi AS y, count(*) AS n, sum(w) AS sv, sum(w * p) AS svp, "
            "sum(w * (p * p)) AS svpp, sum(w * oc) AS svo, sum(w * ((y - p) * (y - p))) AS sbrier, "
            "sum(w * nll) AS snll, sum(w * abs(y - p)) AS smae FROM cells GROUP BY sl, bad, hb, rb, yi) g")


_SUMS = ("sv", "svp", "svpp", "svo", "sbrier", "snll", "smae")


def slice_cells_from_result(rows: Mapping[str, Any], settings: Settings, *, source: str,
                            drop_invalid: bool = False) -> SliceCells:
    """The :class:`SliceCells` of a :func:`slice_cells_sql` result (columns as sequences).

    Args:
      rows: column name -> sequence.
      settings: the bins the query was written for.
      source: the log's name, for messages.
      drop_invalid: drop invalid rows (counted in ``dropped``) instead of refusing the log.

    Returns:
      :class:`SliceCells` with the slices sorted.

    Example:
      >>> r = {"sl": ["b", "a"], "bad": [0, 0], "hb": [10, 20], "rb": [0, 1], "y": [0, 1], "n": [3, 1],
      ...      **{s: [1.0, 1.0] for s in _SUMS}}
      >>> slice_cells_from_result(r, Settings(), source="log").slices
      ('a', 'b')
    """
    bad = np.asarray(rows["bad"], np.int64)
    n = np.asarray(rows["n"], np.float64)
    problems = {what: int(n[(bad & bit) > 0].sum()) for bit, what in _BITS.items() if n[(bad & bit) > 0].sum()}
    if problems and not drop_invalid:
        listed = "; ".join(f"{k} rows with {w}" for w, k in problems.items())
        raise ValueError(f"{source}: {listed} — fix the log or pass --drop-invalid to drop them")
    ok = bad == 0
    if not ok.any():
        raise ValueError(f"{source}: no valid rows (read {int(n.sum())})")
    sl = np.asarray([str(s) for s in np.asarray(rows["sl"], dtype=object)[ok]])
    M = settings.n_bins
    index = (np.asarray(rows["hb"], np.int64)[ok] * M + np.asarray(rows["rb"], np.int64)[ok]) * 2 \
        + np.asarray(rows["y"], np.int64)[ok]
    sums = np.stack([np.asarray(rows[s], np.float64)[ok] for s in _SUMS], axis=1)
    return _group(sl, index, sums, n[ok], rows_read=int(n.sum()), dropped=problems, source=source)


def _group(sl: np.ndarray, index: np.ndarray, sums: np.ndarray, n: np.ndarray, *, rows_read: int,
           dropped: Mapping[str, int], source: str) -> SliceCells:
    names, code = np.unique(sl, return_inverse=True)
    if len(names) > MAX_SLICES:
        raise ValueError(f"{source}: --by gives {len(names)} slices, more than {MAX_SLICES} (bucket a time column "
                         "with --every, or slice by a column with fewer values)")
    cells = []
    for k in range(len(names)):
        m = code == k
        idx, inv = np.unique(index[m], return_inverse=True)
        s = np.stack([np.bincount(inv, weights=sums[m, j], minlength=len(idx)) for j in range(CELL_COLS)], axis=1)
        cells.append((idx, s, np.bincount(inv, weights=n[m], minlength=len(idx))))
    return SliceCells(slices=tuple(str(x) for x in names), cells=tuple(cells), rows_read=rows_read,
                      rows_used=int(n.sum()), dropped=dict(dropped))


def slice_cells_from_rows(p: Any, y: Any, v: Any, slices: Any, settings: Settings, *, rows_read: int | None = None,
                          dropped: Mapping[str, int] | None = None) -> SliceCells:
    """Count validated rows in main cells per slice (the ``arrow`` engine's way).

    Args:
      p, y, v: (n,) probabilities, labels and weights of the valid rows.
      slices: (n,) slice labels (strings).
      settings: the bins.
      rows_read: rows of the log including dropped ones (default n).
      dropped: invalid rows dropped, by problem.

    Returns:
      :class:`SliceCells`.

    Example:
      >>> import numpy as np
      >>> c = slice_cells_from_rows(np.array([0.1, 0.2, 0.3]), np.array([0, 1, 0]), np.ones(3),
      ...                           np.array(["d1", "d2", "d1"]), Settings())
      >>> c.slices, [int(n.sum()) for _, _, n in c.cells]
      (('d1', 'd2'), [2, 1])
    """
    p, y, v = (np.asarray(a, np.float64) for a in (p, y, v))
    index, sums = _row_cells(p, y, v, settings)
    return _group(np.asarray(slices).astype(str), index, sums, np.ones(len(p)),
                  rows_read=len(p) if rows_read is None else int(rows_read), dropped=dropped or {}, source="log")


def _row_cells(p: np.ndarray, y: np.ndarray, v: np.ndarray, settings: Settings) -> tuple[np.ndarray, np.ndarray]:
    """Each row's main cell ``(h * M + r) * 2 + y`` and its sums (n, 7), as the query computes them."""
    from calib_jax.cli.compare import row_sums

    hb, rb, sums = row_sums(p, y, v, settings)
    return (hb * settings.n_bins + rb) * 2 + y.astype(np.int64), sums


def _aggregate(key: np.ndarray, sums: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sum ``sums`` and ``n`` over equal ``key`` values; the keys sorted."""
    uk, inv = np.unique(key, return_inverse=True)
    inv = inv.reshape(-1)
    return (uk, np.stack([np.bincount(inv, weights=sums[:, j], minlength=len(uk)) for j in range(sums.shape[1])],
                         axis=1), np.bincount(inv, weights=n, minlength=len(uk)))


def _slice_seed(seed: int, k: int) -> int:
    return int(np.random.SeedSequence([seed_word(seed), int(k)]).generate_state(1)[0])


def slice_metrics(cells: SliceCells, settings: Settings) -> list[dict[str, np.ndarray]]:
    r"""Each slice's :data:`DRIFT_METRICS` as (B + 1,) replicate arrays (replicate 0: the slice).

    The metrics are the panel's (:func:`calib_jax.cli.panel.compute_panel`) on the slice's
    cells: NE = log loss / entropy of the slice's click rate, calibration ratio
    :math:`\sum v p / \sum v y`, ECE on ``settings.n_bins`` equal-width bins, Brier score, and
    AUC from the fine logit histogram. Slice k's cells are resampled with the seed
    ``SeedSequence([settings.seed, k])``.

    Args:
      cells: the log's :class:`SliceCells`.
      settings: the evaluation settings (``scheme="cells"``).

    Returns:
      One dict per slice, metric name -> (B + 1,) array.

    Example:
      >>> import numpy as np
      >>> rng = np.random.default_rng(0)
      >>> p = rng.uniform(0.05, 0.3, 2000); y = (rng.random(2000) < p) * 1.0
      >>> c = slice_cells_from_rows(p, y, np.ones(2000), np.repeat(["a", "b"], 1000), Settings())
      >>> m = slice_metrics(c, Settings(scheme="cells", n_boot=20))
      >>> len(m), m[0]["ne"].shape
      (2, (21,))
    """
    from calib_jax.cli.panel import entropy as _entropy
    from calib_jax.cli.panel import gap as _gap
    from calib_jax.cli.panel import group_table as _group_table
    from calib_jax.cli.panel import ratio_or_nan as _nan_div
    from calib_jax.cli.panel import safe_div as _div

    out = []
    for k, (index, sums, n) in enumerate(cells.cells):
        s = dataclasses.replace(settings, seed=_slice_seed(settings.seed, k), fields=(), oracle=False)
        acc = Accumulator.from_joint_cells(s, cell_index=index, cell=sums, cell_n=n, rows_read=int(n.sum()),
                                           rows_used=int(n.sum())).replicated()
        sc = acc.scal
        W, wy, wp = sc[:, 0], sc[:, 1], sc[:, 2]
        with np.errstate(invalid="ignore", divide="ignore"):
            ctr = _div(wy, W)
            nll = _div(sc[:, 4], W)
            h = acc.hist.reshape(acc.R, s.hist_bins, 2, 4)
            neg, pos = h[..., 0, 0], h[..., 1, 0]
            below = np.cumsum(neg, axis=1) - neg
            P, N = pos.sum(axis=1), neg.sum(axis=1)
            m = {"ne": _nan_div(nll, _entropy(ctr)), "calibration_ratio": _nan_div(wp, wy),
                 "ece": _gap(_group_table(acc.rel, s.n_bins), "l1"), "brier": _div(sc[:, 3], W),
                 "auc": np.where((P > 0) & (N > 0), _div(np.sum(pos * (below + 0.5 * neg), axis=1), P * N), np.nan),
                 "ctr": ctr}
        empty = ~(W > 0)
        out.append({name: np.where(empty, np.nan, v).astype(np.float64) for name, v in m.items()})
    return out


def drift_flags(metrics: Sequence[Mapping[str, np.ndarray]], baseline: int = 0, *, alpha: float = 0.05,
                names: Sequence[str] = FLAGGED) -> list[dict[str, Any]]:
    r"""Per slice and flagged metric: the difference from the baseline slice, its interval and
    whether the change is significant at the family-wise level ``alpha`` (module docstring).

    .. math:: z_s = \frac{\hat\theta_s - \hat\theta_0}{\operatorname{sd}_b(\theta_s^{*b} - \theta_0^{*b})},
              \qquad \text{flag} \iff |z_s| > \Phi^{-1}\!\left(1 - \frac{\alpha}{2(S-1)}\right)

    The bootstrap standard error is used with the normal quantile rather than the replicates'
    own tail quantiles: at level :math:`1 - \alpha/(S-1)` those lie beyond all but a few of B =
    100-1000 replicates and are too noisy (measured: 11% false alarms on NE at alpha = 0.05,
    8 slices, B = 300, where this test gives at most alpha).

    Args:
      metrics: :func:`slice_metrics` of each slice.
      baseline: the index of the baseline slice.
      alpha: the family-wise false-alarm rate per metric.
      names: the metrics to test.

    Returns:
      One dict per (slice, metric), baseline excluded: ``slice`` (its index), ``metric``,
      ``diff``, ``lo``, ``hi`` (the interval :math:`\hat\theta_s - \hat\theta_0 \pm z\,\mathrm{se}`
      at the Bonferroni level), ``z`` and ``flag``.

    Example:
      >>> import numpy as np
      >>> a = {"ne": np.array([0.90, 0.91, 0.89, 0.90, 0.92])}  # replicate 0, then B = 4 replicates
      >>> b = {"ne": np.array([1.20, 1.23, 1.18, 1.21, 1.19])}
      >>> f = drift_flags([a, b], names=("ne",))[0]
      >>> f["flag"], round(f["diff"], 2)
      (True, 0.3)
    """
    from scipy.stats import norm

    if not 0 < alpha < 1:
        raise ValueError(f"--alpha must lie in (0, 1), got {alpha}")
    S = len(metrics)
    crit = float(norm.ppf(1 - alpha / (2 * max(S - 1, 1))))
    out = []
    for k in range(S):
        if k == baseline:
            continue
        for name in names:
            d = np.asarray(metrics[k][name], np.float64) - np.asarray(metrics[baseline][name], np.float64)
            reps = d[1:][np.isfinite(d[1:])]
            diff = float(d[0])
            se = float(np.std(reps, ddof=1)) if reps.size >= 2 else float("nan")
            ok = np.isfinite(diff) and np.isfinite(se) and se > 0
            z = diff / se if ok else float("nan")
            out.append({"slice": k, "metric": name, "diff": diff, "lo": diff - crit * se if ok else None,
                        "hi": diff + crit * se if ok else None, "z": z if ok else None,
                        "flag": bool(ok and abs(z) > crit)})
    return out


# ---------------------------------------------------------------------------- the command
@dataclasses.dataclass(frozen=True)
class SliceColumns:
    """The columns ``evaluate --by`` reads, each checked to be named: the log, its labels and
    probabilities, the slicing column and the optional weight."""

    log: str
    label: str
    score: str
    by: str
    weight: str | None = None


def check_args(opts: EvaluateOptions) -> SliceColumns:
    """Refuse what ``--by`` does not combine with (one line naming the option); the columns it reads."""
    if opts.every is not None and opts.every not in EVERY:
        raise ValueError(f"--every must be one of {', '.join(EVERY)}")
    for flag, on in (("--logit", opts.logit is not None), ("--oracle", opts.oracle is not None),
                     ("--field", bool(opts.field)), ("--user", opts.user is not None), ("--resume", opts.resume),
                     ("--state-only", opts.state_only), ("--aggregates", opts.aggregates is not None),
                     ("--bootstrap-scheme rows", opts.bootstrap_scheme == "rows")):
        if on:
            raise ValueError(f"--by: does not combine with {flag} (a report per slice holds the main panel of "
                             "probabilities; run evaluate without --by for the rest)")
    if opts.score is None:
        raise ValueError("--by: give the model's probabilities with --score COL")
    if opts.label is None:
        raise ValueError("--by: give the labels with --label COL")
    if opts.log is None or opts.by is None:
        raise ValueError("--by: give the log and the column to slice by")
    if opts.bootstrap == 1 or opts.bootstrap < 0:
        raise ValueError("--bootstrap must be 0 (no intervals) or >= 2")
    if not 0 < opts.alpha < 1:
        raise ValueError(f"--alpha must lie in (0, 1), got {opts.alpha}")
    if opts.bins < 1 or opts.hist_bins < 16 or opts.chunk_rows < 1:
        raise ValueError("--bins must be >= 1, --hist-bins >= 16 and --chunk-rows >= 1")
    if opts.by in (opts.label, opts.score, opts.weight):
        raise ValueError("--by must name another column than --label, --score and --weight")
    return SliceColumns(log=opts.log, label=opts.label, score=opts.score, by=opts.by, weight=opts.weight)


def _cells_arrow(opts: EvaluateOptions, names: SliceColumns, settings: Settings) -> SliceCells:
    import pyarrow as pa
    import pyarrow.compute as pc

    from calib_jax.cli import loaders
    from calib_jax.cli.common import one_file
    from calib_jax.cli.validate import Columns, Problems, clean_chunk

    path = one_file(names.log)
    fmt = loaders.resolve_format(path, opts.format)
    cols = Columns(label=names.label, score=names.score, weight=names.weight)
    problems = Problems()
    # streamed: each chunk's rows become (slice code, cell) sums at once, so memory holds cells, not rows
    n_cells = settings.hist_bins * settings.n_bins * 2
    codes: dict[str, int] = {}
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    rows = unparsable = 0
    for batch in loaders.iter_batches(path, fmt, numeric=cols.numeric, text=[names.by], chunk_rows=opts.chunk_rows):
        ch = clean_chunk(batch, cols, rows, problems)
        raw = batch.column(batch.schema.get_field_index(names.by))
        if opts.every is None:
            labels = pc.fill_null(raw.cast(pa.string()), MISSING_SLICE)
            bad_time = np.zeros(len(ch.keep), bool)
        else:
            ts = _parse_times(raw)
            given = pc.and_(pc.is_valid(raw), pc.not_equal(raw.cast(pa.string()), ""))  # empty: missing
            bad_time = np.asarray(pc.fill_null(pc.and_(given, pc.is_null(ts)), False).to_numpy(zero_copy_only=False),
                                  bool)
            # the buckets are encoded as times and only the distinct ones formatted (not every row)
            labels = pc.cast(pc.floor_temporal(ts, unit=opts.every, week_starts_monday=True), pa.timestamp("s"))
        keep = ch.keep & ~bad_time
        unparsable += int(np.sum(bad_time & ch.keep))
        rows += batch.num_rows
        enc = pc.dictionary_encode(labels).combine_chunks() if hasattr(labels, "combine_chunks") else \
            pc.dictionary_encode(labels)
        seen = enc.dictionary if opts.every is None else pc.strftime(enc.dictionary, format="%Y-%m-%d %H:%M:%S")
        local = np.asarray([codes.setdefault(str(x), len(codes)) for x in [*seen.to_pylist(), MISSING_SLICE]],
                           np.int64)
        at = pc.fill_null(enc.indices, len(seen)).to_numpy(zero_copy_only=False)  # null: the missing slice
        code = local[np.asarray(at, np.int64)][keep]
        index, sums = _row_cells(ch.p[keep], ch.y[keep], ch.v[keep], settings)
        parts.append(_aggregate(code * n_cells + index, sums, np.ones(len(index))))
    dropped = problems.as_dict()
    if unparsable:
        dropped["by: not a date or time"] = unparsable
    if (problems.bad_rows or unparsable) and not opts.drop_invalid:
        what = "; ".join(filter(None, [problems.describe(), f"{unparsable} rows whose --by value is not a date or "
                                       "time" if unparsable else ""]))
        raise ValueError(f"{path}: {what} — fix the log or pass --drop-invalid to drop them")
    if not parts or sum(float(q[2].sum()) for q in parts) == 0:
        raise ValueError(f"{path}: no valid rows (read {rows})")
    key, sums, n = _aggregate(np.concatenate([q[0] for q in parts]), np.concatenate([q[1] for q in parts]),
                              np.concatenate([q[2] for q in parts]))
    slice_names = np.asarray(list(codes), dtype=object)
    return _group(slice_names[key // n_cells].astype(str), key % n_cells, sums, n, rows_read=rows, dropped=dropped,
                  source=str(path))


def _parse_times(raw: Any) -> Any:
    """Timestamps of a text or time column; a value that does not parse becomes null."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_timestamp(raw.type) or pa.types.is_date(raw.type):  # a zone-aware time: its UTC instant
        return pc.cast(raw, pa.timestamp("us", tz=raw.type.tz) if pa.types.is_timestamp(raw.type) and raw.type.tz
                       else pa.timestamp("us")).cast(pa.timestamp("us"))
    text = raw.cast(pa.string())
    text = pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text)  # an empty time is a missing one
    try:
        return pc.cast(text, pa.timestamp("us"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass  # some value does not parse: one by one, so that it alone becomes null
    import warnings

    out = []
    with warnings.catch_warnings():  # NumPy warns that it reads an offset ('-04:00') as UTC: as meant
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        for s in text.to_pylist():  # per value: one unparsable string must not fail the chunk
            try:
                out.append(None if s is None else np.datetime64(s.replace(" ", "T"), "us"))
            except ValueError:
                out.append(None)
    return pa.array(out, type=pa.timestamp("us"))


def _cells_sql(opts: EvaluateOptions, names: SliceColumns, settings: Settings, engine: str) -> SliceCells:
    from calib_jax.cli.engines import query_columns

    numeric = list(dict.fromkeys([names.label, names.score, *([names.weight] if names.weight else [])]))
    rows = query_columns(dataclasses.replace(opts, engine=engine), numeric, [names.by],
                         lambda source, dialect: slice_cells_sql(settings, label=names.label, score=names.score,
                                                                 weight=names.weight, by=names.by, every=opts.every,
                                                                 source=source, dialect=dialect))
    return slice_cells_from_result(rows, settings, source=str(opts.log), drop_invalid=opts.drop_invalid)


def run_slices(opts: EvaluateOptions, engine: str) -> dict[str, Any]:
    """``evaluate --by``: the cells per slice, each slice's metrics with intervals, the change
    flags against the baseline; writes ``slices.{json,csv,md}`` and ``drift.png``."""
    from calib_jax import io as cio
    from calib_jax.cli.common import finite_or_none, out_dir, plain_figure_text, refuse_overwriting_inputs, say
    from calib_jax.cli.panel import interval

    t0 = time.perf_counter()
    names = check_args(opts)
    settings = Settings(n_boot=opts.bootstrap, seed=opts.seed, n_bins=opts.bins, hist_bins=opts.hist_bins,
                        scheme="cells")
    out = out_dir(Path(opts.out))
    if Path(names.log).exists():
        refuse_overwriting_inputs([names.log], [out / f for f in ("slices.json", "slices.csv", "slices.md",
                                                                  "drift.png")])
    cells = _cells_arrow(opts, names, settings) if engine == "arrow" else _cells_sql(opts, names, settings, engine)
    if opts.baseline is None:
        base = 0
    elif opts.baseline in cells.slices:
        base = cells.slices.index(opts.baseline)
    else:
        raise ValueError(f"--baseline {opts.baseline!r} is not a slice of the log (first: {cells.slices[0]!r}, "
                         f"last: {cells.slices[-1]!r})")
    metrics = slice_metrics(cells, settings)
    flags = drift_flags(metrics, base, alpha=opts.alpha) if opts.bootstrap > 0 and len(cells.slices) > 1 else []
    table = []
    for k, name in enumerate(cells.slices):
        row: dict[str, Any] = {"slice": name, "rows": int(cells.cells[k][2].sum()), "baseline": k == base}
        for metric in DRIFT_METRICS:  # undefined (e.g. NE of a slice with one class): null, not NaN
            row[metric] = dict(zip(("value", "lo", "hi"), finite_or_none(interval(metrics[k][metric])), strict=True))
        row["changed"] = sorted(f["metric"] for f in flags if f["slice"] == k and f["flag"])
        table.append(row)
    wall = time.perf_counter() - t0
    result = {
        "by": opts.by, "every": opts.every, "baseline": cells.slices[base], "alpha": opts.alpha,
        "input": {"path": str(opts.log), "label": opts.label, "score": opts.score, "weight": opts.weight,
                  "rows_read": cells.rows_read, "rows_used": cells.rows_used, "dropped": dict(cells.dropped)},
        "slices": table,
        "changes": [{**f, "slice": cells.slices[f["slice"]], "diff": finite_or_none((f["diff"],))[0]} for f in flags],
        "method": (f"cell bootstrap per slice (B = {opts.bootstrap}, independent seeds); change: |slice - baseline| "
                   f"above the normal quantile of 1 - {opts.alpha}/(2(S - 1)) bootstrap standard errors "
                   "(Bonferroni over slices)"),
        "provenance": cio.provenance({"command": "evaluate --by", **settings.to_dict()}, seed=opts.seed,
                                     wall_time_s=wall),
    }
    cio.write_json(out / "slices.json", result, allow_nan=False)
    header = ["slice", "rows", *[f"{m}{s}" for m in DRIFT_METRICS for s in ("", "_lo", "_hi")], "changed"]
    csv_rows = [[r["slice"], r["rows"], *[("" if r[m][s] is None else r[m][s]) for m in DRIFT_METRICS
                                          for s in ("value", "lo", "hi")], " ".join(r["changed"])] for r in table]
    cio.write_csv(out / "slices.csv", header, csv_rows, allow_nan=False)
    cio.atomic_write_text(out / "slices.md", _markdown(result))
    with plain_figure_text():  # a slice named 'a$x$' is drawn as written, not as mathtext
        cio.atomic_write_bytes(out / "drift.png", _drift_png(result))
    moved = [r for r in table if r["changed"]]
    say(f"{opts.log}: {len(table)} slices by {opts.by}{f' (every {opts.every})' if opts.every else ''}, "
         f"{cells.rows_used:,} rows; baseline {cells.slices[base]}")
    for r in moved:
        say(f"  changed: {r['slice']} ({', '.join(r['changed'])})")
    if not moved and flags:
        say("  no slice changed from the baseline (95% family-wise, per metric)")
    say(f"  report: {out / 'slices.md'}  ({wall:.1f} s)")
    return result



def _markdown(result: Mapping[str, Any]) -> str:
    from calib_jax.cli.report import md_cell

    fmt = lambda e: "" if e["value"] is None else (  # noqa: E731
        f"{e['value']:.4g}" + (f" [{e['lo']:.4g}, {e['hi']:.4g}]" if e["lo"] is not None else ""))
    lines = ["# Calibration per slice", "", f"{md_cell(result['input']['path'])} by {md_cell(result['by'])}"
             + (f" every {result['every']}" if result["every"] else "") + f"; baseline {md_cell(result['baseline'])}; "
             + md_cell(result["method"]) + ".", "", "![drift](drift.png)", "",
             "| slice | rows | " + " | ".join(DRIFT_METRICS) + " | changed |", "|---" * (len(DRIFT_METRICS) + 3) + "|"]
    for r in result["slices"]:
        lines.append(f"| {md_cell(r['slice'])}{' (baseline)' if r['baseline'] else ''} | {r['rows']} | "
                     + " | ".join(fmt(r[m]) for m in DRIFT_METRICS) + f" | {', '.join(r['changed'])} |")
    return "\n".join(lines) + "\n"


def _drift_png(result: Mapping[str, Any]) -> bytes:
    """NE, calibration ratio and ECE over the slices with their bands; changed slices marked."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = result["slices"]
    x = np.arange(len(rows))
    fig = Figure(figsize=(max(6.0, 0.25 * len(rows) + 3), 7.0), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots(3, 1, sharex=True)
    for ax, metric in zip(axes, FLAGGED, strict=True):
        v = np.array([np.nan if r[metric]["value"] is None else r[metric]["value"] for r in rows], float)
        lo = np.array([np.nan if r[metric]["lo"] is None else r[metric]["lo"] for r in rows], float)
        hi = np.array([np.nan if r[metric]["hi"] is None else r[metric]["hi"] for r in rows], float)
        ax.fill_between(x, lo, hi, alpha=0.25, lw=0)
        ax.plot(x, v, marker="o", ms=3)
        moved = np.array([metric in r["changed"] for r in rows])
        if moved.any():
            ax.plot(x[moved], v[moved], ls="none", marker="o", ms=7, mfc="none", mec="red", label="changed")
            ax.legend(frameon=False, fontsize=8)
        ax.set_ylabel(metric.replace("_", " "))
    if "calibration_ratio" in FLAGGED:
        axes[list(FLAGGED).index("calibration_ratio")].axhline(1.0, color="grey", lw=0.8, ls="--")
    axes[-1].set_xticks(x)
    axes[-1].set_xticklabels([r["slice"] for r in rows], rotation=60, ha="right", fontsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()
