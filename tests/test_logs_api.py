"""``calib_jax.logs``, the log engine from Python: each entry point returns what its command
writes, to the bit (the provenance's clock and timing aside); every kind of source gives the same
numbers as the same rows in a file; bad arguments raise ``ValueError`` naming the argument; no
call prints, and none changes its source."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")
import pyarrow.csv as pcsv  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import calib_jax.io as cio  # noqa: E402
from calib_jax import logs  # noqa: E402
from calib_jax.cli import main  # noqa: E402

#: provenance fields that differ between two runs of the same computation
_CLOCK = ("created_utc", "wall_time_s", "rows_per_s")


def _log(n: int = 6_000, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    q = rng.uniform(0.02, 0.35, n)
    y = (rng.uniform(size=n) < q).astype(np.int8)
    return {"p": np.clip(1.3 * q, 0.0, 1.0), "q": q, "y": y, "site": np.array(["a", "b", "c"])[np.arange(n) % 3],
            "day": np.repeat(["d1", "d2", "d3"], n // 3)}


@pytest.fixture(scope="module")
def log_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("logs") / "log.parquet"
    pq.write_table(pa.table(_log()), path)
    return path


def _without_clock(obj):
    if isinstance(obj, dict):
        return {k: _without_clock(v) for k, v in obj.items() if k not in _CLOCK}
    if isinstance(obj, list):
        return [_without_clock(v) for v in obj]
    return obj


def _same_outputs(saved: Path, command_out: Path, names) -> None:
    """Every file the command wrote is in the saved folder with the same content: JSON equal
    but for the clock, every other file byte for byte."""
    written = sorted(p.relative_to(command_out).as_posix() for p in command_out.rglob("*")
                     if p.is_file() and p.name != cio.OUTPUTS_LIST)  # the folder's list of what the run wrote
    assert sorted(names) == written
    for name in written:
        a, b = (saved / name).read_bytes(), (command_out / name).read_bytes()
        if name.endswith(".json"):
            assert _without_clock(json.loads(a)) == _without_clock(json.loads(b)), name
        elif name.endswith(".html"):  # the page prints the provenance's wall time
            continue
        else:
            assert a == b, name


def test_evaluate_returns_the_commands_report(log_file, tmp_path, capsys):
    args = dict(score="p", label="y", fields=["site"], bootstrap=30, seed=4)
    r = logs.evaluate(log_file, **args)
    assert capsys.readouterr().out == ""  # the library prints nothing
    out = tmp_path / "cmd"
    assert main(["evaluate", str(log_file), "--score", "p", "--label", "y", "--field", "site", "--bootstrap", "30",
                 "--seed", "4", "--out", str(out), "--quiet"]) == 0
    _same_outputs(r.save(tmp_path / "lib"), out, r.files)
    assert _without_clock(r.report) == _without_clock(json.loads((out / "report.json").read_text()))
    # the tables are the report's CSVs, as Arrow tables
    m = r.metrics
    assert m.column_names[:4] == ["metric", "value", "lo", "hi"]
    ece = m.filter(pa.compute.equal(m["metric"], "ece")).to_pylist()[0]
    assert ece["value"] == r.value("ece") and ece["lo"] <= ece["value"] <= ece["hi"]
    assert set(r.fields["level"].to_pylist()) == {"a", "b", "c"}
    assert r.tests.num_rows > 0 and r.decompositions.num_rows > 0
    assert len(r.metrics.to_pandas()) == m.num_rows
    assert "Calibration report" in r._repr_html_() and "ece" in repr(r)
    with pytest.raises(ValueError, match="metric: 'nope'"):
        r.value("nope")


def test_compare_returns_the_commands_comparison(log_file, tmp_path):
    c = logs.compare(log_file, scores=["p", "q"], label="y", fields=["site"], bootstrap=30, seed=1)
    out = tmp_path / "cmd"
    assert main(["compare", str(log_file), "--score", "p", "--score", "q", "--label", "y", "--field", "site",
                 "--bootstrap", "30", "--seed", "1", "--out", str(out), "--quiet"]) == 0
    _same_outputs(c.save(tmp_path / "lib"), out, c.files)
    assert {"fields.csv", "fields.md"} <= set(c.files)
    f = c.fields  # the rows of fields.csv, as an Arrow table
    assert f.column_names[:4] == ["field", "metric", "a", "b"] and f.num_rows == 4
    assert set(f["metric"].to_pylist()) == {"gce", "field_ece", "field_rce", "abs_bias"}
    assert len(f.to_pandas()) == 4
    d = c.differences
    ece = d.filter(pa.compute.equal(d["metric"], "ece")).to_pylist()[0]
    assert ece["a"] == "p" and ece["b"] == "q" and ece["lo"] <= ece["diff"] <= ece["hi"]
    assert np.isclose(ece["diff"], ece["value_a"] - ece["value_b"])
    assert set(c.reports) == {"p", "q"}
    assert c.result["metrics"]["q"]["ece"]["value"] == ece["value_b"]
    assert c.reports["q"].input["score"] == "q" and c.reports["q"].input["rows_used"] == 6_000
    assert c.metrics.num_rows == 2 * len(c.result["metrics"]["p"])
    # eleven models (two-digit folders): each report is its own model's, in the order given
    t11 = pa.table({**{f"m{i}": np.clip(_log()["q"] * (1 + i / 20), 0, 1) for i in range(11)}, "y": _log()["y"]})
    many = logs.compare(t11, scores=[f"m{i}" for i in range(11)], label="y", bootstrap=0)
    assert [r.input["score"] for r in many.reports.values()] == [f"m{i}" for i in range(11)]
    # the same models as logits: the same comparison, the log loss now exact from the logits
    t = _log()
    logit = {k: np.log(t[k]) - np.log1p(-t[k]) for k in ("p", "q")}
    c2 = logs.compare(pa.table({**logit, "y": t["y"]}), logits=["p", "q"], label="y", bootstrap=30, seed=1)
    assert c2.result["input"]["models_are"] == "logits"
    nll = c2.differences.filter(pa.compute.equal(c2.differences["metric"], "nll")).to_pylist()[0]
    assert nll["diff"] == pytest.approx(d.filter(pa.compute.equal(d["metric"], "nll")).to_pylist()[0]["diff"],
                                        rel=1e-6)
    assert all(v in c.to_html() for v in map(lambda s: s.replace("'", "&#x27;"), c.verdicts[:1]))


def test_slices_return_the_commands_table(log_file, tmp_path):
    s = logs.slices(log_file, by="day", score="p", label="y", bootstrap=20, baseline="d2")
    out = tmp_path / "cmd"
    assert main(["evaluate", str(log_file), "--by", "day", "--score", "p", "--label", "y", "--bootstrap", "20",
                 "--baseline", "d2", "--out", str(out), "--quiet"]) == 0
    _same_outputs(s.save(tmp_path / "lib"), out, s.files)
    t = s.table
    assert t["slice"].to_pylist() == ["d1", "d2", "d3"] and t["baseline"].to_pylist() == [False, True, False]
    assert t["rows"].to_pylist() == [2_000] * 3
    assert s.changes.num_rows > 0 and "drift" in s.to_html()
    # with fields: the long per-field file too, saved as the command writes it, and its Arrow table
    f = logs.slices(log_file, by="day", score="p", label="y", fields=["site"], bootstrap=20, engine="arrow")
    out = tmp_path / "cmd_fields"
    assert main(["evaluate", str(log_file), "--by", "day", "--score", "p", "--label", "y", "--field", "site",
                 "--bootstrap", "20", "--engine", "arrow", "--out", str(out), "--quiet"]) == 0
    assert "slices_fields.csv" in f.files
    _same_outputs(f.save(tmp_path / "lib_fields"), out, f.files)
    assert f.fields.num_rows == 3 * 4 and f.fields["field"].to_pylist() == ["site"] * 12
    assert s.fields.num_rows == 0 and "fields" not in f.table.column_names
    # the model as logits: the same slices, the log loss exact from the logits
    t = _log()
    logit = np.log(t["p"]) - np.log1p(-t["p"])
    s2 = logs.slices(pa.table({"o": logit, "y": t["y"], "day": t["day"]}), by="day", logit="o", label="y",
                     bootstrap=20, baseline="d2")
    assert s2.result["input"]["logit"] == "o"
    np.testing.assert_allclose(s2.table["ne"].to_numpy(), s.table["ne"].to_numpy(), rtol=1e-6)


def test_fit_returns_the_commands_parameters_and_predicts_as_apply_does(log_file, tmp_path):
    f = logs.fit(log_file, method="platt", score="p", label="y")
    saved = tmp_path / "cmd.json"
    assert main(["fit", str(log_file), "--method", "platt", "--score", "p", "--label", "y", "--save", str(saved)]) == 0
    cmd = json.loads(saved.read_text())
    assert _without_clock(json.loads(f.save(tmp_path / "lib.json").read_text())) == _without_clock(cmd)
    applied = tmp_path / "applied.parquet"
    assert main(["apply", str(tmp_path / "lib.json"), str(log_file), "--out", str(applied), "--quiet"]) == 0
    column = pq.read_table(applied)["calibrated"].to_numpy()
    np.testing.assert_array_equal(f.predict(_log()["p"]), column)
    # from the log's cells (one query), as `fit --engine duckdb`
    cells = logs.fit(log_file, method="temperature", score="p", label="y", engine="duckdb")
    assert cells.params["inputs"]["engine"] == "duckdb" and cells.method == "temperature"


def test_every_source_kind_gives_the_numbers_of_the_same_rows_in_a_file(log_file):
    pd = pytest.importorskip("pandas")
    duckdb = pytest.importorskip("duckdb")
    reference = logs.evaluate(log_file, score="p", label="y", bootstrap=10).metrics
    table = pa.table(_log())
    sources = {"<pyarrow.Table>": table, "<pandas.DataFrame>": pd.DataFrame(_log())}
    try:
        import polars as pl

        sources["<polars.DataFrame>"] = pl.from_arrow(table)
    except ImportError:
        pass
    con = duckdb.connect()
    sources["<duckdb.DuckDBPyRelation>"] = con.sql(f"SELECT * FROM read_parquet('{log_file}')")
    for label, source in sources.items():
        r = logs.evaluate(source, score="p", label="y", bootstrap=10)
        assert r.input["path"] == label, label
        assert r.metrics.select(["metric", "value", "lo", "hi"]).equals(
            reference.select(["metric", "value", "lo", "hi"])), label
    # the streamed reader on an in-memory table: the same cells
    streamed = logs.evaluate(table, score="p", label="y", bootstrap=0, engine="arrow")
    # (the same sums in another order: equal to float64 rounding)
    assert streamed.value("ece") == pytest.approx(logs.evaluate(log_file, score="p", label="y", bootstrap=0)
                                                  .value("ece"), rel=1e-12)


def test_the_streamed_reader_gives_the_duckdb_engines_comparison_slices_and_fits(log_file):
    """``engine="arrow"`` (the streamed reader) against the default DuckDB query, from Python:
    the same cells, so the same numbers to float64 rounding (the sums are added in another
    order)."""
    c, c0 = (logs.compare(log_file, scores=["p", "q"], label="y", bootstrap=10, engine=e) for e in ("arrow", None))
    for column in ("diff", "lo", "hi"):
        np.testing.assert_allclose(c.differences[column].to_numpy(zero_copy_only=False),
                                   c0.differences[column].to_numpy(zero_copy_only=False), rtol=1e-9, atol=1e-12)
    s, s0 = (logs.slices(log_file, by="day", score="p", label="y", bootstrap=10, engine=e) for e in ("arrow", None))
    np.testing.assert_allclose(s.table["ne"].to_numpy(), s0.table["ne"].to_numpy(), rtol=1e-9)
    f, f0 = (logs.fit(log_file, method="temperature", score="p", label="y", engine=e) for e in ("arrow", "duckdb"))
    np.testing.assert_allclose(f.predict([0.05, 0.2]), f0.predict([0.05, 0.2]), rtol=1e-6)



def test_save_refuses_the_source_s_folder_and_a_folder_another_run_writes(tmp_path):
    """``.save(folder)`` as the command's --out: not where the source's folder or pattern would
    read the tables as rows (a source in memory has no folder), and not into a folder or file
    another run is writing; nothing is written in either case."""
    from calib_jax.io import exclusive_target

    lake = tmp_path / "lake"
    lake.mkdir()
    pcsv.write_csv(pa.table(_log(1_200)), lake / "part.csv")
    folder = logs.compare(lake, scores=["p", "q"], label="y", bootstrap=10)
    with pytest.raises(ValueError, match="would read this output as part of the log"):
        folder.save(lake / "sub")  # the folder is read whole, sub-folders too
    with pytest.raises(ValueError, match="would read this output as part of the log"):
        folder.reports["p"].save(lake / "sub")
    pattern = logs.slices(f"{lake}/*.csv", by="day", score="p", label="y", bootstrap=10)
    assert pattern.save(lake / "sub") == lake / "sub"  # '*' does not reach into sub/
    with pytest.raises(ValueError, match="would read this output as part of the log"):
        pattern.save(lake)
    assert sorted(p.name for p in lake.iterdir()) == ["part.csv", "sub"]
    memory = logs.evaluate(pa.table(_log(1_200)), score="p", label="y", bootstrap=10)
    assert memory.save(lake / "from_memory") == lake / "from_memory"
    with exclusive_target(str(tmp_path / "busy"), "--out"):
        with pytest.raises(ValueError, match="another calib-jax run is writing there now"):
            memory.save(tmp_path / "busy")
    assert not (tmp_path / "busy").exists()
    f = logs.fit(pa.table(_log(1_200)), method="platt", score="p", label="y")
    with exclusive_target(str(tmp_path / "f.json"), "--save"):
        with pytest.raises(ValueError, match="another calib-jax run is writing there now"):
            f.save(tmp_path / "f.json")
    assert f.save(tmp_path / "f.json").is_file()


@pytest.mark.filterwarnings("ignore::calib_jax.calibrators.CalibrationFallbackWarning")
def test_a_saved_fit_loads_back_and_a_record_built_by_hand_is_checked(log_file, tmp_path):
    """``Fit.load`` reads what ``save`` and ``calib-jax fit --save`` write (the command's file
    predicts as ``apply`` does), and a record given by hand is checked as ``apply`` checks a file:
    before, ``Fit({"method": "platt"})`` was accepted and ``predict`` failed with a KeyError."""
    f = logs.fit(log_file, method="sag_ps", score="p", label="y", fields=["site"], steps=5)
    path = f.save(tmp_path / "sag.json")
    back = logs.Fit.load(path)
    x, frame = _log()["p"], pq.read_table(log_file)
    np.testing.assert_array_equal(back.predict(x, frame), f.predict(x, frame))
    assert back.params == json.loads(path.read_text())
    with pytest.raises(ValueError, match="this input would be overwritten"):
        back.save(path)
    cmd = tmp_path / "cmd.json"
    assert main(["fit", str(log_file), "--method", "platt", "--score", "p", "--label", "y", "--save", str(cmd)]) == 0
    applied = tmp_path / "applied.parquet"
    assert main(["apply", str(cmd), str(log_file), "--out", str(applied), "--quiet"]) == 0
    np.testing.assert_array_equal(logs.Fit.load(cmd).predict(x), pq.read_table(applied)["calibrated"].to_numpy())
    with pytest.raises(ValueError, match=r"Fit.params: not a calib-jax parameter file"):
        logs.Fit({"method": "platt"})
    broken = json.loads(cmd.read_text())
    broken["method"] = "no_such_method"
    with pytest.raises(ValueError, match="Fit.params: invalid calib-jax parameter file: unknown method"):
        logs.Fit(broken)
    with pytest.raises(FileNotFoundError, match="not-there.json: no such parameter file"):
        logs.Fit.load(tmp_path / "not-there.json")
    (tmp_path / "text.json").write_text("hello")
    with pytest.raises(ValueError, match="text.json: not a calib-jax parameter file"):
        logs.Fit.load(tmp_path / "text.json")


def test_fit_predict_checks_its_inputs_as_apply_does(log_file, tmp_path):
    """``Fit.predict`` refuses what ``apply`` refuses in a log, naming ``x`` or ``table``: before
    2026-12-06 a score of 2 came back as the probability 1, and a SAG fit without its table, or
    with a DataFrame, raised ``AttributeError``. With a DataFrame it predicts ``apply``'s column."""
    import pandas as pd

    platt = logs.fit(log_file, method="platt", score="p", label="y")
    for x, needle in (([0.2, 2.0], "x: 1 value missing, NaN or outside [0, 1] (first at index 1)"),
                      ([np.nan], "x: 1 value missing"), ([[0.1, 0.2]], "x: a non-empty 1-D array"),
                      ([], "x: a non-empty 1-D array"), (["a"], "x: scores as numbers")):
        with pytest.raises(ValueError, match=re.escape(needle)):
            platt.predict(x)
    t = _log(600)
    frame = pd.DataFrame({**t, "f": np.arange(600) % 5 * 0.5})
    vr = logs.fit(frame, method="vrsag_ps", score="p", label="y", fields="site", features="f", steps=5)
    applied = tmp_path / "vr.csv"
    frame.to_csv(tmp_path / "log.csv", index=False)
    assert main(["apply", str(vr.save(tmp_path / "vr.json")), str(tmp_path / "log.csv"), "--out", str(applied),
                 "--quiet"]) == 0
    np.testing.assert_allclose(vr.predict(t["p"], frame), pd.read_csv(applied)["calibrated"], rtol=1e-6)
    np.testing.assert_array_equal(vr.predict(t["p"], frame), vr.predict(t["p"], pa.Table.from_pandas(frame)))
    for table, needle in ((None, "table: vrsag_ps reads the columns 'site', 'f'"), (frame.head(5), "table: 5 rows for"),
                          (frame.drop(columns="f"), "table: no column 'f'"),
                          (frame.assign(f=np.where(np.arange(600) == 7, np.inf, frame["f"])),
                           "table: column 'f': 1 row missing or not finite (first at row 7)"),
                          # Python's float() reads "1_0" as 10: the feature is read as apply reads it
                          (frame.assign(f=np.where(np.arange(600) == 3, "1_0", frame["f"].astype(str))),
                           "table: column 'f' cannot be read as numbers: '1_0' (data row 4)")):
        with pytest.raises(ValueError, match=re.escape(needle)):
            vr.predict(t["p"], table)
    as_text = frame.assign(f=[f" {v} " for v in frame["f"]])  # numbers as text, spaces dropped as apply drops them
    np.testing.assert_array_equal(vr.predict(t["p"], as_text), vr.predict(t["p"], frame))

