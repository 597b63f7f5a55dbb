"""The SAG / VR-SAG D_val heads of ``compare_calibrators --paper`` fitted one by one and together.

The paper preset fits every SAG / VR-SAG variant ``head_fits`` = 10 times on D_val
(``experiments.compare_calibrators._fit_val_methods``): ten L-BFGS fits of P grouping heads
each ("Calibration is Grouping", anonymous authors, under review, eq. 8-11; App. I.1 for the
reference protocol). Their objective reads the same D_val embedding in every fit, so the ten
heads could share each pass over it. This benchmark fits one variant's ten heads three ways,
on one world's D_val, in the same run, with the study's settings (100 L-BFGS iterations,
torch's stopping rules, every row):

* ``one by one, sequential``: ten calls of :func:`calib_jax.calibrators.sag.fit_many` with one
  key each and the default solver, which fits the P partitions one after another (the study's
  way: the anchor);
* ``one by one, lock-step``: the same ten calls with ``solver="lockstep"`` (each call's P
  partitions step together, one pass over the embedding per evaluation for all of them);
* ``together, lock-step``: one call of ``fit_many`` with the ten keys and
  ``solver="lockstep"``: all 10 x P problems step together, one pass over the embedding per
  evaluation for all of them.

Every head fits on its own bootstrap draw of D_val as row multiplicities, the study's draws
(``head_draw="bootstrap"``, ``experiments.compare_calibrators._draw``); fitted together, the
ten draws are the rows of one (10, n) ``weights``. Each way runs twice (a first, compiling
call and a second one on other keys and draws); the ratios are of the second calls. The
lock-step fits equal the sequential ones up to float32 rounding of the batched sums, which the
non-convex objective can carry into another local optimum: the table reports each way's mean
final objective relative to the anchor's (paper protocol only: the soft objective of eq. 11 on
each head's own draw; the reference protocol's heads end with their groups refitted on a
held-out split, which that objective does not describe, so its cell is empty) and, for both
protocols, the largest difference of any D_val prediction from the anchor's head with the
same key and draw (``max |p - anchor's p|``).

    python -m benchmarks.bench_sag_heads [--dataset simulator_adauction] [--heads 10]

Writes benchmarks/results/sag_heads.{csv,md}.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"

#: the variants timed: (label, registry name, protocol); the paper protocol is eq. 8-11's
#: (P = 10, K = 3), the reference protocol the public code's (P = 20, K = 2)
VARIANTS = (("VR-SAG+TS [eq. 8-11]", "vrsag_ts", "paper"), ("VR-SAG+TS", "vrsag_ts", "reference"))
WAYS = ("one by one, sequential", "one by one, lock-step", "together, lock-step")


def _objective(params: Any, o, y, z, v, lam: float, lam_v: float) -> float:
    """The mean over partitions of the fitted soft objective (eq. 11 with the paper protocol's
    head bias, on the head's own draw ``v``), to compare the ways' optima."""
    from calib_jax.calibrators import sag

    theta = sag._Theta(params.W, params.b, params.log_tau, params.beta)
    p_unc = jax.nn.sigmoid(o)
    f = jax.vmap(lambda t: sag._objective(t, o, 2.0 * y - 1.0, z.T, p_unc, jnp.asarray(v), lam, lam_v,
                                          True, True))
    return float(jnp.mean(f(theta)))


def measure(dataset: str, heads: int, variants: Sequence[tuple[str, str, str]] = VARIANTS) -> list[dict[str, Any]]:
    """Seconds of one variant's ``heads`` D_val fits in each of :data:`WAYS` (twice each)."""
    from calib_jax.calibrators import REGISTRY, sag
    from experiments import compare_calibrators as cc
    from experiments._datasets import load_dataset

    data = load_dataset(dataset, seed=0, sim="default")
    if data is None:
        raise ValueError(f"dataset {dataset!r} is not available")
    val = data["out"].val
    o, y = np.asarray(val.logits, np.float32), np.asarray(val.labels, np.float32)
    z = np.asarray(val.embedding, np.float32)
    rows = []
    for label, registry, protocol in variants:
        hyper = {**REGISTRY[registry].defaults, "protocol": protocol, "n_steps": 100}
        lam, lam_v = float(hyper["lam"]), float(hyper.get("lam_v", 0.0))
        for call, base in (("first", 0), ("second", 1)):
            key = jax.random.fold_in(jax.random.key(0), 2 + 100 * base)
            keys = [jax.random.fold_in(key, h) for h in range(heads)]
            draws = cast(list[np.ndarray], [cc._draw(len(y), jax.random.fold_in(key, 10_000 + h), "bootstrap")
                                            for h in range(heads)])  # a bootstrap draw is never None
            for way in WAYS:
                solver = "sequential" if way.endswith("sequential") else "lockstep"
                t0 = time.perf_counter()
                if way.startswith("together"):
                    fits = jax.block_until_ready(sag.fit_many(o, y, keys=keys, weights=np.stack(draws),
                                                              context={"embedding": z}, **{**hyper, "solver": solver}))
                else:
                    fits = [jax.block_until_ready(sag.fit_many(o, y, keys=[k], weights=d, context={"embedding": z},
                                                               **{**hyper, "solver": solver})[0])
                            for k, d in zip(keys, draws)]
                seconds = time.perf_counter() - t0
                objective = (float(np.mean([_objective(f, o, y, z, d, lam, lam_v) for f, d in zip(fits, draws)]))
                             if protocol == "paper" else None)
                preds = np.stack([np.asarray(sag.predict(f, o, context={"embedding": z})) for f in fits])
                rows.append({"dataset": dataset, "variant": label, "way": way, "call": call, "seconds": seconds,
                             "heads": heads, "rows": len(y), "objective": objective, "predictions": preds})
                print(f"[bench_sag_heads] {label}, {way} ({call} call): {seconds:.1f} s", flush=True)
    return rows


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="simulator_adauction")
    ap.add_argument("--heads", type=int, default=10)
    ap.add_argument("--out", default=str(RESULTS / "sag_heads"))
    args = ap.parse_args(argv)
    if args.heads < 1:
        ap.error("--heads must be at least 1")
    from benchmarks import machine_speed
    from calib_jax.io import atomic_write_text, markdown_table, write_csv

    warnings.simplefilter("ignore")
    reference_before = machine_speed.previous_reference(Path(args.out).with_suffix(".csv"), column="seconds")
    load_start = os.getloadavg()[0]
    t0 = time.perf_counter()
    measured = measure(args.dataset, args.heads)
    reference = machine_speed.reference_seconds()
    header = ["dataset", "variant", "way", "call", "seconds", "heads", "D_val rows", "mean objective / anchor's - 1",
              "max |p - anchor's p|"]
    anchors = {(r["variant"], r["call"]): r for r in measured if r["way"] == WAYS[0]}
    rows = []
    for r in measured:
        anchor = anchors[(r["variant"], r["call"])]
        relative = None if r["objective"] is None else f"{r['objective'] / anchor['objective'] - 1:.2e}"
        moved = float(np.max(np.abs(r["predictions"] - anchor["predictions"])))
        rows.append([r["dataset"], r["variant"], r["way"], r["call"], r["seconds"], r["heads"], r["rows"], relative,
                     f"{moved:.2e}"])
    rows.append(["machine", machine_speed.ROW_LABEL, machine_speed.DESCRIPTION, "", reference, "", "", None, None])
    out = Path(args.out)
    write_csv(out.with_suffix(".csv"), header, rows)
    second = {(r["variant"], r["way"]): r["seconds"] for r in measured if r["call"] == "second"}
    lines = []
    for label, _, _ in VARIANTS:
        anchor = second[(label, WAYS[0])]
        lines.append(f"- {label}: " + "; ".join(f"{way} {anchor / second[(label, way)]:.2f}x" for way in WAYS[1:])
                     + f" (the anchor, {WAYS[0]}, {anchor:.1f} s for {args.heads} heads)")
    text = (f"# SAG / VR-SAG D_val heads fitted one by one and together\n\n"
            f"`{args.dataset}`, D_val {measured[0]['rows']:,} rows, {args.heads} fits per variant, 100 L-BFGS "
            f"iterations with torch's stopping rules (the paper preset's). Measured in "
            f"{time.perf_counter() - t0:.0f} s; 1-min load average {load_start:.2f} at the start, "
            f"{os.getloadavg()[0]:.2f} at the end, on {os.cpu_count()} cores of {machine_speed.cpu_description()}. "
            f"{machine_speed.comparison_sentence(reference, reference_before)}\n\n"
            "Speed-up over fitting the heads one by one with the sequential solver (second calls):\n\n"
            + "\n".join(lines) + "\n\n" + markdown_table(header, rows, digits=4) + "\n")
    atomic_write_text(out.with_suffix(".md"), text)
    print(text)
    return measured


if __name__ == "__main__":
    main()
