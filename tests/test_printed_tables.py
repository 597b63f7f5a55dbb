"""The printed-tables study's numbers printed twice: the rounding rule, the typed places, the ledger rows."""

from __future__ import annotations

import json

import pytest

from experiments import printed_tables as PT
from experiments.ledger.grouping_tables import claims_printed_tables
from experiments.ledger.rows import CONSISTENCY
from experiments.ledger.sources import FIGURES


def test_printed_numerals_carry_half_a_unit_of_their_last_digit():
    assert (PT.printed("0.0311", "x").value, PT.printed("0.0311", "x").half_unit) == (0.0311, 5e-5)
    assert (PT.printed("15M", "x").value, PT.printed("15M", "x").half_unit) == (15e6, 5e5)
    assert PT.printed("49.2%", "x").value == pytest.approx(0.492) and PT.printed("49.2%", "x").half_unit == 5e-4
    assert PT.printed("-0.039843", "x").half_unit == 5e-7
    assert PT.printed("20%", "x", half_unit=0.05).half_unit == 0.05  # a round number in words


def test_the_tolerance_rule_on_constructed_cases():
    P = PT.printed
    # the same quantity: 0.0311 and 0.0312 may both round from 0.03115; 0.0313 may not
    holds = PT.judge(PT.Duplicate("x", "q", "same", P("0.0311", "A"), "=", P("0.0312", "B")))
    assert holds["holds"] and holds["excess"] == pytest.approx(0.0)
    assert holds["tolerance"] == pytest.approx(1e-4)
    breaks = PT.judge(PT.Duplicate("x", "q", "same", P("0.0311", "A"), "=", P("0.0313", "B")))
    assert not breaks["holds"] and breaks["excess"] == pytest.approx(1e-4)
    # a ratio beside its parts: the rounding of the parts propagates (interval of 451K / 15M)
    parts = (P("451K", "clicks"), P("15M", "impressions"))
    ctr = PT.judge(PT.Duplicate("x", "ctr", "ratio", P("0.0311", "CTR"), "=", (PT._ratio, parts, "ratio")))
    assert ctr["holds"] and ctr["rhs"] == pytest.approx(451 / 15000)
    assert ctr["excess"] == pytest.approx(0.03105 - 451_500 / 14_500_000)  # overlap depth
    exact = (P("451000", "clicks"), P("15000000", "impressions"))  # printed to the unit: no room left
    assert not PT.judge(PT.Duplicate("x", "ctr", "ratio", P("0.0311", "CTR"), "=", (PT._ratio, exact, "ratio")))["holds"]
    # a bound the text states, read at the most favourable rounding
    gap = (PT._rel_drop, (P("0.4547", "a"), P("0.4539", "b")), "drop")
    assert PT.judge(PT.Duplicate("x", "q", "bound", gap, "<=", P("0.2%", "text")))["holds"]
    assert not PT.judge(PT.Duplicate("x", "q", "bound", gap, "<=", P("0.1%", "text")))["holds"]
    # a stated sampling slack widens the tolerance by exactly itself
    slack = PT.judge(PT.Duplicate("x", "q", "same", P("0.0311", "A"), "=", P("0.0313", "B"), slack=2e-4))
    assert slack["holds"] and slack["excess"] == pytest.approx(-1e-4)
    with pytest.raises(ValueError, match="op must be"):
        PT.judge(PT.Duplicate("x", "q", "?", P("1", "A"), "!=", P("2", "B")))


def test_every_typed_quantity_has_at_least_two_places():
    dups = PT.duplicates()
    assert {d.paper for d in dups} == {"000", "001", "002", "003", "004"}
    for d in dups:
        assert len({p.place for p in d.parts}) >= 2, d.quantity
        assert d.op in ("=", "<=", ">=") and d.quantity and d.relation
    ids = [r["id"] for r in PT.duplicate_rows()]
    assert len(ids) == len(set(ids)) == len(dups)
    # rows are grouped by paper, in paper order
    papers = [r["paper"] for r in PT.duplicate_rows()]
    assert papers == sorted(papers)


def test_what_the_printed_numbers_say():
    rows = {r["quantity"]: r for r in PT.duplicate_rows()}
    # Table 7's Aliccp CTR is ten times its clicks over its impressions
    assert not rows["Aliccp CTR"]["holds"] and rows["Aliccp CTR"]["rhs"] == pytest.approx(164 / 42000)
    # Pan et al. print the same Lending Club isotonic AUC as 0.912 (Table 1) and 0.909 (Table 6)
    assert not rows["Lending Club, Isotonic Reg., AUC"]["holds"]
    assert rows["Criteo, Neural Calibration, Field-RCE"]["holds"]
    # the textbook lab's T and Platt slope agree: a = 1 / T
    assert rows["Platt slope"]["holds"] and rows["Platt slope"]["rhs"] == pytest.approx(1 / 2.3202)
    assert PT.by_paper(PT.duplicate_rows())["002"]["violations"] == 0


def test_the_ledger_has_one_row_per_consistency_check():
    prov = json.loads((FIGURES / "printed_tables_paper" / "provenance.json").read_text())
    committed = prov["summary"]["duplicates"]
    fresh = {r["id"]: r for r in PT.duplicate_rows()}
    assert set(committed) == set(fresh), "rerun `python -m experiments run printed_tables --paper`"
    for key, r in committed.items():
        assert r["excess"] == pytest.approx(fresh[key]["excess"]) and r["holds"] == fresh[key]["holds"], key
    rows = claims_printed_tables()
    assert all(r.kind == CONSISTENCY for r in rows)
    twice = [r for r in rows if "/duplicates/" in r.source]
    assert len(twice) == len(fresh)
    assert sorted(r.source.rsplit("/", 2)[1] for r in twice) == sorted(fresh)
    assert len(rows) - len(twice) == len(PT.summarise(PT.checks()))  # one row per relation, as before
    for r in twice:
        assert r.verdict == ("reproduces" if r.ours < 0 else "refuted"), r.claim
