r"""Reliability diagrams (seeds/004 §2 and §6).

For equal-width bins :math:`B_m = [m/M, (m+1)/M)` (``p = 1`` in the last bin) the diagram
draws, per non-empty bin, a bar of height :math:`\mathrm{acc}(B_m)` (the empirical positive
rate) over the bin, the mean confidence :math:`\mathrm{conf}(B_m)` as a marker, the
diagonal of perfect calibration, and the bin count above each bar.  The title carries the
binned ECE :math:`\sum_m \frac{|B_m|}{n} |\mathrm{acc}(B_m) - \mathrm{conf}(B_m)|`
(seeds/000 eq. 2).  Bars below the diagonal mean over-confidence for ``p > 1/2``.

The function draws only; it never saves (use :func:`calib_jax.plotting.save_figure`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calib_jax._src import validation as V
from calib_jax.plotting import plt

__all__ = ["reliability_bins", "reliability_diagram"]


def reliability_bins(probs: Any, labels: Any, *, n_bins: int = 10
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-bin ``(counts, mean confidence, positive rate, edges)`` for equal-width bins.

    Empty bins have count 0 and NaN-free zeros for confidence and rate.
    """
    n_bins = V.check_positive_int(n_bins, "n_bins")
    p = np.asarray(V.check_probs(probs, "probs"), dtype=np.float64)
    y = np.asarray(V.check_labels(labels, "labels"), dtype=np.float64)
    V.check_same_length(p.shape[0], labels=y)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    idx = np.clip(np.floor(p * n_bins).astype(np.int64), 0, n_bins - 1)
    counts = np.bincount(idx, minlength=n_bins).astype(np.float64)
    safe = np.where(counts > 0, counts, 1.0)
    conf = np.bincount(idx, weights=p, minlength=n_bins) / safe
    rate = np.bincount(idx, weights=y, minlength=n_bins) / safe
    return counts, conf, rate, edges


def reliability_diagram(probs: Any, labels: Any, *, n_bins: int = 10, ax: Any = None,
                        title: str | None = None, color: str = "C0") -> tuple[Any, Any]:
    """Draw a reliability diagram of ``probs`` against ``labels``.

    Args:
      probs: (n,) predicted probabilities.
      labels: (n,) labels in {0, 1}.
      n_bins: number of equal-width bins.
      ax: matplotlib axes to draw into (a new figure is created when None).
      title: axes title; the ECE is appended.
      color: bar colour.

    Returns:
      ``(fig, ax)``.
    """
    counts, conf, rate, edges = reliability_bins(probs, labels, n_bins=n_bins)
    if ax is None:
        fig, ax = plt.subplots(figsize=(4.8, 4.8))
    else:
        fig = ax.figure
    keep = counts > 0
    n = counts.sum()
    ece = float(np.sum(counts[keep] / n * np.abs(rate[keep] - conf[keep])))
    width = edges[1:] - edges[:-1]
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="perfect calibration")
    ax.bar(edges[:-1][keep], rate[keep], width=width[keep], align="edge", color=color,
           alpha=0.75, edgecolor="k", lw=0.6, label="positive rate")
    ax.plot(conf[keep], rate[keep], "o", color="k", ms=3.5, label="(mean confidence, rate)")
    for lo, wd, r, c in zip(edges[:-1][keep], width[keep], rate[keep], counts[keep]):
        ax.annotate(f"{int(c)}", (lo + wd / 2, min(r, 0.93) + 0.015), ha="center", va="bottom",
                    fontsize=7, color="0.25")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("confidence (predicted probability)")
    ax.set_ylabel("empirical positive rate")
    head = f"{title}  " if title else ""
    ax.set_title(f"{head}(ECE = {ece:.4f}, n = {int(n)})", fontsize=10)
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    ax.text(0.98, 0.02, "numbers: rows per bin", transform=ax.transAxes, ha="right",
            va="bottom", fontsize=7, color="0.35")
    return fig, ax
