"""The compiled eager path (calib_jax._src.eager): one compiled call per eager call, the same
numbers as ``jax.jit`` of the function, and the usual ``ValueError`` for bad inputs."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import calib_jax.decompositions as D
from calib_jax import metrics as M
from calib_jax._src import eager as _eager


def _data(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.01, 0.6, n).astype(np.float32)
    y = (rng.uniform(size=n) < p).astype(np.float32)
    g = rng.integers(0, 6, n).astype(np.int32)
    return p, y, g


@pytest.mark.parametrize("call", [
    lambda p, y, g: M.ece(p, y),
    lambda p, y, g: M.field_rce(p, y, g, n_groups=6),
    lambda p, y, g: M.auc(p, y),
    lambda p, y, g: D.nll_grouping(p, y, g, n_groups=6).score,
])
def test_eager_equals_jit_and_the_plain_path(call, monkeypatch):
    p, y, g = _data()
    eager = np.asarray(call(p, y, g))
    jitted = np.asarray(jax.jit(call)(p, y, g))
    np.testing.assert_array_equal(eager, jitted)
    monkeypatch.setenv("CALIB_JAX_FUSED_EAGER", "0")
    np.testing.assert_allclose(np.asarray(call(p, y, g)), eager, rtol=1e-6)


@pytest.mark.parametrize("bad, match", [
    (lambda p, y, g: M.brier(np.where(g == 0, np.nan, p), y), "NaN"),
    (lambda p, y, g: M.ece(p * 3, y), r"\[0, 1\]"),
    (lambda p, y, g: M.nll(p, y * 2), "0 or 1"),
    (lambda p, y, g: M.field_ece(p, y, g, n_groups=3), r"\[0, 3\)"),
    (lambda p, y, g: M.brier(p, y, weights=-np.ones_like(p)), "non-negative"),
    (lambda p, y, g: M.bias(p, np.zeros_like(y)), "no positive label"),
])
def test_bad_inputs_still_raise_naming_the_argument(bad, match):
    p, y, g = _data()
    with pytest.raises(ValueError, match=match):
        bad(p, y, g)


def test_calls_that_do_not_bind_raise_type_error():
    """The wrapper binds arguments itself: too many positional arguments (``weights`` is
    keyword-only), a duplicate or an unknown keyword raise Python's TypeError as the plain
    function does."""
    p, y, _ = _data()
    for call in (lambda: M.brier(p, y, np.ones_like(p)), lambda: M.brier(p, y, probs=p),
                 lambda: M.brier(p, y, weight=np.ones_like(p))):
        with pytest.raises(TypeError):
            call()


def test_flags_are_only_collected_inside_the_wrapper_trace():
    assert not _eager.collecting()
    _eager.flag(np.array(True))  # a no-op outside a trace of `compiled`
    p, y, _ = _data()
    # under a user's jit an invalid value cannot raise: the output is NaN instead of a
    # plausible number, and under `unchecked()` the function computes on the values as given
    assert np.isnan(float(jax.jit(M.brier)(p * 3, y)))
    with _eager.unchecked():  # a fresh function: a trace made before the block is cached
        out = jax.jit(lambda a, b: M.brier(a, b))(p * 3, y)
    assert np.isfinite(float(out))
    assert not _eager.collecting()


_TRICKY = [0.0, -0.0, 1.0, 0.5, np.nextafter(np.float32(1), np.float32(2)),
           np.nextafter(np.float32(0), np.float32(-1)), -1e-10, -1e-38, 1e-30, 2.0, -3.0,
           np.nan, np.inf, -np.inf]


@pytest.mark.parametrize("value", _TRICKY)
def test_traced_checks_agree_with_numpy(value):
    """The float-reduction predicates of the fused path (one pass each) flag exactly the
    arrays the NumPy checks reject, including NaN, +-inf, -0.0 and one ulp outside."""
    from calib_jax._src import validation as V

    x = np.array([0.0, 1.0, 0.25, value], np.float32)
    # XLA:CPU reads subnormal inputs as zero (as the computation itself then does), so there
    # the expected verdict is NumPy's on the flushed values; the plain path still rejects them.
    # XLA:GPU compares subnormals exactly (seen on an H100), so there it is NumPy's on x itself
    tiny = np.finfo(np.float32).tiny
    flushes = jax.default_backend() == "cpu"
    v = np.where(np.abs(x) < tiny, np.float32(0), x) if flushes else x
    finite = bool(np.all(np.isfinite(v)))
    in_unit = finite and bool(v.min() >= 0.0 and v.max() <= 1.0)
    binary = finite and bool(np.all((v == 0.0) | (v == 1.0)))
    got = jax.jit(lambda a: (V._not_finite(a), V._outside_unit_interval(a), V._not_binary(a)))(x)
    assert [bool(g) for g in got] == [not finite, not in_unit, not binary]
    for check in (V.check_probs, V.check_labels, V.as_float_array):
        ok = {"check_probs": in_unit, "check_labels": binary, "as_float_array": finite}[check.__name__]
        def flagged(a, check=check):
            _, flags = _eager._collect(check, a, (a, "x"), {})
            return jax.numpy.any(jax.numpy.stack(flags))

        assert bool(jax.jit(flagged)(x)) == (not ok), check.__name__
        raw_ok = {"check_probs": bool(np.isfinite(x).all() and x.min() >= 0 and x.max() <= 1),
                  "check_labels": bool(np.all((x == 0.0) | (x == 1.0))),
                  "as_float_array": finite}[check.__name__]
        if not raw_ok:
            with pytest.raises(ValueError, match="`x`"):
                check(x, "x")


def test_wrapper_sorts_arguments_into_arrays_static_and_plain():
    """Pytrees of arrays are dynamic inputs, hashable functions and strings are static, and
    numbers in lists or tuples stay data for the function itself (not constants baked into
    one program per value)."""
    import jax.numpy as jnp

    from calib_jax.partitions import Histogram1D

    a = np.arange(3, dtype=np.float32)
    hist = Histogram1D(bin_index=np.zeros(3, np.int32), weight=a, mean=a, m2=a)
    assert _eager._kind(hist)[0] == "arrays"
    assert _eager._kind({"embedding": a, "ranks": jnp.ones(3)})[0] == "arrays"
    assert _eager._kind((M.brier, M.ece))[0] == "static"
    assert _eager._kind((0.1, 0.2))[0] == "plain"
    assert _eager._kind([a, a])[0] == "arrays"
    assert _eager._kind((a, 0.5))[0] == "plain"
    p, y, _ = _data(n=50)
    np.testing.assert_allclose(float(M.brier(tuple(p.tolist()), tuple(y.tolist()))), float(M.brier(p, y)),
                               rtol=1e-6)
