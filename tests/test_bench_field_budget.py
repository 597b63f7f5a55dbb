"""The field_calibration budget page (benchmarks/bench_field_budget.py): the projection's
arithmetic, and the harness end to end at a tiny size (every phase of one_run timed, the page
written)."""

from __future__ import annotations

import csv

import pytest

from benchmarks import bench_field_budget as B


def test_each_phase_projects_its_first_refit_plus_the_later_ones():
    meas = {"first": {"shift": {"train": 3.0, "fit platt": 1.0, "bootstrap": 2.0}},
            "again": {"shift": {"train": 1.0, "fit platt": 0.5}}}
    rows = B.project(meas, repeats=5, committed={"simulator/shift": 40.0})
    got = {r[2]: r[5] for r in rows}
    assert got == {"train": 7.0, "fit platt": 3.0, "bootstrap": 2.0, "setting, every phase": 12.0}
    assert rows[-1][6] == 40.0 and rows[-1][3] == 6.0 and rows[-1][4] == 1.5


def test_the_page_times_every_phase_of_a_refit(tmp_path):
    out = tmp_path / "field_budget"
    sim = "simulator={'scale': 'tiny', 'max_rows': 1500, 'field': 'advertiser', 'epochs': 1}"
    rows = B.main(["--preset", "smoke", "--settings", "shift", "--out", str(out), "--set", sim,
                   "calibrators=('platt', 'isotonic')", "n_boot=5", "repeats=3"])
    phases = {r[2]: r for r in rows if r[:2] == ["simulator", "shift"]}
    assert set(phases) == {"train", "infer", "fit platt", "fit isotonic", "metrics", "bootstrap",
                           "setting, every phase"}
    assert phases["bootstrap"][4] is None  # the bootstrap runs in the first refit only
    total = phases.pop("setting, every phase")
    assert total[5] == pytest.approx(sum(r[5] for r in phases.values()))
    assert all(r[3] > 0 for r in phases.values())
    with out.with_suffix(".csv").open(newline="") as f:
        assert len(list(csv.DictReader(f))) == len(rows)
    text = out.with_suffix(".md").read_text()
    assert "budget by phase" in text
    # the smoke preset has no committed run, so the main setting, not timed, leaves the preset unprojected
    preset = next(r for r in rows if r[0] == "the preset")
    assert preset[5] is None and "not projected: its simulator main setting" in text and "target" not in text


def test_a_setting_not_timed_counts_as_the_committed_run_took_or_the_preset_is_not_projected():
    committed = {"simulator/data": 2.0, "simulator/main": 400.0, "simulator/shift": 1500.0,
                 "open_bandit/data": 1.0, "open_bandit/shift": 48.0}
    added, missing = B.untimed_settings(committed, ["shift"])
    assert added == {"simulator/main": 400.0, "open_bandit/data": 1.0, "open_bandit/shift": 48.0} and missing == []
    assert B.untimed_settings(committed, ["main", "shift"]) == (
        {"open_bandit/data": 1.0, "open_bandit/shift": 48.0}, [])
    assert B.untimed_settings({"open_bandit/main": 40.0}, ["main"]) == ({"open_bandit/main": 40.0}, ["shift"])
