"""The report's NumPy statistics (calib_jax.logs.cellstats) against the library's JAX functions
and SciPy, and the command's report path that never loads JAX."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
import scipy.stats

from calib_jax import inference as T
from calib_jax.bootstrap import debiased_gap as jax_debiased_gap
from calib_jax.logs import cellstats as C
from calib_jax.partitions import Histogram1D, assign_1d, kmeans_hist


def _cells(seed: int, n: int = 400):
    rng = np.random.default_rng(seed)
    z = np.sort(rng.normal(-2.0, 1.2, n))
    p = 1.0 / (1.0 + np.exp(-z))
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(0.2 + 0.8 * z)))).astype(np.float64)
    w = rng.integers(1, 50, n).astype(np.float64)
    return z, p, y, w


@pytest.mark.parametrize("seed", range(4))
def test_cluster_ids_equal_kmeans_hist_with_quantile_seeds(seed):
    rng = np.random.default_rng(seed)
    R, H = 5, 512
    w = rng.poisson(3.0, (R, H)).astype(np.float64) * (rng.random((R, H)) < 0.7)
    centre = np.linspace(-8, 8, H)
    mean = centre + rng.uniform(-0.01, 0.01, (R, H)) * (w > 0)  # non-decreasing along each row
    got = C.cluster_ids(w, mean, n_clusters=4)
    with jax.enable_x64(True):
        for r in range(R):
            h = Histogram1D(bin_index=np.zeros(0, np.int32), weight=w[r], mean=mean[r], m2=np.zeros(H))
            c = kmeans_hist(h, n_clusters=4, init="quantile")
            want = np.asarray(assign_1d(mean[r], 0.5 * (c[1:] + c[:-1])))
            np.testing.assert_array_equal(got[r], want)


def test_cluster_ids_keep_an_empty_cluster_and_stop_at_a_fixed_point():
    x = np.array([[0.0, 0.0, 0.0, 5.0]])
    ids = C.cluster_ids(np.array([[1.0, 1.0, 1.0, 0.0]]), x, n_clusters=3)
    assert ids.shape == (1, 4) and ids.min() >= 0 and ids.max() < 3


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_debiased_gap_equals_the_library(norm):
    rng = np.random.default_rng(1)
    w = rng.integers(0, 40, (7, 12)).astype(np.float64)
    sp = w * rng.uniform(0.05, 0.4, w.shape)
    sy = np.minimum(np.round(sp * rng.uniform(0.5, 1.5, w.shape)), w)
    with jax.enable_x64(True):
        want = np.asarray(jax_debiased_gap(w, sp, sy, norm))
    np.testing.assert_allclose(C.debiased_gap(w, sp, sy, norm), want, rtol=1e-12, atol=1e-15)
    with pytest.raises(ValueError, match="norm"):
        C.debiased_gap(w, sp, sy, "l3")


@pytest.mark.parametrize("seed", range(3))
def test_spiegelhalter_hosmer_lemeshow_and_cox_equal_the_library(seed):
    z, p, y, w = _cells(seed)
    groups = np.minimum((np.cumsum(w) - 0.5 * w) * 10 // w.sum(), 9).astype(np.int64)
    with jax.enable_x64(True):
        sz = T.spiegelhalter_z(p, y, weights=w)
        hl = T.hosmer_lemeshow(p, y, weights=w, groups=groups, n_groups=10)
        cx = T.cox_calibration(p, y, weights=w)
    zz, pz = C.spiegelhalter(p, y, w)
    np.testing.assert_allclose([zz, pz], [float(sz.z), float(sz.p_value)], rtol=1e-10)
    stat, df, pv = C.hosmer_lemeshow(p, y, w, groups, 10)
    np.testing.assert_allclose([stat, df, pv], [float(hl.statistic), float(hl.df), float(hl.p_value)], rtol=1e-10)
    # the p-values against SciPy's distributions
    np.testing.assert_allclose(pz, 2 * scipy.stats.norm.sf(abs(zz)), rtol=1e-12)
    np.testing.assert_allclose(pv, scipy.stats.chi2.sf(stat, df), rtol=1e-12)
    fit = C.cox(z, y, w)
    np.testing.assert_allclose([fit.intercept, fit.slope, fit.in_the_large],
                               [float(cx.intercept), float(cx.slope), float(cx.in_the_large)], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose([fit.statistic, fit.p_value], [float(cx.statistic), float(cx.p_value)], rtol=1e-6)
    np.testing.assert_allclose(fit.p_value, scipy.stats.chi2.sf(fit.statistic, 2), rtol=1e-12)
    assert fit.converged and bool(cx.converged)



def test_hosmer_lemeshow_a_group_whose_labels_its_scores_call_impossible():
    """A group scored 0 that holds a click (or scored 1 with a non-click) makes the statistic +inf and
    p = 0 in the library, the report's NumPy version and the report: the limit of the classical
    statistic as those scores tend to 0. The group used to add nothing, so p = 1 - y scored p = 1."""
    y = np.array([1, 0, 0, 0, 0, 1, 0, 1, 0, 1], np.float64)
    groups = np.repeat([0, 1], 5)
    half = np.full(5, 0.5)
    for eps in (1e-3, 1e-6):  # the classical statistic grows without bound as the scores tend to 0
        finite = C.hosmer_lemeshow(np.r_[np.full(5, eps), half], y, np.ones(10), groups, 2)[0]
        assert finite > 0.15 / eps  # (1 - 5 eps)^2 / (5 eps (1 - eps))
    # a click scored 0, then a non-click scored 1 (the second group all 1, one row not clicked)
    for scores, labels in ((np.r_[np.zeros(5), half], y), (np.r_[half, np.ones(5)], np.r_[y[5:], 1, 1, 0, 1, 1])):
        stat, df, pv = C.hosmer_lemeshow(scores, labels, np.ones(10), groups, 2)
        assert (stat, df, pv) == (np.inf, 2.0, 0.0)
        r = T.hosmer_lemeshow(scores, labels, groups=groups, n_groups=2)
        assert (float(r.statistic), float(r.df), float(r.p_value)) == (np.inf, 2.0, 0.0)
    # scores of 0 on rows without a click add nothing (the labels agree with them)
    y_ok = np.r_[np.zeros(5), y[5:]]
    stat, df, pv = C.hosmer_lemeshow(np.r_[np.zeros(5), half], y_ok, np.ones(10), groups, 2)
    assert df == 2.0 and stat == pytest.approx(0.2) and pv == pytest.approx(scipy.stats.chi2.sf(0.2, 2))
    # the report: the worst model (p = 1 - y) is rejected, with the reason
    import pyarrow as pa

    from calib_jax import logs

    rng = np.random.default_rng(0)
    lab = (rng.random(300) < 0.3).astype(int)
    rep = logs.evaluate(pa.table({"p": 1.0 - lab, "y": lab}), score="p", label="y", bootstrap=0).report
    hl = next(t for t in rep["tests"] if t["test"] == "hosmer_lemeshow")
    assert hl["p_value"] == 0.0 and hl["statistic"] is None and "impossible" in hl["note"]


def test_hosmer_lemeshow_near_1_is_the_statistic_of_the_mirrored_scores():
    """The statistic of (p, y) equals that of (1 - p, 1 - y) and the float64 formula: a group's
    O - E and n - E are summed from rows (y - p, 1 - p), not taken as differences of sums, which
    in float32 cancelled near p = 1 (8.52 for 8.09 at p = 1 - 1e-5, 62.5 for 96.7 at 1 - 1e-6)."""
    for eps in (1e-5, 3e-6, 1e-6):
        p = np.full(10_000, np.float32(1 - eps))
        y = np.ones(10_000)
        y[0] = 0
        p64 = p.astype(np.float64)
        ref = (y.sum() - p64.sum()) ** 2 / (p64.sum() * (1 - p64).sum() / p64.size)
        got, mirrored = T.hosmer_lemeshow(p, y, n_groups=1), T.hosmer_lemeshow(1 - p, 1 - y, n_groups=1)
        np.testing.assert_allclose([float(got.statistic), float(mirrored.statistic)], [ref, ref], rtol=1e-5)
        np.testing.assert_allclose(C.hosmer_lemeshow(p64, y, np.ones(p.size), np.zeros(p.size, int), 1)[0], ref,
                                   rtol=1e-12)


def test_cox_on_labels_the_score_separates_has_no_fit_and_says_so():
    """Every click above every non-click (or at a tie): the likelihood has no maximum, its gradient
    fades as the slope grows, and the fit reported converged with slope 45.9 (4 rows) or 31.3 (2).
    Now not converged, in the library, the report's version and the report's note; the
    likelihood-ratio statistic is at its limit, -2 log of the likelihood of (0, 1)."""
    import pyarrow as pa

    from calib_jax import logs

    for p, y in ((np.array([0.3, 0.4, 0.6, 0.7]), np.array([0.0, 0, 1, 1])), (np.array([0.3, 0.6]), np.array([0.0, 1])),
                 (np.array([0.3, 0.5, 0.5, 0.7]), np.array([0.0, 0, 1, 1])),  # a tie at the boundary
                 (np.array([0.3, 0.4, 0.6, 0.7]), np.array([1.0, 1, 0, 0]))):  # reversed: slope to -inf
        z = np.log(p / (1 - p))
        lib, cells = T.cox_calibration(p, y), C.cox(z, y, np.ones(p.size))
        assert not bool(lib.converged) and not cells.converged and cells.separated
        limit = -2 * np.sum(y * np.log(p) + (1 - y) * np.log1p(-p))
        if y[0] == 0 and len(set(p)) == p.size:  # completely separated upwards: the limit is 0 loss
            np.testing.assert_allclose(cells.statistic, limit, rtol=1e-6)
    mixed = T.cox_calibration(np.array([0.3, 0.4, 0.6, 0.7]), np.array([0.0, 1, 0, 1]))
    assert bool(mixed.converged)
    y = np.r_[np.zeros(50), np.ones(50)]
    rep = logs.evaluate(pa.table({"p": np.r_[np.linspace(0.1, 0.4, 50), np.linspace(0.6, 0.9, 50)], "y": y}),
                        score="p", label="y", bootstrap=0).report
    assert "the score separates the labels" in next(t for t in rep["tests"] if t["test"] == "cox")["note"]

def test_the_undefined_tests_say_why():
    p = np.full(6, 0.5)
    with pytest.raises(ValueError, match="no variance"):
        C.spiegelhalter(p, np.array([0, 1, 0, 1, 0, 1.0]), np.ones(6))
    with pytest.raises(ValueError, match="single class"):
        C.cox(np.linspace(-1, 1, 6), np.zeros(6), np.ones(6))
    with pytest.raises(ValueError, match="not identifiable"):
        C.cox(np.zeros(6), np.array([0, 1, 0, 1, 0, 1.0]), np.ones(6))


def test_corp_test_cells_equals_the_decomposition_statistic():
    from calib_jax.decompositions import corp

    z, p, y, w = _cells(5, 200)
    rate = y  # one label per cell
    mcb, pv = C.corp_test_cells(p, rate, w, n_resamples=50)
    with jax.enable_x64(True):
        want = float(corp(p, y, weights=w).mcb)
    np.testing.assert_allclose(mcb, want, rtol=1e-9, atol=1e-12)
    assert 0 < pv <= 1


_NO_JAX = textwrap.dedent("""
    import json, sys
    from calib_jax.cli import main
    rc = main(sys.argv[1:])
    print(json.dumps({"rc": rc, "jax": "jax" in sys.modules, "pandas": "pandas" in sys.modules}))
