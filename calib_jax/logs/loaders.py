r"""Log readers for the ``calib-jax`` command: every format streams in chunks of rows.

Each reader yields :class:`pyarrow.RecordBatch` chunks holding only the requested columns,
value columns (scores, logits, labels, weights, oracle CTRs) as ``float64`` and field
columns as strings, so a log of any length is read with flat memory.

Supported formats (``--format``):

* ``csv`` / ``tsv`` — a header row, then one row per impression; any column names.
* ``parquet`` — any Parquet file (read batch by batch with ``pyarrow.parquet``).
* ``criteo`` — the Criteo display-advertising challenge layout (Kaggle ``train.txt``): no
  header, tab-separated, ``label``, 13 integer features ``I1..I13``, 26 hashed categorical
  features ``C1..C26``.  Predictions you appended as further tab-separated columns are named
  ``score`` (column 41), then ``extra_2``, ``extra_3``, ...
* ``avazu`` — the Avazu CTR layout: CSV with a header (``id, click, hour, C1, banner_pos,
  site_id, ...``); the label defaults to ``click``.  Append your predictions as a column.
* ``aliccp`` — Ali-CCP (Alibaba Click and Conversion Prediction) in the *preprocessed CSV
  layout* of the ESMM/MTReclib/PaddleRec reproductions: a header row with the labels
  ``click`` and ``purchase`` and one column per categorical feature field named by its
  Ali-CCP field id (``101``, ``121``, ..., ``301``, ``D109_14`` ...).  The label defaults
  to ``click`` (use ``--label purchase`` for conversions).  The raw ``sample_skeleton`` /
  ``common_features`` files with ``\x01``-separated feature lists are *not* read: convert
  them first.
* ``open_bandit`` — the Open Bandit Dataset directory (``{random,bts}/{men,women}/*.csv``),
  read with :func:`calib_jax.data.open_bandit.load_open_bandit` (all policies and
  campaigns, in time order).  The logs carry no CTR prediction, so the loader adds
  ``prequential_ctr``: for each impression, the smoothed click rate of its (item, position)
  over the *earlier* impressions only (a causal, leak-free baseline; see
  :func:`prequential_ctr`).  Columns: ``click``, ``item_id``, ``position``,
  ``propensity_score``, ``user_feature_0..3``, ``policy``, ``prequential_ctr``
  (the women's item ids follow the men's, so ``item_id`` also tells the campaigns apart).
* ``auto`` — by suffix: ``.csv``, ``.tsv``/``.txt``, ``.parquet``/``.pq``; a directory
  with ``random/`` or ``bts/`` inside is Open Bandit.

pyarrow is needed for every format (``pip install 'calib_jax[cli]'``); without it the
command stops with that instruction.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "FORMATS",
    "resolve_format",
    "default_columns",
    "iter_batches",
    "read_ahead",
    "count_rows",
    "prequential_ctr",
    "require_pyarrow",
    "criteo_names",
    "check_case_distinct",
    "check_unique_columns",
    "RESERVED_LEVELS",
    "reserved_level_message",
    "check_reserved_levels",
    "id_columns",
    "FOLDER_PATTERNS",
    "is_open_bandit_dir",
]

FORMATS = ("auto", "csv", "tsv", "parquet", "criteo", "avazu", "aliccp", "open_bandit")

#: the file names a folder of logs is read by, per format (``calib_jax.logs.engines.resolve_input``)
FOLDER_PATTERNS = {"parquet": ("*.parquet", "*.pq"), "csv": ("*.csv", "*.csv.gz"), "tsv": ("*.tsv", "*.tsv.gz")}


def is_open_bandit_dir(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is an Open Bandit dataset's folder (a ``random/`` or ``bts/`` inside).

    Example:
      >>> is_open_bandit_dir("no/such/folder")
      False
    """
    p = Path(path)
    return (p / "random").is_dir() or (p / "bts").is_dir()

#: Default label (and score) column per format; ``None``: the user must name it.
_DEFAULTS: dict[str, dict[str, str | None]] = {
    "csv": {"label": None, "score": None},
    "tsv": {"label": None, "score": None},
    "parquet": {"label": None, "score": None},
    "criteo": {"label": "label", "score": None},
    "avazu": {"label": "click", "score": None},
    "aliccp": {"label": "click", "score": None},
    "open_bandit": {"label": "click", "score": "prequential_ctr"},
}


def require_pyarrow() -> Any:
    """Import pyarrow or stop with the install instruction."""
    try:
        import pyarrow
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise ValueError("reading logs needs pyarrow: pip install 'calib_jax[cli]'") from None
    return pyarrow


