"""The research-loop script for a lent accelerator (benchmarks/device/research_loop.py, issue 69
item 6) runs end to end as its CPU dry run: the three steps at smoke size, each timed as device,
compile and host seconds, and the JSON and Markdown record written under the device's name."""

from __future__ import annotations

import json

import pytest

from benchmarks.device import research_loop as rl


def test_busy_seconds_counts_overlaps_once():
    assert rl.busy_seconds([]) == 0.0
    assert rl.busy_seconds([(5, 10), (0, 4), (3, 6), (20, 21)]) == pytest.approx(11e-9)


@pytest.mark.slow
def test_dry_run_writes_the_record(tmp_path):
    record = rl.main(["--dry-run", "--out", str(tmp_path)])
    folder = tmp_path / "cpu"
    assert json.loads((folder / "research_loop.json").read_text()) == json.loads(json.dumps(record))
    assert [s["step"] for s in record["steps"]] == list(rl.STEPS)
    for s in record["steps"]:
        assert s["rc"] == 0, (folder / f"{s['step']}.log").read_text()[-3000:]
        assert s["n_compiles"] > 0 and s["compile_s"] > 0
        assert s["device_s"] is not None and s["host_s"] is not None
        assert s["device_s"] + s["compile_s"] <= s["wall_s"] * 1.5  # compile_s may count nested traces twice
    assert (folder / "bench_vrsag" / "vrsag.csv").exists()
    md = (folder / "research_loop.md").read_text()
    assert "| compare_calibrators | 0 |" in md and "dry run" in md
