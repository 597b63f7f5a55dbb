"""calib_jax.partitions: bins, 1-D k-means and random groups (SPEC §2, §4).

References: plain-NumPy bin rules (tests/reference.py), the exact 1-D k-means of the
``ckmeans`` package (Wang & Song dynamic programme), an independent O(k n^2) dynamic
programme in tests/reference.py, and scikit-learn's KMeans.
"""

from __future__ import annotations

import ckmeans
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference as R
from sklearn.cluster import KMeans

from calib_jax.partitions import assign_1d, kmeans_1d, quantile_bins, random_groups, uniform_bins

# ------------------------------------------------------------------ uniform bins


def test_uniform_bins_random_match_reference(rng):
    p = rng.uniform(0, 1, 1000).astype(np.float32)
    got = np.asarray(uniform_bins(p, n_bins=15))
    np.testing.assert_array_equal(got, R.uniform_bin_ids(p.astype(np.float64), 15))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_uniform_bins_edges_go_to_upper_bin_and_one_to_last(dtype):
    # SPEC §2: bins are [m/M, (m+1)/M); p = 1.0 is in the last bin.
    p = np.array([0.0, 0.2, 0.4, 0.6, 0.8, 1.0], dtype=dtype)
    with jax.enable_x64(dtype == np.float64):
        got = np.asarray(uniform_bins(jnp.asarray(p), n_bins=5))
    np.testing.assert_array_equal(got, [0, 1, 2, 3, 4, 4])
    # exactly representable edges k/8
    q = (np.arange(9) / 8).astype(dtype)
    with jax.enable_x64(dtype == np.float64):
        got8 = np.asarray(uniform_bins(jnp.asarray(q), n_bins=8))
    np.testing.assert_array_equal(got8, [0, 1, 2, 3, 4, 5, 6, 7, 7])


def test_uniform_bins_just_below_edge_stays_in_lower_bin():
    p = np.array([np.nextafter(np.float32(0.25), np.float32(0)), np.float32(0.25)])
    np.testing.assert_array_equal(np.asarray(uniform_bins(p, n_bins=4)), [0, 1])


def test_uniform_bins_single_bin():
    p = np.array([0.0, 0.5, 1.0])
    np.testing.assert_array_equal(np.asarray(uniform_bins(p, n_bins=1)), [0, 0, 0])


# ------------------------------------------------------------------ quantile bins


def test_quantile_bins_distinct_divisible_equal_counts(rng):
    p = rng.permutation(np.linspace(0.01, 0.99, 100))
    got = np.asarray(quantile_bins(p, n_bins=10))
    np.testing.assert_array_equal(got, R.quantile_bin_ids(p, 10))
    np.testing.assert_array_equal(np.bincount(got, minlength=10), np.full(10, 10))


