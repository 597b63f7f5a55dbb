r"""The statistics of ``calib-jax evaluate`` as one SQL aggregate, for any engine.

Everything ``evaluate`` needs from a log is a set of sums over *cells* (see
:mod:`calib_jax.logs.accumulate`): per main cell — fine logit bin :math:`h` of the grid of
H bins on :math:`[-L, L]`, equal-width probability bin :math:`r` of M, label :math:`y` —
the row count and :math:`\sum v\,[1,\ p,\ p^2,\ o,\ (y-p)^2,\ \ell,\ |y-p|]` (with an oracle
CTR :math:`\pi` also :math:`\sum v\,[(\pi-p)^2,\ |\pi-p|,\ \mathrm{KL}(\pi\|p),\ \pi,\
\pi^2,\ p\pi]`); per field level, coarse logit bin (64 on the same range) and label the
count and :math:`\sum v\,[1,\ p,\ p^2,\ \ell]`; and the 32 largest :math:`|\pi - p|`.
These are a ``GROUP BY``, so :func:`statistics_sql` writes them as one query that an
in-process engine (DuckDB), a cluster (Spark) or a warehouse (BigQuery) runs where the log
lives; :func:`accumulator_from_aggregates` turns its result table into the
:class:`~calib_jax.logs.accumulate.Accumulator` from which the metrics, decompositions,
intervals and the report are computed as for the streamed (arrow) path.

The query applies the arrow path's row checks (:mod:`calib_jax.logs.validate`): each row
gets a bit mask ``bad`` of its problems (label missing / not 0-1, score missing / outside
[0, 1] or logit missing / not finite, weight missing / negative or infinite, oracle missing
/ outside [0, 1]), which is a grouping column of the main cells, so the result counts the
rows of every problem and invalid rows enter no sum. Scores become logits as
:func:`calib_jax.logs.validate.to_logit` does (clipped to [1e-12, 1 - 1e-12]) and the
log loss from logits is the stable softplus.

One result table (long format; column ``kind``):

* ``settings`` — one row; ``level`` holds the query's settings (base64 of JSON), so a result
  exported from a warehouse is self-describing (``evaluate --aggregates``).
* ``cell`` — ``bin`` = h, ``rb`` = r, ``y``, ``bad``, ``n`` and the sums ``sv ... sppi``.
* ``field`` — ``fid`` (the field's index), ``level``, ``bin`` = coarse bin, ``y``, ``bad``,
  ``n`` and ``sv, svp, svpp, snll``. A field keeps its ``max_levels`` levels with the most
  rows (ties by name); the others are summed into ``__other__``; missing values are the level
  ``__missing__``. (The arrow engine, which streams, keeps the first ``max_levels`` values it
  meets instead; both agree whenever a field has at most ``max_levels`` levels.)
* ``gap`` — the 32 largest :math:`|\pi - p|` of kept rows with positive weight (``sv``).
* ``gauc`` — with a user column (``QueryColumns.user``), the sums of GAUC over users: one
  row per user weighting and one of counts (:func:`calib_jax.logs.gauc.gauc_sql_parts`),
  computed exactly with a running sum within each user.

Differences from the arrow path are float rounding only: sums are added in another order
(float64 throughout) and SQL has no ``log1p``, so :math:`\log(1-p)` is ``ln(1 - p)``
(absolute error below 1.2e-16 per row). Counts are exact.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from calib_jax.logs.accumulate import (
    CELL_COLS,
    CELL_ORACLE_COLS,
    FIELD_CELL_BINS,
    FIELD_STATS,
    MAX_ELEMENTS,
    MISSING,
    OTHER,
    Accumulator,
    Settings,
)
from calib_jax.logs.arrow_values import fixed_width_values, null_mask
from calib_jax.logs.downsampling import MIN_RATE, OUTSIDE_RATES, check_rate_options, weight_items_sql
from calib_jax.logs.gauc import KIND as GAUC_KIND
from calib_jax.logs.gauc import gauc_sql_parts
from calib_jax.logs.loaders import reserved_level_message
from calib_jax.logs.validate import check_field_cells, check_field_totals, check_main_cells, check_weight_total

__all__ = [
    "DIALECTS",
    "QueryColumns",
    "PROBLEM_BITS",
    "statistics_sql",
    "logit_row_sql",
    "accumulator_from_aggregates",
    "problems_from_aggregates",
    "query_settings",
    "query_settings_of",
    "first_problem_rows_sql",
    "columns_of_result",
    "RESULT_COLUMNS",
    "OWN_TAGS",
    "own_message",
    "reserved_level_sql",
]

_P_CLIP = 1e-12
_TOP_GAPS = 32
#: the problem of each bit of ``bad`` (column role, reason), as the arrow path words them
PROBLEM_BITS: tuple[tuple[str, str], ...] = (
    ("label", "missing or NaN"), ("label", "not in {0, 1}"),
    ("score", "missing or NaN"), ("score", "outside [0, 1]"),
    ("logit", "missing or NaN"), ("logit", "not finite"),
    ("weight", "missing or NaN"), ("weight", "negative or not finite"),
    ("oracle", "missing or NaN"), ("oracle", "outside [0, 1]"),
    ("negative_rate_column", "missing or NaN"), ("negative_rate_column", OUTSIDE_RATES),
)
_SUMS = ("sv", "svp", "svpp", "svo", "sbrier", "snll", "smae")
_ORACLE_SUMS = ("soracle_brier", "soracle_mae", "skl", "spi", "spipi", "sppi")
#: columns of the result table, in order
RESULT_COLUMNS = ("kind", "fid", "level", "bin", "rb", "y", "bad", "n", *_SUMS, *_ORACLE_SUMS)


@dataclasses.dataclass(frozen=True)
class _Dialect:
    name: str
    double: str
    bigint: str
    string: str
    quote: Callable[[str], str]
    isnan: str  # format string with {x}
    isinf: str
    literal: Callable[[str], str]  # a string literal of any text
    raise_error: str  # the function that stops the query with a message


def _q_double(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _q_backtick(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _q_bigquery(name: str) -> str:
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


def _literal_doubled(s: str) -> str:
    """A DuckDB string literal: a quote written twice, every other character as it is."""
    return "'" + s.replace("'", "''") + "'"


def _literal_escaped(s: str) -> str:
    """A Spark or BigQuery string literal: backslash escapes (both read them in literals)."""
    s = s.replace("\\", "\\\\").replace("'", "\\'")
    return "'" + s.replace("\n", "\\n").replace("\r", "\\r") + "'"


#: the three dialects, written by hand (a type name each, identifier quoting, NaN/inf tests);
#: the tests parse every query under its dialect's grammar with sqlglot, and run the BigQuery
#: text transpiled to DuckDB against the native DuckDB query (tests/test_sql_engines.py)
DIALECTS: dict[str, _Dialect] = {
    "duckdb": _Dialect("duckdb", "DOUBLE", "BIGINT", "VARCHAR", _q_double, "isnan({x})", "isinf({x})",
                       _literal_doubled, "error"),
    "spark": _Dialect("spark", "DOUBLE", "BIGINT", "STRING", _q_backtick, "isnan({x})",
                      "abs({x}) = CAST('Infinity' AS DOUBLE)", _literal_escaped, "raise_error"),
    "bigquery": _Dialect("bigquery", "FLOAT64", "INT64", "STRING", _q_bigquery, "IS_NAN({x})", "IS_INF({x})",
                         _literal_escaped, "ERROR"),
}

#: calib-jax's own message inside an engine's error (a value that is not a number, a level column
#: holding a reserved level name) stands between these two tags (:func:`own_message` reads it)
OWN_TAGS = ("<calib-jax>", "</calib-jax>")


def own_message(text: str) -> str | None:
    """calib-jax's own message inside an engine's error text (between :data:`OWN_TAGS`), if any.

    Args:
      text: the text of the engine's exception.

    Returns:
      The message, or ``None`` when ``text`` holds none.

    Example:
      >>> own_message("Invalid Input Error: <calib-jax>column 'a' holds ...</calib-jax>")
      "column 'a' holds ..."
      >>> own_message("Binder Error: no such column") is None
      True
    """
    i = text.find(OWN_TAGS[0])
    if i < 0:
        return None
    j = text.find(OWN_TAGS[1], i)
    return text[i + len(OWN_TAGS[0]):j if j > 0 else None].strip()


def reserved_level_sql(name: str, value: str, dialect: str) -> str:
    """A SQL expression of the text expression ``value`` of level column ``name`` (a field, a
    slice) that stops the query, naming the column and the value, where a value is spelled as a
    reserved level name (:data:`calib_jax.logs.loaders.RESERVED_LEVELS`: a report's name for rows
    without a value and for the levels beyond ``--max-levels``), else ``value``; NULL stays NULL.

    Args:
      name: the column's name, for the message.
      value: the SQL text of the column's values as text.
      dialect: ``"duckdb"``, ``"spark"`` or ``"bigquery"``.

    Returns:
      The SQL expression.

    Example:
      >>> sql = reserved_level_sql("site", '"site"', "duckdb")
      >>> sql.startswith('CASE WHEN "site" IN (') and sql.endswith('ELSE "site" END')
      True
    """
    d = DIALECTS[dialect]
    says = {v: d.literal(OWN_TAGS[0] + reserved_level_message(name, v) + OWN_TAGS[1]) for v in (MISSING, OTHER)}
    return (f"CASE WHEN {value} IN ({d.literal(MISSING)}, {d.literal(OTHER)}) THEN CAST({d.raise_error}(CASE WHEN "
            f"{value} = {d.literal(MISSING)} THEN {says[MISSING]} ELSE {says[OTHER]} END) AS {d.string}) "
            f"ELSE {value} END")


@dataclasses.dataclass(frozen=True)
class QueryColumns:
    """The columns a statistics query reads (``score`` xor ``logit``), as in
    :class:`calib_jax.logs.validate.Columns`."""

    label: str
    score: str | None = None
    logit: str | None = None
    weight: str | None = None
    oracle: str | None = None
    fields: tuple[str, ...] = ()
    #: the user column of GAUC (:mod:`calib_jax.logs.gauc`), or None
    user: str | None = None
    #: the kept-negative rate (:mod:`calib_jax.logs.downsampling`): label-0 rows weigh 1/rate
    negative_rate: float | None = None
    #: or the column of each row's rate
    negative_rate_column: str | None = None

    def __post_init__(self) -> None:
        if (self.score is None) == (self.logit is None):
            raise ValueError("give exactly one of --score COL (probabilities) or --logit COL")
        check_rate_options(self.negative_rate, self.negative_rate_column)

    @classmethod
    def of(cls, cols: Any) -> QueryColumns:
        return cls(label=cols.label, score=cols.score, logit=cols.logit, weight=cols.weight, oracle=cols.oracle,
                   fields=tuple(cols.fields), user=getattr(cols, "user", None),
                   negative_rate=getattr(cols, "negative_rate", None),
                   negative_rate_column=getattr(cols, "negative_rate_column", None))

    @property
    def weighted(self) -> bool:
        """Whether rows carry weights (a weight column, a kept-negative rate or both)."""
        return self.weight is not None or self.negative_rate is not None or self.negative_rate_column is not None

    @property
    def text(self) -> tuple[str, ...]:
        """The columns read as text: the fields, then the user column."""
        return tuple(dict.fromkeys([*self.fields, *([self.user] if self.user is not None else [])]))


def float_literal(x: float) -> str:
    """A float literal that every dialect reads as this exact double (``repr`` of the double,
    with a ``.0`` where it has no point or exponent)."""
    r = repr(float(x))
    return r if ("." in r or "e" in r) else r + ".0"


def query_settings(settings: Settings, columns: QueryColumns) -> dict[str, Any]:
    """What a statistics query depends on (its result is valid for any bootstrap)."""
    cols = dataclasses.asdict(columns) | {"fields": list(columns.fields)}
    if columns.user is None:  # the settings of a query without GAUC, as before it existed
        del cols["user"]
    for k in ("negative_rate", "negative_rate_column"):  # nor without a kept-negative rate
        if cols[k] is None:
            del cols[k]
    return {"version": 1, "columns": cols,
            "n_bins": settings.n_bins, "hist_bins": settings.hist_bins, "logit_range": settings.logit_range,
            "max_levels": settings.max_levels}


def _checked_ctes(columns: QueryColumns, source: str, d: _Dialect, *, row_number: bool = False) -> list[str]:
    """The ``src`` (typed columns) and ``chk`` (with the problem mask ``bad``) CTEs."""
    q = d.quote
    nan = lambda x: d.isnan.format(x=x)
    missing = lambda x: f"({x} IS NULL OR {nan(x)})"
    fields = list(columns.fields)
    fnames = [f"f{i}" for i in range(len(fields))]
    src_cols = [f"CAST({q(columns.label)} AS {d.double}) AS y_in",
                f"CAST({q(columns.score or columns.logit or '')} AS {d.double}) AS x_in"]
    cast = lambda c: None if c is None else f"CAST({q(c)} AS {d.double})"  # noqa: E731
    src_cols += weight_items_sql(f"CAST({q(columns.label)} AS {d.double})", cast(columns.weight), columns.negative_rate,
                                 cast(columns.negative_rate_column))  # the population weight of a kept row
    if columns.oracle is not None:
        src_cols.append(f"CAST({q(columns.oracle)} AS {d.double}) AS pi_in")
    # a field's value spelled as a reserved level name stops the query (the warehouse's query of
    # `calib-jax sql` included); a missing value is the level MISSING
    src_cols += [f"COALESCE({reserved_level_sql(f, f'CAST({q(f)} AS {d.string})', d.name)}, '{MISSING}') AS {g}"
                 for f, g in zip(fields, fnames)]
    if columns.user is not None:  # GAUC's user: NULL stays NULL (a row without a user)
        src_cols.append(f"CAST({q(columns.user)} AS {d.string}) AS u_in")
    if row_number:
        src_cols.insert(0, "row_number() OVER () AS rn")
    bit = {k: 1 << i for i, k in enumerate(PROBLEM_BITS)}
    masks = [f"CASE WHEN {missing('y_in')} THEN {bit[('label', 'missing or NaN')]} "
             f"WHEN y_in <> 0 AND y_in <> 1 THEN {bit[('label', 'not in {0, 1}')]} ELSE 0 END"]
    if columns.score is not None:
        masks.append(f"CASE WHEN {missing('x_in')} THEN {bit[('score', 'missing or NaN')]} "
                     f"WHEN x_in < 0 OR x_in > 1 THEN {bit[('score', 'outside [0, 1]')]} ELSE 0 END")
    else:
        masks.append(f"CASE WHEN {missing('x_in')} THEN {bit[('logit', 'missing or NaN')]} "
                     f"WHEN {d.isinf.format(x='x_in')} THEN {bit[('logit', 'not finite')]} ELSE 0 END")
    if columns.weight is not None:
        masks.append(f"CASE WHEN {missing('w_in')} THEN {bit[('weight', 'missing or NaN')]} "
                     f"WHEN w_in < 0 OR {d.isinf.format(x='w_in')} THEN {bit[('weight', 'negative or not finite')]} "
                     "ELSE 0 END")
    if columns.oracle is not None:
        masks.append(f"CASE WHEN {missing('pi_in')} THEN {bit[('oracle', 'missing or NaN')]} "
                     f"WHEN pi_in < 0 OR pi_in > 1 THEN {bit[('oracle', 'outside [0, 1]')]} ELSE 0 END")
    if columns.negative_rate_column is not None:
        masks.append(f"CASE WHEN {missing('r_in')} THEN {bit[('negative_rate_column', 'missing or NaN')]} "
                     f"WHEN r_in < {MIN_RATE!r} OR r_in > 1 THEN {bit[('negative_rate_column', OUTSIDE_RATES)]} "
                     "ELSE 0 END")
    return [f"src AS (SELECT {', '.join(src_cols)} FROM {source})",
            f"chk AS (SELECT *, {' + '.join(f'({m})' for m in masks)} AS bad FROM src)"]


def logit_row_sql(o: str, t: str) -> tuple[str, str]:
    r"""The SQL of a row's probability and log loss from its logit, as every query of a logit
    column computes them: :math:`p = 1/(1 + e^{-o})` with :math:`e^{-o}` capped below overflow,
    and the log loss :math:`\mathrm{softplus}(t) = \max(t, 0) + \ln(1 + e^{-|t|})` of
    :math:`t = -o\,(2y - 1)` (exact where :math:`\ln\sigma` would round to 0 or overflow).

    Args:
      o: the SQL expression of the logit.
      t: the SQL expression of :math:`-o\,(2y - 1)`.

    Returns:
      ``(p, nll)``: the two SQL expressions.

    Example:
      >>> logit_row_sql("o", "t")[0]
      '1.0 / (1.0 + exp(LEAST(-o, 700.0)))'
    """
    return f"1.0 / (1.0 + exp(LEAST(-{o}, 700.0)))", f"GREATEST({t}, 0.0) + ln(1.0 + exp(-abs({t})))"


def first_problem_rows_sql(columns: QueryColumns, *, source: str, dialect: str = "duckdb") -> str:
    """A query of the first row (0-based, in the source's order) with each problem mask: its
    result is ``(bad, first)`` per mask. Meaningful only where ``row_number() OVER ()``
    follows the source's order (DuckDB's scans of one file do)."""
    d = DIALECTS[dialect]
    return ("WITH " + ",\n".join(_checked_ctes(columns, source, d, row_number=True))
            + "\nSELECT bad, min(rn) - 1 AS first FROM chk WHERE bad <> 0 GROUP BY bad")


def statistics_sql(settings: Settings, columns: QueryColumns, *, source: str, dialect: str = "duckdb") -> str:
    """The SQL query of every statistic ``evaluate`` needs from a log (module docstring).

    Args:
      settings: the evaluation's settings (bins, logit grid, levels; the bootstrap settings
        do not enter the query).
      columns: the log's label, score or logit, weight, oracle and field columns.
      source: the ``FROM`` item, inserted as given: a table or view name already quoted as
        the dialect needs, or a table function such as ``read_parquet('logs/*.parquet')``.
      dialect: ``"duckdb"``, ``"spark"`` or ``"bigquery"``.

    Returns:
      The query text; its result has the columns :data:`RESULT_COLUMNS`.

    Example:
      >>> from calib_jax.logs.accumulate import Settings
      >>> q = statistics_sql(Settings(), QueryColumns(label="click", score="pctr"), source="events")
      >>> "GROUPING SETS" in q and q.count("FROM events") == 1
      True
    """
    if dialect not in DIALECTS:
        raise ValueError(f"dialect must be one of {sorted(DIALECTS)}, got {dialect!r}")
    if columns.fields != settings.fields or (columns.oracle is not None) != settings.oracle:
        raise ValueError("the settings' fields and oracle must match the columns")
    d = DIALECTS[dialect]
    H, M, L, K = settings.hist_bins, settings.n_bins, float(settings.logit_range), settings.max_levels
    fnames = [f"f{i}" for i in range(len(columns.fields))]
    keep_f = ", ".join(fnames)
    keep_f = keep_f + ", " if keep_f else ""
    safe_x = "0.5" if columns.score is not None else "0.0"
    clean = ["CASE WHEN bad = 0 THEN y_in ELSE 0.0 END AS y",
             f"CASE WHEN bad = 0 THEN x_in ELSE {safe_x} END AS x",
             "CASE WHEN bad = 0 THEN w_in ELSE 0.0 END AS w" if columns.weighted
             else "CASE WHEN bad = 0 THEN 1.0 ELSE 0.0 END AS w"]
    if columns.oracle is not None:
        clean.append("CASE WHEN bad = 0 THEN pi_in ELSE 0.0 END AS pi")
    pi = ", pi" if columns.oracle is not None else ""
    lo, hi = float_literal(_P_CLIP), float_literal(1.0 - _P_CLIP)
    if columns.score is not None:
        row = (f"SELECT {keep_f}bad, y, w{pi}, x AS p, lp - l1p AS o, "
               f"CASE WHEN y = 1 THEN -lp ELSE -l1p END AS nll, pc, lp, l1p "
               f"FROM (SELECT *, ln(pc) AS lp, ln(1.0 - pc) AS l1p FROM "
               f"(SELECT *, GREATEST(LEAST(x, {hi}), {lo}) AS pc FROM clean) t0) t")
    else:
        # p = 1 / (1 + e^-o) as NumPy computes it (e^-o capped below overflow); the log loss is
        # softplus(t), t = -o (2y - 1), written max(t, 0) + ln(1 + e^-|t|)
        logs = ", ln(pc) AS lp, ln(1.0 - pc) AS l1p" if columns.oracle is not None else ""
        row = (f"SELECT *{logs} FROM (SELECT {keep_f}bad, y, w{pi}, p, o, nll, "
               f"GREATEST(LEAST(p, {hi}), {lo}) AS pc FROM ("
               f"SELECT *, x AS o, {logit_row_sql('x', 't')[0]} AS p, {logit_row_sql('x', 't')[1]} AS nll "
               f"FROM (SELECT *, CASE WHEN y = 1 THEN -x ELSE x END AS t FROM clean) t0) t1) t2")
    Ls, L2 = float_literal(L), float_literal(2 * L)
    cell_cols = [f"CAST(GREATEST(LEAST(floor(p * {M}), {M - 1}), 0) AS {d.bigint}) AS rb",
                 f"CAST(GREATEST(LEAST(floor((oc + {Ls}) / {L2} * {H}), {H - 1}), 0) AS {d.bigint}) AS hb",
                 f"CAST(y AS {d.bigint}) AS yi"]
    if columns.oracle is not None:
        cell_cols.append("(CASE WHEN pi > 0 THEN pi * ln(pi) ELSE 0.0 END) - pi * lp "
                         "+ (CASE WHEN pi < 1 THEN (1.0 - pi) * ln(1.0 - pi) ELSE 0.0 END) - (1.0 - pi) * l1p"
                         " AS kl")
    sums = ["sum(w) AS sv", "sum(w * p) AS svp", "sum(w * (p * p)) AS svpp", "sum(w * oc) AS svo",
            "sum(w * ((y - p) * (y - p))) AS sbrier", "sum(w * nll) AS snll", "sum(w * abs(y - p)) AS smae"]
    if columns.oracle is not None:
        sums += ["sum(w * ((pi - p) * (pi - p))) AS soracle_brier", "sum(w * abs(pi - p)) AS soracle_mae",
                 "sum(w * kl) AS skl", "sum(w * pi) AS spi", "sum(w * (pi * pi)) AS spipi",
                 "sum(w * (p * pi)) AS sppi"]
    sets = ["(hb, rb, yi, bad)"] + [f"({g}, gb, yi, bad)" for g in fnames]
    groupings = ["GROUPING(hb) AS g_main"] + [f"GROUPING({g}) AS g_{g}" for g in fnames]
    settings_b64 = base64.b64encode(json.dumps(query_settings(settings, columns), sort_keys=True).encode()).decode()
    nulls = lambda names: [f"CAST(NULL AS {d.double}) AS {c}" for c in names]
    oracle_null = nulls(_ORACLE_SUMS) if columns.oracle is not None else []
    sum_names = list(_SUMS) + (list(_ORACLE_SUMS) if columns.oracle is not None else [])
    null_int, null_str = f"CAST(NULL AS {d.bigint})", f"CAST(NULL AS {d.string})"
    parts = [
        f"SELECT 'settings' AS kind, {null_int} AS fid, '{settings_b64}' AS level, {null_int} AS bin, "
        f"{null_int} AS rb, {null_int} AS y, {null_int} AS bad, {null_int} AS n, "
        + ", ".join(nulls(sum_names)),
        f"SELECT 'cell' AS kind, {null_int} AS fid, {null_str} AS level, hb AS bin, rb, yi AS y, bad, n, "
        + ", ".join(sum_names) + " FROM g WHERE g_main = 0",
    ]
    ctes = [
        *_checked_ctes(columns, source, d),
        f"clean AS (SELECT {keep_f}bad, {', '.join(clean)} FROM chk)",
        f"rowv AS ({row})",
        f"cells AS (SELECT *, {', '.join(cell_cols)} FROM (SELECT *, GREATEST(LEAST(o, {Ls}), -{Ls}) AS oc "
        "FROM rowv) t)",
        f"cellg AS (SELECT *, CAST(floor(hb * {FIELD_CELL_BINS} / {H}) AS {d.bigint}) AS gb FROM cells)",
        f"g AS (SELECT hb, rb, yi, bad{', gb, ' if fnames else ''}{', '.join(fnames)}, {', '.join(groupings)}, "
        f"count(*) AS n, {', '.join(sums)} FROM cellg GROUP BY GROUPING SETS ({', '.join(sets)}))",
    ]
    if fnames:
        fid = "CASE " + " ".join(f"WHEN g_{g} = 0 THEN {i}" for i, g in enumerate(fnames)) + " END"
        level = f"COALESCE({', '.join(fnames)})" if len(fnames) > 1 else fnames[0]
        ctes += [
            f"fl AS (SELECT {fid} AS fid, {level} AS level, gb, yi, bad, n, sv, svp, svpp, snll FROM g "
            "WHERE g_main = 1)",
            "lc AS (SELECT fid, level, sum(n) AS c FROM fl GROUP BY fid, level)",
            "lv AS (SELECT fid, level, row_number() OVER (PARTITION BY fid ORDER BY c DESC, level) AS rk FROM lc)",
        ]
        parts.append(
            f"SELECT 'field' AS kind, fid, lvl AS level, gb AS bin, {null_int} AS rb, yi AS y, bad, sum(n) AS n, "
            "sum(sv) AS sv, sum(svp) AS svp, sum(svpp) AS svpp, "
            + ", ".join(nulls(["svo", "sbrier"])) + ", sum(snll) AS snll, " + ", ".join(nulls(["smae"]))
            + (", " + ", ".join(oracle_null) if oracle_null else "")
            + f" FROM (SELECT fl.fid, CASE WHEN lv.rk <= {K} THEN fl.level ELSE '{OTHER}' END AS lvl, gb, yi, bad, "
            "n, sv, svp, svpp, snll FROM fl JOIN lv ON fl.fid = lv.fid AND fl.level = lv.level) t "
            "GROUP BY fid, lvl, gb, yi, bad")
    if columns.oracle is not None:
        parts.append(
            f"SELECT 'gap' AS kind, {null_int} AS fid, {null_str} AS level, {null_int} AS bin, {null_int} AS rb, "
            f"{null_int} AS y, {null_int} AS bad, {null_int} AS n, gap AS sv, "
            + ", ".join(nulls([c for c in sum_names if c != "sv"]))
            + f" FROM (SELECT abs(pi - p) AS gap FROM cells WHERE bad = 0 AND w > 0 ORDER BY gap DESC "
            f"LIMIT {_TOP_GAPS}) t")
    if columns.user is not None:
        g_ctes, g_parts = gauc_sql_parts(weighted=columns.weighted, null_int=null_int, double=d.double,
                                         sum_names=sum_names)
        ctes += g_ctes
        parts += g_parts
    header = (f"-- calib-jax statistics query ({d.name}); settings: "
              f"{json.dumps(query_settings(settings, columns), sort_keys=True)}\n")
    return header + "WITH " + ",\n".join(ctes) + "\n" + "\nUNION ALL\n".join(parts)


# ---------------------------------------------------------------------------- reading a result
def _column(table: Any, name: str) -> np.ndarray:
    """A text column as an object array (``to_pylist``: pyarrow's ``to_numpy`` of strings would
    import pandas, a third of a second of the command's fixed cost)."""
    return np.array(["" if v is None else str(v) for v in table.column(name).to_pylist()], dtype=object)


def _decode_settings(b64: Any, source: str) -> dict[str, Any]:
    try:
        d = json.loads(base64.b64decode(str(b64), validate=True))
    except Exception:  # noqa: BLE001 - any decoding failure is a damaged file
        raise ValueError(f"{source}: the settings row of the aggregates cannot be decoded") from None
    if not isinstance(d, dict) or d.get("version") != 1:
        raise ValueError(f"{source}: the aggregates come from an unknown query version")
    return d


def _num(table: Any, name: str, mask: np.ndarray, source: str, *, integer: bool = False,
         why: str = "") -> np.ndarray:
    """Column ``name`` as float64 on the rows ``mask``: every value there a finite number
    (``why``: a likely cause, added to the message about an infinite value)."""
    import pyarrow as pa

    col = table.column(name)
    try:  # chunk by chunk: ChunkedArray.to_numpy would import pandas for a column with nulls
        parts = [c.cast(pa.float64()) for c in col.chunks]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise ValueError(f"{source}: column {name!r} holds values that are not numbers") from None
    null = np.concatenate([null_mask(c) for c in parts]) if parts else np.zeros(0, bool)
    x = np.concatenate([fixed_width_values(c, np.float64) for c in parts]) if parts else np.zeros(0)
    if np.any(null[mask]):
        raise ValueError(f"{source}: column {name!r} has empty values where numbers are expected")
    x = np.asarray(x, np.float64)[mask]
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{source}: column {name!r} holds NaN or infinite values{why}")
    if integer and np.any(x != np.round(x)):
        raise ValueError(f"{source}: column {name!r} holds non-integer values")
    return x


def _settings_row(table: Any, source: str) -> dict[str, Any]:
    missing = [c for c in RESULT_COLUMNS[:14] if c not in table.column_names]
    if missing:
        raise ValueError(f"{source}: not a calib-jax aggregates table: column {missing[0]!r} missing "
                         f"(expected {', '.join(RESULT_COLUMNS)})")
    kind = _column(table, "kind").astype(str)
    rows = np.flatnonzero(kind == "settings")
    if rows.size != 1:
        raise ValueError(f"{source}: not a calib-jax aggregates table: {rows.size} settings rows (expected 1)")
    return _decode_settings(_column(table, "level")[rows[0]], source)


def query_settings_of(table: Any, *, source: str = "aggregates") -> dict[str, Any]:
    """The settings row of a statistics query's result (what :func:`query_settings` wrote)."""
    return _settings_row(table, source)


def problems_from_aggregates(table: Any, columns: QueryColumns, *,
                             source: str = "aggregates") -> dict[tuple[str, str], int]:
    """Rows per (column, reason) of a result's invalid rows (its ``bad`` masks)."""
    kind = _column(table, "kind").astype(str)
    m = kind == "cell"
    bad = _num(table, "bad", m, source, integer=True).astype(np.int64)
    n = _num(table, "n", m, source, integer=True)
    role = {"label": columns.label, "score": columns.score, "logit": columns.logit, "weight": columns.weight,
            "oracle": columns.oracle, "negative_rate_column": columns.negative_rate_column}
    out: dict[tuple[str, str], int] = {}
    for i, (r, reason) in enumerate(PROBLEM_BITS):
        k = int(n[(bad >> i) & 1 == 1].sum())
        if k:
            out[(str(role[r]), reason)] = k
    return out


def accumulator_from_aggregates(table: Any, settings: Settings, *, source: str = "aggregates") -> Accumulator:
    """The :class:`~calib_jax.logs.accumulate.Accumulator` of a statistics query's result.

    ``table`` is the result of :func:`statistics_sql` (a pyarrow table, as an engine returns
    it or as read back from a CSV / Parquet export); ``settings`` must give the bins, grid,
    levels, fields and oracle the query was written for (checked against its settings row).
    The bootstrap settings (``n_boot``, ``seed``, ``scheme="cells"``) act here: the cells
    are resampled by :meth:`Accumulator.replicated`. Invalid rows (``bad`` > 0) enter only
    ``rows_read`` and ``dropped``. Every value is checked (``ValueError`` naming ``source``,
    the column and the data row): kinds, bins and labels in range, integer non-negative
    counts, finite sums, and sums that some log can have (:mod:`calib_jax.logs.validate`:
    non-negative weights, a weight only where rows are, each cell's mean score, logit and log
    loss within its bins, squared and absolute errors that follow from the score sums, each
    field's cells adding up to the main cells, a total weight that did not overflow).

    Args:
      table: the query's result (pyarrow table with the columns :data:`RESULT_COLUMNS`).
      settings: the evaluation's settings (bins, grid, levels, fields, oracle, bootstrap).
      source: the file or log the table comes from, for the messages.

    Returns:
      The :class:`~calib_jax.logs.accumulate.Accumulator` of the log.

    Example:
      >>> import duckdb
      >>> from calib_jax.logs.accumulate import Settings
      >>> s = Settings(n_boot=0)
      >>> con = duckdb.connect()
      >>> _ = con.execute("CREATE TABLE ev AS SELECT 0.25 AS p, 0 AS y UNION ALL SELECT 0.75, 1")
      >>> t = con.sql(statistics_sql(s, QueryColumns(label="y", score="p"), source="ev")).to_arrow_table()
      >>> acc = accumulator_from_aggregates(t, s, source="ev")
      >>> acc.rows_used, float(acc.scal[0, 3])  # two rows, Brier sum 2 * 0.0625
      (2, 0.125)
    """
    meta = _settings_row(table, source)
    want = {"n_bins": settings.n_bins, "hist_bins": settings.hist_bins, "logit_range": settings.logit_range,
            "max_levels": settings.max_levels}
    for k, v in want.items():
        if meta.get(k) != v:
            raise ValueError(f"{source}: the aggregates were computed with {k}={meta.get(k)!r}, not {v!r}")
    qcols = meta.get("columns", {})
    if not isinstance(qcols, dict) or list(qcols.get("fields", [])) != list(settings.fields) \
            or (qcols.get("oracle") is not None) != settings.oracle:
        raise ValueError(f"{source}: the aggregates hold other fields or oracle than the settings")
    kind = _column(table, "kind").astype(str)
    unknown = sorted(set(kind) - {"settings", "cell", "field", "gap", *([GAUC_KIND] if qcols.get("user") else [])})
    if unknown:
        raise ValueError(f"{source}: column 'kind' has an unknown value {unknown[0]!r}")
    H, M = settings.hist_bins, settings.n_bins
    n_cell_cols = CELL_COLS + (CELL_ORACLE_COLS if settings.oracle else 0)
    budget = MAX_ELEMENTS - H * M * 2 * (n_cell_cols + 1)  # what a stranger's file may make us allocate
    sum_names = list(_SUMS) + (list(_ORACLE_SUMS) if settings.oracle else [])
    if settings.oracle:
        missing = [c for c in _ORACLE_SUMS if c not in table.column_names]
        if missing:
            raise ValueError(f"{source}: column {missing[0]!r} missing (an oracle query's result)")

    def ints(name: str, mask: np.ndarray, lo: int, hi: int) -> np.ndarray:
        x = _num(table, name, mask, source, integer=True)
        if x.size and (x.min() < lo or x.max() > hi):
            raise ValueError(f"{source}: column {name!r} has values outside [{lo}, {hi}]")
        return x.astype(np.int64)

    mc = kind == "cell"
    bad = ints("bad", mc, 0, (1 << len(PROBLEM_BITS)) - 1)
    n = ints("n", mc, 0, 1 << 62)
    rows_read = int(n.sum())
    ok = bad == 0
    hb, rb, y = ints("bin", mc, 0, H - 1)[ok], ints("rb", mc, 0, M - 1)[ok], ints("y", mc, 0, 1)[ok]
    weight = qcols.get("weight")
    why = (f" (the weights of column {weight!r} overflow: calib-jax needs them to sum to at most 1e18)"
           if isinstance(weight, str) else "")
    vals = np.stack([_num(table, c, mc, source, why=why)[ok] for c in sum_names], axis=1) if ok.any() \
        else np.zeros((0, n_cell_cols))
    # consistency (calib_jax.logs.validate): sums that no log can have, e.g. a negative Brier
    # score or more weighted clicks than weight, are refused naming the column and the row
    rows_c = np.flatnonzero(mc)[ok]
    sums = {c: vals[:, j] for j, c in enumerate(sum_names)}
    with np.errstate(over="ignore"):  # an overflow is what the check reports
        w_total = float(np.sum(vals[:, 0])) if np.all(vals[:, 0] >= 0) else 0.0
    check_weight_total(w_total, source=source, column=weight if isinstance(weight, str) else None, parts=True)
    check_main_cells(settings, hb, rb, y, n[ok], sums, source=source,
                     where=lambda col, i: f"column {col!r} of data row {rows_c[i] + 1} (a 'cell' row)")
    idx = (hb * M + rb) * 2 + y
    cell = np.zeros((H * M * 2, n_cell_cols))
    cell_n = np.zeros(H * M * 2)
    np.add.at(cell, idx, vals)
    np.add.at(cell_n, idx, n[ok])
    vocab: dict[str, dict[str, int]] = {f: {} for f in settings.fields}
    fcell: dict[str, np.ndarray] = {}
    mf = kind == "field"
    if settings.fields:
        fid = ints("fid", mf, 0, len(settings.fields) - 1)
        fbad = ints("bad", mf, 0, (1 << len(PROBLEM_BITS)) - 1)
        fn = ints("n", mf, 0, 1 << 62)
        gb = ints("bin", mf, 0, FIELD_CELL_BINS - 1)
        fy = ints("y", mf, 0, 1)
        if np.any(np.array([v is None for v in table.column("level").to_pylist()], bool)[mf]):
            raise ValueError(f"{source}: column 'level' is empty on a field row")
        lv = _column(table, "level")[mf].astype(str)
        fv = np.stack([_num(table, c, mf, source) for c in ("sv", "svp", "svpp", "snll")], axis=1)
        per = FIELD_CELL_BINS * 2
        for i, f in enumerate(settings.fields):
            sel = fid == i
            names, inv = np.unique(lv[sel], return_inverse=True)
            total = np.bincount(inv, weights=fn[sel], minlength=names.size)
            # level codes: most rows first, ties by name (the query's ranking); __other__ last
            order = sorted(range(names.size), key=lambda j: (names[j] == OTHER, -total[j], names[j]))
            if len(order) > settings.max_levels + 1:
                raise ValueError(f"{source}: field {f!r} has {len(order)} levels, more than max_levels + 1")
            # the levels are bounded by --max-levels (checked above), the one level limit of every
            # engine: the arrow reader keeps as many, so a budget on them would refuse here a log
            # the other engines read. What a stranger's file alone decides is how many fields it
            # names (each with 16 spare level slots): that stays bounded
            budget -= 16 * FIELD_CELL_BINS * 2 * (FIELD_STATS + 1 + FIELD_STATS * 2)
            if budget < 0:
                raise ValueError(f"{source}: its fields and levels need more than {MAX_ELEMENTS:,} numbers")
            code_of = np.empty(names.size, np.int64)
            for code, j in enumerate(order):
                code_of[j] = code
                vocab[f][str(names[j])] = code
            keep = fbad[sel] == 0
            codes = code_of[inv][keep]
            tab = np.zeros(((len(order) + 16) * per, FIELD_STATS + 1))
            cidx = (codes * FIELD_CELL_BINS + gb[sel][keep]) * 2 + fy[sel][keep]
            np.add.at(tab, cidx, np.concatenate([fv[sel][keep], fn[sel][keep, None]], axis=1))
            fcell[f] = tab
        # consistency, once the size of the field tables is known to be bounded (above)
        rows_f = np.flatnonzero(mf)
        fok = fbad == 0
        fsums = {c: fv[fok, j] for j, c in enumerate(("sv", "svp", "svpp", "snll"))}
        check_field_cells(settings, gb[fok], fy[fok], fn[fok], fsums, source=source,
                          where=lambda col, i: f"column {col!r} of data row {rows_f[fok][i] + 1} (a 'field' row)")
        main = {"gb": hb * FIELD_CELL_BINS // H, "y": y, "n": n[ok], **{c: sums[c] for c in fsums}}
        cell_masks = np.bincount(bad, weights=n, minlength=1 << len(PROBLEM_BITS))
        for i, f in enumerate(settings.fields):
            sel = fok & (fid == i)
            check_field_totals(settings, f, main, {"gb": gb[sel], "y": fy[sel], "n": fn[sel],
                                                   **{c: fv[sel, j] for j, c in enumerate(fsums)}},
                               source=source, what="the 'field' rows")
            if not np.array_equal(np.bincount(fbad[fid == i], weights=fn[fid == i], minlength=cell_masks.size),
                                  cell_masks):
                raise ValueError(f"{source}: the 'field' rows of field {f!r} count other invalid rows than the "
                                 "'cell' rows (columns 'bad' and 'n')")
    gaps = _num(table, "sv", kind == "gap", source)
    if gaps.size > _TOP_GAPS or np.any(gaps < 0) or np.any(gaps > 1):
        raise ValueError(f"{source}: the 'gap' rows are not the largest oracle gaps")
    return Accumulator.from_cells(settings, cell=cell, cell_n=cell_n, fcell=fcell, vocab=vocab, top_gaps=gaps,
                                  rows_read=rows_read, rows_used=int(n[ok].sum()))


def columns_of_result(meta: Mapping[str, Any]) -> QueryColumns:
    """The :class:`QueryColumns` recorded in a result's settings row."""
    c = meta.get("columns", {})
    try:
        return QueryColumns(label=c["label"], score=c.get("score"), logit=c.get("logit"), weight=c.get("weight"),
                            oracle=c.get("oracle"), fields=tuple(c.get("fields", ())), user=c.get("user"),
                            negative_rate=c.get("negative_rate"), negative_rate_column=c.get("negative_rate_column"))
    except (KeyError, TypeError, ValueError):
        raise ValueError("the aggregates' settings row names no valid columns") from None

