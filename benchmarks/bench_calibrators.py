"""Side-by-side timing of calib_jax calibrators against scikit-learn / scipy / betacal.

At n = 10^6 (same run, same machine, same data) each fit is timed as the best of
``--repeats`` calls after one warm-up call (the warm-up includes XLA compilation, reported
separately as ``first_call_s``).  calib_jax works in float32 on device arrays; the anchors
get float64 NumPy arrays (their native input).

Targets: isotonic fit+predict no slower than scikit-learn's
``IsotonicRegression``; temperature and Platt fits >= 3x faster than scikit-learn's
``LogisticRegression`` (lbfgs) on the same one-feature problem.

A Monte Carlo row fits Platt scaling on 256 trials of 10^4 rows in one ``jax.vmap`` call
against a Python loop of scikit-learn fits.

Run:  python -m benchmarks.bench_calibrators [--n 1000000] [--repeats 3]
Writes benchmarks/results/calibrators.{csv,md}.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import expit

from calib_jax import io
from calib_jax.calibrators import beta, histogram, ilps, isotonic, platt, temperature

RESULTS = Path(__file__).resolve().parent / "results"


def timed(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """(first call incl. compilation, best of ``repeats`` later calls) in seconds."""
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    first = time.perf_counter() - t0
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t0)
    return first, best


def make_data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Over-confident logits (true temperature 2.3, bias -0.4) and labels."""
    gen = np.random.default_rng(seed)
    z = (gen.normal(size=n) * 3.0).astype(np.float32).astype(np.float64)
    y = (gen.uniform(size=n) < expit(z / 2.3 - 0.4)).astype(np.float64)
    return z, y


def main(argv: list[str] | None = None) -> list[list[object]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(RESULTS / "calibrators"))
    args = ap.parse_args(argv)
    n, r = args.n, args.repeats

    from scipy.optimize import minimize_scalar
    from sklearn.isotonic import IsotonicRegression
    from sklearn.linear_model import LogisticRegression

    z, y = make_data(n)
    zj, yj = jnp.asarray(z, jnp.float32), jnp.asarray(y, jnp.float32)
    zc = z.reshape(-1, 1)

    def sk_temperature():
        return LogisticRegression(C=1e6, fit_intercept=False).fit(zc, y).coef_

    def sk_platt():
        return LogisticRegression(C=1e6).fit(zc, y).coef_

    def scipy_temperature():
        def nll(t):
            u = z / t
            return np.mean(y * np.logaddexp(0, -u) + (1 - y) * np.logaddexp(0, u))
        return minimize_scalar(nll, bounds=(0.05, 20.0), method="bounded").x

    def sk_isotonic():
        return IsotonicRegression(out_of_bounds="clip").fit(z, y).predict(z)

    def ours_isotonic():
        return isotonic.predict(isotonic.fit(z, y), zj)

    cases: list[tuple[str, Callable[[], object], str, Callable[[], object] | None, float | None]] = [
        ("temperature fit", lambda: temperature.fit(zj, yj).beta,
         "sklearn LogisticRegression(fit_intercept=False)", sk_temperature, 3.0),
        ("temperature fit", lambda: temperature.fit(zj, yj).beta,
         "scipy minimize_scalar (textbook)", scipy_temperature, None),
        ("platt fit", lambda: platt.fit(zj, yj).a, "sklearn LogisticRegression", sk_platt, 3.0),
        ("isotonic fit+predict", ours_isotonic, "sklearn IsotonicRegression", sk_isotonic, 1.0),
    ]
    try:
        from betacal import BetaCalibration

        pz = expit(z)
        cases.append(("beta fit", lambda: beta.fit(zj, yj).a, "betacal BetaCalibration('abm')",
                      lambda: BetaCalibration("abm").fit(pz, y), None))
    except ImportError:
        pass
    # Monte Carlo: many small fits at once (fixed-step Newton => one vmapped program).
    n_trials, n_small = 256, 10_000
    zs_np = np.stack([make_data(n_small, seed=s)[0] for s in range(n_trials)])
    ys_np = np.stack([make_data(n_small, seed=s)[1] for s in range(n_trials)])
    zs, ys = jnp.asarray(zs_np, jnp.float32), jnp.asarray(ys_np, jnp.float32)
    vm_platt = jax.jit(jax.vmap(platt.fit))

    def sk_platt_loop():
        return [LogisticRegression(C=1e6).fit(zs_np[i].reshape(-1, 1), ys_np[i]).coef_
                for i in range(n_trials)]

    cases.append((f"platt fit, vmap over {n_trials} trials x {n_small:,}",
                  lambda: vm_platt(zs, ys).a, "sklearn LogisticRegression, Python loop",
                  sk_platt_loop, None))
    cases.append(("histogram_binning fit (15 bins)",
                  lambda: histogram.fit(zj, yj).values, "-", None, None))
    cases.append(("ilps fit (K=100, <=300 L-BFGS its)", lambda: ilps.fit(zj, yj).values, "-",
                  None, None))

    header = ["task", "calib_jax_s", "calib_jax_first_call_s", "anchor", "anchor_s",
              "speedup", "target", "met"]
    rows: list[list[object]] = []
    cache: dict[str, tuple[float, float]] = {}
    print(f"n = {n:,}, best of {r} (after warm-up); devices {jax.devices()}")
    for task, ours, anchor_name, anchor, target in cases:
        if task not in cache:
            cache[task] = timed(ours, r)
        first, t_ours = cache[task]
        if anchor is None:
            rows.append([task, t_ours, first, anchor_name, float("nan"), float("nan"), "-", "-"])
            print(f"{task:40s} calib_jax {t_ours:8.4f} s (first call {first:.2f} s)")
            continue
        _, t_anchor = timed(anchor, r)
        speed = t_anchor / t_ours
        met = "-" if target is None else ("yes" if speed >= target else "NO")
        rows.append([task, t_ours, first, anchor_name, t_anchor, speed,
                     "-" if target is None else f">= {target:g}x", met])
        print(f"{task:40s} calib_jax {t_ours:8.4f} s | {anchor_name:45s} {t_anchor:8.4f} s"
              f" | ratio {speed:6.2f}x {'' if target is None else f'(target >= {target:g}x: {met})'}")
    io.write_table(args.out, header, rows, digits=4)
    return rows


if __name__ == "__main__":
    main()
