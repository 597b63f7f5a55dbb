"""``calib-jax fit --engine`` on logs whose scores sit at the edges: a cell fit is the row fit.

Scores of exactly 0 and 1, scores on the histogram's bin edges m/15, constant scores. The
fit from the cells (DuckDB, Arrow, Spark) and the fit from the rows must give the same
calibrated probabilities within the bounds :func:`calib_jax.logs.params.cell_sample`
documents for logs whose fine logit cells hold one score each (:data:`ONE_SCORE`), and
histogram binning the same bits, binning the float64 score as ``apply`` does
(:func:`calib_jax.logs.params.histogram_bin`). Weights no fit can use (all 0, a total beyond
the command's range, none valid) are refused alike by every engine and every method: exit 2,
one line naming the weight column. (Continuous scores spread inside the cells:
``tests/test_cli_fit_cells.py``.)
"""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")
import pyarrow.parquet as pq  # noqa: E402
from backend import assert_same_bits  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from calib_jax.calibrators import CalibrationFallbackWarning  # noqa: E402
from calib_jax.cli import main  # noqa: E402
from calib_jax.logs import params as P  # noqa: E402

METHODS = P.CELL_METHODS
M = 15  # equal-width bins of histogram binning (the library's default, the report's reliability table)
H, L = 4096, 16.0  # the fine logit grid of --engine
#: largest |p_cells - p_rows| when every fine cell holds one score (cell_sample's docstring):
#: histogram binning exact; isotonic, temperature, Platt and beta to float32 rounding (measured
#: at most 1.2e-7); ILPS as far as its own row fit moves when the rows come in another order (its
#: L-BFGS stops short of the optimum: measured a median of 0.01 and up to 0.07 on these logs)
ONE_SCORE = {"temperature": 1e-6, "platt": 1e-6, "beta": 1e-6, "histogram_binning": 0.0, "isotonic": 1e-6,
             "ilps": 0.1}
#: the logs' shape: 24 distinct scores of 10 rows each, both labels at every score (so the fits
#: see 240 rows and 48 cells in every case and compile once per method)
SCORES, PER_SCORE = 24, 10
SPARK_CONF = ["--spark-master", "local[1]", "--spark-conf", "spark.ui.enabled=false", "--spark-conf",
              "spark.sql.shuffle.partitions=2"]


