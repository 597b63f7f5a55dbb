"""What ``compare_calibrators --paper`` costs on this machine, phase by phase: each phase's unit
of work timed once on the idle machine, times how often the paper preset does it.

The paper preset (``experiments/compare_calibrators.py``: 100 random splits, 10 refit folds, 10
D_val fits of every D_val-fitted method, a 1,000-replicate row bootstrap of split 0, 19 methods)
runs these units on each of the four simulator worlds (and on the small Open Bandit log):

* **D_val fits**: one fit of each D_val-fitted method (the eight SAG / VR-SAG rows, Neural
  Calibration, MCGrad, Platt and temperature scaling on D_val), timed twice: the first call
  (compilation included, paid once per method and world) and a second one on another key and
  bootstrap draw (paid ``head_fits - 1`` more times);
* **a split**: the backbone's metrics, then every method's D_ho fit (or its D_val fit's
  second stage), predictions and metrics on the split's evaluation rows (the loop body of
  ``run_dataset``), averaged over the splits after the first. As in the study, a row-wise
  D_val head (``compare_calibrators.ROW_WISE``: MCGrad) predicts the whole standard test set
  once and every split reads its rows from that; those predictions, timed once per method, are
  paid ``head_fits`` times a world and spread over the splits' unit (until 2026-12-05 this page
  predicted them on every split, which the study stopped doing: about 2.4 s of MCGrad a split,
  so the earlier pages overstated the splits by up to 4 minutes a world);
* **a bootstrap replicate**: the metrics of one method on one resample of split 0's evaluation
  rows (``calib_jax.bootstrap.bootstrap`` with the presorted metric function): one call of the
  preset's ``n_boot`` (1,000) replicates, divided by them, so that each call's own costs (the
  estimate on all rows, the replicate loop's buffers) are spread over as many replicates as in
  the study. Until 2026-12-05 the call timed 40 replicates, which charged those costs 25 times
  over: the Xeon's page projected the bootstrap at 160 s a world where the committed run took
  90 s;
* **a refit fold**: the backbone's metrics, every D_ho-fitted method refitted once and every fit
  of a D_val-fitted method (``head_fits`` of them, here the one timed fit repeated) evaluated,
  on a fold the size of the standard test set (the study draws fresh impressions; this times
  the work on the standard test set's rows, which are as many).

The projection is count x unit for each phase, beside the phase seconds of the committed
paper-scale run of the same world (``figures/compare_calibrators_paper/provenance.json``;
its provenance does not record the machine's load, and it took longer than the projection)
and the 30-minute target of
the whole preset. The 15M-exposure row scales every phase linearly in rows (the paper's
AdAuction log over the world's whole log, about 13 at the default scale): a lower bound,
without the simulation and the backbone's training at that size, and with every fit's
iteration count kept.

Since 2026-12-05 the paper preset fits each SAG method's D_val heads together
(``sag_heads="together"``: all ten SAG / VR-SAG heads in one lock-step L-BFGS program) and Neural
Calibration's one by one (its option ``nc_heads="batched"``, the ten fits as one vmapped program,
is slower on two CPU cores). A head's unit exists only one by one, so the D_val
fits are timed the sequential way (``--set sag_heads=sequential --set nc_heads=sequential``) and
each method's phase is divided by the speed-up of the preset's way over that one, from the
committed ``benchmarks/results/sag_heads.csv`` (per SAG protocol) and ``heads.csv`` (Neural
Calibration), second calls: that phase is derived from those two measurements, not timed here.
The page gives the preset its own way, one by one, and the fastest combination of the two
settings by those speed-ups.
The committed paper-scale run beside it was made the preset's way.

    python -m benchmarks.bench_compare_budget [--dataset simulator_adauction] [--splits 3] [--boot N]

Beside the phases it times ``benchmarks.machine_speed``'s reference workload (a csv row) and
states its ratio to the reference of the page it replaces: machines differ, and so do the
minutes of pages measured on them.

Writes benchmarks/results/compare_budget.{csv,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
PROVENANCE = Path(__file__).resolve().parents[1] / "figures" / "compare_calibrators_paper" / "provenance.json"
TARGET_MIN = 30.0
#: the paper's AdAuction log: 15M exposures (its Table 7), against the world's whole log (the
#: backbone's training rows too; D_val and the standard test set are fixed shares of it)
PAPER_ROWS = 15_000_000


def _timed(fn: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    jax.block_until_ready(out)
    return out, time.perf_counter() - t0


def load_world(dataset: str, n_splits: int, cfg: dict[str, Any]) -> dict[str, Any]:
    """What the comparison sets up for one world before its phases, as ``run_dataset`` does:
    the backbone's outputs, the methods of ``cfg`` (without MCGrad where it is not installed),
    the standard test set ``pool`` and its segment codes, ``n_splits`` random splits and the
    unsorted metric function. Shared by this benchmark and ``bench_split_breakdown``."""
    from calib_jax.data.splits import random_test_splits
    from experiments import compare_calibrators as cc
    from experiments._datasets import load_dataset

    data = load_dataset(dataset, seed=0, sim=cfg["sim"])
    if data is None:
        raise ValueError(f"dataset {dataset!r} is not available")
    methods = [m for m in cc.METHODS if m.name in cfg["methods"]]
    if not cc.multicalibration.available():
        methods = [m for m in methods if m.registry != "mcgrad"]
    nc_cols = data["nc_cols"]
    pool = cc._pool(data["out"])
    seg_cols = [data["group_col"], *(c for c in nc_cols if c != data["group_col"])]
    fields, labels = pool["fields"], pool["labels"]
    assert fields is not None and labels is not None  # every simulator world has both
    g_all = fields[:, seg_cols].astype(np.int32)
    n_groups = int(max(g_all[:, 0].max(), data["out"].val.fields[:, data["group_col"]].max())) + 1
    key = jax.random.key(0)
    splits = random_test_splits(jax.random.fold_in(key, 1), len(labels), n_splits=n_splits, holdout_frac=0.1)
    k_fit, k_metric, k_boot = (jax.random.fold_in(key, i) for i in (2, 3, 4))
    key_data = tuple(int(x) for x in np.asarray(jax.random.key_data(k_metric)).ravel())
    stat = cc.metric_function(n_groups, int(cfg["lcce_restarts"]), data["has_oracle"], False, key_data,
                              int(g_all.max()) + 1)
    val = {f: getattr(data["out"].val, f) for f in ("logits", "labels", "embedding", "fields", "oracle")}
    return dict(data=data, methods=methods, nc_cols=nc_cols, val=val, pool=pool, g_all=g_all, n_groups=n_groups,
                splits=splits, k_fit=k_fit, k_boot=k_boot, key_data=key_data, stat=stat)


def measure(dataset: str, n_splits: int, n_boot: int | None = None) -> dict[str, Any]:
    """Unit costs of the paper preset's phases on ``dataset`` (see the module docstring);
    ``n_boot``: replicates of each timed bootstrap call (default: the preset's)."""
    from calib_jax import bootstrap as boot
    from experiments import compare_calibrators as cc

    cfg = dict(cc.PRESETS["paper"])
    n_boot = int(cfg["n_boot"]) if n_boot is None else n_boot
    w = load_world(dataset, max(n_splits, 2), cfg)
    data, methods, nc_cols, val, pool = w["data"], w["methods"], w["nc_cols"], w["val"], w["pool"]
    g_all, n_groups, splits, stat = w["g_all"], w["n_groups"], w["splits"], w["stat"]
    k_fit, k_boot, key_data = w["k_fit"], w["k_boot"], w["key_data"]
    ho0 = cc._rows(pool, splits.holdout[0])

    # D_val fits one by one: first call (compiled) and a second one (another key and draw)
    first_cfg = second_cfg = {**cfg, "head_fits": 1, **{k: "sequential" for k in cc.OPTIONAL_SETTINGS}}
    first = cc._fit_val_methods(methods, val, ho0, first_cfg, nc_cols, k_fit)
    second = cc._fit_val_methods(methods, val, ho0, second_cfg, nc_cols, jax.random.fold_in(k_fit, 99))
    fit_first = {m: s[0] for m, s in first.seconds.items()}
    fit_again = {m: s[0] for m, s in second.seconds.items()}

    # splits: the loop body of run_dataset (the first split also fills the row-wise heads' predictions)
    split_s = []
    pool_predictions: dict[tuple[str, int], np.ndarray] = {}
    for s in range(max(n_splits, 2)):
        t0 = time.perf_counter()
        ho, ev, g_ev = cc._split_parts(pool, g_all, splits.holdout[s], splits.evaluation[s])
        cc.evaluate_backbone(stat, ev, g_ev)
        for m in methods:
            params, _ = cc._split_params(m, second, ho, s, jax.random.fold_in(k_fit, 1000 + s), nc_cols)
            p = cc._split_prediction(m, params, second, pool, ev, splits.evaluation[s], s, pool_predictions, nc_cols)
            {k: float(v) for k, v in cc.evaluate(stat, p, ev, g_ev).items()}
        split_s.append(time.perf_counter() - t0)
    # each row-wise head's prediction of the standard test set, paid once per head and world
    pool_predict = {}
    for m in methods:
        if m.registry in cc.ROW_WISE and m.fit_on == "val":
            t0 = time.perf_counter()
            cc._predict(m, second.heads[m.name][0], pool, nc_cols)
            pool_predict[m.name] = time.perf_counter() - t0
    H = int(cfg["head_fits"])
    per_split = float(np.mean(split_s[1:])) + H * sum(pool_predict.values()) / int(cfg["n_splits"])

    # bootstrap replicates of split 0 (the presorted metric function), three methods
    ev0, g0 = cc._rows(pool, splits.evaluation[0]), g_all[splits.evaluation[0]]
    sorted_stat = cc.metric_function(n_groups, int(cfg["lcce_restarts"]), data["has_oracle"], True, key_data)
    per_rep = []
    for m in [m for m in methods if m.name in ("Uncal", "Platt scaling", "VR-SAG+TS")]:
        params, _ = cc._split_params(m, second, cc._rows(pool, splits.holdout[0]), 0, k_fit, nc_cols)
        p = cc._predict(m, params, ev0, nc_cols)
        order = np.argsort(p, kind="stable")
        oracle = ev0["oracle"] if ev0["oracle"] is not None else p
        args = (p[order], ev0["logits"][order], ev0["labels"][order], g0[order], oracle[order])
        run = lambda a=args, o=order: boot.bootstrap(sorted_stat, *a, key=k_boot, n_boot=n_boot,  # noqa: E731
                                                     row_order=o).estimate
        _timed(run)  # compiles (the program depends on n_boot)
        _, secs = _timed(run)
        per_rep.append(secs / n_boot)
    per_replicate = float(np.mean(per_rep))

    # one refit fold (the standard test set's rows, split as a table split)
    t0 = time.perf_counter()
    ho, ev, g_ev = cc._split_parts(pool, g_all, splits.holdout[1], splits.evaluation[1])
    cc.evaluate_backbone(stat, ev, g_ev)
    for m in methods:
        for _ in range(H if m.fit_on in ("val", "ref") else 1):
            params, _ = cc._split_params(m, second, ho, 0, jax.random.fold_in(k_fit, 5000), nc_cols)
            {k: float(v) for k, v in cc.evaluate(stat, cc._predict(m, params, ev, nc_cols), ev, g_ev).items()}
    per_fold = time.perf_counter() - t0
    log_rows = int(getattr(data["out"], "info", {}).get("log_rows", 0)) or None
    return dict(dataset=dataset, methods=[m.name for m in methods], fit_first=fit_first, fit_again=fit_again,
                per_split=per_split, per_replicate=per_replicate, per_fold=per_fold, cfg=cfg, log_rows=log_rows,
                pool_predict=pool_predict)


#: the paper preset runs four simulator worlds of about the same size (and the small Open Bandit
#: log, about 1% of the time)
SIMULATOR_WORLDS = 4


#: ``bench_sag_heads``' way labels and the study's ``sag_heads`` values
SAG_WAYS = {"one by one, lock-step": "lockstep", "together, lock-step": "together"}


def head_speedups(results: Path = RESULTS) -> dict[str, dict[str, float]]:
    """The committed speed-ups of each way of fitting the D_val heads over the sequential one
    (second calls): ``{"paper" | "reference": {sag_heads way: ratio}, "nc": {"batched": ratio}}``
    for what ``sag_heads.csv`` and ``heads.csv`` hold (empty where a file is missing)."""
    import csv

    out: dict[str, dict[str, float]] = {}
    sag_csv, nc_csv = results / "sag_heads.csv", results / "heads.csv"
    if sag_csv.exists():
        with sag_csv.open(newline="") as f:
            rows = [r for r in csv.DictReader(f) if r["call"] == "second"]
        for r0 in (r for r in rows if r["way"] == "one by one, sequential"):
            protocol = "paper" if "eq. 8-11" in r0["variant"] else "reference"
            out[protocol] = {SAG_WAYS.get(r["way"], r["way"]): float(r0["seconds"]) / float(r["seconds"])
                             for r in rows if r["variant"] == r0["variant"] and r["way"] != r0["way"]}
    if nc_csv.exists():
        with nc_csv.open(newline="") as f:
            secs = {r["way"]: float(r["seconds"]) for r in csv.DictReader(f)}
        if "sequential (second call)" in secs and "batched (second call)" in secs:
            out["nc"] = {"batched": secs["sequential (second call)"] / secs["batched (second call)"]}
    return out


def method_fit_seconds(meas: dict[str, Any]) -> dict[str, float]:
    """Each D_val-fitted method's projected fits in one world, one by one: its first fit (which
    compiles) plus ``head_fits - 1`` more at the second call's time."""
    H = int(meas["cfg"]["head_fits"])
    return {m: meas["fit_first"][m] + (H - 1) * meas["fit_again"][m] for m in meas["fit_first"]}


def fits_for_ways(meas: dict[str, Any], speedups: dict[str, dict[str, float]], sag_heads: str = "sequential",
                  nc_heads: str = "sequential") -> float:
    """One world's D_val phase (seconds) fitted the ways ``sag_heads`` and ``nc_heads`` (the
    study's settings): each method's one-by-one fits (:func:`method_fit_seconds`) divided by
    its way's committed speed-up (:func:`head_speedups`; 1 for the sequential way, for a
    method without a way, and where the table lacks the way)."""
    total = 0.0
    for m, secs in method_fit_seconds(meas).items():
        if m.startswith(("SAG", "VR-SAG")):
            ratio = speedups.get("paper" if "eq. 8-11" in m else "reference", {}).get(sag_heads, 1.0)
        elif m == "Neural Calibration":
            ratio = speedups.get("nc", {}).get(nc_heads, 1.0)
        else:
            ratio = 1.0
        total += secs / ratio
    return total


def committed_preset_seconds(provenance: Path | None = None) -> tuple[float, dict[str, Any]] | None:
    """The committed paper-scale run's seconds (every data set's phases summed) and its
    configuration, or None without a committed run."""
    provenance = PROVENANCE if provenance is None else provenance
    if not provenance.exists():
        return None
    from benchmarks.compare_reruns import phase_seconds

    record = json.loads(provenance.read_text())
    return sum(sum(phases.values()) for phases in phase_seconds(record).values()), record.get("config", {})


def project(meas: dict[str, Any]) -> list[list[Any]]:
    """Rows (phase, unit, unit s, count, projected s, committed s) for one world."""
    cfg = meas["cfg"]
    S, R, B = (int(cfg[k]) for k in ("n_splits", "n_folds", "n_boot"))
    committed = {}
    if PROVENANCE.exists():
        info = json.loads(PROVENANCE.read_text()).get("datasets", {}).get(meas["dataset"], {})
        committed = info.get("phase_seconds", {})
    fits = fits_for_ways(meas, head_speedups(), cfg.get("sag_heads", "sequential"), cfg.get("nc_heads", "sequential"))
    n_fit = len(meas["fit_first"])
    fit_phase = "D_val fits (SAG heads, Neural Calibration, MCGrad)"
    # (phase, unit, unit seconds, count, the committed run's phases it covers)
    phases = [(fit_phase, "per method: its first fit + (H-1) more, over its way's speed-up", fits / max(1, n_fit),
               n_fit, (fit_phase,)),
              ("splits (fits, predictions, metrics)", "one split, every method (row-wise heads: their share of "
               "H test-set predictions)", meas["per_split"], S,
               ("split fits (D_ho)", "split predictions", "split metrics")),
              ("row bootstrap (split 0)", "one replicate of one method", meas["per_replicate"],
               B * len(meas["methods"]), ("row bootstrap (split 0)",)),
              ("refits (folds x fits)", "one fold, every fit", meas["per_fold"], R, ("refits (folds x fits)",))]
    return [[meas["dataset"], phase, unit, secs, count, count * secs,
             sum(committed.get(k, 0.0) for k in keys) or None] for phase, unit, secs, count, keys in phases]


def main(argv: Sequence[str] | None = None) -> list[list[Any]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="simulator_adauction")
    ap.add_argument("--splits", type=int, default=3, help="splits timed (the first is not counted: it compiles)")
    ap.add_argument("--boot", type=int, default=None,
                    help="bootstrap replicates of the timed call per method (default: the preset's n_boot)")
    ap.add_argument("--out", default=str(RESULTS / "compare_budget"))
    args = ap.parse_args(argv)
    from benchmarks import machine_speed
    from benchmarks.pages import write_page
    from calib_jax._src.startup import numpy_huge_pages_off

    if argv is None:  # the program: as the study runs (python -m experiments), unless NUMPY_MADVISE_HUGEPAGE is set
        numpy_huge_pages_off()

    warnings.simplefilter("ignore")  # fallback warnings of single fits: the study counts them itself
    out = Path(args.out)
    reference_before = machine_speed.previous_reference(out.with_suffix(".csv"))
    load_start = os.getloadavg()[0]
    t0 = time.perf_counter()
    reference = machine_speed.reference_seconds()
    meas = measure(args.dataset, args.splits, args.boot)
    phases = project(meas)
    rows = list(phases)
    world = sum(r[5] for r in phases)
    committed_world = sum(r[6] or 0.0 for r in phases)
    preset = SIMULATOR_WORLDS * world
    scale = PAPER_ROWS / meas["log_rows"] if meas["log_rows"] else float("nan")
    rows.append([meas["dataset"], "one world, every phase", "sum", world, 1, world, committed_world or None])
    rows.append(["the paper preset", "four simulator worlds (Open Bandit adds about 1%)",
                 f"{SIMULATOR_WORLDS} x one world", world, SIMULATOR_WORLDS, preset, None])
    rows.append([f"{meas['dataset']} at 15M exposures", f"every phase linear in rows (x {scale:.1f})",
                 "lower bound", world, scale, world * scale, None])
    rows.append(["machine", machine_speed.ROW_LABEL, machine_speed.DESCRIPTION, reference, 1, reference, None])
    header = ["dataset", "phase", "unit", "unit_s", "count", "projected_s", "committed_run_s"]
    fits = "; ".join(f"{m} {meas['fit_first'][m]:.1f} s then {meas['fit_again'][m]:.1f} s"
                     for m in meas["fit_first"])
    verdict = "met" if preset / 60 <= TARGET_MIN else "MISSED"
    shares = ", ".join(f"{r[1]} {100 * r[5] / world:.0f}% ({r[5]:.0f} s)" for r in phases)
    without_fits = SIMULATOR_WORLDS * (world - phases[0][5])  # phases[0]: the D_val fits
    speedups = head_speedups()
    ways = {k: meas["cfg"].get(k, "sequential") for k in ("sag_heads", "nc_heads")}
    fits_seq = fits_for_ways(meas, speedups)
    preset_seq = SIMULATOR_WORLDS * (world - phases[0][5] + fits_seq)
    used = []
    for what, ratios in sorted(speedups.items()):
        way = ways["nc_heads" if what == "nc" else "sag_heads"]
        if way in ratios:
            used.append(f"{'Neural Calibration' if what == 'nc' else what + ' protocol'} {way} x{ratios[way]:.2f}")
    fastest = min(((sag_way, nc_way) for sag_way in ("sequential", "lockstep", "together")
                   for nc_way in ("sequential", "batched")), key=lambda w: fits_for_ways(meas, speedups, *w))
    fits_fast = fits_for_ways(meas, speedups, *fastest)
    preset_fast = SIMULATOR_WORLDS * (world - phases[0][5] + fits_fast)
    mcgrad = method_fit_seconds(meas).get("MCGrad", 0.0)
    bound = (f" What keeps the preset above the target: the D_val fits alone take "
             f"{SIMULATOR_WORLDS * phases[0][5] / 60:.0f} min of it (MCGrad's own library, which the study runs "
             f"as it is, {SIMULATOR_WORLDS * mcgrad / 60:.0f} min), beside the other phases' "
             f"{without_fits / 60:.0f} min (above).") if verdict == "MISSED" else ""
    options = (f" The preset fits the D_val heads `sag_heads={ways['sag_heads']}`, `nc_heads={ways['nc_heads']}` "
               f"(the speed-ups over one by one, from the committed `sag_heads.csv` and `heads.csv`, second calls: "
               f"{'; '.join(used) or 'none found'}); one by one, the D_val phase of one world would take "
               f"{fits_seq:.0f} s "
               f"instead of {phases[0][5]:.0f} s and the preset {preset_seq / 60:.0f} min. The fastest of the "
               f"settings' combinations by those speed-ups, `sag_heads={fastest[0]}`, `nc_heads={fastest[1]}`, "
               f"gives {fits_fast:.0f} s and {preset_fast / 60:.0f} min.")
    measured = committed_preset_seconds()
    if measured:
        options += (f" The committed paper-scale run (`{PROVENANCE.parent.name}`, "
                    + ("its heads fitted the preset's way" if all(measured[1].get(k, "sequential") == v
                                                                  for k, v in ways.items())
                       else "its heads fitted another way than the preset's")
                    + f") took {measured[0] / 60:.0f} min, its data sets' phase seconds summed.")
    text = (f"# compare_calibrators --paper: the budget by phase\n\n"
            f"Measured on `{meas['dataset']}` (the default simulator scale) in {time.perf_counter() - t0:.0f} s; "
            f"1-min load average {load_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the end, on "
            f"{os.cpu_count()} cores. {machine_speed.comparison_sentence(reference, reference_before)} "
            f"One world projects to {world / 60:.0f} min"
            + (f" (the committed paper-scale run of that world took {committed_world:.0f} s)" if committed_world
               else "")
            + f"; the whole preset to {preset / 60:.0f} min against the {TARGET_MIN:.0f}-min target: "
            f"**{verdict}**. Shares of one world: {shares}. Without any D_val fit the preset would take "
            f"{without_fits / 60:.0f} min; the target needs every phase {preset / 60 / TARGET_MIN:.1f} times "
            f"faster.{bound}{options} At the paper's 15M exposures ({scale:.1f} times the world's log) one world "
            f"alone is at least {world * scale / 3600:.1f} h, before simulating the log and training the backbone.\n\n"
            f"D_val fits one by one (first call, then another): {fits}. Row-wise heads' predictions of the "
            f"standard test set (once per head and world, in the splits' unit): "
            + ("; ".join(f"{m} {v:.1f} s" for m, v in meas["pool_predict"].items()) or "none") + ".\n\n")
    write_page(out, text, header, rows)
    return rows


if __name__ == "__main__":
    main()
