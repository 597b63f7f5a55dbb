"""benchmarks/compare_field_reruns.py: the page that says how far a rerun of field_calibration
under another fitting option moved the study, on two small output folders made by hand."""

from __future__ import annotations

import json

import pytest

from benchmarks import compare_field_reruns as R
from calib_jax.io import write_csv as _write

PAIR_COLUMNS = ["method_a", "method_b", "metric", "a_minus_b", "ci_low", "ci_high", "n"]


def _folder(path, config, seconds, table, paired, commit="abcdef0123"):
    path.mkdir()
    (path / "provenance.json").write_text(json.dumps({
        "study": "field_calibration", "git_commit": commit, "created_utc": "2026-12-05T00:00:00",
        "config": config, "phase_seconds": seconds}))
    _write(path / "simulator_main.csv", ["method", "training data", "AUC", "Brier"], table)
    _write(path / "intervals_simulator_main.csv", ["method", "metric", "estimate", "ci_low", "ci_high"],
           [[m, "AUC", a, a - 0.0196, a + 0.0196] for m, _, a, _ in table])  # row se 0.01
    _write(path / "paired_simulator_main.csv", PAIR_COLUMNS, paired)
    _write(path / "refits_simulator_main.csv", PAIR_COLUMNS, paired)
    return path


def _pair(tmp_path, moved_other=False):
    table = [["Platt Scaling", "D_train -> D_dev", 0.70, 0.03], ["VR-SAG", "D_train -> D_dev", 0.71, 0.03]]
    after = [list(r) for r in table]
    after[1][2] = 0.715  # VR-SAG's AUC moves by half a row se
    if moved_other:
        after[0][3] = 0.0300001
    paired = [["Platt Scaling", "VR-SAG", "AUC", -0.01, -0.02, -0.001, 5]]
    paired_after = [["Platt Scaling", "VR-SAG", "AUC", -0.005, -0.015, 0.005, 5]]
    before = _folder(tmp_path / "before", {"repeats": 5}, {"simulator/main": 100.0}, table, paired)
    rerun = _folder(tmp_path / "after", {"repeats": 5, "sag_solver": "lockstep"}, {"simulator/main": 60.0}, after,
                    paired_after, commit="1234567890")
    return before, rerun


def test_the_page_names_the_option_the_moved_method_its_size_and_the_turned_side(tmp_path):
    before, rerun = _pair(tmp_path)
    text, header, rows = R.page(before, rerun)
    assert "`sag_solver` 'sequential' -> 'lockstep'" in text and "Nothing else in the configuration differs" in text
    assert "The commits differ" in text and "| simulator/main | 100 | 60 | 0.60 |" in text
    assert "1 of 2 methods changed (VR-SAG); the other 1 repeat" in text and "Unexpected" not in text
    (row,) = rows
    assert row[:3] == ["simulator_main", "VR-SAG", "AUC"] and row[5] == pytest.approx(0.005)
    assert row[6] == pytest.approx(0.5)
    # the one paired difference turned from "A lower" to "not told apart", in both kinds of interval
    assert text.count("0 of 1 differences A - B keep their side, and these turn:") == 2
    assert "Platt Scaling - VR-SAG, AUC: A lower (-0.01 [-0.02, -0.001]) -> not told apart" in text


def test_a_method_the_option_does_not_fit_is_flagged_when_it_moves(tmp_path):
    before, rerun = _pair(tmp_path, moved_other=True)
    text, _, rows = R.page(before, rerun)
    assert "**Unexpected: Platt Scaling changed although the option does not fit them.**" in text
    assert {(r[1], r[2]) for r in rows} == {("VR-SAG", "AUC"), ("Platt Scaling", "Brier")}


def test_a_rerun_without_an_option_flags_no_method(tmp_path):
    """Another machine or commit with the same configuration: every method may move, none is
    flagged, and the title says that no option differs."""
    before, rerun = _pair(tmp_path, moved_other=True)
    config = json.loads((before / "provenance.json").read_text())
    (rerun / "provenance.json").write_text(json.dumps({**config, "git_commit": "1234567890"}))
    text, _, rows = R.page(before, rerun)
    assert "rerun (no option differs: another machine or commit): what moved" in text
    assert "Unexpected" not in text and "2 of 2 methods changed" in text and len(rows) == 2
    assert "The commits differ, so a change of the code between them can move numbers too." in text


def test_the_command_refuses_a_folder_that_is_not_the_studys(tmp_path):
    before, _ = _pair(tmp_path)
    with pytest.raises(SystemExit):
        R.main(["--before", str(before), "--after", str(tmp_path)])
    out = tmp_path / "page"
    R.main(["--before", str(before), "--after", str(before), "--out", str(out)])
    assert "0 of 2 methods changed" in out.with_suffix(".md").read_text()


def test_the_ledger_rows_citing_the_folder_and_a_ledger_that_cites_none(tmp_path):
    before, rerun = _pair(tmp_path)
    cols = ["paper", "place", "claim", "scale", "world", "verdict", "ours", "ci_low", "ci_high", "source"]
    row = lambda verdict, lo: ["p", "T2", "NC best", "paper", "sim", verdict, "0", lo, "1",  # noqa: E731
                               "figures/field_calibration_paper/provenance.json#x"]
    _write(tmp_path / "a.csv", cols, [row("inconclusive", "-1")])
    _write(tmp_path / "b.csv", cols, [row("reproduces", "0.5")])
    text, _, _ = R.page(before, rerun, tmp_path / "a.csv", tmp_path / "b.csv", "figures/field_calibration_paper/")
    assert "0 of 1 rows citing `figures/field_calibration_paper/` keep their verdict, and these turn:" in text
    assert "- T2, sim: NC best: inconclusive (+0 [-1, +1]) -> reproduces (+0 [+0.5, +1])" in text
    text, _, _ = R.page(before, rerun, tmp_path / "a.csv", tmp_path / "b.csv", "figures/field_calibration/")
    assert "No row of the claims ledger cites `figures/field_calibration/`" in text
