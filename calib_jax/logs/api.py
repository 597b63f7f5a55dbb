"""The log engine from Python: :func:`evaluate`, :func:`compare`, :func:`slices` and :func:`fit`
return objects (Arrow tables with the intervals as columns, the report as a dict, an inline
rendering for notebooks) instead of a folder of files.

Each function runs the same engine as its command (``calib-jax evaluate``, ``compare``,
``evaluate --by``, ``fit``): the same query on DuckDB or Spark, or the same streamed reader,
the same statistics, panel, bootstrap and verdicts. The numbers are the command's to the last
bit: the engine writes its files into a private temporary folder, the result keeps their bytes
(``.files``) and reads its tables from them, and ``.save(folder)`` writes those very bytes,
so a saved result and the command's output folder differ only in the provenance's wall time.

A source is a path, a glob (``"logs/*.parquet"``) or a folder of Parquet / CSV files (hive
partitions with ``hive_partitioning=True``), or an object in memory: a ``pyarrow.Table`` (or
``RecordBatch``), a pandas or polars ``DataFrame`` or a DuckDB relation — written once to a
temporary Parquet file that the engine reads, and named in the report by its kind
(``"<pandas.DataFrame>"``) — or a Spark ``DataFrame``, queried where it lives through a
temporary view (``engine="spark"``). Nothing changes the source.

Bad arguments raise ``ValueError`` naming the argument (``bootstrap must be 0 (no intervals) or
>= 2``), as the rest of the library does; a missing file raises ``FileNotFoundError`` naming
it.

Example:
  >>> import numpy as np, pyarrow as pa
  >>> from calib_jax import logs
  >>> rng = np.random.default_rng(0)
  >>> p = rng.uniform(0.01, 0.3, 2_000)
  >>> log = pa.table({"pctr": p, "click": (rng.uniform(size=p.size) < p).astype(np.int8)})
  >>> r = logs.evaluate(log, score="pctr", label="click", bootstrap=20)
  >>> r.metrics.column_names[:4]
  ['metric', 'value', 'lo', 'hi']
  >>> r.input["path"], r.input["rows_used"]
  ('<pyarrow.Table>', 2000)

Reference: the report's metrics and tests are those of :mod:`calib_jax.metrics` (each cites its
paper); the paired comparison is the paired bootstrap of Efron & Tibshirani, *An Introduction to
the Bootstrap* (1993), ch. 16, over joint cells shared by the models.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import functools
import html
import json
import os
import re
import tempfile
import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from calib_jax.logs.common import silent
from calib_jax.logs.unseen import UnseenInputs

__all__ = ["Report", "Comparison", "Slices", "Fit", "evaluate", "compare", "slices", "fit"]

#: the command's flags -> the library's argument names, for the engine's messages
_ARGUMENTS = {
    "--aggregates": "aggregates", "--alpha": "alpha", "--baseline": "baseline", "--bins": "bins",
    "--bootstrap-block": "bootstrap_block", "--bootstrap-scheme": "bootstrap_scheme", "--bootstrap": "bootstrap",
    "--by": "by", "--chunk-rows": "chunk_rows", "--drop-invalid": "drop_invalid=True", "--engine": "engine",
    "--every": "every", "--feature": "features", "--field": "fields", "--format": "format",
    "--gauc-weight": "gauc_weight", "--hist-bins": "hist_bins", "--hive-partitioning": "hive_partitioning=True",
    "--label": "label", "--logit": "logit", "--max-levels": "max_levels", "--method": "method",
    "--oracle": "oracle", "--partitions": "partitions", "--score": "score", "--seed": "seed",
    "--spark-conf": "spark_conf", "--spark-master": "spark_master", "--steps": "steps", "--user": "user",
    "--weight": "weight", "--negative-rate": "negative_rate", "--negative-rate-column": "negative_rate_column",
}
_FLAG = re.compile(r"--[a-z][a-z-]*")
#: the files a result keeps (not the streamed reader's checkpoint or the INCOMPLETE marker)
_KEPT_SUFFIXES = (".json", ".md", ".csv", ".png", ".html")
_TEXT_SUFFIXES = (".json", ".md", ".csv", ".html")


def _argument_names(message: str, renamed: Mapping[str, str] | None = None) -> str:
    """An engine message with the command's flags as the library's argument names."""
    names = {**_ARGUMENTS, **(renamed or {})}
    return _FLAG.sub(lambda m: names.get(m.group(0), m.group(0)), message)


# ---------------------------------------------------------------------------- sources
@dataclasses.dataclass
class _Source:
    """A source as the engine reads it: ``spec`` (a path, a glob, a folder or a Spark view), the
    label that replaces a temporary name in the results, and the engine it needs."""

    spec: str
    label: str | None = None
    engine: str | None = None
    temporary: str | None = None  # the text of a temporary path or view to replace by ``label``
    inputs: tuple[Path, ...] = ()


def _kind(source: Any) -> str:
    t = type(source)
    return f"{t.__module__.split('.')[0]}.{t.__name__}"


def _arrow_of(source: Any) -> Any:
    """An in-memory table as a ``pyarrow.Table`` (``None`` if ``source`` is none)."""
    top = type(source).__module__.split(".")[0]
    if top == "pyarrow":
        import pyarrow as pa

        if isinstance(source, pa.Table):
            return source
        if isinstance(source, pa.RecordBatch):
            return pa.Table.from_batches([source])
        if isinstance(source, pa.RecordBatchReader):
            return source.read_all()
    if top == "pandas" and hasattr(source, "to_records"):
        import pyarrow as pa

        return pa.Table.from_pandas(source, preserve_index=False)
    if top == "polars" and hasattr(source, "to_arrow"):
        return source.to_arrow()
    if top == "duckdb" and hasattr(source, "fetch_arrow_table"):
        fetch = getattr(source, "to_arrow_table", None) or source.fetch_arrow_table
        return fetch()
    return None


def _is_spark_frame(source: Any) -> bool:
    return type(source).__module__.startswith("pyspark.") and hasattr(source, "createOrReplaceTempView")


@contextlib.contextmanager
def _opened(source: Any, folder: Path, engine: str | None, fmt: str = "auto") -> Iterator[_Source]:
    """The source ready for the engine for the duration of a call (a temporary Parquet file of
    an in-memory table, a temporary view of a Spark DataFrame)."""
    from calib_jax.logs.inputs import log_files

    if isinstance(source, str | os.PathLike):
        spec = os.fspath(source)
        if not isinstance(spec, str) or not spec:
            raise ValueError(f"source: a path, a glob or a folder, got {source!r}")
        yield _Source(spec, inputs=log_files(spec, fmt if isinstance(fmt, str) else "auto"))
        return
    if _is_spark_frame(source):
        if engine not in (None, "spark"):
            raise ValueError(f"engine: a Spark DataFrame is read by engine='spark', not {engine!r}")
        view = f"calib_jax_source_{uuid.uuid4().hex}"
        source.createOrReplaceTempView(view)
        try:
            yield _Source(view, label=f"<{_kind(source)}>", engine="spark", temporary=view)
        finally:
            source.sparkSession.catalog.dropTempView(view)
        return
    import pyarrow as pa

    try:
        table = _arrow_of(source)
    except (pa.ArrowException, TypeError, ValueError) as e:  # a frame whose columns Arrow cannot hold
        raise ValueError(f"source: the {_kind(source)} cannot be read as an Arrow table: {e}") from None
    if table is None:
        raise ValueError(f"source: a path, a glob, a folder, a pyarrow Table, a pandas or polars DataFrame, a DuckDB "
                         f"relation or a Spark DataFrame; got a {_kind(source)}")
    if engine == "spark":
        raise ValueError("engine: 'spark' reads a Spark DataFrame, a table of the catalog or files; this source is "
                         "a table in memory (use engine='duckdb' or 'arrow')")
    import pyarrow.parquet as pq

    path = folder / "source" / "table.parquet"
    path.parent.mkdir()
    pq.write_table(table, path)
    yield _Source(str(path), label=f"<{_kind(source)}>", temporary=str(path))


def _log_of(src: _Source, fmt: Any) -> tuple[str, str] | None:
    """The source as a path or pattern and its format, for a result's ``save`` (``None`` for a
    temporary copy of a table in memory or a Spark view)."""
    if src.temporary is not None:
        return None
    return src.spec, fmt if isinstance(fmt, str) else "auto"


def _kept_files(folder: Path, src: _Source) -> dict[str, bytes]:
    """Every output file under ``folder`` (relative name -> bytes), a temporary source name
    replaced by the source's label in the text files."""
    from calib_jax.logs.report import md_cell

    files: dict[str, bytes] = {}
    for p in sorted(folder.rglob("*")):
        if not p.is_file() or p.suffix not in _KEPT_SUFFIXES:
            continue
        data = p.read_bytes()
        if src.temporary is not None and p.suffix in _TEXT_SUFFIXES:
            text = data.decode("utf-8")
            if p.suffix == ".json":  # as JSON writes it: the label escaped inside its string
                text = text.replace(json.dumps(src.temporary)[1:-1], json.dumps(src.label)[1:-1])
            elif p.suffix == ".html":
                text = text.replace(html.escape(src.temporary), html.escape(str(src.label)))
            elif p.suffix == ".md":  # as a Markdown cell writes it (punctuation escaped)
                text = text.replace(md_cell(src.temporary), md_cell(str(src.label)))
            text = text.replace(src.temporary, str(src.label))
            data = text.encode("utf-8")
        files[p.relative_to(folder).as_posix()] = data
    return files


