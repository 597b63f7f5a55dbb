"""The recommenders of the top-N calibration study (``experiments._recommenders``), each against
an independent computation on a small case.

* ItemKNN: the similarity matrix equals explicit dot-product loops and scikit-learn's
  ``cosine_similarity``; the scores equal a plain double loop over Sarwar et al.'s weighted sum
  as Cornac defines it (its co-rater cosine, user-mean centring, top-k rated neighbours), 1e-12.
* BPR: the summed loss and its gradient equal a NumPy hand computation of the BPR objective
  and Cornac's per-triple update; a short run ranks held-out planted positives above negatives.
* LightGCN: the layer-mean embeddings equal dense NumPy powers of D^-1/2 A D^-1/2 (both
  propagation modes), the loss equals a NumPy computation; a short run ranks held-out planted
  positives above negatives.
* MF / NCF: the wrappers give the same scores as ``_pipelines.train_recommender`` +
  ``model.apply`` with the same key.
* Bad hyper-parameters and rows raise ValueError naming the argument; the docstring examples run.
"""

from __future__ import annotations

import doctest

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.metrics import roc_auc_score
from sklearn.metrics.pairwise import cosine_similarity

from experiments import _pipelines as P
from experiments import _recommenders as R

# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def _ratings(seed: int, n_users: int = 14, n_items: int = 10, density: float = 0.55):
    """Continuous ratings in [1, 5] on a random subset; the last user and item have none."""
    rng = np.random.default_rng(seed)
    mask = rng.random((n_users, n_items)) < density
    mask[-1, :] = False
    mask[:, -1] = False
    u, i = np.nonzero(mask)
    return u, i, rng.uniform(1.0, 5.0, u.size)


def _planted(seed: int, n_users: int = 80, n_items: int = 60):
    """Clicks with planted groups (0.7 inside a user's group, 0.03 outside), 70/30 split."""
    rng = np.random.default_rng(seed)
    gu, gi = rng.integers(0, 3, n_users), rng.integers(0, 3, n_items)
    p = np.where(gu[:, None] == gi[None, :], 0.7, 0.03)
    y = (rng.random(p.shape) < p).astype(np.float64).ravel()
    u, i = (a.ravel() for a in np.meshgrid(np.arange(n_users), np.arange(n_items), indexing="ij"))
    train = rng.random(u.size) < 0.7
    return u, i, y, train


def _loop_similarity(x: np.ndarray, similarity: str) -> np.ndarray:
    """Item-item cosine by explicit loops over users (co-raters only for Cornac's "cosine")."""
    n_users, n_items = x.shape
    s = np.zeros((n_items, n_items))
    for a in range(n_items):
        for b in range(n_items):
            num = d1 = d2 = 0.0
            for u in range(n_users):
                if similarity == "cosine" and (x[u, a] == 0 or x[u, b] == 0):
                    continue
                num += x[u, a] * x[u, b]
                d1 += x[u, a] ** 2
                d2 += x[u, b] ** 2
            if similarity == "cosine_full":
                d1, d2 = float(np.dot(x[:, a], x[:, a])), float(np.dot(x[:, b], x[:, b]))
            if num != 0 and d1 * d2 > 0:
                s[a, b] = num / np.sqrt(d1 * d2)
    return s


def _loop_itemknn(n_users, n_items, u, i, y, *, k, similarity="cosine", mean_centered=False, amplify=1.0):
    """Cornac's ItemKNN by its definition, one (user, item) at a time."""
    raw = np.zeros((n_users, n_items))
    raw[u, i] = y
    rated = np.zeros((n_users, n_items), bool)
    rated[u, i] = True
    if y.min() != y.max():
        mean = np.array([y[u == a].mean() if np.any(u == a) else y.mean() for a in range(n_users)])
        vals = np.where(rated, raw - mean[:, None], 0.0)
        vals[rated & (vals == 0)] = 1e-8
    else:
        mean, vals = np.zeros(n_users), raw
    s = _loop_similarity(vals if mean_centered else raw, similarity)
    s = np.sign(s) * np.abs(s) ** amplify
    out = np.zeros((n_users, n_items))
    for a in range(n_users):
        for b in range(n_items):
            cand = [j for j in range(n_items) if vals[a, j] != 0 and s[b, j] != 0]
            cand = sorted(cand, key=lambda j: (-s[b, j], j))[:k]
            num = sum(s[b, j] * vals[a, j] for j in cand)
            den = sum(abs(s[b, j]) for j in cand)
            out[a, b] = mean[a] + num / (den + 1e-8)
    return out


def _all_pairs(n_users, n_items):
    return tuple(a.ravel() for a in np.meshgrid(np.arange(n_users), np.arange(n_items), indexing="ij"))


