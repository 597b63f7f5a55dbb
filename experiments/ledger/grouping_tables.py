"""“Calibration is Grouping” Tables 1-5, Fig 2 and Fig 7: the calibrator comparison's orderings,
the ablation, the groups' within-group variance, the printed tables' consistency, and VR-SAG
against MCGrad beyond the paper."""

from __future__ import annotations

from typing import Any

import numpy as np

from experiments.ledger.field_aware import FIELD_WORLDS
from experiments.ledger.rows import (
    BY_CONSTRUCTION,
    CONSISTENCY,
    OUR_MARGIN,
    Row,
    make_row,
    missing_row,
    summary_row,
    trusted_interval,
)
from experiments.ledger.rule import (
    BEYOND,
    NO_INTERVAL,
    NOT_ATTEMPTED,
    NOT_TESTED,
    NOT_TESTED_SHARE,
    as_number,
    supported_side,
)
from experiments.ledger.sources import (
    Source,
    every_size,
    load,
)
from experiments.ledger.worlds import ADAUCTION_WORLDS, DATASET_WORDS, world_columns, world_mechanism, world_words

_METRIC_WORDS = {"Brier": "oracle Brier", "Brier+": "Brier+ (oracle MAE)", "LCCE": "LCCE (eq. 12)", "ECE": "ECE",
                 "NLL": "NLL", "bias": "|bias|", "abs_bias": "abs_bias", "MCE": "multicalibration error"}


#: "Calibration is Grouping" Table 1 (ECE, LCCE, Brier+, Brier) and Table 5 (NLL, AUC), the AdAuction
#: column (the one data set with oracle CTRs, which the simulator worlds stand in for), as printed
ADAUCTION: dict[str, dict[str, float]] = {
    "Uncal": {"ECE": 0.0339, "LCCE": 0.0342, "Brier+": 0.0352, "Brier": 0.0527, "NLL": 0.3444, "AUC": 0.8212},
    "Histogram binning": {"ECE": 0.0049, "LCCE": 0.0113, "Brier+": 0.0170, "Brier": 0.0325, "NLL": 0.3207,
                          "AUC": 0.6747},
    "Isotonic regression": {"ECE": 0.0056, "LCCE": 0.0090, "Brier+": 0.0123, "Brier": 0.0282, "NLL": 0.3199,
                            "AUC": 0.8074},
    "Platt scaling": {"ECE": 0.0063, "LCCE": 0.0124, "Brier+": 0.0157, "Brier": 0.0297, "NLL": 0.3187, "AUC": 0.8212},
    "Temperature scaling": {"ECE": 0.0062, "LCCE": 0.0124, "Brier+": 0.0158, "Brier": 0.0296, "NLL": 0.3187,
                            "AUC": 0.8212},
    "SAG+PS": {"ECE": 0.0058, "LCCE": 0.0100, "Brier+": 0.0131, "Brier": 0.0247, "NLL": 0.3183, "AUC": 0.8146},
    "SAG+TS": {"ECE": 0.0054, "LCCE": 0.0099, "Brier+": 0.0130, "Brier": 0.0249, "NLL": 0.3185, "AUC": 0.8154},
    "VR-SAG+PS": {"ECE": 0.0054, "LCCE": 0.0083, "Brier+": 0.0118, "Brier": 0.0237, "NLL": 0.3191, "AUC": 0.8210},
    "VR-SAG+TS": {"ECE": 0.0053, "LCCE": 0.0083, "Brier+": 0.0117, "Brier": 0.0239, "NLL": 0.3193, "AUC": 0.8221},
}
#: where the paper prints each metric of :data:`ADAUCTION` (the place of a row testing it)
PRINTED_IN = {"ECE": "Table 1", "LCCE": "Table 1", "Brier+": "Table 1", "Brier": "Table 1", "NLL": "Table 5",
              "AUC": "Table 5"}
#: where the paper calls two methods "on par" instead of ordering them, with its stated margin (App. G:
#: "its NLL on AdAuction is on par with the best baseline (difference <= 0.0006)", of VR-SAG+TS)
ON_PAR = {("NLL", "VR-SAG+TS", "Temperature scaling"): 0.0006, ("NLL", "VR-SAG+TS", "Platt scaling"): 0.0006}
#: an AccDiff / AUCDiff row whose whole interval lies within this share of the paper's bound holds by
#: construction: with a click rate far below 0.5 nearly every prediction stays below the 0.5 threshold
#: before and after calibration, so accuracy can barely move whatever the calibrator does
BY_CONSTRUCTION_SHARE = 0.1


def _method(name: str) -> str:
    """A comparison method's name as the paper's tables print it (our protocol tags dropped)."""
    return name.split(" [")[0]


def printed_side(metric: str, a: str, b: str) -> tuple[str, str, str, float | None]:
    """The side of ``A - B`` on ``metric`` that the paper's own AdAuction column prints.

    Args:
        metric: a column of :data:`ADAUCTION` (``"ECE"``, ``"LCCE"``, ``"Brier+"``, ``"Brier"``, ``"NLL"``).
        a, b: the two methods (our protocol tags such as ``" [eq. 8-11]"`` are dropped).

    Returns:
        ``(claimed, relation, paper_value, printed_relative_difference)``: ``claimed`` is ``"< 0"`` / ``"> 0"``
        (the printed sign of A - B) or ``"within m"`` where the paper says "on par" with margin ``m``
        (:data:`ON_PAR`); ``relation`` is ``"<"``, ``">"`` or ``"on par with"``; ``paper_value`` the printed
        numbers in words; the last the printed ``(A - B) / B``. ``ValueError`` when the paper prints no
        value for a side or prints them equal (no side to test).

    Example:
        >>> printed_side("NLL", "VR-SAG+TS", "SAG+TS")[:2]
        ('> 0', '>')
        >>> printed_side("LCCE", "VR-SAG+TS [eq. 8-11]", "SAG+TS [eq. 8-11]")[0]
        '< 0'
    """
    pa, pb = ADAUCTION[_method(a)][metric], ADAUCTION[_method(b)][metric]
    rel = (pa - pb) / pb
    words = f"{_method(a)} {pa:.4f} vs {_method(b)} {pb:.4f} ({PRINTED_IN[metric]}, AdAuction; {rel:+.1%})"
    margin = ON_PAR.get((metric, _method(a), _method(b)))
    if margin is not None:
        return f"within {margin:g}", "on par with", f"on par, difference <= {margin:g} (App. G); {words}", rel
    if pa == pb:
        raise ValueError(f"the paper prints {a} and {b} equal on {metric}: no side to test")
    return ("< 0", "<", words, rel) if pa < pb else ("> 0", ">", words, rel)


