"""``calib-jax sql``: the statistics query of :mod:`calib_jax.logs.sql` in a warehouse's dialect,
to run where the log lives; ``calib-jax evaluate --aggregates`` reads its exported result."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from calib_jax.cli.commands.arguments import add_rate_arguments
from calib_jax.logs.common import Files, say
from calib_jax.logs.options import BINS_MAX, SqlOptions, check_option_range

__all__ = ["NAME", "Options", "add_parser", "files", "run"]

NAME = "sql"
Options = SqlOptions


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``sql`` subcommand's parser (added to ``calib-jax``'s subparsers)."""
    from calib_jax.logs.sql import DIALECTS

    sq = sub.add_parser("sql", help="print the statistics query, to run in your own warehouse (then evaluate "
                        "--aggregates its result)")
    sq.add_argument("--dialect", choices=sorted(DIALECTS), default="duckdb")
    sq.add_argument("--table", required=True, metavar="FROM",
                    help="the FROM item, inserted as written: a table name (quoted as your SQL needs, e.g. "
                         "`project.dataset.events`) or a table function such as read_parquet('logs/*.parquet')")
    g = sq.add_mutually_exclusive_group(required=True)
    g.add_argument("--score", metavar="COL", help="column of predicted probabilities in [0, 1]")
    g.add_argument("--logit", metavar="COL", help="column of predicted logits")
    sq.add_argument("--label", metavar="COL", required=True, help="column of 0/1 labels")
    sq.add_argument("--weight", metavar="COL", help="optional column of non-negative row weights")
    add_rate_arguments(sq)
    sq.add_argument("--field", metavar="COL", action="append", default=[], help="categorical column (repeatable)")
    sq.add_argument("--oracle", metavar="COL", help="column of true CTRs (simulated logs)")
    sq.add_argument("--user", metavar="COL", help="user column: the query also computes GAUC's sums")
    sq.add_argument("--bins", type=int, default=15, help="ECE/MCE bins (default 15)")
    sq.add_argument("--hist-bins", type=int, default=4096, help="fine logit grid (default 4096)")
    sq.add_argument("--max-levels", type=int, default=1000, help="levels kept per field before __other__")
    sq.add_argument("--out", metavar="FILE", help="write the query to FILE (default: print it)")
    return sq


def files(opts: SqlOptions) -> Files:
    """``sql`` reads no file (``--table`` is SQL text) and writes ``--out`` when given."""
    return Files.of((), [opts.out] if opts.out else [])


def run(opts: SqlOptions) -> str:
    """Print (or write) the statistics query of :mod:`calib_jax.logs.sql` for a warehouse."""
    from calib_jax import io as cio
    from calib_jax.logs.accumulate import Settings
    from calib_jax.logs.sql import QueryColumns, statistics_sql

    for name, val, lo in (("--bins", opts.bins, 1), ("--hist-bins", opts.hist_bins, 16),
                          ("--max-levels", opts.max_levels, 1)):
        if val < lo:
            raise ValueError(f"{name} must be >= {lo}, got {val}")
    check_option_range("--bins", opts.bins, (1, BINS_MAX))
    fields = tuple(dict.fromkeys(opts.field))
    cols = QueryColumns(label=opts.label, score=opts.score, logit=opts.logit, weight=opts.weight,
                        oracle=opts.oracle, fields=fields, user=opts.user, negative_rate=opts.negative_rate,
                        negative_rate_column=opts.negative_rate_column)
    settings = Settings(fields=fields, oracle=opts.oracle is not None, n_boot=0, n_bins=opts.bins,
                        hist_bins=opts.hist_bins, max_levels=opts.max_levels)
    q = statistics_sql(settings, cols, source=opts.table, dialect=opts.dialect) + "\n"
    if opts.out:
        cio.atomic_write_text(Path(opts.out), q)
        say(f"wrote the {opts.dialect} query to {opts.out}; export its result as CSV or Parquet and run "
             f"`calib-jax evaluate --aggregates FILE`", err=True)
    else:
        sys.stdout.write(q)
    return q