def _run(source: Any, engine: str | None, call: Any, renamed: Mapping[str, str] | None = None, *,
         fmt: str = "auto") -> tuple[Any, dict[str, bytes], _Source]:
    """Open the source, run ``call(spec, engine, out)`` silently into a temporary folder and keep
    its files; the engine's messages name the library's arguments."""
    from calib_jax.logs.engines import ENGINES

    if engine is not None and (not isinstance(engine, str) or engine not in ENGINES):
        # any other value ran Spark (the engines' last branch), and the report recorded the typo
        raise ValueError(f"engine: one of {', '.join(map(repr, ENGINES))} (or None, the default), got {engine!r}")
    with tempfile.TemporaryDirectory(prefix="calib-jax-logs-") as tmp:
        folder = Path(tmp)
        with _opened(source, folder, engine, fmt) as src:
            out = folder / "out"

            def library_words(message: str) -> str:  # the source's label and the library's argument names
                if src.temporary is not None:
                    message = message.replace(src.temporary, str(src.label))
                return _argument_names(message, renamed)

            caught: list[warnings.WarningMessage] = []
            try:
                with silent(), warnings.catch_warnings(record=True) as record:
                    warnings.simplefilter("always")
                    caught = record
                    value = call(src.spec, src.engine or engine, str(out))
            except ValueError as e:
                raise ValueError(library_words(str(e))) from None
            finally:  # the engine's warnings, in the same words as its errors (they named the temporary copy)
                for w in caught:
                    warnings.warn_explicit(library_words(str(w.message)), w.category, w.filename, w.lineno)
            return value, _kept_files(out, src) if out.is_dir() else {}, src


# ---------------------------------------------------------------------------- argument checks
def _integer(name: str, value: Any, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"{name}: an integer, got {value!r}")


def _number(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ValueError(f"{name}: a number, got {value!r}")


def _column(name: str, value: Any, *, optional: bool = True) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name}: a column name (a non-empty string), got {value!r}")


def _columns(name: str, value: Any) -> tuple[str, ...]:
    """A list of column names (one name alone is a list of one)."""
    items = (value,) if isinstance(value, str) else value
    if not isinstance(items, Sequence) or isinstance(items, bytes):
        raise ValueError(f"{name}: a list of column names, got {value!r}")
    for v in items:
        _column(name, v, optional=False)
    return tuple(items)


def _flag(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name}: True or False, got {value!r}")


def _check(*, columns: Mapping[str, Any] = {}, integers: Mapping[str, Any] = {},  # noqa: B006 - read only
           optional_integers: Mapping[str, Any] = {}, flags: Mapping[str, Any] = {},  # noqa: B006
           rate: tuple[Any, Any] = (None, None)) -> None:
    """Check the arguments of an entry point by kind, each named in its message: optional
    column names, integers, integers or ``None``, booleans, and ``rate`` = (``negative_rate``,
    ``negative_rate_column``): a number in (0, 1] or a column name, not both."""
    from calib_jax.logs.downsampling import check_rate_options

    _column("negative_rate_column", rate[1])
    check_rate_options(*rate, flags=False)
    for name, value in columns.items():
        _column(name, value)
    for name, value in integers.items():
        _integer(name, value)
    for name, value in optional_integers.items():
        _integer(name, value, optional=True)
    for name, value in flags.items():
        _flag(name, value)


def _spark_settings(spark_conf: Any) -> tuple[str, ...]:
    """``spark_conf`` as ``KEY=VALUE`` items: a mapping or a list of such strings."""
    if isinstance(spark_conf, Mapping):
        return tuple(f"{k}={v}" for k, v in spark_conf.items())
    if isinstance(spark_conf, str) or not isinstance(spark_conf, Sequence):
        raise ValueError(f"spark_conf: a mapping or a list of 'KEY=VALUE' strings, got {spark_conf!r}")
    return tuple(spark_conf)


# ---------------------------------------------------------------------------- results
def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> Any:
    """An Arrow table from a header and rows (a column of numbers and ``None`` is float64)."""
    import pyarrow as pa

    columns = list(zip(*rows, strict=True)) if rows else [() for _ in header]
    return pa.table({h: pa.array(list(c)) if c else pa.array([], pa.null()) for h, c in zip(header, columns,
                                                                                          strict=True)})


def _output_path(value: Any, name: str) -> Path:
    """A path to write to: text or a path, not empty (``""`` wrote into the working folder)."""
    if not isinstance(value, str | os.PathLike) or not os.fspath(value):
        raise ValueError(f"{name}: a path to write to, got {value!r}")
    return Path(value)


class _Saved:
    """What every result shares: its files (name -> bytes) and how to save them."""

    files: dict[str, bytes]
    _inputs: tuple[Path, ...]
    #: the source as a path or pattern and its format, or None for a source in memory or a Spark view
    _log: tuple[str, str] | None

    def save(self, folder: str | os.PathLike[str]) -> Path:
        """Write the result's files into ``folder`` (created if needed): the bytes the command
        writes into its ``--out``, each file atomically. A file of the source is never
        overwritten, nor is a table written where the source's folder or pattern would read it
        as rows, nor into a folder another run is writing (``ValueError`` naming it, nothing
        written). A folder holds one result: the files an earlier save or command wrote into it
        and this one does not are removed once this one is written (:func:`calib_jax.io.fresh_outputs`;
        a file no save or command wrote stays), so save two results into two folders. Returns
        the folder."""
        from calib_jax import io as cio

        out = _output_path(folder, "folder")
        if out.exists() and not out.is_dir():
            raise ValueError(f"folder: {out} is a file, not a folder")
        targets = [out / name for name in self.files]
        for target in targets:  # every target checked before the first is written: no half-written set
            if target.is_dir():
                raise ValueError(f"folder: {target} is a folder where the result writes a file; nothing was written")
            for parent in target.relative_to(out).parents:
                if (out / parent).exists() and not (out / parent).is_dir():
                    raise ValueError(f"folder: {out / parent} is a file where the result writes a folder; nothing "
                                     "was written")
        with cio.guard_outputs(self._inputs, [*targets, out / cio.OUTPUTS_LIST]), \
                cio.exclusive_target(out, "folder:"), cio.fresh_outputs(out):
            if self._log is not None:  # not where the source's folder or pattern would read it as rows
                from calib_jax.logs.inputs import check_outputs_outside_log

                check_outputs_outside_log(self._log[0], targets, self._log[1])
            for target, data in zip(targets, self.files.values(), strict=True):
                target.parent.mkdir(parents=True, exist_ok=True)
                cio.atomic_write_bytes(target, data)
        return out

    def _repr_html_(self) -> str:
        return self.to_html()

    def to_html(self) -> str:  # pragma: no cover - each result defines it
        raise NotImplementedError


