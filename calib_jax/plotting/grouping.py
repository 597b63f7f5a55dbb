"""Figures of the grouping studies of seeds/000: Fig. 2 (VR-SAG ablations) and Fig. 7
(within-group variance of learned vs field groups).  Functions take data and an optional
``ax``, return the figure, and never save (use :func:`calib_jax.plotting.save_figure`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

__all__ = ["plot_ablation", "plot_group_scatter", "plot_within_group_variance", "grouping_figure"]


def plot_ablation(x: Sequence[float], series: Mapping[str, Sequence[float]], *, xlabel: str,
                  ylabel: str = "metric (lower is better)", ax=None, logx: bool = False,
                  title: str | None = None):
    """One panel of Fig. 2: each metric against a hyper-parameter (means over seeds)."""
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(4, 3))
    for name, ys in series.items():
        ax.plot(list(x), list(ys), marker="o", label=name)
    if logx:
        ax.set_xscale("symlog", linthresh=0.1)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return fig


def plot_group_scatter(estimate: np.ndarray, truth: np.ndarray, groups: np.ndarray, *,
                       ax=None, title: str | None = None, max_points: int = 5000, seed: int = 0):
    """Backbone estimate vs true CTR, coloured by group (a uniform subsample of the rows)."""
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(4, 4))
    n = len(estimate)
    rows = np.arange(n)
    if n > max_points:
        rows = np.sort(np.random.default_rng(seed).choice(n, max_points, replace=False))
    g = np.asarray(groups)[rows]
    for k in np.unique(g):
        sel = g == k
        ax.scatter(np.asarray(truth)[rows][sel], np.asarray(estimate)[rows][sel], s=3, alpha=0.5,
                   label=f"group {k}")
    lim = float(max(np.max(truth), np.max(estimate)))
    ax.plot([0, lim], [0, lim], color="k", lw=0.8, ls="--")
    ax.set_xlabel("true CTR (oracle)")
    ax.set_ylabel("backbone estimate")
    if title:
        ax.set_title(title, fontsize=9)
    if len(np.unique(g)) <= 10:
        ax.legend(fontsize=6, markerscale=3)
    return fig


def plot_within_group_variance(names: Sequence[str], score_var: Sequence[float],
                               oracle_var: Sequence[float], *, ax=None):
    """Bars of the within-group variance sum_k w_k sigma_k^2 of scores and of oracle CTRs."""
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(4, 3))
    x = np.arange(len(names))
    ax.bar(x - 0.2, score_var, width=0.4, label="backbone score")
    ax.bar(x + 0.2, oracle_var, width=0.4, label="oracle CTR")
    ax.set_xticks(x, list(names), rotation=20, fontsize=8)
    ax.set_ylabel(r"$\sum_k w_k \sigma_k^2$")
    ax.legend(fontsize=7)
    return fig


def grouping_figure(estimate: np.ndarray, truth: np.ndarray, groupings: Mapping[str, np.ndarray],
                    score_var: Sequence[float], oracle_var: Sequence[float]):
    """The four-panel Fig. 7: one scatter per grouping plus the variance bars."""
    k = len(groupings)
    fig, axes = plt.subplots(1, k + 1, figsize=(4 * (k + 1), 4))
    for ax, (name, g) in zip(axes, groupings.items()):
        plot_group_scatter(estimate, truth, g, ax=ax, title=name)
    plot_within_group_variance(list(groupings), score_var, oracle_var, ax=axes[-1])
    fig.tight_layout()
    return fig
