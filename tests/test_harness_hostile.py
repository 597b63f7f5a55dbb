"""Hostile input to the study harness (``python -m experiments run STUDY ... --set key=value``)
and to the user metrics of the Monte Carlo panel: every bad value ends in one line naming the
setting or the metric (exit status 2), before anything is computed or written; a constant
metric has no rank correlation (undefined, never "0 and significantly worse"); plus the VR-SAG
loss's head weights and the timing fields of ``experiments verify``.

The setting sweep runs only the parsing and validation path (``--show-config``, or a study whose
``run`` fails the test if it is called): no study runs here.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from calib_jax import montecarlo as mc
from calib_jax.losses import vrsag_loss
from experiments import __main__ as experiments_cli
from experiments import _study, registry
from experiments import verify as V

ROOT = Path(__file__).resolve().parents[1]
STUDIES = registry.STUDIES
SEED_RANGE_TEXT = "[0, 4294967295]"


def _leaves(node: dict, prefix: str = "") -> list[tuple[str, object]]:
    """``(dotted key, preset value)`` of every setting; a non-empty dict is a group of settings."""
    out = []
    for k, v in node.items():
        if isinstance(v, dict) and v:
            out += _leaves(v, f"{prefix}{k}.")
        else:
            out.append((prefix + k, v))
    return out


def _smoke_leaves(entry) -> list[tuple[str, object]]:
    module = importlib.import_module(f"experiments.{entry.module}")
    return _leaves(_study.preset(module, "smoke", entry.defaults))


def _hostile(value: object) -> list[str]:
    """``--set`` texts that no setting whose preset holds ``value`` may accept: the wrong type,
    a negative or non-finite number, a huge integer, an empty or malformed list."""
    huge = "1" + "0" * 40
    if isinstance(value, bool):
        return ["1", "'yes'", "[]", "None"]
    if isinstance(value, int):
        return ["-1", "-7", "0.5", "'x'", "[]", "True", "1e999", huge]  # (None: some are optional)
    if isinstance(value, float):
        return ["1e999", "-1e999", "'x'", "[]", "True", "None"]
    if isinstance(value, str):
        return ["''", "'no_such_choice'", "3", "[]", "None"]
    if isinstance(value, list | tuple):
        return ["[]", "[[]]", "[None]", "[-1]", "'no_such_choice'", "-3.5"]
    if isinstance(value, dict):  # a dict-valued setting (overrides of a config object)
        return ["{'no_such_key': 1}", "5", "[]"]
    assert value is None, value
    return ["[]", "-1", "'no_such_choice'", "1e999"]


def _resolve(entry, *argv: str) -> dict:
    """The configuration ``run_entry`` resolves with ``--show-config`` (nothing runs)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert _study.run_entry(entry, ["--smoke", *argv, "--show-config"]) == {}
    return json.loads(buf.getvalue())


def _refused(entry, key: str, text: str) -> str:
    with pytest.raises(ValueError) as e:
        _resolve(entry, "--set", f"{key}={text}")
    return str(e.value)


# ------------------------------------------------------------------------- every setting, every study
def test_every_preset_is_in_its_domains_and_every_hostile_value_is_refused_naming_the_setting():
    for entry in STUDIES:
        for scale in _study.SCALES:  # the declared domains hold every committed preset
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                _study.run_entry(entry, [f"--{scale}", "--show-config"])
        for key, value in _smoke_leaves(entry):
            for text in _hostile(value):
                message = _refused(entry, key, text)
                assert key in message and "\n" not in message, (entry.name, key, text, message)


_CASES = [(e, key, value) for e in STUDIES for key, value in _smoke_leaves(e)]
#: settings that some preset sets to None, and row caps (``max_rows=None``: every row)
_OPTIONAL = {key for e in STUDIES for scale in _study.SCALES
             for key, v in _leaves(_study.preset(importlib.import_module(f"experiments.{e.module}"), scale, e.defaults))
             if v is None or key.endswith("max_rows")}


@settings(max_examples=120, deadline=None)
@given(case=st.sampled_from(_CASES),
       value=st.one_of(st.integers(), st.floats(), st.booleans(), st.none(), st.text(max_size=12),
                       st.lists(st.one_of(st.integers(-5, 5), st.floats(-2, 2), st.text(max_size=4)), max_size=3),
                       st.dictionaries(st.text(max_size=4), st.integers(), max_size=2)))