def _png_tag(data: bytes | None, alt: str) -> str:
    if not data:
        return ""
    return f"<img alt='{alt}' src='data:image/png;base64,{base64.b64encode(data).decode()}'>"


def _html_table(table: Any) -> str:
    def cell(v: Any) -> str:
        return "" if v is None else f"{v:.5g}" if isinstance(v, float) else html.escape(str(v))

    head = "".join(f"<th>{html.escape(c)}</th>" for c in table.column_names)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in row.values()) + "</tr>"
                   for row in table.to_pylist())
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


@dataclasses.dataclass(repr=False)
class Report(_Saved):
    """The calibration report of one model on a log (:func:`evaluate`; each model of
    :func:`compare`).

    Attributes:
      report: ``report.json``'s content: every metric with its interval and method, the
        per-field tables, the decompositions, the tests, the input summary and provenance.
      files: the report's files, name -> bytes (what ``calib-jax evaluate`` writes).
    """

    report: dict[str, Any]
    files: dict[str, bytes]
    _inputs: tuple[Path, ...] = ()
    _log: tuple[str, str] | None = None

    @functools.cached_property
    def _tables(self) -> dict[str, tuple[list[str], list[list[Any]]]]:
        from calib_jax.logs.report import report_tables

        return report_tables(self.report)

    @property
    def metrics(self) -> Any:
        """The metric panel as an Arrow table: ``metric, value, lo, hi, interval, plug_in, note,
        undefined`` (``lo``/``hi``: the 95% interval; ``undefined``: why a value is missing)."""
        return _table(*self._tables["metrics"])

    @property
    def fields(self) -> Any:
        """Each field level's bias, calibration ratio, NE and gap with intervals (Arrow table)."""
        return _table(*self._tables["fields"])

    @property
    def decompositions(self) -> Any:
        """Each decomposition's terms with intervals (Arrow table)."""
        return _table(*self._tables["decompositions"])

    @property
    def tests(self) -> Any:
        """The calibration tests: statistic, degrees of freedom, p-value, null (Arrow table)."""
        return _table(*self._tables["tests"])

    @property
    def verdict(self) -> list[str]:
        """The report's verdict lines."""
        return list(self.report["verdict"])

    @property
    def input(self) -> dict[str, Any]:
        """What was read: the source, the columns, rows read, used and dropped (and why)."""
        return dict(self.report["input"])

    def value(self, metric: str) -> float | None:
        """One metric's value (``None`` where it is undefined on the log); ``ValueError`` for a
        metric the report does not hold."""
        for e in self.report["metrics"]:
            if e["name"] == metric:
                return e["value"]
        names = ", ".join(e["name"] for e in self.report["metrics"])
        raise ValueError(f"metric: {metric!r} is not in the report ({names})")

    def to_html(self) -> str:
        """The report's self-contained HTML page (``report.html``)."""
        return self.files["report.html"].decode("utf-8")

    def __repr__(self) -> str:
        from calib_jax.logs.report import summary_text

        return summary_text(self.report)


@dataclasses.dataclass(repr=False)
class Comparison(_Saved):
    """Two or more models scored on the same log (:func:`compare`).

    Attributes:
      result: ``compare.json``'s content (each model's metrics, every paired difference with
        its interval and verdict, the method).
      files: every file ``calib-jax compare`` writes, name -> bytes (each model's report under
        ``models/``).
    """

    result: dict[str, Any]
    files: dict[str, bytes]
    _inputs: tuple[Path, ...] = ()
    _log: tuple[str, str] | None = None

    @property
    def differences(self) -> Any:
        """Every paired difference A − B as an Arrow table: ``metric, a, b, value_a, value_b,
        diff, lo, hi, better, verdict`` (``lo``/``hi``: the paired bootstrap's 95% interval;
        ``better``: the model the interval favours, or ``None``)."""
        keys = ["metric", "a", "b", "value_a", "value_b", "diff", "lo", "hi", "better", "verdict"]
        return _table(keys, [[d.get(k) for k in keys] for d in self.result["differences"]])

    @property
    def metrics(self) -> Any:
        """Each model's metrics with their intervals, one row per model and metric (Arrow table)."""
        rows = [[m, k, e["value"], e["lo"], e["hi"]] for m, table in self.result["metrics"].items()
                for k, e in table.items()]
        return _table(["model", "metric", "value", "lo", "hi"], rows)

    @property
    def fields(self) -> Any:
        """With ``fields``: one row per (field, metric, pair of models) as an Arrow table (the rows
        of ``fields.csv``): ``field, metric, a, b``, each model's value with its 95% interval
        (``value_a, lo_a, hi_a, value_b, lo_b, hi_b``), the paired difference ``diff, lo, hi``,
        ``better`` and ``verdict``; no rows without ``fields``."""
        from calib_jax.logs.comparison import FIELD_COLUMNS, field_rows

        return _table(list(FIELD_COLUMNS), field_rows(self.result))

    @property
    def reports(self) -> dict[str, Report]:
        """Each model's full report, by score column."""
        from calib_jax.logs.comparison import output_files

        models = self.result["models"]
        # the folder of each model's report, as the command names it (models/<i>_<safe name>)
        folders = [p.parent.as_posix() for p in output_files(Path("."), models) if p.name == "report.json"]
        out: dict[str, Report] = {}
        for name, prefix in zip(models, folders, strict=True):
            files = {k[len(prefix) + 1:]: v for k, v in self.files.items() if k.startswith(prefix + "/")}
            out[name] = Report(json.loads(files["report.json"]), files, self._inputs, self._log)
        return out

    @property
    def verdicts(self) -> list[str]:
        """One line per paired difference."""
        return [d["verdict"] for d in self.result["differences"]]

    def to_html(self) -> str:
        """The comparison as one HTML fragment: the verdicts, the differences (and with ``fields``
        the per-field table) and the overlaid reliability diagrams."""
        items = "".join(f"<li>{html.escape(v)}</li>" for v in self.verdicts)
        fields = f"<h4>Per field</h4>{_html_table(self.fields)}" if self.result.get("fields") else ""
        return (f"<div><h3>Model comparison</h3><p>{html.escape(str(self.result['input']['path']))}: "
                f"{self.result['input']['rows_used']:,} rows; {html.escape(self.result['method'])}</p><ul>{items}</ul>"
                f"{_html_table(self.differences)}{fields}"
                f"{_png_tag(self.files.get('reliability_overlay.png'), 'reliability')}</div>")

    def __repr__(self) -> str:
        return "\n".join([f"Comparison of {', '.join(self.result['models'])} on {self.result['input']['path']}",
                          *(f"  {v}" for v in self.verdicts)])


