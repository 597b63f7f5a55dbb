"""VR-SAG full-batch fit time at scale, side by side with its floor, the old code and Platt.

Targets: VR-SAG+PS on every row (no subsample), embedding m = 64, P = 10
partitions, K = 3 groups, 100 L-BFGS steps: <= 15 s at n = 10^5 and <= 3 min at n = 10^6 on
the idle 2-core CPU.  For each n the same run times, on the same data:

* ``fit_s`` / ``fit_first_s``: :func:`calib_jax.calibrators.sag.fit_vrsag` with
  ``solver="sequential"`` (the partitions one after another; the library's default until
  2026-12-05), warm / with compilation, with torch's stopping rules (the default, as the
  reference code);
  ``fit_all_steps_s``: every one of the ``--steps`` iterations (``tol_grad = tol_change =
  0``, no evaluation budget), the worst case the targets are stated for.
* ``evals_per_partition`` / ``evals_per_step_all_steps``: objective evaluations (value and
  gradient) of one partition's fit with the stopping rules, and per iteration without them,
  counted with a callback in separate runs.
* ``eval_s``: one value-and-gradient of the fit's objective for all P partitions
  (P x one partition, as the fit runs them); ``eval_floor_s``: the plain formulation the
  issue measured (head matmul, log-softmax, log-sigmoid, logsumexp mixture, soft variance;
  ``jax.vmap`` over the partitions, one ``jit``) -- the reference point for one evaluation.
* ``old_fit_s``: the code this replaced (``jax.vmap`` of the optax L-BFGS over partitions on
  the log-space objective), timed for ``--old-steps`` steps and projected linearly to
  ``--steps``: a lower bound, since later steps search longer (the issue measured 20.8 s per
  step at n = 10^6, about 35 min for 100 steps, on this machine's predecessor).
* ``platt_s``: Platt scaling on the same rows, the anchor of a one-parameter fit.
* ``lockstep_fit_s`` / ``lockstep_fit_all_steps_s``: the same fits with ``solver="lockstep"``
  (the library's default since 2026-12-05: the partitions evaluated together, one pass over
  the embedding per evaluation, each partition at its own pace through its line searches;
  targets of the lock-step work: <= 1.5 s at n = 10^5 and <= 15 s at n = 10^6 for 100 steps);
  ``ratio_sequential_over_lockstep``; ``lockstep_objective_rel_diff``: the largest relative
  difference of a partition's final objective between the two solvers (the same algorithm:
  float32 rounding of the batched sums).

    python -m benchmarks.bench_vrsag                      # n = 1e5 and 1e6
    python -m benchmarks.bench_vrsag --n 100000 --old-steps 100

Writes benchmarks/results/vrsag.{csv,md}.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def make_data(n: int, m: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two latent regimes with opposite miscalibration readable from the embedding, so the
    fit does real work."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, m)).astype(np.float32)
    true = -3.3 + 0.8 * z[:, 0] + 0.4 * z[:, 1]
    o = np.where(z[:, 2] > 0, 1.4 * true + 0.7, 0.8 * true - 0.4).astype(np.float32)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-true))).astype(np.float32)
    return o, y, z


def _timed(fn, repeats: int = 1) -> tuple[Any, float]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t0)
    return out, best


def _log_space_objective(theta, o, y, z, p_unc, lam, lam_v):
    """The plain formulation (the old objective): eq. 11 in log space, one partition."""
    from calib_jax import losses

    lq = jax.nn.log_softmax(jnp.matmul(z, theta.W, precision=jax.lax.Precision.HIGHEST)
                            + theta.b[None, :], axis=1)
    s = o[:, None] / jnp.exp(theta.log_tau)[None, :] + theta.beta[None, :]
    ll = jax.nn.log_sigmoid((2.0 * y - 1.0)[:, None] * s)
    nll = -jnp.mean(jax.nn.logsumexp(lq + ll, axis=1))
    q = jnp.exp(lq)
    mass = jnp.sum(q, axis=0)
    mu = jnp.matmul(p_unc, q, precision=jax.lax.Precision.HIGHEST) / mass
    var = jnp.sum(q * jnp.square(p_unc[:, None] - mu[None, :])) / o.shape[0]
    return nll + losses.l2_penalty(theta.W, lam=lam, reduction="mean") + lam_v * var


def _old_fit(theta0, o, y, z, lam, lam_v, n_steps: int):
    """The replaced fit: ``jax.vmap`` of the optax L-BFGS over partitions."""
    from calib_jax.calibrators import sag

    p_unc = jax.nn.sigmoid(o)
    f = lambda t: _log_space_objective(t, o, y, z, p_unc, lam, lam_v)
    return jax.vmap(lambda th: sag.minimize(f, th, n_steps))(theta0)


def bench_one(n: int, args: argparse.Namespace) -> list[list[Any]]:
    from calib_jax.calibrators import platt, sag

    o, y, z = make_data(n, args.m)
    P, K, steps = args.partitions, args.groups, args.steps
    ctx = {"embedding": z}
    # the sequential solver (the library's default until 2026-12-05) in the fit_* columns, the
    # lock-step one (the default since) in the lockstep_* columns
    kw = dict(context=ctx, n_groups=K, n_partitions=P, n_steps=steps, key=jax.random.key(0),
              variant="ps", max_rows=args.max_rows or None, solver="sequential")
    res: dict[str, float] = {}
    _, res["fit_first_s"] = _timed(lambda: sag.fit_vrsag(o, y, **kw))
    prm, res["fit_s"] = _timed(lambda: sag.fit_vrsag(o, y, **kw))
    every = dict(kw, tol_grad=0.0, tol_change=0.0, max_evals=float("inf"))
    _, res["fit_all_steps_s"] = _timed(lambda: sag.fit_vrsag(o, y, **every))
    _, res["predict_s"] = _timed(lambda: sag.predict(prm, o, context=ctx), 2)

    oj, yj, zj = jnp.asarray(o), jnp.asarray(y), jnp.asarray(z)
    theta0 = sag.init_params(jax.random.key(0), args.m, n_groups=K, n_partitions=P)
    lam, lam_v = jnp.float32(0.1), jnp.float32(0.5)
    p_unc, sgn, zt = jax.nn.sigmoid(oj), 2.0 * yj - 1.0, zj.T
    one = jax.tree.map(lambda a: a[0], theta0)
    new_vg = jax.jit(jax.value_and_grad(
        lambda t: sag._objective(t, oj, sgn, zt, p_unc, jnp.ones_like(oj), lam, lam_v, True, True)))
    _timed(lambda: new_vg(one))
    res["eval_s"] = P * _timed(lambda: new_vg(one), 5)[1]
    floor_vg = jax.jit(jax.vmap(jax.value_and_grad(
        lambda t: _log_space_objective(t, oj, yj, zj, p_unc, lam, lam_v))))
    _timed(lambda: floor_vg(theta0))
    res["eval_floor_s"] = _timed(lambda: floor_vg(theta0), 3)[1]

    # evaluations per step: count the objective's calls in a separate (untimed) fit
    calls = [0]

    def count(_):
        calls[0] += 1

    def counted(t):
        jax.debug.callback(count, t.log_tau[0])
        return sag._objective(t, oj, sgn, zt, p_unc, jnp.ones_like(oj), lam, lam_v, True, True)

    jax.block_until_ready(jax.jit(lambda th: jax.lax.map(
        lambda t: sag.minimize(counted, t, steps), th))(theta0))
    res["evals_per_partition"] = calls[0] / P
    calls[0] = 0
    jax.block_until_ready(jax.jit(lambda th: jax.lax.map(
        lambda t: sag.minimize(counted, t, steps, sag.StopRule(0.0, 0.0, jnp.inf)), th))(theta0))
    res["evals_per_step_all_steps"] = calls[0] / (P * steps)
    res["fit_over_evals"] = res["fit_all_steps_s"] / (res["evals_per_step_all_steps"] * steps
                                                      * res["eval_s"])

    old = jax.jit(_old_fit, static_argnames=("n_steps",))
    _timed(lambda: old(theta0, oj, yj, zj, lam, lam_v, n_steps=args.old_steps))
    _, t_old = _timed(lambda: old(theta0, oj, yj, zj, lam, lam_v, n_steps=args.old_steps))
    res["old_fit_s"] = t_old * steps / args.old_steps
    res["ratio_old_over_new"] = res["old_fit_s"] / res["fit_s"]
    res["ratio_old_over_all_steps"] = res["old_fit_s"] / res["fit_all_steps_s"]
    res["ratio_eval_over_floor"] = res["eval_s"] / res["eval_floor_s"]
    lock = dict(kw, solver="lockstep")
    _timed(lambda: sag.fit_vrsag(o, y, **lock))
    _, res["lockstep_fit_s"] = _timed(lambda: sag.fit_vrsag(o, y, **lock))
    _, res["lockstep_fit_all_steps_s"] = _timed(lambda: sag.fit_vrsag(o, y, **dict(every, solver="lockstep")))
    res["ratio_sequential_over_lockstep"] = res["fit_s"] / res["lockstep_fit_s"]
    stop = sag.StopRule(*(jnp.asarray(a, jnp.float32) for a in sag.StopRule.torch(steps)))
    soft = dict(lam=lam, lam_v=lam_v, stop=stop, n_steps=steps, use_beta=True, head_bias=True)
    _, v_seq = sag._fit_soft(theta0, oj, yj, zt, jnp.ones_like(oj), **soft)
    _, v_lock = sag._fit_soft(theta0, oj, yj, zt, jnp.ones_like(oj), solver="lockstep", **soft)
    res["lockstep_objective_rel_diff"] = float(jnp.max(jnp.abs(v_seq[:, -1] - v_lock[:, -1]) / jnp.abs(v_seq[:, -1])))
    _timed(lambda: platt.fit(o, y))
    _, res["platt_s"] = _timed(lambda: platt.fit(o, y), 3)
    res["ratio_fit_over_platt"] = res["fit_s"] / res["platt_s"]
    cfg = (f"m={args.m}, P={P}, K={K}, steps={steps}, rows={args.max_rows or 'all'}, "
           f"old_fit_projected_from={args.old_steps} steps")
    print(f"n={n} {cfg} devices={jax.devices()}")
    for k, v in res.items():
        print(f"  {k:24s} {v:10.4f}", flush=True)
    return [[n, k, v, cfg] for k, v in res.items()]


def add_problem_arguments(ap: argparse.ArgumentParser) -> None:
    """The fit's sizes (rows, embedding width, partitions, groups, steps), shared with
    ``bench_vrsag_floor``, which measures the floor of a fit of the same sizes."""
    ap.add_argument("--n", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--m", type=int, default=64)
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--groups", type=int, default=3)
    ap.add_argument("--steps", type=int, default=100)


def main(argv: Sequence[str] | None = None) -> list[list[Any]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_problem_arguments(ap)
    ap.add_argument("--old-steps", type=int, default=5,
                    help="L-BFGS steps the old code is timed for (projected to --steps)")
    ap.add_argument("--max-rows", type=int, default=0,
                    help="rows used for the head fit (sag.fit max_rows); 0 = full batch")
    ap.add_argument("--out", default=str(RESULTS / "vrsag"))
    args = ap.parse_args(argv)
    rows = [r for n in args.n for r in bench_one(n, args)]
    from calib_jax.io import write_table

    write_table(Path(args.out), ["n", "quantity", "value", "config"], rows, digits=4)
    return rows


if __name__ == "__main__":
    main()
