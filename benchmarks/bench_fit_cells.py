"""``calib-jax fit --engine`` (a calibrator from the log's cells) against the row-level fit and scikit-learn.

    python -m benchmarks.bench_fit_cells [--sizes 1e6,1e7,1e8] [--engines duckdb,spark] [--rows-max 1e7]
                                         [--methods platt,isotonic] [--name fit_cells]

For each size a Parquet log (``benchmarks.bench_cli.make_log``: score, label, a field) is
generated once. Each measurement runs in a fresh subprocess and reports wall seconds and the
peak resident set size of that process (Spark: of the Python driver; the JVM is another
process):

* ``calib-jax fit --engine E``: one query (or the streamed reader) for the cells, then the fit
  on at most 2 x 4096 weighted rows;
* ``calib-jax fit`` on the rows (all in memory), up to ``--rows-max`` rows;
* the anchor: pandas reads the file and scikit-learn fits the same map in memory (Platt:
  ``LogisticRegression`` on the logit without a penalty; isotonic: ``IsotonicRegression``),
  up to ``--rows-max`` rows.

The agreement of the cell fit with the row-level fit is tested in
``tests/test_cli_fit_cells.py``; here only time and memory. Results:
``benchmarks/results/<name>.{csv,md}`` (``fit_cells``; the 10^9-row Spark run is kept apart as
``fit_cells_1e9``: ``--sizes 1e9 --rows-max 0 --name fit_cells_1e9``, about half an hour here).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from benchmarks.bench_cli import _CLI, _available, _run, make_log

RESULTS = Path(__file__).resolve().parent / "results"

_ANCHOR = """
import json, resource, sys, time
t = time.perf_counter()
import numpy as np, pandas as pd
df = pd.read_parquet(sys.argv[1], columns=["score", "label"])
p, y = df["score"].to_numpy(), df["label"].to_numpy()
z = (np.log(p) - np.log1p(-p)).reshape(-1, 1)
if sys.argv[2] == "platt":
    from sklearn.linear_model import LogisticRegression
    LogisticRegression(penalty=None).fit(z, y)
else:
    from sklearn.isotonic import IsotonicRegression
    IsotonicRegression(out_of_bounds="clip").fit(z[:, 0], y)
print(json.dumps({"rc": 0, "s": time.perf_counter() - t,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

_SPARK = ["--spark-master", "local[2]", "--spark-conf", "spark.ui.enabled=false",
          "--spark-conf", "spark.sql.shuffle.partitions=4"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1e6,1e7,1e8")
    ap.add_argument("--engines", default="duckdb,spark")
    ap.add_argument("--methods", default="platt,isotonic")
    ap.add_argument("--rows-max", type=float, default=1e7,
                    help="largest log fitted on the rows in memory (the row fit and the anchor hold it whole)")
    ap.add_argument("--name", default="fit_cells", help="results file stem under benchmarks/results/")
    args = ap.parse_args(argv)
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    engines = [e for e in args.engines.split(",") if _available(e)]
    methods = args.methods.split(",")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            log = Path(tmp) / f"log_{n}.parquet"
            make_log(log, n)
            for method in methods:
                base = ["fit", str(log), "--score", "score", "--label", "label", "--method", method, "--quiet"]
                for engine in engines:
                    r = _run(_CLI, [*base, "--engine", engine, *(_SPARK if engine == "spark" else []),
                                    "--save", str(Path(tmp) / f"{method}_{engine}.json")])
                    rows.append([f"calib-jax fit --engine {engine}", method, n, r["s"], n / r["s"], r["rss_mb"]])
                    print(rows[-1], flush=True)
                if n <= args.rows_max:
                    r = _run(_CLI, [*base, "--save", str(Path(tmp) / f"{method}_rows.json")])
                    rows.append(["calib-jax fit (rows in memory)", method, n, r["s"], n / r["s"], r["rss_mb"]])
                    print(rows[-1], flush=True)
                    r = _run(_ANCHOR, [str(log), method])
                    rows.append(["pandas + scikit-learn (in memory)", method, n, r["s"], n / r["s"], r["rss_mb"]])
                    print(rows[-1], flush=True)
            log.unlink()
    from calib_jax.io import write_table

    header = ["tool", "method", "rows", "wall s", "rows/s", "peak RSS MB"]
    write_table(RESULTS / args.name, header, rows, digits=2)
    print((RESULTS / f"{args.name}.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
