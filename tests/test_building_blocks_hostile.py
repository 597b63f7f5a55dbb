"""Hostile input to the public building blocks and rank statistics (a fuzz of 1,112 cases over
``calib_jax.groupstats``, ``partitions``, ``losses``, ``inference``, ``decompositions``,
``montecarlo`` and ``plotting``, 2026-12-06).

The metrics, decompositions and tests already refused every hostile input by name. The
building blocks under them, documented as unchecked, gave silent wrong numbers when called on
host data: an int64 id of ``2**32 + 1`` summed into segment 1 (JAX's 32-bit mode wraps it),
float64 values that float32 cannot tell apart tied in ranks and equal-mass bins, statistics of
two group counts merged by broadcasting, a negative bootstrap count turned a perfect agreement
into rho = -1, and the CORP test's p-value depended on how its input was passed. Each case
below failed on the code before; the expected values come from NumPy and SciPy.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from calib_jax import decompositions as D
from calib_jax import groupstats as G
from calib_jax import inference as I
from calib_jax import losses as L
from calib_jax import montecarlo as MC
from calib_jax import partitions as P
from calib_jax.bootstrap import percentile_interval
from calib_jax.montecarlo import stats as MS

pd = pytest.importorskip("pandas")

WIDE = np.array([0, 2**32 + 1, 1], np.int64)  # 2**32 + 1 wraps to 1 in JAX's 32-bit mode


# ------------------------------------------------------------------ segment sums and their kin
@pytest.mark.parametrize("fn", [G.segment_sums, G.sorted_segment_sums, G.deterministic_segment_sum])
def test_a_host_id_beyond_int32_is_dropped_not_wrapped_onto_another_segment(fn):
    v = jnp.array([1.0, 2.0, 3.0])
    want = np.bincount(np.array([0, 1]), weights=np.array([1.0, 3.0]), minlength=3)  # the out-of-range row dropped
    np.testing.assert_array_equal(np.asarray(fn(v, WIDE, 3)), want)
    np.testing.assert_array_equal(np.asarray(fn(v, np.array([0.0, 2.0**40, 1.0]), 3)), want)


def test_gap_sums_drop_a_row_whose_id_is_outside_the_groups():
    """Before, id 3 of K = 3 with label 0 landed in group 0's label-1 cell; 2**32 + 1 in group 1."""
    p, y = jnp.array([0.1, 0.2, 0.3]), jnp.array([0.0, 1.0, 1.0])
    for ids in (WIDE, jnp.array([0, 3, 1]), np.array([0, -1, 1])):
        weight, sum_p, sum_y = (np.asarray(a) for a in G.gap_sums(p, y, ids, 3))
        np.testing.assert_array_equal(weight, [1.0, 1.0, 0.0])
        np.testing.assert_allclose(sum_p, [0.1, 0.3, 0.0], rtol=1e-6)
        np.testing.assert_array_equal(sum_y, [0.0, 1.0, 0.0])


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_half_precision_values_are_summed_in_float32(dtype):
    ones = jnp.ones(2_000, dtype)  # bfloat16 stops counting at 256
    for fn in (G.segment_sums, G.sorted_segment_sums, G.deterministic_segment_sum):
        assert float(fn(ones, jnp.zeros(2_000, jnp.int32), 1)[0]) == 2_000.0


def test_segment_sums_take_lists_and_pandas_and_refuse_what_is_not_an_id():
    series = pd.Series([0, 1, 1], index=[100, 101, 102])  # a filtered frame's index
    np.testing.assert_array_equal(np.asarray(G.segment_sums([1.0, 2.0, 3.0], series, 2)), [1.0, 5.0])
    v = jnp.arange(1.0, 9.0)
    cases = [
        (lambda: G.segment_sums(v[:3], np.array([0.0, np.nan, 1.0]), 3), "`ids` must hold integer ids"),
        (lambda: G.segment_sums(v[:3], jnp.array([0.0, 1.0, 1.0]), 3), "`ids` must hold integer ids"),
        (lambda: G.sorted_segment_sums(v, jnp.array([0, 0, 1, 1, 2, 2, 3]), 4), r"`ids` must have shape \(8,\)"),
        (lambda: G.deterministic_segment_sum(v, jnp.zeros(8, jnp.int32), 0), "`num_segments` must be >= 1"),
        (lambda: G.segment_sums(v, jnp.zeros(8, jnp.int32), -1), "`num_segments` must be >= 1"),
        (lambda: G.gap_sums(v, jnp.zeros(7), jnp.zeros(8, jnp.int32), 2), "`labels` has length 7"),
        (lambda: G.segmented_prefix_sums(v, jnp.ones(7, bool)), r"`start` must have shape \(8,\)"),
    ]
    for call, match in cases:
        with pytest.raises(ValueError, match=match):
            call()


