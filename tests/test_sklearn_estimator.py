"""The scikit-learn estimator: scikit-learn's own estimator checks, the ecosystem's tools
(Pipeline, clone, cross_val_score, GridSearchCV) against scikit-learn's metrics computed by
hand, any two class labels, context columns for VR-SAG and Neural Calibration, and the errors a
user meets."""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.metrics import brier_score_loss
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils.estimator_checks import parametrize_with_checks

from calib_jax.calibrators import REGISTRY, SklearnCalibrator, isotonic, platt
from calib_jax.calibrators.sklearn_api import expected_failed_checks

pytestmark = pytest.mark.filterwarnings("ignore::calib_jax.calibrators.CalibrationFallbackWarning")


# the checks feed arbitrary features, often all in [0, 1]: the look-like-probabilities warning is right
@pytest.mark.filterwarnings("ignore:every logit passed to the calibrator lies in")
@parametrize_with_checks([SklearnCalibrator("isotonic", score_column=0)],
                         expected_failed_checks=expected_failed_checks)
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


# every method: ~30-130 s each (one compilation per data shape of the checks): make test-slow
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:every logit passed to the calibrator lies in")
@parametrize_with_checks([SklearnCalibrator(m, score_column=0)
                          for m in ("temperature", "platt", "beta", "histogram_binning", "ilps")],
                         expected_failed_checks=expected_failed_checks)
def test_scikit_learn_estimator_checks_every_method(estimator, check):
    check(estimator)


def _data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.normal(0.0, 1.5, n)
    y = (rng.random(n) < 1 / (1 + np.exp(-(0.6 * z - 0.4)))).astype(int)
    return z, y


def test_equals_the_library_call_with_any_two_labels():
    z, y = _data()
    est = SklearnCalibrator("platt").fit(z[:, None], y)
    ref = np.asarray(platt.predict(platt.fit(z, y), z))
    np.testing.assert_allclose(est.predict_proba(z[:, None])[:, 1], ref, rtol=1e-6)
    np.testing.assert_array_equal(est.predict(z[:, None]), (ref > 0.5).astype(int))
    # string labels: classes_ sorted, the probability is that of classes_[1]
    names = np.where(y == 1, "click", "no click")  # "click" < "no click": classes_[1] is y == 0
    est_s = SklearnCalibrator("platt").fit(z[:, None], names)
    assert est_s.classes_.tolist() == ["click", "no click"]
    np.testing.assert_allclose(est_s.predict_proba(z[:, None])[:, 1],
                               np.asarray(platt.predict(platt.fit(z, 1 - y), z)), rtol=1e-6)
    assert set(est_s.predict(z[:, None])) <= {"click", "no click"}
    # labels {-1, 1} and probabilities as input
    p = 1 / (1 + np.exp(-z))
    est_p = SklearnCalibrator("isotonic", input="prob").fit(p[:, None], 2 * y - 1)
    np.testing.assert_allclose(est_p.predict_proba(p[:, None])[:, 1],
                               np.asarray(isotonic.predict(isotonic.fit(z, y), z)), atol=2e-6)


def test_score_is_the_negative_brier_score_and_drives_model_selection():
    z, y = _data()
    X = z[:, None]
    cv = KFold(3, shuffle=True, random_state=0)
    got = cross_val_score(SklearnCalibrator("temperature"), X, y, cv=cv)
    want = []
    for tr, te in cv.split(X):
        est = SklearnCalibrator("temperature").fit(X[tr], y[tr])
        want.append(-brier_score_loss(y[te], est.predict_proba(X[te])[:, 1]))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # a grid search over a Pipeline: the scores are finite and the best has the largest mean
    pipe = Pipeline([("halve", FunctionTransformer(lambda x: 0.5 * x)), ("cal", SklearnCalibrator())])
    grid = GridSearchCV(pipe, {"cal__method": ["platt", "isotonic", "histogram_binning"],
                               "cal__hyper": [None]}, cv=cv).fit(X, y)
    means = grid.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(means)) and np.all(means < 0)
    assert grid.best_index_ == int(np.argmax(means))
    assert pipe.fit(X, y).predict_proba(X).shape == (len(y), 2)
    # hyper-parameters through `hyper`, and clone keeps them
    est = clone(SklearnCalibrator("histogram_binning", hyper={"n_bins": 7}))
    assert est.get_params()["hyper"] == {"n_bins": 7}
    assert est.fit(X, y).params_.edges.shape[0] == 8