def resolve_format(path: str | os.PathLike[str], fmt: str = "auto") -> str:
    """The concrete format of ``path`` (``fmt`` unless it is ``"auto"``)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown --format {fmt!r}; choose one of {', '.join(FORMATS)}")
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file or directory")
    if fmt != "auto":
        if fmt == "open_bandit" and not p.is_dir():
            raise ValueError(f"{p}: --format open_bandit expects the dataset directory "
                             "(with random/ and bts/ inside), not a file")
        if fmt != "open_bandit" and p.is_dir():
            raise ValueError(f"{p}: is a directory; --format {fmt} expects a file")
        return fmt
    if p.is_dir():
        if is_open_bandit_dir(p):
            return "open_bandit"
        raise ValueError(f"{p}: a directory that is not an Open Bandit dataset; pass a file")
    suffix = p.suffix.lower()
    if suffix == ".gz":
        suffix = Path(p.stem).suffix.lower()
    table = {".csv": "csv", ".tsv": "tsv", ".txt": "tsv", ".parquet": "parquet", ".pq": "parquet"}
    if suffix not in table:
        raise ValueError(f"{p}: cannot tell the format from the suffix {p.suffix!r}; pass --format "
                         f"({', '.join(FORMATS[1:])})")
    return table[suffix]


def default_columns(fmt: str) -> dict[str, str | None]:
    """``{"label": ..., "score": ...}`` defaults of a (resolved) format."""
    return dict(_DEFAULTS[fmt])


def criteo_names(n_columns: int) -> list[str]:
    """Column names of a Criteo row with ``n_columns`` tab-separated values."""
    base = ["label"] + [f"I{k}" for k in range(1, 14)] + [f"C{k}" for k in range(1, 27)]
    extra = ["score"] + [f"extra_{k}" for k in range(2, n_columns - len(base) + 1)]
    return base + extra[: max(0, n_columns - len(base))]


def _local(path: Path) -> str:
    """``path`` as pyarrow must be given it to open that very file: absolute, so that a name
    starting with ``~`` (a folder named ``~`` in the working directory) is not read as the
    home directory (pyarrow expands a leading ``~`` of every path it is given)."""
    return str(Path(path).absolute())


def is_gzip_name(path: str | os.PathLike[str]) -> bool:
    """Whether a file name says gzip-compressed (suffix ``.gz``, any case).

    Args:
      path: a file name or path.

    Returns:
      ``True`` for ``log.csv.gz`` and ``LOG.CSV.GZ``, else ``False``.

    Example:
      >>> is_gzip_name("day=1/log.csv.GZ"), is_gzip_name("log.csv")
      (True, False)
    """
    return Path(path).suffix.lower() == ".gz"


def check_gzip(path: Path) -> None:
    r"""Refuse a file named ``*.gz`` that is not gzip-compressed (a plain file renamed, a
    download saved under the wrong name): every engine would otherwise fail deep inside its
    decompressor, or read it as damaged.

    Args:
      path: the file (nothing is checked unless its suffix is ``.gz``).

    Returns:
      ``None``; raises ``ValueError`` naming the file when its first bytes are not gzip's
      magic number ``1f 8b``.

    Example:
      >>> import tempfile, pathlib
      >>> f = pathlib.Path(tempfile.mkdtemp()) / "log.csv.gz"; _ = f.write_text("p,y\n0.5,1\n")
      >>> check_gzip(f)
      Traceback (most recent call last):
      ValueError: ...log.csv.gz: named .gz but not gzip-compressed (it starts with b'p,'); ...
    """
    if not is_gzip_name(path):
        return
    with open(_local(path), "rb") as fh:
        head = fh.read(2)
    if head != b"\x1f\x8b":
        raise ValueError(f"{path}: named .gz but not gzip-compressed (it starts with {head!r}); rename it "
                         "without .gz or compress it with gzip")


def _csv_stream(path: Path) -> Any:
    """The bytes of a CSV file for pyarrow, gunzipped when its name says ``.gz`` in any case
    (pyarrow itself detects only a lower-case ``.gz``; the other engines read it so too)."""
    pa = require_pyarrow()
    return pa.input_stream(_local(path), compression="gzip" if is_gzip_name(path) else None)


def _first_line(path: Path) -> str:
    import gzip

    check_gzip(path)
    opener: Any = gzip.open if is_gzip_name(path) else open
    # utf-8-sig: a byte-order mark (as spreadsheet programs write) is not part of the first name
    with opener(_local(path), "rt", encoding="utf-8-sig", errors="replace", newline="") as fh:
        return fh.readline().rstrip("\r\n")


def _csv_header(path: Path, fmt: str) -> tuple[list[str], bool, str]:
    """``(column names, file has a header row, delimiter)``."""
    line = _first_line(path)
    if not line:
        raise ValueError(f"{path}: empty file (no header and no rows)")
    if fmt == "criteo":
        n = len(line.split("\t"))
        if n < 40:
            raise ValueError(f"{path}: not in the Criteo layout: expected at least 40 tab-separated "
                             f"columns (label, I1-I13, C1-C26) per row, found {n} in the first row")
        return criteo_names(n), False, "\t"
    delim = "\t" if fmt == "tsv" else ","
    # the header as a CSV parser reads it: quoted names may hold the delimiter or quotes. Names
    # are taken exactly as written (spaces included, as pyarrow, DuckDB and Spark read them):
    # `--score p` does not match a column " p" (the message says so)
    names = list(next(csv.reader([line], delimiter=delim)))
    if fmt == "csv" and len(names) == 1 and "\t" in line:
        raise ValueError(f"{path}: one column found with ',' as separator but the header has tabs; "
                         "use --format tsv")
    if fmt == "avazu" and "click" not in names:
        raise ValueError(f"{path}: not in the Avazu layout: the header has no 'click' column "
                         f"(found {names[:6]}...)")
    if fmt == "aliccp" and not {"click", "purchase"} <= set(names):
        raise ValueError(f"{path}: not in the preprocessed Ali-CCP layout: the header needs the label "
                         f"columns 'click' and 'purchase' (found {names[:6]}...)")
    return names, True, delim


def _check_columns(path: Path, available: Sequence[str], wanted: Sequence[str], *,
                   hint: str = "") -> None:
    """Every wanted column is among ``available``, by its exact name (case and spaces count);
    else ``ValueError`` naming the file and the first missing column (and a near miss)."""
    missing = [c for c in wanted if c not in available]
    if missing:
        shown = ", ".join(repr(c) for c in list(available)[:12]) + (", ..." if len(available) > 12 else "")
        near = [a for a in available if a.strip().casefold() == missing[0].strip().casefold()]
        raise ValueError(f"{path}: column {missing[0]!r} not found (columns: {shown})"
                         + (f"; also missing: {missing[1:]}" if len(missing) > 1 else "")
                         + (f"; the file has {near[0]!r}: names are matched exactly, case and spaces included"
                            if near else "") + hint)


def check_case_distinct(path: str | os.PathLike[str], wanted: Sequence[str]) -> None:
    """Refuse two columns read together whose names differ only in case (``pctr`` and ``PCTR``).

    Column names bind exactly (case and spaces count), but DuckDB and Spark SQL resolve names
    without case: a query that reads ``pctr`` and ``PCTR`` together sees one name twice
    (DuckDB renames the second ``PCTR_1``), so no SQL engine can read them as two columns. The
    rule is the same on every engine, the streamed arrow reader included, so that a command
    gives one answer whatever the engine: such a pair is refused before any row is read. A
    file may hold both as long as the command reads only one of them.

    Args:
      path: the log, named in the message.
      wanted: the columns the command reads (scores, label, weight, oracle, fields, ``--by``).

    Returns:
      ``None``; raises ``ValueError`` naming the file and both columns.

    Example:
      >>> check_case_distinct("log.csv", ["pctr", "click", "PCTR"])
      Traceback (most recent call last):
      ValueError: log.csv: the columns 'pctr' and 'PCTR' read together differ only in case; ...
    """
    seen: dict[str, str] = {}
    for c in dict.fromkeys(wanted):
        first = seen.setdefault(c.lower(), c)
        if first != c:
            raise ValueError(f"{path}: the columns {first!r} and {c!r} read together differ only in case; DuckDB and "
                             "Spark resolve column names without case, so calib-jax reads neither pair on any engine: "
                             "rename one of them")


def check_unique_columns(path: Path, names: Sequence[str], wanted: Sequence[str]) -> None:
    """Refuse a file (or table) in which a column the run reads appears more than once (an unused
    duplicate is fine): which of the two a reader takes is the reader's choice.

    Args:
      path: the file, named in the message.
      names: its column names, in order.
      wanted: the columns the run reads.

    Returns:
      ``None``; raises ``ValueError`` naming the file and the column.

    Example:
      >>> check_unique_columns(Path("log.csv"), ["p", "y", "y"], ["p"])
      >>> check_unique_columns(Path("log.csv"), ["p", "y", "y"], ["y"])
      Traceback (most recent call last):
      ValueError: log.csv: column 'y' appears more than once in the file's columns; rename one of them
    """
    dup = sorted({c for c in wanted if list(names).count(c) > 1})
    if dup:
        raise ValueError(f"{path}: column {dup[0]!r} appears more than once in the file's columns; "
                         "rename one of them")


def _type_problem(t: Any, numeric: bool = False) -> str | None:
    """Why a column of Arrow type ``t`` is not read as numbers (``numeric``) or text, or ``None``."""
    pa = require_pyarrow()
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_nested(t):
        return f"a nested type ({t})"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t) \
            or str(t) == "binary_view":
        return f"raw bytes ({t})"
    if numeric and (pa.types.is_temporal(t) or pa.types.is_interval(t)):
        # no engine reads a time as a number (DuckDB and pyarrow refuse the cast, Spark makes a
        # date NULL): refused by its type, in the same words everywhere
        return f"dates or times ({t})"
    return None


def _role(numeric: bool) -> str:
    return "score, logit, label, weight or oracle" if numeric else "--field"


def check_types(path: Path, schema: Any, numeric: Sequence[str], text: Sequence[str], *,
                text_role: str = "--field") -> None:
    """Refuse a read column whose type is nested (list, struct, map, union) or raw bytes
    (binary), or a number's column that holds dates or times: no engine may turn it into text
    or numbers by its own rules.

    Args:
      path: the file, named in the message.
      schema: its ``pyarrow.Schema``.
      numeric: the columns read as numbers (score or logit, label, weight, oracle).
      text: the columns read as text (``--field``).
      text_role: what the message calls a text column (``"field"`` from Python).

    Returns:
      ``None``; raises ``ValueError`` naming the file, the column and its type.

    Example:
      >>> import pyarrow as pa
      >>> check_types(Path("log.parquet"), pa.schema([("p", pa.float64()), ("f", pa.list_(pa.int64()))]),
      ...             ["p"], ["f"])
      Traceback (most recent call last):
      ValueError: log.parquet: column 'f' holds a nested type (list<item: int64>): a --field column ...
    """
    for c in [*numeric, *text]:
        i = schema.get_field_index(c)
        why = _type_problem(schema.field(i).type, c in numeric) if i >= 0 else None
        if why:
            role = _role(True) if c in numeric else text_role
            raise ValueError(f"{path}: column {c!r} holds {why}: a {role} column must hold numbers or text")


def _cast_batch(batch: Any, numeric: Sequence[str], text: Sequence[str], path: Path, start: int = 0,
                legacy_levels: bool = False, ids: Sequence[str] = ()) -> Any:
    """The read columns of ``batch`` as float64 (``numeric``) and text (:func:`level_text`);
    ``start``: the file's data rows before the batch, for the row a message names;
    ``legacy_levels``: text as pyarrow casts it (a parameter file written before 2026-12-06).
    A text column not in ``ids`` is a level column (a field, a slice): a value spelled as one of
    :data:`RESERVED_LEVELS` stops the read naming it."""
    pa = require_pyarrow()
    import pyarrow.compute as pc

    arrays, names = [], []
    for c in [*numeric, *text]:
        col = batch.column(batch.schema.get_field_index(c))
        why = _type_problem(col.type, c in numeric)
        if why:
            raise ValueError(f"{path}: column {c!r} holds {why}: a {_role(c in numeric)} column must hold numbers "
                             "or text")
        if c in numeric and _is_text_type(col.type):
            # numbers written as text (a Parquet string column, a DataFrame of str) are read
            # as a CSV file's are, and as DuckDB and Spark read them
            try:
                col = _text_as_numbers(col)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                at = _first_uncastable(col)
                raise ValueError(f"{path}: " + (_unparsable_message(c, col[at].as_py(), start + at + 1)
                                                if at is not None else f"column {c!r} cannot be read as numbers")) \
                    from None
        elif c not in numeric:
            if c not in ids:
                check_reserved_levels(col, c, str(path), start)
            col = level_text(col, legacy=legacy_levels)
        elif col.type != pa.float64():
            try:
                if pa.types.is_boolean(col.type):
                    col = pc.cast(col, pa.int8())
                col = pc.cast(col, pa.float64())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise ValueError(f"{path}: column {c!r} cannot be read as numbers: {e}") from None
        arrays.append(col)
        names.append(c)
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _csv_batches(path: Path, fmt: str, numeric: Sequence[str], text: Sequence[str],
                 chunk_rows: int, all_columns: bool) -> Iterator[Any]:
    pa = require_pyarrow()
    import pyarrow.csv as pcsv

    names, header, delim = _csv_header(path, fmt)
    wanted = [*numeric, *text]
    _check_columns(path, names, wanted)
    check_unique_columns(path, names, wanted)
    types = {c: pa.float64() for c in numeric}
    types.update({c: pa.string() for c in text})
    if all_columns:  # pass-through columns keep their text so nothing is reformatted
        types.update({c: pa.string() for c in names if c not in types})
    # ~chunk_rows rows per block: guess the bytes per row from the file size (bounded)
    size = max(path.stat().st_size, 1)
    block = int(min(max(chunk_rows * 64, 1 << 16), 1 << 28, size + 1))
    ropts = pcsv.ReadOptions(column_names=None if header else names, block_size=block)
    popts = pcsv.ParseOptions(delimiter=delim)
    copts = pcsv.ConvertOptions(column_types=types, include_columns=None if all_columns else wanted,
                                strings_can_be_null=False)
    try:
        reader = pcsv.open_csv(_csv_stream(path), read_options=ropts, parse_options=popts, convert_options=copts)
        for batch in reader:
            yield from _rechunk(batch, chunk_rows)
    except pa.ArrowInvalid as e:
        why = _first_unparsable(path, ropts, popts, numeric) if "conversion error" in str(e).lower() else None
        raise ValueError(f"{path}: {why or f'not a valid {fmt} file for the requested columns: {e}'}") from None


def _first_unparsable(path: Path, ropts: Any, popts: Any, numeric: Sequence[str]) -> str | None:
    """The first value of a numeric CSV column that is neither a number nor a null spelling,
    as the query engines name it: ``column 'p' cannot be read as numbers: 'x' (data row 7)``
    (a second pass, on the error path only)."""
    pa = require_pyarrow()
    import pyarrow.csv as pcsv

    copts = pcsv.ConvertOptions(column_types={c: pa.string() for c in numeric}, include_columns=list(numeric),
                                strings_can_be_null=False)
    first: dict[str, tuple[int, str]] = {}
    start = 0
    for batch in pcsv.open_csv(_csv_stream(path), read_options=ropts, parse_options=popts, convert_options=copts):
        for c in numeric:
            if c in first:
                continue
            col = batch.column(batch.schema.get_field_index(c))
            at = _first_uncastable(col)
            if at is not None:
                first[c] = (start + at + 1, str(col[at].as_py()))
        if len(first) == len(numeric):
            break
        start += batch.num_rows
    if not first:
        return None
    c, (row, value) = min(first.items(), key=lambda kv: (numeric.index(kv[0]), kv[1][0]))
    return _unparsable_message(c, value, row)


#: the level names a report gives to rows without a value of a field or of the ``--by`` column
#: (``__missing__``) and to a field's levels beyond ``--max-levels`` (``__other__``); a value of the
#: log written as either would be pooled, without a word, with the rows that name stands for
RESERVED_LEVELS = ("__missing__", "__other__")


def reserved_level_message(column: str, value: str, row: int | None = None) -> str:
    """The words every engine uses for a level column holding a reserved level name as a value.

    Example:
      >>> reserved_level_message("site", "__other__", 7)[:60]
      "column 'site' holds the value '__other__' (data row 7), the "
    """
    what = "rows without a value" if value == RESERVED_LEVELS[0] else "the levels beyond --max-levels"
    at = "" if row is None else f" (data row {row})"
    return (f"column {column!r} holds the value {value!r}{at}, the name a report gives to {what}: its rows "
            "would be pooled with those; rename the value in the log, or read the log through a view that does, "
            "before using the column as a field or slice")


def id_columns(user: str | None, levels: Sequence[str]) -> list[str]:
    """The text columns of a read that are not level columns (the ``ids`` of :func:`iter_batches`):
    GAUC's user column, unless it is also read as a level (a field, the ``--by`` column).

    Example:
      >>> id_columns("uid", ["site"]), id_columns("site", ["site"]), id_columns(None, [])
      (['uid'], [], [])
    """
    return [user] if user is not None and user not in levels else []


def check_reserved_levels(col: Any, column: str, where: str, start: int = 0) -> None:
    """Refuse a level column (a field, a slice) holding a value spelled as one of
    :data:`RESERVED_LEVELS`, in the words of :func:`reserved_level_message`.

    Args:
      col: the column as read (an Arrow array); columns that are not text hold no such value.
      column: its name.
      where: the file (or ``table``) named first in the message.
      start: the data rows before ``col``'s first, for the row the message names.

    Returns:
      None: it only raises ``ValueError``.

    Example:
      >>> import pyarrow as pa
      >>> check_reserved_levels(pa.array(["a", None, "__other"]), "site", "log.csv")
      >>> check_reserved_levels(pa.array(["a", "__missing__"]), "site", "log.csv")
      Traceback (most recent call last):
      ValueError: log.csv: column 'site' holds the value '__missing__' (data row 2), the name a report ...
    """
    if _is_text_type(col.type) and (at := _reserved_level_row(col)) is not None:
        raise ValueError(f"{where}: " + reserved_level_message(column, str(col[at].as_py()), start + at + 1))


def _reserved_level_row(col: Any) -> int | None:
    """Index of the first value of text array ``col`` equal to a reserved level name, or ``None``.
    Only values starting with ``__`` are compared (about 4 ms a million rows when none does)."""
    pa = require_pyarrow()
    import pyarrow.compute as pc

    def plain(a: Any) -> Any:  # pyarrow's string kernels do not read views (polars' strings)
        return pc.cast(a, pa.string()) if str(a.type) == "string_view" else a

    if pa.types.is_dictionary(col.type):
        words = plain(col.dictionary)
        if not pc.any(pc.is_in(words, value_set=pa.array(RESERVED_LEVELS))).as_py():
            return None
        col = words.take(col.indices)  # decoded (a cast does not decode a dictionary of views)
    col = plain(col)
    underscored = pc.starts_with(col, "__")
    if not pc.any(underscored).as_py():
        return None
    hit = pc.and_(underscored, pc.is_in(col, value_set=pa.array(RESERVED_LEVELS, col.type)))
    at = pc.index(pc.fill_null(hit, False), True).as_py()
    return None if at < 0 else int(at)


def _unparsable_message(column: str, value: Any, row: int) -> str:
    """The words every engine uses for a value of a number's column that is not a number."""
    return f"column {column!r} cannot be read as numbers: {value!r} (data row {row})"


