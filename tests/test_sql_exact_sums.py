"""DuckDB's sums of doubles are exact fixed-point sums (calib_jax.logs.sql.exact_sums): the
same bits run to run and on any number of threads, for every query the log engine runs.

Before them, two runs of ``evaluate`` on one weighted 200,000-row log differed in the last
bits (ECE 0.001567768093896343 then 0.0015677680938963124): DuckDB adds each group's
partial sums in the order its threads finish.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
duckdb = pytest.importorskip("duckdb")
import pyarrow.parquet as pq  # noqa: E402

from calib_jax.cli import main  # noqa: E402
from calib_jax.logs.accumulate import Settings  # noqa: E402
from calib_jax.logs.comparison import joint_cells_sql, joint_field_cells_sql, paired_gauc_query  # noqa: E402
from calib_jax.logs.engines import resolve_input, run_query_duckdb  # noqa: E402
from calib_jax.logs.slicing import slice_cells_sql, slice_field_cells_sql, slice_gauc_sql  # noqa: E402
from calib_jax.logs.sql import EXACT_SUM_BITS, QueryColumns, exact_sums, statistics_sql  # noqa: E402


# ------------------------------------------------------------------------------- the rendering
def test_markers_render_per_dialect_and_leave_other_text_alone():
    q = "SELECT dsum(w * (p * p)) AS a, COALESCE(dsum(pos + neg), 0.0) AS b, xdsum(q), sum(n), dsum_x FROM t"
    spark = exact_sums(q, "spark")
    assert spark == "SELECT sum(w * (p * p)) AS a, COALESCE(sum(pos + neg), 0.0) AS b, xdsum(q), sum(n), dsum_x FROM t"
    assert exact_sums(q, "bigquery") == spark
    duck = exact_sums(q, "duckdb")
    assert "dsum(" not in duck.replace("xdsum(", "") and duck.count("AS HUGEINT") == 2
    assert "CAST((w * (p * p)) * 1.152921504606847e+18 AS HUGEINT)" in duck and "CAST((pos + neg) * " in duck
    assert exact_sums(duck, "duckdb") == duck  # rendering twice changes nothing
    with pytest.raises(ValueError, match="dialect"):
        exact_sums(q, "oracle")
    with pytest.raises(ValueError, match="unbalanced"):
        exact_sums("SELECT dsum(w * (p) FROM t", "duckdb")


def test_the_scale_is_two_to_the_sixty_exactly():
    assert float(2 ** EXACT_SUM_BITS) == 2.0 ** 60
    assert duckdb.sql("SELECT 1.152921504606847e+18 = CAST(2 AS DOUBLE) ** 60").fetchall() == [(True,)]


def test_a_sum_is_the_exact_sum_of_the_rounded_summands_in_any_order():
    rng = np.random.default_rng(0)
    v = np.concatenate([rng.lognormal(-3, 4, 5000), -rng.uniform(0, 1e-3, 5000), [1e-25, 3e6, 0.1]])
    scale = 2 ** EXACT_SUM_BITS
    # the independent reference: rational arithmetic of round(v 2^60) / 2^60 (to nearest, ties to
    # even, as np.rint and DuckDB's cast to HUGEINT round), then to the nearest double
    exact = float(Fraction(sum(int(np.rint(x * scale)) for x in v), scale))
    q = exact_sums("SELECT dsum(v) AS s FROM t", "duckdb")
    got = set()
    for k in range(4):
        t = pa.table({"v": rng.permutation(v)})  # noqa: F841 - read by DuckDB by name
        con = duckdb.connect(config={"threads": 1 + k})
        got.add(con.sql(q).fetchall()[0][0])
        con.close()
    assert got == {exact}
    # a plain double sum is within rounding of it (the reference is right, not merely stable)
    assert exact == pytest.approx(float(np.sum(v)), rel=1e-12)


# ------------------------------------------------------------ every query: the same bits on 1 and 4 threads
@pytest.fixture(scope="module")
def log(tmp_path_factory):
    rng = np.random.default_rng(3)
    n = 240_000
    p = rng.uniform(0.01, 0.6, n)
    path = tmp_path_factory.mktemp("exact") / "log.parquet"
    pq.write_table(pa.table({
        "p": p, "q": np.clip(p * rng.lognormal(0, 0.3, n), 0, 1), "y": (rng.uniform(size=n) < p).astype(np.int8),
        "w": rng.lognormal(0, 1, n), "pi": np.clip(p * 1.1, 0, 1), "u": rng.integers(0, 3000, n).astype(str),
        "f": rng.integers(0, 30, n).astype(str), "day": rng.integers(0, 5, n).astype(str)}),
        path, row_group_size=12_000)  # 20 row groups: DuckDB's threads take them in any order
    return path


S = Settings(n_boot=0)
QUERIES = {
    "evaluate": (["p", "y", "w", "pi"], ["f", "u"], lambda r: statistics_sql(
        Settings(n_boot=0, fields=("f",), oracle=True), QueryColumns(label="y", score="p", weight="w", oracle="pi", fields=("f",), user="u"), source=r)),
    "compare": (["p", "q", "y", "w", "pi"], [], lambda r: joint_cells_sql(
        S, label="y", scores=["p", "q"], weight="w", source=r, oracle="pi")),
    "compare --field": (["p", "q", "y", "w"], ["f"], lambda r: joint_field_cells_sql(
        S, label="y", scores=["p", "q"], fields=["f"], weight="w", source=r)),
    "compare --user": (["p", "q", "y", "w"], ["u"], lambda r: paired_gauc_query(
        label="y", scores=["p", "q"], user="u", weight="w", source=r)),
    "--by": (["p", "y", "w"], ["day"], lambda r: slice_cells_sql(
        S, label="y", score="p", weight="w", by="day", every=None, source=r)),
    "--by --oracle": (["p", "y", "w", "pi"], ["day"], lambda r: slice_cells_sql(
        S, label="y", score="p", weight="w", by="day", every=None, source=r, oracle="pi")),
    "--by --user": (["p", "y", "w"], ["day", "u"], lambda r: slice_gauc_sql(
        label="y", score="p", weight="w", by="day", every=None, user="u", source=r)),
    "--by --field": (["p", "y", "w"], ["day", "f"], lambda r: slice_field_cells_sql(
        S, label="y", score="p", weight="w", by="day", every=None, fields=["f"], source=r)),
}


def _sorted(t):
    """The result's rows in one order (DuckDB returns groups in any order): by every column."""
    return t.sort_by([(c, "ascending") for c in t.column_names])


