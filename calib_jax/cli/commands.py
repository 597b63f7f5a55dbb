"""``calib-jax`` subcommands: ``evaluate``, ``fit``, ``apply``, ``simulate``, ``studies``.

``main(argv)`` parses the arguments, runs one command and returns the exit status: 0 on
success, 2 for a bad input (the message, naming the file, the column and the number of
rows, goes to stderr), 3 when ``evaluate`` stopped early on purpose (its checkpoint is
saved; rerun with ``--resume``), 130 when interrupted by Ctrl-C (SIGINT) or SIGTERM (the one
line ``calib-jax <command>: interrupted``). Every message is printable text: control and
escape sequences that come from a file (its name, header or values) are shown as ``\\xNN``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from calib_jax._src.table_files import table_writer
from calib_jax.cli import loaders
from calib_jax.cli.common import inert, refuse_overwriting_inputs
from calib_jax.cli.common import out_dir as _out_dir
from calib_jax.cli.common import plain_figure_text as _plain_figure_text
from calib_jax.cli.common import say as _say
from calib_jax.cli.common import spark_conf as _spark_conf

ENGINES = ("duckdb", "spark", "arrow")
#: the methods ``fit --engine`` fits from a log's cells (one-dimensional maps of the logit)
CELL_FIT_METHODS = ("temperature", "platt", "beta", "histogram_binning", "isotonic", "ilps")

__all__ = ["main", "build_parser", "run_evaluate"]


class _Stopped(Exception):
    """Raised by the hidden ``--stop-after-chunks`` switch (tests of ``--resume``)."""


#: every file ``evaluate`` / ``merge`` may write into ``--out``
REPORT_FILES = ("report.json", "report.md", "report.html", "reliability.png", "metrics.csv", "metrics.md",
                "fields.csv", "fields.md", "decompositions.csv", "decompositions.md")
#: present in ``--out`` while a report is being made; removed once every file is written
INCOMPLETE = "INCOMPLETE"
_INCOMPLETE_TEXT = ("This folder's report is incomplete: calib-jax was writing it when it stopped. Its other "
                    "files may be missing or come from an earlier run. Rerun the command (with --resume "
                    "after an evaluate that was stopped) to complete it.\n")


def _add_columns(p: argparse.ArgumentParser, *, fields: bool = True) -> None:
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


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``calib-jax``."""
    ap = argparse.ArgumentParser(prog="calib-jax", description="Calibration report, recalibration and paper studies "
                                 "for your own click logs.")
    sub = ap.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("evaluate", help="metric panel, decompositions and an HTML report of a log")
    ev.add_argument("log", nargs="?", help="the log: a file, a glob ('logs/*.parquet'), a folder of Parquet or CSV "
                    "files (hive-partitioned too), an Open Bandit directory, or with --engine spark a table name")
    _add_columns(ev)
    ev.add_argument("--engine", choices=ENGINES, default=None,
                    help="duckdb (default): the statistics as one SQL query, in-process; spark: the same query "
                         "through PySpark (a table or files of a cluster); arrow: the streamed reader (needed by "
                         "--resume and the rows bootstrap, its default)")
    ev.add_argument("--aggregates", metavar="FILE",
                    help="evaluate the result of `calib-jax sql` run in your own warehouse (CSV or Parquet export) "
                         "instead of a log")
    ev.add_argument("--spark-master", metavar="URL",
                    help="Spark master (local[2], spark://host:7077, yarn; default: what spark-submit or "
                         "SPARK_* configure, else local mode)")
    ev.add_argument("--spark-conf", metavar="KEY=VALUE", action="append", default=[],
                    help="a Spark setting (repeatable)")
    ev.add_argument("--hive-partitioning", action="store_true",
                    help="read hive partition folders (day=3/) below the named folder or pattern root as columns "
                         "(default: folders are only folders; a partition key that is also a column of the files "
                         "is refused)")
    ev.add_argument("--oracle", metavar="COL", help="column of true CTRs (simulated logs): oracle metrics")
    ev.add_argument("--user", metavar="COL",
                    help="user column: adds GAUC (each user's AUC, exactly, averaged over the users with a click "
                         "and a non-click) with a delta-method interval over users")
    ev.add_argument("--gauc-weight", choices=("impressions", "clicks", "equal"), default="impressions",
                    help="the user weight of GAUC in the metric panel (default impressions; report.json has all "
                         "three)")
    ev.add_argument("--by", metavar="COL",
                    help="a panel per slice of COL (NE, calibration ratio, ECE, Brier, AUC with intervals), a plot "
                         "over the slices and a change flag per slice against --baseline")
    ev.add_argument("--every", choices=("hour", "day", "week", "month"),
                    help="with --by: bucket COL as a time (default: each value of COL is a slice)")
    ev.add_argument("--baseline", metavar="SLICE", help="with --by: the slice others are compared with (default: the "
                    "first)")
    ev.add_argument("--alpha", type=float, default=0.05,
                    help="with --by: the chance that any slice is flagged on a metric when none moved (default 0.05)")
    ev.add_argument("--out", default="calib-jax-report", help="output directory (default ./calib-jax-report)")
    ev.add_argument("--bootstrap", type=int, default=100, metavar="B",
                    help="bootstrap resamples for 95%% intervals (default 100; 0: none)")
    ev.add_argument("--bootstrap-block", type=int, default=1, metavar="ROWS",
                    help="consecutive rows sharing one bootstrap count (default 1: row bootstrap; "
                         "> 1 needs --bootstrap-scheme rows)")
    ev.add_argument("--bootstrap-scheme", choices=("cells", "rows"), default=None,
                    help="cells (default): one Poisson count per score cell and replicate, cost "
                         "independent of the rows, p within a cell replaced by its mean (<= 0.002); "
                         "rows: one Poisson count per row and replicate, exact (default with "
                         "--bootstrap-block > 1)")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--bins", type=int, default=15, help="ECE/MCE bins (default 15)")
    ev.add_argument("--hist-bins", type=int, default=4096, help="fine logit grid of AUC/LCCE/ECE+ (default 4096)")
    ev.add_argument("--max-levels", type=int, default=1000, help="levels kept per field before __other__")
    ev.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    ev.add_argument("--state-only", action="store_true",
                    help="write the merged statistics to OUT/state.npz and no report (one part of a "
                         "log evaluated by several workers; combine them with `calib-jax merge`)")
    ev.add_argument("--row-offset", type=int, default=0, metavar="N",
                    help="index of this part's first row in the whole log (the rows scheme keys its "
                         "bootstrap counts by it; default 0)")
    ev.add_argument("--stop-after-chunks", type=int, default=None, help=argparse.SUPPRESS)
    fit = sub.add_parser("fit", help="fit a calibrator on a log and save its parameters")
    fit.add_argument("log")
    _add_columns(fit)
    fit.add_argument("--method", required=True, choices=sorted(_methods()), type=_method_name)
    fit.add_argument("--feature", metavar="COL", action="append", default=[],
                     help="numeric column of the SAG/VR-SAG embedding (repeatable; --field columns are one-hot)")
    fit.add_argument("--max-levels", type=int, default=50,
                     help="levels kept per --field (the rest are __other__): one-hot columns of the SAG/VR-SAG "
                          "embedding, categories of Neural Calibration")
    fit.add_argument("--seed", type=int, default=0)
    fit.add_argument("--partitions", type=int, default=None, help="SAG/VR-SAG partitions P (default: the library's)")
    fit.add_argument("--steps", type=int, default=None,
                     help="SAG/VR-SAG L-BFGS steps or Neural Calibration AdamW steps (default: the library's)")
    fit.add_argument("--save", required=True, metavar="FILE", help="parameter file to write (.json)")
    fit.add_argument("--engine", choices=ENGINES, default=None,
                     help="fit from the log's cells (fine logit bins x label) computed by duckdb, spark or arrow "
                          "(streamed) instead of reading the rows into memory: " + ", ".join(CELL_FIT_METHODS)
                          + " only; histogram binning exactly, the others up to the spread of the logits within "
                          "a fine bin (docs: the command guide)")
    fit.add_argument("--hist-bins", type=int, default=4096, help="fine logit grid of --engine (default 4096)")
    fit.add_argument("--spark-master", metavar="URL", help="Spark master of --engine spark")
    fit.add_argument("--spark-conf", metavar="KEY=VALUE", action="append", default=[],
                     help="a Spark setting of --engine spark (repeatable)")
    fit.add_argument("--hive-partitioning", action="store_true",
                     help="read hive partition folders as columns (--engine duckdb or spark)")
    ap_ = sub.add_parser("apply", help="apply saved calibrator parameters to a log")
    ap_.add_argument("params", help="parameter file written by `calib-jax fit`")
    ap_.add_argument("log")
    ap_.add_argument("--out", required=True, help="output log (.csv, .tsv or .parquet): input columns + calibrated")
    ap_.add_argument("--column", default="calibrated", help="name of the new column (default: calibrated)")
    ap_.add_argument("--format", default="auto", choices=loaders.FORMATS)
    ap_.add_argument("--chunk-rows", type=int, default=262_144)
    ap_.add_argument("--quiet", action="store_true")
    sim = sub.add_parser("simulate", help="write a log of the built-in ad-auction simulator (with its true CTR)")
    sim.add_argument("--out", required=True, help="output log (.parquet, .csv or .tsv)")
    sim.add_argument("--scale", default="tiny", choices=("tiny", "default"),
                     help="tiny: a few thousand requests (seconds); default: ~1.1M impressions (minutes)")
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--exposure", default="auction", choices=("auction", "random"),
                     help="auction: the ads that won (biased production pCTR); random: random eligible ads")
    sq = sub.add_parser("sql", help="print the statistics query, to run in your own warehouse (then evaluate "
                        "--aggregates its result)")
    sq.add_argument("--dialect", choices=sorted(_dialects()), default="duckdb")
    sq.add_argument("--table", required=True, metavar="FROM",
                    help="the FROM item, inserted as written: a table name (quoted as your SQL needs, e.g. "
                         "`project.dataset.events`) or a table function such as read_parquet('logs/*.parquet')")
    g = sq.add_mutually_exclusive_group(required=True)
    g.add_argument("--score", metavar="COL", help="column of predicted probabilities in [0, 1]")
    g.add_argument("--logit", metavar="COL", help="column of predicted logits")
    sq.add_argument("--label", metavar="COL", required=True, help="column of 0/1 labels")
    sq.add_argument("--weight", metavar="COL", help="optional column of non-negative row weights")
    sq.add_argument("--field", metavar="COL", action="append", default=[], help="categorical column (repeatable)")
    sq.add_argument("--oracle", metavar="COL", help="column of true CTRs (simulated logs)")
    sq.add_argument("--user", metavar="COL", help="user column: the query also computes GAUC's sums")
    sq.add_argument("--bins", type=int, default=15, help="ECE/MCE bins (default 15)")
    sq.add_argument("--hist-bins", type=int, default=4096, help="fine logit grid (default 4096)")
    sq.add_argument("--max-levels", type=int, default=1000, help="levels kept per field before __other__")
    sq.add_argument("--out", metavar="FILE", help="write the query to FILE (default: print it)")
    mg = sub.add_parser("merge", help="one report from the states of several `evaluate --state-only` runs")
    mg.add_argument("states", nargs="+", help="state.npz files (or the --out directories holding them)")
    mg.add_argument("--out", default="calib-jax-report", help="output directory (default ./calib-jax-report)")
    from calib_jax.cli import compare

    compare.add_parser(sub)
    sub.add_parser("studies", help="list the paper studies this repository reproduces")
    return ap


