"""Checks of ``calib-jax``: which rows of a chunk are valid, and whether statistics read
from a file (aggregates, saved states) can be the sums of any log.

A row is invalid when its score is missing, NaN or outside [0, 1] (a logit: missing or not
finite), its label is missing or not 0/1, its weight is missing, negative or not finite, or
its oracle CTR is missing or outside [0, 1].  Missing field values are not errors: they form
the level ``__missing__``.  Without ``--drop-invalid`` the command stops with one message
naming the file, every offending column, the reason, the number of rows and the first one.

Statistics that come from a file (``evaluate --aggregates``, ``merge``, ``--resume``) are
sums a stranger may have written. :func:`check_main_cells`, :func:`check_field_cells`,
:func:`check_field_totals` and :func:`check_accumulator` accept them only when some log has
exactly these sums: counts and weights non-negative, a positive weight only where rows are,
every weighted mean within the range its cell allows (a cell's probability and logit bins
bound its mean score, mean logit, log loss; the label is fixed in a cell, so its squared
and absolute errors follow from the score sums), squared sums consistent with the plain
ones (Cauchy-Schwarz), and every table adding up to the same totals. Means are compared with
a relative slack of 1e-7 (float sums added in another order stay far below it), so a
forged or damaged file is refused with ``ValueError`` naming the file, the column or array
and the row or cell, instead of giving a negative Brier score.

Weights. Every metric is computed in float64, the tests of calibration in float32 and the
CORP test resamples integer weights as binomial counts (int64). The total weight of the
valid rows must therefore lie in :data:`WEIGHT_TOTAL_RANGE` ([1e-12, 1e18]), checked by
:func:`check_weight_total`; any single weight that is finite and non-negative is accepted
as long as the total stays in that range (a weight of 1e300 overflows it; weights of 1e-300
fall below it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from calib_jax.logs.accumulate import Chunk
from calib_jax.logs.arrow_values import float64_values

__all__ = ["Columns", "Problems", "clean_chunk", "to_logit", "check_main_cells", "check_field_cells",
           "check_field_totals", "check_accumulator", "check_weight_total", "check_weight_sum", "check_slice_weights",
           "WEIGHT_TOTAL_RANGE", "FLOAT32_MAX", "BEYOND_FLOAT32"]

#: the largest magnitude of a logit or feature a calibrator takes: they compute in float32, so a
#: finite float64 beyond it (1e300) became inf in the cast, and fit and apply failed naming no column
FLOAT32_MAX = 3.4028234663852886e38
BEYOND_FLOAT32 = "beyond float32's range (magnitude above 3.4e38; the calibrators compute in float32)"

_P_CLIP = 1e-12


def to_logit(p: np.ndarray) -> np.ndarray:
    """Logits of probabilities clipped to [1e-12, 1 - 1e-12] (finite for p = 0 or 1)."""
    pc = np.clip(p, _P_CLIP, 1.0 - _P_CLIP)
    return np.log(pc) - np.log1p(-pc)


@dataclasses.dataclass(frozen=True)
class Columns:
    """The columns a command reads (``score`` xor ``logit``)."""

    label: str
    score: str | None = None
    logit: str | None = None
    weight: str | None = None
    oracle: str | None = None
    fields: tuple[str, ...] = ()
    user: str | None = None  # GAUC's user column (evaluate --user)
    #: the kept-negative rate of a negatively downsampled log (:mod:`calib_jax.logs.downsampling`):
    #: label-0 rows weigh ``1/negative_rate`` times their weight
    negative_rate: float | None = None
    #: or a column of each row's kept-negative rate (a log whose rate changed)
    negative_rate_column: str | None = None

    def __post_init__(self) -> None:
        from calib_jax.logs.downsampling import check_rate_options

        if (self.score is None) == (self.logit is None):
            raise ValueError("give exactly one of --score COL (probabilities) or --logit COL")
        check_rate_options(self.negative_rate, self.negative_rate_column)
        # one column, one role: an oracle read from the score column would report an oracle
        # Brier of 0, a weight read from the label would drop every non-click
        model = ("--score", self.score) if self.score is not None else ("--logit", self.logit)
        roles = (("--label", self.label), model, ("--weight", self.weight), ("--oracle", self.oracle),
                 ("--negative-rate-column", self.negative_rate_column), ("--user", self.user))
        seen: dict[str, str] = {}
        for flag, col in roles:
            if col is None:
                continue
            if col in seen:
                raise ValueError(f"{flag} must name another column than {seen[col]} (both name {col!r})")
            seen[col] = flag
        # a field read from the label holds a level per click (a ctr of 0 or 1 each), one from the
        # score a level per score value; the user column may be a field
        if self.user is not None:
            seen.pop(self.user, None)
        for col in self.fields:
            if col in seen:
                raise ValueError(f"--field must name another column than {seen[col]} (both name {col!r})")

    @property
    def text(self) -> list[str]:
        """The columns read as text: the fields, then the user column."""
        return list(dict.fromkeys([*self.fields, *([self.user] if self.user is not None else [])]))

    @property
    def numeric(self) -> list[str]:
        cols = [self.score or self.logit, self.label, self.weight, self.oracle, self.negative_rate_column]
        out: list[str] = []
        for c in cols:
            if c is not None and c not in out:
                out.append(c)
        return out


class Problems:
    """Counts of invalid rows per (column, reason), with the first offending row."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], list[int]] = {}  # -> [count, first row]
        self.bad_rows = 0

    def add(self, col: str, reason: str, mask: np.ndarray, start: int) -> None:
        k = int(mask.sum())
        if k:
            first = start + int(np.argmax(mask))
            cur = self.items.setdefault((col, reason), [0, first])
            cur[0] += k

    def __bool__(self) -> bool:
        return bool(self.items)

    def describe(self, roles: Mapping[str, str] | None = None) -> str:
        """The problems in one line; ``roles``: column -> the option that named it (e.g.
        ``{"pi": "--oracle"}``), written before the column."""
        roles = roles or {}
        return "; ".join(f"{roles[c] + ' ' if c in roles else ''}column {c!r}: {n} row{'s' if n != 1 else ''} {r}"
                         + (f" (first at data row {first + 1})" if first >= 0 else "")
                         for (c, r), (n, first) in self.items.items())

    def as_dict(self) -> dict[str, int]:
        return {f"{c}: {r}": n for (c, r), (n, _) in self.items.items()}

    def to_json(self) -> dict[str, Any]:
        """JSON-able image (saved in ``evaluate``'s checkpoint, so a resumed run reports the
        same counts and first rows as an uninterrupted one)."""
        return {"bad_rows": self.bad_rows, "items": [[c, r, n, first] for (c, r), (n, first) in self.items.items()]}

    @classmethod
    def from_json(cls, d: Any) -> Problems:
        out = cls()
        if not d:
            return out
        try:
            out.bad_rows = int(d["bad_rows"])
            out.items = {(str(c), str(r)): [int(n), int(first)] for c, r, n, first in d["items"]}
        except (KeyError, TypeError, ValueError):
            raise ValueError("checkpoint: malformed record of invalid rows; delete it or run without "
                             "--resume") from None
        return out