# --------------------------------------------------------------------------------------
# ItemKNN
# --------------------------------------------------------------------------------------


def test_item_similarity_equals_loops_and_scikit_learn():
    u, i, y = _ratings(0)
    x = np.zeros((14, 10))
    x[u, i] = y
    full = R.item_similarity(x, similarity="cosine_full")
    np.testing.assert_allclose(full, cosine_similarity(x.T), rtol=0, atol=1e-12)
    for sim in ("cosine", "cosine_full"):
        dense = R.item_similarity(x, similarity=sim)
        np.testing.assert_allclose(dense, _loop_similarity(x, sim), rtol=0, atol=1e-12)
        # the SciPy sparse path (a sparse input) gives the same matrix
        import scipy.sparse as sp
        np.testing.assert_allclose(R.item_similarity(sp.csr_matrix(x), similarity=sim), dense, rtol=0, atol=1e-12)
    # Cornac's cosine runs over co-raters: one common user gives exactly 1
    assert R.item_similarity(np.array([[2.0, 3.0], [1.0, 0.0]]))[0, 1] == 1.0


@pytest.mark.parametrize("hyper", [{"k": 3}, {"k": 3, "similarity": "cosine_full"}, {"k": 4, "mean_centered": True},
                                   {"k": 2, "amplify": 2.0}, {"k": 20}])
def test_itemknn_scores_equal_a_double_loop(hyper):
    u, i, y = _ratings(1)
    fitted = R.train("ItemKNN", jax.random.key(0), 14, 10, u, i, y, **hyper)
    qu, qi = _all_pairs(14, 10)
    got = R.score(fitted, qu, qi)
    want = _loop_itemknn(14, 10, u, i, y, **hyper)[qu, qi]
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    # a user without training rows gets the global mean; an item without any, the user's mean
    np.testing.assert_allclose(got[qu == 13], y.mean(), rtol=0, atol=1e-12)
    means = np.array([y[u == a].mean() for a in range(13)])
    np.testing.assert_allclose(got[(qi == 9) & (qu < 13)], means, rtol=0, atol=1e-12)


@pytest.mark.parametrize("all_ones", [False, True])
def test_itemknn_on_clicks_with_tied_similarities(all_ones):
    """0/1 clicks (many exactly tied similarities: ties go to the lower item index) and
    positives only (all targets equal: Cornac's implicit case, no centring)."""
    rng = np.random.default_rng(2)
    u, i = _all_pairs(12, 9)
    y = (rng.random(u.size) < 0.4).astype(float)
    keep = rng.random(u.size) < 0.7
    if all_ones:
        keep &= y == 1
    u, i, y = u[keep], i[keep], y[keep]
    for sim in ("cosine", "cosine_full"):
        fitted = R.train("ItemKNN", jax.random.key(0), 12, 9, u, i, y, k=3, similarity=sim)
        qu, qi = _all_pairs(12, 9)
        want = _loop_itemknn(12, 9, u, i, y, k=3, similarity=sim)[qu, qi]
        np.testing.assert_allclose(R.score(fitted, qu, qi), want, rtol=0, atol=1e-12)


# --------------------------------------------------------------------------------------
# BPR
# --------------------------------------------------------------------------------------


def test_bpr_loss_and_gradient_equal_a_hand_computation():
    rng = np.random.default_rng(3)
    params = {"U": rng.normal(size=(3, 2)), "V": rng.normal(size=(4, 2)), "b": rng.normal(size=4)}
    users, pos, neg = np.array([0, 2, 0, 1, 2]), np.array([1, 0, 3, 1, 2]), np.array([2, 3, 1, 0, 1])
    w, lam = np.array([1.0, 1.0, 0.0, 1.0, 1.0]), 0.03
    loss = 0.0
    grad = {k: np.zeros_like(v) for k, v in params.items()}
    for s in range(users.size):
        pu, qi, qj = params["U"][users[s]], params["V"][pos[s]], params["V"][neg[s]]
        bi, bj = params["b"][pos[s]], params["b"][neg[s]]
        x = pu @ (qi - qj) + bi - bj
        reg = pu @ pu + qi @ qi + qj @ qj + bi**2 + bj**2
        loss += w[s] * (np.log1p(np.exp(-x)) + 0.5 * lam * reg)
        z = 1.0 / (1.0 + np.exp(x))  # Cornac's z: the per-triple step is lr * (z * ... - lam * ...)
        grad["U"][users[s]] -= w[s] * (z * (qi - qj) - lam * pu)
        grad["V"][pos[s]] -= w[s] * (z * pu - lam * qi)
        grad["V"][neg[s]] -= w[s] * (-z * pu - lam * qj)
        grad["b"][pos[s]] -= w[s] * (z - lam * bi)
        grad["b"][neg[s]] -= w[s] * (-z - lam * bj)
    jp = {k: jnp.asarray(v, jnp.float32) for k, v in params.items()}
    args = (jnp.asarray(users), jnp.asarray(pos), jnp.asarray(neg), jnp.asarray(w, jnp.float32), lam)
    value, g = jax.value_and_grad(R.bpr_loss)(jp, *args)
    np.testing.assert_allclose(float(value), loss, rtol=1e-6)
    for k in grad:
        np.testing.assert_allclose(np.asarray(g[k]), grad[k], rtol=0, atol=2e-6)


