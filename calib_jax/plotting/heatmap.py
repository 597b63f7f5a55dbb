"""Annotated correlation heatmaps, bars and curves for the Monte Carlo metric studies
(Figs 1 and 3-6 of "Calibration is Grouping", VR-SAG; anonymous authors, under review).

Functions take data and an optional ``ax`` and return the figure; they never save
(use :func:`calib_jax.plotting.save_figure`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from calib_jax._src.plot_text import check_lengths, show_text_as_given

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

    Used for the Spearman correlation matrices of Figs 3-5 of "Calibration is Grouping"
    (VR-SAG; anonymous authors, under review). A colorbar is added next to the axes, the
    column labels are rotated by 60 degrees, and the title goes on top with the caption in
    small italics between them. Host code (NumPy, matplotlib); not jit-able.

    Args:
      values: (R, C) real values, e.g. correlations in [-1, 1]; NaN and inf cells are masked
        (blank, no text).
      row_labels: (R,) row labels (y ticks).
      col_labels: (C,) column labels (x ticks); ``None`` uses ``row_labels`` (a square matrix).
      ax: a matplotlib ``Axes`` to draw into; ``None`` creates a new figure sized to (R, C).
      title: axes title; ``None`` or ``""`` for none.
      caption: small italic line above the axes; :data:`SIGN_NOTE` by default, ``None`` or
        ``""`` for none.
      cmap: a matplotlib colormap name; a diverging one (default ``"RdBu_r"``) suits signed
        values.
      vmin: value mapped to the low end of the colormap (values below are clipped to its colour);
        ``vmin < vmax``, both finite (else ``ValueError``).
      vmax: value mapped to the high end; keep ``vmin = -vmax`` so 0 is the neutral colour.
      fmt: :meth:`str.format` pattern with one field for a cell's text, e.g. ``"{:.2f}"``.
      fontsize: cell text size in points; ``None`` picks 7 (up to 16 rows and columns) or 5.5.
      colorbar_label: label of the colorbar.

    Returns:
      The :class:`matplotlib.figure.Figure` holding the axes and the colorbar (``ax.figure``
      when ``ax`` is given); not saved or closed.

    Raises:
      ValueError: ``values`` is not 2-D, or its shape differs from (len(row_labels),
        len(col_labels)).

    Example:
      >>> import numpy as np
      >>> from calib_jax.plotting.heatmap import annotated_heatmap
      >>> import matplotlib.pyplot as plt
      >>> rho = np.array([[1.0, 0.8], [0.8, np.nan]])
      >>> fig = annotated_heatmap(rho, ["Brier", "ECE"], title="Spearman rho", caption=None)
      >>> ax = fig.axes[0]
      >>> len(fig.axes), [t.get_text() for t in ax.texts]  # heatmap + colorbar; the NaN cell is blank
      (2, ['1.00', '0.80', '0.80'])
      >>> [t.get_text() for t in ax.get_xticklabels()], ax.get_title()
      (['Brier', 'ECE'], 'Spearman rho')
      >>> plt.close(fig)
      >>> annotated_heatmap(np.zeros((2, 3)), ["a", "b"])  # square labels for a 2 x 3 matrix
      Traceback (most recent call last):
      ...
      ValueError: `values` has shape (2, 3), labels give (2, 2)
    """
    values = _numbers(values, "values")
    if values.ndim != 2:
        raise ValueError(f"`values` must be 2-D, got shape {values.shape}")
    lo, hi = (_numbers(v, name) for v, name in ((vmin, "vmin"), (vmax, "vmax")))
    if lo.ndim or hi.ndim or not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ValueError(f"`vmin` and `vmax` must be finite numbers with vmin < vmax, got {vmin!r} and {vmax!r}")
    try:  # a %-style "%.2f" has no {} field: every cell read "%.2f"
        probe = fmt.format(0.5)
    except (IndexError, KeyError, ValueError, AttributeError) as err:
        raise ValueError(f"`fmt` must be a str.format pattern with one field, e.g. '{{:.2f}}', got {fmt!r} ({err})") \
            from None
    if probe == fmt:
        raise ValueError(f"`fmt` must be a str.format pattern with one field, e.g. '{{:.2f}}', got {fmt!r}")
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
    show_text_as_given(ax.get_xticklabels(), ax.get_yticklabels())
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
    show_text_as_given(cb.ax.xaxis.label, cb.ax.yaxis.label)
    _title_and_caption(ax, title, caption)
    return fig