@dataclasses.dataclass(repr=False)
class Slices(_Saved):
    """A model's calibration per slice of a column, with change flags against a baseline
    slice (:func:`slices`).

    Attributes:
      result: ``slices.json``'s content.
      files: every file ``calib-jax evaluate --by`` writes, name -> bytes.
    """

    result: dict[str, Any]
    files: dict[str, bytes]
    _inputs: tuple[Path, ...] = ()
    _log: tuple[str, str] | None = None

    @property
    def table(self) -> Any:
        """One row per slice (Arrow table): ``slice, rows, baseline``, each metric with its
        ``_lo``/``_hi`` interval (with ``oracle``: the oracle metrics ``oracle_brier ...
        oracle_pearson``; with ``user``: ``gauc, gauc_lo, gauc_hi`` and ``gauc_users``, the users
        with both classes it averages over), and the metrics flagged as ``changed`` or
        ``too_small``."""
        rows = self.result["slices"]
        metrics = [k for k in rows[0] if isinstance(rows[0][k], dict) and k != "fields"] if rows else []
        keys = {m: ("value", "lo", "hi", *(("users",) if "users" in rows[0][m] else ())) for m in metrics}
        suffix = {"value": "", "lo": "_lo", "hi": "_hi", "users": "_users"}
        header = ["slice", "rows", "baseline", *[f"{m}{suffix[k]}" for m in metrics for k in keys[m]],
                  "changed", "too_small"]
        body = [[r["slice"], r["rows"], r["baseline"], *[r[m][k] for m in metrics for k in keys[m]],
                 r["changed"], r["too_small"]] for r in rows]
        return _table(header, body)

    @property
    def fields(self) -> Any:
        """With ``fields``: one row per (slice, field, metric) as an Arrow table (the rows of
        ``slices_fields.csv``): ``slice, field, metric, value, lo, hi, plug_in``; no rows without
        ``fields``."""
        from calib_jax.logs.slicing import FIELD_ROW_COLUMNS, slice_field_rows

        return _table(list(FIELD_ROW_COLUMNS), slice_field_rows(self.result))

    @property
    def changes(self) -> Any:
        """Every slice x metric test against the baseline: difference, p-value, flag (Arrow table)."""
        rows = self.result["changes"]
        keys = list(rows[0]) if rows else ["slice", "metric", "diff", "p_value", "flag", "status"]
        return _table(keys, [[r.get(k) for k in keys] for r in rows])

    def to_html(self) -> str:
        """The slices' table and the drift plot as one HTML fragment."""
        return (f"<div><h3>Calibration per slice of {html.escape(str(self.result['by']))}</h3>"
                f"<p>baseline {html.escape(str(self.result['baseline']))}</p>{_html_table(self.table)}"
                f"{_png_tag(self.files.get('drift.png'), 'drift')}</div>")

    def __repr__(self) -> str:
        changed = [r["slice"] for r in self.result["slices"] if r["changed"]]
        return (f"Slices of {self.result['input']['path']} by {self.result['by']}: {len(self.result['slices'])} "
                f"slices, baseline {self.result['baseline']}; changed: {', '.join(map(str, changed)) or 'none'}")


