"""calib_jax.bootstrap against plain NumPy / scikit-learn on explicitly resampled rows."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from calib_jax import bootstrap as B
from calib_jax import metrics as M


def _data(rng, n=400):
    p = rng.uniform(0.01, 0.99, n).astype(np.float32)
    y = (rng.uniform(size=n) < p).astype(np.float32)
    return p, y


def brier_and_auc(p, y, *, weights):
    return {"brier": M.brier(p, y, weights=weights), "auc": M.auc(p, y, weights=weights)}


def test_multinomial_replicates_equal_numpy_on_repeated_rows(rng, key):
    p, y = _data(rng)
    res = B.bootstrap(brier_and_auc, p, y, key=key, n_boot=40)
    counts = np.asarray(B.resample_counts(key, len(p), 40))
    assert counts.shape == (40, len(p)) and np.all(counts.sum(axis=1) == len(p))
    for b in range(40):
        idx = np.repeat(np.arange(len(p)), counts[b])
        pb, yb = p[idx].astype(np.float64), y[idx].astype(np.float64)
        np.testing.assert_allclose(res.replicates["brier"][b], np.mean((pb - yb) ** 2), rtol=1e-5)
        np.testing.assert_allclose(res.replicates["auc"][b], roc_auc_score(yb, pb), rtol=1e-5)
    np.testing.assert_allclose(res.estimate["brier"], np.mean((p - y) ** 2.0), rtol=1e-5)
    lo, hi = np.quantile(res.replicates["auc"], [0.025, 0.975])
    assert res.lo["auc"] == pytest.approx(lo) and res.hi["auc"] == pytest.approx(hi)


def test_scalar_statistic_and_base_weights(rng, key):
    p, y = _data(rng, 300)
    w = rng.uniform(0.5, 2.0, len(p)).astype(np.float32)
    res = B.bootstrap(M.brier, p, y, key=key, n_boot=20, weights=w)
    counts = np.asarray(B.resample_counts(key, len(p), 20))
    ref = [np.sum(w * c * (p - y) ** 2) / np.sum(w * c) for c in counts]
    np.testing.assert_allclose(res.replicates, ref, rtol=1e-5)
    assert isinstance(res.estimate, float)


def test_bootstrap_standard_error_of_a_mean_matches_theory(rng, key):
    y = (rng.uniform(size=4000) < 0.3).astype(np.float32)
    p = np.full_like(y, 0.3)
    res = B.bootstrap(M.brier, p, y, key=key, n_boot=1000)
    theory = np.std((p - y) ** 2) / np.sqrt(len(y))  # plug-in SE of a mean
    assert np.std(res.replicates) == pytest.approx(theory, rel=0.1)


def test_poisson_counts_are_poisson_and_stream_exactly(key):
    n = 50_000
    c = np.asarray(B.resample_counts(key, n, 2, scheme="poisson"))
    assert np.mean(c) == pytest.approx(1.0, abs=0.02) and np.var(c) == pytest.approx(1.0, abs=0.03)
    assert np.mean(c == 0) == pytest.approx(np.exp(-1.0), abs=0.01)
    chunks = [np.asarray(B.resample_counts(key, m, 2, scheme="poisson", row_offset=s))
              for s, m in ((0, 20_000), (20_000, 17_000), (37_000, 13_000))]
    np.testing.assert_array_equal(np.concatenate(chunks, axis=1), c)


def test_streamed_poisson_sums_merge_to_the_in_memory_replicates(rng, key):
    p, y = _data(rng, 1000)

    def sums(p, y, *, weights):  # mergeable statistics: weighted sums
        return {"w": jnp.sum(weights), "se": jnp.sum(weights * (p - y) ** 2)}

    whole = B.bootstrap(sums, p, y, key=key, n_boot=30, scheme="poisson")
    a = B.bootstrap(sums, p[:600], y[:600], key=key, n_boot=30, scheme="poisson")
    b = B.bootstrap(sums, p[600:], y[600:], key=key, n_boot=30, scheme="poisson", row_offset=600)
    for k in ("w", "se"):
        np.testing.assert_allclose(a.replicates[k] + b.replicates[k], whole.replicates[k], rtol=1e-5)


@pytest.mark.parametrize("scheme", B.SCHEMES)
def test_block_bootstrap_draws_whole_blocks(rng, key, scheme):
    n, K = 500, 25
    blocks = rng.integers(0, K, n)
    c = np.asarray(B.resample_counts(key, n, 30, scheme=scheme, blocks=blocks, n_blocks=K))
    for row in c:  # every row of a block has its block's count
        for k in range(K):
            assert len(set(row[blocks == k])) <= 1
    if scheme == "multinomial":
        per_block = np.array([[row[blocks == k][0] if np.any(blocks == k) else 0 for k in range(K)] for row in c])
        present = np.array([np.any(blocks == k) for k in range(K)])
        assert np.all(per_block[:, present].sum(axis=1) <= K)


def test_block_bootstrap_is_wider_for_clustered_data(rng, key):
    K, m = 40, 50  # 40 users x 50 impressions, CTR varying strongly by user
    user_ctr = rng.beta(1, 8, K)
    blocks = np.repeat(np.arange(K), m)
    y = (rng.uniform(size=K * m) < user_ctr[blocks]).astype(np.float32)
    p = np.full_like(y, float(np.mean(y)))
    rows = B.bootstrap(M.brier, p, y, key=key, n_boot=400)
    users = B.bootstrap(M.brier, p, y, key=key, n_boot=400, blocks=blocks, n_blocks=K)
    assert np.std(users.replicates) > 1.5 * np.std(rows.replicates)


def test_paired_difference_and_marks(rng, key):
    p, y = _data(rng, 2000)
    noisy = np.clip(p + rng.normal(0, 0.2, len(p)), 0.001, 0.999).astype(np.float32)
    res = {name: B.bootstrap(brier_and_auc, q, y, key=key, n_boot=300) for name, q in
           (("model", p), ("noisy", noisy), ("model_again", p.copy()))}
    d = B.difference(res["model"], res["noisy"], "brier")
    ref = res["model"].replicates["brier"] - res["noisy"].replicates["brier"]
    assert d.lo == pytest.approx(np.quantile(ref, 0.025)) and d.hi < 0 and d.share_a_lower == 1.0
    ranks = B.rank_methods(res, "brier")
    assert ranks["noisy"]["mark"] == "" and ranks["noisy"]["diff_lo"] > 0
    assert {ranks["model"]["mark"], ranks["model_again"]["mark"]} == {"best", "tie"}
    two = B.rank_methods({k: res[k] for k in ("model", "noisy")}, "auc", better="higher")
    assert two["model"]["mark"] == "significantly best"
    other_key = B.bootstrap(brier_and_auc, p, y, key=jax.random.key(7), n_boot=300)
    with pytest.raises(ValueError, match="same resamples"):
        B.difference(res["model"], other_key, "brier")


def test_bad_arguments_raise(rng, key):
    p, y = _data(rng, 50)
    with pytest.raises(ValueError, match="scheme"):
        B.bootstrap(M.brier, p, y, key=key, scheme="jackknife")
    with pytest.raises(ValueError, match="n_blocks"):
        B.bootstrap(M.brier, p, y, key=key, blocks=np.zeros(50, int))
    with pytest.raises(ValueError, match="row_offset"):
        B.bootstrap(M.brier, p, y, key=key, row_offset=10)
    with pytest.raises(ValueError, match="rows"):
        B.bootstrap(M.brier, p, y[:40], key=key)
    with pytest.raises(ValueError, match="n_boot"):
        B.bootstrap(M.brier, p, y, key=key, n_boot=1)


@pytest.mark.parametrize("scheme", B.SCHEMES)
def test_row_order_pairs_differently_sorted_copies(rng, key, scheme):
    p, y = _data(rng, 300)
    blocks = rng.integers(0, 12, len(p))
    order = np.argsort(p)
    a = B.bootstrap(brier_and_auc, p, y, key=key, n_boot=30, scheme=scheme, blocks=blocks, n_blocks=12)
    b = B.bootstrap(brier_and_auc, p[order], y[order], key=key, n_boot=30, scheme=scheme,
                    blocks=blocks[order], n_blocks=12, row_order=order)
    for k in ("brier", "auc"):
        np.testing.assert_allclose(a.replicates[k], b.replicates[k], rtol=1e-5)
    with pytest.raises(ValueError, match="permutation"):
        B.bootstrap(M.brier, p, y, key=key, n_boot=2, row_order=np.zeros(len(p), int))


def _calibration_panel(p, o, y, *, weights):
    """Weighted sums of many rows (the reductions whose bits depend on how XLA fuses them)."""
    return {"nll": M.nll(p, y, weights=weights), "ece": M.ece(p, y, weights=weights),
            "brier": M.brier(p, y, weights=weights), "auc": M.auc(p, y, weights=weights, presorted=True),
            "lcce": M.lcce(o, y, probs=p, key=jax.random.key(1), weights=weights)}


@pytest.mark.parametrize("scheme", B.SCHEMES)
def test_given_counts_give_the_same_bits_as_drawing_them(rng, key, scheme):
    """Several statistics of the same rows share one draw of the counts (``counts``): each gets
    the replicates it gets drawing them itself, to the bit, with a narrow count dtype too."""
    n = 50_000
    o = rng.normal(-3.0, 1.0, n).astype(np.float32)
    p = (1 / (1 + np.exp(-o - rng.normal(0, 0.2, n)))).astype(np.float32)
    y = (rng.uniform(size=n) < p).astype(np.float32)
    wide = B.resample_counts(key, n, 21, scheme=scheme)
    narrow = B.resample_counts(key, n, 21, scheme=scheme, dtype=jnp.uint8)
    assert narrow.dtype == jnp.uint8 and np.array_equal(np.asarray(wide), np.asarray(narrow))
    for score in (p, np.clip(p * 1.3, 0, 1)):  # two "methods", each sorted by its own scores
        order = np.argsort(score, kind="stable")
        rows = (score[order], o[order], y[order])
        drawn = B.bootstrap(_calibration_panel, *rows, key=key, n_boot=21, scheme=scheme, row_order=order, batch=8)
        given = B.bootstrap(_calibration_panel, *rows, key=key, n_boot=21, scheme=scheme, row_order=order, batch=8,
                            counts=narrow)
        for k, r in drawn.replicates.items():
            np.testing.assert_array_equal(given.replicates[k], r, err_msg=k)
        assert given.fingerprint == drawn.fingerprint


def test_given_counts_are_checked(rng, key, monkeypatch):
    p, y = _data(rng, 100)
    with pytest.raises(ValueError, match="counts"):
        B.bootstrap(M.brier, p, y, key=key, n_boot=5, counts=np.ones((4, 100), np.int32))
    with pytest.raises(ValueError, match="counts"):
        B.bootstrap(M.brier, p, y, key=key, n_boot=5, counts=np.ones((5, 100), np.float32))
    with pytest.raises(ValueError, match="counts"):  # a plain list has no dtype: a clear error, not AttributeError
        B.bootstrap(M.brier, p, y, key=key, n_boot=5, counts=[[1] * 100] * 5)
    with pytest.raises(ValueError, match="dtype"):
        B.resample_counts(key, 100, 5, dtype=np.float32)
    # a count that does not fit the narrow dtype is refused, never wrapped
    monkeypatch.setattr(B, "_counts_matrix", lambda key, bs, **kw: jnp.full((len(bs), kw["n"]), 300, jnp.int32))
    with pytest.raises(ValueError, match="exceeds 255"):
        B.resample_counts(key, 100, 5, dtype=jnp.uint8)


def _weighting_metrics(p, y, g, *, weights):
    """The five metrics whose weights are not frequency counts (the module docstring)."""
    return {"debiased_ece_sq": M.debiased_ece_sq(p, y, weights=weights, n_bins=5),
            "skce": M.skce(p, y, weights=weights), "ici": M.ici(p, y, weights=weights),
            "cumulative": M.cumulative_calibration_error(p, y, weights=weights, normalize=True),
            "mce": M.multicalibration_error(p, y, g, n_levels=3, weights=weights)}


@pytest.mark.parametrize("scheme, weighted, n_boot", [("multinomial", False, 4), ("poisson", True, 2)])
def test_duplicate_rows_replicates_are_the_metrics_of_the_drawn_rows(rng, key, scheme, weighted, n_boot):
    """For the five metrics whose weights are not frequency counts, ``weights = v * c`` is not the
    duplicated rows (the probe of 2026-12-07: a normalised cumulative error's replicates averaged
    1.26 where the drawn rows' averaged 1.78); ``duplicate_rows=True`` evaluates each replicate on
    the drawn rows themselves, every one the metric of ``np.repeat`` of the rows, base weights kept.
    (Few replicates: each Poisson draw has its own size, so its reference compiles anew.)"""
    n = 200
    p, y = _data(rng, n)
    g = rng.integers(0, 3, n).astype(np.int32)
    v = rng.uniform(0.5, 2.0, n).astype(np.float32) if weighted else None
    res = B.bootstrap(_weighting_metrics, p, y, g, key=key, n_boot=n_boot, scheme=scheme, weights=v,
                      duplicate_rows=True)
    counts = np.asarray(B.resample_counts(key, n, n_boot, scheme=scheme))
    for b in range(n_boot):
        idx = np.repeat(np.arange(n), counts[b])
        want = _weighting_metrics(p[idx], y[idx], g[idx], weights=None if v is None else v[idx])
        for k, x in want.items():
            np.testing.assert_allclose(res.replicates[k][b], float(x), rtol=2e-4, atol=1e-6, err_msg=k)
    if not weighted:  # the weighted replicates are not those rows' metrics (why the option exists)
        plain = B.bootstrap(_weighting_metrics, p, y, g, key=key, n_boot=n_boot, scheme=scheme)
        assert not np.allclose(plain.replicates["cumulative"], res.replicates["cumulative"], rtol=1e-2)
        assert res.estimate == plain.estimate
        with pytest.raises(ValueError, match="duplicate_rows"):
            B.bootstrap(_weighting_metrics, p, y, g, key=key, n_boot=4, blocks=g, n_blocks=3, duplicate_rows=True)
