"""The bound of another query design for ``calib-jax compare``: per-model marginal sums and
joint counts only, against today's joint cells, on DuckDB.

    python -m benchmarks.bench_compare_design [--rows 1e8] [--reps 2]

``compare`` groups the rows by every model's cell at once (label, and each model's fine logit
bin and probability bin) and sums each model's seven statistics per joint cell. At 10^8 rows
that ``GROUP BY`` (379,938 joint cells, 14 sums) makes the command 3.3x one ``evaluate``
(``benchmarks/results/compare_drift.md``). A cheaper design keeps the joint cells' counts and
weights only, and each model's sums per its own cell (two marginal ``GROUP BY``\\ s of
``evaluate``'s size). Its paired bootstrap would give a joint cell the statistics of its
model's marginal cell, scaled by the joint cell's weight: an approximation within a fine logit
bin (width 32/4096 in logit). This measures what the queries cost, on the generated two-model
log of ``benchmarks.bench_compare_drift``:

* ``evaluate``: the statistics query of one model (the reference, ratio 1);
* ``joint``: today's joint-cells query of two models (:func:`calib_jax.logs.comparison.joint_cells_sql`);
* ``marginal (union)``: the joint counts and weights plus each model's marginal sums, as three
  ``GROUP BY``\\ s joined by ``UNION ALL`` over the same rows;
* ``joint counts only``: the joint ``GROUP BY`` with a count and a weight, no sums. No design
  that keeps joint cells can go below it.

Each query runs ``--reps`` times in one process, and the best wall time counts. Results:
``benchmarks/results/compare_design.{csv,md}``.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def marginal_union_sql(ctes: str, n_models: int, *, counts_only: bool = False) -> str:
    """The joint counts and weights, and (unless ``counts_only``) each model's marginal sums,
    over the ``cells`` CTE of the joint-cells query."""
    ms = range(n_models)
    keys = ", ".join(f"hb_{m}, rb_{m}" for m in ms)
    parts = [f"SELECT -1 AS part, bad, yi, {keys}, count(*) AS n, sum(w) AS sv"
             + ", NULL AS svp, NULL AS svpp, NULL AS svo, NULL AS sbrier, NULL AS snll, NULL AS smae"
             + f" FROM cells GROUP BY bad, yi, {keys}"]
    if not counts_only:
        for m in ms:
            own = ", ".join(f"hb_{k}, rb_{k}" if k == m else "NULL, NULL" for k in ms)
            parts.append(
                f"SELECT {m} AS part, bad, yi, {own}, count(*) AS n, sum(w) AS sv, sum(w * p{m}), "
                f"sum(w * (p{m} * p{m})), sum(w * oc{m}), sum(w * ((y - p{m}) * (y - p{m}))), "
                f"sum(w * nll{m}), sum(w * abs(y - p{m})) FROM cells GROUP BY bad, yi, hb_{m}, rb_{m}")
    return f"WITH {ctes}\n" + "\nUNION ALL\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    from benchmarks.bench_compare_drift import make_log
    from calib_jax.io import write_table
    from calib_jax.logs import sql
    from calib_jax.logs.accumulate import Settings
    from calib_jax.logs.comparison import joint_cells_sql
    from calib_jax.logs.engines import resolve_input, run_query_duckdb

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=float, default=1e8)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--out", default=str(RESULTS / "compare_design"))
    a = ap.parse_args(argv)
    n = int(a.rows)
    s = Settings(n_boot=0)

    def ctes(r: str) -> str:
        """The joint-cells query's CTEs up to ``cells`` (its text before the final ``SELECT``)."""
        q = joint_cells_sql(s, label="label", scores=["prod", "cand"], weight=None, source=r)
        return q[q.index("WITH ") + 5:q.rindex("\nSELECT bad, yi AS y")]

    queries = {
        "evaluate (1 model)": (["prod", "label"], lambda r: sql.statistics_sql(
            s, sql.QueryColumns(label="label", score="prod"), source=r)),
        "joint cells (today)": (["prod", "cand", "label"], lambda r: joint_cells_sql(
            s, label="label", scores=["prod", "cand"], weight=None, source=r)),
        "marginal sums + joint counts (union)": (["prod", "cand", "label"],
                                                 lambda r: marginal_union_sql(ctes(r), 2)),
        "joint counts only (the floor)": (["prod", "cand", "label"],
                                          lambda r: marginal_union_sql(ctes(r), 2, counts_only=True)),
    }
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-compare-design-") as tmp:
        log = Path(tmp) / "log.parquet"
        make_log(log, n)
        inp = resolve_input(log)
        base = None
        for name, (cols, make) in queries.items():
            best, groups = float("inf"), 0
            for _ in range(a.reps):
                t0 = time.perf_counter()
                got = run_query_duckdb(inp, cols, [], make)
                best = min(best, time.perf_counter() - t0)
                groups = got.num_rows
            base = base or best
            rows.append([name, n, groups, round(best, 2), round(best / base, 2),
                         f"{platform.machine()}, {os.cpu_count()} cores"])
            print(rows[-1], flush=True)
    write_table(Path(a.out), ["query (DuckDB)", "rows", "result rows", "best wall s", "vs evaluate", "machine"], rows,
                digits=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
