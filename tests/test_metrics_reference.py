"""calib_jax.metrics against plain-NumPy references and third-party implementations.

Every library value is compared with (a) the loop references of tests/reference.py,
written from SPEC §4 and the seed papers, and (b) where one exists, a third-party
implementation of the same quantity (scikit-learn, scipy, scoringrules, netcal, mcgrad,
ckmeans).  float32 library results are compared with float64 references at 1e-5
relative (SPEC §2).  The references themselves are checked against the third-party
packages in the first block.
"""

from __future__ import annotations

import functools

import ckmeans
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference as R
import scipy.optimize
import scipy.stats
import scoringrules as sr
from backend import assert_same_bits
from sklearn.isotonic import IsotonicRegression
from sklearn.metrics import (
    accuracy_score,
    brier_score_loss,
    log_loss,
    mean_absolute_error,
    roc_auc_score,
)

from calib_jax import metrics as M
from calib_jax.partitions import random_groups

# LCCE runs k-means: jit it once per static configuration (eager dispatch is slow)
_lcce = jax.jit(M.lcce, static_argnames=("n_clusters", "n_restarts", "init", "norm",
                                         "subsample"))

N = 512  # one sample size for most tests: eager JAX ops compile once per shape
F32 = dict(rtol=1e-5, atol=1e-7)


def make(rng, n=N, *, n_fields=6, weighted=False):
    """Scores, labels, logits, oracle CTRs, a field and weights for one test."""
    z = rng.normal(-1.0, 1.5, n)
    oracle = R.sigmoid(z + rng.normal(0, 0.5, n))
    p = R.sigmoid(z)
    y = (rng.uniform(size=n) < oracle).astype(np.float64)
    field = rng.integers(0, n_fields, n)
    w = rng.uniform(0.1, 2.0, n) if weighted else None
    return dict(p=p, y=y, z=z, oracle=oracle, field=field, w=w)


def f32(x):
    return None if x is None else np.asarray(x, dtype=np.float32)


def close(got, want, **tol):
    np.testing.assert_allclose(float(got), float(want), **(tol or F32))


# ---------------------------------------------------------------- reference sanity


def test_references_agree_with_third_party(rng):
    d = make(rng, 300, weighted=True)
    p, y, w = d["p"], d["y"], d["w"]
    pr = np.round(p, 1)  # ties
    np.testing.assert_allclose(R.brier(p, y, w), brier_score_loss(y, p, sample_weight=w))
    np.testing.assert_allclose(R.nll_probs(p, y, w), log_loss(y, p, sample_weight=w))
    np.testing.assert_allclose(R.auc(pr, y, w), roc_auc_score(y, pr, sample_weight=w))
    np.testing.assert_allclose(R.spearman(pr, p), scipy.stats.spearmanr(pr, p).statistic)
    np.testing.assert_allclose(R.pearson(pr, p), scipy.stats.pearsonr(pr, p).statistic)
    np.testing.assert_allclose(R.average_ranks(pr), scipy.stats.rankdata(pr))
    iso = IsotonicRegression().fit(pr, y, sample_weight=w).predict(pr)
    np.testing.assert_allclose(R.pav(pr, y, w), iso, atol=1e-12)
    np.testing.assert_allclose(R.nll_logits(d["z"], y), log_loss(y, R.sigmoid(d["z"])))
    # the paper's Field-ECE form equals the group form sum_k w_k |mu_k - pi_k|
    np.testing.assert_allclose(R.field_ece(p, y, d["field"], w),
                               R.abs_gap_metric(p, y, d["field"], weights=w))


# ---------------------------------------------------------------- pointwise scores


@pytest.mark.parametrize("weighted", [False, True])
def test_brier_mse_mae(rng, weighted):
    d = make(rng, weighted=weighted)
    p, y, w = d["p"], d["y"], d["w"]
    want = brier_score_loss(y, p, sample_weight=w)
    close(M.brier(f32(p), f32(y), weights=f32(w)), want)
    close(M.mse(f32(p), f32(y), weights=f32(w)), R.brier(p, y, w))
    close(M.mae(f32(p), f32(y), weights=f32(w)), mean_absolute_error(y, p, sample_weight=w))
    if w is None:
        close(M.brier(f32(p), f32(y)), np.mean(sr.brier_score(y, p)))


