"""User metrics in the Monte Carlo panel: a metric defined outside the package runs in every
trial builder and in the Spearman study, equals the library function it wraps, and leaves the
built-in columns, their order and the checkpoint hash of a built-in panel unchanged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from calib_jax import metrics as M
from calib_jax import montecarlo as mc
from calib_jax import validation
from calib_jax.montecarlo.engine import config_hash

N = 1_500
ROOT = Path(__file__).resolve().parents[1]


def _values(metrics, design="fixed", n_trials=6):
    trial, panel, _ = mc.make_design_trial(design, N, seed=0, metrics=metrics)
    values, ref = mc.run_trials(trial, jax.random.key(0), n_trials, chunk_size=n_trials, progress=False)
    return np.asarray(values), np.asarray(ref), panel


def test_a_user_column_equals_the_library_function_and_leaves_built_in_columns_unchanged():
    user = mc.PanelMetric("my_ece", M.ece, label="my ECE")
    base, ref0, p0 = _values(["ece", "lcce", "lcce_random"])
    both, ref1, p1 = _values(["ece", user, "lcce", "lcce_random"])
    assert p1.metrics == ("ece", "my_ece", "lcce", "lcce_random", "oracle_brier")
    col = {m: i for i, m in enumerate(p1.metrics)}
    # the wrapped function is the built-in ECE: the same numbers on the same trials
    np.testing.assert_array_equal(both[:, col["my_ece"]], both[:, col["ece"]])
    # the random columns (LCCE's restarts, LCCE-rand's groups) keep their keys: bit for bit
    np.testing.assert_array_equal(np.delete(both, col["my_ece"], axis=1), base)
    np.testing.assert_array_equal(ref0, ref1)
    assert p1.labels == ["ECE", "my ECE", "LCCE", "LCCE-rand", "Brier*"]


def test_inputs_and_sign_conventions():
    auc = mc.PanelMetric("auc_up", M.auc, higher_is_better=True)
    oracle = mc.PanelMetric("my_oracle_brier", lambda p, eta: jnp.mean((p - eta) ** 2), inputs="oracle")
    logit = mc.PanelMetric("my_nll", M.nll_logits, inputs="logits")
    whole = mc.PanelMetric("field_gce", lambda d, k: M.gce(d.probs, d.labels, d.fields[:, 0],
                                                          n_groups=mc.ScenarioConfig().n_media), inputs="trial")
    values, ref, panel = _values(["one_minus_auc", auc, oracle, logit, "nll", whole, "gce_field"])
    col = {m: i for i, m in enumerate(panel.metrics)}
    np.testing.assert_allclose(values[:, col["auc_up"]], values[:, col["one_minus_auc"]] - 1.0, atol=1e-6)
    np.testing.assert_allclose(values[:, col["my_oracle_brier"]], ref, rtol=1e-5)
    np.testing.assert_allclose(values[:, col["my_nll"]], values[:, col["nll"]], rtol=1e-6)
    np.testing.assert_array_equal(values[:, col["field_gce"]], values[:, col["gce_field"]])
    assert panel.needs("my_oracle_brier") == "oracle" and panel.needs("auc_up") == "label"


def test_a_built_in_panel_records_and_hashes_as_before():
    cfg = mc.panel_for(["ece", "lcce"])
    assert "custom" not in cfg.to_dict()
    # the record a built-in panel had before user columns existed (field for field)
    legacy = {"metrics": ("ece", "lcce", "oracle_brier"), "n_bins": 15, "n_clusters": 4, "n_restarts": 4,
              "n_groups_random": 4, "field": 0, "n_levels": 8, "cll_val_fraction": 0.5, "alpha": 0.5,
              "optimal_bins": 256}
    assert cfg.to_dict() == legacy
    def digest(panel_record):
        return config_hash({"panel": panel_record}, jax.random.key(0), 10, 5)

    assert digest(cfg.to_dict()) == digest(legacy)
    with_user = mc.panel_for(["ece", mc.PanelMetric("mine", M.ece), "lcce"])
    assert digest(with_user.to_dict()) != digest(cfg.to_dict())
    rec = with_user.to_dict()["custom"][0]
    assert rec["function"] == "calib_jax.metrics._grouped:ece" and len(rec["source_sha256"]) == 64


def test_every_trial_builder_takes_user_metrics():
    mean_gap = lambda p, y, weights=None: jnp.abs(jnp.mean(p) - jnp.mean(y))  # noqa: E731
    user = mc.PanelMetric("mean_gap", mean_gap)
    key = jax.random.key(0)
    shapes = [jax.eval_shape(mc.make_trial(200, metrics=["brier", user]), key)[0].shape,
              jax.eval_shape(mc.make_repeated_trial(200, 2, metrics=["brier", user]), key)["mean"].shape]
    eta = jnp.linspace(-4.0, -1.0, 50)
    pool = mc.LoggedPool(logits=eta, oracle=jax.nn.sigmoid(eta), fields=jnp.zeros((50, 2), jnp.int32),
                         regime=jnp.zeros(50, jnp.int32))
    shapes.append(jax.eval_shape(mc.make_logged_trial(pool, 20, n_media=1, metrics=["brier", user]), key)[0].shape)
    assert shapes == [(3,), (3,), (3,)]


def test_bad_user_metrics_get_a_clear_error():
    with pytest.raises(ValueError, match="built-in panel column"):
        mc.PanelMetric("ece", M.ece)
    with pytest.raises(ValueError, match="identifier"):
        mc.PanelMetric("my metric", M.ece)
    with pytest.raises(ValueError, match="`inputs`"):
        mc.PanelMetric("mine", M.ece, inputs="labels")
    with pytest.raises(ValueError, match="no usable name"):
        mc.panel_for([lambda p, y: jnp.mean(p)])
    with pytest.raises(ValueError, match="more than once"):
        mc.panel_for(["ece", "ece"])
    with pytest.raises(ValueError, match="twice"):
        mc.panel_for(["ece", mc.PanelMetric("a", M.ece), mc.PanelMetric("a", M.mae)])
    with pytest.raises(ValueError, match="has no function"):
        mc.panel_for(["calib_jax.metrics:no_such_metric"])
    with pytest.raises(ValueError, match="cannot import"):
        mc.panel_for(["no_such_module_xyz:f"])
    with pytest.raises(ValueError, match="no file"):
        mc.panel_for(["/nonexistent/metrics.py:f"])
    vector = mc.PanelMetric("vector", lambda p, y: p)
    with pytest.raises(ValueError, match="must return a scalar"):
        mc.make_design_trial("pooled", 50, seed=0, metrics=[vector])[0](jax.random.key(0))


def test_a_checked_user_metric_raises_eagerly_and_is_nan_under_jit():
    @validation.checked
    def mean_gap(probs, labels):
        p, y = validation.check_probs(probs), validation.check_labels(labels)
        validation.check_same_length(p.shape[0], labels=y)
        return jnp.abs(jnp.mean(p) - jnp.mean(y))

    p, y = jnp.array([0.2, 0.6]), jnp.array([0.0, 1.0])
    assert float(mean_gap(p, y)) == pytest.approx(0.1)
    for bad_p, bad_y, name in ((jnp.array([0.2, jnp.nan]), y, "probs"), (p, jnp.array([0.0, 0.5]), "labels")):
        with pytest.raises(ValueError, match=f"`{name}`"):
            mean_gap(bad_p, bad_y)
        assert np.isnan(float(jax.jit(mean_gap)(bad_p, bad_y)))
    with pytest.raises(ValueError, match="`labels` has length 3"):
        mean_gap(p, jnp.array([0.0, 1.0, 1.0]))


def test_the_spearman_study_ranks_a_metric_from_a_file_outside_the_package(tmp_path):
    (tmp_path / "my_metrics.py").write_text(textwrap.dedent('''
        import jax.numpy as jnp
        from calib_jax import metrics, montecarlo as mc

        def _logit_ece(probs, labels, *, weights=None):
            z = jnp.log(probs) - jnp.log1p(-probs)
            ids = jnp.clip(jnp.floor((z + 8.0) / 8.0 * 15), 0, 14).astype(jnp.int32)
            return metrics.gce(probs, labels, ids, n_groups=15, norm="l1", weights=weights)

        logit_ece = mc.PanelMetric("logit_ece", _logit_ece, label="ECE(logit)")
        plain_ece = metrics.ece
    '''))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "experiments", "run", "mc_spearman", "--smoke", "--no-progress",
           "--set", "metrics=['ece', 'lcce', 'my_metrics:logit_ece', 'my_metrics.py:plain_ece']",
           "--set", "designs=['pooled']", "--out", str(out)]
    # a user's shell (no other variables), compiling as the rest of the suite does (tests/conftest.py:
    # the same results to float rounding, a third fewer CPU-seconds than XLA's default code generator)
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": os.environ.get("XLA_FLAGS", "")}
    subprocess.run(cmd, cwd=tmp_path, env=env, check=True, capture_output=True)
    rows = {r.split(",")[0]: r.split(",") for r in (out / "spearman_pooled.csv").read_text().splitlines()[1:]}
    assert rows["logit_ece"][1] == "ECE(logit)" and rows["plain_ece"][1] == "plain_ece"
    assert rows["plain_ece"][3] == rows["ece"][3]  # the same function: the same Spearman coefficient
    paired = (out / "paired_pooled.csv").read_text()
    assert "logit_ece,ece," in paired and "plain_ece,logit_ece," in paired  # every user column is an anchor
    prov = json.loads((out / "provenance.json").read_text())
    custom = prov["designs"]["pooled"]["panel"]["custom"]
    assert [c["name"] for c in custom] == ["logit_ece", "plain_ece"]
    assert custom[1]["function"] == "calib_jax.metrics._grouped:ece"


def test_a_user_metric_that_cannot_be_imported_ends_in_one_line(tmp_path):
    (tmp_path / "broken.py").write_text("raise RuntimeError('broken on purpose')\n")
    r = subprocess.run([sys.executable, "-m", "experiments", "run", "mc_spearman", "--smoke", "--no-progress",
                        "--set", "metrics=['ece', 'broken.py:f']", "--out", str(tmp_path / "out")],
                       cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"},
                       capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip() == ("experiments: error: metric 'broken.py:f': cannot import 'broken.py' "
                                "(RuntimeError: broken on purpose)")
    # a fixed file is read again in the same process
    (tmp_path / "fixed.py").write_text("raise RuntimeError('once')\n")
    with pytest.raises(ValueError, match="once"):
        mc.PanelMetric.from_spec(f"{tmp_path / 'fixed.py'}:f")
    (tmp_path / "fixed.py").write_text("from calib_jax.metrics import ece as f\n")
    assert mc.PanelMetric.from_spec(f"{tmp_path / 'fixed.py'}:f").fn is M.ece
