"""``calib-jax evaluate --by``: the panel per slice, engine against engine and against the
library, and the change flags' false-alarm rate measured on logs whose slices do not differ."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")
import pyarrow.csv as pacsv  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from sklearn.metrics import roc_auc_score  # noqa: E402

import calib_jax as cj  # noqa: E402
from calib_jax.cli import main  # noqa: E402
from calib_jax.logs.accumulate import Settings  # noqa: E402
from calib_jax.logs.slicing import drift_flags, slice_cells_from_rows  # noqa: E402

PER_DAY = 6000


def _log(path: Path, *, days: int = 6, shift_from: int | None = 4, seed: int = 0, weights: bool = False) -> Path:
    """Impressions over ``days`` days; from day ``shift_from`` on the score over-predicts
    (its logit is 0.5 too high)."""
    rng = np.random.default_rng(seed)
    cols: dict[str, list] = {"ts": [], "click": [], "pctr": [], "w": []}
    for d in range(days):
        t = rng.normal(-2.5, 1.0, PER_DAY)
        cols["click"].append((rng.random(PER_DAY) < 1 / (1 + np.exp(-t))).astype(np.int8))
        shift = 0.5 if shift_from is not None and d >= shift_from else 0.0
        cols["pctr"].append(1 / (1 + np.exp(-(t + shift + rng.normal(0, 0.3, PER_DAY)))))
        start = dt.datetime(2026, 11, 1) + dt.timedelta(days=d)
        cols["ts"].append(np.array([start + dt.timedelta(seconds=int(s)) for s in rng.integers(0, 86400, PER_DAY)],
                                   dtype="datetime64[us]"))
        cols["w"].append(rng.uniform(0.5, 2.0, PER_DAY))
    table = {k: np.concatenate(v) for k, v in cols.items()}
    if not weights:
        del table["w"]
    pq.write_table(pa.table(table), path)
    return path


def _evaluate(log: Path, out: Path, *extra: str, model: tuple[str, str] = ("--score", "pctr")) -> dict:
    assert main(["evaluate", str(log), "--label", "click", *model, "--by", "ts", "--every", "day",
                 "--out", str(out), "--quiet", *extra]) == 0
    return json.loads((out / "slices.json").read_text())


def test_each_slice_equals_the_library_on_its_rows(tmp_path):
    log = _log(tmp_path / "log.parquet", weights=True)
    res = _evaluate(log, tmp_path / "out", "--weight", "w", "--bootstrap", "50")
    t = pq.read_table(log).to_pandas()
    days = t["ts"].dt.floor("D").dt.strftime("%Y-%m-%d %H:%M:%S")
    assert [r["slice"] for r in res["slices"]] == sorted(days.unique())
    for r in res["slices"]:
        d = t[days == r["slice"]]
        p, y, w = (d[c].to_numpy() for c in ("pctr", "click", "w"))
        f32 = lambda a: a.astype(np.float32)  # noqa: E731
        assert r["rows"] == len(d)
        np.testing.assert_allclose(r["brier"]["value"], float(cj.brier(f32(p), f32(y), weights=f32(w))), rtol=2e-5)
        np.testing.assert_allclose(r["ece"]["value"], float(cj.ece(f32(p), f32(y), weights=f32(w))), rtol=1e-4)
        np.testing.assert_allclose(r["calibration_ratio"]["value"], np.sum(w * p) / np.sum(w * y), rtol=1e-9)
        ctr = np.sum(w * y) / np.sum(w)
        entropy = -(ctr * np.log(ctr) + (1 - ctr) * np.log(1 - ctr))
        np.testing.assert_allclose(r["ne"]["value"], float(cj.nll(f32(p), f32(y), weights=f32(w))) / entropy,
                                   rtol=2e-5)
        assert abs(r["auc"]["value"] - roc_auc_score(y, p, sample_weight=w)) < 2e-3  # fine-histogram AUC
        assert r["ne"]["lo"] < r["ne"]["value"] < r["ne"]["hi"]
    # the shift from the fifth day on is flagged on the calibration ratio, and nothing before it
    changed = {r["slice"][:10]: r["changed"] for r in res["slices"]}
    assert all("calibration_ratio" in changed[f"2026-11-0{d}"] for d in (5, 6))
    assert not any(changed[f"2026-11-0{d}"] for d in (1, 2, 3, 4))
    out = tmp_path / "out"
    assert {"slices.json", "slices.csv", "slices.md", "drift.png"} <= {p.name for p in out.iterdir()}


def test_the_engines_give_the_same_numbers(tmp_path):
    log = _log(tmp_path / "log.parquet", seed=1, days=4, shift_from=None)
    # a CSV log whose times are text, as exported logs often are
    csv = tmp_path / "log.csv"
    t = pq.read_table(log)
    pacsv.write_csv(t.set_column(0, "ts", pa.array([str(x) for x in t["ts"].to_pylist()])), csv)
    runs = {(f, e): _evaluate(f, tmp_path / f"{f.suffix[1:]}_{e}", "--engine", e,
                              *(["--chunk-rows", "5000"] if e == "arrow" else []))  # several chunks per day
            for f in (log, csv) for e in ("duckdb", "arrow")}
    ref = runs[(log, "duckdb")]
    for key, res in runs.items():
        assert [r["slice"] for r in res["slices"]] == [r["slice"] for r in ref["slices"]], key
        for a, b in zip(res["slices"], ref["slices"], strict=True):
            assert a["rows"] == b["rows"]
            for m in ("ne", "calibration_ratio", "ece", "brier", "auc"):  # same cells, same draws
                np.testing.assert_allclose([a[m]["value"], a[m]["lo"], a[m]["hi"]],
                                           [b[m]["value"], b[m]["lo"], b[m]["hi"]], rtol=1e-9, err_msg=f"{key} {m}")


def _with_logits(log: Path) -> Path:
    """The log with the model's logit beside its probability, a few logits beyond the
    probability clip's reach (|o| > 27.6)."""
    t = pq.read_table(log)
    p = t["pctr"].to_numpy()
    o = np.log(p) - np.log1p(-p)
    o[[0, 1, 2, 3]] = [-40.0, 35.0, -800.0, 60.0]
    path = log.with_name("logits.parquet")
    pq.write_table(t.append_column("plogit", pa.array(o)), path)
    return path


