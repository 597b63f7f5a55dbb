"""Tests of Neural Calibration (seeds/001 §4) and TNF (seeds/003 §4.2)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from calib_jax.calibrators import neural_calibration as nc
from calib_jax.calibrators import top_n
from calib_jax.calibrators._base import REGISTRY, Calibrator


def _nll(p, y):
    p = np.clip(np.asarray(p, np.float64), 1e-12, 1 - 1e-12)
    return -np.mean(y * np.log(p) + (1 - y) * np.log1p(-p))


@pytest.fixture(scope="module")
def field_data():
    """Logits biased per category of field 0 (field 1 is noise)."""
    rng = np.random.default_rng(0)
    n = 3000
    f = np.stack([rng.integers(0, 5, n), rng.integers(0, 3, n)], 1)
    true = -1.5 + rng.normal(size=n)
    o = (true + np.array([1.0, -1.0, 0.5, 0.0, -0.5])[f[:, 0]]).astype(np.float32)
    y = (rng.random(n) < 1 / (1 + np.exp(-true))).astype(np.float32)
    return o, y, f


@pytest.fixture(scope="module")
def nc_fit(field_data):
    o, y, f = field_data
    return nc.fit(o, y, context={"fields": f}, key=jax.random.key(0), n_steps=200, n_knots=20)


def test_neural_calibration_matches_field_logistic_reference(field_data, nc_fit):
    # The independent reference: logistic regression on [logit, one-hot(field 0)] (sklearn).
    o, y, f = field_data
    X = np.column_stack([o, np.eye(5)[f[:, 0]]]).astype(np.float64)
    ref = LogisticRegression(C=1e6, max_iter=2000).fit(X, y).predict_proba(X)[:, 1]
    p = nc.predict(nc_fit, o, context={"fields": f})
    assert _nll(p, y) <= _nll(ref, y) + 0.003
    # and it removes the per-category bias that a logit-only calibrator cannot
    for c in range(5):
        rows = f[:, 0] == c
        assert abs(float(np.mean(np.asarray(p)[rows])) - y[rows].mean()) < 0.03


def test_neural_calibration_monotone_in_logit_and_deterministic(field_data, nc_fit):
    o, y, f = field_data
    grid = np.linspace(-6, 4, 200).astype(np.float32)
    fx = np.tile(f[:1], (200, 1))
    p = np.asarray(nc.predict(nc_fit, grid, context={"fields": fx}))
    assert np.all(np.diff(p) >= -1e-6)
    again = nc.fit(o, y, context={"fields": f}, key=jax.random.key(0), n_steps=200, n_knots=20)
    for a, b in zip(jax.tree.leaves(nc_fit), jax.tree.leaves(again)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("extrapolate", ["linear", "clamp"])
def test_neural_calibration_one_forward_pass_a_step_keeps_the_bits(field_data, extrapolate):
    """The training loop's one forward pass a step (both losses from it, the knot placement
    hoisted out of the loop) gives the floats of the two-pass loop it replaced
    (``benchmarks.bench_nc_loop.two_pass_train``, the benchmark's anchor), bit for bit:
    the fitted parameters, every step's loss and the stopping rule's choice. Under ``vmap`` (how
    ``fit_many`` runs the heads together) the parameters too, and every step's reported loss to
    one float32 rounding."""
    from benchmarks.bench_nc_loop import two_pass_train
    from calib_jax.calibrators import ilps

    o, y, f = (jnp.asarray(a) for a in field_data)
    rng = np.random.default_rng(5)
    n = o.shape[0]
    model = nc.FieldMLP(vocab_sizes=(5, 3), embed_dim=4, hidden=(8,))
    hold = jnp.asarray(rng.random(n) < 0.2)
    v = jnp.asarray(np.bincount(rng.integers(0, n, n), minlength=n), jnp.float32)
    v_fit, v_stop = jnp.where(hold, 0.0, v), jnp.where(hold, v, 0.0)
    eta0 = ilps.fit(o, y, weights=v_fit, n_knots=20, extrapolate=extrapolate)
    mlp0 = model.init(jax.random.key(2), f[:1])
    kw = dict(knots=eta0.knots, o=o, y=y, x=f, lam=jnp.float32(1.0), lr=jnp.float32(0.03),
              weight_decay=jnp.float32(1e-3), model=model, n_steps=60, extrapolate=extrapolate)
    new = nc._train(eta0.values, mlp0=mlp0, v=v_fit, v_stop=v_stop, **kw)
    old = two_pass_train(eta0.values, mlp0=mlp0, v=v_fit, v_stop=v_stop, **kw)
    assert float(jnp.max(jnp.abs(new[1] - new[1][0]))) > 1e-3  # the loop moved
    for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(old), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    v2 = jnp.asarray(np.bincount(rng.integers(0, n, n), minlength=n), jnp.float32)
    vs = jnp.stack([v_fit, jnp.where(hold, 0.0, v2)]), jnp.stack([v_stop, jnp.where(hold, v2, 0.0)])
    run = lambda fn: jax.vmap(lambda vf, vst: fn(eta0.values, mlp0=mlp0, v=vf, v_stop=vst, **kw))(*vs)
    (new_fit, new_vals), (old_fit, old_vals) = run(nc._train), run(two_pass_train)
    assert float(jnp.max(jnp.abs(new_fit[0][0] - new_fit[0][1]))) > 1e-4  # two different fits
    for a, b in zip(jax.tree.leaves(new_fit), jax.tree.leaves(old_fit), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # the reported losses: XLA fuses the batched sums differently, one float32 rounding apart
    np.testing.assert_allclose(np.asarray(new_vals), np.asarray(old_vals), rtol=3e-7, atol=0)


def test_field_correction_compiled_equals_the_eager_mlp(field_data, nc_fit):
    """``field_correction`` runs the MLP as one compiled program; its floats equal flax's eager
    ``apply`` (op by op), and with them every prediction."""
    _, _, f = field_data
    model = nc.FieldMLP(vocab_sizes=nc_fit.vocab_sizes, embed_dim=nc_fit.embed_dim, hidden=nc_fit.hidden)
    eager = np.asarray(model.apply(nc_fit.mlp, jnp.asarray(f)))
    np.testing.assert_array_equal(np.asarray(nc.field_correction(nc_fit, f)), eager)
    assert np.max(np.abs(eager)) > 1e-3  # the correction is not trivially zero


def test_neural_calibration_fit_many_equals_sequential_fits(field_data, nc_fit):
    """H fits as one vmapped program equal H calls of fit (float32 rounding of the batched
    products: predictions within 1e-5), and differ from each other."""
    o, y, f = field_data
    keys = [jax.random.key(0), jax.random.key(1)]
    many = nc.fit_many(o, y, keys=keys, context={"fields": f}, n_steps=200, n_knots=20)
    ctx = {"fields": f}
    np.testing.assert_allclose(nc.predict(many[0], o, context=ctx), nc.predict(nc_fit, o, context=ctx),
                               atol=1e-5)
    one = nc.fit(o, y, context=ctx, key=keys[1], n_steps=200, n_knots=20)
    np.testing.assert_allclose(nc.predict(many[1], o, context=ctx), nc.predict(one, o, context=ctx), atol=1e-5)
    assert np.max(np.abs(np.asarray(nc.predict(many[0], o, context=ctx))
                         - np.asarray(nc.predict(many[1], o, context=ctx)))) > 1e-4
    with pytest.raises(ValueError, match="keys"):
        nc.fit_many(o, y, keys=[], context=ctx)


def test_neural_calibration_fit_many_with_one_weight_row_per_fit(field_data):
    # H bootstrap draws of the rows as (H, n) weights: fit h equals fit(weights=draw h) to the
    # float32 rounding of the batched products, and the draws give different fits
    o, y, f = field_data
    ctx, n = {"fields": f}, len(y)
    rng = np.random.default_rng(1)
    draws = np.stack([np.bincount(rng.integers(0, n, n), minlength=n) for _ in range(2)]).astype(np.float32)
    keys = [jax.random.key(3), jax.random.key(4)]
    small = dict(n_steps=120, n_knots=20)
    many = nc.fit_many(o, y, keys=keys, weights=draws, context=ctx, **small)
    for h in range(2):
        one = nc.fit(o, y, key=keys[h], weights=draws[h], context=ctx, **small)
        np.testing.assert_allclose(nc.predict(many[h], o, context=ctx), nc.predict(one, o, context=ctx), atol=1e-5)
    same_draw = nc.fit_many(o, y, keys=keys, weights=np.stack([draws[0], draws[0]]), context=ctx, **small)
    assert np.max(np.abs(np.asarray(nc.predict(many[1], o, context=ctx))
                         - np.asarray(nc.predict(same_draw[1], o, context=ctx)))) > 1e-4
    with pytest.raises(ValueError, match="one per key"):
        nc.fit_many(o, y, keys=keys[:1], weights=draws, context=ctx, **small)
    bad = draws.copy()
    bad[1, 0] = -1.0
    with pytest.raises(ValueError, match=r"weights\[1\]"):
        nc.fit_many(o, y, keys=keys, weights=bad, context=ctx, **small)


def test_neural_calibration_unseen_category_and_validation(field_data, nc_fit):
    o, _, f = field_data
    f2 = f[:10].copy()
    f2[:, 0] = 99  # never seen -> out-of-vocabulary row, finite output
    p = nc.predict(nc_fit, o[:10], context={"fields": f2})
    assert np.all(np.isfinite(p)) and np.all((p > 0) & (p < 1))
    with pytest.raises(ValueError, match="fields"):
        nc.predict(nc_fit, o[:10])
    with pytest.raises(ValueError, match="fields"):
        nc.fit(o[:10], np.zeros(10), context={"fields": -np.ones((10, 2), int)})
    assert REGISTRY["neural_calibration"].needs == ("fields",)


# ------------------------------------------------------------------------------- TNF


def _const_fit(logits, labels, *, weights=None, key=None, context=None):
    w = np.ones(len(labels)) if weights is None else np.asarray(weights)
    return jnp.asarray(np.sum(w * labels) / np.sum(w))


_CONST = Calibrator("test_weighted_rate", _const_fit,
                    lambda prm, logits, *, context=None: jnp.full(jnp.shape(logits), prm))


@pytest.fixture(scope="module")
def topn_data():
    rng = np.random.default_rng(1)
    users, items = 60, 30
    o = rng.normal(-1, 1.5, (users, items)).astype(np.float32)
    ranks = np.argsort(np.argsort(-o, axis=1), axis=1) + 1
    # true CTR decays with rank differently from the score: rank-dependent miscalibration
    p = 1 / (1 + np.exp(-(o - 0.05 * ranks)))
    y = (rng.random(o.shape) < p).astype(np.float32)
    return o.ravel(), y.ravel(), ranks.ravel()


def test_rank_groups_and_weights():
    r = np.array([1, 5, 6, 10, 11, 20, 21, 100])
    np.testing.assert_array_equal(top_n.rank_groups(r, top_n=20), [0, 0, 1, 1, 2, 3, -1, -1])
    np.testing.assert_allclose(top_n.rank_weights(r, alpha=1.0), 1 / r, rtol=1e-6)
    np.testing.assert_allclose(top_n.rank_weights(r, alpha=0.5), r ** -0.5, rtol=1e-6)
    np.testing.assert_array_equal(top_n.rank_groups(r, top_n=20, n_rank_groups=3),
                                  [0, 0, 0, 1, 1, 2, -1, -1])


def test_tnf_weighted_constant_base_matches_numpy(topn_data):
    o, y, r = topn_data
    prm = top_n.fit(o, y, context={"ranks": r}, base=_CONST, top_n=20)
    p = np.asarray(top_n.predict(prm, o, context={"ranks": r}))
    for lo, hi in [(1, 5), (6, 10), (11, 15), (16, 20)]:
        rows = (r >= lo) & (r <= hi)
        w = 1.0 / r[rows]
        np.testing.assert_allclose(p[rows], np.sum(w * y[rows]) / np.sum(w), rtol=1e-5)
    np.testing.assert_allclose(p[r > 20], y.mean(), rtol=1e-5)


def test_tnf_platt_base_matches_sklearn_weighted(topn_data):
    if "platt" not in REGISTRY:
        pytest.skip("platt calibrator not available")
    o, y, r = topn_data
    prm = top_n.fit(o, y, context={"ranks": r}, base="platt", top_n=20, alpha=1.0)
    p = np.asarray(top_n.predict(prm, o, context={"ranks": r}))
    rows = r <= 5
    lr = LogisticRegression(C=1e10, tol=1e-10, max_iter=1000).fit(
        o[rows, None].astype(np.float64), y[rows], sample_weight=1.0 / r[rows])
    np.testing.assert_allclose(p[rows], lr.predict_proba(o[rows, None].astype(np.float64))[:, 1],
                               atol=1e-4)


def test_tnf_validation(topn_data):
    o, y, r = topn_data
    with pytest.raises(ValueError, match="ranks"):
        top_n.fit(o, y, base=_CONST)
    with pytest.raises(ValueError, match="ranks"):
        top_n.fit(o, y, base=_CONST, context={"ranks": r - 1})
    with pytest.raises(ValueError, match="base"):
        top_n.fit(o, y, base="nope", context={"ranks": r})


@pytest.mark.parametrize("base", sorted(top_n._ZERO_WEIGHT_EXACT))
def test_bucketed_rank_groups_fit_the_same_map(base):
    """TNF pads a rank group's rows to a power of two with zero-weight copies (so repeated
    fits compile nothing new) only for bases whose fit ignores a zero weight: the padded fit
    predicts what the fit on the group's own rows predicts, to float32 rounding."""
    from calib_jax import calibrators as C

    rng = np.random.default_rng(7)
    n, k = 4000, 1300
    o = rng.normal(0.0, 1.5, n).astype(np.float32)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-(0.7 * o - 0.3)))).astype(np.float32)
    rows = np.sort(rng.choice(n, k, replace=False))
    w = rng.uniform(0.2, 2.0, k)
    padded, pw = top_n._bucketed(rows, w, n, base)
    assert padded.size == 2048 and np.all(pw[k:] == 0)
    cal = C.get(base)
    want = np.asarray(cal.predict(cal.fit(o[rows], y[rows], weights=w.astype(np.float32)), o))
    got = np.asarray(cal.predict(cal.fit(o[padded], y[padded], weights=pw.astype(np.float32)), o))
    np.testing.assert_allclose(got, want, rtol=0, atol=3e-7)


