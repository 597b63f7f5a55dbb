"""What the commands share in reading a log: the columns named on the command line (or the
format's defaults), the files a log argument reads (:func:`log_files`, the inputs of the
output guard), a Spark input by path or by table, the statistics query on an engine, and the
progress bar of the streamed reader."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from calib_jax.cli import loaders
from calib_jax.cli.common import spark_conf

__all__ = ["add_column_arguments", "add_spark_arguments", "columns_of", "log_files", "spark_input", "query_cells",
           "progress_bar"]

def add_column_arguments(p: argparse.ArgumentParser, *, fields: bool = True) -> None:
    """The options naming a log's columns and how its rows are read (``evaluate``, ``fit``)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--score", metavar="COL", help="column of predicted probabilities in [0, 1]")
    g.add_argument("--logit", metavar="COL", help="column of predicted logits")
    p.add_argument("--label", metavar="COL", help="column of 0/1 labels (default: the format's label column)")
    p.add_argument("--weight", metavar="COL", help="optional column of non-negative row weights")
    if fields:
        p.add_argument("--field", metavar="COL", action="append", default=[],
                       help="categorical column for per-field metrics (repeatable)")
    p.add_argument("--format", default="auto", choices=loaders.FORMATS, help="input format (default: by suffix)")
    p.add_argument("--chunk-rows", type=int, default=262_144, metavar="N", help="rows per chunk (default 262144)")
    p.add_argument("--drop-invalid", action="store_true",
                   help="drop invalid rows (NaN, scores outside [0,1], labels not 0/1, ...) and report them")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def add_spark_arguments(p: argparse.ArgumentParser, *, what: str = "") -> None:
    """``--spark-master``, ``--spark-conf`` and ``--hive-partitioning``."""
    p.add_argument("--spark-master", metavar="URL",
                   help=f"Spark master{what} (local[2], spark://host:7077, yarn; default: what spark-submit or "
                        "SPARK_* configure, else local mode)")
    p.add_argument("--spark-conf", metavar="KEY=VALUE", action="append", default=[],
                   help=f"a Spark setting{what} (repeatable)")
    p.add_argument("--hive-partitioning", action="store_true",
                   help="read hive partition folders (day=3/) below the named folder or pattern root as columns "
                        "(default: folders are only folders; a partition key that is also a column of the files "
                        "is refused)")


def log_files(log: str | os.PathLike[str] | None, fmt: str = "auto") -> tuple[Path, ...]:
    """Every file that a command's log argument can read: the literal file; the files a
    pattern or a folder resolves to (:func:`calib_jax.cli.engines.resolve_input`, hive
    folders and Open Bandit datasets included); where that resolution fails, every file the
    pattern matches or the folder holds (a superset: the command then fails on its own
    message). A name that is none of these (a Spark table) reads no file.

    Args:
      log: the log argument (``None``: none).
      fmt: the ``--format`` given (``"auto"``: by suffix).

    Returns:
      The files, as paths.

    Example:
      >>> import tempfile
      >>> with tempfile.TemporaryDirectory() as d:
      ...     for name in ("a.csv", "b.csv", "notes.txt"):
      ...         _ = (Path(d) / name).write_text("p,y\\n0.5,1\\n")
      ...     print(sorted(p.name for p in log_files(Path(d))), [p.name for p in log_files(Path(d) / "*.txt")])
      ['a.csv', 'b.csv'] ['notes.txt']
      >>> log_files("warehouse.events")  # a table name
      ()
    """
    import glob

    from calib_jax.cli import engines

    if log is None:
        return ()
    spec = str(log)
    try:
        found = tuple(engines.resolve_input(spec, fmt if fmt in loaders.FORMATS else "auto").files)
    except (ValueError, OSError):
        p = Path(spec)
        found = (p,) if p.exists() else tuple(Path(f) for f in glob.glob(spec, recursive=True))
    out: list[Path] = []
    for f in found:
        if f.is_dir():  # an Open Bandit dataset, a folder that resolved to nothing
            out += [Path(root) / n for root, _, names in os.walk(f) for n in names]
        elif f.exists():
            out.append(f)
    return tuple(out)


def progress_bar(total: int | None, quiet: bool, desc: str) -> Any:
    """A ``tqdm`` bar of rows on stderr (none with ``quiet``)."""
    from tqdm import tqdm

    return tqdm(total=total, unit="row", unit_scale=True, desc=desc, disable=True if quiet else None,
                file=sys.stderr, smoothing=0.1)


def columns_of(opts: Any, fmt: str) -> Any:
    """The :class:`~calib_jax.cli.validate.Columns` of a command's options (``score``, ``logit``,
    ``label``, ``weight``, ``field`` and, where the command has them, ``oracle`` and ``user``);
    a column left out is the format's default (Open Bandit, Criteo), else ``ValueError``.

    Example:
      >>> from calib_jax.cli.options import FitOptions
      >>> columns_of(FitOptions(log="l.csv", method="platt", save="p.json", score="p", label="y"), "csv").score
      'p'
    """
    from calib_jax.cli.validate import Columns

    d = loaders.default_columns(fmt) if fmt in loaders.FORMATS else {"label": None, "score": None}
    label = opts.label or d["label"]
    score, logit = opts.score, opts.logit
    if score is None and logit is None:
        score = d["score"]
    if label is None:
        raise ValueError(f"{opts.log}: --label COL is required for --format {fmt}")
    if score is None and logit is None:
        raise ValueError(f"{opts.log}: give --score COL (probabilities) or --logit COL for --format {fmt}")
    return Columns(label=label, score=score, logit=logit, weight=opts.weight,
                   oracle=getattr(opts, "oracle", None), fields=tuple(dict.fromkeys(opts.field)),
                   user=getattr(opts, "user", None))


def spark_input(opts: Any) -> tuple[str, list[Path], str]:
    """``(format, files, name)`` of a Spark input: files by path, or a table of the catalog."""
    from calib_jax.cli import engines

    spec = str(opts.log)
    if Path(spec).exists() or set("*?[") & set(spec):
        inp = engines.resolve_input(spec, opts.format, hive=opts.hive_partitioning)
        return inp.format, list(inp.files), inp.spec
    return "table", [], spec


def query_cells(opts: Any, engine: str, inp: Any, qcols: Any, settings: Any) -> Any:
    """The statistics query's result table from ``duckdb`` (on the resolved input ``inp``) or
    ``spark`` (on ``opts.log``, with the command's Spark options)."""
    from calib_jax.cli import engines

    if engine == "duckdb":
        return engines.run_duckdb(inp, qcols, settings)
    spark = engines.spark_session(opts.spark_master, spark_conf(opts.spark_conf))
    return engines.run_spark(opts.log, qcols, settings, spark=spark, fmt=opts.format, hive=opts.hive_partitioning)