def test_the_checks_leave_traced_calls_as_they_were():
    ids = jnp.array([0, 1, 1, 5, -1])
    v = jnp.arange(1.0, 6.0)
    eager = G.segment_sums(v, ids, 3)
    traced = jax.jit(lambda a, b: G.segment_sums(a, b, 3))(v, ids)
    np.testing.assert_array_equal(np.asarray(eager), np.asarray(traced))
    np.testing.assert_array_equal(np.asarray(eager), [1.0, 5.0, 0.0])


def test_merging_statistics_of_different_group_counts_is_refused():
    p, y = np.array([0.1, 0.2, 0.8, 0.9]), np.array([0.0, 1.0, 1.0, 1.0])
    a = G.group_stats(p, y, np.array([0, 0, 1, 1]), n_groups=2)
    b = G.group_stats(p[:1], y[:1], np.array([0]), n_groups=1)  # broadcast onto both groups before
    with pytest.raises(ValueError, match="`b`.weight has shape"):
        G.merge(a, b)


# ------------------------------------------------------------------ order-only statistics on host data
def test_ranks_keep_host_values_float32_cannot_tell_apart():
    for x in (np.array([2**32 + 1, 2, 3], np.int64), np.array([16777217.0, 16777216.0, 1.0]),
              np.array([0.1, 0.1 + 1e-10, 0.1 - 1e-10])):
        np.testing.assert_array_equal(np.asarray(MS.rankdata(x)), scipy.stats.rankdata(x))
    x = np.array([[1.0, 4.0], [2.0, 3.0], [3.0, 1.0], [4.0, 2.0]])
    ref = 1 + 1e-9 * np.arange(4.0)  # one float32 value
    want = [scipy.stats.spearmanr(x[:, j], ref).statistic for j in range(2)]
    np.testing.assert_allclose(np.asarray(MS.spearman_with(x, ref)), want, atol=1e-6)
    table = np.stack([np.array([2**32 + 1, 2, 3, 5]), np.arange(4)], 1)
    np.testing.assert_allclose(np.asarray(MS.spearman_matrix(table))[0, 1], scipy.stats.spearmanr(table).statistic,
                               atol=1e-6)
    np.testing.assert_allclose(np.asarray(MS.pearson_matrix(table))[0, 1], np.corrcoef(table.T)[0, 1], atol=1e-6)
    wide = np.stack([1e8 + np.arange(4.0), np.arange(4.0)], 1)  # float32's spacing at 1e8 is 8
    np.testing.assert_allclose(np.asarray(MS.pearson_matrix(wide)), np.corrcoef(wide.T), atol=1e-6)
    assert float(MS.metric_accuracy(np.array([0.1]), np.array([0.1 + 1e-10]))) == 1.0  # was a tie: 0.5
    mixed = np.stack([1e8 + np.arange(4.0), np.array([1.0, np.nan, 2.0, 3.0])], 1)  # a NaN keeps its column's meaning
    np.testing.assert_array_equal(np.asarray(MS.rankdata(mixed)), [[1, 1], [2, 4], [3, 2], [4, 3]])


def test_equal_mass_bins_of_host_values_float32_cannot_tell_apart():
    np.testing.assert_array_equal(np.asarray(P.quantile_bins(1e8 + np.arange(6.0), n_bins=3)), [0, 0, 1, 1, 2, 2])
    same = np.asarray(P.quantile_bins(jnp.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6]), n_bins=3))
    np.testing.assert_array_equal(same, [0, 0, 1, 1, 2, 2])  # float32 input: the path it always took


def test_values_that_float32_keeps_apart_take_the_usual_path():
    """The host rank fallback changes nothing where it is not needed: the same bits."""
    x = np.random.default_rng(3).normal(size=(50, 4))
    np.testing.assert_array_equal(np.asarray(MS.spearman_matrix(x)), np.asarray(MS.spearman_matrix(jnp.asarray(x))))
    np.testing.assert_array_equal(np.asarray(MS.pearson_matrix(x)), np.asarray(MS.pearson_matrix(jnp.asarray(x))))


