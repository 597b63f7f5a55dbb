"""``calib-jax apply PARAMS LOG --out LOG2``: the calibrator saved by ``calib-jax fit`` applied to
every row of a log; the parser and the output plan here, the engine in
:mod:`calib_jax.logs.applying`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from calib_jax.logs import loaders
from calib_jax.logs.common import Files
from calib_jax.logs.inputs import log_files
from calib_jax.logs.options import ApplyOptions

__all__ = ["NAME", "Options", "add_parser", "files", "run"]

NAME = "apply"
Options = ApplyOptions


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``apply`` subcommand's parser (added to ``calib-jax``'s subparsers)."""
    ap_ = sub.add_parser("apply", help="apply saved calibrator parameters to a log")
    ap_.add_argument("params", help="parameter file written by `calib-jax fit`")
    ap_.add_argument("log")
    ap_.add_argument("--out", required=True, help="output log (.csv, .tsv or .parquet): input columns + calibrated")
    ap_.add_argument("--column", default="calibrated", help="name of the new column (default: calibrated)")
    ap_.add_argument("--format", default="auto", choices=loaders.FORMATS)
    ap_.add_argument("--chunk-rows", type=int, default=262_144)
    ap_.add_argument("--quiet", action="store_true")
    return ap_


def files(opts: ApplyOptions) -> Files:
    """``apply`` reads the parameter file and the log, and writes ``--out``."""
    return Files.of([opts.params, *log_files(opts.log, opts.format)], [opts.out])


def run(opts: ApplyOptions) -> Path:
    """Run :func:`calib_jax.logs.applying.run_apply`; returns the output log's path."""
    from calib_jax.logs.applying import run_apply

    return run_apply(opts)