def _title_and_caption(ax: Axes, title: str | None, caption: str | None) -> None:
    """Title on top, the caption (sign convention) in small italics just under it, so it
    never collides with rotated tick labels."""
    if title:
        show_text_as_given(ax.set_title(title, fontsize=10, pad=16 if caption else 6))
    if caption:
        show_text_as_given(ax.text(0.5, 1.01, caption, transform=ax.transAxes, ha="center", va="bottom",
                       fontsize=7, style="italic"))


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
    """Horizontal bars of Spearman coefficients with the oracle, sorted,
    with optional error bars (``err`` (M,) symmetric, or (2, M) distances below and above,
    e.g. a bootstrap interval); names in ``highlight`` are drawn in a different colour.

    Fig. 1 of "Calibration is Grouping" (VR-SAG; anonymous authors, under review). Bars are
    sorted ascending from the bottom, so the metric that agrees best with the oracle is on
    top; each bar carries its value to 3 decimals, a vertical line marks 0 and the x axis
    ends at 1. Highlighted bars are red, the others blue. Host code (NumPy, matplotlib); not
    jit-able. ``rho`` must be a non-empty vector of numbers in [-1, 1] or NaN, ``labels`` and
    ``err`` (its last axis) must have its length and ``err`` must not be negative
    (``ValueError`` naming the argument otherwise); a NaN coefficient is drawn as no bar with
    the text ``nan``, a NaN error bar as none; names in ``highlight`` that are not labels are
    ignored.

    Args:
      rho: (M,) Spearman coefficients in [-1, 1], one per metric.
      labels: (M,) metric names, in the order of ``rho``.
      err: optional error bars, non-negative: (M,) symmetric half-widths, or (2, M)
        distances below and above ``rho``; ``None`` for none.
      ax: a matplotlib ``Axes`` to draw into; ``None`` creates a new figure whose height
        grows with M.
      title: axes title; ``None`` or ``""`` for none.
      caption: small italic line above the axes; :data:`SIGN_NOTE` by default, ``None`` or
        ``""`` for none.
      highlight: names (entries of ``labels``) to draw in red; one name alone is one name.

    Returns:
      The :class:`matplotlib.figure.Figure` that holds the axes (``ax.figure`` when ``ax`` is
      given); not saved or closed.

    Example:
      >>> import numpy as np
      >>> from matplotlib.colors import to_hex
      >>> from calib_jax.plotting.heatmap import correlation_bars
      >>> import matplotlib.pyplot as plt
      >>> fig = correlation_bars(np.array([0.62, 0.91, 0.35]), ["ECE", "LCCE", "MCE"],
      ...                        err=np.array([0.05, 0.02, 0.08]), highlight=["LCCE"], caption=None)
      >>> ax = fig.axes[0]
      >>> [t.get_text() for t in ax.get_yticklabels()]  # ascending, the strongest on top
      ['MCE', 'ECE', 'LCCE']
      >>> [t.get_text() for t in ax.texts], [to_hex(b.get_facecolor(), keep_alpha=False) for b in ax.patches]
      (['0.350', '0.620', '0.910'], ['#1f77b4', '#1f77b4', '#d62728'])
      >>> plt.close(fig)
    """
    rho = _numbers(rho, "rho")
    if rho.ndim != 1 or rho.size == 0 or np.any(np.abs(rho) > 1):
        # an infinity or an empty vector failed in matplotlib's words, a (M, 1) column as an index error
        span = f" and values in [{np.nanmin(rho):g}, {np.nanmax(rho):g}]" if rho.size else ""
        raise ValueError(f"`rho` must be a non-empty 1-D vector of coefficients in [-1, 1] (NaN allowed), got shape "
                         f"{rho.shape}{span}")
    check_lengths(len(rho), "rho", labels=labels, err=None if err is None else np.asarray(err).T)
    if err is not None and np.shape(err) not in ((len(rho),), (2, len(rho))):
        raise ValueError(f"`err` must have shape ({len(rho)},) or (2, {len(rho)}), got {np.shape(err)}")
    if err is not None and np.any(_numbers(err, "err") < 0):  # NaN (an undefined interval) is drawn as none
        raise ValueError("`err` must hold non-negative distances (half-widths, or the distances below and above rho)")
    order = np.argsort(rho)
    if ax is None:
        fig, ax = plt.subplots(figsize=(5.5, 0.28 * len(labels) + 1.2))
    else:
        fig = ax.figure  # type: ignore[assignment]
    labels = list(labels)  # by position: a pandas Series indexed 2, 1, 0 was read by its index
    highlight = [highlight] if isinstance(highlight, str) else list(highlight)  # "ECE" is one name, not E, C, E
    names = [labels[i] for i in order]
    colors = ["tab:red" if n in highlight else "tab:blue" for n in names]
    xerr = None if err is None else np.asarray(err)[..., order]
    ax.barh(range(len(order)), rho[order], xerr=xerr,
            color=colors, alpha=0.85)
    ax.set_yticks(range(len(order)), labels=names, fontsize=7)
    show_text_as_given(ax.get_yticklabels())
    ax.set_xlabel("Spearman rho with oracle Brier")
    ax.axvline(0.0, color="k", lw=0.6)
    ax.set_xlim(min(-0.05, float(np.nanmin(rho)) - 0.05), 1.0)
    for i, v in enumerate(rho[order]):
        ax.text(v + 0.01 if v >= 0 else v - 0.01, i, f"{v:.3f}", va="center", fontsize=6,
                ha="left" if v >= 0 else "right")
    _title_and_caption(ax, title, caption)
    return fig