def _dialects() -> dict[str, Any]:
    from calib_jax.cli.sql import DIALECTS

    return DIALECTS


def _method_name(text: str) -> str:
    """``--method``: a calibrator name of the registry (old CLI names get a pointer to the new)."""
    from calib_jax.cli.params import OLD_METHOD_NAMES

    if text in OLD_METHOD_NAMES:
        raise argparse.ArgumentTypeError(f"{text!r} is called {OLD_METHOD_NAMES[text]!r}")
    return text


def _methods() -> dict[str, str]:
    from calib_jax.cli.params import METHODS

    return METHODS


# ---------------------------------------------------------------------------- evaluate
def _progress(total: int | None, quiet: bool, desc: str):
    from tqdm import tqdm

    return tqdm(total=total, unit="row", unit_scale=True, desc=desc, disable=True if quiet else None,
                file=sys.stderr, smoothing=0.1)


def _fingerprint(path: Path, fmt: str, cols: Any, settings: Any, chunk_rows: int) -> dict[str, Any]:
    st = path.stat()
    return {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "format": fmt,
            "columns": {k: v for k, v in vars(cols).items()}, "settings": settings.to_dict(),
            "chunk_rows": chunk_rows}


def _columns(args: argparse.Namespace, fmt: str):
    from calib_jax.cli.validate import Columns

    d = loaders.default_columns(fmt) if fmt in loaders.FORMATS else {"label": None, "score": None}
    label = args.label or d["label"]
    score, logit = args.score, args.logit
    if score is None and logit is None:
        score = d["score"]
    if label is None:
        raise ValueError(f"{args.log}: --label COL is required for --format {fmt}")
    if score is None and logit is None:
        raise ValueError(f"{args.log}: give --score COL (probabilities) or --logit COL for --format {fmt}")
    return Columns(label=label, score=score, logit=logit, weight=args.weight,
                   oracle=getattr(args, "oracle", None), fields=tuple(dict.fromkeys(args.field)),
                   user=getattr(args, "user", None))


def _settings(args: argparse.Namespace, cols: Any) -> Any:
    """The :class:`Settings` of an ``evaluate`` command line (bounds checked)."""
    from calib_jax.cli.accumulate import Settings

    for name, val, lo in (("--bootstrap", args.bootstrap, 0), ("--bootstrap-block", args.bootstrap_block, 1),
                          ("--chunk-rows", args.chunk_rows, 1), ("--bins", args.bins, 1),
                          ("--hist-bins", args.hist_bins, 16), ("--max-levels", args.max_levels, 1)):
        if val < lo:
            raise ValueError(f"{name} must be >= {lo}, got {val}")
    if args.bootstrap == 1:
        raise ValueError("--bootstrap must be 0 (no intervals) or >= 2")
    scheme = args.bootstrap_scheme or ("rows" if args.bootstrap_block > 1 else "cells")
    return Settings(fields=tuple(cols.fields), oracle=cols.oracle is not None, n_boot=args.bootstrap,
                    block=args.bootstrap_block, seed=args.seed, n_bins=args.bins, hist_bins=args.hist_bins,
                    max_levels=args.max_levels, scheme=scheme)


def _engine(args: argparse.Namespace) -> str:
    """The engine of an ``evaluate`` run: as asked, else ``arrow`` for what only the streamed
    reader does (``--resume``, the rows bootstrap), else ``duckdb`` (``arrow`` without it)."""
    needs_arrow = [flag for flag, on in (("--resume", args.resume),
                                         ("--bootstrap-scheme rows", args.bootstrap_scheme == "rows"
                                          and args.bootstrap > 0),
                                         ("--bootstrap-block", args.bootstrap_block > 1),
                                         ("--stop-after-chunks", args.stop_after_chunks is not None)) if on]
    if args.aggregates is not None:
        if args.log is not None:
            raise ValueError("give either a log or --aggregates FILE, not both")
        if args.engine not in (None, "duckdb") or needs_arrow:
            raise ValueError(f"--aggregates is evaluated without an engine; {(needs_arrow or ['--engine'])[0]} "
                             "does not apply")
        return "aggregates"
    if args.log is None:
        raise ValueError("give the log to evaluate (a file, a glob or a folder), or --aggregates FILE")
    if args.engine is not None:
        if args.engine != "arrow" and needs_arrow:
            raise ValueError(f"{needs_arrow[0]} needs --engine arrow (the {args.engine} engine reads the log in "
                             "one query: nothing to resume, no per-row bootstrap counts)")
        return str(args.engine)
    if needs_arrow:
        return "arrow"
    try:
        import duckdb  # noqa: F401
    except ImportError:  # pragma: no cover - without the cli extra's duckdb
        return "arrow"
    return "duckdb"