def _outside_unit(x: np.ndarray) -> np.ndarray:
    return (x < 0) | (x > 1)


def _checked(problems: Any, batch: Any, name: str, start: int, invalid: Any, what: str, *,
             fill: float) -> tuple[np.ndarray, np.ndarray]:
    """Column ``name`` with its NaN rows and the rows where ``invalid`` holds (described by
    ``what``) recorded in ``problems`` and replaced by ``fill``; returns (values, dropped)."""
    x = _col(batch, name)
    miss = np.isnan(x)
    out = ~miss & invalid(np.where(miss, 0.0, x))
    problems.add(name, "missing or NaN", miss, start)
    problems.add(name, what, out, start)
    drop = miss | out
    return np.where(drop, fill, x), drop

def _col(batch: Any, name: str) -> np.ndarray:
    arr = batch.column(batch.schema.get_field_index(name))
    return float64_values(arr)  # nulls -> NaN


def clean_chunk(batch: Any, cols: Columns, start: int, problems: Problems) -> Chunk:
    """Validate one chunk (rows ``start..`` of the log); invalid rows get ``keep = False``."""
    n = batch.num_rows
    bad = np.zeros(n, bool)
    y = _col(batch, cols.label)
    miss = np.isnan(y)
    problems.add(cols.label, "missing or NaN", miss, start)
    wrong = ~miss & (y != 0) & (y != 1)
    problems.add(cols.label, "not in {0, 1}", wrong, start)
    bad |= miss | wrong
    nll = None
    if cols.score is not None:
        p, drop = _checked(problems, batch, cols.score, start, _outside_unit, "outside [0, 1]", fill=0.5)
        bad |= drop
        o = to_logit(p)
    else:
        assert cols.logit is not None
        o = _col(batch, cols.logit)
        miss = np.isnan(o)
        inf = np.isinf(o)
        problems.add(cols.logit, "missing or NaN", miss, start)
        problems.add(cols.logit, "not finite", inf, start)
        bad |= miss | inf
        o = np.where(miss | inf, 0.0, o)
        with np.errstate(over="ignore"):  # e^-o = inf for o < -709: p = 0, exact (no warning on stderr)
            p = 1.0 / (1.0 + np.exp(-o))
        yy = np.where(np.isnan(y), 0.0, y)
        nll = np.logaddexp(0.0, -o * (2 * yy - 1))  # exact log loss from logits
    v = np.ones(n)
    if cols.weight is not None:
        v, drop = _checked(problems, batch, cols.weight, start, lambda x: (x < 0) | np.isinf(x),
                           "negative or not finite", fill=0.0)
        bad |= drop
    pi = None
    if cols.oracle is not None:
        pi, drop = _checked(problems, batch, cols.oracle, start, _outside_unit, "outside [0, 1]", fill=0.0)
        bad |= drop
    rate: Any = cols.negative_rate
    if cols.negative_rate_column is not None:
        from calib_jax.logs.downsampling import MIN_RATE, OUTSIDE_RATES

        rate, drop = _checked(problems, batch, cols.negative_rate_column, start,
                              lambda x: ~((x >= MIN_RATE) & (x <= 1.0)), OUTSIDE_RATES, fill=1.0)
        bad |= drop
    if bad.any():
        problems.bad_rows += int(bad.sum())
    keep = ~bad
    y = np.where(keep, y, 0.0)
    if rate is not None:  # a kept negative stands for 1/rate of the population's
        v = np.where(y == 0, v * (1.0 / rate), v)
    fields = {f: batch.column(batch.schema.get_field_index(f)) for f in cols.fields}
    return Chunk(p=np.where(keep, p, 0.0), o=np.where(keep, o, 0.0), y=y, v=np.where(keep, v, 0.0), keep=keep,
                 fields=fields, oracle=pi, nll=None if nll is None else np.where(keep, nll, 0.0))