def _write(path: Path, p: np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> Path:
    cols = {"p": np.asarray(p, np.float64), "y": np.asarray(y, np.float64)}
    if w is not None:
        cols["w"] = np.asarray(w, np.float64)
    pq.write_table(pa.table(cols), path)
    return path


def _fit(log: Path, method: str, save: Path, *extra: str) -> tuple[int, list[str]]:
    """``calib-jax fit``: its exit code and the lines it writes on stderr (a fail-safe fallback
    is allowed: the rows and the cells must then fall back alike)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationFallbackWarning)
        rc = main(["fit", str(log), "--score", "p", "--label", "y", "--method", method, "--quiet", "--save",
                   str(save), *extra])
    return rc, [line for line in err.getvalue().splitlines() if line.strip()]


def _predict(save: Path, p: np.ndarray) -> np.ndarray:
    return np.asarray(P.predict_batch(P.load(save), np.asarray(p, np.float64), None), np.float64)


def _cell(p: np.ndarray) -> np.ndarray:
    """The fine logit cell of each score (the grid of --engine, logits clipped as the rows')."""
    pc = np.clip(p, 1e-12, 1 - 1e-12)
    return np.clip(np.floor((np.clip(np.log(pc) - np.log1p(-pc), -L, L) + L) / (2 * L) * H), 0, H - 1).astype(int)


def _edge_log(seed: int, kinds: tuple[str, ...] = ("zero", "one", "edge", "constant", "random"),
              const: float = 0.37) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scores, labels and whole-number weights (zeros included) of an edge-score log:
    :data:`SCORES` distinct scores in distinct fine cells, those of ``kinds`` among 0, 1, the
    bin edges m/15 and the constant ``const``, then continuous scores (the centres of free
    cells), each on :data:`PER_SCORE` rows of which the first two carry both labels with
    positive weight."""
    rng = np.random.default_rng(seed)
    pool = [*([0.0] if "zero" in kinds else []), *([1.0] if "one" in kinds else []),
            *((np.arange(1, M) / M).tolist() if "edge" in kinds else []), *([const] if "constant" in kinds else [])]
    scores: list[float] = []
    for s in rng.permutation(np.asarray(pool, np.float64)).tolist():  # one score per cell
        if len(scores) < SCORES and int(_cell(np.array([s]))[0]) not in set(_cell(np.array(scores)).tolist()):
            scores.append(s)
    if len(scores) < SCORES:  # continuous scores fill up (the fits' shapes never change)
        taken = set(_cell(np.array(scores)).tolist())
        free = np.setdiff1d(np.arange(H // 4, 3 * H // 4), [c + d for c in taken for d in (-1, 0, 1)])
        h = rng.choice(free, SCORES - len(scores), replace=False)
        scores += (1 / (1 + np.exp(-(-L + (h + 0.5) * 2 * L / H)))).tolist()
    s = np.asarray(scores)
    p = np.sort(np.resize(s, PER_SCORE * SCORES))
    y = (rng.random(p.size) < 0.1 + 0.8 * p).astype(np.float64)
    w = rng.integers(0, 4, p.size).astype(np.float64)
    first = np.flatnonzero(np.r_[True, p[1:] != p[:-1]])
    y[first], y[first + 1] = 0.0, 1.0
    w[first], w[first + 1] = np.maximum(w[first], 1.0), 2.0
    return p, y, w


def _check(method: str, cells: np.ndarray, rows: np.ndarray, what: str) -> None:
    if method == "histogram_binning":
        assert_same_bits(cells, rows, what)
    else:
        gap = float(np.max(np.abs(cells - rows)))
        assert gap <= ONE_SCORE[method], (what, gap)


def test_histogram_bins_a_score_on_an_edge_as_apply_does(tmp_path):
    """A constant score 0.2 = 3/15 (a bin edge): every fit maps it to the log's click rate."""
    rng = np.random.default_rng(1)
    p = np.full(400, 0.2)
    y = (rng.random(400) < 0.49).astype(np.float64)
    log = _write(tmp_path / "const.parquet", p, y)
    for how, extra in (("rows", ()), ("duckdb", ("--engine", "duckdb")), ("arrow", ("--engine", "arrow"))):
        rc, err = _fit(log, "histogram_binning", tmp_path / f"{how}.json", *extra)
        assert rc == 0, err
        np.testing.assert_array_equal(_predict(tmp_path / f"{how}.json", p[:3]), np.float32(y.mean()), how)
        assert main(["apply", str(tmp_path / f"{how}.json"), str(log), "--out", str(tmp_path / f"{how}.parquet"),
                     "--quiet"]) == 0
        out = pq.read_table(tmp_path / f"{how}.parquet").column("calibrated").to_numpy()
        assert np.all(out == np.float32(y.mean())), how


def test_constant_scores_are_fitted_alike_by_every_method(tmp_path):
    """Logs of one score (0, a bin edge, 1): every method, DuckDB and Arrow against the rows.
    Two rows whose weights count the clicks and the non-clicks (the fits' shapes are the
    cells', so each method compiles once for the three logs)."""
    for c in (0.0, 0.2, 1.0):
        log = _write(tmp_path / f"c{c}.parquet", [c, c], [0.0, 1.0], [257.0, 143.0])
        for method in METHODS:
            preds = {}
            for how, eng in (("rows", ()), ("duckdb", ("--engine", "duckdb")), ("arrow", ("--engine", "arrow"))):
                save = tmp_path / f"c{c}_{method}_{how}.json"
                rc, err = _fit(log, method, save, "--weight", "w", *eng)
                assert rc == 0, (c, method, how, err)
                preds[how] = _predict(save, np.array([c]))
            assert_same_bits(preds["arrow"], preds["duckdb"], method)
            _check(method, preds["duckdb"], preds["rows"], f"{c} {method}")
            if method in ("histogram_binning", "isotonic"):  # the click rate, 143/400
                np.testing.assert_array_equal(preds["rows"], np.float32(143 / 400), f"{c} {method}")


def test_cell_fits_on_edge_scores_match_the_row_fit(tmp_path):
    """Every method, DuckDB and Arrow against the rows, on a log with every kind of edge score;
    histogram binning also against its rates counted here."""
    p, y, w = _edge_log(7)
    assert {0.0, 1.0, 0.37, 0.2} <= set(p.tolist())
    log = _write(tmp_path / "edges.parquet", p, y, w)
    for method in METHODS:
        preds = {}
        for how, eng in (("rows", ()), ("duckdb", ("--engine", "duckdb")), ("arrow", ("--engine", "arrow"))):
            save = tmp_path / f"{method}_{how}.json"
            rc, err = _fit(log, method, save, "--weight", "w", *eng)
            assert rc == 0, (method, how, err)
            preds[how] = _predict(save, p)
        assert_same_bits(preds["arrow"], preds["duckdb"], method)  # one table of cells, one fit
        _check(method, preds["duckdb"], preds["rows"], method)
        if method == "histogram_binning":  # bin m = floor(15 p) (p = 1 in the last): the weighted click rate
            b = np.minimum(np.floor(p * M), M - 1).astype(int)
            rate = np.bincount(b, w * y, M) / np.bincount(b, w, M)
            np.testing.assert_array_equal(preds["rows"], rate[b].astype(np.float32))


@st.composite
def _edge_logs(draw):
    """:func:`_edge_log` with the kinds of scores, the constant, the seed and the method drawn."""
    kinds = draw(st.lists(st.sampled_from(("zero", "one", "edge", "constant", "random")), min_size=1, max_size=5,
                          unique=True))
    const = draw(st.sampled_from((0.5, 0.2, 1e-9, 1 - 1e-9)) | st.floats(0.001, 0.999))
    method = draw(st.sampled_from(METHODS))
    return (method, *_edge_log(draw(st.integers(0, 2**32 - 1)), tuple(kinds), const))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_edge_logs())
def test_sweep_of_edge_score_logs(tmp_path, case):
    """Hypothesis sweep: the arrow engine's cell fit against the row fit, every cell one score."""
    method, p, y, w = case
    log = _write(tmp_path / "sweep.parquet", p, y, w)
    preds = {}
    for how, eng in (("rows", ()), ("arrow", ("--engine", "arrow"))):
        save = tmp_path / f"sweep_{how}.json"
        rc, err = _fit(log, method, save, "--weight", "w", *eng)
        assert rc == 0, (method, how, err)
        preds[how] = _predict(save, p)
    _check(method, preds["arrow"], preds["rows"], method)


def _bad_weight_logs(tmp_path: Path) -> dict[str, Path]:
    """Logs whose weights no fit can use: all 0, totals beyond float32 (1e300 each), beyond
    float64 (1e308 each: the sum overflows), above 1e18, and no valid weight at all (NaN)."""
    p, y, _ = _edge_log(3)
    weights = {"zero": 0.0, "over_float32": 1e300, "overflow": 1e308, "above_1e18": 1e20, "none_valid": np.nan}
    return {case: _write(tmp_path / f"{case}.parquet", p, y, np.full(p.size, v)) for case, v in weights.items()}


def _assert_refused(log: Path, method: str, save: Path, *extra: str) -> str:
    rc, err = _fit(log, method, save, "--weight", "w", "--drop-invalid", *extra)
    assert rc == 2 and len(err) == 1 and "column 'w'" in err[0], (log.name, method, extra, rc, err)
    assert not save.exists()
    return err[0]


def test_bad_weights_are_refused_alike_by_every_engine_and_method(tmp_path):
    logs = _bad_weight_logs(tmp_path)
    for case, log in logs.items():
        for method in METHODS:
            reasons = set()
            for how, eng in (("rows", ()), ("duckdb", ("--engine", "duckdb")), ("arrow", ("--engine", "arrow"))):
                line = _assert_refused(log, method, tmp_path / f"{case}_{method}_{how}.json", *eng)
                reasons.add(re.sub(r" \(first at data row \d+\)", "", line.replace(str(log), "LOG")))
            if case != "overflow":  # DuckDB's sums overflow in the query: its message names the sum too
                assert len(reasons) == 1, (case, method, reasons)  # the same words on every engine




def _one_label_logs(tmp_path: Path) -> dict[str, tuple[Path, tuple[str, ...], str]]:
    """Logs whose valid rows hold one label only: no click, no non-click, and clicks on rows of
    weight 0 only; each with the extra arguments it is fitted with and the words its refusal
    must say."""
    p, y, w = _edge_log(5)
    return {"no clicks": (_write(tmp_path / "no_clicks.parquet", p, np.zeros_like(y)), (), "no click (1)"),
            "all clicks": (_write(tmp_path / "all_clicks.parquet", p, np.ones_like(y)), (), "no non-click (0)"),
            "clicks of weight 0": (_write(tmp_path / "w0_clicks.parquet", p, y, np.where(y > 0, 0.0, w + 1.0)),
                                   ("--weight", "w"), "no click (1) with a weight above 0 in column 'w'")}


def test_a_log_of_one_label_is_refused_by_every_engine_and_method(tmp_path):
    """Before 2026-12-06 isotonic regression and histogram binning saved a map to exactly 0 on a
    log without clicks, and ILPS the identity, with exit 0 and no word; now every method and
    engine refuses it with one line naming the label column, and saves nothing."""
    for case, (log, extra, words) in _one_label_logs(tmp_path).items():
        for method in METHODS:
            lines = set()
            for how, eng in (("rows", ()), ("duckdb", ("--engine", "duckdb")), ("arrow", ("--engine", "arrow"))):
                save = tmp_path / f"{case}_{method}_{how}.json".replace(" ", "_")
                rc, err = _fit(log, method, save, *extra, *eng)
                assert rc == 2 and len(err) == 1 and "column 'y'" in err[0] and words in err[0], (case, method, how, err)
                assert not save.exists()
                lines.add(err[0])
            assert len(lines) == 1, (case, method, lines)  # the same words on every engine
    # the row-level methods too (their fits read fields or features)
    log, _, words = _one_label_logs(tmp_path)["no clicks"]
    pq.write_table(pq.read_table(log).append_column("f", pa.array(np.arange(SCORES * PER_SCORE) % 3)), log)
    for method, extra in (("sag_ps", ("--feature", "f")), ("neural_calibration", ("--field", "f"))):
        rc, err = _fit(log, method, tmp_path / f"{method}.json", *extra)
        assert rc == 2 and len(err) == 1 and words in err[0], (method, err)
    # one click is enough: the check refuses only what no calibrator can use
    p, y, _ = _edge_log(5)
    one = np.zeros_like(y)
    one[7] = 1.0
    assert _fit(_write(tmp_path / "one_click.parquet", p, one), "platt", tmp_path / "one.json")[0] == 0


@pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
def test_spark_fits_edge_scores_as_the_rows_and_refuses_alike(tmp_path, spark):
    from calib_jax.logs import engines, sql
    from calib_jax.logs.accumulate import Settings
    from calib_jax.logs.validate import Columns

    p, y, w = _edge_log(7)
    log = _write(tmp_path / "edges.parquet", p, y, w)
    # one query: the cells Spark computes, fitted by every method as `fit --engine spark` does
    settings_ = Settings(n_boot=0, hist_bins=H, scheme="rows")
    qcols = sql.QueryColumns.of(Columns(label="y", score="p", weight="w"))
    acc = sql.accumulator_from_aggregates(engines.run_spark(str(log), qcols, settings_, spark=spark), settings_,
                                          source=str(log))
    for method in METHODS:
        assert _fit(log, method, tmp_path / f"{method}_rows.json", "--weight", "w")[0] == 0
        spec = P.fit_from_cells(method, acc)
        spec["inputs"].update({"score": "p", "logit": None, "label": "y", "weight": "w"})
        P.save(tmp_path / f"{method}_spark.json", spec)
        _check(method, _predict(tmp_path / f"{method}_spark.json", p), _predict(tmp_path / f"{method}_rows.json", p),
               method)
    # the command itself on Spark: the row fit's histogram, and the refusals of the other engines
    assert _fit(log, "histogram_binning", tmp_path / "hb.json", "--weight", "w", "--engine", "spark",
                *SPARK_CONF)[0] == 0
    assert_same_bits(_predict(tmp_path / "hb.json", p), _predict(tmp_path / "histogram_binning_rows.json", p))
    logs = _bad_weight_logs(tmp_path)
    for case in ("zero", "overflow"):
        _assert_refused(logs[case], "platt", tmp_path / f"{case}_spark.json", "--engine", "spark", *SPARK_CONF)
