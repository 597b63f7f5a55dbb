"""Modern calibration metrics (smooth ECE, cumulative KS/Kuiper, multicalibration, SKCE,
debiased squared ECE, ECE-sweep, ICI) against references.

References: ``relplot.smECE`` (smooth ECE), ``mcgrad`` / ``probcal`` where importable
(cumulative and multicalibration errors, ICI under a stated tolerance), and plain-NumPy
versions written here from the papers.  Reference comparisons run in float64
(``jax.enable_x64``) at 1e-6 relative; float32 is checked against float64 separately.
Kept fast: one small sample size, every jitted core compiled once per configuration.
"""

from __future__ import annotations

import itertools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from calib_jax import metrics as M

N = 200
REL = dict(rtol=1e-6, atol=1e-12)


def sample(seed=0, n=N, *, ties=False, weighted=False, n_fields=2, levels=3):
    rng = np.random.default_rng(seed)
    z = rng.normal(-0.5, 1.3, n)
    p = 1.0 / (1.0 + np.exp(-z))
    if ties:
        p = np.round(p, 1)
    o = 1.0 / (1.0 + np.exp(-(0.7 * z + 0.3 + rng.normal(0, 0.4, n))))
    y = (rng.uniform(size=n) < o).astype(np.float64)
    w = rng.uniform(0.2, 2.0, n) if weighted else None
    f = rng.integers(0, levels, (n, n_fields))
    return p, y, w, f


def x64(fn, *args, **kw):
    with jax.enable_x64(True):
        args = [None if a is None else jnp.asarray(a) for a in args]
        if "weights" in kw and kw["weights"] is not None:
            kw["weights"] = jnp.asarray(kw["weights"])
        out = fn(*args, **kw)
        return jax.tree.map(lambda a: np.asarray(a).astype(np.float64), out)


# ------------------------------------------------------------------ NumPy references


def np_cumulative(p, y, w=None, statistic="kuiper", normalize=False):
    v = np.ones_like(p) if w is None else w
    o = np.argsort(p, kind="stable")
    ps = p[o]
    c = np.cumsum((v * (y - p))[o]) / v.sum()
    ends = np.append(np.flatnonzero(ps[1:] != ps[:-1]), len(p) - 1)
    walk = np.concatenate([[0.0], c[ends]])
    stat = np.ptp(walk) if statistic == "kuiper" else np.max(np.abs(walk))
    if not normalize:
        return stat
    sd = np.sqrt(np.sum(v * v * p * (1 - p))) / v.sum()
    return stat / sd if sd > 0 else (np.inf if stat > 0 else 0.0)


def np_mce(p, y, fields, w=None, *, max_depth=1, min_samples=10, scale="sigma"):
    v = np.ones_like(p) if w is None else w
    masks = [np.ones(len(p), bool)]
    F, L = fields.shape[1], fields.max() + 1
    if max_depth >= 1:
        masks += [fields[:, f] == l for f in range(F) for l in range(L)]
    if max_depth >= 2:
        masks += [(fields[:, a] == la) & (fields[:, b] == lb) for a, b in itertools.combinations(range(F), 2)
                  for la in range(L) for lb in range(L)]
    sig = [np_cumulative(p[m], y[m], v[m], "kuiper", True) for m in masks if m.sum() >= min_samples]
    best = max(sig) if sig else 0.0
    if scale == "sigma":
        return best
    return best * np.sqrt(np.sum(v * v * p * (1 - p))) / v.sum()


def np_skce(p, y, w=None, *, kernel="gaussian", bw=0.1, block=None):
    v = np.ones_like(p) if w is None else w
    u = v * (y - p)

    def k(a, b):
        d = a[:, None] - b[None, :]
        return np.exp(-d * d / (2 * bw * bw)) if kernel == "gaussian" else np.exp(-np.abs(d) / bw)

    if block is None:
        num = den = 0.0
        for i in range(len(p)):
            for j in range(len(p)):
                if i != j:
                    num += u[i] * u[j] * k(p[i:i + 1], p[j:j + 1])[0, 0]
                    den += v[i] * v[j]
        return num / den if den > 0 else 0.0
    num = den = 0.0
    for s in range(0, len(p) - block + 1, block):
        sl = slice(s, s + block)
        K = k(p[sl], p[sl])
        off = 1 - np.eye(block)
        num += np.sum(np.outer(u[sl], u[sl]) * K * off)
        den += np.sum(np.outer(v[sl], v[sl]) * off)
    return num / den if den > 0 else 0.0


