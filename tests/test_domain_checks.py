"""Every number-producing path checks its domain up front: a value outside it is refused by
name (a ``ValueError`` naming the argument in the library, one line on stderr and exit 2 in
the command), never turned into a plausible or empty answer.

Classes swept here, each with an input the old code answered wrongly with exit 0:

* **seeds** beyond 2^32 and negative: each 64-bit seed draws its own numbers (the old code
  reduced a seed modulo 2^32 for the simulator and the row bootstrap, and modulo 2^64 for the
  cell bootstrap); seeds outside [-2^63, 2^64) are refused naming ``--seed`` / ``seed``;
* **tiny and huge weights** in the library metrics: the answer of the same weights rescaled
  (every metric here depends on the weights only through their ratios), or a ``ValueError``
  naming ``weights``; never NaN, 0 or 0.5 from an underflow;
* **simulator settings** NaN, infinite, zero or negative outside their domain: refused naming
  the setting;
* **time columns of numbers** (epoch seconds, years) under ``--by COL --every``: refused by
  DuckDB, Spark and the arrow reader, naming the column;
* **weights that sum to 0 or outside the command's range** in ``evaluate --by``, ``compare``
  and ``fit``: refused naming the weight column, as plain ``evaluate`` refuses them;
* **columns that differ only in case** read together (``--score pctr --score PCTR``):
  refused by every engine, naming both.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")
import pyarrow.csv as pcsv  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from calib_jax import metrics as M  # noqa: E402
from calib_jax.cli import main  # noqa: E402

#: Py4J leaves its sockets to the garbage collector (as in tests/test_sql_engines.py)
pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")


def _sweep(n: int):
    return settings(max_examples=n, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _log(n: int = 400, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.02, 0.9, n)
    q = np.clip(p + rng.normal(0.0, 0.05, n), 0.01, 0.99)
    y = (rng.random(n) < p).astype(np.int64)
    day = np.array([f"2024-03-0{1 + i % 3}" for i in range(n)], dtype=object)
    return {"p": p, "q": q, "y": y, "w": rng.uniform(0.5, 2.0, n), "day": day}


def _write(cols: dict[str, np.ndarray], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    t = pa.table({k: pa.array(v, pa.string()) if v.dtype == object else v for k, v in cols.items()})
    if path.suffix == ".parquet":
        pq.write_table(t, path)
    else:
        pcsv.write_csv(t, path)
    return path


def _run(capsys, argv: list[str]) -> tuple[int, str]:
    """``(exit code, stderr)`` of the command run in-process (never a traceback)."""
    capsys.readouterr()
    rc = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return rc, err


def _refused(rc: int, err: str, *names: str) -> None:
    """Exit 2 with one line on stderr that names each of ``names``."""
    assert rc == 2, err
    assert err.strip().count("\n") == 0, err
    for name in names:
        assert name in err, (name, err)


# ----------------------------------------------------------------------------------- seeds
_OUTSIDE = st.one_of(st.integers(2**64, 2**80), st.integers(-(2**80), -(2**63) - 1))


@_sweep(5)
@given(seed=_OUTSIDE, command=st.sampled_from(["evaluate", "by", "compare", "fit", "simulate"]))
@example(seed=2**64, command="evaluate")
@example(seed=2**64 + 7, command="compare")
def test_seeds_outside_the_64_bit_range_are_refused_by_every_command(tmp_path_factory, capsys, seed, command):
    """Old code: ``--seed 2**64`` ran as ``--seed 0`` in evaluate, --by and compare (the cell
    bootstrap reduced it modulo 2^64) and stopped fit and simulate with an overflow."""
    d = tmp_path_factory.mktemp("seed")
    log = _write(_log(60), d / "log.parquet")
    out = str(d / "out")
    argv = {"evaluate": ["evaluate", str(log), "--score", "p", "--label", "y", "--bootstrap", "4"],
            "by": ["evaluate", str(log), "--score", "p", "--label", "y", "--by", "day", "--bootstrap", "4"],
            "compare": ["compare", str(log), "--score", "p", "--score", "q", "--label", "y", "--bootstrap", "4"],
            "fit": ["fit", str(log), "--score", "p", "--label", "y", "--method", "platt", "--save",
                    str(d / "p.json")],
            "simulate": ["simulate", "--out", str(d / "sim.parquet")]}[command]
    rc, err = _run(capsys, [*argv, "--seed", str(seed), *([] if command in ("fit", "simulate") else
                                                          ["--out", out, "--quiet"])])
    _refused(rc, err, "--seed", str(seed), "2^64")


@_sweep(6)
@given(seed=st.one_of(st.integers(2**32, 2**64 - 1), st.integers(-(2**63), -1)))
@example(seed=2**32)
@example(seed=-1)
def test_each_64_bit_seed_draws_its_own_row_bootstrap(seed):
    """Old code: the row bootstrap's key was ``jax.random.key(seed)``, i.e. the seed modulo 2^32
    (``--seed 4294967296`` drew the counts of ``--seed 0``; -1 those of 2^32 - 1). A negative
    seed is its 64-bit two's complement, the same seed as ``seed + 2^64``."""
    from calib_jax.logs.accumulate import Accumulator, Settings

    def counts(s: int) -> np.ndarray:
        return Accumulator(Settings(n_boot=6, seed=s)).counts(200)

    mine = counts(seed)
    assert not np.array_equal(mine, counts(seed % 2**32))
    if seed < 0:
        np.testing.assert_array_equal(mine, counts(seed + 2**64))


