"""Smoke and reference tests for the neighbour-paper studies (seeds/001, 002, 003).

The helpers in ``experiments/_pipelines.py`` are checked against independent references
(a plain-Python double loop, NumPy least squares, scikit-learn logistic regression, a
per-user NumPy argsort); each study is run end to end on its ``smoke`` preset.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from experiments import _pipelines as P  # noqa: E402


# ----------------------------------------------------------------------- helpers vs references
def test_metric_accuracy_matches_double_loop():
    rng = np.random.default_rng(0)
    a = np.round(rng.normal(0.0, 1.0, 13), 1)
    b = np.round(rng.normal(0.3, 1.0, 11), 1)  # rounding creates ties
    ref = 0.0
    for x in a:
        for y in b:
            ref += 1.0 if x < y else 0.5 if x == y else 0.0
    ref /= a.size * b.size
    got = float(P.metric_accuracy(jnp.asarray(a), jnp.asarray(b)))
    assert got == pytest.approx(ref, abs=1e-6)
    # vmapped over rounds equals the per-round values
    aa, bb = np.stack([a, a[::-1]]), np.stack([b, b + 0.5])
    batched = np.asarray(jax.vmap(P.metric_accuracy)(jnp.asarray(aa), jnp.asarray(bb)))
    singles = [float(P.metric_accuracy(jnp.asarray(x), jnp.asarray(y))) for x, y in zip(aa, bb)]
    np.testing.assert_allclose(batched, singles, atol=1e-6)


def test_fit_linear_matches_numpy_lstsq():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(200, 5))
    y = x @ np.arange(1.0, 6.0) + 0.7 + rng.normal(size=200)
    ref, *_ = np.linalg.lstsq(np.c_[x, np.ones(200)], y, rcond=None)
    got = np.asarray(P.fit_linear(jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32)))
    np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-3)


def test_fit_logistic_matches_sklearn():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(2)
    x = rng.normal(size=(500, 4))
    y = (rng.uniform(size=500) < 1 / (1 + np.exp(-(x @ [1.0, -0.5, 0.3, 0.0] - 0.4)))).astype(float)
    ridge = 1e-2
    sk = LogisticRegression(C=1.0 / ridge, tol=1e-10, max_iter=1000).fit(x, y)
    got = np.asarray(P.fit_logistic(jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32),
                                    ridge=ridge))
    # sklearn does not penalise the intercept; P.fit_logistic does (by 1e-2): loose tolerance
    np.testing.assert_allclose(got[:-1], sk.coef_[0], atol=2e-3)
    np.testing.assert_allclose(got[-1], sk.intercept_[0], atol=2e-3)


def test_paired_t_interval_matches_scipy_ttest_rel():
    from scipy import stats

    rng = np.random.default_rng(4)
    a, b = rng.normal(0.3, 1.0, 7), rng.normal(0.0, 1.0, 7)
    got = P.paired_t_interval(a, b, level=0.9)
    ci = stats.ttest_rel(a, b).confidence_interval(0.9)
    assert got["diff"] == pytest.approx(np.mean(a - b))
    assert (got["lo"], got["hi"]) == pytest.approx((ci.low, ci.high))
    assert np.isnan(P.paired_t_interval([1.0], [0.0])["lo"])


def test_refit_ranks_marks_best_and_ties_from_fold_intervals():
    from experiments.compare_calibrators import refit_ranks

    folds = {"a": [1.0, 1.1, 0.9, 1.0], "b": [2.0, 2.1, 1.9, 2.05], "c": [1.0, 1.3, 0.8, 1.05]}
    marks = refit_ranks(folds)
    assert marks["a"]["mark"] == "best" and marks["c"]["mark"] == "tie" and marks["b"]["mark"] == ""
    assert refit_ranks({"a": folds["a"], "b": folds["b"]})["a"]["mark"] == "significantly best"
    # a method infinite in one refit (MCE with sigma = 0) is worse, not tied by a NaN interval
    inf = {"a": folds["a"], "d": [1.0, float("inf"), 0.9, 1.0]}
    assert refit_ranks(inf) == {"a": {"mark": "significantly best"}, "d": {"mark": ""}}


def test_rank_within_user_matches_argsort():
    rng = np.random.default_rng(3)
    users = rng.integers(0, 7, 120)
    scores = rng.normal(size=120)
    got = P.rank_within_user(users, scores)
    for u in np.unique(users):
        idx = np.flatnonzero(users == u)
        order = idx[np.argsort(-scores[idx])]
        np.testing.assert_array_equal(got[order], np.arange(1, idx.size + 1))


def test_ctrnet_knobs_are_data():
    """Masked fields and dense features do not change the logits; width masks do."""
    net = P.CTRNet(cardinalities=(5, 4), emb_dim=3, hidden=(6, 4))
    f = jnp.asarray(np.random.default_rng(4).integers(0, 4, (10, 2)))
    d = jnp.asarray(np.random.default_rng(5).normal(size=(10, 2)), jnp.float32)
    hp = P.default_hp(net, field_mask=jnp.asarray([1.0, 0.0]), dense_mask=jnp.asarray(0.0))
    v = net.init(jax.random.key(0), f, d, hp, train=False)
    f2 = f.at[:, 1].set(0)
    z1 = net.apply(v, f, d, hp, train=False)
    z2 = net.apply(v, f2, d * 10.0, hp, train=False)
    np.testing.assert_allclose(np.asarray(z1), np.asarray(z2), atol=1e-6)


def test_field_calibration_refit_intervals_are_scipys_paired_t_and_centre_on_the_table():
    """The refit rows of the field-aware study: the mean of per-refit differences (the table's
    own difference, its values being means over the refits) with scipy's paired t-interval."""
    from scipy import stats

    from experiments.field_calibration import refit_rows

    rng = np.random.default_rng(0)
    methods = ("Platt Scaling", "Neural Calibration", "VR-SAG")
    runs = [{m: {"Field-RCE": float(rng.normal(i, 1)), "AUC": float(rng.normal(0.7, 0.01))}
             for i, m in enumerate(methods)} for _ in range(5)]
    rows = refit_rows(runs)
    assert {(a, b) for a, b, *_ in rows} == {(a, b) for b in ("Neural Calibration", "VR-SAG") for a in methods
                                               if a != b}
    for a, b, metric, d, lo, hi, n in rows:
        xa, xb = [r[a][metric] for r in runs], [r[b][metric] for r in runs]
        assert d == pytest.approx(np.mean(xa) - np.mean(xb), abs=1e-12) and n == 5
        ci = stats.ttest_rel(xa, xb).confidence_interval(0.95)
        assert (lo, hi) == pytest.approx((ci.low, ci.high), rel=1e-9)
    assert refit_rows(runs[:1]) == []