def np_quantile_ids(p, M_, w=None):
    """Equal-mass bins, ties kept together (the rule of calib_jax.partitions.quantile_bins):
    block m starts at sorted position floor(m n / M), or where the cumulative weight first
    exceeds m/M of the total; a score goes to the number of block thresholds <= it."""
    o = np.argsort(p, kind="stable")
    ps = p[o]
    if w is None:
        starts = (np.arange(1, M_) * len(p)) // M_
    else:
        cw = np.cumsum(w[o])
        starts = np.minimum(np.searchsorted(cw, cw[-1] * np.arange(1, M_) / M_, side="right"), len(p) - 1)
    return np.searchsorted(ps[starts], p, side="right")


def np_debiased(p, y, w=None, n_bins=15):
    v = np.ones_like(p) if w is None else w
    ids = np_quantile_ids(p, n_bins, w)
    total = 0.0
    for b in range(n_bins):
        m = ids == b
        if not m.any():
            continue
        W = v[m].sum()
        rate, conf = np.sum(v[m] * y[m]) / W, np.sum(v[m] * p[m]) / W
        neff = W * W / np.sum(v[m] ** 2)
        corr = rate * (1 - rate) / (neff - 1) if neff > 1 else 0.0
        total += W / v.sum() * ((conf - rate) ** 2 - corr)
    return total


