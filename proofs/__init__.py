"""Symbolic proofs of the decomposition identities, tied to the calib_jax code.

Each module proves one identity on symbolic data with SymPy (finite n, symbolic scores,
labels with y^2 = y, memberships on the simplex, weights), checks every displayed step of
the source derivation (recording the steps that are false as printed, with exact
counterexamples), and cross-checks the symbolic terms numerically against calib_jax.

Run ``python -m proofs`` (table on stdout, report in ``figures/proofs/report.md``).
"""

from __future__ import annotations

from proofs import (  # noqa: F401 - importing a module registers its proof
    brier_grouping,
    calibrated_logloss_foc,
    cauchy_schwarz,
    delta_monotone,
    gce_singleton,
    murphy,
    nll_grouping,
    printed_metrics,
    temperature_gradient,
    total_variance,
)
from proofs._common import REGISTRY, CrossCheck, ProofResult, Step, run

__all__ = ["ORDER", "REGISTRY", "CrossCheck", "ProofResult", "Step", "run", "run_all"]

#: Report order (follows the papers: "Calibration is Grouping" App. A.1, A.2, Sec. 2.3, eq. 7,
#: App. B, App. C, then the textbook chapter on model calibration and "Calibration-then-Calculation").
ORDER = (
    "murphy",
    "brier_grouping",
    "total_variance",
    "gce_singleton",
    "cauchy_schwarz",
    "delta_monotone",
    "nll_grouping",
    "printed_metrics",
    "temperature_gradient",
    "calibrated_logloss_foc",
)


def run_all(names=None) -> list[ProofResult]:
    """Run the named proofs (default: all, in :data:`ORDER`)."""
    return [run(n) for n in (names or ORDER)]
