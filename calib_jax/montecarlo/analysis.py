"""Rank consistency of metrics with the oracle Brier, with intervals.

The analysis behind Figs 1 and 3-6 of "Calibration is Grouping" (VR-SAG; anonymous authors,
under review).

:func:`rank_consistency` turns a (T, M) matrix of metric values over independent trials
into what a study reports: each metric's Spearman coefficient with the reference, a 95%
bootstrap interval over trials, and paired comparisons of an anchor metric (LCCE) against
every other metric on the same resamples (difference, interval, share of resamples where
the anchor agrees better). See :mod:`calib_jax.montecarlo.bootstrap`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from calib_jax.montecarlo.bootstrap import BootstrapSpearman, PairedDifference, bootstrap_spearman, paired_difference

__all__ = ["RankConsistency", "rank_consistency"]


class RankConsistency(NamedTuple):
    """Spearman coefficients with the reference, intervals and paired comparisons.

    Attributes:
      names: the M column names (the reference included).
      reference: the reference column's name.
      boot: the :class:`~calib_jax.montecarlo.bootstrap.BootstrapSpearman` of every column.
      paired: ``{(a, b): PairedDifference}`` for each requested comparison ``rho_a - rho_b``.

    The methods ``rho(name)`` and ``interval(name)`` look a column up by name; ``rows()``,
    ``paired_rows()`` and ``summary()`` format the result as table rows and as a JSON-able
    dict; ``undefined()`` names the columns without a coefficient (constant over the trials:
    NaN coefficient, interval and paired differences). See :func:`rank_consistency` for an
    example.
    """

    names: list[str]
    reference: str
    boot: BootstrapSpearman
    paired: dict[tuple[str, str], PairedDifference]

    def rho(self, name: str) -> float:
        """The Spearman coefficient of column ``name`` with the reference."""
        return float(self.boot.rho[self.names.index(name)])

    def interval(self, name: str) -> tuple[float, float]:
        """The percentile interval ``(lo, hi)`` of column ``name``."""
        j = self.names.index(name)
        return float(self.boot.lo[j]), float(self.boot.hi[j])

    def undefined(self) -> list[str]:
        """The columns (reference excluded) whose coefficient is undefined: constant over the
        trials, so NaN (``bootstrap_spearman``), never 0."""
        return [n for n in self.names if n != self.reference and math.isnan(self.rho(n))]

    def rows(self, order: Sequence[str] | None = None) -> list[list[Any]]:
        """``[metric, rho, lo, hi]`` rows (reference excluded), by descending rho by default
        (undefined coefficients, NaN, last)."""
        keep = [n for n in self.names if n != self.reference]
        if order is None:
            keep.sort(key=lambda n: (math.isnan(self.rho(n)), -self.rho(n) if not math.isnan(self.rho(n)) else 0.0))
        else:
            keep = [n for n in order if n in keep]
        return [[n, self.rho(n), *self.interval(n)] for n in keep]

    def paired_rows(self) -> list[list[Any]]:
        """``[a, b, rho_a - rho_b, lo, hi, share a better]`` rows."""
        return [[a, b, d.diff, d.lo, d.hi, d.share_a_better] for (a, b), d in self.paired.items()]

    def summary(self) -> dict[str, Any]:
        """JSON-able: rho and interval per metric, and the paired comparisons; with
        ``"undefined"`` (``{name: reason}``) when a column is constant over the trials."""
        out = {
            "level": self.boot.level,
            "n_boot": int(self.boot.replicates.shape[0]),
            "rho": {n: self.rho(n) for n in self.names if n != self.reference},
            "interval": {n: list(self.interval(n)) for n in self.names if n != self.reference},
            "paired": {f"{a} - {b}": dict(d._asdict()) for (a, b), d in self.paired.items()},
        }
        undefined = self.undefined()
        if undefined:
            out["undefined"] = {n: "constant over the trials: no rank correlation (NaN), no paired difference"
                                for n in undefined}
        return out


def rank_consistency(values: Any, names: Sequence[str], *, key: jax.Array, reference: str = "oracle_brier",
                     anchors: Sequence[str] = ("lcce",), n_boot: int = 1000,
                     level: float = 0.95) -> RankConsistency:
    """Spearman of every column of ``values`` with the ``reference`` column, with percentile
    bootstrap intervals over trials, and paired comparisons ``anchor - other`` for every
    anchor present against every other non-reference column.

    Args:
      values: (T, M) finite metric values over T >= 3 trials (every column a loss; the
        reference among them).
      names: the M column names (distinct strings).
      key: PRNG key of the resamples.
      reference: the reference column's name (the oracle Brier).
      anchors: names of columns compared pairwise against every other non-reference column
        (absent ones are skipped).
      n_boot: bootstrap resamples (int >= 2; B >= 1000 for reported intervals).
      level: interval coverage, in (0, 1).

    Returns:
      :class:`RankConsistency`; its ``paired`` maps ``(anchor, other)`` to a
      :class:`~calib_jax.montecarlo.bootstrap.PairedDifference`. A column constant over the
      trials is undefined: NaN coefficient and interval, NaN paired differences (never "0 and
      significantly worse"), listed by ``undefined()`` and in ``summary()["undefined"]``.
      Raises ``ValueError`` when
      ``values`` is not (T, len(names)), ``names`` repeat a name, or ``reference`` is not
      among ``names`` (and as
      :func:`~calib_jax.montecarlo.bootstrap.bootstrap_spearman` does). Runs on the host;
      not jit-able.

    Example:
      >>> import jax, numpy as np
      >>> from calib_jax.montecarlo import rank_consistency
      >>> ref = np.arange(10.0)
      >>> values = np.stack([ref, -ref, ref], axis=1)  # LCCE follows Brier*, ECE is reversed
      >>> rc = rank_consistency(values, ["lcce", "ece", "oracle_brier"], key=jax.random.key(0), n_boot=50)
      >>> rc.rows()  # [metric, rho, lo, hi], by descending rho
      [['lcce', 1.0, 1.0, 1.0], ['ece', -1.0, -1.0, -1.0]]
      >>> rc.paired_rows()  # [a, b, rho_a - rho_b, lo, hi, share of resamples a is better]
      [['lcce', 'ece', 2.0, 2.0, 2.0, 1.0]]
      >>> flat = np.stack([ref, np.full(10, 0.5), ref], axis=1)  # a constant metric
      >>> rc = rank_consistency(flat, ["lcce", "flat", "oracle_brier"], key=jax.random.key(0), n_boot=50)
      >>> rc.undefined(), rc.rows()[1], rc.paired_rows()
      (['flat'], ['flat', nan, nan, nan], [['lcce', 'flat', nan, nan, nan, nan]])
    """
    names = list(names)
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"`names` must be distinct; {repeated} appear more than once (the pairs would read the "
                         "first of them only)")
    v = np.asarray(values, np.float64)
    if v.ndim != 2 or v.shape[1] != len(names):
        raise ValueError(f"`values` must be (trials, {len(names)}), got {v.shape}")
    if reference not in names:
        raise ValueError(f"`reference` {reference!r} is not among `names`")
    boot = bootstrap_spearman(v, v[:, names.index(reference)], key=key, n_boot=n_boot, level=level)
    out = RankConsistency(names=names, reference=reference, boot=boot, paired={})
    for a in anchors:
        if a not in names:
            continue
        for b in names:
            if b not in (a, reference):
                out.paired[(a, b)] = paired_difference(boot, names.index(a), names.index(b))
    return out
