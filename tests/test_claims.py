"""The claims ledger and the README's result blocks are generated from committed outputs."""

from __future__ import annotations

import csv
import dataclasses
import json

import numpy as np
import pytest

from experiments import claims as C
from experiments import readme as R
from experiments.ledger import grouping_metrics as GM
from experiments.ledger import grouping_tables as GT


def _cited_value(source: str):
    return C.cited_value(source)


def test_every_row_cites_the_value_it_reports():
    rows = C.ledger()
    assert rows, "the ledger is empty"
    for r in rows:
        assert isinstance(r, C.Row) and C.HEADER == [f.name for f in dataclasses.fields(r)]
        if r["source"]:
            assert _cited_value(r["source"]) == pytest.approx(r["ours"]), r["claim"]
            assert r["scale"] in {"paper", "quick", "smoke", "exact"}
            if r["ci_low"] != "":
                assert r["ci_low"] <= r["ours"] + 1e-12 <= r["ci_high"] + 2e-12, r["claim"]
        else:
            # no cited number: only rows that report none, each saying why
            assert r["verdict"] in {C.NOT_ATTEMPTED, C.SUMMARY, C.NO_INTERVAL, C.NOT_TESTED} and r["note"], r["claim"]
            assert r["ours"] == "" or r["verdict"] == C.SUMMARY, r["claim"]


def test_committed_ledger_equals_its_regeneration(tmp_path):
    committed = C.FIGURES / "claims" / "claims.csv"
    assert committed.exists(), "run `python -m experiments.claims` and commit figures/claims/"
    C.write(C.ledger(), tmp_path)
    with open(committed) as a, open(tmp_path / "claims.csv") as b:
        assert list(csv.reader(a)) == list(csv.reader(b))


def test_readme_and_results_page_blocks_equal_their_regeneration():
    texts = {path: path.read_text() for path, _ in R.DOCUMENTS}
    for name in R.BLOCKS:  # every block lives in one of the documents
        assert any(f"<!-- BEGIN generated:{name} -->" in t and f"<!-- END generated:{name} -->" in t
                   for t in texts.values()), name
    for path, prefix in R.DOCUMENTS:
        assert R.render(texts[path], prefix) == texts[path], \
            f"run `python -m experiments.readme` and commit {path.relative_to(R.C.ROOT)}"


def _fake_source(rho, paired_all):
    """A Fig-4-like summary (per-configuration) written where ``Source.cite`` can point."""
    interval = {m: [r - 0.01, r + 0.01] for m, r in rho.items()}
    summary = {"designs": {"fixed": {"n_configurations": 500, "rho": rho, "interval": interval,
                                     "paired_all": paired_all}}}
    path = C.FIGURES / "_test_fake" / "provenance.json"  # cite() needs a path under the repo
    return C.Source("mc_std", "paper", path, summary)


def test_lcce_highest_is_checked_against_the_best_rival_of_the_papers_panel():
    # label MSE ("brier") beats LCCE outside the noise; ece_sq (ours) beats it too; ECE does not
    rho = {"brier": 0.998, "ece": 0.88, "ece_sq": 0.994, "lcce": 0.991, "lcce_quantile": 0.999}
    pa = {"lcce - brier": {"diff": -0.0065, "lo": -0.0069, "hi": -0.0061, "share_a_better": 0.0},
          "lcce - ece_sq": {"diff": -0.003, "lo": -0.0035, "hi": -0.0022, "share_a_better": 0.0},
          "lcce - ece": {"diff": 0.11, "lo": 0.10, "hi": 0.12, "share_a_better": 1.0}}
    rows = GM._lcce_best(_fake_source(rho, pa), "fixed", "App. C Fig 5", "LCCE highest",
                        claim="LCCE highest", above=None, ece_rows=False)
    # the seed-free LCCE variant is LCCE itself, not a rival; ece_sq is ours, not the paper's
    assert [r["verdict"] for r in rows] == [C.REFUTED]
    assert "best other label metric brier" in rows[0]["note"] and rows[0]["ours"] == -0.0065
    # with LCCE ahead of every metric of the paper's panel it reproduces, and our better
    # added metric gets its own "beyond the paper" row
    rho2 = {**rho, "brier": 0.5}
    pa2 = {**pa, "lcce - ece": {"diff": 0.11, "lo": 0.10, "hi": 0.12, "share_a_better": 1.0}}
    rows2 = GM._lcce_best(_fake_source(rho2, pa2), "fixed", "App. C Fig 5", "LCCE highest",
                         claim="LCCE highest", above=None, ece_rows=False)
    assert [r["verdict"] for r in rows2] == [C.REPRODUCES, C.BEYOND]
    assert "ece_sq" in rows2[1]["claim"]
    # Fig 1's "above 0.9" is its own atomic row, judged on rho's interval [0.84, 0.86]
    rho3 = {**rho2, "lcce": 0.85}
    rows3 = GM._lcce_best(_fake_source(rho3, pa2), "fixed", "§3.2 Fig 1", "> 0.9", ece_rows=False)
    assert [r["verdict"] for r in rows3[:2]] == [C.REPRODUCES, C.REFUTED]
    assert rows3[1]["claimed"] == "> 0.9"