@pytest.mark.parametrize("weighted", [False, True])
def test_nll_from_probs_and_logits(rng, weighted):
    d = make(rng, weighted=weighted)
    p, y, z, w = d["p"], d["y"], d["z"], d["w"]
    close(M.nll(f32(p), f32(y), weights=f32(w)), log_loss(y, p, sample_weight=w))
    close(M.nll_logits(f32(z), f32(y), weights=f32(w)), R.nll_logits(z, y, w))
    if w is None:
        close(M.nll(f32(p), f32(y)), np.mean(sr.log_score(y, p)))


def test_nll_logits_exact_at_extreme_logits():
    z = np.array([-80.0, -30.0, 0.0, 30.0, 80.0, 5.0])
    y = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 0.0])
    close(M.nll_logits(f32(z), f32(y)), R.nll_logits(z, y))


# ---------------------------------------------------------------- ECE family


@pytest.mark.parametrize("norm", ["l1", "l2", "max"])
@pytest.mark.parametrize("weighted", [False, True])
def test_ece_uniform_matches_reference(rng, norm, weighted):
    d = make(rng, weighted=weighted)
    # SPEC/docstring: "l2" is the squared ECE sum_m w_m gap_m^2 (no square root)
    ref_norm = norm  # the reference's norms mean what the library's do
    want = R.ece(d["p"], d["y"], n_bins=15, norm=ref_norm, weights=d["w"])
    got = M.ece(f32(d["p"]), f32(d["y"]), n_bins=15, strategy="uniform", norm=norm,
                weights=f32(d["w"]))
    close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n_bins", [10, 15])
def test_ece_uniform_matches_netcal(rng, n_bins):
    netcal = pytest.importorskip("netcal.metrics")
    d = make(rng)
    want = netcal.ECE(bins=n_bins).measure(d["p"], d["y"].astype(int))
    close(M.ece(f32(d["p"]), f32(d["y"]), n_bins=n_bins), want, rtol=1e-5, atol=1e-6)


