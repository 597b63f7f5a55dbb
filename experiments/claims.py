"""The claims ledger: every quantitative claim of the reproduced papers, with our number.

``python -m experiments.claims`` reads the committed outputs of the studies (their
``provenance.json`` summaries; nothing is typed by hand) and writes
``figures/claims/claims.{csv,md}``: one row (:class:`Row`) per atomic claim with the paper,
the place in it, the claim in a few words, the paper's value, ours with its 95% interval,
the side the paper claims (``claimed``: ``> 0``, ``< 0``, ``> 0.9``, ``within 0.005``), the
scale the number comes from (paper / quick / exact), the world it was measured in and
whether that world can express the claim's mechanism, the row's kind (a paper claim, a
null-world control, a check on the project's own margin, ...: :data:`KINDS`), a verdict,
and the file and key the number is read from (``tests/test_claims.py`` re-reads every cited
value and re-derives every verdict).

**One verdict rule** (:func:`rule`), from the interval alone:

* ``reproduces`` -- the 95% interval lies on the claimed side of the null;
* ``refuted`` -- it lies on the other side;
* ``inconclusive`` -- it contains the null; the note gives the smallest difference the
  design could have detected (:func:`detectable`, 80% power);
* ``no interval`` -- the output has no interval for this number (the note says why);
* ``not tested`` -- the method could not act: it fell back to a simpler calibrator in most
  of its fits (``NOT_TESTED_SHARE``), so the comparison says nothing about it;
* ``not attempted`` -- no number (the note says why: private data, a diagram, not run yet).

Rows the papers do not claim are ``beyond the paper`` (the note says which side the interval
supports, in the same three words), and a compound claim ("VR-SAG beats every baseline")
is split into atomic rows plus a ``summary`` row that counts their verdicts. No verdict
word ever depends on the point estimate alone.

Each claim is a small function of the study summaries; adding one is one function and one
entry in ``CLAIMS``.

The code lives in :mod:`experiments.ledger`: one module per paper's row builders, beside the
verdict rule (``rule``), the row type (``rows``), the worlds (``worlds``), the headline groups and
the questions (``groups``, ``questions``) and the writers (``output``); this module puts the row
builders in ledger order and re-exports their public names (``experiments.claims.Row``, ``.rule``, ...).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Sequence
from typing import Any

from experiments.ledger import sources as _sources
from experiments.ledger.calibration_then_calculation import (
    claims_calibrated_logloss,
    claims_metric_accuracy,
)
from experiments.ledger.field_aware import FIELD_WORLDS, claims_field_aware
from experiments.ledger.findings import (
    findings_table,
    fmt,
    headline,
    read_ledger,
    sentence,
)
from experiments.ledger.grouping_metrics import (
    LABEL,
    LABEL_ATLAS,
    MINIMAL_RHO,
    MODERN,
    OURS,
    PAPER_TABLE6,
    QUOTED_RHO,
    best_rival,
    claims_ctr_sweep,
    claims_fig1_fig3,
    claims_fig4_fig5_fig6a,
    claims_fig6b,
    claims_metric_atlas,
    claims_quoted_rho,
    claims_table6,
)
from experiments.ledger.grouping_tables import (
    ADAUCTION,
    BY_CONSTRUCTION_SHARE,
    ON_PAR,
    PRINTED_IN,
    TEMPERATURE_ONLY,
    WITH_INTERCEPT,
    claims_fig2,
    claims_fig7,
    claims_level_shift,
    claims_mcgrad,
    claims_null_contrast,
    claims_printed_tables,
    claims_tables_1_5,
    claims_tables_4_5_text,
    printed_side,
)
from experiments.ledger.groups import GROUPS, group_counts, group_of, verdict_counts
from experiments.ledger.output import write
from experiments.ledger.project import PLACES, claims_coverage, claims_interval_coverage, claims_proofs
from experiments.ledger.questions import (
    ANSWERS,
    CANNOT_TELL_Q,
    FAR_SMALLER,
    FAR_SMALLER_Q,
    NOT_EXPRESSIBLE_Q,
    NOT_REPRODUCED_Q,
    QUESTIONS,
    REPRODUCES_Q,
    Question,
    answer,
    check_ledger,
    effect,
    evidence,
    paper_effect,
    question,
    tally,
    where,
)
from experiments.ledger.rows import (
    BY_CONSTRUCTION,
    CONSISTENCY,
    HEADER,
    KINDS,
    MAIN_PAPER,
    MECHANISM,
    NO_CI,
    NULL_CONTROL,
    OUR_MARGIN,
    PAPER_CLAIM,
    PAPERS,
    SYMBOLIC,
    WORKED_EXAMPLE,
    Row,
    make_row,
    missing_row,
    summary_row,
    trusted_interval,
)
from experiments.ledger.rule import (
    BEYOND,
    INCONCLUSIVE,
    NO_INTERVAL,
    NOT_ATTEMPTED,
    NOT_TESTED,
    NOT_TESTED_SHARE,
    REFUTED,
    REPRODUCES,
    SUMMARY,
    VERDICTS,
    as_number,
    detectable,
    rule,
    supported_side,
)
from experiments.ledger.sources import (
    SIZE_RUNS,
    Source,
    cited_value,
    every_size,
    load,
    load_by_dataset,
    load_sizes,
    lookup,
)
from experiments.ledger.textbook import claims_textbook
from experiments.ledger.topn import claims_topn
from experiments.ledger.worlds import (
    ADAUCTION_WORLDS,
    BUILT,
    CALIBRATED,
    DATASET_WORDS,
    MECHANISM_WORDS,
    PILOTED,
    describe,
    piloted,
    world_columns,
    world_mechanism,
    world_words,
)

__all__ = [
    'ADAUCTION', 'ADAUCTION_WORLDS', 'ANSWERS', 'BEYOND', 'BUILT', 'BY_CONSTRUCTION', 'BY_CONSTRUCTION_SHARE',
    'CALIBRATED', 'CANNOT_TELL_Q', 'CLAIMS', 'CONSISTENCY', 'DATASET_WORDS', 'FAR_SMALLER', 'FAR_SMALLER_Q',
    'FIELD_WORLDS', 'FIGURES', 'GROUPS', 'HEADER', 'INCONCLUSIVE', 'KINDS', 'LABEL', 'LABEL_ATLAS', 'MAIN_PAPER',
    'MECHANISM', 'MECHANISM_WORDS', 'MINIMAL_RHO', 'MODERN', 'NOT_ATTEMPTED', 'NOT_EXPRESSIBLE_Q',
    'NOT_REPRODUCED_Q', 'NOT_TESTED', 'NOT_TESTED_SHARE', 'NO_CI', 'NO_INTERVAL', 'NULL_CONTROL', 'ON_PAR', 'OURS',
    'OUR_MARGIN', 'PAPERS', 'PAPER_CLAIM', 'PAPER_TABLE6', 'PILOTED', 'PLACES', 'PRINTED_IN', 'QUESTIONS',
    'QUOTED_RHO', 'Question', 'REFUTED', 'REPRODUCES', 'REPRODUCES_Q', 'ROOT', 'Row', 'SIZE_RUNS', 'SUMMARY',
    'SYMBOLIC', 'Source', 'TEMPERATURE_ONLY', 'VERDICTS', 'WITH_INTERCEPT', 'WORKED_EXAMPLE',
    'answer', 'as_number', 'best_rival', 'check_ledger',
    'cited_value', 'claims_calibrated_logloss', 'claims_coverage', 'claims_ctr_sweep', 'claims_field_aware',
    'claims_fig1_fig3', 'claims_fig2', 'claims_fig4_fig5_fig6a', 'claims_fig6b', 'claims_fig7',
    'claims_interval_coverage', 'claims_mcgrad', 'claims_metric_accuracy', 'claims_metric_atlas',
    'claims_level_shift', 'claims_neighbours', 'claims_null_contrast', 'claims_printed_tables', 'claims_proofs',
    'claims_quoted_rho',
    'claims_table6', 'claims_tables_1_5', 'claims_tables_4_5_text', 'claims_textbook', 'claims_topn', 'describe',
    'detectable',
    'effect', 'every_size', 'evidence', 'findings_table', 'fmt', 'group_counts', 'group_of', 'headline', 'ledger',
    'load', 'load_by_dataset', 'load_sizes', 'lookup', 'main', 'make_row', 'missing_row', 'paper_effect', 'piloted',
    'printed_side', 'question', 'read_ledger', 'rule', 'sentence', 'summary_row', 'supported_side', 'tally',
    'trusted_interval', 'verdict_counts', 'where', 'world_columns', 'world_mechanism', 'world_words', 'write'
]

#: the checkout whose committed ``figures/`` the ledger reads (``experiments.ledger.sources``):
#: assigning ``experiments.claims.ROOT`` / ``FIGURES`` (a test's monkeypatch, ``experiments.verify``
#: reading a copy of figures/) sets them where the loaders read them
ROOT = _sources.ROOT
FIGURES = _sources.FIGURES


class _Ledger(types.ModuleType):
    """This module, whose ``ROOT`` and ``FIGURES`` are also set in :mod:`experiments.ledger.sources`."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("ROOT", "FIGURES"):
            setattr(_sources, name, value)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Ledger