def level_text(col: Any, *, legacy: bool = False) -> Any:
    """A column read as a field or slice, as text: the one rendering every engine gives a level.

    Text stays as written; a time or time of day as :func:`_time_text` writes it (its UTC
    instant, the seconds' fraction without trailing zeros: ``2026-01-01 12:30:15.25``); a
    floating-point number (a float32 as the float64 it is) as the shortest decimal that reads
    back to it, laid out as Python's ``repr`` (:func:`_float_text`: ``1.0``, ``1e-07``,
    ``2.5e-05``, ``123456789.0``), as DuckDB casts a DOUBLE; anything else (integers,
    decimals, booleans, dates) as pyarrow casts it, as DuckDB and Spark do. Before 2026-12-06
    the arrow reader wrote a time ``2026-01-01 12:30:15.250000`` and a float ``1``, ``1e-7``
    where DuckDB wrote ``1.0``, ``1e-07`` and Spark ``1.0E-7``: one log, three sets of levels.

    Args:
      col: an Arrow array of a read column (not nested, not raw bytes: :func:`check_types`).
      legacy: pyarrow's own cast of every type, the rendering of the parameter files written
        before 2026-12-06 (their vocabularies hold it).

    Returns:
      An Arrow string array, nulls kept.

    Example:
      >>> import pyarrow as pa
      >>> level_text(pa.array([1.0, 1e-7, 2.5e-5, None])).to_pylist()
      ['1.0', '1e-07', '2.5e-05', None]
      >>> level_text(pa.array([1.0, 1e-7]), legacy=True).to_pylist()
      ['1', '1e-7']
    """
    pa = require_pyarrow()
    import pyarrow.compute as pc

    t = col.type
    if pa.types.is_dictionary(t):
        col, t = pc.cast(col, t.value_type), t.value_type
    if pa.types.is_string(t):
        return col
    if not legacy:
        if pa.types.is_timestamp(t) or pa.types.is_time(t):
            return _time_text(col)
        if pa.types.is_floating(t):
            return _float_text(col)
    return pc.cast(col, pa.string())