@pytest.mark.parametrize("claimed, lo, hi, expected", [
    ("> 0", 0.1, 0.3, C.REPRODUCES), ("> 0", -0.3, -0.1, C.REFUTED), ("> 0", -0.1, 0.3, C.INCONCLUSIVE),
    ("> 0", 0.0, 0.0, C.INCONCLUSIVE),   # exactly zero: the methods coincide; not a refutation
    ("> 0", 0.0, 0.2, C.INCONCLUSIVE),   # touching the null is not excluding it
    ("< 0", -0.3, -0.1, C.REPRODUCES), ("< 0", 0.1, 0.3, C.REFUTED), ("< 0", -0.1, 1e-9, C.INCONCLUSIVE),
    ("> 0.9", 0.91, 0.95, C.REPRODUCES), ("> 0.9", 0.85, 0.89, C.REFUTED), ("> 0.9", 0.88, 0.92, C.INCONCLUSIVE),
    ("within 0.005", -0.004, 0.004, C.REPRODUCES), ("within 0.005", 0.006, 0.01, C.REFUTED),
    ("within 0.005", -0.01, -0.005, C.REFUTED), ("within 0.005", 0.001, 0.009, C.INCONCLUSIVE),
    ("in 0.00265 0.00275", 0.0027, 0.0027, C.REPRODUCES), ("in 0.00265 0.00275", 0.0032, 0.0032, C.REFUTED),
    ("> 0", "", "", C.NO_INTERVAL), ("< 0", float("nan"), 0.1, C.NO_INTERVAL), ("> 0", None, 1.0, C.NO_INTERVAL),
])
def test_the_one_verdict_rule(claimed, lo, hi, expected):
    assert C.rule(claimed, lo, hi) == expected


def test_the_rule_refuses_an_unknown_claim_and_a_row_without_its_reason():
    with pytest.raises(ValueError, match="claimed"):
        C.rule(">= 0", 0.1, 0.2)
    with pytest.raises(ValueError, match="why_no_interval"):
        C.make_row("000", "x", "a claim", "-", ours=1.0, claimed="> 0")
    r = C.make_row("000", "x", "a claim", "-", ours=0.1, lo=-0.2, hi=0.4, claimed="> 0")
    assert r["verdict"] == C.INCONCLUSIVE and "detects" in r["note"]
    assert "0.429" in r["note"]  # (1.96 + 0.84) / 1.96 * half width 0.3
    r = C.make_row("000", "x", "a claim", "-", ours=0.1, lo=0.05, hi=0.2, claimed="> 0", not_tested="it fell back")
    assert r["verdict"] == C.NOT_TESTED and r["note"].startswith("it fell back")


