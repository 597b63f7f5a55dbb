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


def _results(rng):
    """A synthetic comparison result: 3 fits x 4 folds for D_val-fitted methods, 1 x 4 for
    D_ho-fitted ones."""
    def cells(shift, H):
        return {"LCCE": shift + rng.normal(0, 1e-3, (H, 4)), "bias": -shift + rng.normal(0, 1e-3, (H, 4)),
                "AccDiff": rng.normal(0, 1e-4, (H, 4)), "AUCDiff": rng.normal(0.01, 1e-4, (H, 4))}
    crossed = {"Temperature scaling": cells(0.02, 1), "SAG+TS": cells(0.015, 3), "VR-SAG+TS": cells(0.01, 3),
               "VR-SAG+PS": cells(0.012, 3)}
    return {"r": {"crossed": crossed, "fallback_share": {m: 0.0 for m in crossed} | {"VR-SAG+PS": 0.9},
                  "refit_fallback_share": {m: 0.0 for m in crossed} | {"VR-SAG+PS": 0.7}}}


def test_best_and_accuracy_claims_pair_the_best_vrsag_with_the_best_rival():
    from experiments import compare_calibrators as CC

    res = _results(np.random.default_rng(0))
    best = {c["metric"]: c for c in CC.best_claims(res)}
    assert best["LCCE"]["claim"] == "VR-SAG+TS < SAG+TS" and best["LCCE"]["hi"] < 0
    # bias is judged on |bias|: -0.01 beats -0.015
    assert best["bias"]["claim"] == "VR-SAG+TS < SAG+TS" and best["bias"]["scale"] == "abs"
    assert best["bias"]["diff"] == pytest.approx(0.01 - 0.015, abs=1e-3)
    acc = {(c["method"], c["metric"]): c for c in CC.accuracy_claims(res)}
    assert -0.005 < acc[("VR-SAG+TS", "AccDiff")]["lo"] and acc[("VR-SAG+TS", "AUCDiff")]["lo"] > 0.005
    assert acc[("VR-SAG+PS", "AccDiff")]["fallback_share"] == 0.9
    # the refits' own fallbacks travel with the rows, and the ledger's gate reads them
    assert acc[("VR-SAG+PS", "AccDiff")]["refit_fallback_share"] == 0.7
    from experiments.ledger.grouping_tables import _shares

    assert _shares(acc[("VR-SAG+PS", "AccDiff")], single=True) == (0.7, 0.0)
    assert _shares({"fallback_share_a": 0.9, "fallback_share_b": 0.1}) == (0.9, 0.1)
    assert _shares({"fallback_share_a": 0.9, "fallback_share_b": 0.1, "refit_fallback_share_a": 0.2,
                      "refit_fallback_share_b": 0.6}) == (0.2, 0.6)
    # fits are paired by index: the same draw of D_val under both methods
    r = res["r"]
    d = CC.method_difference(r, "VR-SAG+TS", "SAG+TS", "LCCE")
    assert d["n_fits"] == 3 and d["n_splits"] == 4
    assert CC.method_difference(r, "VR-SAG+TS", "Temperature scaling", "LCCE")["n_fits"] == 3


def test_fallback_share_counts_the_calibrators_that_fell_back():
    from types import SimpleNamespace

    from experiments import compare_calibrators as CC

    assert CC._fallback_share(SimpleNamespace(fallback=np.array([[0, 1, 0], [2, 0, 0]]))) == pytest.approx(2 / 6)
    assert CC._fallback_share(SimpleNamespace(fallback=np.int32(3))) == 1.0
    assert CC._fallback_share(object()) == 0.0


def test_text_claims_pair_the_sentence_with_the_rival_the_means_pick():
    from experiments import compare_calibrators as CC

    rng = np.random.default_rng(1)
    crossed = {"Histogram binning": {"AUCDiff": -0.1 + 0.01 * rng.normal(size=(1, 4))},
               "Isotonic regression": {"AUCDiff": -0.002 + 0.001 * rng.normal(size=(1, 4))},
               "Platt scaling": {"AUCDiff": np.zeros((1, 4)), "NLL": 0.130 + 0.001 * rng.normal(size=(1, 4)),
                                 "AUC": np.full((1, 4), 0.80)},
               "Temperature scaling": {"AUCDiff": np.zeros((1, 4)), "NLL": 0.131 + 0.001 * rng.normal(size=(1, 4)),
                                       "AUC": np.full((1, 4), 0.80)},
               "VR-SAG+TS": {"AUCDiff": np.zeros((3, 4)), "NLL": 0.1302 + 0.001 * rng.normal(size=(3, 4)),
                             "AUC": 0.801 + 0.001 * rng.normal(size=(3, 4))}}
    per_split = {m: {k: list(v.ravel()) for k, v in mv.items()} for m, mv in crossed.items()}
    rows = {c["claim"]: c for c in CC.text_claims({"w": {"crossed": crossed, "per_split": per_split}})}
    hb = rows["histogram binning degrades the AUC the most"]
    assert hb["b"] == "Isotonic regression" and hb["hi"] < 0
    nll = rows["VR-SAG+TS's NLL is within 0.0006 of the best baseline"]
    assert nll["b"] == "Platt scaling"  # the lower mean NLL of the two global calibrators
    ref = crossed_t_interval(crossed["VR-SAG+TS"]["NLL"] - crossed["Platt scaling"]["NLL"])
    assert nll["diff"] == pytest.approx(ref["diff"]) and nll["lo"] == pytest.approx(ref["lo"])
    assert rows["VR-SAG+TS keeps a competitive AUC"]["b"] in ("Platt scaling", "Temperature scaling")


def test_a_finished_data_set_is_resumed_from_its_checkpoint(tmp_path, monkeypatch):
    from experiments import _study
    from experiments import compare_calibrators as CC

    monkeypatch.setenv("CALIB_JAX_CHECKPOINTS", str(tmp_path / "ckpt"))
    calls = []

    def fake(name, config, out, key, stages):
        calls.append(name)
        return {"info": {"n": len(calls)}, "crossed": {"A": {"m": np.arange(3.0)}}}

    monkeypatch.setattr(CC, "run_dataset", fake)
    out = _study.Output(tmp_path / "o", study="compare_calibrators", scale="paper", progress=False)
    config = {**CC.PRESETS["paper"], "seed": 0}
    first = CC._run_or_resume("simulator", 0, config, out)
    again = CC._run_or_resume("simulator", 0, config, out)
    assert calls == ["simulator"] and "git_commit" in again["info"]
    assert again["info"].pop("resumed_from_checkpoint").startswith("simulator-") and again["info"] == first["info"]
    np.testing.assert_array_equal(again["crossed"]["A"]["m"], np.arange(3.0))
    CC._run_or_resume("simulator", 1, config, out)  # another position: another key, computed
    CC._run_or_resume("simulator", 0, {**config, "n_splits": 99}, out)  # another setting: computed
    assert calls == ["simulator"] * 3
    # without checkpoints (the quick preset, no --resume) nothing is kept
    CC._run_or_resume("simulator", 0, {**CC.PRESETS["quick"], "seed": 0}, out)
    assert calls == ["simulator"] * 4 and len(list((tmp_path / "ckpt").rglob("*.pkl"))) == 3
