"""A pytest plugin for runs that a time limit may stop: each failing test's report is appended
to a file the moment it arrives, so that a suite killed before its summary still leaves every
failure's traceback (pytest prints tracebacks only at the end). Works under pytest-xdist: the
controller receives every worker's reports.

    PYTEST_FAILURES_LOG=failures.txt python -m pytest -p benchmarks.device.pytest_failures_log tests
"""

from __future__ import annotations

import os

#: whether this process is a pytest-xdist worker (whose reports the controller also receives);
#: read from the configuration, not from $PYTEST_XDIST_WORKER, which a pytest started from
#: inside a worker's test inherits
_WORKER = False


def pytest_configure(config) -> None:  # noqa: ANN001 (pytest's Config)
    """Note whether this process is an xdist worker.

    Args:
      config: pytest's configuration (a worker's has ``workerinput``).
    """
    global _WORKER
    _WORKER = hasattr(config, "workerinput")


def pytest_runtest_logreport(report) -> None:  # noqa: ANN001 (pytest's TestReport)
    """Append ``report`` to ``$PYTEST_FAILURES_LOG`` when it failed (set-up, call or tear-down).

    Args:
      report: pytest's report of one phase of one test.
    """
    path = os.environ.get("PYTEST_FAILURES_LOG")
    if not path or not report.failed or _WORKER:  # the controller writes
        return
    with open(path, "a") as f:
        f.write(f"===== {report.nodeid} ({report.when}, {report.duration:.1f} s)\n{report.longreprtext}\n\n")
