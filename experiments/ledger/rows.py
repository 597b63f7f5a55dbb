"""The ledger's row type (:class:`Row`), its columns and kinds, and the helpers that build rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from experiments.ledger.rule import (
    BEYOND,
    INCONCLUSIVE,
    NO_INTERVAL,
    NOT_ATTEMPTED,
    NOT_TESTED,
    SUMMARY,
    VERDICTS,
    as_number,
    detectable,
    rule,
)

#: the reproduced papers by their ledger key, as a reader cites them
PAPERS = {"000": '"Calibration is Grouping"', "001": 'Pan et al., "Field-aware Calibration"',
          "002": '"Calibration-then-Calculation"', "003": 'Sato, "Calibrating the Predictions for Top-N '
          'Recommendations"', "004": "textbook chapter on model calibration", "-": "-"}
MAIN_PAPER = PAPERS["000"]

#: what kind of statement a row tests (the headline counts are by kind, scale and mechanism)
PAPER_CLAIM = "paper claim"
NULL_CONTROL = "null-world control"        # a paper claim in a world built so its mechanism cannot act
OUR_MARGIN = "project's margin"            # judged against a tolerance the project chose (value in `claimed`)
BY_CONSTRUCTION = "holds by construction"  # true of every data set (e.g. a monotone map keeps the AUC)
CONSISTENCY = "consistency check"          # a relation the paper's printed numbers must satisfy
WORKED_EXAMPLE = "worked example"          # a number printed in a worked example, recomputed
SYMBOLIC = "symbolic proof"                # a printed derivation step checked exactly (SymPy)
KINDS = (PAPER_CLAIM, NULL_CONTROL, OUR_MARGIN, BY_CONSTRUCTION, CONSISTENCY, WORKED_EXAMPLE, SYMBOLIC,
         BEYOND, SUMMARY)

#: whether a world can express a claim's mechanism: "yes", "partly", "no" (with the reason in
#: ``world``), "" where a row has no world (a printed table, a proof)
MECHANISM = ("yes", "partly", "no", "")


@dataclass(frozen=True)
class Row:
    """One ledger row; build it with :func:`make_row` (which applies the verdict rule). Frozen, with
    every column a field: a mistyped column name is an error, never an empty cell."""

    paper: str
    place: str
    claim: str
    paper_value: Any
    ours: Any
    ci_low: Any
    ci_high: Any
    claimed: str
    scale: str
    world: str
    mechanism: str
    kind: str
    verdict: str
    source: str
    note: str

    def __post_init__(self) -> None:
        if self.verdict not in (*VERDICTS, BEYOND, SUMMARY):
            raise ValueError(f"{self.claim!r}: unknown verdict {self.verdict!r}")
        if self.kind not in KINDS:
            raise ValueError(f"{self.claim!r}: unknown kind {self.kind!r}")
        if self.mechanism not in MECHANISM:
            raise ValueError(f"{self.claim!r}: `mechanism` must be one of {MECHANISM}, got {self.mechanism!r}")
        if (self.verdict == BEYOND) != (self.kind == BEYOND) or (self.verdict == SUMMARY) != (self.kind == SUMMARY):
            raise ValueError(f"{self.claim!r}: verdict {self.verdict!r} does not fit kind {self.kind!r}")

    def __getitem__(self, column: str) -> Any:
        """The value of a column by its header name (the tables are written by column name)."""
        if column not in HEADER:
            raise KeyError(column)
        return getattr(self, column)


#: the ledger's columns, in file order
HEADER = [f.name for f in fields(Row)]

def make_row(seed: str, place: str, claim: str, paper: str, *, ours: Any = "", lo: Any = "", hi: Any = "",
             claimed: str = "", scale: str = "", world: str = "", mechanism: str = "", kind: str | None = None,
             verdict: str | None = None, source: str = "", note: str = "", why_no_interval: str = "",
             not_tested: str = "") -> Row:
    """A ledger row of paper ``seed`` (a key of :data:`PAPERS`). With ``claimed`` and no
    explicit ``verdict`` the verdict is :func:`rule`'s; ``not_tested`` (a reason) overrides it
    with ``not tested``. An inconclusive row's note gets the detectable difference. ``kind``
    defaults to a paper claim (a null-world control when ``mechanism`` is ``"no"`` and the
    world is the null world), ``beyond the paper`` / ``summary`` for those verdicts."""
    v = verdict
    if v is None:
        v = rule(claimed, lo, hi)
        if v == NO_INTERVAL and not why_no_interval:
            raise ValueError(f"{claim!r}: a row without an interval needs `why_no_interval`")
    if not_tested:
        v, note = NOT_TESTED, f"{not_tested}; {note}" if note else not_tested
    elif v == NO_INTERVAL:
        note = f"no interval: {why_no_interval}; {note}" if note else f"no interval: {why_no_interval}"
    elif v == INCONCLUSIVE and as_number(lo) is not None and as_number(hi) is not None:
        note = (f"{note}; " if note else "") + (f"smallest difference this design detects (80% power): "
                                                f"{detectable(float(lo), float(hi)):.3g}")
    if kind is None:
        kind = (BEYOND if v == BEYOND else SUMMARY if v == SUMMARY
                else NULL_CONTROL if "null world" in world and mechanism == "no" else PAPER_CLAIM)
    return Row(paper=PAPERS[seed], place=place, claim=claim, paper_value=paper, ours=ours, ci_low=lo, ci_high=hi,
               claimed=claimed, scale=scale, world=world, mechanism=mechanism, kind=kind, verdict=v,
               source=source, note=note)


def summary_row(seed: str, place: str, claim: str, rows: Sequence[Row], scale: str = "", world: str = "",
                mechanism: str = "") -> Row:
    """The row that counts the verdicts of a compound claim's atomic rows."""
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    words = ", ".join(f"{counts[v]} {v}" for v in VERDICTS if v in counts)
    return make_row(seed, place, claim, "(compound claim)", ours=f"{len(rows)} atomic rows: {words}", scale=scale,
                    world=world, mechanism=mechanism, verdict=SUMMARY,
                    note="counts the rows above; not itself a verdict")


def missing_row(seed: str, place: str, claim: str, paper: str, study: str) -> Row:
    return make_row(seed, place, claim, paper, verdict=NOT_ATTEMPTED,
                    note=f"not run yet: run `python -m experiments run {study} --paper` (or --quick) and commit "
                         "its outputs")


NO_CI = ("the committed output predates the paired intervals of this ledger; rerun "
          "`python -m experiments run {study} --quick` to refresh it")



def trusted_interval(d: float, lo: float, hi: float, how: str) -> tuple[Any, Any, str]:
    """The interval and how it was made, or no interval when a percentile bootstrap interval
    excludes its own estimate (a statistic strongly biased under resampling, e.g. Field-RCE
    on a log with a handful of clicks per field value): then the verdict rests on the point
    estimate and the note says why."""
    if lo <= d <= hi:
        return lo, hi, how
    return "", "", (f"the percentile bootstrap interval [{lo:.3g}, {hi:.3g}] excludes the estimate (the "
                    "statistic divides by per-value click counts, so resampling this sparse a log biases it): "
                    "no interval is reported and the verdict rests on the point estimate")