# ------------------------------------------------------------------ the CORP test's ties
def test_corp_p_value_does_not_depend_on_how_the_input_is_passed():
    """4 of the 50 null draws have the observed MCB (equal in float64, computed with the same
    draws), so the p-value is (1 + 35) / 51. A tie tolerance of 1e-12 of MCB, below one float32
    step, counted them for a list (36/51) and not all of them for a float32 array (35/51)."""
    p = [0.05, 0.15, 0.3, 0.45, 0.55, 0.7, 0.85, 0.95]
    y = [0, 0, 1, 0, 1, 1, 0, 1]
    got = [float(I.corp_test(a, b, key=jax.random.key(0), n_resamples=50).p_value)
           for a, b in ((p, y), (np.array(p, np.float32), np.array(y, np.float32)), (np.array(p), np.array(y)))]
    assert got == [pytest.approx(36 / 51, rel=1e-6)] * 3


# ------------------------------------------------------------------ options that were never checked
@pytest.mark.parametrize("eps", [0.7, -0.1, 0.0, float("nan"), float("inf")])
def test_a_clip_outside_its_range_is_refused(eps):
    p, y, g = np.array([0.1, 0.2, 0.8, 0.9]), np.array([0.0, 1.0, 1.0, 1.0]), np.array([0, 0, 1, 1])
    with pytest.raises(ValueError, match="`eps` must be a number in"):
        D.nll_grouping(p, y, g, n_groups=2, eps=eps)  # 0.7 gave 0.992 for 0.511
    rng = np.random.default_rng(0)
    q = rng.uniform(0.05, 0.95, 200)
    with pytest.raises(ValueError, match="`eps` must be a number in"):
        I.cox_calibration(q, (rng.random(200) < q).astype(float), eps=eps)


def test_the_weight_penalty_checks_its_weight_and_squares_half_precision_in_float32():
    assert float(L.l2_penalty(np.full((2, 2), 300.0, np.float16), lam=0.1)) == pytest.approx(9_000.0)  # was inf
    for lam in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="`lam` must be a finite number >= 0"):
            L.l2_penalty(jnp.ones((2, 2)), lam=lam)
    with pytest.raises(ValueError, match="`W` is empty"):
        L.l2_penalty(np.zeros((0, 2)), lam=0.1)
    with pytest.raises(ValueError, match="`head_weights` is empty"):
        L.vrsag_loss(np.zeros(3, np.float32), np.array([0.0, 1.0, 1.0]), np.zeros((3, 2), np.float32),
                     np.ones(2, np.float32), head_weights=np.zeros((0, 2), np.float32))


def test_bins_histograms_and_clusters_check_their_sizes_keys_and_weights():
    x = jnp.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    cases = [
        (lambda: P.uniform_bins(x, n_bins=0), "`n_bins` must be >= 1"),
        (lambda: P.quantile_bins(x, n_bins=0), "`n_bins` must be >= 1"),
        (lambda: P.quantile_bins(x, n_bins=3, weights=jnp.ones(5)), "`weights` has shape"),
        (lambda: P.quantile_bins(x[None, :], n_bins=3), "`probs` must be 1-D"),
        (lambda: P.histogram_1d(x, n_bins=0), "`n_bins` must be >= 1"),
        (lambda: P.histogram_1d(jnp.zeros(0), n_bins=3), "`x` is empty"),
        (lambda: P.histogram_1d(x, n_bins=3, probs=x[:5], labels=x[:5]), "`probs` has shape"),
        (lambda: P.kmeans_1d(x, n_clusters=2, init="quantile", weights=np.zeros(6)), "`weights` must have a positive"),
        (lambda: P.kmeans_1d(x, n_clusters=2, key=0), "`key` must be one JAX PRNG key"),
        (lambda: P.kmeans_1d(x, n_clusters=2, init="quantile", n_bins=0), "`n_bins` must be >= 1"),
        (lambda: P.random_groups(0, 5, n_groups=2), "`key` must be one JAX PRNG key"),
        (lambda: P.random_groups(jax.random.key(0), -1, n_groups=2), "`n` must be >= 1"),
        (lambda: MC.bootstrap_counts(jax.random.key(0), 0, 5), "`n_boot` must be >= 1"),
        (lambda: MS.fisher_se(1.5, 109), r"`rho` must hold coefficients in \[-1, 1\]"),
        (lambda: MS.pearson_matrix(np.zeros((1, 2))), "at least 2 trials"),
        (lambda: percentile_interval(np.zeros((0, 3))), "`replicates` must hold at least one resample"),
        (lambda: I.binomial_interval(np.array([1, 2]), np.array([3, 4, 5])), "do not broadcast"),
    ]
    for call, match in cases:
        with pytest.raises(ValueError, match=match):
            call()
    np.testing.assert_array_equal(np.asarray(P.quantile_bins(np.zeros(0), n_bins=2)), np.zeros(0))
    h16 = P.histogram_1d(jnp.asarray(3 * np.random.default_rng(0).normal(size=2_000), jnp.float16), n_bins=16)
    h32 = P.histogram_1d(jnp.asarray(np.asarray(3 * np.random.default_rng(0).normal(size=2_000), np.float16),
                                     jnp.float32), n_bins=16)
    np.testing.assert_array_equal(np.asarray(h16.weight), np.asarray(h32.weight))  # 218/285 against 220/283


