"""``compare --oracle``: each model's oracle metrics (a simulated log's true click probability)
and their paired differences.

Checked against ``evaluate --oracle`` of each model's column (every engine), against the
oracle Brier score written out in NumPy, by a model compared with itself (a difference of
exactly 0), against the unpaired intervals, and on invalid oracle values.
"""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")
import pyarrow.parquet as pq  # noqa: E402

from calib_jax import logs  # noqa: E402
from calib_jax.cli import main  # noqa: E402

N = 15_000
ORACLE_METRICS = ("oracle_brier", "oracle_mae", "oracle_kl", "oracle_chebyshev", "oracle_pearson")


@functools.cache
def _table(seed: int = 0) -> pa.Table:
    """The true click probability ``pi`` and two models around it, ``a`` sharper than ``b``; their
    logits ``la``, ``lb``."""
    rng = np.random.default_rng(seed)
    t = rng.normal(-2.0, 1.0, N)
    pi = 1 / (1 + np.exp(-t))
    y = (rng.uniform(size=N) < pi).astype(np.float64)
    la, lb = t + rng.normal(0, 0.3, N), t + rng.normal(0, 0.8, N)
    return pa.table({"a": 1 / (1 + np.exp(-la)), "b": 1 / (1 + np.exp(-lb)), "la": la, "lb": lb, "y": y, "pi": pi,
                     "w": rng.uniform(0.5, 2.0, N)})


def _values(report: dict) -> dict[str, float]:
    return {m["name"]: m["value"] for m in report["metrics"]}


@pytest.mark.parametrize("engine, logits", [("duckdb", False), ("arrow", False), ("duckdb", True)])
def test_each_models_oracle_metrics_equal_evaluate_oracle_of_its_column(engine, logits):
    t = _table()
    cols = ["la", "lb"] if logits else ["a", "b"]
    kind = "logits" if logits else "scores"
    c = logs.compare(t, **{kind: cols}, label="y", weight="w", oracle="pi", bootstrap=0, engine=engine)
    for name in cols:
        alone = logs.evaluate(t, **{kind[:-1]: name}, label="y", weight="w", oracle="pi", bootstrap=0, engine=engine)
        got, want = _values(c.reports[name].report), _values(alone.report)
        for k in ORACLE_METRICS:
            assert got[k] == pytest.approx(want[k], rel=1e-9), (name, k)
    assert c.result["input"]["oracle"] == "pi"


def test_the_paired_differences_are_the_differences_of_the_rows():
    t = _table()
    c = logs.compare(t, scores=["a", "b"], label="y", oracle="pi", bootstrap=100, seed=3)
    pi, a, b = (t[k].to_numpy() for k in ("pi", "a", "b"))
    diffs = {d["metric"]: d for d in c.result["differences"]}
    assert diffs["oracle_brier"]["diff"] == pytest.approx(np.mean((pi - a) ** 2) - np.mean((pi - b) ** 2), rel=1e-9)
    assert diffs["oracle_mae"]["diff"] == pytest.approx(np.mean(np.abs(pi - a)) - np.mean(np.abs(pi - b)), rel=1e-9)
    assert diffs["oracle_pearson"]["diff"] == pytest.approx(
        np.corrcoef(a, pi)[0, 1] - np.corrcoef(b, pi)[0, 1], rel=1e-7)
    for k in ("oracle_brier", "oracle_mae", "oracle_kl"):
        assert diffs[k]["better"] == "a" and diffs[k]["lo"] <= diffs[k]["diff"] <= diffs[k]["hi"]
    assert diffs["oracle_pearson"]["better"] == "a"
    assert "oracle_chebyshev" not in diffs  # a maximum: bootstrapped per model, not paired
    # pairing: the two models' errors are positively correlated through the rows, so the interval
    # of the difference is narrower than the two intervals combined (0.93 of it here: b's own
    # spread dominates, as its oracle Brier is 7.6 times a's)
    m = c.result["metrics"]
    unpaired = np.hypot(m["a"]["oracle_brier"]["hi"] - m["a"]["oracle_brier"]["lo"],
                        m["b"]["oracle_brier"]["hi"] - m["b"]["oracle_brier"]["lo"])
    assert diffs["oracle_brier"]["hi"] - diffs["oracle_brier"]["lo"] < unpaired


