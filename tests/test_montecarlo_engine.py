"""Tests of the Monte Carlo engine, rank statistics and trial determinism (SPEC §8)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from calib_jax import montecarlo as mc

ROOT = Path(__file__).resolve().parents[1]

# a small but complete panel configuration shared by the tests
N = 1000
# cheap to compile (the engine tests are about keys, chunks, devices and checkpoints);
# lcce_random still draws from the per-trial key
PANEL = mc.PanelConfig(metrics=("brier", "ece", "lcce_random", "field_ece", "oracle_brier"))
# one trial function for the whole module, so the engine's compilation cache is reused
TRIAL = mc.make_trial(N, metrics=mc.metric_panel(PANEL))


def _toy_trial(key):
    x = jax.random.normal(key, (5,))
    return {"a": x, "b": jnp.sum(x**2)}


# ----------------------------------------------------------------------------- stats
def test_rankdata_matches_scipy(rng):
    x = rng.integers(0, 6, size=(40, 3)).astype(float)
    x[:, 2] = rng.normal(size=40)
    np.testing.assert_array_equal(np.asarray(mc.rankdata(x)),
                                  scipy.stats.rankdata(x, axis=0, method="average"))


def test_spearman_matrix_matches_scipy(rng):
    x = rng.normal(size=(60, 5))
    x[:, 1] = np.round(x[:, 0] + 0.5 * x[:, 1])  # ties, correlated with column 0
    x[:, 4] = -x[:, 2] ** 3
    ref = scipy.stats.spearmanr(x).statistic
    np.testing.assert_allclose(np.asarray(mc.spearman_matrix(x)), ref, atol=1e-6)
    rho = mc.spearman_with(x[:, 1:], x[:, 0])
    np.testing.assert_allclose(np.asarray(rho), ref[0, 1:], atol=1e-6)


def test_spearman_constant_column_is_zero_not_nan(rng):
    x = np.column_stack([rng.normal(size=20), np.ones(20)])
    r = np.asarray(mc.spearman_matrix(x))
    assert np.all(np.isfinite(r))
    assert r[0, 1] == 0.0 and r[1, 1] == 1.0


def test_metric_accuracy_eq8_matches_naive_loop(rng):
    a = rng.normal(0.0, 1.0, size=30)
    b = rng.normal(0.5, 1.0, size=25)
    b[:3] = a[:3]  # ties count one half
    naive = np.mean([[1.0 if ai < bj else 0.5 if ai == bj else 0.0 for bj in b] for ai in a])
    assert float(mc.metric_accuracy(a, b)) == pytest.approx(naive, abs=1e-6)
    assert float(mc.metric_accuracy(-a, -b, lower_is_better=False)) == pytest.approx(naive, abs=1e-6)


# ---------------------------------------------------------------------------- engine
def test_keys_are_fold_in_of_trial_index(key):
    out = mc.run_trials(_toy_trial, key, 7, chunk_size=3, progress=False)
    for t in (0, 3, 6):
        np.testing.assert_array_equal(out["a"][t],
                                      np.asarray(_toy_trial(jax.random.fold_in(key, t))["a"]))
    assert out["a"].shape == (7, 5) and out["b"].shape == (7,)


def test_chunked_equals_unchunked(key):
    one = mc.run_trials(TRIAL, key, 6, chunk_size=6, trials_per_step=2, progress=False)
    many = mc.run_trials(TRIAL, key, 6, chunk_size=2, trials_per_step=2, progress=False)
    for x, y in zip(one, many):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)


def test_trial_is_deterministic_per_key(key):
    panel = mc.PanelConfig(metrics=("lcce", "lcce_quantile", "ece_plus", "oracle_brier"))
    trial = mc.make_trial(N, metrics=mc.metric_panel(panel))
    keys = jnp.stack([jax.random.fold_in(key, t) for t in (3, 3, 4)])
    (v, r) = jax.jit(jax.vmap(trial))(keys)
    (v1, v2, v3), (r1, r2) = v, r[:2]
    np.testing.assert_array_equal(np.asarray(v1), np.asarray(v2))
    assert float(r1) == float(r2)
    assert not np.allclose(np.asarray(v1), np.asarray(v3))
    assert np.all(np.isfinite(np.asarray(v1)))
    # the reference column equals the returned oracle Brier
    assert float(v1[list(panel.metrics).index("oracle_brier")]) == pytest.approx(float(r1))


class _Interrupt(RuntimeError):
    pass


def test_resume_after_interruption_equals_uninterrupted(key, tmp_path):
    trial = TRIAL
    cfg = {"n": N, "panel": PANEL.to_dict()}
    full = mc.run_trials(trial, key, 10, chunk_size=2, trials_per_step=1, progress=False)

    def boom(c):
        if c == 1:  # two chunks are checkpointed, then the run dies
            raise _Interrupt

    with pytest.raises(_Interrupt):
        mc.run_trials(trial, key, 10, chunk_size=2, trials_per_step=1, checkpoint_dir=tmp_path, config=cfg,
                      progress=False, on_chunk_done=boom)
    (run_dir,) = list(tmp_path.iterdir())
    assert sorted(p.name for p in run_dir.glob("chunk_*.npz")) == ["chunk_00000.npz",
                                                                   "chunk_00001.npz"]
    computed = []
    resumed = mc.run_trials(trial, key, 10, chunk_size=2, trials_per_step=1, checkpoint_dir=tmp_path, config=cfg,
                            progress=False, on_chunk_done=computed.append)
    assert computed == [2, 3, 4]  # only the missing chunks were computed
    for x, y in zip(full, resumed):
        np.testing.assert_array_equal(x, y)
    loaded = mc.load_results(run_dir / "results.npz", full)
    for x, y in zip(full, loaded):
        np.testing.assert_array_equal(x, y)
    # a different configuration never reuses these chunks
    mc.run_trials(trial, key, 10, chunk_size=2, trials_per_step=1, checkpoint_dir=tmp_path,
                  config={**cfg, "n": N + 1}, progress=False)
    assert len(list(tmp_path.iterdir())) == 2


def test_resuming_chunks_of_other_code_warns_and_is_recorded(key, tmp_path, monkeypatch):
    import warnings

    from calib_jax.montecarlo import engine

    cfg = {"n": N, "panel": PANEL.to_dict()}

    def run(writer, **kw):
        monkeypatch.setattr(engine, "_code_version", lambda: writer)
        return mc.run_trials(TRIAL, key, 6, chunk_size=2, trials_per_step=1, checkpoint_dir=tmp_path,
                             config=cfg, progress=False, **kw)

    def stop_after_first(c):
        if c == 0:
            raise _Interrupt

    with pytest.raises(_Interrupt):
        run("commit-a", on_chunk_done=stop_after_first)
    with pytest.warns(mc.ResumedChunksWarning, match=r"1 of 3 chunks .*\(1 by commit-a; this code: commit-b\)"):
        first = run("commit-b")
    (run_dir,) = list(tmp_path.iterdir())
    # the chunk stays as commit-a wrote it: every later resume says so again
    with pytest.warns(mc.ResumedChunksWarning, match="1 by commit-a"):
        again = run("commit-b")
    for x, y in zip(first, again):
        np.testing.assert_array_equal(x, y)
    # chunks of the same code resume silently
    (run_dir / "chunk_00000.npz").unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("error", mc.ResumedChunksWarning)
        run("commit-b")
    # a chunk from before writers were recorded is reported as such
    with np.load(run_dir / "chunk_00001.npz") as z:
        engine._save_npz(run_dir / "chunk_00001.npz", [z[k] for k in z.files if k.startswith("leaf_")])
    with pytest.warns(mc.ResumedChunksWarning, match=f"1 by {engine.UNRECORDED}"):
        run("commit-b")


def test_bad_arguments_raise(key):
    with pytest.raises(ValueError, match="n_trials"):
        mc.run_trials(_toy_trial, key, 0, chunk_size=2, progress=False)
    with pytest.raises(ValueError, match="chunk_size"):
        mc.run_trials(_toy_trial, key, 3, chunk_size=0, progress=False)
    with pytest.raises(ValueError, match="metrics"):
        mc.metric_panel(mc.PanelConfig(metrics=("nope",)))


_SHARD_SCRIPT = textwrap.dedent("""
    import sys, jax, numpy as np
    from calib_jax import montecarlo as mc
    assert len(jax.devices()) == int(sys.argv[2]), jax.devices()
    from calib_jax._src.pav import isotonic_fit_values
    # ECE+, AUC and Spearman sort and the isotonic fit pools on the host (callbacks that
    # deadlocked several host devices under jax.pure_callback)
    panel = mc.PanelConfig(metrics=("brier", "ece", "ece_plus", "lcce_random", "field_ece",
                                    "one_minus_auc", "one_minus_spearman", "oracle_brier"))
    base = mc.make_trial(1000, metrics=mc.metric_panel(panel))
    def trial(key):
        v, r = base(key)
        x = jax.random.uniform(key, (300,))
        y = (jax.random.uniform(jax.random.fold_in(key, 1), (300,)) < x).astype(x.dtype)
        return v, r, x, y, isotonic_fit_values(x, y, jax.numpy.ones_like(x))
    v, r, x, y, iso = mc.run_trials(trial, jax.random.key(0), 16, chunk_size=8, trials_per_step=2,
                                    progress=False)
    np.savez(sys.argv[1], v=v, r=r, x=x, y=y, iso=iso)
