"""Every registered study, end to end on its smoke preset, plus the harness itself.

The smoke tests are generated from :mod:`experiments.registry`: a study added there is
tested here without a new test. Each run writes into a temporary folder and must leave its
tables (CSV + Markdown), its figures (PNG + PDF) and a provenance record naming the study,
the scale, the seed, the command and the wall time.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from calib_jax import io as cio
from experiments import _study, registry
from experiments.__main__ import list_studies
from experiments.__main__ import main as experiments_main

# Study-specific checks on top of the generic ones: (summary, out_dir) -> None.


def _mc_spearman(summary: dict, out: Path) -> None:
    for design, s in summary["designs"].items():
        for stem in (f"fig3_spearman_matrix_{design}", f"fig1_spearman_with_oracle_brier_{design}"):
            assert (out / f"{stem}.png").exists() and (out / f"{stem}.pdf").exists()
        with np.load(out / f"trials_{design}.npz") as z:
            assert z["values"].shape == (s["n_trials"], len(z["names"]))
        for m, (lo, hi) in s["interval"].items():
            assert -1.0 <= lo <= s["rho"][m] + 1e-9 and s["rho"][m] - 1e-9 <= hi <= 1.0
        d = s["paired"]["lcce - ece"]
        assert d["lo"] <= d["diff"] + 1e-9 and d["diff"] - 1e-9 <= d["hi"]
        assert 0.0 <= d["share_a_better"] <= 1.0
    assert (out / "designs_side_by_side.md").exists()


def _metric_accuracy(summary: dict, out: Path) -> None:
    assert 0.0 <= summary["cll_mean_accuracy"] <= 1.0
    assert (out / "ll_vs_cll_mean_std.md").exists()


def _lcce_sensitivity(summary: dict, out: Path) -> None:
    assert (out / "table6_subsample.md").exists() and (out / "restart_noise.csv").exists()
    for s in summary["designs"].values():
        assert np.all(np.abs(np.asarray(s["grid_rho"])) <= 1.0)
        assert {"lcce", "ece"} <= set(s["interval"]) and "lcce - ece" in s["paired"]
    full = summary["table6"]["by_subsample"]["all"]
    assert full["median_rel_dev"]["eq12"] == 0.0 and full["paper"] is not None


def _equals_the_code_before_the_fast_fits(out: Path) -> None:
    """The calibrator comparison after the fast SAG fits (fused objective, lax.map over
    partitions, fused predict, radix-sorted MCE segments) gives the values of the code before
    them (commit 9b4c291, ``tests/data/compare_smoke_9b4c291.npz``) at the same settings --
    every L-BFGS iteration run, ``sag_stop='none'`` -- within float32 rounding: 1e-5 relative,
    1e-6 absolute.

    AUC and AUCDiff are rank statistics and move in steps, not by rounding: on the smoke
    preset's evaluation split (8,766 rows, about 262 clicks, P x N = 2.2e6 pairs) one click/no-click
    pair that changes order moves the AUC by 1 / (P N) = 4.5e-7, and a pair of scores that
    becomes tied (or untied) by half of that. The calibrated scores are float32, and a last-bit
    difference in two nearly equal scores of different groups (XLA's summation order follows
    the machine's vector width) reorders such a pair. Measured: 3.6e-7 on AUCDiff here (one half
    step), 1.4e-6 on another machine (four). Those keys get eight half steps: 2e-6 on the AUC,
    3e-6 on AUCDiff (divided by the backbone's AUC, 0.66)."""
    golden = np.load(Path(__file__).parent / "data" / "compare_smoke_9b4c291.npz")
    with np.load(out / "per_split.npz") as now:
        assert set(now.files) == set(golden.files)
        for k in golden.files:
            atol = {"AUC": 2e-6, "AUCDiff": 3e-6}.get(k.rsplit("/", 1)[-1], 1e-6)
            np.testing.assert_allclose(now[k], golden[k], rtol=1e-5, atol=atol, err_msg=k)


def _compare_calibrators(summary: dict, out: Path) -> None:
    _equals_the_code_before_the_fast_fits(out)
    for stem in ("table1", "table2", "table3", "table4", "table5", "claims"):
        assert (out / f"{stem}.csv").exists() and (out / f"{stem}.md").exists()
    assert (out / "table1.tex").exists() and (out / "intervals.csv").exists()
    with np.load(out / "per_split.npz") as per_split:  # every per-split value
        assert np.all(np.isfinite(per_split["simulator/SAG+TS/LCCE"]))
        # the uncalibrated backbone's AUCDiff against itself is exactly 0
        np.testing.assert_array_equal(per_split["simulator/Uncal/AUCDiff"], 0.0)
    protocols = {c["protocol"] for c in summary["claims"]}
    assert protocols == {"reference", "paper (eq. 8-11)"}
    for c in summary["claims"]:  # paired intervals contain their estimates
        assert c["rows_lo"] <= c["rows_diff"] + 1e-12 and c["rows_diff"] - 1e-12 <= c["rows_hi"]
        assert c["refit_lo"] <= c["refit_diff"] + 1e-12 and c["refit_diff"] - 1e-12 <= c["refit_hi"]
    marks = summary["marks"]["simulator"]["LCCE"]
    assert sum(m in ("best", "significantly best") for m in marks.values()) == 1
    # the refits measure what the table measures: folds of fresh impressions of the table's test
    # size, each split as a table split, so the two estimates of a difference agree within noise
    info = summary["info"]["simulator"]
    assert info["refit_rows"].startswith("fresh") and info["fold_rows"] == info["n_standard_test"]
    assert info["refit_ho_rows"] == info["n_ho"]
    for c in summary["claims"]:
        assert c["refit_lo"] <= c["paper_t_hi"] and c["paper_t_lo"] <= c["refit_hi"], c


def _textbook(summary: dict, out: Path) -> None:
    assert (out / "notes.md").exists() and (out / "table.tex").exists()


def _simulator_stats(summary: dict, out: Path) -> None:
    assert summary["auction"]["impressions"] > 0 and (out / "results.json").exists()


def _calibrated_logloss(summary: dict, out: Path) -> None:
    from experiments import calibrated_logloss as S

    for kind in ("linear", "logistic"):
        assert (out / f"{kind}_accuracy.csv").exists()
        assert (out / f"{kind}_cal_minus_plain.md").exists()
        for row in summary[kind]["accuracy"].values():
            assert 0.0 <= row["accuracy"] <= 1.0 and row["lo"] <= row["accuracy"] <= row["hi"]
        for d in summary[kind]["cal_minus_plain"].values():  # paired differences of accuracies
            assert -1.0 <= d["lo"] <= d["diff"] <= d["hi"] <= 1.0
        for d in summary[kind]["std_cal_minus_plain"].values():  # sd differences, paired by round
            assert d["lo"] <= d["diff"] <= d["hi"] and d["rounds"] == 2
    std = summary["ctr_std_cll_minus_ll"]
    assert set(std) == {n for pair in S.CTR_COMPARISONS for n in pair}
    assert all(d["lo"] <= d["hi"] and d["runs"] == summary["ctr_n_reps"] for d in std.values())
    prov = json.loads((out / "provenance.json").read_text())
    assert {"linear", "logistic", "ctr training", "ctr metrics"} <= set(prov["phase_seconds"])
    assert (out / "ctr_accuracy.md").exists()
    assert (out / "ctr_ll_vs_cll.png").exists() and (out / "ctr_ll_vs_cll.pdf").exists()
    assert len(summary["ctr"]) == len(S.CTR_COMPARISONS)
    # the architecture part (smoke: DeepFM against FNN, the one printed pair of the two)
    assert list(summary["arch"]) in (["DeepFM vs FNN"], ["FNN vs DeepFM"])
    assert set(summary["arch_std_cll_minus_ll"]) == {"DeepFM", "FNN"} and summary["arch_n_reps"] == 2
    d = summary["arch_cll_minus_ll"][next(iter(summary["arch"]))]
    assert -1.0 <= d["lo"] <= d["hi"] <= 1.0 and -1.0 <= d["diff"] <= 1.0
    assert {"arch DeepFM training", "arch FNN metrics"} <= set(prov["phase_seconds"])
    for table in ("arch_accuracy", "arch_cll_minus_ll", "arch_mean_std", "arch_std_cll_minus_ll"):
        assert (out / f"{table}.md").exists()
    # the smoke run checkpointed the CTR part and each architecture: the same command again reads
    # them back (no training) and writes the same tables
    again = out.parent / "again"
    _study.run_entry(registry.get("calibrated_logloss"),
                     ["--smoke", "--out", str(again), "--no-progress", *_smoke_sets("calibrated_logloss")])
    resumed = json.loads((again / "provenance.json").read_text())
    assert sorted(resumed["resumed"]) == ["arch-DeepFM", "arch-FNN", "ctr"]
    assert {"ctr training", "arch FNN training"} <= set(resumed["phase_seconds"])
    for name in ("ctr_accuracy.csv", "ctr_std_cll_minus_ll.csv", "arch_accuracy.csv", "arch_mean_std.csv"):
        assert (again / name).read_bytes() == (out / name).read_bytes(), name


def _topn(summary: dict, out: Path) -> None:
    assert set(summary) == ({f"{r}/{c}" for r in ("ItemKNN", "BPR") for c in ("platt", "isotonic")}
                            | {f"ML-100K/{r}/{c}" for r in ("ItemKNN", "MF") for c in ("histogram_binning", "isotonic")})
    # the rating task on the MovieLens-100K copy inside the installed recbole (the test extra)
    assert json.loads((out / "provenance.json").read_text())["movielens"]["ratings"] == 4000
    assert (out / "table_ece_at_n_ml100k.md").exists()
    for f in ("table_ece_at_n.md", "table_ece_at_n_fixed_bins.md", "sensitivity.png", "ece_vs_n.pdf",
              "provenance.json"):
        assert (out / f).exists()
    # Original, VAD and TNF, each with the adaptive-bin ECE@N, RDECE@N and the fixed-bin ECE@N
    assert {f"ECE@N {m}" for m in ("original", "VAD", "TNF")} <= set(summary["BPR/platt"])
    assert {"ECE@N TNF - VAD", "RDECE@N TNF - original"} <= set(summary["BPR/platt"])
    for name, v in [*summary["BPR/platt"].items(), *summary["ML-100K/MF/isotonic"].items()]:
        if name == "data":
            continue
        if isinstance(v, dict):  # paired TNF - original difference with its t-interval
            if v["n"] > 1:
                assert v["lo"] <= v["diff"] <= v["hi"], name
            else:  # one repeat (the smoke preset): no interval, documented as NaN
                assert np.isfinite(v["diff"]) and np.isnan(v["lo"]) and np.isnan(v["hi"]), name
        else:
            assert np.isfinite(v) and 0.0 <= v <= 1.0, name
    # the smoke run checkpointed every (recommender, split): the same command again reads them
    # back (no training, no fit) and writes the same tables
    again = out.parent / "again"
    _study.run_entry(registry.get("topn_calibration"),
                     ["--smoke", "--out", str(again), "--no-progress", *_smoke_sets("topn_calibration")])
    prov = json.loads((again / "provenance.json").read_text())
    assert sorted(prov["resumed"]) == ["BPR/0", "ItemKNN/0", "ML-100K/ItemKNN/0", "ML-100K/MF/0"]
    for name in ("table_ece_at_n.csv", "table_ece_at_n_fixed_bins.csv", "paired_tnf_minus_original.csv",
                 "ece_vs_n.csv", "sensitivity_alpha.csv", "table_ece_at_n_ml100k.csv"):
        assert (again / name).read_bytes() == (out / name).read_bytes(), name


def _field_calibration(summary: dict, out: Path) -> None:
    main = summary["simulator/main"]
    assert {"Base (Model-1)", "Base (Model-2)", "Platt Scaling", "Isotonic Reg."} <= set(main)
    # Platt is a monotone map of Model-1's logit: the same AUC, or 1 - AUC when the fitted
    # slope is negative (a near-useless Model-1 on tiny data can be anti-correlated on D_dev)
    a_platt, a_base = main["Platt Scaling"]["AUC"], main["Base (Model-1)"]["AUC"]
    assert min(abs(a_platt - a_base), abs(a_platt - (1.0 - a_base))) < 1e-4
    assert (out / "simulator_shift.csv").exists()
    assert (out / "field_rce_auc.png").exists()
    # the smoke run checkpointed every (data set, setting): the same command again reads them
    # back (no fit) and writes the same tables
    again = out.parent / "again"
    _study.run_entry(registry.get("field_calibration"),
                     ["--smoke", "--out", str(again), "--no-progress", *_smoke_sets("field_calibration")])
    prov = json.loads((again / "provenance.json").read_text())
    assert sorted(prov["resumed"]) == ["simulator/main", "simulator/shift"]
    for name in ("simulator_main.csv", "simulator_shift.csv", "refits_simulator_main.csv"):
        assert (again / name).read_bytes() == (out / name).read_bytes(), name


#: settings of a smoke run beyond its preset: the comparison runs every L-BFGS iteration, the
#: setting at which its values are compared with the code before the fast fits (one run checks
#: both the outputs and the values; the preset's torch-style stopping is the SAG fit's default,
#: which tests/test_sag.py fits throughout); the field-aware study checkpoints, so that its
#: extra check can run it again from the checkpoints
SMOKE_SETS = {"compare_calibrators": ("sag_stop='none'",), "field_calibration": ("checkpoint=True",),
              "topn_calibration": ("checkpoint=True",), "calibrated_logloss": ("checkpoint=True",)}


def _smoke_sets(name: str) -> list[str]:
    return [a for item in SMOKE_SETS.get(name, ()) for a in ("--set", item)]

#: studies whose outputs are tables only (the calibrator comparison reports Tables 1-5)
TABLES_ONLY = {"compare_calibrators", "printed_tables", "interval_coverage", "world_match", "world_match_rows"}

def _ablation(summary, out):
    assert {r[0] for r in summary["rows"]} == {"simulator"}  # the smoke preset's one world
    assert {r[1] for r in summary["rows"]} == {"partitions", "groups", "lam_v"}
    assert (out / "fig2.png").exists()


def _grouping(summary, out):
    assert (out / "fig7.pdf").exists()
    # within-group variance never exceeds the total variance (law of total variance), per world
    for world in {r[0] for r in summary["rows"]}:
        rows = [r for r in summary["rows"] if r[0] == world]
        total = [r for r in rows if r[1].startswith("none")][0]
        for r in rows:
            assert r[4] <= total[4] * (1 + 1e-5) and r[5] <= total[5] * (1 + 1e-5)
    # the paired differences are the differences of the table's means (same fits, same folds)
    means = {(r[0], r[1].split(" ")[0], r[3].split(" ")[0]): r[4:6] for r in summary["rows"]}
    for d in summary["differences"]:
        a, b = d[1].split(" - ")
        j = ("score", "oracle").index(d[3])
        assert d[4] == pytest.approx(means[(d[0], a, d[2])][j] - means[(d[0], b, d[2])][j], rel=1e-9, abs=1e-12)
        assert d[5] <= d[4] <= d[6]


EXTRA: dict[str, Callable[[dict, Path], None]] = {
    "ablation": _ablation,
    "grouping": _grouping,
    "mc_spearman": _mc_spearman,
    "mc_spearman_simulator": _mc_spearman,
    "metric_accuracy": _metric_accuracy,
    "mc_lcce_sensitivity": _lcce_sensitivity,
    "textbook_lab": _textbook,
    "simulator_stats": _simulator_stats,
    "compare_calibrators": _compare_calibrators,
    "calibrated_logloss": _calibrated_logloss,
    "topn_calibration": _topn,
    "field_calibration": _field_calibration,
}


#: smoke runs dominated by XLA compilation (20-90 s each on the 2-core machine, about 7
#: CPU-minutes together, measured 2026-11-27): `make test-fast` leaves them out, `make test`
#: (CI) runs them
SLOW_SMOKE = {"mc_std", "mc_lcce_sensitivity", "mc_ctr_sweep", "mc_sample_size",
              "mc_improvement", "calibrated_logloss", "metrics_demo", "topn_calibration", "ablation",
              "field_calibration", "interval_coverage"}


#: Monte Carlo studies whose ``metrics`` setting takes user metrics ("module:function"); the smoke
#: test adds one (``calib_jax.metrics:mse``, not a panel column) and finds it in a table
USER_METRIC_STUDIES = {"mc_spearman", "mc_std", "mc_sample_size", "mc_ctr_sweep", "metric_atlas",
                       "metric_accuracy", "mc_improvement"}

#: studies that reproduce a paper's experiment on stand-in data: each names its departures
PAPER_STUDIES = {"compare_calibrators", "grouping", "ablation", "field_calibration", "calibrated_logloss",
                 "topn_calibration"}


@pytest.mark.parametrize("entry", [
    pytest.param(e, id=e.name, marks=pytest.mark.slow if e.name in SLOW_SMOKE else ())
    for e in registry.STUDIES])
def test_study_smoke(entry, tmp_path, monkeypatch):
    monkeypatch.setenv("CALIB_JAX_CHECKPOINTS", str(tmp_path / "ckpt"))
    out = tmp_path / "out"
    sets = _smoke_sets(entry.name)
    module = importlib.import_module(f"experiments.{entry.module}")
    if entry.module in USER_METRIC_STUDIES:  # a metric from outside the panel rides along
        sets += ["--set", f"metrics={[*module.PRESETS['smoke']['metrics'], 'calib_jax.metrics:mse']!r}"]
    summary = _study.run_entry(entry, ["--smoke", "--out", str(out), "--no-progress", *sets])
    files = {p.name for p in out.iterdir()}
    suffixes = {Path(f).suffix for f in files}
    assert {".csv", ".md"} <= suffixes, files
    if entry.name not in TABLES_ONLY:
        assert {".png", ".pdf"} <= suffixes, files
    for f in files:  # every table has both forms, every figure both formats
        stem, ext = Path(f).stem, Path(f).suffix
        if ext == ".csv" and f not in {"metrics_long.csv"}:
            assert f"{stem}.md" in files or f"{stem}.png" in files, f
        if ext == ".png":
            assert f"{stem}.pdf" in files, f
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["study"] == entry.name and prov["scale"] == "smoke"
    assert prov["reproduces"] == entry.reproduces
    assert prov["seed"] == prov["config"]["seed"]
    assert prov["wall_time_s"] > 0 and "git_commit" in prov and prov["devices"]
    assert prov["cpu"] == cio.cpu_description()  # another CPU type can round a trained study otherwise
    assert prov["command"].startswith(f"python -m experiments run {entry.name} --smoke")
    for k, v in entry.defaults.items():
        assert prov["config"][k] == v
    assert json.loads(json.dumps(prov["summary"])) == prov["summary"]
    # the departures the docstring names are the provenance's, word for word
    assert prov.get("departures", []) == _study.docstring_departures(module.__doc__)
    if entry.name in PAPER_STUDIES:
        assert prov["departures"], f"{entry.name}: its docstring names no departure from the paper"
    if entry.module in USER_METRIC_STUDIES:
        assert any(re.search(r"(^|,)mse(,|$)", line, re.M) for f in out.glob("*.csv")
                   for line in f.read_text().splitlines()), f"{entry.name}: no table reports the user metric"
    if entry.name in EXTRA:
        EXTRA[entry.name](summary, out)


# ---------------------------------------------------------------- the harness and the registry
def test_registry_names_are_unique_and_modules_follow_the_shape():
    import importlib

    names = [s.name for s in registry.STUDIES]
    assert len(names) == len(set(names))
    for entry in registry.STUDIES:
        mod = importlib.import_module(f"experiments.{entry.module}")
        assert set(mod.PRESETS) == set(_study.SCALES), entry.name
        assert callable(mod.run) and callable(mod.main), entry.name
        for scale in _study.SCALES:  # every preset is JSON-able and accepts the entry defaults
            cfg = _study.preset(mod, scale, entry.defaults)
            assert json.loads(json.dumps(cfg)) == json.loads(json.dumps(cfg))
        assert "argparse" not in Path(mod.__file__).read_text(), entry.name


def test_every_study_has_the_same_options(capsys):
    import importlib

    option_sets = set()
    for entry in registry.STUDIES:
        if entry.module != entry.name:
            continue
        mod = importlib.import_module(f"experiments.{entry.module}")
        with pytest.raises(SystemExit) as e:
            mod.main(["--help"])
        assert e.value.code == 0
        text = capsys.readouterr().out
        opts = {w.rstrip(",") for w in text.split() if w.startswith("--")}
        assert {"--smoke", "--quick", "--paper", "--seed", "--out", "--set", "--resume",
                "--no-progress"} <= opts, entry.name
        option_sets.add(frozenset(o for o in opts if o in {"--smoke", "--quick", "--paper", "--seed",
                                                           "--out", "--set", "--resume",
                                                           "--no-progress", "--show-config"}))
    assert len(option_sets) == 1


def test_list_shows_every_study_with_commands_and_times():
    text = list_studies()
    for entry in registry.STUDIES:
        row = next(line for line in text.splitlines() if line.startswith(f"| `{entry.name}` |"))
        assert entry.reproduces in row and entry.title in row
    assert "python -m experiments run <study>" in text
    assert experiments_main(["list"]) is None


def test_main_job_is_read_from_the_registry():
    assert [s.name for s in registry.main_job()] == [s.name for s in registry.STUDIES if s.main_job]
    with pytest.raises(KeyError, match="unknown study"):
        registry.get("no_such_study")
    with pytest.raises(SystemExit, match="unknown study"):
        experiments_main(["run", "no_such_study"])


def test_overrides_are_typed_and_checked():
    base = {"n": 10, "rate": 0.5, "sizes": [1, 2], "groups": (1, 2), "name": "tiny",
            "flag": False, "nested": {"k": 3}, "maybe": None}
    cfg = _study.apply_overrides(base, ["n=20", "rate=1", "sizes=[3,4,5]", "groups=7", "name=default",
                                        "flag=True", "nested.k=4", "maybe=[1]"])
    assert cfg == {"n": 20, "rate": 1.0, "sizes": [3, 4, 5], "groups": (7,), "name": "default",
                   "flag": True, "nested": {"k": 4}, "maybe": [1]}
    assert isinstance(cfg["rate"], float) and base["n"] == 10  # the preset is not mutated
    with pytest.raises(ValueError, match="unknown setting 'nn'"):
        _study.apply_overrides(base, ["nn=1"])
    with pytest.raises(ValueError, match="expected a value like 10"):
        _study.apply_overrides(base, ["n=1.5"])
    with pytest.raises(ValueError, match="true/false"):
        _study.apply_overrides(base, ["flag=1"])
    # the JSON-style words the message names work too
    assert _study.apply_overrides(base, ["flag=true"])["flag"] is True
    assert _study.apply_overrides({"flag": True}, ["flag=false"])["flag"] is False
    assert _study.apply_overrides(base, ["maybe=null"])["maybe"] is None
    with pytest.raises(ValueError, match="key=value"):
        _study.apply_overrides(base, ["n"])
    with pytest.raises(ValueError, match="not a nested setting"):
        _study.apply_overrides(base, ["n.k=1"])


def test_optional_settings_enter_the_configuration_only_away_from_their_default():
    """A study's OPTIONAL_SETTINGS (compare_calibrators' ways of fitting the D_val heads) are
    accepted by --set and checked against their domain; a configuration holds one only at a
    value other than its default, so a run at the default keeps the configuration, and the
    checkpoint folder's hash, it had before the setting existed: the smoke preset as it is,
    and the quick and paper presets (which fit the SAG heads together) asked for the
    sequential ways, as the committed 15M-exposure runs were made."""
    from calib_jax.data.simulator import config_hash
    from experiments import compare_calibrators as CC

    entry = registry.get("compare_calibrators")
    _, _, plain = _study.resolve(entry, ["--smoke", "--show-config"])
    assert not set(CC.OPTIONAL_SETTINGS) & set(plain)
    assert config_hash(plain) == config_hash({**_study.preset(CC, "smoke", entry.defaults), "seed": 0})
    _, _, chosen = _study.resolve(entry, ["--smoke", "--show-config", "--set", "sag_heads=together",
                                          "--set", "nc_heads=batched"])
    assert (chosen["sag_heads"], chosen["nc_heads"]) == ("together", "batched")
    assert config_hash(chosen) != config_hash(plain)
    # asked for at its default, an optional setting stays out: the same configuration and hash
    _, _, at_default = _study.resolve(entry, ["--smoke", "--show-config", "--set", "sag_heads=sequential"])
    assert at_default == plain
    # the paper preset fits the SAG heads together and Neural Calibration's one by one; asked for
    # the sequential ways, its configuration is the one made before the settings existed (the
    # 15M runs' provenance)
    _, _, paper = _study.resolve(entry, ["--paper", "--show-config"])
    assert paper["sag_heads"] == "together" and "nc_heads" not in paper
    _, _, sequential = _study.resolve(entry, ["--paper", "--show-config", "--set", "sag_heads=sequential",
                                              "--set", "nc_heads=sequential"])
    assert sequential == {k: v for k, v in paper.items() if k not in CC.OPTIONAL_SETTINGS}
    with pytest.raises(ValueError, match="'sag_heads' must be one of 'sequential', 'lockstep', 'together'"):
        _study.resolve(entry, ["--smoke", "--show-config", "--set", "sag_heads=fast"])
    with pytest.raises(ValueError, match=r"unknown setting 'heads'.*sag_heads \(optional\)"):
        _study.resolve(entry, ["--smoke", "--show-config", "--set", "heads=1"])
    with pytest.raises(ValueError, match="unknown setting 'sag_heads'"):  # a study without it
        _study.apply_overrides({"n": 1}, ["sag_heads=together"])


def test_checkpoints_only_when_asked(tmp_path, monkeypatch):
    monkeypatch.setenv("CALIB_JAX_CHECKPOINTS", str(tmp_path))
    out = _study.Output(tmp_path / "o", study="s")
    assert out.checkpoint_dir({"checkpoint": False}) is None
    assert out.checkpoint_dir({"checkpoint": True}, "n10") == tmp_path / "s" / "n10"
    resumed = _study.Output(tmp_path / "o", study="s", resume=True)
    assert resumed.checkpoint_dir({}) == tmp_path / "s"


def test_show_config_prints_the_resolved_preset(capsys):
    summary = _study.run_entry(registry.get("mc_std"), ["--paper", "--set", "n=123", "--seed", "7",
                                                        "--show-config"])
    assert summary == {}
    cfg = json.loads(capsys.readouterr().out)
    assert cfg["n"] == 123 and cfg["seed"] == 7 and cfg["n_trials"] == 500


def test_mc_improvement_leaves_out_metrics_the_recalibration_cannot_change():
    from experiments import mc_improvement as MI

    rng = np.random.default_rng(0)
    T = 40
    imp = np.stack([rng.normal(0, 1e-7, (T, 2)) * (rng.random((T, 2)) < 0.1),  # rank metric: rounding
                    rng.normal(-1e-3, 1e-3, (T, 2)),                              # ECE: moves
                    np.zeros((T, 2)),                                             # the reference itself
                    np.full((T, 2), 2 * MI.ROUNDING)], axis=-1)                   # just above rounding
    names = ["one_minus_auc", "ece", "oracle_brier", "mae"]
    kept, kept_names, invariant = MI.drop_invariant(imp, names)
    assert kept_names == ["ece", "oracle_brier", "mae"] and list(invariant) == ["one_minus_auc"]
    assert invariant["one_minus_auc"] == pytest.approx(np.max(np.abs(imp[..., 0])))
    np.testing.assert_array_equal(kept, imp[..., 1:])


def test_harness_records_chunks_resumed_from_other_code(tmp_path, capsys):
    import types
    import warnings

    from calib_jax import montecarlo as mc

    def run(config, out):
        warnings.warn(mc.ResumedChunksWarning("2 of 5 chunks were reused ... (2 by abc; this code: def)"),
                      stacklevel=2)
        return {"ok": 1}

    out = _study.Output(tmp_path / "o", study="fake", scale="smoke", progress=False)
    _study.execute(types.SimpleNamespace(run=run, __name__="fake"), {"seed": 0}, out, command="fake")
    prov = json.loads((tmp_path / "o" / "provenance.json").read_text())
    assert prov["resumed_from_other_code"] == ["2 of 5 chunks were reused ... (2 by abc; this code: def)"]
    assert "warning: 2 of 5 chunks" in capsys.readouterr().out

