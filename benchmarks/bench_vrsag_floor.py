"""The floor of a VR-SAG fit on this machine: what one evaluation of the objective must cost,
and how far the lock-step fit is from it, all measured in one run.

One evaluation (value and gradient) of the VR-SAG objective for all P partitions does, at the
least:

* the head products: ``h = W_all^T z^T`` with ``W_all`` (m, P*K) for the logits of every
  (row, partition, group), and ``z^T g`` for the gradient of ``W_all``: 2 x 2 n m P K floating
  point operations, reading the embedding z (n, m) float32 at least once each;
* the transcendentals of the fused objective (``calib_jax.calibrators.sag._objective``): per
  (row, partition) two exponentials per group (the softmax weight and the sigmoid of the
  observed label) and two logarithms (the mixture's numerator and denominator), i.e.
  (2K + 2) n P; the backward pass adds none.

This benchmark times each part alone on this machine, in one ``jit`` each, on one block of
rows, and scales it to n rows: the two products as one XLA dot each (``precision=HIGHEST``,
the fit's), and ``jnp.exp`` on (2K + 2) x block x P float32 (a logarithm costs about what an
exponential costs on XLA:CPU; both are polynomial approximations). Each part is timed on
blocks of each of ``BLOCKS`` rows, each product with the embedding in both layouts, (m, n)
and (n, m), and the heads' columns flat or per partition, and the floor takes the fastest of
each part (the rows ``*_s[formulation, rows]`` give every one). On the Xeon the gradient's
product is fastest per partition from (n, m), as the lock-step evaluation computes it. Timed
on the whole embedding instead, the parts measure the memory (a (P K, n) array of logits at
10^6 rows is 120 MB), which a blocked program does not pay; one
plain read of the whole embedding is reported beside them. Their sum is the floor of one
evaluation (``floor_eval_s``).

In the same run, on the data of ``bench_vrsag``:

* ``lockstep_eval_s``: one evaluation of the lock-step solver's batched objective (all
  partitions, the rows in blocks, value and gradient), ``lockstep_value_only_s`` its value
  alone;
* ``lockstep_fit_all_steps_s``: the lock-step fit of every one of the ``steps`` iterations
  (the stopping tolerances at zero), best of two after a compiling call; its batched
  evaluations per iteration (``lockstep_passes_per_step``: the partitions advance at their
  own pace, so this is the slowest partition's evaluations) and each partition's own
  evaluations per iteration, averaged (``evals_per_step_all_steps``: what a partition fitted
  alone needs);
* ``floor_fit_s`` = ``steps`` x ``evals_per_step_all_steps`` x ``floor_eval_s``: the floor
  of a fit, set beside the lock-step fit (``lockstep_fit_all_steps_over_floor``, the
  acceptance's ratio, target 2) and the targets (1.5 s at 10^5 rows, 15 s at 10^6);
  ``fit_over_evaluations`` is the fit's time over its batched evaluations' (what the L-BFGS
  bookkeeping between evaluations adds).

The sequential solver (the library's default until 2026-12-05) is timed by ``bench_vrsag``, in
another run.

    python -m benchmarks.bench_vrsag_floor [--n 100000 1000000]

Writes benchmarks/results/vrsag_floor.{csv,md}.
"""

from __future__ import annotations

import argparse
import functools
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
#: rows per timed block: its embedding (64 x 16,384 float32 is 4 MB), head logits and
#: transcendentals stay near the caches, as in the lock-step solver's row blocks (8,192 rows
#: for one fit's partitions, ``sag._stored_block``); each part's fastest block is its floor
BLOCKS = (8_192, 16_384)


def _best(fn, *args, repeats: int = 5, warm: bool = True) -> float:
    """The fastest of ``repeats`` calls (after one untimed call where ``warm``)."""
    if warm:
        jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - t0)
    return best


def _problem(n: int, m: int, P: int, K: int):
    """The data of ``bench_vrsag``, the initial partitions and the batched value and gradient."""
    from benchmarks.bench_vrsag import make_data
    from calib_jax.calibrators import sag

    o, y, z = (jnp.asarray(a) for a in make_data(n, m))
    theta0 = sag.init_params(jax.random.key(0), m, n_groups=K, n_partitions=P)
    # the embedding in both layouts, as the lock-step fit passes it
    data = (o, 2.0 * y - 1.0, z.T, jax.nn.sigmoid(o), jnp.ones_like(o), jnp.float32(0.1), jnp.float32(0.5), z)
    return theta0, data, sag._value_and_grad_all(True, True)


