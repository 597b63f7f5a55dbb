"""calib_jax.decompositions: terms against references, identities, CORP anchor (SPEC §5).

Identities: terms add up to the score to 1e-12 in float64 and 1e-6 relative in float32,
for hard and soft partitions, with hypothesis property tests over random shapes/values.
The CORP decomposition is checked against model-diagnostics (isotonic recalibration).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import model_diagnostics.scoring as mds
import numpy as np
import pytest
import reference as R
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.isotonic import IsotonicRegression
from sklearn.metrics import brier_score_loss, log_loss

from calib_jax import decompositions as D

N = 400


def _data(rng, n=N, K=5, *, soft=False, weighted=False, lo=0.0, hi=1.0):
    p = rng.uniform(lo, hi, n)
    y = (rng.uniform(size=n) < p).astype(np.float64)
    g = rng.dirichlet(np.ones(K) * 0.7, n) if soft else rng.integers(0, K, n)
    w = rng.uniform(0.2, 2.0, n) if weighted else None
    return p, y, g, w


def _x64(*arrays):
    return [None if a is None else jnp.asarray(a) for a in arrays]


def _brier_sum(d) -> float:
    return float(d.unc) + float(d.rel) - float(d.res) + float(d.delta)


def _nll_sum(d) -> float:
    return float(d.unc) + float(d.rel) - float(d.res) + float(d.curv) - float(d.cov)


# ------------------------------------------------------------------ Brier grouping


@pytest.mark.parametrize("soft", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_brier_grouping_terms_float64(rng, soft, weighted):
    p, y, g, w = _data(rng, soft=soft, weighted=weighted)
    with jax.enable_x64(True):
        d = D.brier_grouping(*_x64(p, y, g), n_groups=5, weights=_x64(w)[0])
        ref = R.brier_grouping(p, y, g, n_groups=5, weights=w)
        for f in ("unc", "rel", "res", "delta"):
            np.testing.assert_allclose(float(getattr(d, f)), ref[f], rtol=1e-10, atol=1e-14,
                                       err_msg=f)
        score = brier_score_loss(y, p, sample_weight=w)
        np.testing.assert_allclose(float(d.score), score, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(_brier_sum(d), score, rtol=0, atol=1e-12)
        # per-group terms add up to the totals
        np.testing.assert_allclose(float(jnp.sum(d.rel_k)), float(d.rel), atol=1e-14)
        np.testing.assert_allclose(float(jnp.sum(d.res_k)), float(d.res), atol=1e-14)
        np.testing.assert_allclose(float(jnp.sum(d.delta_k)), float(d.delta), atol=1e-14)


@pytest.mark.parametrize("soft", [False, True])
def test_brier_grouping_identity_float32(rng, soft):
    p, y, g, w = _data(rng, soft=soft, weighted=True)
    d = D.brier_grouping(p.astype(np.float32), y.astype(np.float32),
                         g.astype(np.float32) if soft else g, n_groups=5,
                         weights=w.astype(np.float32))
    assert d.rel.dtype == jnp.float32
    score = brier_score_loss(y, p, sample_weight=w)
    np.testing.assert_allclose(_brier_sum(d), float(d.score), rtol=1e-6)
    np.testing.assert_allclose(float(d.score), score, rtol=1e-5)


def test_brier_grouping_rel_is_gce_and_singletons_give_brier(rng):
    p, y, _, _ = _data(rng, n=50)
    with jax.enable_x64(True):
        d = D.brier_grouping(*_x64(p, y), jnp.arange(50), n_groups=50)
        # singleton groups: UNC = RES and Delta = 0, Brier = REL (seeds/000 §2.3)
        np.testing.assert_allclose(float(d.rel), brier_score_loss(y, p), rtol=1e-12)
        np.testing.assert_allclose(float(d.delta), 0.0, atol=1e-14)
        np.testing.assert_allclose(float(d.unc), float(d.res), rtol=1e-12)


def test_brier_grouping_empty_groups_contribute_zero(rng):
    p, y, _, _ = _data(rng, n=60)
    g = rng.choice([1, 4], 60)
    d = D.brier_grouping(p, y, g, n_groups=7)
    for f in ("rel_k", "res_k", "delta_k"):
        v = np.asarray(getattr(d, f))
        assert np.all(np.isfinite(v))
        np.testing.assert_array_equal(v[[0, 2, 3, 5, 6]], 0.0)


# hypothesis: few distinct shapes (each new shape compiles)
@settings(max_examples=15, deadline=None)
@given(
    n=st.sampled_from([1, 40]),
    K=st.sampled_from([1, 6]),
    soft=st.booleans(),
    weighted=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
    extreme=st.booleans(),
)
def test_property_brier_identity_float64(n, K, soft, weighted, seed, extreme):
    rng = np.random.default_rng(seed)
    p, y, g, w = _data(rng, n, K, soft=soft, weighted=weighted)
    if extreme:  # scores exactly 0 and 1
        p = np.where(rng.uniform(size=n) < 0.5, np.round(p), p)
    with jax.enable_x64(True):
        d = D.brier_grouping(*_x64(p, y, g), n_groups=K, weights=_x64(w)[0])
        score = R.brier(p, y, w)
        np.testing.assert_allclose(_brier_sum(d), score, rtol=0, atol=1e-12)
        ref = R.brier_grouping(p, y, g, n_groups=K, weights=w)
        for f in ("rel", "res", "delta"):
            np.testing.assert_allclose(float(getattr(d, f)), ref[f], atol=1e-12, err_msg=f)


@settings(max_examples=15, deadline=None)
@given(
    K=st.sampled_from([1, 8]),
    soft=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
    scale=st.sampled_from([1.0, 0.05]),
)
def test_property_brier_identity_float32(K, soft, seed, scale):
    rng = np.random.default_rng(seed)
    p, y, g, w = _data(rng, 200, K, soft=soft, weighted=True, hi=scale)  # scale: CTR-like
    d = D.brier_grouping(p.astype(np.float32), y.astype(np.float32),
                         g.astype(np.float32) if soft else g, n_groups=K,
                         weights=w.astype(np.float32))
    np.testing.assert_allclose(_brier_sum(d), float(d.score), rtol=1e-6)


# ------------------------------------------------------------------ Murphy


def test_murphy_by_distinct_values(rng):
    p = rng.choice(np.linspace(0.05, 0.95, 7), N)
    y = (rng.uniform(size=N) < p**1.2).astype(np.float64)
    w = rng.uniform(0.5, 1.5, N)
    with jax.enable_x64(True):
        d = D.murphy(*_x64(p, y), weights=jnp.asarray(w))
        ref = R.murphy(p, y, weights=w)
        for f in ("unc", "rel", "res"):
            np.testing.assert_allclose(float(getattr(d, f)), ref[f], rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(float(d.delta), 0.0, atol=1e-14)
        score = brier_score_loss(y, p, sample_weight=w)
        np.testing.assert_allclose(float(d.unc + d.rel - d.res), score, atol=1e-12)


def test_murphy_binned_reports_delta(rng):
    p, y, _, _ = _data(rng)
    ids = R.uniform_bin_ids(p, 10)
    with jax.enable_x64(True):
        d = D.murphy(*_x64(p, y), n_bins=10)
        ref = R.brier_grouping(p, y, ids, n_groups=10)
        for f in ("unc", "rel", "res", "delta"):
            np.testing.assert_allclose(float(getattr(d, f)), ref[f], rtol=1e-10, atol=1e-14)
        assert abs(float(d.delta)) > 1e-6  # binned: the three-term form is not exact
        np.testing.assert_allclose(_brier_sum(d), brier_score_loss(y, p), atol=1e-12)


# ------------------------------------------------------------------ NLL grouping


@pytest.mark.parametrize("soft", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_grouping_terms_float64(rng, soft, weighted):
    p, y, g, w = _data(rng, soft=soft, weighted=weighted, lo=0.01, hi=0.99)
    with jax.enable_x64(True):
        d = D.nll_grouping(*_x64(p, y, g), n_groups=5, weights=_x64(w)[0])
        ref = R.nll_grouping(p, y, g, n_groups=5, weights=w)
        for f in ("unc", "rel", "res", "curv", "cov"):
            np.testing.assert_allclose(float(getattr(d, f)), ref[f], rtol=1e-9, atol=1e-13,
                                       err_msg=f)
        score = log_loss(y, p, sample_weight=w)
        np.testing.assert_allclose(float(d.score), score, rtol=1e-12)
        np.testing.assert_allclose(_nll_sum(d), score, rtol=0, atol=1e-12)
        assert np.all(np.asarray(d.curv_k) >= -1e-15)  # Bregman remainder R_k >= 0
        np.testing.assert_allclose(float(jnp.sum(d.curv_k)), float(d.curv), atol=1e-13)
        np.testing.assert_allclose(float(jnp.sum(d.cov_k)), float(d.cov), atol=1e-13)


def test_nll_grouping_identity_float32(rng):
    p, y, g, w = _data(rng, weighted=True, lo=0.01, hi=0.3)
    d = D.nll_grouping(p.astype(np.float32), y.astype(np.float32), g, n_groups=5,
                       weights=w.astype(np.float32))
    np.testing.assert_allclose(_nll_sum(d), float(d.score), rtol=1e-6)
    np.testing.assert_allclose(float(d.score), log_loss(y, p, sample_weight=w), rtol=1e-5)


@settings(max_examples=15, deadline=None)
@given(
    n=st.sampled_from([2, 40]),
    K=st.sampled_from([1, 6]),
    soft=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_property_nll_identity_float64(n, K, soft, seed):
    rng = np.random.default_rng(seed)
    p, y, g, w = _data(rng, n, K, soft=soft, weighted=True, lo=1e-3, hi=1 - 1e-3)
    with jax.enable_x64(True):
        d = D.nll_grouping(*_x64(p, y, g), n_groups=K, weights=jnp.asarray(w))
        np.testing.assert_allclose(_nll_sum(d), R.nll_probs(p, y, w), rtol=0, atol=1e-12)
        assert float(d.curv) >= -1e-14
        ref = R.nll_grouping(p, y, g, n_groups=K, weights=w)
        np.testing.assert_allclose(float(d.rel), ref["rel"], atol=1e-11)
        np.testing.assert_allclose(float(d.cov), ref["cov"], atol=1e-10)


# ------------------------------------------------------------------ CORP


@pytest.mark.parametrize("weighted", [False, True])
def test_corp_brier_matches_model_diagnostics(rng, weighted):
    p, y, _, w = _data(rng, weighted=weighted)
    p = np.round(p, 2)  # ties (pooled by PAV)
    md = mds.decompose(y, p, weights=w, scoring_function=mds.SquaredError())
    with jax.enable_x64(True):
        d = D.corp(*_x64(p, y), weights=_x64(w)[0], score="brier")
        np.testing.assert_allclose(float(d.mcb), md["miscalibration"][0], rtol=1e-9, atol=1e-14)
        np.testing.assert_allclose(float(d.dsc), md["discrimination"][0], rtol=1e-9, atol=1e-14)
        np.testing.assert_allclose(float(d.unc), md["uncertainty"][0], rtol=1e-9)
        np.testing.assert_allclose(float(d.score), md["score"][0], rtol=1e-12)
        np.testing.assert_allclose(float(d.mcb - d.dsc + d.unc), float(d.score), atol=1e-12)
        iso = IsotonicRegression().fit(p, y, sample_weight=w).predict(p)
        np.testing.assert_allclose(np.asarray(d.recalibrated), iso, atol=1e-12)
    ref = R.corp_brier(p, y, w)
    np.testing.assert_allclose(float(d.mcb), ref["mcb"], rtol=1e-9, atol=1e-14)


def test_corp_nll_matches_model_diagnostics(rng):
    p, y, _, _ = _data(rng, lo=0.02, hi=0.98)
    p = np.round(p, 2)
    md = mds.decompose(y, p, scoring_function=mds.LogLoss())
    with jax.enable_x64(True):
        d = D.corp(*_x64(p, y), score="nll")
        np.testing.assert_allclose(float(d.score), md["score"][0], rtol=1e-9)
        np.testing.assert_allclose(float(d.mcb), md["miscalibration"][0], rtol=1e-6, atol=1e-10)
        np.testing.assert_allclose(float(d.dsc), md["discrimination"][0], rtol=1e-6, atol=1e-10)
        np.testing.assert_allclose(float(d.unc), md["uncertainty"][0], rtol=1e-9)