def run_evaluate(args: argparse.Namespace) -> dict[str, Any]:
    """Read the log, accumulate, compute the panel, write the outputs; returns the report."""
    from calib_jax.cli.accumulate import Accumulator
    from calib_jax.cli.validate import Problems, check_accumulator

    t0 = time.perf_counter()
    engine = _engine(args)
    if args.by is not None:
        from calib_jax.cli.slices import run_slices

        return run_slices(args, engine)
    if args.every is not None or args.baseline is not None:
        raise ValueError("--every and --baseline need --by COL")
    if args.user is not None and (args.resume or args.state_only):
        raise ValueError(f"--user: GAUC is not additive over parts of a log (a user's rows may lie in several), so "
                         f"it does not combine with {'--resume' if args.resume else '--state-only'}")
    if engine != "arrow":
        return _evaluate_sql(args, engine, t0)
    path = Path(args.log)
    if not path.exists() and set("*?[") & set(str(path)) or path.is_dir() and not (
            (path / "random").is_dir() or (path / "bts").is_dir()):
        raise ValueError(f"{path}: the arrow engine reads one file; globs and folders are read by --engine duckdb "
                         "or spark")
    fmt = loaders.resolve_format(path, args.format)
    cols = _columns(args, fmt)
    settings = _settings(args, cols)
    out = _out_dir(Path(args.out))
    created = not out.exists()
    ckpt = out / ".checkpoint.npz"
    refuse_overwriting_inputs([path], [out / f for f in (*REPORT_FILES, STATE_FILE, ckpt.name, INCOMPLETE)])
    fp = _fingerprint(path, fmt, cols, settings, args.chunk_rows)
    if args.row_offset < 0:
        raise ValueError(f"--row-offset must be >= 0, got {args.row_offset}")
    acc = Accumulator(settings, row_offset=args.row_offset)
    problems = Problems()
    if args.resume and ckpt.exists():
        acc, meta = Accumulator.from_bytes(ckpt.read_bytes(), source=str(ckpt))
        check_accumulator(acc, source=str(ckpt), weight=cols.weight)
        saved_problems = meta.pop("_problems", [])
        if meta != json.loads(json.dumps(fp)):
            diff = sorted(k for k in fp if json.loads(json.dumps(fp)).get(k) != meta.get(k))
            raise ValueError(f"{ckpt}: checkpoint was made for another input or settings (differs in: "
                             f"{', '.join(diff)}); delete it or run without --resume")
        problems = Problems.from_json(saved_problems)
        _say(f"resuming after {acc.rows_read} rows ({acc.chunks} chunks)", err=True)
    try:
        return _evaluate_stream(args, path, fmt, cols, out, ckpt, fp, acc, problems, t0)
    except (_Stopped, KeyboardInterrupt):
        raise  # the checkpoint stays for --resume
    except BaseException:
        if _SIGNALS.signum is not None:
            raise  # an interrupt that a library turned into its own error: the checkpoint stays too
        # a run that failed on its input leaves no checkpoint (a rerun starts afresh) and, unless
        # it failed while writing the report files, no INCOMPLETE marker either
        ckpt.unlink(missing_ok=True)
        if not getattr(args, "writing_report", False):
            (out / INCOMPLETE).unlink(missing_ok=True)
            if created and out.is_dir() and not any(out.iterdir()):
                out.rmdir()
        raise


def _evaluate_stream(args: argparse.Namespace, path: Path, fmt: str, cols: Any, out: Path, ckpt: Path,
                     fp: dict[str, Any], acc: Any, problems: Any, t0: float) -> dict[str, Any]:
    from calib_jax import io as cio
    from calib_jax.cli.validate import clean_chunk

    if not args.state_only:
        cio.atomic_write_text(out / INCOMPLETE, _INCOMPLETE_TEXT)
    skip = acc.chunks
    bar = _progress(loaders.count_rows(path, fmt), args.quiet, "evaluate")
    bar.update(acc.rows_read)
    counting_only = False
    rows_total = acc.rows_read
    users = _UserRows() if cols.user is not None else None
    try:
        batches = loaders.iter_batches(path, fmt, numeric=cols.numeric, text=cols.text, chunk_rows=args.chunk_rows)
        for i, batch in enumerate(batches):
            if i < skip:
                continue
            n_bad_before = problems.bad_rows
            chunk = clean_chunk(batch, cols, rows_total, problems)
            rows_total += batch.num_rows
            bar.update(batch.num_rows)
            if problems.bad_rows > n_bad_before and not args.drop_invalid:
                counting_only = True  # keep reading only to count the bad rows
            if counting_only:
                continue
            acc.update(chunk)
            if users is not None:
                users.add(batch, cols, chunk)
            cio.atomic_write_bytes(ckpt, acc.to_bytes({**fp, "_problems": problems.to_json()}))
            if args.stop_after_chunks is not None and acc.chunks >= args.stop_after_chunks:
                raise _Stopped()
    finally:
        bar.close()
    if counting_only:
        raise ValueError(f"{path}: {problems.describe()} — {problems.bad_rows} of {rows_total} rows invalid; "
                         "fix the log or pass --drop-invalid to drop them")
    if args.drop_invalid:
        for k, n in problems.as_dict().items():
            acc.dropped[k] = acc.dropped.get(k, 0) + n
    if acc.rows_read == 0:
        raise ValueError(f"{path}: the log has no data rows")
    if acc.rows_used == 0:
        raise ValueError(f"{path}: no valid rows left after dropping {acc.rows_read} invalid rows "
                         f"({problems.describe()})")
    inp = {"path": str(path), "format": fmt, "columns": vars(cols)}
    if args.state_only:
        from calib_jax.cli.validate import check_weight_total

        check_weight_total(_weight_total(acc), source=str(path), column=cols.weight, parts=True)
        cio.atomic_write_bytes(out / STATE_FILE, acc.to_bytes({"input": inp, "chunk_rows": args.chunk_rows}))
        ckpt.unlink(missing_ok=True)
        _say(f"state of {acc.rows_read} rows (from row {acc.row_offset}) saved: {out / STATE_FILE}")
        return {"state": str(out / STATE_FILE)}
    rep = _report(acc, out, inp, {"chunk_rows": args.chunk_rows}, t0, args=args,
                  gauc_sums=users.sums() if users is not None else None)
    ckpt.unlink(missing_ok=True)
    if args.drop_invalid and acc.rows_read > acc.rows_used:
        _say(f"dropped {acc.rows_read - acc.rows_used} invalid rows: {problems.describe()}", err=True)
    return rep