def test_a_model_given_as_logits_is_sliced_as_evaluate_logit_reads_each_slice(tmp_path):
    """``--by`` with ``--logit``: each slice's numbers are those of ``evaluate --logit`` on the
    slice's rows alone (the fine bins of the logit itself, the exact log loss from it), and the
    streamed reader gives DuckDB's numbers."""
    log = _with_logits(_log(tmp_path / "log.parquet", days=3, shift_from=None))
    runs = {e: _evaluate(log, tmp_path / e, "--bootstrap", "0", "--engine", e, model=("--logit", "plogit"))
            for e in ("duckdb", "arrow")}
    assert runs["duckdb"]["input"]["logit"] == "plogit"
    t = pq.read_table(log)
    day = np.asarray(t["ts"].to_numpy().astype("datetime64[D]").astype(str))
    for r in runs["duckdb"]["slices"]:
        part = tmp_path / f"{r['slice'][:10]}.parquet"
        pq.write_table(t.filter(pa.array(day == r["slice"][:10])), part)
        assert main(["evaluate", str(part), "--label", "click", "--logit", "plogit", "--bootstrap", "0", "--quiet",
                     "--out", str(tmp_path / part.stem)]) == 0
        alone = {e["name"]: e for e in json.loads((tmp_path / part.stem / "report.json").read_text())["metrics"]}
        for m in ("ne", "calibration_ratio", "brier", "auc", "ctr"):
            assert r[m]["value"] == pytest.approx(alone[m]["value"], rel=1e-10), (r["slice"], m)
    for a, b in zip(runs["duckdb"]["slices"], runs["arrow"]["slices"], strict=True):
        for m in ("ne", "calibration_ratio", "ece", "brier", "auc"):
            assert a[m]["value"] == pytest.approx(b[m]["value"], rel=1e-9), m


@pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
def test_spark_gives_the_same_numbers(tmp_path):
    pytest.importorskip("pyspark")
    log = _log(tmp_path / "log.parquet", seed=2, days=3)
    duck = _evaluate(log, tmp_path / "duck", "--bootstrap", "20")
    spark = _evaluate(log, tmp_path / "spark", "--bootstrap", "20", "--engine", "spark", "--spark-master",
                      "local[2]", "--spark-conf", "spark.ui.enabled=false", "--spark-conf",
                      "spark.sql.shuffle.partitions=4", "--spark-conf", "spark.sql.session.timeZone=UTC")
    assert [r["slice"] for r in spark["slices"]] == [r["slice"] for r in duck["slices"]]
    for a, b in zip(spark["slices"], duck["slices"], strict=True):
        np.testing.assert_allclose([a["ne"]["value"], a["ne"]["lo"]], [b["ne"]["value"], b["ne"]["lo"]], rtol=1e-9)
    # the model as logits: the same query in Spark's dialect
    logits = _with_logits(log)
    runs = [_evaluate(logits, tmp_path / f"logit_{e}", "--bootstrap", "20", *extra, model=("--logit", "plogit"))
            for e, extra in (("duck", ()), ("spark", ("--engine", "spark", "--spark-master", "local[2]", "--spark-conf",
                                                      "spark.ui.enabled=false", "--spark-conf",
                                                      "spark.sql.session.timeZone=UTC")))]
    for a, b in zip(*(r["slices"] for r in runs), strict=True):
        np.testing.assert_allclose([a["ne"]["value"], a["ne"]["lo"]], [b["ne"]["value"], b["ne"]["lo"]], rtol=1e-9)


@pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
def test_spark_gives_duckdb_s_gauc_per_slice(tmp_path):
    """``--by --user --field --oracle`` on Spark: the per-(slice, user) query in Spark's dialect
    gives DuckDB's GAUC, interval and user counts per day, with row weights (a user on several
    days counts in each day), the per-(slice, field cell) query DuckDB's per-field metrics and
    intervals, and the main query's per-slice oracle sums and top-gap rows DuckDB's oracle
    metrics and intervals (one Spark start for the three; tests/test_slices_oracle.py checks
    DuckDB and arrow against ``evaluate --oracle`` of each slice's rows)."""
    pytest.importorskip("pyspark")
    log = _log(tmp_path / "log.parquet", seed=3, days=3, weights=True)
    t = pq.read_table(log)
    rng = np.random.default_rng(3)
    uid = rng.integers(0, 300, t.num_rows).astype(str)
    site = np.array(["a", "b", "c", "d"])[rng.integers(0, 4, t.num_rows)]
    pi = np.clip(t["pctr"].to_numpy() * rng.uniform(0.7, 1.3, t.num_rows), 0.0, 1.0)  # a simulated truth
    pq.write_table(t.append_column("uid", pa.array(uid)).append_column("site", pa.array(site))
                   .append_column("pi", pa.array(pi)), log)
    extra = ("--bootstrap", "10", "--weight", "w", "--user", "uid", "--gauc-weight", "clicks", "--field", "site",
             "--oracle", "pi")
    duck = _evaluate(log, tmp_path / "duck", *extra)
    spark = _evaluate(log, tmp_path / "spark", *extra, "--engine", "spark", "--spark-master", "local[2]",
                      "--spark-conf", "spark.ui.enabled=false", "--spark-conf", "spark.sql.shuffle.partitions=4",
                      "--spark-conf", "spark.sql.session.timeZone=UTC")
    assert [r["slice"] for r in spark["slices"]] == [r["slice"] for r in duck["slices"]]
    for a, b in zip(spark["slices"], duck["slices"], strict=True):
        assert a["gauc"]["users"] == b["gauc"]["users"] > 0 and a["gauc"]["skipped"] == b["gauc"]["skipped"]
        np.testing.assert_allclose([a["gauc"][k] for k in ("value", "lo", "hi")],
                                   [b["gauc"][k] for k in ("value", "lo", "hi")], rtol=1e-9)
        assert sorted(a["fields"]["site"]) == sorted(b["fields"]["site"]) == ["abs_bias", "field_ece", "field_rce",
                                                                              "gce"]
        for m, e in b["fields"]["site"].items():
            np.testing.assert_allclose([a["fields"]["site"][m][k] for k in ("value", "lo", "hi", "plug_in")],
                                       [e[k] for k in ("value", "lo", "hi", "plug_in")], rtol=1e-9, atol=1e-12)
        for m in ("oracle_brier", "oracle_mae", "oracle_kl", "oracle_chebyshev", "oracle_pearson"):
            assert b[m]["lo"] is not None, m
            np.testing.assert_allclose([a[m][k] for k in ("value", "lo", "hi")], [b[m][k] for k in ("value", "lo", "hi")],
                                       rtol=1e-9, err_msg=m)


