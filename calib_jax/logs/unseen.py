"""What an applied log holds that the fit never saw: field levels it did not keep, feature
values outside the range it was fitted on.

SAG, VR-SAG and Neural Calibration read each ``--field`` through the vocabulary the fit saved:
its ``--max-levels`` most frequent levels, every other level sharing the column (or embedding
row) ``__other__``. A row of the applied log whose level is not in the vocabulary takes
``__other__``'s weights. New levels are normal (a new advertiser); a field whose levels are
mostly new is not: its rows then get the correction of the rare levels the fit put in
``__other__`` (or of none, where every level was kept), with exit 0. The commonest cause is
the same value written another way: a field written ``1.0`` by one export and ``1`` by another
(a pandas column of integers turns to floats once it holds a missing value), ``" 7"`` beside
``"7"``, ``Mobile`` beside ``mobile``. The level's text is the
contract (:func:`calib_jax.logs.loaders.level_text`), so such a row is not matched to the kept
level; it is counted here, and named.

SAG and VR-SAG standardise each ``--feature`` column by the fit's mean and standard deviation.
A feature in other units than the fit's (cents for dollars, milliseconds for seconds) puts its
rows far outside every value the partitions were fitted on, and the softmax of the groups then
assigns them by extrapolation, again with exit 0. The fit records each feature's range
(``inputs.feature_range``), and the rows outside it are counted.

:class:`UnseenInputs` counts both, chunk by chunk. ``calib-jax apply`` prints one line a field or
feature that has any such rows, and warns (:class:`UnseenInputsWarning`) where a field's share is
more than :data:`WARN_MARGIN` and three binomial standard errors above the share the fit expects
on new rows (``inputs.new_share``, :func:`expected_new_share`), naming the unseen levels that are a
kept level written another way, or where the rows outside a feature's range are as far above the
2 / (n + 1) expected of n fitted rows. Where nothing changed, at most 0.2% of applies warned
(``benchmarks/results/unseen_alarms.md``).
:meth:`calib_jax.logs.Fit.predict` warns the same way. Both records are written since 2026-12-06;
for an older parameter file the fit's share is taken as 0 and features are not checked.

The same rule finds one value written two ways within one report: ``calib-jax evaluate`` of a
folder whose files write a field ``1`` and ``1.0`` reports two levels, and warns
(:class:`RespelledLevelsWarning`, :func:`respelled_levels`); so do ``merge``, ``compare --field``
and ``evaluate --by`` (for the slices' column).

The count costs one ``value_counts`` of each chunk's unseen levels. Measured on the 2-core CPU
(2026-12-06), ``apply`` of a SAG fit to 2 x 10^6 Parquet rows whose field holds a million
distinct new ids: 7.2-7.3 s against 6.1-6.7 s before (the worst case: every unseen level
distinct); the calibrated column is the same bits.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["UnseenInputs", "UnseenInputsWarning", "WARN_MARGIN", "same_value", "respelled_levels", "expected_new_share",
           "RespelledLevelsWarning", "respelled_message", "warn_if_respelled"]

#: warn where a field's share of rows with a level the fit did not keep, or a feature's share of
#: rows outside the fitted range, is more than this many (absolute), and three binomial standard
#: errors, above what the fit expects on new rows
WARN_MARGIN = 0.10

#: the unseen levels kept, per field, to name in a message: the most frequent of each chunk,
#: their rows added over the chunks (a level outside a chunk's most frequent is not counted there)
_KEPT_EXAMPLES = 256


class UnseenInputsWarning(UserWarning):
    """Many rows of an applied log hold levels of a field that the fit did not keep (they take
    the weights of the level ``__other__``), or values of a feature outside the range the fit
    saw (``calib-jax apply`` and :meth:`calib_jax.logs.Fit.predict`).

    Example:
      >>> import warnings
      >>> from calib_jax.logs import UnseenInputsWarning
      >>> with warnings.catch_warnings():
      ...     warnings.simplefilter("error", UnseenInputsWarning)  # a pipeline that stops on it
      ...     pass
    """


class RespelledLevelsWarning(UserWarning):
    """A field of a report (or the column of its slices) holds one value written two ways (``1``
    and ``1.0``), reported as two levels (``calib-jax evaluate``, ``merge`` and ``compare``).

    Example:
      >>> import warnings
      >>> from calib_jax.logs.unseen import RespelledLevelsWarning
      >>> with warnings.catch_warnings():
      ...     warnings.simplefilter("ignore", RespelledLevelsWarning)  # a lake known to mix spellings
      ...     pass
    """


def _value_key(text: str) -> tuple[str, Any]:
    """What a level's text says, for :func:`same_value`: its number when it reads as a finite
    decimal number, else its text without the spaces around it and without case."""
    try:
        x = float(text)
    except ValueError:
        x = math.nan
    return ("number", x) if math.isfinite(x) else ("text", text.strip().casefold())


#: levels that stand for no value of the column
_NO_VALUE = ("__other__", "__missing__")


def same_value(level: str, vocabulary: Sequence[str]) -> str | None:
    """The kept level of ``vocabulary`` that ``level`` writes another way, or None.

    Two texts write the same value when both read as the same finite decimal number (``1``,
    ``1.0``, ``1e0``, ``01``), or when they are equal once the spaces around them are dropped
    and letters compared without case (``" Mobile"``, ``mobile``). ``__other__`` and
    ``__missing__`` (a missing value) match nothing.

    Args:
      level: a level's text in the applied log.
      vocabulary: the fit's kept levels (``inputs.vocabularies[field]``).

    Returns:
      The first kept level that writes the same value, or ``None``.

    Example:
      >>> from calib_jax.logs.unseen import same_value
      >>> same_value("1.0", ["0", "1", "__other__"])
      '1'
      >>> same_value(" Mobile", ["mobile", "__other__"])
      'mobile'
      >>> same_value("7", ["0", "1", "__other__"]) is None
      True
    """
    if level in _NO_VALUE:
        return None
    key = _value_key(level)
    return next((kept for kept in vocabulary if kept not in _NO_VALUE and kept != level and _value_key(kept) == key),
                None)


def respelled_levels(levels: Sequence[str]) -> list[list[str]]:
    """The groups of two or more ``levels`` that write one value (:func:`same_value`'s rule), in
    the order of their first level.

    A field's level is its text (:func:`calib_jax.logs.loaders.level_text`), so a log whose files
    write one value two ways (``1`` by one export, ``1.0`` by another) reports it as two levels;
    ``calib-jax evaluate``, ``merge`` and ``compare`` warn with these groups.

    Args:
      levels: a field's level names.

    Returns:
      A list of groups, each a list of two or more level names.

    Example:
      >>> from calib_jax.logs.unseen import respelled_levels
      >>> respelled_levels(["1", "2", "1.0", "web", "Web ", "__missing__"])
      [['1', '1.0'], ['web', 'Web ']]
    """
    groups: dict[tuple[str, Any], list[str]] = {}
    for level in levels:
        if level not in _NO_VALUE:
            groups.setdefault(_value_key(level), []).append(level)
    return [g for g in groups.values() if len(g) > 1]


def _above(share: float, expected: float, rows: int) -> bool:
    """Whether ``share`` of ``rows`` lies more than :data:`WARN_MARGIN` above ``expected`` and
    beyond three binomial standard errors of it as well, so that a log of a few rows drawn like
    the fit's does not warn by chance (``benchmarks/results/unseen_alarms.md``)."""
    return share > expected + WARN_MARGIN + 3.0 * math.sqrt(expected * (1.0 - expected) / rows)


def expected_new_share(counts: Mapping[str, int], kept: Sequence[str], rows: int) -> float:
    """The share of new rows expected at levels that a fit on ``rows`` rows did not keep: its rows
    in ``__other__`` plus its rows whose kept level it saw once (leave-one-out: had the fit not
    seen such a row, its level would be new), the Good-Turing estimate of the unseen levels' mass.
    A field with a long tail of levels a small fit never met holds far more new rows than the
    fit's own share in ``__other__`` says.

    Args:
      counts: the fit's rows per level.
      kept: the levels the fit kept (its vocabulary, ``__other__`` aside).
      rows: the fit's rows.

    Returns:
      A share in [0, 1].

    Example:
      >>> from calib_jax.logs.unseen import expected_new_share
      >>> expected_new_share({"a": 6, "b": 2, "c": 1, "d": 1}, ["a", "b", "c"], 10)  # d in __other__, c once
      0.2
    """
    if rows <= 0:
        return 0.0
    kept_set = set(kept) - set(_NO_VALUE)
    in_kept = sum(c for level, c in counts.items() if level in kept_set)
    once = sum(1 for level, c in counts.items() if level in kept_set and c == 1)
    return (rows - in_kept + once) / rows


class UnseenInputs:
    """Per field, the rows whose level is not in the fit's vocabulary, and per feature, the rows
    outside the fit's range, counted chunk by chunk.

    Args:
      inputs: the parameter file's ``inputs`` record (its ``fields``, ``vocabularies``,
        ``features`` and, when recorded, ``other_share`` and ``feature_range``).

    Example:
      >>> import numpy as np, pyarrow as pa, pyarrow.compute as pc
      >>> from calib_jax.logs.unseen import UnseenInputs
      >>> inputs = {"fields": ["media"], "vocabularies": {"media": ["0", "1", "__other__"]},
      ...           "other_share": {"media": 0.0}, "features": ["price"], "feature_range": [[1.0, 20.0]]}
      >>> tally = UnseenInputs(inputs)
      >>> text = pa.array(["0.0", "1", "0.0", "2"])
      >>> tally.add("media", text, pc.index_in(text, value_set=pa.array(["0", "1", "__other__"])))
      >>> tally.add_feature("price", np.array([150.0, 2.0, 990.0, 5.0]))
      >>> tally.rows += 4
      >>> for line, warn in tally.messages():
      ...     print(warn, line)  # doctest: +NORMALIZE_WHITESPACE
      True field 'media': 3 of 4 rows (75.0%) have a level the fit did not keep and take the weights
        of __other__ (the fit's own rows: 0.0%); '0.0' (2 rows) is the kept level '0' written
        another way
      True feature 'price': 2 of 4 rows (50.0%) lie outside the range the fit saw, [1, 20]
        (these rows: 150 to 990)
    """

    def __init__(self, inputs: Mapping[str, Any]) -> None:
        self.fields = list(inputs.get("fields", ()))
        self.vocabularies = {f: list(inputs.get("vocabularies", {}).get(f, ())) for f in self.fields}
        recorded = inputs.get("other_share")
        self.fit_share = {f: float(recorded[f]) for f in self.fields} if isinstance(recorded, dict) else None
        new = inputs.get("new_share")
        #: the share of new rows expected at levels the fit did not keep (:func:`expected_new_share`)
        self.expected = ({f: float(new[f]) for f in self.fields} if isinstance(new, dict)
                         else dict(self.fit_share or dict.fromkeys(self.fields, 0.0)))
        #: the fit's rows, for a feature's expected share outside its range (2 / (rows + 1))
        self.fit_rows = int(inputs["rows"]) if isinstance(inputs.get("rows"), int) else None
        ranges = inputs.get("feature_range")
        features = list(inputs.get("features", ()))
        self.ranges = ({c: (float(lo), float(hi)) for c, (lo, hi) in zip(features, ranges, strict=True)}
                       if isinstance(ranges, list) else {})
        self.rows = 0
        self.unseen: dict[str, int] = dict.fromkeys(self.fields, 0)
        self.levels: dict[str, Counter[str]] = {f: Counter() for f in self.fields}
        self.outside: dict[str, int] = dict.fromkeys(self.ranges, 0)
        self.outside_span: dict[str, tuple[float, float]] = {}

    def add(self, field: str, text: Any, index: Any) -> None:
        """Count the rows of one chunk of ``field``: ``text`` its levels (Arrow strings),
        ``index`` their positions in the vocabulary (``pyarrow.compute.index_in``: null where
        the level was not kept). The caller adds the chunk's rows to :attr:`rows` once."""
        import pyarrow.compute as pc

        missing = pc.is_null(index)
        n = int(pc.sum(missing).as_py() or 0)
        if not n:
            return
        self.unseen[field] += n
        counts = pc.value_counts(pc.filter(text, missing))
        if len(counts) > _KEPT_EXAMPLES:  # a field of ids: only the chunk's most frequent go to Python
            counts = counts.take(pc.array_sort_indices(counts.field("counts"), order="descending")[:_KEPT_EXAMPLES])
        seen = self.levels[field]
        for value, count in zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True):
            seen[str(value)] += int(count)
        if len(seen) > 4 * _KEPT_EXAMPLES:
            self.levels[field] = Counter(dict(seen.most_common(_KEPT_EXAMPLES)))

    def add_feature(self, feature: str, values: np.ndarray) -> None:
        """Count the rows of one chunk whose value of ``feature`` lies outside the fit's range
        (nothing for a file that does not record it). ``values``: the chunk's finite values."""
        if feature not in self.ranges:
            return
        lo, hi = self.ranges[feature]
        out = values[(values < lo) | (values > hi)]
        if out.size:
            self.outside[feature] += int(out.size)
            a, b = float(out.min()), float(out.max())
            prev = self.outside_span.get(feature, (a, b))
            self.outside_span[feature] = (min(a, prev[0]), max(b, prev[1]))

    def report(self, where: str, say: Callable[[str], None] | None = None) -> None:
        """Warn (:class:`UnseenInputsWarning`, prefixed by ``where``) for each of
        :meth:`messages` that warns, and hand the others to ``say`` (``apply``'s lines; ``None``:
        not shown, as in :meth:`calib_jax.logs.Fit.predict`). Set :attr:`rows` first."""
        for text, warn in self.messages():
            if warn:
                warnings.warn(f"{where}: {text}", UnseenInputsWarning, stacklevel=3)
            elif say is not None:
                say(text)

    def messages(self) -> list[tuple[str, bool]]:
        """One ``(text, warn)`` per field with unseen levels and per feature with values out of
        range. A field's line gives the share of the rows that take ``__other__``'s weights beside
        the fit's own share, and the unseen levels (at most three named, the most frequent first)
        that are a kept level written another way (:func:`same_value`); ``warn`` is True where the
        share exceeds the expected share on new rows (``new_share``; else the fit's own share, 0 for
        a file that records neither) by more than :data:`WARN_MARGIN` and three binomial standard
        errors. A feature's line gives the share of rows outside the fitted range and their smallest
        and largest value; ``warn`` where it exceeds 2 / (n + 1) (n the fit's rows) the same way."""
        out = []
        for f in self.fields:
            n = self.unseen[f]
            if not n or not self.rows:
                continue
            share = n / self.rows
            fit = None if self.fit_share is None else self.fit_share[f]
            expected = self.expected[f]
            beside = ("the parameter file does not record the fit's own share" if fit is None
                      else f"the fit's own rows: {100 * fit:.1f}%" if expected == fit
                      else f"the fit's own rows: {100 * fit:.1f}%, expected on new rows: {100 * expected:.1f}%")
            text = (f"field {f!r}: {n} of {self.rows} rows ({100 * share:.1f}%) have a level the fit did not keep "
                    f"and take the weights of __other__ ({beside})")
            respelled = []
            by_value: dict[tuple[str, Any], str] = {}  # same_value's lookup, made once for the field
            for level in self.vocabularies[f]:
                if level not in _NO_VALUE:
                    by_value.setdefault(_value_key(level), level)
            for level, count in self.levels[f].most_common():  # never a kept level, nor __other__
                kept = None if level in _NO_VALUE else by_value.get(_value_key(level))
                if kept is not None:
                    respelled.append(f"{level!r} ({count} rows) is the kept level {kept!r} written another way")
                if len(respelled) == 3:
                    break
            if respelled:
                text += "; " + "; ".join(respelled)
            out.append((text, _above(share, expected, self.rows)))
        for c, n in self.outside.items():
            if not n or not self.rows:
                continue
            share = n / self.rows
            (lo, hi), (a, b) = self.ranges[c], self.outside_span[c]
            out.append((f"feature {c!r}: {n} of {self.rows} rows ({100 * share:.1f}%) lie outside the range the fit "
                        f"saw, [{lo:.6g}, {hi:.6g}] (these rows: {a:.6g} to {b:.6g})",
                        _above(share, 0.0 if self.fit_rows is None else 2.0 / (self.fit_rows + 1), self.rows)))
        return out


