"""What the engine's entry points share in reading a log: the columns named on the command line (or the
format's defaults), the files a log argument reads (:func:`log_files`, the inputs of the
output guard), a Spark input by path or by table, the statistics query on an engine, and the
progress bar of the streamed reader."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from calib_jax.logs import loaders
from calib_jax.logs.common import spark_conf

__all__ = ["columns_of", "log_files", "check_outputs_outside_log", "spark_input", "query_cells", "progress_bar"]


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


def check_outputs_outside_log(log: str | os.PathLike[str] | None, outputs: Sequence[str | os.PathLike[str]],
                              fmt: str = "auto") -> None:
    """Refuse an output file that the log argument would read as part of the log on the next run:
    a table of the report (``metrics.csv``) written into the folder that is the log, or one that
    the log's pattern matches (``--out logs`` for ``'logs/*.csv'``). The run itself would read
    the log as it was, but the folder would then hold the report beside the user's files: the
    next run of the same command would read it as rows (or stop on a file it cannot read).

    Args:
      log: the log argument (a file, a folder, a pattern, a table name, or ``None``).
      outputs: the files the run writes.
      fmt: the ``--format`` given: a folder read as one format takes only that format's files
        (``"auto"``: every format's; an Open Bandit dataset's folder takes none).

    Returns:
      None: it only raises.

    Raises:
      ValueError: naming the output, the log and why.

    Example:
      >>> import tempfile
      >>> with tempfile.TemporaryDirectory() as d:
      ...     check_outputs_outside_log(f"{d}/logs/*.csv", [f"{d}/report/metrics.csv"])  # elsewhere
      ...     try:
      ...         check_outputs_outside_log(f"{d}/logs/*.csv", [f"{d}/logs/metrics.csv"])
      ...     except ValueError as e:
      ...         print(str(e).replace(d, "D"))
      D/logs/metrics.csv: the log D/logs/*.csv would read this output as part of the log on its next run; ...
    """
    if log is None:
        return
    spec = str(log)
    p = Path(spec)
    if p.is_dir():
        if loaders.is_open_bandit_dir(p) or fmt == "open_bandit":
            return  # an Open Bandit dataset is read by its own file names
        kinds = [fmt] if fmt in loaders.FOLDER_PATTERNS else list(loaders.FOLDER_PATTERNS)
        suffixes = tuple(pattern.lstrip("*") for k in kinds for pattern in loaders.FOLDER_PATTERNS[k])
        root = p.resolve()
        taken = [o for o in outputs if root in Path(o).resolve().parents and str(o).endswith(suffixes)]
    elif set("*?[") & set(spec) and not p.exists():
        taken = [o for o in outputs if _pattern_takes(spec, o)]
    else:
        return
    if taken:
        raise ValueError(f"{taken[0]}: the log {spec} would read this output as part of the log on its next run; "
                         "choose an output folder outside the log")


def _pattern_takes(pattern: str, path: str | os.PathLike[str]) -> bool:
    """Whether ``glob.glob(pattern, recursive=True)`` would list ``path`` once it exists: part
    by part, ``**`` for any number of folders, a leading dot matched only by a dot (``**`` passes
    none)."""
    import fnmatch

    pat, parts = Path(os.path.abspath(pattern)).parts, Path(os.path.abspath(path)).parts

    def match(i: int, j: int) -> bool:
        if i == len(pat):
            return j == len(parts)
        if pat[i] == "**":  # as '*', it passes no hidden folder or file
            return any(match(i + 1, k) for k in range(j, len(parts) + 1)
                       if not any(q.startswith(".") for q in parts[j:k]))
        return (j < len(parts) and fnmatch.fnmatchcase(parts[j], pat[i])
                and (not parts[j].startswith(".") or pat[i].startswith(".")) and match(i + 1, j + 1))

    return match(0, 0)


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
