"""Fig. 2 of "Calibration is Grouping": VR-SAG ablations on the simulator (partitions, groups, lambda_v).

VR-SAG+TS is fitted on a D_val and scored on the test split (ECE, LCCE, oracle Brier) in each
simulator world of ``worlds`` (``experiments/_datasets.py``): the matched AdAuction-like world
(the comparison's world where the paper's mechanism can act), the grouping world (the
backbone's logit is shifted by a regime its embedding carries, so more partitions and groups
have something to find) and the null world (the residual miscalibration is by a regime the
embedding does not carry).

Settings: the partition ablation needs one fit per D_val: partition ``p`` is initialised from
``fold_in(key, p)`` and fitted independently of the others, so the prediction with P
partitions is exactly the average of the first P partitions of a ``max(partitions)`` fit
(eq. 8). The group and lambda_v ablations refit at ``base_partitions`` partitions (the
comparison's setting), sharing the base fit (``base_groups``, ``base_lam_v``); lambda_v is a
dynamic argument, so those fits reuse one compiled program.

Design (every "A beats B" a paired comparison with its interval): ``n_fits`` independent
repeats, repeat ``h`` on its own D_val of the same size with its own PRNG key -- repeat 0 on
the log's D_val (subsampled to ``max_val`` rows if set), the others on disjoint slices of
fresh impressions of the same world (:func:`experiments._datasets.fresh_test_rows`) -- crossed
with ``n_folds`` disjoint folds of the test split. Every setting of repeat ``h`` shares its
data and key, and is paired with the first value of its ablation (P = 1, K = 1, lambda_v = 0)
on the same folds; ``paired`` holds ``setting - reference`` with the crossed interval of
:func:`experiments._pipelines.crossed_t_interval` (fit and evaluation variance both counted).

Outputs in ``figures/ablation/`` (``figures/ablation_paper/`` at paper scale): ``fig2.png/.pdf``
(three panels per world, means over repeats), ``ablation.csv/.md`` (one row per world,
setting and repeat, means over folds), ``paired.csv/.md`` and ``provenance.json`` (per-world
phase seconds). The paper preset checkpoints every (world, repeat), so an interrupted run
resumes.

Departures from the paper: its Fig 2 is on its real data sets with one fit per setting;
here the simulator's worlds stand in for them and each setting gets ``n_fits`` independent
fits so that its difference from the reference has an interval.

Usage::

    python -m experiments run ablation --quick
    python -m experiments run ablation --paper    # full D_val, 5 repeats x 10 folds, more settings
    python -m experiments run ablation --paper --set sag_solver=sequential  # the runs before 2026-12-05

Solver: every preset fits with the lock-step solver (``sag_solver="lockstep"`` since
2026-12-05, :data:`OPTIONAL_SETTINGS`), the library's default: a fit's partitions evaluated
together, one pass over the embedding per evaluation. Rerun both ways at one commit on 2 cores
of an AMD EPYC without AVX-512 (2026-12-05, ``benchmarks/results/ablation_solver_rerun.md``),
149 of the 153 paired differences kept their side of 0 (four whose intervals touch 0 turned),
the estimates moved by at most 0.74 of their intervals' half-widths, and all nine ledger rows
kept their verdicts; the sequential run against the committed one of an Intel Xeon moved the
study as much (``ablation_machine_rerun.md``). The paper preset took 16 min lock-step against
35 min sequential on that machine (41 min on the Xeon).
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax import io as cio
from calib_jax import metrics as M
from calib_jax.calibrators import sag
from calib_jax.plotting import plt
from calib_jax.plotting.grouping import plot_ablation
from experiments._pipelines import crossed_t_interval
from experiments._study import Output, entry_point

STUDY = "ablation"

_WORLDS = ("simulator_matched", "simulator_grouping", "simulator")
# every preset fits with the lock-step SAG solver (module docstring, "Solver")
PRESETS: dict[str, dict[str, Any]] = {
    "smoke": dict(worlds=("simulator",), sim="tiny", n_fits=2, n_folds=2, max_val=1_000, n_steps=3,
                  base_groups=2, base_partitions=2, base_lam_v=0.5, partitions=(1, 2), groups=(1, 2),
                  lam_vs=(0.0, 0.5), lam=0.1, sag_solver="lockstep"),
    "quick": dict(worlds=_WORLDS, sim="default", n_fits=3, n_folds=5, max_val=20_000, n_steps=30,
                  base_groups=3, base_partitions=10, base_lam_v=0.5, partitions=(1, 2, 3, 5, 10),
                  groups=(1, 2, 3, 5), lam_vs=(0.0, 0.5, 2.0, 10.0), lam=0.1, sag_solver="lockstep"),
    "paper": dict(worlds=_WORLDS, sim="default", n_fits=5, n_folds=10, max_val=None, n_steps=100,
                  base_groups=3, base_partitions=10, base_lam_v=0.5, partitions=(1, 2, 3, 5, 10, 15, 20),
                  groups=(1, 2, 3, 5, 8, 12), lam_vs=(0.0, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0), lam=0.1,
                  checkpoint=True, sag_solver="lockstep"),
}
#: settings that are in a configuration only at a value other than this default
#: (``experiments._study.apply_overrides``): ``sag_solver``, the L-BFGS solver of every SAG /
#: VR-SAG fit (:data:`calib_jax.calibrators.sag.SOLVERS`; ``"sequential"``, the solver of every
#: run before 2026-12-05, or ``"lockstep"``, every preset's since, equal to it up to float32
#: rounding of the batched sums). At ``"sequential"`` the key stays out of the configuration, so
#: the earlier runs' configurations and checkpoints are reproduced.
OPTIONAL_SETTINGS = {"sag_solver": "sequential"}
METRICS = ("ECE", "LCCE", "Brier")
HEADER = ("world", "ablation", "value", "fit", *METRICS)
_LCCE_KEY = 0


def _stat(p, logits, labels, oracle, *, weights):
    """The three metrics as one weighted statistic (evaluated per test fold)."""
    return {"ECE": M.ece(p, labels, weights=weights),
            "LCCE": M.lcce(logits, labels, probs=p, key=jax.random.key(_LCCE_KEY), weights=weights),
            "Brier": M.oracle_brier(p, oracle, weights=weights)}


@jax.jit
def _per_fold(p: jax.Array, logits: jax.Array, labels: jax.Array, oracle: jax.Array, folds: jax.Array) -> jax.Array:
    """(S, 3) metrics of predictions ``p`` on each fold (``folds``: (S, n) 0/1 indicators)."""
    def one(w):
        v = _stat(p, logits, labels, oracle, weights=w)
        return jnp.stack([v[m] for m in METRICS])
    return jax.lax.map(one, folds)


def _partition_probs(params: sag.SAGParams, logits: np.ndarray, embedding: np.ndarray):
    """(P, n) per-partition predictions (eq. 8) of a fitted SAG."""
    q = sag.memberships(params, embedding)
    o = jnp.asarray(logits)
    s = o[None, :, None] * jnp.exp(-params.log_tau)[:, None, :] + params.beta[:, None, :]
    return jnp.sum(q * jax.nn.sigmoid(s), axis=2)


def run_repeat(fit_set: tuple[Any, Any, Any], test: Any, folds: np.ndarray, config: Mapping[str, Any],
               key: jax.Array) -> dict[tuple[str, Any], np.ndarray]:
    """The three ablations fitted on one D_val (``fit_set``: logits, labels, embedding) with one
    key; returns ``{(ablation, value): (S, 3) per-fold metrics}``."""
    o_val, y_val, z_val = fit_set
    fit_kw = dict(context={"embedding": z_val}, variant="ts", n_steps=config["n_steps"], lam=config["lam"], key=key,
                  solver=config.get("sag_solver", OPTIONAL_SETTINGS["sag_solver"]))
    fits: dict[tuple[int, int, float], sag.SAGParams] = {}

    def fit(n_groups: int, n_partitions: int, lam_v: float) -> sag.SAGParams:
        k = (int(n_groups), int(n_partitions), float(lam_v))
        if k not in fits:
            fits[k] = sag.fit(o_val, y_val, n_groups=n_groups, n_partitions=n_partitions, lam_v=lam_v, **fit_kw)
        return fits[k]

    t_args = (jnp.asarray(test.logits), jnp.asarray(test.labels), jnp.asarray(test.oracle), jnp.asarray(folds))
    ctx = {"embedding": test.embedding}
    res: dict[tuple[str, Any], np.ndarray] = {}
    K0, P0, lv0 = config["base_groups"], config["base_partitions"], config["base_lam_v"]
    # (a) partitions: one fit with the largest P, prefix averages
    per = _partition_probs(fit(K0, max(config["partitions"]), lv0), test.logits, test.embedding)
    for P in config["partitions"]:
        res["partitions", P] = np.asarray(_per_fold(jnp.mean(per[:P], axis=0), *t_args), np.float64)
    # (b) groups per partition, (c) the variance-penalty weight, at the base number of partitions
    for K in config["groups"]:
        res["groups", K] = np.asarray(_per_fold(sag.predict(fit(K, P0, lv0), test.logits, context=ctx), *t_args),
                                      np.float64)
    for lv in config["lam_vs"]:
        res["lam_v", lv] = np.asarray(_per_fold(sag.predict(fit(K0, P0, lv), test.logits, context=ctx), *t_args),
                                      np.float64)
    return res


def _world_repeats(world: str, config: Mapping[str, Any], out: Output, t0: float | None
                   ) -> tuple[list[dict[tuple[str, Any], np.ndarray]], dict[str, Any]]:
    """Every repeat of one world (each read from its checkpoint when there is one)."""
    from calib_jax.data.simulator import config_hash
    from experiments._datasets import fitting_sets, load_dataset

    seed, H, S = int(config["seed"]), int(config["n_fits"]), int(config["n_folds"])
    ts = time.perf_counter()
    backbone = load_dataset(world, seed=seed, sim=config["sim"])["out"]
    sets, n_val = fitting_sets(world, backbone, seed=seed, n_sets=H, max_rows=config["max_val"], sim=config["sim"])
    test = backbone.test
    fold_of = np.random.default_rng(seed).permutation(len(test)) % S
    folds = (fold_of[None, :] == np.arange(S)[:, None]).astype(np.float32)
    phase = {"data": time.perf_counter() - ts, "repeats": 0.0}
    folder = out.checkpoint_dir(config, "repeats")
    index = list(config["worlds"]).index(world)  # the world's key is fold_in(seed, index)
    ident = config_hash({k: v for k, v in config.items() if k != "worlds"}, extra=[world, index])
    world_key = jax.random.fold_in(jax.random.key(seed), index)
    reps, resumed = [], []
    for h in range(H):
        path = None if folder is None else folder / f"{world}-{ident}-{h}.pkl"
        if path is not None and path.exists():
            with path.open("rb") as f:
                reps.append(pickle.load(f))
            resumed.append(h)
            continue
        tr = time.perf_counter()
        reps.append(run_repeat(sets[h], test, folds, config, jax.random.fold_in(world_key, h)))
        phase["repeats"] += time.perf_counter() - tr
        if path is not None:
            cio.atomic_write_bytes(path, pickle.dumps(reps[-1]))
        if t0 is not None:
            print(f"[{STUDY}] {world}: repeat {h + 1}/{H} done ({time.perf_counter() - t0:.0f}s)", flush=True)
    info = {"n_val": n_val, "n_test": len(test), "phase_seconds": phase, "git_commit": cio.git_commit(),
            **({"resumed_repeats": resumed} if resumed else {})}
    return reps, info


def run(config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    """Run the three ablations for every repeat of every world; write ``ablation``, ``paired``
    and ``fig2`` through ``out``."""
    t0 = time.perf_counter()
    rows: list[list[Any]] = []
    paired: list[list[Any]] = []
    infos = {}
    for world in config["worlds"]:
        reps, infos[world] = _world_repeats(world, config, out, t0 if out.progress else None)
        for h, res in enumerate(reps):
            for (abl, value), v in res.items():
                rows.append([world, abl, value, h, *v.mean(0).tolist()])
        paired += _paired(world, reps)
    out.record["worlds"] = infos
    out.table("ablation", HEADER, rows, digits=6)
    out.table("paired", list(PAIRED_HEADER), paired, digits=6)
    out.figure(_figure(rows, config["worlds"]), "fig2")
    return {"n_fits": int(config["n_fits"]), "n_folds": int(config["n_folds"]), "header": list(HEADER),
            "rows": rows, "info": infos,
            "paired": {f"{w}/{a}/{v}/{m}": {"diff": d, "lo": lo, "hi": hi, "reference": ref, "df": df}
                       for w, a, v, ref, m, d, lo, hi, df, _ in paired}}


PAIRED_HEADER = ("world", "ablation", "value", "reference", "metric", "minus_reference", "ci_low", "ci_high",
                 "df", "share_fit")


def _paired(world: str, reps: list[dict[tuple[str, Any], np.ndarray]]) -> list[list[Any]]:
    """Each setting minus the first value of its ablation: (repeats, folds) differences with
    the crossed interval (rows of :data:`PAIRED_HEADER`)."""
    rows = []
    for abl in ("partitions", "groups", "lam_v"):
        keys = [k for k in reps[0] if k[0] == abl]
        ref = min(keys, key=lambda k: k[1])
        for k in keys:
            if k == ref:
                continue
            for j, metric in enumerate(METRICS):
                c = crossed_t_interval(np.stack([r[k][:, j] - r[ref][:, j] for r in reps]))
                rows.append([world, abl, k[1], ref[1], metric, c["diff"], c["lo"], c["hi"], c["df"], c["share_fit"]])
    return rows


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
    fig.suptitle("VR-SAG+TS ablations (means over independent fits)")
    fig.tight_layout()
    return fig


main = entry_point(__name__)

if __name__ == "__main__":
    main()