def respelled_message(field: str, levels: Sequence[str], what: str = "field") -> str | None:
    """The warning of a report whose ``field`` holds one value written two ways, or None.

    Args:
      field: the field's column name.
      levels: its level names.
      what: what the column is to the report (``"field"``; ``"--by"`` for the slices' column).

    Returns:
      One sentence naming at most three groups of :func:`respelled_levels`, or ``None``.

    Example:
      >>> from calib_jax.logs.unseen import respelled_message
      >>> respelled_message("media", ["1", "1.0", "2"])  # doctest: +NORMALIZE_WHITESPACE
      "field 'media': the levels '1' and '1.0' are one value written two ways and are reported
      apart (a level is its text as written); write the column one way in every file"
      >>> respelled_message("media", ["1", "2"]) is None
      True
    """
    groups = respelled_levels(levels)
    if not groups:
        return None
    named = "; ".join(" and ".join(map(repr, g)) for g in groups[:3])
    more = f" (and {len(groups) - 3} more groups)" if len(groups) > 3 else ""
    return (f"{what} {field!r}: the levels {named}{more} are one value written two ways and are reported apart "
            "(a level is its text as written); write the column one way in every file")


def warn_if_respelled(where: str, column: str, levels: Sequence[str], what: str = "field") -> None:
    """Warn (:class:`RespelledLevelsWarning`, prefixed by ``where``) when :func:`respelled_message`
    finds one value written two ways among ``levels``; the one call of ``evaluate``, ``merge``,
    ``compare --field`` and ``evaluate --by``.

    Args:
      where: the log or parts the report reads, named first in the warning.
      column: the column's name.
      levels: its level names.
      what: as in :func:`respelled_message`.

    Returns:
      None.

    Example:
      >>> import warnings
      >>> from calib_jax.logs.unseen import warn_if_respelled
      >>> with warnings.catch_warnings(record=True) as caught:
      ...     warnings.simplefilter("always")
      ...     warn_if_respelled("log.csv", "media", ["1", "1.0"])
      >>> [type(w.message).__name__ for w in caught]
      ['RespelledLevelsWarning']
    """
    message = respelled_message(column, levels, what)
    if message is not None:
        warnings.warn(f"{where}: {message}", RespelledLevelsWarning, stacklevel=3)
