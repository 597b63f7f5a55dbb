"""Printed tables checked against themselves: relations that hold by definition between the
columns and rows of "Calibration is Grouping"'s tables, and every number the five papers print
in more than one place, with where the printed numbers break them.

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

**Numbers printed twice** (``duplicates.{csv,md}``), in all five papers (seeds 000-004): every
quantity the papers print in more than one place (one model's metric in two tables, a data
set's statistics in the text and in a table, a setting stated in the main text and again in
an appendix, a value the text quotes from a table) and every ratio printed beside its parts
(a CTR beside its click and impression counts, a relative change beside the two values, a
split's shares beside the day counts). Each is a :class:`Duplicate`: two sides, each a printed
number or a function of printed numbers (:class:`Printed`: the numeral as printed, its place,
and half a unit of its last printed digit). A side's interval is its function evaluated at the
corners of its numbers' rounding boxes (exact for the functions used here, each monotone in
every argument); ``=`` holds when the two intervals meet, ``<=`` / ``>=`` when some values
within the rounding satisfy the inequality. ``excess`` is the gap between the intervals (> 0:
the printed numbers cannot both be right). Where a side is a number in words ("a few dozen",
"about 20%") the half unit is stated in the place and the note. A few checks add a stated
sampling slack (``slack``, with its reason). Claims whose numbers are missing from the seed
text (002's standard-deviation columns are empty) are listed in ``unchecked.{csv,md}``.

The printed numbers are typed as reference data (numbers and places only); nothing is computed
from data, so every scale is the same.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
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


# --------------------------------------------------------------------------- numbers printed twice
_SCALES = {"%": 0.01, "K": 1e3, "M": 1e6}


@dataclass(frozen=True)
class Printed:
    """A number as a paper prints it: the numeral, where it stands, its value and half a unit of
    its last printed digit (the rounding the printed digits allow).

    Attributes:
      text: the numeral as printed (``"0.0311"``, ``"451K"``, ``"49.2%"``).
      place: where it is printed (``"Table 7, AdAuction, CTR"``); the part before the first comma
        names the table, section or caption.
      value: the number (a percentage as a fraction, ``K`` / ``M`` multiplied out).
      half_unit: half a unit of the last printed digit, in the units of ``value``.
    """

    text: str
    place: str
    value: float
    half_unit: float


def printed(text: str, place: str, *, half_unit: float | None = None) -> Printed:
    """Parse a printed numeral into a :class:`Printed`.

    Args:
      text: the numeral as printed: digits with an optional sign and decimal point, and an
        optional ``%``, ``K`` or ``M`` suffix.
      place: where the paper prints it.
      half_unit: the rounding, where the digits do not say it (a round number in words, such as
        "about 20%", read to one significant digit); default half a unit of the last digit.

    Returns:
      The :class:`Printed` number.

    Example:
      >>> p = printed("451K", "Table 7, AdAuction, clicks")
      >>> p.value, p.half_unit
      (451000.0, 500.0)
      >>> printed("49.2%", "Table 1").half_unit
      0.0005
    """
    body = text.strip()
    scale = 1.0
    if body and body[-1] in _SCALES:
        scale, body = _SCALES[body[-1]], body[:-1]
    value = float(body) * scale
    if half_unit is None:
        decimals = len(body.split(".")[1]) if "." in body else 0
        half_unit = round(0.5 * 10.0 ** -decimals * scale, 15)
    return Printed(text, place, value, half_unit)


#: a side of a relation: one printed number, or a function of printed numbers (monotone in each)
Side = Printed | tuple[Callable[..., float], tuple[Printed, ...], str]


def _interval(side: Side) -> tuple[float, float, float]:
    """``(value, low, high)`` of a side: the function at the printed numbers and its range over
    the corners of their rounding boxes."""
    if isinstance(side, Printed):
        return side.value, side.value - side.half_unit, side.value + side.half_unit
    fn, parts, _ = side
    centre = fn(*(p.value for p in parts))
    corners = [fn(*c) for c in itertools.product(*((p.value - p.half_unit, p.value + p.half_unit)
                                                     for p in parts))]
    return centre, min(corners), max(corners)


def _parts(side: Side) -> tuple[Printed, ...]:
    return (side,) if isinstance(side, Printed) else side[1]


def _words(side: Side) -> str:
    if isinstance(side, Printed):
        return f"{side.text} ({side.place})"
    _, parts, how = side
    return f"{how} = f(" + "; ".join(f"{p.text} ({p.place})" for p in parts) + ")"


@dataclass(frozen=True)
class Duplicate:
    """One number printed twice (or a ratio printed beside its parts): ``lhs op rhs``.

    Attributes:
      paper: the seed key, ``"000"``..``"004"``.
      quantity: what is printed twice, in words.
      relation: the relation the two printings must satisfy, in words.
      lhs: one printing (a :class:`Printed`, or ``(fn, parts, words)``).
      op: ``"="`` (the same quantity), ``"<="`` or ``">="`` (a bound the text states).
      rhs: the other printing.
      slack: added to the rounding tolerance, with its reason in ``note`` (sampling noise).
      note: what the reader should know (an assumption, a reading of an ambiguous place).
    """

    paper: str
    quantity: str
    relation: str
    lhs: Side
    op: str
    rhs: Side
    slack: float = 0.0
    note: str = ""

    @property
    def parts(self) -> tuple[Printed, ...]:
        """Every printed number the relation reads."""
        return _parts(self.lhs) + _parts(self.rhs)

    @property
    def place(self) -> str:
        """The distinct places (table, section, caption) the numbers come from, in order."""
        return " / ".join(dict.fromkeys(p.place.split(",")[0] for p in self.parts))


def _same(paper: str, quantity: str, a: Printed, b: Printed, note: str = "", slack: float = 0.0) -> Duplicate:
    return Duplicate(paper, quantity, "the same number in both places", a, "=", b, slack, note)


def _ratio(a: float, b: float) -> float:
    return a / b


def _rel_drop(base: float, new: float) -> float:
    return (base - new) / base


def _rel_gap(a: float, b: float) -> float:
    return abs(a - b) / a


def _log10_ratio(a: float, b: float) -> float:
    return math.log10(a / b)


def _dups_000() -> list[Duplicate]:
    P, d = printed, []
    # Table 7 against the §3 text and against itself (CTR beside its counts)
    for n, t in (("exposures (impressions)", "15M"), ("clicks", "451K")):
        d.append(_same("000", f"AdAuction {n}", P(t, "§3, data set paragraph"), P(t, f"Table 7, AdAuction, {n}")))
    for ds, imp, clk, ctr, note in (
            ("AdAuction", "15M", "451K", "0.0311", "451K / 15M = 0.0301, the Avg. true CTR column's value; the CTR "
                                                   "column's 0.0311 survives only because '15M' has two digits"),
            ("Aliccp", "42M", "164K", "0.0389", "164K / 42M = 0.0039: a factor 10 from the printed CTR "
                                                "(1.64M clicks would fit)"),
            ("Aliexpress", "22M", "574K", "0.0257", "")):
        d.append(Duplicate("000", f"{ds} CTR", "CTR = clicks / impressions", P(ctr, f"Table 7, {ds}, CTR"), "=",
                           (_ratio, (P(clk, f"Table 7, {ds}, clicks"), P(imp, f"Table 7, {ds}, impressions")),
                            "clicks / impressions"), note=note))
    se = math.sqrt(0.0306 * (1 - 0.0306) / 15e6)
    d.append(Duplicate("000", "AdAuction base rate", "empirical CTR = mean oracle CTR (labels drawn from the oracle)",
                       P("0.0311", "Table 7, AdAuction, CTR"), "=", P("0.0301", "Table 7, AdAuction, Avg. true CTR"),
                       slack=3 * se, note=f"slack: 3 binomial standard errors of a CTR over 15M exposures "
                                          f"({3 * se:.1e})"))
    # the backbone printed twice: Table 7 (backbone performance) and Tables 3, 5 (Uncal rows)
    for ds, col, t7, t5 in (("AdAuction", "AdAuction", "0.8903", "0.8212"), ("Aliccp", "AliCCP", "0.5875", "0.6130"),
                            ("Aliexpress", "AE", "0.7681", "0.6302")):
        d.append(_same("000", f"{ds} backbone AUC", P(t7, f"Table 7, {ds}, backbone AUC"),
                       P(t5, f"Table 5, {col}, Uncal AUC"),
                       note="Table 5 scores the test split less its 10% hold-out; an AUC over millions of rows "
                            "moves by about 1e-3 between such subsets"))
    for ds, col, pctr, ctr, bias in (("AdAuction", "AdAuction", "0.0410", "0.0311", "1.5866"),
                                     ("Aliccp", "ALICCP", "0.0373", "0.0389", "-0.039843"),
                                     ("Aliexpress", "AE", "0.0257", "0.0257", "-0.964428")):
        parts = (P(pctr, f"Table 7, {ds}, Avg. pCTR"), P(ctr, f"Table 7, {ds}, CTR"))
        d.append(Duplicate("000", f"{ds} backbone bias", "bias = mean pCTR / mean label (App. C, E definition)",
                           P(bias, f"Table 3, {col}, Uncal bias"), "=", (_ratio, parts, "Avg. pCTR / CTR")))
        d.append(Duplicate("000", f"{ds} backbone bias", "bias read as a relative error: mean pCTR / mean label - 1",
                           P(bias, f"Table 3, {col}, Uncal bias"), "=",
                           (lambda a, b: a / b - 1, parts, "Avg. pCTR / CTR - 1"),
                           note="a second reading (the App. C/E ratio cannot be negative, Table 3 prints negative "
                                "biases)"))
    d.append(_same("000", "AdAuction mean backbone pCTR", P("0.089", "Fig 7 caption, backbone mean"),
                   P("0.0410", "Table 7, AdAuction, Avg. pCTR"),
                   note="Fig 7 plots true probabilities, which only AdAuction has; a 1% uniform subsample of it "
                        "(150K rows) keeps the mean to about 1e-3"))
    d.append(_same("000", "AdAuction mean oracle CTR", P("0.073", "Fig 7 caption, true-probability mean"),
                   P("0.0301", "Table 7, AdAuction, Avg. true CTR"),
                   note="Fig 7's data set read as AdAuction (the one with true probabilities)"))
    # the protocol, stated in §3.1 and again in App. I.1
    for q, t in (("validation share of the training set", "10%"), ("hold-out share of the test set", "10%"),
                 ("random test-set splits", "100"), ("trials averaged", "100"), ("cross-validation folds", "5"),
                 ("groups per partition", "3"), ("partitions", "10"), ("lambda (grouping-weight penalty)", "0.1"),
                 ("lambda_v (variance penalty)", "0.5")):
        d.append(_same("000", q, P(t, "§3.1, protocol"), P(t, "App. I.1, protocol")))
    d.append(Duplicate("000", "groups per partition", "the main experiments' K is 'a few dozen' (App. F): >= 24",
                       P("3", "§3.1, protocol"), ">=", P("24", "App. F, 'a few dozen' read as at least two dozen",
                                                         half_unit=0.0),
                       note="App. F says the main experiments set K to a few dozen; §3.1 and App. I.1 print 3 "
                            "(one dozen would not hold either)"))
    d.append(_same("000", "K-means runs averaged in LCCE", P("4", "§2.5, LCCE runs"),
                   P("4", "App. C.2, LCCE partitions")))
    d.append(Duplicate("000", "LCCE Spearman rho with the Brier score", "App. C.1's 'up to' value meets §3.2's bound",
                       P("0.94", "App. C.1, Fig 3 text"), ">=", P("0.9", "§3.2, Fig 1 text")))
    d.append(_same("000", "LCCE rho with the Brier score's std", P("0.86", "Fig 4 caption"),
                   P("0.86", "App. C.1, Fig 4 text")))
    # App. E / E.1 / G quote Table 3-5 values (and call them the extreme of their column)
    t3 = {m: per for m, per in zip(_METHODS, (
        ("1.5866", "13.2670", "0.9644"), ("0.0061", "4.5772", "0.0046"), ("0.0086", "4.1161", "0.0048"),
        ("0.0074", "4.2505", "0.0048"), ("0.0079", "4.2504", "0.0187"), ("0.0075", "1.7436", "0.0034"),
        ("0.0088", "1.8910", "0.0061"), ("0.0074", "1.0742", "0.0027"), ("0.0055", "1.7331", "0.0054")), strict=True)}
    for q, j, col, text in (("smallest AdAuction bias (VR-SAG+TS)", 0, "AdAuction bias", "0.0055"),
                            ("smallest AdAuction abs_bias (VR-SAG+PS)", 1, "AdAuction abs_bias", "1.0742"),
                            ("smallest AE abs_bias (VR-SAG+PS)", 2, "AE abs_bias", "0.0027")):
        column = tuple(P(t3[m][j], f"Table 3, {m}, {col}") for m in _METHODS)
        d.append(Duplicate("000", q, "the text's value is the column's minimum", P(text, "App. E, text"), "=",
                           (lambda *v: min(v), column, f"min of Table 3's {col} column")))
    t4_ae_auc = ("0.0000", "-0.2857", "0.0006", "0.0000", "0.0000", "-0.0327", "-0.0404", "-0.0153", "-0.0149")
    t4_aliccp_acc = ("0.0000", "0.0015", "0.0015", "0.0015", "0.0015", "0.0015", "0.0015", "0.0015", "0.0015")
    d.append(Duplicate("000", "largest AUC loss on AE (histogram binning)", "the text's value is the column's minimum",
                       P("-0.2857", "App. E.1, text"), "=",
                       (lambda *v: min(v), tuple(P(t, f"Table 4, {m}, AE AUCDiff") for m, t in
                                                 zip(_METHODS, t4_ae_auc, strict=True)), "min of AE AUCDiff")))
    d.append(Duplicate("000", "largest ALICCP AccDiff", "the text's 'up to' value is the column's maximum",
                       P("0.0015", "App. E.1, text"), "=",
                       (lambda *v: max(v), tuple(P(t, f"Table 4, {m}, ALICCP AccDiff") for m, t in
                                                 zip(_METHODS, t4_aliccp_acc, strict=True)), "max of ALICCP AccDiff")))
    d.append(_same("000", "AE AccDiff of temperature scaling", P("-0.0001", "App. E.1, text"),
                   P("-0.0001", "Table 4, Temperature scaling, AE AccDiff")))
    d.append(Duplicate("000", "VR-SAG+TS NLL above the best baseline (AdAuction)",
                       "Table 5: NLL(VR-SAG+TS) - min NLL of the four classical calibrators <= the text's bound",
                       (lambda a, *b: a - min(b), (P("0.3193", "Table 5, VR-SAG+TS, AdAuction NLL"),
                                                   *(P(t, f"Table 5, {m}, AdAuction NLL") for m, t in
                                                     zip(_METHODS[1:5], ("0.3207", "0.3199", "0.3187", "0.3187"),
                                                         strict=True))), "NLL gap"),
                       "<=", P("0.0006", "App. G, text"),
                       note="baselines read as the four classical calibrators; against SAG+PS (0.3183) the gap is "
                            "0.0010"))
    d.append(_same("000", "bound on |AccDiff|, |AUCDiff|", P("0.005", "§3.1, text"), P("0.005", "App. E.1, text")))
    return d


#: "Field-aware Calibration" Tables 1-5 (per data set) and Table 6: (Field-RCE, AUC) per method
_PAN_DATASETS = ("Lending Club", "Criteo", "Avazu", "Porto Seguro", "Tencent")
_PAN_METHODS = ("Base (Model-1)", "Isotonic Reg.", "Platt Scaling", "Neural Calibration")
_PAN_MAIN = {"Lending Club": (("49.2%", "0.909"), ("13.8%", "0.912"), ("23.9%", "0.909"), ("12.0%", "0.992")),
             "Criteo": (("7.46%", "0.7967"), ("6.09%", "0.7967"), ("6.12%", "0.7967"), ("4.59%", "0.7996")),
             "Avazu": (("12.88%", "0.7442"), ("18.56%", "0.7442"), ("15.18%", "0.7442"), ("10.91%", "0.7520")),
             "Porto Seguro": (("28.55%", "0.6244"), ("4.47%", "0.6244"), ("4.30%", "0.6244"), ("3.66%", "0.6269")),
             "Tencent": (("27.12%", "0.7885"), ("25.45%", "0.7884"), ("25.72%", "0.7885"), ("22.87%", "0.7907"))}
_PAN_TABLE6 = {"Lending Club": (("49.2%", "0.909"), ("13.8%", "0.909"), ("23.9%", "0.909"), ("12.0%", "0.992")),
               "Criteo": (("7.46%", "0.7967"), ("6.09%", "0.7967"), ("6.12%", "0.7967"), ("4.59%", "0.7996")),
               "Avazu": (("12.88%", "0.7442"), ("18.56%", "0.7442"), ("15.18%", "0.7442"), ("10.91%", "0.7520")),
               "Porto Seguro": (("28.55%", "0.6244"), ("4.47%", "0.6244"), ("4.30%", "0.6244"),
                                ("3.66%", "0.6269")),
               "Tencent": (("27.12%", "0.7885"), ("25.45%", "0.7884"), ("25.72%", "0.7885"), ("22.87%", "0.7907"))}


def _dups_001() -> list[Duplicate]:
    P, d = printed, []
    for k, ds in enumerate(_PAN_DATASETS, start=1):
        for m, main, t6 in zip(_PAN_METHODS, _PAN_MAIN[ds], _PAN_TABLE6[ds], strict=True):
            for j, metric in enumerate(("Field-RCE", "AUC")):
                d.append(_same("001", f"{ds}, {m}, {metric}", P(main[j], f"Table {k}, {m}, {metric}"),
                               P(t6[j], f"Table 6, {ds}, {m}, {metric}")))
    d.append(_same("001", "Criteo Field-RCE of Model-1", P("7.46%", "§5.3, Observation 5"),
                   P("7.46%", "Table 2, Base (Model-1), Field-RCE")))
    d.append(_same("001", "Criteo Field-RCE of Neural Calibration", P("4.59%", "§5.3, Observation 5"),
                   P("4.59%", "Table 2, Neural Calibration, Field-RCE")))
    fece = {m: P(t, f"Table 2, {m}, Field-ECE") for m, t in
            zip(_PAN_METHODS, ("0.0160", "0.0134", "0.0135", "0.0094"), strict=True)}
    base = fece["Base (Model-1)"]
    cal = [fece[m] for m in _PAN_METHODS[1:]]
    d.append(Duplicate("001", "Criteo: smallest relative Field-ECE reduction of the calibration methods",
                       "min over methods of (F-ECE(Model-1) - F-ECE) / F-ECE(Model-1) = the text's low end",
                       (lambda b, *v: min(_rel_drop(b, x) for x in v), (base, *cal), "smallest reduction"), "=",
                       P("20%", "§5.3, Observation 5, 'about 20%' read to one significant digit", half_unit=0.05),
                       note="read to the unit (20% +- 0.5%) it does not hold: the smallest reduction is 15.6% "
                            "(Platt scaling)"))
    d.append(Duplicate("001", "Criteo: largest relative Field-ECE reduction of the calibration methods",
                       "max over methods of (F-ECE(Model-1) - F-ECE) / F-ECE(Model-1) = the text's high end",
                       (lambda b, *v: max(_rel_drop(b, x) for x in v), (base, *cal), "largest reduction"), "=",
                       P("40%", "§5.3, Observation 5, 'about 40%' read to one significant digit", half_unit=0.05),
                       note="the largest is Neural Calibration's 41.3%: the text counts it among the calibration "
                            "methods"))
    for metric, values in (("Log-loss", ("0.4547", "0.4539", "0.4539", "0.4513")),
                           ("Brier score", ("0.1474", "0.1472", "0.1472", "0.1463"))):
        col = {m: P(t, f"Table 2, {m}, {metric}") for m, t in zip(_PAN_METHODS, values, strict=True)}
        for m in _PAN_METHODS[1:]:
            d.append(Duplicate("001", f"Criteo: relative {metric} reduction of {m}",
                               "(Model-1 - method) / Model-1 <= the text's bound for the calibration methods",
                               (_rel_drop, (col["Base (Model-1)"], col[m]), "relative reduction"), "<=",
                               P("0.2%", "§5.3, Observation 5"),
                               note="the same sentence's 40% Field-ECE reduction is Neural Calibration's, so it "
                                    "is among the calibration methods the bound speaks of"))
    for ds, nc, base_, which in (("Lending Club", "12.0%", "49.2%", "Model-1"), ("Lending Club", "12.0%", "115.3%",
                                                                                 "Model-2"),
                                 ("Porto Seguro", "3.66%", "28.55%", "Model-1"), ("Porto Seguro", "3.66%", "13.90%",
                                                                                  "Model-2")):
        k = _PAN_DATASETS.index(ds) + 1
        d.append(Duplicate("001", f"{ds}: Field-RCE of {which} over Neural Calibration's",
                           "log10(ratio) = 1 ('an order of magnitude', rounded to the nearest power of ten)",
                           (_log10_ratio, (P(base_, f"Table {k}, Base ({which}), Field-RCE"),
                                           P(nc, f"Table {k}, Neural Calibration, Field-RCE")), "log10 ratio"), "=",
                           P("1", "§5.4, 'an order of magnitude'", half_unit=0.5),
                           note="holds as a rounded order of magnitude; no ratio reaches 10"))
    d.append(_same("001", "number of data sets", P("5", "Abstract, 'five'"), P("5", "§5.2, data sets listed")))
    d.append(_same("001", "levels of the Lending Club field z (address state)", P("51", "§3, field z"),
                   P("51", "§5.2, Lending Club")))
    d.append(Duplicate("001", "split shares", "training + development + test = 100%",
                       (lambda a, b, c: a + b + c, (P("60%", "§5.1, training share"),
                                                    P("20%", "§5.1, development share"),
                                                    P("20%", "§5.1, test share")), "sum"), "=",
                       P("100%", "the whole data set", half_unit=0.0)))
    for ds in ("Avazu", "Tencent"):
        days = (P("6", f"§5.2, {ds} training days"), P("2", f"§5.2, {ds} development days"),
                P("2", f"§5.2, {ds} test days"))
        d.append(Duplicate("001", f"{ds} days", "training + development + test days = the days used",
                           (lambda a, b, c: a + b + c, days, "sum of days"), "=", P("10", f"§5.2, {ds} days")))
        d.append(Duplicate("001", f"{ds} training share", "training days / days = the stated training share",
                           (lambda a, b, c: a / (a + b + c), days, "training days / all days"), "=",
                           P("60%", "§5.1, training share")))
        d.append(Duplicate("001", f"{ds} test share", "test days / days = the stated test share",
                           (lambda a, b, c: c / (a + b + c), days, "test days / all days"), "=",
                           P("20%", "§5.1, test share")))
    d.append(Duplicate("001", "correction factor in the §5.7 example", "1 - 10% = 90%",
                       (lambda a: 1 - a, (P("10%", "§5.7, click rate lower by"),), "1 - shortfall"), "=",
                       P("90%", "§5.7, multiplier")))
    return d


def _dups_002() -> list[Duplicate]:
    P, d = printed, []
    for tab, name, m1, m2, s1, s2, std_text, mean_text in (
            ("Table 8", "Quadratic Loss", "4.067", "4.070", "0.0295", "0.0286", "3.1%", "0.07%"),
            ("Table 10", "Log Loss", "0.5366", "0.5343", "0.00385", "0.00370", "3.9%", "0.43%")):
        sec = "App. B.1" if tab == "Table 8" else "App. B.2"
        d.append(Duplicate("002", f"{tab}: std reduction of the calibrated {name}",
                           "(std - calibrated std) / std = the text's percentage",
                           (_rel_drop, (P(s1, f"{tab}, std"), P(s2, f"{tab}, calibrated std")), "relative drop"),
                           "=", P(std_text, f"{sec}, text")))
        d.append(Duplicate("002", f"{tab}: mean difference of the calibrated {name}",
                           "|calibrated mean - mean| / mean = the text's percentage",
                           (_rel_gap, (P(m1, f"{tab}, mean"), P(m2, f"{tab}, calibrated mean")), "relative gap"),
                           "=", P(mean_text, f"{sec}, text")))
    for row, ll, cll in (("remove dense", "0.37408", "0.37403"), ("remove sparse", "0.37404", "0.37398")):
        d.append(Duplicate("002", f"Table 2, {row}: LL vs CLL mean", "|CLL - LL| / LL <= the text's bound",
                           (_rel_gap, (P(ll, f"Table 2, {row}, LL mean"), P(cll, f"Table 2, {row}, CLL mean")),
                            "relative gap"), "<=", P("0.02%", "§5.3, text on Table 2")))
    t12 = (("0", "0.37347", "0.37338"), ("weight 1", "0.37371", "0.37369"), ("weight 2", "0.37419", "0.37411"),
           ("weight 3", "0.37428", "0.37421"), ("weight 4", "0.37475", "0.37459"), ("weight 5", "0.37562", "0.37547"))
    for row, ll, cll in t12:
        d.append(Duplicate("002", f"Table 12, {row}: LL vs CLL mean", "|CLL - LL| / LL <= the text's bound",
                           (_rel_gap, (P(ll, f"Table 12, {row}, LL mean"), P(cll, f"Table 12, {row}, CLL mean")),
                            "relative gap"), "<=", P("0.05%", "§5.3, text on Table 12")))
    why = ("the regularization weights are blank in the seed text: Table 12's rows are matched to Table 6's by "
           "order (the first is no regularization), and Table 6's 4th weight is Table 5's (same accuracies)")
    for (row11, row12), (ll, cll) in ((("Baseline", "0"), ("0.37347", "0.37338")),
                                      (("Regularization", "weight 4"), ("0.37475", "0.37459"))):
        for metric, t in (("LL mean", ll), ("CLL mean", cll)):
            d.append(_same("002", f"{row11} pipeline {metric}", P(t, f"Table 11, {row11}, {metric}"),
                           P(t, f"Table 12, {row12}, {metric}"), note=why))
    for metric, t in (("LL accuracy", "95.2%"), ("CLL accuracy", "98.8%")):
        d.append(_same("002", f"no regularization vs the weight of §5.3: {metric}",
                       P(t, f"Table 5, no regularization vs weight, {metric}"),
                       P(t, f"Table 6, 4th weight, {metric}"), note=why))
    for tab in ("Table 7", "Table 9"):
        d.append(Duplicate("002", f"{tab}: features of pipeline B", "pipeline B drops the last feature: B = A - 1",
                           P("19", f"{tab}, pipeline B features"), "=",
                           (lambda a: a - 1, (P("20", f"{tab}, pipeline A features"),), "A - 1")))
    return d


def _dups_003() -> list[Duplicate]:
    P, d = printed, []
    d.append(_same("003", "conventional ECE of Fig 1's model (NCF, Gaussian calibration, KuaiRec)",
                   P("0.001", "§3.2, Fig 1 text"), P("0.001", "§4.1, text")))
    d.append(_same("003", "conventional ECE of Fig 1's model (NCF, Gaussian calibration, KuaiRec)",
                   P("0.001", "§3.2, Fig 1 text"), P("0.0015", "Table 3, Gaussian calibration, NCF"),
                   note="holds only at the rounding boundary (0.0015 read as 0.00145-0.0015)"))
    d.append(_same("003", "ECE@N of Fig 1's model (NCF, Gaussian calibration, KuaiRec, original method)",
                   P("0.070", "§4.1, text"), P("0.089", "Table 2, NCF, Gaussian calibration, Original ECE@20"),
                   note="Table 2 is the mean of 10 splits (+- 0.024); Fig 1 may be one split, and its N is not "
                        "stated (N = 20 is the default)"))
    d.append(Duplicate("003", "ranking groups n_g", "n_g = N / 5 at N = 20 (§4.2) is the 4 of §5.2",
                       (_ratio, (P("20", "§5.1, N"), P("5", "§4.2, ranks per group")), "N / 5"), "=",
                       P("4", "§5.2, default n_g")))
    d.append(_same("003", "default alpha", P("1", "§4.2, default alpha"), P("1.0", "§5.2, default alpha")))
    d.append(Duplicate("003", "footnote 3 example", "group sizes add up to N",
                       (lambda a, b, c, e: a + b + c + e, (P("5", "§4.2 footnote 3, group 1"),
                                                           P("4", "§4.2 footnote 3, group 2"),
                                                           P("5", "§4.2 footnote 3, group 3"),
                                                           P("4", "§4.2 footnote 3, group 4")), "sum"),
                       "=", P("18", "§4.2 footnote 3, N")))
    d.append(_same("003", "footnote 3 example: groups", P("4", "§4.2 footnote 3, n_g"),
                   P("4", "§4.2 footnote 3, sizes listed")))
    d.append(_same("003", "n_g of one model per rank", P("20", "§5.2, n_g = 20"), P("20", "§5.1, N")))
    d.append(_same("003", "number of recommendations N", P("20", "§5.1, N"), P("20", "Tables 1-2, ECE@20 header")))
    d.append(Duplicate("003", "split shares", "training + validation + test = 100%",
                       (lambda a, b, c: a + b + c, (P("60%", "§5.1, training share"),
                                                    P("20%", "§5.1, validation share"),
                                                    P("20%", "§5.1, test share")), "sum"), "=",
                       P("100%", "the whole data set", half_unit=0.0)))
    d.append(Duplicate("003", "calibrated purchase example", "5 of 10 purchased = the prediction",
                       (_ratio, (P("5", "§1, items purchased"), P("10", "§1, items")), "5 / 10"), "=",
                       P("0.5", "§1, prediction")))
    for genre, share in (("romance", "70%"), ("action", "30%")):
        n = P("70", "§2, romance movies watched") if genre == "romance" else P("30", "§2, action movies watched")
        d.append(Duplicate("003", f"Steck's example: {genre} share", "count / (70 + 30) = the stated share",
                           (lambda a, b, c: a / (b + c), (n, P("70", "§2, romance movies watched"),
                                                          P("30", "§2, action movies watched")), "share"), "=",
                           P(share, f"§2, {genre} share")))
    return d


def _dups_004() -> list[Duplicate]:
    P, d = printed, []
    d.append(_same("004", "fitted temperature", P("2.3202", "§6, lab output"), P("2.3202", "§7, Python output")))
    d.append(_same("004", "planted overconfidence factor", P("2.3", "§6, text and code"), P("2.30", "§6, lab output")))
    d.append(_same("004", "fitted temperature vs the planted factor", P("2.3202", "§6, lab output"),
                   P("2.3", "§6, text and code"), note="the text says the fit recovers the planted factor"))
    d.append(Duplicate("004", "Platt slope", "with intercept ~ 0 Platt scaling on the logit is temperature scaling: "
                                             "a = 1 / T",
                       P("0.4310", "§6, lab output, Platt slope"), "=",
                       (lambda t: 1 / t, (P("2.3202", "§6, lab output, T"),), "1 / T"),
                       note="the printed intercept is 0.0027"))
    d.append(_same("004", "raw ECE", P("0.1150", "§6, results table, Raw"), P("0.11", "§6, closing text"),
                   note="holds at the rounding boundary"))
    for m, t in (("Platt scaling", "0.0242"), ("Isotonic regression", "0.0263"), ("Temperature scaling", "0.0244")):
        d.append(_same("004", f"ECE after {m}", P(t, f"§6, results table, {m}"), P("0.02", "§6, closing text"),
                       note="the text says 'about 0.02' for all three methods"))
    d.append(_same("004", "calibrated score as a frequency", P("0.8", "chapter opening, score"),
                   P("80%", "chapter opening, frequency")))
    d.append(_same("004", "base rate of the constant predictor", P("0.3", "§1.2, base rate"),
                   P("30%", "§1.2, share positive")))
    d.append(Duplicate("004", "spam example", "emails x (1 - confidence) = the mistakes",
                       (lambda n, c: n * (1 - c), (P("100", "§1.1, emails"), P("0.9", "§1.1, confidence")),
                        "100 x (1 - 0.9)"), "=", P("10", "§1.1, mistakes")))
    return d


#: numbers printed twice whose other printing is missing from the seed text: listed, not checked
UNCHECKED = (("002", "§5.3, text on Table 2", "CLL's std 16%-19% below LL's",
              "Table 2's LL Std / CLL Std columns are empty in the seed text"),
             ("002", "§5.3, text on Table 12", "CLL's std 15%-40% below LL's",
              "Table 12's LL Std / CLL Std columns are empty in the seed text"),
             ("002", "§5.3, text on Table 4", "means and stds 'consistent with previous results'",
              "no number in the text; Table 4's Std columns are empty"))


def duplicates() -> list[Duplicate]:
    """Every number the five papers print in more than one place, and every ratio printed beside
    its parts, as a :class:`Duplicate`, grouped by paper.

    Returns:
      The relations, papers ``"000"`` to ``"004"`` in order.

    Example:
      >>> ds = duplicates()
      >>> sorted({d.paper for d in ds})
      ['000', '001', '002', '003', '004']
      >>> all(len({p.place for p in d.parts}) >= 2 for d in ds)
      True
    """
    return [*_dups_000(), *_dups_001(), *_dups_002(), *_dups_003(), *_dups_004()]


def judge(dup: Duplicate) -> dict[str, Any]:
    """One consistency row: both sides' values and intervals, the tolerance and whether it holds.

    ``excess`` is the gap between the two sides' rounding intervals (for ``=``), or by how much
    the inequality fails at the most favourable rounding (for ``<=`` / ``>=``), less ``slack``;
    the relation holds when ``excess <= 0``.

    Args:
      dup: the relation.

    Returns:
      A dict: ``paper``, ``place``, ``quantity``, ``relation``, ``printed`` (both sides' numerals
      and places), ``lhs`` and ``rhs`` (their values), ``tolerance`` (the two half-widths plus
      the slack), ``excess``, ``holds`` and ``note``.

    Example:
      >>> a, b = printed("0.0311", "Table 7, CTR"), printed("0.0312", "§3, text")
      >>> judge(_same("000", "CTR", a, b))["holds"], judge(_same("000", "CTR", a, printed("0.0313", "§3")))["holds"]
      (True, False)
    """
    lv, llo, lhi = _interval(dup.lhs)
    rv, rlo, rhi = _interval(dup.rhs)
    if dup.op == "=":
        gap = max(llo - rhi, rlo - lhi)
    elif dup.op == "<=":
        gap = llo - rhi
    elif dup.op == ">=":
        gap = rlo - lhi
    else:
        raise ValueError(f"{dup.quantity!r}: op must be '=', '<=' or '>=', got {dup.op!r}")
    excess = round(gap - dup.slack, 12)
    return {"paper": dup.paper, "place": dup.place, "quantity": dup.quantity,
            "relation": f"{dup.relation} ({dup.op})", "printed": f"{_words(dup.lhs)} {dup.op} {_words(dup.rhs)}",
            "lhs": lv, "rhs": rv, "tolerance": (lhi - llo) / 2 + (rhi - rlo) / 2 + dup.slack, "excess": excess,
            "holds": bool(excess <= 0), "note": dup.note}


def duplicate_rows() -> list[dict[str, Any]]:
    """:func:`judge` of every :func:`duplicates` entry, each with an ``id`` (``"<paper>-<n>"``,
    numbered within its paper from 1).

    Returns:
      The consistency rows, grouped by paper.

    Example:
      >>> rows = duplicate_rows()
      >>> rows[0]["id"], len(rows) == len(duplicates())
      ('000-01', True)
    """
    out, count = [], dict.fromkeys(("000", "001", "002", "003", "004"), 0)
    for dup in duplicates():
        count[dup.paper] += 1
        out.append({"id": f"{dup.paper}-{count[dup.paper]:02d}", **judge(dup)})
    return out


def by_paper(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per paper: how many consistency rows, how many hold, and the ids of those that do not.

    Args:
      rows: :func:`duplicate_rows`.

    Returns:
      ``{paper: {"rows", "hold", "violations", "violating"}}``.

    Example:
      >>> by_paper(duplicate_rows())["004"]["rows"]
      11
    """
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        b = out.setdefault(r["paper"], {"rows": 0, "hold": 0, "violations": 0, "violating": []})
        b["rows"] += 1
        if r["holds"]:
            b["hold"] += 1
        else:
            b["violations"] += 1
            b["violating"].append(r["id"])
    return out