# ---------------------------------------------------------------------------- statistics from files
#: the total weight of the valid rows a report accepts (module docstring): the tests of
#: calibration run in float32 and the CORP test draws integer weights as int64 binomial counts
WEIGHT_TOTAL_RANGE = (1e-12, 1e18)
#: relative slack of a weighted mean (float sums added in another order stay far below it)
_RTOL = 1e-7
#: absolute slack of a mean: probabilities clipped at 1e-12, SQL's ln(1 - p) for log1p(-p)
_ATOL = 1e-11
#: absolute slack of a sum: products of weights near the smallest double lose their digits
_TINY = 1e-290
#: the largest log loss or KL term of a clipped probability, -ln(1e-12) = 27.63
_MAX_LOSS = 27.7


def check_weight_total(total: float, *, source: str, column: str | None, parts: bool = False) -> None:
    """Refuse a total weight outside :data:`WEIGHT_TOTAL_RANGE` (module docstring).

    Args:
      total: the sum of the weights of the valid rows (``inf`` when it overflowed).
      source: the file (or files) the rows come from, for the message.
      column: the weight column (``None``: every row weighs 1, nothing to check).
      parts: the total of one part of a log (``evaluate --state-only``): only the upper end
        applies, since a merge adds the parts.

    Returns:
      None: it only raises.

    Raises:
      ValueError: naming ``source`` and ``column``, when the total is not finite or outside
        the range.

    Example:
      >>> check_weight_total(2.5, source="log.csv", column="w")
      >>> check_weight_total(float("inf"), source="log.csv", column="w")
      Traceback (most recent call last):
      ...
      ValueError: log.csv: the weights of column 'w' sum to inf over the valid rows; calib-jax needs a total ...
    """
    if column is None:
        return
    lo, hi = WEIGHT_TOTAL_RANGE
    total = float(total)
    if total <= hi and (parts or total >= lo) and np.isfinite(total):
        return
    raise ValueError(f"{source}: the weights of column {column!r} sum to {total:.3g} over the valid rows; calib-jax "
                     f"needs a total in [{lo:g}, {hi:g}] (the tests of calibration run in float32, the CORP test "
                     "draws weights as integer counts): rescale the weights")


def check_weight_sum(total: float, *, source: str, column: str | None, rows: int, part: str | None = None) -> None:
    """Plain ``evaluate``'s two rules on the weights of the rows a report is computed from, for
    every command and engine (``evaluate --by`` per slice, ``compare``): weights that sum to 0
    define no metric, and a positive total must lie in :data:`WEIGHT_TOTAL_RANGE`
    (:func:`check_weight_total`).

    Args:
      total: the sum of the weights of the valid rows (``inf`` when it overflowed).
      source: the file (or files) the rows come from, for the message.
      column: the weight column (``None``: every row weighs 1, nothing to check).
      rows: the number of valid rows, for the message.
      part: which part of the log the rows are (``"slice '2024-03-01'"``), or ``None`` for
        the whole log.

    Returns:
      None: it only raises.

    Raises:
      ValueError: naming ``source``, ``part`` and ``column``.

    Example:
      >>> check_weight_sum(3.0, source="log.csv", column="w", rows=3)
      >>> check_weight_sum(0.0, source="log.csv", column="w", rows=3, part="slice 'a'")
      Traceback (most recent call last):
      ...
      ValueError: log.csv: slice 'a': the weights of column 'w' sum to 0 over its 3 valid rows, so no metric is defined
    """
    if column is None:
        return
    where = source if part is None else f"{source}: {part}"
    if float(total) == 0.0:
        raise ValueError(f"{where}: the weights of column {column!r} sum to 0 over {'its' if part else 'the'} {rows} "
                         "valid rows, so no metric is defined")
    check_weight_total(total, source=where, column=column)


