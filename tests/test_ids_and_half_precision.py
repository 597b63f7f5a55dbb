"""Ids and half-precision scores as users hand them over from NumPy and pandas.

JAX's default 32-bit mode converts an int64 array by wrapping each value modulo 2**32 (a warning,
then other ids: ``2**32 + 1`` joined group 1), float64 ids above 2**24 become float32, which merges
neighbouring integers, and a sparse id of 10**9 made a per-level metric allocate a level for every
integer below it (Field-ECE of 200 rows took 50 s and 23.7 GB). float16 / bfloat16 scores were
summed in their own precision: ECE, normalized entropy and ICI came out 0 and AUC NaN on 10**5
rows. Each case here failed before the change (checked on the code before it) and is compared with
an independent reference: NumPy group sums, scikit-learn's AUC per user, or the same metric on
dense codes / float32 copies of the same values.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

import calib_jax as cj
from calib_jax.calibrators import REGISTRY

RNG = np.random.default_rng(7)
N = 400
P = RNG.uniform(0.05, 0.95, N).astype(np.float32)
Y = (RNG.random(N) < P).astype(np.float32)
DENSE = RNG.integers(0, 5, N)
#: the same five levels as raw 64-bit ids: two of them collide modulo 2**32 with levels 1 and 2
RAW = np.array([0, 1, 2, 2**32 + 1, 2**33 + 2], dtype=np.int64)[DENSE]


def field_ece_reference(p, y, codes):
    """Field-ECE (Pan et al., "Field-aware Calibration", eq. 5) from NumPy group sums."""
    levels, inv = np.unique(codes, return_inverse=True)
    gaps = np.zeros(len(levels))
    np.add.at(gaps, inv, y.astype(np.float64) - p.astype(np.float64))
    return np.abs(gaps).sum() / len(p)


@pytest.mark.parametrize("metric", ["field_ece", "field_rce", "abs_bias"])
def test_64_bit_field_ids_are_levels_not_their_low_32_bits(metric):
    f = getattr(cj, metric)
    assert np.unique(RAW.astype(np.int32)).size < 5  # the ids that JAX's conversion would merge
    got = float(f(P, Y, RAW))
    assert got == pytest.approx(float(f(P, Y, DENSE)), rel=1e-6)
    if metric == "field_ece":
        assert got == pytest.approx(field_ece_reference(P, Y, RAW), rel=1e-5)


def test_a_sparse_id_costs_its_distinct_values_not_its_largest_value():
    sparse = np.where(DENSE == 4, 10**9, DENSE).astype(np.int32)  # within int32: no wrap, a huge level count
    assert float(cj.field_ece(P, Y, sparse)) == pytest.approx(field_ece_reference(P, Y, sparse), rel=1e-5)
    assert float(cj.multicalibration_error(P, Y, sparse, min_samples=1)) == pytest.approx(
        float(cj.multicalibration_error(P, Y, DENSE, min_samples=1)), rel=1e-6)


def test_64_bit_multicalibration_fields():
    fields = np.stack([RAW, RAW[::-1]], axis=1)
    dense = np.stack([DENSE, DENSE[::-1]], axis=1)
    for depth in (1, 2):
        got = float(cj.multicalibration_error(P, Y, fields, max_depth=depth, min_samples=5))
        assert got == pytest.approx(float(cj.multicalibration_error(P, Y, dense, max_depth=depth, min_samples=5)),
                                    rel=1e-6)


def gauc_reference(s, y, users):
    """Impression-weighted mean of scikit-learn's AUC over the users with both labels."""
    num = den = 0.0
    for u in np.unique(users):
        m = users == u
        if 0 < y[m].sum() < m.sum():
            num += m.sum() * roc_auc_score(y[m], s[m])
            den += m.sum()
    return num / den


@pytest.mark.parametrize("users", [
    np.array([0, 2**32, 2**33, -(2**40)], dtype=np.int64),            # beyond int32: wrapped onto each other
    np.array([-(2**31), 2**31 - 1, 0, 5], dtype=np.int64),              # int32, more than 2**31 - 1 apart
    np.array([16777216.0, 16777217.0, 16777218.0, 16777219.0]),         # float64 above 2**24
], ids=["int64", "full-int32-span", "float64"])
def test_gauc_keeps_every_user_apart(users):
    u = users[RNG.integers(0, 4, N)]
    want = gauc_reference(P, Y, u)
    r = cj.gauc(P, Y, u)
    assert int(r.users) == 4
    assert float(r.value) == pytest.approx(want, rel=1e-5)
    ece_raw = float(cj.ece_at_n(P, Y, users=u, top_n=20))
    ece_dense = float(cj.ece_at_n(P, Y, users=np.unique(u, return_inverse=True)[1], top_n=20))
    assert ece_raw == pytest.approx(ece_dense, rel=1e-6)