def test_a_model_against_itself_differs_by_exactly_zero():
    t = _table().append_column("a2", _table()["a"])
    c = logs.compare(t, scores=["a", "a2"], label="y", oracle="pi", bootstrap=30, engine="arrow")
    for d in c.result["differences"]:
        if d["metric"].startswith("oracle"):
            assert d["diff"] == 0.0 and d["lo"] == 0.0 and d["hi"] == 0.0, d


@pytest.mark.parametrize("engine", ["duckdb", "arrow"])
def test_invalid_oracle_values_are_refused_or_dropped(engine, tmp_path, capsys):
    pi = _table()["pi"].to_numpy().copy()
    pi[[5, 9]] = [np.nan, 1.5]
    path = tmp_path / "log.parquet"
    pq.write_table(_table().set_column(5, "pi", pa.array(pi)), path)
    argv = ["compare", str(path), "--label", "y", "--score", "a", "--score", "b", "--oracle", "pi",
            "--engine", engine, "--bootstrap", "0", "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "refused")]) != 0
    err = capsys.readouterr().err
    assert "oracle" in err and "--drop-invalid" in err and "Traceback" not in err, err
    assert main([*argv, "--out", str(tmp_path / "dropped"), "--drop-invalid"]) == 0
    res = json.loads((tmp_path / "dropped" / "compare.json").read_text())
    assert res["input"]["rows_used"] == N - 2 and res["input"]["rows_read"] == N


def test_the_oracle_must_be_another_column(tmp_path, capsys):
    path = tmp_path / "log.parquet"
    pq.write_table(_table(), path)
    assert main(["compare", str(path), "--label", "y", "--score", "a", "--score", "b", "--oracle", "a",
                 "--out", str(tmp_path / "o"), "--quiet"]) == 2
    assert "--oracle must name another column" in capsys.readouterr().err
    with pytest.raises(ValueError, match="oracle"):
        logs.compare(_table(), scores=["a", "b"], label="y", oracle=["pi"])


@pytest.mark.parametrize("engine", ["duckdb", "arrow"])
def test_a_constant_score_or_oracle_has_no_correlation(engine):
    """Pearson's correlation with a constant is undefined: null with the reason, in a report and in
    a comparison (whose difference is then undefined, never a verdict). From raw sums, a constant
    score's variance is rounding (about 1e-17), and the report read 1.0 for a constant score
    against a constant oracle, 8.7e-08 against a varying one."""
    rng = np.random.default_rng(1)
    n = 400
    y = (rng.uniform(size=n) < 0.3).astype(np.float64)
    const, varying = np.full(n, 0.123456789), rng.uniform(0.1, 0.5, n)
    for pi in (np.full(n, 0.3), varying):
        r = logs.evaluate(pa.table({"p": const, "y": y, "pi": pi}), score="p", label="y", oracle="pi", bootstrap=20,
                          engine=engine).report
        e = next(m for m in r["metrics"] if m["name"] == "oracle_pearson")
        assert e["value"] is None and e["lo"] is None and "constant" in e["value_undefined"]
    # a varying score against a constant oracle
    r = logs.evaluate(pa.table({"p": varying, "y": y, "pi": np.full(n, 0.3)}), score="p", label="y", oracle="pi",
                      bootstrap=0, engine=engine).report
    assert next(m for m in r["metrics"] if m["name"] == "oracle_pearson")["value"] is None
    # the comparison of a constant model with a varying one: no difference, no better model
    pi = np.clip(varying + rng.normal(0, 0.05, n), 0, 1)
    c = logs.compare(pa.table({"a": const, "b": varying, "y": y, "pi": pi}), scores=["a", "b"], label="y",
                     oracle="pi", bootstrap=20, engine=engine)
    d = next(d for d in c.result["differences"] if d["metric"] == "oracle_pearson")
    assert d["diff"] is None and d.get("better") is None
    assert _values(c.reports["b"].report)["oracle_pearson"] == pytest.approx(np.corrcoef(varying, pi)[0, 1], rel=1e-9)
