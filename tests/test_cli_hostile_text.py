"""The ``calib-jax`` contract against forged statistics, hostile text, signals and extreme weights.

Four classes of failure found by a hostile-input audit, one regression test per rule:

* aggregates (``evaluate --aggregates``) and saved states (``merge``, ``--resume``) are checked
  for consistency, not only for their shape: sums that no log can have (a negative Brier
  score, a mean score outside its bin, more weight than rows...) are refused with one line
  naming the file, the column or array and the row or cell;
* text from the user's files (column names, field names, file names) is inert wherever it is
  shown: no control or escape sequence reaches the terminal, and a ``$`` in a plot title is a
  dollar sign, not mathtext;
* Ctrl-C (SIGINT) and SIGTERM end any command with exit 130 and the one line
  ``calib-jax <command>: interrupted``, never a traceback, and leave nothing that a next run
  would trust by mistake (a rerun gives the report of an uninterrupted run);
* weights whose total leaves [1e-12, 1e18] (overflow to inf, underflow to 0 in float32) are
  refused naming the file and the weight column; within the range they are exact.
"""

from __future__ import annotations

import csv
import gc
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402
from test_cli_hostile import _edit_state  # noqa: E402 - the same state editor as the first sweep

from calib_jax.cli import main  # noqa: E402
from calib_jax.cli.commands import INCOMPLETE  # noqa: E402
from calib_jax.cli.commands import evaluate as evaluate_command  # noqa: E402
from calib_jax.logs.common import inert  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def _log(path: Path, n: int = 400, seed: int = 0, *, scale: float = 1.0, header: str = "p,y,site,w",
         oracle: bool = False) -> Path:
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.02, 0.6, n)
    y = (rng.uniform(size=n) < p).astype(int)
    w = scale * rng.uniform(0.5, 2.0, n)
    site = rng.integers(0, 3, n)
    pi = np.clip(p + rng.normal(0, 0.05, n), 0, 1)
    rows = "".join(f"{float(a)!r},{int(b)},s{c},{float(d)!r}" + (f",{float(e)!r}" if oracle else "") + "\n"
                   for a, b, c, d, e in zip(p, y, site, w, pi))
    path.write_text(header + (",pi" if oracle else "") + "\n" + rows)
    return path


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main([*argv, *(["--quiet"] if argv[0] in ("evaluate", "apply") else [])])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _one_line(err: str) -> None:
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err and "Warning" not in err, err


def _metrics(out: Path) -> dict:
    rep = json.loads((out / "report.json").read_text())
    return {m["name"]: (m["value"], m["lo"], m["hi"]) for m in rep["metrics"]}


# --------------------------------------------------------------------------- 1. consistent aggregates
@pytest.fixture(scope="module")
def aggregates(tmp_path_factory) -> dict[str, Path]:
    """Exports of the statistics query of a log with weights and a field, and of one with an
    oracle column (as a warehouse would write them)."""
    duckdb = pytest.importorskip("duckdb")
    d = tmp_path_factory.mktemp("agg")
    out = {}
    for name, oracle in (("agg.csv", False), ("agg_oracle.csv", True)):
        log = _log(d / f"log_{name}", oracle=oracle)
        cols = ["--score", "p", "--label", "y", "--weight", "w", "--field", "site", *(["--oracle", "pi"] * oracle)]
        buf = io.StringIO()
        old, sys.stdout = sys.stdout, buf
        try:
            assert main(["sql", "--dialect", "duckdb", "--table", f"read_csv_auto('{log}')", *cols]) == 0
        finally:
            sys.stdout = old
        duckdb.sql(buf.getvalue()).write_csv(str(d / name))
        out[name] = d / name
    return out