@pytest.mark.parametrize("call", [
    lambda z: cj.field_ece(P, Y, z, n_groups=5),
    lambda z: cj.gce(P, Y, z, n_groups=5),
    lambda z: cj.brier_grouping(P, Y, z, n_groups=5),
    lambda z: cj.multicalibration_error(P, Y, z, n_levels=5),
], ids=["field_ece", "gce", "brier_grouping", "mce"])
def test_ids_beyond_int32_with_a_given_number_of_levels_are_refused(call):
    with pytest.raises(ValueError, match=r"`(field|groups|fields)` holds values in \[0, 8589934594\]"):
        call(RAW)


def test_ids_that_are_not_non_negative_integers_name_the_argument():
    with pytest.raises(ValueError, match="`field` must hold integer group ids"):
        cj.field_ece(P, Y, np.where(DENSE == 0, np.nan, DENSE))  # was "cannot convert float NaN to integer"
    with pytest.raises(ValueError, match="`field` ids must be non-negative"):
        cj.field_ece(P, Y, DENSE - 1)


def test_neural_calibration_refuses_ids_it_cannot_embed():
    nc = REGISTRY["neural_calibration"]
    logits = np.log(P / (1 - P))
    with pytest.raises(ValueError, match=r"`context\['fields'\]` holds values"):
        nc.fit(logits, Y, key=jax.random.key(0), context={"fields": RAW[:, None]})
    sparse = np.where(DENSE == 4, 10**9, DENSE).astype(np.int32)[:, None]
    with pytest.raises(ValueError, match=r"`context\['fields'\]` column 0: largest id 1000000000 for 400 rows"):
        nc.fit(logits, Y, key=jax.random.key(0), context={"fields": sparse})


def test_a_rank_beyond_int32_is_not_wrapped_into_the_top_n():
    from calib_jax.calibrators.top_n import rank_groups

    assert rank_groups(np.array([1, 2, 5, 25]), top_n=20).tolist() == [0, 0, 0, -1]
    with pytest.raises(ValueError, match="`ranks` holds values in"):
        rank_groups(np.array([1, 2, 2**32 + 1], dtype=np.int64), top_n=20)  # was group 0, as rank 1


HALF = [np.float16, jnp.bfloat16]


@pytest.mark.parametrize("dtype", HALF, ids=["float16", "bfloat16"])
@pytest.mark.parametrize("metric", ["ece", "auc", "normalized_entropy", "ici", "brier", "nll", "smooth_ece",
                                    "spiegelhalter_z", "cox_calibration", "calibration_ratio"])
def test_half_precision_scores_give_the_float32_metric_of_the_same_values(metric, dtype):
    n = 100_000
    rng = np.random.default_rng(3)
    p = rng.uniform(0.05, 0.95, n)
    y = (rng.random(n) < p).astype(np.float32)
    p_half = jnp.asarray(p, dtype)
    f = getattr(cj, metric)

    def first(out):
        return float(jax.tree.leaves(out)[0])

    want = first(f(np.asarray(p_half.astype(jnp.float32)), y))
    assert first(f(p_half, jnp.asarray(y, dtype))) == want
    if dtype is np.float16:
        assert first(f(np.asarray(p_half), y.astype(np.float16))) == want
    assert np.isfinite(want) and (metric not in ("ece", "normalized_entropy", "ici") or want > 0)


def test_64_bit_ids_at_a_realistic_size():
    """10^5 rows and 2,000 users whose int64 ids lie beyond int32: GAUC against scikit-learn's AUC
    per user, Field-ECE against NumPy group sums (XLA vectorises its reductions differently with
    size)."""
    n = 100_000
    rng = np.random.default_rng(11)
    p = rng.uniform(0.02, 0.6, n).astype(np.float32)
    y = (rng.random(n) < p).astype(np.float32)
    users = (rng.integers(0, 2_000, n).astype(np.int64) << 33) + 7
    assert float(cj.field_ece(p, y, users)) == pytest.approx(field_ece_reference(p, y, users), rel=1e-4)
    r = cj.gauc(p, y, users)
    assert int(r.users) == np.unique(users).size
    assert float(r.value) == pytest.approx(gauc_reference(p, y, users), rel=1e-4)