def _float_text(col: Any) -> Any:
    """Floats as DuckDB casts a DOUBLE to text: the shortest decimal that reads back to the
    value, laid out as Python's ``repr`` (positional from 1e-4 up to 1e16, ``.0`` on a whole
    number, else ``1e-07``; ``nan``, ``inf``). A float32 or float16 value is written as the
    float64 it is exactly (``0.10000000149011612``): DuckDB's own text of a FLOAT follows a
    rule of its own for large values (``3261845.25`` where the shortest float32 digits are
    ``3261845.2``) that Spark's and pyarrow's do not, so every engine reads such a column as
    DOUBLE first. Formatted once per distinct value of the chunk, not per row.

    Example:
      >>> import numpy as np, pyarrow as pa
      >>> _float_text(pa.array([1e15, 0.1, 1 / 3, -0.0, 1e-7])).to_pylist()
      ['1000000000000000.0', '0.1', '0.3333333333333333', '-0.0', '1e-07']
      >>> _float_text(pa.array(np.array([0.5, 0.1], np.float32))).to_pylist()
      ['0.5', '0.10000000149011612']
    """
    pa = require_pyarrow()
    import pyarrow.compute as pc

    enc = pc.dictionary_encode(col.cast(pa.float64()))
    texts = [repr(float(v)) for v in enc.dictionary.to_numpy(zero_copy_only=False)]
    return pc.take(pa.array(texts, pa.string()), enc.indices)