@dataclasses.dataclass(repr=False)
class Fit(_Saved):
    """A calibrator fitted on a log (:func:`fit`), or read back from its parameter file
    (:meth:`load`).

    Attributes:
      params: the parameter record (what ``calib-jax fit --save FILE`` writes and ``calib-jax
        apply`` reads): the method, its parameters and the columns it reads. A record given
        by hand is checked as ``calib-jax apply`` checks a file (``ValueError`` naming
        ``Fit.params`` and the entry; until 2026-12-06 it was taken as given and failed at
        :meth:`predict` with a ``KeyError``).
    """

    params: dict[str, Any]
    files: dict[str, bytes] = dataclasses.field(default_factory=dict)
    _inputs: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        from calib_jax.logs import params as P

        P.check_record(self.params, "Fit.params")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Fit:
        """The fit a parameter file holds (what :meth:`save` and ``calib-jax fit --save`` write),
        checked as ``calib-jax apply`` checks it: a file that is not one, or whose entries are
        malformed, raises ``ValueError`` naming the file and the entry (a missing file
        ``FileNotFoundError``). A later :meth:`save` never overwrites the file it was read from.

        Example:
          >>> import numpy as np, pyarrow as pa, tempfile, pathlib
          >>> from calib_jax.logs import Fit, fit
          >>> rng = np.random.default_rng(3)
          >>> q = rng.uniform(0.05, 0.3, 2_000)
          >>> f = fit(pa.table({"p": np.clip(2 * q, 0, 1), "y": (rng.uniform(size=q.size) < q).astype(int)}),
          ...         method="platt", score="p", label="y")
          >>> path = f.save(pathlib.Path(tempfile.mkdtemp()) / "platt.json")
          >>> bool(np.array_equal(Fit.load(path).predict([0.1, 0.4]), f.predict([0.1, 0.4])))
          True
        """
        from calib_jax.logs import params as P

        if not isinstance(path, str | os.PathLike) or not os.fspath(path):
            raise ValueError(f"path: a parameter file, got {path!r}")
        if Path(path).is_dir():
            raise ValueError(f"path: {path} is a folder, not a parameter file")
        spec = P.load(path)
        spec.pop("decoded", None)
        return cls(spec, {}, (Path(path).resolve(),))

    @property
    def method(self) -> str:
        """The calibrator's name."""
        return str(self.params["method"])

    def save(self, path: str | os.PathLike[str]) -> Path:  # type: ignore[override]
        """Write the parameter file (JSON, atomically), as ``calib-jax fit --save`` does; a file
        of the source is never overwritten. Returns its path."""
        from calib_jax import io as cio
        from calib_jax.logs import params as P

        target = _output_path(path, "path")
        if target.is_dir():
            raise ValueError(f"path: {target} is a folder; name the parameter file to write")
        with cio.guard_outputs(self._inputs, [target]), cio.exclusive_target(target, "path:"):
            return P.save(target, self.params)

    def predict(self, x: Any, table: Any = None) -> np.ndarray:
        """Calibrated probabilities of scores (or logits, for a fit on a logit column) ``x``;
        ``table`` (a pyarrow table, a pandas or polars DataFrame or a DuckDB relation, one row
        per score) holds the rows' fields and features for the methods that read them (SAG,
        VR-SAG, Neural Calibration). The inputs are checked as ``calib-jax apply`` checks a
        log's rows: a score outside [0, 1] (or a non-finite logit or feature value), a missing
        or mis-sized ``table`` raise ``ValueError`` naming ``x`` or ``table`` (before
        2026-12-06 a score of 2 came back as the probability 1, and a missing table as an
        ``AttributeError``). A field level the fit did not keep takes the weights of
        ``__other__``; where the share of such rows is well above what the fit expects on new
        rows (:mod:`calib_jax.logs.unseen`), an :class:`~calib_jax.logs.unseen.UnseenInputsWarning`
        names the field and the levels that are a kept level written another way (``1.0`` for
        ``1``); so it does for the rows outside a feature's fitted range.

        Example:
          >>> import numpy as np, pyarrow as pa
          >>> from calib_jax.logs import fit
          >>> rng = np.random.default_rng(3)
          >>> q = rng.uniform(0.05, 0.3, 2_000)
          >>> f = fit(pa.table({"p": np.clip(2 * q, 0, 1), "y": (rng.uniform(size=q.size) < q).astype(int)}),
          ...         method="platt", score="p", label="y")
          >>> f.predict([1.5])
          Traceback (most recent call last):
          ...
          ValueError: x: 1 value missing, NaN or outside [0, 1] (first at index 0)
        """
        from calib_jax.logs import params as P

        inp = self.params["inputs"]
        logit = bool(inp.get("logit"))
        try:
            arr = np.asarray(x, np.float64)
        except (TypeError, ValueError) as e:
            raise ValueError(f"x: {'logits' if logit else 'scores'} as numbers, got {_kind(x)} ({e})") from None
        if arr.ndim != 1 or arr.size == 0:
            raise ValueError(f"x: a non-empty 1-D array of {'logits' if logit else 'scores'}, got shape {arr.shape}")
        invalid = P.first_invalid(arr, unit_interval=not logit, float32_range=P.float32_logits(self.params))
        if invalid:
            what = P.invalid_words(self.params)
            raise ValueError(f"x: {invalid[0]} value{'s' if invalid[0] != 1 else ''} {what} "
                             f"(first at index {invalid[1]})")
        read = [*inp.get("fields", ()), *inp.get("features", ())]
        if read:
            import pyarrow as pa

            from calib_jax.logs import loaders

            try:
                arrow = _arrow_of(table)
            except (pa.ArrowException, TypeError, ValueError) as e:  # e.g. a DataFrame naming a column twice
                raise ValueError(f"table: the {_kind(table)} cannot be read as an Arrow table: {e}") from None
            if arrow is None:
                raise ValueError(f"table: {self.method} reads the columns {', '.join(map(repr, read))} of each row; "
                                 f"pass the rows as a pyarrow table or a DataFrame, got {_kind(table)}")
            if arrow.num_rows != arr.size:
                raise ValueError(f"table: {arrow.num_rows} rows for {arr.size} values of x; give one row per value")
            missing = [c for c in read if c not in arrow.column_names]
            if missing:
                raise ValueError(f"table: no column {', '.join(map(repr, missing))} (columns: "
                                 f"{', '.join(map(repr, arrow.column_names))})")
            # as apply reads a log: each read column once, and of a type that holds numbers or text
            # (a list or struct field column raised Arrow's own "Unsupported cast" here)
            loaders.check_unique_columns(Path("table"), arrow.column_names, read)
            loaders.check_types(Path("table"), arrow.schema, list(inp.get("features", ())),
                                list(inp.get("fields", ())), text_role="field")
            features = list(inp.get("features", ()))
            if features:  # read as apply reads a log's feature columns (numbers from text by the same rule)
                batch = pa.RecordBatch.from_arrays([arrow.column(c).combine_chunks() for c in features],
                                                   names=features)
                cast = loaders._cast_batch(batch, features, [], Path("table"))
                for j, c in enumerate(features):
                    values = cast.column(c).to_numpy(zero_copy_only=False)
                    problem = P.feature_row_problem(values, inp, j)
                    if problem:
                        one = problem[1] == 1
                        verb = "" if problem[0] == "missing or not finite" else ("lies " if one else "lie ")
                        raise ValueError(f"table: column {c!r}: {problem[1]} row{'' if one else 's'} "
                                         f"{verb}{problem[0]} (first at row {problem[2]})")
                    arrow = arrow.set_column(arrow.column_names.index(c), c, cast.column(c))
            for c in inp.get("fields", ()):  # a level spelled as a reserved name, as apply refuses it
                loaders.check_reserved_levels(arrow.column(c).combine_chunks(), c, "table")
            table = arrow
        tally = UnseenInputs(inp)
        out = np.asarray(P.predict_batch(self._decoded, arr, table, tally))
        tally.rows = arr.size
        tally.report("table")
        return out

    @functools.cached_property
    def _decoded(self) -> dict[str, Any]:
        """The parameter record with its parameters decoded (as :func:`calib_jax.logs.params.load`
        gives it), decoded once for every :meth:`predict`."""
        from calib_jax.logs import params as P

        p = self.params
        return {**p, "decoded": P.params_from_json(p["registry_name"], p["params_type"], p["params"])}

    def to_html(self) -> str:
        """The method and the columns it read, as an HTML fragment."""
        inp = self.params["inputs"]
        return (f"<div><b>{html.escape(self.method)}</b> fitted on {inp.get('rows')} rows of "
                f"{html.escape(str(inp.get('source')))}</div>")

    def __repr__(self) -> str:
        inp = self.params["inputs"]
        return f"Fit({self.method!r} on {inp.get('rows')} rows of {inp.get('source')})"


# ---------------------------------------------------------------------------- entry points
def evaluate(source: Any, *, score: str | None = None, logit: str | None = None, label: str | None = None,
             weight: str | None = None, negative_rate: float | None = None, negative_rate_column: str | None = None,
             fields: Sequence[str] | str = (), oracle: str | None = None,
             user: str | None = None, gauc_weight: str = "impressions", engine: str | None = None,
             format: str = "auto", bootstrap: int = 100, bootstrap_scheme: str | None = None, seed: int = 0,
             bins: int = 15, hist_bins: int = 4096, max_levels: int = 1000, drop_invalid: bool = False,
             chunk_rows: int = 262_144, hive_partitioning: bool = False, spark_master: str | None = None,
             spark_conf: Mapping[str, str] | Sequence[str] = ()) -> Report:
    """The calibration report of a log: the metric panel with 95% bootstrap intervals, the
    per-field tables, the decompositions and the calibration tests (``calib-jax evaluate``).

    The panel holds ECE (Naeini et al., *Obtaining Well Calibrated Probabilities Using
    Bayesian Binning*, AAAI 2015, eq. 1), LCCE (Huang et al., *Calibration is Grouping*, eq. 4),
    the Brier score and its Murphy decomposition, NE (He et al., *Practical Lessons from
    Predicting Clicks on Ads at Facebook*, 2014, §2), AUC and, with ``user``, GAUC.

    Args:
      source: a path, glob or folder, or an in-memory table (see :mod:`calib_jax.logs`).
      score: the column of predicted probabilities (or ``logit``: of logits).
      logit: the column of predicted logits.
      label: the 0/1 label column (default: the format's, e.g. Open Bandit's).
      weight: a column of non-negative row weights.
      negative_rate: the fraction of label-0 rows the log kept (negative downsampling), or
        ``None``: each kept non-click weighs ``1/negative_rate``, so the results are the full
        population's (:mod:`calib_jax.logs.downsampling`; the scores must be the population's
        probabilities, see :func:`~calib_jax.logs.downsampling.recalibrate_probability`).
      negative_rate_column: instead of ``negative_rate``, a column of each row's rate (a log whose
        rate changed); the calibration tests and drift flags then need one rate and are not
        computed.
      fields: categorical columns for per-field tables.
      oracle: a column of true click probabilities (simulated logs): oracle metrics.
      user: a user column: GAUC with a delta-method interval over users.
      gauc_weight: the user weight of GAUC in the panel: impressions, clicks or equal.
      engine: ``duckdb`` (the default), ``spark`` or ``arrow`` (streamed).
      format: the file format (``auto``: by suffix).
      bootstrap: bootstrap resamples for the intervals (0: none).
      bootstrap_scheme: ``cells`` (default) or ``rows`` (``engine="arrow"`` only).
      seed: the bootstrap's seed, a 64-bit integer (a negative one is its two's complement).
      bins: ECE/MCE bins.
      hist_bins: the fine logit grid of AUC, LCCE and ECE+.
      max_levels: levels kept per field before ``__other__``.
      drop_invalid: drop invalid rows (and report them) instead of refusing the log.
      chunk_rows: rows per chunk of the streamed reader.
      hive_partitioning: read ``key=value`` folders as columns.
      spark_master: the Spark master of ``engine="spark"``.
      spark_conf: Spark settings, a mapping or ``KEY=VALUE`` strings.

    Returns:
      The :class:`Report`.

    Example:
      >>> import numpy as np, pyarrow as pa
      >>> from calib_jax.logs import evaluate
      >>> p = np.linspace(0.05, 0.5, 400)
      >>> r = evaluate(pa.table({"p": p, "y": (np.arange(400) % 4 == 0).astype(int)}), score="p", label="y",
      ...              bootstrap=0)
      >>> round(r.value("ctr"), 3)
      0.25
    """
    from calib_jax.logs.evaluation import run_evaluate
    from calib_jax.logs.options import EvaluateOptions

    _check(columns=dict(score=score, logit=logit, label=label, weight=weight, oracle=oracle, user=user),
           rate=(negative_rate, negative_rate_column),
           integers=dict(bootstrap=bootstrap, seed=seed, bins=bins, hist_bins=hist_bins, max_levels=max_levels,
                         chunk_rows=chunk_rows),
           flags=dict(drop_invalid=drop_invalid, hive_partitioning=hive_partitioning))
    field = _columns("fields", fields)
    conf = _spark_settings(spark_conf)

    def call(spec: str, eng: str | None, out: str) -> Any:
        return run_evaluate(EvaluateOptions(
            log=spec, score=score, logit=logit, label=label, weight=weight, negative_rate=negative_rate,
            negative_rate_column=negative_rate_column, field=field, oracle=oracle, user=user,
            gauc_weight=gauc_weight, engine=eng, format=format, bootstrap=bootstrap, bootstrap_scheme=bootstrap_scheme,
            seed=seed, bins=bins, hist_bins=hist_bins, max_levels=max_levels, drop_invalid=drop_invalid,
            chunk_rows=chunk_rows, hive_partitioning=hive_partitioning, spark_master=spark_master, spark_conf=conf,
            out=out, quiet=True))

    _, files, src = _run(source, engine, call, fmt=format)
    return Report(json.loads(files["report.json"]), files, src.inputs, _log_of(src, format))


