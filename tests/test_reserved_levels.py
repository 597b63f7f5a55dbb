"""A level column (a field, the ``--by`` column) whose value is spelled as one of the two level
names a report reserves, ``__missing__`` (rows without a value) and ``__other__`` (the levels
beyond ``--max-levels``), is refused naming the file, the column and the value, by every engine
and command; the old code pooled such rows with the missing values or with the other levels,
with exit 0. A missing value is still the level ``__missing__``, GAUC's user column may hold
any text, and near misses are ordinary levels. Spark's refusal: ``tests/test_domain_checks.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
duckdb = pytest.importorskip("duckdb")
import pyarrow.csv as pacsv  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from calib_jax import logs  # noqa: E402
from calib_jax.cli import main  # noqa: E402
from calib_jax.logs import loaders  # noqa: E402
from calib_jax.logs.accumulate import MISSING, OTHER  # noqa: E402
from calib_jax.logs.sql import QueryColumns, statistics_sql  # noqa: E402

N = 400


def _table(site_value: str | None = None, at: int = 7, user: str = "u") -> pa.Table:
    """Scores, labels, a field ``site`` (a, b, c; one missing value), a slice column ``day`` and
    a user column; ``site_value`` (if given) written into row ``at`` of ``site`` and ``day``."""
    rng = np.random.default_rng(0)
    p = rng.uniform(0.05, 0.95, N)
    site = np.array(["a", "b", "c"], object)[rng.integers(0, 3, N)]
    site[3] = None
    day = np.array(["d1", "d2"], object)[rng.integers(0, 2, N)]
    if site_value is not None:
        site[at] = day[at] = site_value
    return pa.table({"p": p, "q": np.clip(p + rng.normal(0, 0.05, N), 0.01, 0.99),
                     "y": (rng.random(N) < p).astype(np.int8), "site": site, "day": day,
                     "user": np.array([user, "__missing__", "__other__"], object)[rng.integers(0, 3, N)]})


def _write(t: pa.Table, path: Path) -> Path:
    (pq.write_table if path.suffix == ".parquet" else pacsv.write_csv)(t, path)
    return path


@pytest.mark.parametrize("value", [MISSING, OTHER])
@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
@pytest.mark.parametrize("engine", ["arrow", "duckdb"])
def test_every_command_refuses_a_reserved_name_in_a_level_column(tmp_path, capsys, value, suffix, engine):
    """evaluate --field, evaluate --by, compare --field and fit --field: exit 2, one line naming
    the file, the column and the value (the arrow reader also the data row), nothing written."""
    log = _write(_table(value, at=7), tmp_path / f"log{suffix}")
    before = log.read_bytes()
    model = ["--score", "p", "--label", "y"]
    report = ["--bootstrap", "0"]
    commands = {
        "field": ["evaluate", str(log), *model, "--field", "site", *report],
        "by": ["evaluate", str(log), *model, "--by", "day", *report],
        "compare": ["compare", str(log), "--score", "p", "--score", "q", "--label", "y", "--field", "site", *report],
        "fit": ["fit", str(log), *model, "--method", "sag_ps", "--field", "site"],
    }
    for what, args in commands.items():
        if what == "fit" and engine == "duckdb":
            continue  # a fit with --field reads the rows, with the arrow reader (no --engine)
        out = tmp_path / f"out_{what}"
        target = ["--save", str(out / "params.json")] if what == "fit" else ["--out", str(out), "--engine", engine]
        rc = main([*args, *target, "--quiet"])
        err = capsys.readouterr().err
        column = "day" if what == "by" else "site"
        assert rc == 2, (what, err)
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert f"{log}: column {column!r} holds the value {value!r}" in err, err
        assert ("(data row 8)" in err) == (engine == "arrow"), err
        assert not out.exists()
    assert log.read_bytes() == before


def test_the_python_api_refuses_alike_and_reads_near_misses_and_missing_values(tmp_path):
    """``calib_jax.logs`` on an in-memory table and on a file: the command's ValueError; a null is
    the level __missing__, and values that only look like the reserved names are levels."""
    for source in (_table(OTHER), _write(_table(OTHER), tmp_path / "log.parquet")):
        for engine in ("arrow", "duckdb"):
            with pytest.raises(ValueError, match="column 'site' holds the value '__other__'"):
                logs.evaluate(source, score="p", label="y", fields=["site"], engine=engine, bootstrap=0)
            with pytest.raises(ValueError, match="column 'day' holds the value '__other__'"):
                logs.slices(source, by="day", score="p", label="y", engine=engine, bootstrap=0)
    near = ["__other", "__missing__ ", "__Other__", "_other_"]
    for engine in ("arrow", "duckdb"):
        t = _table()
        site = t.column("site").to_pylist()
        site[10:14] = near
        r = logs.evaluate(t.set_column(3, "site", pa.array(site)), score="p", label="y", fields=["site"],
                          engine=engine, bootstrap=0)
        levels = dict(zip(r.fields["level"].to_pylist(), r.fields["weight"].to_pylist(), strict=True))
        assert levels[MISSING] == 1 and all(levels[v] == 1 for v in near), levels


def test_gauc_s_user_column_may_hold_the_reserved_names(tmp_path):
    """The user column is not a level column: users named __missing__ and __other__ are users
    (evaluate, compare and slices with --user, both engines give one GAUC)."""
    log = _write(_table(), tmp_path / "log.parquet")
    gauc = {}
    for engine in ("arrow", "duckdb"):
        r = logs.evaluate(log, score="p", label="y", user="user", engine=engine, bootstrap=0)
        gauc[engine] = r.value("gauc")
        c = logs.compare(log, scores=["p", "q"], label="y", user="user", engine=engine, bootstrap=0).metrics
        assert np.isfinite([v for m, v in zip(c["metric"].to_pylist(), c["value"].to_pylist(), strict=True)
                            if m == "gauc"]).all()
        s = logs.slices(log, by="day", score="p", label="y", user="user", engine=engine, bootstrap=0)
        assert s.table.num_rows == 2
    assert gauc["arrow"] == pytest.approx(gauc["duckdb"], rel=1e-12)
    t = _table()
    users = np.array(t.column("user").to_pylist(), object)
    users[users == "__missing__"] = "m"
    users[users == "__other__"] = "o"
    same = logs.evaluate(t.set_column(5, "user", pa.array(users)), score="p", label="y", user="user", bootstrap=0)
    assert same.value("gauc") == pytest.approx(gauc["arrow"], rel=1e-12)


def test_a_parameter_file_s_log_is_checked_when_applied(tmp_path, capsys):
    """fit on a clean log, then apply on a log whose field holds __missing__ as text: refused
    (the old code gave those rows the weights of the rows without a value)."""
    clean = _write(_table(), tmp_path / "fit.parquet")
    params = tmp_path / "params.json"
    assert main(["fit", str(clean), "--score", "p", "--label", "y", "--method", "sag_ps", "--field", "site",
                 "--partitions", "2", "--steps", "5", "--save", str(params), "--quiet"]) == 0
    applied = _write(_table(MISSING, at=30), tmp_path / "apply.parquet")
    rc = main(["apply", str(params), str(applied), "--out", str(tmp_path / "calibrated.parquet"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "column 'site' holds the value '__missing__' (data row 31)" in err, err
    assert not (tmp_path / "calibrated.parquet").exists()


def test_dictionary_columns_are_checked_on_the_values_they_hold(tmp_path):
    """A dictionary-encoded Parquet column whose dictionary lists __other__ unused is read; one
    that uses it is refused at its row."""
    t = _table()
    site = t.column("site").to_pylist()
    dict_type = pa.dictionary(pa.int32(), pa.string())
    unused = pa.DictionaryArray.from_arrays(pa.array([None if s is None else "abc".index(s) for s in site],
                                                     pa.int32()), pa.array(["a", "b", "c", OTHER]))
    assert unused.type == dict_type
    for engine in ("arrow", "duckdb"):
        r = logs.evaluate(t.set_column(3, "site", unused), score="p", label="y", fields=["site"], bootstrap=0,
                          engine=engine)
        assert OTHER not in r.fields["level"].to_pylist()
    idx = [None if s is None else "abc".index(s) for s in site]
    idx[20] = 3
    used = pa.DictionaryArray.from_arrays(pa.array(idx, pa.int32()), pa.array(["a", "b", "c", OTHER]))
    with pytest.raises(ValueError, match=r"holds the value '__other__' \(data row 21\)"):
        logs.evaluate(t.set_column(3, "site", used), score="p", label="y", fields=["site"], bootstrap=0,
                      engine="arrow")
    assert loaders._reserved_level_row(used) == 20


@pytest.mark.parametrize("dialect", ["duckdb", "bigquery"])
def test_the_warehouse_query_stops_on_a_reserved_name(tmp_path, dialect):
    """``calib-jax sql``'s statistics query itself stops on such a value (the BigQuery text run
    through sqlglot's DuckDB translation), and still reads a null as the level __missing__."""
    import sqlglot

    con = duckdb.connect()
    cols = QueryColumns(label="y", score="p", fields=("site",))
    from calib_jax.logs.accumulate import Settings

    for value, refused in ((None, False), (OTHER, True), (MISSING, True)):
        con.register("events", _table(value, at=9))
        q = statistics_sql(Settings(fields=("site",), n_boot=0), cols, source="events", dialect=dialect)
        if dialect == "bigquery":
            q = sqlglot.transpile(q, read="bigquery", write="duckdb")[0]
        if refused:
            with pytest.raises(duckdb.Error, match=f"column 'site' holds the value '{value}'"):
                con.sql(q).fetchall()
        else:
            levels = {r[0] for r in con.sql(f"SELECT DISTINCT level FROM ({q}) WHERE kind = 'field'").fetchall()}
            assert MISSING in levels and OTHER not in levels, levels
        con.unregister("events")


