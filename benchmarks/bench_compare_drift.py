"""What comparing two models (``calib-jax compare``) and a report per day (``evaluate --by``)
cost next to evaluating one model on the whole log.

    python -m benchmarks.bench_compare_drift [--sizes 1e6,1e7,1e8] [--engines duckdb,arrow] [--boot 200]

For each size a Parquet log is generated once: a label, two models' scores on the same
impressions (production, and a candidate whose logit differs by N(0, 0.3²) noise), rounded to
six digits as logged scores are, and a timestamp spread over 30 days. Each measurement runs in
a fresh subprocess (``benchmarks.bench_cli``'s runner) and reports wall seconds and peak
resident memory:

* ``calib-jax evaluate --engine E --score prod --bootstrap B`` (one model, the cell bootstrap);
* ``calib-jax compare --engine E --score prod --score cand --bootstrap B`` (both models, every
  paired difference);
* ``calib-jax evaluate --engine E --score prod --by ts --every day --bootstrap B`` (30 slices,
  their intervals and change flags),

with the ratio of each to the first: the target is <= 2 at 10^8 rows with DuckDB. The arrow
engine holds the rows' cells in memory and runs up to ``--arrow-max`` rows. The numbers are
checked in ``tests/test_cli_compare.py`` and ``tests/test_cli_slices.py``; here only time and
memory. Results: ``benchmarks/results/compare_drift.{csv,md}``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.bench_cli import _CLI, _available, _run, write_in_chunks

RESULTS = Path(__file__).resolve().parent / "results"


def make_log(path: Path, n: int, seed: int = 0) -> None:
    """A log of ``n`` rows with columns ``label``, ``prod``, ``cand`` and ``ts`` (30 days)."""
    import pyarrow as pa

    def chunk(rng: np.random.Generator, m: int) -> pa.Table:
        o = rng.normal(-3.2, 1.0, m)
        y = (rng.random(m) < 1 / (1 + np.exp(-o))).astype(np.int8)
        prod = np.round(1 / (1 + np.exp(-(0.85 * o - 0.4))), 6)
        cand = np.round(1 / (1 + np.exp(-(o + rng.normal(0.0, 0.3, m)))), 6)
        ts = np.datetime64("2026-11-01T00:00:00", "s") + rng.integers(0, 30 * 86400, m).astype("timedelta64[s]")
        return pa.table({"label": y, "prod": prod, "cand": cand, "ts": ts})

    write_in_chunks(path, n, chunk, step=2_000_000, seed=seed)


def main(argv: list[str] | None = None) -> int:
    from calib_jax.io import write_table

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1e6,1e7,1e8")
    ap.add_argument("--engines", default="duckdb,arrow")
    ap.add_argument("--boot", type=int, default=200)
    ap.add_argument("--arrow-max", type=float, default=1e7)
    args = ap.parse_args(argv)
    rows = []
    engines = [e for e in args.engines.split(",") if _available(e)]
    with tempfile.TemporaryDirectory(prefix="bench-compare-drift-") as tmp:
        for n in (int(float(s)) for s in args.sizes.split(",")):
            log = Path(tmp) / f"log_{n}.parquet"
            make_log(log, n)
            for engine in engines:
                if engine == "arrow" and n > args.arrow_max:
                    continue
                common = ["--engine", engine, "--bootstrap", str(args.boot), "--quiet"]
                one = _run(_CLI, ["evaluate", str(log), "--label", "label", "--score", "prod",
                                  "--out", str(Path(tmp) / "one"), *common])
                rows.append([f"calib-jax evaluate --engine {engine} (1 model)", n, "-", one["s"], 1.0,
                             one["rss_mb"]])
                print(rows[-1], flush=True)
                two = _run(_CLI, ["compare", str(log), "--label", "label", "--score", "prod", "--score", "cand",
                                  "--out", str(Path(tmp) / "two"), *common])
                cells = json.loads((Path(tmp) / "two" / "compare.json").read_text())["joint_cells"]
                rows.append([f"calib-jax compare --engine {engine} (2 models, paired)", n, cells, two["s"],
                             two["s"] / one["s"], two["rss_mb"]])
                print(rows[-1], flush=True)
                by = _run(_CLI, ["evaluate", str(log), "--label", "label", "--score", "prod", "--by", "ts", "--every",
                                 "day", "--out", str(Path(tmp) / "by"), *common])
                rows.append([f"calib-jax evaluate --engine {engine} --by ts --every day (30 slices)", n, "-", by["s"],
                             by["s"] / one["s"], by["rss_mb"]])
                print(rows[-1], flush=True)
    write_table(RESULTS / "compare_drift",
                ["tool", "rows", "joint cells", "wall s", "vs evaluate of one model", "peak RSS MB"], rows, digits=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
