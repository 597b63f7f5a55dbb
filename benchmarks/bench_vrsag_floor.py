"""The floor of a VR-SAG fit on this machine: what one evaluation of the objective must cost.

One evaluation (value and gradient) of the VR-SAG objective for all P partitions does, at the
least:

* the head products: ``h = W_all^T z^T`` with ``W_all`` (m, P*K) for the logits of every
  (row, partition, group), and ``z^T g`` for the gradient of ``W_all``: 2 x 2 n m P K floating
  point operations, reading the embedding z (n, m) float32 at least once each;
* the transcendentals of the fused objective (``calib_jax.calibrators.sag._objective``): per
  (row, partition) two exponentials per group (the softmax weight and the sigmoid of the
  observed label) and two logarithms (the mixture's numerator and denominator), i.e.
  (2K + 2) n P; the backward pass adds none.

This benchmark times each part alone on this machine, in one ``jit`` each, best of 50, on one
block of ``BLOCK`` rows, and scales it to n rows: the two products as one XLA dot each
(``precision=HIGHEST``, the fit's), and ``jnp.exp`` on (2K + 2) x block x P float32 (a
logarithm costs about what an exponential costs on XLA:CPU; both are polynomial
approximations). Timed on the whole embedding instead, the parts measure the memory (a
(P K, n) array of logits at 10^6 rows is 120 MB), which a blocked program does not pay; one
plain read of the whole embedding is reported beside them. Their sum is the floor of one
evaluation; times the evaluations a 100-step fit makes (``evals_per_step_all_steps`` of
``benchmarks/results/vrsag.csv``, from the same machine) it is the floor of a fit, set beside the
measured sequential and lock-step fits and the targets (1.5 s at 10^5 rows, 15 s at 10^6). The
fits' own times come from ``vrsag.csv``; rerun ``python -m benchmarks.bench_vrsag`` first when the
fit changed. Beside the floor: ``lockstep_eval_s``, one evaluation of the lock-step solver's
batched objective (all partitions, the rows in blocks), timed here, and
``lockstep_value_only_s``, its value without the gradient (one forward pass: the gradient's
pass recomputes each block's forward, ``jax.checkpoint``, because the variance penalty needs
every group's mean before any row's gradient), and
``lockstep_evals_per_step``, the lock-step fit's time over 100 of those: the batched evaluations
it makes per step (the lock step waits for the partition whose line search is longest);
``sequential_eval_s`` is ``vrsag.csv``'s ``eval_s`` (P times one partition's evaluation).

    python -m benchmarks.bench_vrsag_floor [--n 100000 1000000]

Writes benchmarks/results/vrsag_floor.{csv,md}.
"""

from __future__ import annotations

import argparse
import csv
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
TARGETS = {100_000: 1.5, 1_000_000: 15.0}
#: rows per timed block: its embedding (64 x 16,384 float32, 4 MB), head logits and
#: transcendentals stay near the caches, as in the lock-step solver's row blocks (4,096 rows)
BLOCK = 16_384


def _best(fn, *args, repeats: int = 5) -> float:
    jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - t0)
    return best


def _fit_times(path: Path) -> dict[tuple[int, str], float]:
    if not path.exists():
        return {}
    with path.open() as f:
        return {(int(r["n"]), r["quantity"]): float(r["value"]) for r in csv.DictReader(f)}


def _lockstep_eval_s(n: int, m: int, P: int, K: int) -> tuple[float, float]:
    """One evaluation of the lock-step solver's objective for all P partitions (its batched
    value and gradient, the rows walked in blocks), and its value alone, on the data of
    ``bench_vrsag``."""
    from benchmarks.bench_vrsag import make_data
    from calib_jax.calibrators import sag

    o, y, z = (jnp.asarray(a) for a in make_data(n, m))
    theta0 = sag.init_params(jax.random.key(0), m, n_groups=K, n_partitions=P)
    data = (o, 2.0 * y - 1.0, z.T, jax.nn.sigmoid(o), jnp.ones_like(o), jnp.float32(0.1), jnp.float32(0.5))
    vg = sag._value_and_grad_all(True, True)
    value = jax.jit(lambda t: sag._objective_all(t, *data, True, True))
    return _best(jax.jit(jax.vmap(lambda t: vg(t, data, None))), theta0, repeats=10), _best(value, theta0, repeats=10)