class _UserRows:
    """The user, score, label and weight of every valid row the arrow engine reads (GAUC needs
    each user's rows together: 16 bytes a row plus the user ids, in memory)."""

    def __init__(self) -> None:
        self.users: list[Any] = []
        self.x: list[Any] = []
        self.y: list[Any] = []
        self.v: list[Any] = []

    def add(self, batch: Any, cols: Any, chunk: Any) -> None:
        import pyarrow as pa

        keep = chunk.keep
        self.users.append(batch.column(batch.schema.get_field_index(cols.user)).filter(pa.array(keep)))
        self.x.append((chunk.p if cols.score is not None else chunk.o)[keep])
        self.y.append(chunk.y[keep])
        self.v.append(chunk.v[keep])

    def sums(self) -> Any:
        import numpy as np
        import pyarrow as pa

        from calib_jax.cli.gauc import user_auc_sums

        users = pa.chunked_array(self.users, type=pa.string()) if self.users else pa.chunked_array([], pa.string())
        cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0)  # noqa: E731
        return user_auc_sums(users, cat(self.x), cat(self.y), cat(self.v))


def _evaluate_sql(args: argparse.Namespace, engine: str, t0: float) -> dict[str, Any]:
    """``evaluate`` by a query engine (``duckdb``, ``spark``) or from ``--aggregates``: the log's
    cells in one query (:mod:`calib_jax.cli.sql`), then the report as for the arrow path."""
    import dataclasses

    from calib_jax import io as cio
    from calib_jax.cli import engines, sql
    from calib_jax.cli.validate import Columns, Problems

    if engine == "aggregates":
        src = Path(args.aggregates)
        table = _read_aggregates(src)
        meta = sql.query_settings_of(table, source=str(src))
        qcols = sql.columns_of_result(meta)
        _same_query(args, meta, qcols, src)
        cols = Columns(**dataclasses.asdict(qcols))
        inputs: list[Path] = [src]
        where, fmt = str(src), "aggregates"
    else:
        if engine == "duckdb":
            inp = engines.resolve_input(args.log, args.format, hive=args.hive_partitioning)
            fmt, inputs, where = inp.format, list(inp.files), inp.spec
        else:
            fmt, inputs, where = _spark_input(args)
        cols = _columns(args, fmt)
        qcols = sql.QueryColumns.of(cols)
    settings = _settings(args, cols)
    out = _out_dir(Path(args.out))
    refuse_overwriting_inputs(inputs, [out / f for f in (*REPORT_FILES, STATE_FILE, INCOMPLETE)])
    if engine != "aggregates":
        table = _query(args, engine, inp if engine == "duckdb" else None, qcols, settings)
    acc = sql.accumulator_from_aggregates(table, settings, source=where)
    if acc.rows_read == 0:
        raise ValueError(f"{where}: the log has no data rows")
    counts = sql.problems_from_aggregates(table, qcols, source=where)
    problems = Problems()
    if counts:
        # the first offending rows (a second scan, in file order) only for the message that stops
        # the run; with --drop-invalid the counts suffice
        firsts = engines.first_problem_rows(inp, qcols) if engine == "duckdb" and not args.drop_invalid else {}
        for i, (role, reason) in enumerate(sql.PROBLEM_BITS):
            col = getattr(qcols, role)
            if (col, reason) in counts:
                rows = [r for m, r in firsts.items() if m >> i & 1]
                problems.items[(col, reason)] = [counts[(col, reason)], min(rows) if rows else -1]
        problems.bad_rows = acc.rows_read - acc.rows_used
        if not args.drop_invalid:
            raise ValueError(f"{where}: {problems.describe()} — {problems.bad_rows} of {acc.rows_read} rows invalid; "
                             "fix the log or pass --drop-invalid to drop them")
        acc.dropped = problems.as_dict()
    if acc.rows_used == 0:
        raise ValueError(f"{where}: no valid rows left after dropping {acc.rows_read} invalid rows "
                         f"({problems.describe()})")
    record = {"path": where, "format": fmt, "columns": vars(cols), "engine": engine}
    if args.state_only:
        cio.atomic_write_bytes(out / STATE_FILE, acc.to_bytes({"input": record, "chunk_rows": None}))
        _say(f"state of {acc.rows_read} rows saved: {out / STATE_FILE}")
        return {"state": str(out / STATE_FILE)}
    from calib_jax.cli.gauc import sums_from_aggregates

    gauc_sums = sums_from_aggregates(table, source=where)
    if qcols.user is not None and gauc_sums is None:
        raise ValueError(f"{where}: the aggregates have no GAUC rows although their query read the user column "
                         f"{qcols.user!r}")
    rep = _report(acc, out, record, {"engine": engine}, t0, args=args, gauc_sums=gauc_sums)
    if args.drop_invalid and acc.rows_read > acc.rows_used:
        _say(f"dropped {acc.rows_read - acc.rows_used} invalid rows: {problems.describe()}", err=True)
    return rep


def _query(args: argparse.Namespace, engine: str, inp: Any, qcols: Any, settings: Any) -> Any:
    """The statistics query's result table from ``duckdb`` (on the resolved input ``inp``) or
    ``spark`` (on ``args.log``, with the command's Spark options)."""
    from calib_jax.cli import engines

    if engine == "duckdb":
        return engines.run_duckdb(inp, qcols, settings)
    spark = engines.spark_session(args.spark_master, _spark_conf(args.spark_conf))
    return engines.run_spark(args.log, qcols, settings, spark=spark, fmt=args.format, hive=args.hive_partitioning)


def _spark_input(args: argparse.Namespace) -> tuple[str, list[Path], str]:
    """``(format, files, name)`` of a Spark input: files by path, or a table of the catalog."""
    from calib_jax.cli import engines

    spec = str(args.log)
    if Path(spec).exists() or set("*?[") & set(spec):
        inp = engines.resolve_input(spec, args.format, hive=args.hive_partitioning)
        return inp.format, list(inp.files), inp.spec
    return "table", [], spec


def _read_aggregates(path: Path) -> Any:
    """A ``calib-jax sql`` result exported as CSV / TSV or Parquet, as a pyarrow table."""
    pa = loaders.require_pyarrow()
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            return pq.read_table(path)
        import pyarrow.csv as pcsv

        delim = "\t" if path.suffix.lower() in (".tsv", ".txt") else ","
        return pcsv.read_csv(path, parse_options=pcsv.ParseOptions(delimiter=delim),
                             convert_options=pcsv.ConvertOptions(column_types={"kind": pa.string(),
                                                                               "level": pa.string()},
                                                                 strings_can_be_null=False))
    except (pa.ArrowException, OSError) as e:
        raise ValueError(f"{path}: not a readable CSV or Parquet export of the aggregates: {e}") from None


def _same_query(args: argparse.Namespace, meta: dict[str, Any], qcols: Any, src: Path) -> None:
    """The command line of ``evaluate --aggregates`` must describe the query that made them."""
    for flag, key, val in (("--bins", "n_bins", args.bins), ("--hist-bins", "hist_bins", args.hist_bins),
                           ("--max-levels", "max_levels", args.max_levels)):
        if meta.get(key) != val:
            raise ValueError(f"{src}: the aggregates were computed with {flag} {meta.get(key)}; pass {flag} "
                             f"{meta.get(key)} (now {val})")
    given = {"score": args.score, "logit": args.logit, "label": args.label, "weight": args.weight,
             "oracle": args.oracle, "user": args.user}
    for k, v in given.items():
        if v is not None and getattr(qcols, k) != v:
            was = f"with --{k} {getattr(qcols, k)}" if getattr(qcols, k) is not None else f"without --{k}"
            raise ValueError(f"{src}: the aggregates were computed {was}, not with --{k} {v}")
    if args.field and tuple(dict.fromkeys(args.field)) != qcols.fields:
        raise ValueError(f"{src}: the aggregates hold the fields {list(qcols.fields)}, not {args.field}")


