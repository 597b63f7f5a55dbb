"""``calib-jax compare``: two models on one log, every difference paired on the same resamples.

Checked against the library on the rows (the metrics, and the paired row bootstrap of
:func:`calib_jax.bootstrap.difference`), against scikit-learn's AUC, and engine against engine.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")
import jax  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from sklearn.metrics import roc_auc_score  # noqa: E402

import calib_jax as cj  # noqa: E402
from calib_jax import bootstrap as boot  # noqa: E402
from calib_jax.cli import main  # noqa: E402
from calib_jax.logs.accumulate import Settings  # noqa: E402
from calib_jax.logs.comparison import accumulators, joint_cells_from_rows, paired_differences  # noqa: E402
from calib_jax.logs.panel import compute_panel  # noqa: E402

N = 20_000


def _log(path: Path, *, seed: int = 0, weights: bool = False, bad: bool = False, users: bool = False) -> Path:
    """Production under-predicts at the top; the candidate is sharper and unbiased (its own
    noise is independent of production's, so their errors are correlated through the truth).
    With ``users``, a user column ``uid`` of 500 users (some rows without one) and the true click
    probability ``pi`` (an oracle)."""
    rng = np.random.default_rng(seed)
    t = rng.normal(-2.5, 1.1, N)
    y = (rng.random(N) < 1 / (1 + np.exp(-t))).astype(np.float64)
    prod = 1 / (1 + np.exp(-(0.8 * t - 0.6 + rng.normal(0, 0.6, N))))
    cand = 1 / (1 + np.exp(-(t + rng.normal(0, 0.4, N))))
    cols = {"click": y, "prod": prod, "cand": cand}
    if weights:
        cols["w"] = rng.uniform(0.5, 2.0, N)
    if bad:
        cols["cand"][[7, 11]] = [np.nan, 1.5]
    if users:  # drawn from their own stream: the other columns stay those of the log without users
        uid = np.random.default_rng(seed + 1000).integers(0, 500, N).astype(str).astype(object)
        uid[::97] = None
        cols["uid"] = pa.array(uid, pa.string())
        cols["pi"] = 1 / (1 + np.exp(-t))
    pq.write_table(pa.table(cols), path)
    return path


def _compare(log: Path, out: Path, *extra: str) -> dict:
    assert main(["compare", str(log), "--label", "click", "--score", "prod", "--score", "cand", "--out", str(out),
                 "--quiet", *extra]) == 0
    return json.loads((out / "compare.json").read_text())


def _diff(res: dict, metric: str) -> dict:
    return next(d for d in res["differences"] if d["metric"] == metric)


def test_each_model_equals_the_library_on_the_rows(tmp_path):
    log = _log(tmp_path / "log.parquet", weights=True)
    res = _compare(log, tmp_path / "out", "--weight", "w", "--bootstrap", "50")
    t = pq.read_table(log)
    y, w = t["click"].to_numpy(), t["w"].to_numpy()
    for name in ("prod", "cand"):
        p = t[name].to_numpy()
        got = res["metrics"][name]

        def jax_(f, p=p, **k):
            return float(f(p.astype(np.float32), y.astype(np.float32), weights=w.astype(np.float32), **k))

        np.testing.assert_allclose(got["brier"]["value"], jax_(cj.brier), rtol=2e-5)
        np.testing.assert_allclose(got["nll"]["value"], jax_(cj.nll), rtol=2e-5)
        np.testing.assert_allclose(got["ece"]["value"], jax_(cj.ece, n_bins=15), rtol=1e-4, atol=1e-7)
        np.testing.assert_allclose(got["abs_bias"]["value"], abs(np.sum(w * p) / np.sum(w * y) - 1), rtol=1e-9)
        # AUC from the fine logit histogram: within its stated bound of scikit-learn's
        bound = json.loads((tmp_path / "out" / "models" / f"{['prod', 'cand'].index(name)}_{name}" / "report.json")
                           .read_text())["bounds"]["auc"]
        assert abs(got["auc"]["value"] - roc_auc_score(y, p, sample_weight=w)) <= bound + 1e-12
        d = _diff(res, "brier")
        assert d["diff"] == pytest.approx(res["metrics"]["prod"]["brier"]["value"]
                                          - res["metrics"]["cand"]["brier"]["value"], rel=1e-12)
    # every file of the comparison and one full report per model
    out = tmp_path / "out"
    assert {"compare.json", "compare.md", "compare.csv", "reliability_overlay.png"} <= {p.name for p in out.iterdir()}
    assert sorted(p.name for p in (out / "models").iterdir()) == ["0_prod", "1_cand"]


@pytest.mark.optimized_codegen  # tests/conftest.py: its programs run long at LLVM level 0
def test_paired_intervals_match_the_row_bootstrap_and_are_narrower_than_unpaired(tmp_path):
    log = _log(tmp_path / "log.parquet", seed=1)
    B = 400
    res = _compare(log, tmp_path / "out", "--bootstrap", str(B))
    t = pq.read_table(log)
    y = t["click"].to_numpy().astype(np.float32)
    pa_, pb = (t[c].to_numpy().astype(np.float32) for c in ("prod", "cand"))
    key = jax.random.key(3)
    for metric, stat in (("brier", cj.brier), ("nll", cj.nll)):
        ra = boot.bootstrap(stat, pa_, y, key=key, n_boot=B, scheme="poisson")
        rb = boot.bootstrap(stat, pb, y, key=key, n_boot=B, scheme="poisson")
        lib = boot.difference(ra, rb)
        got = _diff(res, metric)
        width = lib.hi - lib.lo
        # two Monte Carlo estimates of the same interval (cells vs rows, other draws): ends within a quarter width
        assert abs(got["lo"] - lib.lo) <= 0.25 * width and abs(got["hi"] - lib.hi) <= 0.25 * width, (metric, got, lib)
        # pairing matters: the unpaired interval of the difference (independent resamples) is much wider
        unpaired = 1.96 * np.hypot(np.std(np.asarray(ra.replicates)), np.std(np.asarray(rb.replicates))) * 2
        assert got["hi"] - got["lo"] < 0.7 * unpaired, (metric, got["hi"] - got["lo"], unpaired)
    # the sharper candidate wins on the proper scores and the ranking, with intervals that say so
    assert all(_diff(res, m)["better"] == "cand" for m in ("brier", "nll", "ne", "auc"))
    for d in res["differences"]:  # the verdict follows the interval's side of 0 and the metric's direction
        lower = d["direction"] == "lower"
        want = "prod" if (d["hi"] < 0 if lower else d["lo"] > 0) else "cand" if (
            d["lo"] > 0 if lower else d["hi"] < 0) else None
        assert d["better"] == want, d


def test_a_model_compared_with_itself_differs_by_exactly_zero():
    rng = np.random.default_rng(2)
    p = rng.uniform(0.01, 0.5, 3000)
    y = (rng.random(3000) < p).astype(float)
    cells = joint_cells_from_rows(np.stack([p, p], axis=1), y)
    settings = Settings(scheme="cells", n_boot=30)
    panels = [compute_panel(a.replicated()) for a in accumulators(cells, settings)]
    for d in paired_differences(panels, ["a", "b"]):
        assert d["diff"] == 0 and d["lo"] == 0 and d["hi"] == 0 and d["better"] is None, d


def test_the_engines_give_the_same_numbers(tmp_path):
    log = _log(tmp_path / "log.parquet", seed=4, weights=True)
    duck = _compare(log, tmp_path / "duck", "--weight", "w", "--engine", "duckdb")
    arrow = _compare(log, tmp_path / "arrow", "--weight", "w", "--engine", "arrow", "--chunk-rows", "3000")  # 7 chunks
    assert duck["joint_cells"] == arrow["joint_cells"] and duck["input"]["rows_used"] == N
    for a, b in zip(duck["differences"], arrow["differences"], strict=True):
        assert (a["metric"], a["better"]) == (b["metric"], b["better"])
        for k in ("value_a", "value_b", "diff", "lo", "hi"):  # the same cells and draws; sums in another order
            np.testing.assert_allclose(a[k], b[k], rtol=1e-9, atol=1e-15, err_msg=f"{a['metric']} {k}")


# py4j's gateway socket to the JVM stays open for the session's life (as in the other Spark tests)
@pytest.mark.optimized_codegen  # tests/conftest.py: its programs run long at LLVM level 0
@pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
def test_spark_gives_the_same_numbers(tmp_path):
    pytest.importorskip("pyspark")
    # with --user, --oracle and --field: the paired GAUC query, the oracle's sums and largest gaps,
    # and the joint field cells (the users as a field: 500 levels and __missing__) too
    log = _log(tmp_path / "log.parquet", seed=5, users=True)
    duck = _compare(log, tmp_path / "duck", "--bootstrap", "20", "--user", "uid", "--oracle", "pi", "--field", "uid")
    spark = _compare(log, tmp_path / "spark", "--bootstrap", "20", "--engine", "spark", "--spark-master", "local[2]",
                     "--spark-conf", "spark.ui.enabled=false", "--spark-conf", "spark.sql.shuffle.partitions=4",
                     "--user", "uid", "--oracle", "pi", "--field", "uid")
    assert duck["joint_cells"] == spark["joint_cells"]
    fd, fs = duck["fields"]["uid"], spark["fields"]["uid"]
    assert fd["levels"] == fs["levels"] == 501 and fd["joint_cells"] == fs["joint_cells"]
    for a, b in zip(fd["differences"], fs["differences"], strict=True):
        np.testing.assert_allclose([a["diff"], a["lo"], a["hi"]], [b["diff"], b["lo"], b["hi"]], rtol=1e-9, atol=1e-15)
    assert _diff(duck, "gauc")["lo"] is not None and _diff(duck, "oracle_brier")["lo"] is not None
    for name in ("0_prod", "1_cand"):
        chebyshev = [json.loads((tmp_path / e / "models" / name / "report.json").read_text())["metrics"]
                     for e in ("duck", "spark")]
        assert [m for m in chebyshev[0] if m["name"] == "oracle_chebyshev"] == \
            [m for m in chebyshev[1] if m["name"] == "oracle_chebyshev"]
    for a, b in zip(duck["differences"], spark["differences"], strict=True):
        np.testing.assert_allclose([a["diff"], a["lo"], a["hi"]], [b["diff"], b["lo"], b["hi"]], rtol=1e-9, atol=1e-15)
    # the models as logits: the same query in Spark's dialect
    logits = _logit_log(tmp_path / "logits.parquet")
    duck = _compare_logits(logits, tmp_path / "duck_logits", "--bootstrap", "20")
    spark = _compare_logits(logits, tmp_path / "spark_logits", "--bootstrap", "20", "--engine", "spark",
                            "--spark-master", "local[2]", "--spark-conf", "spark.ui.enabled=false",
                            "--spark-conf", "spark.sql.shuffle.partitions=4")
    assert duck["joint_cells"] == spark["joint_cells"]
    for a, b in zip(duck["differences"], spark["differences"], strict=True):
        np.testing.assert_allclose([a["diff"], a["lo"], a["hi"]], [b["diff"], b["lo"], b["hi"]], rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("engine", ["duckdb", "arrow"])
def test_invalid_rows_are_refused_or_dropped(tmp_path, engine, capsys):
    log = _log(tmp_path / "log.parquet", bad=True)
    assert main(["compare", str(log), "--label", "click", "--score", "prod", "--score", "cand", "--engine", engine,
                 "--out", str(tmp_path / "a"), "--quiet"]) != 0
    err = capsys.readouterr().err
    assert "2 rows" in err or "2 of" in err, err
    assert "--drop-invalid" in err and "Traceback" not in err
    res = _compare(log, tmp_path / "b", "--engine", engine, "--drop-invalid", "--bootstrap", "10")
    assert res["input"]["rows_used"] == N - 2 and res["input"]["rows_read"] == N


@pytest.mark.parametrize("argv, message", [
    (["--score", "prod"], "two or more"),
    (["--score", "prod", "--score", "prod"], "named twice"),
    (["--score", "prod", "--score", "click"], "different columns"),
    (["--score", "prod", "--score", "nope"], "nope"),
])
def test_bad_arguments_get_one_clear_line(tmp_path, argv, message, capsys):
    log = _log(tmp_path / "log.parquet")
    assert main(["compare", str(log), "--label", "click", *argv, "--out", str(tmp_path / "o"), "--quiet"]) != 0
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err


def _logit_log(path: Path, *, seed: int = 6, bad: bool = False) -> Path:
    """The models as logits, some beyond the probability clip's reach (|o| > 27.6)."""
    rng = np.random.default_rng(seed)
    t = rng.normal(-2.5, 1.1, N)
    y = (rng.random(N) < 1 / (1 + np.exp(-t))).astype(np.float64)
    prod = 0.8 * t - 0.6 + rng.normal(0, 0.6, N)
    cand = t + rng.normal(0, 0.4, N)
    prod[:5] = [-40.0, 35.0, -800.0, 60.0, -30.0]
    if bad:
        cand[[3, 9]] = [np.inf, np.nan]
    pq.write_table(pa.table({"click": y, "prod": prod, "cand": cand}), path)
    return path


def _compare_logits(log: Path, out: Path, *extra: str) -> dict:
    assert main(["compare", str(log), "--label", "click", "--logit", "prod", "--logit", "cand", "--out", str(out),
                 "--quiet", *extra]) == 0
    return json.loads((out / "compare.json").read_text())


def test_models_given_as_logits_equal_evaluate_logit_of_each(tmp_path):
    """``compare --logit``: each model's report is ``evaluate --logit`` of its column (the same
    fine bins of the logit itself and the exact log loss from it), the difference of every metric
    is the difference of the two reports, and every engine gives the same numbers."""
    log = _logit_log(tmp_path / "log.parquet")
    res = _compare_logits(log, tmp_path / "duck", "--bootstrap", "20")
    assert res["input"]["models_are"] == "logits"
    for i, name in enumerate(("prod", "cand")):
        assert main(["evaluate", str(log), "--label", "click", "--logit", name, "--bootstrap", "0", "--quiet",
                     "--out", str(tmp_path / name)]) == 0
        alone = {e["name"]: e for e in json.loads((tmp_path / name / "report.json").read_text())["metrics"]}
        model = {e["name"]: e for e in json.loads((tmp_path / "duck" / "models" / f"{i}_{name}" / "report.json")
                                                  .read_text())["metrics"]}
        assert model["lcce"]["value"] is not None
        for metric in ("ece", "brier", "nll", "ne", "auc", "lcce", "calibration_ratio", "mae"):
            want = alone[metric].get("plug_in", alone[metric]["value"])
            got = model[metric].get("plug_in", model[metric]["value"])
            assert got == pytest.approx(want, rel=1e-10, abs=1e-14), (name, metric)
    d = _diff(res, "nll")
    assert d["diff"] == pytest.approx(res["metrics"]["prod"]["nll"]["value"] - res["metrics"]["cand"]["nll"]["value"],
                                      rel=1e-12)
    arrow = _compare_logits(log, tmp_path / "arrow", "--bootstrap", "20", "--engine", "arrow", "--chunk-rows", "3000")
    assert arrow["joint_cells"] == res["joint_cells"]
    for a, b in zip(res["differences"], arrow["differences"], strict=True):
        np.testing.assert_allclose([a["diff"], a["lo"], a["hi"]], [b["diff"], b["lo"], b["hi"]], rtol=1e-9,
                                   atol=1e-15, err_msg=a["metric"])


def test_logits_that_are_not_finite_are_refused_or_dropped(tmp_path, capsys):
    log = _logit_log(tmp_path / "log.parquet", bad=True)
    for engine in ("duckdb", "arrow"):
        assert main(["compare", str(log), "--label", "click", "--logit", "prod", "--logit", "cand", "--engine",
                     engine, "--out", str(tmp_path / f"x{engine}"), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert "2 " in err and "not finite" in err and "Traceback" not in err, (engine, err)
        res = _compare_logits(log, tmp_path / f"ok{engine}", "--engine", engine, "--drop-invalid", "--bootstrap", "0")
        assert res["input"]["rows_used"] == N - 2
    assert main(["compare", str(log), "--label", "click", "--score", "prod", "--logit", "cand", "--out",
                 str(tmp_path / "both"), "--quiet"]) == 2
    assert "--score and --logit" in capsys.readouterr().err


def test_replicates_do_not_depend_on_the_memory_block(monkeypatch):
    import calib_jax.logs.accumulate as A

    rng = np.random.default_rng(6)
    p = rng.uniform(0.01, 0.6, (4000, 2))
    y = (rng.random(4000) < p[:, 0]).astype(float)
    cells = joint_cells_from_rows(p, y)
    settings = Settings(scheme="cells", n_boot=300)
    whole = [a.replicated() for a in accumulators(cells, settings)]
    monkeypatch.setattr(A, "_JOINT_BLOCK_VALUES", 1000)  # a block of a few replicates
    small = [a.replicated() for a in accumulators(cells, settings)]
    together = A.replicated_jointly(accumulators(cells, settings))  # one draw per block for both models
    for a, b, c in zip(whole, small, together, strict=True):
        for table in ("scal", "rel", "hist"):
            np.testing.assert_array_equal(getattr(a, table), getattr(b, table))
            np.testing.assert_array_equal(getattr(a, table), getattr(c, table))


def test_replicates_do_not_depend_on_the_threads_or_the_seeds_sign(monkeypatch):
    """The blocks of replicates run on as many threads as there are cores; each replicate's
    draws are keyed by its index, so one thread and eight give the same bits, fields included.
    A negative seed is its 64-bit two's complement (it used to stop the command)."""
    import calib_jax.logs.accumulate as A

    rng = np.random.default_rng(9)
    n = 3000
    p = rng.uniform(0.01, 0.6, n)
    y = (rng.random(n) < p).astype(float)
    field = rng.integers(0, 5, n).astype(str)

    def tables(seed):
        acc = A.Accumulator(Settings(scheme="cells", n_boot=40, fields=("f",), seed=seed))
        from calib_jax.logs.validate import Columns, Problems, clean_chunk

        batch = pa.record_batch({"y": y, "p": p, "f": field})
        acc.update(clean_chunk(batch, Columns(label="y", score="p", fields=("f",)), 0, Problems()))
        out = acc.replicated()
        return [out.scal, out.rel, out.hist, out.fld["f"]]

    monkeypatch.setattr(A.os, "cpu_count", lambda: 8)
    many = tables(3)
    monkeypatch.setattr(A.os, "cpu_count", lambda: 1)
    for a, b in zip(many, tables(3), strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(tables(-1), tables(2**64 - 1), strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(tables(-1)[0], many[0])


def test_hostile_column_names_and_one_class(tmp_path, capsys):
    """Score columns named like mathtext, SQL quotes and a path; a log whose rows are all
    non-clicks (NE and calibration ratio undefined): null in the JSON, no traceback."""
    rng = np.random.default_rng(8)
    n = 3000
    names = ["a$x^{$", 'q"uote', "../up"]
    pq.write_table(pa.table({"click": np.zeros(n), names[0]: rng.uniform(0, 0.2, n), names[1]: rng.uniform(0, 0.2, n),
                             names[2]: rng.uniform(0, 0.2, n)}), tmp_path / "log.parquet")
    out = tmp_path / "out"
    argv = ["compare", str(tmp_path / "log.parquet"), "--label", "click", "--out", str(out), "--quiet",
            "--bootstrap", "20"]
    for name in names:
        argv += ["--score", name]
    assert main(argv) == 0, capsys.readouterr().err
    res = json.loads((out / "compare.json").read_text())
    assert res["metrics"][names[0]]["ne"]["value"] is None  # one class: undefined, not NaN
    assert sorted(p.name for p in (out / "models").iterdir()) == ["0_a_x_", "1_q_uote", "2_.._up"]
    assert all(p.parent == out / "models" for p in (out / "models").iterdir())