def compare(source: Any, *, scores: Sequence[str] = (), logits: Sequence[str] = (), label: str = "label",
            weight: str | None = None, negative_rate: float | None = None, negative_rate_column: str | None = None,
            user: str | None = None, gauc_weight: str = "impressions", oracle: str | None = None,
            fields: Sequence[str] | str = (), max_levels: int = 1000,
            engine: str | None = None, format: str = "auto", bootstrap: int = 200, seed: int = 0, bins: int = 15,
            hist_bins: int = 4096, drop_invalid: bool = False, chunk_rows: int = 262_144,
            hive_partitioning: bool = False, spark_master: str | None = None,
            spark_conf: Mapping[str, str] | Sequence[str] = ()) -> Comparison:
    """Two or more models scored on the same log: each model's metrics and every paired
    difference with its interval (``calib-jax compare``).

    Each bootstrap replicate draws one Poisson count per joint cell (the cell of every model's
    score bin and the label) and applies it to every model, so a difference's interval is the
    paired bootstrap's (Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 16),
    not two overlapping intervals.

    Args:
      source: a path, glob or folder, or an in-memory table (see :mod:`calib_jax.logs`).
      scores: two or more probability columns; every pair's difference is A − B.
      logits: instead of ``scores``, two or more logit columns (each row's fine bin and log loss
        from the logit itself, as :func:`evaluate` with ``logit``).
      label: the 0/1 label column.
      weight: a column of non-negative row weights.
      negative_rate: the fraction of label-0 rows the log kept (negative downsampling), or
        ``None``: each kept non-click weighs ``1/negative_rate``, so the results are the full
        population's (:mod:`calib_jax.logs.downsampling`; the scores must be the population's
        probabilities, see :func:`~calib_jax.logs.downsampling.recalibrate_probability`).
      negative_rate_column: instead of ``negative_rate``, a column of each row's rate (a log whose
        rate changed); the calibration tests and drift flags then need one rate and are not
        computed.
      user: a user column: adds each model's GAUC (Zhou et al. 2018, "Deep Interest Network
        for Click-Through Rate Prediction") and every paired GAUC difference, whose interval is
        the paired delta method over users (:mod:`calib_jax.logs.paired_gauc`).
      gauc_weight: the user weight of GAUC: ``impressions``, ``clicks`` or ``equal``.
      oracle: a column of each row's true click probability (a simulated log): adds each model's
        oracle metrics (oracle Brier, Brier+ = mean ``|pi - p|``, KL, Pearson and Chebyshev) and the
        paired differences of all but Chebyshev, a maximum (not a sum over cells, so not paired).
      fields: categorical columns (the advertiser, the site): for each, every model's metrics that
        are sums over the field's levels (GCE, Field-ECE, Field-RCE and the weighted per-level
        ``|bias|``, as :func:`evaluate` with ``fields`` computes them; Field-ECE and Field-RCE are
        Pan et al., WWW 2020, eqs. 5 and 6) with intervals, and every paired difference A − B with
        its paired interval and verdict, from one Poisson count per joint field cell (level, every
        model's coarse logit bin, label) shared by the models (:mod:`calib_jax.logs.paired_fields`;
        the table :attr:`Comparison.fields`, the files ``fields.csv`` / ``fields.md``). Each name
        at most once.
      max_levels: levels kept per field before ``__other__`` (those :func:`evaluate` keeps with the
        same engine).
      engine: ``duckdb`` (the default; ``spark`` for a Spark DataFrame) or ``arrow``.
      format: the file format (``auto``: by suffix).
      bootstrap: resamples shared by all models (0: no intervals).
      seed: the bootstrap's seed.
      bins: ECE/MCE bins.
      hist_bins: the fine logit grid.
      drop_invalid: drop invalid rows instead of refusing the log.
      chunk_rows: rows per chunk of the arrow engine.
      hive_partitioning: read ``key=value`` folders as columns.
      spark_master: the Spark master of ``engine="spark"``.
      spark_conf: Spark settings.

    Returns:
      The :class:`Comparison`.

    Example:
      >>> import numpy as np, pyarrow as pa
      >>> from calib_jax.logs import compare
      >>> rng = np.random.default_rng(1)
      >>> q = rng.uniform(0.02, 0.4, 3_000); y = (rng.uniform(size=q.size) < q).astype(int)
      >>> c = compare(pa.table({"good": q, "bad": np.clip(1.5 * q, 0, 1), "y": y}), scores=["good", "bad"],
      ...             label="y", bootstrap=20)
      >>> c.differences.column_names[:6]
      ['metric', 'a', 'b', 'value_a', 'value_b', 'diff']
      >>> site = np.array(["x", "y", "z"])[np.arange(q.size) % 3]
      >>> c = compare(pa.table({"good": q, "bad": np.clip(1.5 * q, 0, 1), "y": y, "site": site}),
      ...             scores=["good", "bad"], label="y", fields=["site"], bootstrap=20)
      >>> c.fields.column_names[:5], c.fields.num_rows  # GCE, Field-ECE, Field-RCE, |bias|: one pair each
      (['field', 'metric', 'a', 'b', 'value_a'], 4)
    """
    from calib_jax.logs.comparison import run_compare
    from calib_jax.logs.options import CompareOptions

    names, logit_names = _columns("scores", scores), _columns("logits", logits)
    field = _columns("fields", fields)
    _column("label", label, optional=False)
    _check(columns=dict(weight=weight, user=user, oracle=oracle), rate=(negative_rate, negative_rate_column),
           integers=dict(bootstrap=bootstrap, seed=seed, bins=bins, hist_bins=hist_bins, chunk_rows=chunk_rows,
                         max_levels=max_levels),
           flags=dict(drop_invalid=drop_invalid, hive_partitioning=hive_partitioning))
    conf = _spark_settings(spark_conf)

    def call(spec: str, eng: str | None, out: str) -> Any:
        return run_compare(CompareOptions(
            log=spec, score=names, logit=logit_names, label=label, weight=weight, negative_rate=negative_rate,
            negative_rate_column=negative_rate_column, user=user, gauc_weight=gauc_weight, oracle=oracle,
            field=field, max_levels=max_levels, format=format,
            engine=eng or "duckdb", out=out, bootstrap=bootstrap, seed=seed, bins=bins, hist_bins=hist_bins,
            chunk_rows=chunk_rows, drop_invalid=drop_invalid, quiet=True, hive_partitioning=hive_partitioning,
            spark_master=spark_master, spark_conf=conf))

    _, files, src = _run(source, engine, call, renamed={"--score": "scores", "--logit": "logits"}, fmt=format)
    return Comparison(json.loads(files["compare.json"]), files, src.inputs, _log_of(src, format))


