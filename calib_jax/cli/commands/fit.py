"""``calib-jax fit LOG --method M --save FILE``: a calibrator of :mod:`calib_jax.calibrators`
fitted on a log, its parameters saved as a versioned JSON file; the parser and the output plan
here, the fit in :mod:`calib_jax.logs.fitting`."""

from __future__ import annotations

import argparse
from typing import Any

from calib_jax.cli.commands.arguments import add_column_arguments, add_spark_arguments
from calib_jax.logs.common import Files
from calib_jax.logs.engines import ENGINES
from calib_jax.logs.fitting import CELL_FIT_METHODS
from calib_jax.logs.inputs import log_files
from calib_jax.logs.options import FitOptions

__all__ = ["NAME", "Options", "CELL_FIT_METHODS", "add_parser", "files", "run"]

NAME = "fit"
Options = FitOptions


def _method_name(text: str) -> str:
    """``--method``: a calibrator name of the registry (old CLI names get a pointer to the new)."""
    from calib_jax.logs.params import OLD_METHOD_NAMES

    if text in OLD_METHOD_NAMES:
        raise argparse.ArgumentTypeError(f"{text!r} is called {OLD_METHOD_NAMES[text]!r}")
    return text


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``fit`` subcommand's parser (added to ``calib-jax``'s subparsers)."""
    from calib_jax.logs.params import METHODS

    fit = sub.add_parser("fit", help="fit a calibrator on a log and save its parameters")
    fit.add_argument("log")
    add_column_arguments(fit)
    fit.add_argument("--method", required=True, choices=sorted(METHODS), type=_method_name)
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
    add_spark_arguments(fit, what=" of --engine spark")
    return fit


def run(opts: FitOptions) -> dict[str, Any]:
    """Run :func:`calib_jax.logs.fitting.run_fit`: fit, save ``--save``; returns the parameters' record."""
    from calib_jax.logs.fitting import run_fit

    return run_fit(opts)


def files(opts: FitOptions) -> Files:
    """What ``fit`` reads (the log's files) and writes (``--save``): the plan of its output
    guard, so ``--save`` is never one of the log's files."""
    return Files.of(log_files(opts.log, opts.format), [opts.save])
