"""The comparison's checkpoints inside one data set (experiments/compare_calibrators.py):
a run stopped in the splits, and again in the refits, resumes to the uninterrupted run's bits."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from calib_jax.io import git_commit
from experiments import _study
from experiments import compare_calibrators as CC

#: a small comparison on the tiny world: a D_ho-fitted method, a D_val-head method with a
#: per-split second stage, MCGrad (a host model the checkpoints must pickle), and the
#: uncalibrated row the derived metrics need
CONFIG = {**CC.PRESETS["smoke"], "methods": ("Uncal", "Temperature scaling", "SAG+TS", "MCGrad"), "n_splits": 3,
          "n_folds": 2, "n_boot": 8, "sag_steps": 3, "head_fits": 2, "head_draw": "bootstrap", "seed": 0}


class _Stop(Exception):
    pass


def _stop_at(monkeypatch, call: int) -> None:
    """Make the ``call``-th backbone evaluation of a run (one per split, then one per refit fold) raise."""
    seen = [0]
    real = CC.evaluate_backbone

    def stopping(*args):
        seen[0] += 1
        if seen[0] == call:
            raise _Stop
        return real(*args)

    monkeypatch.setattr(CC, "evaluate_backbone", stopping)


def _run(tmp_path, name, stages=None):
    out = _study.Output(tmp_path / name, study="compare_calibrators", scale="smoke", progress=False)
    with warnings.catch_warnings():  # the fallbacks are counted, as in CC.run
        warnings.simplefilter("ignore", CC.CalibrationFallbackWarning)
        return CC.run_dataset("simulator", CONFIG, out, CC.jax.random.key(0), stages)


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """The uninterrupted run, shared by the tests that resume one."""
    return _run(tmp_path_factory.mktemp("whole"), "whole")


def _assert_same_results(resumed, whole):
    for part in ("per_split", "fallbacks", "fallback_share", "refit_fallback_share", "folds"):
        assert resumed[part] == whole[part], part
    for m, metrics in whole["crossed"].items():
        for k, v in metrics.items():
            np.testing.assert_array_equal(resumed["crossed"][m][k], v, err_msg=f"{m} {k}")
    for m, b in whole["boots"].items():
        for k in b.estimate:
            np.testing.assert_array_equal(np.asarray(resumed["boots"][m].replicates[k]),
                                          np.asarray(b.replicates[k]), err_msg=f"{m} {k}")
    assert resumed["ranks"] == whole["ranks"]


def test_a_run_stopped_twice_resumes_to_the_uninterrupted_bits(tmp_path, monkeypatch, whole):
    monkeypatch.setattr(CC, "STAGE_EVERY_S", 0.0)  # save after every split
    process = lambda: _study.StageStore(tmp_path / "stages", "compare_calibrators")  # noqa: E731 (one per run)
    store = process()
    with monkeypatch.context() as m:
        _stop_at(m, 2)  # in split 1: the D_val fits and split 0 are saved
        with pytest.raises(_Stop):
            _run(tmp_path, "a", process())
    assert set(store.load("fits")["heads"]) == {"SAG+TS", "MCGrad"} and store.load("splits")["done"] == 1 and store.load("refits") is None
    with monkeypatch.context() as m:
        _stop_at(m, 4)  # splits 1, 2, then refit fold 0, and stopped in fold 1
        with pytest.raises(_Stop):
            _run(tmp_path, "b", process())
    assert store.load("splits")["done"] == 3 and set(store.load("boots")["boots"]) == set(CONFIG["methods"])
    assert store.load("refits")["done"] == 1
    resumed = _run(tmp_path, "c", process())
    _assert_same_results(resumed, whole)
    # the phase seconds of the stopped runs are kept: every phase of the whole run is there
    assert set(resumed["info"]["phase_seconds"]) == set(whole["info"]["phase_seconds"])
    # which process (and so which code) saved each stage: three runs, each stage by the runs that computed it
    history = resumed["info"]["stage_history"]
    assert [h["stage"] for h in history] == ["fits", "split0", "splits", "splits", "boots", "refits", "refits"]
    assert {h["git_commit"] for h in history} == {git_commit()}
    assert whole["info"]["stage_history"] == []  # checkpoints off: nothing saved, nothing recorded


def test_a_run_carried_to_another_machine_without_split_0s_predictions_computes_them_again(tmp_path, monkeypatch,
                                                                                            whole):
    """A run carried between machines keeps its small stages and leaves split 0's predictions
    behind (200 MB at 15M exposures): the resumed run predicts split 0 again, to the same bits."""
    monkeypatch.setattr(CC, "STAGE_EVERY_S", 0.0)
    store = _study.StageStore(tmp_path / "stages", "compare_calibrators")
    with monkeypatch.context() as m:
        _stop_at(m, 3)  # in split 2: splits 0 and 1 are saved
        with pytest.raises(_Stop):
            _run(tmp_path, "a", _study.StageStore(tmp_path / "stages", "compare_calibrators"))
    assert store.load("splits")["done"] == 2
    (tmp_path / "stages" / "split0.pkl").unlink()
    resumed = _run(tmp_path, "b", _study.StageStore(tmp_path / "stages", "compare_calibrators"))
    _assert_same_results(resumed, whole)
    assert [h["stage"] for h in resumed["info"]["stage_history"]] == ["fits", "split0", "splits", "splits", "split0",
                                                                      "boots", "refits"]


def test_stages_of_other_data_are_refused(tmp_path):
    """Stages computed on other rows (a backbone that rounds differently on another machine)
    are never mixed into a run: it stops with the folder's name."""
    folder = tmp_path / "stages"
    _study.StageStore(folder, "compare_calibrators").check_data({"val.logits": np.zeros(3)})
    with pytest.raises(ValueError, match="computed on other data"):
        _run(tmp_path, "a", _study.StageStore(folder, "compare_calibrators"))
    assert sorted(p.name for p in folder.iterdir()) == ["data.json"]  # nothing computed, nothing saved


