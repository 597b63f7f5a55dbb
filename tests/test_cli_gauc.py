"""GAUC in ``calib-jax evaluate --user`` (calib_jax.logs.gauc) on every engine.

References: scikit-learn's weighted ``roc_auc_score`` per user (ties count one half), averaged
with the user weights in NumPy, and :func:`calib_jax.metrics.gauc` in float64. DuckDB, Spark,
the arrow engine and a warehouse's export of ``calib-jax sql --user`` must all give it.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
duckdb = pytest.importorskip("duckdb")
import pyarrow.parquet as pq  # noqa: E402
from sklearn.metrics import roc_auc_score  # noqa: E402

from calib_jax.cli import main  # noqa: E402
from calib_jax.logs.gauc import USER_WEIGHTS, gauc_entry, sums_from_aggregates, user_auc_sums  # noqa: E402


def _log(n: int = 12_000, users: int = 300, seed: int = 0) -> dict[str, object]:
    """Scores rounded to two digits (ties within users), weights, string users with missing
    ones, users of one class only, and a few invalid rows."""
    rng = np.random.default_rng(seed)
    u = rng.integers(0, users, n)
    bias = rng.normal(0, 0.6, users)[u]  # users differ in click rate: GAUC differs from AUC
    o = rng.normal(-1.2, 1.0, n) + bias
    p = np.round(1 / (1 + np.exp(-o)), 2)
    y = (rng.random(n) < 1 / (1 + np.exp(-(o + rng.normal(0, 0.8, n))))).astype(np.float64)
    y[u == 7] = 0.0  # a user without a click
    w = rng.exponential(1.0, n)
    uid = np.array([f"u{k}" for k in u], dtype=object)
    uid[rng.random(n) < 0.02] = None
    p[40], y[41] = np.nan, 2.0  # invalid rows: dropped with --drop-invalid, in no user's AUC
    return {"uid": uid, "p": p, "logit": np.log(np.clip(p, 1e-9, 1)) - np.log(np.clip(1 - p, 1e-9, 1)), "y": y,
            "w": w}


def _reference(d: dict[str, object], weighted: bool, user_weight: str) -> tuple[float, int, int]:
    """GAUC of the valid rows with a user, by scikit-learn per user."""
    uid, p, y, w = (np.asarray(d[k]) for k in ("uid", "p", "y", "w"))
    ok = np.isfinite(p) & np.isin(y, (0.0, 1.0)) & np.array([x is not None for x in uid])
    uid, p, y, w = uid[ok], p[ok], y[ok], (w[ok] if weighted else np.ones(ok.sum()))
    num = den = 0.0
    users = skipped = 0
    for u in sorted(set(uid)):
        m = uid == u
        pos, neg = np.sum(w[m] * y[m]), np.sum(w[m] * (1 - y[m]))
        if not (pos > 0 and neg > 0):
            skipped += 1
            continue
        users += 1
        omega = {"impressions": pos + neg, "clicks": pos, "equal": 1.0}[user_weight]
        num += omega * roc_auc_score(y[m], p[m], sample_weight=w[m])
        den += omega
    return num / den, users, skipped


def _write(d: dict[str, object], path) -> None:
    pq.write_table(pa.table({k: pa.array(v, pa.string()) if k == "uid" else v for k, v in d.items()}), path,
                   row_group_size=1000)


def test_every_engine_gives_scikit_learns_gauc(tmp_path):
    """Weighted rows on DuckDB and arrow, scores and logits (the unweighted case: below, on
    Spark and a warehouse export)."""
    d = _log()
    path = tmp_path / "log.parquet"
    _write(d, path)
    base = ["--label", "y", "--user", "uid", "--weight", "w", "--drop-invalid", "--bootstrap", "0", "--quiet"]
    reports = {}
    for engine, score in (("duckdb", ["--score", "p"]), ("arrow", ["--score", "p"]), ("duckdb", ["--logit", "logit"])):
        out = tmp_path / f"{engine}{score[0]}"
        assert main(["evaluate", str(path), *score, *base, "--engine", engine, "--out", str(out)]) == 0
        reports[(engine, score[0])] = json.loads((out / "report.json").read_text())
    for key, rep in reports.items():
        for uw in USER_WEIGHTS:
            ref, users, skipped = _reference(d, True, uw)
            e = rep["gauc"][uw]
            assert e["value"] == pytest.approx(ref, abs=1e-12), (key, uw)
            assert (e["users"], e["skipped"]) == (users, skipped)
            assert e["lo"] < e["value"] < e["hi"]
            assert e["rows_without_user"] == sum(x is None for i, x in enumerate(d["uid"]) if i not in (40, 41))
        # the panel's entry is the chosen weighting (impressions by default), after AUC
        names = [m["name"] for m in rep["metrics"]]
        assert names[names.index("auc") + 1] == "gauc"
        assert rep["metrics"][names.index("gauc")] == rep["gauc"]["impressions"]
    # the engines agree to float rounding (sums added in another order), intervals included
    a, b = reports[("duckdb", "--score")]["gauc"], reports[("arrow", "--score")]["gauc"]
    for uw in USER_WEIGHTS:
        for k in ("value", "lo", "hi", "weight_share"):
            assert b[uw][k] == pytest.approx(a[uw][k], rel=1e-12)


def test_library_gauc_agrees_in_float64():
    import jax

    import calib_jax as cj

    rng = np.random.default_rng(3)
    n = 2000
    u, s = rng.integers(0, 100, n), np.round(rng.random(n), 2)
    y, w = (rng.random(n) < s).astype(np.float64), rng.exponential(1.0, n)
    sums = user_auc_sums(u, s, y, w)
    with jax.enable_x64(True):
        for uw in USER_WEIGHTS:
            ref = cj.metrics.gauc(s, y, u, weights=w, user_weight=uw)
            e = gauc_entry(sums, uw)
            assert e["value"] == pytest.approx(float(ref.value), abs=1e-13)
            assert (e["users"], e["skipped"]) == (int(ref.users), int(ref.skipped))
            assert e["weight_share"] == pytest.approx(float(ref.weight_share), rel=1e-13)


@pytest.mark.parametrize("engine", ["duckdb", "arrow"])
def test_a_user_whose_rows_all_weigh_0_is_no_user(engine):
    """Rows of weight 0 count as dropped rows: a user with only such rows was counted among the
    users skipped for one class, in the library and on every engine (probe, 2026-12-07)."""
    import calib_jax as cj
    from calib_jax import logs

    s = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8])
    y = np.array([0, 1, 0, 1, 1, 0, 1, 1.0])
    u = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    w = np.array([1, 1, 1, 1, 0, 0, 1, 1.0])  # user 2 weighs 0; user 3 has clicks only
    dropped = cj.metrics.gauc(s[w > 0], y[w > 0], u[w > 0])
    lib = cj.metrics.gauc(s, y, u, weights=w)
    assert (int(lib.users), int(lib.skipped)) == (int(dropped.users), int(dropped.skipped)) == (2, 1)
    rep = logs.evaluate(pa.table({"p": s, "y": y, "u": u, "w": w}), score="p", label="y", user="u", weight="w",
                        bootstrap=0, engine=engine).report
    assert (rep["gauc"]["impressions"]["users"], rep["gauc"]["impressions"]["skipped"]) == (2, 1)


def test_interval_covers_the_population_gauc():
    """The delta-method interval over users, measured: 400 logs of 150 users drawn from one
    population; the population's (equal-weight) GAUC is the mean user AUC of 200,000 users.
    Coverage must lie within the binomial 99.9% range of 95% (0.92-0.98)."""
    rng = np.random.default_rng(5)

    def draw(n_users: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows = rng.integers(4, 30, n_users)  # users of different sizes
        u = np.repeat(np.arange(n_users), rows)
        skill = rng.uniform(0.2, 1.5, n_users)[u]  # how well the model ranks each user's ads
        z = rng.normal(size=u.shape[0])
        y = (rng.random(u.shape[0]) < 1 / (1 + np.exp(-(z - 1.0)))).astype(np.float64)
        s = skill * z + rng.normal(size=u.shape[0])
        return u, s, y

    u, s, y = draw(200_000)
    truth = gauc_entry(user_auc_sums(u, s, y), "equal")["value"]
    hits = 0
    for _ in range(400):
        e = gauc_entry(user_auc_sums(*draw(150)), "equal")
        hits += e["lo"] <= truth <= e["hi"]
    assert 0.92 <= hits / 400 <= 0.98, hits / 400


@pytest.mark.optimized_codegen  # tests/conftest.py: its programs run long at LLVM level 0
@pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
def test_spark_and_a_warehouse_export_give_the_same_gauc(tmp_path, capsys):
    pytest.importorskip("pyspark")
    from calib_jax.logs.engines import spark_session

    d = _log(n=3000, users=150, seed=2)
    path = tmp_path / "log.parquet"
    _write(d, path)
    cols = ["--score", "p", "--label", "y", "--user", "uid"]
    run = ["--drop-invalid", "--bootstrap", "0", "--quiet"]
    assert main(["evaluate", str(path), *cols, *run, "--out", str(tmp_path / "d")]) == 0
    # the warehouse's way: the query of `calib-jax sql --user`, run elsewhere, exported, evaluated
    capsys.readouterr()
    # can_have_nan: the log has a NaN score, and DuckDB would trust the file's statistics without it
    assert main(["sql", "--dialect", "duckdb", "--table", f"read_parquet('{path}', can_have_nan = true)", *cols]) == 0
    agg = tmp_path / "agg.parquet"
    duckdb.sql(capsys.readouterr().out).write_parquet(str(agg))
    assert main(["evaluate", "--aggregates", str(agg), *run, "--out", str(tmp_path / "a")]) == 0
    spark = spark_session("local[2]", [("spark.ui.enabled", "false"), ("spark.sql.shuffle.partitions", "4")])
    try:
        assert main(["evaluate", str(path), *cols, *run, "--engine", "spark", "--out", str(tmp_path / "s")]) == 0
    finally:
        spark.stop()
    ref = json.loads((tmp_path / "d" / "report.json").read_text())["gauc"]
    for uw in USER_WEIGHTS:
        assert ref[uw]["value"] == pytest.approx(_reference(d, False, uw)[0], abs=1e-12)
    for name in ("a", "s"):
        got = json.loads((tmp_path / name / "report.json").read_text())["gauc"]
        for uw in USER_WEIGHTS:
            assert got[uw]["value"] == pytest.approx(ref[uw]["value"], rel=1e-12), (name, uw)
            assert (got[uw]["users"], got[uw]["skipped"]) == (ref[uw]["users"], ref[uw]["skipped"])
    # an export that names another user column than the command line is refused
    assert main(["evaluate", "--aggregates", str(agg), "--user", "other", *run, "--out", str(tmp_path / "b")]) == 2
    assert "--user uid" in capsys.readouterr().err
    shutil.rmtree(tmp_path / "s", ignore_errors=True)


def test_forged_gauc_rows_are_refused():
    t = pa.table({"kind": ["gauc"] * 4, "level": ["impressions", "clicks", "equal", "users"],
                  "n": [3, 3, 3, 0], "bin": [None, None, None, 0],
                  "sv": [10.0, 4.0, 3.0, 10.0], "svp": [12.0, 2.0, 1.5, 10.0], "svpp": [40.0, 6.0, 3.0, None],
                  "svo": [30.0, 3.0, 1.5, None], "sbrier": [30.0, 2.0, 0.8, None]})
    with pytest.raises(ValueError, match="AUC above 1"):
        sums_from_aggregates(t, source="x.csv")
    t = t.set_column(t.schema.get_field_index("n"), "n", pa.array([3, 2, 3, 0]))
    with pytest.raises(ValueError, match="different users"):
        sums_from_aggregates(t, source="x.csv")
    with pytest.raises(ValueError, match="levels"):
        sums_from_aggregates(t.slice(0, 3), source="x.csv")


def test_refusals_and_undefined_gauc(tmp_path, capsys):
    path = tmp_path / "log.parquet"
    pq.write_table(pa.table({"uid": ["a", "a", "b"], "p": [0.2, 0.4, 0.3], "y": [0.0, 0.0, 1.0]}), path)
    cols = ["--score", "p", "--label", "y", "--bootstrap", "0", "--quiet"]
    # a missing user column is named, on both engines
    for engine in ("duckdb", "arrow"):
        assert main(["evaluate", str(path), *cols, "--user", "nouser", "--engine", engine,
                     "--out", str(tmp_path / engine)]) == 2
        assert "nouser" in capsys.readouterr().err
    # GAUC is not additive over parts of a log
    for flag in ("--resume", "--state-only"):
        assert main(["evaluate", str(path), *cols, "--user", "uid", flag, "--out", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err
        assert "--user" in err and flag in err and "Traceback" not in err
    # no user with both classes: the report is written, GAUC null with its reason
    assert main(["evaluate", str(path), *cols, "--user", "uid", "--out", str(tmp_path / "r")]) == 0
    e = json.loads((tmp_path / "r" / "report.json").read_text())["gauc"]["impressions"]
    assert e["value"] is None and "no user has both" in e["value_undefined"] and e["skipped"] == 2


def test_gauc_query_parses_in_every_dialect_and_bigquery_runs_as_duckdb():
    """The GAUC part of the statistics query under sqlglot's grammars, and its BigQuery text,
    transpiled to DuckDB, returning the native query's sums."""
    import sqlglot

    from calib_jax.logs.accumulate import Settings
    from calib_jax.logs.sql import QueryColumns, statistics_sql

    s = Settings(n_boot=0)
    cols = QueryColumns(label="y", score="p", weight="w", user="uid")
    for dialect in ("duckdb", "spark", "bigquery"):
        assert sqlglot.parse_one(statistics_sql(s, cols, source="t", dialect=dialect), read=dialect) is not None
    d = _log(n=10_000, users=200, seed=4)
    con = duckdb.connect()
    try:
        con.register("t", pa.table({k: pa.array(v, pa.string()) if k == "uid" else v for k, v in d.items()}))
        native = sums_from_aggregates(con.sql(statistics_sql(s, cols, source="t")).to_arrow_table())
        bq = sqlglot.transpile(statistics_sql(s, cols, source="t", dialect="bigquery"), read="bigquery",
                               write="duckdb")[0]
        via = sums_from_aggregates(con.sql(bq).to_arrow_table())
    finally:
        con.close()
    assert native is not None and via is not None
    assert (via.users, via.skipped, via.rows_without_user) == (native.users, native.skipped, native.rows_without_user)
    for uw in USER_WEIGHTS:
        np.testing.assert_allclose(via.moments[uw], native.moments[uw], rtol=1e-12)
        assert gauc_entry(native, uw)["value"] == pytest.approx(_reference(d, True, uw)[0], abs=1e-12)
