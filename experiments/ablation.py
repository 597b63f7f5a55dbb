"""Fig. 2 of seeds/000: VR-SAG ablations on the simulator (partitions, groups, lambda_v).

VR-SAG+TS is fitted on D_val and scored on the test split (ECE, LCCE, oracle Brier), means
over ``n_seeds`` seeds ``seed, seed + 1, ...`` (they set the fit key and the D_val
subsample; the backbone is always the one of ``data_seed``).  The partition ablation needs
a single fit per seed: partition ``p`` is initialised from ``fold_in(key, p)`` and fitted
independently of the others (one vmap), so the prediction with P partitions is exactly the
average of the first P partitions of a P_max fit.  The lambda_v ablation reuses the
compiled fit (lambda_v is a dynamic argument).

Outputs in ``figures/ablation/``: ``fig2.png/.pdf`` (three panels), ``ablation.csv/.md``
(one row per setting and seed) and ``provenance.json``.

Usage::

    python -m experiments.ablation            # quick
    python -m experiments.ablation --paper    # 5 seeds, full D_val, more settings
    python -m experiments.ablation --set n_seeds=3
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax import metrics as M
from calib_jax.calibrators import sag
from calib_jax.plotting import plt
from calib_jax.plotting.grouping import plot_ablation
from experiments._study import Output, entry_point

STUDY = "ablation"

PRESETS: dict[str, dict[str, Any]] = {
    "smoke": dict(sim="tiny", n_seeds=1, data_seed=0, max_val=1_000, n_steps=3, base_groups=2,
                  base_lam_v=0.5, partitions=(1, 2), groups=(1, 2), lam_vs=(0.0, 0.5), lam=0.1),
    "quick": dict(sim="default", n_seeds=1, data_seed=0, max_val=20_000, n_steps=30,
                  base_groups=3, base_lam_v=0.5, partitions=(1, 2, 3, 5, 10), groups=(1, 2, 3, 5),
                  lam_vs=(0.0, 0.5, 2.0, 10.0), lam=0.1),
    "paper": dict(sim="default", n_seeds=5, data_seed=0, max_val=None, n_steps=100,
                  base_groups=3, base_lam_v=0.5, partitions=(1, 2, 3, 5, 10, 15, 20),
                  groups=(1, 2, 3, 5, 8, 12), lam_vs=(0.0, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0),
                  lam=0.1),
}
METRICS = ("ECE", "LCCE", "Brier")
HEADER = ("ablation", "value", "seed", *METRICS)


def _load(sim: str, seed: int):
    from experiments._datasets import load_dataset

    return load_dataset("simulator", seed=seed, sim=sim)["out"]


def _evaluate(p: jax.Array, test) -> dict[str, float]:
    return {
        "ECE": float(M.ece(p, test.labels)),
        "LCCE": float(M.lcce(test.logits, test.labels, probs=p, key=jax.random.key(0))),
        "Brier": float(M.oracle_brier(p, test.oracle)),
    }


def _partition_probs(params: sag.SAGParams, logits: np.ndarray, embedding: np.ndarray):
    """(P, n) per-partition predictions (eq. 8) of a fitted SAG."""
    q = sag.memberships(params, embedding)
    o = jnp.asarray(logits)
    s = o[None, :, None] * jnp.exp(-params.log_tau)[:, None, :] + params.beta[:, None, :]
    return jnp.sum(q * jax.nn.sigmoid(s), axis=2)


def run(config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    """Run the three ablations for every seed; write ``ablation`` and ``fig2`` through ``out``."""
    t0 = time.perf_counter()
    rows: list[list[Any]] = []
    seeds = [int(config["seed"]) + i for i in range(int(config["n_seeds"]))]
    backbone = _load(config["sim"], int(config["data_seed"]))
    val, test = backbone.val, backbone.test
    for seed in seeds:
        idx = np.arange(len(val))
        if config["max_val"] is not None and len(val) > config["max_val"]:
            idx = np.sort(np.random.default_rng(seed).choice(len(val), config["max_val"],
                                                             replace=False))
        fit_kw = dict(context={"embedding": val.embedding[idx]}, variant="ts",
                      n_steps=config["n_steps"], lam=config["lam"], key=jax.random.key(seed))
        o_val, y_val = val.logits[idx], val.labels[idx]

        def fit(n_groups, n_partitions, lam_v, o_val=o_val, y_val=y_val, fit_kw=fit_kw):
            return sag.fit(o_val, y_val, n_groups=n_groups, n_partitions=n_partitions,
                           lam_v=lam_v, **fit_kw)

        # (a) partitions: one fit with the largest P, prefix averages
        p_max = max(config["partitions"])
        base = fit(config["base_groups"], p_max, config["base_lam_v"])
        per = _partition_probs(base, test.logits, test.embedding)
        for P in config["partitions"]:
            rows.append(["partitions", P, seed, *_evaluate(jnp.mean(per[:P], axis=0), test).values()])
        # (b) groups per partition
        for K in config["groups"]:
            prm = fit(K, p_max, config["base_lam_v"]) if K != config["base_groups"] else base
            p = sag.predict(prm, test.logits, context={"embedding": test.embedding})
            rows.append(["groups", K, seed, *_evaluate(p, test).values()])
        # (c) variance-penalty weight
        for lv in config["lam_vs"]:
            prm = fit(config["base_groups"], p_max, lv) if lv != config["base_lam_v"] else base
            p = sag.predict(prm, test.logits, context={"embedding": test.embedding})
            rows.append(["lam_v", lv, seed, *_evaluate(p, test).values()])
        if out.progress:
            print(f"[{STUDY}] seed {seed} done ({time.perf_counter() - t0:.0f}s)", flush=True)
    out.table("ablation", HEADER, rows, digits=6)
    out.figure(_figure(rows), "fig2")
    return {"seeds": seeds, "header": list(HEADER), "rows": rows}


def report(summary: Mapping[str, Any]) -> str:
    j = 3 + METRICS.index("LCCE")
    best = {}
    for abl in ("partitions", "groups", "lam_v"):
        sub = [r for r in summary["rows"] if r[0] == abl]
        xs = sorted({r[1] for r in sub})
        best[abl] = min(xs, key=lambda x: np.mean([r[j] for r in sub if r[1] == x]))
    return "lowest mean LCCE at " + ", ".join(f"{k} = {v}" for k, v in best.items())


def _figure(rows: list[list[Any]]):
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
    labels = {"partitions": "number of partitions P", "groups": "groups per partition K",
              "lam_v": r"variance weight $\lambda_v$"}
    for ax, (abl, xlabel) in zip(axes, labels.items()):
        sub = [r for r in rows if r[0] == abl]
        xs = sorted({r[1] for r in sub})
        series = {}
        for j, met in enumerate(METRICS):
            vals = [np.mean([r[3 + j] for r in sub if r[1] == x]) for x in xs]
            ref = vals[0] if vals[0] != 0 else 1.0
            series[met + " (rel. to first)"] = [v / ref for v in vals]
        plot_ablation(xs, series, xlabel=xlabel, ylabel="metric / metric at first value",
                      ax=ax, logx=(abl == "lam_v"))
    fig.suptitle("VR-SAG+TS ablations (simulator; means over seeds)")
    fig.tight_layout()
    return fig


main = entry_point(__name__)

if __name__ == "__main__":
    main()
