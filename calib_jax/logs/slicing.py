r"""``calib-jax evaluate --by COL``: the production panel per slice of a log, and which slices moved.

Logs are partitioned by day or hour, and "when did calibration drift?" is read off a panel per
slice: normalized entropy (He et al., *Practical Lessons from Predicting Clicks on Ads at
Facebook*, 2014, §2.1), the calibration ratio :math:`\sum v p / \sum v y`, ECE over equal-width
bins, the Brier score and AUC, each with its interval, plotted over the slices with bands, and a
change flag on each slice that differs from a baseline slice.

One query. The engine groups the rows by (slice, fine logit bin h, probability bin r, label y)
and returns the sums of the command's main cells (:mod:`calib_jax.logs.accumulate`) per slice;
``--every day|hour|week|month`` buckets a time column (``date_trunc``), otherwise each distinct
value of the column is a slice. Each slice's cells are resampled by the cell bootstrap with its
own seed (``SeedSequence([seed, k])`` for the k-th slice in report order, :func:`slice_order`:
numbers by value, other labels by text), so slices, disjoint sets of rows, get independent
replicates.

Change flag: did calibration change? For slice s and the baseline slice 0 (the first slice, or
``--baseline VALUE``) the hypothesis is that both share :math:`P(y \mid \text{score})`, whatever
their sizes and score distributions. A binned error such as ECE grows as a slice shrinks, so
comparing the two values against their bootstrap spread flags small slices that did not change
(a 300-row day beside 3,000-row days in half the logs, a one-row slice always); the test is
instead a conditional permutation test whose null distribution keeps both slices' rows, sizes
and scores. The two slices' score cells (fine logit bin h, probability bin r) are merged, in
score order within each probability bin, into strata of about two rows of the smaller slice
(large slices: one cell each). Under the hypothesis, given each stratum's pooled rows and clicks,
the slice's clicks in it are hypergeometric (the baseline has the rest) and independent across
strata. Null tables draw them; each flagged metric's difference :math:`\theta_s - \theta_0` is
recomputed on every table by the code of the observed one, a click moved into a slice at the
mean weight and logit of that slice's rows in the stratum (exact without weights where a stratum
is one cell; with weights, the weights of the rows that would click are not in the sums: the
cell's mean stands for them). The two-sided p-value counts the draws beyond the observed
difference on its smaller side (ties in a random order, so a discrete statistic of a 30-row slice
keeps its rate), and a slice is flagged when it is at most :math:`\alpha / (S - 1)`
(``--alpha``, default 0.05; Bonferroni over the S - 1 compared slices), so the chance that any
slice is flagged on a metric when none changed is at most about :math:`\alpha`. Draws come in
doubling blocks from 64 until the level is ruled in or out (a Clopper-Pearson bound at risk 1%,
the sequential scheme of Gandy, *Sequential implementation of Monte Carlo tests with uniformly
bounded resampling risk*, 2009), or until
:math:`50 (S - 1) / \alpha` draws, or a budget of 2^24 hypergeometric variates per comparison:
a slice beyond every draw at that budget (a large slice against a level that the draws cannot
reach, e.g. 2,000 slices) is decided by the normal tail of the draws. A slice that no outcome
could make significant (getting every click it can, or none, is each at least
:math:`\alpha / (2(S - 1))` likely; e.g. no click in the strata shared with the baseline) is
``too small`` to test, said so in the reports, and never flagged. The slice k's draws come from
``SeedSequence([seed, "perm", k])``. The false-alarm rate and the power are measured by
``benchmarks/drift_rate.py`` (table in docs/guide/cli.md) and tested in
``tests/test_cli_drift_rate.py``. The interval of a difference is the bootstrap one.

With ``--user U`` each slice also gets its GAUC (Zhou et al. 2018, "Deep Interest Network for
Click-Through Rate Prediction", after Zhu et al. 2017, "Optimized Cost per Click in Taobao
Display Advertising"; :mod:`calib_jax.logs.gauc`),

.. math::

    \mathrm{GAUC}_s = \frac{\sum_{u\in U_2(s)}\omega_{su}\,\mathrm{AUC}_{su}}{\sum_{u\in U_2(s)}\omega_{su}},

computed exactly as ``evaluate --user`` computes it on the slice's rows alone: a user with rows
in several slices counts in each, with only that slice's rows (:math:`\mathrm{AUC}_{su}` and the
weight :math:`\omega_{su}`, impressions, clicks or 1 by ``--gauc-weight``, are the slice's), and
:math:`U_2(s)` holds the users with both a click and a non-click in s. Its interval is the
delta-method one over the slice's users (:func:`calib_jax.logs.gauc.gauc_entry`); a slice where
no user has both classes has no GAUC (``null``, with the reason, as ``evaluate`` reports it).
DuckDB and Spark compute the per-(slice, user) sums in a second query (:func:`slice_gauc_sql`:
``evaluate --user``'s per-user CTEs with the slice key, the ``--every`` bucket where given,
added to every ``GROUP BY`` and window partition); the arrow reader keeps each valid row's slice,
user, score, label and weight in memory and computes them with NumPy
(:func:`slice_user_auc_sums`). GAUC is reported (``slices.json``, the ``gauc, gauc_lo,
gauc_hi, gauc_users`` columns of ``slices.csv``, the Markdown table) but not flagged: the change
flags are a permutation test on the score cells, which hold no users. Slices are disjoint rows,
so two slices' GAUC estimates are independent and the variance of their difference is the sum
of their variances: :math:`\mathrm{GAUC}_s - \mathrm{GAUC}_0 \pm 1.96\sqrt{\mathrm{se}_s^2 +
\mathrm{se}_0^2}`, with each se a quarter of its interval's width (before clipping to [0, 1]),
compares a slice with the baseline by hand.

With ``--field F`` (repeatable) each slice also gets F's metrics that are sums over its levels
(:func:`calib_jax.logs.panel.field_metrics`; Pan et al., "Field-aware Calibration",
WWW 2020, eqs. 5 and 6),

.. math::

    \text{Field-ECE}_s = \sum_k \frac{W_{sk}}{W_s}\Big|\frac{P_{sk} - Y_{sk}}{W_{sk}}\Big|,\qquad
    \text{Field-RCE}_s = \sum_k \frac{W_{sk}}{W_s}\,\frac{|Y_{sk} - P_{sk}|}{Y_{sk} + 0.01\,W_{sk}},

with GCE and :math:`|\text{bias}|`, where :math:`W_{sk}, P_{sk}, Y_{sk}` are the sums of
:math:`v, vp, vy` over the rows of slice s at level k, each computed as ``evaluate --field`` computes
it on the slice's rows alone (its value, GCE and Field-ECE bias-corrected, its plug-in and its
interval). Level rule: a field's levels are ranked within each slice, as ``evaluate`` ranks them
on the slice's rows (DuckDB and Spark: the ``--max-levels`` levels with the most rows of the
slice, every row of it read counting, ties by name; the arrow reader: the first ``--max-levels``
values it meets in the slice), the others summed into ``__other__``; so a slice equals
``evaluate --field`` on its rows whatever the field's number of levels. Bootstrap: a slice's
field cells (level, coarse logit bin, label) draw their ``Poisson(N_c)`` counts in the canonical
cell order from ``evaluate``'s streams ``[seed, "cell", r, 1 + i]`` (field i of ``--field``, the
command's seed), so with the same seed a slice's intervals are evaluate's on its rows; two
slices therefore draw from the same stream on different cells (their field intervals are not
independent, unlike the main panel's per-slice seeds). DuckDB and Spark count the cells in one
more query (:func:`slice_field_cells_sql`: the slice key added to the field-cell ``GROUP BY``
and to the level ranking's partition); the arrow reader counts them per slice while it streams.
Reported in ``slices.json`` (``fields: {F: {metric: {value, lo, hi, plug_in}}}``) and in the long
``slices_fields.csv`` (one row per slice, field and metric), and in ``slices.md`` as a table per
field (a row per slice, each metric's value and interval); not flagged (the change flags test
the score cells).

With ``--oracle PI`` (a simulated log's true click probability :math:`\pi`, a column in [0, 1])
each slice also gets the oracle metrics of ``evaluate --oracle`` ("Calibration is Grouping",
VR-SAG; anonymous authors, under review: Table 1 and Appendix C; :mod:`calib_jax.metrics`,
:func:`calib_jax.logs.panel.oracle_metrics`), over the rows of slice s with weights :math:`v` and
:math:`W_s = \sum_s v`:

.. math::

    \text{oracle Brier}_s = \frac{\sum_s v(\pi - p)^2}{W_s},\qquad
    \text{Brier}^+_s = \frac{\sum_s v|\pi - p|}{W_s},\qquad
    \mathrm{KL}_s = \frac{1}{W_s}\sum_s v\Big[\pi\ln\frac{\pi}{p} + (1-\pi)\ln\frac{1-\pi}{1-p}\Big],

the Chebyshev distance :math:`\max_s|\pi - p|` over the slice's rows of positive weight, and
the weighted Pearson correlation of :math:`p` and :math:`\pi` in the slice. Each is computed as
``evaluate --oracle`` computes it on the slice's rows alone, with its interval: the 95% percentile
interval of the slice's cell bootstrap replicates (the oracle sums ride in the main cells, so they
are drawn with the slice's panel, seed ``SeedSequence([seed, k])``), the Chebyshev distance's
replicates drawn from the slice's 32 largest gaps as ``evaluate`` draws them from the log's; so a
slice's numbers are ``evaluate --oracle --seed S_k`` of its rows, :math:`S_k` the slice's seed.
DuckDB and Spark add the six oracle sums to the slice query's cells and each slice's 32 largest
gaps as ``gap`` rows of the same query (:func:`slice_cells_sql`: a ``row_number()`` window
partitioned by the slice key); the arrow reader computes both per slice while it streams. A row
whose oracle is missing or outside [0, 1] is invalid (refused, or dropped from every slice's
numbers, GAUC and fields included, with ``--drop-invalid``). Reported in ``slices.json`` (five
entries per slice), the ``oracle_brier, oracle_brier_lo, oracle_brier_hi, ...`` columns of
``slices.csv`` and the Markdown table; not flagged (the change flags are a permutation test of
the labels given the score cells, not of :math:`\pi`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from calib_jax.logs.accumulate import Accumulator, Settings, seed_word
from calib_jax.logs.options import BINS_MAX, BOOTSTRAP_MAX, HIST_BINS_RANGE, EvaluateOptions, check_option_range
from calib_jax.logs.unseen import warn_if_respelled

__all__ = ["EVERY", "DRIFT_METRICS", "STATUSES", "SliceCells", "slice_order", "slice_cells_sql",
           "slice_cells_from_result", "slice_cells_from_rows", "slice_metrics", "drift_flags", "kept_cells",
           "slice_gauc_sql",
           "slice_gauc_from_result", "slice_user_auc_sums", "slice_field_cells_sql",
           "slice_field_cells_from_result", "slice_field_entries"]

#: time buckets of ``--every`` (``date_trunc`` units)
EVERY = ("hour", "day", "week", "month")
#: the per-slice metrics with intervals, and whether a change is flagged on each
DRIFT_METRICS = ("ne", "calibration_ratio", "ece", "brier", "auc", "ctr")
FLAGGED = ("ne", "calibration_ratio", "ece")
MISSING_SLICE = "__missing__"
_P_CLIP = 1e-12
_BITS = {1: "label: missing, NaN or not in {0, 1}", 2: "score: missing, NaN or outside [0, 1]",
         4: "weight: missing, NaN, negative or not finite", 8: "by: not a date or time",
         16: "by: a number, not a date or time", 32: "negative rate: missing, NaN or outside [1e-09, 1]",
         64: "oracle: missing, NaN or outside [0, 1]"}
_BITS_LOGIT = {**_BITS, 2: "logit: missing, NaN or not finite"}
#: slices a report holds at most (each keeps its cells until its panel is computed)
MAX_SLICES = 2000


@dataclasses.dataclass(frozen=True)
class SliceCells:
    r"""A log's main cells per slice.

    Attributes:
      slices: (S,) slice labels in report order (:func:`slice_order`: numbers by value, other
        labels by text, so ISO times in time order).
      cells: per slice, ``(index, sums, n)``: the main cell index ``(h * M + r) * 2 + y`` of
        each non-empty cell, its sums (C, 7) as the accumulator's main cells (C, 13 with an
        oracle: the oracle terms after them), and its rows.
      rows_read, rows_used: rows of the log, and the valid ones.
      dropped: invalid rows by problem.
      top_gaps: with an oracle (``--oracle``), per slice the 32 largest :math:`|\pi - p|` of its
        valid rows of positive weight, ascending (its Chebyshev distance and the bootstrap's
        draws of it); ``None`` without.
    """

    slices: tuple[str, ...]
    cells: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]
    rows_read: int
    rows_used: int
    dropped: Mapping[str, int] = dataclasses.field(default_factory=dict)
    top_gaps: tuple[np.ndarray, ...] | None = None

    @property
    def oracle(self) -> bool:
        """Whether the cells carry the oracle sums (``--oracle``)."""
        return self.top_gaps is not None


#: DuckDB's types of a time without a zone (read as they are: a cast through TIMESTAMPTZ would
#: cost the calendar arithmetic of the session's zone on every row)
_NAIVE_TIMES = ("TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS", "DATE")


#: a value that is a plain number (as text): never a time (:func:`_slice_expr`). Character classes,
#: no backslash, so that the one pattern reads the same in RE2 (DuckDB, pyarrow, BigQuery), Java
#: (Spark) and every dialect's string literals
NUMBER_PATTERN = "^[ ]*[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?[ ]*$"

#: text read as a time by ``--every`` (ISO 8601: a date, then optionally a time of day to the
#: minute or finer, hours 00-23, and after the seconds optionally a zone), on every engine; any
#: other text is not a time. Each engine's own parser reads more, each differently (DuckDB
#: ``2026/01/01``, ``2026-1-1`` and ``T24:00:00``, Spark ``2026-1-1``, DuckDB and NumPy's
#: fallback ``T02:00Z``, NumPy ``2026-01`` as 1 January): before 2026-12-06 one log's row was a
#: time on one engine and refused on another. Character classes only, as above.
TIME_PATTERN = ("^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ]([01][0-9]|2[0-3]):[0-5][0-9]"
                "(:[0-5][0-9]([.][0-9]+)?(Z|[+-][0-9]{2}(:?[0-9]{2})?)?)?)?$")


def _slice_expr(by: str, every: str | None, dialect: str) -> tuple[str, str, str, str]:
    """(the extra source column, the slice key of a row, the key's label, the 'not a time' mask)
    as SQL.

    The rows are grouped by the key (a value of ``by``, or its time bucket as a timestamp) and
    only the groups' keys are formatted as labels, once per group rather than once per row. A
    time is bucketed from the column as it is: a time or date column costs no text round trip,
    text is parsed (DuckDB: through TIMESTAMPTZ, so that an offset in the text is honoured,
    read back as the UTC instant by its epoch; a zone-aware column likewise; a naive time as
    written). An empty text value is a missing time.

    A number is never a time, on every engine: a value of a numeric column, or text that is a
    plain number (:data:`NUMBER_PATTERN`: epoch seconds or milliseconds, ``20240301``, a year),
    is marked 16 (not 8, the other values that are not times), whatever an engine's own cast
    would make of it (Spark reads a number as epoch seconds and the text ``2024`` as that year,
    the arrow reader's fallback parser ``1700000000`` as a year). The mask costs the pattern
    only on the rows whose value did not parse. Text is a time only when it is ISO 8601
    (:data:`TIME_PATTERN`), whatever more an engine's own parser would read."""
    from calib_jax.logs.sql import DIALECTS

    d = DIALECTS[dialect]
    col = d.quote(by)
    if every is None:
        return f"CAST({col} AS {d.string}) AS sl_in", "sl_in", f"COALESCE(sl, '{MISSING_SLICE}')", "0"
    if dialect == "bigquery":
        number = f"REGEXP_CONTAINS(CAST({{x}} AS STRING), r'{NUMBER_PATTERN}')"
        iso = f"REGEXP_CONTAINS(CAST({col} AS STRING), r'{TIME_PATTERN}')"
        src = (f"CASE WHEN {number.format(x=col)} THEN NULL WHEN NOT {iso} THEN NULL "
               f"ELSE SAFE_CAST(CAST({col} AS STRING) AS TIMESTAMP) END AS ts_in, {col} AS by_in")
        key = f"TIMESTAMP_TRUNC(ts_in, {every.upper()})"
        label = "FORMAT_TIMESTAMP('%Y-%m-%d %H:%M:%S', sl)"
    elif dialect == "spark":
        # Spark's own cast reads a number as epoch seconds and the text '2024' as that year: a
        # number is refused before the cast
        number = f"(CAST({{x}} AS STRING) RLIKE '{NUMBER_PATTERN}')"
        # text must be ISO 8601 (TIME_PATTERN): Spark's own cast also reads 2026-1-1
        iso = f"(typeof({col}) <> 'string' OR CAST({col} AS STRING) RLIKE '{TIME_PATTERN}')"
        src = (f"CASE WHEN {number.format(x=col)} THEN NULL WHEN NOT {iso} THEN NULL "
               f"ELSE TRY_CAST({col} AS TIMESTAMP) END AS ts_in, {col} AS by_in")
        key = f"date_trunc('{every}', ts_in)"
        label = "date_format(sl, 'yyyy-MM-dd HH:mm:ss')"
    else:  # typeof() is the column's type, the same on every row: one branch runs
        # DuckDB's TRY_CAST makes NULL of every number (a numeric type or its text): no guard
        number = f"regexp_full_match(CAST({{x}} AS VARCHAR), '{NUMBER_PATTERN}')"
        naive = ", ".join(f"'{t}'" for t in _NAIVE_TIMES)
        # text must be ISO 8601 (TIME_PATTERN): DuckDB's own cast also reads 2026/01/01 and 2026-1-1
        src = (f"CASE WHEN typeof({col}) IN ({naive}) THEN TRY_CAST({col} AS TIMESTAMP) "
               f"WHEN typeof({col}) = 'VARCHAR' AND NOT regexp_full_match(CAST({col} AS VARCHAR), '{TIME_PATTERN}') "
               "THEN NULL "
               f"ELSE make_timestamp(epoch_us(TRY_CAST({col} AS TIMESTAMPTZ))) END AS ts_in, {col} AS by_in")
        key = f"date_trunc('{every}', ts_in)"
        label = "strftime(sl, '%Y-%m-%d %H:%M:%S')"
    # CASE evaluates its branches only on the rows that reach them: the text cast and the number
    # pattern run on the rows whose value did not parse as a time, not on every row
    bad = (f"CASE WHEN ts_in IS NOT NULL OR by_in IS NULL THEN 0 WHEN CAST(by_in AS {d.string}) = '' THEN 0 "
           f"WHEN {number.format(x='by_in')} THEN 16 ELSE 8 END")
    return src, key, f"COALESCE({label}, '{MISSING_SLICE}')", bad


def _problem_line(what: str, rows: int, by: str | None, oracle: str | None = None) -> str:
    """One line on invalid rows of the --by time column or the --oracle column, worded alike by
    every engine (``what``: a :data:`_BITS` text; other problems as the text says them)."""
    if oracle is not None and what == _BITS[64]:
        return f"{rows} rows whose --oracle column {oracle!r} is missing, NaN or outside [0, 1]"
    if by is not None and what == _BITS[16]:
        return (f"{rows} rows whose --by column {by!r} holds a number, not a date or time (a number such as epoch "
                "seconds or a year is never read as a time: convert the column to a timestamp or to ISO 8601 text)")
    if by is not None and what == _BITS[8]:
        return f"{rows} rows whose --by column {by!r} is not a date or time"
    return f"{rows} rows with {what}"


def slice_cells_sql(settings: Settings, *, label: str, score: str, weight: str | None, by: str,
                    every: str | None, source: str, dialect: str = "duckdb", logit: bool = False,
                    negative_rate: float | None = None, negative_rate_column: str | None = None,
                    oracle: str | None = None) -> str:
    r"""One ``GROUP BY`` query of every slice's main cells (module docstring).

    Rows are checked as ``evaluate`` checks them; ``bad`` marks invalid rows (1 the label, 2 the
    score, 4 the weight, 8 a ``--by`` value that is not a time when ``every`` is given, 16 one
    that is a number, 32 the negative rate, 64 the oracle). The per-row arithmetic is that of
    :func:`calib_jax.logs.sql.statistics_sql`.

    With ``oracle`` (``--by --oracle``: a simulated log's true click probability :math:`\pi`)
    each cell also sums :math:`v\,[(\pi-p)^2,\ |\pi-p|,\ \mathrm{KL}(\pi\|p),\ \pi,\ \pi^2,\ p\pi]`
    as the statistics query does, and the result gains a column ``kind``: ``'cell'`` for the
    cells, ``'gap'`` for each slice's 32 largest :math:`|\pi - p|` over its valid rows of
    positive weight (a window ``row_number()`` partitioned by the slice key; the gap in ``sv``,
    the other columns null), what the statistics query's ``gap`` rows are for the whole log.

    Args:
      settings: the fine logit grid and probability bins.
      label, score, weight: the columns (``score`` holds probabilities, or logits with ``logit``).
      by: the slice column (read as text).
      every: a :data:`EVERY` unit to bucket ``by`` as a time, or ``None`` for its values.
      source: the ``FROM`` item.
      dialect: ``"duckdb"``, ``"spark"`` or ``"bigquery"``.
      logit: ``score`` holds logits (finite numbers): each row's probability, fine bin and log
        loss as the statistics query computes them from a logit column.
      negative_rate: the kept-negative rate of a downsampled log, or ``None``: label-0 rows
        weigh ``1/negative_rate`` times their weight (:mod:`calib_jax.logs.downsampling`).
      negative_rate_column: or the column of each row's rate (bit 32 of ``bad``: missing or
        outside [1e-9, 1]).
      oracle: the column of each row's true click probability, or ``None`` (bit 64 of ``bad``:
        missing, NaN or outside [0, 1]).

    Returns:
      The query text; its result has the columns ``sl, bad, hb, rb, y, n`` and the sums
      ``sv, svp, svpp, svo, sbrier, snll, smae``; with ``oracle`` first ``kind`` and after
      them ``soracle_brier, soracle_mae, skl, spi, spipi, sppi``.

    Example:
      >>> q = slice_cells_sql(Settings(), label="click", score="pctr", weight=None, by="ts", every="day",
      ...                     source="events")
      >>> "date_trunc('day'" in q and q.count("GROUP BY") == 1
      True
      >>> q = slice_cells_sql(Settings(), label="click", score="pctr", weight=None, by="ts", every="day",
      ...                     source="events", oracle="pi")
      >>> "PARTITION BY sl ORDER BY gap DESC" in q and "sum(w * kl) AS skl" in q
      True
    """
    from calib_jax.logs.sql import DIALECTS

    rows, label_of_key = _slice_rows_sql(settings, label=label, score=score, weight=weight, by=by, every=every,
                                         source=source, dialect=dialect, logit=logit, negative_rate=negative_rate,
                                         negative_rate_column=negative_rate_column, oracle=oracle)
    d = DIALECTS[dialect]
    sums = ["sum(w) AS sv", "sum(w * p) AS svp", "sum(w * (p * p)) AS svpp", "sum(w * oc) AS svo",
            "sum(w * ((y - p) * (y - p))) AS sbrier", "sum(w * nll) AS snll", "sum(w * abs(y - p)) AS smae"]
    head = f"-- calib-jax evaluate --by: main cells per slice ({d.name})\n" + rows
    if oracle is None:
        return (head + f"SELECT {label_of_key} AS sl, bad, hb, rb, y, n, {', '.join(_SUMS)} FROM (\n"
                f"SELECT sl, bad, hb, rb, yi AS y, count(*) AS n, {', '.join(sums)} FROM cells "
                "GROUP BY sl, bad, hb, rb, yi) g")
    sums += ["sum(w * ((pi - p) * (pi - p))) AS soracle_brier", "sum(w * abs(pi - p)) AS soracle_mae",
             "sum(w * kl) AS skl", "sum(w * pi) AS spi", "sum(w * (pi * pi)) AS spipi", "sum(w * (p * pi)) AS sppi"]
    names = (*_SUMS, *_ORACLE_SUMS)
    null_int, null_double = f"CAST(NULL AS {d.bigint})", f"CAST(NULL AS {d.double})"
    return (head + f"SELECT 'cell' AS kind, {label_of_key} AS sl, bad, hb, rb, y, n, {', '.join(names)} FROM (\n"
            f"SELECT sl, bad, hb, rb, yi AS y, count(*) AS n, {', '.join(sums)} FROM cells "
            "GROUP BY sl, bad, hb, rb, yi) g\nUNION ALL\n"
            f"SELECT 'gap' AS kind, {label_of_key} AS sl, {null_int} AS bad, {null_int} AS hb, {null_int} AS rb, "
            f"{null_int} AS y, {null_int} AS n, gap AS sv, " + ", ".join(f"{null_double} AS {c}" for c in names[1:])
            + " FROM (SELECT sl, gap, row_number() OVER (PARTITION BY sl ORDER BY gap DESC) AS rk FROM "
            f"(SELECT sl, abs(pi - p) AS gap FROM cells WHERE bad = 0 AND w > 0) t0) t1 WHERE rk <= {_TOP_GAPS}")


_SUMS = ("sv", "svp", "svpp", "svo", "sbrier", "snll", "smae")
#: the oracle sums of a cell, after :data:`_SUMS` (the statistics query's)
_ORACLE_SUMS = ("soracle_brier", "soracle_mae", "skl", "spi", "spipi", "sppi")
#: the largest oracle gaps kept per slice (the cell bootstrap's draws of the Chebyshev distance)
_TOP_GAPS = 32


def _slice_rows_sql(settings: Settings, *, label: str, score: str, weight: str | None, by: str, every: str | None,
                    source: str, dialect: str, logit: bool, negative_rate: float | None,
                    negative_rate_column: str | None, fields: Sequence[str] = (),
                    oracle: str | None = None) -> tuple[str, str]:
    """The CTEs of the slice queries up to ``cells`` (each row's ``bad``, slice key ``sl``,
    ``y, w, p, oc, nll``, bins ``rb, hb, yi``, with ``fields`` its levels ``f0 ..`` and with
    ``oracle`` its ``pi`` and ``kl``; the text ends with the ``cells`` CTE and a newline, no
    comma), and the key's label expression."""
    from calib_jax.logs.sql import DIALECTS, logit_row_sql
    from calib_jax.logs.sql import float_literal as _lit

    checked, key, label_of_key, weighted = _checked_slice_rows(
        label=label, score=score, weight=weight, by=by, every=every, source=source, dialect=dialect, logit=logit,
        negative_rate=negative_rate, negative_rate_column=negative_rate_column, fields=fields, oracle=oracle)
    d = DIALECTS[dialect]
    carried = "".join(f", f{i}" for i in range(len(fields)))
    if oracle is not None:
        carried += ", CASE WHEN bad = 0 THEN pi_in ELSE 0.0 END AS pi"
    H, M, L = settings.hist_bins, settings.n_bins, float(settings.logit_range)
    lo, hi = _lit(_P_CLIP), _lit(1.0 - _P_CLIP)
    Ls, L2 = _lit(L), _lit(2 * L)
    w = "CASE WHEN bad = 0 THEN w_in ELSE 0.0 END" if weighted else "CASE WHEN bad = 0 THEN 1.0 ELSE 0.0 END"
    kl = ""
    if oracle is not None:  # KL(pi || p) with p clipped, as the statistics query writes it
        pc = f"GREATEST(LEAST(p, {hi}), {lo})"
        lp, l1p = (f"ln({pc})", f"ln(1.0 - {pc})") if logit else ("lp", "l1p")
        kl = (f", (CASE WHEN pi > 0 THEN pi * ln(pi) ELSE 0.0 END) - pi * {lp} "
              f"+ (CASE WHEN pi < 1 THEN (1.0 - pi) * ln(1.0 - pi) ELSE 0.0 END) - (1.0 - pi) * {l1p} AS kl")
    if logit:
        # p = 1 / (1 + e^-o) (e^-o capped below overflow), the log loss softplus(t), t = -o (2y - 1),
        # and the fine bin of the logit itself, as the statistics query of a logit column
        rows = (f"clean AS (SELECT bad, {key} AS sl, CASE WHEN bad = 0 THEN y_in ELSE 0.0 END AS y, {w} AS w, "
                f"CASE WHEN bad = 0 THEN x_in ELSE 0.0 END AS o{carried} FROM chk),\n"
                f"logs AS (SELECT *, {logit_row_sql('o', 't')[0]} AS p, CASE WHEN y = 1 THEN -o ELSE o END AS t "
                "FROM clean),\n"
                f"rowv AS (SELECT *, GREATEST(LEAST(o, {Ls}), -{Ls}) AS oc, "
                f"{logit_row_sql('o', 't')[1]} AS nll{kl} FROM logs),\n")
    else:
        rows = (f"clean AS (SELECT bad, {key} AS sl, CASE WHEN bad = 0 THEN y_in ELSE 0.0 END AS y, {w} AS w, "
                f"CASE WHEN bad = 0 THEN x_in ELSE 0.5 END AS p{carried} FROM chk),\n"
                f"logs AS (SELECT *, ln(pc) AS lp, ln(1.0 - pc) AS l1p FROM (SELECT *, GREATEST(LEAST(p, {hi}), {lo}) "
                "AS pc FROM clean) t0),\n"
                f"rowv AS (SELECT *, GREATEST(LEAST(lp - l1p, {Ls}), -{Ls}) AS oc, "
                f"CASE WHEN y = 1 THEN -lp ELSE -l1p END AS nll{kl} FROM logs),\n")
    return (checked + rows +
            f"cells AS (SELECT *, CAST(GREATEST(LEAST(floor(p * {M}), {M - 1}), 0) AS {d.bigint}) AS rb, "
            f"CAST(GREATEST(LEAST(floor((oc + {Ls}) / {L2} * {H}), {H - 1}), 0) AS {d.bigint}) AS hb, "
            f"CAST(y AS {d.bigint}) AS yi FROM rowv)\n", label_of_key)


def _checked_slice_rows(*, label: str, score: str, weight: str | None, by: str, every: str | None, source: str,
                        dialect: str, logit: bool, negative_rate: float | None, negative_rate_column: str | None,
                        user: str | None = None, fields: Sequence[str] = (),
                        oracle: str | None = None) -> tuple[str, str, str, bool]:
    """The ``WITH src AS (...),\\nchk AS (...),\\n`` text shared by the slice queries (the
    typed columns, the user as text ``u_in`` when ``user`` is given, the oracle ``pi_in`` when
    ``oracle`` is, and the problem mask ``bad``), the slice key of a row, the key's label (an
    expression of ``sl``) and whether rows carry a weight ``w_in``."""
    from calib_jax.logs.downsampling import MIN_RATE, weight_items_sql
    from calib_jax.logs.sql import DIALECTS

    if dialect not in DIALECTS:
        raise ValueError(f"dialect must be one of {sorted(DIALECTS)}, got {dialect!r}")
    if every is not None and every not in EVERY:
        raise ValueError(f"--every must be one of {', '.join(EVERY)}, got {every!r}")
    d = DIALECTS[dialect]
    q = d.quote
    missing = lambda x: f"({x} IS NULL OR {d.isnan.format(x=x)})"  # noqa: E731
    by_src, key, label_of_key, not_time = _slice_expr(by, every, dialect)
    src = [f"CAST({q(label)} AS {d.double}) AS y_in", f"CAST({q(score)} AS {d.double}) AS x_in", by_src]
    cast = lambda c: None if c is None else f"CAST({q(c)} AS {d.double})"  # noqa: E731
    weights = weight_items_sql(f"CAST({q(label)} AS {d.double})", cast(weight), negative_rate,
                               cast(negative_rate_column))  # the population weight of a kept row
    src += weights
    if user is not None:  # GAUC's user: NULL stays NULL (a row without a user)
        src.append(f"CAST({q(user)} AS {d.string}) AS u_in")
    if oracle is not None:  # the true click probability of a simulated log
        src.append(f"CAST({q(oracle)} AS {d.double}) AS pi_in")
    if fields:  # the field levels, as the statistics query reads a field (a missing value: its own level)
        from calib_jax.logs.accumulate import MISSING

        src += [f"COALESCE(CAST({q(f)} AS {d.string}), '{MISSING}') AS f{i}" for i, f in enumerate(fields)]
    bad_x = (f"{missing('x_in')} OR {d.isinf.format(x='x_in')}" if logit
             else f"{missing('x_in')} OR x_in < 0 OR x_in > 1")
    masks = [f"CASE WHEN {missing('y_in')} OR (y_in <> 0 AND y_in <> 1) THEN 1 ELSE 0 END",
             f"CASE WHEN {bad_x} THEN 2 ELSE 0 END",
             not_time]
    if weight is not None:
        masks.append(f"CASE WHEN {missing('w_in')} OR w_in < 0 OR {d.isinf.format(x='w_in')} THEN 4 ELSE 0 END")
    if negative_rate_column is not None:
        masks.append(f"CASE WHEN {missing('r_in')} OR r_in < {MIN_RATE!r} OR r_in > 1 THEN 32 ELSE 0 END")
    if oracle is not None:
        masks.append(f"CASE WHEN {missing('pi_in')} OR pi_in < 0 OR pi_in > 1 THEN 64 ELSE 0 END")
    checked = (f"WITH src AS (SELECT {', '.join(src)} FROM {source}),\n"
               f"chk AS (SELECT *, {' + '.join(f'({m})' for m in masks)} AS bad FROM src),\n")
    return checked, key, label_of_key, bool(weights)


#: the columns of :func:`slice_gauc_sql`'s result after ``sl``: the counts, then the five moments
#: of each weighting (tags i, c, e of :data:`calib_jax.logs.gauc.USER_WEIGHTS`)
_GAUC_COLS = ("users", "skipped", "nouser", "wtot",
              *(f"{m}_{t}" for t in "ice" for m in ("s", "sa", "s2", "s2a", "sa2")))


def slice_gauc_sql(*, label: str, score: str, weight: str | None, by: str, every: str | None, user: str,
                   source: str, dialect: str = "duckdb", logit: bool = False, negative_rate: float | None = None,
                   negative_rate_column: str | None = None, oracle: str | None = None) -> str:
    r"""One query of every slice's GAUC sums (``evaluate --by COL --user U``): the per-user AUC
    CTEs of ``evaluate --user`` (:func:`calib_jax.logs.gauc.user_sql_ctes`) with the slice key
    added before the user in every ``GROUP BY`` and window partition, so each (slice, user)
    pair has its own AUC :math:`A_{su}` from that slice's rows, and per slice s the moments
    :math:`\sum_u\omega_{su}`, :math:`\sum_u\omega_{su}A_{su}`, :math:`\sum_u\omega_{su}^2`,
    :math:`\sum_u\omega_{su}^2A_{su}`, :math:`\sum_u(\omega_{su}A_{su})^2` over the users
    with both classes in s. Rows are checked as :func:`slice_cells_sql` checks them (only
    ``bad = 0`` rows count) and the slice key is the same (``every``: the time bucket).

    Args:
      label, score, weight, by, every, source, dialect, logit, negative_rate,
        negative_rate_column, oracle: as :func:`slice_cells_sql` (the oracle only marks its
        invalid rows here, which count in no user's AUC).
      user: the user column (read as text; a missing user is a row without a user).

    Returns:
      The query text; one result row per slice with valid rows: ``sl`` (its label), ``users``,
      ``skipped``, ``nouser`` (valid rows without a user), ``wtot`` (their weight, all valid
      rows), and ``s_t, sa_t, s2_t, s2a_t, sa2_t`` for ``t`` in ``i, c, e``.

    Example:
      >>> q = slice_gauc_sql(label="click", score="pctr", weight=None, by="ts", every="day", user="uid",
      ...                    source="events")
      >>> "PARTITION BY sk, u ORDER BY x" in q and "GROUP BY sk, u, x" in q
      True
    """
    from calib_jax.logs.gauc import moment_sql, user_sql_ctes
    from calib_jax.logs.sql import DIALECTS

    checked, key, label_of_key, weighted = _checked_slice_rows(
        label=label, score=score, weight=weight, by=by, every=every, source=source, dialect=dialect, logit=logit,
        negative_rate=negative_rate, negative_rate_column=negative_rate_column, user=user, oracle=oracle)
    d = DIALECTS[dialect]
    ctes = [*user_sql_ctes(weighted=weighted, key=key),
            f"gs AS (SELECT sk, count(*) AS users, {', '.join(moment_sql())} FROM ga GROUP BY sk)",
            "gk AS (SELECT sk, sum(CASE WHEN pu > 0 AND nu > 0 THEN 0 ELSE 1 END) AS skipped FROM gu GROUP BY sk)",
            "gx AS (SELECT sk, sum(CASE WHEN u IS NULL THEN cnt ELSE 0 END) AS nouser, "
            f"CAST(sum(pos + neg) AS {d.double}) AS wtot FROM gt GROUP BY sk)"]
    moments = list(_GAUC_COLS[4:])
    inner = ("SELECT gx.sk AS sl, COALESCE(gs.users, 0) AS users, COALESCE(gk.skipped, 0) AS skipped, gx.nouser, "
             "gx.wtot, " + ", ".join(f"COALESCE(gs.{m}, 0.0) AS {m}" for m in moments)
             + " FROM gx LEFT JOIN gk ON gx.sk IS NOT DISTINCT FROM gk.sk "
             "LEFT JOIN gs ON gx.sk IS NOT DISTINCT FROM gs.sk")
    return (f"-- calib-jax evaluate --by --user: GAUC sums per slice ({d.name})\n" + checked
            + ",\n".join(ctes) + f"\nSELECT {label_of_key} AS sl, {', '.join(_GAUC_COLS)} FROM ({inner}) g")


def slice_field_cells_sql(settings: Settings, *, label: str, score: str, weight: str | None, by: str,
                          every: str | None, fields: Sequence[str], source: str, dialect: str = "duckdb",
                          logit: bool = False, negative_rate: float | None = None,
                          negative_rate_column: str | None = None, oracle: str | None = None) -> str:
    r"""One query of every slice's field cells (``evaluate --by COL --field F``): per slice,
    field, level, coarse logit bin :math:`g = \lfloor 64\,h / H\rfloor`, label and ``bad``, the
    rows and the sums :math:`\sum v\,[1,\ p,\ p^2,\ \ell]`, the cells ``evaluate --field``
    counts, with the slice key added to the ``GROUP BY``. Rows are checked and binned as
    :func:`slice_cells_sql` checks and bins them. Each slice keeps the ``settings.max_levels``
    levels of a field with the most rows of that slice (every row read counts, ties by name)
    and sums the others into ``__other__``, as ``evaluate --field`` ranks them on the slice's
    rows alone; a missing value is the level ``__missing__``.

    Args:
      settings: the fine logit grid, probability bins and ``max_levels``.
      label, score, weight, by, every, source, dialect, logit, negative_rate,
        negative_rate_column, oracle: as :func:`slice_cells_sql` (the oracle only marks its
        invalid rows here).
      fields: the field columns (one or more).

    Returns:
      The query text; its result has the columns ``sl, fid, level, bad, y, gb_0, n, sv, svp_0,
      svpp_0, snll_0`` (:func:`calib_jax.logs.paired_fields.joint_field_cells_from_result`
      reads each slice's rows, one model).

    Example:
      >>> q = slice_field_cells_sql(Settings(), label="y", score="p", weight=None, by="ts", every="day",
      ...                           fields=["site"], source="events")
      >>> "PARTITION BY fid, sl ORDER BY c DESC, level" in q
      True
    """
    from calib_jax.logs.accumulate import FIELD_CELL_BINS, OTHER
    from calib_jax.logs.sql import DIALECTS

    if not fields:
        raise ValueError("`fields`: name one or more field columns")
    rows, label_of_key = _slice_rows_sql(settings, label=label, score=score, weight=weight, by=by, every=every,
                                         source=source, dialect=dialect, logit=logit, negative_rate=negative_rate,
                                         negative_rate_column=negative_rate_column, fields=fields, oracle=oracle)
    d = DIALECTS[dialect]
    H, K = settings.hist_bins, settings.max_levels
    sums = "sum(w) AS sv, sum(w * p) AS svp_0, sum(w * (p * p)) AS svpp_0, sum(w * nll) AS snll_0"
    names = ("sv", "svp_0", "svpp_0", "snll_0")
    per_field = [f"SELECT sl, {i} AS fid, f{i} AS level, bad, yi, gb_0, count(*) AS n, {sums} FROM fc "
                 f"GROUP BY sl, f{i}, bad, yi, gb_0" for i in range(len(fields))]
    same = "fl.sl IS NOT DISTINCT FROM lv.sl"
    return (f"-- calib-jax evaluate --by --field: field cells per slice ({d.name})\n" + rows.rstrip("\n") + ",\n"
            f"fc AS (SELECT *, CAST(floor(hb * {FIELD_CELL_BINS} / {H}) AS {d.bigint}) AS gb_0 FROM cells),\n"
            f"fl AS ({' UNION ALL '.join(per_field)}),\n"
            "lc AS (SELECT sl, fid, level, sum(n) AS c FROM fl GROUP BY sl, fid, level),\n"
            "lv AS (SELECT sl, fid, level, row_number() OVER (PARTITION BY fid, sl ORDER BY c DESC, level) AS rk "
            "FROM lc)\n"
            f"SELECT {label_of_key} AS sl, fid, level, bad, y, gb_0, n, {', '.join(names)} FROM ("
            "SELECT sl, fid, lvl AS level, bad, yi AS y, gb_0, sum(n) AS n, "
            + ", ".join(f"sum({c}) AS {c}" for c in names)
            + f" FROM (SELECT fl.sl, fl.fid, CASE WHEN lv.rk <= {K} THEN fl.level ELSE '{OTHER}' END AS lvl, "
            f"bad, yi, fl.gb_0, n, {', '.join(names)} FROM fl JOIN lv ON fl.fid = lv.fid AND {same} "
            "AND fl.level = lv.level) t GROUP BY sl, fid, lvl, bad, yi, gb_0) g")


def slice_field_cells_from_result(rows: Mapping[str, Any], fields: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each slice's field cells from a :func:`slice_field_cells_sql` result (columns as
    sequences): per slice, :func:`calib_jax.logs.paired_fields.joint_field_cells_from_result` of
    its rows (one model; invalid rows name levels but enter no cell).

    Args:
      rows: column name -> sequence.
      fields: the field columns, in ``fid`` order.

    Returns:
      Slice label -> field -> :class:`~calib_jax.logs.paired_fields.JointFieldCells`.

    Example:
      >>> r = {"sl": ["d1", "d1", "d2"], "fid": [0, 0, 0], "level": ["a", "b", "a"], "bad": [0, 0, 0],
      ...      "y": [0, 1, 1], "gb_0": [30, 31, 30], "n": [2, 1, 4], "sv": [2.0, 1.0, 4.0],
      ...      **{c: [0.5, 0.5, 1.0] for c in ("svp_0", "svpp_0", "snll_0")}}
      >>> c = slice_field_cells_from_result(r, ["site"])
      >>> c["d1"]["site"].levels, c["d2"]["site"].n.tolist()
      (('a', 'b'), [4.0])
    """
    from calib_jax.logs.paired_fields import joint_field_cells_from_result

    cols = {k: np.asarray(list(v), dtype=object) for k, v in rows.items()}
    sl = np.asarray(["" if v is None else str(v) for v in cols.get("sl", [])], dtype=object)
    out = {}
    for name in sorted(set(sl.tolist())):
        sel = sl == name
        out[str(name)] = joint_field_cells_from_result({k: v[sel].tolist() for k, v in cols.items()}, fields, 1)
    return out


def slice_field_entries(cells: Mapping[str, Any], *, n_boot: int, seed: int) -> dict[str, dict[str, Any]]:
    r"""One slice's per-field metrics with intervals, as ``evaluate --field`` reports them on the
    slice's rows alone: each field i's per-(level, label) table of every replicate from its cells
    (:func:`calib_jax.logs.paired_fields.field_tables`, one ``Poisson(N_c)`` count per cell drawn
    from ``[seed, "cell", r, 1 + i]`` in the cells' canonical order, evaluate's own stream), GCE,
    Field-ECE, Field-RCE and :math:`|\text{bias}|` of each replicate
    (:func:`calib_jax.logs.panel.field_metric_replicates`, e.g. Field-ECE
    :math:`\sum_k \tfrac{W_k}{W}|P_k - Y_k|/W_k`) and the report's entries
    (:func:`calib_jax.logs.report.field_metric_entries`: GCE and Field-ECE bias-corrected).

    Args:
      cells: field -> :class:`~calib_jax.logs.paired_fields.JointFieldCells` (one model), in
        ``--field`` order.
      n_boot: B.
      seed: the bootstrap seed (the command's, not the slice's: each slice draws as evaluate
        would on its rows).

    Returns:
      field -> metric -> ``{"value", "lo", "hi", "plug_in"}`` (``None`` where undefined).

    Example:
      >>> import numpy as np
      >>> from calib_jax.logs.paired_fields import JointFieldCells
      >>> c = JointFieldCells("site", ("a", "b"), np.array([0, 1]), np.array([[30], [30]]), np.array([1, 0]),
      ...                     np.array([10.0, 10.0]), np.array([[[10.0, 3.0, 0.9, 5.0], [10.0, 3.0, 0.9, 4.0]]]))
      >>> e = slice_field_entries({"site": c}, n_boot=0, seed=0)
      >>> e["site"]["field_ece"]["plug_in"]  # level a: |3 - 10| / 10, level b: |3 - 0| / 10, half the weight each
      0.5
    """
    from calib_jax.logs.paired_fields import field_tables
    from calib_jax.logs.panel import field_metric_replicates
    from calib_jax.logs.report import field_metric_entries

    out = {}
    for i, (f, c) in enumerate(cells.items()):
        table = field_tables(c, n_boot=n_boot, seed=seed, stream=1 + i)[0]
        metrics, corrected = field_metric_replicates(table, len(c.levels))
        entries = field_metric_entries(metrics, corrected)
        out[f] = {k: {key: e.get(key) for key in ("value", "lo", "hi", "plug_in")} for k, e in entries.items()}
    return out


def slice_gauc_from_result(rows: Mapping[str, Any]) -> dict[str, Any]:
    """Each slice's :class:`calib_jax.logs.gauc.UserAUCSums` from a :func:`slice_gauc_sql`
    result (columns as sequences).

    Args:
      rows: column name -> sequence.

    Returns:
      Slice label -> :class:`~calib_jax.logs.gauc.UserAUCSums`.

    Example:
      >>> r = {"sl": ["a"], "users": [2], "skipped": [1], "nouser": [0], "wtot": [9.0],
      ...      **{c: [1.0] for c in _GAUC_COLS[4:]}}
      >>> s = slice_gauc_from_result(r)["a"]
      >>> s.users, s.skipped, s.weight_users, s.moments["equal"][1]
      (2, 1, 1.0, 1.0)
    """
    from calib_jax.logs.gauc import USER_WEIGHTS, UserAUCSums

    out = {}
    for i, sl in enumerate(rows["sl"]):
        val = lambda c, i=i: float(rows[c][i] or 0.0)  # noqa: E731
        moments = {name: tuple(val(f"{m}_{t}") for m in ("s", "sa", "s2", "s2a", "sa2"))
                   for name, t in zip(USER_WEIGHTS, "ice", strict=True)}
        out[str(sl)] = UserAUCSums(users=int(val("users")), skipped=int(val("skipped")),
                                   rows_without_user=int(val("nouser")), weight_users=val("s_i"),
                                   weight_total=val("wtot"), moments=moments)  # type: ignore[arg-type]
    return out


def slice_cells_from_result(rows: Mapping[str, Any], settings: Settings, *, source: str,
                            drop_invalid: bool = False, by: str | None = None, logit: bool = False,
                            oracle: str | None = None, columns: Mapping[int, str] | None = None) -> SliceCells:
    """The :class:`SliceCells` of a :func:`slice_cells_sql` result (columns as sequences).

    Args:
      rows: column name -> sequence.
      settings: the bins the query was written for.
      source: the log's name, for messages.
      drop_invalid: drop invalid rows (counted in ``dropped``) instead of refusing the log.
      by: the ``--by`` column, named in the message about its values that are not times.
      logit: the model's column was logits (the problem's name in the messages).
      oracle: the ``--oracle`` column of a query written with it (its result has ``kind``, the
        oracle sums and each slice's ``gap`` rows), or ``None``.
      columns: the problem bit -> the column it concerns (the label, the model's, the weight and
        the rate columns), named in the message instead of the role.

    Returns:
      :class:`SliceCells` with the slices sorted (with ``oracle``: 13 sums a cell and each
      slice's ``top_gaps``).

    Example:
      >>> r = {"sl": ["b", "a"], "bad": [0, 0], "hb": [10, 20], "rb": [0, 1], "y": [0, 1], "n": [3, 1],
      ...      **{s: [1.0, 1.0] for s in _SUMS}}
      >>> slice_cells_from_result(r, Settings(), source="log").slices
      ('a', 'b')
    """
    gaps: dict[str, np.ndarray] | None = None
    if oracle is not None:  # the gap rows apart: each slice's largest |pi - p|
        kind = np.asarray(rows["kind"], dtype=object)
        at_gap = kind == "gap"
        gl = np.asarray([str(x) for x in np.asarray(rows["sl"], dtype=object)[at_gap]], dtype=object)
        gv = np.asarray(np.asarray(rows["sv"], dtype=object)[at_gap], np.float64)
        if gv.size and not (np.all(np.isfinite(gv)) and gv.min() >= 0 and gv.max() <= 1):
            raise ValueError(f"{source}: the engine's oracle gaps are not in [0, 1]")
        gaps = {str(name): gv[gl == name] for name in set(gl.tolist())}
        rows = {k: np.asarray(v, dtype=object)[~at_gap].tolist() for k, v in rows.items()}
    bad = np.asarray(rows["bad"], np.int64)
    n = np.asarray(rows["n"], np.float64)
    texts = _BITS_LOGIT if logit else _BITS
    problems = {what: int(n[(bad & bit) > 0].sum()) for bit, what in texts.items() if n[(bad & bit) > 0].sum()}
    if problems and not drop_invalid:  # the message names the columns (the dropped counts keep the roles)
        named = {what: f"column {(columns or {})[bit]!r}: {what.split(': ', 1)[1]}" for bit, what in texts.items()
                 if bit in (columns or {})}
        listed = "; ".join(_problem_line(named.get(w, w), k, by, oracle) for w, k in problems.items())
        raise ValueError(f"{source}: {listed} — fix the log or pass --drop-invalid to drop them")
    ok = bad == 0
    if not ok.any():
        raise ValueError(f"{source}: no valid rows (read {int(n.sum())})")
    sl = np.asarray([str(s) for s in np.asarray(rows["sl"], dtype=object)[ok]])
    M = settings.n_bins
    index = (np.asarray(rows["hb"], np.int64)[ok] * M + np.asarray(rows["rb"], np.int64)[ok]) * 2 \
        + np.asarray(rows["y"], np.int64)[ok]
    names = (*_SUMS, *_ORACLE_SUMS) if oracle is not None else _SUMS
    sums = np.stack([np.asarray(rows[s], np.float64)[ok] for s in names], axis=1)
    return _group(sl, index, sums, n[ok], rows_read=int(n.sum()), dropped=problems, source=source, top_gaps=gaps)


def slice_order(labels: Sequence[str]) -> list[int]:
    """The order in which a report lists its slices: by number where every label is a finite
    number (``"8"`` before ``"10"``, ``"-1.5"`` before ``"1e-07"``; equal numbers such as ``"1"`` and
    ``"1.0"`` by their text), otherwise by text (ISO dates and times sort in time order). The first
    slice is the default baseline, and the k-th draws its bootstrap from ``SeedSequence([seed, k])``.

    Args:
      labels: the slice labels as text.

    Returns:
      The positions of ``labels`` in report order.

    Example:
      >>> slice_order(["10", "8", "9"]), slice_order(["b", "10", "8"])
      ([1, 2, 0], [1, 2, 0])
    """
    from decimal import Decimal, InvalidOperation

    try:
        values = [Decimal(x.strip()) for x in labels]
    except (InvalidOperation, ValueError):
        values = []
    if values and all(v.is_finite() for v in values):
        return sorted(range(len(labels)), key=lambda i: (values[i], labels[i]))
    return sorted(range(len(labels)), key=lambda i: labels[i])


def _group(sl: np.ndarray, index: np.ndarray, sums: np.ndarray, n: np.ndarray, *, rows_read: int,
           dropped: Mapping[str, int], source: str,
           top_gaps: Mapping[str, np.ndarray] | None = None) -> SliceCells:
    """The :class:`SliceCells` of cells given with their slice labels ``sl`` (equal cells of a
    slice added up); ``top_gaps``: with an oracle, slice label -> its largest gaps (a slice
    without any: none)."""
    from calib_jax.logs.accumulate import top_values

    names, code = np.unique(sl, return_inverse=True)
    code = code.reshape(-1)
    order = slice_order([str(x) for x in names])
    if order != list(range(len(names))):  # numbers in numeric order ("8" before "10")
        rank = np.empty(len(order), np.int64)
        rank[order] = np.arange(len(order))
        names, code = names[order], rank[code]
    if len(names) > MAX_SLICES:
        raise ValueError(f"{source}: --by gives {len(names)} slices, more than {MAX_SLICES} (bucket a time column "
                         "with --every, or slice by a column with fewer values)")
    cells = []
    for k in range(len(names)):
        m = code == k
        idx, inv = np.unique(index[m], return_inverse=True)
        s = np.stack([np.bincount(inv, weights=sums[m, j], minlength=len(idx)) for j in range(sums.shape[1])],
                     axis=1)
        cells.append((idx, s, np.bincount(inv, weights=n[m], minlength=len(idx))))
    gaps = None if top_gaps is None else tuple(top_values(top_gaps.get(str(x), np.zeros(0))) for x in names)
    return SliceCells(slices=tuple(str(x) for x in names), cells=tuple(cells), rows_read=rows_read,
                      rows_used=int(n.sum()), dropped=dict(dropped), top_gaps=gaps)


def slice_cells_from_rows(p: Any, y: Any, v: Any, slices: Any, settings: Settings, *, o: Any = None,
                          pi: Any = None, rows_read: int | None = None,
                          dropped: Mapping[str, int] | None = None) -> SliceCells:
    r"""Count validated rows in main cells per slice (the ``arrow`` engine's way).

    Args:
      p, y, v: (n,) probabilities, labels and weights of the valid rows.
      slices: (n,) slice labels (strings).
      settings: the bins.
      o: (n,) the logits the probabilities come from (``--logit``), or ``None``.
      pi: (n,) the true click probabilities of a simulated log (``--oracle``), or ``None``: each
        cell then also sums :math:`v\,[(\pi-p)^2,\ |\pi-p|,\ \mathrm{KL}(\pi\|p),\ \pi,\ \pi^2,\ p\pi]`
        and each slice keeps its 32 largest :math:`|\pi - p|` of positive weight.
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
      >>> c = slice_cells_from_rows(np.array([0.1, 0.2, 0.3]), np.array([0, 1, 0]), np.ones(3),
      ...                           np.array(["d1", "d2", "d1"]), Settings(), pi=np.array([0.2, 0.2, 0.2]))
      >>> [g.round(3).tolist() for g in c.top_gaps]
      [[0.1, 0.1], [0.0]]
    """
    p, y, v = (np.asarray(a, np.float64) for a in (p, y, v))
    labels = np.asarray(slices).astype(str)
    pi = None if pi is None else np.asarray(pi, np.float64)
    index, sums = _row_cells(p, y, v, settings, o=None if o is None else np.asarray(o, np.float64), pi=pi)
    gaps = None if pi is None else _slice_top_gaps(labels, np.abs(pi - p), v > 0, {})
    return _group(labels, index, sums, np.ones(len(p)), rows_read=len(p) if rows_read is None else int(rows_read),
                  dropped=dropped or {}, source="log", top_gaps=gaps)


def _slice_top_gaps(labels: np.ndarray, gap: np.ndarray, positive: np.ndarray, tops: dict[Any, np.ndarray]
                    ) -> dict[Any, np.ndarray]:
    """Merge the rows' oracle gaps into ``tops`` (slice -> its 32 largest gaps so far, ascending):
    the rows of positive weight only, each slice's largest :data:`_TOP_GAPS` found by one sort
    of the chunk (not one pass per slice). Returns ``tops``."""
    from calib_jax.logs.accumulate import top_values

    labels, gap = labels[positive], gap[positive]
    if gap.size == 0:
        return tops
    order = np.lexsort((-gap, labels))
    labels, gap = labels[order], gap[order]
    first = np.flatnonzero(np.r_[True, labels[1:] != labels[:-1]])
    rank = np.arange(labels.shape[0]) - np.repeat(first, np.diff(np.r_[first, labels.shape[0]]))
    keep = rank < _TOP_GAPS
    labels, gap = labels[keep], gap[keep]
    bounds = np.r_[np.flatnonzero(np.r_[True, labels[1:] != labels[:-1]]), labels.shape[0]]
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        key = labels[a].item() if hasattr(labels[a], "item") else labels[a]
        tops[key] = top_values(np.concatenate([tops.get(key, np.zeros(0)), gap[a:b]]))
    return tops


def _row_cells(p: np.ndarray, y: np.ndarray, v: np.ndarray, settings: Settings, *,
               o: np.ndarray | None = None, pi: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each row's main cell ``(h * M + r) * 2 + y`` and its sums (n, 7; n, 13 with the oracle
    ``pi``), as the query computes them (from the logits ``o`` where the model's column holds
    logits)."""
    from calib_jax.logs.comparison import row_sums

    hb, rb, sums = row_sums(p, y, v, settings, o=o, pi=pi)
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

    The metrics are the panel's (:func:`calib_jax.logs.panel.compute_panel`) on the slice's
    cells: NE = log loss / entropy of the slice's click rate, calibration ratio
    :math:`\sum v p / \sum v y`, ECE on ``settings.n_bins`` equal-width bins, Brier score, and
    AUC from the fine logit histogram. Slice k's cells are resampled with the seed
    ``SeedSequence([settings.seed, k])``. With an oracle (``cells.oracle``) each slice also
    gets :data:`calib_jax.logs.panel.ORACLE_METRICS` (:func:`calib_jax.logs.panel.oracle_metrics`:
    oracle Brier :math:`\sum v(\pi - p)^2 / W`, Brier⁺, KL, Chebyshev, Pearson) from the same
    replicates, the Chebyshev distance's drawn from the slice's own largest gaps: those of
    ``evaluate --oracle --seed S_k`` on the slice's rows alone, :math:`S_k` the slice's seed.

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
    from calib_jax.logs.panel import entropy as _entropy
    from calib_jax.logs.panel import gap as _gap
    from calib_jax.logs.panel import group_table as _group_table
    from calib_jax.logs.panel import oracle_metrics
    from calib_jax.logs.panel import ratio_or_nan as _nan_div
    from calib_jax.logs.panel import safe_div as _div

    out = []
    for k, (index, sums, n) in enumerate(cells.cells):
        s = dataclasses.replace(settings, seed=_slice_seed(settings.seed, k), fields=(), oracle=cells.oracle)
        acc = Accumulator.from_joint_cells(s, cell_index=index, cell=sums, cell_n=n, rows_read=int(n.sum()),
                                           rows_used=int(n.sum()),
                                           top_gaps=cells.top_gaps[k] if cells.top_gaps is not None else None
                                           ).replicated()
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
        if cells.oracle:  # evaluate --oracle's metrics on the slice's replicates
            m.update(oracle_metrics(acc)[0])
        empty = ~(W > 0)
        out.append({name: np.where(empty, np.nan, v).astype(np.float64) for name, v in m.items()})
    return out


#: the tag of the permutation test's random streams ("perm")
_PERM_STREAM = 0x7065726D
#: rows of the smaller of the two slices an average stratum holds (strata: module docstring)
_STRATUM_ROWS = 2.0
#: null tables drawn first; then blocks that double the count while a decision is open
_FIRST_DRAWS = 64
#: draws that settle a p-value at the level: expected tail count at the level (``/ level`` draws)
_TAIL_DRAWS = 50
#: hypergeometric variates (draws x strata) a comparison draws at most: beyond, the normal tail
_DRAW_BUDGET = 1 << 24
#: variates held in memory per block of draws
_BLOCK_VALUES = 1 << 21
#: chance that a sequential stop decides otherwise than all the draws would (per look)
_STOP_RISK = 1e-2
#: numpy's hypergeometric takes fewer than 10^9 clicks and non-clicks; a bigger stratum draws a binomial
_HYPER_MAX = 10**9 - 1
#: statuses of a (slice, metric) comparison
STATUSES = ("changed", "unchanged", "too small")


@dataclasses.dataclass(frozen=True)
class _Side:
    """A slice's sums of the flagged metrics: weight, v p, clicks (weight), log loss, and per
    probability bin the sum of v p minus that of v y (ECE's gaps)."""

    W: float
    P: float
    Y: float
    NL: float
    G: np.ndarray


def side_sums(cells: tuple[np.ndarray, np.ndarray, np.ndarray], n_bins: int) -> _Side:
    index, sums, _ = cells
    y = (index % 2).astype(np.float64)
    r = (index // 2) % n_bins
    return _Side(W=float(sums[:, 0].sum()), P=float(sums[:, 1].sum()), Y=float(np.sum(y * sums[:, 0])),
                 NL=float(sums[:, 5].sum()), G=np.bincount(r, weights=sums[:, 1] - y * sums[:, 0], minlength=n_bins))


def _drift_stats(W: float, P: float, Y: np.ndarray, NL: np.ndarray, G: np.ndarray) -> dict[str, np.ndarray]:
    r"""NE, calibration ratio and ECE of one slice from its sums (module docstring), for R
    tables at once: ``Y``, ``NL`` (R,), ``G`` (R, M). The values of :func:`slice_metrics`,
    except where it has none: a slice without a click (or all clicks) has NE and calibration
    ratio :math:`+\infty` here, so that the permutation test orders every table."""
    from calib_jax.logs.panel import entropy

    Y = np.clip(Y, 0.0, W)  # a weighted table's float rounding
    ctr = Y / W
    ent = entropy(ctr)
    with np.errstate(divide="ignore", invalid="ignore"):
        ne = np.where(ent > 0, (NL / W) / np.where(ent > 0, ent, 1.0), np.inf)
        ratio = np.where(Y > 0, P / np.where(Y > 0, Y, 1.0), np.inf)
    return {"ne": ne, "calibration_ratio": ratio, "ece": np.sum(np.abs(G), axis=1) / W}


@dataclasses.dataclass(frozen=True)
class _Strata:
    """The strata of a (slice, baseline) pair that the permutation draws in: pooled rows
    ``N``, pooled clicks ``K``, the slice's rows ``n`` and clicks ``k``; per side the mean
    weight ``m`` and mean weighted logit ``o`` of a row; the probability bin ``r``."""

    N: np.ndarray
    K: np.ndarray
    n: np.ndarray
    k: np.ndarray
    m_s: np.ndarray
    o_s: np.ndarray
    m_0: np.ndarray
    o_0: np.ndarray
    r: np.ndarray


def score_strata(sl: tuple[np.ndarray, np.ndarray, np.ndarray], base: tuple[np.ndarray, np.ndarray, np.ndarray],
                 n_bins: int) -> _Strata:
    """Merge the two slices' score cells (h, r) into strata (module docstring); keep the strata
    whose draw is not fixed (both slices present, clicks and non-clicks pooled)."""
    keys, side, idx = [], [], []
    for s, (index, _, _) in enumerate((sl, base)):
        keys.append(index // 2)
        side.append(np.full(index.shape[0], s))
        idx.append(index)
    key, s_of = np.concatenate(keys), np.concatenate(side)
    y = np.concatenate(idx) % 2
    sums = np.concatenate([sl[1], base[1]])
    rows = np.concatenate([sl[2], base[2]])
    uk, inv = np.unique(key, return_inverse=True)
    u = len(uk)

    def per_key(weights: np.ndarray, side: int) -> np.ndarray:
        return np.bincount(inv, weights=np.where(s_of == side, weights, 0.0), minlength=u)

    n_s, n_0 = per_key(rows, 0), per_key(rows, 1)
    # cells ordered by key = h * M + r are in score order with r non-decreasing: a run of one r
    # is cut every tau pooled rows, tau such that a stratum holds about _STRATUM_ROWS rows of the
    # smaller slice (at least one cell: a cell's rows are never split)
    r = uk % n_bins
    N = n_s + n_0
    tau = _STRATUM_ROWS * N.sum() / max(min(n_s.sum(), n_0.sum()), 1.0)
    before = np.cumsum(N) - N
    start = np.r_[True, r[1:] != r[:-1]]
    run_off = np.maximum.accumulate(np.where(start, before, 0.0))
    q = np.floor((before - run_off) / tau)
    sid = np.cumsum(start | np.r_[True, q[1:] != q[:-1]]) - 1
    g = int(sid[-1]) + 1 if u else 0

    def per_stratum(weights: np.ndarray, side: int) -> np.ndarray:
        return np.bincount(sid, weights=per_key(weights, side), minlength=g)

    n, n0 = per_stratum(rows, 0), per_stratum(rows, 1)
    k, k0 = per_stratum(rows * y, 0), per_stratum(rows * y, 1)
    w_s, w_0 = per_stratum(sums[:, 0], 0), per_stratum(sums[:, 0], 1)
    vo_s, vo_0 = per_stratum(sums[:, 3], 0), per_stratum(sums[:, 3], 1)
    r_of = np.zeros(g, np.int64)
    r_of[sid] = r
    NN, KK = n + n0, k + k0
    act = (n > 0) & (n0 > 0) & (KK > 0) & (KK < NN)
    n, n0, k, NN, KK = (np.rint(a[act]).astype(np.int64) for a in (n, n0, k, NN, KK))
    return _Strata(N=NN, K=KK, n=n, k=k, m_s=w_s[act] / n, o_s=vo_s[act] / n, m_0=w_0[act] / n0, o_0=vo_0[act] / n0,
                   r=r_of[act])


def _extreme_probability(st: _Strata) -> tuple[float, float]:
    """The permutation probabilities that the slice gets every click it can, and as few as it
    can, in every stratum (the exact hypergeometric probabilities, multiplied)."""
    from scipy.special import gammaln

    def log_pmf(x: np.ndarray) -> np.ndarray:
        lc = lambda a, b: gammaln(a + 1) - gammaln(b + 1) - gammaln(a - b + 1)  # noqa: E731
        return lc(st.K, x) + lc(st.N - st.K, st.n - x) - lc(st.N, st.n)

    hi = np.minimum(st.n, st.K)
    lo = np.maximum(0, st.n - (st.N - st.K))
    return float(np.exp(np.sum(log_pmf(hi)))), float(np.exp(np.sum(log_pmf(lo))))


def draw_null_tables(rng: np.random.Generator, st: _Strata, size: int) -> np.ndarray:
    """``size`` permutation draws of the slice's clicks per stratum (size, J): hypergeometric
    (a binomial at the pooled rate in a stratum of 10^9 rows or more)."""
    big = (st.K > _HYPER_MAX) | (st.N - st.K > _HYPER_MAX)
    if not big.any():
        return rng.hypergeometric(st.K, st.N - st.K, st.n, size=(size, st.N.shape[0]))
    out = np.empty((size, st.N.shape[0]), np.int64)
    ok = ~big
    out[:, ok] = rng.hypergeometric(st.K[ok], st.N[ok] - st.K[ok], st.n[ok], size=(size, int(ok.sum())))
    lo, hi = np.maximum(0, st.n[big] - (st.N[big] - st.K[big])), np.minimum(st.n[big], st.K[big])
    out[:, big] = np.clip(rng.binomial(st.n[big], st.K[big] / st.N[big], size=(size, int(big.sum()))), lo, hi)
    return out


def null_differences(s: _Side, b: _Side, st: _Strata, D: np.ndarray,
                     names: Sequence[str]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Each metric of the slice and of the baseline (R,) on tables whose slice has ``D`` (R, J)
    more clicks per stratum than observed (the baseline as many fewer), at each side's mean
    weight and logit of a row of the stratum; ``D = 0`` is the log itself."""
    M = s.G.shape[0]
    E = np.zeros((st.r.shape[0], M))
    rows = np.arange(st.r.shape[0])

    def side(x: _Side, sign: float, m: np.ndarray, o: np.ndarray) -> dict[str, np.ndarray]:
        E[rows, st.r] = m
        # a row turned into a click adds its weight to the clicks, takes v p - v y of its bin
        # down by its weight, and changes its log loss by -v * logit
        t = _drift_stats(x.W, x.P, x.Y + sign * (D @ m), x.NL - sign * (D @ o), x.G[None, :] - sign * (D @ E))
        return {k: t[k] for k in names}

    return side(s, 1.0, st.m_s, st.o_s), side(b, -1.0, st.m_0, st.o_0)


def _difference(t_s: np.ndarray, t_0: np.ndarray) -> np.ndarray:
    """Slice minus baseline; both infinite (no click on either side): no difference."""
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(t_s - t_0, nan=0.0, posinf=np.inf, neginf=-np.inf)


def _clopper_pearson(c: np.ndarray, n: int, risk: float) -> tuple[np.ndarray, np.ndarray]:
    """Bounds on a binomial rate from ``c`` successes of ``n``, each failing with chance ``risk``."""
    from scipy.stats import beta

    with np.errstate(invalid="ignore"):
        lo = np.where(c > 0, beta.ppf(risk, np.maximum(c, 1), n - c + 1), 0.0)
        hi = np.where(c < n, beta.ppf(1 - risk, c + 1, np.maximum(n - c, 1)), 1.0)
    return lo, hi


def _pair_test(s: _Side, b: _Side, st: _Strata, names: Sequence[str], level: float,
               rng: np.random.Generator) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """The observed difference of each metric (NaN where a side's metric is undefined) and its
    ``p``, ``status`` and ``draws`` under the conditional permutation test at ``level``
    (:func:`drift_flags`)."""
    J = st.N.shape[0]
    small = [{"p": None, "status": "too small", "draws": 0} for _ in names]
    if not (s.W > 0 and b.W > 0):
        return dict.fromkeys(names, math.nan), small
    v_s, v_0 = null_differences(s, b, st, np.zeros((1, J)), names)
    shown = {m: float(v_s[m][0] - v_0[m][0]) if np.isfinite(v_s[m][0]) and np.isfinite(v_0[m][0]) else math.nan
             for m in names}
    p_max, p_min = _extreme_probability(st)
    if J == 0 or (p_max >= level / 2 and p_min >= level / 2):
        return shown, small
    obs = {m: float(_difference(v_s[m], v_0[m])[0]) for m in names}
    # ties: equal up to float rounding of the metrics' own size
    tol = {m: 1e-10 * (abs(float(v_s[m][0])) + abs(float(v_0[m][0]))) if math.isfinite(obs[m]) else 0.0
           for m in names}
    need = int(np.ceil(_TAIL_DRAWS / level))
    cap = max(_FIRST_DRAWS, min(need, _DRAW_BUDGET // J))
    k_obs = st.k.astype(np.float64)
    u0 = rng.random(len(names))  # the observed table's place among the tables it ties with
    above = np.zeros(len(names), np.int64)
    below = np.zeros(len(names), np.int64)
    mom = np.zeros((len(names), 3))  # the finite draws' count, sum and sum of squares (normal tail)
    res: list[dict[str, Any] | None] = [None] * len(names)
    L, block = 0, _FIRST_DRAWS
    while any(r is None for r in res) and L < cap:
        size = min(block, cap - L, max(1, _BLOCK_VALUES // J))
        t_s, t_0 = null_differences(s, b, st, draw_null_tables(rng, st, size) - k_obs, names)
        u = rng.random((size, len(names)))
        L += size
        block = L
        for i, m in enumerate(names):
            if res[i] is not None:
                continue
            x, t0 = _difference(t_s[m], t_0[m]), obs[m]
            with np.errstate(invalid="ignore"):  # inf - inf: compared by ==
                tie = (x == t0) | (np.abs(x - t0) <= tol[m])
            above[i] += int(np.sum((x > t0) & ~tie) + np.sum(tie & (u[:, i] > u0[i])))
            below[i] += int(np.sum((x < t0) & ~tie) + np.sum(tie & (u[:, i] <= u0[i])))
            f = x[np.isfinite(x)]
            mom[i] += (f.size, f.sum(), np.sum(f * f))
            c = int(min(above[i], below[i]))
            p = min(1.0, 2 * (c + 1) / (L + 1))
            lo, hi = _clopper_pearson(np.array(c), L, _STOP_RISK)
            if 2 * float(hi) < level:
                res[i] = {"p": p, "status": "changed", "draws": L}
            elif 2 * float(lo) > level:
                res[i] = {"p": p, "status": "unchanged", "draws": L}
            elif c == 0 and cap < need and (L >= cap or L >= 4 * _FIRST_DRAWS):
                # beyond every draw, and the budget cannot draw enough to resolve the level: the
                # normal tail of the draws decides (early only when far beyond it)
                z = _normal_z(t0, mom[i])
                p = min(p, 2 * _normal_sf(abs(z))) if z is not None else p
                if p <= (level if L >= cap else level * 1e-3):
                    res[i] = {"p": p, "status": "changed", "draws": L}
                elif L >= cap:
                    res[i] = {"p": p, "status": "unchanged", "draws": L}
            elif L >= cap:
                res[i] = {"p": p, "status": "changed" if p <= level else "unchanged", "draws": L}
    return shown, [r if r is not None else small[0] for r in res]


def _normal_z(t0: float, mom: np.ndarray) -> float | None:
    n, s1, s2 = mom
    if n < 2 or not math.isfinite(t0):
        return None
    mean = s1 / n
    var = max(s2 / n - mean * mean, 0.0) * n / (n - 1)
    return (t0 - mean) / math.sqrt(var) if var > 0 else None


def _normal_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def kept_cells(cells: SliceCells, negative_rate: float) -> SliceCells:
    """The cells of a downsampled log's kept rows: every label-0 cell's sums times the rate
    (their rows weighed ``1/rate`` in the population's sums; the row counts are the rows').

    Example:
      >>> c = SliceCells(slices=("a",), cells=((np.array([0, 1]), np.full((2, 7), 4.0), np.array([1.0, 4.0])),),
      ...                rows_read=5, rows_used=5)
      >>> kept_cells(c, 0.25).cells[0][1][:, 0].tolist()
      [1.0, 4.0]
    """
    out = []
    for index, sums, n in cells.cells:
        scale = np.where(index % 2 == 0, negative_rate, 1.0)
        out.append((index, sums * scale[:, None], n))
    return dataclasses.replace(cells, cells=tuple(out))


def drift_flags(cells: SliceCells, settings: Settings, baseline: int = 0, *, alpha: float = 0.05,
                metrics: Sequence[Mapping[str, np.ndarray]] | None = None,
                names: Sequence[str] = FLAGGED) -> list[dict[str, Any]]:
    r"""Per slice and flagged metric: the difference from the baseline slice, whether
    calibration changed (a conditional permutation test at the family-wise level ``alpha``,
    module docstring), and the bootstrap interval of the difference when ``metrics`` holds
    replicates.

    The hypothesis tested is that the slice and the baseline share :math:`P(y \mid
    \text{score})`. Within each stratum of scores the two slices' rows are pooled; given the
    pooled rows and clicks, the slice's clicks are then hypergeometric. Null tables draw them
    (the baseline gets the rest), and each metric's difference :math:`T = \theta_s - \theta_0`
    is recomputed on every table by the code that computes the observed one. With
    :math:`a` the draws above :math:`T` and :math:`b` those below (ties placed in a random
    order), the two-sided p-value is

    .. math:: p = \min\!\left(1, \frac{2\,(\min(a, b) + 1)}{L + 1}\right),

    and the slice is flagged on the metric when :math:`p \le \alpha / (S - 1)` (Bonferroni
    over the S - 1 compared slices). Draws are sequential (doubling blocks from 64) and stop
    when the level is ruled in or out. A slice whose most extreme outcomes (every click it can
    get, or none) are each at least :math:`\alpha / (2(S - 1))` likely cannot be flagged by any
    outcome: its status is ``"too small"`` and it is not flagged.

    Args:
      cells: the log's :class:`SliceCells`.
      settings: its settings (``n_bins``; ``seed``: slice k's draws come from
        ``SeedSequence([seed, "perm", k])``).
      baseline: the index of the baseline slice.
      alpha: the family-wise false-alarm rate per metric.
      metrics: optional :func:`slice_metrics` of each slice: the differences are taken from
        its replicate 0 and the interval :math:`\hat\theta_s - \hat\theta_0 \pm z\,\mathrm{se}`
        from its bootstrap replicates (se their standard deviation, z the normal quantile of
        :math:`1 - \alpha / (2(S - 1))`); without it the interval is ``None``.
      names: the metrics to test (of :data:`FLAGGED`).

    With ``settings.negative_rate`` (a downsampled log) the draws permute the kept rows
    (:func:`kept_cells`): they are the independent rows, and with one rate for every slice the
    kept rows' :math:`P(y \mid \text{score})` is the same in two slices exactly when the
    population's is, so the test keeps its level; the differences shown are the population's.

    Returns:
      One dict per (slice, metric), baseline excluded: ``slice`` (its index), ``metric``,
      ``diff`` (NaN where a metric is undefined), ``lo``, ``hi``, ``p`` (``None`` when too
      small), ``status`` (one of :data:`STATUSES`), ``flag`` (``status == "changed"``) and
      ``draws`` (the null tables drawn).

    Example:
      >>> import numpy as np
      >>> rng = np.random.default_rng(0)
      >>> p = rng.uniform(0.05, 0.3, 8000); y = (rng.random(8000) < p) * 1.0
      >>> p[6000:] = np.clip(p[6000:] * 1.5, 0, 1)  # the second slice over-predicts by half
      >>> s = Settings(scheme="cells", n_boot=0)
      >>> c = slice_cells_from_rows(p, y, np.ones(8000), np.repeat(["a", "b"], [6000, 2000]), s)
      >>> [(f["metric"], f["status"]) for f in drift_flags(c, s, names=("calibration_ratio", "ece"))]
      [('calibration_ratio', 'changed'), ('ece', 'changed')]
    """
    from scipy.stats import norm

    if not 0 < alpha < 1:
        raise ValueError(f"--alpha must lie in (0, 1), got {alpha}")
    S = len(cells.slices)
    if not 0 <= baseline < S:
        raise ValueError(f"baseline must index one of the {S} slices, got {baseline}")
    unknown = [m for m in names if m not in FLAGGED]
    if unknown:
        raise ValueError(f"names: {unknown} are not flagged metrics {FLAGGED}")
    if metrics is not None and len(metrics) != S:
        raise ValueError(f"metrics: one per slice ({S}), got {len(metrics)}")
    level = alpha / max(S - 1, 1)
    crit = float(norm.ppf(1 - level / 2))
    M = settings.n_bins
    if settings.negative_rate is not None:
        cells = kept_cells(cells, settings.negative_rate)
    b = side_sums(cells.cells[baseline], M)
    out = []
    for k in range(S):
        if k == baseline:
            continue
        rng = np.random.default_rng([seed_word(settings.seed), _PERM_STREAM, k])
        strata = score_strata(cells.cells[k], cells.cells[baseline], M)
        shown, tests = _pair_test(side_sums(cells.cells[k], M), b, strata, names, level, rng)
        for name, test in zip(names, tests, strict=True):
            diff, lo, hi = shown[name], None, None
            if metrics is not None:
                d = np.asarray(metrics[k][name], np.float64) - np.asarray(metrics[baseline][name], np.float64)
                diff = float(d[0])
                reps = d[1:][np.isfinite(d[1:])]
                se = float(np.std(reps, ddof=1)) if reps.size >= 2 else math.nan
                if math.isfinite(diff) and math.isfinite(se) and se > 0:
                    lo, hi = diff - crit * se, diff + crit * se
            out.append({"slice": k, "metric": name, "diff": diff, "lo": lo, "hi": hi, **test,
                        "flag": test["status"] == "changed"})
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
    logit: bool = False  # ``score`` names a column of logits
    negative_rate: float | None = None  # the kept-negative rate (label-0 rows weigh 1/rate)
    negative_rate_column: str | None = None  # or the column of each row's rate
    user: str | None = None  # GAUC's user column (per slice)
    gauc_weight: str = "impressions"  # the user weight of GAUC
    fields: tuple[str, ...] = ()  # --field: per-field metrics per slice
    oracle: str | None = None  # --oracle: the true click probability (oracle metrics per slice)


def check_args(opts: EvaluateOptions) -> SliceColumns:
    """Refuse what ``--by`` does not combine with (one line naming the option); the columns it reads."""
    from calib_jax.logs.downsampling import check_rate_options

    if opts.every is not None and opts.every not in EVERY:
        raise ValueError(f"--every must be one of {', '.join(EVERY)}")
    for flag, on in (("--resume", opts.resume),
                     ("--state-only", opts.state_only), ("--aggregates", opts.aggregates is not None),
                     ("--bootstrap-scheme rows", opts.bootstrap_scheme == "rows")):
        if on:
            raise ValueError(f"--by: does not combine with {flag} (a report per slice holds the main panel of "
                             "probabilities, with --user GAUC, with --field per-field metrics and with --oracle the "
                             "oracle metrics; run evaluate without --by for the rest)")
    if opts.score is None and opts.logit is None:
        raise ValueError("--by: give the model's probabilities with --score COL (or its logits with --logit COL)")
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
    check_option_range("--bins", opts.bins, (1, BINS_MAX))
    check_option_range("--hist-bins", opts.hist_bins, HIST_BINS_RANGE)
    check_option_range("--bootstrap", opts.bootstrap, (0, BOOTSTRAP_MAX))
    from calib_jax.logs.gauc import check_gauc_weight

    check_gauc_weight(opts.gauc_weight)
    model = opts.score if opts.score is not None else opts.logit
    assert model is not None
    if opts.by in (opts.label, model, opts.weight, opts.negative_rate_column):
        raise ValueError("--by must name another column than --label, --score (or --logit), --weight and "
                         "--negative-rate-column")
    check_rate_options(opts.negative_rate, opts.negative_rate_column)
    if opts.user is not None:
        if opts.user in (opts.label, model, opts.weight, opts.negative_rate_column):
            raise ValueError("--user must name another column than --label, --score (or --logit), --weight and "
                             "--negative-rate-column")
    if opts.oracle is not None and opts.oracle in (opts.label, model, opts.weight, opts.negative_rate_column, opts.by,
                                                   opts.user):
        raise ValueError("--oracle must name another column than --label, --score (or --logit), --weight, "
                         "--negative-rate-column, --by and --user (the true click probability of a simulated log)")
    fields = tuple(opts.field)
    if opts.by in fields:
        raise ValueError(f"--field: {opts.by!r} is the --by column (each slice holds one of its values); name "
                         "another column")
    if len(set(fields)) != len(fields):
        raise ValueError("--field: a column is named twice")
    for f in fields:  # as evaluate and compare refuse it: a level per click or per score value
        if f in (opts.label, model, opts.weight, opts.negative_rate_column, opts.oracle):
            raise ValueError(f"--field must name another column than --label, --score (or --logit), --weight, "
                             f"--oracle and --negative-rate-column (it names {f!r})")
    if fields and opts.max_levels < 1:
        raise ValueError("--max-levels must be >= 1")
    return SliceColumns(log=opts.log, label=opts.label, score=model, by=opts.by, weight=opts.weight,
                        logit=opts.score is None, negative_rate=opts.negative_rate,
                        negative_rate_column=opts.negative_rate_column, user=opts.user,
                        gauc_weight=opts.gauc_weight, fields=fields, oracle=opts.oracle)


def _cells_arrow(opts: EvaluateOptions, names: SliceColumns, settings: Settings
                 ) -> tuple[SliceCells, dict[str, Any] | None, dict[str, dict[str, Any]] | None]:
    import pyarrow as pa
    import pyarrow.compute as pc

    from calib_jax.logs import loaders
    from calib_jax.logs.common import one_file
    from calib_jax.logs.validate import Columns, Problems, clean_chunk

    path = one_file(names.log)
    fmt = loaders.resolve_format(path, opts.format)
    cols = Columns(label=names.label, score=None if names.logit else names.score,
                   logit=names.score if names.logit else None, weight=names.weight,
                   negative_rate=names.negative_rate, negative_rate_column=names.negative_rate_column,
                   oracle=names.oracle)
    problems = Problems()
    # streamed: each chunk's rows become (slice code, cell) sums at once, so memory holds cells, not rows
    n_cells = settings.hist_bins * settings.n_bins * 2
    codes: dict[str, int] = {}
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    rows = unparsable = numbers = 0
    # with --user: each valid row's slice code, user, score, label and weight (GAUC needs a
    # user's rows together: 24 bytes a row plus the user ids, in memory)
    kept: dict[str, list[Any]] = {"code": [], "user": [], "x": [], "y": [], "v": []}
    text = list(dict.fromkeys([names.by, *([names.user] if names.user is not None else []), *names.fields]))
    # with --field: one level counter per slice, fed the slice's rows in read order (its levels named
    # as evaluate --field names them on the slice's rows alone: the first max_levels met)
    counters: dict[int, Any] = {}
    # with --oracle: each slice code's largest |pi - p| so far (its Chebyshev distance)
    gaps: dict[Any, np.ndarray] | None = {} if names.oracle is not None else None
    ids = loaders.id_columns(names.user, [names.by, *names.fields])
    for batch in loaders.iter_batches(path, fmt, numeric=cols.numeric, text=text, chunk_rows=opts.chunk_rows, ids=ids):
        ch = clean_chunk(batch, cols, rows, problems)
        raw = batch.column(batch.schema.get_field_index(names.by))
        if opts.every is None:
            labels = pc.fill_null(raw.cast(pa.string()), MISSING_SLICE)
            bad_time = number = np.zeros(len(ch.keep), bool)
        else:
            ts = _parse_times(raw)
            given = pc.and_(pc.is_valid(raw), pc.not_equal(raw.cast(pa.string()), ""))  # empty: missing
            bad_time = np.asarray(pc.fill_null(pc.and_(given, pc.is_null(ts)), False).to_numpy(zero_copy_only=False),
                                  bool)
            number = bad_time & _number_mask(raw)  # never a time (_slice_expr): counted apart, as the engines do
            numbers += int(np.sum(number & ch.keep))
            # the buckets are encoded as times and only the distinct ones formatted (not every row)
            labels = pc.cast(pc.floor_temporal(ts, unit=opts.every, week_starts_monday=True), pa.timestamp("s"))
        keep = ch.keep & ~bad_time
        unparsable += int(np.sum(bad_time & ~number & ch.keep))
        rows += batch.num_rows
        enc = pc.dictionary_encode(labels).combine_chunks() if hasattr(labels, "combine_chunks") else \
            pc.dictionary_encode(labels)
        seen = enc.dictionary if opts.every is None else pc.strftime(enc.dictionary, format="%Y-%m-%d %H:%M:%S")
        local = np.asarray([codes.setdefault(str(x), len(codes)) for x in [*seen.to_pylist(), MISSING_SLICE]],
                           np.int64)
        at = pc.fill_null(enc.indices, len(seen)).to_numpy(zero_copy_only=False)  # null: the missing slice
        code = local[np.asarray(at, np.int64)][keep]
        pi = ch.oracle[keep] if ch.oracle is not None else None
        index, sums = _row_cells(ch.p[keep], ch.y[keep], ch.v[keep], settings, o=ch.o[keep] if names.logit else None,
                                 pi=pi)
        parts.append(_aggregate(code * n_cells + index, sums, np.ones(len(index))))
        if gaps is not None and pi is not None:
            _slice_top_gaps(code, np.abs(pi - ch.p[keep]), ch.v[keep] > 0, gaps)
        if names.user is not None:
            kept["code"].append(code)
            kept["user"].append(batch.column(batch.schema.get_field_index(names.user)).cast(pa.string())
                                .filter(pa.array(keep)))
            kept["x"].append((ch.o if names.logit else ch.p)[keep])
            kept["y"].append(ch.y[keep])
            kept["v"].append(ch.v[keep])
        if names.fields:
            _count_slice_fields(counters, batch, names.fields, local[np.asarray(at, np.int64)], ~bad_time, keep,
                                index, sums, settings, max_levels=opts.max_levels, y=ch.y[keep])
    dropped = problems.as_dict()
    times = {what: k for what, k in ((_BITS[8], unparsable), (_BITS[16], numbers)) if k}
    dropped.update(times)
    if (problems.bad_rows or times) and not opts.drop_invalid:
        roles = {names.oracle: "--oracle"} if names.oracle is not None else None
        what = "; ".join(filter(None, [problems.describe(roles),
                                       *(_problem_line(w, k, names.by) for w, k in times.items())]))
        raise ValueError(f"{path}: {what} — fix the log or pass --drop-invalid to drop them")
    if not parts or sum(float(q[2].sum()) for q in parts) == 0:
        raise ValueError(f"{path}: no valid rows (read {rows})")
    key, sums, n = _aggregate(np.concatenate([q[0] for q in parts]), np.concatenate([q[1] for q in parts]),
                              np.concatenate([q[2] for q in parts]))
    slice_names = np.asarray(list(codes), dtype=object)
    tops = None if gaps is None else {str(slice_names[c]): g for c, g in gaps.items()}
    cells = _group(slice_names[key // n_cells].astype(str), key % n_cells, sums, n, rows_read=rows, dropped=dropped,
                   source=str(path), top_gaps=tops)
    field_cells = ({str(slice_names[c]): counter.cells() for c, counter in counters.items()} if names.fields
                   else None)
    if names.user is None:
        return cells, None, field_cells
    users = pa.chunked_array(kept["user"], type=pa.string())
    return cells, slice_user_auc_sums(np.asarray(slice_names[np.concatenate(kept["code"])], str), users,
                                      *(np.concatenate(kept[c]) for c in ("x", "y", "v"))), field_cells


def _count_slice_fields(counters: dict[int, Any], batch: Any, fields: Sequence[str], code: np.ndarray,
                        member: np.ndarray, keep: np.ndarray, index: np.ndarray, sums: np.ndarray,
                        settings: Settings, *, max_levels: int, y: np.ndarray) -> None:
    """Add one chunk to each slice's field cell counter (the arrow engine's ``--by --field``):
    ``code`` the slice of every row, ``member`` the rows in a slice (every row read but those
    whose time does not parse), ``keep`` the valid ones, ``index``/``sums`` the main cells and
    sums of the kept rows (:func:`_row_cells`), ``y`` their labels."""
    import pyarrow as pa

    from calib_jax.logs.accumulate import FIELD_CELL_BINS
    from calib_jax.logs.paired_fields import FieldCellCounter

    hb = index // (2 * settings.n_bins)
    gb = (hb * FIELD_CELL_BINS // settings.hist_bins).astype(np.int64)[:, None]
    fsums = sums[:, [0, 1, 2, 5]][None]  # v, v p, v p², v log loss
    yk = np.asarray(y).astype(np.int64)
    kept_at = np.cumsum(keep) - 1  # a kept row's place among the kept rows
    rows = np.flatnonzero(member)
    rows = rows[np.argsort(code[rows], kind="stable")]  # by slice, read order within a slice
    if rows.size == 0:
        return
    cuts = np.flatnonzero(np.diff(code[rows])) + 1
    columns = {f: batch.column(batch.schema.get_field_index(f)).cast(pa.string()) for f in fields}
    for part in np.split(rows, cuts):
        c = int(code[part[0]])
        counter = counters.get(c)
        if counter is None:
            counter = counters[c] = FieldCellCounter(fields, 1, max_levels=max_levels)
        kmask = keep[part]
        at = kept_at[part[kmask]]
        take = pa.array(part)
        counter.add({f: columns[f].take(take) for f in fields}, kmask, gb[at], yk[at], fsums[:, at])


def slice_user_auc_sums(slices: np.ndarray, users: Any, scores: np.ndarray, labels: np.ndarray,
                        weights: np.ndarray | None = None) -> dict[str, Any]:
    r"""Each slice's GAUC sums computed on its rows alone (the arrow engine's path; NumPy): the
    users are coded once for the whole log (:func:`calib_jax.logs.gauc.user_codes`), the rows
    sorted by slice, and each slice's :class:`~calib_jax.logs.gauc.UserAUCSums` are
    :func:`calib_jax.logs.gauc.coded_user_auc_sums` of its rows, so a user with rows in
    several slices has one AUC :math:`A_{su}` per slice s, from that slice's rows.

    Args:
      slices: (n,) the slice label of each valid row.
      users: (n,) user ids (a pyarrow array with nulls for rows without a user, or anything
        ``np.unique`` sorts).
      scores: (n,) scores or logits (only their order within a user matters).
      labels: (n,) 0/1 labels.
      weights: optional (n,) non-negative row weights.

    Returns:
      Slice label -> :class:`~calib_jax.logs.gauc.UserAUCSums`.

    Example:
      >>> import numpy as np
      >>> from calib_jax.logs.gauc import gauc_entry
      >>> s = slice_user_auc_sums(np.array(["a", "a", "b", "b"]), np.array([1, 1, 1, 1]), np.array([.9, .1, .2, .8]),
      ...                         np.array([1., 0., 1., 0.]))
      >>> gauc_entry(s["a"])["value"], gauc_entry(s["b"])["value"]  # user 1 ranks well on a, badly on b
      (1.0, 0.0)
    """
    from calib_jax.logs.gauc import coded_user_auc_sums, user_codes

    slices = np.asarray(slices).astype(str)
    scores = np.asarray(scores, np.float64)
    labels = np.asarray(labels, np.float64)
    weights = np.ones_like(scores) if weights is None else np.asarray(weights, np.float64)
    codes, present = user_codes(users, scores.shape[0])
    names, sid = np.unique(slices, return_inverse=True)
    sid = sid.reshape(-1)
    order = np.argsort(sid, kind="stable")
    bounds = np.searchsorted(sid[order], np.arange(len(names) + 1))
    out = {}
    for k, name in enumerate(names):
        at = order[bounds[k]:bounds[k + 1]]
        out[str(name)] = coded_user_auc_sums(codes[at], present[at], scores[at], labels[at], weights[at])
    return out


def _number_mask(raw: Any) -> np.ndarray:
    """Where a value of a ``--by`` column is a number (a numeric type, or text matching
    :data:`NUMBER_PATTERN`): never a time, on every engine (:func:`_slice_expr`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_integer(raw.type) or pa.types.is_floating(raw.type) or pa.types.is_decimal(raw.type):
        return np.asarray(pc.is_valid(raw).to_numpy(zero_copy_only=False), bool)
    if pa.types.is_timestamp(raw.type) or pa.types.is_date(raw.type):
        return np.zeros(len(raw), bool)
    hit = pc.match_substring_regex(raw.cast(pa.string()), NUMBER_PATTERN)
    return np.asarray(pc.fill_null(hit, False).to_numpy(zero_copy_only=False), bool)


def _parse_times(raw: Any) -> Any:
    """Timestamps of a text or time column; a value that does not parse becomes null, and so
    does text that is not ISO 8601 (:data:`TIME_PATTERN`) and a number (a numeric column, or
    text that is a plain number: never a time, see :func:`_slice_expr`), which NumPy's parser
    below would read as a year (``2024``, and ``1700000000`` as a date of the year -3)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_timestamp(raw.type) or pa.types.is_date(raw.type):  # a zone-aware time: its UTC instant
        return pc.cast(raw, pa.timestamp("us", tz=raw.type.tz) if pa.types.is_timestamp(raw.type) and raw.type.tz
                       else pa.timestamp("us")).cast(pa.timestamp("us"))
    text = raw.cast(pa.string())
    text = pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text)  # an empty time is a missing one
    text = pc.if_else(pa.array(_number_mask(raw)), pa.scalar(None, pa.string()), text)  # a number is no time
    # ISO 8601 only (TIME_PATTERN), as the query engines read it: NumPy reads 2026-01 as a day
    text = pc.if_else(pc.match_substring_regex(text, TIME_PATTERN), text, pa.scalar(None, pa.string()))
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


def _numeric_columns(names: SliceColumns) -> list[str]:
    """The columns every slice query reads as numbers: label, score (or logit), weight, negative
    rate column and oracle, each once."""
    return list(dict.fromkeys([names.label, names.score, *[c for c in (names.weight, names.negative_rate_column,
                                                                      names.oracle) if c is not None]]))


def _gauc_sql(opts: EvaluateOptions, names: SliceColumns, engine: str) -> dict[str, Any]:
    """Each slice's GAUC sums by DuckDB or Spark: :func:`slice_gauc_sql`, a second scan of the log."""
    from calib_jax.logs import loaders
    from calib_jax.logs.engines import query_columns

    assert names.user is not None
    numeric = _numeric_columns(names)
    rows = query_columns(dataclasses.replace(opts, engine=engine), numeric, list(dict.fromkeys([names.by, names.user])),
                         lambda source, dialect: slice_gauc_sql(label=names.label, score=names.score,
                                                                weight=names.weight, by=names.by, every=opts.every,
                                                                user=names.user, source=source, dialect=dialect,
                                                                logit=names.logit, negative_rate=names.negative_rate,
                                                                negative_rate_column=names.negative_rate_column,
                                                                oracle=names.oracle),
                         ids=loaders.id_columns(names.user, [names.by]))
    return slice_gauc_from_result(rows)


def _fields_sql(opts: EvaluateOptions, names: SliceColumns, settings: Settings, engine: str
                ) -> dict[str, dict[str, Any]]:
    """Each slice's field cells by DuckDB or Spark: :func:`slice_field_cells_sql`, one more scan of the log."""
    from calib_jax.logs.engines import query_columns

    numeric = _numeric_columns(names)
    rows = query_columns(dataclasses.replace(opts, engine=engine), numeric, list(dict.fromkeys([names.by,
                                                                                              *names.fields])),
                         lambda source, dialect: slice_field_cells_sql(
                             settings, label=names.label, score=names.score, weight=names.weight, by=names.by,
                             every=opts.every, fields=names.fields, source=source, dialect=dialect,
                             logit=names.logit, negative_rate=names.negative_rate,
                             negative_rate_column=names.negative_rate_column, oracle=names.oracle))
    return slice_field_cells_from_result(rows, names.fields)


def _cells_sql(opts: EvaluateOptions, names: SliceColumns, settings: Settings, engine: str) -> SliceCells:
    from calib_jax.logs.engines import query_columns

    numeric = _numeric_columns(names)
    rows = query_columns(dataclasses.replace(opts, engine=engine), numeric, [names.by],
                         lambda source, dialect: slice_cells_sql(settings, label=names.label, score=names.score,
                                                                 weight=names.weight, by=names.by, every=opts.every,
                                                                 source=source, dialect=dialect, logit=names.logit,
                                                                 negative_rate=names.negative_rate,
                                                                 negative_rate_column=names.negative_rate_column,
                                                                 oracle=names.oracle))
    roles = {1: names.label, 2: names.score, 4: names.weight, 32: names.negative_rate_column}
    return slice_cells_from_result(rows, settings, source=str(opts.log), drop_invalid=opts.drop_invalid, by=names.by,
                                   logit=names.logit, oracle=names.oracle,
                                   columns={bit: col for bit, col in roles.items() if col is not None})


#: the files ``evaluate --by`` writes into ``--out``
SLICE_FILES = ("slices.json", "slices.csv", "slices.md", "drift.png")


def output_files(out: Path, *, fields: bool = False) -> tuple[Path, ...]:
    """Every file :func:`run_slices` writes into the folder ``out`` (its output guard's plan):
    :data:`SLICE_FILES`, and with ``fields`` (``--field``) :data:`FIELDS_FILE` last.

    Example:
      >>> [p.name for p in output_files(Path("o"))]
      ['slices.json', 'slices.csv', 'slices.md', 'drift.png']
      >>> output_files(Path("o"), fields=True)[-1].name
      'slices_fields.csv'
    """
    return tuple(out / f for f in (*SLICE_FILES, *((FIELDS_FILE,) if fields else ())))


def _time_slice_label(baseline: str | None) -> str | None:
    """A ``--baseline`` of ``--every`` written as any ISO 8601 date or time (``2026-03-01``,
    ``2026-03-01T00:00``, ``2026-03-01T02:00+02:00``) in the slices' own spelling,
    ``YYYY-MM-DD HH:MM:SS`` in UTC; text that is no time is returned as given (the caller then
    says it is no slice, naming the first and last).

    Example:
      >>> _time_slice_label("2026-03-01"), _time_slice_label("2026-03-01T02:00+02:00"), _time_slice_label("x")
      ('2026-03-01 00:00:00', '2026-03-01 00:00:00', 'x')
    """
    import datetime as dt

    if baseline is None:
        return None
    try:
        t = dt.datetime.fromisoformat(baseline.strip())
    except ValueError:
        return baseline
    if t.tzinfo is not None:
        t = t.astimezone(dt.UTC).replace(tzinfo=None)
    return t.strftime("%Y-%m-%d %H:%M:%S")

def run_slices(opts: EvaluateOptions, engine: str) -> dict[str, Any]:
    """``evaluate --by``: the cells per slice, each slice's metrics with intervals, the change
    flags against the baseline; writes :data:`SLICE_FILES` (``slices.{json,csv,md}`` and
    ``drift.png``, with ``--field`` also :data:`FIELDS_FILE`; the CSVs' text inert to spreadsheets,
    :func:`calib_jax.logs.common.write_csv`)."""
    from calib_jax import io as cio
    from calib_jax.logs.common import finite_or_none, out_dir, plain_figure_text, say, write_csv
    from calib_jax.logs.panel import ORACLE_METRICS, interval
    from calib_jax.logs.report import oracle_metric_entries
    from calib_jax.logs.validate import check_slice_weights

    t0 = time.perf_counter()
    names = check_args(opts)
    settings = Settings(n_boot=opts.bootstrap, seed=opts.seed, n_bins=opts.bins, hist_bins=opts.hist_bins,
                        scheme="cells", negative_rate=names.negative_rate,
                        negative_rate_column=names.negative_rate_column, max_levels=opts.max_levels)
    out = out_dir(Path(opts.out))
    try:
        if engine == "arrow":
            cells, gauc_sums, field_cells = _cells_arrow(opts, names, settings)
        else:
            cells = _cells_sql(opts, names, settings, engine)
            gauc_sums = _gauc_sql(opts, names, engine) if names.user is not None else None
            field_cells = _fields_sql(opts, names, settings, engine) if names.fields else None
    except ValueError as e:  # a user, field or oracle column is not in the log: the message names the option
        if names.user is not None and f"column {names.user!r} not found" in str(e):
            raise ValueError(f"--user: {e}") from None
        if names.oracle is not None and any(f"column {names.oracle!r} {what}" in str(e)
                                            for what in ("not found", "cannot be read as numbers")):
            raise ValueError(f"--oracle: {e}") from None
        for f in names.fields:
            if f"column {f!r} not found" in str(e):
                raise ValueError(f"--field: {e}") from None
        raise
    check_slice_weights(cells, source=str(opts.log), column=opts.weight)  # as plain evaluate: 0 or out of range
    if not opts.every:
        warn_if_respelled(str(opts.log), str(opts.by), [str(s) for s in cells.slices], "--by")
    baseline = _time_slice_label(opts.baseline) if opts.every and opts.baseline not in cells.slices else opts.baseline
    if baseline is None:
        base = 0
    elif baseline in cells.slices:
        base = cells.slices.index(baseline)
    else:
        raise ValueError(f"--baseline {opts.baseline!r} is not a slice of the log (first: {cells.slices[0]!r}, "
                         f"last: {cells.slices[-1]!r})")
    metrics = slice_metrics(cells, settings)
    # a rate per row: the kept rows' clicks are not in the cells, so no permutation test (docs)
    tested = len(cells.slices) > 1 and names.negative_rate_column is None
    flags = drift_flags(cells, settings, base, alpha=opts.alpha, metrics=metrics) if tested else []
    table = []
    for k, name in enumerate(cells.slices):
        row: dict[str, Any] = {"slice": name, "rows": int(cells.cells[k][2].sum()), "baseline": k == base}
        for metric in DRIFT_METRICS:  # undefined (e.g. NE of a slice with one class): null, not NaN
            row[metric] = dict(zip(("value", "lo", "hi"), finite_or_none(interval(metrics[k][metric])), strict=True))
        if cells.oracle:  # as evaluate --oracle reports them on the slice's rows (its seed stream)
            entries = oracle_metric_entries({m: metrics[k][m] for m in ORACLE_METRICS})
            for metric in ORACLE_METRICS:
                row[metric] = {key: entries[metric][key] for key in ("value", "lo", "hi")}
        if gauc_sums is not None:  # GAUC of the slice's rows alone, as evaluate --user reports it
            row["gauc"] = _slice_gauc_entry(gauc_sums.get(name), names.gauc_weight)
        if field_cells is not None:  # per-field metrics of the slice's rows alone, as evaluate --field
            row["fields"] = slice_field_entries(_slice_fields_or_empty(field_cells.get(name), names.fields),
                                                n_boot=opts.bootstrap, seed=opts.seed)
        row["changed"] = sorted(f["metric"] for f in flags if f["slice"] == k and f["flag"])
        row["too_small"] = sorted(f["metric"] for f in flags if f["slice"] == k and f["status"] == "too small")
        table.append(row)
    wall = time.perf_counter() - t0
    result = {
        "by": opts.by, "every": opts.every, "baseline": cells.slices[base], "alpha": opts.alpha,
        "input": {"path": str(opts.log), "label": opts.label, "score": opts.score, "logit": opts.logit,
                  "weight": opts.weight, "negative_rate": names.negative_rate,
                  "negative_rate_column": names.negative_rate_column, "user": names.user,
                  "gauc_weight": names.gauc_weight if names.user is not None else None,
                  "fields": list(names.fields), "max_levels": opts.max_levels if names.fields else None,
                  "oracle": names.oracle,
                  "rows_read": cells.rows_read, "rows_used": cells.rows_used, "dropped": dict(cells.dropped)},
        "slices": table,
        "changes": [{**f, "slice": cells.slices[f["slice"]], "diff": finite_or_none((f["diff"],))[0]} for f in flags],
        "method": (("no change flags: the negatives' rate varies by row (column "
                    f"{names.negative_rate_column!r}), and the permutation test draws the kept rows' clicks, which "
                    "the cells do not hold; give one --negative-rate to test. "
                    if names.negative_rate_column is not None else "")
                   + "change: did P(click | score) change from the baseline? a conditional permutation test per slice "
                   "(its clicks drawn hypergeometric within score strata pooled with the baseline's, each metric's "
                   f"difference recomputed on every draw), flagged at a two-sided p-value <= {opts.alpha}/(S - 1) "
                   "(Bonferroni over slices); too small: no outcome of the slice could be significant; intervals: "
                   f"cell bootstrap per slice (B = {opts.bootstrap}, independent seeds)"
                   + (f"; GAUC (users weighted by {names.gauc_weight}): each slice's own, from its rows alone (a user "
                      "in several slices counts in each), with the delta-method interval over its users; not "
                      "flagged" if names.user is not None else "")
                   + ("; per-field metrics (GCE, Field-ECE, Field-RCE, |bias| over each field's levels): each "
                      "slice's own, as evaluate --field computes them on its rows alone (its levels ranked within "
                      "the slice, its field cells drawn from evaluate's streams [seed, 'cell', r, 1 + i]); not "
                      "flagged" if names.fields else "")
                   + (f"; oracle metrics against the true click probability {names.oracle!r} (oracle Brier, Brier+ "
                      "= mean |pi - p|, KL(pi || p), Chebyshev = max |pi - p|, Pearson): each slice's own, as "
                      "evaluate --oracle computes them on its rows alone, with the percentile intervals of the "
                      "slice's cell bootstrap (its seed; Chebyshev drawn from the slice's 32 largest gaps); not "
                      "flagged" if names.oracle is not None else "")),
        "provenance": cio.provenance({"command": "evaluate --by", **settings.to_dict()}, seed=opts.seed,
                                     wall_time_s=wall),
    }
    json_path, csv_path, md_path, png_path = output_files(out)[:4]
    cio.write_json(json_path, result, allow_nan=False)
    cell = lambda x: "" if x is None else x  # noqa: E731
    with_gauc = gauc_sums is not None
    shown = (*DRIFT_METRICS, *(ORACLE_METRICS if cells.oracle else ()))  # each with its interval
    header = ["slice", "rows", *[f"{m}{s}" for m in shown for s in ("", "_lo", "_hi")],
              *(["gauc", "gauc_lo", "gauc_hi", "gauc_users"] if with_gauc else []), "changed", "too_small"]
    csv_rows = [[r["slice"], r["rows"], *[cell(r[m][s]) for m in shown for s in ("value", "lo", "hi")],
                 *([cell(r["gauc"][s]) for s in ("value", "lo", "hi", "users")] if with_gauc else []),
                 " ".join(r["changed"]), " ".join(r["too_small"])] for r in table]
    write_csv(csv_path, header, csv_rows)
    if names.fields:  # long: one row per (slice, field, metric)
        write_csv(out / FIELDS_FILE, list(FIELD_ROW_COLUMNS),
                  [[cell(x) for x in row] for row in slice_field_rows(result)])
    cio.atomic_write_text(md_path, _markdown(result))
    with plain_figure_text():  # a slice named 'a$x$' is drawn as written, not as mathtext
        cio.atomic_write_bytes(png_path, _drift_png(result))
    moved = [r for r in table if r["changed"]]
    say(f"{opts.log}: {len(table)} slices by {opts.by}{f' (every {opts.every})' if opts.every else ''}, "
         f"{cells.rows_used:,} rows; baseline {cells.slices[base]}")
    for r in moved:
        say(f"  changed: {r['slice']} ({', '.join(r['changed'])})")
    small = [r["slice"] for r in table if r["too_small"]]
    if small:
        say(f"  too small to test: {len(small)} slice{'s' if len(small) > 1 else ''} ({', '.join(small[:5])}"
            f"{', ...' if len(small) > 5 else ''})")
    if not moved and flags:
        say(f"  no slice changed from the baseline ({1 - opts.alpha:.0%} family-wise, per metric)")
    say(f"  report: {md_path}  ({wall:.1f} s)")
    return result



def _slice_fields_or_empty(cells: Mapping[str, Any] | None, fields: Sequence[str]) -> dict[str, Any]:
    """A slice's field cells, each field in ``--field`` order; a field without cells (a slice
    with no valid row) gets none, so its metrics are undefined."""
    from calib_jax.logs.accumulate import FIELD_STATS
    from calib_jax.logs.paired_fields import JointFieldCells

    cells = cells or {}
    empty = lambda f: JointFieldCells(f, (), np.zeros(0, np.int64), np.zeros((0, 1), np.int64),  # noqa: E731
                                      np.zeros(0, np.int64), np.zeros(0), np.zeros((1, 0, FIELD_STATS)))
    return {f: cells[f] if f in cells else empty(f) for f in fields}


#: the long per-field file of ``evaluate --by --field`` and its columns
FIELDS_FILE = "slices_fields.csv"
FIELD_ROW_COLUMNS = ("slice", "field", "metric", "value", "lo", "hi", "plug_in")


def slice_field_rows(result: Mapping[str, Any]) -> list[list[Any]]:
    """The rows of ``slices_fields.csv`` from ``slices.json``'s content: one per (slice, field,
    metric), columns :data:`FIELD_ROW_COLUMNS` (``None`` where undefined); none without ``--field``.

    Args:
      result: ``slices.json``'s content.

    Returns:
      A list of rows.

    Example:
      >>> r = {"slices": [{"slice": "d1", "fields": {"site": {"field_ece": {"value": .1, "lo": .05, "hi": .2,
      ...                                                                  "plug_in": .12}}}}]}
      >>> slice_field_rows(r)
      [['d1', 'site', 'field_ece', 0.1, 0.05, 0.2, 0.12]]
    """
    return [[r["slice"], f, m, e.get("value"), e.get("lo"), e.get("hi"), e.get("plug_in")]
            for r in result["slices"] for f, ms in r.get("fields", {}).items() for m, e in ms.items()]


def _slice_gauc_entry(sums: Any, user_weight: str) -> dict[str, Any]:
    """A slice's GAUC entry (:func:`calib_jax.logs.gauc.gauc_entry` without its ``name``): a
    slice without sums (no valid row) has no user, so its GAUC is undefined."""
    from calib_jax.logs.gauc import USER_WEIGHTS, UserAUCSums, gauc_entry

    if sums is None:
        sums = UserAUCSums(users=0, skipped=0, rows_without_user=0, weight_users=0.0, weight_total=0.0,
                           moments={w: (0.0,) * 5 for w in USER_WEIGHTS})
    return {k: v for k, v in gauc_entry(sums, user_weight).items() if k != "name"}


def _markdown(result: Mapping[str, Any]) -> str:
    from calib_jax.logs.downsampling import rate_note
    from calib_jax.logs.panel import ORACLE_METRICS
    from calib_jax.logs.report import md_cell

    fmt = lambda e: "" if e["value"] is None else (  # noqa: E731
        f"{e['value']:.4g}" + (f" [{e['lo']:.4g}, {e['hi']:.4g}]" if e["lo"] is not None else ""))
    lines = ["# Calibration per slice", "", f"{md_cell(result['input']['path'])} by {md_cell(result['by'])}"
             + (f" every {result['every']}" if result["every"] else "") + f"; baseline {md_cell(result['baseline'])}; "
             + md_cell(result["method"]) + ".", ""]
    if result["input"].get("negative_rate") is not None or result["input"].get("negative_rate_column") is not None:
        lines += [rate_note(result["input"].get("negative_rate"), result["input"].get("negative_rate_column")), ""]
    with_gauc = result["input"].get("user") is not None
    shown = (*DRIFT_METRICS, *(ORACLE_METRICS if result["input"].get("oracle") is not None else ()))
    gauc = lambda e: (fmt(e) + f" ({e['users']} users)" if e["value"] is not None  # noqa: E731
                      else md_cell(e.get("value_undefined") or ""))
    lines += ["![drift](drift.png)", "",
              "| slice | rows | " + " | ".join(shown) + (" | gauc" if with_gauc else "")
              + " | changed | too small to test |",
              "|---" * (len(shown) + 4 + with_gauc) + "|"]
    for r in result["slices"]:
        lines.append(f"| {md_cell(r['slice'])}{' (baseline)' if r['baseline'] else ''} | {r['rows']} | "
                     + " | ".join(fmt(r[m]) for m in shown) + (f" | {gauc(r['gauc'])}" if with_gauc else "")
                     + f" | {', '.join(r['changed'])} | {', '.join(r['too_small'])} |")
    for f in result["input"].get("fields") or ():  # --field: each field's metrics per slice (not flagged)
        metrics = next((list(r["fields"][f]) for r in result["slices"] if r.get("fields", {}).get(f)), [])
        lines += ["", f"## Field {md_cell(f)}", "",
                  f"Each slice's metrics over the levels of {md_cell(f)} (reported, not flagged).", "",
                  "| slice | " + " | ".join(metrics) + " |", "|---" * (len(metrics) + 1) + "|"]
        for r in result["slices"]:
            per = r.get("fields", {}).get(f, {})
            lines.append(f"| {md_cell(r['slice'])} | " + " | ".join(fmt(per[m]) if m in per else "" for m in metrics)
                         + " |")
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
