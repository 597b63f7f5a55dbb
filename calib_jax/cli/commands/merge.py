"""``calib-jax merge STATE...``: one report from the states of several ``evaluate --state-only``
runs; the parser and the output plan here, the merge in :mod:`calib_jax.logs.merging`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from calib_jax.logs.common import Files
from calib_jax.logs.merging import state_path
from calib_jax.logs.options import MergeOptions
from calib_jax.logs.outputs import report_files

__all__ = ["NAME", "Options", "add_parser", "files", "run"]

NAME = "merge"
Options = MergeOptions


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``merge`` subcommand's parser (added to ``calib-jax``'s subparsers)."""
    mg = sub.add_parser("merge", help="one report from the states of several `evaluate --state-only` runs")
    mg.add_argument("states", nargs="+", help="state.npz files (or the --out directories holding them)")
    mg.add_argument("--out", default="calib-jax-report", help="output directory (default ./calib-jax-report)")
    return mg


def files(opts: MergeOptions) -> Files:
    """``merge`` reads the state files and writes the report files into ``--out``."""
    return Files.of([state_path(s) for s in opts.states], report_files(Path(opts.out)))


def run(opts: MergeOptions) -> dict[str, Any]:
    """Run :func:`calib_jax.logs.merging.run_merge`; returns the merged report."""
    from calib_jax.logs.merging import run_merge

    return run_merge(opts)
