"""Side-by-side timing of the modern calibration metrics against their references.

At n = 10^6 (one run, one machine) each calib_jax metric is jitted, warmed up and timed as
the best of several repeats, next to its reference implementation in the same run:
``relplot.smECE`` (smooth ECE), ``probcal`` (cumulative KS, ICI by loess) and ``mcgrad``
(Kuiper ECCE, multicalibration error) where installed, and plain-NumPy versions of the
same estimators otherwise.  The quadratic SKCE U-statistic is O(n²): it is timed at
``--n-skce`` rows (default 20 000) against a chunked NumPy U-statistic; the block
estimator runs at n.  Each metric is also timed vmapped over 64 trials of ``--n-vmap``
rows (default 10^5) against 64 sequential reference calls (extrapolated from 4).

Targets: sort-free metrics >= 10x the reference, sort-based ones (cumulative, MCE,
ECE-sweep, debiased ECE on equal-mass bins) >= 2x.

Run:  python -m benchmarks.bench_modern [--n 1000000]
Writes benchmarks/results/modern.{md,csv}.
"""

from __future__ import annotations

import argparse
import os
import time
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.bench_metrics import _optional, best_time, write_report
from calib_jax import unchecked

RESULTS = Path(__file__).resolve().parent / "results"


# ------------------------------------------------------------------ NumPy references


def np_cumulative(p, y, statistic="kuiper"):
    o = np.argsort(p, kind="stable")
    ps = p[o]
    c = np.cumsum((y - p)[o]) / p.size
    ends = np.append(np.flatnonzero(ps[1:] != ps[:-1]), p.size - 1)
    walk = np.concatenate([[0.0], c[ends]])
    return float(np.ptp(walk) if statistic == "kuiper" else np.max(np.abs(walk)))


def np_mce(p, y, fields, levels, min_samples=10):
    sd = lambda m: np.sqrt(np.sum(p[m] * (1 - p[m]))) / m.sum()  # noqa: E731
    best = 0.0
    masks = [np.ones(p.size, bool)] + [fields[:, f] == v for f in range(fields.shape[1]) for v in range(levels)]
    for m in masks:
        if m.sum() >= min_samples:
            s = sd(m)
            best = max(best, np_cumulative(p[m], y[m]) / s if s > 0 else 0.0)
    return best


def np_skce_uq(p, y, bw=0.1, chunk=1024):
    u = y - p
    num = 0.0
    for s in range(0, p.size, chunk):
        K = np.exp(-((p[s:s + chunk, None] - p[None, :]) ** 2) / (2 * bw * bw))
        num += u[s:s + chunk] @ (K @ u)
    num -= np.sum(u * u)
    return num / (p.size * (p.size - 1))


def np_skce_block(p, y, bw=0.1, B=2):
    nb = p.size // B
    P, U = p[:nb * B].reshape(nb, B), (y - p)[:nb * B].reshape(nb, B)
    K = np.exp(-((P[:, :, None] - P[:, None, :]) ** 2) / (2 * bw * bw))
    off = 1 - np.eye(B)
    return float(np.sum(U[:, :, None] * U[:, None, :] * K * off) / (nb * B * (B - 1)))


