"""Fig 5 of "Calibration is Grouping": Spearman of metric *improvements* after recalibration inside each trial.

Each trial draws a model variant and ``n_cal + n`` labelled rows; temperature scaling and
Platt scaling (``calib_jax.calibrators.temperature`` / ``platt``: fixed-iteration Newton
fits, vmap-able) are fitted on the first ``n_cal`` rows and every metric of the panel is
evaluated on the remaining ``n`` rows before and after recalibration. The improvement of a
metric is :math:`\\Delta_m = m(\\text{calibrated}) - m(\\text{uncalibrated})` (negative =
better: every column is a loss), and we report Spearman's
:math:`\\rho(\\Delta_m, \\Delta_{\\mathrm{Brier}^*})` over trials for each calibrator and
pooled over both (2 x trials observations, as in the paper's figure).

Metrics the recalibrations cannot change are left out (:func:`drop_invariant`): both maps
are strictly increasing in the logit, so 1-AUC and 1-Spearman* keep their value and their
"improvement" is float32 rounding (at most ~4e-7); the Spearman of rounding noise with
the oracle Brier's improvement is not a property of the metric. The summary lists them
under ``invariant`` with their largest |improvement|. (A departure only if the paper's
heatmap shows these columns; its text names none of them.)

Population designs (``designs``; :mod:`calib_jax.montecarlo.designs`; the rows come from
:func:`calib_jax.montecarlo.sample_trial_data`):

* ``fixed`` — "Calibration is Grouping" §3.2: one population law drawn once from the seed (mean oracle CTR
  ``target_ctr`` = 3%); the model variant, rows and labels vary per trial.
* ``pooled`` — App. C.1: the population law (coefficients, base CTR 1-10%) is redrawn per trial.

Intervals (95%, percentile bootstrap, B = ``n_boot``, the same trial resamples throughout):

* per calibrator, over trials (:func:`calib_jax.montecarlo.rank_consistency`), with the
  paired differences LCCE - other metric;
* pooled over the calibrators, a *cluster* bootstrap: the two observations of a trial share
  its data and its model, so a resample draws trials and keeps both rows of a drawn trial
  (counts repeated over the trial-major (2T, M) table,
  :func:`calib_jax.montecarlo.bootstrap_spearman` with explicit ``counts``), with the paired
  differences on the same resamples (:func:`calib_jax.montecarlo.paired_difference`).

Run: ``python -m experiments.mc_improvement [--smoke | --quick | --paper]`` (quick: 128
trials x n = 8000 per design; paper: 5000 x n = 10^5, checkpointed and resumable).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax import montecarlo as mc
from calib_jax.calibrators import platt, temperature
from experiments._mc import (
    ANCHORS,
    design_summary,
    design_world,
    headline_text,
    run_designs,
    trial_config,
    write_matrix,
)
from experiments._study import Output, entry_point

_COMMON = {"designs": ["fixed", "pooled"], "target_ctr": 0.03, "n_boot": 1000}
PRESETS: dict[str, dict[str, Any]] = {
    # the smoke runs one design (each compiles its own trial program; mc_spearman's smoke runs both)
    "smoke": {**_COMMON, "designs": ["fixed"], "n": 500, "n_cal": 300, "n_trials": 8, "chunk_size": 8,
              "checkpoint": False, "n_boot": 50,
              "metrics": ["nll", "ece", "ece_sq", "lcce", "lcce_l1", "oracle_brier"]},
    "quick": {**_COMMON, "n": 8000, "n_cal": 4000, "n_trials": 128, "chunk_size": 32, "checkpoint": False,
              "metrics": None},
    "paper": {**_COMMON, "n": 100_000, "n_cal": 20_000, "n_trials": 5000, "chunk_size": 50,
              "checkpoint": True, "metrics": None},
}
CALIBRATORS = ("temperature", "platt")


def _slice(d: mc.TrialData, lo: int, hi: int) -> mc.TrialData:
    return d._replace(**{f: getattr(d, f)[lo:hi] for f in
                         ("logits", "probs", "labels", "oracle", "fields", "regime")})


def make_improvement_trial(n: int, n_cal: int, metrics, world: mc.FixedWorld | None = None):
    """``key -> (improvements (2, M), uncalibrated values (M,))``; rows: temperature, Platt.
    ``world``: the fixed design's population law (``None``: pooled, redrawn per trial)."""

    def trial(key):
        k_data, k_metric = jax.random.split(key)
        d = mc.sample_trial_data(k_data, n_cal + n, world=world)
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


def pooled_consistency(imp: np.ndarray, names: list[str], *, key: jax.Array, n_boot: int,
                       anchors: Any = ANCHORS) -> mc.RankConsistency:
    """Spearman with the reference over the (2T, M) trial-major pooling of ``imp`` (T, 2, M),
    with a cluster bootstrap over trials (both rows of a drawn trial kept together) and the
    paired differences ``anchor - other`` on the same resamples."""
    T, C, M = imp.shape
    pooled = imp.reshape(T * C, M)
    counts = np.repeat(np.asarray(mc.bootstrap_counts(key, int(n_boot), T)), C, axis=1)
    boot = mc.bootstrap_spearman(pooled, pooled[:, names.index(mc.REFERENCE)], counts=counts)
    paired = {(a, b): mc.paired_difference(boot, names.index(a), names.index(b))
              for a in anchors if a in names for b in names if b not in (a, mc.REFERENCE)}
    return mc.RankConsistency(names=list(names), reference=mc.REFERENCE, boot=boot, paired=paired)