@pytest.mark.parametrize("M", [15, 64, 65, 300])
def test_quantile_bins_match_the_reference_on_both_search_methods(rng, M):
    """Few bins compare each score with every threshold, many bins binary-search: both give
    NumPy's ids for the documented rule, with ties (scores rounded to 3 decimals) and
    without, for n not divisible by M too."""
    for p in (rng.uniform(0, 1, 3000), np.round(rng.uniform(0, 1, 3000), 3)):
        p = p.astype(np.float32)
        # the documented rule in NumPy: block m starts at sorted position floor(m n / M)
        ps = np.sort(p)
        want = np.searchsorted(ps[(np.arange(1, M) * p.size) // M], p, side="right")
        np.testing.assert_array_equal(np.asarray(quantile_bins(p, n_bins=M)), want)


@pytest.mark.parametrize("n", [97, 101, 250])
def test_quantile_bins_contiguous_and_balanced(rng, n):
    p = rng.uniform(0, 1, n)
    M = 7
    got = np.asarray(quantile_bins(p, n_bins=M))
    order = np.argsort(p)
    assert np.all(np.diff(got[order]) >= 0), "bins must be contiguous in sorted order"
    counts = np.bincount(got, minlength=M)
    assert counts.max() - counts.min() <= 1, counts


def test_quantile_bins_keep_ties_together_and_are_order_free(rng):
    p = rng.choice([0.1, 0.3, 0.35, 0.8], 60)
    got = np.asarray(quantile_bins(p, n_bins=5))
    for v in np.unique(p):
        assert np.unique(got[p == v]).size == 1, f"ties at {v} split"
    perm = rng.permutation(60)
    np.testing.assert_array_equal(np.asarray(quantile_bins(p[perm], n_bins=5)), got[perm])


def test_quantile_bins_weighted_masses_balanced(rng):
    n, M = 400, 4
    p = rng.uniform(0, 1, n)
    w = rng.uniform(0.5, 1.5, n)
    got = np.asarray(quantile_bins(p, n_bins=M, weights=w))
    order = np.argsort(p)
    assert np.all(np.diff(got[order]) >= 0)
    masses = np.array([w[got == m].sum() for m in range(M)]) / w.sum()
    np.testing.assert_allclose(masses, 1 / M, atol=1.5 / n * 2)


# ------------------------------------------------------------------ 1-D k-means
# Jitted once per (shape, static options); every test uses N_KM points so that the
# compilations are shared across tests.
_kmeans = jax.jit(kmeans_1d, static_argnames=("n_clusters", "init", "n_bins", "n_iter",
                                                "n_polish"))
N_KM = 1000


def _blobs(rng, centres=(-4.0, -1.0, 1.5, 5.0), size=N_KM // 4, scale=0.3):
    return np.concatenate([rng.normal(c, scale, size) for c in centres])


def _partition_objective(x, res) -> float:
    ids = np.asarray(assign_1d(jnp.asarray(x, dtype=res.thresholds.dtype), res.thresholds))
    return R.kmeans_objective(x, ids), ids


def _ckmeans_objective(x, k) -> float:
    return float(sum(((c - c.mean()) ** 2).sum() for c in ckmeans.ckmeans(x, k)))


def test_reference_dp_agrees_with_ckmeans(rng):
    x = rng.normal(0, 1, 120)
    _, obj = R.optimal_kmeans_1d(x, 4)
    np.testing.assert_allclose(obj, _ckmeans_objective(x, 4), rtol=1e-10)


@pytest.mark.parametrize("init", ["random", "quantile", "optimal"])
def test_kmeans_separated_blobs_find_optimal_partition(rng, key, init):
    x = rng.permutation(_blobs(rng))
    res = _kmeans(x.astype(np.float32), n_clusters=4, key=key, init=init)
    obj, ids = _partition_objective(x, res)
    np.testing.assert_allclose(obj, _ckmeans_objective(x, 4), rtol=1e-5)
    clusters = ckmeans.ckmeans(x, 4)
    np.testing.assert_array_equal(np.bincount(ids, minlength=4), [c.size for c in clusters])
    cent = np.asarray(res.centroids, dtype=np.float64)
    np.testing.assert_allclose(cent, [c.mean() for c in clusters], rtol=1e-5, atol=1e-5)


def test_kmeans_optimal_init_near_ckmeans_on_unimodal_data(rng):
    x = rng.normal(0, 2, N_KM)
    res = _kmeans(x.astype(np.float32), n_clusters=4, key=jax.random.key(0), init="optimal")
    obj, _ = _partition_objective(x, res)
    opt = _ckmeans_objective(x, 4)
    assert obj >= opt * (1 - 1e-6)
    assert obj <= opt * (1 + 1e-4), (obj, opt)


def test_kmeans_random_is_a_lloyd_fixed_point_and_not_worse_than_sklearn_single_run(rng, key):
    x = rng.standard_t(4, N_KM)
    res = _kmeans(x.astype(np.float32), n_clusters=4, key=key, init="random")
    obj, ids = _partition_objective(x, res)
    cent = np.asarray(res.centroids, dtype=np.float64)
    thr = np.asarray(res.thresholds, dtype=np.float64)
    assert np.all(np.diff(cent) > 0)
    np.testing.assert_allclose(thr, 0.5 * (cent[1:] + cent[:-1]), rtol=1e-6, atol=1e-6)
    for k in range(4):
        # Lloyd fixed point: each centroid is the mean of its cluster (float32 slack)
        np.testing.assert_allclose(cent[k], x[ids == k].mean(), rtol=1e-3, atol=1e-3)
    opt = _ckmeans_objective(x, 4)
    assert obj >= opt * (1 - 1e-6)
    sk = KMeans(4, n_init=1, init="k-means++", random_state=0).fit(x[:, None])
    # a k-means++ + Lloyd local optimum: within 5% of the optimum, like sklearn's
    assert obj <= 1.05 * opt, (obj, opt, sk.inertia_)


def test_kmeans_quantile_and_optimal_are_seed_free(rng):
    x = rng.normal(0, 1, N_KM).astype(np.float32)
    for init in ("quantile", "optimal"):
        a = _kmeans(x, n_clusters=4, key=jax.random.key(1), init=init)
        b = _kmeans(x, n_clusters=4, key=jax.random.key(2), init=init)
        np.testing.assert_array_equal(np.asarray(a.centroids), np.asarray(b.centroids))


def test_kmeans_random_deterministic_per_key(rng):
    x = rng.normal(0, 1, N_KM).astype(np.float32)
    a = _kmeans(x, n_clusters=4, key=jax.random.key(7), init="random")
    b = _kmeans(x, n_clusters=4, key=jax.random.key(7), init="random")
    np.testing.assert_array_equal(np.asarray(a.centroids), np.asarray(b.centroids))


def _kmeanspp_sequential(key, cnt, mean, K):
    """k-means++ seeding written the plain way: one ``jax.random.categorical`` per draw, keys
    split as the draws go (``k0, key = split(key)``, then ``key, sub = split(key)``)."""
    k0, key = jax.random.split(key)
    first = mean[jax.random.categorical(k0, jnp.where(cnt > 0, jnp.log(jnp.maximum(cnt, 1e-30)), -jnp.inf))]
    c, d2 = [first], (mean - first) ** 2
    for _ in range(1, K):
        key, sub = jax.random.split(key)
        wt = cnt * d2
        logits = jnp.where(wt > 0, jnp.log(jnp.where(wt > 0, wt, 1.0)), -jnp.inf)
        logits = jnp.where(jnp.max(wt) <= 0, jnp.where(cnt > 0, 0.0, -jnp.inf), logits)
        pick = mean[jax.random.categorical(sub, logits)]
        c.append(pick)
        d2 = jnp.minimum(d2, (mean - pick) ** 2)
    return jnp.sort(jnp.stack(c))


@pytest.mark.parametrize("case", ["spread", "empty_bins", "fewer_values_than_k"])
def test_kmeanspp_seeding_equals_sequential_categorical_draws(rng, case):
    from calib_jax.partitions import kmeanspp_hist

    B, K = 64, 4
    cnt = rng.integers(0, 50, B).astype(np.float32)
    if case == "empty_bins":
        cnt[rng.random(B) < 0.7] = 0
    if case == "fewer_values_than_k":
        cnt[:] = 0
        cnt[[5, 40]] = [3, 9]
    mean = np.sort(rng.normal(0, 1, B)).astype(np.float32)
    for seed in range(20):
        key = jax.random.key(seed)
        got = jax.jit(kmeanspp_hist, static_argnums=3)(key, jnp.asarray(cnt), jnp.asarray(mean), K)
        want = _kmeanspp_sequential(key, jnp.asarray(cnt), jnp.asarray(mean), K)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.slow
def test_kmeans_integer_weights_equal_repeated_rows(rng):
    x = _blobs(rng, size=40)
    w = rng.integers(1, 4, x.size)
    a = _kmeans(x.astype(np.float32), n_clusters=4, key=jax.random.key(0), init="optimal",
                weights=w.astype(np.float32))
    b = _kmeans(np.repeat(x, w).astype(np.float32), n_clusters=4, key=jax.random.key(0),
                init="optimal")
    np.testing.assert_allclose(np.asarray(a.centroids), np.asarray(b.centroids), rtol=1e-5,
                               atol=1e-5)


def test_kmeans_k_larger_than_n_raises():
    with pytest.raises(ValueError, match="n_clusters"):
        kmeans_1d(np.array([0.0, 1.0, 2.0]), n_clusters=4, init="quantile")


def test_kmeans_nan_raises():
    with pytest.raises(ValueError):
        kmeans_1d(np.array([0.0, np.nan, 2.0, 3.0]), n_clusters=2, init="quantile")


# ------------------------------------------------------------------ random groups


def test_random_groups_range_determinism_balance():
    n, K = 4000, 5
    g1 = np.asarray(random_groups(jax.random.key(3), n, n_groups=K))
    g2 = np.asarray(random_groups(jax.random.key(3), n, n_groups=K))
    g3 = np.asarray(random_groups(jax.random.key(4), n, n_groups=K))
    assert g1.shape == (n,)
    assert g1.min() >= 0 and g1.max() < K
    np.testing.assert_array_equal(g1, g2)
    assert np.any(g1 != g3)
    counts = np.bincount(g1, minlength=K)
    # chi-square with 4 dof: 99.99% quantile ~ 23.5
    chi2 = float(np.sum((counts - n / K) ** 2 / (n / K)))
    assert chi2 < 23.5, counts


def _edge_aligned(lo: float, span: float, B: int) -> np.ndarray:
    """Points on every bin edge of [lo, lo + span] and one float32 step either side: where
    ``(x - lo) / width`` and ``(x - lo) * (B / span)`` round to different sides of an integer
    (a few hundred of the 3B points)."""
    width = np.float32(np.float32(span) / np.float32(B))
    x = (np.float32(lo) + np.arange(B + 1, dtype=np.float32) * width).astype(np.float32)
    return np.concatenate([x, np.nextafter(x, np.float32(-np.inf)), np.nextafter(x, np.float32(np.inf))])


def _np_bins(x: np.ndarray, B: int) -> np.ndarray:
    lo, hi = x.min(), x.max()
    scale = np.float32(np.float32(B) / np.float32(hi - lo))
    return np.clip(np.floor((x - lo) * scale), 0, B - 1).astype(np.int32)


@pytest.mark.parametrize("lo,span", [(-7.3, 5.1), (-3.9, 8.7), (0.25, 3.3)])
def test_histogram_bins_are_the_documented_product_in_every_compiled_context(lo, span):
    """A point's bin is floor((x - lo) * (B / span)) (NumPy float32 reference) whether
    histogram_1d runs op by op, under jit, or vmapped: on points at the bin edges, where a
    division by the width would put hundreds of them in the neighbouring bin. (The division
    gave the product's bins in these programs too, because XLA rewrote it, but not inside
    the 2-device Fig 3 trial: see test_montecarlo_engine's 1 vs 2 devices test.)"""
    from calib_jax.partitions import histogram_1d

    B = 512
    x = _edge_aligned(lo, span, B)
    expect = _np_bins(x, B)
    width = np.float32(np.float32(x.max() - x.min()) / np.float32(B))
    by_division = np.clip(np.floor((x - x.min()) / width), 0, B - 1).astype(np.int32)
    assert np.sum(by_division != expect) > 10  # the data separates the two forms
    xs = jnp.stack([jnp.asarray(x), jnp.asarray(x[::-1].copy())])
    outs = {
        "eager": histogram_1d(jnp.asarray(x), n_bins=B).bin_index,
        "jit": jax.jit(lambda v: histogram_1d(v, n_bins=B).bin_index)(x),
        "vmap": jax.jit(jax.vmap(lambda v: histogram_1d(v * 1.0, n_bins=B).bin_index))(xs)[0],
        "with sums": jax.jit(lambda v, p, y: histogram_1d(v, n_bins=B, probs=p, labels=y).bin_index)(
            x, jnp.full_like(x, 0.5), jnp.zeros_like(x)),
    }
    for name, got in outs.items():
        np.testing.assert_array_equal(np.asarray(got), expect, err_msg=name)
    counts = np.asarray(histogram_1d(jnp.asarray(x), n_bins=B).weight)
    np.testing.assert_array_equal(counts, np.bincount(expect, minlength=B).astype(np.float32))