def run_sql(args: argparse.Namespace) -> str:
    """Print (or write) the statistics query of :mod:`calib_jax.cli.sql` for a warehouse."""
    from calib_jax import io as cio
    from calib_jax.cli.accumulate import Settings
    from calib_jax.cli.sql import QueryColumns, statistics_sql

    for name, val, lo in (("--bins", args.bins, 1), ("--hist-bins", args.hist_bins, 16),
                          ("--max-levels", args.max_levels, 1)):
        if val < lo:
            raise ValueError(f"{name} must be >= {lo}, got {val}")
    fields = tuple(dict.fromkeys(args.field))
    cols = QueryColumns(label=args.label, score=args.score, logit=args.logit, weight=args.weight,
                        oracle=args.oracle, fields=fields, user=args.user)
    settings = Settings(fields=fields, oracle=args.oracle is not None, n_boot=0, n_bins=args.bins,
                        hist_bins=args.hist_bins, max_levels=args.max_levels)
    q = statistics_sql(settings, cols, source=args.table, dialect=args.dialect) + "\n"
    if args.out:
        cio.atomic_write_text(Path(args.out), q)
        _say(f"wrote the {args.dialect} query to {args.out}; export its result as CSV or Parquet and run "
             f"`calib-jax evaluate --aggregates FILE`", err=True)
    else:
        sys.stdout.write(q)
    return q


STATE_FILE = "state.npz"


def _utf8_path(path: str) -> str:
    """``path`` as valid UTF-8 text: undecodable bytes of a file name as ``\\xNN``."""
    try:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeError:  # a lone surrogate that no byte gave
        return path.encode("utf-8", "backslashreplace").decode("utf-8")


def _weight_total(acc: Any) -> float:
    """The total weight of an accumulator's valid rows (its cells before the replicates are
    drawn): ``inf`` when the sums overflowed."""
    import numpy as np

    with np.errstate(over="ignore"):
        return float(np.sum(acc.cell[:, 0])) if acc.cells else float(acc.scal[0, 0])


def _report(acc: Any, out: Path, inp: dict[str, Any], extra_settings: dict[str, Any], t0: float,
            command: str = "evaluate", args: argparse.Namespace | None = None, gauc_sums: Any = None
            ) -> dict[str, Any]:
    """Panel, report and every output file of an accumulated log (``evaluate`` and ``merge``);
    with ``gauc_sums`` (:class:`calib_jax.cli.gauc.UserAUCSums`) GAUC joins the metrics."""
    from calib_jax import io as cio
    from calib_jax.cli.panel import compute_panel
    from calib_jax.cli.report import build_report, summary_text, write_outputs
    from calib_jax.cli.validate import check_weight_total

    # a file name's bytes that are not UTF-8 (kept by Python as lone surrogates) can be neither
    # drawn nor written as UTF-8: the report records them as \xNN
    paths = inp["path"]
    inp = {**inp, "path": _utf8_path(paths) if isinstance(paths, str) else [_utf8_path(p) for p in paths]}
    where = inp["path"] if isinstance(inp["path"], str) else "the merged parts"
    total = _weight_total(acc)
    if total != 0:  # a total of 0 is refused below, with its own message
        check_weight_total(total, source=where, column=inp.get("columns", {}).get("weight"))
    full = acc.replicated()
    if not full.scal[0, 0] > 0:  # the total weight of the valid rows
        raise ValueError(f"{where}: the weights of the {acc.rows_used} valid rows sum to 0, so no metric is "
                         "defined")
    panel = compute_panel(full)
    rep = build_report(panel)
    if gauc_sums is not None:
        from calib_jax.cli.gauc import USER_WEIGHTS, gauc_entry

        chosen = getattr(args, "gauc_weight", "impressions")
        rep["gauc"] = {w: gauc_entry(gauc_sums, w) for w in USER_WEIGHTS}
        at = next((i + 1 for i, e in enumerate(rep["metrics"]) if e["name"] == "auc"), len(rep["metrics"]))
        rep["metrics"].insert(at, rep["gauc"][chosen])
    wall = time.perf_counter() - t0
    rep["input"] = {**inp, "rows_read": acc.rows_read, "rows_used": acc.rows_used,
                    "rows_dropped": acc.rows_read - acc.rows_used, "dropped": acc.dropped, "chunks": acc.chunks}
    rep["settings"] = acc.settings.to_dict() | extra_settings
    rep["provenance"] = cio.provenance({"command": command, **rep["settings"]}, seed=acc.settings.seed,
                                       wall_time_s=wall, extra={"calib_jax": _version(),
                                                                "rows_per_s": acc.rows_read / max(wall, 1e-9)})
    if args is not None:
        args.writing_report = True  # from here on a failure leaves the INCOMPLETE marker
    cio.atomic_write_text(out / INCOMPLETE, _INCOMPLETE_TEXT)
    with _plain_figure_text():  # the plot's title is the log's name: a `$` in it is a dollar sign
        write_outputs(out, rep)
    (out / INCOMPLETE).unlink(missing_ok=True)
    _say(summary_text(rep))  # quotes the log's name and field names: made inert
    _say(f"  report: {out / 'report.html'}  ({acc.rows_read / max(wall, 1e-9):,.0f} rows/s)")
    return rep


def run_merge(args: argparse.Namespace) -> dict[str, Any]:
    """Merge the states of ``evaluate --state-only`` runs (parts of one log, e.g. one per
    worker or per day) and write the report of the whole. The parts must share their settings;
    under the ``rows`` scheme their row ranges (``--row-offset``) must not overlap, since a row's
    bootstrap counts are keyed by its global index (the ``cells`` scheme draws at the merge)."""
    from calib_jax.cli.accumulate import Accumulator
    from calib_jax.cli.validate import check_accumulator

    t0 = time.perf_counter()
    out = _out_dir(Path(args.out))
    parts = []
    seen: dict[str, Path] = {}
    for item in args.states:
        p = Path(item)
        p = p / STATE_FILE if p.is_dir() else p
        if not p.is_file():
            raise FileNotFoundError(f"{item}: no state file (expected {STATE_FILE} written by evaluate --state-only)")
        data = p.read_bytes()
        acc, meta = Accumulator.from_bytes(data, source=str(p))
        if acc.rows_read == 0:
            raise ValueError(f"{p}: an empty state (no rows read)")
        if not isinstance(meta.get("input"), dict) or not isinstance(meta["input"].get("columns"), dict):
            raise ValueError(f"{p}: not a state of `evaluate --state-only` (no input record)")
        weight = meta["input"]["columns"].get("weight")
        # tables that no log can have (forged or damaged): refused, naming the array and cell
        check_accumulator(acc, source=str(p), weight=weight if isinstance(weight, str) else None)
        fp = acc.fingerprint()
        if fp in seen:
            raise ValueError(f"{p}: holds the same statistics as {seen[fp]} (the same part twice would count its "
                             "rows twice)")
        seen[fp] = p
        parts.append((p, acc, meta))
    refuse_overwriting_inputs([p for p, _, _ in parts], [out / f for f in (*REPORT_FILES, INCOMPLETE)])
    first_p, first, first_meta = parts[0]
    for p, acc, meta in parts[1:]:
        if acc.settings != first.settings:
            diff = [k for k, v in acc.settings.to_dict().items() if first.settings.to_dict()[k] != v]
            raise ValueError(f"{p}: settings differ from {first_p} in {', '.join(diff)} "
                             f"({acc.settings} vs {first.settings})")
        cols, cols0 = meta["input"]["columns"], first_meta["input"]["columns"]
        if cols != cols0:
            diff = sorted(k for k in set(cols) | set(cols0) if cols.get(k) != cols0.get(k))
            raise ValueError(f"{p}: read other columns than {first_p} (differs in: {', '.join(diff)}); the parts "
                             "of one report must measure the same score, label, weight, oracle and fields")
    if first.settings.scheme == "rows" and first.settings.n_boot > 0:
        spans = sorted((a.row_offset, a.row_offset + a.rows_read, str(p)) for p, a, _ in parts)
        for (_, end, a), (start, _, b) in zip(spans, spans[1:]):
            if start < end:
                raise ValueError(f"{a} and {b} overlap in rows ({start} < {end}): the rows scheme needs each part's "
                                 "--row-offset (its first row in the whole log)")
    merged = parts[0][1]
    for _, acc, _ in parts[1:]:
        merged = merged.merge(acc)
    if merged.rows_used == 0:
        raise ValueError("the merged parts have no valid rows")
    inp = {"path": [str(m.get("input", {}).get("path", p)) for p, _, m in parts],
           "format": sorted({str(m.get("input", {}).get("format", "")) for _, _, m in parts}),
           "columns": parts[0][2].get("input", {}).get("columns", {}), "parts": len(parts)}
    return _report(merged, out, inp, {"chunk_rows": parts[0][2].get("chunk_rows")}, t0, "merge")