def test_context_columns_for_vrsag_and_neural_calibration():
    z, y = _data(n=300, seed=3)
    rng = np.random.default_rng(4)
    emb = rng.normal(size=(z.shape[0], 3)).astype(np.float32)
    X = np.column_stack([z, emb])
    hyper = {"n_partitions": 1, "n_steps": 3}
    est = SklearnCalibrator("vrsag_ts", context={"embedding": "rest"}, hyper=hyper, random_state=5).fit(X, y)
    cal = REGISTRY["vrsag_ts"]
    ref = cal.fit(z, y, key=jax.random.key(5), context={"embedding": emb}, **hyper)
    np.testing.assert_allclose(est.predict_proba(X)[:, 1],
                               np.asarray(cal.predict(ref, z, context={"embedding": emb})), rtol=1e-5, atol=1e-7)
    # categorical fields as integer-valued columns; the score in another column
    fields = rng.integers(0, 4, size=(z.shape[0], 2))
    Xf = np.column_stack([fields[:, 0], z, fields[:, 1]])
    nc = SklearnCalibrator("neural_calibration", score_column=1, context={"fields": [0, 2]},
                           hyper={"n_steps": 2}).fit(Xf, y)
    assert nc.predict_proba(Xf).shape == (z.shape[0], 2)
    with pytest.raises(ValueError, match="non-negative integer"):
        nc.predict_proba(Xf + 0.5)
    with pytest.raises(ValueError, match=r"needs context \['embedding'\].*context=\{'embedding': 'rest'\}"):
        SklearnCalibrator("vrsag_ts").fit(z[:, None], y)
    with pytest.raises(ValueError, match="other than the score column"):
        SklearnCalibrator("vrsag_ts", context={"embedding": [0, 1]}).fit(X, y)


def test_errors_a_user_meets():
    z, y = _data(n=100)
    X2 = np.column_stack([z, z])
    with pytest.raises(ValueError, match="score_column"):
        SklearnCalibrator("platt").fit(X2, y)
    with pytest.raises(NotFittedError):
        SklearnCalibrator("platt").predict_proba(z[:, None])
    with pytest.raises(ValueError, match="Only binary classification"):
        SklearnCalibrator("platt").fit(z[:, None], np.arange(100) % 3)
    with pytest.raises(ValueError, match="two classes"):
        SklearnCalibrator("platt").fit(z[:, None], np.zeros(100, int))
    with pytest.raises(ValueError, match="did you mean 'vrsag_ts'"):
        SklearnCalibrator("vrsag").fit(z[:, None], y)
    with pytest.raises(ValueError, match="Invalid parameter 'n_bin'"):
        SklearnCalibrator().set_params(n_bin=3)
    with pytest.raises(ValueError, match="probabilities in"):
        SklearnCalibrator("platt", input="prob").fit(z[:, None], y)
    with pytest.raises(ValueError, match="(?i)complex"):
        SklearnCalibrator("platt").fit(z[:, None] + 1j, y)
    with pytest.raises(ValueError, match="NaN"):
        SklearnCalibrator("platt").fit(np.where(np.arange(100) == 3, np.nan, z)[:, None], y)


def test_misplaced_context_and_probabilities_get_messages_that_point_at_the_caller():
    from calib_jax.calibrators import sag, temperature

    z, y = _data(n=200)
    with pytest.raises(ValueError, match=r"context=\{'embedding'"):
        sag.fit(z, y, embedding=np.zeros((200, 2)))
    with pytest.raises(ValueError, match=r"context=\{'fields'"):
        REGISTRY["neural_calibration"].fit(z, y, fields=np.zeros((200, 1), int))
    p = 1 / (1 + np.exp(-z))
    with pytest.warns(UserWarning, match="look like probabilities") as rec:
        temperature.fit(p, y)
    assert rec[0].filename == __file__
    # a fallback warning points at this line too, not into the library
    with warnings.catch_warnings(record=True) as rec2:
        warnings.simplefilter("always")
        platt.fit(z[:3], np.array([0, 0, 1]))
    fallback = [w for w in rec2 if "fell back" in str(w.message)]
    assert fallback and fallback[0].filename == __file__
