"""Fail-safe calibrators (calib_jax.calibrators._failsafe): fits the data cannot support fall
back instead of collapsing.

On two low-signal logs — the Open Bandit sample (a real log: the calibration split of the
paper's protocol has no click) and a small synthetic log — Platt, beta, SAG and
VR-SAG (both protocols) must neither move the predicted mean off the observed click rate by
more than that rate's Wilson interval nor reverse the backbone's ranking. Their reason
codes are checked against what the data hold.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

import calib_jax.calibrators._failsafe as F
from calib_jax import metrics as M
from calib_jax.calibrators import CalibrationFallbackWarning, beta, platt, sag, temperature
from calib_jax.data import backbone as bb
from calib_jax.data import open_bandit as obd


def _check_no_collapse(name, p_cal, y_cal, p_test, y_test, p_backbone):
    """Not collapsed: on the split it was fitted on, the predicted mean lies in the 95%
    Wilson interval of the observed rate (a bootstrap interval is empty at 0 clicks); and the
    test ranking is not reversed (AUC not below the backbone's by more than 0.02)."""
    lo, hi = F.wilson_interval(float(np.sum(y_cal)), float(len(y_cal)))
    assert float(lo) - 1e-6 <= float(np.mean(p_cal)) <= float(hi) + 1e-6, (name, float(np.mean(p_cal)), lo, hi)
    assert roc_auc_score(y_test, p_test) >= roc_auc_score(y_test, p_backbone) - 0.02, name


def _fits(cal, val):
    """(name, params, predict, the split its calibrators were fitted on)."""
    ho = {"logits": cal.logits, "labels": cal.labels, "embedding": cal.embedding}
    yield "platt", platt.fit(cal.logits, cal.labels), platt.predict, cal
    yield "beta", beta.fit(cal.logits, cal.labels), beta.predict, cal
    for proto, fitted_on in (("paper", val), ("reference", cal)):
        prm = sag.fit(val.logits, val.labels, context={"embedding": val.embedding}, protocol=proto,
                      variant="ps", lam_v=0.5, n_steps=10, holdout=ho, n_partitions=3)
        yield f"vr-sag+ps {proto}", prm, sag.predict, fitted_on


@pytest.fixture(scope="module")
def open_bandit(tmp_path_factory):
    if not obd.default_path().is_dir():
        pytest.skip("Open Bandit sample not shipped")
    return obd.load_or_train_open_bandit(seed=0, cache_dir=tmp_path_factory.mktemp("ob"))


def _synthetic_split(rng, n, m=8):
    """A backbone-like split: an embedding, a logit read off it and labels drawn from a
    miscalibrated version of that logit (CTR about 3%)."""
    emb = rng.normal(size=(n, m)).astype(np.float32)
    logit = (emb @ np.linspace(0.6, -0.3, m) - 3.4).astype(np.float32)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-(0.8 * logit - 0.4)))).astype(np.float32)
    return bb.SplitOutputs(logits=logit, embedding=emb, fields=np.zeros((n, 1), np.int32),
                           labels=y, oracle=None, pctr=None, rows=np.arange(n))


@pytest.fixture(scope="module")
def tiny_log():
    """A small synthetic log in the backbone's split layout (no network is trained: the
    backbone code paths have their own tests)."""
    rng = np.random.default_rng(7)
    val, ho, test = (_synthetic_split(rng, n) for n in (3000, 700, 6000))
    return bb.BackboneOutputs(val=val, holdout=ho, test=test, field_names=("none",), info={})


