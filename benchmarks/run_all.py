"""Run every benchmark: each ``benchmarks/bench_*.py`` module's ``main()``, in name order.

    python -m benchmarks.run_all [--only metrics,modern,calibrators]

Modules are discovered by name (``bench_calibrators``, ``bench_cli``, ``bench_compare``,
``bench_compare_budget`` (the comparison's unit costs, several minutes), ``bench_compare_design`` (another
query design for ``calib-jax compare`` on DuckDB), ``bench_compare_drift``,
``bench_data``, ``bench_eager``, ``bench_field_budget`` (field_calibration --paper's unit costs, ~30 min),
``bench_fig3`` (the paper-scale Fig 1/3 study twice, ~6 min on 2 cores), ``bench_fit_cells``, ``bench_gauc``,
``bench_heads`` (the comparison's Neural Calibration heads one by one and together, ~17 min),
``bench_metrics``, ``bench_modern``, ``bench_montecarlo``, ``bench_nc_layout`` (why Neural Calibration's heads
under vmap are slower: the layout copies of the batched program, ~2 min), ``bench_nc_loop`` (Neural Calibration's
training loop and predictions against their previous forms, ~2 min), ``bench_research_loop`` (a changed
calibrator's comparison in fresh processes, cold and warm caches), ``bench_sag_heads`` (the comparison's SAG heads one
by one and together, ~12 min), ``bench_sag_torch`` (needs torch), ``bench_sort`` (the argsort of scores three ways,
seconds), ``bench_split_breakdown`` (one split of the
comparison, method by method, ~3 min), ``bench_split_sort`` (one sort for a split's metrics), ``bench_vrsag``,
``bench_vrsag_floor`` (the floor of a VR-SAG fit beside the lock-step fit, ~8 min), ``bench_vrsag_kept`` (the
lock-step gradient with kept softmax weights against autodiff), ``bench_vrsag_profile`` (a lock-step
evaluation's time op by op, ~1 min)); ``--only modern`` runs the modern calibration metrics (smooth ECE,
cumulative, multicalibration, SKCE, debiased ECE, ECE-sweep, ICI) against their references.
"""

from __future__ import annotations

import argparse
import importlib
import time
import traceback
from pathlib import Path


def discover() -> list[str]:
    """Module names ``benchmarks.bench_*`` found next to this file, sorted."""
    here = Path(__file__).resolve().parent
    return [f"benchmarks.{p.stem}" for p in sorted(here.glob("bench_*.py"))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="run all benchmarks/bench_*.py main() functions")
    ap.add_argument("--only", default="", help="comma-separated names, e.g. metrics")
    args = ap.parse_args(argv)
    wanted = {w.strip() for w in args.only.split(",") if w.strip()}
    failures = 0
    for name in discover():
        short = name.split(".bench_", 1)[1]
        if wanted and short not in wanted:
            continue
        print(f"\n=== {name} ===", flush=True)
        t0 = time.perf_counter()
        try:
            importlib.import_module(name).main([])
        except Exception:  # keep going: one broken benchmark must not hide the others
            failures += 1
            traceback.print_exc()
        print(f"=== {name} done in {time.perf_counter() - t0:.1f} s ===", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
