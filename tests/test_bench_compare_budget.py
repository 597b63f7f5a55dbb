"""The budget page's D_val phase (``benchmarks/bench_compare_budget``): each way of fitting the
heads has its speed-up over the sequential way read from the committed benchmark tables, and a
method's one-by-one fits are divided by the speed-up of the way the preset names for it, per SAG
protocol; the committed run's seconds are its data sets' phases summed."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from benchmarks.bench_compare_budget import committed_preset_seconds, fits_for_ways, head_speedups


def _write(path: Path, header: list[str], rows: list[list[object]]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def test_the_preset_ways_projection_divides_each_method_by_its_ways_speedup(tmp_path):
    head = ["dataset", "variant", "way", "call", "seconds", "heads", "D_val rows", "mean objective / anchor's - 1"]
    rows = []
    for variant, secs in (("VR-SAG+TS [eq. 8-11]", (60.0, 40.0, 30.0)), ("VR-SAG+TS", (50.0, 25.0, 100.0))):
        for call in ("first", "second"):
            for way, s in zip(("one by one, sequential", "one by one, lock-step", "together, lock-step"), secs):
                rows.append(["w", variant, way, call, s if call == "second" else 99.0, 10, 1000, "0"])
    _write(tmp_path / "sag_heads.csv", head, rows)
    _write(tmp_path / "heads.csv", ["dataset", "method", "way", "seconds", "heads", "D_val rows", "steps"],
           [["w", "Neural Calibration", "sequential (second call)", 30.0, 10, 1000, 500],
            ["w", "Neural Calibration", "batched (second call)", 40.0, 10, 1000, 500]])
    speedups = head_speedups(tmp_path)
    assert speedups["paper"] == {"lockstep": pytest.approx(1.5), "together": pytest.approx(2.0)}  # 60 s / 40, / 30
    assert speedups["reference"] == {"lockstep": pytest.approx(2.0), "together": pytest.approx(0.5)}
    assert speedups["nc"] == {"batched": pytest.approx(0.75)}  # slower than the sequential way
    meas = {"cfg": {"head_fits": 3},
            "fit_first": {"SAG+TS [eq. 8-11]": 4.0, "SAG+TS": 2.0, "Neural Calibration": 5.0, "MCGrad": 1.0},
            "fit_again": {"SAG+TS [eq. 8-11]": 2.0, "SAG+TS": 3.0, "Neural Calibration": 1.0, "MCGrad": 1.0}}
    # one by one: (4 + 2 x 2) + (2 + 2 x 3) + (5 + 2 x 1) + (1 + 2 x 1)
    assert fits_for_ways(meas, speedups) == pytest.approx(8.0 + 8.0 + 7.0 + 3.0)
    # the preset's ways, slower ones included: what the preset runs is what it costs
    assert fits_for_ways(meas, speedups, "together", "batched") == pytest.approx(8.0 / 2 + 8.0 / 0.5 + 7.0 / 0.75
                                                                                  + 3.0)
    assert fits_for_ways(meas, speedups, "lockstep") == pytest.approx(8.0 / 1.5 + 8.0 / 2 + 7.0 + 3.0)
    assert head_speedups(tmp_path / "missing") == {}
    assert fits_for_ways(meas, {}, "together", "batched") == pytest.approx(8.0 + 8.0 + 7.0 + 3.0)


def test_the_committed_runs_seconds_sum_every_data_sets_phases(tmp_path):
    prov = tmp_path / "provenance.json"
    assert committed_preset_seconds(prov) is None
    prov.write_text(json.dumps({"config": {"sag_heads": "together"}, "datasets": {
        "a": {"phase_seconds": {"fits": 10.0, "splits": 5.0}}, "b": {"phase_seconds": {"fits": 1.5}}, "c": {}}}))
    assert committed_preset_seconds(prov) == (16.5, {"sag_heads": "together"})


def test_the_machine_reference_is_read_back_from_the_page_it_replaces(tmp_path):
    """The budget page records the reference workload's seconds as a csv row; the next run
    reads it back (as written by calib_jax.io.write_csv) and states the two machines' ratio."""
    from benchmarks import machine_speed
    from calib_jax.io import write_csv

    page = tmp_path / "budget.csv"
    assert machine_speed.previous_reference(page) is None  # no page yet
    header = ["dataset", "phase", "unit", "unit_s", "count", "projected_s", "committed_run_s"]
    write_csv(page, header, [["w", "splits", "one split", 3.0, 100, 300.0, None],
                             ["machine", machine_speed.ROW_LABEL, machine_speed.DESCRIPTION, 0.125, 1, 0.125, None]])
    assert machine_speed.previous_reference(page) == 0.125
    write_csv(page, header, [["w", "splits", "one split", 3.0, 100, 300.0, None]])
    assert machine_speed.previous_reference(page) is None  # a page from before the reference was recorded
    sentence = machine_speed.comparison_sentence(0.25, 0.125)
    assert "125 ms" in sentence and "time ratio 2.00" in sentence and "slower" in sentence
    assert "recorded none" in machine_speed.comparison_sentence(0.25, None)
    assert 0 < machine_speed.reference_seconds(repeats=1) < 30
