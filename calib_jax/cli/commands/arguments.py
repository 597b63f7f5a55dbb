"""The options the ``calib-jax`` subcommands share for naming a log's columns and reading it
through Spark (the parsers' part; :mod:`calib_jax.logs.options` holds the typed options)."""

from __future__ import annotations

import argparse

from calib_jax.logs import loaders

__all__ = ["add_column_arguments", "add_rate_arguments", "add_spark_arguments"]


def add_column_arguments(p: argparse.ArgumentParser, *, fields: bool = True) -> None:
    """The options naming a log's columns and how its rows are read (``evaluate``, ``fit``)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--score", metavar="COL", help="column of predicted probabilities in [0, 1]")
    g.add_argument("--logit", metavar="COL", help="column of predicted logits")
    p.add_argument("--label", metavar="COL", help="column of 0/1 labels (default: the format's label column)")
    p.add_argument("--weight", metavar="COL", help="optional column of non-negative row weights")
    add_rate_arguments(p)
    if fields:
        p.add_argument("--field", metavar="COL", action="append", default=[],
                       help="categorical column for per-field metrics (repeatable; evaluate --by COL: each slice's "
                            "GCE, Field-ECE, Field-RCE and |bias| with intervals, as evaluate --field on its rows)")
    p.add_argument("--format", default="auto", choices=loaders.FORMATS, help="input format (default: by suffix)")
    p.add_argument("--chunk-rows", type=int, default=262_144, metavar="N", help="rows per chunk (default 262144)")
    p.add_argument("--drop-invalid", action="store_true",
                   help="drop invalid rows (NaN, scores outside [0,1], labels not 0/1, ...) and report them")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def add_rate_arguments(p: argparse.ArgumentParser) -> None:
    """``--negative-rate W`` and ``--negative-rate-column COL``: a log that kept a fraction of its
    non-clicks (``evaluate``, ``fit``, ``compare``, ``sql``; :mod:`calib_jax.logs.downsampling`)."""
    p.add_argument("--negative-rate", type=float, metavar="W",
                   help="the fraction W of label-0 rows the log kept (negative downsampling): each kept non-click "
                   "weighs 1/W, so the metrics are the full population's (the scores must be population "
                   "probabilities: calib_jax.logs.downsampling.recalibrate_probability)")
    p.add_argument("--negative-rate-column", metavar="COL",
                   help="a column of each row's kept-non-click rate, instead of --negative-rate (a log whose rate "
                   "changed; the calibration tests and drift flags then need one rate and are not computed)")


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
