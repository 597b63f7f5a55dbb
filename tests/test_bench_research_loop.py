"""The research-loop page (benchmarks/bench_research_loop.py): the command it times is the
study's own (its settings resolve to the world and methods asked for), and the page holds every
run's wall seconds and phases."""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

from benchmarks import bench_research_loop as B


def test_the_timed_command_resolves_to_the_world_and_methods_asked_for(tmp_path):
    argv = B.command("quick", "simulator_grouping", ["Uncal", "VR-SAG+TS"], tmp_path / "out")
    argv = argv[:argv.index("--out")] + ["--show-config"]
    proc = subprocess.run(argv, cwd=B.ROOT, capture_output=True, text=True, check=True)
    config = json.loads(proc.stdout)
    assert config["datasets"] == ["simulator_grouping"] and config["methods"] == ["Uncal", "VR-SAG+TS"]
    assert config["n_splits"] == 10  # the quick preset's
    assert not (tmp_path / "out").exists()


def test_the_page_records_each_run_and_its_phases(tmp_path, monkeypatch):
    calls: list[tuple[list[str], Path]] = []

    def fake_run(argv, caches, world):
        calls.append((list(argv), caches))
        return {"wall_s": 10.0 * len(calls), "study_wall_s": 8.0, "phases": {"splits": 2.0, "refits": 1.0},
                "claims": 3}

    monkeypatch.setattr(B, "run_once", fake_run)
    out = tmp_path / "research_loop"
    rows = B.main(["--presets", "smoke", "--world", "simulator", "--methods", "Uncal", "--out", str(out)])
    # cold then warm, sharing one cache folder, each writing its own output
    assert [c[1] for c in calls] == [calls[0][1]] * 2
    assert calls[0][0][calls[0][0].index("--out") + 1] != calls[1][0][calls[1][0].index("--out") + 1]
    got = {(r[0], r[1]): r[2] for r in rows}
    assert got[("smoke, cold", "process wall")] == 10.0 and got[("smoke, warm", "process wall")] == 20.0
    assert got[("smoke, warm", "phase: splits")] == 2.0
    assert got[("smoke, warm", "study wall outside the phases (data, backbone, tables)")] == 5.0
    assert got[("machine", "machine reference workload")] > 0
    with out.with_suffix(".csv").open(newline="") as f:
        assert len(list(csv.DictReader(f))) == len(rows)
    text = out.with_suffix(".md").read_text()
    assert "smoke, cold 10 s; smoke, warm 20 s" in text and "--set \"methods=['Uncal']\"" in text