def _fell_back(share_a: Any, share_b: Any, a: str, b: str) -> str:
    """The reason a comparison is ``not tested`` (a side fell back in most fits), or ''."""
    why = [f"{m} fell back in {sh:.0%} of its calibrators" for m, sh in ((a, share_a), (b, share_b))
           if as_number(sh) is not None and sh > NOT_TESTED_SHARE]
    return "; ".join(why) + (" (the method could not act here)" if why else "")


def _shares(c: dict[str, Any], single: bool = False) -> tuple[Any, Any]:
    """The fallback shares of the fits a verdict comes from: the refits' where the output records
    them (``refit_fallback_share*``), else the table splits' (outputs from before they were
    recorded). ``single``: a one-method row (``fallback_share``), paired with 0."""
    if single:
        return c["refit_fallback_share"] if "refit_fallback_share" in c else c["fallback_share"], 0.0
    pre = "refit_fallback_share" if "refit_fallback_share_a" in c else "fallback_share"
    return c.get(f"{pre}_a"), c.get(f"{pre}_b")


def _undefined(place: str, claim: str, paper: str, fell: str, why: str, scale: str, dataset: str,
               size: str = "") -> Row:
    """The row of a comparison whose metric is undefined in some fold (no mean, no number):
    ``not tested`` when a side fell back, else ``no interval``."""
    return make_row("000", place, claim, paper, verdict=NOT_TESTED if fell else NO_INTERVAL, scale=scale,
                    **world_columns(dataset, size),
                    note=(f"{fell}; " if fell else "no interval: ")
                         + f"the metric is undefined in some fold ({why}), so no mean")


def claims_tables_1_5() -> list[Row]:
    """"Calibration is Grouping" Tables 1, 3, 4, 5 per world: the orderings VR-SAG < SAG < TS / PS (Table 1;
    on ECE, LCCE, oracle Brier and NLL), "VR-SAG is best" (Table 1's bold, Table 3's bias /
    abs_bias, Table 5's NLL: the best VR-SAG variant against the best other method of the
    paper's table), and Table 4's "AccDiff / AUCDiff within +-0.005". Every interval is the
    crossed fits x folds t-interval (fit and split noise; ``compare_calibrators``); the
    paper's own test (paired t over the random splits) and the row bootstrap of split 0 are
    in the note. A comparison where a side fell back in most fits is ``not tested``."""
    found = every_size("compare_calibrators", "claims")
    if not any(size == "" for *_, size in found):
        return [missing_row("000", "Table 1", "VR-SAG < SAG < TS / PS (LCCE, oracle Brier)", "orderings hold",
                            "compare_calibrators")]
    return [row for src, datasets, size in found for row in _tables_1_5(src, datasets, at_size=size)]


