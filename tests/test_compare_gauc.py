"""``compare --user``: each model's GAUC and the paired GAUC difference with its delta-method
interval over users (:mod:`calib_jax.logs.paired_gauc`).

Checked against an independent computation (scikit-learn's AUC of each user's rows, the ratio
estimator's linearized variance written out in NumPy), engine against engine, against
``evaluate --user`` for each model, and by the coverage of the paired interval over
independent simulated logs.
"""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")
import pyarrow.parquet as pq  # noqa: E402
from sklearn.metrics import roc_auc_score  # noqa: E402

from calib_jax import logs  # noqa: E402
from calib_jax.cli import main  # noqa: E402
from calib_jax.logs.gauc import gauc_entry  # noqa: E402
from calib_jax.logs.paired_gauc import gauc_difference, paired_user_auc_sums  # noqa: E402

N, USERS = 12_000, 400


@functools.cache
def _table(seed: int = 0, *, weights: bool = False) -> pa.Table:
    """Two noisy copies of the true click probability (A less noisy than B), users with a few
    dozen rows each, some rows without a user and some users with one class only."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(0.02, 0.5, N)
    y = (rng.uniform(size=N) < q).astype(np.float64)
    a = np.clip(q + rng.normal(0, 0.05, N), 1e-3, 1 - 1e-3)
    b = np.clip(q + rng.normal(0, 0.15, N), 1e-3, 1 - 1e-3)
    uid = rng.integers(0, USERS, N).astype(str).astype(object)
    uid[::53] = None
    uid[:30] = "single"  # one user whose 30 rows are all non-clicks: skipped
    y[:30] = 0.0
    cols = {"a": a, "b": b, "y": y, "uid": pa.array(uid, pa.string())}
    if weights:
        cols["w"] = rng.uniform(0.5, 2.0, N)
    return pa.table(cols)


_AUCS: dict[tuple[int, str | None], tuple[pa.Table, dict[str, np.ndarray]]] = {}


def _per_user_aucs(t: pa.Table, weight: str | None) -> dict[str, np.ndarray]:
    """Each user's weights (per weighting) and the two models' AUCs, by scikit-learn, for the
    users with both classes (kept per table: the cached tables are shared by several tests)."""
    key = (id(t), weight)
    if key in _AUCS and _AUCS[key][0] is t:
        return _AUCS[key][1]
    u = np.asarray(t["uid"].to_pylist(), dtype=object)
    y, a, b = (t[c].to_numpy() for c in ("y", "a", "b"))
    w = t[weight].to_numpy() if weight else np.ones_like(y)
    rows = []
    for user in sorted({x for x in u if x is not None}):
        m = u == user
        if y[m].min() == y[m].max():
            continue
        rows.append((w[m].sum(), (w * y)[m].sum(), 1.0, roc_auc_score(y[m], a[m], sample_weight=w[m]),
                     roc_auc_score(y[m], b[m], sample_weight=w[m])))
    cols = np.asarray(rows).T
    _AUCS[key] = (t, dict(zip(("impressions", "clicks", "equal", "A", "B"), cols, strict=True)))
    return _AUCS[key][1]


def _reference(t: pa.Table, weighting: str, weight: str | None = None) -> tuple[float, float, float, float, int]:
    """GAUC of A, of B, their difference and its delta-method standard error (the ratio
    estimator's linearization, written out), and the number of users with both classes."""
    r = _per_user_aucs(t, weight)
    om, A, B = r[weighting], r["A"], r["B"]
    d = A - B
    D = np.sum(om * d) / om.sum()
    k = om.size
    se = np.sqrt(k / (k - 1) * np.sum(om**2 * (d - D) ** 2)) / om.sum()
    return float(np.sum(om * A) / om.sum()), float(np.sum(om * B) / om.sum()), float(D), float(se), k


@pytest.mark.parametrize("engine", ["duckdb", "arrow"])
def test_the_paired_difference_equals_the_per_user_reference(engine):
    t = _table(1, weights=True)
    weighting = "clicks" if engine == "arrow" else "impressions"
    c = logs.compare(t, scores=["a", "b"], label="y", weight="w", user="uid", gauc_weight=weighting, bootstrap=0,
                     engine=engine)
    ga, gb, D, se, users = _reference(t, weighting, "w")
    row = next(d for d in c.result["differences"] if d["metric"] == "gauc")
    np.testing.assert_allclose([row["value_a"], row["value_b"], row["diff"]], [ga, gb, D], rtol=1e-10)
    np.testing.assert_allclose([row["lo"], row["hi"]], [D - 1.959963984540054 * se, D + 1.959963984540054 * se],
                               rtol=1e-9)
    assert row["better"] == "a" and f"{users} users" in row["method"]
    assert c.result["metrics"]["a"]["gauc"]["value"] == pytest.approx(ga, rel=1e-10)
    # each model's report holds the GAUC that evaluate --user gives for that model alone
    for name, value in (("a", ga), ("b", gb)):
        rep = c.reports[name].report
        assert rep["gauc"][weighting]["value"] == pytest.approx(value, rel=1e-10)
        assert rep["gauc"][weighting]["users"] == users and rep["gauc"][weighting]["skipped"] >= 1
        alone = logs.evaluate(t, score=name, label="y", weight="w", user="uid", gauc_weight=weighting, bootstrap=0,
                              engine=engine)
        for w in ("impressions", "clicks", "equal"):
            one, both = alone.report["gauc"][w], rep["gauc"][w]
            assert one.keys() == both.keys()
            for k in one:  # the same sums, added in another order by the engine's own query
                assert one[k] == (pytest.approx(both[k], rel=1e-12) if isinstance(one[k], float) else both[k]), k


@pytest.mark.parametrize("weighting", ["impressions", "clicks", "equal"])
def test_every_weighting_equals_the_reference_in_numpy_and_in_the_query(weighting):
    """The arrow engine's NumPy sums and the DuckDB query's, without the rest of the comparison."""
    import duckdb

    from calib_jax.logs.comparison import paired_gauc_query
    from calib_jax.logs.paired_gauc import paired_sums_from_result

    t = _table(1, weights=True)
    ga, gb, D, se, users = _reference(t, weighting, "w")
    numpy_sums = paired_user_auc_sums(t["uid"], np.stack([t["a"].to_numpy(), t["b"].to_numpy()], axis=1),
                                      t["y"].to_numpy(), t["w"].to_numpy())
    con = duckdb.connect()
    con.register("events", t)
    got = con.sql(paired_gauc_query(label="y", scores=["a", "b"], user="uid", weight="w", source="events")
                  ).to_arrow_table().to_pylist()[0]
    for sums in (numpy_sums, paired_sums_from_result(got, 2)):
        d = gauc_difference(sums, 0, 1, weighting)
        assert sums.users == users
        assert d["diff"] == pytest.approx(D, rel=1e-10) and d["se"] == pytest.approx(se, rel=1e-9)
        assert gauc_entry(sums.model(0), weighting)["value"] == pytest.approx(ga, rel=1e-10)
        assert gauc_entry(sums.model(1), weighting)["value"] == pytest.approx(gb, rel=1e-10)
        assert gauc_difference(sums, 1, 0, weighting)["diff"] == pytest.approx(-D, rel=1e-12)


def test_engines_agree_with_a_negative_rate_and_logits():
    t = _table(2)
    lt = t.append_column("la", pa.array(np.log(t["a"].to_numpy() / (1 - t["a"].to_numpy())))).append_column(
        "lb", pa.array(np.log(t["b"].to_numpy() / (1 - t["b"].to_numpy()))))
    rows = {}
    for engine in ("duckdb", "arrow"):
        c = logs.compare(lt, logits=["la", "lb"], label="y", user="uid", negative_rate=0.25, bootstrap=0, engine=engine)
        rows[engine] = next(d for d in c.result["differences"] if d["metric"] == "gauc")
    for k in ("value_a", "value_b", "diff", "lo", "hi"):
        assert rows["duckdb"][k] == pytest.approx(rows["arrow"][k], rel=1e-10, abs=1e-15), k
    # the rate weighs each kept non-click 1/0.25: the same as giving that weight as a column
    w = np.where(t["y"].to_numpy() == 1, 1.0, 4.0)
    ga, gb, D, se, _ = _reference(t.append_column("w", pa.array(w)), "impressions", "w")
    assert rows["arrow"]["diff"] == pytest.approx(D, rel=1e-10)
    assert rows["arrow"]["hi"] - rows["arrow"]["lo"] == pytest.approx(2 * 1.959963984540054 * se, rel=1e-9)


def test_a_model_against_itself_differs_by_zero_with_a_zero_width_interval():
    rng = np.random.default_rng(3)
    u, p = rng.integers(0, 50, 3000), rng.uniform(size=3000)
    s = paired_user_auc_sums(u, np.stack([p, p], axis=1), (rng.uniform(size=3000) < p) * 1.0)
    d = gauc_difference(s, 0, 1)
    assert d["diff"] == 0.0 and d["se"] == pytest.approx(0.0, abs=1e-12)


def test_the_paired_interval_covers_the_true_difference_and_beats_the_unpaired_one():
    """B is A's exchangeable twin (the same truth, independent noise of the same size), so the
    true GAUC difference is 0: the 95% interval must cover 0 in about 95% of independent logs.
    Its width is compared with the unpaired sqrt(se_A^2 + se_B^2), which ignores the
    correlation of the two models' per-user AUCs."""
    rng = np.random.default_rng(7)
    covered, ratio, reps = 0, [], 400
    for _ in range(reps):
        n = 3000
        u = rng.integers(0, 150, n)
        q = rng.uniform(0.05, 0.6, n)
        y = (rng.uniform(size=n) < q) * 1.0
        x = np.stack([q + rng.normal(0, 0.1, n), q + rng.normal(0, 0.1, n)], axis=1)
        s = paired_user_auc_sums(u, x, y)
        d = gauc_difference(s, 0, 1)
        covered += d["lo"] <= 0 <= d["hi"]
        ea, eb = gauc_entry(s.model(0)), gauc_entry(s.model(1))
        unpaired = np.hypot(ea["hi"] - ea["lo"], eb["hi"] - eb["lo"])
        ratio.append((d["hi"] - d["lo"]) / unpaired)
    # binomial(400, 0.95): 3.3 standard deviations either side is [0.914, 0.986]
    assert 0.914 <= covered / reps <= 0.986, covered / reps
    assert np.median(ratio) < 0.7, np.median(ratio)  # 0.58 measured


def test_the_command_writes_gauc_and_refuses_bad_user_arguments(tmp_path, capsys):
    path = tmp_path / "log.parquet"
    pq.write_table(_table(4), path)
    out = tmp_path / "o"
    assert main(["compare", str(path), "--label", "y", "--score", "a", "--score", "b", "--user", "uid",
                 "--gauc-weight", "clicks", "--bootstrap", "0", "--out", str(out), "--quiet"]) == 0
    res = json.loads((out / "compare.json").read_text())
    assert res["input"]["user"] == "uid" and res["input"]["gauc_weight"] == "clicks"
    assert "gauc: a better" in (out / "compare.md").read_text()
    assert any(r.startswith("gauc,a,b,") for r in (out / "compare.csv").read_text().splitlines())
    for argv, message in ((["--user", "y"], "--user must name another column"),
                          (["--user", "nope"], "nope"),
                          (["--user", "uid", "--gauc-weight", "users"], "--gauc-weight")):
        try:
            rc = main(["compare", str(path), "--label", "y", "--score", "a", "--score", "b", *argv,
                       "--out", str(tmp_path / "bad"), "--quiet"])
        except SystemExit as e:  # argparse's own refusal of a choice: exit 2 with the usage
            rc = e.code
        assert rc == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err
    with pytest.raises(ValueError, match="user"):
        logs.compare(_table(4), scores=["a", "b"], label="y", user=3)