@pytest.mark.parametrize("which", [pytest.param("open_bandit", marks=pytest.mark.slow), "tiny_log"])  # 29 s: slow
def test_low_signal_fits_fall_back_instead_of_collapsing(which, request):
    out = request.getfixturevalue(which)
    # the calibration split of the paper's protocol: D_ho (Open Bandit: 200 rows, no click);
    # on the synthetic log a 150-row slice of it (a few clicks)
    cal = out.holdout if which == "open_bandit" else out.holdout._replace(
        **{f: getattr(out.holdout, f)[:150] for f in ("logits", "labels", "embedding", "fields", "rows")})
    assert F.minority_events(jnp.asarray(cal.labels), jnp.ones(len(cal))) < F.MIN_EVENTS
    test = out.test
    p0 = np.asarray(jax.nn.sigmoid(test.logits))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", CalibrationFallbackWarning)
        fits = list(_fits(cal, out.val))
    assert len([w for w in seen if issubclass(w.category, CalibrationFallbackWarning)]) >= 2
    for name, prm, predict, fitted_on in fits:
        ctx = lambda part: {"embedding": part.embedding}  # noqa: E731 (ignored by Platt / beta)
        p_test = np.asarray(predict(prm, test.logits, context=ctx(test)))
        p_cal = np.asarray(predict(prm, fitted_on.logits, context=ctx(fitted_on)))
        assert np.all(np.isfinite(p_test))
        _check_no_collapse(name, p_cal, fitted_on.labels, p_test, test.labels, p0)
        if name in ("platt", "beta"):
            assert int(prm.fallback) == F.TOO_FEW_EVENTS


def test_consistent_shift_is_the_smallest_change_the_data_allow(rng):
    z = rng.normal(-3.0, 1.0, 400).astype(np.float32)
    w = np.ones_like(z)
    inside = (rng.uniform(size=z.size) < 1 / (1 + np.exp(-z))).astype(np.float32)
    assert float(F.consistent_shift(z, inside, w)) == 0.0  # the model's rate is consistent
    none = np.zeros_like(z)  # no click: shift down onto the interval's upper end, not to -inf
    b = float(F.consistent_shift(z, none, w))
    lo, hi = F.wilson_interval(0.0, float(z.size))
    assert float(lo) == 0.0 and b < 0.0
    np.testing.assert_allclose(np.mean(1 / (1 + np.exp(-(z + b)))), float(hi), rtol=1e-4)


def test_reversed_signal_gives_a_shift_that_matches_the_rate(rng):
    """A Platt slope fitted on a reversed signal would reverse the ranking: the fit falls back
    to the logit shift sigma(z + b), which keeps the ranking and matches the mean rate."""
    z = rng.normal(-2.0, 1.0, 20_000).astype(np.float32)
    y = (rng.uniform(size=z.size) < 1 / (1 + np.exp(-(-2.0 - 0.5 * (z + 2.0))))).astype(np.float32)
    with pytest.warns(CalibrationFallbackWarning, match="decreasing"):
        prm = platt.fit(z, y)
    assert int(prm.fallback) == F.REVERSES_RANKING and float(prm.a) == 1.0
    p = np.asarray(platt.predict(prm, z))
    np.testing.assert_allclose(p.mean(), y.mean(), rtol=1e-4)       # first-order condition
    assert roc_auc_score(y, p) == pytest.approx(roc_auc_score(y, z))  # ranking kept
    # temperature scaling has no intercept: to match the base rate at negative logits it keeps
    # beta > 0, so it cannot reverse the ranking and is accepted
    assert int(temperature.fit(z, y).fallback) == F.OK
    with pytest.warns(CalibrationFallbackWarning):
        b = beta.fit(z, y)
    assert int(b.fallback) in (F.REVERSES_RANKING, F.NOT_CONVERGED)
    assert roc_auc_score(y, np.asarray(beta.predict(b, z))) >= roc_auc_score(y, z) - 1e-6  # f32 ties


def test_supported_fits_are_untouched_and_vmap_reports_codes(rng):
    z = rng.normal(-1.0, 1.5, 5000).astype(np.float32)
    y = (rng.uniform(size=z.size) < 1 / (1 + np.exp(-(0.6 * z + 0.3)))).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CalibrationFallbackWarning)
        prm = platt.fit(z, y)
    assert int(prm.fallback) == F.OK and 0.5 < float(prm.a) < 0.7
    # under vmap (Monte Carlo trials) nothing warns; the codes come back per trial
    Z = jnp.stack([jnp.asarray(z), -jnp.asarray(z)])
    codes = jax.vmap(lambda zz: platt.fit(zz, y).fallback)(Z)
    np.testing.assert_array_equal(np.asarray(codes), [F.OK, F.REVERSES_RANKING])
    assert float(M.auc(jax.nn.sigmoid(Z[1]), y)) < 0.5  # the second trial's signal is reversed