@pytest.mark.filterwarnings("ignore::calib_jax.calibrators.CalibrationFallbackWarning")  # tiny data
def test_field_calibration_sag_solver_reaches_the_sag_fits_only(monkeypatch):
    """``--set sag_solver=...`` is checked, kept out of the configuration at its default (so
    the runs made before the setting keep their configurations and checkpoints), and handed to
    the SAG and VR-SAG fits of ``one_run`` and to no other calibrator."""
    from calib_jax.calibrators import sag
    from experiments import _study, registry
    from experiments import field_calibration as FC

    entry = registry.get("field_calibration")
    _, _, plain = _study.resolve(entry, ["--smoke", "--show-config"])
    assert "sag_solver" not in plain
    _, _, at_default = _study.resolve(entry, ["--smoke", "--show-config", "--set", "sag_solver=sequential"])
    assert at_default == plain
    _, _, chosen = _study.resolve(entry, ["--smoke", "--show-config", "--set", "sag_solver=lockstep"])
    assert chosen == {**plain, "sag_solver": "lockstep"}
    with pytest.raises(ValueError, match="'sag_solver' must be one of 'sequential', 'lockstep'"):
        _study.resolve(entry, ["--smoke", "--show-config", "--set", "sag_solver=fast"])
    # the quick and paper presets hold the lock-step solver; asked for the sequential one, the
    # configuration is the one the runs before 2026-12-05 were made with
    _, _, paper = _study.resolve(entry, ["--paper", "--show-config"])
    _, _, sequential = _study.resolve(entry, ["--paper", "--show-config", "--set", "sag_solver=sequential"])
    assert paper["sag_solver"] == "lockstep" and sequential == {k: v for k, v in paper.items() if k != "sag_solver"}

    seen = []
    real_fit = sag.fit

    def recording_fit(*args, **kwargs):
        seen.append((kwargs["lam_v"], kwargs["solver"]))
        return real_fit(*args, **{**kwargs, "n_steps": 3})  # a short fit: only the option is checked

    monkeypatch.setattr(sag, "fit", recording_fit)
    data = FC.load_dataset("simulator", {"scale": "tiny", "max_rows": 1500, "field": "advertiser",
                                         "epochs": 1}, 0)
    res = FC.one_run(data, PRESETS_SMOKE_MODEL, ["platt", "sag_ps", "vrsag_ps"], jax.random.key(0),
                     shift=False, sag_solver="lockstep")
    assert seen == [(0.0, "lockstep"), (0.5, "lockstep")]
    assert {"SAG", "VR-SAG", "Platt Scaling"} <= set(res)
    assert all(np.isfinite(v) for m in ("SAG", "VR-SAG") for v in res[m].values())


