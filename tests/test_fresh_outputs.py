"""An output folder holds one run's files: what an earlier run wrote there and the next run does
not write again is removed at the next run's end (``calib_jax.io.fresh_outputs``), in the
``calib-jax`` commands that write a folder, in ``save`` of the Python API's results and in the
studies; a file the package did not write is never removed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import calib_jax.io as cio
from calib_jax.cli import main
from experiments import _study

LISTED = cio.OUTPUTS_LIST


def _write(d: Path, *names: str) -> None:
    for n in names:
        cio.atomic_write_text(d / n, n)


def _names(d: Path) -> list[str]:
    return sorted(p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file() or p.is_symlink())


def test_a_run_removes_what_the_run_before_it_wrote_and_it_did_not(tmp_path):
    d = tmp_path / "out"
    d.mkdir()
    (d / "mine.csv").write_text("the user's own")  # never written by a run: never removed
    with cio.fresh_outputs(d):
        _write(d, "report.json", "slices.csv", "sub/deep.csv")
    assert json.loads((d / LISTED).read_text())["files"] == ["report.json", "slices.csv", "sub/deep.csv"]
    with cio.fresh_outputs(d):
        _write(d, "report.json")
    assert _names(d) == [LISTED, "mine.csv", "report.json"]
    assert json.loads((d / LISTED).read_text())["files"] == ["report.json"]
    # a file written and then removed by the run (a checkpoint, a marker) is not listed
    with cio.fresh_outputs(d):
        _write(d, "report.json", "INCOMPLETE")
        assert cio.remove_output(d / "INCOMPLETE")
    assert json.loads((d / LISTED).read_text())["files"] == ["report.json"]


def test_a_run_that_fails_removes_nothing_and_lists_both_runs_files(tmp_path):
    d = tmp_path / "out"
    with cio.fresh_outputs(d):
        _write(d, "a.csv", "b.csv")
    with pytest.raises(RuntimeError, match="interrupted"), cio.fresh_outputs(d):
        _write(d, "c.csv")
        raise RuntimeError("interrupted")
    assert _names(d) == [LISTED, "a.csv", "b.csv", "c.csv"]
    with cio.fresh_outputs(d):  # the next complete run removes what neither wrote again
        _write(d, "b.csv")
    assert _names(d) == [LISTED, "b.csv"]


def test_a_listed_name_that_is_an_input_a_link_or_outside_the_folder_is_kept(tmp_path):
    d = tmp_path / "out"
    with cio.fresh_outputs(d):
        _write(d, "log.csv", "linked.csv", "x.csv")
    (d / "linked.csv").unlink()
    (d / "linked.csv").symlink_to(d / "x.csv")  # the user replaced a listed file by a link
    outside = tmp_path / "precious.csv"
    outside.write_text("keep")
    listing = json.loads((d / LISTED).read_text())
    listing["files"] += ["../precious.csv", str(outside)]  # an edited list cannot reach outside
    (d / LISTED).write_text(json.dumps(listing))
    with cio.guard_outputs([d / "log.csv"]), cio.fresh_outputs(d):  # log.csv is now the run's input
        _write(d, "report.json")
    assert _names(d) == [LISTED, "linked.csv", "log.csv", "report.json"] and outside.read_text() == "keep"
    assert json.loads((d / LISTED).read_text())["files"] == ["report.json"]
    (d / LISTED).write_text("not json")  # an unreadable list is no list: nothing removed
    with cio.fresh_outputs(d):
        _write(d, "other.json")
    assert "report.json" in _names(d)



def test_a_listed_file_reached_through_a_linked_subfolder_is_kept(tmp_path):
    d = tmp_path / "out"
    with cio.fresh_outputs(d):
        _write(d, "sub/x.csv", "report.json")
    (d / "sub" / "x.csv").unlink()
    (d / "sub").rmdir()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "x.csv").write_text("the user's")
    (d / "sub").symlink_to(mine, target_is_directory=True)  # the user linked the subfolder to theirs
    with cio.fresh_outputs(d):
        _write(d, "report.json")
    assert (mine / "x.csv").read_text() == "the user's"
    assert json.loads((d / LISTED).read_text())["files"] == ["report.json"]

def _log(path: Path, n: int = 400) -> Path:
    rng = np.random.default_rng(0)
    p = rng.uniform(0.02, 0.6, n)
    y = (rng.uniform(size=n) < p).astype(int)
    site = rng.integers(0, 3, n)
    path.write_text("p,y,site\n" + "".join(f"{float(a)!r},{int(b)},s{c}\n" for a, b, c in zip(p, y, site)))
    return path


def test_the_commands_leave_no_earlier_runs_files_in_their_folder(tmp_path, capsys):
    """``evaluate --by`` then ``evaluate`` into one ``--out``: the slices' files of the first run
    were left beside the second run's report (exit 0), read as current by anyone opening the
    folder; now they are removed, and a file of the user's in the folder stays."""
    log = _log(tmp_path / "log.csv")
    out = tmp_path / "report"
    common = [str(log), "--score", "p", "--label", "y", "--bootstrap", "0", "--quiet", "--out", str(out)]
    assert main(["evaluate", *common, "--by", "site"]) == 0
    slices = {n for n in _names(out) if n.startswith(("slices", "drift"))}
    assert "slices.csv" in slices
    (out / "notes.txt").write_text("the user's")
    assert main(["evaluate", *common, "--field", "site"]) == 0
    after = set(_names(out))
    assert not slices & after and {"report.json", "metrics.csv", "notes.txt"} <= after
    assert main(["compare", str(log), "--score", "p", "--score", "p2", "--label", "y", "--out", str(out)]) == 2
    assert set(_names(out)) == after  # a refused run removes nothing
    capsys.readouterr()