def _time_text(col: Any) -> Any:
    """A time or time-of-day Arrow array as the query engines write it as text: a zone-aware
    time as its UTC instant (the zone dropped, as Spark writes it in a UTC session), the
    seconds' fraction without its trailing zeros and without the point when it is zero
    (``2026-01-01 12:30:15.25``, ``2026-01-02 00:00:00``, as DuckDB and Spark cast it), so a
    field or slice of times has the same levels on every engine.

    Example:
      >>> import datetime, pyarrow as pa
      >>> t = pa.array([datetime.datetime(2026, 1, 1, 12, 30, 15, 250000), datetime.datetime(2026, 1, 2)])
      >>> _time_text(t).to_pylist()
      ['2026-01-01 12:30:15.25', '2026-01-02 00:00:00']
      >>> _time_text(t.cast(pa.timestamp("us", tz="UTC")).cast(pa.timestamp("us", tz="Europe/Paris"))).to_pylist()
      ['2026-01-01 12:30:15.25', '2026-01-02 00:00:00']
    """
    pa = require_pyarrow()
    import pyarrow.compute as pc

    if pa.types.is_timestamp(col.type) and col.type.tz is not None:
        col = col.cast(pa.timestamp(col.type.unit))  # the same instants, read as UTC wall times
    text = pc.cast(col, pa.string())
    return pc.replace_substring_regex(pc.replace_substring_regex(text, r"(\.[0-9]*?)0+$", r"\1"), r"\.$", "")


