"""``calib-jax evaluate --by COL --field F``: each slice's per-field metrics (GCE, Field-ECE,
Field-RCE, |bias|) and their intervals are those of ``evaluate --field`` on the slice's rows
alone (same seed), on DuckDB and on the arrow reader; the two engines agree; a missing field
column, or the ``--by`` column given as a field, is refused in one line naming ``--field``."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")
import pyarrow.parquet as pq  # noqa: E402

from calib_jax import logs  # noqa: E402
from calib_jax.cli import main  # noqa: E402

ROWS = 12_000
FIELDS = ("site", "ad")
KEYS = ("value", "lo", "hi", "plug_in")


def _table(seed: int = 0) -> pa.Table:
    """Impressions over three days, a field ``site`` whose calibration differs by level (six
    levels, one of them missing on some rows), a field ``ad`` (eight levels), a country column
    to slice by, row weights, users."""
    rng = np.random.default_rng(seed)
    t = rng.normal(-1.5, 1.0, ROWS)
    site = rng.integers(0, 6, ROWS)
    shift = np.array([0.0, 0.3, -0.3, 0.1, 0.0, -0.2])[site]
    click = (rng.random(ROWS) < 1 / (1 + np.exp(-(t + shift)))).astype(np.int8)
    logit = t + rng.normal(0, 0.3, ROWS)
    start = dt.datetime(2026, 11, 1)
    ts = np.array([start + dt.timedelta(seconds=int(s)) for s in rng.integers(0, 3 * 86400, ROWS)],
                  dtype="datetime64[us]")
    sites = [f"s{k}" for k in site]
    for i in rng.choice(ROWS, 40, replace=False):
        sites[i] = None  # a missing value is the level __missing__
    return pa.table({"ts": ts, "country": np.array(["fr", "de", "us"])[rng.integers(0, 3, ROWS)],
                     "site": pa.array(sites, pa.string()), "ad": np.array([f"a{k}" for k in rng.integers(0, 8, ROWS)]),
                     "uid": np.array([f"u{k}" for k in rng.integers(0, 300, ROWS)]),
                     "logit": logit, "pctr": 1 / (1 + np.exp(-logit)), "click": click,
                     "w": rng.uniform(0.5, 2.0, ROWS)})


def _days(table: pa.Table) -> np.ndarray:
    """Each row's day bucket as ``evaluate --every day`` labels it."""
    return np.array([x.strftime("%Y-%m-%d 00:00:00") for x in table["ts"].to_pylist()])


def _assert_slice_equals_evaluate(table: pa.Table, res: dict, keys: np.ndarray, model: dict, *, engine: str,
                                  weight: str | None) -> None:
    """Each slice's field entries equal ``evaluate --field`` of its rows (B = 20, seed 3) to 1e-9."""
    for r in res["slices"]:
        alone = logs.evaluate(table.filter(pa.array(keys == r["slice"])), label="click", fields=list(FIELDS),
                              weight=weight, bootstrap=20, seed=3, engine=engine, **model).report["fields"]
        for f in FIELDS:
            assert sorted(r["fields"][f]) == sorted(alone[f]["metrics"]), (r["slice"], f)
            for m, want in alone[f]["metrics"].items():
                for k in KEYS:
                    got, exp = r["fields"][f][m][k], want.get(k)
                    if exp is None:
                        assert got is None, (engine, r["slice"], f, m, k)
                    else:
                        assert got == pytest.approx(exp, abs=1e-9), (engine, r["slice"], f, m, k)


@pytest.mark.parametrize("case", ["every_day_weighted", "country_logit"])
def test_each_slice_equals_evaluate_field_on_its_rows(tmp_path, case):
    """Per slice and field: value, plug-in and interval of each metric equal ``evaluate
    --field`` of the slice's rows (same seed) to 1e-9, on DuckDB and arrow: a time column
    bucketed by day with row weights and probabilities, and a categorical column with logits.
    The two engines give the same table, and the input file is unchanged."""
    table = _table()
    log = tmp_path / "log.parquet"
    pq.write_table(table, log)
    before = log.read_bytes()
    if case == "every_day_weighted":
        model, weight, keys = {"score": "pctr"}, "w", _days(table)
        opts = dict(by="ts", every="day", weight="w", score="pctr")
    else:
        model, weight, keys = {"logit": "logit"}, None, np.asarray(table["country"].to_pylist())
        opts = dict(by="country", logit="logit")
    runs = {}
    for engine in ("duckdb", "arrow"):
        s = logs.slices(log, label="click", fields=list(FIELDS), bootstrap=20, seed=3, engine=engine, **opts)
        runs[engine] = s
        assert len(s.result["slices"]) == 3
        for r in s.result["slices"]:
            assert set(r["fields"]) == set(FIELDS)
        _assert_slice_equals_evaluate(table, s.result, keys, model, engine=engine, weight=weight)
    a, b = runs["duckdb"].fields, runs["arrow"].fields
    assert a.num_rows == 3 * len(FIELDS) * 4 and a.column_names == b.column_names
    assert a.column("slice").to_pylist() == b.column("slice").to_pylist()
    for c in ("value", "lo", "hi", "plug_in"):
        np.testing.assert_allclose(np.asarray(a[c].to_pylist(), float), np.asarray(b[c].to_pylist(), float),
                                   rtol=1e-9, atol=1e-12)
    assert log.read_bytes() == before