def _tables_1_5(src: Source, datasets: frozenset[str], at_size: str = "") -> list[Row]:
    """:func:`claims_tables_1_5` for the data sets ``datasets`` of one output (at ``at_size``)."""
    rows: list[Row] = []
    by_ds: dict[str, list[Row]] = {}
    for i, c in enumerate(src.get("claims")):
        if c["dataset"] not in datasets:
            continue
        words = world_words(c["dataset"], at_size)
        a, b = c["claim"].split(" < ")
        paper_t = (f"; the paper's test (paired t over the random splits, which share the fits): "
                   f"{c['paper_t_diff']:+.3g} [{c['paper_t_lo']:+.3g}, {c['paper_t_hi']:+.3g}]"
                   if "paper_t_diff" in c else "")
        fits = (f"{c['refit_fits']} fits x {c['refit_folds']} folds" if "refit_fits" in c else "folds (one fit)")
        info = src.summary.get("info", {}).get(c["dataset"], {})
        size = (f"; the [eq. 8-11] side is fitted on D_val ({info.get('n_val', '?')} rows), the other on each "
                f"split's D_ho ({info.get('n_ho', '?')} rows): a data-size advantage is part of this difference"
                if (a.endswith("[eq. 8-11]")) != (b.endswith(("[eq. 8-11]", "[D_val]"))) else "")
        if b.endswith("[D_val]"):
            size = ("; the baseline is fitted on the same D_val rows (and draws) as the eq. 8-11 side, not on D_ho as "
                    "in the paper's table: the same claim without the data-size advantage")
        if info.get("refit_rows"):
            fits += f" ({info['refit_rows']})"
        if info.get("fold_rows") and info.get("n_ho") and info.get("n_standard_test"):
            fold_ho = info.get("refit_ho_rows", round(info["fold_rows"] * info["n_ho"] / info["n_standard_test"]))
            if fold_ho < 0.9 * info["n_ho"]:  # the refits' D_ho-fitted stages see less data than the table's
                size += (f"; the refits' D_ho holds {fold_ho} rows, the table's {info['n_ho']}: the interval "
                         "measures calibrators fitted on less data than the table's")
        lo, hi, mismatch = c["refit_lo"], c["refit_hi"], ""
        if "paper_t_lo" in c and (lo > 0 > c["paper_t_hi"] or hi < 0 < c["paper_t_lo"]):
            # two estimands that disagree beyond both intervals: neither is the table's verdict
            lo, hi, mismatch = "", "", (f"the crossed refits ({c['refit_lo']:+.3g}, {c['refit_hi']:+.3g}) and the "
                                        "table's own paired t exclude 0 on opposite sides, so the refit interval "
                                        "does not measure the table's difference")
        claimed, relation, paper, _ = printed_side(c["metric"], a, b)
        row = make_row("000", f"{PRINTED_IN[c['metric']]} ({words})",
                       f"{a} {relation} {b} on {_METRIC_WORDS.get(c['metric'], c['metric'])}; SAG protocol: "
                       f"{c['protocol']}", paper, ours=c["refit_diff"], lo=lo, hi=hi, claimed=claimed,
                       why_no_interval=mismatch,
                       scale=src.scale, source=src.cite(f"claims/{i}/refit_diff"),
                       **world_columns(c["dataset"], at_size),
                       not_tested=_fell_back(*_shares(c), a, b),
                       note=f"A - B; means {c['mean_a']:.4g} vs {c['mean_b']:.4g}; crossed t-interval over {fits}"
                            f"{paper_t}; paired row bootstrap (split 0): {c['rows_diff']:+.3g} "
                            f"[{c['rows_lo']:+.3g}, {c['rows_hi']:+.3g}]{size}")
        by_ds.setdefault(c["dataset"], []).append(row)
    for ds, rs in by_ds.items():
        rows += rs
        for table, what in (("Table 1", "the orderings of Table 1 (VR-SAG < SAG < TS / PS)"),
                            ("Table 5", "the NLL orderings of Table 5 (the sides its AdAuction column prints)")):
            mine = [r for r in rs if r.place.startswith(table)]
            if mine:
                rows.append(summary_row("000", f"{table} ({world_words(ds, at_size)})", what, mine, src.scale,
                                        **world_columns(ds, at_size)))
    for i, c in enumerate(src.summary.get("best", [])):
        if c["dataset"] not in datasets:
            continue
        words = world_words(c["dataset"], at_size)
        a, b = c["claim"].split(" < ")
        if as_number(c["diff"]) is None:  # e.g. bias (p/y - 1) in a fold without clicks
            rows.append(_undefined(f"{c['place']} ({words})", f"a VR-SAG variant is best on "
                                   f"{_METRIC_WORDS.get(c['metric'], c['metric'])}: {c['claim']}", "VR-SAG best (bold)",
                                   _fell_back(*_shares(c), a, b),
                                   "a fold without clicks: bias divides by the click rate",
                                   src.scale, c["dataset"], at_size))
            continue
        claim, claimed, paper = (f"a VR-SAG variant is best on {_METRIC_WORDS.get(c['metric'], c['metric'])}: "
                                 f"{c['claim']}", "< 0", "VR-SAG best (bold)")
        if c["metric"] in PRINTED_IN:  # the side the paper's AdAuction column prints, best against best
            vr = min((m for m in ADAUCTION if m.startswith("VR-SAG")), key=lambda m: ADAUCTION[m][c["metric"]])
            other = min((m for m in ADAUCTION if not m.startswith("VR-SAG")),
                        key=lambda m: ADAUCTION[m][c["metric"]])
            claimed, relation, paper, _ = printed_side(c["metric"], vr, other)
            if claimed == "> 0":
                claim = (f"the best other method is below every VR-SAG variant on "
                         f"{_METRIC_WORDS.get(c['metric'], c['metric'])} (as the paper's AdAuction column prints): "
                         f"{a} > {b}")
        rows.append(make_row("000", f"{c['place']} ({words})", claim,
                             paper, ours=c["diff"], lo=c["lo"], hi=c["hi"], claimed=claimed,
                             scale=src.scale, source=src.cite(f"best/{i}/diff"), **world_columns(c["dataset"], at_size),
                             not_tested=_fell_back(*_shares(c), a, b),
                             note=f"the best VR-SAG variant against the best other method of the paper's table, "
                                  f"A - B on the {c['scale']} scale; means {c['mean_a']:.4g} vs {c['mean_b']:.4g}; "
                                  "crossed "
                                  f"t-interval over {c['fits']} fits x {c['folds']} folds"))
    for i, c in enumerate(src.summary.get("accuracy", [])):
        if c["dataset"] not in datasets:
            continue
        words = world_words(c["dataset"], at_size)
        trivial = c["metric"] == "AccDiff" and c["lo"] == c["hi"] == c["mean"] == 0
        tiny = (c["metric"] == "AccDiff" and as_number(c["lo"]) is not None
                and -BY_CONSTRUCTION_SHARE * c["bound"] < c["lo"] <= c["hi"] < BY_CONSTRUCTION_SHARE * c["bound"])
        if as_number(c["lo"]) is None:  # AUC (so AUCDiff) is undefined in a fold without clicks
            rows.append(_undefined(f"§3.1 / Table 4 ({words})", f"{c['method']} keeps {c['metric']} within "
                                   f"+-{c['bound']}", f"|{c['metric']}| <= {c['bound']}",
                                   _fell_back(*_shares(c, single=True), c["method"], "-"),
                                   "a fold without clicks", src.scale, c["dataset"], at_size))
            continue
        rows.append(make_row("000", f"§3.1 / Table 4 ({words})", f"{c['method']} keeps {c['metric']} within "
                             f"+-{c['bound']}", f"|{c['metric']}| <= {c['bound']}", ours=c["mean"], lo=c["lo"],
                             hi=c["hi"], claimed=f"within {c['bound']}", scale=src.scale,
                             source=src.cite(f"accuracy/{i}/mean"), **world_columns(c["dataset"], at_size),
                             kind=BY_CONSTRUCTION if trivial or tiny else None,
                             not_tested=_fell_back(*_shares(c, single=True), c["method"], "-"),
                             note="relative change against the backbone (App. E.1); crossed fits x folds interval"
                                  + ("; exactly 0 in every fit and fold: at this click rate every prediction stays "
                                     "below 0.5 before and after calibration, so accuracy cannot move" if trivial else
                                     f"; the whole interval lies within {BY_CONSTRUCTION_SHARE:g} of the bound: at "
                                     "this "
                                     "click rate nearly every prediction stays below 0.5 before and after calibration, "
                                     "so accuracy can barely move (holds by construction, not a reproduction)"
                                     if tiny else "")))
    if "best" not in src.summary:
        rows.append(make_row("000", "Tables 1, 3-5", "VR-SAG best; AccDiff / AUCDiff within +-0.005", "-",
                             verdict=NOT_ATTEMPTED, note="the committed comparison predates these rows; rerun "
                                                         "`python -m experiments run compare_calibrators --quick`"))
    return rows