def _is_text_type(t: Any) -> bool:
    """Whether Arrow type ``t`` holds text (plain, large, view or dictionary-encoded)."""
    pa = require_pyarrow()
    if pa.types.is_dictionary(t):
        t = t.value_type
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or str(t) == "string_view")


#: the spellings of a missing value in text (pyarrow's CSV defaults; the query engines use the
#: same list, :data:`calib_jax.logs.engines._CSV_NULLS`)
TEXT_NULLS = ("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
              "N/A", "NA", "NULL", "NaN", "n/a", "nan", "null")


def _text_as_numbers(col: Any) -> Any:
    """A text Arrow array as float64 under the rule every engine reads numbers from text by:
    a null spelling (:data:`TEXT_NULLS`) is missing, spaces around a number are dropped, and
    anything else that is not a decimal number (``1_000``, ``0x1A``, ``1,5``) raises
    ``pyarrow.ArrowInvalid``. DuckDB's cast alone would read ``1_0`` as 10; pyarrow's alone
    would refuse `` 0.5``.

    Example:
      >>> import pyarrow as pa
      >>> _text_as_numbers(pa.array([" 0.5", "NA", None, "1e-3"])).to_pylist()
      [0.5, None, None, 0.001]
    """
    pa = require_pyarrow()
    import pyarrow.compute as pc

    if pa.types.is_dictionary(col.type):
        col = pc.cast(col, pa.string())
    col = pc.if_else(pc.is_in(col, value_set=pa.array(TEXT_NULLS, col.type)), pa.scalar(None, col.type), col)
    if pc.any(pc.match_substring(col, "_")).as_py():
        raise pa.ArrowInvalid("a number written with '_'")
    return pc.cast(pc.utf8_trim_whitespace(col), pa.float64())


def _first_uncastable(col: Any) -> int | None:
    """The position of the first value of the text Arrow array ``col`` that
    :func:`_text_as_numbers` refuses (``None`` if it reads them all), by halving: a few reads
    of slices, on the error path only."""
    pa = require_pyarrow()

    def castable(a: Any) -> bool:
        try:
            _text_as_numbers(a)
            return True
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return False

    if castable(col):
        return None
    lo, hi = 0, len(col)
    while hi - lo > 1:  # invariant: col[:lo] casts, col[:hi] does not
        mid = (lo + hi) // 2
        if castable(col.slice(lo, mid - lo)):
            lo = mid
        else:
            hi = mid
    return lo