def _version() -> str:
    from calib_jax import __version__

    return __version__


# ---------------------------------------------------------------------------- fit / apply
def _read_all(args: argparse.Namespace, fmt: str, cols: Any, extra_numeric: Sequence[str] = ()):
    """Every valid row of a log in memory (``fit`` needs them all)."""
    import numpy as np
    import pyarrow as pa

    from calib_jax.cli.validate import Problems, clean_chunk

    problems = Problems()
    parts: dict[str, list[Any]] = {"o": [], "y": [], "v": [], "keep": []}
    tables: list[Any] = []
    start = 0
    for batch in loaders.iter_batches(args.log, fmt, numeric=[*cols.numeric, *extra_numeric], text=cols.fields,
                                      chunk_rows=args.chunk_rows):
        ch = clean_chunk(batch, cols, start, problems)
        if extra_numeric:
            for c in extra_numeric:
                x = np.asarray(batch.column(batch.schema.get_field_index(c)).to_numpy(zero_copy_only=False), float)
                problems.add(c, "missing or not finite", ~np.isfinite(x), start)
                ch.keep &= np.isfinite(x)
        start += batch.num_rows
        for k in parts:
            parts[k].append(getattr(ch, k))
        tables.append(batch)
    if start == 0:
        raise ValueError(f"{args.log}: the log has no data rows")
    if problems and not args.drop_invalid:
        raise ValueError(f"{args.log}: {problems.describe()}; fix the log or pass --drop-invalid to drop them")
    keep = np.concatenate(parts["keep"])
    if not keep.any():
        raise ValueError(f"{args.log}: no valid rows ({problems.describe()})")
    arrays = {k: np.concatenate(v)[keep] for k, v in parts.items() if k != "keep"}
    table = pa.Table.from_batches(tables).filter(pa.array(keep))
    return arrays, table, problems


def _cells_of_log(args: argparse.Namespace) -> tuple[Any, str, str, Any]:
    """The log's cells (an :class:`~calib_jax.cli.accumulate.Accumulator` without bootstrap)
    from ``args.engine``, after checking that ``--save`` is none of the inputs;
    ``(acc, where, format, columns)``."""
    from calib_jax.cli import engines, sql
    from calib_jax.cli.accumulate import Accumulator, Settings
    from calib_jax.cli.validate import Problems, clean_chunk

    if args.hist_bins < 16:
        raise ValueError(f"--hist-bins must be >= 16, got {args.hist_bins}")
    engine = args.engine
    if engine == "spark":
        fmt, inputs, where = _spark_input(args)
    elif engine == "duckdb":
        inp = engines.resolve_input(args.log, args.format, hive=args.hive_partitioning)
        fmt, inputs, where = inp.format, list(inp.files), inp.spec
    else:
        path = Path(args.log)
        if not path.is_file():
            raise ValueError(f"{path}: the arrow engine reads one file; globs and folders are read by --engine duckdb "
                             "or spark")
        fmt, inputs, where = loaders.resolve_format(path, args.format), [path], str(path)
    refuse_overwriting_inputs(inputs, [args.save])
    cols = _columns(args, fmt)
    if cols.fields:
        raise ValueError("--field: a fit from the log's cells uses the logit only; the methods that read fields "
                         "fit on the rows (leave out --engine)")
    settings = Settings(n_boot=0, hist_bins=args.hist_bins, scheme="rows")
    problems = Problems()
    if engine == "arrow":
        acc = Accumulator(settings)
        start = 0
        for batch in loaders.iter_batches(inputs[0], fmt, numeric=cols.numeric, text=(), chunk_rows=args.chunk_rows):
            ch = clean_chunk(batch, cols, start, problems)
            start += batch.num_rows
            acc.update(ch)
        acc.dropped = problems.as_dict()
        bad = acc.rows_read - acc.rows_used
    else:
        qcols = sql.QueryColumns.of(cols)
        table = _query(args, engine, inp if engine == "duckdb" else None, qcols, settings)
        acc = sql.accumulator_from_aggregates(table, settings, source=where)
        counts = sql.problems_from_aggregates(table, qcols, source=where)
        for (col, reason), n in counts.items():
            problems.items[(col, reason)] = [n, -1]
        bad = acc.rows_read - acc.rows_used
        acc.dropped = problems.as_dict()
    if acc.rows_read == 0:
        raise ValueError(f"{where}: the log has no data rows")
    if bad and not args.drop_invalid:
        raise ValueError(f"{where}: {problems.describe()} — {bad} of {acc.rows_read} rows invalid; fix the log or "
                         "pass --drop-invalid to drop them")
    if acc.rows_used == 0:
        raise ValueError(f"{where}: no valid rows left after dropping {acc.rows_read} invalid rows "
                         f"({problems.describe()})")
    return acc, where, fmt, cols


def run_fit(args: argparse.Namespace) -> dict[str, Any]:
    from calib_jax.cli import params as P

    if args.engine is not None:
        return _fit_from_cells(args)
    path = Path(args.log)
    fmt = loaders.resolve_format(path, args.format)
    cols = _columns(args, fmt)
    refuse_overwriting_inputs([path], [args.save])
    if Path(args.save).is_dir():
        raise ValueError(f"--save {args.save}: is a folder; name the parameter file to write")
    arrays, table, problems = _read_all(args, fmt, cols, extra_numeric=args.feature)
    spec = P.fit_from_table(args.method, arrays, table, fields=cols.fields, features=tuple(args.feature),
                            max_levels=args.max_levels, seed=args.seed,
                            hyper={k: v for k, v in (("n_partitions", args.partitions), ("n_steps", args.steps))
                                   if v is not None})
    spec["inputs"].update({"score": cols.score, "logit": cols.logit, "label": cols.label, "weight": cols.weight,
                           "source": str(path), "format": fmt, "rows": int(arrays["o"].shape[0]),
                           "dropped": problems.as_dict()})
    P.save(args.save, spec)
    _say(f"fitted {args.method} on {arrays['o'].shape[0]} rows of {path}; saved {args.save}")
    return spec


def _fit_from_cells(args: argparse.Namespace) -> dict[str, Any]:
    """``calib-jax fit --engine``: one query (or one streamed pass) for the cells, then the fit."""
    import numpy as np

    from calib_jax.cli import params as P

    if args.method not in CELL_FIT_METHODS:
        raise ValueError(f"--method {args.method} needs the rows (its fit reads more than the logit); --engine fits "
                         f"{', '.join(CELL_FIT_METHODS)} from the log's cells: leave out --engine to fit it")
    if args.feature or args.partitions is not None or args.steps is not None:
        raise ValueError("--feature, --partitions and --steps are options of the row-level fits; "
                         "leave them out with --engine")
    if Path(args.save).is_dir():
        raise ValueError(f"--save {args.save}: is a folder; name the parameter file to write")
    t0 = time.perf_counter()
    acc, where, fmt, cols = _cells_of_log(args)
    seconds_cells = time.perf_counter() - t0
    spec = P.fit_from_cells(args.method, acc, seed=args.seed)
    spec["inputs"].update({"score": cols.score, "logit": cols.logit, "label": cols.label,
                           "weight": cols.weight, "source": where, "format": fmt, "rows": int(acc.rows_used),
                           "dropped": dict(acc.dropped), "engine": args.engine,
                           "fitted_from": {"cells": int(np.count_nonzero(acc.hist.reshape(-1, 4)[:, 0] > 0)),
                                           "hist_bins": acc.settings.hist_bins,
                                           "logit_range": acc.settings.logit_range,
                                           "seconds_cells": round(seconds_cells, 3),
                                           "seconds_fit": round(time.perf_counter() - t0 - seconds_cells, 3)}})
    P.save(args.save, spec)
    _say(f"fitted {args.method} on the {spec['inputs']['fitted_from']['cells']} cells of {acc.rows_used} rows of "
         f"{where} ({args.engine}); saved {args.save}")
    return spec