def np_quantile_ids(p, M):
    ps = np.sort(p)
    return np.searchsorted(ps[(np.arange(1, M) * p.size) // M], p, side="right")


def np_debiased(p, y, n_bins=15):
    ids = np_quantile_ids(p, n_bins)
    c = np.bincount(ids, minlength=n_bins).astype(float)
    sp, sy = np.bincount(ids, p, minlength=n_bins), np.bincount(ids, y, minlength=n_bins)
    ok = c > 1
    rate, conf = sy[ok] / c[ok], sp[ok] / c[ok]
    return float(np.sum(c[ok] / p.size * ((conf - rate) ** 2 - rate * (1 - rate) / (c[ok] - 1))))


def np_sweep(p, y, max_bins=100):
    o = np.argsort(p, kind="stable")
    ps, ys = p[o], y[o]
    pre_y = np.concatenate([[0.0], np.cumsum(ys)])
    pre_p = np.concatenate([[0.0], np.cumsum(ps)])
    n = p.size

    def sums(b):
        e = -(-np.arange(b + 1) * n // b)
        return np.diff(pre_p[e]), np.diff(pre_y[e]), np.diff(e)

    best = 1
    for b in range(2, min(max_bins, n) + 1):
        _, sy, c = sums(b)
        if np.all(np.diff(sy / c) >= 0):
            best = b
        else:
            break
    sp, sy, c = sums(best)
    return float(np.sum(np.abs(sp - sy)) / n)


def np_ici(p, y, M=512):
    lo, hi = p.min(), p.max()
    delta = (hi - lo) / (M - 1)
    h = max(1.06 * p.std() * p.size ** -0.2, delta)
    pos = (p - lo) / delta
    i0 = np.clip(np.floor(pos).astype(int), 0, M - 2)
    fr = pos - i0
    c0 = np.bincount(i0, 1 - fr, minlength=M) + np.bincount(i0 + 1, fr, minlength=M)
    cy = np.bincount(i0, (1 - fr) * y, minlength=M) + np.bincount(i0 + 1, fr * y, minlength=M)
    x = lo + np.arange(M) * delta
    d = x[None, :] - x[:, None]
    K = np.exp(-0.5 * (d / h) ** 2)
    s0, s1, s2 = K @ c0, (K * d) @ c0, (K * d * d) @ c0
    t0, t1 = K @ cy, (K * d) @ cy
    fit = (s2 * t0 - s1 * t1) / (s0 * s2 - s1 * s1)
    return float(np.mean(np.abs(p - (fit[i0] * (1 - fr) + fit[i0 + 1] * fr))))


# ------------------------------------------------------------------ cases


def data(n, seed):
    rng = np.random.default_rng(seed)
    z = rng.normal(-3.0, 1.2, n)
    p = 1.0 / (1.0 + np.exp(-z))
    o = 1.0 / (1.0 + np.exp(-(0.8 * z - 0.4 + rng.normal(0, 0.4, n))))
    y = (rng.uniform(size=n) < o).astype(np.float64)
    f = rng.integers(0, 8, (n, 2))
    return p, y, f


def build_cases(n: int, n_skce: int, seed: int = 0):
    from calib_jax import metrics as M

    p, y, f = data(n, seed)
    ps, ys, _ = data(n_skce, seed + 1)
    j = lambda a: jnp.asarray(a, jnp.float32)  # noqa: E731
    relplot = _optional("relplot")
    probcal = _optional("probcal.metrics")
    mcgrad = _optional("mcgrad.metrics")

    def have(m):
        return not isinstance(m, Exception)

    cases = []

    def case(name, kind, fn, args, refs, *, rows=n, vmap_fn=None):
        """``fn(*args)`` is the calib_jax metric (args: JAX arrays); ``refs`` a list of
        (label, callable on NumPy (p, y, f), available)."""
        cases.append(dict(name=name, kind=kind, fn=fn, args=args, rows=rows,
                          refs=[(a, r) for a, r, ok in refs if ok], missing=[a for a, _, ok in refs if not ok]))

    pj, yj, fj = j(p), j(y), jnp.asarray(f, jnp.int32)
    case("smooth_ece", "sort-free", M.smooth_ece, (pj, yj),
         [("relplot smECE", lambda p, y, f: relplot.smECE(p, y), have(relplot))])
    case("cumulative KS", "sort-based", partial(M.cumulative_calibration_error, statistic="ks"), (pj, yj),
         [("probcal ecce (KS)", lambda p, y, f: probcal.ecce(y, p).stat_max, have(probcal)),
          ("numpy", lambda p, y, f: np_cumulative(p, y, "ks"), True)])
    case("cumulative Kuiper", "sort-based", M.cumulative_calibration_error, (pj, yj),
         [("mcgrad ecce", lambda p, y, f: mcgrad.ecce(y, p), have(mcgrad)),
          ("numpy", lambda p, y, f: np_cumulative(p, y), True)])
    case("multicalibration (2 fields x 8, depth 1)", "sort-based",
         partial(M.multicalibration_error, n_levels=8), (pj, yj, fj),
         [("numpy (loop over segments)", lambda p, y, f: np_mce(p, y, f, 8), True)])
    case("skce block (B=64)", "sort-free", partial(M.skce, estimator="block", block_size=64), (pj, yj),
         [("numpy", lambda p, y, f: np_skce_block(p, y, B=64), True)])
    case(f"skce unbiased U-stat (n={n_skce:,})", "sort-free", M.skce, (j(ps), j(ys)),
         [("numpy chunked", lambda p, y, f: np_skce_uq(p, y), True)], rows=n_skce)
    case("debiased_ece_sq (15 eq-mass bins)", "sort-based", M.debiased_ece_sq, (pj, yj),
         [("numpy", lambda p, y, f: np_debiased(p, y), True)])
    case("ece_sweep (<=100 bins)", "sort-based", M.ece_sweep, (pj, yj),
         [("probcal ece_sweep", lambda p, y, f: probcal.ece_sweep(y, p), have(probcal)),
          ("numpy prefix sums", lambda p, y, f: np_sweep(p, y), True)])
    case("ici (512-node local linear)", "sort-free", M.ici, (pj, yj),
         [("numpy (same estimator)", lambda p, y, f: np_ici(p, y), True),
          ("probcal ici (loess)", lambda p, y, f: probcal.ici(y, p), have(probcal))])
    return cases, (p, y, f), (ps, ys)


def run(n, n_skce, n_vmap, trials, repeats, ref_repeats, seed=0):
    cases, (p, y, f), (ps, ys) = build_cases(n, n_skce, seed)
    pv, yv, fv = data(n_vmap, seed + 2)
    rng = np.random.default_rng(seed + 3)
    PV = jnp.asarray(np.stack([np.clip(pv + rng.normal(0, 0.002, n_vmap), 0, 1) for _ in range(trials)]),
                     jnp.float32)
    YV = jnp.asarray(np.stack([yv] * trials), jnp.float32)
    FV = jnp.asarray(np.stack([fv] * trials), jnp.int32)
    rows, summary = [], []
    for c in cases:
        fn = jax.jit(c["fn"])
        t_jax = best_time(lambda fn=fn, c=c: fn(*c["args"]), repeats)
        fu = jax.jit(c["fn"])
        with unchecked():  # the same call traced without its input checks (what they cost)
            jax.block_until_ready(fu(*c["args"]))
        t_unc = best_time(lambda fu=fu, c=c: fu(*c["args"]), repeats)
        big = c["rows"] == n
        refs = [(a, best_time(lambda r=r, big=big: r(p, y, f) if big else r(ps, ys, None), ref_repeats))
                for a, r in c["refs"]]
        # vmapped over trials (64 x n_vmap rows), against sequential reference calls
        t_vmap = t_ref_loop = float("nan")
        if big:
            vf = jax.jit(jax.vmap(c["fn"]))
            vargs = (PV, YV, FV)[: len(c["args"])]
            t_vmap = best_time(lambda vf=vf, vargs=vargs: vf(*vargs), 1)
            counted = [r for a, r in c["refs"] if not a.startswith("probcal ici")]
            if counted:
                k = 4
                t0 = time.perf_counter()
                for t in range(k):
                    counted[0](np.asarray(PV[t], np.float64), yv, fv)
                t_ref_loop = (time.perf_counter() - t0) / k * trials
        target = 10.0 if c["kind"] == "sort-free" else 2.0
        counted = [(a, t) for a, t in refs if not a.startswith("probcal ici")]
        fastest = min(counted, key=lambda r: r[1]) if counted else None
        for a, t in refs:
            rows.append([c["name"], c["kind"], c["rows"], t_jax, a, t, t / t_jax])
        for a in c["missing"]:
            rows.append([c["name"], c["kind"], c["rows"], t_jax, f"{a} (not installed)", "", ""])
        if fastest:
            ratio = fastest[1] / t_jax
            verdict = "met" if ratio >= target else "MISSED"
            vr = t_ref_loop / t_vmap if np.isfinite(t_vmap) and np.isfinite(t_ref_loop) else float("nan")
            summary.append([c["name"], c["kind"], c["rows"], t_jax, fastest[0], fastest[1], ratio, f">= {target:g}x",
                            verdict, t_vmap, t_ref_loop, vr, t_unc])
            print(f"{c['name']:<42} calib_jax {t_jax * 1e3:9.2f} ms | {fastest[0]:<28} {fastest[1] * 1e3:9.2f} ms"
                  f" | {ratio:7.2f}x ({verdict}) | vmap {trials}x{n_vmap:,}: {t_vmap:7.3f} s vs loop "
                  f"{t_ref_loop:7.3f} s ({vr:5.1f}x)", flush=True)
    return rows, summary


def main(argv: list[str] | None = None) -> list[list]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--n-skce", type=int, default=20_000)
    ap.add_argument("--n-vmap", type=int, default=100_000)
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ref-repeats", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--note", default="", help="free text recorded with the results (e.g. machine shared)")
    ap.add_argument("--out", type=Path, default=RESULTS / "modern")
    args = ap.parse_args(argv)
    print(f"devices: {jax.devices()}  n = {args.n:,}")
    load = os.getloadavg()[0]
    rows, summary = run(args.n, args.n_skce, args.n_vmap, args.trials, args.repeats, args.ref_repeats, args.seed)
    load_end = os.getloadavg()[0]
    f = lambda x: "" if x == "" else f"{x:.5f}"  # noqa: E731
    header = ["metric", "kind", "rows", "calib_jax (s)", "reference", "reference (s)", "speed-up"]
    all_rows = [[r[0], r[1], r[2], f(r[3]), r[4], f(r[5]), r[6] if r[6] == "" else f"{r[6]:.2f}"] for r in rows]
    s_header = ["metric", "kind", "rows", "calib_jax (s)", "fastest reference", "reference (s)", "speed-up",
                "target", "verdict", f"vmap {args.trials} trials (s)", "reference loop (s)", "vmap speed-up",
                "calib_jax unchecked (s)"]
    s_rows = [[r[0], r[1], r[2], f(r[3]), r[4], f(r[5]), f"{r[6]:.2f}", r[7], r[8], f"{r[9]:.3f}",
               f"{r[10]:.3f}", f"{r[11]:.1f}", f(r[12])] for r in summary]
    write_report(
        args.out, f"# Modern calibration metrics vs references (n = {args.n:,})",
        f"Devices: {jax.devices()}. calib_jax: jitted float32 with its input checks (as users call it; the last "
        f"column: the same call traced under `calib_jax.unchecked()`), warmed up, best of {args.repeats}; references "
        f"(float64 NumPy / third-party): best of {args.ref_repeats} after one warm-up call. Speed-up = reference "
        "time / calib_jax time against the fastest counted reference (probcal's loess ICI is a different "
        "smoother, shown but not counted). Targets: sort-free >= 10x, sort-based >= 2x. The vmap columns time "
        f"`jit(vmap(metric))` over {args.trials} trials of {args.n_vmap:,} rows against {args.trials} sequential "
        "calls of the first counted reference (extrapolated from 4).\n\n"
        f"Machine load (1-min load average) at start {load:.2f}, at end {load_end:.2f} on "
        f"{os.cpu_count()} cores. {args.note}", (s_header, s_rows), (header, all_rows), "All references")
    return rows


if __name__ == "__main__":
    main()
