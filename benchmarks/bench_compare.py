"""The calibrator comparison (Tables 1-5 of "Calibration is Grouping"), timed: batched head fits and the
wall time of a whole run by phase.

Targets: H = 10 head fits of one SAG/VR-SAG method (or of Neural Calibration)
as one program cost no more than 10 sequential fits; the paper-scale comparison (the
``paper`` preset, every dataset) finishes in <= 60 min on the idle 2-core CPU.

1. **Head fits**, on the simulator's D_val (the comparison's own data: 93,686 rows, m = 64):
   ``sag.fit_many`` / ``neural_calibration.fit_many`` with H keys against H calls of ``fit``
   with the same keys, each timed on its second call (compilation excluded: the ratio is
   the arithmetic and dispatch); the first-call columns show what compilation adds.
2. **A whole run** by phase: reads ``phase_seconds`` and ``wall_time_s`` from a
   comparison's ``provenance.json`` (``--provenance``; default: the committed paper-scale
   run if present, else the quick one) and tabulates them per dataset.

    python -m benchmarks.bench_compare                     # both parts
    python -m benchmarks.bench_compare --heads 10 --skip-nc

Writes benchmarks/results/compare.{csv,md} and compare_phases.{csv,md}.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax

RESULTS = Path(__file__).resolve().parent / "results"
FIGURES = Path(__file__).resolve().parents[1] / "figures"


def _timed(fn) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    return out, time.perf_counter() - t0


def bench_heads(H: int, sag_steps: int, nc_steps: int, skip_nc: bool) -> list[list[Any]]:
    from calib_jax.calibrators import REGISTRY, neural_calibration, sag
    from experiments._datasets import load_dataset

    data = load_dataset("simulator", seed=0, sim="default")
    if data is None:
        raise ValueError("dataset 'simulator' is not available")
    val = data["out"].val
    o, y = val.logits, val.labels
    keys = [jax.random.fold_in(jax.random.key(0), h) for h in range(H)]
    rows: list[list[Any]] = []
    cases: list[tuple[str, Any, Any]] = []
    for reg, protocol in (("vrsag_ts", "reference"), ("vrsag_ps", "paper")):
        kw = {**REGISTRY[reg].defaults, "protocol": protocol, "n_steps": sag_steps,
              "context": {"embedding": val.embedding}}
        cases.append((f"{reg} ({protocol})",
                      lambda kw=kw: sag.fit_many(o, y, keys=keys, **kw),
                      lambda kw=kw: [sag.fit(o, y, key=k, **kw) for k in keys]))
    if not skip_nc:
        ctx = {"fields": val.fields[:, data["nc_cols"]]}
        cases.append(("neural_calibration",
                      lambda: neural_calibration.fit_many(o, y, keys=keys, context=ctx, n_steps=nc_steps),
                      lambda: [neural_calibration.fit(o, y, key=k, context=ctx, n_steps=nc_steps)
                               for k in keys]))
    for name, batched, sequential in cases:
        _, b_first = _timed(batched)
        _, s_first = _timed(sequential)
        _, b = _timed(batched)
        _, s = _timed(sequential)
        cfg = f"H={H}, n={len(o)}, sag_steps={sag_steps}, nc_steps={nc_steps}"
        rows += [[name, "batched_s", b, cfg], [name, "sequential_s", s, cfg],
                 [name, "ratio_batched_over_sequential", b / s, cfg],
                 [name, "batched_first_s", b_first, cfg], [name, "sequential_first_s", s_first, cfg]]
        print(f"{name:28s} batched {b:8.2f} s  sequential {s:8.2f} s  ratio {b / s:5.2f}  "
              f"(first calls {b_first:.2f} / {s_first:.2f} s)", flush=True)
    return rows


def phase_table(provenance: Path) -> list[list[Any]]:
    prov = json.loads(provenance.read_text())
    rows: list[list[Any]] = []
    for ds, info in prov.get("datasets", {}).items():
        for phase, secs in info.get("phase_seconds", {}).items():
            rows.append([prov.get("scale"), ds, phase, secs])
    rows.append([prov.get("scale"), "all", "wall time (whole run)", prov.get("wall_time_s")])
    return rows


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--heads", type=int, default=10)
    ap.add_argument("--sag-steps", type=int, default=100)
    ap.add_argument("--nc-steps", type=int, default=100,
                    help="AdamW steps of each Neural Calibration fit (paper preset: 500; the ratio "
                         "batched/sequential does not depend on it, the wall time does)")
    ap.add_argument("--skip-nc", action="store_true")
    ap.add_argument("--skip-heads", action="store_true")
    ap.add_argument("--provenance", type=Path, default=None)
    args = ap.parse_args(argv)
    from calib_jax.io import write_table

    out: dict[str, Any] = {}
    if not args.skip_heads:
        out["heads"] = bench_heads(args.heads, args.sag_steps, args.nc_steps, args.skip_nc)
        write_table(RESULTS / "compare", ["method", "quantity", "value", "config"], out["heads"], digits=3)
    prov = args.provenance
    if prov is None:
        for scale in ("compare_calibrators_paper", "compare_calibrators"):
            if (FIGURES / scale / "provenance.json").exists():
                prov = FIGURES / scale / "provenance.json"
                break
    if prov is not None and prov.exists():
        out["phases"] = phase_table(prov)
        write_table(RESULTS / "compare_phases", ["scale", "dataset", "phase", "seconds"], out["phases"],
                    digits=1)
        for r in out["phases"]:
            print(f"{r[0]:6s} {r[1]:22s} {r[2]:52s} {r[3]:9.1f} s")
    return out


if __name__ == "__main__":
    main()
