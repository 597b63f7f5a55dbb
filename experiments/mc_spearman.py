"""Fig 3 (and Fig 1) of seeds/000: Spearman rank consistency of every metric with the oracle Brier.

Each Monte Carlo trial draws a population with oracle CTRs, a model variant (global
temperature/bias, field-wise opposite biases, a latent-regime bias, logit noise, a monotone
non-linear distortion, selection-bias over-estimation; see ``calib_jax.montecarlo``) and
labels, then evaluates the whole metric panel of SPEC §4.  Across trials we rank every
metric and report its Spearman correlation with the oracle Brier score (and the full
metric x metric matrix as an annotated heatmap).

Sign convention: every column is a loss; AUC, Pearson and Spearman with the oracle enter
as ``1 - value`` (see ``calib_jax.montecarlo.panel``).

Run: ``python -m experiments.mc_spearman [--quick | --paper] [--seed S] [--out DIR]``
(quick: 192 trials x n = 10^4; paper: 5000 trials x n = 10^5, checkpointed and resumable).
``--source simulator`` draws the trials from resampled logs of the ad-auction simulator
(``calib_jax.data.simulator``) instead of the synthetic scenario family.

This module also holds the small helpers the other ``mc_*`` studies share.
"""

from __future__ import annotations

import argparse
import io
import os
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
from calib_jax.plotting.heatmap import SIGN_NOTE, annotated_heatmap, correlation_bars  # noqa: E402

STUDY = "mc_spearman"

QUICK: dict[str, Any] = {"n": 10_000, "n_trials": 192, "chunk_size": 32, "checkpoint": False}
PAPER: dict[str, Any] = {"n": 100_000, "n_trials": 5000, "chunk_size": 50, "checkpoint": True}


# ------------------------------------------------------------------ shared helpers
def build_parser(study: str, description: str) -> argparse.ArgumentParser:
    """Common flags of the ``mc_*`` studies."""
    p = argparse.ArgumentParser(prog=f"experiments.{study}", description=description)
    scale = p.add_mutually_exclusive_group()
    scale.add_argument("--quick", dest="scale", action="store_const", const="quick",
                       help="small default run")
    scale.add_argument("--paper", dest="scale", action="store_const", const="paper",
                       help="the paper's scale (long; checkpointed and resumable)")
    p.set_defaults(scale="quick")
    p.add_argument("--seed", type=int, default=0, help="master seed (deterministic per seed)")
    p.add_argument("--out", type=Path, default=Path("figures") / study, help="output directory")
    p.add_argument("--trials", type=int, default=None, help="override the number of trials")
    p.add_argument("--n", type=int, default=None, help="override rows per trial")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return p


def config_from_args(args: argparse.Namespace, quick: Mapping[str, Any],
                     paper: Mapping[str, Any]) -> dict[str, Any]:
    cfg = dict(paper if args.scale == "paper" else quick)
    cfg["scale"] = args.scale
    cfg["seed"] = int(args.seed)
    cfg["progress"] = not args.no_progress
    if args.trials is not None:
        cfg["n_trials"] = int(args.trials)
    if args.n is not None:
        cfg["n"] = int(args.n)
    return cfg


def enable_compile_cache() -> None:
    """Persist XLA compilations across runs (``$CALIB_JAX_XLA_CACHE``, default
    ``~/.cache/calib_jax/xla``; set it to an empty string to disable)."""
    d = os.environ.get("CALIB_JAX_XLA_CACHE", str(Path.home() / ".cache" / "calib_jax" / "xla"))
    if d:
        jax.config.update("jax_compilation_cache_dir", d)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


def checkpoint_dir(study: str, config: Mapping[str, Any]) -> Path | None:
    """Where long runs keep their chunk checkpoints (outside the committed figures/)."""
    if not config.get("checkpoint"):
        return None
    base = os.environ.get("CALIB_JAX_CHECKPOINTS", str(Path.home() / ".cache" / "calib_jax" / "mc"))
    return Path(base) / study


def labels(names: Sequence[str]) -> list[str]:
    return [mc.DISPLAY.get(n, n) for n in names]


def jsonable_config(config: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k != "progress"}


def write_provenance(out_dir: Path, config: Mapping[str, Any], t0: float,
                     extra: Mapping[str, Any] | None = None) -> None:
    cio.write_json(Path(out_dir) / "provenance.json",
                   cio.provenance(jsonable_config(config), seed=config.get("seed"),
                                  wall_time_s=time.perf_counter() - t0, extra=extra))


def full_panel_config() -> dict[str, Any]:
    return {
        "scenario": mc.ScenarioConfig().to_dict(),
        "variant": mc.VariantConfig().to_dict(),
        "panel": mc.PanelConfig().to_dict(),
    }