def test_ece_uniform_matches_mcgrad(rng):
    mcgrad = pytest.importorskip("mcgrad.metrics")
    d = make(rng, weighted=True)
    want = mcgrad.expected_calibration_error(d["y"], d["p"], sample_weight=d["w"], num_bins=40)
    close(M.ece(f32(d["p"]), f32(d["y"]), n_bins=40, weights=f32(d["w"])), want,
          rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("norm", ["l1", "l2", "max"])
def test_ece_quantile_matches_reference(rng, norm):
    # distinct scores and n divisible by M: every equal-mass convention agrees
    p = rng.permutation(np.linspace(0.02, 0.97, N))
    y = (rng.uniform(size=N) < p**1.3).astype(np.float64)
    ref_norm = norm  # the reference's norms mean what the library's do
    want = R.ece(p, y, n_bins=16, strategy="quantile", norm=ref_norm)
    got = M.ece(f32(p), f32(y), n_bins=16, strategy="quantile", norm=norm)
    close(got, want, rtol=1e-5, atol=1e-6)


def test_ece_quantile_ties_kept_together(rng):
    p = rng.choice([0.05, 0.1, 0.2, 0.5, 0.7], N)
    y = (rng.uniform(size=N) < p).astype(np.float64)
    # SPEC §2: keeping ties together is acceptable; a tie block that straddles a boundary
    # may go to the lower or to the upper bin (documented choice of the implementation)
    got = float(M.ece(f32(p), f32(y), n_bins=4, strategy="quantile"))
    wants = [R.ece(p, y, n_bins=4, strategy="quantile", ties=t)
             for t in ("together", "together_upper")]
    assert any(np.isclose(got, w, rtol=1e-5, atol=1e-6) for w in wants), (got, wants)


# ---------------------------------------------------------------- GCE / LCCE / fields


@pytest.mark.parametrize("soft", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_gce_matches_reference(rng, soft, weighted):
    d = make(rng, weighted=weighted)
    K = 5
    g = rng.dirichlet(np.ones(K), N) if soft else rng.integers(0, K, N)
    want = R.gce(d["p"], d["y"], g, n_groups=K, weights=d["w"])
    got = M.gce(f32(d["p"]), f32(d["y"]), f32(g) if soft else g, n_groups=K, weights=f32(d["w"]))
    close(got, want, rtol=1e-5, atol=1e-7)


def test_gce_singleton_groups_is_brier(rng):
    d = make(rng, 64)
    got = M.gce(f32(d["p"]), f32(d["y"]), np.arange(64), n_groups=64)
    close(got, brier_score_loss(d["y"], d["p"]))


def _logit_blobs(rng, n=N):
    centres = np.array([-4.0, -2.0, 0.0, 2.5])
    z = np.concatenate([rng.normal(c, 0.25, n // 4) for c in centres])
    perm = rng.permutation(n)
    z = z[perm]
    y = (rng.uniform(size=n) < R.sigmoid(1.3 * z + 0.4)).astype(np.float64)
    return z, y


@pytest.mark.parametrize("init", ["optimal", "quantile", "random"])
def test_lcce_equals_gce_on_optimal_logit_clusters(rng, key, init):
    z, y = _logit_blobs(rng)
    # independent clustering: the exact 1-D k-means of the ckmeans package
    clusters = ckmeans.ckmeans(z, 4)
    cuts = [c.max() for c in clusters[:-1]]
    ids = np.searchsorted(np.array(cuts), z, side="left")
    want = R.gce(R.sigmoid(z), y, ids, n_groups=4)
    got = _lcce(f32(z), f32(y), n_clusters=4, n_restarts=4, key=key, init=init)
    close(got, want, rtol=1e-5, atol=1e-7)


def test_lcce_with_probs_uses_given_scores_on_logit_clusters(rng, key):
    z, y = _logit_blobs(rng)
    q = R.sigmoid(0.5 * z)  # e.g. calibrated outputs, evaluated on the logit clusters
    clusters = ckmeans.ckmeans(z, 4)
    ids = np.searchsorted(np.array([c.max() for c in clusters[:-1]]), z, side="left")
    want = R.gce(q, y, ids, n_groups=4)
    got = _lcce(f32(z), f32(y), n_clusters=4, key=key, init="optimal", probs=f32(q))
    close(got, want, rtol=1e-5, atol=1e-7)


def test_lcce_subsampled_centroids_keep_separated_clusters(rng, key, init="optimal"):
    # Appendix H.1: centroids from a subsample, every point assigned to its nearest one
    z, y = _logit_blobs(rng)
    clusters = ckmeans.ckmeans(z, 4)
    ids = np.searchsorted(np.array([c.max() for c in clusters[:-1]]), z, side="left")
    want = R.gce(R.sigmoid(z), y, ids, n_groups=4)
    got = _lcce(f32(z), f32(y), n_clusters=4, key=key, init=init, subsample=128)
    close(got, want, rtol=1e-5, atol=1e-7)


def test_lcce_l1_norm(rng, key):
    z, y = _logit_blobs(rng)
    clusters = ckmeans.ckmeans(z, 4)
    ids = np.searchsorted(np.array([c.max() for c in clusters[:-1]]), z, side="left")
    want = R.abs_gap_metric(R.sigmoid(z), y, ids, n_groups=4)
    got = _lcce(f32(z), f32(y), n_clusters=4, key=key, init="optimal", norm="l1")
    close(got, want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("exact", [False, True])
def test_lcce_several_norms_are_each_norms_own_bits(rng, key, exact):
    # norm=("l2", "l1", "max"): one histogram and one clustering, each value the bits of the call
    # with that norm alone (eagerly, weighted); inside a jit, to float rounding
    z, y = _logit_blobs(rng)
    w = f32(rng.poisson(1.0, len(z)))
    p = f32(R.sigmoid(0.8 * z + 0.1))
    norms = ("l2", "l1", "max")
    both = M.lcce(f32(z), f32(y), probs=p, key=key, n_restarts=3, weights=w, norm=norms, exact=exact)
    assert both.shape == (3,)
    for i, nm in enumerate(norms):
        one = M.lcce(f32(z), f32(y), probs=p, key=key, n_restarts=3, weights=w, norm=nm, exact=exact)
        assert_same_bits(both[i], one)

    @jax.jit
    def jitted(z, y, p):
        return (M.lcce(z, y, probs=p, key=key, norm=("l2", "l1")), M.lcce(z, y, probs=p, key=key),
                M.lcce(z, y, probs=p, key=key, norm="l1"))

    # inside one jit XLA may fuse the shared and the single computations differently: float rounding
    pair, l2, l1 = jitted(f32(z), f32(y), p)
    np.testing.assert_allclose(pair, [l2, l1], rtol=1e-6)
    for bad in ((), ("l2", "l3")):
        with pytest.raises(ValueError, match="norm"):
            M.lcce(f32(z), f32(y), key=key, norm=bad)


def test_lcce_random_is_abs_gap_on_random_groups(rng, key):
    d = make(rng)
    ids = np.asarray(random_groups(key, N, n_groups=4))
    want = R.abs_gap_metric(d["p"], d["y"], ids, n_groups=4)
    got = M.lcce_random(f32(d["p"]), f32(d["y"]), key=key, n_groups=4)
    close(got, want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("weighted", [False, True])
def test_field_ece_matches_paper_form(rng, weighted):
    d = make(rng, weighted=weighted)
    want = R.field_ece(d["p"], d["y"], d["field"], d["w"])
    got = M.field_ece(f32(d["p"]), f32(d["y"]), d["field"], n_groups=6, weights=f32(d["w"]))
    close(got, want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("eps", [0.01, 0.1])
@pytest.mark.parametrize("weighted", [False, True])
def test_field_rce_matches_paper_form(rng, eps, weighted):
    d = make(rng, weighted=weighted)
    want = R.field_rce(d["p"], d["y"], d["field"], eps=eps, weights=d["w"])
    got = M.field_rce(f32(d["p"]), f32(d["y"]), d["field"], eps=eps, n_groups=6,
                      weights=f32(d["w"]))
    close(got, want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("weighted", [False, True])
def test_bias_and_abs_bias(rng, weighted):
    d = make(rng, weighted=weighted)
    close(M.bias(f32(d["p"]), f32(d["y"]), weights=f32(d["w"])), R.bias(d["p"], d["y"], d["w"]))
    got = M.abs_bias(f32(d["p"]), f32(d["y"]), d["field"], n_groups=6, weights=f32(d["w"]))
    close(got, R.abs_bias(d["p"], d["y"], d["field"], d["w"]))


# ---------------------------------------------------------------- ranking / accuracy


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("decimals", [None, 1])
def test_auc_matches_sklearn_and_pairwise(rng, weighted, decimals):
    d = make(rng, weighted=weighted)
    p = d["p"] if decimals is None else np.round(d["p"], decimals)  # ties count half
    want = roc_auc_score(d["y"], p, sample_weight=d["w"])
    np.testing.assert_allclose(R.auc(p, d["y"], d["w"]), want, rtol=1e-12)
    close(M.auc(f32(p), f32(d["y"]), weights=f32(d["w"])), want)


@pytest.mark.parametrize("decimals", [None, 1])
def test_auc_presorted_matches_sklearn_and_rejects_unsorted(rng, decimals):
    d = make(rng, weighted=True)
    p = d["p"] if decimals is None else np.round(d["p"], decimals)
    o = np.argsort(p, kind="stable")
    want = roc_auc_score(d["y"], p, sample_weight=d["w"])
    close(M.auc(f32(p[o]), f32(d["y"][o]), weights=f32(d["w"][o]), presorted=True), want)
    with pytest.raises(ValueError, match="ascending"):
        M.auc(f32(p), f32(d["y"]), presorted=True)


def test_auc_on_logits_equals_auc_on_probs(rng):
    d = make(rng)
    close(M.auc(f32(d["z"]), f32(d["y"])), roc_auc_score(d["y"], d["z"]))


@pytest.mark.parametrize("weighted", [False, True])
def test_accuracy_and_relative_diffs(rng, weighted):
    d = make(rng, weighted=weighted)
    p0 = d["p"]
    p1 = R.sigmoid(d["z"] * 0.7 + 0.3)
    keep = (np.abs(p0 - 0.5) > 1e-6) & (np.abs(p1 - 0.5) > 1e-6)
    assert keep.all()
    w = d["w"]
    acc0 = accuracy_score(d["y"], p0 > 0.5, sample_weight=w)
    acc1 = accuracy_score(d["y"], p1 > 0.5, sample_weight=w)
    close(M.accuracy(f32(p0), f32(d["y"]), weights=f32(w)), acc0)
    close(M.acc_diff(f32(p1), f32(p0), f32(d["y"]), weights=f32(w)), (acc1 - acc0) / acc0,
          rtol=1e-5, atol=1e-6)
    auc0 = roc_auc_score(d["y"], p0, sample_weight=w)
    auc1 = roc_auc_score(d["y"], np.round(p1, 2), sample_weight=w)
    close(M.auc_diff(f32(np.round(p1, 2)), f32(p0), f32(d["y"]), weights=f32(w)),
          (auc1 - auc0) / auc0, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- top-N


def _topn_data(rng, n_users=40, items=12):
    users = np.repeat(np.arange(n_users), items)
    perm = rng.permutation(users.size)
    users = users[perm]
    scores = rng.uniform(0, 1, users.size)  # distinct with probability 1
    probs = np.clip(scores * 0.8 + 0.05, 0, 1)
    y = (rng.uniform(size=users.size) < scores).astype(np.float64)
    return users, scores, probs, y


def test_ece_at_n_matches_reference(rng):
    users, scores, probs, y = _topn_data(rng)
    want = R.ece_at_n(scores, y, users, top_n=5, n_bins=10, probs=probs)
    got = M.ece_at_n(f32(probs), f32(y), users=users, top_n=5, n_bins=10, scores=f32(scores))
    close(got, want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("top_n", [1, 5, 12])
def test_adaptive_ece_at_n_matches_the_reference_sweep(rng, top_n):
    users, scores, probs, y = _topn_data(rng)
    want = R.ece_at_n(scores, y, users, top_n=top_n, n_bins=60, probs=probs, sweep=True)
    got = M.ece_at_n(f32(probs), f32(y), users=users, top_n=top_n, n_bins=60, scores=f32(scores),
                     strategy="sweep")
    close(got, want, rtol=1e-5, atol=1e-7)
    if top_n == 12:  # every row of every user: the sweep over all rows
        close(got, M.ece_sweep(f32(probs), f32(y), max_bins=60), rtol=1e-6, atol=1e-8)


def test_top_n_metrics_on_soft_labels_match_the_reference(rng):
    """The rating task: five-star ratings rescaled to [0, 1] as targets (``soft_labels``)."""
    users, scores, probs, _ = _topn_data(rng)
    y = (rng.integers(1, 6, users.size) - 1) / 4.0
    for kw in ({"sweep": True, "n_bins": 60}, {"n_bins": 10}, {"rd": True, "n_bins": 10}):
        want = R.ece_at_n(scores, y, users, top_n=5, probs=probs, **kw)
        f = M.rdece_at_n if kw.get("rd") else functools.partial(
            M.ece_at_n, n_bins=kw["n_bins"], strategy="sweep" if kw.get("sweep") else "uniform")
        close(f(f32(probs), f32(y), users=users, top_n=5, scores=f32(scores), soft_labels=True), want,
              rtol=1e-5, atol=1e-7)
    _, _, _, clicks = _topn_data(rng)
    for f in (M.ece_at_n, M.rdece_at_n):  # 0/1 labels: the flag changes nothing
        close(f(f32(probs), f32(clicks), users=users, top_n=5, soft_labels=True),
              f(f32(probs), f32(clicks), users=users, top_n=5), rtol=1e-6, atol=1e-8)
    with pytest.raises(ValueError, match="labels"):  # without the flag, ratings are not labels
        M.ece_at_n(f32(probs), f32(y), users=users, top_n=5)
    with pytest.raises(ValueError, match="labels"):  # with it, still within [0, 1]
        M.rdece_at_n(f32(probs), f32(y * 4 + 1), users=users, top_n=5, soft_labels=True)


def test_rdece_at_n_matches_reference(rng):
    users, scores, probs, y = _topn_data(rng)
    want = R.ece_at_n(scores, y, users, top_n=5, n_bins=10, probs=probs, rd=True)
    got = M.rdece_at_n(f32(probs), f32(y), users=users, top_n=5, scores=f32(scores))
    close(got, want, rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------- calibrated losses


def _fit_shift(z, y):
    """Root of sum sigma(z + c) = sum y (seeds/002: first-order condition of the bias fit)."""
    return scipy.optimize.brentq(lambda c: np.sum(R.sigmoid(z + c)) - np.sum(y), -30, 30,
                                 xtol=1e-14)


def test_calibrated_log_loss_with_mask(rng):
    d = make(rng)
    z, y = d["z"] + 0.7, d["y"]  # a biased model
    mask = np.zeros(N, dtype=bool)
    mask[rng.permutation(N)[: N // 2]] = True
    c = _fit_shift(z[mask], y[mask])
    want = log_loss(y[~mask], R.sigmoid(z[~mask] + c))
    got = M.calibrated_log_loss(f32(z), f32(y), val_mask=mask)
    close(got, want, rtol=1e-5, atol=1e-6)
    close(M.fit_logit_bias(f32(z[mask]), f32(y[mask])), c, rtol=1e-4, atol=1e-5)



def _newton_fixed_steps(o, y, v, n_iter=40):
    """The bias fit as first written: exactly ``n_iter`` safeguarded Newton steps."""
    target = jnp.sum(v * y)

    def step(_, c):
        q = jax.nn.sigmoid(o + c)
        g, h = jnp.sum(v * q) - target, jnp.sum(v * q * (1.0 - q))
        d = jnp.where(h > 0, g / jnp.where(h > 0, h, 1.0), jnp.sign(g) * 4.0)
        return c - jnp.clip(d, -4.0, 4.0)

    return jax.lax.fori_loop(0, n_iter, step, jnp.zeros((), o.dtype))


def test_bias_fit_stops_early_with_the_bits_of_all_steps(rng):
    # the early exit at the exact fixed point returns what all 40 steps return, bit for bit,
    # also on all-0 / all-1 labels (the optimum at -inf / +inf) and zero weights
    fixed = jax.jit(_newton_fixed_steps)
    n = 2000  # one shape: two compilations for the 60 cases
    for t in range(60):
        o = f32(rng.normal(rng.normal() * 3, rng.uniform(0.1, 3), n))
        y = f32((rng.uniform(size=n) < rng.uniform() * (t % 7 != 0)) | (t % 11 == 0))
        v = f32(rng.uniform(0, 2, n) * (rng.uniform(size=n) < 0.7))
        got = M.fit_logit_bias(o, y, weights=v)
        assert_same_bits(np.asarray(got), np.asarray(fixed(o, y, v)))


def test_bias_fit_stops_in_a_two_cycle_with_the_bits_of_all_steps(rng):
    # float32 Newton on 10^5 rows ends in a last-ulp 2-cycle in about one fit in five; the
    # early exit must then return the member of the cycle that step n_iter lands on (both
    # parities), under vmap as in the Monte Carlo panel
    n, B = 100_000, 16
    o = f32(rng.normal(-3.0, rng.uniform(0.5, 2.0, (B, 1)), (B, n)))
    y = f32(rng.uniform(size=(B, n)) < 1.0 / (1.0 + np.exp(-(o + rng.normal(0, 0.5, (B, 1))))))
    v = f32(rng.uniform(size=(B, n)) < 0.5)
    cycles = 0
    for n_iter in (40, 41):
        want = jax.jit(jax.vmap(lambda a, b, c, k=n_iter: _newton_fixed_steps(a, b, c, k)))(o, y, v)
        again = jax.jit(jax.vmap(lambda a, b, c, k=n_iter + 1: _newton_fixed_steps(a, b, c, k)))(o, y, v)
        cycles += int(np.sum(np.asarray(want) != np.asarray(again)))
        got = jax.jit(jax.vmap(lambda a, b, c, k=n_iter: M.fit_logit_bias(a, b, weights=c, n_iter=k)))(o, y, v)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert cycles > 0  # the data exercise the cycle branch

def test_calibrated_quadratic_loss_with_mask(rng):
    t = rng.normal(0, 1, N)
    pred = t + 0.3 + rng.normal(0, 0.5, N)
    mask = rng.uniform(size=N) < 0.5
    b = np.mean(t[mask] - pred[mask])
    want = np.mean((t[~mask] - pred[~mask] - b) ** 2)
    close(M.calibrated_quadratic_loss(f32(pred), f32(t), val_mask=mask), want, rtol=1e-5,
          atol=1e-6)


# ---------------------------------------------------------------- oracle metrics


@pytest.mark.parametrize("weighted", [False, True])
def test_oracle_metrics(rng, weighted):
    d = make(rng, weighted=weighted)
    p, o, w = d["p"], d["oracle"], d["w"]
    close(M.oracle_brier(f32(p), f32(o), weights=f32(w)), R.oracle_brier(p, o, w))
    close(M.oracle_mae(f32(p), f32(o), weights=f32(w)), R.oracle_mae(p, o, w))
    close(M.oracle_kl(f32(p), f32(o), weights=f32(w)), R.oracle_kl(p, o, w), rtol=2e-5)
    close(M.oracle_chebyshev(f32(p), f32(o)), R.oracle_chebyshev(p, o))
    v = np.ones(N) if w is None else w
    for alpha in (0.3, 0.5, 0.8):
        want = np.sum(v * R.alpha_divergence_cichocki(o, p, alpha)) / np.sum(v)
        close(M.oracle_alpha_divergence(f32(p), f32(o), alpha=alpha, weights=f32(w)), want,
              rtol=1e-4)


def test_alpha_divergence_identities(rng):
    d = make(rng)
    p, o = d["p"], d["oracle"]
    # alpha = 1/2: 4 (1 - Bhattacharyya coefficient) (4 x squared Hellinger)
    bc = np.sqrt(p * o) + np.sqrt((1 - p) * (1 - o))
    close(M.oracle_alpha_divergence(f32(p), f32(o), alpha=0.5), np.mean(4 * (1 - bc)),
          rtol=1e-4)
    # alpha -> 1 tends to KL(pi || p)
    with jax.enable_x64(True):
        got = M.oracle_alpha_divergence(jnp.asarray(p), jnp.asarray(o), alpha=1 - 1e-6)
        np.testing.assert_allclose(float(got), R.oracle_kl(p, o), rtol=1e-4)


def test_pearson_spearman_match_scipy(rng):
    d = make(rng)
    p, o = np.round(d["p"], 2), d["oracle"]  # ties in p
    close(M.pearson(f32(p), f32(o)), scipy.stats.pearsonr(o, p).statistic, rtol=1e-5,
          atol=1e-6)
    close(M.spearman(f32(p), f32(o)), scipy.stats.spearmanr(o, p).statistic, rtol=1e-5,
          atol=1e-6)


def test_weighted_pearson_equals_repeated_rows(rng):
    d = make(rng, 100)
    w = rng.integers(1, 4, 100)
    rep = np.repeat(np.arange(100), w)
    want = scipy.stats.pearsonr(d["oracle"][rep], d["p"][rep]).statistic
    close(M.pearson(f32(d["p"]), f32(d["oracle"]), weights=f32(w)), want, rtol=1e-5, atol=1e-6)