def slices(source: Any, *, by: str, score: str | None = None, logit: str | None = None, label: str | None = None,
           weight: str | None = None, negative_rate: float | None = None,
           negative_rate_column: str | None = None, every: str | None = None, baseline: str | None = None,
           alpha: float = 0.05, user: str | None = None, gauc_weight: str = "impressions",
           fields: Sequence[str] | str = (), max_levels: int = 1000, oracle: str | None = None,
           engine: str | None = None, format: str = "auto", bootstrap: int = 100, seed: int = 0, bins: int = 15,
           hist_bins: int = 4096, drop_invalid: bool = False, chunk_rows: int = 262_144,
           hive_partitioning: bool = False, spark_master: str | None = None,
           spark_conf: Mapping[str, str] | Sequence[str] = ()) -> Slices:
    r"""A model's calibration per slice of a column (a day, a country, a model version), each
    slice against a baseline slice (``calib-jax evaluate --by``).

    Each slice's NE, calibration ratio, ECE, Brier score and AUC get a cell-bootstrap interval;
    a slice is flagged as changed when a conditional permutation test (its clicks redrawn
    hypergeometrically within score strata pooled with the baseline's) rejects "P(click | score)
    did not change" at ``alpha`` over all slices (Bonferroni).

    Args:
      source: a path, glob or folder, or an in-memory table (see :mod:`calib_jax.logs`).
      by: the column to slice by.
      score: the probability column (or ``logit``).
      logit: the logit column (each row's fine bin and log loss from the logit itself).
      label: the 0/1 label column.
      weight: a column of non-negative row weights.
      negative_rate: the fraction of label-0 rows the log kept (negative downsampling), or
        ``None``: each kept non-click weighs ``1/negative_rate``, so the results are the full
        population's (:mod:`calib_jax.logs.downsampling`; the scores must be the population's
        probabilities, see :func:`~calib_jax.logs.downsampling.recalibrate_probability`).
      negative_rate_column: instead of ``negative_rate``, a column of each row's rate (a log whose
        rate changed); the calibration tests and drift flags then need one rate and are not
        computed.
      every: with a time column: ``hour``, ``day``, ``week`` or ``month`` buckets.
      baseline: the slice the others are compared with (default: the first; with ``every``, its
        start as any ISO 8601 date or time, e.g. ``"2026-03-01"``).
      alpha: the chance that any slice is flagged on a metric when none moved.
      user: a user column: each slice's GAUC (the mean of each user's own AUC, Zhou et al.
        2018 after Zhu et al. 2017, :mod:`calib_jax.logs.gauc`) with its delta-method interval
        over the slice's users, computed on the slice's rows alone (a user with rows in several
        slices counts in each, with that slice's rows), as :func:`evaluate` with ``user``
        computes it on those rows; columns ``gauc, gauc_lo, gauc_hi, gauc_users`` of
        :attr:`Slices.table`. GAUC is reported, not flagged.
      gauc_weight: the user weight of GAUC: ``impressions``, ``clicks`` or ``equal``.
      fields: categorical columns (not ``by``): each slice's per-field metrics, GCE, Field-ECE
        :math:`\sum_k \tfrac{W_k}{W}|P_k - Y_k|/W_k`, Field-RCE and :math:`|\text{bias}|` over
        the field's levels (Pan et al., WWW 2020, eqs. 5 and 6;
        :func:`calib_jax.logs.panel.field_metrics`), each with its interval, computed as
        :func:`evaluate` with ``fields`` computes them on the slice's rows alone: the levels are
        ranked within the slice (DuckDB and Spark: its ``max_levels`` levels with the most rows,
        arrow: the first met), and the field cells draw evaluate's streams, so with the same
        ``seed`` a slice's values and intervals are evaluate's on its rows. The table
        :attr:`Slices.fields` (the file ``slices_fields.csv``); not flagged.
      max_levels: levels kept per field and slice before ``__other__``.
      oracle: a column of each row's true click probability :math:`\pi` (a simulated log; not
        ``label``, the model's column, ``weight``, ``negative_rate_column``, ``by`` or ``user``;
        values in [0, 1]): each slice's oracle metrics, oracle Brier
        :math:`\sum v(\pi - p)^2 / W`, Brier⁺ :math:`\sum v|\pi - p| / W`, KL, Chebyshev
        :math:`\max|\pi - p|` and Pearson (:func:`calib_jax.logs.panel.oracle_metrics`), each
        with its percentile interval from the slice's cell bootstrap, as :func:`evaluate` with
        ``oracle`` computes them on the slice's rows alone with the slice's seed (the one its
        main panel draws with); columns ``oracle_brier, oracle_brier_lo, oracle_brier_hi, ...``
        of :attr:`Slices.table`. Reported, not flagged.
      engine: ``duckdb`` (default), ``spark`` or ``arrow``.
      format: the file format.
      bootstrap: resamples per slice (0: no intervals).
      seed: the bootstrap's seed.
      bins: ECE bins.
      hist_bins: the fine logit grid.
      drop_invalid: drop invalid rows instead of refusing the log.
      chunk_rows: rows per chunk of the arrow engine.
      hive_partitioning: read ``key=value`` folders as columns.
      spark_master: the Spark master of ``engine="spark"``.
      spark_conf: Spark settings.

    Returns:
      The :class:`Slices`.

    Example:
      >>> import numpy as np, pyarrow as pa
      >>> from calib_jax.logs import slices
      >>> rng = np.random.default_rng(2)
      >>> q = rng.uniform(0.05, 0.3, 4_000)
      >>> day = np.repeat(["mon", "tue"], 2_000)
      >>> s = slices(pa.table({"p": q, "y": (rng.uniform(size=q.size) < q).astype(int), "day": day}), by="day",
      ...            score="p", label="y", bootstrap=20)
      >>> s.table["slice"].to_pylist()
      ['mon', 'tue']
      >>> uid = rng.integers(0, 40, q.size)
      >>> s = slices(pa.table({"p": q, "y": (rng.uniform(size=q.size) < q).astype(int), "day": day, "uid": uid}),
      ...            by="day", score="p", label="y", user="uid", bootstrap=0)
      >>> s.table["gauc_users"].to_pylist()
      [40, 40]
      >>> site = rng.choice(["a", "b", "c"], q.size)
      >>> s = slices(pa.table({"p": q, "y": (rng.uniform(size=q.size) < q).astype(int), "day": day, "site": site}),
      ...            by="day", score="p", label="y", fields=["site"], bootstrap=0)
      >>> s.fields.column_names, s.fields.num_rows  # 2 slices x 1 field x 4 metrics
      (['slice', 'field', 'metric', 'value', 'lo', 'hi', 'plug_in'], 8)
      >>> pi = np.clip(q * rng.uniform(0.8, 1.2, q.size), 0, 1)  # a simulated log's true probability
      >>> s = slices(pa.table({"p": q, "y": (rng.uniform(size=q.size) < pi).astype(int), "day": day, "pi": pi}),
      ...            by="day", score="p", label="y", oracle="pi", bootstrap=0)
      >>> [round(x, 4) for x in s.table["oracle_mae"].to_pylist()]  # mean |pi - p| of each day (about 0.175 x 0.1)
      [0.0176, 0.0176]
    """
    from calib_jax.logs.evaluation import run_evaluate
    from calib_jax.logs.options import EvaluateOptions

    _column("by", by, optional=False)
    _check(columns=dict(score=score, logit=logit, label=label, weight=weight, user=user, oracle=oracle),
           rate=(negative_rate, negative_rate_column),
           integers=dict(bootstrap=bootstrap, seed=seed, bins=bins, hist_bins=hist_bins, chunk_rows=chunk_rows,
                         max_levels=max_levels),
           flags=dict(drop_invalid=drop_invalid, hive_partitioning=hive_partitioning))
    _number("alpha", alpha)
    field = _columns("fields", fields)
    conf = _spark_settings(spark_conf)

    def call(spec: str, eng: str | None, out: str) -> Any:
        return run_evaluate(EvaluateOptions(
            log=spec, score=score, logit=logit, label=label, weight=weight, negative_rate=negative_rate,
            negative_rate_column=negative_rate_column, by=by, every=every, baseline=baseline,
            alpha=alpha, user=user, gauc_weight=gauc_weight, field=field, max_levels=max_levels, oracle=oracle,
            engine=eng,
            format=format, bootstrap=bootstrap, seed=seed, bins=bins, hist_bins=hist_bins,
            drop_invalid=drop_invalid, chunk_rows=chunk_rows, hive_partitioning=hive_partitioning,
            spark_master=spark_master, spark_conf=conf, out=out, quiet=True))

    _, files, src = _run(source, engine, call, fmt=format)
    return Slices(json.loads(files["slices.json"]), files, src.inputs, _log_of(src, format))


