"""MovieLens-100K ratings, read from where the user installed them (never shipped here).

MovieLens (Harper & Konstan 2015, "The MovieLens Datasets: History and Context") is licensed by
GroupLens for research use without redistribution, so this package neither ships nor downloads
it. :func:`load` reads it from, in order of precedence:

1. the ``path`` argument: a ratings file or a folder holding one;
2. the environment variable ``CALIB_JAX_MOVIELENS`` (same meaning);
3. the copy inside an installed ``recbole`` package
   (``recbole/dataset_example/ml-100k/ml-100k.inter``, 100,000 ratings of 943 users on 1,682
   movies). ``pip install recbole --no-deps`` puts it on disk without PyTorch; the package is
   located with :func:`importlib.util.find_spec`, never imported.

Two file formats are read: RecBole's atomic ``.inter`` file (tab-separated, a typed header
``user_id:token  item_id:token  rating:float  timestamp:float``) and GroupLens' own ``u.data``
(tab-separated ``user item rating timestamp``, no header). A folder is searched for
``ml-100k.inter``, then ``u.data``. Every line is checked: a short line, an empty id, a rating
that is not a number in [1, 5] or a timestamp that is not an integer raises ``ValueError``
naming the file and the line.

The top-N calibration paper (Sato 2024, "Calibrating the Predictions for Top-N
Recommendations", §5) uses MovieLens-1M for *rating prediction*: the five-scale rating itself
is the target that the recommenders predict and the calibrators map, with no threshold to a
binary preference. :func:`load` therefore returns the ratings as they are, and
:func:`paper_split` draws the paper's random 60/20/20 split of the ratings.
"""

from __future__ import annotations

import csv
import importlib.util
import io as _io
import math
import os
import re
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from calib_jax._src.text_input import read_utf8

__all__ = ["Ratings", "find", "load", "paper_split", "ENV_VAR", "RECBOLE_FILE"]

#: the environment variable naming a ratings file or folder
ENV_VAR = "CALIB_JAX_MOVIELENS"
#: MovieLens-100K inside an installed ``recbole`` package, relative to the package's folder
RECBOLE_FILE = Path("dataset_example") / "ml-100k" / "ml-100k.inter"
_FILE_NAMES = ("ml-100k.inter", "u.data")
_HEADER = ("user_id:token", "item_id:token", "rating:float", "timestamp:float")


class Ratings(NamedTuple):
    """Explicit ratings, one row per (user, item) rating.

    Attributes:
      user: (n,) int32 user index in ``0 .. n_users - 1`` (the position of the id in ``user_ids``).
      item: (n,) int32 item index in ``0 .. n_items - 1``.
      rating: (n,) float32 rating in [1, 5].
      timestamp: (n,) int64 seconds since 1970.
      user_ids, item_ids: the file's ids behind the indices, sorted (as numbers where every id
        is an integer, else as text).
      source: the file read.
    """

    user: np.ndarray
    item: np.ndarray
    rating: np.ndarray
    timestamp: np.ndarray
    user_ids: tuple[str, ...]
    item_ids: tuple[str, ...]
    source: str

    @property
    def n_users(self) -> int:
        """The number of distinct users."""
        return len(self.user_ids)

    @property
    def n_items(self) -> int:
        """The number of distinct items."""
        return len(self.item_ids)


def _recbole_file() -> Path | None:
    """MovieLens-100K in an installed ``recbole`` (found, not imported), or None."""
    spec = importlib.util.find_spec("recbole")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        f = Path(root) / RECBOLE_FILE
        if f.is_file():
            return f
    return None


def _in_folder(path: Path) -> Path:
    if path.is_dir():
        for name in _FILE_NAMES:
            if (path / name).is_file():
                return path / name
        raise FileNotFoundError(f"{path}: no MovieLens ratings file in this folder (looked for "
                                f"{' and '.join(_FILE_NAMES)})")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such MovieLens ratings file or folder")
    return path


def find(path: str | os.PathLike[str] | None = None) -> Path:
    """The MovieLens ratings file :func:`load` reads (module docstring: ``path``, then
    ``$CALIB_JAX_MOVIELENS``, then an installed ``recbole``).

    Args:
      path: a ratings file or a folder holding ``ml-100k.inter`` or ``u.data``; ``None`` for the
        other sources.

    Returns:
      The file's :class:`pathlib.Path`.

    Raises:
      FileNotFoundError: one line naming every source, when none holds the ratings (or naming
        the given path, when it holds none).

    Example:
      >>> import pathlib, tempfile
      >>> from calib_jax.data import movielens
      >>> folder = pathlib.Path(tempfile.mkdtemp())
      >>> _ = (folder / "u.data").write_text("1\\t10\\t4\\t881250949\\n")
      >>> movielens.find(folder).name
      'u.data'
    """
    if path is not None:
        if not isinstance(path, str | os.PathLike):  # load(5) failed in Path's words
            raise ValueError(f"`path` must be a file or folder path (str or os.PathLike), got {type(path).__name__}")
        return _in_folder(Path(path))
    env = os.environ.get(ENV_VAR)
    if env:
        return _in_folder(Path(env))
    found = _recbole_file()
    if found is not None:
        return found
    raise FileNotFoundError(
        "MovieLens-100K not found: give its ratings file or folder (movielens.load(path=...) or "
        f"${ENV_VAR}), or install the recbole package that carries a copy (pip install recbole --no-deps); "
        "MovieLens may not be redistributed, so calib_jax does not ship it")