""")


@pytest.mark.parametrize("engine", ["duckdb", "arrow"])
def test_evaluate_from_an_engine_never_loads_jax(tmp_path, engine):
    pytest.importorskip("duckdb")
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    n = 20_000
    p = rng.uniform(0.01, 0.5, n)
    log = tmp_path / "log.parquet"
    pq.write_table(pa.table({"p": p, "y": (rng.random(n) < p).astype(np.int64),
                             "site": rng.choice(["a", "b", "c"], n)}), log)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    out = subprocess.run([sys.executable, "-c", _NO_JAX, "evaluate", str(log), "--score", "p", "--label", "y",
                          "--field", "site", "--bootstrap", "20", "--engine", engine, "--quiet",
                          "--out", str(tmp_path / "rep")], capture_output=True, text=True, env=env, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"rc": 0, "jax": False, "pandas": False}, out.stderr
    rep = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert rep["provenance"]["devices"] == [] and rep["provenance"]["x64"] is None
    assert {t["test"] for t in rep["tests"]} == {"spiegelhalter_z", "hosmer_lemeshow", "cox", "corp"}


def test_import_calib_jax_loads_no_jax_until_a_name_is_used():
    code = ("import sys, calib_jax; a = 'jax' in sys.modules; f = calib_jax.ece; "
            "print(a, 'jax' in sys.modules, f is calib_jax.metrics.ece, 'brier' in dir(calib_jax))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "True", "True"]
    import calib_jax

    with pytest.raises(AttributeError, match="no attribute 'not_a_metric'"):
        calib_jax.not_a_metric  # noqa: B018
    for name in calib_jax.__all__:
        assert getattr(calib_jax, name) is not None


def test_compile_cache_is_set_through_the_environment_before_jax_loads(tmp_path):
    code = textwrap.dedent(f"""
        import os, sys
        os.environ["CALIB_JAX_XLA_CACHE"] = {str(tmp_path / "xla")!r}
        from calib_jax.io import enable_compile_cache
        enable_compile_cache(min_compile_time_s=0.25)
        assert "jax" not in sys.modules
        import jax
        print(jax.config.jax_compilation_cache_dir, jax.config.jax_persistent_cache_min_compile_time_secs,
              jax.config.jax_compilation_cache_max_size)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    from calib_jax.io import COMPILE_CACHE_MAX_BYTES

    assert out.stdout.split() == [str(tmp_path / "xla"), "0.25", str(COMPILE_CACHE_MAX_BYTES)]


def test_pyarrow_values_are_read_from_their_buffers_with_offsets_and_nulls():
    import pyarrow as pa

    from calib_jax.logs.arrow_values import fixed_width_values, null_mask

    a = pa.array([1.0, None, 3.0, 4.0, None, 6.0])
    for arr in (a, a.slice(1), a.slice(2, 3), a.slice(0, 0), pa.array([None, None], pa.float64())):
        want_null = np.array([v is None for v in arr.to_pylist()], bool)
        np.testing.assert_array_equal(null_mask(arr), want_null)
        vals = fixed_width_values(arr, np.float64)
        np.testing.assert_array_equal(vals[~want_null], [v for v in arr.to_pylist() if v is not None])