def claims_neighbours() -> list[Row]:
    """The four other papers' method claims: Field-aware Calibration, Pan et al. (Neural Calibration
    best), top-N calibration, Sato (TNF lowers ECE@N), the calibration textbook chapter §6 (the
    lab's printed numbers)."""
    return claims_field_aware() + claims_topn() + claims_textbook()


#: every claim function, in ledger order
CLAIMS: Sequence[Callable[[], list[Row]]] = (claims_fig1_fig3, claims_fig4_fig5_fig6a, claims_fig6b, claims_table6,
                                            claims_ctr_sweep, claims_metric_accuracy, claims_tables_1_5,
                                            claims_null_contrast, claims_level_shift,
                                            claims_calibrated_logloss, claims_metric_atlas,
                                            claims_fig2, claims_neighbours, claims_mcgrad, claims_printed_tables,
                                            claims_tables_4_5_text, claims_quoted_rho, claims_fig7, claims_proofs,
                                            claims_interval_coverage, claims_coverage)


def ledger() -> list[Row]:
    """Every row of the ledger, in order (each function of :data:`CLAIMS` in turn)."""
    return [row for fn in CLAIMS for row in fn()]


def main(argv: Sequence[str] | None = None) -> dict[str, int]:
    """Regenerate ``figures/claims/claims.{csv,md}``; return the verdict counts."""
    rows = ledger()
    counts = write(rows)
    print(f"[claims] {len(rows)} rows -> figures/claims/claims.{{csv,md}}: {counts}")
    return counts


if __name__ == "__main__":
    main()
