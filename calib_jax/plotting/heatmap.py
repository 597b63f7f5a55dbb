"""Annotated correlation heatmaps, bars and curves for the Monte Carlo metric studies
(seeds/000 Figs 3-6).

Functions take data and an optional ``ax`` and return the figure; they never save
(use :func:`calib_jax.plotting.save_figure`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

__all__ = ["annotated_heatmap", "correlation_bars", "rho_curves", "SIGN_NOTE"]

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
    with optional error bars (``err`` (M,) symmetric, or (2, M) distances below and above,
    e.g. a bootstrap interval); names in ``highlight`` are drawn in a different colour."""
    rho = np.asarray(rho, dtype=float)
    order = np.argsort(rho)
    if ax is None:
        fig, ax = plt.subplots(figsize=(5.5, 0.28 * len(labels) + 1.2))
    else:
        fig = ax.figure  # type: ignore[assignment]
    names = [labels[i] for i in order]
    colors = ["tab:red" if n in highlight else "tab:blue" for n in names]
    xerr = None if err is None else np.asarray(err)[..., order]
    ax.barh(range(len(order)), rho[order], xerr=xerr,
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


def rho_curves(
    x: Sequence[float],
    curves: Mapping[str, Sequence[float]],
    lo: Mapping[str, Sequence[float]] | None = None,
    hi: Mapping[str, Sequence[float]] | None = None,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    caption: str | None = SIGN_NOTE,
    xlabel: str = "",
    ylabel: str = "Spearman rho with oracle Brier (95% CI)",
    logx: bool = True,
    emphasize: str = "LCCE",
) -> Figure:
    """Spearman coefficients against a setting ``x`` (sample size, base CTR; seeds/000 Fig 6a),
    one line per entry of ``curves`` (label -> values at ``x``), each with the band
    ``lo[label]..hi[label]`` (e.g. a bootstrap interval) where given; labels starting with
    ``emphasize`` are drawn thicker."""
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.2, 4.0))
    else:
        fig = ax.figure  # type: ignore[assignment]
    xs = np.asarray(x, dtype=float)
    for label, y in curves.items():
        yv = np.asarray(y, dtype=float)
        if yv.shape != xs.shape:
            raise ValueError(f"curve {label!r} has shape {yv.shape}, `x` has {xs.shape}")
        line, = ax.plot(xs, yv, marker="o", ms=3, label=label,
                        lw=2.0 if label.startswith(emphasize) else 1.2)
        if lo is not None and hi is not None and label in lo and label in hi:
            ax.fill_between(xs, np.asarray(lo[label], float), np.asarray(hi[label], float),
                            color=line.get_color(), alpha=0.12, lw=0)
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    _title_and_caption(ax, title, caption)
    return fig
