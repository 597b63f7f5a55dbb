"""``calib-jax simulate --out LOG``: a log of the built-in ad-auction simulator, with the true
CTR of every impression (:func:`calib_jax.data.simulator.simulate_log`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from calib_jax.logs import loaders
from calib_jax.logs.common import Files, say
from calib_jax.logs.options import SimulateOptions

__all__ = ["NAME", "Options", "add_parser", "files", "run"]

NAME = "simulate"
Options = SimulateOptions


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``simulate`` subcommand's parser (added to ``calib-jax``'s subparsers)."""
    sim = sub.add_parser("simulate", help="write a log of the built-in ad-auction simulator (with its true CTR)")
    sim.add_argument("--out", required=True, help="output log (.parquet, .csv or .tsv)")
    sim.add_argument("--scale", default="tiny", choices=("tiny", "default"),
                     help="tiny: a few thousand requests (seconds); default: ~1.1M impressions (minutes)")
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--exposure", default="auction", choices=("auction", "random"),
                     help="auction: the ads that won (biased production pCTR); random: random eligible ads")
    return sim


def files(opts: SimulateOptions) -> Files:
    """``simulate`` reads no file and writes ``--out``."""
    return Files.of((), [opts.out])


def run(opts: SimulateOptions) -> Path:
    """Write the simulator's logged impressions (:func:`calib_jax.data.simulator.simulate_log`):
    ``click`` (label), ``pctr`` (the production model's prediction, the score to evaluate),
    ``oracle_ctr`` (the true CTR, for ``--oracle``), the categorical fields (the latent
    ``regime`` included: a field no production model sees) and the request ``hour``."""
    from calib_jax.data import simulator as sim

    loaders.require_pyarrow()
    out = Path(opts.out)
    if out.suffix.lower() not in sim.LOG_SUFFIXES:
        raise ValueError(f"--out {out}: use a .parquet, .csv or .tsv file name")
    if out.is_dir():
        raise ValueError(f"--out {out}: is a folder; name the output log")
    cfg = sim.tiny_config() if opts.scale == "tiny" else sim.default_config()
    table = sim.simulate_log(cfg, seed=int(opts.seed), exposure=opts.exposure, path=out)
    clicks = int(table["click"].to_numpy().sum())
    say(f"wrote {table.num_rows} simulated impressions ({clicks} clicks) to {out}; evaluate with "
         f"--score pctr --label click --oracle oracle_ctr --field media --field regime")
    return out
