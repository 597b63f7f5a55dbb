"""benchmarks/compare_sag_reruns.py: the page that says how far a rerun of grouping or ablation
under another SAG solver moved the study, on small output folders made by hand."""

from __future__ import annotations

import json

import pytest

from benchmarks import compare_sag_reruns as R
from calib_jax.io import write_csv as _write

VALUES = ["world", "grouping", "groups", "memberships", "score_within_var", "oracle_within_var"]
DIFFS = ["world", "comparison", "memberships", "quantity", "diff", "lo", "hi", "n_fits", "n_folds", "df", "share_fit"]


def _grouping(path, config, values, diffs, fits_seconds, commit="abcdef0123"):
    path.mkdir()
    (path / "provenance.json").write_text(json.dumps({
        "git_commit": commit, "created_utc": "2026-12-05T00:00:00", "config": config, "wall_time_s": 600.0,
        "worlds": {"simulator": {"phase_seconds": {"data": 5.0, "fits": fits_seconds}}}}))
    _write(path / "within_group_variance.csv", VALUES, values)
    _write(path / "differences.csv", DIFFS, diffs)
    return path


def _pair(tmp_path, field_moves=False):
    values = [["simulator", "field (media)", 8, "hard", 0.004, 0.003],
              ["simulator", "SAG", 3, "hard", 0.0030, 0.0020],
              ["simulator", "VR-SAG", 3, "hard", 0.0029, 0.0019]]
    after = [list(r) for r in values]
    after[2][4] = 0.00295  # VR-SAG's score variance moves
    if field_moves:
        after[0][5] = 0.0030001
    diffs = [["simulator", "VR-SAG - SAG", "hard", "score", -1e-4, -2e-4, -0.5e-4, 10, 10, 9.0, 0.9],
             ["simulator", "VR-SAG - field", "hard", "score", -1e-3, -1.2e-3, -0.8e-3, 10, 10, 9.0, 0.9]]
    diffs_after = [list(r) for r in diffs]
    diffs_after[0][4:7] = [-0.5e-4, -1.5e-4, 0.5e-4]  # moved by 2/3 of its half-width (7.5e-5), side turned
    before = _grouping(tmp_path / "before", {"n_fits": 10}, values, diffs, 120.0)
    rerun = _grouping(tmp_path / "after", {"n_fits": 10, "sag_solver": "lockstep"}, after, diffs_after, 60.0,
                      commit="1234567890")
    return before, rerun


def test_the_page_names_the_option_the_moved_rows_the_move_and_the_turned_side(tmp_path):
    before, rerun = _pair(tmp_path)
    text, header, rows = R.page(before, rerun)
    assert text.startswith("# `grouping` rerun: what moved")
    assert "CPU: not recorded before, not recorded after." in text
    assert "`sag_solver` 'sequential' -> 'lockstep'" in text and "Nothing else in the configuration differs" in text
    assert "| simulator | fits | 120 | 60 | 0.50 |" in text and "(0.52x)" in text  # (5 + 60) / (5 + 120)
    assert "1 of 3 rows changed (1 values of 6)" in text
    assert "1 rows are no SAG fit and all of them repeat" in text
    assert len(rows) == 2 and header[-3:] == ["move / half-width", "side before", "side after"]
    moved = {tuple(r[:4]): r for r in rows}[("simulator", "VR-SAG - SAG", "hard", "score")]
    assert moved[-3] == pytest.approx((1e-4 - 0.5e-4) / 0.75e-4)
    assert "1 of 2 differences keep their side, and these turn:" in text
    assert "- simulator / VR-SAG - SAG / hard / score: A lower" in text and "-> not told apart" in text


def test_a_row_the_solver_does_not_fit_is_flagged_when_it_moves(tmp_path):
    before, rerun = _pair(tmp_path, field_moves=True)
    text, _, _ = R.page(before, rerun)
    assert "**1 of them changed: simulator / field (media) / hard.**" in text


def test_an_ablation_folder_is_read_with_its_own_tables(tmp_path):
    def folder(name, ece, lo, hi):
        path = tmp_path / name
        path.mkdir()
        (path / "provenance.json").write_text(json.dumps({"config": {"n_fits": 5}, "worlds": {}}))
        _write(path / "ablation.csv", ["world", "ablation", "value", "fit", "ECE", "LCCE", "Brier"],
               [["simulator", "groups", 1, 0, 0.01, 1e-6, 1e-3], ["simulator", "groups", 3, 0, ece, 1e-6, 1e-3]])
        _write(path / "paired.csv", ["world", "ablation", "value", "reference", "metric", "minus_reference",
                                     "ci_low", "ci_high", "df", "share_fit"],
               [["simulator", "groups", 3, 1, "ECE", ece - 0.01, lo, hi, 4.0, 0.5]])
        return path

    before, rerun = folder("b", 0.008, -0.003, -0.001), folder("a", 0.008, -0.003, -0.001)
    assert R.study_of(before) == "ablation"
    text, _, rows = R.page(before, rerun)
    assert "0 of 2 rows changed" in text and "1 of 1 differences keep their side." in text
    assert rows[0][-3:] == [0.0, "A lower", "A lower"]


def test_the_command_refuses_folders_of_no_study_or_of_two(tmp_path):
    before, _ = _pair(tmp_path)
    with pytest.raises(SystemExit):
        R.main(["--before", str(before), "--after", str(tmp_path)])
    other = tmp_path / "ablation"
    other.mkdir()
    (other / "provenance.json").write_text("{}")
    for name in ("ablation.csv", "paired.csv"):
        (other / name).write_text("world\n")
    with pytest.raises(ValueError, match="not output folders of one study"):
        R.page(before, other)
    out = tmp_path / "page"
    R.main(["--before", str(before), "--after", str(before), "--out", str(out)])
    assert "0 of 3 rows changed" in out.with_suffix(".md").read_text()


@pytest.mark.parametrize("name", ["compare_sag_reruns", "compare_field_reruns", "compare_reruns"])
def test_the_rerun_pages_examples_run(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(f"benchmarks.{name}"), verbose=False)
    assert result.attempted > 0 and result.failed == 0, f"{result.failed} of {result.attempted} examples failed"