def test_bpr_ranks_held_out_planted_positives_above_negatives():
    u, i, y, train = _planted(4)
    fitted = R.train("BPR", jax.random.key(1), 80, 60, u[train], i[train], y[train],
                     learning_rate=0.05, max_iter=30, batch_size=64)
    s = R.score(fitted, u[~train], i[~train])
    assert roc_auc_score(y[~train], s) > 0.8


def test_negative_sampler_is_uniform_over_the_non_positives():
    ix = R.positive_index(3, 7, np.array([0, 0, 0, 1]), np.array([4, 0, 3, 6]))
    users = np.repeat(np.array([0, 1, 2], np.int32), 8000)
    neg = np.asarray(R.sample_negatives(jax.random.key(5), ix, users, 7))
    for user, allowed in ((0, [1, 2, 5, 6]), (1, [0, 1, 2, 3, 4, 5]), (2, list(range(7)))):
        got = neg[users == user]
        assert set(got.tolist()) == set(allowed)
        freq = np.bincount(got, minlength=7)[allowed] / got.size
        np.testing.assert_allclose(freq, 1 / len(allowed), atol=0.02)


# --------------------------------------------------------------------------------------
# LightGCN
# --------------------------------------------------------------------------------------


def _dense_lightgcn(eu, ei, users, items, n_layers):
    """(I + A~ + ... + A~^K) E / (K + 1) with A~ = D^-1/2 A D^-1/2 as dense NumPy matrices."""
    n_u, n_i = eu.shape[0], ei.shape[0]
    a = np.zeros((n_u + n_i, n_u + n_i))
    a[users, n_u + items] = 1.0
    a[n_u + items, users] = 1.0
    deg = a.sum(1)
    dinv = np.where(deg > 0, 1.0 / np.sqrt(np.where(deg > 0, deg, 1.0)), 0.0)
    at = dinv[:, None] * a * dinv[None, :]
    e = np.concatenate([eu, ei]).astype(np.float64)
    total, layer = e.copy(), e.copy()
    for _ in range(n_layers):
        layer = at @ layer
        total += layer
    total /= n_layers + 1
    return total[:n_u], total[n_u:]


def _tiny_graph():
    # 5 users x 6 items; user 4 and item 5 have no edges
    users = np.array([0, 0, 1, 1, 1, 2, 3, 3, 0])
    items = np.array([0, 2, 0, 1, 4, 3, 3, 4, 4])
    rng = np.random.default_rng(6)
    return users, items, rng.normal(size=(5, 3)).astype(np.float32), rng.normal(size=(6, 3)).astype(np.float32)


@pytest.mark.parametrize("propagation", ["sparse", "dense"])
@pytest.mark.parametrize("n_layers", [0, 1, 3])
def test_lightgcn_propagation_equals_dense_matrix_powers(propagation, n_layers):
    users, items, eu, ei = _tiny_graph()
    graph = R.lightgcn_graph(5, 6, users, items, propagation=propagation)
    assert ("dense" in graph) == (propagation == "dense")
    got_u, got_i = R.lightgcn_propagate(jnp.asarray(eu), jnp.asarray(ei), graph, n_layers)
    want_u, want_i = _dense_lightgcn(eu, ei, users, items, n_layers)
    np.testing.assert_allclose(np.asarray(got_u), want_u, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(got_i), want_i, rtol=1e-5, atol=1e-6)


def test_lightgcn_loss_equals_numpy():
    users, items, eu, ei = _tiny_graph()
    b_u, b_p, b_n, decay = np.array([0, 1, 3]), np.array([2, 4, 3]), np.array([5, 2, 0]), 0.01
    fu, fi = _dense_lightgcn(eu, ei, users, items, 2)
    x = np.sum(fu[b_u] * (fi[b_p] - fi[b_n]), axis=1)
    reg = 0.5 * (np.sum(eu[b_u] ** 2) + np.sum(ei[b_p] ** 2) + np.sum(ei[b_n] ** 2))
    want = np.mean(np.log1p(np.exp(-x))) + decay * reg / 3
    graph = R.lightgcn_graph(5, 6, users, items, propagation="sparse")
    got = R.lightgcn_loss({"users": jnp.asarray(eu), "items": jnp.asarray(ei)}, graph, 2, jnp.asarray(b_u),
                          jnp.asarray(b_p), jnp.asarray(b_n), decay)
    np.testing.assert_allclose(float(got), want, rtol=1e-5)


