"""No output of a ``calib-jax`` command lands on one of its inputs, every CSV it writes is inert
to spreadsheets, and ``apply`` copies the log's columns unchanged.

* The sweep: each command (evaluate on both engines, ``--by``, ``--state-only``, merge, compare,
  fit on its cheap engines, apply, simulate) is run once into a scratch folder, and every file it wrote
  (what appeared, subfolders such as ``models/`` included, plus what it wrote and removed, seen
  at the writer) becomes a trap: the input placed under that name inside ``--out`` must make
  the command stop with exit 2 and one line naming the file, the input byte-identical and
  nothing else written.
* Links: a symbolic or hard link to the log under an output's name is the log.
* Folders and patterns: a file that a lake folder or a glob resolves to is an input too.
* A scan of ``calib_jax/cli``'s sources: no write there bypasses the guarded writer.
* Hypothesis: slice values and column names that start like a formula (``=``, ``+``, ``-``,
  ``@``, tab, CR) reach ``slices.csv``, ``compare.csv`` and the report's CSVs inert.
* ``apply``: float32, decimal, integer, text, timestamp and boolean columns keep their type
  (Parquet) and a CSV cell its text.
"""

from __future__ import annotations

import ast
import contextlib
import csv
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402

import calib_jax.io as cio  # noqa: E402
from calib_jax.cli import main  # noqa: E402

CLI = Path(cio.__file__).parent / "cli"
FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _csv_log(path: Path, n: int = 300, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.02, 0.6, n)
    q = np.clip(p * rng.uniform(0.8, 1.2, n), 0.01, 0.99)
    y = (rng.uniform(size=n) < p).astype(int)
    site = rng.integers(0, 3, n)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("p,q,y,site\n" + "".join(f"{float(a)!r},{float(b)!r},{int(c)},s{d}\n"
                                             for a, b, c, d in zip(p, q, y, site)))
    return path


def _run(capsys, argv: list[str]) -> tuple[int, str]:
    rc = main(argv)
    return rc, capsys.readouterr().err


# --------------------------------------------------------------------------- the sweep
_COLS = ["--format", "csv", "--score", "p", "--label", "y"]
_EVAL = ["evaluate", "{log}", *_COLS, "--bootstrap", "0", "--quiet", "--out", "{out}"]
_FIT = ["fit", "{log}", *_COLS, "--method", "platt", "--save", "{out}"]
#: name -> (command line with {log}, {out}, {params}, {state}; the inputs placed as traps;
#: whether --out is a folder)
CASES = {
    "evaluate": ([*_EVAL, "--field", "site"], ("log",), True),
    "evaluate-arrow": ([*_EVAL, "--field", "site", "--engine", "arrow"], ("log",), True),
    "evaluate-by": ([*_EVAL, "--by", "site"], ("log",), True),
    "evaluate-state-only": ([*_EVAL, "--state-only"], ("log",), True),
    "evaluate-state-only-arrow": ([*_EVAL, "--state-only", "--engine", "arrow"], ("log",), True),
    "merge": (["merge", "{state}", "--out", "{out}"], ("state",), True),
    "compare": (["compare", "{log}", "--format", "csv", "--score", "p", "--score", "q", "--label", "y",
                 "--field", "site", "--bootstrap", "0", "--quiet", "--out", "{out}"], ("log",), True),
    "fit": (_FIT, ("log",), False),
    "fit-duckdb": ([*_FIT, "--engine", "duckdb"], ("log",), False),
    "fit-arrow": ([*_FIT, "--engine", "arrow"], ("log",), False),
    "apply": (["apply", "{params}", "{log}", "--format", "csv", "--quiet", "--out", "{out}"], ("log", "params"),
              False),
    "simulate": (["simulate", "--out", "{out}"], (), False),  # reads nothing: its one output is declared
}


