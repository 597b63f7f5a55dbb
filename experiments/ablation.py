"""Fig. 2 of "Calibration is Grouping": VR-SAG ablations on the simulator (partitions, groups, lambda_v).

VR-SAG+TS is fitted on D_val and scored on the test split (ECE, LCCE, oracle Brier) in each
simulator world of ``worlds`` (``experiments/_datasets.py``: the default world, where the
residual miscalibration is by a regime the embedding does not encode, and the grouping
world, where it does, so more partitions and groups have something to find), means
over ``n_seeds`` seeds ``seed, seed + 1, ...`` (they set the fit key and the D_val
subsample; the backbone is always the one of ``data_seed``).  The partition ablation needs
a single fit per seed: partition ``p`` is initialised from ``fold_in(key, p)`` and fitted
independently of the others (one vmap), so the prediction with P partitions is exactly the
average of the first P partitions of a P_max fit.  The lambda_v ablation reuses the
compiled fit (lambda_v is a dynamic argument).

Intervals: for the first seed every setting's test predictions are bootstrapped over test rows
with shared resamples (``n_boot``, ``calib_jax.bootstrap``), and each setting is paired with
the first value of its ablation (P = 1, K = 1, lambda_v = 0): ``paired`` holds
``setting - reference`` with its 95% interval (test-row noise; fit noise shows across seeds).

Outputs in ``figures/ablation/``: ``fig2.png/.pdf`` (three panels per world),
``ablation.csv/.md`` (one row per world, setting and seed), ``paired.csv/.md`` and
``provenance.json``.

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

from calib_jax import bootstrap as boot
from calib_jax import metrics as M
from calib_jax.calibrators import sag
from calib_jax.plotting import plt
from calib_jax.plotting.grouping import plot_ablation
from experiments._study import Output, entry_point

STUDY = "ablation"

PRESETS: dict[str, dict[str, Any]] = {
    "smoke": dict(worlds=("simulator",), n_boot=20,
                  sim="tiny", n_seeds=1, data_seed=0, max_val=1_000, n_steps=3, base_groups=2,
                  base_lam_v=0.5, partitions=(1, 2), groups=(1, 2), lam_vs=(0.0, 0.5), lam=0.1),
    "quick": dict(worlds=("simulator", "simulator_grouping"), n_boot=200,
                  sim="default", n_seeds=1, data_seed=0, max_val=20_000, n_steps=30,
                  base_groups=3, base_lam_v=0.5, partitions=(1, 2, 3, 5, 10), groups=(1, 2, 3, 5),
                  lam_vs=(0.0, 0.5, 2.0, 10.0), lam=0.1),
    "paper": dict(worlds=("simulator", "simulator_grouping"), n_boot=1000,
                  sim="default", n_seeds=5, data_seed=0, max_val=None, n_steps=100,
                  base_groups=3, base_lam_v=0.5, partitions=(1, 2, 3, 5, 10, 15, 20),
                  groups=(1, 2, 3, 5, 8, 12), lam_vs=(0.0, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0),
                  lam=0.1),
}
METRICS = ("ECE", "LCCE", "Brier")
HEADER = ("world", "ablation", "value", "seed", *METRICS)
_LCCE_KEY = 0


def _load(world: str, sim: str, seed: int):
    from experiments._datasets import load_dataset

    return load_dataset(world, seed=seed, sim=sim)["out"]


def _stat(p, logits, labels, oracle, *, weights):
    """The three metrics as one weighted statistic (the bootstrap's and the table's)."""
    return {"ECE": M.ece(p, labels, weights=weights),
            "LCCE": M.lcce(logits, labels, probs=p, key=jax.random.key(_LCCE_KEY), weights=weights),
            "Brier": M.oracle_brier(p, oracle, weights=weights)}


def _evaluate(p: jax.Array, test) -> dict[str, float]:
    w = jnp.ones(test.labels.shape, jnp.float32)
    return {k: float(v) for k, v in _stat(p, test.logits, test.labels, test.oracle, weights=w).items()}


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
    paired: list[list[Any]] = []
    seeds = [int(config["seed"]) + i for i in range(int(config["n_seeds"]))]
    for world in config["worlds"]:
        backbone = _load(world, config["sim"], int(config["data_seed"]))
        preds = _run_world(backbone, seeds, config, rows, world, t0 if out.progress else None)
        paired += _paired(world, preds, backbone.test, config, jax.random.key(seeds[0]))
    out.table("ablation", HEADER, rows, digits=6)
    out.table("paired", ["world", "ablation", "value", "reference", "metric", "minus_reference", "ci_low",
                         "ci_high", "share_lower"], paired, digits=6)
    out.figure(_figure(rows, config["worlds"]), "fig2")
    return {"seeds": seeds, "header": list(HEADER), "rows": rows,
            "paired": {f"{w}/{a}/{v}/{m}": {"diff": d, "lo": lo, "hi": hi, "reference": ref}
                       for w, a, v, ref, m, d, lo, hi, _ in paired}}


def _paired(world: str, preds: Mapping[tuple[str, Any], jax.Array], test, config: Mapping[str, Any],
            key: jax.Array) -> list[list[Any]]:
    """Each setting minus the first value of its ablation, paired over shared row resamples."""
    boots = {k: boot.bootstrap(_stat, p, test.logits, test.labels, test.oracle, key=key,
                               n_boot=int(config["n_boot"])) for k, p in preds.items()}
    rows = []
    for abl in ("partitions", "groups", "lam_v"):
        keys = [k for k in preds if k[0] == abl]
        ref = min(keys, key=lambda k: k[1])
        for k in keys:
            if k == ref:
                continue
            for metric in METRICS:
                d = boot.difference(boots[k], boots[ref], metric)
                rows.append([world, abl, k[1], ref[1], metric, d.diff, d.lo, d.hi, d.share_a_lower])
    return rows


def _run_world(backbone, seeds, config, rows, world, t0) -> dict[tuple[str, Any], jax.Array]:
    """The three ablations for every seed of one world; returns the first seed's predictions.
    Prints progress per seed unless ``t0`` (the start time) is None."""
    val, test = backbone.val, backbone.test
    first: dict[tuple[str, Any], jax.Array] = {}
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
        keep = first if seed == seeds[0] else {}
        for P in config["partitions"]:
            keep["partitions", P] = p = jnp.mean(per[:P], axis=0)
            rows.append([world, "partitions", P, seed, *_evaluate(p, test).values()])
        # (b) groups per partition
        for K in config["groups"]:
            prm = fit(K, p_max, config["base_lam_v"]) if K != config["base_groups"] else base
            keep["groups", K] = p = sag.predict(prm, test.logits, context={"embedding": test.embedding})
            rows.append([world, "groups", K, seed, *_evaluate(p, test).values()])
        # (c) variance-penalty weight
        for lv in config["lam_vs"]:
            prm = fit(config["base_groups"], p_max, lv) if lv != config["base_lam_v"] else base
            keep["lam_v", lv] = p = sag.predict(prm, test.logits, context={"embedding": test.embedding})
            rows.append([world, "lam_v", lv, seed, *_evaluate(p, test).values()])
        if t0 is not None:
            print(f"[{STUDY}] {world}: seed {seed} done ({time.perf_counter() - t0:.0f}s)", flush=True)
    return first


def report(summary: Mapping[str, Any]) -> str:
    j = 4 + METRICS.index("Brier")
    parts = []
    for world in dict.fromkeys(r[0] for r in summary["rows"]):
        best = {}
        for abl in ("partitions", "groups", "lam_v"):
            sub = [r for r in summary["rows"] if r[0] == world and r[1] == abl]
            xs = sorted({r[2] for r in sub})
            best[abl] = min(xs, key=lambda x: np.mean([r[j] for r in sub if r[2] == x]))
        parts.append(f"{world}: lowest oracle Brier at " + ", ".join(f"{k} = {v}" for k, v in best.items()))
    return "; ".join(parts)


def _figure(rows: list[list[Any]], worlds):
    fig, axes = plt.subplots(len(worlds), 3, figsize=(12, 3.2 * len(worlds)), squeeze=False)
    labels = {"partitions": "number of partitions P", "groups": "groups per partition K",
              "lam_v": r"variance weight $\lambda_v$"}
    for row_axes, world in zip(axes, worlds):
        for ax, (abl, xlabel) in zip(row_axes, labels.items()):
            sub = [r for r in rows if r[0] == world and r[1] == abl]
            xs = sorted({r[2] for r in sub})
            series = {}
            for j, met in enumerate(METRICS):
                vals = [np.mean([r[4 + j] for r in sub if r[2] == x]) for x in xs]
                ref = vals[0] if vals[0] != 0 else 1.0
                series[met + " (rel. to first)"] = [v / ref for v in vals]
            plot_ablation(xs, series, xlabel=xlabel, ylabel="metric / metric at first value",
                          ax=ax, logx=(abl == "lam_v"), title=world)
    fig.suptitle("VR-SAG+TS ablations (means over seeds)")
    fig.tight_layout()
    return fig


main = entry_point(__name__)

if __name__ == "__main__":
    main()
