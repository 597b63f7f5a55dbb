"""The statistics query (calib_jax.logs.sql) on DuckDB and Spark against the streamed arrow path.

Every engine must give the arrow path's tables: counts exactly, sums to float64 rounding
(rtol 1e-12), on logs with weights, missing field values, an oracle column, invalid rows and
edge scores (0, 1, the probability-bin edges m/M, logits on the fine grid's edges).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
duckdb = pytest.importorskip("duckdb")
import pyarrow.csv as pcsv  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from calib_jax.cli import main  # noqa: E402
from calib_jax.logs import loaders  # noqa: E402
from calib_jax.logs.accumulate import Accumulator, Settings  # noqa: E402
from calib_jax.logs.engines import resolve_input, run_duckdb  # noqa: E402
from calib_jax.logs.sql import (  # noqa: E402
    QueryColumns,
    accumulator_from_aggregates,
    problems_from_aggregates,
    statistics_sql,
)
from calib_jax.logs.validate import Columns, Problems, clean_chunk  # noqa: E402


def _log(n: int, seed: int, *, invalid: bool = True, levels: int = 12) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    o = rng.normal(-1.5, 2.0, n)
    H, L = 4096, 16.0
    o[:6] = [0.0, 2 * L / H, -L, L, -L + 7 * 2 * L / H, 40.0]  # fine-grid edges and a clipped logit
    p = 1 / (1 + np.exp(-o))
    p[6:12] = [0.0, 1.0, 1 / 15, 2 / 15, 7 / 15, 14 / 15]  # probability-bin edges (as floats)
    y = (rng.random(n) < np.clip(p, 0.02, 0.98)).astype(np.float64)
    w = rng.exponential(1.0, n)
    w[20] = 0.0  # a zero-weight row is kept (counted, no weight)
    pi = np.clip(p + rng.normal(0, 0.03, n), 0, 1)
    site = np.array([f"s{k}" for k in rng.zipf(1.6, n) % levels], dtype=object)
    site[rng.random(n) < 0.05] = None  # missing values: the level __missing__
    if invalid:
        p[30], y[31], w[32], pi[33], o[34] = np.nan, 2.0, -1.0, 1.5, np.inf
        p[35], y[36], w[37] = 1.5, np.nan, np.inf
    return {"p": p, "o": o, "y": y, "w": w, "pi": pi, "site": site}


def _write(d: dict[str, np.ndarray], path: Path) -> Path:
    t = pa.table({k: pa.array(v, pa.string()) if k == "site" else v for k, v in d.items()})
    if path.suffix == ".parquet":
        pq.write_table(t, path, row_group_size=700)  # several row groups
    else:
        pcsv.write_csv(t, path)
    return path


def _arrow(path: Path, cols: Columns, settings: Settings) -> tuple[Accumulator, Problems]:
    acc, problems, start = Accumulator(settings), Problems(), 0
    fmt = loaders.resolve_format(path)
    for b in loaders.iter_batches(path, fmt, numeric=cols.numeric, text=cols.fields, chunk_rows=997):
        acc.update(clean_chunk(b, cols, start, problems))
        start += b.num_rows
    return acc, problems


def _assert_same(a: Accumulator, b: Accumulator) -> None:
    assert (a.rows_read, a.rows_used) == (b.rows_read, b.rows_used)
    ra, rb = a.replicated(), b.replicated()
    for k in ("scal", "rel", "hist", "oracle_max"):
        np.testing.assert_allclose(getattr(rb, k), getattr(ra, k), rtol=1e-12, atol=1e-11, err_msg=k)
    if a.cells:
        np.testing.assert_array_equal(b.cell_n, a.cell_n)  # counts exactly
        np.testing.assert_allclose(b.cell, a.cell, rtol=1e-12, atol=1e-11)
        np.testing.assert_allclose(b.top_gaps, a.top_gaps, rtol=1e-13)  # p = sigmoid(o): libm may differ by an ulp
    for f in a.settings.fields:
        assert set(a.vocab[f]) == set(b.vocab[f])
        fa, fb = ra.fld[f].reshape(ra.R, -1, 8), rb.fld[f].reshape(rb.R, -1, 8)
        for lv, code in a.vocab[f].items():
            np.testing.assert_allclose(fb[:, b.vocab[f][lv]], fa[:, code], rtol=1e-12, atol=1e-11, err_msg=lv)
        if a.cells:
            per = 128
            for lv, code in a.vocab[f].items():
                j = b.vocab[f][lv]
                np.testing.assert_array_equal(b.fcell[f][j * per:(j + 1) * per, 4], a.fcell[f][code * per:(code + 1) * per, 4])


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
@pytest.mark.parametrize("mode", ["score", "logit"])
def test_duckdb_tables_equal_the_arrow_path(tmp_path, suffix, mode):
    path = _write(_log(3000, seed=1 if mode == "score" else 2), tmp_path / f"log{suffix}")
    cols = Columns(label="y", weight="w", oracle="pi", fields=("site",), **{mode: "p" if mode == "score" else "o"})
    for n_boot in (0, 30):
        s = Settings(fields=("site",), oracle=True, n_boot=n_boot, scheme="cells")
        a, problems = _arrow(path, cols, s)
        table = run_duckdb(resolve_input(path), QueryColumns.of(cols), s)
        b = accumulator_from_aggregates(table, s)
        _assert_same(a, b)
        assert {f"{c}: {r}": n for (c, r), n in problems_from_aggregates(table, QueryColumns.of(cols)).items()} \
            == problems.as_dict()
    # a null is the level __missing__; in CSV an empty value is text "" (as pyarrow reads it)
    assert ("__missing__" if suffix == ".parquet" else "") in b.vocab["site"]


def test_few_levels_kept_are_the_most_frequent_and_the_rest_is_other(tmp_path):
    d = _log(2000, seed=3, invalid=False, levels=40)
    path = _write(d, tmp_path / "log.parquet")
    s = Settings(fields=("site",), n_boot=0, max_levels=5)
    acc = accumulator_from_aggregates(run_duckdb(resolve_input(path), QueryColumns(label="y", score="p",
                                                                                    fields=("site",)), s), s)
    names, counts = np.unique(np.where(d["site"] == None, "__missing__", d["site"]).astype(str),  # noqa: E711
                              return_counts=True)
    order = sorted(range(names.size), key=lambda j: (-counts[j], names[j]))
    kept = [names[j] for j in order[:5]]
    assert acc.levels("site") == [*kept, "__other__"]
    fld = acc.fld["site"].reshape(-1, 8)
    weights = fld[:, 0] + fld[:, 4]  # per level: weight of label 0 + label 1
    assert weights[5] == pytest.approx(sum(counts[j] for j in order[5:]))
    np.testing.assert_array_equal(weights[:5], [counts[j] for j in order[:5]])


def test_nan_in_parquet_is_caught_despite_the_file_statistics(tmp_path, capsys):
    """pyarrow leaves NaN out of a column's min/max; DuckDB trusts those statistics unless told
    otherwise (duckdb/duckdb#25521) and would fold isnan(p) and p > 1 to false."""
    d = _log(5000, seed=4, invalid=False)
    d["p"][4321] = np.nan
    path = _write(d, tmp_path / "nan.parquet")
    base = ["evaluate", str(path), "--score", "p", "--label", "y", "--bootstrap", "0", "--quiet"]
    assert main([*base, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "column 'p': 1 row missing or NaN (first at data row 4322)" in err
    assert main([*base, "--engine", "arrow", "--out", str(tmp_path / "r")]) == 2
    assert "column 'p': 1 row missing or NaN (first at data row 4322)" in capsys.readouterr().err
    assert main([*base, "--drop-invalid", "--out", str(tmp_path / "r")]) == 0
    assert json.loads((tmp_path / "r" / "report.json").read_text())["input"]["rows_dropped"] == 1


def test_engines_write_the_same_report(tmp_path):
    path = _write(_log(1500, seed=5), tmp_path / "log.csv")
    args = ["--score", "p", "--label", "y", "--weight", "w", "--oracle", "pi", "--field", "site", "--bootstrap", "20",
            "--drop-invalid", "--quiet"]
    reps = {}
    for engine in ("arrow", "duckdb"):
        assert main(["evaluate", str(path), "--engine", engine, "--out", str(tmp_path / engine), *args]) == 0
        reps[engine] = json.loads((tmp_path / engine / "report.json").read_text())
    a, b = reps["arrow"], reps["duckdb"]
    assert a["input"]["dropped"] == b["input"]["dropped"] and b["settings"]["engine"] == "duckdb"
    for ma, mb in zip(a["metrics"], b["metrics"], strict=True):
        for k in ("value", "lo", "hi"):
            if ma[k] is None:
                assert mb[k] is None
            else:
                assert mb[k] == pytest.approx(ma[k], rel=1e-9, abs=1e-12), (ma["name"], k)
    assert [r["value"] for r in a["fields"]["site"]["levels"]] == [r["value"] for r in b["fields"]["site"]["levels"]]


def test_lake_folders_and_globs_equal_one_file(tmp_path, capsys):
    d = _log(2400, seed=6, invalid=False)
    whole = _write(d, tmp_path / "whole.parquet")
    lake = tmp_path / "lake"
    for day in range(3):
        (lake / f"day={day}").mkdir(parents=True)
        part = {k: v[day * 800:(day + 1) * 800] for k, v in d.items()}
        _write(part, lake / f"day={day}" / "part-0.parquet")
    common = ["--score", "p", "--label", "y", "--weight", "w", "--field", "site", "--bootstrap", "0", "--quiet"]
    reps = {}
    for name, src in (("file", whole), ("folder", lake), ("glob", f"{lake}/*/*.parquet")):
        assert main(["evaluate", str(src), "--out", str(tmp_path / name), *common]) == 0
        reps[name] = json.loads((tmp_path / name / "report.json").read_text())
    for name in ("folder", "glob"):
        assert reps[name]["input"]["rows_read"] == 2400
        for ma, mb in zip(reps["file"]["metrics"], reps[name]["metrics"], strict=True):
            assert mb["value"] == pytest.approx(ma["value"], rel=1e-9, abs=1e-12), ma["name"]
    # the hive partition key is a column: per-day fields
    assert main(["evaluate", str(lake), "--out", str(tmp_path / "days"), *common, "--field", "day", "--hive-partitioning"]) == 0
    days = json.loads((tmp_path / "days" / "report.json").read_text())["fields"]["day"]
    assert sorted(r["value"] for r in days["levels"]) == ["0", "1", "2"]
    # the arrow engine reads one file and says so
    assert main(["evaluate", str(lake), "--engine", "arrow", "--out", str(tmp_path / "x"), *common]) == 2
    assert "--engine duckdb" in capsys.readouterr().err
    assert main(["evaluate", str(tmp_path / "none*.parquet"), "--out", str(tmp_path / "x"), *common]) == 2
    assert "no file matches" in capsys.readouterr().err


def test_a_folder_of_several_formats_is_refused_not_read_in_part(tmp_path, capsys):
    # a CSV export beside the Parquet parts: reading the Parquet files alone left the CSV's rows
    # out with exit 0; now the run stops and names both kinds, and --format reads one kind
    d = _log(1200, seed=8, invalid=False)
    lake = tmp_path / "lake"
    lake.mkdir()
    _write({k: v[:800] for k, v in d.items()}, lake / "part-0.parquet")
    _write({k: v[800:] for k, v in d.items()}, lake / "late.csv")
    common = ["--score", "p", "--label", "y", "--bootstrap", "0", "--quiet"]
    for cmd in (["evaluate", str(lake), "--out", str(tmp_path / "r")],
                ["compare", str(lake), "--score", "pi", "--out", str(tmp_path / "c")]):
        assert main([*cmd, *common]) == 2, cmd
        err = capsys.readouterr().err
        assert "several formats (1 parquet, 1 csv)" in err and "--format" in err, err
        assert not (tmp_path / "r").exists() and not (tmp_path / "c").exists()
    for fmt, rows in (("parquet", 800), ("csv", 400)):
        assert main(["evaluate", str(lake), "--format", fmt, "--out", str(tmp_path / fmt), *common]) == 0
        assert json.loads((tmp_path / fmt / "report.json").read_text())["input"]["rows_read"] == rows


def test_sql_command_result_evaluates_like_the_engine(tmp_path, capsys):
    path = _write(_log(1200, seed=7, invalid=False), tmp_path / "log.parquet")
    cols = ["--score", "p", "--label", "y", "--weight", "w", "--oracle", "pi", "--field", "site"]
    assert main(["sql", "--dialect", "duckdb", "--table", f"read_parquet('{path}')", *cols]) == 0
    query = capsys.readouterr().out
    agg = tmp_path / "agg.csv"
    duckdb.sql(query).write_csv(str(agg))  # the user's warehouse exports the result
    assert main(["evaluate", "--aggregates", str(agg), "--out", str(tmp_path / "a"), "--bootstrap", "10",
                 "--quiet"]) == 0
    assert main(["evaluate", str(path), *cols, "--out", str(tmp_path / "d"), "--bootstrap", "10", "--quiet"]) == 0
    a = json.loads((tmp_path / "a" / "report.json").read_text())
    d = json.loads((tmp_path / "d" / "report.json").read_text())
    for ma, mb in zip(d["metrics"], a["metrics"], strict=True):
        for k in ("value", "lo", "hi"):
            assert (mb[k] is None) == (ma[k] is None)
            if ma[k] is not None:
                assert mb[k] == pytest.approx(ma[k], rel=1e-9, abs=1e-12), (ma["name"], k)
    # the aggregates carry their query's settings: another grid is refused, naming the flag
    assert main(["evaluate", "--aggregates", str(agg), "--bins", "20", "--out", str(tmp_path / "b"), "--quiet"]) == 2
    assert "--bins 15" in capsys.readouterr().err
    # a damaged export: one message naming the file
    lines = agg.read_text().splitlines()
    (tmp_path / "bad.csv").write_text("\n".join([lines[0], *[ln.replace(",", ",x", 1) for ln in lines[1:3]]]))
    assert main(["evaluate", "--aggregates", str(tmp_path / "bad.csv"), "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "bad.csv" in err and "Traceback" not in err
    assert not (tmp_path / "b").exists()
    # a stranger's settings row cannot make the command allocate without bound
    import base64

    lines = agg.read_text().splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("settings,"))
    b64 = lines[i].split(",")[2]
    meta = json.loads(base64.b64decode(b64))
    meta["columns"]["fields"] = [f"f{i}" for i in range(100_000)]
    lines[i] = lines[i].replace(b64, base64.b64encode(json.dumps(meta).encode()).decode())
    (tmp_path / "huge.csv").write_text("\n".join(lines))
    assert main(["evaluate", "--aggregates", str(tmp_path / "huge.csv"), "--out", str(tmp_path / "b")]) == 2
    assert "more than" in capsys.readouterr().err


def test_queries_of_every_dialect_quote_names_and_use_its_functions():
    s = Settings(fields=('we"ird`f',), oracle=False, n_boot=0)
    cols = QueryColumns(label="click", score="p ctr", fields=('we"ird`f',))
    duck = statistics_sql(s, cols, source="t", dialect="duckdb")
    spark = statistics_sql(s, cols, source="t", dialect="spark")
    bq = statistics_sql(s, cols, source="`proj.ds.t`", dialect="bigquery")
    assert '"p ctr"' in duck and '"we""ird`f"' in duck and "isnan(" in duck
    assert "`p ctr`" in spark and "`we\"ird``f`" in spark and "STRING" in spark
    assert "IS_NAN(" in bq and "FLOAT64" in bq and "INT64" in bq and "`we\"ird\\`f`" in bq
    with pytest.raises(ValueError, match="dialect"):
        statistics_sql(s, cols, source="t", dialect="oracle")


@pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
def test_spark_local_mode_equals_duckdb(tmp_path):
    """Spark in local mode runs the same query on the same file: the same tables."""
    pyspark = pytest.importorskip("pyspark")
    assert pyspark.__version__.startswith("3.5")
    from calib_jax.logs.engines import run_spark, spark_session

    path = _write(_log(2000, seed=8), tmp_path / "log.parquet")
    spark = spark_session("local[2]", [("spark.ui.enabled", "false"), ("spark.sql.shuffle.partitions", "4")])
    try:
        for mode in ("score",):  # both modes are checked against the arrow path on DuckDB above
            cols = QueryColumns(label="y", weight="w", oracle="pi", fields=("site",),
                                **{mode: "p" if mode == "score" else "o"})
            s = Settings(fields=("site",), oracle=True, n_boot=20, scheme="cells")
            d_tab = run_duckdb(resolve_input(path), cols, s)
            s_tab = run_spark(str(path), cols, s, spark=spark)
            assert problems_from_aggregates(s_tab, cols) == problems_from_aggregates(d_tab, cols)
            _assert_same(accumulator_from_aggregates(d_tab, s), accumulator_from_aggregates(s_tab, s))
        # the command on a Spark table name
        spark.read.parquet(str(path)).createOrReplaceTempView("impressions")
        out = tmp_path / "rep"
        assert main(["evaluate", "impressions", "--engine", "spark", "--score", "p", "--label", "y",
                     "--drop-invalid", "--bootstrap", "0", "--quiet", "--out", str(out)]) == 0
        rep = json.loads((out / "report.json").read_text())
        assert rep["input"]["rows_read"] == 2000 and rep["settings"]["engine"] == "spark"
    finally:
        spark.stop()
    shutil.rmtree(tmp_path / "rep", ignore_errors=True)


def test_every_dialect_parses_under_its_grammar_and_bigquery_runs_as_duckdb(tmp_path):
    """The hand-written dialects checked by a maintained SQL parser (sqlglot): each dialect's
    statistics and first-problem-rows queries parse under that dialect's grammar, and the
    BigQuery text, transpiled to DuckDB by sqlglot, returns the same aggregates as the native
    DuckDB query on the same log (no BigQuery engine runs here; this is the executed check)."""
    import duckdb
    import sqlglot  # a test dependency (pyproject's test extra): CI has it

    from calib_jax.logs.sql import first_problem_rows_sql

    s = Settings(fields=("site",), oracle=True, n_boot=20, scheme="cells")
    native_dialect = {"duckdb": "duckdb", "spark": "spark", "bigquery": "bigquery"}
    for mode in ("score", "logit"):
        cols = QueryColumns(label="y", weight="w", oracle="pi", fields=("site",), **{mode: "p" if mode == "score" else "o"})
        for dialect, read in native_dialect.items():
            for sql in (statistics_sql(s, cols, source="t", dialect=dialect),
                        first_problem_rows_sql(cols, source="t", dialect=dialect)):
                assert sqlglot.parse_one(sql, read=read) is not None, (dialect, mode)
    d = _log(20_000, seed=11)  # a realistic size: the engines' reductions vectorise by size
    table = pa.table({k: pa.array(v, pa.string()) if k == "site" else v for k, v in d.items()})
    con = duckdb.connect()
    try:
        con.register("t", table)
        for mode in ("score", "logit"):
            cols = QueryColumns(label="y", weight="w", oracle="pi", fields=("site",),
                                **{mode: "p" if mode == "score" else "o"})
            native = con.sql(statistics_sql(s, cols, source="t", dialect="duckdb")).to_arrow_table()
            bq = statistics_sql(s, cols, source="t", dialect="bigquery")
            via = con.sql(sqlglot.transpile(bq, read="bigquery", write="duckdb")[0]).to_arrow_table()
            assert problems_from_aggregates(via, cols) == problems_from_aggregates(native, cols)
            _assert_same(accumulator_from_aggregates(native, s), accumulator_from_aggregates(via, s))
    finally:
        con.close()