def floor_one(n: int, m: int, P: int, K: int, steps: int, fits: dict[tuple[int, str], float], *,
              block: int = BLOCK) -> list[list[Any]]:
    rng = np.random.default_rng(0)
    b = min(block, n)  # the parts are timed on one block of rows and scaled to n (see the docstring)
    scale = n / b
    zt = jnp.asarray(rng.normal(size=(m, b)).astype(np.float32))
    w = jnp.asarray(rng.normal(size=(m, P * K)).astype(np.float32))
    g = jnp.asarray(rng.normal(size=(P * K, b)).astype(np.float32))
    hi = jax.lax.Precision.HIGHEST
    forward = jax.jit(lambda w, zt: jnp.matmul(w.T, zt, precision=hi))  # (P K, b): every head's logits
    backward = jax.jit(lambda zt, g: jnp.matmul(zt, g.T, precision=hi))  # (m, P K): the gradient of W_all
    n_trans = (2 * K + 2) * n * P
    x = jnp.asarray(rng.uniform(-4, 0, (2 * K + 2) * b * P).astype(np.float32))
    exp = jax.jit(jnp.exp)
    z_all = jnp.asarray(rng.normal(size=(m, n)).astype(np.float32))
    read = jax.jit(jnp.sum)
    res: dict[str, float] = {}
    res["block_rows"] = float(b)
    res["lockstep_eval_s"], res["lockstep_value_only_s"] = _lockstep_eval_s(n, m, P, K)
    res["head_forward_s"] = scale * _best(forward, w, zt, repeats=50)
    res["head_backward_s"] = scale * _best(backward, zt, g, repeats=50)
    res["embedding_read_s"] = _best(read, z_all)
    res["embedding_read_gb_per_s"] = 4.0 * n * m / res["embedding_read_s"] / 1e9
    res["head_gflop_per_s"] = 4.0 * n * m * P * K / (res["head_forward_s"] + res["head_backward_s"]) / 1e9
    res["transcendentals_per_eval"] = float(n_trans)
    res["transcendentals_s"] = scale * _best(exp, x, repeats=50)
    res["ns_per_transcendental"] = 1e9 * res["transcendentals_s"] / n_trans
    res["floor_eval_s"] = res["head_forward_s"] + res["head_backward_s"] + res["transcendentals_s"]
    res["lockstep_eval_over_floor"] = res["lockstep_eval_s"] / res["floor_eval_s"]
    if (n, "eval_s") in fits:  # P x one partition's evaluation, as the sequential fit runs them
        res["sequential_eval_s"] = fits[(n, "eval_s")]
        res["sequential_eval_over_floor"] = res["sequential_eval_s"] / res["floor_eval_s"]
    if (n, "lockstep_fit_all_steps_s") in fits:
        res["lockstep_evals_per_step"] = fits[(n, "lockstep_fit_all_steps_s")] / (steps * res["lockstep_eval_s"])
    evals = fits.get((n, "evals_per_step_all_steps"))
    if evals is not None:
        res["evals_per_step_all_steps"] = evals
        res["floor_fit_s"] = steps * evals * res["floor_eval_s"]
        for name in ("fit_all_steps_s", "lockstep_fit_all_steps_s"):
            if (n, name) in fits:
                res[name] = fits[(n, name)]
                res[f"{name.removesuffix('_s')}_over_floor"] = fits[(n, name)] / res["floor_fit_s"]
        if n in TARGETS:
            res["target_s"] = TARGETS[n]
            res["target_over_floor"] = TARGETS[n] / res["floor_fit_s"]
    cfg = f"m={m}, P={P}, K={K}, steps={steps}, devices={len(jax.devices())} {jax.devices()[0].platform}"
    for k, v in res.items():
        print(f"n={n} {k:34s} {v:12.5g}", flush=True)
    return [[n, k, v, cfg] for k, v in res.items()]


def main(argv: Sequence[str] | None = None) -> list[list[Any]]:
    from benchmarks.bench_vrsag import add_problem_arguments

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_problem_arguments(ap)
    ap.add_argument("--out", default=str(RESULTS / "vrsag_floor"))
    args = ap.parse_args(argv)
    from calib_jax.io import atomic_write_text, markdown_table, write_csv

    fits = _fit_times(RESULTS / "vrsag.csv")
    load_start = os.getloadavg()[0]
    rows = [r for n in args.n for r in floor_one(n, args.m, args.partitions, args.groups, args.steps, fits)]
    header = ["n", "quantity", "value", "config"]
    write_csv(Path(args.out).with_suffix(".csv"), header, rows)
    text = ("# The floor of a VR-SAG fit on this machine\n\nMachine load (1-min load average) at start "
            f"{load_start:.2f}, at end {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores. One evaluation's floor: "
            "the two head products for all partitions plus (2K + 2) n P transcendentals, each timed alone "
            "(``python -m benchmarks.bench_vrsag_floor``, see its docstring); the fits' times are those of "
            "``vrsag.csv``.\n\n" + markdown_table(header, rows, digits=4) + "\n")
    atomic_write_text(Path(args.out).with_suffix(".md"), text)
    return rows


if __name__ == "__main__":
    main()
