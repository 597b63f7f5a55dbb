"""Annotated correlation heatmaps for the Monte Carlo metric studies (seeds/000 Figs 3-6).

Functions take data and an optional ``ax`` and return the figure; they never save
(use :func:`calib_jax.plotting.save_figure`).
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

__all__ = ["annotated_heatmap", "correlation_bars", "SIGN_NOTE"]

#: caption text stating the sign convention shared by every study figure
SIGN_NOTE = ("all columns are losses (lower = better); AUC, Pearson and Spearman with the "
             "oracle are shown as 1 - value")


def annotated_heatmap(
    values: np.ndarray,
    row_labels: Sequence[str],
    col_labels: Sequence[str] | None = None,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    caption: str | None = SIGN_NOTE,
    cmap: str = "RdBu_r",
    vmin: float = -1.0,
    vmax: float = 1.0,
    fmt: str = "{:.2f}",
    fontsize: float | None = None,
    colorbar_label: str = "Spearman rho",
) -> Figure:
    """Draw ``values`` (R, C) as a heatmap with each value written in its cell.

    A diverging colormap centred at 0 (``vmin = -vmax`` by default) so agreement (warm) and
    disagreement (cool) are distinguishable; text is white on dark cells (by luminance).
    NaN cells are left blank.  ``caption`` (the sign convention by default) is written under
    the axes.
    """
    values = np.asarray(values, dtype=float)
    if values.ndim != 2:
        raise ValueError(f"`values` must be 2-D, got shape {values.shape}")
    col_labels = list(row_labels) if col_labels is None else list(col_labels)
    if values.shape != (len(row_labels), len(col_labels)):
        raise ValueError(
            f"`values` has shape {values.shape}, labels give {(len(row_labels), len(col_labels))}")
    R, C = values.shape
    if ax is None:
        fig, ax = plt.subplots(figsize=(max(4.0, 0.55 * C + 2.5), max(3.0, 0.45 * R + 1.5)))
    else:
        fig = ax.figure  # type: ignore[assignment]
    im = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(C), labels=col_labels, rotation=60, ha="right", rotation_mode="anchor")
    ax.set_yticks(range(R), labels=list(row_labels))
    fs = fontsize if fontsize is not None else (7 if max(R, C) <= 16 else 5.5)
    for i in range(R):
        for j in range(C):
            v = values[i, j]
            if not np.isfinite(v):
                continue
            r, g, b, _ = im.cmap(im.norm(v))
            dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5  # luminance of the cell colour
            ax.text(j, i, fmt.format(v), ha="center", va="center", fontsize=fs,
                    color="white" if dark else "black")
    cb = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.02)
    cb.set_label(colorbar_label)
    _title_and_caption(ax, title, caption)
    return fig


def _title_and_caption(ax: Axes, title: str | None, caption: str | None) -> None:
    """Title on top, the caption (sign convention) in small italics just under it, so it
    never collides with rotated tick labels."""
    if title:
        ax.set_title(title, fontsize=10, pad=16 if caption else 6)
    if caption:
        ax.text(0.5, 1.01, caption, transform=ax.transAxes, ha="center", va="bottom",
                fontsize=7, style="italic")


def correlation_bars(
    rho: np.ndarray,
    labels: Sequence[str],
    *,
    err: np.ndarray | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    caption: str | None = SIGN_NOTE,
    highlight: Sequence[str] = (),
) -> Figure:
    """Horizontal bars of Spearman coefficients with the oracle (seeds/000 Fig 1), sorted,
    with optional error bars; names in ``highlight`` are drawn in a different colour."""
    rho = np.asarray(rho, dtype=float)
    order = np.argsort(rho)
    if ax is None:
        fig, ax = plt.subplots(figsize=(5.5, 0.28 * len(labels) + 1.2))
    else:
        fig = ax.figure  # type: ignore[assignment]
    names = [labels[i] for i in order]
    colors = ["tab:red" if n in highlight else "tab:blue" for n in names]
    ax.barh(range(len(order)), rho[order], xerr=None if err is None else np.asarray(err)[order],
            color=colors, alpha=0.85)
    ax.set_yticks(range(len(order)), labels=names, fontsize=7)
    ax.set_xlabel("Spearman rho with oracle Brier")
    ax.axvline(0.0, color="k", lw=0.6)
    ax.set_xlim(min(-0.05, float(np.nanmin(rho)) - 0.05), 1.0)
    for i, v in enumerate(rho[order]):
        ax.text(v + 0.01 if v >= 0 else v - 0.01, i, f"{v:.3f}", va="center", fontsize=6,
                ha="left" if v >= 0 else "right")
    _title_and_caption(ax, title, caption)
    return fig
