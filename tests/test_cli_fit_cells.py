"""``calib-jax fit --engine``: one-dimensional calibrators fitted from a log's cells.

Against the row-level fit of the same command on the same log: histogram binning is exact
(the reliability table holds each bin's label rate), temperature / Platt / beta agree to the
spread of the logits within a fine bin, isotonic differs only where a fine bin straddles a
step of the row-level fit. The engines give the same parameter file.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")
import pyarrow.parquet as pq  # noqa: E402
from backend import BITWISE, assert_same_bits  # noqa: E402

from calib_jax.cli import main  # noqa: E402
from calib_jax.logs import params as P  # noqa: E402

N = 40_000
METHODS = ("temperature", "platt", "beta", "histogram_binning", "isotonic", "ilps")
#: largest |p_cells - p_rows| over the log's rows, per method (measured on this log: temperature
#: 1.2e-7, Platt 2.5e-6, beta 1.9e-6, histogram binning 0, ILPS 3.5e-3 with mean 1.3e-4, its
#: penalised fit being iterative); isotonic: the mean and the 99th
#: percentile instead (its knots move to the fine bins' mean logits, and its linear interpolation
#: between knots a few rows apart in the tails moves with them: measured on this log, mean 6e-4,
#: 99th percentile below 1e-2, maximum 0.08 at a sparse p = 0.40)
BOUND = {"temperature": 1e-6, "platt": 2e-5, "beta": 2e-5, "ilps": 1e-2}
ISOTONIC = {"mean": 2e-3, "p99": 2e-2}


def _log(path: Path, *, seed: int = 0, weights: bool = False, bad_row: bool = False) -> Path:
    rng = np.random.default_rng(seed)
    o = rng.normal(-3.0, 1.2, N)
    true = 1 / (1 + np.exp(-(0.8 * o - 0.4 + 0.3 * np.sin(2 * o))))
    cols = {"p": 1 / (1 + np.exp(-o)), "y": (rng.random(N) < true).astype(np.float64)}
    if weights:
        cols["w"] = rng.integers(1, 4, N).astype(np.float64)
    if bad_row:
        cols["p"][7] = np.nan
    pq.write_table(pa.table(cols), path, row_group_size=8_192)
    return path


def _fit(log: Path, method: str, save: Path, *extra: str) -> dict:
    assert main(["fit", str(log), "--score", "p", "--label", "y", "--method", method, "--quiet",
                 "--save", str(save), *extra]) == 0
    spec = P.load(save)  # the file passes the loader's checks
    spec["json"] = json.loads(save.read_text())
    return spec


def _predict(spec: dict, log: Path) -> np.ndarray:
    t = pq.read_table(log)
    return np.asarray(P.predict_batch(spec, t.column("p").to_numpy(), t), np.float64)


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_cell_fits_match_the_row_level_fit_and_the_engines_agree(tmp_path, weighted):
    log = _log(tmp_path / "log.parquet", weights=weighted)
    extra = ("--weight", "w") if weighted else ()
    # weights: the two ways a weight enters (a fitted objective, a bin's rate)
    for method in ("platt", "histogram_binning") if weighted else METHODS:
        rows = _fit(log, method, tmp_path / f"{method}_rows.json", *extra)
        duck = _fit(log, method, tmp_path / f"{method}_duckdb.json", "--engine", "duckdb", *extra)
        if method in ("platt", "histogram_binning", "isotonic"):
            arrow = _fit(log, method, tmp_path / f"{method}_arrow.json", "--engine", "arrow", *extra)
            assert duck["json"]["params"] == arrow["json"]["params"], method  # one table of cells, one fit
        assert duck["json"]["inputs"]["fitted_from"]["cells"] <= 2 * 4096 and duck["json"]["inputs"]["rows"] == N
        gap = np.abs(_predict(duck, log) - _predict(rows, log))
        if method == "isotonic":
            assert gap.mean() <= ISOTONIC["mean"] and np.quantile(gap, 0.99) <= ISOTONIC["p99"], gap.mean()
            continue
        if method == "histogram_binning":  # exact: the same parameters, not only the same predictions
            assert_same_bits(_predict(duck, log), _predict(rows, log), method)
            if BITWISE:
                assert duck["json"]["params"] == rows["json"]["params"]
            continue
        assert gap.max() <= BOUND[method], (method, gap.max())
        if method in ("platt", "temperature", "beta", "ilps"):
            assert gap.mean() <= BOUND[method] / 10


def test_the_parser_and_the_fit_name_the_same_methods():
    from calib_jax.cli.commands import CELL_FIT_METHODS

    assert CELL_FIT_METHODS == P.CELL_METHODS == METHODS


def test_the_cell_fit_refuses_what_it_cannot_do(tmp_path, capsys):
    log = _log(tmp_path / "log.parquet", bad_row=True)
    save = str(tmp_path / "p.json")
    base = ["fit", str(log), "--score", "p", "--label", "y", "--save", save, "--engine", "duckdb"]
    for extra, message in ((["--method", "sag_ts"], "needs the rows"),
                           (["--method", "platt", "--field", "y"], "--field"),
                           (["--method", "platt", "--steps", "10"], "row-level fits"),
                           (["--method", "platt"], "pass --drop-invalid")):
        assert main([*base, *extra]) == 2
        assert message in capsys.readouterr().err
    assert not Path(save).exists()
    spec = _fit(log, "platt", tmp_path / "p.json", "--engine", "duckdb", "--drop-invalid")
    assert spec["json"]["inputs"]["rows"] == N - 1 and spec["json"]["inputs"]["dropped"]
    assert main(["fit", str(tmp_path), "--score", "p", "--label", "y", "--save", save + "2", "--engine", "arrow",
                 "--method", "platt"]) == 2
    assert "reads one file" in capsys.readouterr().err


@pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
def test_spark_fits_the_same_parameters(tmp_path):
    pytest.importorskip("pyspark")
    log = _log(tmp_path / "log.parquet", seed=3)
    conf = ["--spark-master", "local[2]", "--spark-conf", "spark.ui.enabled=false",
            "--spark-conf", "spark.sql.shuffle.partitions=4"]
    for method in ("platt",):
        duck = _fit(log, method, tmp_path / f"{method}_d.json", "--engine", "duckdb")
        spark = _fit(log, method, tmp_path / f"{method}_s.json", "--engine", "spark", *conf)
        np.testing.assert_allclose(_predict(spark, log), _predict(duck, log), rtol=0, atol=1e-7)


def test_apply_reads_a_cell_fit_as_a_row_fit(tmp_path):
    log = _log(tmp_path / "log.parquet", seed=5)
    for how, extra in (("rows", ()), ("cells", ("--engine", "duckdb"))):
        _fit(log, "histogram_binning", tmp_path / f"hb_{how}.json", *extra)
        assert main(["apply", str(tmp_path / f"hb_{how}.json"), str(log), "--out", str(tmp_path / f"{how}.parquet"),
                     "--quiet"]) == 0
    rows, cells = (pq.read_table(tmp_path / f"{how}.parquet").column("calibrated").to_numpy() for how in ("rows", "cells"))
    assert_same_bits(cells, rows)
