"""What ``--user`` (GAUC, exact, in the engine) adds to ``calib-jax evaluate``, next to pandas.

    python -m benchmarks.bench_gauc [--sizes 1e6,1e7] [--engines duckdb,arrow] [--anchor-max 1e7]

For each size a Parquet log is generated once: a score, a label and an integer user id (20
impressions per user on average, Zipf-distributed). Each measurement runs in a fresh
subprocess (``benchmarks.bench_cli``'s runner) and reports wall seconds and peak resident
memory:

* ``calib-jax evaluate --engine E`` without and with ``--user`` (no bootstrap: the statistics
  query and the report; GAUC's interval is closed-form), so the ratio is GAUC's cost;
* the anchor: pandas reads the file and computes every user's AUC with a grouped average rank
  (the Mann-Whitney form, ties one half), then the impression-weighted mean, up to
  ``--anchor-max`` rows.

The values are checked against each other in ``tests/test_cli_gauc.py``; here only time and
memory. Results: ``benchmarks/results/gauc.{csv,md}``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.bench_cli import _CLI, _available, _run, write_in_chunks

RESULTS = Path(__file__).resolve().parent / "results"

_ANCHOR = """
import json, resource, sys, time
t = time.perf_counter()
import numpy as np, pandas as pd
df = pd.read_parquet(sys.argv[1], columns=["score", "label", "user"])
df["r"] = df.groupby("user")["score"].rank(method="average")
g = df.assign(rp=df["r"] * df["label"]).groupby("user").agg(n=("label", "size"), pos=("label", "sum"),
                                                             rp=("rp", "sum"))
g = g[(g["pos"] > 0) & (g["pos"] < g["n"])]
auc = (g["rp"] - g["pos"] * (g["pos"] + 1) / 2) / (g["pos"] * (g["n"] - g["pos"]))
print(json.dumps({"rc": 0, "s": time.perf_counter() - t, "gauc": float(np.sum(g["n"] * auc) / np.sum(g["n"])),
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def make_log(path: Path, n: int, seed: int = 0) -> None:
    """A log of ``n`` rows with columns ``score``, ``label`` and ``user`` (about n / 20 users)."""
    import pyarrow as pa

    users = max(n // 20, 1)

    def chunk(rng: np.random.Generator, m: int) -> pa.Table:
        u = (rng.zipf(1.3, m) * 7919 + rng.integers(0, users, m)) % users
        o = rng.normal(-3.2, 1.0, m) + 0.3 * np.sin(u)
        y = (rng.random(m) < 1 / (1 + np.exp(-o))).astype(np.int8)
        p = np.round(1 / (1 + np.exp(-(o + 0.2))), 6)  # six digits: ties within users, as logged scores have
        return pa.table({"score": p, "label": y, "user": u.astype(np.int64)})

    write_in_chunks(path, n, chunk, step=1_000_000, seed=seed)


def main(argv: list[str] | None = None) -> int:
    from calib_jax.io import write_table

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1e6,1e7")
    ap.add_argument("--engines", default="duckdb,arrow")
    ap.add_argument("--anchor-max", type=float, default=1e7)
    args = ap.parse_args(argv)
    rows = []
    engines = [e for e in args.engines.split(",") if _available(e)]
    with tempfile.TemporaryDirectory(prefix="bench-gauc-") as tmp:
        for n in (int(float(s)) for s in args.sizes.split(",")):
            log = Path(tmp) / f"log_{n}.parquet"
            make_log(log, n)
            for engine in engines:
                base = None
                for user in ([], ["--user", "user"]):
                    r = _run(_CLI, ["evaluate", str(log), "--score", "score", "--label", "label", "--bootstrap", "0",
                                    "--engine", engine, "--out", str(Path(tmp) / "rep"), "--quiet", *user])
                    base = base or r["s"]
                    rows.append([f"calib-jax evaluate --engine {engine}" + (" --user" if user else ""), n,
                                 r["s"], r["s"] / base, r["rss_mb"]])
                    print(rows[-1], flush=True)
            if n <= args.anchor_max:
                r = _run(_ANCHOR, [str(log)])
                rows.append(["pandas grouped ranks (GAUC only, in memory)", n, r["s"], "-", r["rss_mb"]])
                print(rows[-1], flush=True)
    write_table(RESULTS / "gauc", ["tool", "rows", "wall s", "vs evaluate without --user", "peak RSS MB"], rows,
                digits=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