def test_every_ledger_verdict_follows_from_its_interval_by_the_rule():
    """No row's verdict rests on its point estimate: each judged row's verdict is the rule's
    on its own interval and claimed side; no row says "reversed" or "does not reproduce"."""
    rows = C.ledger()
    judged = [r for r in rows if r["verdict"] in (C.REPRODUCES, C.REFUTED, C.INCONCLUSIVE, C.NO_INTERVAL)
              and r.kind != C.SYMBOLIC]
    assert judged
    for r in rows:  # a printed derivation step is refuted by an exact counterexample, not an interval
        if r.kind == C.SYMBOLIC:
            assert r.verdict == C.REFUTED and r.note.startswith("counterexample: ") and r.scale == "exact"
    for r in judged:
        assert r["claimed"], r["claim"]
        assert C.rule(r["claimed"], r["ci_low"], r["ci_high"]) == r["verdict"], r["claim"]
    for r in rows:
        assert r["verdict"] in (*C.VERDICTS, C.BEYOND, C.SUMMARY), r["verdict"]
        text = f"{r['claim']} {r['note']}".lower()
        assert "reversed" not in text and "does not reproduce" not in text and "partly" != r["verdict"]
        if r["verdict"] == C.NOT_TESTED:
            assert "fell back" in r["note"]


def test_a_comparison_where_the_method_fell_back_is_not_tested():
    assert GT._fell_back(0.9, 0.0, "VR-SAG+TS", "Temperature scaling").startswith("VR-SAG+TS fell back in 90%")
    assert GT._fell_back(0.2, 0.5, "a", "b") == ""


def test_every_committed_output_names_a_clean_commit_of_this_history():
    """An output is only as trustworthy as the code that made it: no ``-dirty`` trees, no
    commits that never landed (skipped outside a full git checkout)."""
    import subprocess

    def git(*args):
        return subprocess.run(["git", *args], cwd=C.ROOT, capture_output=True, text=True)

    probe = git("rev-parse", "--is-shallow-repository")
    if probe.returncode != 0 or probe.stdout.strip() != "false":
        pytest.skip("not a full git checkout")
    for prov in sorted(C.FIGURES.glob("*/provenance.json")):
        commit = json.loads(prov.read_text()).get("git_commit", "")
        assert commit and not commit.endswith("-dirty"), f"{prov}: {commit!r}"
        assert git("cat-file", "-e", f"{commit}^{{commit}}").returncode == 0, f"{prov}: {commit} not in history"


def test_rows_are_typed_and_refuse_unknown_columns_and_verdicts():
    r = C.make_row("000", "x", "a claim", "-", ours=0.1, lo=0.05, hi=0.2, claimed="> 0", world="w", mechanism="yes")
    assert r.verdict == C.REPRODUCES and r.paper == C.MAIN_PAPER and r.kind == C.PAPER_CLAIM
    with pytest.raises(TypeError):
        C.make_row("000", "x", "a claim", "-", ours=0.1, lo=0.05, hi=0.2, claimed="> 0", sclae="paper")
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.verdict = C.REFUTED  # type: ignore[misc]
    with pytest.raises(ValueError, match="mechanism"):
        C.make_row("000", "x", "a claim", "-", ours=0.1, lo=0.05, hi=0.2, claimed="> 0", mechanism="maybe")
    with pytest.raises(ValueError, match="kind"):
        C.make_row("000", "x", "a claim", "-", ours=0.1, lo=0.05, hi=0.2, claimed="> 0", kind="anecdote")
    with pytest.raises(KeyError):
        r["seed"]
    # a paper claim in the null world, where its mechanism cannot act, is a control
    n = C.make_row("000", "x", "a claim", "-", ours=0.1, lo=0.05, hi=0.2, claimed="> 0",
                   world="simulator, null world", mechanism="no")
    assert n.kind == C.NULL_CONTROL and C.group_of(n) == "null-world controls"