def fit(source: Any, *, method: str, score: str | None = None, logit: str | None = None, label: str | None = None,
        weight: str | None = None, negative_rate: float | None = None,
        negative_rate_column: str | None = None, fields: Sequence[str] | str = (), features: Sequence[str] | str = (),
        max_levels: int = 50, seed: int = 0, partitions: int | None = None, steps: int | None = None,
        engine: str | None = None, format: str = "auto", hist_bins: int = 4096, drop_invalid: bool = False,
        chunk_rows: int = 262_144, hive_partitioning: bool = False, spark_master: str | None = None,
        spark_conf: Mapping[str, str] | Sequence[str] = ()) -> Fit:
    """A calibrator of :mod:`calib_jax.calibrators` fitted on a log (``calib-jax fit``): on the
    rows in memory, or with ``engine`` on the log's cells (fine logit bins by label, computed
    where the log lives) for the one-dimensional maps of the logit (temperature, Platt, beta,
    histogram binning, isotonic, ILPS).

    Args:
      source: a path, glob or folder, or an in-memory table (see :mod:`calib_jax.logs`).
      method: the calibrator's registry name (``temperature``, ``platt``, ``sag``, ``vrsag``...).
      score: the probability column (or ``logit``).
      logit: the logit column.
      label: the 0/1 label column.
      weight: a column of non-negative row weights.
      negative_rate: the fraction of label-0 rows the log kept (negative downsampling), or
        ``None``: each kept non-click weighs ``1/negative_rate``, so the results are the full
        population's (:mod:`calib_jax.logs.downsampling`; the scores must be the population's
        probabilities, see :func:`~calib_jax.logs.downsampling.recalibrate_probability`).
      negative_rate_column: instead of ``negative_rate``, a column of each row's rate (a log whose
        rate changed); the calibration tests and drift flags then need one rate and are not
        computed.
      fields: categorical columns (one-hot in the SAG/VR-SAG embedding; Neural Calibration's
        categories).
      features: numeric columns of the SAG/VR-SAG embedding.
      max_levels: levels kept per field.
      seed: the fit's seed.
      partitions: SAG/VR-SAG partitions (default: the library's).
      steps: SAG/VR-SAG L-BFGS or Neural Calibration AdamW steps (default: the library's).
      engine: ``duckdb``, ``spark`` or ``arrow``: fit from the log's cells instead of its rows.
      format: the file format.
      hist_bins: the fine logit grid of a fit from cells.
      drop_invalid: drop invalid rows instead of refusing the log.
      chunk_rows: rows per chunk of the readers.
      hive_partitioning: read ``key=value`` folders as columns.
      spark_master: the Spark master of ``engine="spark"``.
      spark_conf: Spark settings.

    Returns:
      The :class:`Fit`: ``.params`` (the parameter file's record), ``.save(path)``,
      ``.predict(scores)``.

    Example:
      >>> import numpy as np, pyarrow as pa
      >>> from calib_jax.logs import fit
      >>> rng = np.random.default_rng(3)
      >>> q = rng.uniform(0.05, 0.3, 2_000)
      >>> f = fit(pa.table({"p": np.clip(2 * q, 0, 1), "y": (rng.uniform(size=q.size) < q).astype(int)}),
      ...         method="platt", score="p", label="y")
      >>> bool(f.predict([0.4])[0] < 0.4)
      True
    """
    from calib_jax.logs.fitting import fit_spec
    from calib_jax.logs.options import FitOptions

    if not isinstance(method, str):
        raise ValueError(f"method: a calibrator's name, got {method!r}")
    _check(columns=dict(score=score, logit=logit, label=label, weight=weight),
           rate=(negative_rate, negative_rate_column),
           integers=dict(seed=seed, hist_bins=hist_bins, max_levels=max_levels, chunk_rows=chunk_rows),
           optional_integers=dict(partitions=partitions, steps=steps),
           flags=dict(drop_invalid=drop_invalid, hive_partitioning=hive_partitioning))
    field, feature = _columns("fields", fields), _columns("features", features)
    conf = _spark_settings(spark_conf)
    _check_method(method)

    def call(spec: str, eng: str | None, out: str) -> Any:
        return fit_spec(FitOptions(
            log=spec, method=method, save=str(Path(out) / "params.json"), score=score, logit=logit, label=label,
            weight=weight, negative_rate=negative_rate, negative_rate_column=negative_rate_column,
            field=field, feature=feature, max_levels=max_levels, seed=seed, partitions=partitions,
            steps=steps, engine=eng, format=format, hist_bins=hist_bins, drop_invalid=drop_invalid,
            chunk_rows=chunk_rows, hive_partitioning=hive_partitioning, spark_master=spark_master,
            spark_conf=conf, quiet=True))

    spec, _, src = _run(source, engine, call, fmt=format)
    if src.temporary is not None:
        spec["inputs"]["source"] = src.label
    return Fit(spec, {}, src.inputs)


def _check_method(method: str) -> None:
    from calib_jax.logs.params import METHODS, OLD_METHOD_NAMES

    if method in OLD_METHOD_NAMES:
        raise ValueError(f"method: {method!r} is called {OLD_METHOD_NAMES[method]!r}")
    if method not in METHODS:
        raise ValueError(f"method: {method!r} is not a calibrator; choose one of {', '.join(sorted(METHODS))}")