@pytest.mark.parametrize("name", list(QUERIES))
def test_every_query_gives_the_same_bits_on_any_number_of_threads(log, name):
    numeric, text, make = QUERIES[name]
    inp = resolve_input(log)
    runs = [_sorted(run_query_duckdb(inp, numeric, text, make, threads=t)) for t in (1, 4, 4)]
    assert runs[0].num_rows > 0
    for other in runs[1:]:
        assert other.equals(runs[0]), name


# ---------------------------------------------------------------------------------- the range
def test_sums_beyond_the_range_are_refused_naming_the_way_out(tmp_path, capsys):
    # weights sum to at most 1e18 (checked for every engine), so only a log loss beyond 74 takes a
    # sum past 2^66: a finite logit of -1e25 on a click (log loss 1e25)
    path = tmp_path / "huge.parquet"
    pq.write_table(pa.table({"o": [-1.0, 0.5, -1e25], "y": [0, 1, 1]}), path)
    code = main(["evaluate", str(path), "--logit", "o", "--label", "y", "--engine", "duckdb",
                 "--bootstrap", "0", "--quiet", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "exact sums" in err and "--engine arrow" in err and "Traceback" not in err
    # the arrow engine reads the same log
    assert main(["evaluate", str(path), "--logit", "o", "--label", "y", "--engine", "arrow",
                 "--bootstrap", "0", "--quiet", "--out", str(tmp_path / "a")]) == 0
