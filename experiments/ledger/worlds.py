"""The comparison worlds: how the ledger names each one and whether it can express the mechanism.

A world's description and its ``mechanism`` column are generated from what was measured where a
measurement exists: the matched AdAuction-like world's from its pilot's targets table
(``figures/world_match/targets.csv``), read when a row is built. Nothing here says a world is
matched where a target was missed or left unmatched.
"""

from __future__ import annotations

import csv
from functools import cache
from pathlib import Path

from experiments.ledger import sources

DATASET_WORDS = {"simulator": "simulator, null world", "simulator_grouping": "simulator, grouping world",
                  "simulator_adauction": "simulator, AdAuction-like world",
                  "simulator_matched": "simulator, matched AdAuction-like world",
                  "simulator_matched_rows": "simulator, row-matched AdAuction-like world", "open_bandit": "Open Bandit"}
#: the worlds that stand in for the paper's AdAuction data (Table 5's AdAuction sentences)
ADAUCTION_WORLDS = ("simulator_adauction", "simulator_matched", "simulator_matched_rows")
#: the worlds built by construction (no pilot to measure): whether each can express the grouping
#: methods' mechanism, and why
BUILT = {
    "simulator": ("no", "built so: the residual miscalibration is by a regime the embedding does not carry"),
    "simulator_grouping": ("yes", "built so: a per-regime logit shift the embedding carries"),
    "simulator_adauction": ("partly", "matched to the paper's AdAuction column on the uncalibrated row only: "
                                      "temperature scaling leaves a level shift the paper's data does not have"),
    "open_bandit": ("no", "about 5 clicks per hold-out set and a backbone AUC near 0.5"),
}
#: the worlds whose description comes from a pilot's targets table (figures/<folder>/targets.csv)
PILOTED = {"simulator_matched": "world_match", "simulator_matched_rows": "world_match_rows_paper"}
#: the calibrated baselines of the paper's AdAuction column: what a global calibrator leaves of ECE and
#: LCCE is the room a grouping calibrator has, so the mechanism can act fully only where they are matched
CALIBRATED = ("Histogram binning", "Isotonic regression", "Platt scaling", "Temperature scaling")
#: how the ledger's ``mechanism`` column reads in words
MECHANISM_WORDS = {"yes": "the paper's mechanism can act", "partly": "the paper's mechanism can act only in part",
                   "no": "the paper's mechanism cannot act", "": ""}


@cache
def _targets(path: Path) -> tuple[dict[str, str], ...]:
    with open(path, newline="") as fh:
        return tuple(csv.DictReader(fh))


def piloted(dataset: str) -> tuple[str, str]:
    """``(mechanism, why)`` of a world with a pilot, generated from its targets table.

    Args:
        dataset: a key of :data:`PILOTED` (``"simulator_matched"``).

    Returns:
        ``mechanism`` is ``"yes"`` only when every target is met and every calibrated baseline's ECE and
        LCCE is matched (the room grouping needs), else ``"partly"``; ``why`` says which targets were met and
        which were missed or left unmatched, with the paper's value and ours. ``("", "")`` when the table is
        not committed.

    Example:
        >>> mech, why = piloted("simulator_matched")
        >>> mech in ("yes", "partly") and "targets" in why
        True
    """
    path = sources.FIGURES / PILOTED[dataset] / "targets.csv"
    if not path.is_file():
        return "", ""
    rows = _targets(path)
    met = [r for r in rows if r["met"] == "yes"]
    missed = [r for r in rows if r["met"] == "no"]
    unmatched = [r for r in rows if r["kind"] == "not matched"]
    room = [r for r in rows if r["method"] in CALIBRATED and r["metric"] in ("ECE", "LCCE-l1") and r["met"] != "yes"]
    judged = [r for r in rows if r["kind"] != "not matched"]

    def value(r: dict[str, str]) -> str:
        return f"{r['method']} {r['metric']} {float(r['ours']):.4f} vs {float(r['paper']):.4f}"

    words = f"pilot figures/{PILOTED[dataset]}/targets.md meets {len(met)} of its {len(judged)} targets"
    if missed:
        words += "; missed: " + ", ".join(f"{value(r)} (tolerance {float(r['tolerance']):.0%})" if r["kind"] == "rel"
                                          else value(r) for r in missed)
    if unmatched:
        words += "; not matched (reported, not targets): " + ", ".join(value(r) for r in unmatched)
    if room:
        words += ("; the calibrated baselines' ECE and LCCE, the room a grouping calibrator has, are not the "
                  "paper's")
        ratio = _cluster_ratio(path.parent / "pilot.csv")
        if ratio:
            words += "; " + ratio
    return ("partly" if missed or room else "yes"), words


