"""Where one split of ``compare_calibrators --paper`` spends its time, method by method.

The 100 random splits are about a quarter of the comparison's time
(``benchmarks/results/compare_budget.md``). A split does, for every method of "Calibration is
Grouping" (anonymous authors, under review; Tables 1, 3 and 5), three things on the split's
rows: the D_ho fit (or, for a D_val-fitted method, picking its head and, under the reference
protocol, refitting the group calibrators on D_ho, App. I.1), the predictions on the split's
evaluation rows (a row-wise head such as MCGrad predicts the standard test set once and the
splits read their rows, as the study does), and every metric of the tables (one jitted
function, fetched with one ``device_get``). This benchmark times the three parts per method
on the AdAuction-like world at the default scale, with one D_val fit per D_val-fitted method
(the paper preset's settings otherwise), over ``--splits`` splits after a first one that
compiles, and reports each method's mean seconds per split and its share.

    python -m benchmarks.bench_split_breakdown [--dataset simulator_adauction] [--splits 3]

Writes benchmarks/results/split_breakdown.{csv,md}.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
PARTS = ("fit", "predict", "metrics")


def measure(dataset: str, n_splits: int) -> dict[str, Any]:
    """Seconds per part and method of ``n_splits`` splits (after one that compiles)."""
    from benchmarks.bench_compare_budget import load_world
    from experiments import compare_calibrators as cc

    cfg = {**cc.PRESETS["paper"], "head_fits": 1}
    w = load_world(dataset, n_splits + 1, cfg)
    methods, nc_cols, val, pool, g_all = w["methods"], w["nc_cols"], w["val"], w["pool"], w["g_all"]
    splits, k_fit, stat = w["splits"], w["k_fit"], w["stat"]
    fitted = cc._fit_val_methods(methods, val, cc._rows(pool, splits.holdout[0]), cfg, nc_cols, k_fit)
    seconds: dict[str, dict[str, list[float]]] = {m.name: {p: [] for p in PARTS} for m in methods}
    pool_predictions: dict[tuple[str, int], np.ndarray] = {}
    for s in range(n_splits + 1):
        ho, ev, g_ev = cc._split_parts(pool, g_all, splits.holdout[s], splits.evaluation[s])
        for m in methods:
            t0 = time.perf_counter()
            params, _ = cc._split_params(m, fitted, ho, s, jax.random.fold_in(k_fit, 1000 + s), nc_cols)
            jax.block_until_ready(params)
            t1 = time.perf_counter()
            p = cc._split_prediction(m, params, fitted, pool, ev, splits.evaluation[s], s, pool_predictions, nc_cols)
            t2 = time.perf_counter()
            jax.device_get(cc.evaluate(stat, p, ev, g_ev))
            t3 = time.perf_counter()
            if s:  # the first split compiles
                for part, secs in zip(PARTS, (t1 - t0, t2 - t1, t3 - t2)):
                    seconds[m.name][part].append(secs)
    return {"dataset": dataset, "rows": len(splits.evaluation[0]), "splits": n_splits,
            "seconds": {m: {p: float(np.mean(v)) for p, v in parts.items()} for m, parts in seconds.items()}}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="simulator_adauction")
    ap.add_argument("--splits", type=int, default=3, help="splits timed after the first (which compiles)")
    ap.add_argument("--out", default=str(RESULTS / "split_breakdown"))
    args = ap.parse_args(argv)
    if args.splits < 1:
        ap.error("--splits must be at least 1")
    from benchmarks import machine_speed
    from calib_jax.io import atomic_write_text, markdown_table, write_csv

    warnings.simplefilter("ignore")  # fallback warnings of single fits: the study counts them itself
    out = Path(args.out)
    reference_before = machine_speed.previous_reference(out.with_suffix(".csv"), column="fit_s")
    load_start = os.getloadavg()[0]
    t0 = time.perf_counter()
    reference = machine_speed.reference_seconds()
    meas = measure(args.dataset, args.splits)
    per = meas["seconds"]
    total = sum(sum(parts.values()) for parts in per.values())
    header = ["method", *(f"{p}_s" for p in PARTS), "split_s", "share"]
    rows = sorted(([m, *(parts[p] for p in PARTS), sum(parts.values()), sum(parts.values()) / total]
                   for m, parts in per.items()), key=lambda r: -r[4])
    part_totals = {p: sum(parts[p] for parts in per.values()) for p in PARTS}
    write_csv(out.with_suffix(".csv"), header,
              [*rows, [machine_speed.ROW_LABEL, reference, None, None, reference, None]])
    top = ", ".join(f"{r[0]} {100 * r[5]:.0f}%" for r in rows[:4])
    text = (f"# One split of compare_calibrators --paper, method by method\n\n"
            f"`{meas['dataset']}` (the default simulator scale), {meas['rows']:,} evaluation rows a split; mean "
            f"of {meas['splits']} splits after one that compiles. Measured in {time.perf_counter() - t0:.0f} s; "
            f"1-min load average {load_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the end, on "
            f"{os.cpu_count()} cores. {machine_speed.comparison_sentence(reference, reference_before)}\n\n"
            f"A split: {total:.2f} s (fits {part_totals['fit']:.2f} s, predictions {part_totals['predict']:.2f} s, "
            f"metrics {part_totals['metrics']:.2f} s). The largest shares: {top}.\n\n"
            + markdown_table(header, rows, digits=4) + "\n")
    atomic_write_text(out.with_suffix(".md"), text)
    print(text)
    return meas


if __name__ == "__main__":
    main()
