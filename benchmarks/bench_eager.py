"""Eager calls against jitted ones, and memory over many eager calls (issue 15 targets).

Most users call a metric eagerly: ``ece(p, y)`` on NumPy arrays, in a loop. For every public
metric and decomposition of ``benchmarks.eager_calls.CALLS`` this benchmark times, in one
run and on the same inputs,

* the eager call (after three warm-up calls, fresh data of one shape on every call), and
* ``jax.jit`` of the same call (warmed up),

as the median per call at each ``--sizes`` n, with the ratio eager / jit (target <= 1.5x
after the first call), and the growth of the resident set over ``--memory-calls`` eager
calls at the smallest n (target < 20 MB in total).

Run:  python -m benchmarks.bench_eager [--sizes 10000,1000000] [--memory-calls 1000]
Writes benchmarks/results/eager.{md,csv}.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import jax
import numpy as np

from benchmarks.bench_metrics import write_report
from benchmarks.eager_calls import CALLS, make_data

RESULTS = Path(__file__).resolve().parent / "results"
_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb() -> float:
    """Current resident set size (MB) from /proc (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE / 2**20


def _median_time(fn, datas, calls: int) -> float:
    times = []
    for i in range(calls):
        d = datas[i % len(datas)]
        t0 = time.perf_counter()
        jax.block_until_ready(fn(d))
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def measure(name: str, n: int, calls: int, memory_calls: int) -> dict:
    fn = CALLS[name]
    rng, key = np.random.default_rng(0), jax.random.key(0)
    datas = [make_data(rng, key, i, n) for i in range(4)]
    for d in datas[:3]:  # warm-up: the first call compiles
        jax.block_until_ready(fn(d))
    eager = _median_time(fn, datas, calls)
    jitted = jax.jit(fn)
    jax.block_until_ready(jitted(datas[0]))
    jit_s = _median_time(jitted, datas, calls)
    grown = float("nan")
    if memory_calls:
        r0 = rss_mb()
        for i in range(memory_calls):
            jax.block_until_ready(fn(datas[i % len(datas)]))
        grown = rss_mb() - r0
    return {"eager": eager, "jit": jit_s, "ratio": eager / jit_s, "grown_mb": grown}


def main(argv: list[str] | None = None) -> list[list]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,1000000")
    ap.add_argument("--calls", type=int, default=20, help="timed calls per size (median)")
    ap.add_argument("--memory-calls", type=int, default=1000)
    ap.add_argument("--only", default="", help="comma-separated subset of the calls")
    ap.add_argument("--out", type=Path, default=RESULTS / "eager")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    names = [c for c in args.only.split(",") if c] or list(CALLS)
    load0 = os.getloadavg()[0]
    rows = []
    for name in names:
        for j, n in enumerate(sizes):
            r = measure(name, n, args.calls, args.memory_calls if j == 0 else 0)
            rows.append([name, n, r["eager"] * 1e3, r["jit"] * 1e3, r["ratio"],
                         "met" if r["ratio"] <= 1.5 else "MISSED", r["grown_mb"],
                         "" if np.isnan(r["grown_mb"]) else ("met" if r["grown_mb"] < 20 else "MISSED")])
            print(f"{name:28s} n={n:>9,d} eager {r['eager'] * 1e3:8.2f} ms  jit {r['jit'] * 1e3:8.2f} ms  "
                  f"x{r['ratio']:.2f}  RSS +{r['grown_mb']:.1f} MB", flush=True)
    header = ["call", "n", "eager ms/call", "jit ms/call", "eager / jit", "<= 1.5x",
              f"RSS growth MB over {args.memory_calls} calls", "< 20 MB"]
    intro = (f"Devices: {jax.devices()}. Median of {args.calls} calls after 3 warm-up calls, fresh data of one "
             f"shape per call (4 inputs cycled); jit = `jax.jit` of the same call. Memory: resident-set growth "
             f"over {args.memory_calls} eager calls at n = {sizes[0]:,}. Load average at start {load0:.2f}, at "
             f"end {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores.")
    write_report(args.out, "# Eager calls vs jitted calls", intro, (header, rows), (header, rows), "Every call")
    return rows


if __name__ == "__main__":
    main()