def test_a_saved_result_replaces_the_earlier_results_files(tmp_path):
    from calib_jax import logs

    log = _log(tmp_path / "log.csv")
    out = tmp_path / "saved"
    logs.slices(str(log), by="site", score="p", label="y", bootstrap=0).save(out)
    assert "slices.csv" in _names(out)
    logs.evaluate(str(log), score="p", label="y", bootstrap=0).save(out)
    assert "slices.csv" not in _names(out) and "report.json" in _names(out)


def test_a_study_rerun_with_fewer_outputs_removes_the_earlier_ones(tmp_path):
    """A study run with two designs, then with one, into one folder: the second run's folder held
    the first run's tables of the dropped design beside a provenance that does not name it."""
    def run(config, out):
        for design in config["designs"]:
            out.csv(f"table_{design}.csv", ["x"], [[1]])
        return {"designs": list(config["designs"])}

    module = SimpleNamespace(run=run, __doc__="A test study.", __name__="fake_study")
    out = _study.Output(tmp_path / "study", study="fake", scale="smoke", progress=False)
    _study.execute(module, {"designs": ["fixed", "pooled"], "seed": 0}, out)
    assert {"table_fixed.csv", "table_pooled.csv", "provenance.json"} <= set(_names(out.dir))
    _study.execute(module, {"designs": ["fixed"], "seed": 0}, out)
    assert sorted(_names(out.dir)) == [LISTED, "provenance.json", "table_fixed.csv"]
    with cio.exclusive_target(out.dir), pytest.raises(ValueError, match="another calib-jax run"):
        _study.execute(module, {"designs": ["fixed"], "seed": 0}, out)


def test_a_checkpoint_folder_inside_the_output_folder_is_never_recorded(tmp_path, monkeypatch):
    """Checkpoints placed inside a study's folder (``$CALIB_JAX_CHECKPOINTS``): a resumed run reads
    the finished chunks without writing them again, and they stay."""
    d = tmp_path / "study"
    with cio.fresh_outputs(d, keep=[d / "ckpt"]):
        _write(d, "table.csv", "ckpt/chunk_0.npz")
    assert json.loads((d / LISTED).read_text())["files"] == ["table.csv"]
    with cio.fresh_outputs(d, keep=[d / "ckpt"]):
        _write(d, "table.csv")
    assert "ckpt/chunk_0.npz" in _names(d)
    monkeypatch.setenv("CALIB_JAX_CHECKPOINTS", str(tmp_path / "study" / "ckpt"))
    assert _study.checkpoint_base() == d / "ckpt"


def test_the_list_is_written_with_the_folders_permissions(tmp_path):
    d = tmp_path / "out"
    with cio.fresh_outputs(d):
        _write(d, "a.csv")
    assert os.stat(d / LISTED).st_mode & 0o777 == os.stat(d / "a.csv").st_mode & 0o777
