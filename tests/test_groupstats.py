"""calib_jax.groupstats against plain-NumPy loops (SPEC §3)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference as R
from hypothesis import given, settings
from hypothesis import strategies as st

from calib_jax.groupstats import group_stats, merge, summarize

FIELDS = ("weight", "sum_p", "sum_y", "sum_pp", "sum_py")


def _data(rng, n, K, *, soft=False, weighted=False):
    p = rng.uniform(0, 1, n)
    y = (rng.uniform(size=n) < p).astype(np.float64)
    if soft:
        g = rng.dirichlet(np.ones(K), size=n)
    else:
        g = rng.integers(0, K, n)
    w = rng.uniform(0, 3, n) if weighted else None
    return p, y, g, w


def _stats_array(s) -> np.ndarray:
    return np.stack([np.asarray(getattr(s, f), dtype=np.float64) for f in FIELDS], axis=1)


@pytest.mark.parametrize("soft", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_group_stats_matches_loop_reference_float32(rng, soft, weighted):
    n, K = 300, 5
    p, y, g, w = _data(rng, n, K, soft=soft, weighted=weighted)
    s = group_stats(p, y, g, n_groups=K, weights=w)
    ref = R.group_sums(p, y, g, n_groups=K, weights=w)
    np.testing.assert_allclose(_stats_array(s), ref, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("soft", [False, True])
def test_group_stats_float64_exact(rng, soft):
    n, K = 200, 4
    p, y, g, w = _data(rng, n, K, soft=soft, weighted=True)
    with jax.enable_x64(True):
        s = group_stats(jnp.asarray(p), jnp.asarray(y), jnp.asarray(g), n_groups=K,
                        weights=jnp.asarray(w))
        assert s.weight.dtype == jnp.float64
        got = _stats_array(s)
    np.testing.assert_allclose(got, R.group_sums(p, y, g, n_groups=K, weights=w), rtol=1e-12)


@pytest.mark.parametrize("soft", [False, True])
def test_summarize_matches_centred_definitions(rng, soft):
    n, K = 250, 4
    p, y, g, w = _data(rng, n, K, soft=soft, weighted=True)
    with jax.enable_x64(True):
        summ = summarize(group_stats(jnp.asarray(p), jnp.asarray(y), jnp.asarray(g),
                                     n_groups=K, weights=jnp.asarray(w)))
        got = {f: np.asarray(getattr(summ, f)) for f in ("mass", "mu", "pi", "var", "cov")}
    ref = R.group_summary(p, y, g, n_groups=K, weights=w)
    for f, v in got.items():
        np.testing.assert_allclose(v, ref[f], rtol=1e-10, atol=1e-13, err_msg=f)
    np.testing.assert_allclose(got["mass"].sum(), 1.0, rtol=1e-12)


def test_empty_groups_are_zero_not_nan(rng):
    n, K = 50, 6
    p, y, _, _ = _data(rng, n, K)
    g = rng.choice([0, 2, 5], n)  # groups 1, 3, 4 empty
    s = group_stats(p, y, g, n_groups=K)
    summ = summarize(s)
    for f in ("mass", "mu", "pi", "var", "cov"):
        v = np.asarray(getattr(summ, f))
        assert np.all(np.isfinite(v)), f
        np.testing.assert_array_equal(v[[1, 3, 4]], 0.0, err_msg=f)
    ref = R.group_summary(p, y, g, n_groups=K)
    np.testing.assert_allclose(np.asarray(summ.mu), ref["mu"], rtol=1e-5, atol=1e-6)


def test_merge_of_shards_equals_whole(rng):
    n, K = 301, 4
    p, y, g, w = _data(rng, n, K, weighted=True)
    cuts = [0, 97, 200, n]
    parts = [group_stats(p[a:b], y[a:b], g[a:b], n_groups=K, weights=w[a:b])
             for a, b in zip(cuts[:-1], cuts[1:])]
    merged = merge(merge(parts[0], parts[1]), parts[2])
    whole = group_stats(p, y, g, n_groups=K, weights=w)
    np.testing.assert_allclose(_stats_array(merged), _stats_array(whole), rtol=1e-5, atol=1e-4)
    # adding NamedTuples field-wise (the SPEC's "mergeable by adding") gives the same
    summed = jax.tree.map(lambda a, b, c: a + b + c, *parts)
    np.testing.assert_allclose(_stats_array(summed), _stats_array(whole), rtol=1e-5, atol=1e-4)


def test_integer_weights_equal_repeated_rows(rng):
    n, K = 80, 3
    p, y, g, _ = _data(rng, n, K)
    w = rng.integers(0, 4, n)
    w[0] = 2
    s_w = group_stats(p, y, g, n_groups=K, weights=w.astype(np.float64))
    rep = np.repeat(np.arange(n), w)
    s_r = group_stats(p[rep], y[rep], g[rep], n_groups=K)
    np.testing.assert_allclose(_stats_array(s_w), _stats_array(s_r), rtol=1e-5, atol=1e-4)


def test_hard_ids_equal_one_hot_soft(rng):
    n, K = 120, 5
    p, y, g, w = _data(rng, n, K, weighted=True)
    hard = group_stats(p, y, g, n_groups=K, weights=w)
    soft = group_stats(p, y, np.eye(K)[g], weights=w)
    np.testing.assert_allclose(_stats_array(hard), _stats_array(soft), rtol=1e-5, atol=1e-4)


# few distinct shapes: every new shape costs XLA compilations
@settings(max_examples=20, deadline=None)
@given(
    n=st.sampled_from([1, 2, 17, 60]),
    K=st.sampled_from([1, 3, 7]),
    soft=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_property_sums_match_reference(n, K, soft, seed):
    rng = np.random.default_rng(seed)
    p, y, g, w = _data(rng, n, K, soft=soft, weighted=True)
    with jax.enable_x64(True):
        s = group_stats(jnp.asarray(p), jnp.asarray(y), jnp.asarray(g), n_groups=K,
                        weights=jnp.asarray(w))
        got = _stats_array(s)
        summ = summarize(s)
        var = np.asarray(summ.var)
    np.testing.assert_allclose(got, R.group_sums(p, y, g, n_groups=K, weights=w),
                               rtol=1e-12, atol=1e-12)
    ref = R.group_summary(p, y, g, n_groups=K, weights=w)
    np.testing.assert_allclose(var, ref["var"], rtol=1e-8, atol=1e-12)
    assert np.all(var >= 0)


# -------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        (dict(probs=[0.1, np.nan, 0.3]), "probs"),
        (dict(probs=[0.1, np.inf, 0.3]), "probs"),
        (dict(probs=[0.1, 1.2, 0.3]), "probs"),
        (dict(probs=[-0.1, 0.2, 0.3]), "probs"),
        (dict(labels=[0.0, 2.0, 1.0]), "labels"),
        (dict(labels=[0.0, 0.5, 1.0]), "labels"),
        (dict(labels=[0.0, 1.0]), "labels"),
        (dict(groups=[0, 3, 1]), "groups"),
        (dict(groups=[0, -1, 1]), "groups"),
        (dict(groups=[0, 1]), "groups"),
        (dict(groups=[[0.5, 0.4, 0.0], [1, 0, 0], [0, 0, 1]]), "groups"),
        (dict(weights=[1.0, -1.0, 1.0]), "weights"),
        (dict(weights=[1.0, 1.0]), "weights"),
        (dict(weights=[1.0, np.nan, 1.0]), "weights"),
    ],
)
def test_bad_input_raises_value_error_naming_argument(kwargs, name):
    args = dict(probs=[0.1, 0.2, 0.3], labels=[0.0, 1.0, 1.0], groups=[0, 1, 2], weights=None)
    args.update(kwargs)
    args = {k: (None if v is None else np.asarray(v)) for k, v in args.items()}
    with pytest.raises(ValueError, match=name):
        group_stats(args["probs"], args["labels"], args["groups"], n_groups=3,
                    weights=args["weights"])


def test_empty_input_raises():
    with pytest.raises(ValueError, match="probs"):
        group_stats(np.zeros(0), np.zeros(0), np.zeros(0, dtype=int), n_groups=2)


def test_hard_ids_require_n_groups():
    with pytest.raises(ValueError, match="n_groups"):
        group_stats(np.array([0.1, 0.2]), np.array([0.0, 1.0]), np.array([0, 1]))


# ------------------------------------------------- deterministic sums on accelerators (GPU/TPU)
@pytest.mark.parametrize("n, k", [(1, 3), (257, 7), (20_000, 40), (3000, 2000)])
def test_sorted_segment_sums_match_float64(rng, n, k):
    """The accelerator path: no scatter, a segmented tree scan over rows sorted by id; ids
    outside [0, k) are dropped; accuracy like the blocked CPU path (float64 reference)."""
    from calib_jax.groupstats import sorted_segment_sums

    v = rng.normal(size=(n, 2)).astype(np.float32)
    ids = rng.integers(-1, k + 1, n).astype(np.int32)
    ref = np.zeros((k, 2))
    ok = (ids >= 0) & (ids < k)
    np.add.at(ref, ids[ok], v[ok].astype(np.float64))
    got = np.asarray(jax.jit(sorted_segment_sums, static_argnums=2)(v, ids, k))
    np.testing.assert_allclose(got, ref, rtol=0, atol=2e-6 * max(1.0, np.sqrt(n / k)))
    # 1-D values and vmap over a leading axis
    one = jax.vmap(lambda x: sorted_segment_sums(x, jnp.asarray(ids), k))(jnp.stack([v[:, 0], v[:, 1]]))
    np.testing.assert_array_equal(np.asarray(one).T, got)


def _gpu_module(fn, *args) -> str:
    from jax import export

    return export.export(jax.jit(fn), platforms=["cuda"])(*args).mlir_module()


def test_accelerator_lowering_has_no_float_scatter_add():
    """Lowered for CUDA (no GPU needed), the group metrics and histogram binning contain no
    scatter (whose atomics made GPU sums differ run to run); the CPU lowering keeps its fast
    scatter path."""
    from jax import export

    import calib_jax.metrics as M
    from calib_jax.calibrators import histogram

    n = 2000
    p = jnp.linspace(0.01, 0.9, n)
    o = jnp.log(p / (1 - p))
    y = (jnp.arange(n) % 3 == 0).astype(jnp.float32)
    g = (jnp.arange(n) % 5).astype(jnp.int32)
    calls = {
        "ece": lambda p, y: M.ece(p, y),
        "gce": lambda p, y: M.gce(p, y, g, n_groups=5),
        "field_rce": lambda p, y: M.field_rce(p, y, g, n_groups=5),
        "lcce_quantile": lambda p, y: M.lcce(o, y, init="quantile"),
        "group_stats": lambda p, y: group_stats(p, y, g, n_groups=5).sum_py,
        "histogram_fit": lambda p, y: histogram.fit(o, y).values,
    }
    for name, fn in calls.items():
        assert "stablehlo.scatter" not in _gpu_module(fn, p, y), name
    cpu = export.export(jax.jit(calls["ece"]), platforms=["cpu"])(p, y).mlir_module()
    assert "stablehlo.scatter" in cpu
