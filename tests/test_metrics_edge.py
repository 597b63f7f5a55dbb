"""Edge cases of calib_jax.metrics / decompositions (SPEC §2, §4).

Scores on bin edges, p = 0 and p = 1, one-class labels, empty bins and groups, ties,
weights (weighted = repeated rows, zero weight = dropped row) and bad input (ValueError
naming the argument).
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
import reference as R
from sklearn.metrics import brier_score_loss, roc_auc_score

from calib_jax import decompositions as D
from calib_jax import metrics as M

F32 = dict(rtol=1e-5, atol=1e-6)


def close(got, want, **tol):
    np.testing.assert_allclose(float(got), float(want), **(tol or F32))


def finite(x) -> bool:
    return bool(np.all(np.isfinite(np.asarray(x))))


# ------------------------------------------------------------------ bin edges


def test_ece_edge_score_goes_to_upper_bin():
    # p = 0.2 with 5 bins is in bin 1 ([0.2, 0.4)), not bin 0: with bin 0 = {0.1} and
    # bin 1 = {0.2, 0.3} the gaps are different from the bin 0 = {0.1, 0.2} assignment
    p = np.array([0.1, 0.2, 0.3, 0.1, 0.2, 0.3])
    y = np.array([0.0, 1.0, 1.0, 0.0, 0.0, 1.0])
    want = R.ece(p, y, n_bins=5)
    wrong = R.ece(np.where(p == 0.2, 0.19, p), y, n_bins=5)
    assert abs(want - wrong) > 1e-3
    close(M.ece(p.astype(np.float32), y.astype(np.float32), n_bins=5), want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ece_decimal_edges_float_dtypes(dtype):
    # every score on an edge m/5 (as written in decimal): each is alone in bin m
    p = np.array([0.0, 0.2, 0.4, 0.6, 0.8, 1.0], dtype=dtype)
    y = np.array([0.0, 1.0, 0.0, 1.0, 0.0, 1.0], dtype=dtype)
    ids = np.array([0, 1, 2, 3, 4, 4])
    # squared ECE over bins {0}, {0.2}, {0.4}, {0.6}, {0.8, 1.0}
    want = R.gce(p.astype(np.float64), y.astype(np.float64), ids, n_groups=5)
    with jax.enable_x64(dtype == np.float64):
        got = M.ece(p, y, n_bins=5, norm="l2")
    close(got, want)


def test_ece_p_one_in_last_bin_and_p_zero_in_first():
    p = np.array([1.0, 1.0, 0.95, 0.0, 0.0])
    y = np.array([1.0, 1.0, 0.0, 0.0, 0.0])
    # last bin {1, 1, 0.95}: conf 0.9833, acc 0.6667; first bin {0, 0}: gap 0
    want = 3 / 5 * abs(2.95 / 3 - 2 / 3)
    close(M.ece(p.astype(np.float32), y.astype(np.float32), n_bins=10), want)


# ------------------------------------------------------------------ extreme scores / labels


def test_extreme_scores_are_finite():
    p = np.array([0.0, 1.0, 0.0, 1.0, 0.5, 0.3], dtype=np.float32)
    y = np.array([0.0, 1.0, 1.0, 0.0, 1.0, 0.0], dtype=np.float32)
    close(M.brier(p, y), brier_score_loss(y, p))
    nll = M.nll(p, y)
    assert finite(nll) and float(nll) > 5.0  # confident wrong predictions cost a lot
    for v in (M.ece(p, y), M.ece(p, y, strategy="quantile", n_bins=3), M.mae(p, y),
              M.gce(p, y, np.array([0, 0, 1, 1, 2, 2]), n_groups=3),
              M.field_ece(p, y, np.array([0, 1, 0, 1, 0, 1]), n_groups=2),
              M.auc(p, y)):
        assert finite(v)
    close(M.auc(p, y), roc_auc_score(y, p))
    d = D.brier_grouping(p, y, np.array([0, 0, 1, 1, 2, 2]), n_groups=3)
    np.testing.assert_allclose(float(d.unc + d.rel - d.res + d.delta), float(d.score), rtol=1e-6)
    dn = D.nll_grouping(p, y, np.array([0, 0, 1, 1, 2, 2]), n_groups=3)
    assert all(finite(getattr(dn, f)) for f in ("unc", "rel", "res", "curv", "cov", "score"))
    np.testing.assert_allclose(float(dn.unc + dn.rel - dn.res + dn.curv - dn.cov),
                               float(dn.score), rtol=1e-5)


def test_oracle_kl_at_boundary_oracle_values():
    p = np.array([0.2, 0.7, 0.5])
    o = np.array([0.0, 1.0, 0.5])  # 0 log 0 = 0
    close(M.oracle_kl(p.astype(np.float32), o.astype(np.float32)), R.oracle_kl(p, o))


@pytest.mark.parametrize("label", [0.0, 1.0])
def test_one_class_labels(label):
    p = np.array([0.1, 0.4, 0.35, 0.9, 0.6, 0.05], dtype=np.float32)
    y = np.full(6, label, dtype=np.float32)
    g = np.array([0, 1, 1, 2, 2, 0])
    close(M.brier(p, y), R.brier(p, y))
    close(M.ece(p, y, n_bins=5), R.ece(p.astype(np.float64), y, n_bins=5))
    close(M.gce(p, y, g, n_groups=3), R.gce(p, y, g, n_groups=3))
    close(M.field_ece(p, y, g, n_groups=3), R.field_ece(p, y, g))
    close(M.field_rce(p, y, g, n_groups=3), R.field_rce(p, y, g))
    close(M.nll(p, y), R.nll_probs(p, y))
    d = D.brier_grouping(p, y, g, n_groups=3)
    assert float(d.unc) == 0.0
    np.testing.assert_allclose(float(d.unc + d.rel - d.res + d.delta), R.brier(p, y), rtol=1e-6)
    with pytest.raises(ValueError, match="labels"):
        M.auc(p, y)  # AUC is undefined with one class (documented: raises)


@pytest.mark.parametrize("label", [0.0, 1.0])
@pytest.mark.parametrize("x64", [False, True])
def test_nll_grouping_one_class_labels_finite(label, x64):
    # H(0) = H(1) = 0: UNC = RES = 0 and the identity still holds (no 0 log 0 = NaN)
    p = np.array([0.1, 0.4, 0.35, 0.9, 0.6, 0.05])
    y = np.full(6, label)
    g = np.array([0, 1, 1, 2, 2, 0])
    with jax.enable_x64(x64):
        dt = np.float64 if x64 else np.float32
        d = D.nll_grouping(p.astype(dt), y.astype(dt), g, n_groups=3)
        terms = {f: float(getattr(d, f)) for f in ("score", "unc", "rel", "res", "curv", "cov")}
    assert all(np.isfinite(v) for v in terms.values()), terms
    assert terms["unc"] == 0.0 and abs(terms["res"]) <= 1e-7, terms
    close(terms["unc"] + terms["rel"] - terms["res"] + terms["curv"] - terms["cov"],
          R.nll_probs(p, y))


def test_nll_grouping_weighted_all_one_labels_finite():
    # found by the hypothesis property test: the weighted label mean may round to 1 + ulp,
    # and H(ybar) must not become log(negative) = NaN
    p = np.array([0.5117979814508562, 0.9495627689332834])
    w = np.array([1.5980296058161363, 1.3034059418954729])
    g = np.array([[0.472483971911667, 0.34619766031343097, 0.06815215499777795,
                   0.06028612007244864, 0.01878450241393304, 0.03409559029074218],
                  [0.1920354556848325, 0.07218450194285125, 0.6246884863131738,
                   0.08886063522742478, 0.01366407670846989, 0.00856684412324775]])
    with jax.enable_x64(True):
        d = D.nll_grouping(p, np.ones(2), g, n_groups=6, weights=w)
        terms = {f: float(getattr(d, f)) for f in ("score", "unc", "rel", "res", "curv", "cov")}
    assert all(np.isfinite(v) for v in terms.values()), terms
    np.testing.assert_allclose(
        terms["unc"] + terms["rel"] - terms["res"] + terms["curv"] - terms["cov"],
        R.nll_probs(p, np.ones(2), w), atol=1e-12)


def test_bias_without_positive_labels():
    p = np.array([0.1, 0.2], dtype=np.float32)
    y = np.zeros(2, dtype=np.float32)
    with pytest.raises(ValueError, match="labels"):
        M.bias(p, y)
    # abs_bias: groups without positives are left out; none left -> 0 (documented)
    assert float(M.abs_bias(p, y, np.array([0, 1]), n_groups=2)) == 0.0


def test_abs_bias_skips_group_without_clicks():
    p = np.array([0.2, 0.4, 0.1, 0.3])
    y = np.array([1.0, 0.0, 0.0, 0.0])
    f = np.array([0, 0, 1, 1])
    # only group 0 has clicks: |0.3 / 0.5 - 1| with renormalised mass 1
    close(M.abs_bias(p.astype(np.float32), y.astype(np.float32), f, n_groups=2), 0.4)


# ------------------------------------------------------------------ empty bins / groups


def test_empty_bins_and_groups_contribute_zero():
    p = np.array([0.05, 0.07, 0.92, 0.95], dtype=np.float32)  # bins 1..8 empty
    y = np.array([0.0, 1.0, 1.0, 1.0], dtype=np.float32)
    for norm in ("l1", "l2", "max"):  # one meaning of norm in the library and the reference
        ref_norm = norm
        got = M.ece(p, y, n_bins=10, norm=norm)
        assert finite(got)
        close(got, R.ece(p.astype(np.float64), y, n_bins=10, norm=ref_norm))
    g = np.array([0, 0, 5, 5])  # groups 1..4 empty
    close(M.gce(p, y, g, n_groups=6), R.gce(p, y, g, n_groups=6))
    close(M.field_ece(p, y, g, n_groups=6), R.field_ece(p, y, g))
    close(M.field_rce(p, y, g, n_groups=6), R.field_rce(p, y, g))
    soft = np.zeros((4, 3), dtype=np.float32)
    soft[:, 0] = 1.0  # columns 1, 2 empty
    close(M.gce(p, y, soft), R.gce(p, y, soft))


def test_quantile_bins_more_bins_than_distinct_scores():
    p = np.array([0.3] * 6 + [0.6] * 6, dtype=np.float32)
    y = np.array([0, 1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 1], dtype=np.float32)
    got = M.ece(p, y, n_bins=5, strategy="quantile")
    # ties kept together: two groups {0.3}, {0.6}
    close(got, R.abs_gap_metric(p, y, (p > 0.5).astype(int), n_groups=2))


# ------------------------------------------------------------------ ties


def test_auc_ties_count_half():
    p = np.full(6, 0.4, dtype=np.float32)
    y = np.array([0, 1, 0, 1, 1, 0], dtype=np.float32)
    close(M.auc(p, y), 0.5)
    p2 = np.array([0.1, 0.5, 0.5, 0.5, 0.9, 0.9], dtype=np.float32)
    y2 = np.array([0, 1, 0, 0, 1, 0], dtype=np.float32)
    close(M.auc(p2, y2), R.auc(p2, y2))
    close(M.auc(p2, y2), roc_auc_score(y2, p2))


def test_spearman_with_ties_and_constant_input():
    import scipy.stats

    a = np.array([0.1, 0.1, 0.2, 0.3, 0.3, 0.3], dtype=np.float32)
    b = np.array([0.5, 0.4, 0.4, 0.9, 0.1, 0.8], dtype=np.float32)
    close(M.spearman(a, b), scipy.stats.spearmanr(a, b).statistic)
    # documented: 0 for a constant input (undefined correlation), never NaN, exactly: float32
    # rounding of a constant's mean left deviations of a few ulps, which made two constants
    # correlate to -1.0 and a constant with b to ~1e-8
    for const in (0.2, 0.123456789):
        c = np.full(100, const, dtype=np.float32)
        b100 = np.resize(b, 100)
        for f in (M.spearman, M.pearson):
            assert float(f(c, b100)) == 0.0 and float(f(b100, c)) == 0.0
            assert float(f(c, np.full(100, 0.3, dtype=np.float32))) == 0.0
            assert float(jax.jit(f)(c, np.full(100, 0.3, dtype=np.float32))) == 0.0
    # the same in the Monte Carlo studies' correlation matrix, and with weights: a column constant
    # on the rows of positive weight has no correlation
    from calib_jax.montecarlo import pearson_matrix

    cols = np.stack([np.full(50, 0.123456789, np.float32), np.linspace(0, 1, 50, dtype=np.float32),
                     np.full(50, 0.3, np.float32)], axis=1)
    np.testing.assert_array_equal(np.asarray(pearson_matrix(cols)), np.eye(3))
    q, w = np.resize(b, 100).copy(), np.ones(100, np.float32)
    q[1:], w[0] = 0.4, 0.0  # varies only on a row of weight 0
    assert float(M.pearson(q, np.linspace(0.1, 0.5, 100, dtype=np.float32), weights=w)) == 0.0
    # spreads below ~3e-10 on both sides: their variances' product underflowed in float32 (inf)
    tiny = np.array([1e-10, 2e-10, 3e-10])
    close(M.pearson(tiny, tiny[[0, 2, 1]]), 0.5, rtol=1e-5)
    # (a correlation may pass 1 by an ulp of rounding: not clipped, which would move the committed
    # Monte Carlo studies' bits; see _pearson)
    # a small but real spread is still measured (relative spread 3e-4, far above the rounding)
    rng = np.random.default_rng(0)
    x = (0.3 + 1e-4 * rng.normal(size=1000)).astype(np.float32)
    z = (x + 2e-4 * rng.normal(size=1000)).astype(np.float32)
    close(M.pearson(x, np.clip(z, 0, 1)), np.corrcoef(x.astype(np.float64), z.astype(np.float64))[0, 1], rtol=1e-3)


# ------------------------------------------------------------------ weights


def _weighted_cases():
    f = np.array([0, 1, 2, 1, 0, 2, 2, 1, 0, 1])
    return {
        "brier": lambda p, y, w: M.brier(p, y, weights=w),
        "nll": lambda p, y, w: M.nll(p, y, weights=w),
        "mae": lambda p, y, w: M.mae(p, y, weights=w),
        "ece": lambda p, y, w: M.ece(p, y, n_bins=4, weights=w),
        "ece_max": lambda p, y, w: M.ece(p, y, n_bins=4, norm="max", weights=w),
        "gce": lambda p, y, w: M.gce(p, y, f, n_groups=3, weights=w),
        "field_ece": lambda p, y, w: M.field_ece(p, y, f, n_groups=3, weights=w),
        "field_rce": lambda p, y, w: M.field_rce(p, y, f, n_groups=3, weights=w),
        "bias": lambda p, y, w: M.bias(p, y, weights=w),
        "abs_bias": lambda p, y, w: M.abs_bias(p, y, f, n_groups=3, weights=w),
        "auc": lambda p, y, w: M.auc(p, y, weights=w),
        "accuracy": lambda p, y, w: M.accuracy(p, y, weights=w),
        "oracle_brier": lambda p, y, w: M.oracle_brier(p, np.clip(p * 0.8 + 0.1, 0, 1),
                                                       weights=w),
        "oracle_kl": lambda p, y, w: M.oracle_kl(p, np.clip(p * 0.8 + 0.1, 0, 1), weights=w),
        "brier_grouping.delta": lambda p, y, w: D.brier_grouping(p, y, f, n_groups=3,
                                                                 weights=w).delta,
        "nll_grouping.curv": lambda p, y, w: D.nll_grouping(p, y, f, n_groups=3,
                                                            weights=w).curv,
    }


P10 = np.array([0.12, 0.33, 0.81, 0.47, 0.05, 0.66, 0.91, 0.28, 0.57, 0.74], dtype=np.float32)
Y10 = np.array([0, 1, 1, 0, 0, 1, 1, 0, 1, 0], dtype=np.float32)
W10 = np.array([2, 1, 3, 1, 0, 2, 1, 1, 2, 3])


@pytest.mark.parametrize("name", list(_weighted_cases()))
def test_integer_weights_equal_repeated_rows(name):
    fn = _weighted_cases()[name]
    rep = np.repeat(np.arange(10), W10)
    weighted = fn(P10, Y10, W10.astype(np.float32))
    # the field ids must be repeated too: call through a closure over repeated data
    f = np.array([0, 1, 2, 1, 0, 2, 2, 1, 0, 1])
    repeated_cases = {
        "gce": lambda: M.gce(P10[rep], Y10[rep], f[rep], n_groups=3),
        "field_ece": lambda: M.field_ece(P10[rep], Y10[rep], f[rep], n_groups=3),
        "field_rce": lambda: M.field_rce(P10[rep], Y10[rep], f[rep], n_groups=3),
        "abs_bias": lambda: M.abs_bias(P10[rep], Y10[rep], f[rep], n_groups=3),
        "brier_grouping.delta": lambda: D.brier_grouping(P10[rep], Y10[rep], f[rep],
                                                         n_groups=3).delta,
        "nll_grouping.curv": lambda: D.nll_grouping(P10[rep], Y10[rep], f[rep],
                                                    n_groups=3).curv,
    }
    repeated = repeated_cases[name]() if name in repeated_cases else fn(P10[rep], Y10[rep], None)
    close(weighted, repeated, rtol=1e-5, atol=1e-6)


def test_zero_weight_rows_are_dropped():
    keep = W10 > 0
    w = W10.astype(np.float32)
    close(M.auc(P10, Y10, weights=(w > 0).astype(np.float32)), roc_auc_score(Y10[keep], P10[keep]))
    close(M.ece(P10, Y10, n_bins=4, weights=(w > 0).astype(np.float32)),
          R.ece(P10[keep].astype(np.float64), Y10[keep], n_bins=4))


# ------------------------------------------------------------------ validation

P = np.array([0.1, 0.6, 0.3, 0.8], dtype=np.float32)
Y = np.array([0.0, 1.0, 0.0, 1.0], dtype=np.float32)
G = np.array([0, 1, 0, 1])


def _bad_inputs():
    nan_p = P.copy()
    nan_p[1] = np.nan
    inf_p = P.copy()
    inf_p[2] = np.inf
    big_p = P.copy()
    big_p[0] = 1.5
    neg_p = P.copy()
    neg_p[0] = -0.1
    bad_y = np.array([0.0, 2.0, 0.0, 1.0], dtype=np.float32)
    half_y = np.array([0.0, 0.5, 0.0, 1.0], dtype=np.float32)
    short_y = Y[:3]
    empty = np.zeros(0, dtype=np.float32)
    cases = []
    for name, fn in {
        "brier": lambda p, y: M.brier(p, y),
        "nll": lambda p, y: M.nll(p, y),
        "mae": lambda p, y: M.mae(p, y),
        "ece": lambda p, y: M.ece(p, y),
        "ece_quantile": lambda p, y: M.ece(p, y, strategy="quantile", n_bins=2),
        "gce": lambda p, y: M.gce(p, y, G[: len(p)] if len(p) <= 4 else G, n_groups=2),
        "field_ece": lambda p, y: M.field_ece(p, y, G[: len(p)], n_groups=2),
        "field_rce": lambda p, y: M.field_rce(p, y, G[: len(p)], n_groups=2),
        "abs_bias": lambda p, y: M.abs_bias(p, y, G[: len(p)], n_groups=2),
        "bias": lambda p, y: M.bias(p, y),
        "auc": lambda p, y: M.auc(p, y),
        "accuracy": lambda p, y: M.accuracy(p, y),
        "brier_grouping": lambda p, y: D.brier_grouping(p, y, G[: len(p)], n_groups=2),
        "nll_grouping": lambda p, y: D.nll_grouping(p, y, G[: len(p)], n_groups=2),
        "murphy": lambda p, y: D.murphy(p, y),
        "corp": lambda p, y: D.corp(p, y),
    }.items():
        cases += [
            (name, fn, nan_p, Y, "probs"),
            (name, fn, inf_p, Y, "probs"),
        ]
        if name != "auc":  # documented: AUC accepts any real scores (e.g. logits)
            cases += [(name, fn, big_p, Y, "probs"), (name, fn, neg_p, Y, "probs")]
        cases += [
            (name, fn, P, bad_y, "labels"),
            (name, fn, P, half_y, "labels"),
            (name, fn, P, short_y, "labels"),
            (name, fn, empty, empty, "probs"),
        ]
    return cases


@pytest.mark.parametrize(("name", "fn", "p", "y", "arg"), _bad_inputs(),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_bad_input_raises_value_error_naming_argument(name, fn, p, y, arg):
    with pytest.raises(ValueError, match=arg):
        fn(p, y)


@pytest.mark.parametrize(
    ("call", "arg"),
    [
        (lambda: M.lcce(np.array([0.1, np.nan, 0.3, 0.2]), Y, init="quantile", n_clusters=2),
         "logits"),
        (lambda: M.lcce(np.array([0.1, 2.0, 0.3]), Y[:3], init="quantile", n_clusters=4),
         "n_clusters"),
        (lambda: M.lcce(np.array([0.1, 2.0, 0.3, 1.0]), Y[:3], init="quantile",
                        n_clusters=2), "labels"),
        (lambda: M.nll_logits(np.array([0.1, np.inf, 0.3, 1.0]), Y), "logits"),
        (lambda: M.oracle_brier(P, np.array([0.1, 1.2, 0.3, 0.4])), "oracle"),
        (lambda: M.oracle_kl(P, np.array([0.1, np.nan, 0.3, 0.4])), "oracle"),
        (lambda: M.pearson(P, np.array([0.1, 0.2, 0.3])), "oracle"),
        (lambda: M.spearman(P, np.array([0.1, 0.2, 0.3])), "oracle"),
        (lambda: M.gce(P, Y, np.array([0, 1, 2, 0]), n_groups=2), "groups"),
        (lambda: M.gce(P, Y, np.full((4, 2), 0.7, dtype=np.float32)), "groups"),
        (lambda: M.brier(P, Y, weights=np.array([1.0, -1.0, 1.0, 1.0])), "weights"),
        (lambda: M.brier(P, Y, weights=np.array([1.0, 1.0])), "weights"),
        (lambda: M.ece(P, Y, n_bins=0), "n_bins"),
        (lambda: M.ece(P, Y, strategy="bogus"), "strategy"),
        (lambda: M.ece(P, Y, norm="l3"), "norm"),
        (lambda: M.field_rce(P, Y, G, n_groups=2, eps=-0.1), "eps"),
    ],
    ids=["lcce-nan", "lcce-K>n", "lcce-len", "nll_logits-inf", "oracle-range", "oracle-nan",
         "pearson-len", "spearman-len", "gce-ids", "gce-soft-rows", "weights-neg",
         "weights-len", "n_bins-0", "strategy", "norm", "eps-neg"],
)
def test_bad_options_raise_value_error_naming_argument(call, arg):
    with pytest.raises(ValueError, match=arg):
        call()


def test_option_and_split_checks_found_while_writing_the_docstrings():
    """Each of these returned a plausible number, NaN or a ZeroDivisionError instead of a
    ValueError naming the argument (found while documenting every public function)."""
    import jax.numpy as jnp

    from calib_jax import metrics as M
    from calib_jax.groupstats import group_stats

    p, y = jnp.array([0.1, 0.3, 0.6, 0.8]), jnp.array([0.0, 1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="`norm`"):
        M.gap_norm(group_stats(p, y, jnp.array([0, 0, 1, 1]), n_groups=2), norm="l3")
    with pytest.raises(ValueError, match="`n_bins`"):
        M.ece_at_n(p, y, users=jnp.array([0, 0, 1, 1]), top_n=2, n_bins=0)
    with pytest.raises(ValueError, match="`strategy`"):
        M.ece_at_n(p, y, users=jnp.array([0, 0, 1, 1]), top_n=2, strategy="quantile")
    with pytest.raises(ValueError, match="`n_bins`"):
        M.lcce(jnp.log(p / (1 - p)), y, init="quantile", n_bins=0)
    with pytest.raises(ValueError, match="`n_iter`"):
        M.fit_logit_bias(jnp.zeros(4), y, n_iter=0)
    o2, y2 = jnp.array([0.0, 1.0]), jnp.array([0.0, 1.0])
    for fraction in (0.01, 0.99):  # two rows: one part of the drawn split is empty
        for f in (M.calibrated_log_loss, M.calibrated_quadratic_loss):
            args = (o2, y2) if f is M.calibrated_log_loss else (jax.nn.sigmoid(o2), y2)
            with pytest.raises(ValueError, match="part without rows"):
                f(*args, key=jax.random.key(0), val_fraction=fraction)
            assert np.isnan(float(jax.jit(lambda a, b, k, f=f, q=fraction: f(a, b, key=k, val_fraction=q))(
                *args, jax.random.key(0))))


def test_building_blocks_refuse_what_they_used_to_accept_silently():
    """Found while documenting: kmeans_hist ran "optimal" for any init string, kmeans_1d and
    histogram_1d took negative or NaN weights, the Spearman/Pearson matrices returned plausible
    coefficients around a NaN, rank_groups/rank_weights took rank 0, and the variance penalty took
    membership rows off the simplex. Each is now a ValueError eagerly and NaN (or no group) under jit."""
    import jax
    import jax.numpy as jnp

    from calib_jax import losses
    from calib_jax.calibrators.top_n import rank_groups, rank_weights
    from calib_jax.montecarlo import pearson_matrix, spearman_matrix, spearman_with
    from calib_jax.partitions import histogram_1d, kmeans_1d, kmeans_hist

    x = jnp.array([0.0, 0.1, 1.0, 1.1])
    with pytest.raises(ValueError, match="`init`"):
        kmeans_hist(histogram_1d(x, n_bins=4), n_clusters=2, init="bogus")
    for bad in (jnp.array([-1.0, 1, 1, 1]), jnp.array([np.nan, 1, 1, 1])):
        with pytest.raises(ValueError, match="`weights`"):
            kmeans_1d(x, n_clusters=2, init="quantile", weights=bad)
        with pytest.raises(ValueError, match="`weights`"):
            histogram_1d(x, n_bins=4, weights=bad)
        assert np.isnan(np.asarray(jax.jit(lambda v, w: kmeans_1d(v, n_clusters=2, init="quantile",
                                                                    weights=w).centroids)(x, bad))).all()
    # all-zero weights are valid for a building block: empty bins, no 0/0
    assert np.isfinite(np.asarray(histogram_1d(x, n_bins=4, weights=jnp.zeros(4)).mean)).all()

    t = jnp.array([[np.nan, 1.0, 3.0], [2.0, 2.0, 1.0], [3.0, 3.0, 2.0], [4.0, 4.0, 5.0]])
    for f in (spearman_matrix, pearson_matrix):
        r = np.asarray(f(t))
        assert np.isnan(r[0]).all() and np.isnan(r[:, 0]).all() and np.isfinite(r[1:, 1:]).all()
    assert np.isnan(np.asarray(spearman_with(t[:, 1:], t[:, 0]))).all()

    with pytest.raises(ValueError, match="`ranks`"):
        rank_groups(jnp.array([0, 1, 2]), top_n=6)
    with pytest.raises(ValueError, match="`ranks`"):
        rank_weights(jnp.array([0, 1, 2]))
    assert jax.jit(lambda r: rank_groups(r, top_n=6))(jnp.array([0, 1]))[0] == -1
    assert np.isnan(float(jax.jit(rank_weights)(jnp.array([0, 1]))[0]))

    p, q = jnp.array([0.2, 0.7]), jnp.array([[0.6, 0.6], [0.5, 0.5]])  # first row sums to 1.2
    with pytest.raises(ValueError, match="`memberships`"):
        losses.variance_penalty(p, q, lam_v=0.5)
    assert np.isnan(float(jax.jit(lambda a, b: losses.within_group_variance(a, b))(p, q)))


def test_reliability_bins_are_the_metrics_bins_on_an_edge():
    """reliability_bins floored p * M in float64 after a float32 cast, so 0.7 (just below 7/10
    in float32 → float64) went to bin 6 while ece's uniform_bins puts it in bin 7: the diagram's
    title said ECE 0.175 where metrics.ece says 0.475."""
    import jax.numpy as jnp

    from calib_jax import metrics as M
    from calib_jax.plotting import plt
    from calib_jax.plotting.reliability import reliability_bins, reliability_diagram

    p, y = [0.7, 0.65], [1.0, 0.0]
    counts = reliability_bins(p, y, n_bins=10)[0]
    assert counts[7] == 1 and counts[6] == 1
    fig, ax = reliability_diagram(p, y, n_bins=10)
    want = float(M.ece(jnp.array(p), jnp.array(y), n_bins=10))
    assert f"ECE = {want:.4f}" in ax.get_title()
    plt.close(fig)


def test_top_n_metrics_refuse_an_empty_top_n():
    """With no row ranked within the top N, ECE@N returned NaN and RDECE@N a plausible 0."""
    import functools

    import jax
    import jax.numpy as jnp

    from calib_jax import metrics as M

    p, y, r = jnp.array([0.2, 0.4, 0.6]), jnp.array([0.0, 1.0, 1.0]), jnp.array([3, 3, 4])
    sweep = functools.partial(M.ece_at_n, strategy="sweep")
    for f in (M.ece_at_n, M.rdece_at_n, sweep):
        with pytest.raises(ValueError, match="rank <= top_n=2"):
            f(p, y, ranks=r, top_n=2)
        assert np.isnan(float(jax.jit(lambda a, b, c, f=f: f(a, b, ranks=c, top_n=2))(p, y, r)))
        assert np.isfinite(float(f(p, y, ranks=r, top_n=3)))
