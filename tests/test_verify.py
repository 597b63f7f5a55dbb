"""`python -m experiments verify`, the printed-table checks and the AdAuction-like world."""

from __future__ import annotations

import numpy as np
import pytest

from experiments import printed_tables as PT
from experiments import verify as V


def test_compare_reports_numbers_that_moved_beyond_the_tolerance():
    committed = {"a": 1.0, "b": {"c": [2.0, 3.0], "flag": True, "name": "x"}, "gone": 1.0}
    rerun = {"a": 1.00001, "b": {"c": [2.0, 3.1], "flag": False, "name": "y"}, "new": 2.0}
    res = V.compare(committed, rerun, rtol=1e-4, atol=0.0)
    assert res["compared"] == 3  # booleans and strings are not numbers
    assert res["moved"] == [("b/c/1", 3.0, 3.1)]
    assert res["only_committed"] == ["gone"] and res["only_rerun"] == ["new"]
    assert V.compare(committed, rerun, rtol=0.1, atol=0.0)["moved"] == []
    assert V.TOLERANCES["compare_calibrators"][0] > V.DEFAULT_TOL[0]


def test_printed_table_checks_find_what_the_definitions_forbid():
    by = PT.summarise(PT.checks())
    # Brier = E[(pi - p)^2] cannot exceed E|pi - p|: every printed AdAuction row does
    b = by["Table 1: Brier <= Brier+"]
    assert b["violations"] == b["rows"] == 9
    assert b["max_excess"] == pytest.approx(0.0527 - 0.0352 - 1e-4)
    assert by["Table 1: Brier read as RMSE: Brier+ <= Brier"]["violations"] == 0
    # AUCDiff from Table 5's AUCs: histogram binning on AdAuction agrees, VR-SAG+TS does not
    rows = {(r["relation"], r["row"]): r for r in PT.checks()}
    hb = rows[("AUCDiff = (AUC - AUC_Uncal) / AUC_Uncal", "Histogram binning (AdAuction)")]
    assert hb["holds"] and hb["lhs"] == pytest.approx(abs(-0.1783 - (0.6747 - 0.8212) / 0.8212))
    assert not rows[("AUCDiff = (AUC - AUC_Uncal) / AUC_Uncal", "VR-SAG+TS (AdAuction)")]["holds"]
    # the triangle inequality holds in every printed row of Table 3
    assert by["Table 3: |bias| <= abs_bias"]["violations"] == 0
    # a Platt-calibrated NLL above the entropy of the 3% base rate
    (nll,) = [r for r in PT.checks() if r["relation"].startswith("NLL(Platt)")]
    assert not nll["holds"] and nll["rhs"] == pytest.approx(0.1350, abs=1e-4)


@pytest.mark.slow  # 13 s (CI time)
def test_the_adauction_world_scores_the_production_pctr_of_the_auction_winners():
    from experiments._datasets import ADAUCTION, WORLD_SCOPE, WORLDS, load_dataset

    assert set(WORLD_SCOPE) == {*WORLDS, "open_bandit"}
    d = load_dataset("simulator_adauction", seed=0, sim="tiny")
    val = d["out"].val
    p = np.clip(val.pctr.astype(np.float64), 1e-7, 1 - 1e-7)
    np.testing.assert_allclose(val.logits, np.log(p / (1 - p)), rtol=1e-5, atol=1e-5)
    assert "regime" in d["out"].field_names and ADAUCTION["ad_error_std"] > 0.55
    # selection bias: over the logged winners the production score over-estimates
    assert val.pctr.mean() > 1.3 * val.oracle.mean()
