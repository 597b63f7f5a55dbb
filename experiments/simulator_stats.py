"""Statistics of the AdAuction-like simulator ("Calibration is Grouping" Table 7) and of its backbone.

For one simulator scale the script reports

* the Table-7 row: impressions, clicks, CTR, mean oracle CTR and mean production pCTR of
  the logged (auction-winner) impressions, next to the same requests under random
  exposure (same world, same pCTR, no auction) — the over-estimation of the production
  pCTR on the log is the auction's selection bias;
* the per-regime calibration deviation ``mean(pCTR) / mean(oracle) - 1`` (its sign
  differs across the latent regimes);
* the backbone's AUC, log loss, ECE, oracle Brier and mean pCTR vs CTR on D_val, D_ho and
  the test split (``calib_jax.data.backbone.load_or_train``, cached);
* a figure: production-pCTR reliability on the log vs random exposure, per-regime
  deviations, and the pacing multipliers over the request chunks.

Statistics are accumulated chunk by chunk, so the paper scale (15M impressions) streams
from disk (``simulate_to_disk``, resumable) in bounded memory.

    python -m experiments.simulator_stats [--smoke | --quick | --paper] [--seed 0]
        [--set backbone=False] [--out DIR]

Scales: ``--smoke`` the tiny world without backbone, ``--quick`` the default world with its
backbone, ``--paper`` the paper-scale world (about 15M impressions, streamed from disk;
no backbone unless ``--set backbone=True``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from calib_jax.data import backbone as bb
from calib_jax.data import simulator as sim
from calib_jax.plotting import plt
from experiments._study import Output, entry_point

PAPER_ROW = {"impressions": 15_000_000, "clicks": 451_000, "ctr": 0.0311, "mean_oracle": 0.0301,
             "mean_pctr": 0.0410, "auc": 0.8903}
LOGIT_EDGES = np.linspace(-8.0, 0.0, 33)  # reliability bins of the production logit


def sim_config(scale: str) -> sim.SimulatorConfig:
    if scale == "tiny":
        return sim.tiny_config()
    if scale == "paper":
        return sim.paper_config()
    if scale == "default":
        return sim.default_config()
    raise ValueError(f"`scale` must be tiny, default or paper, got {scale!r}")


#: ``world``: the simulator scale; ``backbone_config``: overrides of ``bb.BackboneConfig``
PRESETS: dict[str, dict[str, Any]] = {
    "smoke": {"world": "tiny", "backbone": False, "backbone_config": {}},
    "quick": {"world": "default", "backbone": True, "backbone_config": {}},
    "paper": {"world": "paper", "backbone": False, "backbone_config": {}},
}


class StreamStats:
    """Sums over impressions, mergeable chunk by chunk (overall, per regime, per logit bin)."""

    def __init__(self, n_regimes: int) -> None:
        self.tot = np.zeros(4)  # n, clicks, oracle, pctr
        self.reg = np.zeros((n_regimes, 4))
        self.bins = np.zeros((len(LOGIT_EDGES) + 1, 3))  # n, oracle, pctr
        self.pacing: list[np.ndarray] = []

    def add(self, imp: sim.Impressions, pacing: np.ndarray | None = None) -> None:
        cols = np.stack([np.ones(len(imp)), imp.click, imp.oracle, imp.pctr], axis=1)
        cols = cols.astype(np.float64)
        self.tot += cols.sum(axis=0)
        g = imp.field("regime")
        for j in range(4):
            self.reg[:, j] += np.bincount(g, weights=cols[:, j], minlength=self.reg.shape[0])
        b = np.digitize(imp.pctr_logit, LOGIT_EDGES)
        for j, c in enumerate((0, 2, 3)):
            self.bins[:, j] += np.bincount(b, weights=cols[:, c], minlength=self.bins.shape[0])
        if pacing is not None:
            self.pacing.append(np.asarray(pacing))

    def summary(self) -> dict[str, Any]:
        n, c, o, p = self.tot
        regimes = [{"regime": g, "share": r[0] / n, "ctr": r[1] / r[0], "mean_oracle": r[2] / r[0],
                    "mean_pctr": r[3] / r[0], "calibration_dev": r[3] / r[2] - 1.0}
                   for g, r in enumerate(self.reg) if r[0] > 0]
        return {"impressions": int(n), "clicks": int(c), "ctr": c / n, "mean_oracle": o / n,
                "mean_pctr": p / n, "ratio_pctr_oracle": p / o, "regimes": regimes}


def collect(cfg: sim.SimulatorConfig, seed: int, exposure: str, *, scale: str) -> StreamStats:
    """Stream the simulation (from disk at the paper scale) into :class:`StreamStats`."""
    key = jax.random.key(seed)
    st = StreamStats(cfg.n_regimes)
    if scale == "paper":
        d = bb.default_cache_dir() / f"simulator_{sim.config_hash(cfg, extra=[seed, exposure])}"
        sim.simulate_to_disk(cfg, key, d, exposure=exposure, progress=True)
        for c in range(cfg.n_chunks):
            st.add(sim.load_from_disk(d, chunks=slice(c, c + 1)))
        return st
    for _, imp, pacing in sim.iter_chunks(cfg, key, exposure=exposure):
        st.add(imp, pacing if exposure == "auction" else None)
    return st


def plot_stats(auction: StreamStats, random: StreamStats):
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.3))
    ax = axes[0]
    for st, name, mk in ((auction, "auction log", "o-"), (random, "random exposure", "s--")):
        keep = st.bins[:, 0] >= 50
        ax.plot(st.bins[keep, 2] / st.bins[keep, 0], st.bins[keep, 1] / st.bins[keep, 0], mk,
                ms=3, label=name)
    lim = [1e-4, 0.5]
    ax.plot(lim, lim, "k:", lw=1)
    ax.set(xscale="log", yscale="log", xlim=lim, ylim=lim, xlabel="mean production pCTR in bin",
           ylabel="mean oracle CTR in bin", title="Production pCTR reliability")
    ax.legend()
    ax = axes[1]
    sa, sr = auction.summary()["regimes"], random.summary()["regimes"]
    x = np.arange(len(sa))
    ax.bar(x - 0.2, [r["calibration_dev"] for r in sa], 0.4, label="auction log")
    ax.bar(x + 0.2, [r["calibration_dev"] for r in sr], 0.4, label="random exposure")
    ax.axhline(0, color="k", lw=0.8)
    ax.set(xticks=x, xticklabels=[f"regime {r['regime']}" for r in sa],
           ylabel="mean pCTR / mean oracle - 1", title="Per-regime miscalibration")
    ax.legend()
    ax = axes[2]
    if auction.pacing:
        pac = np.stack(auction.pacing)
        ax.plot(np.arange(1, len(pac) + 1), pac.mean(axis=1), "o-", label="mean")
        ax.fill_between(np.arange(1, len(pac) + 1), np.quantile(pac, 0.1, axis=1),
                        np.quantile(pac, 0.9, axis=1), alpha=0.3, label="10-90%")
        ax.legend()
    ax.set(xlabel="request chunk", ylabel="pacing multiplier", title="Budget pacing")
    fig.tight_layout()
    return fig


def report(summary: Mapping[str, Any]) -> str:
    sa = summary["auction"]
    return (f"{sa['impressions']} impressions, CTR {sa['ctr']:.4f}, mean oracle "
            f"{sa['mean_oracle']:.4f}, mean pCTR {sa['mean_pctr']:.4f}")


def run(config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    """Compute the statistics; write tables, the figure and ``results.json`` through ``out``."""
    world, seed = config["world"], int(config["seed"])
    cfg = sim_config(world)
    out.record["simulator"] = cfg.to_dict()
    t_sim = time.perf_counter()
    auction = collect(cfg, seed, "auction", scale=world)
    sim_seconds = time.perf_counter() - t_sim
    random = collect(cfg, seed, "random", scale=world)
    sa, sr = auction.summary(), random.summary()

    header = ["dataset", "impressions", "clicks", "CTR", "avg true CTR", "avg production pCTR",
              "pCTR / true CTR"]
    rows = [
        ["simulator, auction log", sa["impressions"], sa["clicks"], sa["ctr"], sa["mean_oracle"],
         sa["mean_pctr"], sa["ratio_pctr_oracle"]],
        ["simulator, random exposure", sr["impressions"], sr["clicks"], sr["ctr"],
         sr["mean_oracle"], sr["mean_pctr"], sr["ratio_pctr_oracle"]],
        ["AdAuction (Calibration is Grouping, Table 7)", PAPER_ROW["impressions"], PAPER_ROW["clicks"],
         PAPER_ROW["ctr"], PAPER_ROW["mean_oracle"], PAPER_ROW["mean_pctr"],
         PAPER_ROW["mean_pctr"] / PAPER_ROW["mean_oracle"]],
    ]
    out.table("table7_dataset", header, rows, latex=True)

    header_r = ["regime", "share (log)", "CTR (log)", "avg true CTR (log)", "avg pCTR (log)",
                "deviation (log)", "deviation (random exposure)"]
    rows_r = [[a["regime"], a["share"], a["ctr"], a["mean_oracle"], a["mean_pctr"],
               a["calibration_dev"], r["calibration_dev"]]
              for a, r in zip(sa["regimes"], sr["regimes"])]
    out.table("regime_calibration", header_r, rows_r)

    result: dict[str, Any] = {"auction": sa, "random": sr, "simulate_seconds": sim_seconds}
    if config["backbone"]:
        bcfg = bb.BackboneConfig(**{k: tuple(v) if isinstance(v, list) else v
                                    for k, v in config["backbone_config"].items()})
        out.record["backbone_config"] = bcfg.to_dict()
        res = bb.load_or_train(cfg, bcfg, seed=seed)
        header_b = ["split", "rows", "CTR", "avg true CTR", "avg backbone pCTR", "AUC",
                    "oracle AUC (ceiling)", "log loss", "ECE", "oracle Brier"]
        rows_b = []
        metrics = {}
        for name in ("val", "holdout", "test"):
            m = bb.backbone_metrics(getattr(res, name))
            metrics[name] = m
            rows_b.append([name, m["n"], m["ctr"], m["mean_oracle"], m["mean_pctr"], m["auc"],
                           m["auc_oracle_model"], m["logloss"], m["ece"], m["oracle_brier"]])
        out.table("backbone", header_b, rows_b)
        result["backbone"] = {"metrics": metrics, "from_cache": res.info["from_cache"],
                              "train_seconds": res.info.get("train_seconds"),
                              "rows_per_second": res.info.get("rows_per_second")}
    out.figure(plot_stats(auction, random), "simulator_stats")
    out.json("results.json", result)
    return result



main = entry_point(__name__)

if __name__ == "__main__":
    main()