def test_the_command_writes_the_long_file_and_combines_with_user(tmp_path):
    """The command's ``slices_fields.csv`` holds one row per (slice, field, metric), the same
    numbers as ``slices.json``; ``--user`` adds GAUC beside the fields (the GAUC of the run
    without ``--field``); the same seed gives the same bits (arrow: its sums run in one order)."""
    table = _table(seed=1)
    log = tmp_path / "log.parquet"
    pq.write_table(table, log)
    outs = []
    for k in range(2):
        out = tmp_path / f"out{k}"
        assert main(["evaluate", str(log), "--label", "click", "--score", "pctr", "--by", "country",
                     "--field", "site", "--field", "ad", "--user", "uid", "--bootstrap", "10", "--engine", "arrow",
                     "--out", str(out), "--quiet"]) == 0
        outs.append(out)
    res = json.loads((outs[0] / "slices.json").read_text())
    assert res["input"]["fields"] == list(FIELDS)
    for r in res["slices"]:
        assert r["gauc"]["value"] is not None and set(r["fields"]) == set(FIELDS)
        for f in FIELDS:
            for e in r["fields"][f].values():
                assert e["lo"] is None or e["lo"] <= e["hi"]
    lines = (outs[0] / "slices_fields.csv").read_text().splitlines()
    assert lines[0] == "slice,field,metric,value,lo,hi,plug_in" and len(lines) == 1 + 3 * 2 * 4
    first = lines[1].split(",")
    r0 = res["slices"][0]
    assert first[:3] == [r0["slice"], "site", "gce"]
    assert float(first[3]) == pytest.approx(r0["fields"]["site"]["gce"]["value"], rel=1e-12)
    # the same seed gives the same bits (the provenance's wall time aside)
    assert (outs[0] / "slices_fields.csv").read_bytes() == (outs[1] / "slices_fields.csv").read_bytes()
    # the Markdown has a section per field: a row per slice, each metric's value and interval as in the JSON
    md = (outs[0] / "slices.md").read_text()
    for f in FIELDS:
        section = md.split(f"## Field {f}\n")[1].split("## Field")[0]
        table = [ln for ln in section.splitlines() if ln.startswith("| ")]
        assert table[0] == "| slice | gce | field_ece | field_rce | abs_bias |" and len(table) == 1 + len(res["slices"])
        for r, line in zip(res["slices"], table[1:], strict=True):
            e = r["fields"][f]["field_ece"]
            cell = line.split(" | ")[2]
            assert line.startswith(f"| {r['slice']} | ") and cell == (
                f"{e['value']:.4g}" + (f" [{e['lo']:.4g}, {e['hi']:.4g}]" if e["lo"] is not None else ""))
    # the GAUC is that of the run without --field
    plain = tmp_path / "plain"
    assert main(["evaluate", str(log), "--label", "click", "--score", "pctr", "--by", "country", "--user", "uid",
                 "--engine", "arrow", "--bootstrap", "10", "--out", str(plain), "--quiet"]) == 0
    gauc = {r["slice"]: r["gauc"] for r in json.loads((plain / "slices.json").read_text())["slices"]}
    assert all(r["gauc"] == gauc[r["slice"]] for r in res["slices"])
    assert not (plain / "slices_fields.csv").exists()


@pytest.mark.parametrize("engine", ["duckdb", "arrow"])
def test_a_missing_field_column_and_the_by_column_are_refused(tmp_path, capsys, engine):
    table = _table(seed=2)
    log = tmp_path / "log.parquet"
    pq.write_table(table, log)
    before = log.read_bytes()
    base = ["evaluate", str(log), "--label", "click", "--score", "pctr", "--by", "country", "--engine", engine,
            "--bootstrap", "0", "--quiet"]
    code = main([*base, "--field", "nope", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and "--field" in err and "'nope'" in err and "Traceback" not in err
    code = main([*base, "--field", "country", "--out", str(tmp_path / "out2")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "--field" in err and "--by" in err
    with pytest.raises(ValueError, match=r"^fields: .*'nope'"):
        logs.slices(log, by="country", score="pctr", label="click", fields=["nope"], bootstrap=0, engine=engine)
    with pytest.raises(ValueError, match="fields"):
        logs.slices(log, by="country", score="pctr", label="click", fields=["country"], bootstrap=0, engine=engine)
    assert log.read_bytes() == before


@pytest.mark.parametrize("engine", ["duckdb", "arrow"])
def test_levels_are_ranked_within_each_slice(tmp_path, engine):
    """More levels than ``max_levels``: each slice keeps its own levels (DuckDB: its most
    frequent, arrow: the first it meets) and still equals ``evaluate --field`` of its rows,
    though the slices' top levels differ (``ad`` a0/a1 lead in fr, a6/a7 elsewhere)."""
    table = _table(seed=5)
    country = np.asarray(table["country"].to_pylist())
    rng = np.random.default_rng(5)
    ad = np.where(country == "fr", np.array(["a0", "a1", "a2"])[rng.integers(0, 3, ROWS) % 2 + (rng.random(ROWS) < .1)],
                  np.array(["a6", "a7", "a2"])[rng.integers(0, 2, ROWS) + (rng.random(ROWS) < .1)])
    table = table.set_column(table.schema.get_field_index("ad"), "ad", pa.array(ad))
    log = tmp_path / "log.parquet"
    pq.write_table(table, log)
    s = logs.slices(log, by="country", score="pctr", label="click", fields=list(FIELDS), max_levels=2, bootstrap=10,
                    seed=1, engine=engine)
    for r in s.result["slices"]:
        alone = logs.evaluate(table.filter(pa.array(country == r["slice"])), score="pctr", label="click",
                              fields=list(FIELDS), max_levels=2, bootstrap=10, seed=1, engine=engine).report["fields"]
        for f in FIELDS:
            for m, want in alone[f]["metrics"].items():
                for k in KEYS:
                    got, exp = r["fields"][f][m][k], want.get(k)
                    assert (got is None) == (exp is None) and (exp is None or got == pytest.approx(exp, abs=1e-9)), \
                        (engine, r["slice"], f, m, k)