@pytest.mark.optimized_codegen  # tests/conftest.py: its programs run long at LLVM level 0
def test_false_alarms_stay_at_alpha_when_no_slice_moved():
    """200 logs of 8 slices drawn from one model (2,000 rows each): the share of logs with any
    slice flagged on a metric estimates the family-wise false-alarm rate; alpha = 0.05 allows up
    to 18 of 200 (the binomial 99.9% point). Main's bootstrap test (standard errors and a normal
    quantile) measured NE 10, calibration ratio 10, ECE 2 here; its replicates' own tail
    quantiles gave NE 23 of 200."""
    rng = np.random.default_rng(7)
    settings = Settings(scheme="cells", n_boot=0, hist_bins=256)
    alarms = dict.fromkeys(("ne", "calibration_ratio", "ece"), 0)
    for i in range(200):
        n = 8 * 2000
        t = rng.normal(-2.0, 1.0, n)
        y = (rng.random(n) < 1 / (1 + np.exp(-t))).astype(float)
        p = 1 / (1 + np.exp(-(t + rng.normal(0, 0.3, n))))
        cells = slice_cells_from_rows(p, y, np.ones(n), np.repeat([f"s{k}" for k in range(8)], 2000), settings)
        flags = drift_flags(cells, dataclasses.replace(settings, seed=i), alpha=0.05)
        for metric in alarms:
            alarms[metric] += any(f["flag"] for f in flags if f["metric"] == metric)
    assert all(a <= 18 for a in alarms.values()), alarms  # measured: NE 13, calibration ratio 12, ECE 7
    # and the test is not blind: Bonferroni is conservative, but a rate of 1% or less on the
    # calibration ratio would mean the null draws are too wide (P(X <= 1 | 5%) = 4e-4)
    assert alarms["calibration_ratio"] >= 2, alarms


def test_a_slice_too_small_to_test_says_so(tmp_path, capsys):
    """A day of one row beside days of 3,000 cannot be tested (getting its click or not are
    both likely): it is listed as too small in the JSON, the CSV, the Markdown and the printed
    summary, and not flagged (main flagged such a slice every time)."""
    rng = np.random.default_rng(11)
    n = 6001
    day = np.r_[np.repeat([1, 2], 3000), 3]
    p = rng.uniform(0.02, 0.3, n)
    p[-1] = 0.2
    y = (rng.random(n) < p).astype(np.int8)
    y[-1] = 1
    ts = np.array([f"2026-11-0{d} 12:00:00" for d in day])
    pq.write_table(pa.table({"ts": ts, "click": y, "pctr": p}), tmp_path / "log.parquet")
    out = tmp_path / "out"
    assert main(["evaluate", str(tmp_path / "log.parquet"), "--label", "click", "--score", "pctr", "--by", "ts",
                 "--every", "day", "--out", str(out), "--bootstrap", "20"]) == 0
    printed = capsys.readouterr().out
    assert "too small to test: 1 slice (2026-11-03 00:00:00)" in printed, printed
    res = json.loads((out / "slices.json").read_text())
    last = res["slices"][-1]
    assert last["too_small"] == sorted(("ne", "calibration_ratio", "ece")) and last["changed"] == []
    assert [r["too_small"] for r in res["slices"][:2]] == [[], []]
    assert {c["status"] for c in res["changes"] if c["slice"] == last["slice"]} == {"too small"}
    assert "permutation" in res["method"]
    csv = (out / "slices.csv").read_text().splitlines()
    assert csv[0].endswith(",changed,too_small") and csv[-1].endswith(",calibration_ratio ece ne")
    assert "too small to test" in (out / "slices.md").read_text()