def test_bootstrap_counts_must_be_draws_and_columns_must_exist():
    v = np.stack([np.arange(10.0), -np.arange(10.0), np.arange(10.0) ** 2], 1)
    for counts in (np.full((3, 10), -1), np.full((3, 10), 1.5)):
        with pytest.raises(ValueError, match="`counts` must hold non-negative whole numbers"):
            MC.bootstrap_spearman(v, np.arange(10.0), counts=counts)  # -1: a perfect agreement at rho = -1
    with pytest.raises(ValueError, match="`chunk` must be >= 1"):
        MC.bootstrap_spearman(v, np.arange(10.0), key=jax.random.key(0), n_boot=10, chunk=0)
    with pytest.raises(ValueError, match="`key` must be one JAX PRNG key"):
        MC.bootstrap_spearman(v, np.arange(10.0), key=0, n_boot=10)
    bs = MC.bootstrap_spearman(v, np.arange(10.0), key=jax.random.key(0), n_boot=10)
    for a in (-1, 3, 1.0):
        with pytest.raises(ValueError, match="`a` must be a column index in"):
            MC.paired_difference(bs, a, 1)  # -1 read the last column
    with pytest.raises(ValueError, match="`names` must be distinct"):
        MC.rank_consistency(v, ["oracle_brier", "lcce", "lcce"], key=jax.random.key(0), n_boot=10)


def test_a_logged_pool_refuses_wrapped_field_ids_and_a_bad_oracle():
    from calib_jax.data.simulator import FIELD_NAMES, Impressions

    def pool(media, oracle):
        fields = np.zeros((3, len(FIELD_NAMES)), np.int64)
        fields[:, FIELD_NAMES.index("media")] = media
        f32 = np.full(3, 0.05, np.float32)
        return MC.pool_from_impressions(Impressions(
            fields=fields, dense=np.zeros((3, 4), np.float32), click=np.zeros(3, np.int8), oracle=oracle, pctr=f32,
            pctr_logit=np.log(f32 / (1 - f32)), price=0 * f32, request=np.arange(3)))

    with pytest.raises(ValueError, match="imp media field"):
        pool([0, 1, 2**32 + 1], np.full(3, 0.05, np.float32))  # became media 1
    with pytest.raises(ValueError, match="imp.oracle"):
        pool([0, 1, 1], np.array([0.05, np.nan, 0.05], np.float32))


def test_a_sparse_group_count_is_refused_with_the_way_to_dense_ids():
    """10^9 + 1 groups over 200 rows allocated per-group arrays of gigabytes and gave no answer
    in minutes (the fuzz of 2026-12-06); such a count can only come from sparse ids."""
    from calib_jax import metrics as M

    rng = np.random.default_rng(0)
    p = rng.uniform(0.01, 0.5, 200).astype(np.float32)
    y = (rng.random(200) < p).astype(np.float32)
    sparse = np.arange(200, dtype=np.int64) * 5_000_000
    for call in (lambda: D.brier_grouping(p, y, sparse, n_groups=10**9 + 1),
                 lambda: G.group_stats(p, y, sparse, n_groups=10**9 + 1)):
        with pytest.raises(ValueError, match="`n_groups`=1,000,000,001 for 200 rows.*np.unique"):
            call()
    with pytest.raises(ValueError, match="`n_levels`=100,000,000 for 200 rows"):
        M.multicalibration_error(p, y, np.zeros(200, np.int32), n_levels=10**8)
    _, dense = np.unique(sparse, return_inverse=True)  # the way the message gives
    got = D.brier_grouping(p, y, dense, n_groups=200)
    assert float(got.score) == pytest.approx(float(np.mean((y - p) ** 2)), rel=1e-6)
    assert float(D.brier_grouping(p, y, dense, n_groups=100_000).score) == pytest.approx(float(got.score), rel=1e-6)
