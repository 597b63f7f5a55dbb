"""VR-SAG fit time at scale, side by side with Platt scaling on the same rows.

Default: n = 10^6 validation rows, embedding m = 64, VR-SAG+PS with P = 10 partitions and
K = 3 groups (the paper's defaults, 60 L-BFGS iterations), target < 60 s on 2 CPU cores.
Both calibrators are timed twice: the first call includes XLA compilation, the second is
the steady-state fit.  The synthetic data has two latent regimes with opposite
miscalibration readable from the embedding, so the fit does real work.

    python -m benchmarks.bench_vrsag                 # n = 1e6
    python -m benchmarks.bench_vrsag --n 200000      # smaller
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np


def make_data(n: int, m: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, m)).astype(np.float32)
    true = -3.3 + 0.8 * z[:, 0] + 0.4 * z[:, 1]
    o = np.where(z[:, 2] > 0, 1.4 * true + 0.7, 0.8 * true - 0.4).astype(np.float32)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-true))).astype(np.float32)
    return o, y, z


def _timed(fn) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    return out, time.perf_counter() - t0


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--m", type=int, default=64)
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--groups", type=int, default=3)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--max-rows", type=int, default=100_000,
                    help="rows used for the head fit (sag.fit max_rows); 0 = full batch")
    args = ap.parse_args(argv)

    from calib_jax.calibrators import platt, sag

    o, y, z = make_data(args.n, args.m)
    ctx = {"embedding": z}
    kw = dict(context=ctx, n_groups=args.groups, n_partitions=args.partitions,
              n_steps=args.steps, key=jax.random.key(0), max_rows=args.max_rows or None)
    res: dict[str, float] = {}
    _, res["vrsag_first_s"] = _timed(lambda: sag.fit_vrsag(o, y, **kw))
    prm, res["vrsag_s"] = _timed(lambda: sag.fit_vrsag(o, y, **kw))
    _, res["vrsag_predict_s"] = _timed(lambda: sag.predict(prm, o, context=ctx))
    _, res["platt_first_s"] = _timed(lambda: platt.fit(o, y))
    _, res["platt_s"] = _timed(lambda: platt.fit(o, y))
    res["ratio_vrsag_over_platt"] = res["vrsag_s"] / max(res["platt_s"], 1e-9)
    print(f"n={args.n} m={args.m} P={args.partitions} K={args.groups} steps={args.steps} "
          f"max_rows={args.max_rows or 'all'} devices={jax.devices()}")
    for k, v in res.items():
        print(f"  {k:24s} {v:10.3f}")
    from calib_jax.io import write_table

    cfg = f"n={args.n}, m={args.m}, P={args.partitions}, K={args.groups}, steps={args.steps}, " \
          f"max_rows={args.max_rows or 'all'}"
    write_table(Path(__file__).resolve().parent / "results" / "vrsag",
                ["quantity", "value", "config"], [[k, v, cfg] for k, v in res.items()], digits=3)
    return res


if __name__ == "__main__":
    main()
