"""Printed tables checked against themselves: relations that hold by definition between the
columns and rows of "Calibration is Grouping"'s tables, and where the printed numbers break them.

A reader cannot rerun the paper's private data sets, but can check whether its printed
numbers are consistent with the definitions the paper states. Like the proofs' checks of
printed derivation steps, this study lists every relation, the printed numbers it compares
and whether they satisfy it (with the rounding tolerance of the printed digits):

* **Table 1** (AdAuction, oracle CTR pi): Brier = E[(pi - p)^2] <= Brier+ = E|pi - p|,
  because |pi - p| <= 1 makes every squared error at most its absolute value (if the
  column is a root mean square instead, RMSE >= MAE must hold: both readings are checked);
  ECE <= Brier+ (up to label noise), because binning averages the errors before taking
  absolute values (Jensen), so the binned gap cannot exceed the mean absolute oracle gap.
* **Table 3**: |bias| <= abs_bias, the triangle inequality (abs_bias averages per-group
  absolute biases whose signed average is the bias).
* **Tables 4 and 5**: AUCDiff = (AUC(calibrated) - AUC(Uncal)) / AUC(Uncal) (App. E.1),
  so Table 4's AUCDiff must follow from Table 5's AUCs; Platt and temperature scaling are
  increasing maps, so their AUCDiff is exactly 0.
* **Table 5 and Table 7**: a Platt-scaled model's log loss is at most the entropy of the
  base rate (the Platt family contains the constant predictor, which scores H(CTR)); Table
  7 gives AdAuction's CTR (451K clicks in 15M exposures).
* **§3.1 text and Table 4**: the text says calibration moves accuracy and AUC by about
  0.005 at most (relative); checked against the printed AccDiff / AUCDiff of the
  non-binning methods.

The printed numbers are the published tables of "Calibration is Grouping" (Tables 1, 3, 4, 5, 7), typed as
reference data; nothing is computed from data, so every scale is the same.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from experiments._study import Output, entry_point

STUDY = "printed_tables"
PRESETS: dict[str, dict[str, Any]] = {"smoke": {}, "quick": {}, "paper": {}}

#: the tables' rows: five baselines, then the grouping methods with each head
_METHODS = ("Uncal", "Histogram binning", "Isotonic regression", "Platt scaling", "Temperature scaling",
            *(f"{g}+{h}" for g in ("SAG", "VR-SAG") for h in ("PS", "TS")))
#: "Calibration is Grouping" Table 1, AdAuction columns: ECE, LCCE, Brier+, Brier
TABLE1 = dict(zip(_METHODS, (
    (0.0339, 0.0342, 0.0352, 0.0527), (0.0049, 0.0113, 0.0170, 0.0325), (0.0056, 0.0090, 0.0123, 0.0282),
    (0.0063, 0.0124, 0.0157, 0.0297), (0.0062, 0.0124, 0.0158, 0.0296), (0.0058, 0.0100, 0.0131, 0.0247),
    (0.0054, 0.0099, 0.0130, 0.0249), (0.0054, 0.0083, 0.0118, 0.0237), (0.0053, 0.0083, 0.0117, 0.0239)),
    strict=True))
DATASETS = ("AdAuction", "ALICCP", "AE")
#: "Calibration is Grouping" Table 3: (bias, abs_bias) per data set
TABLE3 = dict(zip(_METHODS, (
    ((1.5866, 13.2670), (-0.039843, 0.0398), (-0.964428, 0.9644)),
    ((0.0061, 4.5772), (-0.001060, 0.0042), (0.002417, 0.0046)),
    ((0.0086, 4.1161), (-0.001093, 0.0042), (0.002474, 0.0048)),
    ((0.0074, 4.2505), (-0.001073, 0.0043), (0.002780, 0.0048)),
    ((0.0079, 4.2504), (-0.001071, 0.0042), (-0.018733, 0.0187)),
    ((0.0075, 1.7436), (-0.000213, 0.0036), (0.000244, 0.0034)),
    ((0.0088, 1.8910), (-0.000202, 0.0035), (-0.001183, 0.0061)),
    ((0.0074, 1.0742), (-0.000213, 0.0036), (0.000193, 0.0027)),
    ((0.0055, 1.7331), (-0.000213, 0.0035), (-0.000104, 0.0054))), strict=True))
#: "Calibration is Grouping" Table 4: (AccDiff, AUCDiff) per data set
TABLE4 = dict(zip(_METHODS, (
    ((0.0, 0.0), (0.0, 0.0), (0.0, 0.0)),
    ((0.0007, -0.1783), (0.0015, -0.0849), (0.0, -0.2857)),
    ((0.0007, -0.0167), (0.0015, -0.0002), (0.0, 0.0006)),
    ((0.0004, 0.0), (0.0015, 0.0), (-0.0001, 0.0)),
    ((0.0004, 0.0), (0.0015, 0.0), (-0.0001, 0.0)),
    ((0.0005, 0.0008), (0.0015, -0.0533), (-0.0001, -0.0327)),
    ((0.0006, 0.0009), (0.0015, 0.0035), (-0.0001, -0.0404)),
    ((0.0007, 0.0037), (0.0015, -0.0643), (-0.0001, -0.0153)),
    ((0.0007, 0.0052), (0.0015, 0.0017), (-0.0001, -0.0149))), strict=True))
#: "Calibration is Grouping" Table 5: (NLL, AUC) per data set
TABLE5 = dict(zip(_METHODS, (
    ((0.3444, 0.8212), (0.1692, 0.6130), (0.3853, 0.6302)),
    ((0.3207, 0.6747), (0.1702, 0.6101), (0.3933, 0.6079)),
    ((0.3199, 0.8074), (0.1696, 0.6128), (0.3922, 0.6085)),
    ((0.3187, 0.8212), (0.1691, 0.6130), (0.3535, 0.6302)),
    ((0.3187, 0.8212), (0.1691, 0.6130), (0.3519, 0.6303)),
    ((0.3183, 0.8146), (0.1658, 0.6618), (0.3588, 0.6568)),
    ((0.3185, 0.8154), (0.1640, 0.6896), (0.3459, 0.6502)),
    ((0.3191, 0.8210), (0.1625, 0.6897), (0.3372, 0.6652)),
    ((0.3193, 0.8221), (0.1621, 0.6885), (0.3297, 0.6660))), strict=True))
#: "Calibration is Grouping" Table 7: AdAuction exposures and clicks
ADAUCTION_EXPOSURES, ADAUCTION_CLICKS = 15_000_000, 451_000
#: half a unit of the 4th decimal (the tables print 4 decimals)
ROUND = 5e-5
#: label noise allowed in ECE <= Brier+ (a binned ECE on 1.5M test rows moves by ~1e-4)
ECE_NOISE = 1e-3


def _entropy(p: float) -> float:
    return -(p * math.log(p) + (1 - p) * math.log(1 - p))


def checks() -> list[dict[str, Any]]:
    """Every relation on every printed row: ``excess`` = lhs - rhs - tolerance (> 0: the
    printed numbers break the relation)."""
    out: list[dict[str, Any]] = []

    def add(table: str, relation: str, row: str, lhs: float, rhs: float, tol: float) -> None:
        out.append({"table": table, "relation": relation, "row": row, "lhs": lhs, "rhs": rhs, "tolerance": tol,
                    "excess": lhs - rhs - tol, "holds": bool(lhs - rhs <= tol)})

    for m, (ece, _lcce, mae, brier) in TABLE1.items():
        add("Table 1", "Brier <= Brier+", f"{m} (AdAuction)", brier, mae, 2 * ROUND)
        # the other reading: a root mean square error is at least the mean absolute error
        add("Table 1", "Brier read as RMSE: Brier+ <= Brier", f"{m} (AdAuction)", mae, brier, 2 * ROUND)
        add("Table 1", "ECE <= Brier+", f"{m} (AdAuction)", ece, mae, 2 * ROUND + ECE_NOISE)
    for m, per_ds in TABLE3.items():
        for ds, (bias, abs_bias) in zip(DATASETS, per_ds, strict=True):
            add("Table 3", "|bias| <= abs_bias", f"{m} ({ds})", abs(bias), abs_bias, 2 * ROUND)
    for j, ds in enumerate(DATASETS):
        auc0 = TABLE5["Uncal"][j][1]
        for m in _METHODS[1:]:
            implied = (TABLE5[m][j][1] - auc0) / auc0
            printed = TABLE4[m][j][1]
            tol = ROUND + 2 * ROUND / auc0 * (1 + abs(implied))  # both AUCs and AUCDiff rounded
            add("Tables 4-5", "AUCDiff = (AUC - AUC_Uncal) / AUC_Uncal", f"{m} ({ds})", abs(printed - implied),
                0.0, tol)
        for m in ("Platt scaling", "Temperature scaling"):
            add("Table 4", "AUCDiff = 0 for an increasing map", f"{m} ({ds})", abs(TABLE4[m][j][1]), 0.0, ROUND)
    ctr = ADAUCTION_CLICKS / ADAUCTION_EXPOSURES
    add("Tables 5, 7", f"NLL(Platt) <= H(CTR) = {_entropy(ctr):.4f} nats at CTR {ctr:.4f}",
        "Platt scaling (AdAuction)", TABLE5["Platt scaling"][0][0], _entropy(ctr), ROUND)
    for m in _METHODS[3:]:
        for ds, (acc, aucd) in zip(DATASETS, TABLE4[m], strict=True):
            for name, v in (("AccDiff", acc), ("AUCDiff", aucd)):
                add("§3.1 text / Table 4", f"|{name}| <= 0.005 (\"within roughly +-0.005\")", f"{m} ({ds})",
                    abs(v), 0.005, ROUND)
    return out


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per relation: how many printed rows break it and the largest excess."""
    by: dict[str, dict[str, Any]] = {}
    for r in rows:
        key = f"{r['table']}: {r['relation']}"
        b = by.setdefault(key, {"table": r["table"], "relation": r["relation"], "rows": 0, "violations": 0,
                                "max_excess": -math.inf, "violating_rows": []})
        b["rows"] += 1
        b["max_excess"] = max(b["max_excess"], r["excess"])
        if not r["holds"]:
            b["violations"] += 1
            b["violating_rows"].append(r["row"])
    return by


def run(config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    rows = checks()
    header = list(rows[0])
    out.table("checks", header, [[r[h] for h in header] for r in rows], digits=6)
    by = summarise(rows)
    out.table("relations", ["relation", "rows", "violations", "max_excess", "violating_rows"],
              [[k, b["rows"], b["violations"], b["max_excess"], "; ".join(b["violating_rows"])]
               for k, b in by.items()], digits=6)
    return {"relations": by}


def report(summary: Mapping[str, Any]) -> str:
    bad = {k: b for k, b in summary["relations"].items() if b["violations"]}
    return f"{len(bad)} of {len(summary['relations'])} relations broken by the printed numbers: " + "; ".join(
        f"{k} ({b['violations']}/{b['rows']})" for k, b in bad.items())


main = entry_point(__name__)

if __name__ == "__main__":
    main()