#: the null world: the grouping worlds' VR-SAG vs SAG differences are set against its own
NULL_WORLD = "simulator"


def claims_null_contrast() -> list[Row]:
    r"""Beyond the paper: does a grouping calibrator's difference from its baseline in a world with
    the grouping mechanism exceed the same difference in the null world of the same size?

    For every ordering of Tables 1 and 5 whose first method groups (``VR-SAG < SAG``, and SAG or
    VR-SAG against temperature or Platt scaling; each protocol and metric) measured both in a
    world that can express the mechanism and in the null world at the same data size,
    the row reports the difference of the two crossed-refit estimates,
    :math:`\Delta_\text{world} - \Delta_\text{null}`, with the interval
    :math:`\pm\sqrt{h_\text{world}^2 + h_\text{null}^2}` from the two intervals' half-widths
    (the two worlds are separate simulations, treated as independent; a normal approximation). A gain
    that the null world shows as well is not evidence for the mechanism (groups of rows that the
    embedding tells apart, for VR-SAG against SAG its variance penalty); one beyond it is. At the
    paper's data size the null world's grouping calibrators beat temperature scaling as well, so a
    "reproduces" against it needs this row beside it. The rows state which side the interval
    supports, in the direction the paper prints for the comparison."""
    rows: list[Row] = []
    found = every_size("compare_calibrators", "claims")
    by_size: dict[str, list[tuple[Source, frozenset[str]]]] = {}
    for src, datasets, size in found:
        by_size.setdefault(size, []).append((src, datasets))
    for size, outputs in by_size.items():
        null_src = next((src for src, ds in outputs if NULL_WORLD in ds), None)
        if null_src is None:
            continue
        null_claims = {(c["claim"], c["metric"], c["protocol"]): (i, c) for i, c in enumerate(null_src.get("claims"))
                       if c["dataset"] == NULL_WORLD}
        for src, datasets in outputs:
            for i, c in enumerate(src.get("claims")):
                a, b = c["claim"].split(" < ")
                if (c["dataset"] == NULL_WORLD or c["dataset"] not in datasets
                        or world_mechanism(c["dataset"])[0] == "no"
                        or not a.startswith(("SAG", "VR-SAG"))):
                    continue
                j, n = null_claims.get((c["claim"], c["metric"], c["protocol"]), (None, None))
                if n is None or any(as_number(x.get(k)) is None for x in (c, n)
                                    for k in ("refit_diff", "refit_lo", "refit_hi")):
                    continue
                diff = c["refit_diff"] - n["refit_diff"]
                half = float(np.hypot((c["refit_hi"] - c["refit_lo"]) / 2, (n["refit_hi"] - n["refit_lo"]) / 2))
                try:
                    claimed, relation, paper, _ = printed_side(c["metric"], a, b)
                except ValueError:  # the paper prints no side for this pair
                    continue
                if claimed not in ("< 0", "> 0"):
                    continue
                lo, hi = diff - half, diff + half
                sign = -1.0 if claimed == "< 0" else 1.0  # the paper's printed side of A - B
                beyond = "beyond the null world's difference"
                side = (f"{beyond} on the side the paper prints" if min(sign * lo, sign * hi) > 0
                        else f"{beyond} on the other side" if max(sign * lo, sign * hi) < 0
                        else "not told apart from the null world's difference (the interval contains 0)")
                words = world_words(c["dataset"], size)
                rows.append(make_row(
                    "000", f"beyond the paper: the null world's difference, {PRINTED_IN[c['metric']]} ({words})",
                    f"{a} - {b} on {_METRIC_WORDS.get(c['metric'], c['metric'])} beyond the same difference in the "
                    f"null world{' at ' + size if size else ''}; SAG protocol: {c['protocol']}",
                    f"(not in the paper; it prints {a} {relation} {b}: {paper})", ours=diff, lo=lo,
                    hi=hi, scale=src.scale, verdict=BEYOND,
                    source=f"{src.cite(f'claims/{i}/refit_diff')} minus {null_src.cite(f'claims/{j}/refit_diff')}",
                    **world_columns(c["dataset"], size),
                    note=f"{side}; this world {c['refit_diff']:+.3g} [{c['refit_lo']:+.3g}, {c['refit_hi']:+.3g}], "
                         f"the null world {n['refit_diff']:+.3g} [{n['refit_lo']:+.3g}, {n['refit_hi']:+.3g}] "
                         "(crossed refit t-intervals); the difference's interval combines their half-widths "
                         "as independent"))
    return rows