def test_a_parameter_file_written_before_the_level_text_is_applied_as_it_was(tmp_path):
    """A field of floats was written ``1`` by the arrow reader before 2026-12-06 and ``1.0``
    since (every engine's text). A parameter file without ``inputs.level_text`` holds the old
    text in its vocabularies: ``apply`` and ``Fit.predict`` read its fields the old way and
    predict as the new file does, rather than sending every row to ``__other__``."""
    import json

    import pandas as pd

    t = _log(600)
    frame = pd.DataFrame({**t, "g": (np.arange(600) % 4).astype(float) + 1.0})
    fit = logs.fit(frame, method="vrsag_ps", score="p", label="y", fields="g", steps=5)
    new = json.loads(fit.save(tmp_path / "new.json").read_text())
    assert new["inputs"]["level_text"] == 2 and new["inputs"]["vocabularies"]["g"][:4] == ["1.0", "2.0", "3.0", "4.0"]
    old = json.loads(json.dumps(new))
    del old["inputs"]["level_text"]
    old["inputs"]["vocabularies"]["g"] = [v.removesuffix(".0") for v in new["inputs"]["vocabularies"]["g"]]
    (tmp_path / "old.json").write_text(json.dumps(old))
    log = tmp_path / "log.parquet"  # the field as floats (a CSV file's field is its text, as written)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), log)
    out = {}
    for name in ("new", "old"):
        assert main(["apply", str(tmp_path / f"{name}.json"), str(log), "--out", str(tmp_path / f"{name}.csv"),
                     "--quiet"]) == 0
        out[name] = pd.read_csv(tmp_path / f"{name}.csv")["calibrated"].to_numpy()
    np.testing.assert_array_equal(out["old"], out["new"])
    np.testing.assert_array_equal(fit.predict(t["p"], frame), out["new"])
    np.testing.assert_array_equal(logs.Fit(old).predict(t["p"], frame), out["new"])
    wrong = json.loads(json.dumps(old))  # the old text read the new way: every row __other__, and said so
    wrong["inputs"]["level_text"] = 2
    with pytest.warns(logs.UnseenInputsWarning, match=r"field 'g': 600 of 600 rows \(100.0%\).*'1.0' \(150 rows\) "
                                                       r"is the kept level '1' written another way"):
        assert not np.array_equal(logs.Fit(wrong).predict(t["p"], frame), out["new"])
    bad = dict(old, inputs={**old["inputs"], "level_text": 3})
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    assert main(["apply", str(tmp_path / "bad.json"), str(log), "--out", str(tmp_path / "bad.csv"), "--quiet"]) == 2