def _argv(template: list[str], **paths: Path) -> list[str]:
    return [str(paths[t[1:-1]]) if t.startswith("{") else t for t in template]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A CSV log, a parameter file fitted on it and a state of ``evaluate --state-only``."""
    d = tmp_path_factory.mktemp("inputs")
    log = _csv_log(d / "log.csv")
    assert main(["fit", str(log), *_COLS, "--method", "platt", "--engine", "arrow", "--save",
                 str(d / "params.json")]) == 0
    assert main(["evaluate", str(log), *_COLS, "--bootstrap", "0", "--quiet", "--state-only", "--out",
                 str(d / "part")]) == 0
    return {"log": log, "params": d / "params.json", "state": d / "part" / "state.npz"}


@contextlib.contextmanager
def _targets_seen(monkeypatch):
    """Every path given to the project's atomic writer (written, or written and removed)."""
    seen: list[Path] = []
    real = cio.atomic_output

    @contextlib.contextmanager
    def spy(path):
        seen.append(Path(path))
        with real(path) as tmp:
            yield tmp

    monkeypatch.setattr(cio, "atomic_output", spy)
    yield seen
    monkeypatch.setattr(cio, "atomic_output", real)


def _files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file() or p.is_symlink()}


@pytest.mark.parametrize("case", sorted(CASES))
def test_no_output_of_any_command_lands_on_an_input(case, inputs, tmp_path, capsys, monkeypatch):
    template, roles, folder = CASES[case]
    if case == "simulate":  # a cheap world: the simulator is tested elsewhere, its writer here
        from calib_jax.data import simulator as sim

        def tiny_log(cfg, *, seed, exposure, path):
            table = pa.table({"click": [0, 1], "pctr": [0.2, 0.7]})
            sim.write_log(table, path)
            return table

        monkeypatch.setattr(sim, "simulate_log", tiny_log)
    scratch = tmp_path / "scratch"
    out = scratch if folder else scratch / "out.csv"
    with _targets_seen(monkeypatch) as seen:
        rc, err = _run(capsys, _argv(template, out=out, **inputs))
    assert rc == 0, err
    written = {p.relative_to(scratch) for p in {*seen, *_files_under(scratch)}}
    assert written and (folder or written == {Path("out.csv")}), written
    failures = []
    for k, rel in enumerate(sorted(written, key=str)):
        for role in roles:
            trap_dir = tmp_path / f"trap{k}_{role}"
            trap = trap_dir / rel
            trap.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(inputs[role], trap)
            before = trap.read_bytes()
            paths = {**inputs, role: trap, "out": trap_dir if folder else trap}
            rc, err = _run(capsys, _argv(template, **paths))
            lines = err.strip().splitlines()
            problems = [what for what, bad in (
                (f"exit {rc}", rc != 2),
                (f"{len(lines)} lines on stderr", len(lines) != 1),
                ("the message does not name the file", str(trap) not in err or "would be overwritten" not in err),
                ("the input changed", not trap.is_file() or trap.read_bytes() != before),
                ("files were written", _files_under(trap_dir) != {trap}),
            ) if bad]
            if problems:
                failures.append(f"{role} as {rel}: {', '.join(problems)}")
    assert not failures, f"{case}: " + "; ".join(failures)


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
@pytest.mark.parametrize("name", ["tests.csv", "models/1_q/tests.md"])
def test_a_link_to_the_log_under_an_output_name_is_the_log(inputs, tmp_path, capsys, link, name):
    log = shutil.copyfile(inputs["log"], tmp_path / "log.csv")
    before = log.read_bytes()
    out = tmp_path / "out"
    trap = out / name
    trap.parent.mkdir(parents=True)
    os.symlink(log, trap) if link == "symlink" else os.link(log, trap)
    argv = (["evaluate", str(log), *_COLS, "--bootstrap", "0", "--quiet", "--out", str(out)] if "/" not in name
            else ["compare", str(log), "--score", "p", "--score", "q", "--label", "y", "--bootstrap", "0",
                  "--quiet", "--out", str(out)])
    rc, err = _run(capsys, argv)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "would be overwritten" in err and str(trap) in err
    assert log.read_bytes() == before and _files_under(out) == {trap}


