"""The interval of a calibrator comparison over fits and splits (experiments/_pipelines.py):
its coverage on synthetic comparisons with known variance components."""

from __future__ import annotations

import numpy as np
import pytest

from experiments._pipelines import crossed_t_interval, paired_t_interval


def _coverage(H, R, sa, sb, se, n, seed):
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n):
        d = rng.normal(0, sa, (H, 1)) + rng.normal(0, sb, (1, R)) + rng.normal(0, se, (H, R))
        r = crossed_t_interval(d)
        hits += r["lo"] <= 0.0 <= r["hi"]
    return hits / n


@pytest.mark.parametrize("sa, sb, se", [(1.0, 1.0, 1.0), (1.0, 0.3, 0.3), (0.3, 1.0, 0.5), (1.0, 0.0, 0.0)])
def test_crossed_interval_covers_at_the_papers_design(sa, sb, se):
    """H = 10 fits crossed with R = 10 splits (the paper preset), fit and split variance both
    known: coverage of the true mean 0 within +-3 points of 95% over 400 comparisons."""
    cov = _coverage(10, 10, sa, sb, se, 400, seed=int(10 * sa + 100 * sb + 1000 * se))
    assert 0.92 <= cov <= 0.98, cov


def test_crossed_interval_is_conservative_when_only_the_interaction_varies():
    # Satterthwaite's df for MS_A + MS_B - MS_E is small here: wider, never narrower
    assert _coverage(10, 10, 0.0, 0.0, 1.0, 400, seed=7) >= 0.93


def test_a_fold_only_interval_misses_fit_noise_that_the_crossed_one_keeps():
    """With fit noise dominant, averaging the fits away and taking a t over the splits (the
    old "refit" interval with one shared fit) under-covers; the crossed interval does not."""
    rng = np.random.default_rng(3)
    crossed = folds_only = 0
    n = 300
    for _ in range(n):
        d = rng.normal(0, 1.0, (1, 1)) + rng.normal(0, 0.2, (1, 10)) + rng.normal(0, 0.1, (1, 10))
        d2 = np.vstack([d, rng.normal(0, 1.0) + rng.normal(0, 0.2, (1, 10))])  # a second fit
        r = paired_t_interval(d[0], np.zeros(10))
        folds_only += r["lo"] <= 0 <= r["hi"]
        c = crossed_t_interval(d2)
        crossed += c["lo"] <= 0 <= c["hi"]
    assert folds_only / n < 0.5 and crossed / n > 0.9


def test_crossed_interval_reduces_to_the_paired_t_and_checks_its_input():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=8), rng.normal(size=8)
    t, c = paired_t_interval(a, b), crossed_t_interval((a - b)[None, :])
    assert c["lo"] == pytest.approx(t["lo"]) and c["hi"] == pytest.approx(t["hi"])
    # a difference that does not depend on the fit: the same interval for any number of fits
    c3 = crossed_t_interval(np.tile(a - b, (3, 1)))
    assert c3["lo"] == pytest.approx(t["lo"]) and c3["hi"] == pytest.approx(t["hi"])
    # only fits: a t over the fits
    f = crossed_t_interval((a - b)[:, None])
    assert f["lo"] == pytest.approx(t["lo"]) and f["hi"] == pytest.approx(t["hi"])
    with pytest.raises(ValueError, match="`d`"):
        crossed_t_interval(np.zeros((2, 2, 2)))
    assert np.isnan(crossed_t_interval([1.0])["lo"])
