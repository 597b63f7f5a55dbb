"""The prepared commands for a lent GPU machine (benchmarks/device/): every shell script parses,
and the pytest plugin that writes each failure as it happens records a failing test once, with
its traceback, under pytest-xdist as on the GPU machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "benchmarks" / "device").glob("*.sh"))


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_the_script_parses(script):
    subprocess.run(["bash", "-n", str(script)], check=True)


def test_each_failure_is_written_once_with_its_traceback(tmp_path):
    (tmp_path / "test_planted.py").write_text(
        "def test_passes():\n    assert True\n\n\ndef test_fails():\n    assert 1 == 2, 'planted failure'\n")
    log = tmp_path / "failures.txt"
    # run from inside an xdist worker too (CI): the child inherits $PYTEST_XDIST_WORKER, which
    # must not make its controller think it is a worker
    env = {**os.environ, "PYTEST_FAILURES_LOG": str(log), "PYTEST_XDIST_WORKER": "gw0",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider",
                          "-p", "benchmarks.device.pytest_failures_log", "-o", "addopts=", str(tmp_path)],
                         cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 1 and "1 failed, 1 passed" in run.stdout, run.stdout[-2000:]
    text = log.read_text()
    assert text.count("=====") == 1  # the controller writes it; the worker that ran it does not
    assert "test_planted.py::test_fails (call" in text and "planted failure" in text
