"""``calib-jax evaluate --by COL --user U``: each slice's GAUC and its delta-method interval are
those of ``evaluate --user`` on the slice's rows alone, on DuckDB and on the arrow reader; a
slice where no user has both classes has no GAUC (with the reason) and the others are intact;
a missing user column is refused naming the option."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")
import pyarrow.parquet as pq  # noqa: E402

from calib_jax import logs  # noqa: E402
from calib_jax.cli import main  # noqa: E402

ROWS = 12_000


def _table(seed: int = 0, *, one_class_site: bool = False) -> pa.Table:
    """Impressions over three days and three sites, 400 users (a user appears on several days
    and sites), a few rows without a user, row weights. With ``one_class_site`` the site
    ``z`` gets rows whose every user has one row only (no user of it has both classes)."""
    rng = np.random.default_rng(seed)
    t = rng.normal(-1.5, 1.0, ROWS)
    user_bias = rng.normal(0, 0.5, 400)
    uid = rng.integers(0, 400, ROWS)
    click = (rng.random(ROWS) < 1 / (1 + np.exp(-(t + user_bias[uid])))).astype(np.int8)
    pctr = 1 / (1 + np.exp(-(t + rng.normal(0, 0.4, ROWS))))
    start = dt.datetime(2026, 11, 1)
    ts = np.array([start + dt.timedelta(seconds=int(s)) for s in rng.integers(0, 3 * 86400, ROWS)],
                  dtype="datetime64[us]")
    site = np.array(["a", "b", "c"])[rng.integers(0, 3, ROWS)]
    users = [f"u{u}" for u in uid]
    for i in rng.choice(ROWS, 30, replace=False):
        users[i] = None  # rows without a user: in the weight total, in no user's AUC
    if one_class_site:
        lone = np.arange(200)  # 200 rows of 200 users seen nowhere else, half of them clicks
        site[lone] = "z"
        click[lone] = lone % 2
        for i in lone:
            users[i] = f"lone{i}"
    return pa.table({"ts": ts, "site": site, "uid": pa.array(users, pa.string()), "pctr": pctr, "click": click,
                     "w": rng.uniform(0.5, 2.0, ROWS)})


def _cli(log: Path, out: Path, *extra: str) -> dict:
    assert main(["evaluate", str(log), "--label", "click", "--score", "pctr", "--user", "uid", "--bootstrap", "0",
                 "--out", str(out), "--quiet", *extra]) == 0
    return json.loads((out / "slices.json").read_text())


def _alone(table: pa.Table, mask: np.ndarray, weight: str | None) -> dict:
    """``evaluate --user`` on the rows of one slice: its GAUC entry per user weighting."""
    r = logs.evaluate(table.filter(pa.array(mask)), score="pctr", label="click", user="uid", weight=weight,
                      bootstrap=0)
    return r.report["gauc"]


def _close(got: dict, want: dict) -> None:
    assert got["users"] == want["users"] and got["skipped"] == want["skipped"]
    assert got["rows_without_user"] == want["rows_without_user"]
    for k in ("value", "lo", "hi"):
        assert got[k] == pytest.approx(want[k], abs=1e-10), k


@pytest.mark.parametrize("by", ["day", "site"])
def test_each_slice_equals_evaluate_user_on_its_rows(tmp_path, by):
    """Per slice: value, interval and counts equal ``evaluate --user`` of the slice's rows to
    1e-10, DuckDB and arrow, for a time column bucketed by day (with row weights and each
    GAUC weighting) and for a categorical column."""
    table = _table()
    log = tmp_path / "log.parquet"
    pq.write_table(table, log)
    before = log.read_bytes()
    if by == "day":
        keys = table["ts"].to_numpy().astype("datetime64[D]").astype(str)
        args, weight, gauc_weights = ["--by", "ts", "--every", "day", "--weight", "w"], "w", ("impressions", "clicks",
                                                                                           "equal")
    else:
        keys = np.asarray(table["site"].to_pylist())
        args, weight, gauc_weights = ["--by", "site"], None, ("impressions",)
    runs = {(e, g): _cli(log, tmp_path / f"{e}_{g}", *args, "--engine", e, "--gauc-weight", g)
            for e in ("duckdb", "arrow") for g in gauc_weights}
    first = runs[("duckdb", gauc_weights[0])]
    labels = [r["slice"] for r in first["slices"]]
    assert [x[:10] for x in labels] == sorted(set(keys)) and len(labels) == 3
    assert first["input"]["user"] == "uid"
    for r in first["slices"]:
        want = _alone(table, keys == r["slice"][:10], weight)
        for (engine, g), res in runs.items():
            got = next(s for s in res["slices"] if s["slice"] == r["slice"])["gauc"]
            assert got["user_weight"] == g
            _close(got, want[g])
            assert got["lo"] < got["value"] < got["hi"], (engine, g)
        # a user appears in several slices: the slice counts fewer users than the log has
        assert want["impressions"]["users"] < 400
    # the CSV's GAUC columns hold the JSON's numbers
    csv = (tmp_path / f"arrow_{gauc_weights[0]}" / "slices.csv").read_text().splitlines()
    assert csv[0].split(",")[-6:] == ["gauc", "gauc_lo", "gauc_hi", "gauc_users", "changed", "too_small"]
    assert int(csv[1].split(",")[-3]) == runs[("arrow", gauc_weights[0])]["slices"][0]["gauc"]["users"]
    assert log.read_bytes() == before


def test_the_library_gives_the_command_s_table(tmp_path):
    """``logs.slices(..., user=, gauc_weight=)``: the table's GAUC columns are the command's."""
    table = _table(seed=1)
    s = logs.slices(table, by="site", score="pctr", label="click", user="uid", gauc_weight="clicks", bootstrap=0,
                    engine="arrow")
    t = s.table
    assert {"gauc", "gauc_lo", "gauc_hi", "gauc_users"} <= set(t.column_names)
    site = np.asarray(table["site"].to_pylist())
    for row in t.to_pylist():
        want = _alone(table, site == row["slice"], None)["clicks"]
        assert row["gauc"] == pytest.approx(want["value"], abs=1e-10)
        assert row["gauc_users"] == want["users"]


def test_a_slice_without_a_user_of_both_classes_has_no_gauc(tmp_path):
    """Site ``z``: 200 users of one row each, so no user has a click and a non-click; its GAUC
    is null with evaluate's reason, its other metrics and the other slices are computed."""
    table = _table(seed=2, one_class_site=True)
    log = tmp_path / "log.parquet"
    pq.write_table(table, log)
    runs = {e: _cli(log, tmp_path / e, "--by", "site", "--engine", e) for e in ("duckdb", "arrow")}
    alone = logs.evaluate(table.filter(pa.array(np.asarray(table["site"].to_pylist()) == "z")), score="pctr",
                          label="click", user="uid", bootstrap=0)
    want = alone.report["gauc"]["impressions"]
    assert want["value"] is None
    for e, res in runs.items():
        rows = {r["slice"]: r for r in res["slices"]}
        z = rows["z"]["gauc"]
        assert z["value"] is None and z["lo"] is None and z["hi"] is None, e
        assert z["value_undefined"] == want["value_undefined"] == "undefined: no user has both a click and a non-click"
        assert z["users"] == 0 and z["skipped"] == 200
        assert rows["z"]["ne"]["value"] is not None
        for k in ("a", "b", "c"):
            assert rows[k]["gauc"]["value"] is not None and rows[k]["gauc"]["users"] > 100, (e, k)
    md = (tmp_path / "arrow" / "slices.md").read_text()
    assert "no user has both a click and a non-click" in md