#: the calibrators whose map of the logit has no intercept (one temperature, or a temperature per
#: group under the reference protocol): a level shift of the backbone's logits is left to them
TEMPERATURE_ONLY = ("Temperature scaling", "SAG+TS", "VR-SAG+TS")
#: beside each, the same maps with an intercept: Platt scaling, and SAG+TS with the offsets of eq. 8-11
WITH_INTERCEPT = ("Platt scaling", "SAG+TS [eq. 8-11]")


def claims_level_shift() -> list[Row]:
    r"""Beyond the paper: the level shift a temperature leaves, which explains why calibrators with
    an intercept beat temperature scaling in worlds where no grouping can act.

    A temperature rescales the logit, :math:`\sigma(o/\tau)`, and cannot move the mean prediction
    where the backbone's logits are shifted; Platt scaling's intercept and the per-group offsets
    :math:`\beta_k` of eq. 8-11 ("Calibration is Grouping", anonymous authors, under review) can.
    For every comparison world of every committed ``compare_calibrators`` output (the preset's and
    each other data size), one row per temperature-only method (:data:`TEMPERATURE_ONLY`) reports
    Table 3's relative bias, :math:`\sum_i p_i / \sum_i y_i - 1`, on split 0's evaluation rows with
    its row-bootstrap interval; the note gives the same number for the maps with an intercept
    (:data:`WITH_INTERCEPT`). Where a temperature leaves a far larger shift than an intercept does, a
    calibrator with an intercept or offsets leads temperature scaling on ECE, LCCE and the Brier
    scores without any groups: such a "reproduces" is no evidence of grouping (the null-world
    contrast rows test that)."""
    rows: list[Row] = []
    for src, datasets, size in every_size("compare_calibrators", "intervals"):
        intervals = src.get("intervals")
        for ds in sorted(d for d in datasets if d.startswith("simulator") and d in intervals):
            per_method = intervals[ds]

            def ends(m: str, per_method: dict[str, Any] = per_method) -> str:
                v = per_method[m]["bias"]
                return f"{m} {v[0]:+.3g} [{v[1]:+.3g}, {v[2]:+.3g}]"

            beside = [m for m in WITH_INTERCEPT if "bias" in per_method.get(m, {})]
            words = world_words(ds, size)
            for m in TEMPERATURE_ONLY:
                v = per_method.get(m, {}).get("bias")
                if v is None:
                    continue
                rows.append(make_row(
                    "000", f"beyond the paper: the level shift a temperature leaves, Table 3 ({words})",
                    f"{m}: relative bias (mean prediction over the mean label, minus 1) on split 0's evaluation "
                    f"rows; SAG protocol: reference",
                    "(not in the paper; its Table 3 prints each method's bias, not why temperature scaling "
                    "trails the maps with an intercept)", ours=v[0], lo=v[1], hi=v[2], scale=src.scale,
                    verdict=BEYOND, source=src.cite(f"intervals/{ds}/{m}/bias/0"), **world_columns(ds, size),
                    note=("row bootstrap of split 0 (95%); the same maps with an intercept: "
                          + "; ".join(ends(b) for b in beside)
                          + ". A shift an intercept or offsets can remove and a temperature cannot: where this "
                          "one is far larger than theirs, their lead over temperature scaling on ECE, LCCE and the "
                          "Brier scores needs no groups")))
    return rows


_ABLATION_WORDS = {"partitions": "more partitions P", "groups": "more groups per partition K",
                   "lam_v": "a variance weight lambda_v > 0"}


def claims_fig2() -> list[Row]:
    """"Calibration is Grouping" Fig 2 (§3.3): "as the number of partitions increases, calibration improves"
    and groups give gains with diminishing returns: per world, the largest setting of the
    ablation against its first value (P = 1, K = 1), paired within each of independent fits
    (each on its own D_val) and test folds, with the crossed interval (the largest, not the
    best, setting: picking the best of several would bias the test). For the
    variance weight the paper claims only that performance "varies modestly": no direction,
    so that row is reported beyond the paper, without a verdict."""
    src = load("ablation", "paired")
    if src is None:
        return [missing_row("000", "Fig 2", "VR-SAG gains from partitions, groups, lambda_v", "gains", "ablation")]
    rows = []
    paired = src.get("paired")
    paper = {"partitions": "calibration improves with more partitions",
             "groups": "gains from more groups, with diminishing returns",
             "lam_v": "performance varies modestly (no direction)"}
    for world in dict.fromkeys(k.split("/")[0] for k in paired):
        for abl, words in _ABLATION_WORDS.items():
            cands = {k: v for k, v in paired.items() if k.startswith(f"{world}/{abl}/") and k.endswith("/Brier")}
            if not cands:
                continue
            k, d = max(cands.items(), key=lambda kv: float(kv[0].split("/")[2]))
            value = k.split("/")[2]
            kw: dict[str, Any] = dict(claimed="< 0") if abl != "lam_v" else dict(verdict=BEYOND)
            rows.append(make_row("000", f"Fig 2 ({DATASET_WORDS.get(world, world)})",
                                 f"{words} lowers the oracle Brier of VR-SAG+TS (largest setting {value} vs "
                                 f"{d['reference']})", paper[abl], ours=d["diff"], lo=d["lo"], hi=d["hi"],
                                 scale=src.scale, source=src.cite(f"paired/{k}/diff"), **kw, **world_columns(world),
                                 note=("" if abl != "lam_v" else supported_side({"lo": -d["hi"], "hi": -d["lo"]},
                                                                            f"lambda_v = {value}",
                                                                            "lambda_v = 0") + "; ")
                                      + "setting minus reference (< 0: lower); "
                                      + (f"{src.get('n_fits')} independent fits (each on its own D_val) x "
                                         f"{src.get('n_folds')} test folds, crossed interval"
                                         if src.get("n_fits") else "paired row bootstrap of the test split, first seed")
                                      + "; the paper's Fig 2 is on its real data sets"))
    return rows