def lockstep_fit(data: tuple[Any, ...], vg: Any, steps: int) -> Any:
    """The jitted lock-step fit of :func:`_problem`'s partitions through all ``steps``
    iterations (the stopping tolerances at zero), returning the solver's counts too
    (``counts=True``: its batched evaluations and each partition's evaluations). Shared with
    ``bench_vrsag_profile``, which profiles the same fit."""
    from calib_jax.calibrators import sag

    o, sgn, zt, p_unc, v, lam, lam_v, _ = data
    stop = sag.StopRule(jnp.float32(0.0), jnp.float32(0.0), jnp.float32(jnp.inf))
    return jax.jit(lambda t: sag.minimize_lockstep(
        lambda u: sag._objective(u, o, sgn, zt, p_unc, v, lam, lam_v, True, True), t, steps, stop,
        value_and_grad=lambda u: vg(u, data, None), counts=True))


#: the floor's parts: each the fastest of its timed variants (``part_s[layout, rows]``)
PARTS = ("head_forward_s", "head_backward_s", "transcendentals_s")


def _part_timers(n: int, m: int, P: int, K: int, b: int) -> dict[str, Any]:
    """The floor's parts timed on one block of ``b`` rows, scaled to n (see the docstring): each
    head product from the embedding block in both layouts, (m, b) and (b, m), with the heads'
    columns flat, (m, P K), or per partition, (P, m, K), as the evaluation writes them (XLA:CPU
    picks a different kernel for each: on the Xeon the gradient's product is fastest per
    partition from (b, m), the logits' flat from (m, b))."""
    rng = np.random.default_rng(0)
    zt = jnp.asarray(rng.normal(size=(m, b)).astype(np.float32))
    z = zt.T.copy()
    w = jnp.asarray(rng.normal(size=(m, P * K)).astype(np.float32))
    g = jnp.asarray(rng.normal(size=(P * K, b)).astype(np.float32))
    w3 = jnp.transpose(w.reshape(m, P, K), (1, 0, 2))  # (P, m, K)
    g3 = g.reshape(P, K, b)
    x = jnp.asarray(rng.uniform(-4, 0, (2 * K + 2) * b * P).astype(np.float32))
    hi = jax.lax.Precision.HIGHEST
    # the logits of every head, (P K, b); the gradient of every head, (m, P K)
    products = {
        "head_forward_s": {
            "(m, n) flat": (lambda w, zt: jnp.matmul(w.T, zt, precision=hi), (w, zt)),
            "(n, m) flat": (lambda w, z: jnp.einsum("mk,nm->kn", w, z, precision=hi), (w, z)),
            "(m, n) per partition": (lambda w, zt: jnp.einsum("bmk,mn->bkn", w, zt, precision=hi), (w3, zt)),
            "(n, m) per partition": (lambda w, z: jnp.einsum("bmk,nm->bkn", w, z, precision=hi), (w3, z)),
        },
        "head_backward_s": {
            "(m, n) flat": (lambda zt, g: jnp.matmul(zt, g.T, precision=hi), (zt, g)),
            "(n, m) flat": (lambda z, g: jnp.einsum("nm,kn->mk", z, g, precision=hi), (z, g)),
            "(m, n) per partition": (lambda zt, g: jnp.einsum("mn,bkn->bmk", zt, g, precision=hi), (zt, g3)),
            "(n, m) per partition": (lambda z, g: jnp.einsum("nm,bkn->bmk", z, g, precision=hi), (z, g3)),
        },
    }
    timers: dict[str, tuple[Any, int, float]] = {}
    for part, variants in products.items():
        for layout, (f, args) in variants.items():
            timers[f"{part}[{layout}, {b}]"] = (functools.partial(jax.jit(f), *args), 10, n / b)
    exp = jax.jit(jnp.exp)
    timers[f"transcendentals_s[-, {b}]"] = (lambda: exp(x), 10, n / b)
    return timers


def _timers(n: int, m: int, P: int, K: int, steps: int, blocks: Sequence[int]
            ) -> tuple[dict[str, Any], int, float]:
    """Every timed quantity as ``name -> (call, repeats, scale)``, compiled and run once; and the
    lock-step fit's batched evaluations and its partitions' own evaluations (mean), which do
    not depend on the timing."""
    from calib_jax.calibrators import sag

    theta0, data, vg = _problem(n, m, P, K)
    o, sgn, zt_all, p_unc, v, lam, lam_v, _ = data
    z_all = jnp.asarray(np.random.default_rng(1).normal(size=(m, n)).astype(np.float32))
    evaluation = jax.jit(jax.vmap(lambda t: vg(t, data, None)))
    value = jax.jit(lambda t: sag._objective_all(t, o, sgn, zt_all, p_unc, v, lam, lam_v, True, True))
    fit = lockstep_fit(data, vg, steps)
    timers = {
        "lockstep_eval_s": (lambda: evaluation(theta0), 3, 1.0),
        "lockstep_value_only_s": (lambda: value(theta0), 3, 1.0),
        "embedding_read_s": (lambda: jnp.sum(z_all), 3, 1.0),
        "lockstep_fit_all_steps_s": (lambda: fit(theta0), 1, 1.0),
    }
    for b in sorted({min(block, n) for block in blocks}):
        timers.update(_part_timers(n, m, P, K, b))
    for name, (call, _, _) in timers.items():  # compiled and run once; the fit's run gives its counts
        out = jax.block_until_ready(call())
        if name == "lockstep_fit_all_steps_s":
            _, _, passes, evals = out
    return timers, int(passes) + 1, float(jnp.mean(evals))