@pytest.mark.parametrize("engine", ["duckdb", "arrow"])
def test_a_missing_user_column_is_refused_naming_the_option(tmp_path, capsys, engine):
    table = _table(seed=3)
    log = tmp_path / "log.parquet"
    pq.write_table(table, log)
    before = log.read_bytes()
    code = main(["evaluate", str(log), "--label", "click", "--score", "pctr", "--by", "site", "--user", "nope",
                 "--engine", engine, "--bootstrap", "0", "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and "--user" in err and "'nope'" in err and "Traceback" not in err
    with pytest.raises(ValueError, match=r"^user: .*'nope'"):
        logs.slices(log, by="site", score="pctr", label="click", user="nope", bootstrap=0, engine=engine)
    with pytest.raises(ValueError, match="gauc_weight"):
        logs.slices(log, by="site", score="pctr", label="click", user="uid", gauc_weight="users", bootstrap=0,
                    engine=engine)
    assert log.read_bytes() == before


def test_dropped_rows_are_in_no_slice_s_gauc(tmp_path):
    """``--drop-invalid``: rows with a time that does not parse or a score outside [0, 1] count
    in no user's AUC, on either engine (each slice equals evaluate --user of its valid rows)."""
    import pyarrow.csv as pacsv

    table = _table(seed=4)
    text = [str(x) for x in table["ts"].to_pylist()]
    pctr = table["pctr"].to_numpy().copy()
    for i in range(0, 60, 2):
        text[i] = "not a time"
        pctr[i + 1] = 1.5
    users = pa.array([u or "u0" for u in table["uid"].to_pylist()])  # a CSV's empty field: no null user here
    table = table.set_column(0, "ts", pa.array(text)).set_column(3, "pctr", pa.array(pctr)).set_column(2, "uid", users)
    log = tmp_path / "log.csv"
    pacsv.write_csv(table, log)
    runs = {e: _cli(log, tmp_path / e, "--by", "ts", "--every", "day", "--drop-invalid", "--engine", e)
            for e in ("duckdb", "arrow")}
    valid = np.ones(table.num_rows, bool)
    valid[:60] = False
    day = np.array([t[:10] for t in text])
    for r in runs["duckdb"]["slices"]:
        want = _alone(table, valid & (day == r["slice"][:10]), None)["impressions"]
        for res in runs.values():
            _close(next(s for s in res["slices"] if s["slice"] == r["slice"])["gauc"], want)