@pytest.mark.parametrize("command", ["evaluate", "compare"])
@pytest.mark.parametrize("spec", ["folder", "pattern"])
def test_every_file_a_folder_or_pattern_resolves_to_is_an_input(inputs, tmp_path, capsys, command, spec):
    """A lake of CSV parts whose report folder lies inside it: the part named like a report file
    is one of the log's files, and the command stops before reading it."""
    lake = tmp_path / "lake"
    _csv_log(lake / "day=1" / "a.csv", seed=1)
    out = lake / "day=2"
    name = "tests.csv" if command == "evaluate" else "compare.csv"
    part = _csv_log(out / name, seed=2)
    before = part.read_bytes()
    log = str(lake) if spec == "folder" else str(lake / "*" / "*.csv")
    argv = ([command, log, "--score", "p", "--label", "y", "--bootstrap", "0", "--quiet", "--out", str(out)]
            + (["--score", "q"] if command == "compare" else []))
    rc, err = _run(capsys, argv)
    assert rc == 2 and "would be overwritten" in err and str(part) in err
    assert part.read_bytes() == before and _files_under(out) == {part}


# --------------------------------------------------------------------------- the writer is the only way out
#: methods that write or remove a file whatever their object (``Path``, NumPy, pandas, pyarrow)
_WRITING_METHODS = {"write_text", "write_bytes", "touch", "unlink", "rename", "tofile", "to_csv", "to_parquet",
                    "write_feather", "write_dataset", "saveAsTable", "insertInto", "symlink_to", "hardlink_to"}
#: calls that write to a file they are given (allowed only into an in-memory buffer or the
#: temporary file of ``calib_jax.io.atomic_output``)
_WRITING_TO_A_FILE = {"savefig", "ParquetWriter", "CSVWriter", "write_table", "write_csv", "table_writer", "imsave",
                      "print_png", "savez", "savez_compressed", "save", "savetxt"}
#: functions of os and shutil that change the file system
_OS_WRITES = {"replace", "rename", "renames", "remove", "unlink", "link", "symlink", "open", "truncate", "copy",
              "copy2", "copyfile", "copytree", "move", "rmtree"}
#: known writes that are no output: (file, call) -> why
_NOT_OUTPUTS = {("engines.py", "os.symlink"): "plain-named links to the log's files in DuckDB's private "
                                              "temporary folder, removed with the connection"}


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _bypasses(source: str, where: str) -> list[str]:
    """The writes of one source file of ``calib_jax/cli`` that do not go through the guarded
    writer (``calib_jax.io``'s writers, or ``calib_jax.logs.common.write_csv`` for a CSV)."""
    tree = ast.parse(source)
    buffers = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
               and _name(node.value.func) in ("BytesIO", "StringIO") for t in node.targets if isinstance(t, ast.Name)}
    temps = {item.optional_vars.id for node in ast.walk(tree) if isinstance(node, ast.With) for item in node.items
             if isinstance(item.context_expr, ast.Call) and _name(item.context_expr.func) == "atomic_output"
             and isinstance(item.optional_vars, ast.Name)}
    # the one CSV writer of the commands hands its inert rows to calib_jax.io.write_csv
    csv_writer = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == "write_csv"
                  and where.endswith("cli/common.py") for n in ast.walk(f)}
    found = []
    for node in ast.walk(tree):
        at = f"{where}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.search(r"\bCOPY\b[\s\S]*\bTO\b",
                                                                                         node.value):
            found.append(f"{at} SQL COPY ... TO")
        if not isinstance(node, ast.Call):
            continue
        func, name = node.func, _name(node.func)
        owner = _name(func.value) if isinstance(func, ast.Attribute) else ""
        first = node.args[0] if node.args else None
        if (Path(where).name, f"{owner}.{name}") in _NOT_OUTPUTS:
            continue
        if name == "open" and not owner:
            mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"),
                                                                 None)
            if mode is not None and not (isinstance(mode, ast.Constant) and set(str(mode.value)) <= set("rbt")):
                found.append(f"{at} open(..., {ast.unparse(mode)})")
        elif owner in ("os", "shutil"):
            if name in _OS_WRITES:
                found.append(f"{at} {owner}.{name}")
        elif name in _WRITING_METHODS:
            found.append(f"{at} .{name}(...)")
        elif name in _WRITING_TO_A_FILE:
            if isinstance(first, ast.Name) and first.id in buffers | temps:
                continue  # into memory, or into the temporary file of the guarded atomic writer
            if name == "write_csv" and (not owner or (owner == "cio" and id(node) in csv_writer)):
                continue  # calib_jax.logs.common.write_csv, and its own call of calib_jax.io.write_csv
            if name == "save" and owner not in ("np", "numpy", "jnp"):
                continue  # a parameter file's save (calib_jax.io.write_json), not numpy.save
            found.append(f"{at} {ast.unparse(func)}({ast.unparse(first) if first else ''}, ...)")
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute) and func.value.attr == "write":
            found.append(f"{at} a Spark writer (.write.{name})")
    return found


