"""Throughput of the data layer at the default scale.

* simulator: logged impressions per second (auction and random exposure), with the
  one-off compilation reported separately from the steady state;
* backbone: training rows per second (one epoch of Adam, batch 1024) and prediction rows
  per second on the default log.

    python -m benchmarks.bench_data [--chunks N]
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import jax
import numpy as np

from calib_jax.data import backbone as bb
from calib_jax.data import simulator as sim


def _bench_simulator(cfg: sim.SimulatorConfig, exposure: str) -> dict[str, float]:
    key = jax.random.key(0)
    t0 = time.perf_counter()
    times, n = [], 0
    parts = []
    for _, imp, _ in sim.iter_chunks(cfg, key, exposure=exposure):
        times.append(time.perf_counter())
        n += len(imp)
        parts.append(imp)
    total = time.perf_counter() - t0
    first = times[0] - t0  # world + chunk compilation + first chunk
    steady = (times[-1] - times[0]) / max(len(times) - 1, 1)
    per_chunk = n / len(times)
    return {"impressions": n, "total_s": total, "first_chunk_s": first,
            "steady_chunk_s": steady, "steady_imp_per_s": per_chunk / steady,
            "overall_imp_per_s": n / total}


def _bench_backbone(cfg: sim.SimulatorConfig) -> dict[str, float]:
    log = sim.simulate(cfg, jax.random.key(0))
    bcfg = bb.BackboneConfig()
    cols = [sim.FIELD_NAMES.index(f) for f in bcfg.fields]
    cards = [sim.field_cardinalities(cfg)[f] for f in bcfg.fields]
    n = len(log)
    fields = log.fields[:, cols]
    # warm-up: compile on a small slice with the same batch shapes
    small = dataclasses.replace(bcfg, neg_sample_rate=1.0)
    bb.train_backbone(fields[:4096], log.click[:4096], cardinalities=cards,
                      dense=log.dense[:4096], config=small, key=jax.random.key(1))
    t0 = time.perf_counter()
    trained = bb.train_backbone(fields, log.click, cardinalities=cards, dense=log.dense,
                                config=small, key=jax.random.key(1))
    jax.block_until_ready(trained.params)
    train_s = time.perf_counter() - t0
    bb.predict(trained, fields[:65_536], log.dense[:65_536])
    t0 = time.perf_counter()
    bb.predict(trained, fields, log.dense)
    pred_s = time.perf_counter() - t0
    return {"rows": n, "train_s": train_s, "train_rows_per_s": n / train_s,
            "predict_s": pred_s, "predict_rows_per_s": n / pred_s}


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    ap = argparse.ArgumentParser(description="data-layer throughput")
    ap.add_argument("--chunks", type=int, default=None, help="override n_chunks")
    a = ap.parse_args(argv)
    cfg = sim.default_config(**({"n_chunks": a.chunks} if a.chunks else {}))
    print(f"devices: {jax.devices()}  simulator: {cfg.n_requests} requests in "
          f"{cfg.n_chunks} chunks of {cfg.requests_per_chunk}")
    res = {f"simulator ({e})": _bench_simulator(cfg, e) for e in ("auction", "random")}
    res["backbone"] = _bench_backbone(cfg)
    print(f"{'benchmark':<22} {'rows':>10} {'total s':>9} {'first s':>9} {'rows/s':>12} "
          f"{'steady rows/s':>14}")
    for name, r in res.items():
        if name.startswith("simulator"):
            print(f"{name:<22} {r['impressions']:>10d} {r['total_s']:>9.2f} "
                  f"{r['first_chunk_s']:>9.2f} {r['overall_imp_per_s']:>12.0f} "
                  f"{r['steady_imp_per_s']:>14.0f}")
        else:
            print(f"{'backbone train (1 ep)':<22} {r['rows']:>10d} {r['train_s']:>9.2f} "
                  f"{'':>9} {r['train_rows_per_s']:>12.0f}")
            print(f"{'backbone predict':<22} {r['rows']:>10d} {r['predict_s']:>9.2f} "
                  f"{'':>9} {r['predict_rows_per_s']:>12.0f}")
    return res


if __name__ == "__main__":
    np.set_printoptions(precision=4)
    main()
