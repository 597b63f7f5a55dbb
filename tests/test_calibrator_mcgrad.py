"""The MCGrad baseline calibrator (issue 17): the protocol wrapper around the optional
``mcgrad`` package. The fail-safe and input checks run everywhere; the fits run only where
``pip install 'calib_jax[mcgrad]'`` installed the package."""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest

from calib_jax import metrics as M
from calib_jax.calibrators import REGISTRY, CalibrationFallbackWarning
from calib_jax.calibrators import multicalibration as mcg


def _segment_log(n: int = 6000, seed: int = 0):
    """Logits calibrated overall but off by +-0.8 in two halves of field 0."""
    rng = np.random.default_rng(seed)
    fields = np.stack([rng.integers(0, 2, n), rng.integers(0, 4, n)], axis=1).astype(np.int32)
    emb = rng.normal(size=(n, 3)).astype(np.float32)
    z = rng.normal(-1.5, 1.0, n).astype(np.float32)
    shift = np.where(fields[:, 0] == 1, 0.8, -0.8)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-(z + shift)))).astype(np.float32)
    return z, y, {"fields": fields, "embedding": emb}


def test_too_few_events_fall_back_to_the_identity_with_a_warning():
    z, y, ctx = _segment_log(200)
    y = np.zeros_like(y)
    y[:3] = 1.0
    with pytest.warns(CalibrationFallbackWarning, match="too few events"):
        params = mcg.fit(z, y, context=ctx)
    assert params.fallback == 1 and params.model is None
    np.testing.assert_allclose(mcg.predict(params, z, context=ctx), 1 / (1 + np.exp(-z)), rtol=1e-6)


@pytest.mark.parametrize("features, ctx_keys, match", [
    ("both", ("fields",), "embedding"),
    ("fields", (), "fields"),
    ("segments", ("fields", "embedding"), "features"),
])
def test_bad_context_names_the_argument(features, ctx_keys, match):
    z, y, ctx = _segment_log(200)
    with pytest.raises(ValueError, match=match):
        mcg.fit(z, y, context={k: ctx[k] for k in ctx_keys}, features=features)


def test_bad_labels_and_weights_are_refused():
    z, y, ctx = _segment_log(200)
    with pytest.raises(ValueError, match="labels"):
        mcg.fit(z, y * 2, context=ctx)
    with pytest.raises(ValueError, match="weights"):
        mcg.fit(z, y, weights=-np.ones_like(z), context=ctx)


def test_registered_as_a_context_calibrator():
    cal = REGISTRY["mcgrad"]
    assert cal.fit is mcg.fit and not cal.monotone and set(cal.needs) == {"fields", "embedding"}


needs_mcgrad = pytest.mark.skipif(not mcg.available(), reason="optional `mcgrad` package not installed")


@needs_mcgrad
def test_equals_the_package_called_directly():
    import pandas as pd
    from mcgrad.methods import MCGrad

    z, y, ctx = _segment_log()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        params = mcg.fit(z, y, context=ctx, features="fields", key=jax.random.key(3))
        ours = mcg.predict(params, z, context=ctx)
        df = pd.DataFrame({"p": 1 / (1 + np.exp(-z.astype(np.float64))), "y": y.astype(np.float64),
                           "f0": ctx["fields"][:, 0].astype(np.int64), "f1": ctx["fields"][:, 1].astype(np.int64)})
        ref = MCGrad(random_state=mcg._seed(jax.random.key(3)))
        ref.fit(df, prediction_column_name="p", label_column_name="y", categorical_feature_column_names=["f0", "f1"])
        theirs = ref.predict(df, prediction_column_name="p", categorical_feature_column_names=["f0", "f1"])
    np.testing.assert_allclose(ours, np.clip(theirs, 0, 1).astype(np.float32), rtol=1e-6)


@needs_mcgrad
def test_fixes_segment_miscalibration_and_is_reproducible():
    z, y, ctx = _segment_log()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = mcg.predict(mcg.fit(z, y, context=ctx, key=jax.random.key(0)), z, context=ctx)
        b = mcg.predict(mcg.fit(z, y, context=ctx, key=jax.random.key(0)), z, context=ctx)
    np.testing.assert_array_equal(a, b)
    p0 = (1 / (1 + np.exp(-z))).astype(np.float32)
    before = float(M.field_ece(p0, y, ctx["fields"][:, 0], n_groups=2))
    after = float(M.field_ece(a, y, ctx["fields"][:, 0], n_groups=2))
    assert after < 0.25 * before


@needs_mcgrad
def test_a_fitted_model_pickles_and_predicts_the_same_bits():
    """A study's checkpoint pickles fitted calibrators; the package's fitted model holds a
    function-local class that ``pickle`` refuses, so the parameters travel as its JSON."""
    import pickle

    z, y, ctx = _segment_log()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        params = mcg.fit(z, y, context=ctx, key=jax.random.key(0))
    assert params.n_rounds > 0  # boosted: the trees must survive the trip
    with pytest.raises(Exception, match="local object"):  # why the parameters need their own reduction
        pickle.dumps(params.model)
    back = pickle.loads(pickle.dumps([params]))[0]
    assert isinstance(back, mcg.MCGradParams) and back[1:] == params[1:]
    np.testing.assert_array_equal(mcg.predict(back, z, context=ctx), mcg.predict(params, z, context=ctx))
    ident = params._replace(model=None, n_rounds=0, fallback=1)
    assert pickle.loads(pickle.dumps(ident)) == ident


@needs_mcgrad
def test_predictions_are_row_wise():
    """A row's prediction does not depend on the rows predicted with it (the comparison predicts
    each MCGrad head on its whole test set once and reads every split's rows from that)."""
    z, y, ctx = _segment_log()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        params = mcg.fit(z, y, context=ctx, key=jax.random.key(0))
    assert params.n_rounds > 0
    rows = np.random.default_rng(1).permutation(len(z))[:2500]
    whole = mcg.predict(params, z, context=ctx)
    some = mcg.predict(params, z[rows], context={k: v[rows] for k, v in ctx.items()})
    np.testing.assert_array_equal(some, whole[rows])
