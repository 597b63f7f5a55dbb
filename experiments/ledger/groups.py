"""The headline groups: what kind of statement each ledger row tests, and the counts by group."""

from __future__ import annotations

from collections.abc import Sequence

from experiments.ledger.rows import (
    BY_CONSTRUCTION,
    CONSISTENCY,
    NULL_CONTROL,
    OUR_MARGIN,
    PAPER_CLAIM,
    SYMBOLIC,
    WORKED_EXAMPLE,
    Row,
)
from experiments.ledger.rule import (
    BEYOND,
    NOT_ATTEMPTED,
    SUMMARY,
)

#: the groups the headline counts are given in, in report order: a paper's claim tested at
#: paper scale in a world where its mechanism can act is the only group that answers the paper
GROUPS = ("paper claims, paper scale, mechanism can act",
          "paper claims, paper scale, mechanism can partly act",
          "paper claims, world cannot express the mechanism",
          "paper claims, quick scale",
          "paper claims not attempted",
          "null-world controls",
          "judged on the project's own margin",
          "hold by construction",
          "consistency checks of printed tables",
          "worked-example numbers",
          "printed derivation steps checked exactly",
          "beyond the paper",
          "summary rows (count other rows)")


def group_of(row: Row) -> str:
    """The headline group (:data:`GROUPS`) a row is counted in."""
    if row.kind == PAPER_CLAIM:
        if row.verdict == NOT_ATTEMPTED:
            return GROUPS[4]
        if row.mechanism == "no":
            return GROUPS[2]
        if row.scale != "paper":
            return GROUPS[3]
        if row.mechanism == "partly":
            return GROUPS[1]
        if row.mechanism == "yes":
            return GROUPS[0]
        raise ValueError(f"{row.claim!r}: a judged paper claim must say whether its world can express the "
                         "mechanism")
    return dict(zip((NULL_CONTROL, OUR_MARGIN, BY_CONSTRUCTION, CONSISTENCY, WORKED_EXAMPLE, SYMBOLIC, BEYOND,
                     SUMMARY), GROUPS[5:]))[row.kind]


def group_counts(rows: Sequence[Row]) -> list[tuple[str, int, dict[str, int]]]:
    """``(group, rows, verdict counts)`` for every group of :data:`GROUPS` with rows."""
    out = []
    for g in GROUPS:
        mine = [r for r in rows if group_of(r) == g]
        if mine:
            out.append((g, len(mine), verdict_counts(mine)))
    return out


def verdict_counts(rows: Sequence[Row]) -> dict[str, int]:
    """How many rows carry each verdict (and ``beyond the paper`` / ``summary``)."""
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    return counts

