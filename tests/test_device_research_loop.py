"""The research-loop script for a lent accelerator (benchmarks/device/research_loop.py, issue 69
item 6): its CPU dry run end to end on one step (timed as device, compile and host seconds, the
JSON and Markdown record written under the device's name), and every step's command valid at
smoke size and at the paper's."""

from __future__ import annotations

import json

import pytest

from benchmarks.device import research_loop as rl


def test_busy_seconds_counts_overlaps_once():
    assert rl.busy_seconds([]) == 0.0
    assert rl.busy_seconds([(5, 10), (0, 4), (3, 6), (20, 21)]) == pytest.approx(11e-9)


def test_utilization_seconds_integrates_each_sample_until_the_next():
    # 100% for 1 s, 50% for 2 s, 0% for 1 s, 25% for the last 2 s: 1 + 1 + 0 + 0.5
    samples = [(10.0, 100.0), (11.0, 50.0), (13.0, 0.0), (14.0, 25.0)]
    assert rl.utilization_seconds(samples, end=16.0) == pytest.approx(2.5)
    assert rl.utilization_seconds([], end=1.0) == 0.0


def test_the_sampler_reads_until_stopped_and_integrates_what_it_read():
    import time

    reads = []

    def read():
        reads.append(time.perf_counter())
        return 40.0

    sampler = rl.UtilizationSampler(read, period=0.01)
    t0 = time.perf_counter()
    sampler.start()
    time.sleep(0.3)
    busy = sampler.stop()
    wall = time.perf_counter() - t0
    n = len(reads)
    time.sleep(0.05)
    assert len(reads) == n >= 5  # no read after stop()
    # 40% of the time from the first read to stop(), which is within the wall time
    assert 0.4 * (wall - 0.1) <= busy <= 0.4 * wall + 1e-9


@pytest.mark.slow
def test_dry_run_writes_the_record(tmp_path):
    """The harness end to end on its cheapest step (a subprocess under the profiler, its timing
    split, the JSON and Markdown record); the two study steps' commands are checked by the next
    test without running them, since ``test_studies`` runs both studies at smoke size already."""
    record = rl.main(["--dry-run", "--steps", "bench_vrsag", "--out", str(tmp_path)])
    folder = tmp_path / "cpu"
    assert json.loads((folder / "research_loop.json").read_text()) == json.loads(json.dumps(record))
    assert [s["step"] for s in record["steps"]] == ["bench_vrsag"]
    for s in record["steps"]:
        assert s["rc"] == 0, (folder / f"{s['step']}.log").read_text()[-3000:]
        assert s["n_compiles"] > 0 and s["compile_s"] > 0
        assert s["device_s"] is not None and s["host_s"] is not None
        assert s["device_s"] + s["compile_s"] <= s["wall_s"] * 1.5  # compile_s may count nested traces twice
    assert (folder / "bench_vrsag" / "vrsag.csv").exists()
    md = (folder / "research_loop.md").read_text()
    assert "| bench_vrsag | 0 |" in md and "dry run" in md


@pytest.mark.parametrize("step", ["mc_spearman", "compare_calibrators"])
@pytest.mark.parametrize("dry_run", [True, False])
def test_study_steps_name_valid_settings(step, dry_run, tmp_path):
    """Each study step's command, at smoke size and at the paper's, parses and its settings pass
    the study's own checks (``--show-config``: resolved, nothing computed)."""
    from experiments import _study, registry

    argv = rl.step_argv(step, tmp_path / step, dry_run=dry_run, world="simulator")
    assert argv[:3] == ["experiments", "run", step]
    _, args, config = _study.resolve(registry.get(step), [*argv[3:], "--show-config"])
    assert args.scale == ("smoke" if dry_run else "paper") and config["seed"] == 0