def _numbers(x: Any, name: str) -> np.ndarray:
    """``x`` as a float array, or ``ValueError`` naming ``name`` (a text cell failed in NumPy's
    words, naming nothing)."""
    try:
        return np.asarray(x, dtype=float)
    except (TypeError, ValueError) as err:
        raise ValueError(f"`{name}` must hold numbers ({err})") from None


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
    """Spearman coefficients against a setting ``x`` (sample size, base CTR),
    one line per entry of ``curves`` (label -> values at ``x``), each with the band
    ``lo[label]..hi[label]`` (e.g. a bootstrap interval) where given; labels starting with
    ``emphasize`` are drawn thicker.

    Fig. 6a of "Calibration is Grouping" (VR-SAG; anonymous authors, under review). Lines are
    1.2 points wide, 2.0 for emphasised labels; a legend in two columns and a light grid are
    added. Host code (NumPy, matplotlib); not jit-able. Every curve (and band) must have the
    shape of ``x``, ``lo`` and ``hi`` come together with the same labels (each of them a label
    of ``curves``), ``curves`` must not be empty, and on a log axis ``x`` must be positive
    (``ValueError`` otherwise); NaN values leave gaps.

    Args:
      x: (S,) the settings, real; > 0 when ``logx`` is ``True``.
      curves: mapping label -> (S,) coefficients at ``x``, in [-1, 1]; at least one entry.
      lo: optional mapping label -> (S,) lower ends of the bands.
      hi: optional mapping label -> (S,) upper ends of the bands (needed with ``lo``).
      ax: a matplotlib ``Axes`` to draw into; ``None`` creates a new 6.2 x 4 inch figure.
      title: axes title; ``None`` or ``""`` for none.
      caption: small italic line above the axes; :data:`SIGN_NOTE` by default, ``None`` or
        ``""`` for none.
      xlabel: x-axis label.
      ylabel: y-axis label.
      logx: ``True`` (default) for a log x axis, ``False`` for a linear one.
      emphasize: prefix of the labels drawn thicker (``""`` would match every label); the
        labels and ``emphasize`` must be strings (else ``ValueError``).

    Returns:
      The :class:`matplotlib.figure.Figure` that holds the axes (``ax.figure`` when ``ax`` is
      given); not saved or closed.

    Raises:
      ValueError: a curve's shape differs from the shape of ``x``.

    Example:
      >>> from calib_jax.plotting.heatmap import rho_curves
      >>> import matplotlib.pyplot as plt
      >>> fig = rho_curves([1e3, 1e4, 1e5], {"LCCE": [0.7, 0.85, 0.93], "ECE": [0.5, 0.6, 0.65]},
      ...                  lo={"LCCE": [0.6, 0.8, 0.9]}, hi={"LCCE": [0.8, 0.9, 0.96]},
      ...                  xlabel="sample size", caption=None)
      >>> ax = fig.axes[0]
      >>> [(line.get_label(), line.get_linewidth()) for line in ax.lines]  # LCCE emphasised
      [('LCCE', 2.0), ('ECE', 1.2)]
      >>> len(ax.collections), ax.get_xscale()  # one band (LCCE only)
      (1, 'log')
      >>> plt.close(fig)
    """
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.2, 4.0))
    else:
        fig = ax.figure  # type: ignore[assignment]
    xs = _numbers(x, "x")
    if xs.ndim != 1:
        raise ValueError(f"`x` must be a 1-D sequence of settings, got shape {xs.shape}")
    if not curves:
        raise ValueError("`curves` is empty: pass at least one curve")
    if not all(isinstance(label, str) for label in curves) or not isinstance(emphasize, str):
        raise ValueError(f"the labels of `curves` and `emphasize` must be strings, got {list(curves)} and "
                         f"{emphasize!r}")
    if (lo is None) != (hi is None) or (lo is not None and hi is not None and set(lo) != set(hi)):
        raise ValueError("`lo` and `hi` must be given together, with the same labels")
    if lo is not None and (unknown := sorted(map(str, set(lo) - set(curves)))):
        # a band whose label has no curve was dropped without a word
        raise ValueError(f"`lo` and `hi` have bands for labels not in `curves`: {unknown}")
    if logx and not np.all(xs > 0):
        raise ValueError("`x` must be positive on a log axis (or pass logx=False)")
    for label, y in curves.items():
        yv = np.asarray(y, dtype=float)
        if yv.shape != xs.shape:
            raise ValueError(f"curve {label!r} has shape {yv.shape}, `x` has {xs.shape}")
        line, = ax.plot(xs, yv, marker="o", ms=3, label=label,
                        lw=2.0 if label.startswith(emphasize) else 1.2)
        if lo is not None and hi is not None and label in lo:
            for band in (lo[label], hi[label]):
                if np.shape(band) != xs.shape:
                    raise ValueError(f"the band of {label!r} has shape {np.shape(band)}, `x` has {xs.shape}")
            ax.fill_between(xs, np.asarray(lo[label], float), np.asarray(hi[label], float),
                            color=line.get_color(), alpha=0.12, lw=0)
    if logx:
        ax.set_xscale("log")
    show_text_as_given(ax.set_xlabel(xlabel), ax.set_ylabel(ylabel))
    ax.grid(alpha=0.3)
    show_text_as_given(ax.legend(fontsize=7, ncol=2))
    _title_and_caption(ax, title, caption)
    return fig