#: the scan's own check: each way of writing past the writer is caught, a buffer is not
_PROBES = {
    "open(p, 'w')": True, "open(p, mode='ab')": True, "open(p)": False, "open(p, 'rb')": False,
    "p.write_text('x')": True, "p.unlink()": True, "fig.savefig(p)": True, "np.savez(p, a=1)": True,
    "pq.write_table(t, p)": True, "con.execute(\"COPY t TO 'x.csv'\")": True, "df.write.parquet(p)": True,
    "os.replace(a, b)": True, "shutil.rmtree(d)": True, "cio.write_csv(p, [], [])": True,
    "pcsv.write_csv(t, p)": True, "buf = io.BytesIO(); fig.savefig(buf)": False,
    "with cio.atomic_output(p) as tmp: table_writer(tmp, '.csv', s)": False,
    "cio.atomic_write_text(p, 'x')": False, "write_csv(p, [], [])": False, "P.save(p, spec)": False,
}


def test_no_write_in_calib_jax_cli_bypasses_the_guarded_writer():
    wrong = [code for code, caught in _PROBES.items() if bool(_bypasses(code + "\n", "calib_jax/cli/x.py")) != caught]
    assert not wrong, f"the scan misjudges {wrong}"
    found = [hit for path in sorted(CLI.rglob("*.py"))
             for hit in _bypasses(path.read_text(), path.relative_to(CLI.parent.parent).as_posix())]
    assert not found, "writes that do not go through calib_jax.io's guarded writer: " + "; ".join(found)


# --------------------------------------------------------------------------- CSVs inert to spreadsheets
_hostile = st.builds(lambda c, rest: c + rest, st.sampled_from(FORMULA),
                     st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E) | st.sampled_from("é\u3042"),
                             max_size=6))


def _cells(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _inert(path: Path) -> list[str]:
    """The cells of a CSV that a spreadsheet would run as a formula (a number is a number)."""
    return [c for row in _cells(path) for c in row if c.startswith(FORMULA) and not _is_number(c)]


# three commands per example: no shrinking (each step would rerun them; a failing example is
# short already)
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          phases=(Phase.explicit, Phase.reuse, Phase.generate))
@given(names=st.lists(_hostile, min_size=2, max_size=2, unique=True).filter(
    lambda n: not {"p", "y", n[0] + "|f"} & set(n)))