@pytest.mark.parametrize("argv, message", [
    (["--by", "ts", "--field", "ts"], "--field: 'ts' is the --by column"),
    (["--by", "ts", "--oracle", "pctr"], "--oracle must name another column"),
    (["--by", "ts", "--oracle", "ts"], "--oracle must name another column"),
    (["--by", "ts", "--state-only"], "does not combine with --state-only"),
    (["--every", "day"], "need --by"),
    (["--by", "ts", "--every", "day", "--baseline", "2030-01-01"], "not a slice"),
    (["--by", "click"], "another column"),
    (["--by", "ts", "--bootstrap", "1"], "--bootstrap"),
])
def test_bad_arguments_get_one_clear_line(tmp_path, argv, message, capsys):
    log = _log(tmp_path / "log.parquet", days=2)
    assert main(["evaluate", str(log), "--label", "click", "--score", "pctr", *argv, "--out", str(tmp_path / "o"),
                 "--quiet"]) != 0
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err


def test_a_time_baseline_may_be_written_as_any_iso_date_or_time(tmp_path, capsys):
    """The slices of --every are spelled 'YYYY-MM-DD HH:MM:SS' (UTC); '--baseline 2026-11-02'
    was refused as no slice. Any ISO 8601 spelling of a slice's start now names it, a zone
    included; a time inside a slice, or text, is still no slice."""
    log = _log(tmp_path / "log.parquet", days=3)
    common = ["evaluate", str(log), "--label", "click", "--score", "pctr", "--by", "ts", "--every", "day",
              "--bootstrap", "0", "--quiet"]
    for k, spelled in enumerate(("2026-11-02 00:00:00", "2026-11-02", "2026-11-02T00:00", "2026-11-02T01:00+01:00")):
        out = tmp_path / f"o{k}"
        assert main([*common, "--baseline", spelled, "--out", str(out)]) == 0, capsys.readouterr().err
        rows = json.loads((out / "slices.json").read_text())["slices"]
        assert [r["slice"] for r in rows if r["baseline"]] == ["2026-11-02 00:00:00"], spelled
    for spelled in ("2026-11-02T13:00", "day two"):
        assert main([*common, "--baseline", spelled, "--out", str(tmp_path / "bad")]) == 2
        assert f"--baseline {spelled!r} is not a slice" in capsys.readouterr().err


@pytest.mark.parametrize("engine", ["duckdb", "arrow"])
def test_values_that_are_not_times_are_refused_or_dropped(tmp_path, engine, capsys):
    csv = tmp_path / "log.csv"
    csv.write_text("ts,click,pctr\n2026-11-01 10:00:00,0,0.1\nyesterday,1,0.2\n2026-11-02,1,0.3\n,0,0.2\n")
    assert main(["evaluate", str(csv), "--label", "click", "--score", "pctr", "--by", "ts", "--every", "day",
                 "--engine", engine, "--out", str(tmp_path / "a"), "--quiet", "--bootstrap", "0"]) != 0
    err = capsys.readouterr().err
    assert "not a date or time" in err and "--drop-invalid" in err, err
    res = _evaluate(csv, tmp_path / "b", "--engine", engine, "--drop-invalid", "--bootstrap", "0")
    # the empty time is a missing one (its own slice); 'yesterday' is dropped
    assert [(r["slice"], r["rows"]) for r in res["slices"]] == [
        ("2026-11-01 00:00:00", 1), ("2026-11-02 00:00:00", 1), ("__missing__", 1)]
    assert res["input"]["rows_read"] == 4 and res["input"]["rows_used"] == 3
    assert res["input"]["dropped"] == {"by: not a date or time": 1}


def test_slices_by_a_column_of_hostile_text(tmp_path, capsys):
    """Each value of a text column is a slice, whatever it holds: mathtext, a newline, an ANSI
    escape; a null is the slice __missing__."""
    rng = np.random.default_rng(9)
    values = ["a$x^{$", "two\nlines", "\x1b[31mred", None]
    n = 4000
    site = [values[i % 4] for i in range(n)]
    p = rng.uniform(0.01, 0.3, n)
    pq.write_table(pa.table({"site": pa.array(site, pa.string()), "click": (rng.random(n) < p).astype(np.int8),
                             "pctr": p}), tmp_path / "log.parquet")
    out = tmp_path / "out"
    assert main(["evaluate", str(tmp_path / "log.parquet"), "--label", "click", "--score", "pctr", "--by", "site",
                 "--out", str(out), "--quiet", "--bootstrap", "20"]) == 0, capsys.readouterr().err
    res = json.loads((out / "slices.json").read_text())
    assert sorted(r["slice"] for r in res["slices"]) == sorted(["a$x^{$", "two\nlines", "\x1b[31mred", "__missing__"])
    assert all(r["rows"] == 1000 for r in res["slices"])
    printed = capsys.readouterr().out
    assert "\x1b" not in printed  # the terminal summary shows escapes inert