def test_random_set_values_are_refused_in_one_line_or_accepted_in_the_domain(case, value):
    entry, key, preset_value = case
    text = repr(value)
    try:
        got = _resolve(entry, "--set", f"{key}={text}")
    except ValueError as e:  # refused: one line that names the setting
        assert key in str(e) and "\n" not in str(e), str(e)
        return
    node = got
    for part in key.split("."):
        node = node[part]
    if node is None:
        assert key in _OPTIONAL, key
        return
    # accepted: a value of the preset's kind, finite, non-negative where the preset counts things
    if isinstance(preset_value, bool):
        assert isinstance(node, bool)
    elif isinstance(preset_value, int):
        assert isinstance(node, int) and not isinstance(node, bool) and 0 <= node < 2**32, node
    elif isinstance(preset_value, float):
        assert isinstance(node, float) and math.isfinite(node), node
    elif isinstance(preset_value, list | tuple):
        assert isinstance(node, list) and len(node) >= 1, node
    elif isinstance(preset_value, str):
        assert isinstance(node, str) and node.strip(), node


def test_seeds_out_of_range_are_refused_with_the_range_never_reduced(capsys):
    entry = registry.get("mc_spearman")
    for seed in (str(2**32), "-1", "12345678901234567890123"):
        with pytest.raises(SystemExit) as e:
            experiments_cli.cli(["run", "mc_spearman", "--smoke", "--seed", seed, "--show-config"])
        err = capsys.readouterr().err
        assert e.value.code == 2 and err.count("\n") == 1 and "--seed" in err and SEED_RANGE_TEXT in err, err
    assert _resolve(entry, "--seed", str(2**32 - 1))["seed"] == 2**32 - 1  # the top of the range runs as given
    # a seed setting of the preset has the same domain
    with pytest.raises(ValueError, match=r"setting 'seed' must be an integer in \[0, 4294967295\]"):
        _resolve(registry.get("interval_coverage"), "--set", f"seed={2**32}")


def test_bad_input_is_refused_before_anything_is_computed_or_written(tmp_path, monkeypatch, capsys):
    (tmp_path / "a_file").write_text("not a folder\n")
    cases = [("mc_spearman", ["--set", "n=-5"], "setting 'n'"),
             ("mc_spearman", ["--set", "designs=[]"], "setting 'designs'"),
             ("mc_spearman", ["--seed", "12345678901234567890123"], "--seed"),
             ("mc_std", ["--set", "designs=['simulator']"], "setting 'designs'"),
             ("metric_atlas", ["--set", "settings=['fixed@2.0/600']"], "setting 'settings'"),
             ("calibrated_logloss", ["--set", "ctr.n_boot=0"], "setting 'ctr.n_boot'"),
             ("field_calibration", ["--set", "nc_grid=[{'lr': -1.0}]"], "setting 'nc_grid'"),
             ("mc_sample_size", ["--set", "min_trials=100"], "'min_trials', 'n_trials'"),
             ("metrics_demo", ["--out", str(tmp_path / "a_file")], "is a file"),
             ("metrics_demo", ["--out", str(tmp_path / "a_file" / "below")], "is a file"),
             ("mc_spearman", ["--no-such-option"], "unrecognized arguments")]
    for name, argv, named in cases:
        module = importlib.import_module(f"experiments.{registry.get(name).module}")

        def computed(config, out, name=name):
            raise AssertionError(f"{name}: the study ran on bad input")

        monkeypatch.setattr(module, "run", computed)
        out = tmp_path / f"out_{name}"
        with pytest.raises(SystemExit) as e:
            experiments_cli.cli(["run", name, "--smoke", "--no-progress", "--out", str(out), *argv])
        err = capsys.readouterr().err
        assert e.value.code == 2 and err.startswith("experiments: error: ") and err.count("\n") == 1, (name, err)
        assert named in err, (name, argv, err)
        assert not out.exists(), name  # nothing written
        monkeypatch.undo()