def test_headline_groups_partition_the_ledger_and_the_results_page_counts_are_the_ledgers():
    """Every row is counted in exactly one group; the results page's table of counts is the
    ledger's (re-read from the committed file, not regenerated). The README's headline counts
    questions (tests/test_findings.py)."""
    rows = C.ledger()
    counts = C.group_counts(rows)
    assert sum(n for _, n, _ in counts) == len(rows)
    for _, n, by_verdict in counts:
        assert sum(by_verdict.values()) == n
    headline = [r for r in rows if C.group_of(r) == C.GROUPS[0]]
    assert headline and all(r.kind == C.PAPER_CLAIM and r.scale == "paper" and r.mechanism == "yes"
                            for r in headline)
    for path, _ in R.DOCUMENTS:
        text = path.read_text()
        if "| rows that test | rows |" not in text:
            continue
        for group, n, by_verdict in counts:
            line = next(x for x in text.splitlines() if x.startswith(f"| {group} | {n} |"))
            for v, k in by_verdict.items():
                assert f"| {k} |" in line + "|", (group, v)


def test_a_table_row_whose_refits_and_table_disagree_in_sign_gets_no_verdict():
    """The crossed refits' interval stands for the table's difference only where the two do
    not exclude 0 on opposite sides; where they do, the row reports no interval and says why."""
    import json

    rows = [r for r in C.claims_tables_1_5() if r.place.startswith("Table 1") and r.verdict != C.SUMMARY]
    checked = 0
    for r in rows:
        if "#summary/claims/" not in r.source:
            continue  # the "best" rows: no table test to set beside them
        path, key = r.source.split("#summary/claims/")
        c = json.loads((C.ROOT / path).read_text())["summary"]["claims"][int(key.split("/")[0])]
        if "paper_t_lo" not in c:
            continue
        opposite = c["refit_lo"] > 0 > c["paper_t_hi"] or c["refit_hi"] < 0 < c["paper_t_lo"]
        if opposite:
            assert r.verdict in (C.NO_INTERVAL, C.NOT_TESTED) and "opposite sides" in r.note, r.claim
        checked += 1
    assert checked


def test_a_world_missing_from_the_paper_scale_output_is_read_from_the_quick_one(tmp_path, monkeypatch):
    import json

    def write(folder, scale, datasets):
        (tmp_path / folder).mkdir()
        summary = {"info": {d: {} for d in datasets}, "claims": [{"dataset": d} for d in datasets]}
        (tmp_path / folder / "provenance.json").write_text(json.dumps({"scale": scale, "summary": summary}))

    write("study_paper", "paper", ["simulator", "open_bandit"])
    write("study", "quick", ["simulator", "simulator_matched", "open_bandit"])
    monkeypatch.setattr(C, "FIGURES", tmp_path)
    found = C.load_by_dataset("study", "claims")
    assert [(s.scale, sorted(d)) for s, d in found] == [("paper", ["open_bandit", "simulator"]),
                                                       ("quick", ["simulator_matched"])]
    # an output without the key the claim reads is skipped
    assert C.load_by_dataset("study", "vs_mcgrad") == []
    # a resumed paper-scale run's finished data sets come first
    write("study_paper_partial", "paper", ["simulator"])
    found = C.load_by_dataset("study", "claims")
    assert [(s.path.parent.name, sorted(d)) for s, d in found] == [
        ("study_paper_partial", ["simulator"]), ("study_paper", ["open_bandit"]), ("study", ["simulator_matched"])]


