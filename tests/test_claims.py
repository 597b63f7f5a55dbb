"""The claims ledger and the README's result blocks are generated from committed outputs."""

from __future__ import annotations

import csv
import json

import pytest

from experiments import claims as C
from experiments import readme as R


def _cited_value(source: str):
    path, key = source.split("#", 1)
    return C.lookup(json.loads((C.ROOT / path).read_text()), key)


def test_every_row_cites_the_value_it_reports():
    rows = C.ledger()
    assert rows, "the ledger is empty"
    for r in rows:
        assert set(r) == set(C.HEADER)
        if r["source"]:
            assert _cited_value(r["source"]) == pytest.approx(r["ours"]), r["claim"]
            assert r["scale"] in {"paper", "quick", "smoke"}
            if r["ci_low"] != "":
                assert r["ci_low"] <= r["ours"] + 1e-12 <= r["ci_high"] + 2e-12, r["claim"]
        else:
            assert r["verdict"] in {"not attempted", "not run yet"} and r["note"], r["claim"]


def test_committed_ledger_equals_its_regeneration(tmp_path):
    committed = C.FIGURES / "claims" / "claims.csv"
    assert committed.exists(), "run `python -m experiments.claims` and commit figures/claims/"
    C.write(C.ledger(), tmp_path)
    with open(committed) as a, open(tmp_path / "claims.csv") as b:
        assert list(csv.reader(a)) == list(csv.reader(b))


def test_readme_blocks_equal_their_regeneration():
    text = R.README.read_text()
    for name in R.BLOCKS:
        assert f"<!-- BEGIN generated:{name} -->" in text and f"<!-- END generated:{name} -->" in text, name
    assert R.render(text) == text, "run `python -m experiments.readme` and commit README.md"