def test_the_simulator_draws_another_log_for_a_seed_beyond_2_32(capsys, tmp_path):
    """Old code: ``simulate_log(seed=2**32)`` (and ``calib-jax simulate --seed 4294967296``)
    wrote the log of seed 0; a seed outside [-2^63, 2^64) stopped with ``OverflowError``."""
    from calib_jax.data.simulator import simulate_log, tiny_config

    cfg = tiny_config(n_chunks=1, requests_per_chunk=256)
    first = simulate_log(cfg, seed=0)
    assert not first.equals(simulate_log(cfg, seed=2**32))
    assert first.equals(simulate_log(cfg, seed=0))
    for bad in (2**64, -(2**63) - 1):
        with pytest.raises(ValueError, match="`seed`"):
            simulate_log(cfg, seed=bad)


# ----------------------------------------------------------------------------------- weights (library)
_METRICS = {"auc": lambda p, y, w: M.auc(p, y, weights=w), "ece": lambda p, y, w: M.ece(p, y, weights=w),
            "brier": lambda p, y, w: M.brier(p, y, weights=w), "nll": lambda p, y, w: M.nll(p, y, weights=w),
            "bias": lambda p, y, w: M.bias(p, y, weights=w)}


@_sweep(12)
@given(metric=st.sampled_from(sorted(_METRICS)), exponent=st.integers(-50, 40), constant=st.booleans())
@example(metric="auc", exponent=-30, constant=True)
@example(metric="ece", exponent=-39, constant=True)
@example(metric="brier", exponent=-39, constant=False)
@example(metric="auc", exponent=30, constant=False)
@example(metric="auc", exponent=-20, constant=True)
def test_tiny_and_huge_weights_give_the_rescaled_answer_or_name_weights(metric, exponent, constant):
    """Weights ``10^e * u``: a metric of weighted means and ratios equals its value at the
    weights ``u`` (an independent reference: the same metric on weights near 1), or the call
    raises ``ValueError`` naming ``weights``. Old code: AUC NaN at 1e-30 and 0.0 at 1e-20,
    ECE, Brier and log loss NaN at 1e-39, AUC NaN at 1e30, with no error."""
    rng = np.random.default_rng(exponent + 100)
    n = 300
    p = rng.uniform(0.02, 0.98, n).astype(np.float32)
    y = (rng.random(n) < p).astype(np.float32)
    u = np.ones(n, np.float32) if constant else rng.uniform(1.0, 2.0, n).astype(np.float32)
    w = (u.astype(np.float64) * 10.0**exponent).astype(np.float32)
    f = _METRICS[metric]
    want = float(f(p, y, u))
    try:
        got = float(f(p, y, w))
    except ValueError as e:
        assert "`weights`" in str(e), e
        return
    assert math.isfinite(got), (metric, exponent, got)
    assert got == pytest.approx(want, rel=2e-4, abs=2e-6), (metric, exponent, got, want)


