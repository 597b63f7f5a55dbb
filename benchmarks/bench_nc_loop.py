"""Neural Calibration's training loop: one forward pass a step against the two it made before;
and its predictions: the MLP compiled against flax's eager call.

Neural Calibration (Pan, Ao, Tang, Lu, Liu, Xiao and He, "Field-aware Calibration", WWW 2020,
eq. 7-8 and 11: an ILPS map of the logit plus a field MLP, here trained by full-batch AdamW)
keeps the iterate with the lowest log loss on held-out stopping rows. Until 2026-12-04 each
step ran a forward pass for the gradient rows' loss and another for the stopping rows' loss,
and placed the logits among the ILPS knots in each (``two_pass_train``, kept here as the
anchor). The gradient rows and the stopping rows are two weightings of the same rows, and no
step moves a logit, so ``calib_jax.calibrators.neural_calibration._train`` now forms both
losses from one forward pass and places the logits once: the same floats
(``tests/test_neural_top_n.py`` checks them bit for bit against ``two_pass_train``).

This benchmark times both loops on one world's D_val, with a bootstrap draw of it and a
stopping fifth of its rows (the study's ``stop_frac``), at the paper preset's ``nc_steps`` (500),
interleaved in one process
(``--rounds`` rounds, each loop once a round after a compiling call, the best kept), and
reports the ratio before / now and whether the fitted parameters are bit-identical.

Predictions (``neural_calibration.field_correction``) ran the field MLP through flax's eager
``apply``, op by op, until 2026-12-04; it is now one compiled program per architecture, the
same floats (tested). The page also times one prediction of the world's standard test set both
ways, interleaved the same way, with the fitted parameters.

    python -m benchmarks.bench_nc_loop [--dataset simulator_adauction] [--steps 500] [--rounds 3]

Writes benchmarks/results/nc_loop.{csv,md}.
"""

from __future__ import annotations

import argparse
import functools
import os
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


@functools.partial(jax.jit, static_argnames=("model", "n_steps", "extrapolate"))
def two_pass_train(b0, knots, mlp0, o, y, v, v_stop, x, lam, lr, weight_decay, *, model, n_steps, extrapolate):
    """Neural Calibration's training loop as written until 2026-12-04 (the anchor): per step,
    ``value_and_grad`` of the ``v``-weighted loss of eq. 8 plus eq. 11's monotonicity hinge, a
    second forward pass for the ``v_stop`` loss, and the logits placed among the ILPS knots
    inside each pass (``ilps.calibrated_logit``). Arguments and result as
    ``neural_calibration._train``: the kept parameters and every step's loss.

    Example:
      >>> from calib_jax.calibrators import ilps, neural_calibration as nc
      >>> o = jnp.linspace(-3.0, 1.0, 64); y = (jnp.arange(64) % 5 == 0).astype(jnp.float32)
      >>> x = (jnp.arange(64) % 3)[:, None]; model = nc.FieldMLP(vocab_sizes=(3,), embed_dim=2, hidden=(4,))
      >>> v = jnp.ones(64); eta = ilps.fit(o, y, n_knots=5)
      >>> kw = dict(knots=eta.knots, o=o, y=y, x=x, lam=1.0, lr=0.03, weight_decay=1e-3, model=model,
      ...           n_steps=5, extrapolate="linear")
      >>> mlp0 = model.init(jax.random.key(0), x[:1])
      >>> a = two_pass_train(eta.values, mlp0=mlp0, v=v, v_stop=v, **kw)
      >>> b = nc._train(eta.values, mlp0=mlp0, v=v, v_stop=v, **kw)
      >>> all(bool(jnp.array_equal(p, q)) for p, q in zip(jax.tree.leaves(a), jax.tree.leaves(b)))
      True
    """
    import optax

    from calib_jax.calibrators import ilps

    def data_loss(theta, w):
        b, mlp = theta
        eta = ilps.calibrated_logit(ilps.ILPSParams(knots=knots, values=b, fallback=jnp.asarray(False),
                                                    extrapolate=extrapolate), o)
        ll = jax.nn.log_sigmoid((2.0 * y - 1.0) * (eta + model.apply(mlp, x)))
        return -jnp.sum(w * ll) / jnp.maximum(jnp.sum(w), 1e-12)

    def loss(theta):
        return data_loss(theta, v) + lam * jnp.sum(jax.nn.relu(theta[0][:-1] - theta[0][1:]))

    opt = optax.adamw(lr, weight_decay=weight_decay, mask=(False, jax.tree.map(lambda _: True, mlp0)))

    def step(carry, _):
        theta, state, best, best_val = carry
        val, g = jax.value_and_grad(loss)(theta)
        stop = data_loss(theta, v_stop)
        better = stop < best_val
        best = jax.tree.map(lambda a, b: jnp.where(better, a, b), theta, best)
        best_val = jnp.where(better, stop, best_val)
        upd, state = opt.update(g, state, theta)
        return (optax.apply_updates(theta, upd), state, best, best_val), val

    theta0 = (b0, mlp0)
    init = (theta0, opt.init(theta0), theta0, jnp.asarray(jnp.inf, o.dtype))
    (theta, _, best, best_val), vals = jax.lax.scan(step, init, None, length=n_steps)
    use_final = data_loss(theta, v_stop) < best_val
    return jax.tree.map(lambda a, b: jnp.where(use_final, a, b), theta, best), vals