def run_apply(args: argparse.Namespace) -> Path:
    import numpy as np
    import pyarrow as pa

    from calib_jax import io as cio
    from calib_jax.cli import params as P

    path = Path(args.log)
    out = Path(args.out)
    refuse_overwriting_inputs([path, args.params], [out])
    spec = P.load(args.params)
    inp = spec["inputs"]
    fmt = loaders.resolve_format(path, args.format)
    src_col = inp["score"] or inp["logit"]
    suffix = out.suffix.lower()
    if suffix not in (".csv", ".tsv", ".parquet", ".pq"):
        raise ValueError(f"{out}: output suffix must be .csv, .tsv or .parquet")
    if out.is_dir():
        raise ValueError(f"--out {out}: is a folder; name the output log")
    writer: Any = None
    rows = 0
    bar = _progress(loaders.count_rows(path, fmt), args.quiet, "apply")
    with cio.atomic_output(out) as tmp:
        try:
            for batch in loaders.iter_batches(path, fmt, numeric=[src_col, *inp["features"]], text=inp["fields"],
                                              chunk_rows=args.chunk_rows, all_columns=True):
                x = np.asarray(batch.column(batch.schema.get_field_index(src_col)).to_numpy(zero_copy_only=False),
                               float)
                bad = ~np.isfinite(x) if inp["logit"] else (~np.isfinite(x) | (x < 0) | (x > 1))
                if bad.any():
                    raise ValueError(f"{path}: column {src_col!r}: {int(bad.sum())} rows "
                                     f"{'not finite' if inp['logit'] else 'missing, NaN or outside [0, 1]'} "
                                     f"(first at data row {rows + int(np.argmax(bad)) + 1})")
                probs = np.asarray(P.predict_batch(spec, x, batch), np.float64)
                wrong = ~((probs >= 0) & (probs <= 1))  # NaN included: never written as a result
                if wrong.any():
                    raise ValueError(f"{args.params}: the calibrator gives {int(wrong.sum())} predictions that are "
                                     f"not probabilities (first at data row {rows + int(np.argmax(wrong)) + 1})")
                if args.column in batch.schema.names:
                    raise ValueError(f"{path}: already has a column {args.column!r}; choose another --column")
                batch = batch.append_column(args.column, pa.array(np.asarray(probs, np.float64)))
                if writer is None:
                    writer = table_writer(tmp, suffix, batch.schema)
                writer.write(batch)
                rows += batch.num_rows
                bar.update(batch.num_rows)
            if writer is None:
                raise ValueError(f"{path}: the log has no data rows")
        finally:
            bar.close()
            if writer is not None:
                writer.close()
    _say(f"wrote {rows} rows with column {args.column!r} to {out}")
    return out


# ---------------------------------------------------------------------------- simulate
def run_simulate(args: argparse.Namespace) -> Path:
    """Write the simulator's logged impressions (:func:`calib_jax.data.simulator.simulate_log`):
    ``click`` (label), ``pctr`` (the production model's prediction, the score to evaluate),
    ``oracle_ctr`` (the true CTR, for ``--oracle``), the categorical fields (the latent
    ``regime`` included: a field no production model sees) and the request ``hour``."""
    from calib_jax.data import simulator as sim

    loaders.require_pyarrow()
    out = Path(args.out)
    if out.suffix.lower() not in sim.LOG_SUFFIXES:
        raise ValueError(f"--out {out}: use a .parquet, .csv or .tsv file name")
    if out.is_dir():
        raise ValueError(f"--out {out}: is a folder; name the output log")
    cfg = sim.tiny_config() if args.scale == "tiny" else sim.default_config()
    table = sim.simulate_log(cfg, seed=int(args.seed), exposure=args.exposure, path=out)
    clicks = int(table["click"].to_numpy().sum())
    _say(f"wrote {table.num_rows} simulated impressions ({clicks} clicks) to {out}; evaluate with "
         f"--score pctr --label click --oracle oracle_ctr --field media --field regime")
    return out


# ---------------------------------------------------------------------------- studies
def run_studies() -> int:
    try:
        from experiments import registry
    except ImportError:
        print("the paper studies live in the repository's experiments/ package, which is not importable here "
              "(installed package without the repository): clone the repository and run from its root",
              file=sys.stderr)
        return 1
    rows = [(s.name, s.reproduces, s.title, s.command()) for s in registry.STUDIES]
    w = [max(len(r[i]) for r in rows) for i in range(2)]
    print(f"{'study':<{w[0]}}  {'reproduces':<{w[1]}}  what / command")
    for name, rep, title, cmd in rows:
        print(f"{name:<{w[0]}}  {rep:<{w[1]}}  {title}\n{'':<{w[0] + w[1] + 4}}$ {cmd}")
    return 0


