"""``calib-jax evaluate --by COL --oracle PI``: each slice's oracle metrics (oracle Brier, Brier+,
KL, Chebyshev, Pearson) and their intervals are those of ``evaluate --oracle`` on the slice's rows
alone, drawn with the slice's seed; DuckDB and the arrow reader agree (Spark gives DuckDB's in
tests/test_cli_slices.py's Spark test: one Spark start for GAUC, fields and oracle); the files
hold them; an oracle column that is another role's, or holds values outside [0, 1], is refused in
one line naming ``--oracle``."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")
import pyarrow.parquet as pq  # noqa: E402

import calib_jax.io as cio  # noqa: E402
from calib_jax import logs  # noqa: E402
from calib_jax.cli import main  # noqa: E402

ROWS = 12_000  # at least 10^4 rows: the engines reduce sums the size of real logs
ORACLE = ("oracle_brier", "oracle_mae", "oracle_kl", "oracle_chebyshev", "oracle_pearson")
KEYS = ("value", "lo", "hi")
SEED = 3
_CLOCK = ("created_utc", "wall_time_s", "rows_per_s")


def _table(seed: int = 0) -> pa.Table:
    """A simulated log over three days and three countries: the true click probability ``pi``,
    the clicks drawn from it, a model's probability and logit that miss it (more so in ``us``),
    row weights."""
    rng = np.random.default_rng(seed)
    t = rng.normal(-1.8, 0.9, ROWS)
    country = np.array(["de", "fr", "us"])[rng.integers(0, 3, ROWS)]
    pi = 1 / (1 + np.exp(-t))
    logit = t + rng.normal(0, 0.3, ROWS) + np.where(country == "us", 0.4, 0.0)
    start = dt.datetime(2026, 11, 1)
    ts = np.array([start + dt.timedelta(seconds=int(s)) for s in rng.integers(0, 3 * 86400, ROWS)],
                  dtype="datetime64[us]")
    return pa.table({"ts": ts, "country": country, "pi": pi, "click": (rng.random(ROWS) < pi).astype(np.int8),
                     "logit": logit, "pctr": 1 / (1 + np.exp(-logit)), "w": rng.uniform(0.5, 2.0, ROWS)})


def _days(table: pa.Table) -> np.ndarray:
    """Each row's day bucket as ``evaluate --every day`` labels it."""
    return np.array([x.strftime("%Y-%m-%d 00:00:00") for x in table["ts"].to_pylist()])


def _slice_seed(seed: int, k: int) -> int:
    """The k-th slice's bootstrap seed (``SeedSequence([seed, k])``, slicing's module docstring)."""
    return int(np.random.SeedSequence([seed, k]).generate_state(1)[0])


def _without_clock(obj):
    """``obj`` without the provenance's clock (which differs between two runs)."""
    if isinstance(obj, dict):
        return {k: _without_clock(v) for k, v in obj.items() if k not in _CLOCK}
    return obj


def _close(got: dict, want: dict, what: tuple) -> None:
    for k in KEYS:
        assert (got[k] is None) == (want[k] is None), (*what, k)
        if want[k] is not None:
            assert got[k] == pytest.approx(want[k], rel=1e-9, abs=1e-15), (*what, k)


@pytest.mark.parametrize("case", ["every_day", "country_weighted_logit"])
def test_each_slice_equals_evaluate_oracle_on_its_rows(tmp_path, case):
    """Per slice: value and interval of each oracle metric equal ``evaluate --oracle`` of the
    slice's rows (the log filtered here) with the slice's seed to 1e-9, on DuckDB and arrow,
    which agree with each other to 1e-9: a time column bucketed by day (probabilities), and a
    categorical column with row weights and logits. The input file is unchanged."""
    table = _table()
    log = tmp_path / "log.parquet"
    pq.write_table(table, log)
    before = log.read_bytes()
    if case == "every_day":
        model, weight, keys, opts = {"score": "pctr"}, None, _days(table), dict(by="ts", every="day")
    else:
        model, weight, keys, opts = {"logit": "logit"}, "w", np.asarray(table["country"].to_pylist()), dict(by="country")
    runs = {e: logs.slices(log, label="click", oracle="pi", weight=weight, bootstrap=30, seed=SEED, engine=e,
                           **model, **opts).result for e in ("duckdb", "arrow")}
    assert [r["slice"] for r in runs["arrow"]["slices"]] == [r["slice"] for r in runs["duckdb"]["slices"]]
    assert len(runs["duckdb"]["slices"]) == 3 and runs["duckdb"]["input"]["oracle"] == "pi"
    for k, r in enumerate(runs["duckdb"]["slices"]):
        part = table.filter(pa.array(keys == r["slice"]))
        assert r["rows"] == part.num_rows
        alone = {e["name"]: e for e in logs.evaluate(part, label="click", oracle="pi", weight=weight, bootstrap=30,
                                                     seed=_slice_seed(SEED, k), **model).report["metrics"]}
        for m in ORACLE:
            assert r[m]["lo"] is not None and r[m]["lo"] <= r[m]["value"] <= r[m]["hi"], (case, m)
            for engine, res in runs.items():
                _close(res["slices"][k][m], alone[m], (case, engine, r["slice"], m))
        assert r["oracle_chebyshev"]["value"] == pytest.approx(  # the largest gap, by hand
            float(np.max(np.abs(part["pi"].to_numpy() - part["pctr"].to_numpy()))), rel=1e-12)
        assert not set(r["changed"]) & set(ORACLE)  # reported, never flagged
    assert log.read_bytes() == before