@pytest.mark.parametrize("call, needle", [
    (lambda f: logs.evaluate(f, score="p", label="y", bootstrap=1), "bootstrap must be 0"),
    (lambda f: logs.evaluate(f, score="p", label="y", bootstrap="10"), "bootstrap: an integer"),
    (lambda f: logs.evaluate(f, score="p", label="y", seed=2**64), "seed 18446744073709551616: outside"),
    (lambda f: logs.evaluate(f, score="p", label="y", bins=0), "bins must be >= 1"),
    (lambda f: logs.evaluate(f, score="p", label="y", fields=[3]), "fields: a column name"),
    (lambda f: logs.evaluate(f, score="p", label="nope"), "nope"),
    (lambda f: logs.evaluate(f, score=["p"], label="y"), "score: a column name"),
    (lambda f: logs.evaluate(f, score="p", label="y", drop_invalid="yes"), "drop_invalid: True or False"),
    (lambda f: logs.evaluate(42, score="p", label="y"), "source: a path"),
    (lambda f: logs.evaluate(__import__("pandas").DataFrame({"p": [0.1, object()], "y": [0, 1]}), score="p",
                             label="y"), "source: the pandas.DataFrame cannot be read as an Arrow table"),
    (lambda f: logs.evaluate(pa.table(_log()), score="p", label="y", engine="spark"), "engine:"),
    (lambda f: logs.compare(f, scores=["p"], label="y"), "scores: give two or more"),
    (lambda f: logs.compare(f, scores=["p", "p"], label="y"), "scores: a column is named twice"),
    (lambda f: logs.compare(f, scores=["p"], logits=["q"], label="y"), "scores and logits: give every model"),
    (lambda f: logs.slices(f, by="day", score="p", label="y", alpha=2.0), "alpha must lie in"),
    (lambda f: logs.slices(f, by="day", score="p", label="y", baseline="d9"), "baseline 'd9'"),
    (lambda f: logs.fit(f, method="nope", score="p", label="y"), "method: 'nope' is not a calibrator"),
    (lambda f: logs.fit(f, method="sag_ts", score="p", label="y", engine="duckdb"), "method sag_ts needs the rows"),
    (lambda f: logs.fit(f, method="platt", score="p", label="y", steps=2.5), "steps: an integer"),
    # bounds checked before the log is read (before 2026-12-06: an OverflowError, or a fit saved)
    (lambda f: logs.fit(f, method="vrsag_ts", score="p", label="y", steps=10**11), "steps must lie in [1, 2**31"),
    (lambda f: logs.fit(f, method="vrsag_ts", score="p", label="y", partitions=0), "partitions must lie in [1,"),
    (lambda f: logs.fit(f, method="platt", score="p", label="y", max_levels=0), "max_levels must lie in [1,"),
    (lambda f: logs.fit(f, method="platt", score="p", label="y", engine="arrow", hist_bins=10**11),
     "hist_bins must lie in [16, 65536]"),
    (lambda f: logs.evaluate(f, score="p", label="y", hist_bins=10**11), "hist_bins must lie in [16, 65536]"),
    (lambda f: logs.fit(pa.table({"p": [0.1, 0.2, 0.3], "y": [0, 0, 0]}), method="isotonic", score="p", label="y"),
     "column 'y' holds no click (1) among the 3 valid rows"),
    # the second fuzz of the library (2026-12-06): each of these ran, or failed in other words, before
    (lambda f: logs.evaluate(f, score="p", label="y", engine="spark2"), "engine: one of"),  # ran Spark
    (lambda f: logs.compare(f, scores=["p", "q"], label="y", engine="DuckDB"), "engine: one of"),
    (lambda f: logs.evaluate(f, score="p", label="y", gauc_weight="bogus"), "gauc_weight must be one of"),
    (lambda f: logs.slices(f, by="day", score="p", label="y", gauc_weight="bogus"), "gauc_weight must be one of"),
    (lambda f: logs.evaluate(f, score="p", label="y", bins=2**31), "bins must lie in [1, 65536]"),  # MemoryError
    (lambda f: logs.slices(f, by="day", score="p", label="y", bins=10**7), "bins must lie in [1, 65536]"),
    # each within its range, together 32 GiB of cells (2026-12-07: a MemoryError on DuckDB, 24 GB and
    # killed on arrow, for a 300-row log); the rows bootstrap's tables grow with the replicates
    (lambda f: logs.evaluate(f, score="p", label="y", bins=65536), "bins 65536 with hist_bins 4096 needs"),
    (lambda f: logs.evaluate(f, score="p", label="y", bins=32768, engine="arrow"), "lower bins or hist_bins"),
    (lambda f: logs.evaluate(f, score="p", label="y", bins=4096, hist_bins=65536, bootstrap=10**5,
                             bootstrap_scheme="rows"), "and bootstrap 100000 needs"),
    (lambda f: logs.evaluate(f, score="p", label="y", bootstrap=10**7), "bootstrap must lie in [0, 100000]"),
    (lambda f: logs.compare(f, scores=["p", "q"], label="y", bootstrap=2**40), "bootstrap must lie in [0, 100000]"),
    (lambda f: logs.compare(f, scores=["p", "q"], label="y", bootstrap=1), "bootstrap must be 0"),
    (lambda f: logs.fit(f, method="sag_ts", score="p", label="y", features=["p"]),  # an Arrow KeyError
     "features must name another column than score (both name 'p')"),
    (lambda f: logs.fit(f, method="sag_ts", score="p", label="y", fields=["y"]),  # grouped by the click
     "fields must name another column than label (both name 'y')"),
    (lambda f: logs.fit(f, method="sag_ts", score="p", label="y", features=["q", "q"]), "features: a column is named"),
])
def test_bad_arguments_raise_a_value_error_naming_the_argument(log_file, call, needle):
    with pytest.raises(ValueError, match=None) as e:
        call(log_file)
    assert needle in str(e.value)
    assert "--" not in str(e.value)  # the library's argument names, not the command's flags