def _interleaved(calls: dict[str, Any], rounds: int) -> tuple[dict[str, Any], dict[str, float], dict[str, list[float]]]:
    """Each call's output and seconds of its first (compiling) call, then the seconds of ``rounds``
    rounds in which every call runs once, one after another (so the compared calls share the
    machine's drift)."""
    outs: dict[str, Any] = {}
    first: dict[str, float] = {}
    for name, call in calls.items():
        t0 = time.perf_counter()
        outs[name] = jax.block_until_ready(call())
        first[name] = time.perf_counter() - t0
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            t0 = time.perf_counter()
            jax.block_until_ready(call())
            times[name].append(time.perf_counter() - t0)
    return outs, first, times


def d_val_problem(dataset: str) -> tuple[dict[str, Any], jax.Array, jax.Array, jax.Array, Any]:
    """``dataset``'s D_val as Neural Calibration's training loop takes it: the loaded data set,
    the field codes of its ``nc_cols``, the logits, the labels, and the study's field MLP (8-dimensional
    embeddings, one hidden layer of 32) for those fields."""
    from calib_jax.calibrators import neural_calibration as ncal
    from experiments._datasets import load_dataset

    data = load_dataset(dataset, seed=0, sim="default")
    if data is None:
        raise ValueError(f"dataset {dataset!r} is not available")
    val = data["out"].val
    x = jnp.asarray(val.fields[:, data["nc_cols"]])
    o, y = jnp.asarray(val.logits, jnp.float32), jnp.asarray(val.labels, jnp.float32)
    model = ncal.FieldMLP(vocab_sizes=tuple(int(c) + 1 for c in np.asarray(jnp.max(x, axis=0))),
                          embed_dim=8, hidden=(32,))
    return data, x, o, y, model


def train_kwargs(eta0: Any, o: jax.Array, y: jax.Array, x: jax.Array, model: Any, steps: int) -> dict[str, Any]:
    """The keyword arguments of ``neural_calibration._train`` (and of :func:`two_pass_train`)
    with the study's defaults, the ILPS start ``eta0``'s knots and ``steps`` steps."""
    return dict(knots=eta0.knots, o=o, y=y, x=x, lam=jnp.float32(1.0), lr=jnp.float32(3e-3),
                weight_decay=jnp.float32(1e-3), model=model, n_steps=steps, extrapolate="linear")