# ----------------------------------------------------------------------------------- simulator settings
#: each numeric setting of the simulator and the values outside its domain
_FINITE = (math.nan, math.inf, -math.inf)
_SETTINGS = {
    **{k: _FINITE for k in ("intercept", "user_age_weight")},
    **{k: (*_FINITE, -0.5) for k in ("cohort_std", "user_std", "ad_quality_std", "advertiser_std", "creative_std",
                                      "media_std", "placement_std", "hour_amplitude", "interaction_scale",
                                      "regime_cohort_std", "regime_hour_amplitude", "ad_error_std", "noise_std",
                                      "value_log_std", "budget_log_std", "pacing_lr", "reserve_price")},
    **{k: (*_FINITE, 0.0, -1.0) for k in ("prod_logit_scale", "budget_per_request", "pacing_min", "pacing_max",
                                           "user_zipf", "ad_zipf")},
}
_TUPLES = {"position_effects": 3, "regime_shift": 3, "prod_regime_shift": 3, "regime_interaction": 3}


@st.composite
def _bad_settings(draw):
    if draw(st.booleans()):
        name = draw(st.sampled_from(sorted(_SETTINGS)))
        return name, draw(st.sampled_from(_SETTINGS[name]))
    name = draw(st.sampled_from(sorted(_TUPLES)))
    bad = draw(st.sampled_from(_FINITE + ((-0.5,) if name == "regime_interaction" else ())))
    at = draw(st.integers(0, _TUPLES[name] - 1))
    return name, tuple(bad if i == at else 0.1 for i in range(_TUPLES[name]))


@_sweep(25)
@given(case=_bad_settings())
@example(case=("intercept", math.nan))
@example(case=("noise_std", math.inf))
@example(case=("user_zipf", 0.0))
@example(case=("ad_zipf", -1.0))
def test_simulator_settings_outside_their_domain_are_refused_by_name(case):
    """Old code: a NaN intercept, an infinite noise or a zero Zipf exponent built a config, and
    ``simulate_log`` wrote an all-NaN or one-user log from it."""
    from calib_jax.data.simulator import tiny_config

    name, value = case
    with pytest.raises(ValueError, match=f"`{name}`"):
        tiny_config(**{name: value})
    # the edges of the domains are kept: a std, amplitude or reserve price of 0 (no effect), a
    # pacing range of one point, an int for a float
    if name in _TUPLES:
        edge: dict = {"regime_interaction": (0.0, 1.0, 2.0)}
    elif name in ("pacing_min", "pacing_max"):
        edge = {"pacing_min": 0.5, "pacing_max": 0.5}
    else:
        edge = {name: {"real": -3, "nonnegative": 0, "positive": 0.5}[_domain(name)]}
    cfg = tiny_config(**edge)
    assert all(getattr(cfg, k) == v for k, v in edge.items())


def _domain(name: str) -> str:
    values = _SETTINGS[name]
    return "real" if len(values) == 3 else "nonnegative" if len(values) == 4 else "positive"


# ----------------------------------------------------------------------------------- number time columns
@st.composite
def _number_times(draw):
    kind = draw(st.sampled_from(["epoch_s", "epoch_float", "epoch_ms", "year"]))
    return {"kind": kind, "fmt": draw(st.sampled_from(["csv", "parquet"])),
            "every": draw(st.sampled_from(["day", "hour", "month"])), "engine": draw(st.sampled_from(["duckdb",
                                                                                                     "arrow"]))}


def _number_time_log(kind: str, fmt: str, folder: Path, n: int = 120) -> Path:
    d = _log(n, 5)
    del d["day"]
    base = 1_700_000_000 + np.arange(n) * 3_600
    d["ts"] = {"epoch_s": base, "epoch_float": base + 0.5, "epoch_ms": base * 1000,
               "year": 2020 + np.arange(n) % 4}[kind]
    return _write(d, folder / f"log.{fmt}")


@_sweep(5)
@given(case=_number_times())
@example(case={"kind": "epoch_s", "fmt": "parquet", "every": "day", "engine": "arrow"})
@example(case={"kind": "year", "fmt": "csv", "every": "month", "engine": "arrow"})
def test_time_columns_of_numbers_are_refused_naming_the_column(tmp_path_factory, capsys, case):
    """Old code: the arrow reader read epoch seconds as days of the year -3 (and a year as
    that year), DuckDB refused them without naming the column."""
    d = tmp_path_factory.mktemp("ts")
    log = _number_time_log(case["kind"], case["fmt"], d)
    rc, err = _run(capsys, ["evaluate", str(log), "--score", "p", "--label", "y", "--by", "ts", "--every",
                            case["every"], "--engine", case["engine"], "--bootstrap", "0", "--quiet", "--out",
                            str(d / "out")])
    _refused(rc, err, "'ts'", "number")