""")


def _run_with_devices(n_dev: int, out: Path) -> dict:
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={n_dev}").strip()
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    # a deadlock in the host callbacks would hang: fail after 5 minutes instead
    subprocess.run([sys.executable, "-c", _SHARD_SCRIPT, str(out), str(n_dev)], check=True,
                   cwd=ROOT, env=env, timeout=300)
    with np.load(out) as z:
        return {k: z[k] for k in z}


def test_sharded_over_4_devices_equals_single_device(tmp_path):
    one = _run_with_devices(1, tmp_path / "one.npz")
    four = _run_with_devices(4, tmp_path / "four.npz")
    np.testing.assert_array_equal(four["v"], one["v"])  # bit-identical (shard_map, fixed step)
    np.testing.assert_array_equal(four["r"], one["r"])
    np.testing.assert_array_equal(four["iso"], one["iso"])
    from calib_jax._src.pav import np_isotonic_fit_values

    for x, y, iso in zip(one["x"], one["y"], one["iso"]):  # against SciPy's PAVA on the host
        np.testing.assert_allclose(iso, np_isotonic_fit_values(x, y, np.ones_like(x)), rtol=1e-6, atol=1e-7)


_LCCE_DEVICES_SCRIPT = textwrap.dedent("""
    import jax, numpy as np
    jax.config.update("jax_num_cpu_devices", 2)
    from calib_jax import montecarlo as mc
    trial, _, _ = mc.make_design_trial("fixed", 100_000, seed=0, metrics=["lcce_quantile", "oracle_brier"],
                                       simulator="default")
    runs = [np.asarray(mc.run_trials(trial, jax.random.key(0), 16, chunk_size=16, progress=False,
                                     devices=jax.devices()[:d])[0]) for d in (1, 2)]
    bad = np.argwhere(runs[0] != runs[1]).tolist()
    assert not bad, f"1 vs 2 devices differ at (trial, column) {bad}: {runs[0][bad[0][0]]} {runs[1][bad[0][0]]}"
""")


def test_fig3_lcce_trials_are_bit_identical_on_1_and_2_devices():
    """The Fig 3 trial at paper size (n = 10^5) gives the same LCCE on 1 and on 2 host
    devices. Before histogram_1d binned by a product, XLA compiled the bin's division as a
    division in the 2-device program and as a product by the reciprocal in the 1-device
    one: trial 2's LCCE-q moved by 1.2e-10."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("XLA_FLAGS", None)
    subprocess.run([sys.executable, "-c", _LCCE_DEVICES_SCRIPT], check=True, cwd=ROOT, env=env, timeout=600)
