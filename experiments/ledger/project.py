"""Rows of the project's own: the printed derivation steps the symbolic proofs refute, the report
intervals' coverage, and the places of the papers no computed row covers."""

from __future__ import annotations

from experiments.ledger.rows import (
    SYMBOLIC,
    Row,
    make_row,
    missing_row,
)
from experiments.ledger.rule import (
    BEYOND,
    NOT_ATTEMPTED,
    REFUTED,
)
from experiments.ledger.sources import (
    load,
)

PLACES: tuple[tuple[str, str, str], ...] = (
    ("000", "Table 2", "see figures/compare_calibrators/table2 (fit seconds on this CPU; not comparable with the "
                       "paper's GPU minutes, so no verdict)"),
    ("000", "Table 7", "see figures/simulator_stats/table7_dataset (simulator vs AdAuction statistics); a "
                       "description, not a claim"),
    ("001", "Table 1", "not attempted: the loan-default data set is not public in the seeds' form"),
    ("001", "Figs 1-3", "not attempted: diagrams of the method, no numbers"),
    ("002", "Fig 1 / Table 11", "not attempted: hyper-parameter pipelines beyond the ones in "
                                "calibrated_logloss's CTR part"),
    ("003", "Tables 3-4", "see figures/topn_calibration (conventional ECE, AUC); no ordering claimed"),
    ("003", "Figs 1, 3-6", "see figures/topn_calibration (ECE@N vs N, sensitivity to alpha and n_g); "
                           "Fig 1/2 are method diagrams"),
)


def claims_proofs() -> list[Row]:
    """The derivation steps of the papers that the symbolic proofs (``python -m proofs``) find
    false as printed: an exact counterexample each (no sampling), with the corrected step
    proved. The final results they lead to are proved separately (``figures/proofs``)."""
    src = load("proofs", "false_as_printed")
    if src is None:
        return []
    rows = []
    for i, st in enumerate(src.get("false_as_printed")):
        rows.append(make_row(st["paper"], st["place"], f"as printed: {st['claim']}", "holds (printed)",
                             ours=st["status"], scale="exact", kind=SYMBOLIC, verdict=REFUTED,
                             source=src.cite(f"false_as_printed/{i}/status"),
                             note=f"counterexample: {st['counterexample']}; {st['method']}"))
    return rows


def claims_interval_coverage() -> list[Row]:
    """Beyond the papers: coverage of the report's 95% intervals on simulated logs
    (``experiments/interval_coverage.py``) and the tests' false-positive rate on calibrated
    logs. ``ours`` is the coverage (rate), its interval the binomial normal interval over logs."""
    src = load("interval_coverage", "coverage")
    if src is None:
        return [missing_row("-", "beyond the paper (report intervals)", "interval coverage and test size",
                            "(not in the papers)", "interval_coverage")]
    rows = []
    for key, c in src.get("coverage").items():
        quantity, method = key.split(":", 1)
        se = c["se"]
        rows.append(make_row("-", "beyond the paper (report intervals)", f"95% interval coverage: {quantity}, {method}",
                             "(not in the papers)", ours=c["coverage"], lo=c["coverage"] - 1.96 * se,
                             hi=c["coverage"] + 1.96 * se, scale=src.scale, verdict=BEYOND,
                             world="simulated logs", mechanism="yes",
                             source=src.cite(f"coverage/{key}/coverage"),
                             note=f"target >= 0.93; share of logs whose interval excludes its own estimate: "
                                  f"{c['excludes_estimate']:.3f}"))
    size = src.get("size")
    for test, rate in size.items():
        if test in ("n_logs", "corp_logs"):
            continue
        n = size["corp_logs"] if test == "corp" else size["n_logs"]
        se = (rate * (1 - rate) / n) ** 0.5
        rows.append(make_row("-", "beyond the paper (calibration tests)", f"false-positive rate at 5%: {test}",
                             "(not in the papers)", ours=rate, lo=rate - 1.96 * se, hi=rate + 1.96 * se,
                             scale=src.scale, verdict=BEYOND,
                             world="simulated logs", mechanism="yes", source=src.cite(f"size/{test}"),
                             note=f"{n} calibrated logs; target 0.05 +- 0.02; power on the miscalibrated world: "
                                  f"{src.get('power')[test]:.3f}"))
    return rows


def claims_coverage() -> list[Row]:
    return [make_row(seed, place, "(coverage)", "-", verdict=NOT_ATTEMPTED, note=why)
            for seed, place, why in PLACES]


