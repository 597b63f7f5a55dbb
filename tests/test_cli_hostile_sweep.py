"""A second property-based sweep of the ``calib-jax`` contract, over the classes of input a
hostile or careless user brings to the engines (the first sweep, ``test_cli_hostile.py``,
covers damaged files, model files and degenerate logs).

Generated cases, each run through the command in-process:

* **names and lakes** — file names holding glob and shell characters (``[ ] * ? ~ $``,
  spaces) beside decoy files such a name would match as a pattern; lakes of CSV or Parquet
  files whose columns come in different orders; ``key=value`` folders below the lake (one of
  them named like a real column) and above it. The default engine (DuckDB) must report
  exactly what the streamed reader reports on the same rows written to one plainly named file.
* **extreme weights** — weights from 1e-300 to 1e300, constant or spread over many decades:
  the engines agree, and either the report is complete, valid JSON with every value and
  interval inside its metric's range, or the run stops with one line naming the weight column.
* **forged aggregates** — the exported result of ``calib-jax sql`` with one cell changed
  (negative, beyond its count, huge, NaN): refused naming the file, or a report that keeps
  every value in its range.

``CALIB_JAX_SWEEP_EXAMPLES`` sets the cases per property (a few in the unit suite; 200 for a
thorough run, worth doing whenever ``calib_jax.cli`` changes).
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")
duckdb = pytest.importorskip("duckdb")
import pyarrow.csv as pcsv  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from calib_jax.cli import main  # noqa: E402

EXAMPLES = int(os.environ.get("CALIB_JAX_SWEEP_EXAMPLES", "5"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

#: the range of every metric the report gives (independent of the package's own table):
#: probabilities' errors lie in [0, 1]; the log-loss, NE and the calibration ratio are >= 0;
#: the bias (ratio - 1) is >= -1
RANGES = {"ece": (0.0, 1.0), "ece_plus": (0.0, 1.0), "mce": (0.0, 1.0), "lcce": (0.0, 1.0), "brier": (0.0, 1.0),
          "nll": (0.0, math.inf), "ne": (0.0, math.inf), "calibration_ratio": (0.0, math.inf), "auc": (0.0, 1.0),
          "bias": (-1.0, math.inf)}


# ------------------------------------------------------------------------------ helpers
def _rows(n: int, seed: int, weights: np.ndarray | None = None) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.02, 0.7, n)
    y = (rng.uniform(size=n) < p).astype(np.int64)
    site = np.array([f"s{k}" for k in rng.integers(0, 3, n)], dtype=object)
    w = rng.uniform(0.5, 2.0, n) if weights is None else np.asarray(weights, np.float64)
    return {"p": p, "y": y, "site": site, "w": w}


def _write(rows: dict[str, np.ndarray], path: Path, order: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    t = pa.table({c: pa.array(rows[c], pa.string()) if c == "site" else rows[c] for c in order})
    if path.suffix == ".parquet":
        pq.write_table(t, path)
    else:
        pcsv.write_csv(t, path)
    return path


def _concat(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {k: np.concatenate([d[k] for d in parts]) for k in parts[0]}


def _strict_json(path: Path) -> dict:
    def no_constant(token):
        raise AssertionError(f"{path} holds {token}: not JSON")

    return json.loads(path.read_text(), parse_constant=no_constant)


def _check_report(out: Path) -> dict:
    """A complete report: strict JSON, no NaN/inf in any CSV, every metric value and interval
    inside its range and every interval around its value, reliability bands inside [0, 1]."""
    rep = _strict_json(out / "report.json")
    for f in out.glob("*.csv"):
        with open(f, newline="") as fh:
            for row in csv.reader(fh):
                bad = [c for c in row if c.strip().lower() in ("nan", "inf", "-inf", "infinity", "-infinity")]
                assert not bad, (f.name, row)
    for m in rep["metrics"]:
        lo_r, hi_r = RANGES.get(m["name"], (-math.inf, math.inf))
        v, lo, hi = m.get("value"), m.get("lo"), m.get("hi")
        for x in (v, lo, hi):
            assert x is None or lo_r - 1e-12 <= x <= hi_r + 1e-12, (m["name"], v, lo, hi)
        if None not in (v, lo, hi):
            assert lo - 1e-12 <= v <= hi + 1e-12, (m["name"], v, lo, hi)
    for b in rep["reliability"]:
        for k in ("ctr_lo", "ctr_hi", "ctr"):
            assert b.get(k) is None or -1e-12 <= b[k] <= 1 + 1e-12, b
        if b.get("ctr_lo") is not None and b.get("ctr") is not None:
            assert b["ctr_lo"] - 1e-12 <= b["ctr"] <= b["ctr_hi"] + 1e-12, b
    return rep


def _metrics(rep: dict) -> dict[str, float | None]:
    return {m["name"]: m["value"] for m in rep["metrics"]}


def _evaluate(capsys, log: Path | str, out: Path, *extra: str) -> tuple[int, str]:
    rc = main(["evaluate", str(log), "--score", "p", "--label", "y", "--field", "site", "--out", str(out),
               "--quiet", *extra])
    return rc, capsys.readouterr().err


def _assert_same_metrics(a: dict, b: dict, what: str) -> None:
    ma, mb = _metrics(a), _metrics(b)
    assert ma.keys() == mb.keys(), what
    for k in ma:
        if ma[k] is None or mb[k] is None:
            assert ma[k] is None and mb[k] is None, (what, k, ma[k], mb[k])
        else:
            assert mb[k] == pytest.approx(ma[k], rel=1e-9, abs=1e-12), (what, k, ma[k], mb[k])
    assert a["input"]["rows_read"] == b["input"]["rows_read"], what


# ------------------------------------------------------------------------------ names and lakes
_NAME_CHARS = "ab[]*?~$ -_{}"


@st.composite
def _named_logs(draw):
    stem = draw(st.text(alphabet=_NAME_CHARS, min_size=1, max_size=8).filter(
        lambda s: not s.startswith(("-", " ", "~")) and s.strip()))
    return {"stem": stem, "fmt": draw(st.sampled_from(["csv", "parquet"])), "seed": draw(st.integers(0, 10**6)),
            "n": draw(st.integers(40, 200))}


@SETTINGS
@given(d=_named_logs())
def test_property_a_literal_file_name_is_read_as_that_file_only(tmp_path_factory, capsys, d):
    """A file whose name holds pattern characters, beside decoys that the name would match as a
    pattern: the default engine reads that file and no other (its report equals the streamed
    reader's on the same file); a missing literal name that is not a pattern is refused."""
    folder = tmp_path_factory.mktemp("names")
    ext = "." + d["fmt"]
    rows = _rows(d["n"], d["seed"])
    log = _write(rows, folder / (d["stem"] + ext), ["p", "y", "site", "w"])
    for k, decoy in enumerate(("a", "b", "ab", "aa", "[ab]", "x")):  # what [ab], a*, ?b ... would match
        if folder / (decoy + ext) != log:
            _write(_rows(50, 1000 + k), folder / (decoy + ext), ["p", "y", "site", "w"])
    plain = _write(rows, tmp_path_factory.mktemp("plain") / ("log" + ext), ["p", "y", "site", "w"])
    rc_ref, err_ref = _evaluate(capsys, plain, folder.parent / (folder.name + "-ref"), "--engine", "arrow",
                                "--bootstrap", "0")
    assert rc_ref == 0, err_ref
    ref = _check_report(folder.parent / (folder.name + "-ref"))
    for engine in ("duckdb", "arrow"):
        out = folder.parent / f"{folder.name}-{engine}"
        rc, err = _evaluate(capsys, log, out, "--engine", engine, "--bootstrap", "0")
        assert rc == 0, (engine, err)
        _assert_same_metrics(ref, _check_report(out), f"{engine} on {log.name!r}")


@st.composite
def _lakes(draw):
    n_files = draw(st.integers(1, 4))
    return {"fmt": draw(st.sampled_from(["csv", "parquet"])),
            "orders": [draw(st.permutations(["p", "y", "site", "w"])) for _ in range(n_files)],
            "sizes": [draw(st.integers(20, 120)) for _ in range(n_files)],
            "hive_inside": draw(st.sampled_from([None, "p=0.99", "site=zz", "day=3"])),
            "hive_above": draw(st.booleans()), "seed": draw(st.integers(0, 10**6))}


@SETTINGS
@given(d=_lakes())
def test_property_a_lake_is_read_by_column_name_and_its_folders_are_not_data(tmp_path_factory, capsys, d):
    """A folder of files listing the same columns in different orders, some under a
    ``key=value`` folder named like a real column, the whole lake under a ``k=v`` folder:
    without hive partitioning asked for, the report equals the streamed reader's on the rows
    concatenated into one file (columns bound by name, no folder turned into a value)."""
    root = tmp_path_factory.mktemp("lake")
    lake = root / "region=eu" / "lake" if d["hive_above"] else root / "lake"
    ext = "." + d["fmt"]
    parts = []
    for i, (order, n) in enumerate(zip(d["orders"], d["sizes"])):
        rows = _rows(n, d["seed"] + i)
        parts.append(rows)
        sub = lake / d["hive_inside"] if d["hive_inside"] and i % 2 else lake
        _write(rows, sub / f"part-{i}{ext}", list(order))
    plain = _write(_concat(parts), root / "all" / f"log{ext}", ["p", "y", "site", "w"])
    rc, err = _evaluate(capsys, plain, root / "ref", "--engine", "arrow", "--bootstrap", "0")
    assert rc == 0, err
    ref = _check_report(root / "ref")
    rc, err = _evaluate(capsys, lake, root / "out", "--bootstrap", "0")
    assert rc == 0, err
    _assert_same_metrics(ref, _check_report(root / "out"), f"lake {d}")
    levels = sorted(r["value"] for r in _strict_json(root / "out" / "report.json")["fields"]["site"]["levels"])
    assert levels == ["s0", "s1", "s2"][: len(levels)] and "zz" not in levels


# ------------------------------------------------------------------------------ extreme weights
@st.composite
def _weights(draw):
    n = draw(st.integers(30, 150))
    lo = draw(st.integers(-300, 300))
    spread = draw(st.integers(0, 40))
    return {"n": n, "lo": lo, "spread": spread, "seed": draw(st.integers(0, 10**6)),
            "fmt": draw(st.sampled_from(["csv", "parquet"]))}


@SETTINGS
@given(d=_weights())
def test_property_extreme_weights_give_a_valid_report_or_one_line_naming_the_column(tmp_path_factory, capsys, d):
    """Weights 10^lo .. 10^(lo + spread): both engines give the same answer, and that answer is
    a complete report with every value inside its range, or one line naming the weight column."""
    folder = tmp_path_factory.mktemp("weights")
    rng = np.random.default_rng(d["seed"])
    w = 10.0 ** (d["lo"] + d["spread"] * rng.random(d["n"]))
    w = np.clip(w, np.finfo(np.float64).tiny, np.finfo(np.float64).max)
    log = _write(_rows(d["n"], d["seed"], weights=w), folder / f"log.{d['fmt']}", ["p", "y", "site", "w"])
    results = {}
    for engine in ("arrow", "duckdb"):
        out = folder / engine
        rc, err = _evaluate(capsys, log, out, "--weight", "w", "--engine", engine, "--bootstrap", "8")
        assert "Traceback" not in err and rc in (0, 2), (engine, rc, err)
        if rc == 2:
            assert err.strip().count("\n") == 0 and "'w'" in err, (engine, err)
            results[engine] = None
        else:
            results[engine] = _check_report(out)
    assert (results["arrow"] is None) == (results["duckdb"] is None), results
    if results["arrow"] is not None:
        _assert_same_metrics(results["arrow"], results["duckdb"], f"weights {d}")


# ------------------------------------------------------------------------------ forged aggregates
@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The result of ``calib-jax sql`` on a log, exported by 'the warehouse' as CSV."""
    import contextlib
    import io

    folder = tmp_path_factory.mktemp("agg")
    log = _write(_rows(600, 3), folder / "log.parquet", ["p", "y", "site", "w"])
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["sql", "--dialect", "duckdb", "--table", f"read_parquet('{log}')", "--score", "p",
                     "--label", "y", "--weight", "w", "--field", "site"]) == 0
    agg = folder / "agg.csv"
    duckdb.sql(buf.getvalue()).write_csv(str(agg))
    with open(agg, newline="") as fh:
        table = list(csv.reader(fh))
    return table


@st.composite
def _forgeries(draw, table):
    header, body = table[0], table[1:]
    numeric = [j for j, name in enumerate(header) if name not in ("kind", "level", "settings")]
    rows = [i for i, r in enumerate(body) if r[0] != "settings"]
    return {"row": draw(st.sampled_from(rows)), "col": draw(st.sampled_from(numeric)),
            "value": draw(st.sampled_from(["-1", "-1e-9", "1e300", "nan", "inf", "3.5", "0", "1e12"]))}


@SETTINGS
@given(data=st.data())
def test_property_forged_aggregates_are_refused_or_stay_in_range(tmp_path_factory, capsys, exported, data):
    """One cell of an exported aggregates table changed: the command refuses the file in one
    line naming it, or (for a change that keeps the table consistent) writes a report whose
    every value lies in its range — never a negative Brier score or NE."""
    d = data.draw(_forgeries(exported))
    header, body = exported[0], [list(r) for r in exported[1:]]
    if body[d["row"]][d["col"]] == "":
        return  # a cell the query leaves empty for this kind of row
    body[d["row"]][d["col"]] = d["value"]
    folder = tmp_path_factory.mktemp("forged")
    agg = folder / "agg.csv"
    with open(agg, "w", newline="") as fh:
        csv.writer(fh).writerows([header, *body])
    out = folder / "out"
    rc = main(["evaluate", "--aggregates", str(agg), "--out", str(out), "--bootstrap", "8", "--quiet"])
    err = capsys.readouterr().err
    assert "Traceback" not in err and rc in (0, 2), (rc, err)
    if rc == 2:
        assert err.strip().count("\n") == 0 and "agg.csv" in err, err
        assert not out.exists() or not (out / "report.json").exists()
    else:
        _check_report(out)
    shutil.rmtree(folder)


# ------------------------------------------------------------------------------ at a realistic size
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_lake_of_twenty_thousand_rows_in_mixed_column_orders_reads_like_one_file(tmp_path, capsys, fmt):
    """The by-name binding at a size where XLA's reductions vectorise as they do on real logs
    (3 x 7,000 rows, each file its own column order): the default engine equals the streamed
    reader on the concatenated rows, and a NaN score in the last file is refused alike, naming
    the column."""
    orders = [["p", "y", "site", "w"], ["w", "site", "y", "p"], ["y", "w", "p", "site"]]
    parts = [_rows(7000, 40 + i) for i in range(3)]
    for i, (rows, order) in enumerate(zip(parts, orders)):
        _write(rows, tmp_path / "lake" / f"part-{i}.{fmt}", order)
    plain = _write(_concat(parts), tmp_path / "all" / f"log.{fmt}", ["p", "y", "site", "w"])
    rc, err = _evaluate(capsys, tmp_path / "lake", tmp_path / "out", "--weight", "w", "--bootstrap", "0")
    assert rc == 0, err
    rc, err = _evaluate(capsys, plain, tmp_path / "ref_w", "--engine", "arrow", "--weight", "w", "--bootstrap", "0")
    assert rc == 0, err
    _assert_same_metrics(_check_report(tmp_path / "ref_w"), _check_report(tmp_path / "out"), "20k-row lake")
    parts[2]["p"][6543] = np.nan
    _write(parts[2], tmp_path / "lake" / f"part-2.{fmt}", orders[2])
    _write(_concat(parts), plain, ["p", "y", "site", "w"])
    for engine, log in (("duckdb", tmp_path / "lake"), ("arrow", plain)):
        rc, err = _evaluate(capsys, log, tmp_path / f"nan_{engine}", "--engine", engine, "--bootstrap", "0")
        assert rc == 2 and "'p'" in err and "Traceback" not in err, (engine, err)
