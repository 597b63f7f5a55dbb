"""The argsort of float32 scores on the running backend: ``jnp.argsort`` against one sort of packed
64-bit words (:func:`calib_jax._src.sorting.packed_argsort`) and the library's own
:func:`calib_jax._src.sorting.argsort` (on the CPU a host call into NumPy, on CUDA and ROCm the
packed words), side by side in one run.

Every metric that orders rows (AUC, the equal-mass ECE, Spearman's correlation, the
multicalibration error, the Monte Carlo panel) sorts through ``argsort``. ``jnp.argsort`` sorts
two operands (the values and an iota) with a float comparator that XLA runs through its generic
sort; the packed words are one operand of unsigned integers, which XLA:CPU sorts directly and
XLA:GPU can hand to a radix sort. The three give the same permutation (checked here on every
timed array: signed zeros and subnormal values one value, ties in index order), so the page is
about time only. The device session (``benchmarks/device/gpu_session.sh``) runs it on the GPU,
where the packed words are the library's branch since 2026-12-07 without a device measurement
before: its page there says whether that branch is the faster one.

    python -m benchmarks.bench_sort [--sizes 100000 1000000] [--repeats 10] [--out PATH]

Writes ``benchmarks/results/sort.{csv,md}`` (``--out`` another stem, e.g. a device's folder).
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


def _best_ms(fn: Any, x: jax.Array, repeats: int) -> float:
    """The fastest of ``repeats`` calls after a compiling one, in milliseconds."""
    jax.block_until_ready(fn(x))
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(x))
        best = min(best, time.perf_counter() - t0)
    return 1e3 * best


def scores(n: int, seed: int = 0) -> np.ndarray:
    """n float32 scores shaped like a CTR model's (a logistic of a normal logit), a tenth of
    them rounded to 3 decimals so that ties occur, as in logged scores."""
    rng = np.random.default_rng(seed)
    p = (1.0 / (1.0 + np.exp(-rng.normal(-3.5, 1.0, n)))).astype(np.float32)
    k = n // 10
    p[:k] = np.round(p[:k], 3)
    return p


def measure(sizes: Sequence[int], repeats: int) -> list[list[Any]]:
    """Rows ``(way, n, ms, over jnp.argsort)``; every way's permutation is checked equal first."""
    from calib_jax._src.sorting import argsort, packed_argsort

    ways = {"jnp.argsort (two operands, float comparator)": jax.jit(lambda v: jnp.argsort(v, stable=True)),
            "packed_argsort (one operand of 64-bit words)": jax.jit(packed_argsort),
            f"the library's argsort on {jax.default_backend()}": jax.jit(argsort)}
    rows: list[list[Any]] = []
    for n in sizes:
        x = jax.device_put(scores(n))
        orders = [np.asarray(fn(x)) for fn in ways.values()]
        for name, order in zip(ways, orders, strict=True):
            if not np.array_equal(order, orders[0]):
                raise AssertionError(f"{name}: another permutation than jnp.argsort's at n = {n}")
        times = {name: _best_ms(fn, x, repeats) for name, fn in ways.items()}
        base = next(iter(times.values()))
        rows += [[name, n, ms, ms / base] for name, ms in times.items()]
    return rows


def main(argv: Sequence[str] | None = None) -> list[list[Any]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000], help="rows to sort")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--out", default=str(RESULTS / "sort"))
    args = ap.parse_args(argv)
    from benchmarks.machine_speed import reference_seconds
    from benchmarks.pages import conditions, write_page

    started, load = time.perf_counter(), os.getloadavg()[0]
    reference = reference_seconds()
    rows = measure(args.sizes, args.repeats)
    packed = {r[1]: r[3] for r in rows if r[0].startswith("packed")}
    device = jax.devices()[0]
    text = (f"# The argsort of float32 scores on {device.platform} ({device.device_kind})\n\n"
            + conditions(started, load, reference)
            + f" Fastest of {args.repeats} calls after a compiling one; the same permutation from every way "
            "(checked). One sort of packed 64-bit words takes "
            + ", ".join(f"{ratio:.2f}" for ratio in packed.values()) + " times jnp.argsort's time at "
            + ", ".join(f"{n:,}" for n in packed) + " rows. `over_jnp_argsort`: each way's time over "
            "jnp.argsort's in this run.\n\n")
    write_page(args.out, text, ["way", "rows", "ms", "over_jnp_argsort"], rows)
    return rows


if __name__ == "__main__":
    main()
