"""Row checks of ``calib-jax``: which rows of a chunk are valid, and why the others are not.

A row is invalid when its score is missing, NaN or outside [0, 1] (a logit: missing or not
finite), its label is missing or not 0/1, its weight is missing, negative or not finite, or
its oracle CTR is missing or outside [0, 1].  Missing field values are not errors: they form
the level ``__missing__``.  Without ``--drop-invalid`` the command stops with one message
naming the file, every offending column, the reason, the number of rows and the first one.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from calib_jax.cli.accumulate import Chunk

__all__ = ["Columns", "Problems", "clean_chunk", "to_logit"]

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

    def __post_init__(self) -> None:
        if (self.score is None) == (self.logit is None):
            raise ValueError("give exactly one of --score COL (probabilities) or --logit COL")

    @property
    def numeric(self) -> list[str]:
        cols = [self.score or self.logit, self.label, self.weight, self.oracle]
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

    def describe(self) -> str:
        return "; ".join(f"column {c!r}: {n} row{'s' if n != 1 else ''} {r}"
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
    return np.asarray(arr.to_numpy(zero_copy_only=False), np.float64)  # nulls -> NaN


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
    if bad.any():
        problems.bad_rows += int(bad.sum())
    keep = ~bad
    y = np.where(keep, y, 0.0)
    fields = {f: batch.column(batch.schema.get_field_index(f)) for f in cols.fields}
    return Chunk(p=np.where(keep, p, 0.0), o=np.where(keep, o, 0.0), y=y, v=np.where(keep, v, 0.0), keep=keep,
                 fields=fields, oracle=pi, nll=None if nll is None else np.where(keep, nll, 0.0))