# a model named "=*.csv" gets a folder models/1__.csv/: the scan reads files, not folders
@example(names=["\t", "=*.csv"])
def test_formula_text_reaches_every_csv_inert(names, tmp_path_factory, capsys):
    a, b = names
    field = a + "|f"
    d = tmp_path_factory.mktemp("formulas")
    rng = np.random.default_rng(0)
    n = 240
    p = rng.uniform(0.05, 0.6, n)
    log = d / "log.parquet"
    pq.write_table(pa.table({"p": p, "y": (rng.uniform(size=n) < p).astype(np.int8), a: p,
                             b: np.clip(p * 1.1, 0, 1), field: np.array([a, b, "plain"])[np.arange(n) % 3]}), log)
    common = ["--label", "y", "--bootstrap", "0", "--quiet"]
    assert main(["compare", str(log), f"--score={a}", f"--score={b}", f"--field={field}", *common,
                 "--out", str(d / "c")]) == 0
    assert main(["evaluate", str(log), "--score", "p", f"--by={field}", *common, "--out", str(d / "s")]) == 0
    assert main(["evaluate", str(log), "--score", "p", f"--field={field}", *common, "--out", str(d / "r")]) == 0
    capsys.readouterr()
    csvs = [d / "c" / "compare.csv", d / "s" / "slices.csv", *sorted((d / "r").glob("*.csv")),
            *sorted(p for p in (d / "c" / "models").rglob("*.csv") if p.is_file()), d / "c" / "fields.csv"]
    assert {p: _inert(p) for p in csvs if _inert(p)} == {}
    # the text itself is kept, behind one apostrophe
    compare, slices, fields = _cells(csvs[0]), _cells(csvs[1]), _cells(d / "r" / "fields.csv")
    assert {"'" + a, "'" + b} <= {r[compare[0].index(k)] for r in compare[1:] for k in ("a", "b")}
    assert {"'" + a, "'" + b, "plain"} == {r[slices[0].index("slice")] for r in slices[1:]}
    assert {("'" + field, "'" + a), ("'" + field, "'" + b)} <= {(r[0], r[1]) for r in fields[1:]}
    per_field = _cells(d / "c" / "fields.csv")  # compare --field: the field and the models, inert
    assert {r[0] for r in per_field[1:]} == {"'" + field}
    assert {"'" + a, "'" + b} == {r[per_field[0].index(k)] for r in per_field[1:] for k in ("a", "b")}


# --------------------------------------------------------------------------- apply copies the log's columns
def test_apply_keeps_every_parquet_column_type_and_value(tmp_path, capsys):
    rng = np.random.default_rng(3)
    n = 200
    p = rng.uniform(0.05, 0.6, n).astype(np.float32)
    import decimal

    table = pa.table({
        "p": pa.array(p, pa.float32()),
        "y": pa.array((rng.uniform(size=n) < p).astype(np.int8)),
        "d": pa.array([decimal.Decimal(f"{v:.4f}") for v in p], pa.decimal128(9, 4)),
        "i": pa.array(rng.integers(-5, 5, n), pa.int32()),
        "s": pa.array([f"=s{k % 4}" for k in range(n)]),
        "t": pa.array(np.arange(n).astype("datetime64[ms]")),
        "b": pa.array(rng.uniform(size=n) < 0.5),
    })
    log = tmp_path / "log.parquet"
    pq.write_table(table, log)
    for score in ("p", "d"):
        params = tmp_path / f"{score}.json"
        assert main(["fit", str(log), "--score", score, "--label", "y", "--method", "platt", "--engine", "arrow",
                     "--save", str(params)]) == 0
        out = tmp_path / f"cal_{score}.parquet"
        assert main(["apply", str(params), str(log), "--out", str(out), "--quiet", "--chunk-rows", "64"]) == 0
        got = pq.read_table(out)
        assert got.column_names == [*table.column_names, "calibrated"]
        assert got.schema.field("calibrated").type == pa.float64()
        for name in table.column_names:
            assert got.schema.field(name).type == table.schema.field(name).type, (score, name)
        assert got.select(table.column_names).equals(table)
    capsys.readouterr()


def test_apply_keeps_every_csv_cell_as_written(tmp_path, capsys):
    rng = np.random.default_rng(4)
    n = 150
    p = rng.uniform(0.05, 0.6, n)
    rows = [[f"{v:.2f}0", "1e-1" if k % 7 == 0 else f"{v:.3g}", str(int(u < v)), f"00{k % 3}", "" if k % 5 else "NA"]
            for k, (v, u) in enumerate(zip(p, rng.uniform(size=n)))]
    log = tmp_path / "log.csv"
    with open(log, "w", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows([["p", "f", "y", "code", "note"], *rows])
    params = tmp_path / "m.json"
    assert main(["fit", str(log), "--score", "p", "--label", "y", "--method", "platt", "--engine", "arrow",
                 "--save", str(params)]) == 0
    out = tmp_path / "cal.csv"
    assert main(["apply", str(params), str(log), "--out", str(out), "--quiet", "--chunk-rows", "40"]) == 0
    got = _cells(out)
    assert got[0] == ["p", "f", "y", "code", "note", "calibrated"]
    assert [r[:-1] for r in got[1:]] == rows
    assert all(0 <= float(r[-1]) <= 1 for r in got[1:])
    capsys.readouterr()