def test_no_call_changes_its_source_and_save_never_overwrites_it(tmp_path):
    log = tmp_path / "metrics.csv"  # named as one of the report's files
    t = _log(900)
    log.write_text("p,y\n" + "".join(f"{float(p)!r},{y}\n" for p, y in zip(t["p"], t["y"], strict=True)))
    before = (log.read_bytes(), log.stat().st_mtime_ns)
    r = logs.evaluate(log, score="p", label="y", bootstrap=0)
    with pytest.raises(ValueError, match="metrics.csv"):
        r.save(tmp_path)
    assert (log.read_bytes(), log.stat().st_mtime_ns) == before
    table = pa.table(_log(900))
    logs.evaluate(table, score="p", label="y", bootstrap=0)
    assert table.equals(pa.table(_log(900)))


def test_save_checks_every_target_before_writing_and_a_path_must_name_one(tmp_path):
    r = logs.evaluate(pa.table(_log(600)), score="p", label="y", bootstrap=0)
    for folder in ("", None, 3):  # "" wrote the report into the working folder; None was a TypeError
        with pytest.raises(ValueError, match="folder: a path to write to"):
            r.save(folder)
    blocked = tmp_path / "blocked"
    (blocked / "report.json").mkdir(parents=True)  # a folder where a file goes
    with pytest.raises(ValueError, match="report.json is a folder where the result writes a file; nothing was"):
        r.save(blocked)
    assert sorted(p.name for p in blocked.iterdir()) == ["report.json"]  # six files were written before the error
    c = logs.compare(pa.table(_log(600)), scores=["p", "q"], label="y", bootstrap=0)
    (tmp_path / "cmp").mkdir()
    (tmp_path / "cmp" / "models").write_text("mine")  # a file where a folder goes
    with pytest.raises(ValueError, match="models is a file where the result writes a folder"):
        c.save(tmp_path / "cmp")
    assert sorted(p.name for p in (tmp_path / "cmp").iterdir()) == ["models"]
    f = logs.fit(pa.table(_log(600)), method="platt", score="p", label="y")
    for bad in ("", None):
        with pytest.raises(ValueError, match="path: a p"):
            f.save(bad)
        with pytest.raises(ValueError, match="path: a parameter file"):
            logs.Fit.load(bad)
    with pytest.raises(ValueError, match="is a folder, not a parameter file"):  # a FileNotFoundError before
        logs.Fit.load(tmp_path)


