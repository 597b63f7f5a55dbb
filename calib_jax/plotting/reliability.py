r"""Reliability diagrams (DeGroot and Fienberg, "The Comparison and Evaluation of Forecasters", 1983;
Niculescu-Mizil and Caruana, "Predicting Good Probabilities with Supervised Learning", ICML 2005).

For equal-width bins :math:`B_m = [m/M, (m+1)/M)` (``p = 1`` in the last bin) the diagram
draws, per non-empty bin, a bar of height :math:`\mathrm{acc}(B_m)` (the empirical positive
rate) over the bin, the mean confidence :math:`\mathrm{conf}(B_m)` as a marker, the
diagonal of perfect calibration, and the bin count above each bar.  The title carries the
binned ECE :math:`\sum_m \frac{|B_m|}{n} |\mathrm{acc}(B_m) - \mathrm{conf}(B_m)|`
(Guo, Pleiss, Sun and Weinberger, "On Calibration of Modern Neural Networks", ICML 2017,
§2; eq. 2 of "Calibration is Grouping", VR-SAG; anonymous authors, under review).  Bars
below the diagonal mean over-confidence for ``p > 1/2``.

The function draws only; it never saves (use :func:`calib_jax.plotting.save_figure`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calib_jax._src import validation as V
from calib_jax._src.plot_text import show_text_as_given
from calib_jax.partitions import uniform_bins
from calib_jax.plotting import plt

__all__ = ["reliability_bins", "reliability_diagram"]


def reliability_bins(probs: Any, labels: Any, *, n_bins: int = 10
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    r"""Per-bin ``(counts, mean confidence, positive rate, edges)`` for equal-width bins.

    Empty bins have count 0 and NaN-free zeros for confidence and rate.

    Row i goes to bin :math:`\lfloor p_i M \rfloor` (clipped to [0, M-1], so ``p = 1`` is in
    the last bin), i.e. :math:`B_m = [m/M, (m+1)/M)`; per bin come the row count
    :math:`|B_m|`, the mean probability :math:`\mathrm{conf}(B_m)` and the share of positive
    labels :math:`\mathrm{acc}(B_m)`, the numbers behind :func:`reliability_diagram`. Runs on
    the host (NumPy); not jit-able. The inputs are checked eagerly: NaN/inf, a probability
    outside [0, 1], a label other than 0/1, lengths that differ or an ``n_bins`` that is not
    an int >= 1 raise ``ValueError`` naming the argument. The bins are those of
    :func:`calib_jax.partitions.uniform_bins` (and so of :func:`calib_jax.metrics.ece`): a
    value on an edge, such as 0.7 with 10 bins, goes to the bin above.

    Args:
      probs: (n,) predicted probabilities in [0, 1], n >= 1.
      labels: (n,) labels in {0, 1}.
      n_bins: number of equal-width bins M, an int >= 1.

    Returns:
      A tuple of four float64 NumPy arrays: ``counts`` (M,) rows per bin; ``conf`` (M,) mean
      probability per bin; ``rate`` (M,) positive rate per bin (both 0 for an empty bin);
      ``edges`` (M + 1,) the bin edges ``0, 1/M, ..., 1``.

    Example:
      >>> from calib_jax.plotting.reliability import reliability_bins
      >>> counts, conf, rate, edges = reliability_bins([0.05, 0.15, 0.55, 0.95, 1.0], [0, 0, 1, 1, 1], n_bins=2)
      >>> counts.tolist(), edges.tolist()  # 2 rows below 0.5, 3 above
      ([2.0, 3.0], [0.0, 0.5, 1.0])
      >>> [round(float(v), 4) for v in conf], [round(float(v), 4) for v in rate]  # (0.05+0.15)/2; 2.5/3
      ([0.1, 0.8333], [0.0, 1.0])
    """
    n_bins = V.check_positive_int(n_bins, "n_bins")
    checked = V.check_probs(probs, "probs")
    p = np.asarray(checked, dtype=np.float64)
    y = np.asarray(V.check_labels(labels, "labels"), dtype=np.float64)
    V.check_same_length(p.shape[0], labels=y)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    # the bins of the metrics (metrics.ece), edges exact in the working dtype
    idx = np.asarray(uniform_bins(checked, n_bins=n_bins)).astype(np.int64)
    counts = np.bincount(idx, minlength=n_bins).astype(np.float64)
    safe = np.where(counts > 0, counts, 1.0)
    conf = np.bincount(idx, weights=p, minlength=n_bins) / safe
    rate = np.bincount(idx, weights=y, minlength=n_bins) / safe
    return counts, conf, rate, edges


def reliability_diagram(probs: Any, labels: Any, *, n_bins: int = 10, ax: Any = None,
                        title: str | None = None, color: str = "C0") -> tuple[Any, Any]:
    """Draw a reliability diagram of ``probs`` against ``labels``.

    The bins come from :func:`reliability_bins`; for each non-empty bin a bar of the positive
    rate spans the bin, a black dot marks (mean confidence, rate) and the row count is
    written above the bar; the dashed diagonal is perfect calibration. The title ends with
    ``(ECE = ..., n = ...)``, the binned ECE of these bins to 4 decimals and the row count.
    Runs on the host (NumPy, matplotlib); not jit-able. The inputs are checked as in
    :func:`reliability_bins` (``ValueError`` naming the argument); note its remark on bin
    edges: the title's ECE can then differ from :func:`calib_jax.metrics.ece`.

    Args:
      probs: (n,) predicted probabilities in [0, 1], n >= 1.
      labels: (n,) labels in {0, 1}.
      n_bins: number of equal-width bins, an int >= 1.
      ax: matplotlib axes to draw into (a new 4.8 x 4.8 inch figure is created when None).
      title: axes title, shown as given (a ``$`` is a dollar sign, no mathtext); the ECE is
        appended (``None`` or ``""``: the ECE alone).
      color: bar colour, any matplotlib colour.

    Returns:
      ``(fig, ax)``: the :class:`matplotlib.figure.Figure` (``ax.figure`` when ``ax`` is given)
      and the axes drawn into; not saved or closed. Unlike the other plotting functions this
      returns a tuple, not the figure alone.

    Example:
      >>> from calib_jax.plotting.reliability import reliability_diagram
      >>> import matplotlib.pyplot as plt
      >>> fig, ax = reliability_diagram([0.05, 0.15, 0.55, 0.95, 1.0], [0, 0, 1, 1, 1], n_bins=2, title="toy")
      >>> ax.get_title()  # ECE = 2/5 * |0 - 0.1| + 3/5 * |1 - 0.8333| = 0.04 + 0.1
      'toy  (ECE = 0.1400, n = 5)'
      >>> type(fig).__name__, len(ax.patches), [t.get_text() for t in ax.texts[:2]]  # 2 bars, their counts
      ('Figure', 2, ['2', '3'])
      >>> plt.close(fig)
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
    show_text_as_given(ax.set_title(f"{head}(ECE = {ece:.4f}, n = {int(n)})", fontsize=10))
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    ax.text(0.98, 0.02, "numbers: rows per bin", transform=ax.transAxes, ha="right",
            va="bottom", fontsize=7, color="0.35")
    return fig, ax