def claims_mcgrad() -> list[Row]:
    """Beyond the paper: VR-SAG against MCGrad, the production multicalibration
    method, in the calibrator comparison (oracle Brier, LCCE, multicalibration error; refit
    intervals) and in the field-aware study (Field-RCE, oracle Brier; row bootstrap)."""
    rows: list[Row] = []
    found = every_size("compare_calibrators", "vs_mcgrad")
    if not any(size == "" for *_, size in found):
        rows.append(missing_row("000", "beyond the paper (MCGrad)", "VR-SAG vs MCGrad in Tables 1-5",
                                "(not in the paper)", "compare_calibrators"))
    for src, datasets, size in found:
        for i, c in enumerate(src.get("vs_mcgrad")):
            if c["metric"] not in ("Brier", "LCCE", "MCE") or c["dataset"] not in datasets:
                continue
            metric = {"Brier": "oracle Brier", "LCCE": "LCCE (eq. 12)", "MCE": "multicalibration error"}[c["metric"]]
            d = {"diff": -c["refit_diff"], "lo": -c["refit_hi"], "hi": -c["refit_lo"]}
            a, b = c["claim"].split(" < ")
            words = world_words(c["dataset"], size)
            rows.append(make_row("000", f"beyond the paper: MCGrad, Table 1 ({words})",
                                 f"{c['claim']} on {metric}", "(not in the paper)", ours=c["refit_diff"],
                                 lo=c["refit_lo"], hi=c["refit_hi"], scale=src.scale, verdict=BEYOND,
                                 source=src.cite(f"vs_mcgrad/{i}/refit_diff"), **world_columns(c["dataset"], size),
                                 note=f"{supported_side(d, a, b)}; A - B; means {c['mean_a']:.4g} vs "
                                      f"{c['mean_b']:.4g}; "
                                      "t-interval over independent refits"))
    fsrc = load("field_calibration")
    for ds in ("simulator", "open_bandit"):
        refits = None if fsrc is None else fsrc.summary.get(f"{ds}/main/refits", {}).get("MCGrad - VR-SAG")
        if refits is not None:
            for metric in ("Field-RCE", "Oracle Brier"):
                if metric in refits and fsrc is not None:
                    p = refits[metric]
                    rows.append(make_row("001", f"beyond the paper: MCGrad, field-aware study ({ds}, main split)",
                                         f"MCGrad - VR-SAG on {metric}", "(not in the paper)", ours=p["diff"],
                                         lo=p["lo"],
                                         hi=p["hi"], scale=fsrc.scale, verdict=BEYOND, **FIELD_WORLDS[ds],
                                         source=fsrc.cite(f"{ds}/main/refits/MCGrad - VR-SAG/{metric}/diff"),
                                         note=f"{supported_side(p, 'VR-SAG', 'MCGrad')}; paired t-interval over "
                                              f"{p['n']} "
                                              "independent refits"))
            continue
        paired = None if fsrc is None else fsrc.summary.get(f"{ds}/main/paired", {}).get("MCGrad - VR-SAG")
        if paired is None:
            continue
        for metric in ("Field-RCE", "Oracle Brier"):
            if metric not in paired:
                continue
            p = paired[metric]
            lo, hi, how = trusted_interval(p["diff"], p["lo"], p["hi"], "paired row bootstrap of D_test")
            # MCGrad - VR-SAG > 0 (lower is better): VR-SAG ahead
            side = supported_side(p, "VR-SAG", "MCGrad") if lo != "" else "no trusted interval"
            rows.append(make_row("001", f"beyond the paper: MCGrad, field-aware study ({ds}, main split)",
                                 f"MCGrad - VR-SAG on {metric}", "(not in the paper)", ours=p["diff"], lo=lo,
                                 hi=hi, scale=fsrc.scale if fsrc else "", verdict=BEYOND, **FIELD_WORLDS[ds],
                                 source=fsrc.cite(f"{ds}/main/paired/MCGrad - VR-SAG/{metric}/diff") if fsrc else "",
                                 note=f"{side}; {how}"))
    return rows


def claims_printed_tables() -> list[Row]:
    """"Calibration is Grouping"'s printed tables checked against relations that hold by definition
    (``experiments/printed_tables.py``): one row per relation, ``ours`` = the largest excess
    of a printed row over the relation (> 0: the printed numbers break it). An exact check
    of printed numbers, no sampling: the interval is the number itself."""
    src = load("printed_tables", "relations")
    if src is None:
        return [missing_row("000", "Tables 1, 3-5, 7", "printed tables consistent with their definitions", "-",
                            "printed_tables")]
    rows = []
    for key, b in src.get("relations").items():
        x = b["max_excess"]
        rows.append(make_row("000", f"{b['table']} (printed, internal consistency)", b["relation"],
                             "holds by definition", ours=x, lo=x, hi=x, claimed="< 0", scale="exact", kind=CONSISTENCY,
                             source=src.cite(f"relations/{key}/max_excess"),
                             note=(f"{b['violations']} of {b['rows']} printed rows break it: "
                                   f"{'; '.join(b['violating_rows'])}" if b["violations"] else
                                   f"all {b['rows']} printed rows satisfy it")
                             + "; ours = largest (lhs - rhs - rounding tolerance) over the rows"))
    return rows + _printed_twice(src)


