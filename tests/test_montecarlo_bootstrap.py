"""The trial bootstrap of Spearman coefficients against a plain NumPy/scipy bootstrap."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from scipy.stats import spearmanr

from calib_jax.montecarlo import bootstrap as B


def _data(seed: int, T: int = 60, M: int = 4, ties: bool = True):
    rng = np.random.default_rng(seed)
    ref = rng.normal(size=T)
    v = np.stack([ref + s * rng.normal(size=T) for s in (0.3, 1.0, 3.0)] + [rng.normal(size=T)], 1)
    v = v[:, :M]
    if ties:  # rounding creates ties inside columns and in the reference
        v = np.round(v, 1)
        ref = np.round(ref, 1)
    return v, ref


def _numpy_bootstrap(v, ref, idx):
    return np.array([[spearmanr(v[i, j], ref[i]).statistic for j in range(v.shape[1])] for i in idx])


@pytest.mark.parametrize("ties", [False, True])
def test_replicates_equal_scipy_on_explicit_resamples(ties):
    v, ref = _data(0, ties=ties)
    rng = np.random.default_rng(1)
    idx = rng.integers(0, len(ref), size=(37, len(ref)))  # B not a multiple of the chunk
    counts = np.stack([np.bincount(i, minlength=len(ref)) for i in idx])
    bs = B.bootstrap_spearman(v, ref, counts=counts, chunk=16)
    np.testing.assert_allclose(bs.replicates, _numpy_bootstrap(v, ref, idx), atol=2e-6)
    point = [spearmanr(v[:, j], ref).statistic for j in range(v.shape[1])]
    np.testing.assert_allclose(bs.rho, point, atol=2e-6)
    lo, hi = np.quantile(_numpy_bootstrap(v, ref, idx), [0.025, 0.975], axis=0)
    np.testing.assert_allclose(bs.lo, lo, atol=2e-6)
    np.testing.assert_allclose(bs.hi, hi, atol=2e-6)


def test_key_resamples_are_multinomial_and_deterministic():
    v, ref = _data(2, T=40)
    key = jax.random.key(3)
    c = np.asarray(B.bootstrap_counts(key, 500, 40))
    assert c.shape == (500, 40) and np.all(c.sum(1) == 40) and c.min() >= 0
    assert abs(c.mean() - 1.0) < 1e-12 and abs(c.var() - (1 - 1 / 40)) < 0.05  # Multinomial(T, 1/T)
    a = B.bootstrap_spearman(v, ref, key=key, n_boot=200)
    b = B.bootstrap_spearman(v, ref, key=key, n_boot=200)
    np.testing.assert_array_equal(a.replicates, b.replicates)
    assert np.all(a.lo <= a.rho + 1e-12) and np.all(a.rho <= a.hi + 1e-12)
    # the strongly related column has a tight interval far from the unrelated one
    assert a.lo[0] > a.hi[3]


def test_paired_difference_matches_numpy():
    v, ref = _data(4, T=80, ties=False)
    rng = np.random.default_rng(5)
    idx = rng.integers(0, 80, size=(300, 80))
    counts = np.stack([np.bincount(i, minlength=80) for i in idx])
    bs = B.bootstrap_spearman(v, ref, counts=counts)
    ref_reps = _numpy_bootstrap(v, ref, idx)
    d = ref_reps[:, 0] - ref_reps[:, 2]
    pd = B.paired_difference(bs, 0, 2)
    assert pd.diff == pytest.approx(bs.rho[0] - bs.rho[2])
    assert pd.lo == pytest.approx(np.quantile(d, 0.025), abs=2e-6)
    assert pd.hi == pytest.approx(np.quantile(d, 0.975), abs=2e-6)
    assert pd.share_a_better == pytest.approx(np.mean(d > 0) + 0.5 * np.mean(d == 0))
    assert pd.share_a_better > 0.95 and pd.lo > 0
    same = B.paired_difference(bs, 1, 1)
    assert same.diff == 0.0 and same.share_a_better == 0.5


def test_constant_column_is_undefined_and_bad_input_is_named():
    v, ref = _data(6, T=30, ties=False)
    v[:, 1] = 2.0
    bs = B.bootstrap_spearman(v, ref, key=jax.random.key(0), n_boot=20)
    # no rank correlation: NaN (as scipy's), never a 0 that pairs would call significantly worse
    assert np.isnan(bs.rho[1]) and np.isnan(bs.lo[1]) and np.all(np.isnan(bs.replicates[:, 1]))
    assert np.all(np.isfinite(np.delete(bs.replicates, 1, axis=1)))
    with pytest.raises(ValueError, match="`values`"):
        B.bootstrap_spearman(v[:, 0], ref, key=jax.random.key(0))
    with pytest.raises(ValueError, match="`reference`"):
        B.bootstrap_spearman(v, ref[:-1], key=jax.random.key(0))
    with pytest.raises(ValueError, match="`key`"):
        B.bootstrap_spearman(v, ref)
    with pytest.raises(ValueError, match="finite"):
        B.bootstrap_spearman(np.where(v > 0, np.nan, v), ref, key=jax.random.key(0))
    with pytest.raises(ValueError, match="`level`"):
        B.percentile_interval(np.zeros((3, 2)), 1.5)