def run(config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    rows = checks()
    header = list(rows[0])
    out.table("checks", header, [[r[h] for h in header] for r in rows], digits=6)
    by = summarise(rows)
    out.table("relations", ["relation", "rows", "violations", "max_excess", "violating_rows"],
              [[k, b["rows"], b["violations"], b["max_excess"], "; ".join(b["violating_rows"])]
               for k, b in by.items()], digits=6)
    dups = duplicate_rows()
    dup_header = ["id", "paper", "place", "quantity", "relation", "printed", "lhs", "rhs", "tolerance", "excess",
                  "holds", "note"]
    out.table("duplicates", dup_header, [[r[h] for h in dup_header] for r in dups], digits=6)
    out.table("unchecked", ["paper", "place", "claim", "why not checked"], [list(u) for u in UNCHECKED])
    return {"relations": by, "duplicates": {r["id"]: {k: v for k, v in r.items() if k != "id"} for r in dups},
            "duplicates_by_paper": by_paper(dups),
            "unchecked": [dict(zip(("paper", "place", "claim", "why"), u, strict=True)) for u in UNCHECKED]}


def report(summary: Mapping[str, Any]) -> str:
    bad = {k: b for k, b in summary["relations"].items() if b["violations"]}
    line = f"{len(bad)} of {len(summary['relations'])} relations broken by the printed numbers: " + "; ".join(
        f"{k} ({b['violations']}/{b['rows']})" for k, b in bad.items())
    per = summary.get("duplicates_by_paper", {})
    return line + "; numbers printed twice, per paper (violations/rows): " + ", ".join(
        f"{p} {b['violations']}/{b['rows']}" for p, b in per.items())


main = entry_point(__name__)

if __name__ == "__main__":
    main()
