"""Fig 5 of seeds/000: Spearman of metric *improvements* after recalibration inside each trial.

Each trial draws a population, a model variant and ``n_cal + n`` labelled rows; temperature
scaling and Platt scaling (``calib_jax.calibrators.temperature`` / ``platt``: fixed-iteration
Newton fits, vmap-able) are fitted on the first ``n_cal`` rows and every metric of the panel
is evaluated on the remaining ``n`` rows before and after recalibration.  The improvement
of a metric is ``calibrated - uncalibrated`` (negative = better, since every column is a
loss).  Rows of the Spearman matrix pool both calibrators (2 x trials observations).

Run: ``python -m experiments.mc_improvement [--quick | --paper] [--seed S] [--out DIR]``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from calib_jax import io as cio  # noqa: E402
from calib_jax import montecarlo as mc  # noqa: E402
from calib_jax.calibrators import platt, temperature  # noqa: E402
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

STUDY = "mc_improvement"
QUICK: dict[str, Any] = {"n": 8000, "n_cal": 4000, "n_trials": 128, "chunk_size": 32,
                         "checkpoint": False}
PAPER: dict[str, Any] = {"n": 100_000, "n_cal": 20_000, "n_trials": 5000, "chunk_size": 50,
                         "checkpoint": True}


def _slice(d: mc.TrialData, lo: int, hi: int) -> mc.TrialData:
    return d._replace(**{f: getattr(d, f)[lo:hi] for f in
                         ("logits", "probs", "labels", "oracle", "fields", "regime")})


def make_improvement_trial(n: int, n_cal: int, metrics):
    """``key -> (improvements (2, M), uncalibrated values (M,))``; rows: temperature, Platt."""

    def trial(key):
        k_data, k_metric = jax.random.split(key)
        d = mc.sample_trial_data(k_data, n_cal + n)
        cal, test = _slice(d, 0, n_cal), _slice(d, n_cal, n_cal + n)
        tp = temperature.fit(cal.logits, cal.labels)
        pp = platt.fit(cal.logits, cal.labels)
        z = test.logits
        zs = jnp.stack([z, tp.beta * z, pp.a * z + pp.b])

        def ev(zc):  # one copy of the panel in the compiled graph, mapped over 3 inputs
            return mc.evaluate(test._replace(logits=zc, probs=jax.nn.sigmoid(zc)), k_metric,
                               metrics)

        vals = jax.lax.map(ev, zs)
        return vals[1:] - vals[0][None, :], vals[0]

    return trial


def run(config: Mapping[str, Any], out_dir: str | Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = {**config, **full_panel_config(), "calibrators": ["temperature", "platt"]}
    names = list(mc.PanelConfig().metrics)
    trial = make_improvement_trial(int(config["n"]), int(config["n_cal"]),
                                   mc.metric_panel(mc.PanelConfig()))
    imp, base = mc.run_trials(trial, jax.random.key(int(config["seed"])),
                              int(config["n_trials"]), chunk_size=int(config["chunk_size"]),
                              progress=bool(config.get("progress", True)),
                              checkpoint_dir=checkpoint_dir(STUDY, config),
                              config=jsonable_config(config))
    imp = np.asarray(imp, np.float64)  # (T, 2, M)
    T = imp.shape[0]
    pooled = imp.reshape(-1, imp.shape[-1])
    R = np.asarray(mc.spearman_matrix(pooled))
    j = names.index(mc.REFERENCE)
    per = [np.asarray(mc.spearman_matrix(imp[:, c]))[j] for c in range(2)]
    rows = [[names[i], mc.DISPLAY[names[i]], float(R[j, i]), float(per[0][i]), float(per[1][i]),
             float(np.mean(imp[:, 0, i])), float(np.mean(imp[:, 1, i]))]
            for i in np.argsort(-R[j]) if i != j]
    cio.write_table(out_dir / "spearman_improvement_with_oracle_brier",
                    ["metric", "label", "rho_pooled", "rho_temperature", "rho_platt",
                     "mean_delta_temperature", "mean_delta_platt"], rows)
    cio.write_table(out_dir / "spearman_matrix_improvement", ["metric", *names],
                    [[names[i], *map(float, R[i])] for i in range(len(names))])
    fig = annotated_heatmap(
        R, labels(names),
        title=(f"Spearman of improvements (calibrated - uncalibrated), temperature + Platt, "
               f"{T} trials, n = {config['n']:,}"),
        caption=SIGN_NOTE)
    save_figure(fig, out_dir / "fig5_spearman_improvement")
    summary = {"rho_pooled": {names[i]: float(R[j, i]) for i in range(len(names))}}
    write_provenance(out_dir, config, t0, extra={"summary": summary})
    return summary


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = build_parser(STUDY, __doc__.splitlines()[0])
    p.add_argument("--n-cal", type=int, default=None, help="override calibration rows")
    args = p.parse_args(argv)
    enable_compile_cache()
    cfg = config_from_args(args, QUICK, PAPER)
    if args.n_cal is not None:
        cfg["n_cal"] = int(args.n_cal)
    summary = run(cfg, args.out)
    r = summary["rho_pooled"]
    print(f"[{STUDY}] rho(delta, delta Brier*): LCCE {r['lcce']:.3f}, ECE {r['ece']:.3f}, "
          f"ECE+ {r['ece_plus']:.3f}")
    return summary


if __name__ == "__main__":
    main()