def test_time_columns_of_numbers_are_refused_by_spark_too(tmp_path, capsys, spark):
    """Spark on a table whose column is a LongType of epoch seconds (old code: Spark's CAST read
    them as times and wrote a report): DuckDB's refusal on the same rows, word for word, naming
    the column. ISO text (beside numbers in other columns) still slices alike on both."""
    log = _number_time_log("epoch_s", "parquet", tmp_path)
    args = ["--score", "p", "--label", "y", "--by", "ts", "--every", "day", "--bootstrap", "0", "--quiet"]
    spark.read.parquet(str(log)).createOrReplaceTempView("events")
    msgs = []
    for engine, src in (("spark", "events"), ("duckdb", str(log))):
        rc, err = _run(capsys, ["evaluate", src, *args, "--engine", engine, "--out", str(tmp_path / "o")])
        _refused(rc, err, "'ts'", "number")
        msgs.append(err.split(": ", 3)[-1])  # after "calib-jax evaluate: error: SOURCE: "
    assert msgs[0] == msgs[1]
    csv_log = _write(_log(90, 3), tmp_path / "iso.csv")
    days = {}
    for engine in ("duckdb", "spark"):
        rc, err = _run(capsys, ["evaluate", str(csv_log), *args[:4], "--by", "day", "--every", "day",
                                "--bootstrap", "0", "--quiet", "--engine", engine, "--out", str(tmp_path / engine)])
        assert rc == 0, err
        days[engine] = [r.split(",")[:2] for r in (tmp_path / engine / "slices.csv").read_text().splitlines()[1:]]
    assert days["duckdb"] == days["spark"] == [[f"2024-03-0{k} 00:00:00", "30"] for k in (1, 2, 3)]


def test_reserved_level_names_are_refused_by_spark_too(tmp_path, capsys, spark):
    """A field or --by value spelled __other__ / __missing__ (the report's names for the levels
    beyond --max-levels and for rows without a value; the old code pooled them with exit 0):
    Spark refuses it in a file and in a table of the session with DuckDB's words
    (``tests/test_reserved_levels.py`` covers the arrow reader and DuckDB); a user column
    holding them is still read, with DuckDB's GAUC."""
    cols = _log(90, 4)
    cols["site"] = np.array(["a", "b", "__other__"] * 30, dtype=object)
    cols["user"] = np.array(["__missing__", "u1", "u2", "__other__", "u3", "u4"] * 15, dtype=object)
    log = _write(cols, tmp_path / "log.parquet")
    spark.read.parquet(str(log)).createOrReplaceTempView("events")
    base = ["--score", "p", "--label", "y", "--bootstrap", "0", "--quiet"]
    for flags, column in ((["--field", "site"], "site"), (["--by", "site"], "site")):
        msgs = []
        for engine, src in (("spark", str(log)), ("spark", "events"), ("duckdb", str(log))):
            rc, err = _run(capsys, ["evaluate", src, *base, *flags, "--engine", engine, "--out", str(tmp_path / "o")])
            _refused(rc, err, f"column '{column}' holds the value '__other__'")
            msgs.append(err.split(": ", 3)[-1])  # after "calib-jax evaluate: error: SOURCE: "
        assert msgs[0] == msgs[1] == msgs[2]
        assert not (tmp_path / "o").exists()
    gauc = {}
    for engine in ("spark", "duckdb"):
        rc, err = _run(capsys, ["evaluate", str(log), *base, "--user", "user", "--engine", engine,
                                "--out", str(tmp_path / engine)])
        assert rc == 0, err
        gauc[engine] = json.loads((tmp_path / engine / "report.json").read_text())["gauc"]["impressions"]["value"]
    assert gauc["spark"] == pytest.approx(gauc["duckdb"], rel=1e-12)


# ----------------------------------------------------------------------------------- weights (command)
_WEIGHTS = {"zero": 0.0, "tiny": 1e-30, "tinier": 1e-300, "huge": 1e30}


@_sweep(8)
@given(command=st.sampled_from(["by", "compare"]), kind=st.sampled_from(sorted(_WEIGHTS)),
       engine=st.sampled_from(["duckdb", "arrow"]))
