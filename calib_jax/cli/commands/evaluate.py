"""``calib-jax evaluate LOG``: the calibration report of a log; the parser and the output plan
here, the engine in :mod:`calib_jax.logs.evaluation`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from calib_jax.cli.commands.arguments import add_column_arguments, add_spark_arguments
from calib_jax.logs.common import Files
from calib_jax.logs.engines import ENGINES
from calib_jax.logs.evaluation import Stopped, engine_of
from calib_jax.logs.inputs import log_files
from calib_jax.logs.options import EvaluateOptions
from calib_jax.logs.outputs import CHECKPOINT, STATE_FILE, report_files

__all__ = ["NAME", "Options", "Stopped", "add_parser", "files", "run"]

NAME = "evaluate"
Options = EvaluateOptions


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``evaluate`` subcommand's parser (added to ``calib-jax``'s subparsers)."""
    ev = sub.add_parser("evaluate", help="metric panel, decompositions and an HTML report of a log")
    ev.add_argument("log", nargs="?", help="the log: a file, a glob ('logs/*.parquet'), a folder of Parquet or CSV "
                    "files (hive-partitioned too), an Open Bandit directory, or with --engine spark a table name")
    add_column_arguments(ev)
    ev.add_argument("--engine", choices=ENGINES, default=None,
                    help="duckdb (default): the statistics as one SQL query, in-process; spark: the same query "
                         "through PySpark (a table or files of a cluster); arrow: the streamed reader (needed by "
                         "--resume and the rows bootstrap, its default)")
    ev.add_argument("--aggregates", metavar="FILE",
                    help="evaluate the result of `calib-jax sql` run in your own warehouse (CSV or Parquet export) "
                         "instead of a log")
    add_spark_arguments(ev)
    ev.add_argument("--oracle", metavar="COL", help="column of true CTRs (simulated logs): oracle metrics; with "
                    "--by, each slice's from its rows alone")
    ev.add_argument("--user", metavar="COL",
                    help="user column: adds GAUC (each user's AUC, exactly, averaged over the users with a click "
                         "and a non-click) with a delta-method interval over users; with --by, each slice's GAUC "
                         "from its rows alone")
    ev.add_argument("--gauc-weight", choices=("impressions", "clicks", "equal"), default="impressions",
                    help="the user weight of GAUC in the metric panel (default impressions; report.json has all "
                         "three)")
    ev.add_argument("--by", metavar="COL",
                    help="a panel per slice of COL (NE, calibration ratio, ECE, Brier, AUC with intervals), a plot "
                         "over the slices and a change flag per slice against --baseline")
    ev.add_argument("--every", choices=("hour", "day", "week", "month"),
                    help="with --by: bucket COL as a time (default: each value of COL is a slice)")
    ev.add_argument("--baseline", metavar="SLICE", help="with --by: the slice others are compared with (default: the "
                    "first; with --every, its start as any ISO 8601 date or time, e.g. 2026-03-01)")
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
    return ev


def files(opts: EvaluateOptions) -> Files:
    """What an ``evaluate`` run reads (the log's files, or the ``--aggregates`` file) and writes
    into ``--out``: the slices' files (``--by``), the state (``--state-only``) or the report
    with its ``INCOMPLETE`` marker, and the checkpoint of the streamed reader. An invalid
    command line gets the plan of the streamed reader (the run then refuses it)."""
    source: str | None
    try:
        engine, source = engine_of(opts)
    except ValueError:
        engine, source = "arrow", opts.log
    out = Path(opts.out)
    inputs = log_files(source, opts.format) if engine != "aggregates" else (Path(str(source)),)
    if opts.by is not None:
        from calib_jax.logs.slicing import output_files

        return Files.of(inputs, output_files(out, fields=bool(opts.field)))
    written = (out / STATE_FILE,) if opts.state_only else report_files(out)
    return Files.of(inputs, (*written, *((out / CHECKPOINT,) if engine == "arrow" else ())))


def run(opts: EvaluateOptions) -> dict[str, Any]:
    """Run :func:`calib_jax.logs.evaluation.run_evaluate`: the report (``report.json``'s
    content; with ``state_only``, the state file's path; with ``by``, the slices' table)."""
    from calib_jax.logs.evaluation import run_evaluate

    return run_evaluate(opts)
