"""Figures of the grouping studies of "Calibration is Grouping" (VR-SAG; anonymous authors,
under review): Fig. 2 (VR-SAG ablations) and Fig. 7 (within-group variance of learned vs field
groups).  Functions take data and an optional
``ax``, return the figure, and never save (use :func:`calib_jax.plotting.save_figure`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from calib_jax._src.plot_text import check_lengths, show_text_as_given
from calib_jax._src.seeds import check_seed

__all__ = ["plot_ablation", "plot_group_scatter", "plot_within_group_variance", "grouping_figure"]


def plot_ablation(x: Sequence[float], series: Mapping[str, Sequence[float]], *, xlabel: str,
                  ylabel: str = "metric (lower is better)", ax=None, logx: bool = False,
                  title: str | None = None):
    """One panel of Fig. 2: each metric against a hyper-parameter (means over seeds).

    Fig. 2 of "Calibration is Grouping" (VR-SAG; anonymous authors, under review) plots the
    test metrics of VR-SAG as one setting moves at a time: how many partitions, how many groups
    each, and how strongly the variance penalty is weighted. One line with markers per entry of
    ``series``, a legend and a light grid. Host code (matplotlib); not jit-able. ``x`` and each
    curve must be 1-D (``ValueError`` naming it); the values are not checked: a NaN leaves a
    gap in its line, and a curve whose length differs from ``x`` raises matplotlib's
    ``ValueError``.

    Args:
      x: (S,) the hyper-parameter values, real numbers.
      series: mapping metric name -> (S,) values at ``x`` (one line each, in the mapping's
        order); must not be empty (an empty mapping makes matplotlib warn that the legend
        has no entries).
      xlabel: x-axis label (keyword-only, required).
      ylabel: y-axis label.
      ax: a matplotlib ``Axes`` to draw into; ``None`` creates a new 4 x 3 inch figure.
      logx: ``True`` for a symmetric-log x axis (linear within 0.1 of 0, so ``x`` may hold 0);
        ``False`` (default) for a linear one.
      title: panel title; ``None`` or ``""`` for none.

    Returns:
      The :class:`matplotlib.figure.Figure` that holds the axes (``ax.figure`` when ``ax`` is
      given). It is not saved or closed (see :func:`calib_jax.plotting.save_figure`).

    Example:
      >>> from calib_jax.plotting.grouping import plot_ablation
      >>> import matplotlib.pyplot as plt
      >>> fig = plot_ablation([1, 2, 4], {"ECE": [0.03, 0.02, 0.025], "Brier": [0.07, 0.069, 0.07]},
      ...                     xlabel="number of partitions", title="(a)")
      >>> ax = fig.axes[0]
      >>> type(fig).__name__, len(ax.lines), ax.get_title(), ax.get_xlabel()  # one line per metric
      ('Figure', 2, '(a)', 'number of partitions')
      >>> [t.get_text() for t in ax.get_legend().get_texts()]
      ['ECE', 'Brier']
      >>> plt.close(fig)
    """
    if np.ndim(x) != 1:
        # a (S, 2) x drew two lines per metric under one legend entry
        raise ValueError(f"`x` must be a 1-D sequence of values, got shape {np.shape(x)}")
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(4, 3))
    for name, ys in series.items():
        if np.ndim(ys) != 1:
            raise ValueError(f"`series[{name!r}]` must be a 1-D sequence of values, got shape {np.shape(ys)}")
        ax.plot(list(x), list(ys), marker="o", label=name)
    if logx:
        ax.set_xscale("symlog", linthresh=0.1)
    show_text_as_given(ax.set_xlabel(xlabel), ax.set_ylabel(ylabel))
    if title:
        show_text_as_given(ax.set_title(title))
    show_text_as_given(ax.legend(fontsize=7))
    ax.grid(alpha=0.3)
    return fig


def plot_group_scatter(estimate: np.ndarray, truth: np.ndarray, groups: np.ndarray, *,
                       ax=None, title: str | None = None, max_points: int = 5000, seed: int = 0):
    """Backbone estimate vs true CTR, coloured by group (a uniform subsample of the rows).

    One panel of Fig. 7 of "Calibration is Grouping" (VR-SAG; anonymous authors, under review):
    each row is a point (true CTR, backbone estimate), one colour per group, with the diagonal
    ``estimate = truth`` dashed from 0 to the largest value. A grouping good for calibration
    gives each colour a narrow range of true CTRs. A legend (``"group <id>"``) is drawn when
    there are at most 10 groups among the plotted rows. Host code (NumPy, matplotlib); not
    jit-able. ``truth`` and ``groups`` must have the length of ``estimate`` and the values
    must be finite (``ValueError`` naming the argument otherwise).

    Args:
      estimate: (n,) backbone estimates (predicted CTRs), probabilities in [0, 1].
      truth: (n,) true (oracle) CTRs, probabilities in [0, 1].
      groups: (n,) group id of each row (ints, or any sortable labels).
      ax: a matplotlib ``Axes`` to draw into; ``None`` creates a new 4 x 4 inch figure.
      title: panel title (font size 9); ``None`` or ``""`` for none.
      max_points: an int >= 1; when ``n > max_points``, a uniform random subset of
        ``max_points`` rows (without replacement) is drawn, so large samples stay readable.
      seed: seed of the NumPy generator that draws the subset (same seed, same points); an
        integer (:func:`calib_jax._src.seeds.check_seed`; a negative one is its 64-bit two's
        complement), else ``ValueError``.

    Returns:
      The :class:`matplotlib.figure.Figure` that holds the axes (``ax.figure`` when ``ax`` is
      given); not saved or closed.

    Example:
      >>> import numpy as np
      >>> from calib_jax.plotting.grouping import plot_group_scatter
      >>> import matplotlib.pyplot as plt
      >>> est = np.array([0.1, 0.12, 0.3, 0.32, 0.5, 0.52]); truth = np.array([0.08, 0.1, 0.25, 0.3, 0.45, 0.5])
      >>> fig = plot_group_scatter(est, truth, np.array([0, 0, 1, 1, 2, 2]), title="field", max_points=4)
      >>> ax = fig.axes[0]
      >>> len(ax.collections), sum(len(c.get_offsets()) for c in ax.collections)  # <= 3 colours, 4 of 6 rows
      (3, 4)
      >>> plt.close(fig)
    """
    check_lengths(len(estimate), "estimate", truth=truth, groups=groups)
    if len(estimate) == 0:
        raise ValueError("`estimate` is empty: there is nothing to plot")
    if isinstance(max_points, bool) or not isinstance(max_points, int | np.integer) or max_points < 1:
        raise ValueError(f"`max_points` must be an int >= 1, got {max_points!r}")
    seed = check_seed(seed)  # -1, a str or a JAX key failed in NumPy's SeedSequence, naming nothing
    for name, v in (("estimate", estimate), ("truth", truth)):
        try:
            finite = np.all(np.isfinite(np.asarray(v, dtype=float)))
        except (TypeError, ValueError) as err:
            raise ValueError(f"`{name}` must hold numbers ({err})") from None
        if not finite:
            raise ValueError(f"`{name}` contains NaN or infinite values")
    ids = np.asarray(groups)
    if ids.ndim != 1:
        raise ValueError(f"`groups` must be a 1-D vector of group ids, got shape {ids.shape}")
    try:
        np.unique(ids)
    except TypeError:  # None beside numbers, or text beside numbers: NumPy's "'<' not supported"
        raise ValueError("`groups` must hold ids of one kind (all numbers or all text), got "
                         f"{sorted({type(v).__name__ for v in ids.tolist()})}") from None
    if ids.dtype.kind == "f" and not np.all(np.isfinite(ids)):  # np.unique keeps each NaN apart: undrawn
        raise ValueError(f"`groups` contains {int(np.sum(~np.isfinite(ids)))} NaN/inf value(s)")
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
        show_text_as_given(ax.set_title(title, fontsize=9))
    if len(np.unique(g)) <= 10:
        show_text_as_given(ax.legend(fontsize=6, markerscale=3))
    return fig


def plot_within_group_variance(names: Sequence[str], score_var: Sequence[float],
                               oracle_var: Sequence[float], *, ax=None):
    r"""Bars of the within-group variance sum_k w_k sigma_k^2 of scores and of oracle CTRs.

    For a grouping with group weights :math:`w_k` (share of rows) and within-group variances
    :math:`\sigma_k^2`, the quantity is :math:`\sum_k w_k \sigma_k^2`; the last panel of Fig. 7
    of "Calibration is Grouping" (VR-SAG; anonymous authors, under review) compares it across
    groupings, computed once on the backbone scores and once on the oracle CTRs (lower on the
    oracle = more homogeneous groups). Two bars per grouping, side by side, tick labels
    rotated by 20 degrees. The values are given, not computed here. Host code (matplotlib);
    not jit-able. ``score_var`` and ``oracle_var`` must have one value per name
    (``ValueError`` naming the argument otherwise); a NaN bar is not drawn.

    Args:
      names: (G,) grouping names, the x tick labels.
      score_var: (G,) within-group variance of the backbone scores per grouping, >= 0.
      oracle_var: (G,) within-group variance of the oracle CTRs per grouping, >= 0.
      ax: a matplotlib ``Axes`` to draw into; ``None`` creates a new 4 x 3 inch figure.

    Returns:
      The :class:`matplotlib.figure.Figure` that holds the axes (``ax.figure`` when ``ax`` is
      given); not saved or closed.

    Example:
      >>> from calib_jax.plotting.grouping import plot_within_group_variance
      >>> import matplotlib.pyplot as plt
      >>> fig = plot_within_group_variance(["field", "VR-SAG"], [0.012, 0.009], [0.008, 0.006])
      >>> ax = fig.axes[0]
      >>> [t.get_text() for t in ax.get_xticklabels()], len(ax.patches)  # 2 bars per grouping
      (['field', 'VR-SAG'], 4)
      >>> [round(float(b.get_height()), 4) for b in ax.patches]  # scores first, then oracle
      [0.012, 0.009, 0.008, 0.006]
      >>> plt.close(fig)
    """
    check_lengths(len(names), "names", score_var=score_var, oracle_var=oracle_var)
    for name, values in (("score_var", score_var), ("oracle_var", oracle_var)):
        if np.ndim(values) != 1:
            raise ValueError(f"`{name}` must hold one variance per grouping (1-D), got shape {np.shape(values)}")
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(4, 3))
    x = np.arange(len(names))
    ax.bar(x - 0.2, score_var, width=0.4, label="backbone score")
    ax.bar(x + 0.2, oracle_var, width=0.4, label="oracle CTR")
    ax.set_xticks(x, list(names), rotation=20, fontsize=8)
    show_text_as_given(ax.get_xticklabels())
    ax.set_ylabel(r"$\sum_k w_k \sigma_k^2$")
    ax.legend(fontsize=7)
    return fig


def grouping_figure(estimate: np.ndarray, truth: np.ndarray, groupings: Mapping[str, np.ndarray],
                    score_var: Sequence[float], oracle_var: Sequence[float]):
    """The four-panel Fig. 7: one scatter per grouping plus the variance bars.

    Fig. 7 of "Calibration is Grouping" (VR-SAG; anonymous authors, under review) has three
    groupings (so four panels); any number k >= 1 works: one :func:`plot_group_scatter`
    panel per grouping (titled by its name, default ``max_points`` and ``seed``), then one
    :func:`plot_within_group_variance` panel, in a row of 4 x 4 inch panels with
    ``tight_layout``. Host code (NumPy, matplotlib); not jit-able. An empty ``groupings``, a
    grouping whose length is not that of ``estimate``, or ``score_var`` / ``oracle_var``
    without one value per grouping raise ``ValueError`` naming the argument.

    Args:
      estimate: (n,) backbone estimates, probabilities in [0, 1].
      truth: (n,) true (oracle) CTRs, probabilities in [0, 1].
      groupings: mapping name -> (n,) group ids of the rows, k >= 1 entries, drawn in the
        mapping's order.
      score_var: (k,) within-group variance of the scores per grouping, in the order of
        ``groupings``.
      oracle_var: (k,) within-group variance of the oracle CTRs per grouping, same order.

    Returns:
      A new :class:`matplotlib.figure.Figure` with k + 1 axes; not saved or closed.

    Example:
      >>> import numpy as np
      >>> from calib_jax.plotting.grouping import grouping_figure
      >>> import matplotlib.pyplot as plt
      >>> est = np.array([0.1, 0.2, 0.3, 0.4]); truth = np.array([0.1, 0.25, 0.3, 0.35])
      >>> groupings = {"field": np.array([0, 0, 1, 1]), "VR-SAG": np.array([0, 1, 0, 1])}
      >>> fig = grouping_figure(est, truth, groupings, [0.01, 0.02], [0.003, 0.001])
      >>> len(fig.axes), [ax.get_title() for ax in fig.axes]  # 2 scatters + the bars
      (3, ['field', 'VR-SAG', ''])
      >>> plt.close(fig)
    """
    k = len(groupings)
    if k == 0:
        raise ValueError("`groupings` is empty: pass at least one grouping")
    check_lengths(len(estimate), "estimate", **{f"groupings[{name!r}]": g for name, g in groupings.items()})
    check_lengths(k, "groupings", score_var=score_var, oracle_var=oracle_var)
    fig, axes = plt.subplots(1, k + 1, figsize=(4 * (k + 1), 4))
    for ax, (name, g) in zip(axes, groupings.items()):
        plot_group_scatter(estimate, truth, g, ax=ax, title=name)
    plot_within_group_variance(list(groupings), score_var, oracle_var, ax=axes[-1])
    fig.tight_layout()
    return fig
