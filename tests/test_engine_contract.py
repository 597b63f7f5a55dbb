"""One reading contract for every engine of ``calib-jax evaluate`` (DuckDB, Spark, arrow).

Hostile logs are generated here: file and folder names holding ``[ ] * ? ~`` and spaces, CSV
lakes whose files list their columns in other orders, hive folders ``p=0.5/`` inside a lake
and ``k=v/`` above it, duplicated and case-only columns, nested and binary Parquet columns,
header names with spaces, a plain file named ``.gz``. Each goes through the three engines
(the arrow reader where the log is one file; a lake is compared with the arrow reader on its
rows written as one file), which must write the same report numbers or refuse with the same
message naming the file and the column (exit 2). Each defect the audit found on the old
code (silent wrong answers, exit 0) has its regression test here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")
import pyarrow.csv as pcsv  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from calib_jax.cli import main  # noqa: E402
from calib_jax.logs import sql  # noqa: E402
from calib_jax.logs.accumulate import Settings  # noqa: E402
from calib_jax.logs.engines import resolve_input, run_duckdb  # noqa: E402
from calib_jax.logs.sql import QueryColumns, accumulator_from_aggregates  # noqa: E402

N = 300
#: Py4J leaves its sockets to the garbage collector (as in tests/test_sql_engines.py)
pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")


# ---------------------------------------------------------------------------- helpers


def _log(n: int = N, seed: int = 0, levels: int = 4) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.01, 0.99, n)
    y = (rng.random(n) < p).astype(np.float64)
    site = np.array([f"s{k}" for k in rng.integers(0, levels, n)], dtype=object)
    return {"p": p, "y": y, "site": site}


def _rows(d: dict[str, np.ndarray], lo: int, hi: int) -> dict[str, np.ndarray]:
    return {k: v[lo:hi] for k, v in d.items()}


def _write(d: dict[str, np.ndarray], path: Path, order: list[str] | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    t = pa.table({k: d[k] for k in (order or list(d))})
    if path.suffix == ".parquet":
        pq.write_table(t, path)
    else:
        pcsv.write_csv(t, path)
    return path


def _run(capsys, tmp_path: Path, src, engine: str, *extra: str) -> tuple[int, object]:
    """``(0, report)`` or ``(2, the one-line message without the prefix)``."""
    out = tmp_path / f"out-{engine}-{len(list(tmp_path.glob('out-*')))}"
    capsys.readouterr()
    rc = main(["evaluate", str(src), "--engine", engine, "--score", "p", "--label", "y", "--bootstrap", "0",
               "--quiet", "--out", str(out), *extra])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if rc == 0:
        return 0, json.loads((out / "report.json").read_text())
    assert rc == 2 and err.count("\n") == 1, err
    return 2, err.strip().removeprefix("calib-jax evaluate: error: ")


def _numbers(rep) -> dict[str, object]:
    """What must be equal across engines: rows, drops, every metric (the fields' included),
    the number of levels and, where all are shown, each level's weight, mean score and click
    rate (levels of equal weight may be listed, and the heaviest chosen, in another order)."""
    inp = rep["input"]
    metrics = {m["name"]: (m["value"], m["lo"], m["hi"]) for m in rep["metrics"]}
    for f, v in rep.get("fields", {}).items():
        metrics.update({f"{f}.{k}": (m["value"], m["lo"], m["hi"]) for k, m in v["metrics"].items()})
    return {"rows": (inp["rows_read"], inp["rows_used"], inp["dropped"]), "metrics": metrics,
            "fields": {f: {lv["value"]: (lv["weight"], lv["mean_p"], lv["ctr"]) for lv in v["levels"]}
                       if v["shown"] == v["n_levels"] else v["n_levels"] for f, v in rep.get("fields", {}).items()}}


def _close(x, z, what) -> None:
    assert (x is None) == (z is None), what
    if x is not None:
        assert z == pytest.approx(x, rel=1e-9, abs=1e-12), what


def _assert_same_report(a, b, what: str = "") -> None:
    na, nb = _numbers(a), _numbers(b)
    assert na["rows"] == nb["rows"], what
    assert na["metrics"].keys() == nb["metrics"].keys(), what
    for k, va in na["metrics"].items():
        for x, z in zip(va, nb["metrics"][k], strict=True):
            _close(x, z, (what, k))
    sets = lambda n: {f: set(v) if isinstance(v, dict) else v for f, v in n["fields"].items()}  # noqa: E731
    assert sets(na) == sets(nb), what
    for f, levels in na["fields"].items():
        for lv, va in levels.items() if isinstance(levels, dict) else ():
            for x, z in zip(va, nb["fields"][f][lv], strict=True):
                _close(x, z, (what, f, lv))


def _agree(results: dict[str, tuple[int, object]], what: str = "") -> None:
    """Every engine gave the same report, or every engine the same refusal."""
    codes = {e: rc for e, (rc, _) in results.items()}
    assert len(set(codes.values())) == 1, (what, results)
    first, *rest = results.values()
    for other in rest:
        if first[0] == 0:
            _assert_same_report(first[1], other[1], what)
        else:
            assert other[1] == first[1], (what, results)


# ---------------------------------------------------------------------------- 1. names are literal
#: one name holding every character DuckDB, Spark (Hadoop) or pyarrow could read as a pattern
#: or the home folder, and a decoy that this name matches when it is read as a pattern
_HOSTILE = "log [1] *?~{a,b}"
_DECOY = "log 1 xy~{a,b}"


@pytest.mark.optimized_codegen  # tests/conftest.py: its programs run long at LLVM level 0
def test_file_names_with_glob_characters_are_read_literally(tmp_path, capsys, spark):
    """Old code: DuckDB and Spark expanded ``[1]``, ``*`` and ``?`` in a literal, existing file
    name again and read the decoy beside it (exit 0, other rows)."""
    for suffix in (".parquet", ".csv"):
        d = tmp_path / suffix[1:]
        target = _write(_log(N, 1), d / f"{_HOSTILE}{suffix}")
        _write(_log(50, 2), d / f"{_DECOY}{suffix}")  # matched by the pattern the name would be
        res = {e: _run(capsys, tmp_path, target, e) for e in ("arrow", "duckdb", "spark")}
        assert res["arrow"][0] == 0 and res["arrow"][1]["input"]["rows_read"] == N
        _agree(res, suffix)


def test_folder_names_with_glob_characters_are_read_literally(tmp_path, capsys, spark):
    d = _log(N, 3)
    lake = tmp_path / "lake [x]*?"
    _write(_rows(d, 0, 100), lake / "a [0].parquet")
    _write(_rows(d, 100, N), lake / "b*.parquet")
    _write(_log(50, 4), tmp_path / "lake x1z" / "c.parquet")  # what "lake [x]*?" matches as a pattern
    whole = _write(d, tmp_path / "whole.parquet")
    res = {"arrow": _run(capsys, tmp_path, whole, "arrow"),
           **{e: _run(capsys, tmp_path, lake, e) for e in ("duckdb", "spark")}}
    assert res["duckdb"][0] == 0 and res["duckdb"][1]["input"]["rows_read"] == N
    _agree(res)


def test_a_leading_tilde_is_a_folder_not_the_home_directory(tmp_path, capsys, monkeypatch, spark):
    """Old code: DuckDB (and pyarrow) read ``~/log.parquet`` as ``$HOME/log.parquet`` although
    a folder named ``~`` in the working directory holds the file given."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    _write(_log(50, 2), home / "log.parquet")
    _write(_log(N, 1), cwd / "~" / "log.parquet")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    res = {e: _run(capsys, tmp_path, "~/log.parquet", e) for e in ("arrow", "duckdb", "spark")}
    assert res["arrow"][0] == 0 and res["arrow"][1]["input"]["rows_read"] == N
    _agree(res)
    # a pattern is a pattern where the user wrote one: "~/*.parquet" matches the folder "~" here
    rc, rep = _run(capsys, tmp_path, "~/*.parquet", "duckdb")
    assert rc == 0 and rep["input"]["rows_read"] == N


# ---------------------------------------------------------------------------- 2. hive folders
def test_hive_folders_are_only_folders_unless_asked(tmp_path, capsys, spark):
    """Old code: DuckDB replaced the score of every row by the folder ``p=0.5`` and a field by
    the one level of a folder ``site=zz`` above the lake (exit 0)."""
    d = _log(N, 5)
    whole = _write(d, tmp_path / "whole.parquet")
    inside = tmp_path / "inside"
    _write(_rows(d, 0, 150), inside / "p=0.5" / "a.parquet")
    _write(_rows(d, 150, N), inside / "p=0.5" / "b.parquet")
    above = tmp_path / "site=zz" / "lake"
    _write(_rows(d, 0, 150), above / "a.parquet")
    _write(_rows(d, 150, N), above / "b.parquet")
    ref = _run(capsys, tmp_path, whole, "arrow", "--field", "site")
    for lake in (inside, above):
        res = {"arrow": ref, **{e: _run(capsys, tmp_path, lake, e, "--field", "site") for e in ("duckdb", "spark")}}
        _agree(res, lake.name)
    assert sorted(_numbers(ref[1])["fields"]["site"]) == ["s0", "s1", "s2", "s3"]


def _days_lake(root: Path, d: dict[str, np.ndarray]) -> Path:
    lake = root / "k=v" / "lake"  # a key=value folder above the lake never counts
    for day in range(3):
        _write(_rows(d, day * 100, (day + 1) * 100), lake / f"day={day}" / "part-0.parquet")
    return lake


def test_hive_partitioning_when_asked_reads_the_keys_below_the_named_root(tmp_path, spark):
    """Asked for, partition folders below the named folder or pattern root are text columns;
    a folder above it is not; both query engines give the same tables."""
    from calib_jax.logs.engines import run_spark

    d = _log(N, 6)
    lake = _days_lake(tmp_path, d)
    s = Settings(fields=("day",), n_boot=0)
    cols = QueryColumns(label="y", score="p", fields=("day",))
    for src in (lake, f"{lake}/day=*/*.parquet"):
        inp = resolve_input(src, hive=True)
        assert [dict(p) for p in inp.partitions] == [{"day": str(k)} for k in range(3)]
        acc = accumulator_from_aggregates(run_duckdb(inp, cols, s), s)
        assert sorted(acc.vocab["day"]) == ["0", "1", "2"] and acc.rows_read == N
        acc_s = accumulator_from_aggregates(run_spark(str(src), cols, s, spark=spark, hive=True), s)
        assert acc_s.vocab["day"].keys() == acc.vocab["day"].keys()
        np.testing.assert_allclose(acc_s.fld["day"], acc.fld["day"], rtol=1e-12)
    # the root of a pattern is its part without glob characters: day=1 is above it here
    assert resolve_input(f"{lake}/day=1/*.parquet", hive=True).partitions == ((),)
    # k=v is above the named folder: no column k
    with pytest.raises(ValueError, match=r"part-0\.parquet: column 'k' not found"):
        run_duckdb(resolve_input(lake, hive=True), QueryColumns(label="y", score="p", fields=("k",)), s)
    # not asked: day is no column, and the message says how to ask
    with pytest.raises(ValueError, match=r"column 'day' not found .*--hive-partitioning"):
        run_duckdb(resolve_input(lake), cols, s)


def test_a_partition_key_that_is_also_a_column_is_refused(tmp_path, capsys, spark):
    """Asked for hive partitioning, a folder ``p=0.5/`` over files with a column ``p`` is
    refused naming the file and the column (the folder would replace every score)."""
    from calib_jax.logs.engines import run_spark

    lake = tmp_path / "lake"
    _write(_log(N, 7), lake / "p=0.5" / "a.parquet")
    cols, s = QueryColumns(label="y", score="p"), Settings(n_boot=0)
    msg = r"p=0\.5/a\.parquet: the hive partition key 'p' .* is also a column of the file"
    with pytest.raises(ValueError, match=msg):
        run_duckdb(resolve_input(lake, hive=True), cols, s)
    with pytest.raises(ValueError, match=msg):
        run_spark(str(lake), cols, s, spark=spark, hive=True)


def test_hive_partitioning_flag_of_evaluate(tmp_path, capsys, spark):
    """``evaluate --hive-partitioning`` reaches both query engines."""
    d = _log(N, 6)
    lake = _days_lake(tmp_path, d)
    res = {e: _run(capsys, tmp_path, lake, e, "--field", "day", "--hive-partitioning") for e in ("duckdb", "spark")}
    _agree(res)
    assert res["duckdb"][0] == 0, res
    assert sorted(_numbers(res["duckdb"][1])["fields"]["day"]) == ["0", "1", "2"]


# ---------------------------------------------------------------------------- 3. columns by name
def test_csv_lake_binds_columns_by_name_in_every_file(tmp_path, capsys, spark):
    """Old code: DuckDB read every CSV file of a lake with the first file's header, so files
    listing the columns in another order gave labels from the score column (and a file
    lacking a column gave another column's values, exit 0)."""
    d = _log(N, 8)
    d["y"][[40, 250]] = [2.0, 3.0]  # invalid labels: in the second and the third file
    whole = _write(d, tmp_path / "whole.csv")
    lake = tmp_path / "lake"
    _write(_rows(d, 0, 100), lake / "a.csv", ["p", "y", "site"])
    _write(_rows(d, 100, 200), lake / "b.csv", ["site", "p", "y"])
    _write({**_rows(d, 200, N), "extra": np.arange(100)}, lake / "c.csv",
           ["y", "extra", "site", "p"])
    for extra in (["--field", "site", "--drop-invalid"], ["--field", "site"]):
        res = {"arrow": _run(capsys, tmp_path, whole, "arrow", *extra),
               **{e: _run(capsys, tmp_path, lake, e, *extra) for e in ("duckdb", "spark")}}
        if res["arrow"][0] == 0:
            _agree(res, str(extra))
            assert res["duckdb"][1]["input"]["dropped"] == {"y: not in {0, 1}": 2}
        else:  # the same refusal: the same rows, counted over the files in name order
            assert {e: r[0] for e, r in res.items()} == {"arrow": 2, "duckdb": 2, "spark": 2}
            why = res["arrow"][1].removeprefix(f"{whole}: ")
            assert "column 'y': 2 rows not in {0, 1} (first at data row 41)" in why
            assert res["duckdb"][1] == f"{lake}: {why}"
            # Spark counts the rows (the first row is DuckDB's second scan, in file order)
            assert res["spark"][1] == f"{lake}: {why}".replace(" (first at data row 41)", "")


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_every_file_of_a_lake_must_have_the_read_columns(tmp_path, capsys, spark, suffix):
    """Old code: a CSV file without the label column was read by position (its column ``q``
    as labels), a Parquet one with NULL labels; now the file and the column are named."""
    d = _log(N, 9)
    lake = tmp_path / "lake"
    _write(_rows(d, 0, 150), lake / f"a{suffix}")
    _write({"p": d["p"][150:], "q": d["y"][150:], "site": d["site"][150:]}, lake / f"b{suffix}")
    res = {e: _run(capsys, tmp_path, lake, e) for e in ("duckdb", "spark")}
    _agree(res)
    assert res["duckdb"][0] == 2 and res["duckdb"][1].startswith(f"{lake / f'b{suffix}'}: column 'y' not found")


# ---------------------------------------------------------------------------- 4. the engines agree
@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_case_only_and_duplicated_columns(tmp_path, capsys, spark, suffix):
    """Old code: DuckDB refused a CSV with ``p`` and ``P`` or an unused duplicated column (the
    arrow reader reads both), read ``p`` for ``--score P`` in Parquet, and every engine read a
    duplicated *used* Parquet column; Spark refused ``p`` beside ``P``."""
    d = _log(N, 10)
    q = 1 - d["p"]
    names = ["p", "y", "P", "z", "z"]
    t = pa.table([d["p"], d["y"], q, np.zeros(N), np.ones(N)], names=names)
    path = tmp_path / f"case{suffix}"
    if suffix == ".parquet":
        pq.write_table(t, path)
    else:
        path.write_text(",".join(names) + "\n"
                        + "".join(f"{float(a)!r},{b},{float(c)!r},0,1\n" for a, b, c in zip(d["p"], d["y"], q)))
    engines = ("arrow", "duckdb", "spark")
    for score in ("p", "P"):
        res = {e: _run(capsys, tmp_path, path, e, "--score", score) for e in engines}
        _agree(res, score)
        assert res["arrow"][0] == 0
    # exact names: P is not p
    ece = {s: _numbers(_run(capsys, tmp_path, path, "duckdb", "--score", s)[1])["metrics"]["ece"][0] for s in "pP"}
    assert ece["p"] != ece["P"]
    # a duplicated column that is read is refused by every engine, naming it
    res = {e: _run(capsys, tmp_path, path, e, "--weight", "z") for e in engines}
    _agree(res)
    assert res["duckdb"] == (2, f"{path}: column 'z' appears more than once in the file's columns; "
                                "rename one of them")


@pytest.mark.parametrize("kind", ["list", "struct", "binary"])
def test_nested_and_binary_columns_are_refused_by_every_engine(tmp_path, capsys, spark, kind):
    """Old code: DuckDB and Spark read a list, struct or binary field as text (``[1, 2]``),
    the arrow reader refused lists and structs and read binary as text."""
    d = _log(N, 11)
    arr = {"list": pa.array([[1, 2]] * N), "struct": pa.array([{"a": 1}] * N),
           "binary": pa.array([b"ab"] * N, pa.binary())}[kind]
    path = tmp_path / f"{kind}.parquet"
    pq.write_table(pa.table({"p": d["p"], "y": d["y"], "f": arr}), path)
    res = {e: _run(capsys, tmp_path, path, e, "--field", "f") for e in ("arrow", "duckdb", "spark")}
    _agree(res)
    assert res["arrow"][0] == 2 and res["arrow"][1].startswith(f"{path}: column 'f' holds ")


def test_csv_header_names_are_matched_exactly(tmp_path, capsys, spark):
    """Old code: DuckDB stripped the spaces of header names (`` p`` read as ``p``) while the
    arrow reader failed with a misleading "damaged or truncated?"."""
    d = _log(N, 12)
    path = tmp_path / "spaces.csv"
    path.write_text(" p,y ,site\n" + "".join(f"{float(a)!r},{b},{c}\n" for a, b, c in zip(d["p"], d["y"], d["site"])))
    engines = ("arrow", "duckdb", "spark")
    res = {e: _run(capsys, tmp_path, path, e) for e in engines}
    _agree(res)
    assert res["arrow"][1].startswith(f"{path}: column 'p' not found") and "damaged" not in res["arrow"][1]
    assert "names are matched exactly" in res["arrow"][1]
    res = {e: _run(capsys, tmp_path, path, e, "--score", " p", "--label", "y ", "--field", "site") for e in engines}
    _agree(res)
    assert res["arrow"][0] == 0


def test_field_levels_are_bounded_by_max_levels_only(tmp_path, capsys, monkeypatch):
    """Old code: the query engines refused a field with many levels by a fixed element budget
    (about 320k levels at the default settings) that the arrow reader does not have. Here
    the budget is scaled down so that a few hundred levels exceed the old one."""
    H, M = 64, 5
    main_cells = H * M * 2 * (7 + 1)
    monkeypatch.setattr(sql, "MAX_ELEMENTS", main_cells + (16 + 50) * 64 * 2 * 13)  # old: <= 50 levels
    d = _log(N, 13)
    d["site"] = np.array([f"l{i}" for i in range(N)], dtype=object)  # 300 levels
    path = _write(d, tmp_path / "levels.parquet")
    extra = ("--field", "site", "--hist-bins", str(H), "--bins", str(M), "--max-levels", "1000")
    res = {e: _run(capsys, tmp_path, path, e, *extra) for e in ("arrow", "duckdb")}
    _agree(res)
    assert res["duckdb"][0] == 0 and res["duckdb"][1]["fields"]["site"]["n_levels"] == N


# ---------------------------------------------------------------------------- 5. a fake .gz
def test_a_plain_file_named_gz_is_refused_naming_it(tmp_path, capsys, spark):
    """Old code: DuckDB's message did not name the file, the arrow reader's said "damaged or
    truncated?" and Spark failed with a Java stack's first line."""
    d = _log(N, 14)
    fake = tmp_path / "fake.csv.gz"
    pcsv.write_csv(pa.table({k: d[k] for k in ("p", "y")}), fake)
    res = {e: _run(capsys, tmp_path, fake, e) for e in ("arrow", "duckdb", "spark")}
    _agree(res)
    assert res["arrow"][1].startswith(f"{fake}: named .gz but not gzip-compressed")
    # in a lake, the same message names the one file
    lake = tmp_path / "lake"
    import gzip

    lake.mkdir()
    (lake / "a.csv.gz").write_bytes(gzip.compress(b"p,y\n0.5,1\n0.25,0\n"))
    os.replace(fake, lake / "b.csv.gz")
    res = {e: _run(capsys, tmp_path, lake, e) for e in ("duckdb", "spark")}
    _agree(res)
    assert res["duckdb"][1].startswith(f"{lake / 'b.csv.gz'}: named .gz but not gzip-compressed")


def _csv_log(d: dict[str, np.ndarray], path: Path, replaced: dict[int, str]) -> Path:
    """The log's p and y as CSV text, the data rows at the keys of ``replaced`` replaced."""
    rows = [f"{float(a)!r},{b}" for a, b in zip(d["p"], d["y"])]
    for i, row in replaced.items():
        rows[i] = row
    path.write_text("p,y\n" + "\n".join(rows) + "\n")
    return path


def _assert_refused_alike(res, path: Path, column: str, value: str, row: int) -> None:
    """The arrow reader and DuckDB name the file, column, value and data row; Spark, which
    does not read rows in order, all but the row."""
    want = f"{path}: column {column!r} cannot be read as numbers: {value!r}"
    assert res["arrow"] == res["duckdb"] == (2, f"{want} (data row {row})"), res
    assert res["spark"] == (2, want), res


def test_a_value_that_is_not_a_number_is_refused_alike(tmp_path, capsys, spark):
    """The same refusal from every engine: the file, the column, the value (and, where the
    engine reads rows in order, the row; Spark does not)."""
    # a null spelling: a missing score, not an error
    path = _csv_log(_log(N, 15), tmp_path / "text.csv", {6: "NA,1", 41: "0.5x,0"})
    res = {e: _run(capsys, tmp_path, path, e) for e in ("arrow", "duckdb", "spark")}
    _assert_refused_alike(res, path, "p", "0.5x", 42)


def test_the_null_spellings_of_text_are_the_csv_readers():
    """The one list of missing-value spellings (DuckDB's and Spark's SQL, text columns of
    Parquet) is the one pyarrow's CSV reader applies to a CSV file."""
    from calib_jax.logs import loaders

    assert sorted(loaders.TEXT_NULLS) == sorted(pcsv.ConvertOptions().null_values)


def test_a_number_written_with_underscores_is_refused_by_every_engine(tmp_path, capsys, spark):
    """Old code: DuckDB's cast reads ``0.1_5`` as 0.15 (digit separators), so the DuckDB engine
    gave a report with exit 0 where the arrow reader and Spark refused the value."""
    d = _log(N, 16)
    path = _csv_log(d, tmp_path / "underscore.csv", {9: "0.1_5,0"})
    res = {e: _run(capsys, tmp_path, path, e) for e in ("arrow", "duckdb", "spark")}
    _assert_refused_alike(res, path, "p", "0.1_5", 10)
    lake = tmp_path / "lake"  # a hive folder's value read as a number, beside a Parquet file
    _write(_rows(d, 0, 50), lake / "w=0.5" / "a.parquet")
    part = _write(_rows(d, 50, 100), lake / "w=1_0" / "b.parquet")
    res = {e: _run(capsys, tmp_path, lake, e, "--hive-partitioning", "--weight", "w") for e in ("duckdb", "spark")}
    assert res["duckdb"] == (2, f"{part}: column 'w' cannot be read as numbers: '1_0' (folder w=1_0)"), res
    assert res["spark"] == (2, f"{lake}: column 'w' cannot be read as numbers: '1_0'"), res


def test_numbers_written_as_text_in_parquet_are_read_alike(tmp_path, capsys, spark):
    """A Parquet (or DataFrame) column of text read as numbers, by the rule of a CSV file's text:
    spaces around a number dropped, a null spelling missing, anything else refused naming the
    value. Old code: the arrow reader refused `` 0.25`` that DuckDB and Spark read, DuckDB and
    the arrow reader refused ``NA`` that Spark read as missing (so ``--drop-invalid`` kept a
    different set of rows), and DuckDB's refusal printed its SQL."""
    d = _log(N, 17)
    text = [repr(float(v)) for v in d["p"]]
    text[3], text[5], text[8] = f" {text[3]} ", "NA", ""
    path = tmp_path / "text.parquet"
    pq.write_table(pa.table({"p": pa.array(text), "y": d["y"]}), path)
    res = {e: _run(capsys, tmp_path, path, e, "--drop-invalid") for e in ("arrow", "duckdb", "spark")}
    _agree(res)
    assert res["duckdb"][0] == 0 and res["duckdb"][1]["input"]["rows_used"] == N - 2
    keep = np.ones(N, bool)
    keep[[5, 8]] = False
    ref = _write({k: v[keep] for k, v in d.items()}, tmp_path / "numbers.parquet")
    got, want = (_numbers(r)["metrics"] for r in (res["duckdb"][1], _run(capsys, tmp_path, ref, "duckdb")[1]))
    assert got.keys() == want.keys()
    for k in got:  # the same numbers as the rows written as numbers
        for x, z in zip(got[k], want[k], strict=True):
            _close(x, z, k)
    for bad in ("0.1_5", "0x1A", "1,5"):
        text2 = list(text)
        text2[11] = bad
        pq.write_table(pa.table({"p": pa.array(text2), "y": d["y"]}), path)
        res = {e: _run(capsys, tmp_path, path, e, "--drop-invalid") for e in ("arrow", "duckdb", "spark")}
        _assert_refused_alike(res, path, "p", bad, 12)


def test_a_value_that_is_not_a_number_is_named_by_its_row_in_a_later_chunk(tmp_path, capsys):
    """At 20,000 rows read in chunks of 4,096 (the arrow reader) or at once (DuckDB), the bad
    value of a Parquet text column is named by its row in the file, not in its chunk."""
    rng = np.random.default_rng(21)
    n = 20_000
    text = [repr(float(v)) for v in rng.uniform(0.01, 0.99, n)]
    text[15_000] = "0.2_5"
    path = tmp_path / "long.parquet"
    pq.write_table(pa.table({"p": pa.array(text), "y": (rng.random(n) < 0.3).astype(np.float64)}), path)
    res = {e: _run(capsys, tmp_path, path, e, "--chunk-rows", "4096") for e in ("arrow", "duckdb")}
    assert res["arrow"] == res["duckdb"] == (2, f"{path}: column 'p' cannot be read as numbers: '0.2_5' "
                                                "(data row 15001)"), res


@pytest.mark.parametrize("kind", ["timestamp", "date"])
def test_a_number_column_of_dates_or_times_is_refused_by_every_engine(tmp_path, capsys, spark, kind):
    """Old code: DuckDB printed its SQL with the refused cast, the arrow reader pyarrow's
    "Unsupported cast", and Spark read a date as missing (every row dropped with
    ``--drop-invalid``). A time is still read as a field."""
    import datetime

    d = _log(N, 18)
    when = [datetime.datetime(2026, 1, 1 + i % 28) for i in range(N)]
    arr = pa.array(when) if kind == "timestamp" else pa.array([w.date() for w in when])
    path = tmp_path / f"{kind}.parquet"
    pq.write_table(pa.table({"p": d["p"], "y": d["y"], "w": arr}), path)
    res = {e: _run(capsys, tmp_path, path, e, "--weight", "w") for e in ("arrow", "duckdb", "spark")}
    _agree(res)
    assert res["arrow"][0] == 2 and res["arrow"][1].startswith(f"{path}: column 'w' holds dates or times ("), res
    res = {e: _run(capsys, tmp_path, path, e, "--field", "w") for e in ("arrow", "duckdb", "spark")}
    _agree(res)
    assert res["arrow"][0] == 0


def test_a_field_of_times_or_floats_has_the_same_levels_on_every_engine(tmp_path, capsys, spark):
    """Old code: the arrow reader wrote ``2026-01-01 12:30:15.250000`` where DuckDB and Spark
    wrote ``2026-01-01 12:30:15.25``, and a zone-aware time in its own zone
    (``13:30:00.000+0100``) where DuckDB wrote the UTC instant with ``+00`` and Spark without;
    a float 1 as ``1``, ``1.0`` and ``1.0``, 1e-7 as ``1e-7``, ``1e-07`` and ``1.0E-7``: one
    log, three sets of levels. Now every engine writes the UTC instant without a zone and
    without trailing zeros, and a float as DuckDB writes a DOUBLE (Spark reads no time of day or
    nanoseconds from Parquet: DuckDB and the arrow reader only)."""
    import datetime

    d = _log(N, 19)
    base = [datetime.datetime(2026, 1, 1 + i % 3, 12, 30, 15, 250_000 * (i % 2)) for i in range(N)]
    cols = {"p": d["p"], "y": d["y"]}
    for unit in ("s", "ms", "us"):
        cols[f"t_{unit}"] = pa.array(base, pa.timestamp("us")).cast(pa.timestamp(unit), safe=False)
        cols[f"z_{unit}"] = pa.array(base, pa.timestamp("us", tz="UTC")).cast(pa.timestamp(unit, tz="Asia/Kolkata"),
                                                                              safe=False)
    # floats too: the arrow reader wrote 1 and 1e-7, DuckDB 1.0 and 1e-07, Spark 1.0 and 1.0E-7
    cols["f64"] = pa.array(np.array([1.0, 1e-7, 2.5e-5, 123456789.0, 1e16, np.copysign(np.nan, -1)])[np.arange(N) % 6])
    cols["f32"] = pa.array(np.array([1.0, 0.1, 3261845.25], np.float32)[np.arange(N) % 3])
    fields = [c for c in cols if c not in ("p", "y")]
    path = tmp_path / "times.parquet"
    pq.write_table(pa.table(cols), path)
    extra = [a for f in fields for a in ("--field", f)]
    res = {e: _run(capsys, tmp_path, path, e, *extra) for e in ("arrow", "duckdb", "spark")}
    _agree(res)
    levels = {f: sorted(lv["value"] for lv in v["levels"]) for f, v in res["duckdb"][1]["fields"].items()}
    assert levels["t_us"] == levels["z_us"] == ["2026-01-01 12:30:15", "2026-01-01 12:30:15.25", "2026-01-02 12:30:15",
                                                "2026-01-02 12:30:15.25", "2026-01-03 12:30:15",
                                                "2026-01-03 12:30:15.25"]
    assert levels["t_s"] == levels["z_s"] == ["2026-01-01 12:30:15", "2026-01-02 12:30:15", "2026-01-03 12:30:15"]
    assert levels["f64"] == ["1.0", "123456789.0", "1e+16", "1e-07", "2.5e-05", "nan"]  # DuckDB's own: "-nan"
    assert levels["f32"] == ["0.10000000149011612", "1.0", "3261845.25"]
    from calib_jax import logs

    by = {e: logs.slices(path, by="f64", score="p", label="y", bootstrap=0, engine=e).table.to_pandas()
          for e in ("arrow", "duckdb", "spark")}
    for e, t in by.items():  # slices of a float column: the same slices, named alike
        assert sorted(t.iloc[:, 0]) == levels["f64"], (e, t)
    day = [datetime.time(12, 0, 1, 500_000 * (i % 2)) for i in range(N)]
    pq.write_table(pa.table({"p": d["p"], "y": d["y"], "tod": pa.array(day, pa.time32("ms")),
                             "t_ns": pa.array(base, pa.timestamp("ns"))}), path)
    res = {e: _run(capsys, tmp_path, path, e, "--field", "tod", "--field", "t_ns") for e in ("arrow", "duckdb")}
    _agree(res)
    levels = {f: sorted(lv["value"] for lv in v["levels"]) for f, v in res["duckdb"][1]["fields"].items()}
    assert levels["tod"] == ["12:00:01", "12:00:01.5"]
    assert levels["t_ns"] == sorted({f"2026-01-0{1 + i % 3} 12:30:15{'.25' if i % 2 else ''}" for i in range(6)})
    rc, message = _run(capsys, tmp_path, path, "spark", "--field", "tod")  # Spark refuses, and says who reads it
    assert rc == 2 and "Illegal Parquet type" in message and message.endswith("--engine duckdb or arrow does)"), message


def test_a_float_is_written_as_duckdb_writes_it_by_every_reader():
    """The text of a float field's level (:func:`loaders.level_text`, and the plain-Python
    formatter Spark's workers run) is DuckDB's cast of the same value as a DOUBLE, for float64
    and float32 values drawn from every exponent, whole numbers, the edges of the positional
    layout (1e-4, 1e16), zeros, subnormals and the non-finite values."""
    import duckdb

    from calib_jax.logs import engines, loaders

    rng = np.random.default_rng(20)
    bits = rng.integers(0, 2**63, 3000, dtype=np.uint64) | (rng.integers(0, 2, 3000, dtype=np.uint64) << 63)
    edges = [0.0, -0.0, 1.0, 100.0, 1e-4, 9.999e-5, 1e16, 9.999999999999998e15, 1e15, 123456789.0, 0.1, 1 / 3,
             5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, np.inf, -np.inf, np.nan, 2e23, 16777217.0]
    f64 = np.concatenate([bits.view(np.float64)[np.isfinite(bits.view(np.float64))], edges,
                          np.round(rng.uniform(-1e6, 1e6, 500)), rng.uniform(0, 1, 500)])
    with np.errstate(over="ignore"):  # the float64 edges beyond float32 become +-inf
        f32_edges = np.array(edges, np.float32)
    f32 = np.concatenate([rng.integers(0, 2**32, 3000, dtype=np.uint64).astype(np.uint32).view(np.float32),
                          rng.uniform(0, 1, 500).astype(np.float32)])
    f32 = np.concatenate([f32[np.isfinite(f32)], f32_edges])
    con = duckdb.connect()
    for values in (f64, f32):
        con.register("v", pa.table({"x": pa.array(values)}))
        want = [r[0] for r in con.execute("SELECT CAST(CAST(x AS DOUBLE) AS VARCHAR) FROM v").fetchall()]
        con.unregister("v")
        assert loaders.level_text(pa.array(values)).to_pylist() == want, values.dtype
        assert [engines._float_repr(float(v)) for v in values] == want, values.dtype


@pytest.mark.parametrize("value, day", [
    ("2026-01-01", "2026-01-01"), ("2026-01-01 12:00", "2026-01-01"), ("2026-01-01T23:59:59.999999", "2026-01-01"),
    ("2026-01-01T02:00:00+05:30", "2025-12-31"), ("2026-01-01T02:00:00.5+0530", "2025-12-31"),
    ("2026-01-01T02:00:00+05", "2025-12-31"), ("2026-01-01T22:00:00-05:00", "2026-01-02"),
    ("2026-01-01T12:00:00Z", "2026-01-01"),
    # before 2026-12-06 a time on one engine, refused on another
    ("2026/01/01", None), ("2026-1-1", None), ("2026-01-01T24:00:00", None), ("2026-01-01T02:00Z", None),
    ("2026-01", None), ("2026-02-30", None), ("Jan 1 2026", None), ("2026-01-01 12:00:00 UTC", None)])
def test_a_time_written_as_text_is_read_alike_by_every_engine(tmp_path, capsys, spark, value, day):
    """``--every`` reads text as a time when it is ISO 8601 (``slicing.TIME_PATTERN``), on every
    engine: each engine's own parser read more, each differently (DuckDB ``2026/01/01``,
    ``2026-1-1`` and hour 24, Spark ``2026-1-1``, NumPy's fallback ``2026-01``)."""
    path = tmp_path / "times.csv"
    path.write_text(f"p,y,t\n0.1,0,2026-01-05\n0.2,1,2026-01-05\n0.3,0,{value}\n0.4,1,2026-01-06\n")
    res = {}
    for e in ("arrow", "duckdb", "spark"):
        out = tmp_path / f"out-{e}"
        capsys.readouterr()
        rc = main(["evaluate", str(path), "--engine", e, "--score", "p", "--label", "y", "--by", "t", "--every", "day",
                   "--bootstrap", "0", "--quiet", "--out", str(out)])
        err = capsys.readouterr().err
        res[e] = (rc, sorted(s["slice"] for s in json.loads((out / "slices.json").read_text())["slices"])
                  if rc == 0 else err.strip())
    assert res["arrow"] == res["duckdb"] == res["spark"], res
    if day is None:
        assert res["arrow"][0] == 2 and "is not a date or time" in res["arrow"][1], res
    else:
        assert res["arrow"] == (0, sorted({f"{day} 00:00:00", "2026-01-05 00:00:00", "2026-01-06 00:00:00"})), res


def test_the_library_reads_a_spark_dataframe_where_it_lives(spark, tmp_path):
    """``calib_jax.logs`` on a Spark DataFrame queries it through a temporary view (dropped
    afterwards): its report, comparison, slices and cell fit equal those of the same rows read by
    DuckDB from a file (to float64 rounding: the engines add in their own order)."""
    from calib_jax import logs

    rng = np.random.default_rng(5)
    q = rng.uniform(0.02, 0.35, 6_000)
    log_file = tmp_path / "log.parquet"
    pq.write_table(pa.table({"p": np.clip(1.3 * q, 0, 1), "q": q, "y": (rng.uniform(size=q.size) < q).astype(np.int8),
                             "day": np.repeat(["d1", "d2"], 3_000)}), log_file)
    frame = spark.read.parquet(str(log_file))
    close = dict(rel=1e-9, abs=1e-12)
    r = logs.evaluate(frame, score="p", label="y", bootstrap=10)
    assert r.input["path"] == "<pyspark.DataFrame>" and r.input["rows_used"] == 6_000
    reference = logs.evaluate(log_file, score="p", label="y", bootstrap=10)
    for name in ("ece", "brier", "auc", "ne"):
        assert r.value(name) == pytest.approx(reference.value(name), **close), name
    c, c0 = (logs.compare(s, scores=["p", "q"], label="y", bootstrap=10) for s in (frame, log_file))
    assert c.differences["metric"].to_pylist() == c0.differences["metric"].to_pylist()
    for column in ("diff", "lo", "hi"):
        np.testing.assert_allclose(c.differences[column].to_numpy(zero_copy_only=False),
                                   c0.differences[column].to_numpy(zero_copy_only=False), rtol=1e-9, atol=1e-12)
    s, s0 = (logs.slices(src, by="day", score="p", label="y", bootstrap=10) for src in (frame, log_file))
    assert s.table["slice"].to_pylist() == s0.table["slice"].to_pylist() == ["d1", "d2"]
    np.testing.assert_allclose(s.table["ece"].to_numpy(), s0.table["ece"].to_numpy(), rtol=1e-9)
    f, f0 = (logs.fit(src, method="platt", score="p", label="y", engine=e) for src, e in ((frame, "spark"),
                                                                                            (log_file, "duckdb")))
    np.testing.assert_allclose(f.predict([0.1, 0.3]), f0.predict([0.1, 0.3]), rtol=1e-6)
    assert not [t for t in spark.catalog.listTables() if t.name.startswith("calib_jax_source_")]


def test_a_negative_rate_weighs_the_same_rows_in_every_engine(spark, tmp_path):
    """A downsampled log with its kept-negative rate (one number, or a column of rates): Spark's
    report, comparison and slices equal DuckDB's and the streamed reader's (the rate enters each
    engine's weights; float64 rounding only), and each states the rate."""
    from calib_jax import logs

    rng = np.random.default_rng(8)
    q = rng.uniform(0.01, 0.2, 8_000)
    y = (rng.uniform(size=q.size) < q).astype(np.int8)
    keep = (y == 1) | (rng.uniform(size=q.size) < 0.2)
    log_file = tmp_path / "kept.parquet"
    pq.write_table(pa.table({"p": q, "m": np.clip(1.2 * q, 0, 1), "y": y, "day": np.repeat(["d1", "d2"], 4_000),
                             "r": np.repeat([0.2, 0.5], 4_000)}).filter(pa.array(keep)), log_file)
    frame = spark.read.parquet(str(log_file))
    close = dict(rtol=1e-9, atol=1e-12)
    reports = {e: logs.evaluate(frame if e == "spark" else log_file, score="p", label="y", negative_rate=0.2,
                                bootstrap=10, engine=e) for e in ("spark", "duckdb", "arrow")}
    for e, r in reports.items():
        assert r.report["settings"]["negative_rate"] == 0.2, e
        for col in ("value", "lo", "hi"):
            np.testing.assert_allclose(r.metrics[col].to_numpy(zero_copy_only=False),
                                       reports["duckdb"].metrics[col].to_numpy(zero_copy_only=False), **close)
    comparisons = {e: logs.compare(frame if e == "spark" else log_file, scores=["p", "m"], label="y",
                                   negative_rate=0.2, bootstrap=10, engine=e) for e in ("spark", "duckdb", "arrow")}
    for c in comparisons.values():
        assert c.result["input"]["negative_rate"] == 0.2
        np.testing.assert_allclose(c.differences["diff"].to_numpy(zero_copy_only=False),
                                   comparisons["duckdb"].differences["diff"].to_numpy(zero_copy_only=False), **close)
    per_slice = {e: logs.slices(frame if e == "spark" else log_file, by="day", score="p", label="y",
                                negative_rate=0.2, bootstrap=10, engine=e) for e in ("spark", "duckdb", "arrow")}
    for s in per_slice.values():
        np.testing.assert_allclose(s.table["ne"].to_numpy(), per_slice["duckdb"].table["ne"].to_numpy(), **close)
        assert [c["p"] for c in s.result["changes"]] == [c["p"] for c in per_slice["duckdb"].result["changes"]]
    by_row = {e: logs.evaluate(frame if e == "spark" else log_file, score="p", label="y", negative_rate_column="r",
                               bootstrap=10, engine=e) for e in ("spark", "duckdb", "arrow")}
    for r in by_row.values():  # a rate per row (the column r)
        assert r.report["settings"]["negative_rate_column"] == "r"
        np.testing.assert_allclose(r.metrics["value"].to_numpy(zero_copy_only=False),
                                   by_row["duckdb"].metrics["value"].to_numpy(zero_copy_only=False), **close)
