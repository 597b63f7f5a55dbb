"""What DuckDB's exact sums cost (:func:`calib_jax.logs.sql.exact_sums`) next to plain sums of doubles.

    python -m benchmarks.bench_exact_sums [--rows 1e7] [--reps 3]

The log engine writes every sum of doubles as an exact fixed-point sum on DuckDB, so that a
report has the same bits on any number of threads. This measures the price. On one generated
Parquet log (the two-model log of ``benchmarks.bench_compare_drift``), each query runs with
exact sums, with plain ``sum`` and with ``fsum``, in turn, ``--reps`` times each in one process. The
queries are ``evaluate``'s statistics query and ``compare``'s joint-cells query of two models.
A third variant, DuckDB's compensated ``fsum`` (Kahan-Babuska), is measured beside them: it is
cheaper, but its last rounding can still depend on the order of the rows, so it is not the
library's choice. The report gives the best wall time of each and the ratios to plain sums. Results:
``benchmarks/results/exact_sums.{csv,md}``.
"""

from __future__ import annotations

import argparse
import platform
import re
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> int:
    import calib_jax.logs.sql as sql
    from benchmarks.bench_compare_drift import make_log
    from calib_jax.io import write_table
    from calib_jax.logs.accumulate import Settings
    from calib_jax.logs.comparison import joint_cells_sql
    from calib_jax.logs.engines import resolve_input, run_query_duckdb

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=float, default=1e7)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=str(RESULTS / "exact_sums"))
    a = ap.parse_args(argv)
    n = int(a.rows)
    exact = sql.exact_sums
    marker = re.compile(r"(?<![A-Za-z0-9_])dsum\(")
    renderers = {"exact": exact,
                 "plain": lambda q, dialect: marker.sub("sum(", q),  # the text DuckDB ran before
                 "fsum": lambda q, dialect: marker.sub("fsum(", q)}
    s = Settings(n_boot=0)
    queries = {
        "evaluate (statistics query)": (["prod", "label"], lambda r: sql.statistics_sql(
            s, sql.QueryColumns(label="label", score="prod"), source=r)),
        "compare (joint cells, 2 models)": (["prod", "cand", "label"], lambda r: joint_cells_sql(
            s, label="label", scores=["prod", "cand"], weight=None, source=r)),
    }
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "log.parquet"
        make_log(log, n)
        inp = resolve_input(log)
        for name, (cols, make) in queries.items():
            best = dict.fromkeys(renderers, float("inf"))
            for _ in range(a.reps):
                for kind, render in renderers.items():
                    sql.exact_sums = render
                    try:
                        t0 = time.perf_counter()
                        run_query_duckdb(inp, cols, [], make)
                        best[kind] = min(best[kind], time.perf_counter() - t0)
                    finally:
                        sql.exact_sums = exact
            rows.append({"query": name, "rows": n, "plain_s": round(best["plain"], 3),
                         "exact_s": round(best["exact"], 3), "fsum_s": round(best["fsum"], 3),
                         "exact_over_plain": round(best["exact"] / best["plain"], 2),
                         "fsum_over_plain": round(best["fsum"] / best["plain"], 2),
                         "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores"})
            print(rows[-1], flush=True)
    header = list(rows[0])
    write_table(Path(a.out), header, [[r[k] for k in header] for r in rows])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
