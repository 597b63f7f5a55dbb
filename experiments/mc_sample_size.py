"""Fig 6a of seeds/000: Spearman of ECE and LCCE with the oracle Brier against sample size.

The same trial keys (so the same populations and model variants) are evaluated at every
sample size n; for each n we report the Spearman coefficient of ECE, ECE+, LCCE (restart
averaged) and the seed-free LCCE-q with the oracle Brier, with Fisher-z standard errors.

Run: ``python -m experiments.mc_sample_size [--quick | --paper] [--seed S] [--out DIR]``.
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
from calib_jax.plotting import plt, save_figure  # noqa: E402
from calib_jax.plotting.heatmap import SIGN_NOTE  # noqa: E402
from experiments.mc_spearman import (  # noqa: E402
    build_parser,
    checkpoint_dir,
    config_from_args,
    enable_compile_cache,
    jsonable_config,
    write_provenance,
)

STUDY = "mc_sample_size"
METRICS = ("ece", "ece_plus", "lcce", "lcce_quantile", "oracle_brier")
QUICK: dict[str, Any] = {"sizes": [1000, 3000, 10_000, 30_000], "n_trials": 128,
                         "chunk_size": 32, "checkpoint": False}
PAPER: dict[str, Any] = {"sizes": [1000, 3000, 10_000, 30_000, 100_000, 300_000],
                         "n_trials": 2000, "chunk_size": 50, "checkpoint": True}


def run(config: Mapping[str, Any], out_dir: str | Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    panel = mc.PanelConfig(metrics=METRICS)
    config = {**config, "panel": panel.to_dict(), "scenario": mc.ScenarioConfig().to_dict(),
              "variant": mc.VariantConfig().to_dict()}
    key = jax.random.key(int(config["seed"]))
    j = METRICS.index(mc.REFERENCE)
    rows, curves = [], {m: [] for m in METRICS if m != mc.REFERENCE}
    for n in config["sizes"]:
        trial = mc.make_trial(int(n), metrics=mc.metric_panel(panel))
        ck = checkpoint_dir(STUDY, config)
        values, _ = mc.run_trials(trial, key, int(config["n_trials"]),
                                  chunk_size=int(config["chunk_size"]),
                                  progress=bool(config.get("progress", True)),
                                  checkpoint_dir=None if ck is None else ck / f"n{n}",
                                  config={**jsonable_config(config), "n": int(n)})
        rho = np.asarray(mc.spearman_matrix(np.asarray(values, np.float64)))[j]
        se = mc.fisher_se(rho, int(config["n_trials"]))
        for i, m in enumerate(METRICS):
            if m == mc.REFERENCE:
                continue
            curves[m].append((rho[i], se[i]))
            rows.append([int(n), m, mc.DISPLAY[m], float(rho[i]), float(se[i])])
    cio.write_table(out_dir / "spearman_vs_sample_size",
                    ["n", "metric", "label", "spearman_rho", "se"], rows)
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for m, c in curves.items():
        r, s = np.array(c).T
        ax.errorbar(config["sizes"], r, yerr=s, marker="o", capsize=2, label=mc.DISPLAY[m])
    ax.set_xscale("log")
    ax.set_xlabel("rows per trial n")
    ax.set_ylabel("Spearman rho with oracle Brier")
    ax.set_title(f"Rank consistency vs sample size ({config['n_trials']} trials per n)",
                 fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.text(0.01, -0.02, SIGN_NOTE, fontsize=7, style="italic", va="top")
    save_figure(fig, out_dir / "fig6a_spearman_vs_sample_size")
    summary = {m: [float(r) for r, _ in c] for m, c in curves.items()}
    write_provenance(out_dir, config, t0, extra={"summary": summary})
    return summary


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = build_parser(STUDY, __doc__.splitlines()[0]).parse_args(argv)
    enable_compile_cache()
    cfg = config_from_args(args, QUICK, PAPER)
    if args.n is not None:
        cfg["sizes"] = [int(args.n)]
    summary = run(cfg, args.out)
    print(f"[{STUDY}] " + "; ".join(f"{m}: {np.round(v, 3).tolist()}" for m, v in summary.items()))
    return summary


if __name__ == "__main__":
    main()