def test_lightgcn_ranks_held_out_planted_positives_above_negatives():
    u, i, y, train = _planted(7)
    hyper = {"embed_size": 16, "n_layers": 2, "batch_size": 64, "epochs": 3, "learning_rate": 0.01}
    fitted = R.train("LightGCN", jax.random.key(2), 80, 60, u[train], i[train], y[train], **hyper)
    assert roc_auc_score(y[~train], R.score(fitted, u[~train], i[~train])) > 0.8


# --------------------------------------------------------------------------------------
# MF and NCF wrappers
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["MF", "NCF"])
def test_mf_ncf_wrappers_equal_the_pipelines_calls(name):
    u, i, y, train = _planted(8, 20, 30)
    key = jax.random.key(3)
    hyper = {"dim": 4, "epochs": 2, "batch_size": 64, "lr": 1e-2, "l2": 1e-6}
    fitted = R.train(name, key, 20, 30, u[train], i[train], y[train], **hyper)
    model = (P.MF if name == "MF" else P.NCF)(20, 30, dim=4)
    params = P.train_recommender(model, key, jnp.asarray(u[train], jnp.int32), jnp.asarray(i[train], jnp.int32),
                                 jnp.asarray(y[train], jnp.float32), epochs=2, batch_size=64, lr=1e-2, l2=1e-6)
    want = np.asarray(model.apply({"params": params}, jnp.asarray(u, jnp.int32), jnp.asarray(i, jnp.int32)))
    np.testing.assert_array_equal(R.score(fitted, u, i), want.astype(np.float64))


# --------------------------------------------------------------------------------------
# bad inputs; the docstring examples
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, hyper, arg", [
    ("SVD", {}, "name"),
    ("ItemKNN", {"k": 0}, "k"),
    ("ItemKNN", {"similarity": "pearson"}, "similarity"),
    ("ItemKNN", {"mean_centered": 1}, "mean_centered"),
    ("ItemKNN", {"amplify": 0.0}, "amplify"),
    ("BPR", {"learning_rate": -1e-3}, "learning_rate"),
    ("BPR", {"lambda_reg": float("nan")}, "lambda_reg"),
    ("BPR", {"max_iter": 2.5}, "max_iter"),
    ("BPR", {"epochs": 3}, "epochs"),
    ("BPR", {"pos_threshold": 2.0}, "targets"),
    ("LightGCN", {"n_layers": -1}, "n_layers"),
    ("LightGCN", {"epochs": 0}, "epochs"),
    ("LightGCN", {"propagation": "bcoo"}, "propagation"),
    ("MF", {"lr": 0.0}, "lr"),
    ("NCF", {"dim": 0}, "dim"),
])
def test_bad_hyper_parameters_raise_value_error_naming_the_argument(name, hyper, arg):
    u, i, y = np.array([0, 1]), np.array([1, 0]), np.array([1.0, 0.0])
    with pytest.raises(ValueError, match=rf"^{arg}:"):
        R.train(name, jax.random.key(0), 2, 2, u, i, y, **hyper)


@pytest.mark.parametrize("users, items, targets, arg", [
    ([0, 2], [0, 1], [1.0, 0.0], "users"),
    ([0, 1], [0, -1], [1.0, 0.0], "items"),
    ([0, 1], [0, 1], [1.0], "targets"),
    ([0, 1], [0, 1], [1.0, np.inf], "targets"),
    ([0, 0], [1, 1], [1.0, 0.0], "items"),
    ([0.0, 1.0], [0, 1], [1.0, 0.0], "users"),
])
def test_bad_rows_raise_value_error_naming_the_argument(users, items, targets, arg):
    with pytest.raises(ValueError, match=rf"^{arg}:"):
        R.train("ItemKNN", jax.random.key(0), 2, 2, np.asarray(users), np.asarray(items), np.asarray(targets))


def test_mf_refuses_ratings_and_score_refuses_unknown_ids():
    with pytest.raises(ValueError, match="^targets:"):
        R.train("MF", jax.random.key(0), 2, 2, np.array([0, 1]), np.array([0, 1]), np.array([5.0, 3.0]))
    fitted = R.train("ItemKNN", jax.random.key(0), 2, 2, np.array([0, 1]), np.array([0, 1]), np.array([5.0, 3.0]))
    with pytest.raises(ValueError, match="^items:"):
        R.score(fitted, np.array([0]), np.array([2]))


def test_docstring_examples_run():
    result = doctest.testmod(R, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 20