def test_the_report_s_words_are_one_message_in_every_engine():
    """The arrow reader's message and the SQL engines' come from one function."""
    m = loaders.reserved_level_message("site", OTHER, 8)
    assert m.startswith("column 'site' holds the value '__other__' (data row 8), the name a report gives to the "
                        "levels beyond --max-levels")
    assert "rows without a value" in loaders.reserved_level_message("site", MISSING)
    assert (MISSING, OTHER) == loaders.RESERVED_LEVELS
    assert json.dumps(loaders.RESERVED_LEVELS) == '["__missing__", "__other__"]'


@pytest.mark.parametrize("kind", ["string", "large_string", "string_view", "dictionary", "dictionary of views"])
def test_every_text_type_is_checked(kind):
    """Plain, large, view (polars' strings) and dictionary-encoded text; a view column used to
    stop the check with pyarrow's "no kernel matching input types" (its string kernels read no
    views), and a dictionary of views cannot even be cast to its value type."""
    views = kind in ("string_view", "dictionary of views")
    typ = pa.string_view() if views else pa.large_string() if kind == "large_string" else pa.string()
    for values, refused in ((["a", None, "__other"], False), (["a", None, OTHER], True)):
        col = pa.array(values, typ)
        if kind.startswith("dictionary"):
            col = col.dictionary_encode()
        if refused:
            with pytest.raises(ValueError, match=r"^log.csv: column 'site' holds the value '__other__' \(data row 3\)"):
                loaders.check_reserved_levels(col, "site", "log.csv")
        else:
            loaders.check_reserved_levels(col, "site", "log.csv")
    loaders.check_reserved_levels(pa.array([1, 2]), "site", "log.csv")  # numbers hold no level name


