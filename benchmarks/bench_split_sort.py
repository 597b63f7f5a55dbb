"""Does sorting a split's predictions once pay for the metrics of ``compare_calibrators``?

Each of the comparison's 100 random splits evaluates every method's fresh predictions on
about 210,000 rows with the Table 1, 3 and 5 metrics
(:func:`experiments._compare_eval.metric_values`). Two of them order the rows by score:
AUC (one argsort) and the multicalibration error MCE (Guy et al. 2025; one argsort shared by
its segmentations, then a small-integer sort per segmentation). This benchmark times, on the
same rows and in the same run:

* the metric function as the study calls it (each metric does its own ordering);
* the "one sort" design: one argsort of the predictions, every row array gathered into that
  order, then the presorted metric function (AUC's presorted path; MCE's argsort then sees
  sorted input);
* the same without MCE (the row bootstrap's metric function, which leaves MCE out);
* both LCCE norms as two calls against one call (``lcce(norm=("l2", "l1"))``).

A split's predictions change with every split (each split refits on its own D_ho), so a
sort cannot be carried from one split to the next; LCCE's clusters are fitted on each
evaluation set by the metric's definition (eq. 12), so they cannot either.

    python -m benchmarks.bench_split_sort [--rows 210000] [--repeats 10]

Writes benchmarks/results/split_sort.{csv,md}.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def _time(fn: Any, args: Sequence[Any], repeats: int) -> tuple[float, Any]:
    out = jax.device_get(fn(*args))  # compiles
    t0 = time.perf_counter()
    for _ in range(repeats):
        jax.block_until_ready(fn(*args))
    return (time.perf_counter() - t0) / repeats, out


def measure(n: int, repeats: int) -> list[list[Any]]:
    """Rows (design, ms per evaluation, largest relative change of any metric against the study's)."""
    from calib_jax import metrics as M
    from calib_jax._src.sorting import argsort
    from experiments import _compare_eval as cc

    rng = np.random.default_rng(0)
    o = rng.normal(-3.5, 1.0, n).astype(np.float32)
    p = (1 / (1 + np.exp(-(0.9 * o + 0.1)))).astype(np.float32)
    y = (rng.random(n) < p).astype(np.float32)
    g = rng.integers(0, 8, (n, 4)).astype(np.int32)
    w = np.ones(n, np.float32)
    key = jax.random.key(0)
    common = dict(key=key, n_groups=8, n_restarts=4, has_oracle=True)

    def study(p, o, y, g, oracle, w, mce=8):
        return cc.metric_values(p, o, y, g, oracle, weights=w, presorted=False, mce_levels=mce, **common)

    def sort_once(p, o, y, g, oracle, w, mce=8):
        order = argsort(p)
        return cc.metric_values(*(a[order] for a in (p, o, y, g, oracle)), weights=w[order], presorted=True,
                                mce_levels=mce, **common)

    def lcce_two_calls(p, o, y, g, oracle, w):
        return (M.lcce(o, y, probs=p, key=key, weights=w), M.lcce(o, y, probs=p, key=key, weights=w, norm="l1"))

    def lcce_one_call(p, o, y, g, oracle, w):
        return M.lcce(o, y, probs=p, key=key, weights=w, norm=("l2", "l1"))

    args = [jnp.asarray(a) for a in (p, o, y, g, p, w)]
    designs = [("the study's metric function (each metric orders its rows)", jax.jit(study)),
               ("one argsort, rows gathered, presorted metric function", jax.jit(sort_once)),
               ("without MCE: the study's", jax.jit(lambda p, o, y, g, oracle, w: study(p, o, y, g, oracle, w, mce=0))),
               ("without MCE: one argsort, presorted",
                jax.jit(lambda p, o, y, g, oracle, w: sort_once(p, o, y, g, oracle, w, mce=0))),
               ("LCCE and LCCE-l1: two calls", jax.jit(lcce_two_calls)),
               ("LCCE and LCCE-l1: one call, two norms", jax.jit(lcce_one_call))]
    rows: list[list[Any]] = []
    ref: dict[str, Any] = {}
    for name, fn in designs:
        secs, out = _time(fn, args, repeats)
        if isinstance(out, dict):
            base = ref.setdefault("mce" if "MCE" in out else "no mce", out)
            change = max(abs(float(out[k]) - float(base[k])) / max(abs(float(base[k])), 1e-30) for k in out)
        else:
            change = float("nan")
        rows.append([name, n, 1e3 * secs, change])
    return rows


def main(argv: Sequence[str] | None = None) -> list[list[Any]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=210_000, help="rows of a split's evaluation part")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--out", default=str(RESULTS / "split_sort"))
    args = ap.parse_args(argv)
    from calib_jax.io import atomic_write_text, markdown_table, write_csv

    load = os.getloadavg()[0]
    rows = measure(args.rows, args.repeats)
    header = ["design", "rows", "ms_per_evaluation", "max_relative_change"]
    out = Path(args.out)
    write_csv(out.with_suffix(".csv"), header, rows)
    ms = {r[0]: r[2] for r in rows}
    study, once = ms[rows[0][0]], ms[rows[1][0]]
    text = (f"# One sort for a split's metrics?\n\n"
            f"{args.rows:,} rows, {args.repeats} timed evaluations each after a compiling one; 1-min load average "
            f"{load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end, on {os.cpu_count()} cores. "
            + ("Sorting once and gathering every row array costs more than the sorts it saves"
               if once > study else "Sorting once and gathering every row array saves time")
            + f": {once:.1f} ms against {study:.1f} ms for the study's function (x{once / study:.2f}); the study "
            f"keeps its metrics' own ordering. Both LCCE norms from one clustering: "
            f"{ms[rows[5][0]]:.1f} ms against {ms[rows[4][0]]:.1f} ms (the study uses it). "
            f"`max_relative_change`: the largest relative change of any metric against the study's function "
            f"(summation order).\n\n" + markdown_table(header, rows, digits=4) + "\n")
    atomic_write_text(out.with_suffix(".md"), text)
    print(text)
    return rows


if __name__ == "__main__":
    main()