def test_bucketing_leaves_other_bases_alone():
    rows, w = np.arange(10), np.ones(10)
    for base in ("ilps", "neural_calibration", "vrsag_ps"):
        r, v = top_n._bucketed(rows, w, 100, base)
        assert r is rows and v is w


@pytest.mark.optimized_codegen  # tests/conftest.py: its programs run long at LLVM level 0
def test_neural_calibration_starts_out_of_sample_on_its_stopping_rows(monkeypatch):
    """The ILPS start is fitted on the gradient rows only. Fitted on every row it was in-sample
    on the early-stopping rows, won the stopping rule at step 0 and left g = 0 (before the fix:
    the first of these four fits, and every fit on the simulator worlds, returned g = 0).
    With a weak field bias (0.1 logit) on 20 000 rows, every fit must learn a correction that
    ranks the categories as the bias does."""
    rng = np.random.default_rng(0)
    n = 20_000
    f = np.stack([rng.integers(0, 5, n), rng.integers(0, 3, n)], 1)
    bias = 0.1 * np.array([1.0, -1.0, 0.5, 0.0, -0.5])
    true = -1.5 + rng.normal(size=n)
    o = (true + bias[f[:, 0]]).astype(np.float32)
    y = (rng.random(n) < 1 / (1 + np.exp(-true))).astype(np.float32)
    seen = []
    real_fit = nc.ilps.fit
    monkeypatch.setattr(nc.ilps, "fit", lambda *a, **k: seen.append(np.asarray(k["weights"])) or real_fit(*a, **k))
    fits = nc.fit_many(o, y, keys=[jax.random.key(k) for k in range(4)], context={"fields": f},
                       n_steps=200, n_knots=20)
    assert len(seen) == 4
    for w in seen:  # each start leaves out its own ~20% of rows
        assert 0.15 < np.mean(w == 0) < 0.25
    levels = np.stack([np.arange(5), np.zeros(5, int)], 1)
    for p in fits:
        g = np.asarray(nc.field_correction(p, levels))
        assert np.max(np.abs(g)) > 0.02
        # the correction undoes the bias: g is decreasing in it
        assert np.corrcoef(g, bias)[0, 1] < -0.8
