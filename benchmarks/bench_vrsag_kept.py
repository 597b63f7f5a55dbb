"""The lock-step VR-SAG evaluation: the hand-derived gradient that keeps the softmax weights,
side by side with automatic differentiation of the blocked objective, in the same process.

The lock-step solver evaluates every partition's objective (eq. 11 of "Calibration is
Grouping", anonymous authors, under review) in one pass over the embedding. Its gradient is
either

* ``autodiff``: ``jax.value_and_grad`` of :func:`calib_jax.calibrators.sag._objective_all`,
  whose ``jax.checkpoint`` recomputes every block's forward pass (two head products and the
  transcendentals twice), or
* ``kept``: :func:`calib_jax.calibrators.sag._value_and_grad_stored`, one forward pass that
  keeps the (P, K, n) softmax weights, then one backward pass (the fit's path while the kept
  array is at most ``sag._KEEP_LIMIT_BYTES``).

Timings of one process vary on this machine by tens of percent, so the two are timed
interleaved (``--repeats`` rounds of one call each, the median reported), after a compiling
call each; then one lock-step fit of every step (``tol_grad = tol_change = 0``) with each, on
the same data as ``bench_vrsag`` (m = 64, P = 10, K = 3, 100 steps). ``ratio`` is autodiff over
kept (above 1: kept is faster); ``max_rel_diff`` the largest relative difference of the final
objectives of the two fits (float32 rounding of the two gradients, which moves the iterates
of a non-convex fit).

    python -m benchmarks.bench_vrsag_kept [--n 100000 400000 1000000] [--repeats 9]

Writes benchmarks/results/vrsag_kept.{csv,md}.
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

from benchmarks.bench_vrsag import make_data
from benchmarks.pages import write_page

RESULTS = Path(__file__).resolve().parent / "results"


def _fit_all_steps(o, y, z, *, steps: int, kept: bool) -> tuple[float, np.ndarray]:
    """One lock-step fit of every step; seconds (after a compiling fit) and final objectives."""
    from calib_jax.calibrators import sag

    saved = sag._KEEP_LIMIT_BYTES
    sag._KEEP_LIMIT_BYTES = saved if kept else 0
    try:
        jax.clear_caches()  # the limit is read when the batched rule is traced
        theta0 = sag.init_params(jax.random.key(0), z.shape[1], n_groups=3, n_partitions=10)
        stop = sag.StopRule(0.0, 0.0, jnp.inf)
        kw = dict(lam=jnp.float32(0.1), lam_v=jnp.float32(0.5), stop=stop, n_steps=steps, use_beta=True,
                  head_bias=True, solver="lockstep")
        zt, v = jnp.asarray(z.T), jnp.ones(len(o), jnp.float32)
        jax.block_until_ready(sag._fit_soft(theta0, o, y, zt, v, **kw))
        t0 = time.perf_counter()
        _, values = jax.block_until_ready(sag._fit_soft(theta0, o, y, zt, v, **kw))
        return time.perf_counter() - t0, np.asarray(values[:, -1])
    finally:
        sag._KEEP_LIMIT_BYTES = saved
        jax.clear_caches()


def measure(n: int, repeats: int, steps: int) -> list[list[Any]]:
    """Rows ``[n, quantity, autodiff, kept, ratio]`` for one size."""
    from calib_jax.calibrators import sag

    o, y, z = (jnp.asarray(a) for a in make_data(n, 64))
    theta = sag.init_params(jax.random.key(1), 64, n_groups=3, n_partitions=10)
    zt, sgn, p, v = z.T, 2.0 * y - 1.0, jax.nn.sigmoid(o), jnp.ones_like(o)
    args = (o, sgn, zt, p, v, jnp.float32(0.1), jnp.float32(0.5), True, True)
    auto = jax.jit(jax.value_and_grad(lambda t: jnp.sum(sag._objective_all(t, *args))))
    kept = jax.jit(lambda t: sag._value_and_grad_stored(t, *args, z_rows=z))  # both layouts, as the fit
    fns = {"autodiff": auto, "kept": kept}
    times: dict[str, list[float]] = {k: [] for k in fns}
    for f in fns.values():
        jax.block_until_ready(f(theta))
    for _ in range(repeats):
        for k, f in fns.items():
            t0 = time.perf_counter()
            jax.block_until_ready(f(theta))
            times[k].append(time.perf_counter() - t0)
    ev = {k: float(np.median(t)) for k, t in times.items()}
    rows = [[n, "evaluation_s (value and gradient, 10 partitions)", ev["autodiff"], ev["kept"],
             ev["autodiff"] / ev["kept"]]]
    fit_auto, v_auto = _fit_all_steps(o, y, z, steps=steps, kept=False)
    fit_kept, v_kept = _fit_all_steps(o, y, z, steps=steps, kept=True)
    rows.append([n, f"lockstep_fit_s ({steps} steps)", fit_auto, fit_kept, fit_auto / fit_kept])
    rows.append([n, "final objective max_rel_diff", float(np.max(np.abs(v_auto - v_kept) / np.abs(v_auto))), "", ""])
    kept_mb = sag._kept_bytes(10, 3, n) / 2 ** 20
    rows.append([n, f"kept array MiB (the fit keeps it up to {sag._KEEP_LIMIT_BYTES / 2 ** 20:g} MiB)", "", kept_mb,
                 "kept" if kept_mb * 2 ** 20 <= sag._KEEP_LIMIT_BYTES else "autodiff"])
    for r in rows:
        print(*r, flush=True)
    return rows


def main(argv: Sequence[str] | None = None) -> list[list[Any]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[100_000, 400_000, 1_000_000])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--out", default=str(RESULTS / "vrsag_kept"))
    args = ap.parse_args(argv)
    load = os.getloadavg()[0]
    rows = [r for n in args.n for r in measure(n, args.repeats, args.steps)]
    header = ["n", "quantity", "autodiff", "kept", "ratio"]
    out = Path(args.out)
    text = (f"# VR-SAG lock-step evaluation: kept softmax weights against autodiff\n\n"
            f"m = 64, P = 10, K = 3; evaluations timed interleaved, median of {args.repeats}; 1-min load average "
            f"{load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end, on {os.cpu_count()} cores, "
            f"{jax.devices()[0].platform}. Method: `benchmarks/bench_vrsag_kept.py` (module docstring).\n\n")
    write_page(out, text, header, rows)
    return rows


if __name__ == "__main__":
    main()