@pytest.mark.parametrize("engine", ["duckdb", "arrow"])
def test_times_with_a_zone_are_bucketed_in_utc_whatever_the_machines_zone(tmp_path, engine, monkeypatch):
    """A zone-aware Parquet column and text with offsets ('-05:00') give the same UTC days on
    every engine, on a machine whose own zone is not UTC (DuckDB read times in the machine's
    zone before; text offsets were dropped)."""
    import time

    monkeypatch.setenv("TZ", "America/Los_Angeles")
    time.tzset()
    try:
        rng = np.random.default_rng(10)
        n = 3000
        instants = (np.datetime64("2026-11-01T20:00:00", "s") + rng.integers(0, 3 * 86400, n).astype("timedelta64[s]"))
        zoned = pa.array(instants.astype("datetime64[us]"), pa.timestamp("us", tz="UTC")).cast(
            pa.timestamp("us", tz="America/New_York"))
        p = rng.uniform(0.01, 0.3, n)
        y = (rng.random(n) < p).astype(np.int8)
        pq.write_table(pa.table({"ts": zoned, "click": y, "pctr": p}), tmp_path / "log.parquet")
        pacsv.write_csv(pa.table({"ts": pa.array([str(x) for x in zoned.to_pylist()]), "click": y, "pctr": p}),
                        tmp_path / "log.csv")
        want = np.unique(instants.astype("datetime64[D]"), return_counts=True)
        want = [(f"{d} 00:00:00", int(c)) for d, c in zip(want[0].astype(str), want[1], strict=True)]
        for f in ("log.parquet", "log.csv"):
            res = _evaluate(tmp_path / f, tmp_path / f"out_{f}", "--engine", engine, "--bootstrap", "0")
            assert [(r["slice"], r["rows"]) for r in res["slices"]] == want, (f, engine)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


@pytest.mark.parametrize("engine", ["duckdb", "arrow"])
def test_numbered_slices_are_in_numeric_order(engine):
    """A --by column of numbers lists its slices by value, so the first (the default baseline) is
    the smallest; they were ordered as text ('10' < '8'), and a day number's drift plot ran 10, 11,
    12, 8, 9. Numbers written as text order the same way; any other label orders all by text."""
    from calib_jax import logs

    rng = np.random.default_rng(0)
    n = 2000
    p = rng.uniform(0.05, 0.5, n)
    y = (rng.random(n) < p).astype(np.int8)
    pick = rng.integers(0, 5, n)
    cases = [([8, 9, 10, 11, 12], ["8", "9", "10", "11", "12"]),
             ([-1.5, 0.5, 10.0, 1e-07, 2.0], ["-1.5", "1e-07", "0.5", "2.0", "10.0"]),
             (["8", "9", "10", "11", "12"], ["8", "9", "10", "11", "12"]),
             (["b", "10", "8", "a", "x"], ["10", "8", "a", "b", "x"])]
    for values, want in cases:
        col = pa.array([values[i] for i in pick])
        res = logs.slices(pa.table({"p": p, "y": y, "v": col}), score="p", label="y", by="v", bootstrap=20,
                          engine=engine).result
        assert [r["slice"] for r in res["slices"]] == want and res["baseline"] == want[0]
        # the k-th slice in this order draws from SeedSequence([seed, k]) (the module's docstring): the
        # first slice's interval is evaluate's on its rows with that seed
        rows = np.array([str(v) for v in col.to_pylist()]) == want[0]
        seed0 = int(np.random.SeedSequence([0, 0]).generate_state(1)[0])
        alone = logs.evaluate(pa.table({"p": p[rows], "y": y[rows]}), score="p", label="y", bootstrap=20,
                              seed=seed0, engine=engine).report
        ne = next(m for m in alone["metrics"] if m["name"] == "ne")
        np.testing.assert_allclose([res["slices"][0]["ne"][k] for k in ("value", "lo", "hi")],
                                   [ne[k] for k in ("value", "lo", "hi")], rtol=1e-9)
