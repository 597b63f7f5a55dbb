"""One column, one role: ``evaluate`` (and ``fit``, and the library) refuse a column named by two
options, e.g. ``--oracle`` equal to ``--score``, which used to report an oracle Brier of 0."""

from __future__ import annotations

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402

from calib_jax import logs  # noqa: E402
from calib_jax.cli import main  # noqa: E402


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    rng = np.random.default_rng(0)
    p = rng.uniform(0.05, 0.6, 400)
    path = tmp_path_factory.mktemp("roles") / "log.parquet"
    pq.write_table(pa.table({"p": p, "y": (rng.uniform(size=400) < p).astype(np.int8), "w": rng.uniform(1, 2, 400),
                             "u": rng.integers(0, 20, 400).astype(str)}), path)
    return path


CASES = [  # (options, the later flag, the earlier flag)
    (["--score", "p", "--oracle", "p"], "--oracle", "--score"),
    (["--score", "p", "--weight", "y"], "--weight", "--label"),
    (["--logit", "p", "--user", "p"], "--user", "--logit"),
    (["--score", "p", "--weight", "w", "--negative-rate-column", "w"], "--negative-rate-column", "--weight"),
]


@pytest.mark.parametrize("engine", ["duckdb", "arrow"])
@pytest.mark.parametrize("opts,later,earlier", CASES)
def test_a_column_named_twice_is_refused_in_one_line(log, tmp_path, capsys, opts, later, earlier, engine):
    before = log.read_bytes()
    code = main(["evaluate", str(log), "--label", "y", *opts, "--engine", engine, "--bootstrap", "0", "--quiet",
                 "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and f"{later} must name another column than {earlier}" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r" / "report.json").exists() and log.read_bytes() == before


def test_the_library_raises_value_error(log):
    with pytest.raises(ValueError, match="^oracle must name another column than score"):  # argument names
        logs.evaluate(str(log), score="p", label="y", oracle="p", bootstrap=0)
