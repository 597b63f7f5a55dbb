"""The calibration textbook chapter (paper 004), §6: the lab's printed numbers recomputed."""

from __future__ import annotations

from experiments.ledger.rows import (
    WORKED_EXAMPLE,
    Row,
    make_row,
    summary_row,
)
from experiments.ledger.sources import (
    load,
)

#: the calibration textbook chapter §6 prints every number to 4 decimals: d.dddd stands for d.dddd +- 5e-5
_BOOK_TOL = 5e-5



def claims_textbook() -> list[Row]:
    """The calibration textbook chapter §6: every number of the lab's published table, recomputed."""
    rows: list[Row] = []
    src = load("textbook_lab", "published")
    if src is not None:
        book: list[Row] = []
        rerun = src.summary.get("textbook_code_rerun", {})
        for name, printed in src.get("published").items():
            ours = src.get(f"ours/{name}")
            tol = _BOOK_TOL
            diff = ours - printed
            book.append(make_row("004", "§6 worked example (published table)",
                                 f"the printed {name} reproduces to its printed digits", f"{printed}", ours=ours,
                                 lo=ours, hi=ours, claimed=f"in {printed - tol:.10g} {printed + tol:.10g}",
                                 scale="exact",
                                 world="the textbook's worked example", kind=WORKED_EXAMPLE,
                                 source=src.cite(f"ours/{name}"),
                                 note="an exact computation (no sampling: the interval is the number); ours - "
                                      "printed = "
                                      f"{diff:+.3g}, tolerance half a unit of the last printed digit ({tol:.1g})"
                                      + (f"; the textbook's own code, rerun, gives {rerun[name]:.6g}: its Platt "
                                         f"optimiser stops after {rerun.get('Platt iterations', '?')} iterations, "
                                         "before the maximum-likelihood fit"
                                         if abs(diff) > tol and name in rerun else "")))
        rows += book + [summary_row("004", "§6 worked example (published table)",
                                    "every printed number of the calibration lab reproduces", book, "exact",
                                    world="the textbook's worked example")]
    return rows
