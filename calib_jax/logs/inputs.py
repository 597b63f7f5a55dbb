"""What the engine's entry points share in reading a log: the columns named on the command line (or the
format's defaults), the files a log argument reads (:func:`log_files`, the inputs of the
output guard), a Spark input by path or by table, the statistics query on an engine, and the
progress bar of the streamed reader."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from calib_jax.logs import loaders
from calib_jax.logs.common import spark_conf

__all__ = ["columns_of", "log_files", "spark_input", "query_cells", "progress_bar"]


def log_files(log: str | os.PathLike[str] | None, fmt: str = "auto") -> tuple[Path, ...]:
    """Every file that a command's log argument can read: the literal file; the files a
    pattern or a folder resolves to (:func:`calib_jax.logs.engines.resolve_input`, hive
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

    from calib_jax.logs import engines

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
    """The :class:`~calib_jax.logs.validate.Columns` of a command's options (``score``, ``logit``,
    ``label``, ``weight``, ``field``, ``negative_rate`` and, where the command has them, ``oracle``
    and ``user``);
    a column left out is the format's default (Open Bandit, Criteo), else ``ValueError``.

    Example:
      >>> from calib_jax.logs.options import FitOptions
      >>> columns_of(FitOptions(log="l.csv", method="platt", save="p.json", score="p", label="y"), "csv").score
      'p'
    """
    from calib_jax.logs.validate import Columns

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
                   user=getattr(opts, "user", None), negative_rate=getattr(opts, "negative_rate", None),
                   negative_rate_column=getattr(opts, "negative_rate_column", None))


def spark_input(opts: Any) -> tuple[str, list[Path], str]:
    """``(format, files, name)`` of a Spark input: files by path, or a table of the catalog."""
    from calib_jax.logs import engines

    spec = str(opts.log)
    if Path(spec).exists() or set("*?[") & set(spec):
        inp = engines.resolve_input(spec, opts.format, hive=opts.hive_partitioning)
        return inp.format, list(inp.files), inp.spec
    return "table", [], spec


def query_cells(opts: Any, engine: str, inp: Any, qcols: Any, settings: Any) -> Any:
    """The statistics query's result table from ``duckdb`` (on the resolved input ``inp``) or
    ``spark`` (on ``opts.log``, with the command's Spark options)."""
    from calib_jax.logs import engines

    if engine == "duckdb":
        return engines.run_duckdb(inp, qcols, settings)
    spark = engines.spark_session(opts.spark_master, spark_conf(opts.spark_conf))
    return engines.run_spark(opts.log, qcols, settings, spark=spark, fmt=opts.format, hive=opts.hive_partitioning)