class _Unreadable(dict):
    """Rows whose reading fails the test: a store that keeps nothing must not hash them."""

    def __getitem__(self, name):
        raise AssertionError(f"read {name} with checkpoints off")


def test_a_store_that_keeps_nothing_never_reads_the_rows_it_is_given(tmp_path):
    """At 15M exposures the rows are half a gigabyte: with checkpoints off they are not hashed,
    and a kept store fingerprints the same rows to the same data.json in a second process."""
    _study.StageStore(None, "compare_calibrators").check_data(_Unreadable({"val.logits": None}))
    with pytest.raises(AssertionError, match="checkpoints off"):
        _study.StageStore(tmp_path / "s", "compare_calibrators").check_data(_Unreadable({"val.logits": None}))
    rows = {"val.logits": np.linspace(-1.0, 1.0, 5), "pool.oracle": None}
    _study.StageStore(tmp_path / "t", "compare_calibrators").check_data(rows)
    _study.StageStore(tmp_path / "t", "compare_calibrators").check_data({k: v for k, v in rows.items()})
    saved = (tmp_path / "t" / "data.json").read_text()
    assert _study.data_fingerprint(rows) in saved


def test_a_run_stopped_between_two_fits_of_a_method_resumes_after_the_first(tmp_path, monkeypatch, whole):
    """One D_val fit of MCGrad at the paper's data size takes minutes: each finished fit of a
    method is saved, and a resumed run fits only the ones left."""
    store = _study.StageStore(tmp_path / "stages", "compare_calibrators")
    real = CC.sag.fit_many
    calls = [0]

    def fit_many(*args, **kwargs):
        calls[0] += 1
        if calls[0] == 2:  # SAG+TS's second head fit (its own bootstrap draw)
            raise _Stop
        return real(*args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(CC.sag, "fit_many", fit_many)
        with pytest.raises(_Stop):
            _run(tmp_path, "a", store)
    saved = store.load("fits")
    heads, seconds = saved["partial"]["SAG+TS"]
    assert saved["heads"] == {} and len(heads) == len(seconds) == 1
    assert saved["clock"]["D_val fits (SAG heads, Neural Calibration, MCGrad)"] >= seconds[0]
    calls[0] = 10  # count the fits of the resumed run
    monkeypatch.setattr(CC.sag, "fit_many", fit_many)
    resumed = _run(tmp_path, "b", store)
    assert calls[0] == 11  # the second fit only
    _assert_same_results(resumed, whole)


def test_the_stages_are_removed_once_the_data_set_is_saved(tmp_path, monkeypatch):
    monkeypatch.setenv("CALIB_JAX_CHECKPOINTS", str(tmp_path / "ckpt"))
    seen = []

    def fake(name, config, out, key, stages):
        assert stages.commit == git_commit()  # the code's commit, taken when the run starts
        stages.save("fits", {"x": 1})
        assert [(h["stage"], h["git_commit"]) for h in stages.history()] == [("fits", stages.commit)]
        (stages.folder / ".fits.pkl.abc.tmp").write_bytes(b"")  # as a killed write leaves it
        seen.append(sorted(p.name for p in stages.folder.iterdir()))
        return {"info": {}}

    monkeypatch.setattr(CC, "run_dataset", fake)
    out = _study.Output(tmp_path / "o", study="compare_calibrators", scale="paper", progress=False)
    CC._run_or_resume("simulator", 0, {**CC.PRESETS["paper"], "seed": 0}, out)
    assert seen == [[".fits.pkl.abc.tmp", "fits.pkl", "history.json"]]
    assert not list((tmp_path / "ckpt").rglob("stages/*"))
    assert len(list((tmp_path / "ckpt").rglob("datasets/simulator-*.pkl"))) == 1


def test_a_finished_run_removing_its_committed_stages_leaves_its_commit_clean(tmp_path):
    """A run whose stages travel in the repository removes them when it finishes: that is the
    run's own doing, like rewriting its outputs under figures/, not a change to the code."""
    import subprocess

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True)

    for rel in ("code.py", "figures/out.md", "runs/r/stages/fits.pkl"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "c")
    clean = git_commit(tmp_path)
    assert len(clean) == 40
    (tmp_path / "runs/r/stages/fits.pkl").unlink()
    (tmp_path / "figures/out.md").write_text("y")
    assert git_commit(tmp_path) == clean
    (tmp_path / "code.py").write_text("y")
    assert git_commit(tmp_path) == clean + "-dirty"