def check_slice_weights(cells: Any, *, source: str, column: str | None) -> None:
    """:func:`check_weight_sum` on a log's slices (``evaluate --by``): the whole log first, then
    each slice, a log of its own whose panel needs a defined total.

    Args:
      cells: the :class:`~calib_jax.logs.slicing.SliceCells` of the log.
      source: the log, for the message.
      column: the weight column (``None``: nothing to check).

    Returns:
      None: it only raises.

    Raises:
      ValueError: naming ``source``, the slice and ``column``.

    Example:
      >>> import numpy as np
      >>> from calib_jax.logs.slicing import SliceCells
      >>> one = lambda w: (np.array([0]), np.array([[w, 0.5 * w, 0.25 * w, 0, 0, 0, 0]]), np.array([2.0]))
      >>> c = SliceCells(slices=("a", "b"), cells=(one(2.0), one(0.0)), rows_read=4, rows_used=4)
      >>> check_slice_weights(c, source="log.csv", column="w")
      Traceback (most recent call last):
      ...
      ValueError: log.csv: slice 'b': the weights of column 'w' sum to 0 over its 2 valid rows, so no metric is defined
    """
    if column is None:
        return
    with np.errstate(over="ignore"):  # an overflow is what the check reports
        totals = [float(np.sum(sums[:, 0])) for _, sums, _ in cells.cells]
        rows = [int(np.sum(n)) for _, _, n in cells.cells]
        check_weight_sum(float(np.sum(totals)), source=source, column=column, rows=sum(rows))
    for name, total, n in zip(cells.slices, totals, rows, strict=True):
        check_weight_sum(total, source=source, column=column, rows=n, part=f"slice {name!r}")


class _Checker:
    """Rule helper: ``where(column, i)`` names element i of a column (row, cell)."""

    def __init__(self, source: str, where: Any) -> None:
        self.source, self.where = source, where

    def require(self, ok: Any, col: str, text: Any) -> None:
        bad = ~np.asarray(ok, bool)
        if bad.any():
            i = int(np.flatnonzero(bad.ravel())[0])
            raise ValueError(f"{self.source}: {self.where(col, i)} {text(i)}")

    def mean_within(self, col: str, s: np.ndarray, w: np.ndarray, lo: Any, hi: Any, what: str) -> None:
        """``s / w`` within ``[lo, hi]`` (up to the slack) where ``w > 0``; ``s = 0`` where ``w = 0``."""
        shape = np.broadcast_shapes(np.shape(s), np.shape(w), np.shape(lo), np.shape(hi))
        s, w, lo, hi = (np.broadcast_to(np.asarray(a, np.float64), shape).ravel() for a in (s, w, lo, hi))
        with np.errstate(all="ignore"):
            mag = np.maximum(np.abs(np.where(np.isfinite(lo), lo, 0.0)), np.abs(np.where(np.isfinite(hi), hi, 0.0)))
            slack = (_RTOL * (1.0 + mag) + _ATOL) * w + _TINY
            low = np.where(np.isfinite(lo), lo * w, -np.inf)
            high = np.where(np.isfinite(hi), hi * w, np.inf)
            ok = np.where(w > 0, (s >= low - slack) & (s <= high + slack), np.abs(s) <= _TINY)
            mean = np.where(w > 0, s / np.where(w > 0, w, 1.0), np.nan)

        def text(i: int) -> str:
            if not w[i] > 0:
                return f"is {s[i]:.10g} where the weight sum is 0 (a sum over no weight must be 0)"
            return f"is {s[i]:.10g}: {what} = {mean[i]:.10g}, outside [{lo[i]:.10g}, {hi[i]:.10g}]"

        self.require(ok, col, text)

    def equal(self, col: str, s: np.ndarray, want: np.ndarray, w: np.ndarray, scale: float, what: str) -> None:
        """``s == want`` up to ``scale`` times the slack of the weight ``w``."""
        shape = np.broadcast_shapes(np.shape(s), np.shape(want), np.shape(w))
        s, want, w = (np.broadcast_to(np.asarray(a, np.float64), shape).ravel() for a in (s, want, w))
        with np.errstate(all="ignore"):
            ok = np.abs(s - want) <= (_RTOL * scale + _ATOL) * w + _TINY
        self.require(ok, col, lambda i: f"is {s[i]:.10g}, expected {want[i]:.10g} from {what}")


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))


def _logit_edges(settings: Any) -> np.ndarray:
    """The H + 1 edges of the fine logit grid on [-L, L]."""
    L, H = float(settings.logit_range), settings.hist_bins
    return -L + 2.0 * L * np.arange(H + 1) / H


