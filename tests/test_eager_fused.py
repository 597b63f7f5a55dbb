"""The compiled eager path (calib_jax._eager): one compiled call per eager call, the same
numbers as ``jax.jit`` of the function, and the usual ``ValueError`` for bad inputs."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import calib_jax.decompositions as D
from calib_jax import _eager
from calib_jax import metrics as M


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


def test_flags_are_only_collected_inside_the_wrapper_trace():
    assert not _eager.collecting()
    _eager.flag(np.array(True))  # a no-op outside a trace of `compiled`
    p, y, _ = _data()
    # under a user's jit an invalid value cannot raise: the function runs as before
    out = jax.jit(M.brier)(p * 3, y)
    assert np.isfinite(float(out))