def measure(dataset: str, steps: int, rounds: int) -> dict[str, Any]:
    """Seconds of both loops (each round, after a compiling call) on ``dataset``'s D_val, as
    ``neural_calibration.fit`` sets it up with the study's defaults (100 knots, one hidden layer
    of 32, 8-dimensional embeddings, a stopping fifth of the rows)."""
    from calib_jax.calibrators import ilps
    from calib_jax.calibrators import neural_calibration as ncal
    from experiments import compare_calibrators as cc

    data, x, o, y, model = d_val_problem(dataset)
    n = o.shape[0]
    key = jax.random.key(0)
    w = jnp.asarray(cc._draw(n, jax.random.fold_in(key, 10_000), "bootstrap"), jnp.float32)
    hold = jax.random.uniform(jax.random.fold_in(key, 1), (n,)) < 0.2
    v_fit, v_stop = jnp.where(hold, 0.0, w), jnp.where(hold, w, 0.0)
    eta0 = ilps.fit(o, y, weights=v_fit, n_knots=100)
    mlp0 = model.init(jax.random.fold_in(key, 2), x[:1])
    kw = train_kwargs(eta0, o, y, x, model, steps)
    loops = {"two passes a step (before)": two_pass_train, "one pass a step (now)": ncal._train}
    outs, first, times = _interleaved({name: functools.partial(fn, eta0.values, mlp0=mlp0, v=v_fit, v_stop=v_stop,
                                                               **kw) for name, fn in loops.items()}, rounds)
    a, b = (jax.tree.leaves(outs[name][0]) for name in loops)
    same = all(np.array_equal(np.asarray(p), np.asarray(q)) for p, q in zip(a, b, strict=True))
    # predictions of the standard test set with the fitted parameters: eager MLP (before) or compiled (now)
    pool = cc._pool(data["out"])
    pool_fields = pool["fields"]
    assert pool_fields is not None  # every simulator world has fields
    px = jnp.asarray(pool_fields[:, data["nc_cols"]])
    b_fit, mlp_fit = outs["one pass a step (now)"][0]
    params = ncal.NeuralCalibrationParams(
        eta=ilps.ILPSParams(knots=eta0.knots, values=b_fit, fallback=eta0.fallback, extrapolate=eta0.extrapolate),
        mlp=mlp_fit, vocab_sizes=model.vocab_sizes, embed_dim=model.embed_dim, hidden=model.hidden)
    predictors = {"predictions, eager MLP (before)": lambda: model.apply(params.mlp, px),
                  "predictions, compiled MLP (now)": lambda: ncal.field_correction(params, px)}
    pred_out, _, pred_times = _interleaved(predictors, 5 * rounds)
    eager, compiled = (np.asarray(v) for v in pred_out.values())
    same_pred = bool(np.array_equal(eager, compiled))
    return {"dataset": dataset, "rows": n, "steps": steps, "first": first, "times": times, "bit_identical": same,
            "pool_rows": int(px.shape[0]), "pred_times": pred_times, "pred_bit_identical": same_pred}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="simulator_adauction")
    ap.add_argument("--steps", type=int, default=500, help="AdamW steps (the paper preset's nc_steps)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(RESULTS / "nc_loop"))
    args = ap.parse_args(argv)
    from benchmarks.machine_speed import reference_seconds
    from benchmarks.pages import conditions, write_page

    warnings.simplefilter("ignore")
    load_start = os.getloadavg()[0]
    t0 = time.perf_counter()
    m = measure(args.dataset, args.steps, args.rounds)
    ref = reference_seconds()
    best = {name: min(ts) for name, ts in m["times"].items()}
    before, now = best.values()
    rows = [[m["dataset"], name, m["first"][name], best[name], 1000 * best[name] / m["steps"], m["rows"], m["steps"]]
            for name in best]
    pred_best = {name: min(ts) for name, ts in m["pred_times"].items()}
    rows += [[m["dataset"], name, "", secs, "", m["pool_rows"], ""] for name, secs in pred_best.items()]
    pred_before, pred_now = pred_best.values()
    header = ["dataset", "loop", "first_call_s", "best_s", "ms_per_step", "rows", "steps"]
    text = (f"# Neural Calibration: one forward pass a training step, and a compiled MLP for predictions\n\n"
            f"`{m['dataset']}`, D_val {m['rows']:,} rows, {m['steps']} AdamW steps on one bootstrap draw, "
            f"both loops interleaved in one process over {args.rounds} rounds (best kept). "
            f"{conditions(t0, load_start, ref)}\n\n"
            f"Training, before / now: **{before / now:.2f}x**; the fitted parameters are "
            f"{'bit-identical' if m['bit_identical'] else 'NOT bit-identical'}. One prediction of the "
            f"{m['pool_rows']:,}-row standard test set's field correction (best of {5 * args.rounds}), before / now: "
            f"**{pred_before / pred_now:.2f}x**; the corrections are "
            f"{'bit-identical' if m['pred_bit_identical'] else 'NOT bit-identical'}.\n\n")
    write_page(Path(args.out), text, header, rows)
    return m


if __name__ == "__main__":
    main()