def test_a_checkpointed_result_records_the_commit_its_computation_started_at(tmp_path, monkeypatch):
    """HEAD may move, and the tree change, during a computation of hours: the result names the
    commit of the code that started it."""
    head = ["started-at"]
    monkeypatch.setattr(_study.cio, "git_commit", lambda *a: head[0])

    def compute():
        head[0] = "moved-to"  # a commit lands, or the run removes its stages, while it computes
        return {"info": {}}

    out = _study.Output(tmp_path / "o", study="demo", scale="paper", progress=False)
    r = out.checkpointed({"seed": 0}, "part", "seed", "label", [], compute)
    assert r["info"]["git_commit"] == "started-at"


def test_batched_neural_calibration_heads_equal_the_sequential_fits():
    # nc_heads="batched": the H fits of Neural Calibration as one vmapped program, each on its own
    # bootstrap draw of D_val, equal to the sequential fits to float32 rounding (predictions)
    import jax

    rng = np.random.default_rng(0)
    n = 4000
    fields = np.stack([rng.integers(0, 6, n), rng.integers(0, 4, n)], 1).astype(np.int32)
    logits = (rng.normal(-2.0, 1.0, n) + 0.4 * (fields[:, 0] - 2.5)).astype(np.float32)
    labels = (rng.random(n) < 1 / (1 + np.exp(-(logits - 0.4 * (fields[:, 0] - 2.5))))).astype(np.float32)
    val = {"logits": logits, "labels": labels, "fields": fields, "embedding": None, "oracle": None}
    methods = [m for m in CC.METHODS if m.name == "Neural Calibration"]
    cfg = {"head_fits": 3, "head_draw": "bootstrap", "nc_steps": 60}
    seq = CC._fit_val_methods(methods, val, {}, {**cfg, "nc_heads": "sequential"}, [0, 1], jax.random.key(2))
    bat = CC._fit_val_methods(methods, val, {}, {**cfg, "nc_heads": "batched"}, [0, 1], jax.random.key(2))
    ctx = {"fields": fields}
    preds = [[np.asarray(CC.ncal.predict(h, logits, context=ctx)) for h in f.heads["Neural Calibration"]]
             for f in (seq, bat)]
    for a, b in zip(*preds, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)
    assert np.abs(preds[0][0] - preds[0][1]).max() > 1e-4  # the draws differ, so do the heads


@pytest.mark.filterwarnings("ignore::calib_jax.calibrators.CalibrationFallbackWarning")
def test_sag_heads_fitted_together_are_the_heads_fitted_one_by_one():
    # sag_heads="together": the H SAG heads of a method in one fit_many call, every head's
    # partitions evaluated together, each head on its own bootstrap draw of D_val: the heads of the
    # one-by-one fits to float32 rounding carried through the fit (objectives 1e-4 relative, as
    # tests/test_lbfgs_lockstep.py), each on its own draw
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(0)
    n, m = 10_000, 6
    emb = rng.normal(size=(n, m)).astype(np.float32)
    logits = (2 * emb[:, 0]).astype(np.float32)
    labels = (rng.random(n) < 1 / (1 + np.exp(-emb[:, 0] - 0.5 * emb[:, 1]))).astype(np.float32)
    val = {"logits": logits, "labels": labels, "fields": np.zeros((n, 1), np.int32), "embedding": emb, "oracle": None}
    methods = [m for m in CC.METHODS if m.name == "VR-SAG+TS [eq. 8-11]"]
    cfg = {"head_fits": 3, "head_draw": "bootstrap", "sag_steps": 40, "head_rows": None}
    fitted = {way: CC._fit_val_methods(methods, val, {}, {**cfg, "sag_heads": way}, [0], jax.random.key(2))
              for way in ("sequential", "lockstep", "together")}
    draws = [CC._draw(n, jax.random.fold_in(jax.random.key(2), 10_000 + h), "bootstrap") for h in range(3)]
    o, sgn, zt = jnp.asarray(logits), jnp.asarray(2 * labels - 1), jnp.asarray(emb).T

    def reached(params, h):
        theta = CC.sag._Theta(params.W, params.b, params.log_tau, params.beta)
        f = jax.vmap(lambda t: CC.sag._objective(t, o, sgn, zt, jax.nn.sigmoid(o), jnp.asarray(draws[h]), 0.1, 0.5,
                                                 False, True))
        return np.asarray(f(theta))

    heads = {way: f.heads["VR-SAG+TS [eq. 8-11]"] for way, f in fitted.items()}
    for h in range(3):
        base = reached(heads["sequential"][h], h)
        for way in ("lockstep", "together"):
            np.testing.assert_allclose(reached(heads[way][h], h), base, rtol=1e-4, err_msg=f"{way}, head {h}")
    assert float(jnp.max(jnp.abs(heads["together"][0].W - heads["together"][1].W))) > 1e-3  # own keys and draws