def first_unparsable_parquet(files: Sequence[Path], numeric: Sequence[str]) -> tuple[Path, str] | None:
    """For Parquet files whose number columns hold text: the first file, and the column, value
    and data row in it that is not a number, in the words of :func:`_first_unparsable` (CSV)
    and of the arrow reader. The query engines' error path (a second pass over the text columns).

    Args:
      files: the Parquet files, in the order their rows are read.
      numeric: the columns read as numbers.

    Returns:
      ``(file, message)``, or ``None`` if every value reads as a number.

    Example:
      >>> import pyarrow as pa, pyarrow.parquet as pq, tempfile
      >>> f = Path(tempfile.mkdtemp()) / "log.parquet"
      >>> pq.write_table(pa.table({"p": ["0.1", " 0.2", "NA", "n.a."], "y": [0, 1, 1, 0]}), f)
      >>> first_unparsable_parquet([f], ["p", "y"])[1]
      "column 'p' cannot be read as numbers: 'n.a.' (data row 4)"
    """
    pa = require_pyarrow()
    import pyarrow.parquet as pq

    for path in files:
        try:
            schema = pq.read_schema(_local(path))
        except (pa.ArrowException, OSError):
            continue
        texts = [c for c in numeric if c in schema.names and _is_text_type(schema.field(c).type)]
        start, first = 0, None
        for batch in _parquet_batches(path, texts, 1 << 16) if texts else ():
            for c in texts:
                at = _first_uncastable(batch.column(batch.schema.get_field_index(c)))
                if at is not None and (first is None or start + at < first[0]):
                    first = (start + at, c, batch.column(batch.schema.get_field_index(c))[at].as_py())
            if first is not None:
                return path, _unparsable_message(first[1], first[2], first[0] + 1)
            start += batch.num_rows
    return None


def _rechunk(batch: Any, chunk_rows: int) -> Iterator[Any]:
    for start in range(0, batch.num_rows, chunk_rows):
        yield batch.slice(start, chunk_rows)


def _parquet_batches(path: Path, columns: Sequence[str] | None, chunk_rows: int) -> Iterator[Any]:
    pa = require_pyarrow()
    import pyarrow.parquet as pq

    try:
        # pre_buffer=False: with pre-buffering, iter_batches keeps the column chunks of every
        # row group read so far until the iterator ends (measured: 266 MB held after 30 row
        # groups of 10^6 rows, RSS 1.4 GB at 10^8 rows); without it memory stays flat
        pf = pq.ParquetFile(_local(path), pre_buffer=False)
    except (pa.ArrowInvalid, OSError) as e:
        raise ValueError(f"{path}: not a Parquet file: {e}") from None
    available = pf.schema_arrow.names
    if columns is not None:
        _check_columns(path, available, columns)
        check_unique_columns(path, available, columns)
    if pf.metadata.num_rows == 0:
        return
    yield from pf.iter_batches(batch_size=chunk_rows, columns=None if columns is None else list(columns))


def prequential_ctr(keys: np.ndarray, clicks: np.ndarray, *, strength: float = 20.0,
                    prior: float = 0.005) -> np.ndarray:
    r"""Causal click-rate forecast of each row from the rows before it with the same key.

    .. math:: \hat p_i = \frac{C_{<i}(k_i) + s\,\bar y_{<i}}{N_{<i}(k_i) + s}

    with :math:`N_{<i}(k)` and :math:`C_{<i}(k)` the impressions and clicks of key ``k``
    before row ``i``, :math:`\bar y_{<i}` the global click rate before row ``i``
    (``prior`` before any click data, mixed in with weight ``s`` = ``strength``).  Each
    forecast uses only the past, so evaluating it on the same log is honest (prequential
    evaluation, Dawid 1984).
    """
    keys = np.asarray(keys)
    y = np.asarray(clicks, np.float64)
    n = y.shape[0]
    _, inv = np.unique(keys, return_inverse=True)
    order = np.argsort(inv, kind="stable")
    ks, ys = inv[order], y[order]
    start = np.r_[True, ks[1:] != ks[:-1]]
    grp_first = np.maximum.accumulate(np.where(start, np.arange(n), 0))
    cs = np.cumsum(ys) - ys
    clicks_before = np.empty(n)
    views_before = np.empty(n)
    clicks_before[order] = cs - (cs[grp_first])
    views_before[order] = np.arange(n) - grp_first
    cum = np.cumsum(y) - y
    gbar = (cum + prior * strength) / (np.arange(n) + strength)
    return (clicks_before + strength * gbar) / (views_before + strength)


def _open_bandit_table(path: Path) -> Any:
    pa = require_pyarrow()
    from calib_jax.data.open_bandit import load_open_bandit

    d = load_open_bandit(path, policy="all", campaign="all")
    uf = np.asarray(d.user_features)
    item = np.asarray(d.item_id)
    pos = np.asarray(d.position)
    click = np.asarray(d.click, np.float64)
    key = item.astype(np.int64) * 16 + pos.astype(np.int64)
    cols = {
        "click": click,
        "item_id": item.astype(str),
        "position": (pos + 1).astype(str),
        "propensity_score": np.asarray(d.propensity, np.float64),
        **{f"user_feature_{k}": np.asarray(d.user_vocab[k], dtype=object)[uf[:, k]].astype(str)
           for k in range(uf.shape[1])},
        "policy": np.where(np.asarray(d.policy) == 1, "bts", "random"),
        "prequential_ctr": prequential_ctr(key, click),
    }
    return pa.table({k: pa.array(v) for k, v in cols.items()})


def _table_batches(table: Any, columns: Sequence[str] | None, path: Path, chunk_rows: int) -> Iterator[Any]:
    if columns is not None:
        _check_columns(path, table.column_names, columns)
        table = table.select(list(columns))
    yield from table.to_batches(max_chunksize=chunk_rows)


