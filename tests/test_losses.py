"""Tests of calib_jax.losses against plain NumPy references and finite differences."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from calib_jax import losses


def _data(seed=0, n=200, k=3):
    rng = np.random.default_rng(seed)
    o = rng.normal(-1.0, 1.5, n)
    y = (rng.random(n) < 1 / (1 + np.exp(-o))).astype(float)
    h = rng.normal(0, 1, (n, k))
    tau = rng.uniform(0.5, 2.0, k)
    beta = rng.normal(0, 0.5, k)
    v = rng.uniform(0.1, 2.0, n)
    return o, y, h, tau, beta, v


def _np_grouped_nll(o, y, h, tau, beta, v=None):
    q = np.exp(h - h.max(1, keepdims=True))
    q /= q.sum(1, keepdims=True)
    p = 1 / (1 + np.exp(-(o[:, None] / tau[None] + beta[None])))
    lik = (q * (y[:, None] * p + (1 - y[:, None]) * (1 - p))).sum(1)
    v = np.ones_like(o) if v is None else v
    return -(v * np.log(lik)).sum() / v.sum()


def test_grouped_nll_matches_numpy():
    o, y, h, tau, beta, v = _data()
    lq = jax.nn.log_softmax(jnp.asarray(h), axis=1)
    got = losses.grouped_nll(o, y, lq, tau, beta)
    np.testing.assert_allclose(got, _np_grouped_nll(o, y, h, tau, beta), rtol=1e-5)
    got_w = losses.grouped_nll(o, y, lq, tau, beta, weights=v)
    np.testing.assert_allclose(got_w, _np_grouped_nll(o, y, h, tau, beta, v), rtol=1e-5)
    # TS variant (beta=None) is beta = 0
    np.testing.assert_allclose(
        losses.grouped_nll(o, y, lq, tau), _np_grouped_nll(o, y, h, tau, np.zeros(3)), rtol=1e-5
    )


def test_grouped_nll_is_mixture_log_loss():
    # For binary y the grouped likelihood equals that of the mixture prediction (eq. 8).
    o, y, h, tau, beta, _ = _data(1)
    q = np.asarray(jax.nn.softmax(jnp.asarray(h), axis=1))
    pm = (q / (1 + np.exp(-(o[:, None] / tau + beta)))).sum(1)
    ref = -np.mean(y * np.log(pm) + (1 - y) * np.log1p(-pm))
    lq = jax.nn.log_softmax(jnp.asarray(h), axis=1)
    np.testing.assert_allclose(losses.grouped_nll(o, y, lq, tau, beta), ref, rtol=1e-5)


def test_grouped_nll_stable_for_extreme_inputs():
    o = jnp.array([80.0, -80.0, 60.0])
    y = jnp.array([0.0, 1.0, 1.0])
    lq = jnp.array([[0.0, -jnp.inf], [-jnp.inf, 0.0], [-1e-30, -70.0]])
    val = losses.grouped_nll_terms(o, y, lq, jnp.ones(2), jnp.zeros(2))
    assert np.all(np.isfinite(val))
    np.testing.assert_allclose(val[:2], [80.0, 80.0], rtol=1e-6)


def test_grouped_nll_gradients_finite_differences():
    o, y, h, tau, beta, v = _data(2, n=40)
    o, y, v = jnp.asarray(o), jnp.asarray(y), jnp.asarray(v)

    def f(h, log_tau, beta):
        lq = jax.nn.log_softmax(h, axis=1)
        return losses.grouped_nll(o, y, lq, jnp.exp(log_tau), beta, weights=v)

    with jax.enable_x64(True):
        args = tuple(jnp.asarray(a, jnp.float64) for a in (h, np.log(tau), beta))
        o64, y64, v64 = (jnp.asarray(a, jnp.float64) for a in (o, y, v))

        def f64(h, log_tau, beta):
            lq = jax.nn.log_softmax(h, axis=1)
            return losses.grouped_nll(o64, y64, lq, jnp.exp(log_tau), beta, weights=v64)

        check_grads(f64, args, order=2, modes=["rev"], atol=1e-6, rtol=1e-6)


def test_within_group_variance_matches_numpy():
    o, y, h, *_ , v = _data(3)
    p = 1 / (1 + np.exp(-o))
    q = np.asarray(jax.nn.softmax(jnp.asarray(h), axis=1), dtype=np.float64)
    for vv in (None, v):
        w_ = np.ones_like(p) if vv is None else vv
        mass = (w_[:, None] * q).sum(0)
        mu = (w_[:, None] * q * p[:, None]).sum(0) / mass
        s2 = (w_[:, None] * q * (p[:, None] - mu) ** 2).sum(0) / mass
        ref = np.sum(mass / w_.sum() * s2)
        got = losses.within_group_variance(p, q, weights=vv)
        np.testing.assert_allclose(got, ref, rtol=1e-5)
        np.testing.assert_allclose(
            losses.variance_penalty(p, q, lam_v=0.5, weights=vv), 0.5 * ref, rtol=1e-5
        )


def test_within_group_variance_identities():
    o, *_ = _data(4)
    p = 1 / (1 + np.exp(-o))
    n = p.shape[0]
    # one group = total variance; singletons = 0; empty group contributes 0 without NaN
    np.testing.assert_allclose(losses.within_group_variance(p, np.ones((n, 1))), p.var(), rtol=1e-5)
    np.testing.assert_allclose(losses.within_group_variance(p, np.eye(n)), 0.0, atol=1e-12)
    q = np.zeros((n, 3))
    q[:, 0] = 1.0
    val = losses.within_group_variance(p, q)
    assert np.isfinite(val)
    np.testing.assert_allclose(val, p.var(), rtol=1e-5)


def test_variance_penalty_gradient_finite_differences():
    o, _, h, *_ = _data(5, n=30)
    with jax.enable_x64(True):
        p = jnp.asarray(1 / (1 + np.exp(-o)), jnp.float64)
        f = lambda h: losses.variance_penalty(p, jax.nn.softmax(h, axis=1), lam_v=0.5)
        check_grads(f, (jnp.asarray(h, jnp.float64),), order=2, modes=["rev"], atol=1e-7, rtol=1e-6)


def test_l2_penalty():
    W = np.arange(6.0).reshape(3, 2)
    np.testing.assert_allclose(losses.l2_penalty(W, lam=0.1), 0.1 * np.mean(W**2), rtol=1e-6)
    np.testing.assert_allclose(losses.l2_penalty(W, lam=0.1, reduction="sum"), 0.1 * np.sum(W**2), rtol=1e-6)


def test_jit_and_vmap():
    o, y, h, tau, beta, _ = _data(6)
    lq = jax.nn.log_softmax(jnp.asarray(h), axis=1)
    f = jax.jit(lambda b: losses.grouped_nll(o, y, lq, tau, b))
    bs = jnp.stack([jnp.asarray(beta), jnp.zeros(3)])
    got = jax.vmap(f)(bs)
    np.testing.assert_allclose(got[1], _np_grouped_nll(o, y, h, tau, np.zeros(3)), rtol=1e-5)
    np.testing.assert_allclose(got[0], _np_grouped_nll(o, y, h, tau, beta), rtol=1e-5)


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(labels=np.array([0.0, 2.0, 1.0])), "labels"),
        (dict(tau=np.array([1.0, -1.0])), "tau"),
        (dict(tau=np.array([1.0, 1.0, 1.0])), "tau"),
        (dict(logits=np.array([0.0, np.nan, 1.0])), "logits"),
        (dict(log_memberships=np.zeros((2, 2))), "log_memberships"),
    ],
)
def test_bad_input_raises(bad, match):
    args = dict(
        logits=np.zeros(3), labels=np.array([0.0, 1.0, 1.0]),
        log_memberships=np.log(np.full((3, 2), 0.5)), tau=np.ones(2),
    )
    args.update(bad)
    with pytest.raises(ValueError, match=match):
        losses.grouped_nll(**args)


def test_soft_labels_are_linear_in_the_label():
    """A soft label y gets y * loss(1) + (1 - y) * loss(0): the cross-entropy of y against the
    mixture prediction sum_k q_k sigma(s_k) (float64 NumPy reference), eagerly and under jit;
    binary labels give the same loss as before (log sigma((2y - 1) s) form)."""
    rng = np.random.default_rng(3)
    n, k = 50, 3
    o = rng.normal(size=n).astype(np.float32)
    y = rng.uniform(size=n).astype(np.float32)
    y[:5] = [0.0, 1.0, 0.0, 1.0, 0.5]
    h = rng.normal(size=(n, k)).astype(np.float32)
    tau = np.array([0.5, 1.0, 2.0], np.float32)
    beta = np.array([0.1, -0.2, 0.0], np.float32)
    lq = np.asarray(jax.nn.log_softmax(jnp.asarray(h), axis=1))
    q = np.exp(lq.astype(np.float64))
    pbar = np.sum(q / (1.0 + np.exp(-(o[:, None] / tau + beta))), axis=1)
    want = -(y * np.log(pbar) + (1 - y) * np.log1p(-pbar))
    got = losses.grouped_nll_terms(o, y, lq, tau, beta)
    np.testing.assert_allclose(np.asarray(got), want, rtol=2e-5, atol=1e-6)
    jitted = jax.jit(losses.grouped_nll_terms)(o, y, lq, tau, beta)
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(got), rtol=1e-6, atol=1e-7)
    yb = (y > 0.5).astype(np.float32)
    fast = losses._binary_grouped_nll_terms(jnp.asarray(o), jnp.asarray(yb), jnp.asarray(lq), jnp.asarray(tau),
                                            jnp.asarray(beta))
    np.testing.assert_allclose(np.asarray(losses.grouped_nll_terms(o, yb, lq, tau, beta)), np.asarray(fast),
                               rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("labels", [np.array([0.0, 1.5, 1.0]), np.array([0.0, np.nan, 1.0]),
                                    np.array([0.0, -0.1, 1.0])])
def test_labels_outside_unit_interval_are_refused_in_every_calling_style(labels):
    args = dict(logits=np.zeros(3, np.float32), labels=labels.astype(np.float32),
                log_memberships=np.log(np.full((3, 2), 0.5, np.float32)), tau=np.ones(2, np.float32))
    with pytest.raises(ValueError, match="`labels`"):
        losses.grouped_nll(**args)
    # under jit and grad a failed check makes the value NaN (never a plausible loss)
    assert np.isnan(float(jax.jit(losses.grouped_nll)(**args)))
    grad = jax.jit(jax.grad(lambda o, y: losses.grouped_nll(o, y, args["log_memberships"], args["tau"])))
    assert np.all(np.isnan(np.asarray(grad(args["logits"], args["labels"]))))
    # concrete values inside a trace are still checked eagerly
    with pytest.raises(ValueError, match="`labels`"):
        jax.grad(lambda o: losses.grouped_nll(o, args["labels"], args["log_memberships"], args["tau"]))(
            jnp.asarray(args["logits"]))