def test_a_run_at_the_papers_data_size_stands_beside_the_preset_world(tmp_path, monkeypatch):
    """The AdAuction-like world run at the paper's data size gets its own ledger rows (its own
    places, world words and citations) beside the preset world's, and the compare block sets each
    Table 1 ordering's verdict at both sizes side by side. The stand-in for the big run is the
    committed paper output with every difference's sign flipped, so each verdict must flip."""
    import json
    import shutil

    from experiments import readme as R

    figs = tmp_path / "figures"
    shutil.copytree(C.FIGURES / "compare_calibrators_paper", figs / "compare_calibrators_paper")
    big = figs / "compare_calibrators_paper_15m"
    big.mkdir()
    prov = json.loads((figs / "compare_calibrators_paper" / "provenance.json").read_text())
    s = prov["summary"]
    ds = "simulator_adauction"
    s["info"] = {ds: {**s["info"][ds], "n_val": 1_221_656}}
    s["means"] = {ds: s["means"][ds]}
    for k in ("claims", "best", "accuracy", "vs_mcgrad", "text_claims"):
        s[k] = [c for c in s[k] if c["dataset"] == ds]
    for c in s["claims"]:
        for pre in ("refit", "paper_t", "rows"):
            if f"{pre}_lo" in c:
                c[f"{pre}_diff"], c[f"{pre}_lo"], c[f"{pre}_hi"] = -c[f"{pre}_diff"], -c[f"{pre}_hi"], -c[f"{pre}_lo"]
    (big / "provenance.json").write_text(json.dumps(prov))
    (big / "table1.md").write_text("| method |\n|---|\n")
    monkeypatch.setattr(C, "ROOT", tmp_path)
    monkeypatch.setattr(C, "FIGURES", figs)

    size = C.SIZE_RUNS["compare_calibrators"][0][1]
    rows = C.claims_tables_1_5()
    place_big, place_small = f"Table 1 ({C.world_words(ds, size)})", f"Table 1 ({C.world_words(ds)})"
    # the orderings (Table 1's metrics and Table 5's NLL) are the rows read from the output's `claims`
    orderings = [r for r in rows if r.verdict != C.SUMMARY and "#summary/claims/" in r.source]
    at_size_all = [r for r in orderings if r.place.endswith(f"({C.world_words(ds, size)})")]
    small_all = {r.claim: r for r in orderings if r.place.endswith(f"({C.world_words(ds)})")}
    assert len(at_size_all) == len(small_all) == len(s["claims"])
    at_size = [r for r in at_size_all if r.place == place_big]
    small = {r.claim: r for r in orderings if r.place == place_small}
    assert len(at_size) == len(small) and 0 < len(at_size) < len(at_size_all)
    flipped = {C.REPRODUCES: C.REFUTED, C.REFUTED: C.REPRODUCES}
    for r in at_size_all:
        assert r.source.startswith("figures/compare_calibrators_paper_15m/provenance.json#")
        assert C.cited_value(r.source) == r.ours == -small_all[r.claim].ours
        assert "15M exposures" in r.world and r.mechanism == "partly" and r.scale == "paper"
        # an "on par" row is symmetric in the sign: flipping it keeps its verdict
        if small_all[r.claim].verdict in flipped and not r.note.startswith("not tested") \
                and not r.claimed.startswith("within"):
            assert r.verdict == flipped[small_all[r.claim].verdict], r.claim
    assert [r.place for r in rows if r.verdict == C.SUMMARY].count(place_big) == 1
    # the Table 4-5 sentences and the MCGrad rows are read at the size too
    assert any(f"({C.world_words(ds, size)})" in r.place for r in C.claims_tables_4_5_text())
    assert any(f"({C.world_words(ds, size)})" in r.place for r in C.claims_mcgrad())
    # the preset's other worlds are untouched: no row of theirs at the size
    assert not any(" at the paper's data size" in r.place and ds not in r.world.replace(
        C.world_words(ds), ds) for r in rows)

    block = R.block_compare()
    header = f"| ordering (A < B) | preset's size | verdict | {size} | verdict |"
    assert "D_val 1,221,656 rows" in block and "(fresh impressions of the same world)" in block
    lines = block.splitlines()
    start = lines.index(header) + 2
    table = lines[start:start + len(at_size) + 1]
    assert not table[-1].startswith("|")  # the table has one line per ordering
    for r, line in zip(at_size, table[:-1], strict=True):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells == [r.claim.split("; SAG")[0], R._fmt_val(small[r.claim]), small[r.claim].verdict,
                         R._fmt_val(r), r.verdict]
    assert f"**{place_big}**" in block  # its verdict counts line