def _read(path: Path) -> tuple[list[str], list[str], np.ndarray, np.ndarray]:
    users: list[str] = []
    items: list[str] = []
    ratings: list[float] = []
    stamps: list[int] = []
    with _io.StringIO(read_utf8(path, "; MovieLens files are UTF-8"), newline="") as f:
        reader = csv.reader(f, delimiter="\t")
        for line, row in enumerate(reader, start=1):
            if line == 1 and row and row[0].strip().startswith("user_id"):
                if tuple(c.strip() for c in row[:4]) != _HEADER:
                    raise ValueError(f"{path}, line 1: header {row!r}, expected the columns {list(_HEADER)}")
                continue
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # a blank line (a trailing newline)
            if len(row) < 4:
                raise ValueError(f"{path}, line {line}: {len(row)} tab-separated fields, expected 4 "
                                 "(user, item, rating, timestamp)")
            u, i, r, t = (c.strip() for c in row[:4])
            if not u or not i:
                raise ValueError(f"{path}, line {line}: an empty user or item id")
            try:
                rating = float(r)
            except ValueError:
                raise ValueError(f"{path}, line {line}: rating {r!r} is not a number") from None
            if not 1.0 <= rating <= 5.0:
                raise ValueError(f"{path}, line {line}: rating {r!r} is outside [1, 5]")
            stamp = _whole_seconds(t)  # as an int where it is written as one: float() rounds above 2**53
            if stamp is None:
                what = "a whole number of seconds" if _is_float(t) else "a number"
                raise ValueError(f"{path}, line {line}: timestamp {t!r} is not {what}")
            if not -(2**63) <= stamp < 2**63:
                raise ValueError(f"{path}, line {line}: timestamp {t!r} is beyond a 64-bit count of seconds")
            users.append(u)
            items.append(i)
            ratings.append(rating)
            stamps.append(stamp)
    if not ratings:
        raise ValueError(f"{path}: no ratings")
    return users, items, np.asarray(ratings, np.float32), np.asarray(stamps, np.int64)


def _whole_seconds(text: str) -> int | None:
    """A timestamp's whole seconds: an integer as written (exact at any size), or a number
    written as a float whose value is whole (``881250949.0``, ``8.8e8``); else None."""
    if _INTEGER.fullmatch(text):
        return int(text)
    try:
        value = float(text)
    except ValueError:
        return None
    return int(value) if math.isfinite(value) and value.is_integer() else None


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


#: an integer written in ASCII digits (``str.isdigit`` also takes ``²``, which ``int`` refuses)
_INTEGER = re.compile(r"[+-]?[0-9]+")


def _codes(ids: list[str]) -> tuple[np.ndarray, tuple[str, ...]]:
    """Indices of the ids in their sorted distinct list (numerically when all are integers)."""
    distinct = set(ids)
    numeric = all(_INTEGER.fullmatch(s) for s in distinct)
    vocab = sorted(distinct, key=(lambda s: (int(s), s)) if numeric else None)
    index = {s: k for k, s in enumerate(vocab)}
    return np.fromiter((index[s] for s in ids), np.int32, count=len(ids)), tuple(vocab)


def load(path: str | os.PathLike[str] | None = None) -> Ratings:
    """MovieLens ratings from the file :func:`find` locates.

    Args:
      path: a ratings file or a folder (see :func:`find`); ``None``: ``$CALIB_JAX_MOVIELENS``,
        then an installed ``recbole``.

    Returns:
      :class:`Ratings`, in the file's row order.

    Raises:
      FileNotFoundError: no source holds the ratings (one line naming every source).
      ValueError: a line of the file is malformed (naming the file and the line).

    Example:
      >>> import pathlib, tempfile
      >>> from calib_jax.data import movielens
      >>> f = pathlib.Path(tempfile.mkdtemp()) / "u.data"
      >>> _ = f.write_text("196\\t242\\t3\\t881250949\\n186\\t302\\t3\\t891717742\\n196\\t302\\t5\\t881250950\\n")
      >>> r = movielens.load(f)
      >>> r.n_users, r.n_items, r.user.tolist(), r.rating.tolist()
      (2, 2, [1, 0, 1], [3.0, 3.0, 5.0])
    """
    src = find(path)
    users, items, rating, stamp = _read(src)
    user, user_ids = _codes(users)
    item, item_ids = _codes(items)
    return Ratings(user=user, item=item, rating=rating, timestamp=stamp, user_ids=user_ids, item_ids=item_ids,
                   source=str(src))


def paper_split(key: Any, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The top-N paper's random split of ``n`` ratings into 60% training, 20% validation and 20%
    test rows (Sato 2024, §5 "Evaluation process"; its ten repetitions are ten keys).

    Args:
      key: a ``jax.random`` key (or an int seed) choosing the split.
      n: the number of ratings.

    Returns:
      ``(train, val, test)``: sorted int64 row indices, disjoint, covering ``0 .. n - 1``.

    Example:
      >>> import jax
      >>> from calib_jax.data import movielens
      >>> train, val, test = movielens.paper_split(jax.random.key(0), 100)
      >>> len(train), len(val), len(test)
      (60, 20, 20)
    """
    from calib_jax.data.splits import subsplit, train_test_split

    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 5:
        raise ValueError(f"`n` must be an int >= 5 (60/20/20 parts, none empty), got {n!r}")
    rest, test = train_test_split(key, n, test_frac=0.2, chronological=False)
    train, val = subsplit(key, rest, frac=0.25)  # a quarter of the remaining 80%: 20% of the whole
    return train, val, test
