"""Eager calls against jitted ones, and memory over many eager calls.

Most users call a metric eagerly: ``ece(p, y)`` on NumPy arrays, in a loop. For every public
metric and decomposition of ``benchmarks.eager_calls.CALLS`` this benchmark times, in one
run and on the same inputs,

* the eager call (after three warm-up calls, fresh data of one shape on every call), and
* ``jax.jit`` of the same call (warmed up),

as the median per call at each ``--sizes`` n, with the ratio eager / jit (target <= 1.5x
after the first call), and the growth of the resident set over ``--memory-calls`` eager
calls at the smallest n (target < 20 MB in total).

The rest of the public surface (``benchmarks.eager_calls.LIBRARY_CALLS``: partitions,
group statistics, every calibrator's fit + predict, the Monte Carlo panel) is measured the
same way into ``eager_library``. Host fits (isotonic, top-N) have no jitted counterpart: their
row gives the eager time alone. The trained heads (Neural Calibration, SAG / VR-SAG, ILPS)
and the panel run at the smallest n only (a fit takes 0.1-1 s there), and their memory row
counts fewer calls (``5 x`` the compile-once test's repeats). A library row that makes two
public calls (a fit then its predict; ``kmeans_hist`` after the ``histogram_1d`` that builds
its input; ``summarize`` after ``group_stats``) is compared with the two calls jitted one by
one (``call.jitted``): ``jax.jit`` of the pair would be one program sharing passes over the
data between them (histogram binning: 2.1-2.6x faster than the two calls), which is not what
the target compares.

Run:  python -m benchmarks.bench_eager [--group metrics|library|all] [--sizes 10000,1000000]
      [--memory-calls 1000]
Writes benchmarks/results/eager.{md,csv} and eager_library.{md,csv}.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import jax
import numpy as np

import calib_jax
from benchmarks.bench_metrics import write_report
from benchmarks.eager_calls import CALLS, LIBRARY_CALLS, make_data, make_library_data

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


#: library calls measured at the smallest size only (trained heads, the whole panel)
_SMALLEST_ONLY = ("ilps", "neural_calibration", "sag_", "vrsag_", "montecarlo_evaluate")


def measure(name: str, n: int, calls: int, memory_calls: int, *, library: bool = False) -> dict:
    fn, jit_able = (LIBRARY_CALLS[name][0], LIBRARY_CALLS[name][1]) if library else (CALLS[name], True)
    rng, key = np.random.default_rng(0), jax.random.key(0)
    datas = [(make_library_data if library else make_data)(rng, key, i, n) for i in range(4)]
    for d in datas[:3]:  # warm-up: the first call compiles
        jax.block_until_ready(fn(d))
    eager = _median_time(fn, datas, calls)
    jit_s = raw_s = float("nan")
    if jit_able:
        jitted = getattr(fn, "jitted", None) or jax.jit(fn)
        jax.block_until_ready(jitted(datas[0]))
        jit_s = _median_time(jitted, datas, calls)
        if getattr(fn, "jitted", None) is None:
            # the same call traced without its input checks (calib_jax.unchecked): the cost of
            # the computation alone, so the checks' own cost is visible (a fresh function, so
            # no checked trace is cached for it)
            raw = jax.jit(lambda d: fn(d))
            with calib_jax.unchecked():
                jax.block_until_ready(raw(datas[0]))
            raw_s = _median_time(raw, datas, calls)
    grown = float("nan")
    if memory_calls:
        r0 = rss_mb()
        for i in range(memory_calls):
            jax.block_until_ready(fn(datas[i % len(datas)]))
        grown = rss_mb() - r0
    return {"eager": eager, "jit": jit_s, "raw": raw_s, "ratio": eager / jit_s, "grown_mb": grown}


def _verdict(ratio: float) -> str:
    return "host fit" if np.isnan(ratio) else ("met" if ratio <= 1.5 else "MISSED")


def run_group(names: list[str], sizes: list[int], calls: int, memory_calls: int, out: Path, *,
              library: bool) -> list[list]:
    load0 = os.getloadavg()[0]
    rows = []
    for name in names:
        for j, n in enumerate(sizes):
            if library and j > 0 and name.startswith(_SMALLEST_ONLY):
                continue
            mem = memory_calls if j == 0 else 0
            if library and mem:
                mem = min(mem, 5 * LIBRARY_CALLS[name][2])
            r = measure(name, n, calls, mem, library=library)
            rows.append([name, n, r["eager"] * 1e3, r["jit"] * 1e3, r["ratio"], _verdict(r["ratio"]),
                         r["raw"] * 1e3, r["eager"] / r["raw"], mem or "", r["grown_mb"],
                         "" if np.isnan(r["grown_mb"]) else ("met" if r["grown_mb"] < 20 else "MISSED")])
            print(f"{name:30s} n={n:>9,d} eager {r['eager'] * 1e3:8.2f} ms  jit {r['jit'] * 1e3:8.2f} ms  "
                  f"x{r['ratio']:.2f}  RSS +{r['grown_mb']:.1f} MB over {mem} calls", flush=True)
    header = ["call", "n", "eager ms/call", "jit ms/call", "eager / jit", "<= 1.5x",
              "jit unchecked ms/call", "eager / unchecked", "eager calls for memory", "RSS growth MB", "< 20 MB"]
    what = ("partitions, group statistics, calibrators' fit + predict and the Monte Carlo panel (a row that "
            "makes two public calls (fit then predict, histogram then k-means, group stats then summary) is "
            "compared with the two calls jitted one by one)" if library else "metrics and decompositions")
    intro = (f"Public {what}. Devices: {jax.devices()}. Median of {calls} calls after 3 warm-up calls, fresh "
             f"data of one shape per call (4 inputs cycled); jit = `jax.jit` of the same call (none for host "
             f"fits), which traces the same input checks (a failed one makes the output NaN); jit unchecked = "
             f"the call traced inside `calib_jax.unchecked()`, the computation alone (not for two-call rows). "
             f"Memory: resident-set growth over the given number of eager calls at n = {sizes[0]:,}. "
             f"Load average at start {load0:.2f}, at end {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores.")
    title = "# Eager calls vs jitted calls" + (": the rest of the library" if library else "")
    write_report(out, title, intro, (header, rows), (header, rows), "Every call")
    return rows


def main(argv: list[str] | None = None) -> list[list]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--group", choices=("metrics", "library", "all"), default="all")
    ap.add_argument("--sizes", default="10000,1000000")
    ap.add_argument("--calls", type=int, default=20, help="timed calls per size (median)")
    ap.add_argument("--memory-calls", type=int, default=1000)
    ap.add_argument("--only", default="", help="comma-separated subset of the calls")
    ap.add_argument("--out", type=Path, default=RESULTS / "eager")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    only = [c for c in args.only.split(",") if c]
    rows: list[list] = []
    if args.group in ("metrics", "all"):
        names = [c for c in only if c in CALLS] if only else list(CALLS)
        if names:
            rows += run_group(names, sizes, args.calls, args.memory_calls, args.out, library=False)
    if args.group in ("library", "all"):
        names = [c for c in only if c in LIBRARY_CALLS] if only else list(LIBRARY_CALLS)
        if names:
            rows += run_group(names, sizes, args.calls, args.memory_calls,
                              args.out.with_name(args.out.name + "_library"), library=True)
    return rows


if __name__ == "__main__":
    main()
