"""The rows of an applied log whose field level the fit did not keep.

SAG, VR-SAG and Neural Calibration read each ``--field`` through the vocabulary the fit saved:
its ``--max-levels`` most frequent levels, every other level sharing the column (or embedding
row) ``__other__``. A row of the applied log whose level is not in the vocabulary takes
``__other__``'s weights. New levels are normal (a new advertiser); a field whose levels are
mostly new is not, and its rows then get a correction fitted for a few rare levels, with
exit 0. The commonest cause is the same value written another way: a field written ``1.0`` by
one export and ``1`` by another, ``" 7"`` beside ``"7"``, ``Mobile`` beside ``mobile``. The
level's text is the contract (:func:`calib_jax.logs.loaders.level_text`), so such a row is
not matched to the kept level; it is counted here, and named.

:class:`UnseenLevels` counts, chunk by chunk, the rows of each field that fall to
``__other__`` because their level was not kept. ``calib-jax apply`` prints one line a field
that has any, and warns (:class:`UnseenLevelsWarning`) where the share is more than
:data:`WARN_MARGIN` above the share of the fit's own rows in ``__other__`` (``inputs.other_share``
of the parameter file, recorded since 2026-12-06), naming the unseen levels that are a kept
level written another way. :meth:`calib_jax.logs.Fit.predict` warns the same way.

The count costs one ``value_counts`` of each chunk's unseen levels. Measured on the 2-core CPU
(2026-12-06), ``apply`` of a SAG fit to 2 x 10^6 Parquet rows whose field holds a million
distinct new ids: 7.2-7.3 s against 6.1-6.7 s before (the worst case: every unseen level
distinct); the calibrated column is the same bits.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["UnseenLevels", "UnseenLevelsWarning", "WARN_MARGIN", "same_value"]

#: warn where a field's share of rows with a level the fit did not keep is more than this many
#: (absolute) above the fit's own share of rows in ``__other__``
WARN_MARGIN = 0.10

#: the unseen levels kept, per field, to name in a message: the most frequent of each chunk,
#: their rows added over the chunks (a level outside a chunk's most frequent is not counted there)
_KEPT_EXAMPLES = 256


class UnseenLevelsWarning(UserWarning):
    """Many rows of an applied log hold levels of a field that the fit did not keep; they take
    the weights of the level ``__other__`` (``calib-jax apply`` and
    :meth:`calib_jax.logs.Fit.predict`).

    Example:
      >>> import warnings
      >>> from calib_jax.logs import UnseenLevelsWarning
      >>> with warnings.catch_warnings():
      ...     warnings.simplefilter("error", UnseenLevelsWarning)  # a pipeline that stops on it
      ...     pass
    """


def _as_number(text: str) -> float | None:
    try:
        x = float(text)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


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
      >>> from calib_jax.logs.unseen_levels import same_value
      >>> same_value("1.0", ["0", "1", "__other__"])
      '1'
      >>> same_value(" Mobile", ["mobile", "__other__"])
      'mobile'
      >>> same_value("7", ["0", "1", "__other__"]) is None
      True
    """
    if level in ("__other__", "__missing__"):
        return None
    number = _as_number(level)
    folded = level.strip().casefold()
    for kept in vocabulary:
        if kept in ("__other__", "__missing__") or kept == level:
            continue
        if number is not None and _as_number(kept) == number:
            return kept
        if kept.strip().casefold() == folded:
            return kept
    return None


class UnseenLevels:
    """Per field, the rows whose level is not in the fit's vocabulary, counted chunk by chunk.

    Args:
      inputs: the parameter file's ``inputs`` record (its ``fields``, ``vocabularies`` and,
        when recorded, ``other_share``).

    Example:
      >>> import pyarrow as pa, pyarrow.compute as pc
      >>> from calib_jax.logs.unseen_levels import UnseenLevels
      >>> inputs = {"fields": ["media"], "vocabularies": {"media": ["0", "1", "__other__"]},
      ...           "other_share": {"media": 0.0}}
      >>> tally = UnseenLevels(inputs)
      >>> text = pa.array(["0.0", "1", "0.0", "2"])
      >>> tally.add("media", text, pc.index_in(text, value_set=pa.array(["0", "1", "__other__"])))
      >>> tally.rows += 4
      >>> [(line, warn) for line, warn in tally.messages()]  # doctest: +NORMALIZE_WHITESPACE
      [("field 'media': 3 of 4 rows (75.0%) have a level the fit did not keep and take the weights
        of __other__ (the fit's own rows: 0.0%); '0.0' (2 rows) is the kept level '0' written
        another way", True)]
    """

    def __init__(self, inputs: Mapping[str, Any]) -> None:
        self.fields = list(inputs.get("fields", ()))
        self.vocabularies = {f: list(inputs.get("vocabularies", {}).get(f, ())) for f in self.fields}
        recorded = inputs.get("other_share")
        self.fit_share = {f: float(recorded[f]) for f in self.fields} if isinstance(recorded, dict) else None
        self.rows = 0
        self.unseen: dict[str, int] = dict.fromkeys(self.fields, 0)
        self.levels: dict[str, Counter[str]] = {f: Counter() for f in self.fields}

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

    def messages(self) -> list[tuple[str, bool]]:
        """One ``(text, warn)`` per field with unseen levels: the share of the rows that take
        ``__other__``'s weights beside the fit's own share, and the unseen levels (at most three
        named, the most frequent first) that are a kept level written another way
        (:func:`same_value`). ``warn`` is True where the share exceeds the fit's by more than
        :data:`WARN_MARGIN` (the fit's share taken as 0 for a file that does not record it)."""
        out = []
        for f in self.fields:
            n = self.unseen[f]
            if not n or not self.rows:
                continue
            share = n / self.rows
            fit = None if self.fit_share is None else self.fit_share[f]
            beside = ("the parameter file does not record the fit's own share" if fit is None
                      else f"the fit's own rows: {100 * fit:.1f}%")
            text = (f"field {f!r}: {n} of {self.rows} rows ({100 * share:.1f}%) have a level the fit did not keep "
                    f"and take the weights of __other__ ({beside})")
            respelled = []
            for level, count in self.levels[f].most_common():
                kept = same_value(level, self.vocabularies[f])
                if kept is not None:
                    respelled.append(f"{level!r} ({count} rows) is the kept level {kept!r} written another way")
                if len(respelled) == 3:
                    break
            if respelled:
                text += "; " + "; ".join(respelled)
            out.append((text, share > (fit or 0.0) + WARN_MARGIN))
        return out