def _forge(src: Path, dst: Path, edit) -> Path:
    with open(src, newline="") as f:
        rows = list(csv.DictReader(f))
    edit(rows)
    with open(dst, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return dst


def _cells(rows, kind: str = "cell", y: str | None = None) -> list[dict]:
    return [r for r in rows if r["kind"] == kind and r["bad"] == "0" and float(r["sv"]) > 0
            and (y is None or r["y"] == y)]


def _scale(row: dict, col: str, factor: float = 1.0, add: float = 0.0) -> None:
    row[col] = repr(float(row[col]) * factor + add * float(row["sv"]))


def _negate_losses(rows):
    for r in _cells(rows):
        _scale(r, "sbrier", -1.0)
        _scale(r, "snll", -1.0)


def _fields_twice(rows):
    r = _cells(rows, "field")[0]
    for c in ("n", "sv", "svp", "svpp", "snll"):
        r[c] = str(int(r[c]) * 2) if c == "n" else repr(2 * float(r[c]))


@pytest.mark.parametrize("edit, column", [
    (_negate_losses, "'sbrier'"),  # a negative Brier score and NE
    (lambda rows: _scale(_cells(rows)[0], "svp", 1.5), "'svp'"),  # mean score outside its bin
    (lambda rows: _cells(rows)[0].update(n="0"), "'sv'"),  # a weight in a cell without rows
    (lambda rows: _scale(_cells(rows)[0], "svpp", 1.5), "'svpp'"),  # sum of p^2 above the sum of p
    (lambda rows: _scale(_cells(rows)[0], "svo", add=3.0), "'svo'"),  # mean logit outside its bin
    (lambda rows: _scale(_cells(rows, y="1")[0], "smae", add=0.2), "'smae'"),  # |y - p| that p does not give
    (lambda rows: _scale(_cells(rows)[0], "snll", 0.0), "'snll'"),  # a log loss below its cell's bound
    (lambda rows: _scale(_cells(rows)[0], "sbrier", add=0.5), "'sbrier'"),  # (y - p)^2 that p does not give
])
def test_forged_aggregates_are_refused_naming_the_file_the_column_and_the_row(aggregates, tmp_path, capsys,
                                                                              edit, column):
    bad = _forge(aggregates["agg.csv"], tmp_path / "forged.csv", edit)
    rc, _, err = _run(capsys, "evaluate", "--aggregates", str(bad), "--out", str(tmp_path / "o"), "--bootstrap", "0")
    assert rc == 2, err
    _one_line(err)
    assert str(bad) in err and column in err and "data row" in err
    assert not (tmp_path / "o").exists()


def test_field_rows_must_add_up_to_the_cells(aggregates, tmp_path, capsys):
    bad = _forge(aggregates["agg.csv"], tmp_path / "forged.csv", _fields_twice)
    rc, _, err = _run(capsys, "evaluate", "--aggregates", str(bad), "--out", str(tmp_path / "o"), "--bootstrap", "0")
    assert rc == 2 and "field 'site' do not add up" in err and str(bad) in err, err
    _one_line(err)


@pytest.mark.parametrize("edit, match", [
    (lambda rows: _scale(_cells(rows)[0], "spi", 2.0, add=1.0), "'spi'"),  # mean oracle CTR above 1
    (lambda rows: _scale(_cells(rows)[0], "soracle_brier", add=0.3), "'soracle_brier'"),
    (lambda rows: next(r for r in rows if r["kind"] == "gap").update(sv="1.5"), "'gap' rows"),  # |pi - p| > 1
])
def test_forged_oracle_aggregates_are_refused(aggregates, tmp_path, capsys, edit, match):
    bad = _forge(aggregates["agg_oracle.csv"], tmp_path / "forged.csv", edit)
    rc, _, err = _run(capsys, "evaluate", "--aggregates", str(bad), "--out", str(tmp_path / "o"), "--bootstrap", "0")
    assert rc == 2 and match in err and str(bad) in err, err
    _one_line(err)


def test_untouched_aggregates_still_evaluate(aggregates, tmp_path, capsys):
    for name in ("agg.csv", "agg_oracle.csv"):
        rc, _, err = _run(capsys, "evaluate", "--aggregates", str(aggregates[name]), "--out", str(tmp_path / name),
                          "--bootstrap", "10")
        assert rc == 0, err


def _first_cell(a: dict) -> int:
    return int(np.flatnonzero(a["cell_n"] > 0)[0])


def _negative_brier_cell(info, a):
    a["cell"][np.flatnonzero(a["cell_n"] > 0), 4] *= -1.0


def _clicks_above_weight(info, a):
    a["scal"][0, 1] = 2.0 * a["scal"][0, 0]


@pytest.mark.parametrize("scheme, edit, match", [
    ("cells", _negative_brier_cell, "array 'cell' sum 'sbrier'"),
    ("rows", _clicks_above_weight, "array 'scal' (replicate 0) sum 'wy'"),
])
def test_merge_refuses_forged_states(tmp_path, capsys, scheme, edit, match):
    states = []
    for name, seed in (("a", 1), ("b", 2)):
        rc, _, err = _run(capsys, "evaluate", str(_log(tmp_path / f"{name}.csv", seed=seed)), "--score", "p",
                          "--label", "y", "--weight", "w", "--out", str(tmp_path / name), "--state-only",
                          "--bootstrap", "10", "--bootstrap-scheme", scheme)
        assert rc == 0, err
        states.append(tmp_path / name / "state.npz")
    bad = _edit_state(states[1], tmp_path / "forged.npz", edit)
    rc, _, err = _run(capsys, "merge", str(states[0]), str(bad), "--out", str(tmp_path / "m"))
    assert rc == 2 and str(bad) in err and match in err, err
    _one_line(err)
    assert not (tmp_path / "m" / "report.json").exists()


def test_resume_refuses_a_forged_checkpoint(tmp_path, capsys):
    log = _log(tmp_path / "log.csv", n=600)
    args = ["evaluate", str(log), "--score", "p", "--label", "y", "--out", str(tmp_path / "o"), "--bootstrap", "10",
            "--engine", "arrow", "--chunk-rows", "200"]
    rc, _, err = _run(capsys, *args, "--stop-after-chunks", "1")
    assert rc == 3, err
    ckpt = tmp_path / "o" / ".checkpoint.npz"
    _edit_state(ckpt, ckpt, lambda info, a: a["cell"].__setitem__((_first_cell(a), 1), 3 * a["cell"][_first_cell(a), 0]))
    rc, _, err = _run(capsys, *args, "--resume")
    assert rc == 2 and str(ckpt) in err and "'svp'" in err, err
    _one_line(err)


# --------------------------------------------------------------------------- 4. extreme weights
@pytest.mark.parametrize("engine", ["arrow", "duckdb"])
@pytest.mark.parametrize("scale", [1e300, 1e-300])
def test_weights_whose_total_leaves_the_range_are_refused_naming_file_and_column(tmp_path, capsys, engine, scale):
    if engine == "duckdb":
        pytest.importorskip("duckdb")
    log = _log(tmp_path / "huge.csv", scale=scale)
    rc, _, err = _run(capsys, "evaluate", str(log), "--score", "p", "--label", "y", "--weight", "w", "--field",
                      "site", "--engine", engine, "--out", str(tmp_path / "o"), "--bootstrap", "10")
    assert rc == 2, err
    _one_line(err)
    assert str(log) in err and "column 'w'" in err and "[1e-12, 1e+18]" in err


def test_a_merge_whose_total_overflows_is_refused(tmp_path, capsys):
    states = []
    for name, seed in (("a", 1), ("b", 2)):
        log = _log(tmp_path / f"{name}.csv", seed=seed, scale=1e306)
        rc, _, err = _run(capsys, "evaluate", str(log), "--score", "p", "--label", "y", "--weight", "w", "--out",
                          str(tmp_path / name), "--state-only", "--bootstrap", "0", "--engine", "arrow")
        assert rc == 2 and "column 'w'" in err, err  # each part already overflows: refused before it is saved
        _one_line(err)
    for name, seed in (("a", 1), ("b", 2)):
        log = _log(tmp_path / f"{name}.csv", n=100, seed=seed, scale=6e15)  # each part ~7.5e17, the whole ~1.5e18
        rc, _, err = _run(capsys, "evaluate", str(log), "--score", "p", "--label", "y", "--weight", "w", "--out",
                          str(tmp_path / name), "--state-only", "--bootstrap", "0", "--engine", "arrow")
        assert rc == 0, err
        states.append(tmp_path / name / "state.npz")
    rc, _, err = _run(capsys, "merge", *map(str, states), "--out", str(tmp_path / "m"))
    assert rc == 2 and "the merged parts" in err and "column 'w'" in err, err
    _one_line(err)


@pytest.mark.parametrize("scale", [1e-9, 1e15])
def test_weights_within_the_range_give_the_metrics_of_unit_weights(tmp_path, capsys, scale):
    outs = []
    for s in (1.0, scale):
        log = _log(tmp_path / f"w{s}.csv", scale=s)
        out = tmp_path / f"o{s}"
        rc, _, err = _run(capsys, "evaluate", str(log), "--score", "p", "--label", "y", "--weight", "w",
                          "--out", str(out), "--bootstrap", "0")
        assert rc == 0 and "Warning" not in err, err
        outs.append(_metrics(out))
    for name in ("brier", "nll", "ne", "auc", "ctr", "mean_score", "calibration_ratio", "mce"):
        assert outs[1][name][0] == pytest.approx(outs[0][name][0], rel=1e-9), name


# --------------------------------------------------------------------------- 2. inert text
def test_inert_escapes_every_unprintable_character():
    assert inert("plain text: ok") == "plain text: ok"
    assert inert("a\x1b[2Jb\x07c\x9bd") == "a\\x1b[2Jb\\x07c\\x9bd"
    assert inert("rtl\u202eoverride\u200bzw") == "rtl\\u202eoverride\\u200bzw"
    assert inert("bad byte " + b"\xff".decode("utf-8", "surrogateescape")) == "bad byte \\xff"
    assert inert("two\nlines") == "two\\x0alines" and inert("two\nlines", lines=True) == "two\nlines"
    assert all(c.isprintable() for c in inert("".join(map(chr, range(0x2100)))))


def test_control_characters_in_a_file_name_do_not_reach_the_terminal(tmp_path, capsys):
    log = _log(tmp_path / "log\x1b[2J\u202e\x07.csv")
    rc, _, err = _run(capsys, "evaluate", str(log), "--score", "p", "--label", "nope", "--out", str(tmp_path / "o"))
    assert rc == 2, err
    _one_line(err)
    assert "\x1b" not in err and "\u202e" not in err and "\x07" not in err
    assert "log\\x1b[2J\\u202e\\x07.csv" in err
    rc, out, err = _run(capsys, "evaluate", str(log), "--score", "p", "--label", "y", "--out", str(tmp_path / "o"),
                        "--bootstrap", "0")
    assert rc == 0, err
    assert "\x1b" not in out + err and "log\\x1b[2J" in out


def test_control_characters_in_a_column_name_do_not_reach_the_terminal(tmp_path, capsys):
    log = _log(tmp_path / "log.csv", header="p,y,s\x1b]0;owned\x07ite,w")
    rc, out, err = _run(capsys, "evaluate", str(log), "--score", "p", "--label", "y", "--field", "s\x1b]0;owned\x07ite",
                        "--out", str(tmp_path / "o"), "--bootstrap", "0")
    assert rc == 0, err
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert "s\\x1b]0;owned\\x07ite" in out  # the summary names the field


def test_argument_errors_are_inert(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["evaluate", str(tmp_path / "x.csv"), "--bogus\x1b[2J"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "--bogus\\x1b[2J" in err


def test_a_warning_of_the_command_is_one_inert_line(tmp_path):
    """A warning the command shows (here SAG's fail-safe fallback on groups without clicks) is
    one line ``calib-jax fit: warning: ...``, not Python's ``<file>:<line>: <Category>: ...``
    followed by a line of the program's source (as before 2026-12-06)."""
    rng = np.random.default_rng(4)
    n = 600
    p = rng.uniform(0.02, 0.3, n)
    y = np.zeros(n, int)
    y[:12] = 1  # clicks on the first rows only: most SAG groups have none
    (tmp_path / "log.csv").write_text("p,y,f\x1b[2J\n" + "".join(f"{float(a)!r},{b},{i % 7}\n" for i, (a, b) in
                                                                 enumerate(zip(p, y))))
    r = subprocess.run([sys.executable, "-m", "calib_jax", "fit", "log.csv", "--score", "p", "--label", "y",
                        "--method", "sag_ps", "--feature", "f\x1b[2J", "--save", "sag.json"], capture_output=True,
                       text=True, timeout=300, cwd=tmp_path, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert lines and all(line.startswith("calib-jax fit: warning: ") for line in lines), r.stderr
    assert any("too few events" in line for line in lines), r.stderr
    assert "Warning:" not in r.stderr and "sys.exit" not in r.stderr and "\x1b" not in r.stderr

def test_undecodable_bytes_of_a_file_name_are_shown_not_raised(tmp_path, capsys):
    name = os.fsdecode(b"log\xff.csv")
    log = _log(tmp_path / name)
    rc, out, err = _run(capsys, "evaluate", str(log), "--score", "p", "--label", "y", "--out", str(tmp_path / "o"),
                        "--bootstrap", "0")
    assert rc == 0, err
    assert "log\\xff.csv" in out
    out.encode("utf-8")  # printable on a strict UTF-8 terminal


def test_a_dollar_sign_in_the_log_name_is_not_mathtext(tmp_path, capsys):
    log = _log(tmp_path / "lo$\\frac{$g.csv")
    rc, _, err = _run(capsys, "evaluate", str(log), "--score", "p", "--label", "y", "--out", str(tmp_path / "o"),
                      "--bootstrap", "0")
    assert rc == 0, err
    assert (tmp_path / "o" / "reliability.png").stat().st_size > 0 and not (tmp_path / "o" / INCOMPLETE).exists()


def test_plot_titles_and_labels_show_dollar_signs_as_given():
    from calib_jax.plotting import plt
    from calib_jax.plotting.grouping import plot_ablation
    from calib_jax.plotting.heatmap import annotated_heatmap, rho_curves
    from calib_jax.plotting.reliability import reliability_diagram

    hostile = r"lo$\frac{$g"
    figs = [reliability_diagram([0.1, 0.9], [0, 1], n_bins=2, title=hostile)[0],
            annotated_heatmap(np.eye(2), [hostile, "b"], title=hostile, caption=hostile, colorbar_label=hostile),
            rho_curves([1, 2], {hostile: [0.1, 0.2]}, title=hostile, xlabel=hostile, caption=None),
            plot_ablation([1, 2], {hostile: [1.0, 2.0]}, xlabel=hostile, title=hostile)]
    try:
        for fig in figs:
            fig.savefig(io.BytesIO(), format="png")  # mathtext would fail to parse here
        assert figs[0].axes[0].get_title().startswith(hostile)
    finally:
        for fig in figs:
            plt.close(fig)


# --------------------------------------------------------------------------- 3. signals, in process
def _interrupt_in(monkeypatch, body) -> None:
    """Make ``evaluate``'s ``run`` run ``body`` (which sends a signal) instead of evaluating."""
    monkeypatch.setattr(evaluate_command, "run", lambda opts: body())


# the interrupt may land in any finalizer that the collection runs (a Py4J object's, when Spark ran
# earlier in this worker): Python drops it there and pytest reports it as unraisable, which is the
# very situation the command must survive
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_an_interrupt_swallowed_by_a_gc_callback_still_ends_the_command(monkeypatch, capsys, tmp_path):
    reached, fired = [], []

    def in_gc_callback(phase, info):  # as JAX's _xla_gc_callback, registered for good
        if not fired:
            fired.append(True)
            signal.raise_signal(signal.SIGINT)  # handled inside the callback, where an exception is dropped
            for _ in range(1000):
                pass

    def body():
        gc.callbacks.append(in_gc_callback)
        try:
            gc.collect()
            for _ in range(200):  # the rest of the command (2 s), which the interrupt cuts short
                time.sleep(0.01)
            reached.append(True)
        finally:
            if in_gc_callback in gc.callbacks:
                gc.callbacks.remove(in_gc_callback)

    _interrupt_in(monkeypatch, body)
    rc, _, err = _run(capsys, "evaluate", str(tmp_path / "x.csv"), "--out", str(tmp_path / "o"))
    assert rc == 130 and err == "calib-jax evaluate: interrupted\n", err
    assert not reached  # the interrupt stopped the command, it did not wait for its end


def test_an_interrupt_while_a_module_loads_is_delivered_once_the_import_has_returned(monkeypatch, capsys,
                                                                                     tmp_path):
    # raised inside the import, it would leave the module half made (a native extension aborts the
    # process there); the command must still end with 130 right after the import, not at its end
    (tmp_path / "loading_module.py").write_text(
        "import signal, time\nsignal.raise_signal(signal.SIGINT)\nfor _ in range(20):\n    time.sleep(0.005)\n"
        "LOADED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "loading_module", raising=False)
    loaded, reached = [], []

    def body():
        import loading_module

        loaded.append(loading_module.LOADED)
        for _ in range(200):  # the rest of the command (2 s), which the interrupt cuts short
            time.sleep(0.01)
        reached.append(True)

    _interrupt_in(monkeypatch, body)
    rc, _, err = _run(capsys, "evaluate", str(tmp_path / "x.csv"), "--out", str(tmp_path / "o"))
    assert rc == 130 and err == "calib-jax evaluate: interrupted\n", err
    assert loaded == [True] and not reached
    assert sys.modules["loading_module"].LOADED


def test_inside_import_sees_the_import_system_on_the_stack_only_while_a_module_loads(monkeypatch, tmp_path):
    from calib_jax.logs.signals import inside_import

    (tmp_path / "probe_module.py").write_text("import sys\nfrom calib_jax.logs.signals import inside_import\n"
                                              "SEEN = inside_import(sys._getframe())\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "probe_module", raising=False)
    import probe_module

    assert probe_module.SEEN is True
    assert inside_import(sys._getframe()) is False


def test_an_interrupt_that_a_query_engine_turns_into_its_own_error_is_an_interrupt(monkeypatch, capsys, tmp_path):
    def body():
        try:
            signal.raise_signal(signal.SIGINT)
            for _ in range(1000):
                pass
        except KeyboardInterrupt:  # what DuckDB does: "Query interrupted", re-raised by the engine as an error
            raise ValueError(f"{tmp_path}/log.parquet: cannot be read: Query interrupted") from None

    _interrupt_in(monkeypatch, body)
    rc, _, err = _run(capsys, "evaluate", str(tmp_path / "x.csv"), "--out", str(tmp_path / "o"))
    assert rc == 130 and err == "calib-jax evaluate: interrupted\n", err


def test_the_callers_signal_handlers_are_restored(monkeypatch, capsys, tmp_path):
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    assert _run(capsys, "sql", "--dialect", "duckdb", "--table", "t", "--score", "p", "--label", "y")[0] == 0
    _interrupt_in(monkeypatch, lambda: signal.raise_signal(signal.SIGINT))
    assert _run(capsys, "evaluate", str(tmp_path / "x.csv"), "--out", str(tmp_path / "o"))[0] == 130
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_an_interrupt_while_the_report_is_written_keeps_the_marker_and_a_rerun_completes(monkeypatch, capsys,
                                                                                        tmp_path):
    import calib_jax.logs.report as report

    log = _log(tmp_path / "log.csv")
    args = ["evaluate", str(log), "--score", "p", "--label", "y", "--bootstrap", "10"]
    assert _run(capsys, *args, "--out", str(tmp_path / "ref"))[0] == 0
    write = report.write_outputs

    def interrupted_write(out, rep):
        (Path(out) / "report.json").write_text("{}")  # a file half done when Ctrl-C comes
        signal.raise_signal(signal.SIGINT)
        return write(out, rep)

    monkeypatch.setattr(report, "write_outputs", interrupted_write)
    rc, _, err = _run(capsys, *args, "--out", str(tmp_path / "o"))
    assert rc == 130 and err == "calib-jax evaluate: interrupted\n", err
    assert (tmp_path / "o" / INCOMPLETE).exists()  # the next run does not trust this folder
    monkeypatch.setattr(report, "write_outputs", write)
    assert _run(capsys, *args, "--out", str(tmp_path / "o"))[0] == 0
    assert not (tmp_path / "o" / INCOMPLETE).exists() and _metrics(tmp_path / "o") == _metrics(tmp_path / "ref")


# --------------------------------------------------------------------------- 3. signals, real processes
def _spawn(*argv: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "calib_jax", *argv], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_for(pred, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not pred():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, "the moment to interrupt never came"
        time.sleep(0.005)


def _ends_interrupted(proc: subprocess.Popen, command: str = "evaluate") -> None:
    try:  # seconds when idle; the bound is for a CI machine running two workers
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()  # not left running into the next tests
        out, err = proc.communicate()
        pytest.fail(f"calib-jax {command} did not end within 120 s of the signal: {err[-2000:]}")
    assert proc.returncode == 130, (proc.returncode, err)
    assert err == f"calib-jax {command}: interrupted\n", err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_log_is_read_ends_with_130_and_a_rerun_gives_the_same_report(tmp_path, capsys, sig):
    log = _log(tmp_path / "log.csv", n=8_000)
    args = ["evaluate", str(log), "--score", "p", "--label", "y", "--weight", "w", "--field", "site", "--engine",
            "arrow", "--chunk-rows", "500", "--bootstrap", "10"]
    out = tmp_path / "o"
    proc = _spawn(*args, "--out", str(out), "--quiet")
    _wait_for(lambda: (out / ".checkpoint.npz").exists(), proc)  # after the first chunk, while the next are read
    proc.send_signal(sig)
    _ends_interrupted(proc)
    assert (out / INCOMPLETE).exists() and not (out / "report.json").exists()
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
    assert _run(capsys, *args, "--out", str(out))[0] == 0  # without --resume: afresh
    assert _run(capsys, *args, "--out", str(tmp_path / "ref"))[0] == 0
    assert _metrics(out) == _metrics(tmp_path / "ref") and not (out / INCOMPLETE).exists()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to see the query open the log")
def test_a_signal_during_a_duckdb_query_ends_with_130_not_its_query_error(tmp_path):
    pytest.importorskip("duckdb")
    rng = np.random.default_rng(0)
    n = 1_500_000
    p = rng.uniform(0.02, 0.6, n)
    log = tmp_path / "big.parquet"
    pq.write_table(pa.table({"p": p, "y": (rng.uniform(size=n) < p).astype(np.int8),
                             "site": rng.integers(0, 50, n).astype(str)}), log)
    proc = _spawn("evaluate", str(log), "--score", "p", "--label", "y", "--field", "site", "--engine", "duckdb",
                  "--out", str(tmp_path / "o"), "--quiet")

    def reading() -> bool:
        try:
            return any(os.readlink(f"/proc/{proc.pid}/fd/{fd}") == str(log) for fd in os.listdir(f"/proc/{proc.pid}/fd"))
        except OSError:
            return False

    _wait_for(reading, proc)
    proc.send_signal(signal.SIGINT)
    _ends_interrupted(proc)
    assert not (tmp_path / "o" / "report.json").exists()


def test_a_signal_during_start_up_ends_with_130_and_one_line(tmp_path):
    proc = _spawn("evaluate", str(_log(tmp_path / "log.csv")), "--score", "p", "--label", "y", "--out",
                  str(tmp_path / "o"), "--quiet")
    time.sleep(0.5)  # the interpreter is up (0.05-0.2 s); calib_jax's modules are loading
    proc.send_signal(signal.SIGINT)
    _ends_interrupted(proc)