def _printed_twice(src: Source) -> list[Row]:
    """One row per number the five papers print in more than one place (or ratio printed beside
    its parts), from the study's ``duplicates``: ``ours`` = the gap between the two printings'
    rounding intervals (> 0: they cannot both be right), exact, no sampling."""
    dups = src.summary.get("duplicates")
    if not dups:
        return [missing_row("000", "numbers printed twice", "every number printed twice agrees with itself", "-",
                            "printed_tables")]
    rows = []
    for key, d in dups.items():
        x = d["excess"]
        said = (f"holds: {d['lhs']:.6g} vs {d['rhs']:.6g} within the printed digits' rounding "
                f"(tolerance {d['tolerance']:.3g})" if d["holds"] else
                f"does not hold: {d['lhs']:.6g} vs {d['rhs']:.6g}, {x:.3g} beyond the printed digits' rounding "
                f"(tolerance {d['tolerance']:.3g})")
        rows.append(make_row(d["paper"], f"{d['place']} (printed twice)", f"{d['quantity']}: {d['relation']}",
                             d["printed"], ours=x, lo=x, hi=x, claimed="< 0", scale="exact", kind=CONSISTENCY,
                             source=src.cite(f"duplicates/{key}/excess"),
                             note=f"{said}" + (f"; {d['note']}" if d["note"] else "")
                             + "; ours = gap between the two printings' rounding intervals"))
    return rows


#: every table and figure of the four papers (keys "000"-"003" of the ``seed`` column) and where
#: the ledger answers it: a place that no computed row covers gets a "not attempted" row with the
#: reason (or "not run yet")
_NO_PAIRS = ("the committed comparison records each method's mean over the splits, not the paired differences "
             "between two calibrated methods; the next paper-scale run of compare_calibrators records them")


def claims_tables_4_5_text() -> list[Row]:
    """The sentences of "Calibration is Grouping" Tables 4-5 that no ordering row covers: Platt and
    temperature scaling leave the AUC unchanged (a strictly increasing map keeps every ranking:
    exact, in every world), histogram binning degrades the AUC the most (Table 4), and
    VR-SAG+TS's NLL is within 0.0006 of the best with a competitive AUC (Table 5, AdAuction, read
    in both AdAuction-like worlds): paired differences over the crossed fits x folds where the
    output records them (``text_claims``), else the means over its splits without an interval."""
    found = every_size("compare_calibrators", "means")
    if not any(size == "" for *_, size in found):
        return [missing_row("000", "Tables 4-5", "AUC kept by PS/TS, degraded most by histogram binning", "-",
                            "compare_calibrators")]
    return [row for src, datasets, size in found for row in _tables_4_5_text(src, datasets, size)]