def test_a_study_refusing_non_finite_values_ends_in_one_line(monkeypatch, capsys, tmp_path):
    from experiments import mc_spearman

    def non_finite(config, out):
        raise FloatingPointError("non-finite metric values in columns ['my_metric']")

    monkeypatch.setattr(mc_spearman, "run", non_finite)
    with pytest.raises(SystemExit) as e:
        experiments_cli.cli(["run", "mc_spearman", "--smoke", "--no-progress", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err == "experiments: error: non-finite metric values in columns ['my_metric']\n"


def test_the_command_line_prints_one_line_and_no_traceback(tmp_path):
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"}
    r = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import subprocess, sys
        for argv in (["-m", "experiments", "run", "mc_spearman", "--smoke", "--set", "n=-5"],
                     ["-m", "experiments.mc_std", "--smoke", "--seed", "12345678901234567890123"]):
            r = subprocess.run([sys.executable, *argv], capture_output=True, text=True)
            print(r.returncode, repr(r.stderr))
    """)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    lines = r.stdout.splitlines()
    assert lines == [
        "2 \"experiments: error: setting 'n' must be an integer in [100, 2147483647], got -5\\n\"",
        "2 'python -m experiments.mc_std: error: --seed must be an integer in [0, 4294967295], "
        "got 12345678901234567890123\\n'"], r.stdout + r.stderr


# ------------------------------------------------------------------------- user metrics
HOSTILE_METRICS = '''
import jax.numpy as jnp
import numpy as np

def raises(probs, labels):
    raise RuntimeError("broken on purpose")

def nan_metric(probs, labels):
    return jnp.mean(probs) * jnp.nan

def inf_metric(probs, labels):
    return jnp.mean(probs) / 0.0

def python_float(probs, labels):
    return float(jnp.mean(probs))

def python_constant(probs, labels):
    return 0.25

def vector(probs, labels):
    return probs - labels

def mutates(probs, labels):
    probs[0] = 0.5
    return jnp.mean(probs)

def numpy_inside(probs, labels):
    return np.asarray(probs).mean()

def constant(probs, labels):
    return jnp.float32(0.5) + 0.0 * jnp.mean(probs)
'''
#: failure mode -> what the one line says (beside the metric's name)
FAILURES = {"raises": "raised RuntimeError: broken on purpose", "nan_metric": "returned NaN",
            "inf_metric": "returned an infinity", "python_float": "cannot run under jax.jit",
            "python_constant": "returned float 0.25, not a JAX array", "vector": "must return a scalar",
            "mutates": "writes into its input", "numpy_inside": "cannot run under jax.jit",
            "constant": "is constant (0.5)"}


def test_every_way_a_user_metric_fails_ends_in_one_line_before_the_study_runs(tmp_path, monkeypatch, capsys):
    (tmp_path / "hostile.py").write_text(HOSTILE_METRICS)
    monkeypatch.chdir(tmp_path)
    from experiments import mc_spearman

    def computed(config, out):
        raise AssertionError("the study ran with a broken user metric")

    monkeypatch.setattr(mc_spearman, "run", computed)
    tiny = ["--set", "designs=['pooled']", "--set", "n=200", "--set", "n_trials=4", "--set", "n_boot=10"]
    for name, says in FAILURES.items():
        with pytest.raises(SystemExit) as e:
            experiments_cli.cli(["run", "mc_spearman", "--smoke", "--no-progress", "--out", str(tmp_path / "out"),
                                 "--set", f"metrics=['ece', 'lcce', 'hostile.py:{name}']", *tiny])
        err = capsys.readouterr().err
        assert e.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err, (name, err)
        assert f"metric '{name}'" in err and says in err, (name, err)
    assert not (tmp_path / "out").exists()


def test_a_user_column_fails_under_jit_with_its_name():
    col = mc.PanelMetric("as_float", lambda p, y: float(jnp.mean(p))).column()
    p = jnp.array([0.2, 0.8, 0.3, 0.7])
    d = mc.TrialData(logits=jnp.log(p / (1 - p)), probs=p, labels=jnp.array([0.0, 1.0, 0.0, 1.0]), oracle=p,
                     fields=jnp.zeros((4, 2), jnp.int32), regime=jnp.zeros(4, jnp.int32),
                     params=mc.VariantParams(*jnp.zeros(7)))
    with pytest.raises(ValueError, match="metric 'as_float' cannot run under jax.jit"):
        jax.jit(col)(d, jax.random.key(0))
    mc.check_metrics([mc.PanelMetric("fine", lambda p, y: jnp.abs(jnp.mean(p) - jnp.mean(y)))], n=200, n_trials=4)


def test_a_constant_metric_has_no_rank_correlation_and_no_significant_difference():
    rng = np.random.default_rng(0)
    ref = rng.normal(size=40)
    values = np.stack([ref + 0.3 * rng.normal(size=40), np.full(40, 0.5), ref], axis=1)
    rc = mc.rank_consistency(values, ["lcce", "flat", "oracle_brier"], key=jax.random.key(0), n_boot=200)
    # the reference: scipy's Spearman of a constant column is undefined (NaN), not 0
    with pytest.warns(scipy.stats.ConstantInputWarning):
        assert np.isnan(scipy.stats.spearmanr(values[:, 1], ref).statistic)
    assert np.isnan(rc.rho("flat")) and all(np.isnan(rc.interval("flat")))
    d = rc.paired[("lcce", "flat")]
    assert all(np.isnan([d.diff, d.lo, d.hi, d.share_a_better]))  # no "significant" difference
    assert 0.8 < rc.rho("lcce") <= 1.0 and rc.rows()[-1][0] == "flat"  # undefined rows last
    summary = rc.summary()
    assert rc.undefined() == ["flat"] and list(summary["undefined"]) == ["flat"]
    # a constant reference leaves every coefficient undefined
    flat_ref = mc.bootstrap_spearman(values, np.ones(40), key=jax.random.key(1), n_boot=20)
    assert np.isnan(flat_ref.rho).all() and np.isnan(flat_ref.replicates).all()


# ------------------------------------------------------------------------- the two leftovers
def test_vrsag_loss_refuses_nan_head_weights_eagerly_and_is_nan_under_jit():
    o = jnp.linspace(-2.0, 2.0, 20)
    y = (o > 0).astype(jnp.float32)
    h, tau, W = jnp.zeros((20, 3)), jnp.ones(3), jnp.linspace(-1.0, 1.0, 12).reshape(4, 3)
    bad = W.at[1, 2].set(jnp.nan)
    with pytest.raises(ValueError, match="`head_weights` contains 1 NaN/inf"):
        vrsag_loss(o, y, h, tau, head_weights=bad)
    assert np.isnan(float(jax.jit(lambda w: vrsag_loss(o, y, h, tau, head_weights=w))(bad)))
    grad = jax.jit(jax.grad(lambda w: vrsag_loss(o, y, h, tau, head_weights=w)))
    # W enters only the penalty lam * mean(W^2): its gradient is 2 lam W / (m K)
    np.testing.assert_allclose(np.asarray(grad(W)), 2 * 0.1 * np.asarray(W) / 12, rtol=1e-6)
    assert np.isnan(np.asarray(grad(bad))[1, 2])  # and NaN where the entry is NaN


def test_verify_leaves_timing_fields_out_by_one_rule():
    committed = {"simulate_seconds": 12.0, "phase_seconds": {"fit": 3.0, "eval": 1.0},
                 "fit_times": {"simulator": {"Platt scaling": 0.2}}, "candidates": {"c": {"seconds": 40.0}},
                 "backbone": {"train_seconds": 90.0, "rows_per_second": 1.0e5, "auc": 0.7426},
                 "claims": [{"refit_share_fit": 0.31}]}
    rerun = {"simulate_seconds": 19.5, "phase_seconds": {"fit": 5.0, "eval": 0.5},
             "fit_times": {"simulator": {"Platt scaling": 0.9}}, "candidates": {"c": {"seconds": 71.0}},
             "backbone": {"train_seconds": 60.0, "rows_per_second": 2.0e5, "auc": 0.7426},
             "claims": [{"refit_share_fit": 0.31}]}
    res = V.compare(committed, rerun, rtol=1e-4, atol=1e-7)
    assert res["moved"] == [] and res["compared"] == 2 and res["timing_skipped"] == 7
    rerun["backbone"]["auc"] = 0.75  # a study number that moved is still a problem
    assert [k for k, *_ in V.compare(committed, rerun, rtol=1e-4, atol=1e-7)["moved"]] == ["backbone/auc"]