#: an improvement never larger than this in any trial is float32 rounding of an unchanged
#: metric (the rank metrics move by <= 4e-7 under temperature and Platt scaling, every other
#: metric by 1e-2 or more in some trial of the quick panel)
ROUNDING = 1e-5


def drop_invariant(imp: np.ndarray, names: list[str]) -> tuple[np.ndarray, list[str], dict[str, float]]:
    """Leave out the metrics the recalibrations cannot change.

    Temperature and Platt scaling are strictly increasing maps of the logit, so metrics of
    the ranking alone (1-AUC, 1-Spearman*) keep their value: their improvement is float32
    rounding, mostly exactly 0, and the Spearman of that noise with the oracle Brier's
    improvement says nothing about the metric (at quick scale it even came out "significant",
    -0.16 [-0.24, -0.06]). A metric whose largest |improvement| over all trials and both
    calibrators is at most :data:`ROUNDING` is removed from the panel and reported with that
    largest value. The oracle Brier itself is never removed (it would be an error upstream).

    Returns ``(imp without those columns, the remaining names, {name: max |improvement|})``.
    """
    largest = np.max(np.abs(imp), axis=tuple(range(imp.ndim - 1)))
    invariant = {m: float(v) for m, v in zip(names, largest, strict=True)
                 if v <= ROUNDING and m != mc.REFERENCE}
    keep = [i for i, m in enumerate(names) if m not in invariant]
    return imp[..., keep], [names[i] for i in keep], invariant


def report(summary: Mapping[str, Any]) -> str:
    return "rho(delta, delta Brier*), pooled: " + " | ".join(
        f"{d}: {headline_text(s)}" for d, s in summary["designs"].items())


def _one_design(design: str, config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    seed = int(config["seed"])
    panel = mc.panel_for(config["metrics"])
    world, info = design_world(design, seed, config["target_ctr"])
    record = {**mc.panel_record(panel), "calibrators": list(CALIBRATORS), "design": info}
    out.record.setdefault("designs", {})[design] = record
    names = list(panel.metrics)
    trial = make_improvement_trial(int(config["n"]), int(config["n_cal"]), mc.metric_panel(panel), world)
    imp, _ = mc.run_trials(trial, jax.random.key(seed), int(config["n_trials"]),
                           chunk_size=int(config["chunk_size"]), progress=out.progress,
                           checkpoint_dir=out.checkpoint_dir(config, design),
                           config=trial_config(config, record))
    imp = np.asarray(imp, np.float64)  # (T, 2, M)
    if not np.all(np.isfinite(imp)):
        raise FloatingPointError("non-finite metric improvements")
    imp, names, invariant = drop_invariant(imp, names)
    T = imp.shape[0]
    kb = jax.random.fold_in(jax.random.key(seed), 7)  # the same trial resamples for all three
    anchors = [a for a in ANCHORS if a in names]
    rcs = {"pooled": pooled_consistency(imp, names, key=kb, n_boot=int(config["n_boot"]), anchors=anchors)}
    for c, cal in enumerate(CALIBRATORS):
        rcs[cal] = mc.rank_consistency(imp[:, c], names, key=kb, anchors=anchors, n_boot=int(config["n_boot"]))

    rows = []
    for m, *pooled in rcs["pooled"].rows():
        i = names.index(m)
        rows.append([m, panel.label(m), *pooled, *(x for cal in CALIBRATORS for x in (rcs[cal].rho(m),
                                                                                   *rcs[cal].interval(m))),
                     float(np.mean(imp[:, 0, i])), float(np.mean(imp[:, 1, i]))])
    out.table(f"spearman_improvement_{design}",
              ["metric", "label", "rho_pooled", "ci_low", "ci_high", "rho_temperature", "ci_low_temperature",
               "ci_high_temperature", "rho_platt", "ci_low_platt", "ci_high_platt", "mean_delta_temperature",
               "mean_delta_platt"], rows)
    out.table(f"paired_improvement_{design}",
              ["observations", "metric_a", "metric_b", "rho_a_minus_rho_b", "ci_low", "ci_high",
               "share_a_better"], [[scope, *r] for scope, rc in rcs.items() for r in rc.paired_rows()])
    R = np.asarray(mc.spearman_matrix(imp.reshape(-1, imp.shape[-1])))
    write_matrix(out, design, config, R, names, table=f"spearman_matrix_improvement_{design}",
                 figure=f"fig5_spearman_improvement_{design}",
                 title=(f"Spearman of improvements (calibrated - uncalibrated), temperature + Platt, "
                        f"{T} trials, n = {config['n']:,}, <design>"))
    return {"n_trials": T, "info": info, **design_summary(rcs["pooled"], all_pairs=True),
            "per_calibrator": {cal: design_summary(rcs[cal]) for cal in CALIBRATORS},
            "invariant": invariant}


def run(config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    """Fig 5 under every design of ``config["designs"]``; tables, heatmaps, side-by-side table."""
    return run_designs(_one_design, config, out)


main = entry_point(__name__)

if __name__ == "__main__":
    main()