PRESETS_SMOKE_MODEL = {"emb_dim": 4, "hidden": (8, 4), "batch_size": 128, "lr": 2e-3}


@pytest.mark.filterwarnings("ignore::calib_jax.calibrators.CalibrationFallbackWarning")  # tiny data
def test_field_calibration_trains_model_2_in_the_main_setting_only(monkeypatch):
    """Model-2 (Model-1 continued on D_dev) is a row of the main setting only: in the data-shift
    setting the base model is trained once, on the swapped D_train, and no Model-2 row is
    reported; in the main setting it is trained on D_train, then continued on D_dev."""
    from experiments import field_calibration as FC

    trained = []
    compiled = FC._compiled_trainer

    def recording_trainer(net, n_train, batch_size, lr, epochs):
        run = compiled(net, n_train, batch_size, lr, epochs)

        def call(*args):
            trained.append(n_train)
            return run(*args)

        return call

    monkeypatch.setattr(FC, "_compiled_trainer", recording_trainer)
    data = FC.load_dataset("simulator", {"scale": "tiny", "max_rows": 1500, "field": "advertiser",
                                         "epochs": 1}, 0)
    n = data["y"].shape[0]
    n_train, n_dev = int(0.6 * n), int(0.8 * n) - int(0.6 * n)
    timings: dict[str, float] = {}
    main = FC.one_run(data, PRESETS_SMOKE_MODEL, ["platt"], jax.random.key(0), shift=False, timings=timings)
    assert trained == [n_train, n_dev]
    assert {"Base (Model-1)", "Base (Model-2)", "Platt Scaling"} <= set(main)
    trained.clear()
    shift = FC.one_run(data, PRESETS_SMOKE_MODEL, ["platt"], jax.random.key(0), shift=True, timings=timings)
    assert trained == [n_dev]  # D_dev's rows are the shift setting's D_train
    assert "Base (Model-2)" not in shift and {"Base (Model-1)", "Platt Scaling"} <= set(shift)
    assert all(np.isfinite(v) for m in ("Base (Model-1)", "Platt Scaling") for v in shift[m].values())
    assert {"train", "infer", "fit platt", "metrics"} <= set(timings)
