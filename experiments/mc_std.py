"""Fig 4 of seeds/000: Spearman, across configurations, of the metrics' standard deviations.

A *configuration* fixes the population law (coefficients) and the model variant; each is
repeated ``n_repeats`` times on fresh rows and labels.  For every configuration we take
each metric's standard deviation over the repeats; across configurations we then rank
these standard deviations and report their Spearman matrix (and, for reference, that of
the per-configuration means).  A metric that tracks the oracle Brier should also share
its second-order behaviour.

Run: ``python -m experiments.mc_std [--quick | --paper] [--seed S] [--out DIR]``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from calib_jax import io as cio  # noqa: E402
from calib_jax import montecarlo as mc  # noqa: E402
from calib_jax.plotting import save_figure  # noqa: E402
from calib_jax.plotting.heatmap import SIGN_NOTE, annotated_heatmap  # noqa: E402
from experiments.mc_spearman import (  # noqa: E402
    build_parser,
    checkpoint_dir,
    config_from_args,
    enable_compile_cache,
    full_panel_config,
    jsonable_config,
    labels,
    write_provenance,
)

STUDY = "mc_std"
QUICK: dict[str, Any] = {"n": 4000, "n_trials": 64, "n_repeats": 8, "chunk_size": 16,
                         "checkpoint": False}
PAPER: dict[str, Any] = {"n": 100_000, "n_trials": 500, "n_repeats": 20, "chunk_size": 10,
                         "checkpoint": True}


def run(config: Mapping[str, Any], out_dir: str | Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = {**config, **full_panel_config()}
    names = list(mc.PanelConfig().metrics)
    trial = mc.make_repeated_trial(int(config["n"]), int(config["n_repeats"]),
                                   metrics=mc.metric_panel(mc.PanelConfig()))
    out = mc.run_trials(trial, jax.random.key(int(config["seed"])), int(config["n_trials"]),
                        chunk_size=int(config["chunk_size"]),
                        progress=bool(config.get("progress", True)),
                        checkpoint_dir=checkpoint_dir(STUDY, config),
                        config=jsonable_config(config))
    std = np.asarray(out["std"], np.float64)
    mean = np.asarray(out["mean"], np.float64)
    R_std = np.asarray(mc.spearman_matrix(std))
    R_mean = np.asarray(mc.spearman_matrix(mean))
    j = names.index(mc.REFERENCE)
    T = std.shape[0]
    rows = [[names[i], mc.DISPLAY[names[i]], float(R_std[j, i]), float(R_mean[j, i]),
             float(np.median(std[:, i] / np.maximum(np.abs(mean[:, i]), 1e-12)))]
            for i in np.argsort(-R_std[j]) if i != j]
    cio.write_table(out_dir / "spearman_std_with_oracle_brier",
                    ["metric", "label", "rho_std", "rho_mean", "median_cv"], rows)
    cio.write_table(out_dir / "spearman_matrix_std", ["metric", *names],
                    [[names[i], *map(float, R_std[i])] for i in range(len(names))])
    fig = annotated_heatmap(
        R_std, labels(names),
        title=(f"Spearman of per-configuration std ({T} configurations x "
               f"{config['n_repeats']} repeats, n = {config['n']:,})"),
        caption=SIGN_NOTE)
    save_figure(fig, out_dir / "fig4_spearman_std")
    summary = {"rho_std": {names[i]: float(R_std[j, i]) for i in range(len(names))},
               "rho_mean": {names[i]: float(R_mean[j, i]) for i in range(len(names))}}
    write_provenance(out_dir, config, t0, extra={"summary": summary})
    return summary


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = build_parser(STUDY, __doc__.splitlines()[0]).parse_args(argv)
    enable_compile_cache()
    summary = run(config_from_args(args, QUICK, PAPER), args.out)
    rs = summary["rho_std"]
    print(f"[{STUDY}] rho(std, Brier* std): LCCE {rs['lcce']:.3f}, ECE {rs['ece']:.3f}, "
          f"ECE+ {rs['ece_plus']:.3f}")
    return summary


if __name__ == "__main__":
    main()
