"""VAD (calib_jax.calibrators.vad; Fan, Si and Zhang, ICLR 2023) against a hand computation of
its formula, its invariances, its guards, and the maximization bias it is meant to remove."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from calib_jax.calibrators import vad as V


def _hand_factor(P, s):
    """lambda = 1 - noise / spread with plain Python loops (the reference code's estimator)."""
    n, k = len(P), len(P[0])
    col = [sum(P[i][j] for i in range(n)) / n for j in range(k)]
    row = [sum(P[i]) / k for i in range(n)]
    grand = sum(row) / n
    ss = sum((P[i][j] - col[j] - row[i] + grand) ** 2 for i in range(n) for j in range(k))
    noise = ss / (n * k) * k / (k - 1)
    mean = sum(s) / n
    spread = sum((v - mean) ** 2 for v in s) / n
    return 1.0 - noise / spread


def _sigmoid(u):
    return 1.0 / (1.0 + math.exp(-u))


def _logit(p):
    return math.log(p / (1.0 - p))


SMALL_P = [[0.9, 1.4, 0.2], [-1.1, -0.3, -0.9], [2.2, 2.9, 1.8], [0.1, -0.2, 0.6]]
SMALL_S = [1.0, -0.8, 2.5, 0.0]


def test_factor_equals_the_hand_computation():
    lam = _hand_factor(SMALL_P, SMALL_S)
    assert 0 < lam < 1
    got = float(V.shrinkage_factor(np.array(SMALL_P, np.float64), np.array(SMALL_S, np.float64)))
    assert got == pytest.approx(lam, rel=1e-6)
    # probability space: the same estimator on the sigmoids
    Pp = [[_sigmoid(v) for v in row] for row in SMALL_P]
    sp = [_sigmoid(v) for v in SMALL_S]
    got_p = float(V.shrinkage_factor(np.array(SMALL_P), np.array(SMALL_S), space="probability"))
    assert got_p == pytest.approx(_hand_factor(Pp, sp), rel=1e-5)


def test_vad_equals_the_hand_computation_in_both_spaces():
    probs = [0.31, 0.12, 0.74, 0.55]
    ref = [0.2, 0.6, 0.45]
    lam = _hand_factor(SMALL_P, SMALL_S)
    centre = sum(_logit(p) for p in ref) / len(ref)
    hand = [_sigmoid(lam * _logit(p) + (1 - lam) * centre) for p in probs]
    got = V.vad(np.array(probs), np.array(SMALL_P), np.array(SMALL_S), reference_probs=np.array(ref))
    np.testing.assert_allclose(np.asarray(got), hand, rtol=1e-6)
    # default centre: the rows being debiased
    centre = sum(_logit(p) for p in probs) / len(probs)
    hand = [_sigmoid(lam * _logit(p) + (1 - lam) * centre) for p in probs]
    np.testing.assert_allclose(np.asarray(V.vad(np.array(probs), np.array(SMALL_P), np.array(SMALL_S))),
                               hand, rtol=1e-6)
    # probability space
    lam_p = _hand_factor([[_sigmoid(v) for v in row] for row in SMALL_P], [_sigmoid(v) for v in SMALL_S])
    hand_p = [lam_p * p + (1 - lam_p) * sum(probs) / len(probs) for p in probs]
    np.testing.assert_allclose(np.asarray(V.vad(np.array(probs), np.array(SMALL_P), np.array(SMALL_S),
                                                space="probability")), hand_p, rtol=1e-5)


def test_validation_factor_divides_the_target_factor():
    rng = np.random.default_rng(0)
    s_val = rng.normal(size=50)
    P_val = s_val[:, None] + rng.normal(0.0, 0.4, (50, 3))
    lam_t = _hand_factor(SMALL_P, SMALL_S)
    lam_v = _hand_factor(P_val.tolist(), s_val.tolist())
    probs = np.array([0.31, 0.12, 0.74, 0.55])
    got = V.vad(probs, np.array(SMALL_P), np.array(SMALL_S), validation_replicates=P_val, validation_logits=s_val)
    centre = np.mean(np.log(probs / (1 - probs)))
    lam = lam_t / lam_v
    np.testing.assert_allclose(np.asarray(got), 1 / (1 + np.exp(-(lam * np.log(probs / (1 - probs))
                                                                   + (1 - lam) * centre))), rtol=1e-5)


def test_debias_keeps_the_ranking_and_the_centre():
    rng = np.random.default_rng(1)
    p = rng.uniform(0.01, 0.99, 300)
    q = np.asarray(V.debias(p, 0.6))
    order = np.argsort(p)
    assert np.all(np.diff(q[order]) > 0)
    lp, lq = np.log(p / (1 - p)), np.log(q / (1 - q))
    np.testing.assert_allclose(lq.mean(), lp.mean(), atol=1e-5)            # the mean logit stays
    np.testing.assert_allclose(lq - lq.mean(), 0.6 * (lp - lp.mean()), atol=1e-5)
    np.testing.assert_allclose(np.asarray(V.debias(p, 1.0)), p, rtol=1e-5)  # lambda = 1: identity


def test_guards_never_give_nan():
    s = np.array([0.0, 0.5, 1.0, 1.5])
    # noise far above the spread: lambda clipped to 0, every prediction becomes the centre
    P = s[:, None] + np.array([[5.0, -5.0], [-5.0, 5.0], [5.0, -5.0], [-5.0, 5.0]])
    assert float(V.shrinkage_factor(P, s)) == 0.0
    q = np.asarray(V.vad(np.array([0.2, 0.4, 0.6, 0.8]), P, s))
    assert np.all(np.isfinite(q)) and np.ptp(q) < 1e-6
    # constant logits: nothing to shrink, lambda = 1
    assert float(V.shrinkage_factor(np.ones((4, 2)), np.ones(4))) == 1.0
    # probabilities of exactly 0 and 1 (an isotonic calibrator's output)
    q = np.asarray(V.debias(np.array([0.0, 0.3, 1.0]), 0.5))
    assert np.all(np.isfinite(q)) and np.all((q > 0) & (q < 1)) and np.all(np.diff(q) > 0)
    # a validation factor of 0 leaves the target factor undivided
    got = V.vad(np.array([0.2, 0.4, 0.6, 0.8]), P * 0 + s[:, None], s, validation_replicates=P, validation_logits=s)
    np.testing.assert_allclose(np.asarray(got), [0.2, 0.4, 0.6, 0.8], rtol=1e-5)


def test_invalid_input_raises_naming_the_argument():
    P, s, p = np.array(SMALL_P), np.array(SMALL_S), np.array([0.1, 0.2, 0.3, 0.4])
    cases = [
        (lambda: V.shrinkage_factor(P[:, :1], s), "replicate_logits"),       # K = 1
        (lambda: V.shrinkage_factor(s, s), "replicate_logits"),              # not 2-D
        (lambda: V.shrinkage_factor(np.where(P > 2, np.nan, P), s), "replicate_logits"),
        (lambda: V.shrinkage_factor(P, s[:3]), "logits"),
        (lambda: V.shrinkage_factor(P, s, space="odds"), "space"),
        (lambda: V.debias(np.array([0.1, 1.2]), 0.5), "probs"),
        (lambda: V.debias(p, -0.1), "factor"),
        (lambda: V.debias(p, np.nan), "factor"),
        (lambda: V.vad(p[:3], P, s), "logits"),
        (lambda: V.vad(p, P, s, validation_replicates=P), "validation_logits"),
        (lambda: V.vad(p, P, s, validation_logits=s), "validation_replicates"),
        (lambda: V.vad(p, P, s, validation_replicates=P[:, :1], validation_logits=s), "validation_replicates"),
        (lambda: V.vad(p, P, s, reference_probs=np.array([0.5, -0.5])), "reference_probs"),
    ]
    for call, name in cases:
        with pytest.raises(ValueError, match=f"`{name}`"):
            call()


def test_jit_and_vmap_equal_the_eager_loop():
    rng = np.random.default_rng(2)
    T, n, k = 3, 200, 4
    s = rng.normal(size=(T, n)).astype(np.float32)
    P = (s[:, :, None] + rng.normal(0.0, 0.5, (T, n, k))).astype(np.float32)
    p = (1 / (1 + np.exp(-s))).astype(np.float32)
    batched = jax.jit(jax.vmap(V.vad))(jnp.asarray(p), jnp.asarray(P), jnp.asarray(s))
    for t in range(T):
        np.testing.assert_allclose(np.asarray(batched[t]), np.asarray(V.vad(p[t], P[t], s[t])), rtol=1e-6, atol=1e-7)
    lam = jax.jit(V.shrinkage_factor)(P[0], s[0])
    assert float(lam) == pytest.approx(float(V.shrinkage_factor(P[0], s[0])), rel=1e-6)
    bad = P[0].copy()
    bad[3, 1] = np.nan
    assert np.isnan(float(jax.jit(V.shrinkage_factor)(bad, s[0])))


def test_vad_removes_most_of_the_maximization_bias_of_the_top_predictions():
    """The phenomenon (Fan, Si and Zhang §1): a model's predictions are unbiased item by item
    (true logit plus zero-mean estimation noise), yet on the 5% it ranks highest the mean
    prediction exceeds the mean truth. Replicate models (fresh noise) give VAD its factor; the
    debiased top-5% predictions are much closer to the truth."""
    rng = np.random.default_rng(3)
    n, k, sd_true, sd_noise = 40_000, 4, 1.0, 0.6
    true = rng.normal(-2.0, sd_true, n)
    deployed = true + rng.normal(0.0, sd_noise, n)
    replicates = true[:, None] + rng.normal(0.0, sd_noise, (n, k))
    p_true, p_hat = 1 / (1 + np.exp(-true)), 1 / (1 + np.exp(-deployed))
    lam = float(V.shrinkage_factor(replicates, deployed))
    # the factor estimates the signal share of the variance, 1 / (1 + 0.36) = 0.735
    assert lam == pytest.approx(sd_true**2 / (sd_true**2 + sd_noise**2), abs=0.02)
    top = np.argsort(deployed)[-n // 20:]
    before = p_hat[top].mean() - p_true[top].mean()
    after = np.asarray(V.vad(p_hat, replicates, deployed))[top].mean() - p_true[top].mean()
    assert before > 0.05                     # over-prediction on the selected rows
    assert abs(after) < 0.2 * before         # most of it removed
    np.testing.assert_array_equal(np.argsort(np.asarray(V.vad(p_hat, replicates, deployed)), kind="stable")[-10:],
                                  np.argsort(p_hat, kind="stable")[-10:])  # the same top items
