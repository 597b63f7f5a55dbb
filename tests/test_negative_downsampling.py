"""Negatively downsampled logs (``negative_rate``): the recalibration transforms against exact
arithmetic, the population's metrics against the same log weighted by hand and against the full
log it was drawn from, the calibration tests on the kept rows, and every command and library
entry point refusing a bad rate in one line."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from calib_jax import logs
from calib_jax.cli.commands import main
from calib_jax.logs import downsampling as ds
from calib_jax.logs.accumulate import Settings
from calib_jax.logs.slicing import drift_flags, kept_cells, slice_cells_from_rows

RATE = 0.1


def _population(n: int, seed: int, shift: float = 0.0) -> dict[str, np.ndarray]:
    """A calibrated CTR log (``p`` the true probability, ``y`` its clicks) and a miscalibrated
    second model ``m`` (logit shifted by ``shift`` + 0.4)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(-3.2, 1.0, n)
    p = 1.0 / (1.0 + np.exp(-z))
    y = (rng.uniform(size=n) < p).astype(np.int8)
    m = 1.0 / (1.0 + np.exp(-(z + shift + 0.4)))
    day = np.repeat(["d1", "d2"], [n // 2, n - n // 2])
    return {"p": p, "m": m, "y": y, "day": day, "keep": (y == 1) | (rng.uniform(size=n) < RATE)}


def _table(d: dict[str, np.ndarray], rows: np.ndarray | None = None, *, weights: bool = False) -> pa.Table:
    sel = slice(None) if rows is None else rows
    cols = {k: d[k][sel] for k in ("p", "m", "y", "day")}
    if weights:  # the population weights written by hand: 1/rate on every non-click
        cols["w"] = np.where(cols["y"] == 0, 1.0 / RATE, 1.0)
    return pa.table(cols)


@pytest.fixture(scope="module")
def logs_():
    d = _population(120_000, seed=8)
    return {"full": _table(d), "kept": _table(d, d["keep"]), "weighted": _table(d, d["keep"], weights=True)}


# ---------------------------------------------------------------------------- the transforms
def test_recalibration_is_bayes_rule_with_the_prior_odds_scaled_by_the_rate():
    """Counting kept rows exactly: a population cell of probability q keeps q positives and
    (1 - q) w negatives per row, so its kept click rate is q / (q + (1 - q) w); the model of the
    kept rows recalibrated gives q back, in probabilities and in logits."""
    for q, w in ((Fraction(1, 40), Fraction(1, 10)), (Fraction(3, 7), Fraction(1, 4)), (Fraction(1, 2), 1)):
        kept = q / (q + (1 - q) * w)  # exact
        assert ds.kept_probability(float(q), float(w)) == pytest.approx(float(kept), rel=1e-15)
        assert ds.recalibrate_probability(float(kept), float(w)) == pytest.approx(float(q), rel=1e-14)
        logit = np.log(float(kept) / (1 - float(kept)))
        assert ds.recalibrate_logit(logit, float(w)) == pytest.approx(np.log(float(q) / (1 - float(q))), rel=1e-13)
    # arithmetic only: JAX arrays under jit, NumPy arrays and floats alike
    import jax
    import jax.numpy as jnp

    p = jnp.asarray([0.01, 0.5, 0.9])
    got = jax.jit(lambda x: ds.recalibrate_probability(x, 0.25))(p)
    np.testing.assert_allclose(np.asarray(got), ds.recalibrate_probability(np.asarray(p, np.float64), 0.25),
                               rtol=1e-6)
    assert ds.population_weights([1, 0, 0], 0.25, weights=[2.0, 2.0, 0.5]).tolist() == [2.0, 8.0, 2.0]


@pytest.mark.parametrize("bad", [0, 0.0, -0.1, 1.5, float("nan"), float("inf"), True, "0.1", 1e-12])
def test_a_bad_rate_is_refused_naming_the_argument(bad):
    with pytest.raises(ValueError, match="^negative_rate must"):
        ds.check_negative_rate(bad)
    with pytest.raises(ValueError, match="negative_rate must"):
        logs.evaluate(pa.table({"p": [0.1, 0.2], "y": [0, 1]}), score="p", label="y", negative_rate=bad)


@pytest.mark.parametrize("argv", [
    ["evaluate", "{log}", "--score", "p", "--label", "y", "--negative-rate", "0", "--out", "{out}/o"],
    ["evaluate", "{log}", "--score", "p", "--label", "y", "--negative-rate", "1.5", "--engine", "arrow",
     "--out", "{out}/o"],
    ["evaluate", "{log}", "--score", "p", "--label", "y", "--by", "day", "--negative-rate", "nan", "--out", "{out}/o"],
    ["compare", "{log}", "--score", "p", "--score", "m", "--label", "y", "--negative-rate", "-1", "--out", "{out}/o"],
    ["fit", "{log}", "--score", "p", "--label", "y", "--method", "platt", "--save", "{out}/f.json",
     "--negative-rate", "2"],
    ["sql", "--table", "t", "--score", "p", "--label", "y", "--negative-rate", "0"],
])
def test_the_commands_refuse_a_bad_rate_in_one_line(tmp_path, capsys, argv):
    log = tmp_path / "log.parquet"
    pq.write_table(_table(_population(200, seed=1)), log)
    before = log.read_bytes()
    assert main([a.format(log=log, out=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--negative-rate must be a number in (0, 1]" in err and "Traceback" not in err
    assert log.read_bytes() == before and not (tmp_path / "o").exists() and not (tmp_path / "f.json").exists()


# ---------------------------------------------------------------------------- the population
@pytest.mark.parametrize("engine", ["duckdb", "arrow"])
def test_the_rate_weighs_each_kept_non_click_as_a_weight_column_would(logs_, engine):
    """The metrics (values and cell-bootstrap intervals) of a log evaluated with its rate are those
    of the same rows with the weights 1/rate written in a column, to float rounding; only the
    calibration tests differ (they run on the kept rows)."""
    a = logs.evaluate(logs_["kept"], score="p", label="y", negative_rate=RATE, bootstrap=30, engine=engine)
    b = logs.evaluate(logs_["weighted"], score="p", label="y", weight="w", bootstrap=30, engine=engine)
    ta, tb = a.metrics.to_pandas().set_index("metric"), b.metrics.to_pandas().set_index("metric")
    assert list(ta.index) == list(tb.index)
    for col in ("value", "lo", "hi"):
        np.testing.assert_allclose(ta[col].to_numpy(float), tb[col].to_numpy(float), rtol=1e-10, atol=1e-13)
    assert a.report["settings"]["negative_rate"] == RATE and a.input["columns"]["negative_rate"] == RATE
    assert a.report["verdict"][0].startswith("Negatives kept at rate 0.1: each kept non-click weighs 10")
    assert "negative_rate" not in b.report["settings"]  # a log kept whole: the settings as before
    # the reliability bands: Clopper-Pearson on the kept counts, mapped to the population
    for row in a.report["reliability"]:
        assert row["ctr_lo"] <= row["ctr"] <= row["ctr_hi"]


def test_the_downsampled_log_agrees_with_the_full_log_within_its_intervals(logs_):
    """Drawn from the same population, the kept rows weighted by the rate estimate the full log's
    metrics: each full-log value lies within the downsampled log's 95% interval, widened by the
    full log's own interval half-width (both are estimates); without the rate the click rate,
    bias, NE and Brier score are far outside (the check can fail)."""
    full = logs.evaluate(logs_["full"], score="m", label="y", bootstrap=60, seed=1).metrics.to_pandas()
    down = logs.evaluate(logs_["kept"], score="m", label="y", negative_rate=RATE, bootstrap=60,
                         seed=2).metrics.to_pandas()
    wrong = logs.evaluate(logs_["kept"], score="m", label="y", bootstrap=60, seed=2).metrics.to_pandas()
    f, d, x = (t.set_index("metric") for t in (full, down, wrong))
    for name in ("ctr", "bias", "calibration_ratio", "brier", "nll", "ne", "ece", "auc"):
        slack = (f.loc[name, "hi"] - f.loc[name, "lo"]) / 2
        assert d.loc[name, "lo"] - slack <= f.loc[name, "value"] <= d.loc[name, "hi"] + slack, name
    for name in ("ctr", "bias", "ne", "brier"):
        assert not (x.loc[name, "lo"] - 1e-3 <= f.loc[name, "value"] <= x.loc[name, "hi"] + 1e-3), name
    # AUC weighs every negative alike: scaling all of them by 1/rate leaves it unchanged
    assert d.loc["auc", "value"] == pytest.approx(x.loc["auc", "value"], rel=1e-9)


def test_the_calibration_tests_run_on_the_kept_rows(logs_):
    """On the kept rows a row of population probability p clicks with probability
    p' = p / (p + (1 - p) w), independently: the tests of the downsampled log with its rate are the
    tests of the kept rows scored p' with no rate (to the fine bins' spread: the rate's tests use
    each cell's mean score transformed), and they keep their level on a calibrated model, where
    reading the 1/w weights as impressions would inflate the evidence."""
    kept = logs_["kept"]
    p_kept = ds.kept_probability(kept["p"].to_numpy(), RATE)
    rate = logs.evaluate(kept, score="p", label="y", negative_rate=RATE, bootstrap=0).tests.to_pandas()
    direct = logs.evaluate(kept.set_column(0, "p", pa.array(p_kept)), score="p", label="y",
                           bootstrap=0).tests.to_pandas()
    as_counts = logs.evaluate(logs_["weighted"], score="p", label="y", weight="w", bootstrap=0).tests.to_pandas()
    r, t, c = (x.set_index("test") for x in (rate, direct, as_counts))
    assert list(r.index) == ["spiegelhalter_z", "hosmer_lemeshow", "cox", "corp"]
    assert r.loc["spiegelhalter_z", "statistic"] == pytest.approx(t.loc["spiegelhalter_z", "statistic"], abs=0.05)
    assert r.loc["cox", "statistic"] == pytest.approx(t.loc["cox", "statistic"], rel=0.05, abs=0.05)
    # HL's ten groups are cut on another fine grid (the direct scores' logits are shifted by -ln w):
    # the statistics differ by far less than the chi2(10) null's standard deviation, 4.5
    assert abs(r.loc["hosmer_lemeshow", "statistic"] - t.loc["hosmer_lemeshow", "statistic"]) < 1.5
    assert all(r["p_value"] > 0.01)  # the true probabilities: calibrated
    assert all("on the kept rows" in n for n in r["note"])
    # the same rows read as 1/w impressions: the statistic's scale grows by about sqrt(1/w)
    assert abs(c.loc["spiegelhalter_z", "statistic"]) > 2 * abs(r.loc["spiegelhalter_z", "statistic"]) or \
        c.loc["hosmer_lemeshow", "statistic"] > 2 * r.loc["hosmer_lemeshow", "statistic"]
    # a miscalibrated model is still caught on the kept rows
    bad = logs.evaluate(kept, score="m", label="y", negative_rate=RATE, bootstrap=0).tests.to_pandas()
    assert bad.set_index("test").loc["cox", "p_value"] < 1e-6


@pytest.mark.parametrize("engine", ["duckdb", "arrow"])
def test_compare_pairs_the_models_on_the_population(logs_, engine):
    """``compare`` with the rate equals ``compare`` with the weights in a column (differences and
    their paired intervals), says the rate in its JSON and Markdown, and finds the full log's
    difference in Brier score within its interval."""
    a = logs.compare(logs_["kept"], scores=["p", "m"], label="y", negative_rate=RATE, bootstrap=40, engine=engine)
    b = logs.compare(logs_["weighted"], scores=["p", "m"], label="y", weight="w", bootstrap=40, engine=engine)
    for col in ("diff", "lo", "hi"):
        np.testing.assert_allclose(a.differences[col].to_numpy(zero_copy_only=False),
                                   b.differences[col].to_numpy(zero_copy_only=False), rtol=1e-10, atol=1e-13)
    assert a.result["input"]["negative_rate"] == RATE and b.result["input"]["negative_rate"] is None
    assert "Negatives kept at rate 0.1" in a.files["compare.md"].decode()
    full = logs.compare(logs_["full"], scores=["p", "m"], label="y", bootstrap=0, engine=engine)
    f = full.differences.to_pandas().set_index("metric").loc["brier"]
    d = a.differences.to_pandas().set_index("metric").loc["brier"]
    assert d["lo"] <= f["diff"] <= d["hi"] and d["hi"] < 0  # the calibrated model is better


def test_slices_test_drift_on_the_kept_rows(logs_):
    """Per slice, the metrics are the population's (as with the weight column) and the drift test
    permutes the kept rows: with the rate it is exactly the test of the kept cells."""
    a = logs.slices(logs_["kept"], by="day", score="m", label="y", negative_rate=RATE, bootstrap=20)
    b = logs.slices(logs_["weighted"], by="day", score="m", label="y", weight="w", bootstrap=20)
    for col in ("ne", "ece", "calibration_ratio"):
        np.testing.assert_allclose(a.table[col].to_numpy(), b.table[col].to_numpy(), rtol=1e-10)
    assert a.result["input"]["negative_rate"] == RATE
    assert "Negatives kept at rate 0.1" in a.files["slices.md"].decode()
    d = _population(20_000, seed=3)
    k = d["keep"]
    w = ds.population_weights(d["y"][k], RATE)
    s1 = Settings(scheme="cells", n_boot=0, negative_rate=RATE)
    cells = slice_cells_from_rows(d["m"][k], d["y"][k].astype(float), w, d["day"][k], s1)
    with_rate = drift_flags(cells, s1)
    on_kept = drift_flags(kept_cells(cells, RATE), Settings(scheme="cells", n_boot=0))
    assert [(f["p"], f["status"], f["draws"]) for f in with_rate] == [(f["p"], f["status"], f["draws"]) for f in
                                                                       on_kept]
    # kept_cells: the label-0 cells' sums times the rate; the row counts are unchanged
    index, sums, n = cells.cells[0]
    kidx, ksums, kn = kept_cells(cells, RATE).cells[0]
    np.testing.assert_array_equal(kn, n)
    np.testing.assert_allclose(ksums[index % 2 == 0], sums[index % 2 == 0] * RATE)
    np.testing.assert_array_equal(ksums[index % 2 == 1], sums[index % 2 == 1])


@pytest.mark.parametrize("engine", [None, "duckdb"])
def test_a_calibrator_fitted_with_the_rate_predicts_the_population(logs_, engine):
    """Platt scaling on the kept rows of the raw kept-population model with the rate predicts the
    population's probabilities: equal to the fit with the weights in a column, and its intercept
    moves by about ln w from the fit without the rate (the recalibration of He et al. 2014)."""
    kept = logs_["kept"]
    p_kept = ds.kept_probability(kept["p"].to_numpy(), RATE)  # a model trained on the kept rows
    raw = kept.append_column("raw", pa.array(p_kept)).append_column(
        "w", pa.array(np.where(kept["y"].to_numpy() == 0, 1 / RATE, 1.0)))
    a = logs.fit(raw, method="platt", score="raw", label="y", negative_rate=RATE, engine=engine)
    b = logs.fit(raw, method="platt", score="raw", label="y", weight="w", engine=engine)
    x = np.array([0.05, 0.2, 0.5])
    np.testing.assert_allclose(a.predict(x), b.predict(x), rtol=1e-6)
    np.testing.assert_allclose(a.predict(x), ds.recalibrate_probability(x, RATE), rtol=0.15)
    assert a.params["inputs"]["negative_rate"] == RATE


def test_aggregates_carry_the_rate(tmp_path, logs_, capsys):
    """``calib-jax sql --negative-rate`` writes the weights into the warehouse query; its result,
    evaluated with ``--aggregates``, is the report of ``evaluate --negative-rate`` (the rate read
    from the result's settings row), and another rate on that command line is refused."""
    import duckdb

    log = tmp_path / "kept.parquet"
    pq.write_table(logs_["kept"], log)
    assert main(["sql", "--table", f"read_parquet('{log}')", "--score", "p", "--label", "y", "--negative-rate",
                 str(RATE), "--out", str(tmp_path / "q.sql")]) == 0
    duckdb.sql((tmp_path / "q.sql").read_text()).write_parquet(str(tmp_path / "agg.parquet"))
    assert main(["evaluate", "--aggregates", str(tmp_path / "agg.parquet"), "--bootstrap", "20", "--quiet",
                 "--out", str(tmp_path / "a")]) == 0
    assert main(["evaluate", str(log), "--score", "p", "--label", "y", "--negative-rate", str(RATE), "--bootstrap",
                 "20", "--quiet", "--out", str(tmp_path / "b")]) == 0
    ra, rb = (json.loads((tmp_path / x / "report.json").read_text()) for x in ("a", "b"))
    assert ra["settings"]["negative_rate"] == RATE
    va, vb = ({m["name"]: m["value"] for m in r["metrics"]} for r in (ra, rb))
    for name in ("ctr", "brier", "ne", "ece", "auc"):
        assert va[name] == pytest.approx(vb[name], rel=1e-9), name
    capsys.readouterr()
    assert main(["evaluate", "--aggregates", str(tmp_path / "agg.parquet"), "--negative-rate", "0.5", "--quiet",
                 "--out", str(tmp_path / "c")]) == 2
    assert "computed with --negative-rate 0.1, not with --negative-rate 0.5" in capsys.readouterr().err


# ---------------------------------------------------------------------------- a rate per row
def _two_rates(n: int = 40_000, seed: int = 4) -> tuple[pa.Table, pa.Table]:
    """A log whose rate changed on the second day (0.1, then 0.3), with the rate in column ``r``,
    and the same kept rows with the weights 1/r written by hand in column ``w``."""
    d = _population(n, seed=seed)
    rng = np.random.default_rng(seed + 1)
    r = np.where(d["day"] == "d1", 0.1, 0.3)
    keep = (d["y"] == 1) | (rng.uniform(size=n) < r)
    t = _table(d, keep).append_column("r", pa.array(r[keep]))
    return t, t.append_column("w", pa.array(np.where(t["y"].to_numpy() == 0, 1 / t["r"].to_numpy(), 1.0)))


@pytest.mark.parametrize("engine", ["duckdb", "arrow"])
def test_a_rate_column_weighs_each_row_by_its_own_rate(engine):
    """With ``negative_rate_column`` every row's non-click weighs 1/its rate: the report, the
    comparison, the slices and a fit equal those of the weights written by hand; the tests of
    calibration and the drift flags, which need the kept rows' clicks under one rate, are not
    computed and say why; the reliability band is the bootstrap's."""
    kept, weighted = _two_rates()
    a = logs.evaluate(kept, score="m", label="y", negative_rate_column="r", bootstrap=20, engine=engine)
    b = logs.evaluate(weighted, score="m", label="y", weight="w", bootstrap=20, engine=engine)
    for col in ("value", "lo", "hi"):
        np.testing.assert_allclose(a.metrics[col].to_numpy(zero_copy_only=False),
                                   b.metrics[col].to_numpy(zero_copy_only=False), rtol=1e-10, atol=1e-13)
    assert a.report["settings"]["negative_rate_column"] == "r"
    assert a.report["verdict"][0].startswith("Negatives kept at the rate of column 'r', row by row")
    tests = a.tests.to_pandas()
    assert tests["p_value"].isna().all() and all(n.startswith("not computed: the negatives' rate varies by row")
                                                   for n in tests["note"])
    assert all(row["method"] == "bootstrap percentile (a rate per row)" and row["ctr_lo"] <= row["ctr"] <= row["ctr_hi"]
               for row in a.report["reliability"] if row["ctr_lo"] is not None)
    c = logs.compare(kept, scores=["p", "m"], label="y", negative_rate_column="r", bootstrap=20, engine=engine)
    c0 = logs.compare(weighted, scores=["p", "m"], label="y", weight="w", bootstrap=20, engine=engine)
    np.testing.assert_allclose(c.differences["diff"].to_numpy(zero_copy_only=False),
                               c0.differences["diff"].to_numpy(zero_copy_only=False), rtol=1e-10, atol=1e-13)
    assert c.result["input"]["negative_rate_column"] == "r" and "rate of column 'r'" in c.files["compare.md"].decode()
    s = logs.slices(kept, by="day", score="m", label="y", negative_rate_column="r", bootstrap=20, engine=engine)
    s0 = logs.slices(weighted, by="day", score="m", label="y", weight="w", bootstrap=20, engine=engine)
    np.testing.assert_allclose(s.table["ctr"].to_numpy(), s0.table["ctr"].to_numpy(), rtol=1e-10)
    assert s.result["changes"] == [] and s.result["method"].startswith("no change flags: the negatives' rate varies")
    f = logs.fit(kept, method="platt", score="m", label="y", negative_rate_column="r",
                 engine=None if engine == "arrow" else engine)
    f0 = logs.fit(weighted, method="platt", score="m", label="y", weight="w", engine=None if engine == "arrow" else engine)
    np.testing.assert_allclose(f.predict([0.05, 0.3]), f0.predict([0.05, 0.3]), rtol=1e-6)


def test_a_constant_rate_column_is_the_constant_rate():
    d = _population(20_000, seed=5)
    kept = _table(d, d["keep"])
    kept = kept.append_column("r", pa.array(np.full(kept.num_rows, RATE)))
    a = logs.evaluate(kept, score="m", label="y", negative_rate_column="r", bootstrap=10).metrics
    b = logs.evaluate(kept, score="m", label="y", negative_rate=RATE, bootstrap=10).metrics
    np.testing.assert_allclose(a["value"].to_numpy(zero_copy_only=False), b["value"].to_numpy(zero_copy_only=False),
                               rtol=1e-12)


@pytest.mark.parametrize("engine", ["duckdb", "arrow"])
def test_bad_rates_in_the_column_are_invalid_rows(tmp_path, capsys, engine):
    """A rate that is missing, 0, negative or above 1 makes its row invalid: the command stops with
    one line naming the column and the first row, or drops the rows with ``--drop-invalid``; a
    rate given both ways is refused; the log is never changed."""
    kept, _ = _two_rates(4_000)
    r = kept["r"].to_numpy().copy()
    r[[2, 5, 9]] = [0.0, 1.5, np.nan]
    log = tmp_path / "log.parquet"
    pq.write_table(kept.set_column(kept.schema.get_field_index("r"), "r", pa.array(r)), log)
    before = log.read_bytes()
    base = ["evaluate", str(log), "--score", "p", "--label", "y", "--negative-rate-column", "r", "--engine", engine,
            "--bootstrap", "0", "--quiet"]
    assert main([*base, "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "column 'r': 1 row missing or NaN" in err and "2 rows outside [1e-09, 1]" in err
    assert main([*base, "--drop-invalid", "--out", str(tmp_path / "b")]) == 0
    rep = json.loads((tmp_path / "b" / "report.json").read_text())
    assert rep["input"]["rows_dropped"] == 3 and rep["input"]["dropped"] == {"r: missing or NaN": 1,
                                                                             "r: outside [1e-09, 1]": 2}
    capsys.readouterr()
    assert main([*base, "--negative-rate", "0.5", "--out", str(tmp_path / "c")]) == 2
    assert "give --negative-rate W or --negative-rate-column COL, not both" in capsys.readouterr().err
    assert log.read_bytes() == before