def simulator_trial(config: Mapping[str, Any]):
    """Trials resampled from the logs of ``calib_jax.data.simulator`` (tiny world for
    ``--quick``, default world for ``--paper``), variants applied to the production logit."""
    from calib_jax.data import simulator as sim

    scfg = sim.tiny_config() if config["scale"] == "quick" else sim.default_config()
    imp = sim.simulate(scfg, jax.random.key(int(config["seed"]) + 10_000))
    pool = mc.pool_from_impressions(imp)
    n_media = int(sim.field_cardinalities(scfg)["media"])
    panel_cfg = mc.PanelConfig(n_levels=n_media)
    trial = mc.make_logged_trial(pool, int(config["n"]), n_media=n_media,
                                 metrics=mc.metric_panel(panel_cfg))
    info = {"config": "tiny" if config["scale"] == "quick" else "default",
            "logged_rows": len(imp), "mean_oracle": float(np.mean(imp.oracle)),
            "mean_pctr": float(np.mean(imp.pctr))}
    return trial, panel_cfg, info


# ----------------------------------------------------------------------- the study
def run(config: Mapping[str, Any], out_dir: str | Path) -> dict[str, Any]:
    """Run the Fig 3 study and write figures, tables and provenance into ``out_dir``."""
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = {**config, **full_panel_config()}
    source = config.get("source", "synthetic")
    if source == "simulator":
        trial, panel_cfg, sim_info = simulator_trial(config)
        config = {**config, "panel": panel_cfg.to_dict(), "simulator": sim_info}
    else:
        panel_cfg = mc.PanelConfig()
        trial = mc.make_trial(int(config["n"]), metrics=mc.metric_panel(panel_cfg))
    names = list(panel_cfg.metrics)
    values, ref = mc.run_trials(
        trial, jax.random.key(int(config["seed"])), int(config["n_trials"]),
        chunk_size=int(config["chunk_size"]), progress=bool(config.get("progress", True)),
        checkpoint_dir=checkpoint_dir(STUDY, config), config=jsonable_config(config))
    values = np.asarray(values, dtype=np.float64)
    T = values.shape[0]
    if not np.all(np.isfinite(values)):
        bad = [names[j] for j in np.where(~np.isfinite(values).all(axis=0))[0]]
        raise FloatingPointError(f"non-finite metric values in columns {bad}")
    R = np.asarray(mc.spearman_matrix(values))
    j_ref = names.index(mc.REFERENCE)
    rho = R[j_ref]
    se = mc.fisher_se(rho, T)

    # tables
    group = {m: "label" for m in mc.LABEL_METRICS} | {m: "oracle" for m in mc.ORACLE_METRICS}
    order = [j for j in np.argsort(-rho) if j != j_ref]
    rows = [[names[j], mc.DISPLAY[names[j]], group[names[j]], float(rho[j]), float(se[j]),
             float(values[:, j].mean()), float(values[:, j].std(ddof=1))] for j in order]
    cio.write_table(out_dir / "spearman_with_oracle_brier",
                    ["metric", "label", "needs", "spearman_rho", "se", "mean", "std"], rows)
    cio.write_table(out_dir / "spearman_matrix", ["metric", *names],
                    [[names[i], *map(float, R[i])] for i in range(len(names))])
    buf = io.BytesIO()
    np.savez_compressed(buf, values=values, names=np.array(names), oracle_brier=np.asarray(ref))
    cio.atomic_write_bytes(out_dir / "trials.npz", buf.getvalue())

    # figures
    title = (f"Spearman rank correlation across {T} trials (n = {config['n']:,} rows, "
             f"{source} populations)")
    fig = annotated_heatmap(R, labels(names), title=title,
                            caption=SIGN_NOTE + "; * = needs the oracle CTR")
    save_figure(fig, out_dir / "fig3_spearman_matrix")
    lab = [mc.DISPLAY[n] for i, n in enumerate(names) if i != j_ref]
    keep = [i for i in range(len(names)) if i != j_ref]
    fig = correlation_bars(rho[keep], lab, err=se[keep], highlight=("LCCE", "LCCE-q", "LCCE-opt"),
                           title=f"Spearman with the oracle Brier ({T} trials)")
    save_figure(fig, out_dir / "fig1_spearman_with_oracle_brier")

    label_only = [j for j in range(len(names)) if group[names[j]] == "label"]
    best_label = max(label_only, key=lambda j: rho[j])
    summary = {
        "n_trials": T,
        "rho": {names[j]: float(rho[j]) for j in range(len(names))},
        "best_label_metric": names[best_label],
        "best_label_rho": float(rho[best_label]),
        "lcce_rho": float(rho[names.index("lcce")]),
        "lcce_is_best_label_metric": names[best_label] == "lcce",
    }
    write_provenance(out_dir, config, t0, extra={"summary": summary})
    return summary


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = build_parser(STUDY, __doc__.splitlines()[0])
    p.add_argument("--source", choices=("synthetic", "simulator"), default="synthetic",
                   help="trial populations: the synthetic scenario family (default) or "
                        "resampled logs of calib_jax.data.simulator")
    args = p.parse_args(argv)
    enable_compile_cache()
    config = config_from_args(args, QUICK, PAPER)
    config["source"] = args.source
    summary = run(config, args.out)
    print(f"[{STUDY}] best label-based metric: {summary['best_label_metric']} "
          f"(rho = {summary['best_label_rho']:.3f}); LCCE rho = {summary['lcce_rho']:.3f}")
    return summary


if __name__ == "__main__":
    main()
