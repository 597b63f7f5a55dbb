"""``calib-jax compare LOG --score A --score B`` (or ``--logit A --logit B``): two or more models
scored on the same log, every metric of each and every paired difference with its interval
(:func:`calib_jax.logs.comparison.run_compare`); ``--user COL`` adds GAUC and its paired
differences (:mod:`calib_jax.logs.paired_gauc`), ``--field COL`` each field's paired per-field
metrics (:mod:`calib_jax.logs.paired_fields`)."""

from __future__ import annotations

import argparse
from typing import Any

from calib_jax.cli.commands.arguments import add_rate_arguments
from calib_jax.logs.common import Files
from calib_jax.logs.engines import ENGINES
from calib_jax.logs.inputs import log_files
from calib_jax.logs.options import CompareOptions

__all__ = ["NAME", "Options", "add_parser", "files", "run"]

NAME = "compare"
Options = CompareOptions


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``compare`` subcommand's parser (added to ``calib-jax``'s subparsers)."""
    cp = sub.add_parser("compare", help="two or more models scored on the same log: every metric of each and every "
                        "paired difference with its interval")
    cp.add_argument("log", help="the log: a file, a glob or a folder (duckdb, spark), or with --engine spark a table")
    cp.add_argument("--label", default="label", help="label column (0/1; default 'label')")
    cp.add_argument("--score", action="append", default=[], metavar="COL",
                    help="a model's probability column (repeat: --score prod --score candidate)")
    cp.add_argument("--logit", action="append", default=[], metavar="COL",
                    help="a model's logit column, instead of --score (repeat; every model as logits)")
    cp.add_argument("--weight", metavar="COL", help="row weight column")
    add_rate_arguments(cp)
    cp.add_argument("--user", metavar="COL",
                    help="user column: adds each model's GAUC and every paired GAUC difference, with the paired "
                         "delta-method interval over users")
    cp.add_argument("--gauc-weight", choices=("impressions", "clicks", "equal"), default="impressions",
                    help="the user weight of GAUC (default impressions)")
    cp.add_argument("--oracle", metavar="COL",
                    help="oracle CTR column (simulated logs): adds the oracle metrics of each model and their paired "
                         "differences (all but Chebyshev, a maximum)")
    cp.add_argument("--field", metavar="COL", action="append", default=[],
                    help="categorical column (repeatable): adds each model's per-field metrics (GCE, Field-ECE, "
                         "Field-RCE, |bias| over the field's levels) and their paired differences, in fields.csv/.md")
    cp.add_argument("--max-levels", type=int, default=1000, help="levels kept per --field before __other__")
    cp.add_argument("--format", default="auto", help="file format (default: by suffix)")
    cp.add_argument("--engine", choices=ENGINES, default="duckdb",
                    help="duckdb (default): one query; spark: the same query through PySpark; arrow: streamed")
    cp.add_argument("--spark-master", metavar="URL", help="Spark master (default: local mode)")
    cp.add_argument("--spark-conf", metavar="KEY=VALUE", action="append", default=[],
                    help="a Spark setting (repeatable)")
    cp.add_argument("--hive-partitioning", action="store_true", help="read hive partition folders as columns")
    cp.add_argument("--out", default="calib-jax-compare", help="output directory (default ./calib-jax-compare)")
    cp.add_argument("--bootstrap", type=int, default=200, metavar="B",
                    help="bootstrap resamples shared by all models (default 200; 0: no intervals)")
    cp.add_argument("--seed", type=int, default=0)
    cp.add_argument("--bins", type=int, default=15, help="ECE/MCE bins (default 15)")
    cp.add_argument("--hist-bins", type=int, default=4096, help="fine logit grid (default 4096)")
    cp.add_argument("--chunk-rows", type=int, default=262_144, help="rows per chunk of the arrow engine")
    cp.add_argument("--drop-invalid", action="store_true", help="drop invalid rows instead of refusing the log")
    cp.add_argument("--quiet", action="store_true", help="no progress bar")
    return cp


def files(opts: CompareOptions) -> Files:
    """What ``compare`` reads (the log's files) and writes into ``--out``
    (:func:`calib_jax.logs.comparison.output_files`: its tables and one report per model)."""
    from pathlib import Path

    from calib_jax.logs.comparison import output_files

    return Files.of(log_files(opts.log, opts.format), output_files(Path(opts.out), opts.models, fields=opts.field))


def run(opts: CompareOptions) -> dict[str, Any]:
    """Run the comparison (:func:`calib_jax.logs.comparison.run_compare`); returns ``compare.json``'s content."""
    from calib_jax.logs.comparison import run_compare

    return run_compare(opts)
