"""benchmarks/compare_reruns.py: the page that says how far a rerun of compare_calibrators under
other fitting options moved the study, on two small output folders made by hand."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from benchmarks import compare_reruns as R

CLAIM_COLUMNS = ["dataset", "protocol", "claim", "metric", "refit_diff", "refit_lo", "refit_hi"]


def _folder(path, config, seconds, splits, claims):
    path.mkdir()
    (path / "provenance.json").write_text(json.dumps({
        "study": "compare_calibrators", "git_commit": "abcdef0123", "created_utc": "2026-12-05T00:00:00",
        "config": config, "datasets": {"w": {"phase_seconds": seconds}}}))
    np.savez(path / "per_split.npz", **{"/".join(k): v for k, v in splits.items()})
    with open(path / "claims.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CLAIM_COLUMNS)
        w.writerows(claims)
    return path


def _pair(tmp_path, moved_other: bool = False):
    rng = np.random.default_rng(0)
    base = {("w", m, metric): rng.normal(1.0, 0.1, 100) for m in ("Uncal", "SAG+TS", "Platt scaling")
            for metric in ("ECE", "LCCE")}
    after = {k: v.copy() for k, v in base.items()}
    after[("w", "SAG+TS", "LCCE")] = base[("w", "SAG+TS", "LCCE")] + 0.02  # 0.2 sd on every split
    if moved_other:
        after[("w", "Platt scaling", "ECE")] = np.nextafter(base[("w", "Platt scaling", "ECE")], 2.0)
    claims_b = [["w", "reference", "SAG+TS < Uncal", "LCCE", "-1e-3", "-2e-3", "-1e-4"],
                ["w", "reference", "SAG+TS < Uncal", "ECE", "-1e-3", "-2e-3", "1e-4"]]
    claims_a = [claims_b[0][:4] + ["-1e-3", "-2e-3", "2e-4"], claims_b[1]]
    config = {"n_splits": 100, "methods": ["Uncal", "SAG+TS", "Platt scaling"]}
    before = _folder(tmp_path / "before", config, {"fits": 100.0, "splits": 50.0}, base, claims_b)
    rerun = _folder(tmp_path / "after", {**config, "sag_heads": "together"}, {"fits": 60.0, "splits": 50.0},
                    after, claims_a)
    return before, rerun


def test_the_page_names_the_option_the_changed_method_its_shift_and_the_turned_verdict(tmp_path):
    before, rerun = _pair(tmp_path)
    text, header, rows = R.page(before, rerun)
    assert "`sag_heads` 'sequential' -> 'together'" in text and "Nothing else in the configuration differs" in text
    assert "| w | fits | 100 | 60 | 0.60 |" in text and "| w | **all phases** | 150 | 110 | 0.73 |" in text
    assert "1 of 3 methods changed (SAG+TS); the other 2 repeat to the bit." in text and "Unexpected" not in text
    assert "Compared on the data sets both runs hold: w." in text and "Both runs are of one commit" in text
    # the changed method's rows: ECE the same, LCCE moved by 0.02 on every split
    ece, row = rows
    assert ece[:3] == ["w", "SAG+TS", "ECE"] and ece[5] == 0.0 and ece[6] == 0.0
    sd = float(np.std(np.load(before / "per_split.npz")["w/SAG+TS/LCCE"], ddof=1))
    assert row[:3] == ["w", "SAG+TS", "LCCE"] and row[5] == pytest.approx(0.02)
    assert row[6] == pytest.approx(0.02 / sd)
    assert len(header) == len(row)
    # the LCCE ordering's interval now crosses 0: reproduces -> inconclusive; ECE's keeps its verdict
    assert "1 of 2 keep their verdict" in text
    assert "| w | reference | SAG+TS < Uncal | LCCE | reproduces: -0.001 [-0.002, -0.0001] | inconclusive:" in text


def test_a_method_no_changed_option_fits_is_flagged_when_its_bits_move(tmp_path):
    before, rerun = _pair(tmp_path, moved_other=True)
    text, _, rows = R.page(before, rerun)
    assert "**Unexpected: Platt scaling (ECE) changed although no differing option fits them.**" in text
    assert {r[1] for r in rows} == {"SAG+TS", "Platt scaling"}


def test_ledger_rows_citing_the_folder_are_compared_by_verdict(tmp_path):
    before, rerun = _pair(tmp_path)
    cols = ["paper", "place", "claim", "scale", "world", "verdict", "source", "ours", "ci_low", "ci_high"]

    def ledger(name, verdict):
        path = tmp_path / name
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(cols)
            w.writerow(["P", "Table 1", "SAG < TS", "paper", "w", verdict, "figures/before/provenance.json#x",
                        "-1e-5", "-2e-5", "1e-6"])
            w.writerow(["P", "Fig 1", "elsewhere", "paper", "", "refuted", "figures/other/provenance.json#x",
                        "1", "0", "2"])
        return path

    text, _, _ = R.page(before, rerun, ledger("a.csv", "reproduces"), ledger("b.csv", "inconclusive"))
    assert "0 of 1 rows citing `figures/before/` keep their verdict, and these turn:" in text
    assert "- Table 1, w: SAG < TS: reproduces (-1e-05 [-2e-05, +1e-06]) -> inconclusive" in text
    text, _, _ = R.page(before, rerun, ledger("a.csv", "reproduces"), ledger("b.csv", "inconclusive"),
                        ledger_source="figures/elsewhere/")
    assert "No row of the claims ledger cites `figures/elsewhere/`" in text


def test_main_refuses_a_folder_that_is_not_a_comparison_output(tmp_path, capsys):
    before, _ = _pair(tmp_path)
    with pytest.raises(SystemExit):
        R.main(["--before", str(before), "--after", str(tmp_path), "--out", str(tmp_path / "page")])
    assert "has no provenance.json" in capsys.readouterr().err