# ---------------------------------------------------------------------------- untrusted text
class _InertStream:
    """A text stream whose writes are made inert (argparse prints its errors itself)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(inert(text, lines=True))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


# ---------------------------------------------------------------------------- signals
#: exit status after Ctrl-C (SIGINT) or SIGTERM: 128 + SIGINT, what a shell reports for Ctrl-C
INTERRUPTED = 130
#: the subcommands, to name one in a message before the arguments are parsed
_COMMANDS = ("evaluate", "compare", "fit", "apply", "simulate", "merge", "sql", "studies")
#: seconds after which an interrupt that did not reach ``main`` (swallowed by a library) is
#: delivered again
_REDELIVER_S = 2.0


class _Signals:
    """Ctrl-C and SIGTERM while a command runs (see :func:`main`).

    The first signal raises ``KeyboardInterrupt`` where the program is (SIGTERM too, so both
    take the same path: the checkpoint is kept, the atomic writers remove their temporary
    files); later ones are only noted, so the clean-up that the first one started is not cut
    short. Where a raised exception would be dropped with "Exception ignored in ..." (a
    garbage-collector callback such as JAX's ``_xla_gc_callback``, a ``__del__``), the
    signal is delivered again a moment later, once that code has returned. An interrupt that
    a library turned into its own error (DuckDB's "Query interrupted", a Py4J error) or
    swallowed is still an interrupt: ``main`` looks at :attr:`signum`, and one that has not
    reached ``main`` after :data:`_REDELIVER_S` seconds is raised again."""

    def __init__(self) -> None:
        import threading

        self.lock = threading.RLock()  # a handler may run in the main thread while it holds it
        self.signum: int | None = None  # the first signal of this command
        self.running = False  # between start() and stop()
        self.active = False  # the next signal raises KeyboardInterrupt
        self.timer: Any = None  # a pending delivery again
        self.command: str | None = None

    def start(self, command: str | None) -> None:
        with self.lock:
            self.signum, self.running, self.active, self.command = None, True, True, command

    def stop(self) -> int | None:
        """The command is over (its outcome is being reported): later signals are only noted."""
        with self.lock:
            self.running = self.active = False
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            return self.signum

    def handler(self, signum: int, frame: Any) -> None:
        if self.signum is None:
            self.signum = signum
        if not (self.active and self.running):
            return
        if _drops_exceptions(frame):
            # delivered again from another thread a moment later (from here, it would come back
            # at once, inside this handler), once the callback has returned
            self._later(0.01, signum)
            return
        self.active = False  # the clean-up this exception starts runs undisturbed
        self._later(_REDELIVER_S, signum)
        raise KeyboardInterrupt

    def _later(self, seconds: float, signum: int) -> None:
        import threading

        with self.lock:
            if self.timer is not None:
                self.timer.cancel()
            self.timer = threading.Timer(seconds, self._again, (signum,))
            self.timer.daemon = True
            self.timer.start()

    def _again(self, signum: int) -> None:
        """An interrupt that has not ended the command by now: deliver it again."""
        import _thread
        import signal

        with self.lock:
            if not self.running or self.timer is None:
                return
            self.timer = None
            self.active = True
            _thread.interrupt_main(signal.Signals(signum))

    def after_main(self, signum: int, frame: Any) -> None:
        """After ``main`` returned in a program (interpreter shut-down): end at once."""
        try:
            sys.stdout.flush()
        except Exception:  # noqa: BLE001 - a closed or broken stdout must not stop the exit
            pass
        name = f" {self.command}" if self.command else ""
        os.write(2, f"calib-jax{name}: interrupted\n".encode())
        os._exit(INTERRUPTED)


_SIGNALS = _Signals()


def _drops_exceptions(frame: Any) -> bool:
    """Whether an exception raised in ``frame`` may be printed and dropped: the frame or a
    caller is a garbage-collector callback, a ``__del__`` or the weak-reference machinery
    (whose callbacks run when the collector frees an object). A false alarm costs only the
    10 ms of a delivery again."""
    import gc

    codes = {getattr(cb, "__code__", None) for cb in gc.callbacks}
    while frame is not None:
        code = frame.f_code
        if code in codes or code.co_name == "__del__" or Path(code.co_filename).name in _WEAKREF_FILES:
            return True
        frame = frame.f_back
    return False


#: the modules whose functions run as weak-reference callbacks (exceptions there are dropped)
_WEAKREF_FILES = ("weakref.py", "_weakrefset.py")


def _install_signal_handlers() -> dict[int, Any]:
    """Route SIGINT and SIGTERM to :class:`_Signals`; returns the handlers to restore (none
    outside the main thread, where Python cannot set handlers)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}
    previous: dict[int, Any] = {}
    for s in (signal.SIGINT, signal.SIGTERM):
        previous[s] = signal.getsignal(s)
        signal.signal(s, _SIGNALS.handler)
    return previous


def _command_of(argv: Sequence[str]) -> str | None:
    return next((a for a in argv if a in _COMMANDS), None)


# ---------------------------------------------------------------------------- main
def _one_line(e: BaseException) -> str:
    """An exception's message on one line (a parser's message may span several), made inert
    (:func:`inert`): the message may quote a file's header or values."""
    return inert(" ".join(str(e).split()))


def _run(args: argparse.Namespace) -> int:
    """Run the parsed command; its exit status (exceptions are reported by :func:`main`)."""
    if args.command in ("evaluate", "compare", "merge", "fit", "apply"):
        from calib_jax import io as cio

        # the command's programs (the panel, the tests, the calibrators) are most of its
        # fixed cost: kept across runs, a second run compiles nothing
        cio.enable_compile_cache(min_compile_time_s=0.0)
    from calib_jax.cli.compare import run_compare

    runners: dict[str, Any] = {"evaluate": run_evaluate, "compare": run_compare, "fit": run_fit, "apply": run_apply,
                               "simulate": run_simulate, "merge": run_merge, "sql": run_sql}
    if args.command not in runners:
        return run_studies()
    runners[args.command](args)
    return 0


def _outcome(e: BaseException | None, args: argparse.Namespace | None, command: str | None) -> tuple[int, str]:
    """The exit status and the stderr line of a command that raised ``e`` (``None``: it was
    interrupted, whatever it raised)."""
    name = f"calib-jax {command}" if command else "calib-jax"
    if e is None or isinstance(e, KeyboardInterrupt):
        return INTERRUPTED, f"{name}: interrupted"
    if isinstance(e, _Stopped) and args is not None:
        return 3, (f"stopped after {args.stop_after_chunks} chunks; checkpoint saved in {args.out} "
                   "(rerun with --resume)")
    if isinstance(e, ValueError | OSError | EOFError | zlib.error | UnicodeError):
        # OSError carries the file name (permissions, a full disk, a folder in the way)
        return 2, f"{name}: error: {_one_line(e)}"
    if isinstance(e, MemoryError):
        return 2, f"{name}: error: out of memory (use a smaller --chunk-rows, --bootstrap or --max-levels)"
    return 2, (f"{name}: error: unexpected {type(e).__name__}: {_one_line(e)} (please report this with the "
               "command line)")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``calib-jax`` / ``python -m calib_jax``; returns the exit status.

    The contract (README, "What the command promises"): exit 0 with complete, finite outputs,
    or exit 2 with one message naming the file, column or argument; 3 when ``evaluate`` was
    stopped on purpose (checkpoint kept). Never a traceback, never a changed input file, and
    every message printable (:func:`inert`: control and escape sequences from a file's header,
    values or name are shown as ``\\xNN``).

    Ctrl-C (SIGINT) and SIGTERM, at any moment of the command, end it with exit 130 and the
    one line ``calib-jax <command>: interrupted`` on stderr (130 for both, what a shell shows
    for Ctrl-C, so scripts test one status): the report files are written atomically and the
    folder keeps its ``INCOMPLETE`` marker until the last one is, an interrupted ``evaluate``
    keeps its checkpoint for ``--resume``, and a run without ``--resume`` starts afresh. An
    interrupt turned by a query engine into its own error counts as an interrupt. Called as
    the program (``argv`` None), the handlers stay until the process exits, so a signal
    during the interpreter's shut-down also ends with 130 and no traceback; called from
    Python with ``argv``, the caller's handlers are restored on return.

    Args:
      argv: the arguments after the program name; ``None`` reads ``sys.argv`` (the program).

    Returns:
      The exit status: 0, 2 (bad input), 3 (stopped on purpose) or 130 (interrupted).

    Example:
      >>> main(["sql", "--dialect", "duckdb", "--table", "t", "--score", "p", "--label", "y",
      ...       "--bins", "0"])
      2
    """
    import signal

    raw = list(sys.argv[1:] if argv is None else argv)
    command = _command_of(raw)
    _SIGNALS.start(command)
    previous = _install_signal_handlers()
    args: argparse.Namespace | None = None
    rc, message = 0, ""
    try:
        try:
            err, sys.stderr = sys.stderr, _InertStream(sys.stderr)  # argparse prints its errors itself
            try:
                args = build_parser().parse_args(raw)
            finally:
                sys.stderr = err
            command = _SIGNALS.command = args.command
            rc = _run(args)
            _SIGNALS.stop()  # here, so that a signal at this very moment is still caught below
        except SystemExit:
            if _SIGNALS.stop() is None:
                raise  # argparse: --help (0) or a usage error (2), already printed
        except BaseException as e:  # noqa: BLE001 - the contract: one message, never a traceback
            _SIGNALS.stop()
            rc, message = _outcome(e, args, command)
    except KeyboardInterrupt:  # delivered again just as the command ended: it was interrupted
        _SIGNALS.stop()
    finally:
        _SIGNALS.stop()
        for s, h in previous.items():
            signal.signal(s, _SIGNALS.after_main if argv is None else h)
    if _SIGNALS.signum is not None:  # an interrupt, whatever a library made of it
        rc, message = _outcome(None, args, command)
    if message:
        _say(message, err=True)
    return rc