def _prob_range(settings: Any, h_lo: np.ndarray, h_hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The probabilities whose logits fall in fine bins ``h_lo .. h_hi`` (the end bins hold
    the logits clipped into them, so they reach 0 and 1)."""
    e = _logit_edges(settings)
    H = settings.hist_bins
    lo = np.where(h_lo <= 0, 0.0, _sigmoid(e[np.clip(h_lo, 0, H)]))
    hi = np.where(h_hi >= H - 1, 1.0, _sigmoid(e[np.clip(h_hi + 1, 0, H)]))
    return lo, hi


def _loss_range(y: np.ndarray, plo: np.ndarray, phi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of the log loss of a label ``y`` at a probability in ``[plo, phi]`` (scores are
    clipped to [1e-12, 1 - 1e-12], logits are not: the near end clipped, the far end not)."""
    with np.errstate(divide="ignore"):
        lo0 = -np.log1p(-np.minimum(plo, 1.0 - _P_CLIP))
        hi0 = -np.log1p(-np.minimum(phi, 1.0))
        lo1 = -np.log(np.maximum(phi, _P_CLIP))
        hi1 = -np.log(np.maximum(plo, 0.0))
    return np.where(y == 1, lo1, lo0), np.where(y == 1, hi1, hi0)



def _require_counts(c: Any, n: np.ndarray, sv: np.ndarray) -> None:
    """A cell's row count and weight sum: both non-negative, and no weight without a row."""
    c.require(n >= 0, "n", lambda i: f"is {n[i]:.10g}: a count of rows must not be negative")
    c.require(sv >= 0, "sv", lambda i: f"is {sv[i]:.10g}: a sum of weights must not be negative")
    c.require((sv == 0) | (n >= 1), "sv", lambda i: f"is {sv[i]:.10g} in a cell of {n[i]:.0f} rows (a weight "
                                                    "needs a row)")

def check_main_cells(settings: Any, hb: np.ndarray, rb: np.ndarray, y: np.ndarray, n: np.ndarray,
                     sums: dict[str, np.ndarray], *, source: str, where: Any) -> None:
    """Refuse main cells (the ``cell`` rows of a statistics query's result, or a state's
    ``cell`` table) that no log can have produced.

    Args:
      settings: the :class:`~calib_jax.logs.accumulate.Settings` (grid, bins, oracle).
      hb, rb, y: (K,) each cell's fine logit bin, probability bin and label (in range).
      n: (K,) each cell's count of valid rows.
      sums: the cell sums by result column: ``sv, svp, svpp, svo, sbrier, snll, smae`` and
        with an oracle ``soracle_brier, soracle_mae, skl, spi, spipi, sppi`` ((K,) each).
      source: the file, for the message.
      where: ``where(column, i)`` -> how the message names the value of cell i, e.g.
        ``"column 'svp' of data row 12"``.

    Returns:
      None: it only raises.

    Raises:
      ValueError: ``"<source>: <where> is ...: <why>"`` for the first value that breaks a rule
        (module docstring).

    Example:
      >>> import numpy as np
      >>> from calib_jax.logs.accumulate import Settings
      >>> one = lambda v: np.array([float(v)])
      >>> p = 0.25  # one row of weight 2 at p = 0.25, label 0, probability bin 3 of 15
      >>> o = float(np.log(p / (1 - p)))
      >>> hb, rb = np.array([int((o + 16) / 32 * 4096)]), np.array([3])
      >>> sums = {"sv": one(2), "svp": one(2 * p), "svpp": one(2 * p * p), "svo": one(2 * o),
      ...         "sbrier": one(2 * p * p), "snll": one(-2 * np.log1p(-p)), "smae": one(2 * p)}
      >>> at = lambda col, i: f"column {col!r} of data row {i + 1}"
      >>> check_main_cells(Settings(), hb, rb, np.array([0]), one(1), sums, source="agg.csv", where=at)
      >>> check_main_cells(Settings(), hb, rb, np.array([0]), one(1), {**sums, "sbrier": one(-1)},
      ...                  source="agg.csv", where=at)
      Traceback (most recent call last):
      ...
      ValueError: agg.csv: column 'sbrier' of data row 1 is -1, expected 0.125 from the label and the score sums
    """
    M = settings.n_bins
    c = _Checker(source, where)
    sv = sums["sv"]
    _require_counts(c, n, sv)
    p_lo, p_hi = _prob_range(settings, hb, hb)
    plo, phi = np.maximum(rb / M, p_lo), np.minimum((rb + 1) / M, p_hi)
    c.require((n == 0) | (plo <= phi + 1e-9), "bin", lambda i: f"({hb[i]}) and the probability bin rb={rb[i]} "
                                                                "hold no common probability")
    phi = np.maximum(plo, phi)
    c.mean_within("svp", sums["svp"], sv, plo, phi, "the mean score svp / sv (the cell's probability range)")
    c.mean_within("svpp", sums["svpp"], sums["svp"], plo, phi, "svpp / svp (a probability of the cell)")
    e = _logit_edges(settings)
    c.mean_within("svo", sums["svo"], sv, e[hb], e[hb + 1], "the mean logit svo / sv (the bin's logit range)")
    with np.errstate(all="ignore"):
        m1 = np.where(sv > 1e-200, sums["svp"] / np.where(sv > 0, sv, 1.0), 0.0)
        m2 = np.where(sv > 1e-200, sums["svpp"] / np.where(sv > 0, sv, 1.0), 0.0)
    c.require(m1 * m1 <= m2 * (1 + 4 * _RTOL) + _ATOL, "svpp",
              lambda i: f"is {sums['svpp'][i]:.10g}: svpp / sv = {m2[i]:.10g} is below (svp / sv)^2 = "
                        f"{m1[i] * m1[i]:.10g}")
    yy = np.asarray(y)
    svp, svpp = sums["svp"], sums["svpp"]
    c.equal("sbrier", sums["sbrier"], np.where(yy == 1, sv - 2 * svp + svpp, svpp), sv, 4.0,
            "the label and the score sums")
    c.equal("smae", sums["smae"], np.where(yy == 1, sv - svp, svp), sv, 2.0, "the label and the score sums")
    nlo, nhi = _loss_range(yy, plo, phi)
    c.mean_within("snll", sums["snll"], sv, nlo, nhi, "the mean log loss snll / sv (the cell's probabilities)")
    if not settings.oracle:
        return
    spi, spipi, sppi = sums["spi"], sums["spipi"], sums["sppi"]
    c.mean_within("spi", spi, sv, 0.0, 1.0, "the mean oracle CTR spi / sv")
    c.mean_within("spipi", spipi, spi, 0.0, 1.0, "spipi / spi (an oracle CTR)")
    c.mean_within("sppi", sppi, spi, plo, phi, "sppi / spi (a probability of the cell)")
    c.mean_within("soracle_mae", sums["soracle_mae"], sv, 0.0, 1.0, "the mean |oracle - p|")
    c.equal("soracle_brier", sums["soracle_brier"], spipi - 2 * sppi + svpp, sv, 4.0, "spipi - 2 sppi + svpp")
    c.mean_within("skl", sums["skl"], sv, 0.0, _MAX_LOSS, "the mean KL(oracle || p)")


def _fine_bins_of_coarse(settings: Any, gb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first and last fine bin h with ``h * 64 // H == gb`` (first > last: none)."""
    from calib_jax.logs.accumulate import FIELD_CELL_BINS as G

    H = settings.hist_bins
    return (gb * H + G - 1) // G, ((gb + 1) * H - 1) // G


def check_field_cells(settings: Any, gb: np.ndarray, y: np.ndarray, n: np.ndarray, sums: dict[str, np.ndarray], *,
                      source: str, where: Any) -> None:
    """Refuse field cells (per level, coarse logit bin and label: the ``field`` rows of a
    query's result, a state's ``fcell`` tables) that no log can have produced.

    Args:
      settings: the :class:`~calib_jax.logs.accumulate.Settings`.
      gb, y: (K,) each cell's coarse logit bin (of 64) and label.
      n: (K,) each cell's count of valid rows.
      sums: ``sv, svp, svpp, snll`` ((K,) each).
      source: the file, for the message.
      where: ``where(column, i)`` -> how the message names the value of cell i.

    Returns:
      None: it only raises.

    Raises:
      ValueError: naming ``source`` and ``where(column, i)`` for the first value that breaks a
        rule (as :func:`check_main_cells`).

    Example:
      >>> import numpy as np
      >>> from calib_jax.logs.accumulate import Settings
      >>> one = lambda v: np.array([float(v)])
      >>> at = lambda col, i: f"column {col!r} of data row {i + 1}"
      >>> sums = {"sv": one(1), "svp": one(0.5), "svpp": one(0.25), "snll": one(np.log(2))}
      >>> check_field_cells(Settings(), np.array([32]), np.array([1]), one(1), sums, source="a", where=at)
      >>> check_field_cells(Settings(), np.array([32]), np.array([1]), one(1), {**sums, "svp": one(2)},
      ...                   source="a", where=at)
      Traceback (most recent call last):
      ...
      ValueError: a: column 'svp' of data row 1 is 2: the mean score svp / sv (the coarse bin's ...) = 2, outside ...
    """
    c = _Checker(source, where)
    sv = sums["sv"]
    _require_counts(c, n, sv)
    h_lo, h_hi = _fine_bins_of_coarse(settings, gb)
    c.require((n == 0) | (h_lo <= h_hi), "bin", lambda i: f"({gb[i]}) is a coarse bin that no fine bin of "
                                                           f"--hist-bins {settings.hist_bins} falls in")
    plo, phi = _prob_range(settings, h_lo, np.maximum(h_lo, h_hi))
    c.mean_within("svp", sums["svp"], sv, plo, phi, "the mean score svp / sv (the coarse bin's probabilities)")
    c.mean_within("svpp", sums["svpp"], sums["svp"], plo, phi, "svpp / svp (a probability of the coarse bin)")
    nlo, nhi = _loss_range(np.asarray(y), plo, phi)
    c.mean_within("snll", sums["snll"], sv, nlo, nhi, "the mean log loss snll / sv (the coarse bin's "
                                                      "probabilities)")


def check_field_totals(settings: Any, field: str, main: dict[str, np.ndarray], fld: dict[str, np.ndarray], *,
                       source: str, what: str) -> None:
    """Every row is in one level of each field: per coarse logit bin and label, a field's
    cells must add up to the main cells (counts exactly, sums up to rounding).

    Args:
      settings: the :class:`~calib_jax.logs.accumulate.Settings`.
      field: the field's name, for the message.
      main: ``gb, y, n, sv, svp, svpp, snll`` of the main cells (``gb`` their coarse bin).
      fld: the same of the field's cells.
      source: the file, for the message.
      what: how the message names the field's cells, e.g. ``"the 'field' rows"``.

    Returns:
      None: it only raises.

    Raises:
      ValueError: naming ``source``, the field, the column and the coarse bin and label.

    Example:
      >>> import numpy as np
      >>> from calib_jax.logs.accumulate import Settings
      >>> a = {"gb": np.array([3]), "y": np.array([0]), "n": np.array([2.0]), "sv": np.array([2.0]),
      ...      "svp": np.array([0.1]), "svpp": np.array([0.01]), "snll": np.array([0.1])}
      >>> check_field_totals(Settings(), "site", a, a, source="agg.csv", what="the 'field' rows")
      >>> check_field_totals(Settings(), "site", a, {**a, "n": np.array([3.0])}, source="agg.csv",
      ...                    what="the 'field' rows")
      Traceback (most recent call last):
      ...
      ValueError: agg.csv: the 'field' rows of field 'site' do not add up to the cells: column 'n' at coarse bin 3, ...
    """
    from calib_jax.logs.accumulate import FIELD_CELL_BINS as G

    def total(d: dict[str, np.ndarray], col: str) -> np.ndarray:
        idx = np.asarray(d["gb"], np.int64) * 2 + np.asarray(d["y"], np.int64)
        return np.bincount(idx, weights=np.asarray(d[col], np.float64), minlength=2 * G)

    w = total(main, "sv") + total(fld, "sv")
    for col in ("n", "sv", "svp", "svpp", "snll"):
        a, b = total(fld, col), total(main, col)
        scale = _MAX_LOSS if col == "snll" else 1.0
        with np.errstate(all="ignore"):
            ok = a == b if col == "n" else np.abs(a - b) <= (_RTOL * scale + _ATOL) * w + _TINY
        if not np.all(ok):
            k = int(np.flatnonzero(~ok)[0])
            raise ValueError(f"{source}: {what} of field {field!r} do not add up to the cells: column {col!r} at "
                             f"coarse bin {k // 2}, label {k % 2} sums to {a[k]:.10g}, the cells to {b[k]:.10g}")


def _cell_of(array: str, kind: str, shape: tuple[int, ...], r0: int = 0) -> Any:
    """``where(column, i)`` of a block of a replicate table of shape (R, K, 2) starting at
    replicate ``r0``: replicate, bin and label."""
    def where(col: str, i: int) -> str:
        r, k, y = np.unravel_index(i, shape)
        return f"{array} (replicate {r0 + r}, {kind} {k}, label {y}) sum {col!r}"

    return where


def check_accumulator(acc: Any, *, source: str, weight: str | None = None) -> None:
    """Refuse a saved state (``merge``, ``evaluate --resume``) whose tables no log can have
    produced: the cell tables by :func:`check_main_cells`, :func:`check_field_cells` and
    :func:`check_field_totals`; the replicate tables (``scal``, ``rel``, ``hist``, ``fld``)
    row by row with the same rules for their (bin, label) sums and totals that agree; the
    oracle gaps within [0, 1]; and a total weight that did not overflow
    (:func:`check_weight_total`, ``parts=True``).

    Args:
      acc: an :class:`~calib_jax.logs.accumulate.Accumulator` read by ``from_bytes``.
      source: the state file, for the message.
      weight: the weight column the state was read with (``None``: rows weigh 1), named when
        its total overflowed.

    Returns:
      None: it only raises.

    Raises:
      ValueError: ``"<source>: not a consistent calib-jax state: array ..."`` naming the array,
        the replicate, bin or cell, and the rule.

    Example:
      >>> import numpy as np
      >>> from calib_jax.logs.accumulate import Accumulator, Settings
      >>> acc = Accumulator(Settings(n_boot=0))
      >>> check_accumulator(acc, source="state.npz")  # an empty state is consistent
      >>> acc.scal[0, :2] = [1.0, 2.0]  # weight 1 but 2 weighted clicks
      >>> check_accumulator(acc, source="state.npz")
      Traceback (most recent call last):
      ...
      ValueError: state.npz: not a consistent calib-jax state: array 'scal' (replicate 0) sum 'wy' is 2: ...
    """
    from calib_jax.logs.accumulate import FIELD_CELL_BINS as G
    from calib_jax.logs.accumulate import FIELD_STATS, ORACLE_SCALARS, SCALARS

    s = acc.settings
    src = f"{source}: not a consistent calib-jax state"
    M, H = s.n_bins, s.hist_bins
    sum_names = ["sv", "svp", "svpp", "svo", "sbrier", "snll", "smae"]
    if s.oracle:
        sum_names += ["soracle_brier", "soracle_mae", "skl", "spi", "spipi", "sppi"]
    gaps = np.concatenate([np.ravel(acc.top_gaps), np.ravel(acc.oracle_max)])
    _Checker(src, lambda col, i: "array 'top_gaps' / 'oracle_max'").require(
        (gaps >= 0) & (gaps <= 1), "", lambda i: f"holds {gaps[i]:.10g}: an oracle gap |oracle - p| lies in [0, 1]")
    if acc.cells:
        ne = np.flatnonzero((acc.cell_n != 0) | np.any(acc.cell != 0, axis=1))
        y, rb, hb = ne % 2, (ne // 2) % M, ne // (2 * M)
        sums = {k: acc.cell[ne, j] for j, k in enumerate(sum_names)}
        at = lambda col, i: (f"array 'cell' sum {col!r} of cell {ne[i]} (bin {hb[i]}, rb {rb[i]}, y {y[i]})"
                             if col not in ("n", "bin") else f"array 'cell_n' of cell {ne[i]} ({col})")
        with np.errstate(over="ignore"):  # an overflow is what the check reports
            total = float(np.sum(acc.cell[:, 0]))
        check_weight_total(total, source=source, column=weight, parts=True)
        check_main_cells(s, hb, rb, y, acc.cell_n[ne], sums, source=src, where=at)
        main = {"gb": hb * G // H, "y": y, "n": acc.cell_n[ne], **{k: sums[k] for k in ("sv", "svp", "svpp",
                                                                                       "snll")}}
        per = G * 2
        for i, f in enumerate(s.fields):
            t = acc.fcell[f]
            fne = np.flatnonzero(np.any(t != 0, axis=1))
            fy, fgb = fne % 2, (fne % per) // 2
            fsums = {k: t[fne, j] for j, k in enumerate(("sv", "svp", "svpp", "snll"))}
            fat = lambda col, j, fne=fne, i=i: f"array 'fcell__{i}' sum {col!r} of cell {fne[j]}"
            check_field_cells(s, fgb, fy, t[fne, FIELD_STATS], fsums, source=src, where=fat)
            check_field_totals(s, f, main, {"gb": fgb, "y": fy, "n": t[fne, FIELD_STATS], **fsums}, source=src,
                               what=f"array 'fcell__{i}'")
        return
    names = list(SCALARS) + (list(ORACLE_SCALARS) if s.oracle else [])
    sc = {k: acc.scal[:, j] for j, k in enumerate(names)}
    w = sc["w"]
    check_weight_total(float(np.max(w, initial=0.0)), source=source, column=weight, parts=True)
    c = _Checker(src, lambda col, r: f"array 'scal' (replicate {r}) sum {col!r}")
    c.require(w >= 0, "w", lambda r: f"is {w[r]:.10g}: a sum of weights must not be negative")
    for k, what in (("wy", "the click rate wy / w"), ("wp", "the mean score wp / w"), ("brier", "the Brier score"),
                    ("mae", "the mean absolute error")):
        c.mean_within(k, sc[k], w, 0.0, 1.0, what)
    c.mean_within("nll", sc["nll"], w, 0.0, np.inf, "the mean log loss")
    if s.oracle:
        for k in ("oracle_brier", "oracle_mae", "wpi"):
            c.mean_within(k, sc[k], w, 0.0, 1.0, f"{k} / w")
        c.mean_within("oracle_kl", sc["oracle_kl"], w, 0.0, _MAX_LOSS, "the mean KL(oracle || p)")
        c.mean_within("wpipi", sc["wpipi"], sc["wpi"], 0.0, 1.0, "wpipi / wpi (an oracle CTR)")
        c.mean_within("wpp", sc["wpp"], sc["wp"], 0.0, 1.0, "wpp / wp (a probability)")
        c.mean_within("wppi", sc["wppi"], sc["wpi"], 0.0, 1.0, "wppi / wpi (a probability)")
    R = acc.R
    e = _logit_edges(s)
    h = np.arange(H)
    hlo, hhi = _prob_range(s, h, h)
    tables: list[tuple[str, np.ndarray, str, Any, Any, tuple[np.ndarray, np.ndarray] | None]] = [
        ("rel", acc.rel.reshape(R, M, 2, 3), "bin", np.arange(M) / M, np.arange(1, M + 1) / M, None),
        ("hist", acc.hist.reshape(R, H, 2, 4), "fine bin", hlo, hhi, (e[:-1], e[1:]))]
    tables += [(f"fld__{i}", acc.fld[f].reshape(R, -1, 2, 4), "level", None, None, None)
               for i, f in enumerate(s.fields)]
    for name, table, kind, plo, phi, olim in tables:
        # a block of replicates at a time: the temporaries stay small whatever B
        step = max(1, (1 << 22) // max(1, table[0].size))
        for r0 in range(0, R, step):
            t = table[r0:r0 + step]
            tw = t[..., 0]
            c = _Checker(src, _cell_of(f"array {name!r}", kind, tw.shape, r0))
            c.require(tw >= 0, "w", lambda i, tw=tw: f"is {tw.ravel()[i]:.10g}: a sum of weights must not be "
                                                     "negative")
            if plo is None:  # a field's levels: any probability
                c.mean_within("wp", t[..., 1], tw, 0.0, 1.0, "the mean score wp / w")
                c.mean_within("wpp", t[..., 2], t[..., 1], 0.0, 1.0, "wpp / wp")
                c.mean_within("nll", t[..., 3], tw, 0.0, np.inf, "the mean log loss")
                totals = [("w", tw.sum(axis=(1, 2)), w[r0:r0 + step])]
            else:
                c.mean_within("wp", t[..., 1], tw, plo[None, :, None], phi[None, :, None], "the mean score wp / w")
                c.mean_within("wpp", t[..., 2], t[..., 1], plo[None, :, None], phi[None, :, None], "wpp / wp")
                if olim is not None:
                    c.mean_within("wo", t[..., 3], tw, olim[0][None, :, None], olim[1][None, :, None],
                                  "the mean logit")
                totals = [("w", tw.sum(axis=(1, 2)), w[r0:r0 + step]),
                          ("wy", tw[:, :, 1].sum(axis=1), sc["wy"][r0:r0 + step]),
                          ("wp", t[..., 1].sum(axis=(1, 2)), sc["wp"][r0:r0 + step])]
            for col, got, want in totals:
                _Checker(src, lambda c_, r, name=name, r0=r0: f"array {name!r} (replicate {r0 + r}) column {c_!r}"
                         ).equal(col, got, want, w[r0:r0 + step], 4.0, "array 'scal'")