def test_numpy_numbers_are_taken_as_the_numbers_they_hold():
    t = pa.table(_log(600))
    a = logs.evaluate(t, score="p", label="y", bootstrap=np.int64(20), bins=np.int64(15), seed=np.uint32(3),
                      negative_rate=np.float32(0.5))  # bins: a JSON TypeError; the float32 rate: refused
    b = logs.evaluate(t, score="p", label="y", bootstrap=20, bins=15, seed=3, negative_rate=0.5)
    assert a.metrics.equals(b.metrics)
    assert a.input["engine"] == b.input["engine"]


def test_the_engines_warnings_name_the_source_and_the_arguments_as_its_errors_do():
    t = pa.table({"p": np.full(300, 0.2), "y": np.arange(300) % 2, "d": np.array(["1", "1.0"])[np.arange(300) % 2]})
    with pytest.warns(logs.RespelledLevelsWarning) as caught:
        logs.slices(t, by="d", score="p", label="y", bootstrap=0)
    message = str(caught[0].message)
    assert message.startswith("<pyarrow.Table>: by 'd': the levels '1' and '1.0'"), message
    assert "calib-jax-logs-" not in message and "--" not in message  # the temporary copy and the command's flag


@pytest.mark.parametrize("engine", ["duckdb", "arrow"])
def test_every_engine_names_the_column_of_an_invalid_value(engine):
    rng = np.random.default_rng(0)
    p = rng.uniform(0.01, 0.9, 300)
    y = (rng.uniform(size=300) < p).astype(int)
    b = 1 - p
    b[3] = 1.2
    with pytest.raises(ValueError, match="column 'b'") as e:  # DuckDB said "score: ... (some model)"
        logs.compare(pa.table({"a": p, "b": b, "y": y}), scores=["a", "b"], label="y", bootstrap=0, engine=engine)
    assert "'a'" not in str(e.value)
    w = np.where(np.arange(300) == 1, -1.0, 1.0)
    with pytest.raises(ValueError, match="column 'w'"):
        logs.compare(pa.table({"a": p, "b": 1 - p, "y": y, "w": w}), scores=["a", "b"], label="y", weight="w",
                     bootstrap=0, engine=engine)
    day = np.array(["a", "b"])[np.arange(300) % 2]
    with pytest.raises(ValueError, match="column 'b'"):
        logs.slices(pa.table({"b": b, "y": y, "day": day}), by="day", score="b", label="y", bootstrap=0, engine=engine)
    with pytest.raises(ValueError, match="column 'y'"):
        logs.slices(pa.table({"p": p, "y": np.where(np.arange(300) == 5, 2, y), "day": day}), by="day", score="p",
                    label="y", bootstrap=0, engine=engine)