def test_the_files_hold_the_oracle_metrics_and_the_library_writes_the_commands(tmp_path):
    """``slices.csv`` gets ``oracle_*, oracle_*_lo, oracle_*_hi`` after the panel's columns with
    the JSON's numbers, ``slices.md`` a column per oracle metric; ``logs.slices(oracle=)`` gives
    the command's files (JSON but the clock, the others byte for byte) and its table the columns."""
    table = _table(seed=1)
    log = tmp_path / "log.parquet"
    pq.write_table(table, log)
    out = tmp_path / "cmd"
    assert main(["evaluate", str(log), "--label", "click", "--score", "pctr", "--by", "country", "--oracle", "pi",
                 "--bootstrap", "20", "--engine", "arrow", "--out", str(out), "--quiet"]) == 0
    res = json.loads((out / "slices.json").read_text())
    header, *rows = (out / "slices.csv").read_text().splitlines()
    cols = header.split(",")
    want = [f"{m}{s}" for m in ORACLE for s in ("", "_lo", "_hi")]
    assert cols[cols.index("ctr_hi") + 1:cols.index("changed")] == want
    for line, r in zip(rows, res["slices"], strict=True):
        cells = dict(zip(cols, line.split(","), strict=True))
        for m in ORACLE:
            for k, suffix in zip(KEYS, ("", "_lo", "_hi"), strict=True):
                assert float(cells[m + suffix]) == pytest.approx(r[m][k], rel=1e-15)
    md = (out / "slices.md").read_text()
    assert "| oracle_brier | oracle_mae | oracle_kl | oracle_chebyshev | oracle_pearson |" in md
    assert "oracle metrics against the true click probability 'pi'" in res["method"]
    s = logs.slices(log, label="click", score="pctr", by="country", oracle="pi", bootstrap=20, engine="arrow")
    saved = s.save(tmp_path / "lib")
    # every file the command wrote, but the folder's list of them (calib_jax.io.fresh_outputs)
    assert sorted(s.files) == sorted(p.name for p in out.iterdir() if p.name != cio.OUTPUTS_LIST)
    for name in s.files:
        a, b = (saved / name).read_bytes(), (out / name).read_bytes()
        if name.endswith(".json"):
            assert _without_clock(json.loads(a)) == _without_clock(json.loads(b))
        else:
            assert a == b, name
    assert set(want) <= set(s.table.column_names)
    assert s.table["oracle_brier"].to_pylist() == [r["oracle_brier"]["value"] for r in res["slices"]]


@pytest.mark.parametrize("engine", ["duckdb", "arrow"])
def test_a_bad_oracle_column_is_refused_naming_the_option(tmp_path, capsys, engine):
    """``--oracle`` naming the label, the score, the weight or the ``--by`` column, a column the
    log lacks, or one holding NaN or values outside [0, 1]: exit 2 and one line naming
    ``--oracle``, no traceback (the library: ``ValueError`` naming ``oracle``); with
    ``--drop-invalid`` those rows are in no slice."""
    table = _table(seed=2)
    pi = table["pi"].to_numpy().copy()
    pi[[4, 9, 30]] = [np.nan, 1.5, -0.2]
    table = table.set_column(table.schema.get_field_index("pi"), "pi", pa.array(pi))
    log = tmp_path / "log.parquet"
    pq.write_table(table, log)
    before = log.read_bytes()
    base = ["evaluate", str(log), "--label", "click", "--score", "pctr", "--weight", "w", "--by", "country",
            "--engine", engine, "--bootstrap", "0", "--quiet"]
    for i, (col, says) in enumerate([("click", "another column"), ("pctr", "another column"),
                                     ("w", "another column"), ("country", "another column"),
                                     ("nope", "'nope' not found"), ("pi", "--drop-invalid")]):
        code = main([*base, "--oracle", col, "--out", str(tmp_path / f"out{i}")])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1, (col, err)
        assert "--oracle" in err and says in err and "Traceback" not in err, (col, err)
    for col in ("click", "nope", "pi"):
        with pytest.raises(ValueError, match="oracle"):
            logs.slices(log, by="country", score="pctr", label="click", weight="w", oracle=col, bootstrap=0,
                        engine=engine)
    s = logs.slices(log, by="country", score="pctr", label="click", weight="w", oracle="pi", bootstrap=0,
                    engine=engine, drop_invalid=True)
    assert s.result["input"]["rows_used"] == ROWS - 3 and sum(s.table["rows"].to_pylist()) == ROWS - 3
    valid = np.isfinite(pi) & (pi >= 0) & (pi <= 1)
    country = np.asarray(table["country"].to_pylist())
    for r in s.result["slices"]:
        part = table.filter(pa.array(valid & (country == r["slice"])))
        brier = np.sum(part["w"].to_numpy() * (part["pi"].to_numpy() - part["pctr"].to_numpy()) ** 2)
        assert r["oracle_brier"]["value"] == pytest.approx(brier / np.sum(part["w"].to_numpy()), rel=1e-9)
    assert log.read_bytes() == before