def np_sweep(p, y, w=None, max_bins=100, norm="l1"):
    v = np.ones_like(p) if w is None else w
    o = np.argsort(p, kind="stable")
    ps, ys, vs = p[o], y[o], v[o]
    n = len(p)

    def bins(b):
        return np.array_split(np.arange(n), b) if b <= n else None

    def stats(b):
        parts = [np.arange(-(-k * n // b), -(-(k + 1) * n // b)) for k in range(b)]
        return [(vs[i].sum(), np.sum(vs[i] * ps[i]), np.sum(vs[i] * ys[i])) for i in parts]

    best = 1
    for b in range(2, min(max_bins, n) + 1):
        st = stats(b)
        rates = [sy / W for W, _, sy in st]
        if np.all(np.diff(rates) >= 0):
            best = b
        else:
            break
    st = stats(best)
    g = [(sp - sy) / W for W, sp, sy in st]
    ws = [W / v.sum() for W, _, _ in st]
    return sum(a * (abs(b) if norm == "l1" else b * b) for a, b in zip(ws, g)), best


def np_ici(p, y, w=None, bw=None, M_=512):
    v = np.ones_like(p) if w is None else w
    lo, hi = p.min(), p.max()
    delta = (hi - lo if hi > lo else 1.0) / (M_ - 1)
    if bw is None:
        mean = np.sum(v * p) / v.sum()
        sd = np.sqrt(np.sum(v * (p - mean) ** 2) / v.sum())
        bw = 1.06 * sd * (v.sum() ** 2 / np.sum(v * v)) ** -0.2
    h = max(bw, delta)
    pos = (p - lo) / delta
    i0 = np.clip(np.floor(pos).astype(int), 0, M_ - 2)
    fr = np.clip(pos - i0, 0, 1)
    c0, cy = np.zeros(M_), np.zeros(M_)
    np.add.at(c0, i0, (1 - fr) * v)
    np.add.at(c0, i0 + 1, fr * v)
    np.add.at(cy, i0, (1 - fr) * v * y)
    np.add.at(cy, i0 + 1, fr * v * y)
    x = lo + np.arange(M_) * delta
    fit = np.zeros(M_)
    for g in range(M_):
        d = x - x[g]
        K = np.exp(-0.5 * (d / h) ** 2)
        s0, s1, s2 = np.sum(K * c0), np.sum(K * d * c0), np.sum(K * d * d * c0)
        t0, t1 = np.sum(K * cy), np.sum(K * d * cy)
        det = s0 * s2 - s1 * s1
        fit[g] = (s2 * t0 - s1 * t1) / det if det > 1e-6 * s0 * s2 else (t0 / s0 if s0 > 0 else 0.0)
    curve = fit[i0] * (1 - fr) + fit[i0 + 1] * fr
    return np.sum(v * np.abs(p - curve)) / v.sum()


# ------------------------------------------------------------------ smooth ECE


def test_smooth_ece_matches_relplot():
    relplot = pytest.importorskip("relplot")
    for seed, ties in [(0, False), (1, True)]:
        p, y, _, _ = sample(seed, ties=ties)
        val, sigma = x64(M.smooth_ece, p, y, return_bandwidth=True)
        want, want_sigma = relplot.smECE(p, y, return_width=True)
        np.testing.assert_allclose(sigma, want_sigma, rtol=1e-12)
        np.testing.assert_allclose(val, want, **REL)
    # fixed bandwidth, and integer weights = repeated rows
    p, y, _, _ = sample(2)
    np.testing.assert_allclose(x64(M.smooth_ece, p, y, bandwidth=0.05), relplot.smECE_sigma(p, y, 0.05), **REL)
    k = np.random.default_rng(3).integers(1, 4, N).astype(float)
    np.testing.assert_allclose(x64(M.smooth_ece, p, y, weights=k),
                               relplot.smECE(np.repeat(p, k.astype(int)), np.repeat(y, k.astype(int))), **REL)


def test_smooth_ece_edge_cases():
    # all-zero labels, a single row: finite, and equal to relplot where it is defined
    relplot = pytest.importorskip("relplot")
    p, _, _, _ = sample(4)
    y0 = np.zeros(N)
    np.testing.assert_allclose(x64(M.smooth_ece, p, y0, return_bandwidth=True)[0], relplot.smECE(p, y0), **REL)
    v1 = x64(M.smooth_ece, np.array([0.3]), np.array([1.0]))
    np.testing.assert_allclose(v1, relplot.smECE(np.array([0.3]), np.array([1.0])), **REL)


# ------------------------------------------------------------------ cumulative


@pytest.mark.parametrize("ties,weighted", [(False, False), (True, True)])
def test_cumulative_matches_numpy(ties, weighted):
    p, y, w, _ = sample(5, ties=ties, weighted=weighted)
    combos = itertools.product(("ks", "kuiper"), (False, True)) if not weighted else [("ks", False), ("kuiper", True)]
    for stat, norm in combos:
        got = x64(M.cumulative_calibration_error, p, y, statistic=stat, normalize=norm, weights=w)
        np.testing.assert_allclose(got, np_cumulative(p, y, w, stat, norm), **REL)


def test_cumulative_matches_third_party():
    p, y, w, _ = sample(6, weighted=True)
    try:
        import probcal.metrics as pm
    except ImportError:
        pm = None
    if pm is not None:
        np.testing.assert_allclose(x64(M.cumulative_calibration_error, p, y, statistic="ks"),
                                   pm.ecce(y, p).stat_max, **REL)
        np.testing.assert_allclose(x64(M.cumulative_calibration_error, p, y, statistic="ks", weights=w),
                                   pm.ecce(y, p, sample_weight=w).stat_max, **REL)
    try:
        import mcgrad.metrics as mm
    except Exception:  # mcgrad needs torch/lightgbm: optional
        mm = None
    if mm is not None:
        with warnings.catch_warnings():  # mcgrad itself uses pandas APIs deprecated in pandas 3
            warnings.simplefilter("ignore")
            ref, ref_sigma = mm.ecce(y, p), mm.ecce_sigma(y, p)
        np.testing.assert_allclose(x64(M.cumulative_calibration_error, p, y), ref, **REL)
        np.testing.assert_allclose(x64(M.cumulative_calibration_error, p, y, normalize=True), ref_sigma, **REL)
    if pm is None and mm is None:
        pytest.skip("neither probcal nor mcgrad installed")


def test_cumulative_edge_cases():
    # all-zero labels with scores 0: zero walk, zero sd -> 0 (no NaN); all scores 1 and labels 0 -> inf
    z = np.zeros(8)
    assert x64(M.cumulative_calibration_error, z, z, normalize=True) == 0.0
    assert x64(M.cumulative_calibration_error, np.ones(8), z, normalize=True) == np.inf
    np.testing.assert_allclose(x64(M.cumulative_calibration_error, np.array([0.3]), np.array([1.0])), 0.7)
    # tie order does not matter
    p, y, _, _ = sample(7, ties=True)
    perm = np.random.default_rng(0).permutation(N)
    a = x64(M.cumulative_calibration_error, p, y)
    np.testing.assert_allclose(x64(M.cumulative_calibration_error, p[perm], y[perm]), a, **REL)


# ------------------------------------------------------------------ multicalibration


@pytest.mark.parametrize("depth,weighted,scale", [(1, False, "sigma"), (2, True, "absolute"), (0, False, "sigma")])
def test_mce_matches_numpy(depth, weighted, scale):
    p, y, w, f = sample(8, weighted=weighted, ties=depth == 2)
    got = x64(M.multicalibration_error, p, y, f, n_levels=3, max_depth=depth, scale=scale, weights=w)
    np.testing.assert_allclose(got, np_mce(p, y, f, w, max_depth=depth, scale=scale), **REL)
    if depth == 0:
        np.testing.assert_allclose(got, np_cumulative(p, y, None, "kuiper", True), **REL)


@pytest.mark.parametrize("depth,ties,weighted", [(1, False, False), (2, True, True)])
def test_mce_float32_at_realistic_size_matches_numpy(depth, ties, weighted):
    """10^4 rows, three fields of 7 levels, in float32 (how the studies call it): the walks'
    extremes taken per segment (base and weight applied to the extremes, not to every row)
    against the float64 reference that walks each segment separately."""
    p, y, w, f = sample(21, n=10_000, ties=ties, weighted=weighted, n_fields=3, levels=7)
    f32 = [None if a is None else jnp.asarray(a, jnp.float32) for a in (p, y, w)]
    got = M.multicalibration_error(f32[0], f32[1], jnp.asarray(f, jnp.int32), n_levels=7, max_depth=depth,
                                   weights=f32[2])
    want = np_mce(p.astype(np.float32).astype(np.float64), y, f, None if w is None else w.astype(np.float32),
                  max_depth=depth)
    np.testing.assert_allclose(float(got), want, rtol=2e-5)


def test_mce_segment_with_zero_differences_is_zero_not_inf():
    """A segment of scores exactly 0 and labels 0 has a flat walk (range 0) and sigma = 0: its
    ratio is 0/0 = 0. In float32 the global cumulative sum minus the segment's base used to
    leave rounding noise there (the sum is a tree on XLA), which read as inf and made the whole
    MCE inf (isotonic regression predicts such exact zeros)."""
    rng = np.random.default_rng(1)
    n = 20_000
    p = rng.uniform(0.0, 0.2, n).astype(np.float32)
    y = (rng.random(n) < p).astype(np.float32)
    f = rng.integers(0, 40, n).astype(np.int32)
    f[f == 20] = 21
    f[rng.choice(n, 25, replace=False)] = 20  # a segment in the middle of the segment order
    p[f == 20] = 0.0
    y[f == 20] = 0.0
    got = float(M.multicalibration_error(jnp.asarray(p), jnp.asarray(y), jnp.asarray(f), n_levels=40))
    want = np_mce(p.astype(np.float64), y.astype(np.float64), f[:, None])
    assert np.isfinite(want)
    np.testing.assert_allclose(got, want, rtol=1e-4)


def test_mce_matches_mcgrad():
    try:
        import pandas as pd
        from mcgrad.metrics import MulticalibrationError
    except Exception:
        pytest.skip("mcgrad not importable (optional, heavy)")
    p, y, _, f = sample(9)
    df = pd.DataFrame({"p": p, "y": y, "a": f[:, 0], "b": f[:, 1]})
    with warnings.catch_warnings():  # mcgrad itself uses pandas APIs deprecated in pandas 3
        warnings.simplefilter("ignore")
        mce = MulticalibrationError(df, "y", "p", categorical_segment_columns=["a", "b"], max_depth=2,
                                    max_values_per_segment_feature=10, min_samples_per_segment=10,
                                    precision_dtype="float64")
        reference = mce.mce_sigma
    got = x64(M.multicalibration_error, p, y, f, n_levels=3, max_depth=2)
    np.testing.assert_allclose(got, reference, rtol=1e-5)


# ------------------------------------------------------------------ SKCE


@pytest.mark.parametrize("kernel,weighted", [("gaussian", False), ("laplacian", True)])
def test_skce_matches_numpy(kernel, weighted):
    p, y, w, _ = sample(10, n=60, weighted=weighted)
    for est, block in [("unbiased", None), ("linear", 2), ("block", 5)]:
        got = x64(M.skce, p, y, estimator=est, kernel=kernel, bandwidth=0.2, block_size=block or 2, weights=w,
                  chunk=16)
        np.testing.assert_allclose(got, np_skce(p, y, w, kernel=kernel, bw=0.2, block=block), **REL)


def test_skce_edge_cases():
    assert x64(M.skce, np.array([0.3]), np.array([1.0]), chunk=16) == 0.0
    # calibrated labels: the unbiased estimate is centred near 0
    p, y, _, _ = sample(11, n=60)
    assert abs(float(x64(M.skce, p, (np.random.default_rng(1).uniform(size=60) < p) * 1.0, chunk=16))) < 1e-2


# ------------------------------------------------------------------ debiased ECE², sweep


@pytest.mark.parametrize("ties,weighted", [(False, False), (True, True)])
def test_debiased_ece_matches_numpy(ties, weighted):
    p, y, w, _ = sample(12, ties=ties, weighted=weighted)
    got = x64(M.debiased_ece_sq, p, y, n_bins=10, weights=w)
    np.testing.assert_allclose(got, np_debiased(p, y, w, 10), **REL)
    if not weighted:  # the plug-in part is the squared equal-mass ECE of calib_jax.metrics.ece
        assert got <= x64(M.ece, p, y, n_bins=10, strategy="quantile", norm="l2") + 1e-12


@pytest.mark.parametrize("ties,weighted,norm", [(False, False, "l1"), (True, True, "l2")])
def test_ece_sweep_matches_numpy(ties, weighted, norm):
    p, y, w, _ = sample(13, ties=ties, weighted=weighted)
    val, b = x64(M.ece_sweep, p, y, max_bins=30, norm=norm, weights=w, return_bins=True)
    want, want_b = np_sweep(p, y, w, 30, norm)
    assert int(b) == want_b
    np.testing.assert_allclose(val, want, **REL)


def test_binned_edge_cases():
    z = np.zeros(N)
    p, _, _, _ = sample(14)
    assert np.isfinite(x64(M.debiased_ece_sq, p, z, n_bins=10))
    np.testing.assert_allclose(x64(M.ece_sweep, p, z, max_bins=30, norm="l2", return_bins=True)[0],
                               np_sweep(p, z, None, 30, "l2")[0], **REL)
    np.testing.assert_allclose(x64(M.debiased_ece_sq, np.array([0.3]), np.array([1.0]), n_bins=10), 0.49)


# ------------------------------------------------------------------ ICI


@pytest.mark.parametrize("weighted", [False, True])
def test_ici_matches_numpy(weighted):
    p, y, w, _ = sample(15, weighted=weighted)
    np.testing.assert_allclose(x64(M.ici, p, y, weights=w, n_grid=64), np_ici(p, y, w, M_=64), **REL)
    np.testing.assert_allclose(x64(M.ici, p, y, bandwidth=0.05, n_grid=64), np_ici(p, y, None, 0.05, 64), **REL)


def test_ici_close_to_loess():
    """Stated tolerance: on 4000 rows with a smooth miscalibration, the kernel ICI is within
    0.01 of probcal's loess ICI (different smoothers, same target)."""
    pm = pytest.importorskip("probcal.metrics")
    p, y, _, _ = sample(16, n=4000)
    assert abs(x64(M.ici, p, y, n_grid=64) - pm.ici(y, p)) < 0.01


def test_ici_edge_cases():
    # all scores equal -> local-constant fit = label rate
    p = np.full(10, 0.2)
    y = np.array([1.0] * 3 + [0.0] * 7)
    np.testing.assert_allclose(x64(M.ici, p, y, n_grid=64), 0.1, **REL)
    assert x64(M.ici, np.array([0.3]), np.array([1.0]), n_grid=64) == pytest.approx(0.7)


# ------------------------------------------------------------------ jit, vmap, float32, errors


def _calls(f, *, n_steps=10):
    """One static configuration per metric (shared with the reference tests where possible,
    so the compiled cores are reused)."""
    return {
        "smooth_ece": lambda p, y: M.smooth_ece(p, y, n_steps=n_steps),
        "ks": lambda p, y: M.cumulative_calibration_error(p, y, statistic="ks", normalize=True),
        "mce": lambda p, y: M.multicalibration_error(p, y, f, n_levels=3),
        "skce": lambda p, y: M.skce(p, y, chunk=16),
        "debiased": lambda p, y: M.debiased_ece_sq(p, y, n_bins=10),
        "sweep": lambda p, y: M.ece_sweep(p, y, max_bins=30),
        "ici": lambda p, y: M.ici(p, y, n_grid=64),
    }


def test_jit_vmap_equals_eager_loop():
    """``jit(vmap(metric))`` over a batch of trials equals the eager per-trial loop."""
    T = 3
    data = [sample(20 + t) for t in range(T)]
    P = np.stack([d[0] for d in data]).astype(np.float32)
    Y = np.stack([d[1] for d in data]).astype(np.float32)
    f = jnp.asarray(data[0][3])
    # smooth ECE with 6 bisection steps: a 1001-point grid keeps this compile small
    for name, fn in _calls(f, n_steps=6).items():
        eager = np.array([float(fn(P[t], Y[t])) for t in range(T)])
        batched = np.asarray(jax.jit(jax.vmap(fn))(P, Y))
        np.testing.assert_allclose(batched, eager, rtol=1e-5, atol=1e-7, err_msg=name)


def test_float32_agrees_with_float64():
    p, y, _, f = sample(30)
    f = jnp.asarray(f)
    for name, fn in _calls(f).items():
        if name == "smooth_ece":  # the bisection may stop one step apart: compare at a fixed σ
            fn = lambda p, y: M.smooth_ece(p, y, bandwidth=0.05)  # noqa: E731
        if name == "skce":
            p_, y_ = p[:60], y[:60]
            v32 = float(fn(p_.astype(np.float32), y_.astype(np.float32)))
            np.testing.assert_allclose(v32, float(x64(fn, p_, y_)), rtol=2e-4, atol=1e-6, err_msg=name)
            continue
        v32 = float(fn(p.astype(np.float32), y.astype(np.float32)))
        v64 = float(x64(fn, p, y))
        np.testing.assert_allclose(v32, v64, rtol=2e-4, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("fn", [M.smooth_ece, M.cumulative_calibration_error, M.skce, M.debiased_ece_sq,
                                M.ece_sweep, M.ici])
def test_bad_input_raises(fn):
    p, y = np.array([0.2, 0.5, 0.9]), np.array([0.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="probs"):
        fn(np.array([0.2, 1.5, 0.9]), y)
    with pytest.raises(ValueError, match="labels"):
        fn(p, np.array([0.0, 2.0, 1.0]))
    with pytest.raises(ValueError, match="probs"):
        fn(np.array([0.2, np.nan, 0.9]), y)
    with pytest.raises(ValueError, match="weights"):
        fn(p, y, weights=np.array([1.0, -1.0, 1.0]))
    with pytest.raises(ValueError, match="labels"):
        fn(p, y[:2])


def test_bad_options_raise():
    p, y = np.array([0.2, 0.5, 0.9]), np.array([0.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="fields"):
        M.multicalibration_error(p, y, np.array([0, 1, 5]), n_levels=3)
    with pytest.raises(ValueError, match="max_depth"):
        M.multicalibration_error(p, y, np.array([0, 1, 2]), max_depth=3)
    with pytest.raises(ValueError, match="statistic"):
        M.cumulative_calibration_error(p, y, statistic="cvm")
    with pytest.raises(ValueError, match="kernel"):
        M.skce(p, y, kernel="rbf")
    with pytest.raises(ValueError, match="bandwidth"):
        M.skce(p, y, bandwidth=0.0)
    with pytest.raises(ValueError, match="bandwidth"):
        M.smooth_ece(p, y, bandwidth=2.0)
    with pytest.raises(ValueError, match="n_grid"):
        M.ici(p, y, n_grid=1)


# ------------------------------------------------------------------ Monte Carlo panel


def test_modern_panel_group_is_opt_in_and_vmaps():
    """The modern columns are opt-in and evaluate under vmap over trials (hand-built trial
    data: the scenario generator's own compile is tested in test_montecarlo_engine)."""
    from calib_jax import montecarlo as mc
    from calib_jax.montecarlo.variants import TrialData

    assert not set(mc.MODERN_METRICS) & set(mc.PanelConfig().metrics)  # default panel unchanged
    cfg = mc.panel_for(["ece"], modern=True)
    assert cfg.metrics == ("ece", *mc.MODERN_METRICS, mc.REFERENCE)
    # smooth ECE's vmap is covered (with a smaller grid) by test_jit_vmap_equals_eager_loop
    cols = [m for m in mc.MODERN_METRICS if m != "smooth_ece"]
    panel = mc.metric_panel(mc.panel_for(cols, n_levels=3))
    data = [sample(40 + t) for t in range(2)]

    def batch(i):
        return jnp.asarray(np.stack([d[i] for d in data]), jnp.float32)

    P, Y = batch(0), batch(1)
    F = jnp.asarray(np.stack([d[3] for d in data]), jnp.int32)
    td = TrialData(logits=jnp.log(P / (1 - P)), probs=P, labels=Y, oracle=P, fields=F,
                   regime=jnp.zeros_like(F[..., 0]), params=None)
    vals = jax.vmap(lambda d, k: mc.evaluate(d, k, panel))(td, jax.random.split(jax.random.key(0), 2))
    assert vals.shape == (2, len(panel)) and np.all(np.isfinite(np.asarray(vals)))
    want = float(M.cumulative_calibration_error(P[1], Y[1]))
    np.testing.assert_allclose(float(vals[1, list(panel).index("cce_kuiper")]), want, rtol=1e-5)


@pytest.mark.parametrize("metric", ["ici", "skce"])
@pytest.mark.parametrize("bandwidth", [-1.0, 0.0, float("nan"), float("inf")])
def test_a_bad_bandwidth_raises_eagerly_and_makes_nan_under_jit(metric, bandwidth):
    """A kernel scale that is not positive was checked only when concrete: under jit, ici read a
    negative one as one grid step and returned a plausible 0.4. Now the check is recorded too."""
    f = getattr(M, metric)
    p, y = jnp.array([0.2, 0.4, 0.7, 0.9]), jnp.array([1.0, 0.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="`bandwidth` must be a finite number > 0"):
        f(p, y, bandwidth=bandwidth)
    with pytest.raises(ValueError, match="`bandwidth` must be a finite number > 0"):
        f(p, y, bandwidth=jnp.asarray(bandwidth))
    assert np.isnan(float(jax.jit(lambda a, b, h: f(a, b, bandwidth=h))(p, y, bandwidth)))
    assert np.isfinite(float(jax.jit(lambda a, b, h: f(a, b, bandwidth=h))(p, y, 0.1)))
