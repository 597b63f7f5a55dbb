"""``benchmarks/bench_vrsag_floor.py`` at a toy size: the page it writes holds the floor, the
lock-step fit measured in the same run and the machine's reference workload, and its
evaluation counts are those of the solver (the batched evaluations are the slowest
partition's, never fewer than the partitions' mean)."""

from __future__ import annotations

import csv

import pytest

from benchmarks import bench_vrsag_floor, machine_speed


def test_the_page_holds_the_fit_beside_its_floor_from_one_run(tmp_path):
    out = tmp_path / "floor"
    bench_vrsag_floor.main(["--n", "3000", "--m", "8", "--partitions", "3", "--groups", "2", "--steps", "6",
                            "--out", str(out)])
    with out.with_suffix(".csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    value = {r["quantity"]: float(r["value"]) for r in rows if r["n"] == "3000"}
    parts = value["head_forward_s"] + value["head_backward_s"] + value["transcendentals_s"]
    assert value["floor_eval_s"] == pytest.approx(parts, rel=1e-12)
    # the batched evaluations per iteration: the slowest partition's, at least the mean's
    assert value["lockstep_passes_per_step"] >= value["evals_per_step_all_steps"] >= 1.0
    assert value["floor_fit_s"] == pytest.approx(6 * value["evals_per_step_all_steps"] * value["floor_eval_s"])
    assert value["lockstep_fit_all_steps_over_floor"] == pytest.approx(
        value["lockstep_fit_all_steps_s"] / value["floor_fit_s"])
    assert value["lockstep_fit_spread"] >= 1.0
    assert machine_speed.previous_reference(out.with_suffix(".csv"), column="value") > 0
    text = out.with_suffix(".md").read_text()
    assert "AVX-512" in text and "lockstep_fit_all_steps_over_floor" in text