def test_the_recalibrations_refuse_what_is_not_a_probability():
    for call, name in ((lambda: logs.recalibrate_probability(1.5, 0.1), "p"),  # -0.43 before
                       (lambda: logs.kept_probability(-0.5, 0.5), "q"),  # -2.0
                       (lambda: logs.recalibrate_probability(np.array([0.3, 2.0]), 0.5), "p"),  # [0.176, inf]
                       (lambda: logs.recalibrate_probability(float("nan"), 0.5), "p"),
                       (lambda: logs.recalibrate_logit(np.array([0.0, np.nan]), 0.5), "z")):
        with pytest.raises(ValueError, match=f"^{name}: 1 value"):
            call()
    q = logs.recalibrate_probability([0.5, 0.0, 1.0], 0.1)  # a list was a TypeError
    np.testing.assert_allclose(q, [0.5 / (0.5 + 0.5 / 0.1), 0.0, 1.0])
    np.testing.assert_allclose(logs.kept_probability(q, 0.1), [0.5, 0.0, 1.0])
    assert logs.recalibrate_probability(0.5, np.float32(0.1)) == pytest.approx(1 / 11)


def test_a_report_from_python_loads_no_jax():
    """The report path from an engine's statistics is NumPy (``calib_jax.logs.cellstats``):
    ``from calib_jax import logs`` and a DuckDB report start without JAX, as the command does."""
    import subprocess
    import sys

    code = ("import sys, numpy as np, pyarrow as pa; from calib_jax import logs; a = 'jax' in sys.modules; "
            "p = np.linspace(0.05, 0.5, 1000); "
            "r = logs.evaluate(pa.table({'p': p, 'y': (np.arange(1000) % 4 == 0).astype(int)}), score='p', "
            "label='y', bootstrap=10); print(a, 'jax' in sys.modules, r.input['rows_used'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "1000"]



def test_an_in_memory_source_is_named_by_its_kind_in_every_file(monkeypatch):
    """The temporary Parquet file an in-memory table is read from is named nowhere in the
    results: each text file names the source by its kind, however the file format escapes the
    temporary path (here one with underscores, which Markdown escapes)."""
    import tempfile

    real = tempfile.TemporaryDirectory
    monkeypatch.setattr(tempfile, "TemporaryDirectory", lambda prefix: real(prefix="calib_jax_under_score_"))
    table = pa.table(_log(3_000))
    results = [logs.evaluate(table, score="p", label="y", bootstrap=5),
               logs.compare(table, scores=["p", "q"], label="y", bootstrap=5),
               logs.slices(table, by="day", score="p", label="y", bootstrap=5)]
    for r in results:
        assert not [name for name, data in r.files.items() if b"under" in data], type(r).__name__
    assert b"pyarrow.Table" in results[0].files["report.md"] + results[0].files["report.json"]
    assert logs.fit(table, method="platt", score="p", label="y").params["inputs"]["source"] == "<pyarrow.Table>"


def test_predict_and_recalibrate_refuse_what_they_cannot_read_naming_the_argument():
    """Found by the hostile-input probe of 2026-12-07, each raised a library's own error: Arrow's
    "Unsupported cast from list<item: int64> to utf8" for a nested field column, pyarrow's
    "Duplicate column names found" for a DataFrame naming a column twice, a TypeError from
    ``recalibrate_probability("0.5", 0.1)`` (the text passed the check, then failed in the
    arithmetic); raw bytes were taken as a field's levels, although apply refuses them."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    n = 300
    p = rng.uniform(0.05, 0.5, n)
    t = pa.table({"p": p, "y": (rng.random(n) < p).astype(np.int8), "site": rng.choice(["a", "b"], n)})
    f = logs.fit(t, method="sag_ts", score="p", label="y", fields=["site"], steps=3, partitions=2)
    for table, needle in ((pd.DataFrame({"site": [[1], [2]]}), "table: column 'site' holds a nested type"),
                          (pa.table({"site": pa.array([{"a": 1}, {"a": 2}])}), "holds a nested type (struct"),
                          (pa.table({"site": pa.array([b"a", b"b"])}), "table: column 'site' holds raw bytes"),
                          (pd.DataFrame([["a", "b"]], columns=["site", "site"]).iloc[[0, 0]],
                           "table: the pandas.DataFrame cannot be read as an Arrow table")):
        with pytest.raises(ValueError) as e:
            f.predict([0.1, 0.2], table)
        assert str(e.value).startswith("table: ") and needle in str(e.value), str(e.value)
        assert "--" not in str(e.value)
    for bad in ("0.5", b"0.5", pd.Series(["0.1"]), np.array(["0.1"])):
        with pytest.raises(ValueError, match=r"^p: numbers \(a float or an array\), got"):
            logs.recalibrate_probability(bad, 0.1)
    with pytest.raises(ValueError, match=r"^z: numbers"):
        logs.recalibrate_logit("1", 0.1)
    np.testing.assert_allclose(logs.recalibrate_probability(pd.Series([0.1]), 0.1), [0.1 / (0.1 + 0.9 / 0.1)])