def _tables_4_5_text(src: Source, datasets: frozenset[str], size: str = "") -> list[Row]:
    """:func:`claims_tables_4_5_text` for the data sets ``datasets`` of one output (at ``size``)."""
    rows: list[Row] = []
    means = {ds: m for ds, m in src.get("means").items() if ds in datasets}
    for ds, m in means.items():
        words = world_words(ds, size)
        for method in ("Platt scaling", "Temperature scaling"):
            if method in m and "AUCDiff" in m[method]:
                x = m[method]["AUCDiff"]
                rows.append(make_row("000", f"§3.1 / Table 4 ({words})",
                                     f"{method} leaves the AUC unchanged (AUCDiff = 0)",
                                     "0.0000", ours=x, lo=x, hi=x, claimed="in -0.00005 0.00005", scale=src.scale,
                                     **world_columns(ds, size), kind=BY_CONSTRUCTION,
                                     source=src.cite(f"means/{ds}/{method}/AUCDiff"),
                                     note="the mean over the splits, to the paper's printed digits (the interval is "
                                          "the "
                                          "number): a strictly increasing map of the scores keeps every pair's order; "
                                          f"what is left ({x:+.2g}) is float32 rounding merging or splitting ties"))
    paired = {(c["dataset"], c["claim"]): (k, c) for k, c in enumerate(src.summary.get("text_claims") or [])}
    for ds, m in means.items():
        words = world_words(ds, size)
        others = {k: v["AUCDiff"] for k, v in m.items() if k not in ("Uncal", "Histogram binning") and "AUCDiff" in v}
        claim = "histogram binning degrades the AUC the most"
        if (ds, claim) in paired:
            k, c = paired[(ds, claim)]
            rows.append(make_row("000", f"Table 4 ({words})", claim, "lowest AUCDiff (e.g. -0.2857 on AE)",
                                 ours=c["diff"], lo=c["lo"], hi=c["hi"], claimed="< 0", scale=src.scale,
                                 **world_columns(ds, size),
                                 source=src.cite(f"text_claims/{k}/diff"),
                                 note=f"AUCDiff of histogram binning minus the next lowest ({c['b']}); means "
                                      f"{c['mean_a']:+.4g} vs {c['mean_b']:+.4g}; crossed t-interval over {c['fits']} "
                                      f"fits x {c['folds']} folds"))
        elif "Histogram binning" in m and others:
            worst = min(others, key=lambda k: others[k])
            hb = m["Histogram binning"]["AUCDiff"]
            rows.append(make_row("000", f"Table 4 ({words})", claim,
                                 "lowest AUCDiff (e.g. -0.2857 on AE)", ours=hb, claimed=f"< {others[worst]:.6g}",
                                 scale=src.scale, **world_columns(ds, size),
                                 source=src.cite(f"means/{ds}/Histogram binning/AUCDiff"),
                                 why_no_interval=_NO_PAIRS,
                                 note=f"mean AUCDiff over the splits; the next lowest: {worst} {others[worst]:+.4g}"))
    for ds in (d for d in ADAUCTION_WORLDS if d in means):
        m, words = means[ds], world_words(ds, size)
        nll_claim, auc_claim = ("VR-SAG+TS's NLL is within 0.0006 of the best baseline",
                                "VR-SAG+TS keeps a competitive AUC")
        if (ds, nll_claim) in paired and (ds, auc_claim) in paired:
            k, c = paired[(ds, nll_claim)]
            rows.append(make_row("000", f"Table 5 ({words})", nll_claim, "difference <= 0.0006", ours=c["diff"],
                                 lo=c["lo"], hi=c["hi"], claimed="< 0.0006", scale=src.scale, **world_columns(ds, size),
                                 source=src.cite(f"text_claims/{k}/diff"),
                                 note=f"NLL of VR-SAG+TS minus the best baseline's ({c['b']}); means "
                                      f"{c['mean_a']:.5g} vs "
                                      f"{c['mean_b']:.5g}; crossed t-interval over {c['fits']} fits x {c['folds']} "
                                      "folds"))
            k, c = paired[(ds, auc_claim)]
            rows.append(make_row("000", f"Table 5 ({words})", f"{auc_claim}: within 0.005 of the best baseline",
                                 "competitive (no number)", ours=c["diff"], lo=c["lo"], hi=c["hi"], claimed="> -0.005",
                                 scale=src.scale, **world_columns(ds, size), kind=OUR_MARGIN,
                                 source=src.cite(f"text_claims/{k}/diff"),
                                 note=f"AUC of VR-SAG+TS minus the best baseline's ({c['b']}); means "
                                      f"{c['mean_a']:.4f} vs "
                                      f"{c['mean_b']:.4f}; crossed t-interval over {c['fits']} fits x {c['folds']} "
                                      "folds; "
                                      "the margin 0.005 is the project's, borrowed from the paper's AUCDiff bound (it "
                                      "gives none for 'competitive')"))
            continue
        if "VR-SAG+TS" in m:
            rivals = {k: v for k, v in m.items() if not k.startswith("VR-SAG") and k != "Uncal"}  # baselines
            best_nll = min(rivals, key=lambda k: rivals[k]["NLL"])
            gap = m["VR-SAG+TS"]["NLL"] - rivals[best_nll]["NLL"]
            rows.append(make_row("000", f"Table 5 ({words})",
                                 "VR-SAG+TS's NLL is within 0.0006 of the best baseline", "difference <= 0.0006",
                                 ours=gap, claimed="< 0.0006", scale=src.scale, **world_columns(ds, size),
                                 source=src.cite(f"means/{ds}/VR-SAG+TS/NLL") + f" minus means/{ds}/{best_nll}/NLL",
                                 why_no_interval=_NO_PAIRS,
                                 note=f"VR-SAG+TS NLL {m['VR-SAG+TS']['NLL']:.5g} minus the best baseline's "
                                      f"({best_nll}) {rivals[best_nll]['NLL']:.5g}"))
            best_auc = max(rivals, key=lambda k: rivals[k]["AUC"])
            gap = rivals[best_auc]["AUC"] - m["VR-SAG+TS"]["AUC"]
            rows.append(make_row("000", f"Table 5 ({words})",
                                 "VR-SAG+TS keeps a competitive AUC: within 0.005 of the best",
                                 "competitive (no number)", ours=gap, claimed="< 0.005", scale=src.scale,
                                 **world_columns(ds, size),
                                 kind=OUR_MARGIN,
                                 source=src.cite(f"means/{ds}/{best_auc}/AUC") + f" minus means/{ds}/VR-SAG+TS/AUC",
                                 why_no_interval=_NO_PAIRS,
                                 note=f"best baseline AUC ({best_auc}) {rivals[best_auc]['AUC']:.4f} minus VR-SAG+TS's "
                                      f"{m['VR-SAG+TS']['AUC']:.4f}; the margin 0.005 is the project's, borrowed from "
                                      "the paper's AUCDiff bound (it gives none for 'competitive')"))
    return rows


def claims_fig7() -> list[Row]:
    """"Calibration is Grouping" Fig 7: VR-SAG's groups have the lowest within-group variance of
    the true click probabilities (0.0058 in the paper), below SAG's and the field grouping's.
    One row per world and rival: the paired difference of the oracle within-group variances
    (hard memberships, mean over partitions) with its crossed interval over independent fits
    (each on its own D_val of the same size) and disjoint test folds."""
    src = load("grouping", "differences")
    if src is None:
        return [missing_row("000", "Fig 7", "VR-SAG has the lowest within-group variance", "0.0058", "grouping")]
    header = src.get("diff_header")
    means = {(r[0], r[1].split(" ")[0]): r for r in src.get("rows") if r[3].split(" ")[0] in ("hard",)}
    rows = []
    for i, d in enumerate(src.get("differences")):
        rec = dict(zip(header, d))
        if not rec["comparison"].startswith("VR-SAG - ") or rec["memberships"] != "hard" \
                or rec["quantity"] != "oracle":
            continue
        world, rival = rec["world"], rec["comparison"].split(" - ")[1]
        a, b = means.get((world, "VR-SAG")), means.get((world, rival))
        detail = f"VR-SAG {a[5]:.5f} vs {b[1]} {b[5]:.5f}; " if a and b else ""
        rows.append(make_row("000", "Fig 7", f"VR-SAG's groups have a lower within-group variance of the true "
                             f"probability than {'the field grouping' if rival == 'field' else rival}'s",
                             "VR-SAG lowest (0.0058)", ours=rec["diff"], lo=rec["lo"], hi=rec["hi"], claimed="< 0",
                             scale=src.scale,
                             world=str(DATASET_WORDS.get(world, world)) + " (the variance penalty acts "
                             "on any embedding that predicts the score)", mechanism="yes",
                             source=src.cite(f"differences/{i}/{header.index('diff')}"),
                             note=f"{detail}hard memberships, mean over partitions; {rec['n_fits']} fits (each on its "
                                  f"own D_val of the same size) x {rec['n_folds']} test folds, crossed interval"))
    return rows