@pytest.mark.parametrize("engine", ["arrow", "duckdb"])
def test_a_late_row_of_a_realistic_log_is_found_and_named(tmp_path, engine):
    """20,000 rows read in chunks of 4,096 (the arrow reader's row count carried across chunks),
    a reserved name first at data row 15,001; the same log without it gives the report."""
    rng = np.random.default_rng(1)
    n = 20_000
    p = rng.uniform(0.02, 0.5, n)
    site = np.array([f"s{k}" for k in range(300)], object)[rng.integers(0, 300, n)]
    site[15_000] = site[19_999] = OTHER
    log = _write(pa.table({"p": p, "y": (rng.random(n) < p).astype(np.int8), "site": site}), tmp_path / "big.csv")
    at = " (data row 15001)" if engine == "arrow" else ""
    with pytest.raises(ValueError, match=re.escape(f"column 'site' holds the value '__other__'{at},")):
        logs.evaluate(log, score="p", label="y", fields=["site"], engine=engine, bootstrap=0, chunk_rows=4096)
    site[15_000] = site[19_999] = "s0"
    clean = _write(pa.table({"p": p, "y": (rng.random(n) < p).astype(np.int8), "site": site}), tmp_path / "ok.csv")
    r = logs.evaluate(clean, score="p", label="y", fields=["site"], engine=engine, bootstrap=0, chunk_rows=4096)
    levels = r.fields["level"].to_pylist()  # the report's 50 heaviest of the 300 levels
    assert len(levels) == 50 and all(v.startswith("s") for v in levels)