def test_the_level_shift_rows_read_table_3s_bias_of_each_world_from_the_committed_intervals():
    """Each temperature-only method's relative bias in each comparison world, with the maps with an
    intercept beside it, equals the committed ``intervals.csv`` of the output it cites (split 0's
    value and its row-bootstrap interval), read here from the csv rather than the provenance the
    row cites."""
    import csv

    rows = C.claims_level_shift()
    assert rows, "the committed comparisons have intervals"
    assert {r.claim.split(":")[0] for r in rows} == set(C.TEMPERATURE_ONLY)
    for world in ("simulator, null world (", "simulator, null world at the paper's data size",
                  "simulator, AdAuction-like world ("):
        assert any(r.world.startswith(world) for r in rows), world
    tables: dict[str, dict[tuple[str, str], tuple[float, float, float]]] = {}
    for r in rows:
        assert r.verdict == C.BEYOND and r.ci_low <= r.ours <= r.ci_high
        path, key = r.source.split("#summary/intervals/")
        dataset, method, metric, index = key.split("/")
        assert (metric, index) == ("bias", "0") and r.claim.startswith(method)
        folder = str(C.ROOT / path).removesuffix("/provenance.json")
        if folder not in tables:
            with open(f"{folder}/intervals.csv", newline="") as fh:
                tables[folder] = {(row["dataset"], row["method"]): tuple(float(row[k]) for k in ("split0", "ci_low",
                                                                                                 "ci_high"))
                                  for row in csv.DictReader(fh) if row["metric"] == "bias"}
        table = tables[folder]
        assert (r.ours, r.ci_low, r.ci_high) == pytest.approx(table[(dataset, method)], rel=1e-5)
        for b in C.WITH_INTERCEPT:
            v = table[(dataset, b)]
            assert f"{b} {v[0]:+.3g} [{v[1]:+.3g}, {v[2]:+.3g}]" in r.note


def test_the_null_contrast_rows_difference_each_world_against_the_null_world_of_its_size():
    """Every grouping world's ordering of a grouping calibrator (VR-SAG against SAG, and SAG or
    VR-SAG against temperature or Platt scaling) is set against the null world's at the same
    data size: the row's value is the difference of the two cited estimates, its interval the
    two half-widths combined in quadrature, and its words follow the interval's side."""
    rows = C.claims_null_contrast()
    assert rows, "the committed comparison has the null world and grouping worlds at the preset's size"
    pairs = {r.claim.split(" on ")[0] for r in rows}
    assert "VR-SAG+TS - SAG+TS" in pairs and "SAG+TS - Temperature scaling" in pairs
    assert all(p.startswith(("SAG", "VR-SAG")) for p in pairs)
    for r in rows:
        assert r.verdict == C.BEYOND and "null world" not in r.world
        a_src, n_src = r.source.split(" minus ")
        this, null = C.cited_value(a_src), C.cited_value(n_src)
        assert r.ours == pytest.approx(this - null)
        # the two intervals' ends, read from the cited claims themselves (the note rounds them)
        lo_a, hi_a, lo_n, hi_n = (C.cited_value(src.replace("/refit_diff", f"/refit_{end}"))
                                  for src in (a_src, n_src) for end in ("lo", "hi"))
        half = np.hypot((hi_a - lo_a) / 2, (hi_n - lo_n) / 2)
        assert (r.ci_high - r.ci_low) / 2 == pytest.approx(half, rel=1e-9)
        assert f"this world {this:+.3g} [{lo_a:+.3g}, {hi_a:+.3g}]" in r.note
        assert r.ci_low <= r.ours <= r.ci_high
        sign = 1.0 if " > " in r.paper_value.split(": ")[0] else -1.0  # the side the paper prints
        if sign * r.ci_low > 0 and sign * r.ci_high > 0:
            assert r.note.startswith("beyond the null world's difference on the side the paper prints")
        elif sign * r.ci_low < 0 and sign * r.ci_high < 0:
            assert r.note.startswith("beyond the null world's difference on the other side")
        else:
            assert r.note.startswith("not told apart")
    worlds = {r.world.split(" (")[0] for r in rows}
    assert {"simulator, AdAuction-like world", "simulator, grouping world"} <= worlds