#: the paper's LCCE / ECE after each global calibrator (Table 1, AdAuction: 0.0113 / 0.0049, ...)
def _paper_cluster_ratios() -> dict[str, float]:
    from experiments.printed_tables import TABLE1

    return {m: TABLE1[m][1] / TABLE1[m][0] for m in CALIBRATED}


def _cluster_ratio(pilot: Path) -> str:
    """The measured reason a pilot misses the calibrated rows' LCCE: the largest LCCE / ECE each
    global calibrator reached over every candidate of the pilot (``pilot.csv``), beside the
    paper's; ``""`` when the pilot has no such table."""
    if not pilot.is_file():
        return ""
    best: dict[str, float] = {}
    for r in _targets(pilot):
        if r["method"] in CALIBRATED and float(r["ECE"]) > 0:
            best[r["method"]] = max(best.get(r["method"], 0.0), float(r["LCCE-l1"]) / float(r["ECE"]))
    if not best:
        return ""
    paper = _paper_cluster_ratios()
    short = [m for m in CALIBRATED if m in best and best[m] < paper[m]]
    if not short:
        return ""
    return ("LCCE / ECE, the miscalibration a calibrator leaves inside the score's own clusters, reaches at most "
            + ", ".join(f"{best[m]:.2f} after {m} (paper {paper[m]:.2f})" for m in short)
            + " over every candidate of the pilot (" + str(pilot.parent.relative_to(sources.FIGURES.parent))
            + "/pilot.md)")


def world_mechanism(dataset: str) -> tuple[str, str]:
    """``(mechanism, why)`` of comparison world ``dataset``: from its pilot where it has one
    (:func:`piloted`), else as it was built (:data:`BUILT`); ``("", "")`` for an unknown world.

    Args:
        dataset: a comparison world's key (``"simulator_grouping"``, ...).

    Returns:
        The ``mechanism`` column (``"yes"``, ``"partly"``, ``"no"``) and the reason in words.

    Example:
        >>> world_mechanism("simulator")[0]
        'no'
    """
    if dataset in PILOTED:
        return piloted(dataset)
    return BUILT.get(dataset, ("", ""))


def describe(dataset: str) -> str:
    """One sentence on comparison world ``dataset`` for the docs: its name, why, and whether the
    paper's mechanism can act there, all from :func:`world_mechanism`.

    Args:
        dataset: a comparison world's key.

    Returns:
        ``"<name>: <why>; <mechanism in words>"``.

    Example:
        >>> describe("simulator_grouping").endswith("the embedding carries; the paper's mechanism can act")
        True
    """
    mech, why = world_mechanism(dataset)
    return f"{DATASET_WORDS.get(dataset, dataset)}: {why}; {MECHANISM_WORDS[mech]}"


def world_words(dataset: str, size: str = "") -> str:
    """How the ledger names comparison world ``dataset``; ``size``: the data size in words of a
    run at another size than the preset's (:data:`SIZE_RUNS`)."""
    words = DATASET_WORDS.get(dataset, dataset)
    return f"{words} at {size}" if size else words


def world_columns(dataset: str, size: str = "") -> dict[str, str]:
    """``world`` and ``mechanism`` of a row measured on comparison world ``dataset`` (at ``size``)."""
    mech, why = world_mechanism(dataset)
    return {"world": world_words(dataset, size) + (f" ({why})" if why else ""), "mechanism": mech}