def floor_one(n: int, m: int, P: int, K: int, steps: int, *, blocks: Sequence[int] = BLOCKS, rounds: int = 3
              ) -> list[list[Any]]:
    """The rows of one size. Every quantity is timed in each of ``rounds`` rounds, one after
    another within a round (best of a few calls each, the fit once), and the best round is
    kept: this machine's speed drifts by up to 2x between minutes, and interleaving keeps the
    fit and its floor under the same drift; ``lockstep_fit_spread`` is the slowest round's fit
    over the fastest's."""
    timers, passes, own = _timers(n, m, P, K, steps, blocks)
    times: dict[str, list[float]] = {name: [] for name in timers}
    for _ in range(rounds):
        for name, (call, repeats, scale) in timers.items():
            times[name].append(scale * _best(call, repeats=repeats, warm=False))
    res: dict[str, float] = {"rounds": float(rounds)}
    res.update({name: min(t) for name, t in times.items() if name != "lockstep_fit_all_steps_s"})
    for part in PARTS:  # the floor's part: its fastest layout and block
        res[part] = min(v for k, v in res.items() if k.startswith(part + "["))
    res["embedding_read_gb_per_s"] = 4.0 * n * m / res["embedding_read_s"] / 1e9
    res["head_gflop_per_s"] = 4.0 * n * m * P * K / (res["head_forward_s"] + res["head_backward_s"]) / 1e9
    n_trans = (2 * K + 2) * n * P
    res["transcendentals_per_eval"] = float(n_trans)
    res["ns_per_transcendental"] = 1e9 * res["transcendentals_s"] / n_trans
    res["floor_eval_s"] = res["head_forward_s"] + res["head_backward_s"] + res["transcendentals_s"]
    res["lockstep_eval_over_floor"] = res["lockstep_eval_s"] / res["floor_eval_s"]
    fit_s = min(times["lockstep_fit_all_steps_s"])
    res["lockstep_fit_all_steps_s"] = fit_s
    res["lockstep_fit_spread"] = max(times["lockstep_fit_all_steps_s"]) / fit_s
    res["lockstep_passes_per_step"] = passes / steps
    res["evals_per_step_all_steps"] = own / steps
    res["fit_over_evaluations"] = fit_s / (passes * res["lockstep_eval_s"])
    res["floor_fit_s"] = own * res["floor_eval_s"]
    res["lockstep_fit_all_steps_over_floor"] = fit_s / res["floor_fit_s"]
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
    from benchmarks import machine_speed
    from calib_jax.io import atomic_write_text, markdown_table, write_csv

    reference_before = machine_speed.previous_reference(Path(args.out).with_suffix(".csv"), column="value")
    load_start = os.getloadavg()[0]
    rows = [r for n in args.n for r in floor_one(n, args.m, args.partitions, args.groups, args.steps)]
    reference = machine_speed.reference_seconds()
    rows.append(["", machine_speed.ROW_LABEL, reference, machine_speed.DESCRIPTION])
    header = ["n", "quantity", "value", "config"]
    write_csv(Path(args.out).with_suffix(".csv"), header, rows)
    text = ("# The floor of a VR-SAG fit on this machine\n\nMachine load (1-min load average) at start "
            f"{load_start:.2f}, at end {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores of "
            f"{machine_speed.cpu_description()}. {machine_speed.comparison_sentence(reference, reference_before)} "
            "The ratios below are of times taken in one run on this machine. One evaluation's floor: "
            "the two head products for all partitions plus (2K + 2) n P transcendentals, each timed alone, "
            "each the fastest of its timed formulations (rows ``part_s[formulation, block rows]``: the embedding "
            "as (m, n) or (n, m), the heads' columns flat or per partition, blocks of "
            f"{' and '.join(f'{b:,}' for b in BLOCKS)} rows) "
            "(``python -m benchmarks.bench_vrsag_floor``, see its docstring); the lock-step fit of every "
            "iteration is timed in each of three rounds interleaved with the floor's parts (the best round kept), and "
            "the floor of a fit is the floor of one evaluation times the evaluations its partitions make (their "
            "mean).\n\n"
            + markdown_table(header, rows, digits=4) + "\n")
    atomic_write_text(Path(args.out).with_suffix(".md"), text)
    return rows


if __name__ == "__main__":
    main()
