"""The D_val heads of ``compare_calibrators --paper`` fitted one by one against fitted together.

The paper preset fits every D_val-fitted method ``head_fits`` = 10 times, each fit on its own
bootstrap draw of D_val (``experiments.compare_calibrators._fit_val_methods``). Neural
Calibration (Pan et al., "Field-aware Calibration", WWW 2020, eq. 7-8: an ILPS map of the
logit plus a field MLP, full-batch AdamW) has no data-dependent branch in its training loop,
so its ten fits can run as one ``jax.vmap``-ed program
(:func:`calib_jax.calibrators.neural_calibration.fit_many` with one weight row per draw).
This benchmark fits the ten heads both ways on one world's D_val, in the same run, with the
study's settings (``nc_steps`` 500, the draws and keys of the study), and reports

* the seconds of each way (the first, compiling call, and a second call on other keys);
* the ratio sequential / batched (the anchor is the sequential loop the study ran until now);
* how far apart the two ways' predictions lie on the world's standard test set (max |dp|),
  the "float32 rounding of the batched products" the batched path is held to.

    python -m benchmarks.bench_heads [--dataset simulator_adauction] [--heads 10] [--steps 500]

Writes benchmarks/results/heads.{csv,md}.
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
import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def measure(dataset: str, heads: int, steps: int) -> dict[str, Any]:
    """Seconds of the ``heads`` Neural Calibration fits one by one and together (twice each)."""
    from calib_jax.calibrators import neural_calibration as ncal
    from experiments import compare_calibrators as cc
    from experiments._datasets import load_dataset

    data = load_dataset(dataset, seed=0, sim="default")
    if data is None:
        raise ValueError(f"dataset {dataset!r} is not available")
    val, pool = data["out"].val, cc._pool(data["out"])
    ctx = {"fields": val.fields[:, data["nc_cols"]]}
    pool_fields, pool_labels = pool["fields"], pool["labels"]
    assert pool_fields is not None and pool_labels is not None  # every simulator world has both
    pool_ctx = {"fields": pool_fields[:, data["nc_cols"]]}
    n = len(val.labels)
    out: dict[str, Any] = {"dataset": dataset, "rows": n, "heads": heads, "steps": steps, "seconds": {}}
    preds: dict[str, list[np.ndarray]] = {}
    for call, base in (("first", 0), ("second", 1)):
        key = jax.random.fold_in(jax.random.key(0), 2 + 100 * base)
        draws = cast(list[np.ndarray], [cc._draw(n, jax.random.fold_in(key, 10_000 + h), "bootstrap")
                                        for h in range(heads)])  # a bootstrap draw is never None
        keys = [jax.random.fold_in(key, h) for h in range(heads)]
        t0 = time.perf_counter()
        one = [jax.block_until_ready(ncal.fit(val.logits, val.labels, key=keys[h], weights=draws[h], context=ctx,
                                              n_steps=steps)) for h in range(heads)]
        out["seconds"][f"sequential ({call} call)"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        many = jax.block_until_ready(ncal.fit_many(val.logits, val.labels, keys=keys, weights=np.stack(draws),
                                                   context=ctx, n_steps=steps))
        out["seconds"][f"batched ({call} call)"] = time.perf_counter() - t0
        preds[call] = [np.abs(np.asarray(ncal.predict(a, pool["logits"], context=pool_ctx))
                              - np.asarray(ncal.predict(b, pool["logits"], context=pool_ctx))).max()
                       for a, b in zip(one, many, strict=True)]
    out["max_abs_dp"] = float(max(max(v) for v in preds.values()))
    out["pool_rows"] = len(pool_labels)
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="simulator_adauction")
    ap.add_argument("--heads", type=int, default=10)
    ap.add_argument("--steps", type=int, default=500, help="AdamW steps per fit (the paper preset's nc_steps)")
    ap.add_argument("--out", default=str(RESULTS / "heads"))
    args = ap.parse_args(argv)
    from benchmarks.pages import write_page

    warnings.simplefilter("ignore")
    load_start = os.getloadavg()[0]
    t0 = time.perf_counter()
    m = measure(args.dataset, args.heads, args.steps)
    s = m["seconds"]
    rows = [[m["dataset"], "Neural Calibration", call, secs, m["heads"], m["rows"], m["steps"]]
            for call, secs in s.items()]
    header = ["dataset", "method", "way", "seconds", "heads", "D_val rows", "steps"]
    out = Path(args.out)
    ratio = s["sequential (second call)"] / s["batched (second call)"]
    text = (f"# D_val heads fitted one by one and together\n\n"
            f"`{m['dataset']}`, D_val {m['rows']:,} rows, {m['heads']} Neural Calibration fits of {m['steps']} "
            f"AdamW steps, each on its own bootstrap draw (the paper preset's). Measured in "
            f"{time.perf_counter() - t0:.0f} s; 1-min load average {load_start:.2f} at the start, "
            f"{os.getloadavg()[0]:.2f} at the end, on {os.cpu_count()} cores.\n\n"
            f"Sequential / batched (second calls): **{ratio:.2f}x**. The two ways' predictions on the "
            f"{m['pool_rows']:,}-row standard test set differ by at most {m['max_abs_dp']:.2e}.\n\n")
    write_page(out, text, header, rows)
    return m


if __name__ == "__main__":
    main()