def iter_batches(path: str | os.PathLike[str], fmt: str, *, numeric: Sequence[str], text: Sequence[str] = (),
                 chunk_rows: int = 262_144, all_columns: bool = False, legacy_levels: bool = False,
                 ids: Sequence[str] = ()) -> Iterator[Any]:
    """Chunks of at most ``chunk_rows`` rows of the log at ``path`` (resolved format ``fmt``).

    ``numeric`` columns come as float64 and ``text`` columns as strings (:func:`level_text`;
    ``legacy_levels``: as pyarrow casts them, for a parameter file written before 2026-12-06;
    missing values are nulls).  A ``text`` column is a level column (a field, a slice) unless
    ``ids`` names it (GAUC's user): its values may not be spelled as :data:`RESERVED_LEVELS`.
    With ``all_columns`` every column of the file is returned (the others as read), for
    commands that copy the log.  Raises ``ValueError`` naming the file for a missing column, a
    wrong layout, an unparsable value or a reserved level name, ``FileNotFoundError`` for a
    missing path.
    """
    yield from _named_errors(Path(path), _iter_batches(Path(path), fmt, numeric, text, chunk_rows, all_columns,
                                                       legacy_levels, ids))


def read_ahead(items: Iterator[Any], depth: int = 2) -> Generator[Any, None, None]:
    """``items`` in their order, produced by a background thread up to ``depth`` items ahead of
    the consumer, so that reading and decoding the next chunk of a log (pyarrow releases the
    interpreter lock) overlaps with the work on this one.

    An exception of the producer is raised in the consumer, at the item where it happened.
    Closing the generator (the consumer stopped, raised or was interrupted) stops the thread
    after at most the item it is producing. Measured on the streamed reader at 10^8 Parquet
    rows on 2 cores (benchmarks/results/cli.md): the read moves off the critical path.

    Args:
      items: an iterator (consumed by the background thread only).
      depth: how many produced items may wait for the consumer, an int >= 1.

    Returns:
      A generator of the same items; close it (``contextlib.closing``) when leaving early.

    Example:
      >>> list(read_ahead(iter(range(5))))
      [0, 1, 2, 3, 4]
    """
    import queue
    import threading

    if int(depth) < 1:
        raise ValueError(f"`depth` must be an int >= 1, got {depth!r}")
    box: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=int(depth))
    stop = threading.Event()
    end = object()

    def hand_over(item: tuple[bool, Any]) -> bool:
        while not stop.is_set():
            try:
                box.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not hand_over((True, item)):
                    return
        except BaseException as e:  # noqa: BLE001 - raised in the consumer
            hand_over((False, e))
            return
        hand_over((True, end))

    worker = threading.Thread(target=produce, name="calib-jax-read-ahead", daemon=True)
    worker.start()
    try:
        while True:
            ok, item = box.get()
            if not ok:
                raise item
            if item is end:
                return
            yield item
    finally:
        stop.set()
        worker.join()


def _named_errors(path: Path, batches: Iterator[Any]) -> Iterator[Any]:
    """``batches``, with a read failure inside the file (a damaged Parquet page, a truncated
    gzip stream, a byte that breaks the parser) as one ``ValueError`` naming the file."""
    import zlib

    pa = require_pyarrow()
    try:
        yield from batches
    except ValueError as e:
        if str(path) in str(e):
            raise
        raise ValueError(f"{path}: cannot be read: {e}") from None
    except (pa.ArrowException, OSError, EOFError, zlib.error, UnicodeError) as e:
        raise ValueError(f"{path}: cannot be read (damaged or truncated?): {e}") from None


def _iter_batches(p: Path, fmt: str, numeric: Sequence[str], text: Sequence[str], chunk_rows: int,
                  all_columns: bool, legacy_levels: bool = False, ids: Sequence[str] = ()) -> Iterator[Any]:
    numeric, text = list(numeric), [c for c in text if c not in numeric]
    check_case_distinct(p, [*numeric, *text])
    if fmt in ("csv", "tsv", "criteo", "avazu", "aliccp"):
        src = _csv_batches(p, fmt, numeric, text, chunk_rows, all_columns)
    elif fmt == "parquet":
        src = _parquet_batches(p, None if all_columns else [*numeric, *text], chunk_rows)
    elif fmt == "open_bandit":
        src = _table_batches(_open_bandit_table(p), None if all_columns else [*numeric, *text], p, chunk_rows)
    else:
        raise ValueError(f"unknown format {fmt!r}")
    start = 0
    for batch in src:
        if batch.num_rows == 0:
            continue
        cast = _cast_batch(batch, numeric, text, p, start, legacy_levels, ids)
        start += batch.num_rows
        if all_columns:
            pa = require_pyarrow()
            rest = [c for c in batch.schema.names if c not in cast.schema.names]
            cols = [batch.column(batch.schema.get_field_index(c)) for c in rest]
            cast = pa.RecordBatch.from_arrays([*cast.columns, *cols], names=[*cast.schema.names, *rest])
            cast = cast.select([c for c in batch.schema.names])
        yield cast


def count_rows(path: str | os.PathLike[str], fmt: str) -> int | None:
    """Rows of the log when cheap to know (Parquet metadata), else ``None``."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            return int(pq.ParquetFile(_local(Path(path))).metadata.num_rows)
        except Exception:  # noqa: BLE001 - reported properly by iter_batches
            return None
    return None