@example(command="by", kind="zero", engine="duckdb")
@example(command="compare", kind="zero", engine="arrow")
@example(command="compare", kind="huge", engine="duckdb")
@example(command="by", kind="tiny", engine="arrow")
def test_weight_totals_outside_the_range_are_refused_by_by_and_compare(tmp_path_factory, capsys, command, kind,
                                                                        engine):
    """Plain ``evaluate`` refuses weights that sum to 0 or outside [1e-12, 1e18]; old code:
    ``evaluate --by`` wrote null metrics and "no slice changed", ``compare`` null metrics or
    zero-width intervals, with exit 0."""
    d = tmp_path_factory.mktemp("w")
    rows = _log(150, 2)
    rows["w"] = np.full(150, _WEIGHTS[kind])
    log = _write(rows, d / "log.parquet")
    argv = {"by": ["evaluate", str(log), "--score", "p", "--by", "day"],
            "compare": ["compare", str(log), "--score", "p", "--score", "q"]}[command]
    rc, err = _run(capsys, [*argv, "--label", "y", "--weight", "w", "--engine", engine, "--bootstrap", "4",
                            "--quiet", "--out", str(d / "out")])
    _refused(rc, err, "'w'", "sum to")
    rc, err = _run(capsys, ["evaluate", str(log), "--score", "p", "--label", "y", "--weight", "w", "--engine", engine,
                            "--bootstrap", "4", "--quiet", "--out", str(d / "plain")])
    _refused(rc, err, "sum to")


def test_a_slice_whose_weights_sum_to_zero_is_refused(tmp_path, capsys):
    """A slice is a log of its own: weights that sum to 0 there leave its metrics undefined
    (old code: a row of nulls and the flags of the other slices)."""
    rows = _log(150, 4)
    rows["w"] = np.where(rows["day"] == "2024-03-02", 0.0, rows["w"])
    log = _write(rows, tmp_path / "log.csv")
    for engine in ("duckdb", "arrow"):
        rc, err = _run(capsys, ["evaluate", str(log), "--score", "p", "--label", "y", "--weight", "w", "--by", "day",
                                "--engine", engine, "--bootstrap", "4", "--quiet", "--out", str(tmp_path / engine)])
        _refused(rc, err, "'w'", "2024-03-02", "sum to 0")


@pytest.mark.parametrize("engine", [None, "duckdb", "arrow"])
def test_fit_refuses_weights_that_sum_to_zero_naming_the_column(tmp_path, capsys, engine):
    """Old code: "`weights` must have a positive sum" (rows) or "`logits` is empty" (cells)."""
    rows = _log(120, 6)
    rows["w"] = np.zeros(120)
    log = _write(rows, tmp_path / "log.parquet")
    rc, err = _run(capsys, ["fit", str(log), "--score", "p", "--label", "y", "--weight", "w", "--method", "platt",
                            "--save", str(tmp_path / "p.json"), *(["--engine", engine] if engine else [])])
    _refused(rc, err, "'w'", " 0")


# ----------------------------------------------------------------------------------- case-only twins
@_sweep(5)
@given(command=st.sampled_from(["compare", "evaluate"]), fmt=st.sampled_from(["csv", "parquet"]),
       engine=st.sampled_from(["duckdb", "arrow"]))
@example(command="compare", fmt="parquet", engine="arrow")
@example(command="compare", fmt="csv", engine="duckdb")
def test_columns_that_differ_only_in_case_are_refused_by_every_engine(tmp_path_factory, capsys, command, fmt, engine):
    """Old code: ``compare --score pctr --score PCTR`` compared the two columns with the arrow
    reader and stopped DuckDB with "column 'PCTR' not found (columns: ..., 'PCTR_1')"."""
    d = tmp_path_factory.mktemp("case")
    rows = _log(120, 7)
    log = _write({"pctr": rows["p"], "PCTR": rows["q"], "y": rows["y"], "Y": 1 - rows["y"]}, d / f"log.{fmt}")
    argv = (["compare", str(log), "--score", "pctr", "--score", "PCTR", "--label", "y"] if command == "compare"
            else ["evaluate", str(log), "--score", "pctr", "--label", "y", "--weight", "Y"])
    rc, err = _run(capsys, [*argv, "--engine", engine, "--bootstrap", "0", "--quiet", "--out", str(d / "out")])
    twins = ("'pctr'", "'PCTR'") if command == "compare" else ("'y'", "'Y'")
    _refused(rc, err, *twins, "case")
