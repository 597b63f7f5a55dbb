r"""``calib-jax compare``: several models scored on the same log, every difference paired.

A log usually carries the production model's score and a candidate's. Two ``evaluate`` runs
give two reports whose intervals cannot be compared: both models are scored on the same
impressions, so their metrics are correlated and the question "is the candidate better
calibrated?" is about the *paired* difference, resampled on the same rows for both (Efron &
Tibshirani, *An Introduction to the Bootstrap*, 1993, §16.4; the in-memory analogue is
:func:`calib_jax.bootstrap.difference`).

Joint cells. The command's cell bootstrap (:mod:`calib_jax.logs.accumulate`) counts rows in
cells (fine logit bin h, probability bin r, label y) and draws one ``Poisson(N_c)`` count per
cell and replicate. For M models the rows are counted in *joint* cells, keyed by every model's
(h_m, r_m) and the label, with each model's sums
:math:`\sum v\,[1,\ p_m,\ p_m^2,\ o_m,\ (y-p_m)^2,\ \ell_m,\ |y-p_m|]`. One count per joint cell
and replicate reweights the same rows for every model, so replicate b of model A and
replicate b of model B are the same resample; each model's full panel
(:func:`calib_jax.logs.panel.compute_panel`) is computed from its marginal of the joint cells,
and the difference of any metric is the percentile interval of the B replicate differences.
A joint cell lies inside each model's own cell, so the within-cell bound of the cell bootstrap
(p replaced by its cell mean, ``<= 0.002``) holds for every model. The number of joint cells
grows with how much the models disagree, never beyond the number of rows.

Verdict rule, per metric with a direction (lower is better for the losses and calibration
errors, higher for AUC; :math:`|\text{bias}|` stands for calibration in the large): "A better"
when the paired 95% interval of A - B excludes 0 on A's side, "B better" on the other side,
else "no significant difference". The interval is of the difference itself, never two
overlapping per-model intervals.

Engines: ``duckdb`` (default) and ``spark`` compute the joint cells as one ``GROUP BY`` query
(:func:`joint_cells_sql`), ``arrow`` reads the file in chunks; the three return the same cells.
With ``--logit`` the models' columns are logits: each row's fine bin is that of its logit and
its log loss the exact one from the logit, as ``evaluate --logit`` computes them.

With ``--user`` each model's GAUC and every paired GAUC difference are added. GAUC is a mean
over users, not a sum over cells, so its interval is not the cell bootstrap's but the delta
method over users for the mean of the per-user AUC differences
(:mod:`calib_jax.logs.paired_gauc`); DuckDB and Spark compute its sums in a second query on the
same valid rows (:func:`paired_gauc_query`), the arrow engine in NumPy.

With ``--oracle`` (a simulated log's true click probability :math:`\pi`) each joint cell also
sums every model's :math:`v\,[(\pi-p)^2,\ |\pi-p|,\ \mathrm{KL}(\pi\|p),\ \pi,\ \pi^2,\ p\pi]`,
so oracle Brier, Brier⁺, KL and Pearson are paired like the other metrics. The Chebyshev
distance :math:`\max|\pi - p|` is a maximum, not a sum over cells: each model keeps its 32
largest gaps (:func:`joint_gaps_sql`, a small second query) and bootstraps them as ``evaluate``
does, and it gets no paired difference.

With ``--field`` (repeatable) each field's metrics that are sums over its levels (GCE,
Field-ECE, Field-RCE and the weighted per-level :math:`|\text{bias}|`, as ``evaluate --field``
computes them; Field-ECE and Field-RCE are Pan et al., WWW 2020, eqs. 5 and 6) are added for
every model, with every paired difference, its interval and verdict (lower is better for all
four). A field's rows are counted in *joint field cells*, keyed by (level, every model's coarse
logit bin of the 64 of ``evaluate``'s field cells, label), with each model's
:math:`\sum v\,[1,\ p_m,\ p_m^2,\ \ell_m]`; one ``Poisson(N_c)`` count per joint field cell and
replicate is shared by the models, drawn from the field's own stream of the seed (stream 1 + i
for the i-th ``--field``, as ``evaluate``'s field i) in the order (level name, bins, label), so the
differences are paired and every engine draws the same replicates
(:mod:`calib_jax.logs.paired_fields`). The levels are those ``evaluate`` keeps with the same
engine and ``--max-levels`` (DuckDB and Spark: the most rows; the arrow reader: the first met;
the rest ``__other__``, a missing value ``__missing__``). DuckDB and Spark count the cells in one
more query over every field (:func:`joint_field_cells_sql`: the same row checks and arithmetic as
:func:`joint_cells_sql`), the arrow engine in NumPy while it streams. The values are plug-in
estimates with percentile intervals, as in ``compare.json`` for the other metrics (``evaluate``'s
report gives a biased metric bias-corrected, its plug-in beside it); they are written to
``fields.csv`` / ``fields.md`` and ``compare.json``'s ``fields``; each model's report under
``models/`` holds no field tables.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from calib_jax.logs.accumulate import Accumulator, Settings, replicated_jointly
from calib_jax.logs.options import (
    BOOTSTRAP_MAX,
    HIST_BINS_RANGE,
    MAX_LEVELS_RANGE,
    CompareOptions,
    check_engine_settings,
    check_option_range,
)
from calib_jax.logs.unseen import warn_if_respelled

__all__ = ["JointCells", "joint_cells_from_rows", "joint_cells_sql", "joint_cells_from_result", "accumulators",
           "paired_differences", "joint_field_cells_sql", "field_rows", "LOWER_IS_BETTER", "HIGHER_IS_BETTER"]

_P_CLIP = 1e-12
#: metrics whose smaller value is better (the panel's losses and calibration errors; abs_bias = |bias|)
LOWER_IS_BETTER = ("ece", "ece_plus", "mce", "lcce", "brier", "nll", "ne", "mae", "abs_bias",
                   "oracle_brier", "oracle_mae", "oracle_kl")
#: metrics whose larger value is better
HIGHER_IS_BETTER = ("auc", "oracle_pearson")
#: the per-model sums of a joint cell, in the order of the accumulator's main cells
SUMS = ("sv", "svp", "svpp", "svo", "sbrier", "snll", "smae")
#: with an oracle CTR pi, after :data:`SUMS`: v (pi-p)², v |pi-p|, v KL(pi||p), v pi, v pi², v p pi
ORACLE_SUMS = ("soracle_brier", "soracle_mae", "skl", "spi", "spipi", "sppi")


@dataclasses.dataclass(frozen=True)
class JointCells:
    """The rows of a log counted in joint cells of M models (module docstring).

    Attributes:
      hb, rb: (C, M) each model's fine logit bin and probability bin of the cell.
      y: (C,) the label of the cell.
      n: (C,) rows in the cell.
      sums: (M, C, 7) each model's sums :data:`SUMS` over the cell's rows ((M, C, 13) with an
        oracle: :data:`ORACLE_SUMS` after them).
      rows_read, rows_used: rows of the log, and the valid ones counted in the cells.
      dropped: invalid rows dropped, by ``"column: problem"``.
      top_gaps: with an oracle, (M, k) each model's largest :math:`|\\pi - p|` (k <= 32), else None.
    """

    hb: np.ndarray
    rb: np.ndarray
    y: np.ndarray
    n: np.ndarray
    sums: np.ndarray
    rows_read: int
    rows_used: int
    dropped: Mapping[str, int] = dataclasses.field(default_factory=dict)
    top_gaps: np.ndarray | None = None

    def sorted(self) -> JointCells:
        """The cells in the canonical order (by each model's h, r, then y): the order the
        bootstrap counts are drawn in, so every engine gives the same replicates."""
        keys = [self.y] + [a for m in reversed(range(self.hb.shape[1])) for a in (self.rb[:, m], self.hb[:, m])]
        order = np.lexsort(keys)
        return dataclasses.replace(self, hb=self.hb[order], rb=self.rb[order], y=self.y[order], n=self.n[order],
                                   sums=self.sums[:, order])


def score_bins(p: np.ndarray, settings: Settings) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    r"""Each row's cell coordinates, as the statistics query computes them.

    .. math:: \tilde p = \mathrm{clip}(p, 10^{-12}, 1 - 10^{-12}),\quad
              o = \mathrm{clip}(\ln\tilde p - \ln(1-\tilde p), -L, L),\quad
              h = \lfloor (o + L) H / 2L \rfloor,\quad r = \lfloor p M \rfloor

    (``ln(1 - p)``, not ``log1p``, as the SQL engines compute it, so every engine bins a row alike).

    Args:
      p: (n,) probabilities in [0, 1].
      settings: the grid (``logit_range`` L, ``hist_bins`` H) and the probability bins M.

    Returns:
      ``(o, h, r, p_clipped)``: the clipped logit, the fine logit bin, the probability bin and
      the clipped probability, each (n,).

    Example:
      >>> import numpy as np
      >>> o, h, r, _ = score_bins(np.array([0.5, 0.99]), Settings())
      >>> h.tolist(), r.tolist()
      ([2048, 2636], [7, 14])
    """
    L = settings.logit_range
    pc = np.clip(p, _P_CLIP, 1.0 - _P_CLIP)
    # ln(1 - pc) as the SQL engines compute it (not log1p), so all engines bin every row alike
    oc = np.clip(np.log(pc) - np.log(1.0 - pc), -L, L)
    hb, rb = _cell_bins(oc, p, settings)
    return oc, hb, rb, pc


def _cell_bins(oc: np.ndarray, p: np.ndarray, settings: Settings) -> tuple[np.ndarray, np.ndarray]:
    """The fine logit bin of the clipped logit ``oc`` and the probability bin of ``p``."""
    L, H, M = settings.logit_range, settings.hist_bins, settings.n_bins
    hb = np.clip(np.floor((oc + L) / (2 * L) * H), 0, H - 1).astype(np.int64)
    rb = np.clip(np.floor(p * M), 0, M - 1).astype(np.int64)
    return hb, rb


def row_sums(p: np.ndarray, y: np.ndarray, v: np.ndarray, settings: Settings, *,
             o: np.ndarray | None = None, pi: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Each row's fine bin, probability bin and its sums
    :math:`v\,[1,\ p,\ p^2,\ o,\ (y-p)^2,\ \ell,\ |y-p|]` (n, 7), as the queries compute them.

    Given logits ``o``, the fine bin is that of :math:`\mathrm{clip}(o, -L, L)` itself and the log
    loss the exact :math:`\log(1 + e^{-o(2y-1)})`, as ``evaluate --logit`` computes them (the
    probability :math:`p = 1/(1 + e^{-o})` is then ``p``).

    Args:
      p, y, v: (n,) probabilities, labels and weights.
      settings: the grid and the probability bins.
      o: (n,) the logits the probabilities come from, or ``None`` (probabilities given).
      pi: (n,) an oracle CTR in [0, 1], or ``None``: with it the sums go on with
        :math:`v\,[(\pi-p)^2,\ |\pi-p|,\ \mathrm{KL}(\pi\|p),\ \pi,\ \pi^2,\ p\pi]` (n, 13),
        the KL with p clipped to :math:`[10^{-12}, 1 - 10^{-12}]`.

    Returns:
      ``(h, r, sums)``.

    Example:
      >>> import numpy as np
      >>> h, r, s = row_sums(np.array([0.5]), np.array([1.0]), np.array([2.0]), Settings())
      >>> h.tolist(), r.tolist(), s[0, :3].tolist()
      ([2048], [7], [2.0, 1.0, 0.5])
    """
    if o is None:
        oc, hb, rb, pc = score_bins(p, settings)
        nll = np.where(y == 1, -np.log(pc), -np.log(1.0 - pc))
    else:  # the logit's own fine bin and exact log loss (no round trip through the clipped p)
        o = np.asarray(o, np.float64)
        oc = np.clip(o, -settings.logit_range, settings.logit_range)
        hb, rb = _cell_bins(oc, p, settings)
        nll = np.logaddexp(0.0, -o * (2 * y - 1))
    cols = [v, v * p, v * (p * p), v * oc, v * ((y - p) ** 2), v * nll, v * np.abs(y - p)]
    if pi is not None:
        pi = np.asarray(pi, np.float64)
        pc = np.clip(p, _P_CLIP, 1.0 - _P_CLIP)
        xlogx = lambda a: np.where(a > 0, a * np.log(np.where(a > 0, a, 1.0)), 0.0)  # noqa: E731
        kl = xlogx(pi) - pi * np.log(pc) + xlogx(1.0 - pi) - (1.0 - pi) * np.log(1.0 - pc)
        cols += [v * ((pi - p) ** 2), v * np.abs(pi - p), v * kl, v * pi, v * (pi * pi), v * (p * pi)]
    return hb, rb, np.stack(cols, axis=1)


def joint_cells_from_rows(p: Any, y: Any, v: Any = None, settings: Settings | None = None, *, o: Any = None,
                          pi: Any = None, rows_read: int | None = None,
                          dropped: Mapping[str, int] | None = None) -> JointCells:
    r"""Count validated rows of M models in joint cells (the ``arrow`` engine's way).

    Args:
      p: (n, M) probabilities of the M models on the same n rows, in [0, 1].
      y: (n,) labels in {0, 1}.
      v: (n,) non-negative weights (default 1).
      settings: the fine logit grid and probability bins (:class:`~calib_jax.logs.accumulate.Settings`).
      o: (n, M) the logits the probabilities come from (``compare --logit``), or ``None``.
      pi: (n,) an oracle CTR (``compare --oracle``), or ``None``: each model's oracle sums and
        its largest gaps :math:`|\pi - p|` (of rows of positive weight) are kept.
      rows_read: rows of the log including dropped ones (default n).
      dropped: invalid rows dropped, by ``"column: problem"``.

    Returns:
      :class:`JointCells` in the canonical order.

    Example:
      >>> import numpy as np
      >>> c = joint_cells_from_rows(np.array([[0.1, 0.2], [0.1, 0.2], [0.7, 0.6]]), np.array([0, 1, 1]))
      >>> c.n.tolist(), c.sums[0, :, 0].tolist()  # three cells (the labels differ), one row each
      ([1.0, 1.0, 1.0], [1.0, 1.0, 1.0])
    """
    settings = settings or Settings(scheme="cells")
    p = np.asarray(p, np.float64)
    if p.ndim != 2 or p.shape[1] < 1:
        raise ValueError(f"`p` must be (n, M) probabilities, got shape {p.shape}")
    n, M = p.shape
    y = np.asarray(y, np.float64)
    v = np.ones(n) if v is None else np.asarray(v, np.float64)
    hbs, rbs, cols = [], [], []
    for m in range(M):
        hb, rb, sums = row_sums(p[:, m], y, v, settings, o=None if o is None else np.asarray(o, np.float64)[:, m],
                                pi=pi)
        hbs.append(hb)
        rbs.append(rb)
        cols.append(sums)
    key = np.stack([*hbs, *rbs, y.astype(np.int64)], axis=1)
    gaps = None
    if pi is not None:
        from calib_jax.logs.accumulate import top_values

        gaps = np.stack([top_values(np.abs(np.asarray(pi, np.float64) - p[:, m])[v > 0]) for m in range(M)])
    return _aggregate(key, np.ones(n), np.stack(cols), rows_read=n if rows_read is None else int(rows_read),
                      dropped=dropped, top_gaps=gaps)


def _unique_rows(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(key, axis=0, return_inverse=True)``, through one int64 per row when the
    columns' ranges fit in 62 bits (a row sort is much slower than a sort of integers)."""
    hi = key.max(axis=0) + 1 if key.shape[0] else np.ones(key.shape[1], np.int64)
    bits = np.ceil(np.log2(np.maximum(hi, 2))).astype(np.int64)
    if int(bits.sum()) > 62:
        uniq, inv = np.unique(key, axis=0, return_inverse=True)
        return uniq, inv.reshape(-1)
    shift = np.concatenate([np.cumsum(bits[::-1])[::-1][1:], [0]])
    packed = np.bitwise_or.reduce(key.astype(np.int64) << shift, axis=1) if key.shape[0] else np.zeros(0, np.int64)
    up, inv = np.unique(packed, return_inverse=True)
    uniq = (up[:, None] >> shift) & ((np.int64(1) << bits) - 1)
    return uniq, inv.reshape(-1)


def _aggregate(key: np.ndarray, n: np.ndarray, sums: np.ndarray, *, rows_read: int,
               dropped: Mapping[str, int] | None, top_gaps: np.ndarray | None = None) -> JointCells:
    """Joint cells from rows or partial cells: ``key`` (k, 2M + 1) each one's (h_1..h_M,
    r_1..r_M, y), ``n`` (k,) its rows and ``sums`` (M, k, 7); equal keys are added up."""
    M = sums.shape[0]
    uniq, inv = _unique_rows(key)
    C = uniq.shape[0]
    total = np.stack([np.stack([np.bincount(inv, weights=sums[m, :, j], minlength=C) for j in range(sums.shape[2])],
                               axis=1) for m in range(M)])
    cells = JointCells(hb=uniq[:, :M], rb=uniq[:, M:2 * M], y=uniq[:, 2 * M],
                       n=np.bincount(inv, weights=n, minlength=C), sums=total, rows_read=int(rows_read),
                       rows_used=int(round(float(n.sum()))),
                       dropped=dict(dropped or {}), top_gaps=top_gaps)
    return cells.sorted()


def joint_cells_sql(settings: Settings, *, label: str, scores: Sequence[str], weight: str | None, source: str,
                    dialect: str = "duckdb", logit: bool = False, negative_rate: float | None = None,
                    negative_rate_column: str | None = None, oracle: str | None = None) -> str:
    r"""One ``GROUP BY`` query of the joint cells of the ``scores`` columns (module docstring).

    Rows are checked as ``evaluate`` checks them (label 0/1; every score a number in [0, 1];
    a weight finite and >= 0); the ``bad`` column of the result marks the groups of invalid
    rows (a bit per problem: 1 label, 2 a score, 4 the weight, 8 the rate, 16 the oracle),
    whose counts the command reports or refuses. The per-row arithmetic is that of the
    statistics query of :func:`calib_jax.logs.sql.statistics_sql`.

    Args:
      settings: the fine logit grid and probability bins.
      label, scores, weight: the columns (two or more scores).
      source: the ``FROM`` item, as :func:`calib_jax.logs.sql.statistics_sql` takes it.
      dialect: ``"duckdb"``, ``"spark"`` or ``"bigquery"``.
      logit: the ``scores`` columns hold logits (finite numbers): each row's probability, fine bin
        and log loss as the statistics query computes them from a logit column.
      negative_rate: the kept-negative rate of a downsampled log, or ``None``: label-0 rows
        weigh ``1/negative_rate`` times their weight (:mod:`calib_jax.logs.downsampling`).
      negative_rate_column: or the column of each row's rate (bit 8 of ``bad``: missing or
        outside [1e-9, 1]).
      oracle: a column of each row's true click probability, or ``None``: each model's sums go on
        with :data:`ORACLE_SUMS` (bit 16 of ``bad``: missing or outside [0, 1]).

    Returns:
      The query text; its result has the columns ``bad, y, n``, then ``hb_m, rb_m`` and the
      sums :data:`SUMS` (and :data:`ORACLE_SUMS`) suffixed ``_m`` for each model m.

    Example:
      >>> from calib_jax.logs.accumulate import Settings
      >>> from calib_jax.logs.comparison import joint_cells_sql
      >>> q = joint_cells_sql(Settings(), label="click", scores=["prod", "cand"], weight=None, source="events")
      >>> q.count("GROUP BY") == 1 and "hb_1" in q
      True
    """
    ctes, d = _joint_ctes(settings, label=label, scores=scores, weight=weight, source=source, dialect=dialect,
                          logit=logit, negative_rate=negative_rate, negative_rate_column=negative_rate_column,
                          oracle=oracle)
    ms = range(len(scores))
    keys = ", ".join(f"hb_{m}, rb_{m}" for m in ms)
    sums = []
    for m in ms:
        sums += [f"sum(w) AS sv_{m}", f"sum(w * p{m}) AS svp_{m}", f"sum(w * (p{m} * p{m})) AS svpp_{m}",
                 f"sum(w * oc{m}) AS svo_{m}", f"sum(w * ((y - p{m}) * (y - p{m}))) AS sbrier_{m}",
                 f"sum(w * nll{m}) AS snll_{m}", f"sum(w * abs(y - p{m})) AS smae_{m}"]
        if oracle is not None:
            sums += [f"sum(w * ((pi - p{m}) * (pi - p{m}))) AS soracle_brier_{m}",
                     f"sum(w * abs(pi - p{m})) AS soracle_mae_{m}", f"sum(w * kl{m}) AS skl_{m}",
                     f"sum(w * pi) AS spi_{m}", f"sum(w * (pi * pi)) AS spipi_{m}", f"sum(w * (p{m} * pi)) AS sppi_{m}"]
    kind = "logits" if logit else "probabilities"
    return (f"-- calib-jax compare: joint cells of {len(scores)} models' {kind} ({d.name})\n"
            f"WITH {ctes}\n"
            f"SELECT bad, yi AS y, count(*) AS n, {keys}, {', '.join(sums)} FROM cells "
            f"GROUP BY bad, yi, {keys}")


def joint_gaps_sql(*, label: str, scores: Sequence[str], weight: str | None, source: str, oracle: str,
                   dialect: str = "duckdb", logit: bool = False, negative_rate: float | None = None,
                   negative_rate_column: str | None = None) -> str:
    r"""The query of each model's 32 largest oracle gaps :math:`|\pi - p_m|` over the valid rows
    of positive weight, as the statistics query keeps them for one model (the Chebyshev
    distance's bootstrap, :mod:`calib_jax.logs.accumulate`).

    Args:
      label, scores, weight, source, oracle, dialect, logit, negative_rate, negative_rate_column:
        as :func:`joint_cells_sql` takes them.

    Returns:
      The query text; its rows are ``(m, gap)``, at most 32 per model m.

    Example:
      >>> from calib_jax.logs.comparison import joint_gaps_sql
      >>> q = joint_gaps_sql(label="y", scores=["a", "b"], weight=None, source="events", oracle="pi")
      >>> q.count("LIMIT 32")
      2
    """
    from calib_jax.logs.accumulate import Settings

    ctes, _ = _joint_ctes(Settings(), label=label, scores=scores, weight=weight, source=source, dialect=dialect,
                          logit=logit, negative_rate=negative_rate, negative_rate_column=negative_rate_column,
                          oracle=oracle)
    parts = [f"SELECT {m} AS m, gap FROM (SELECT abs(pi - p{m}) AS gap FROM cells WHERE bad = 0 AND w > 0 "
             f"ORDER BY gap DESC LIMIT 32) t{m}" for m in range(len(scores))]
    return f"-- calib-jax compare --oracle: each model's largest gaps\nWITH {ctes}\n" + "\nUNION ALL\n".join(parts)


def joint_field_cells_sql(settings: Settings, *, label: str, scores: Sequence[str], fields: Sequence[str],
                          weight: str | None, source: str, dialect: str = "duckdb", logit: bool = False,
                          negative_rate: float | None = None, negative_rate_column: str | None = None,
                          oracle: str | None = None) -> str:
    r"""One query of every field's joint field cells (``compare --field``,
    :mod:`calib_jax.logs.paired_fields`): per field, level, each model's coarse logit bin
    :math:`g_m = \lfloor 64\,h_m / H \rfloor` (of its fine bin :math:`h_m`, as the statistics query
    bins a field's cells), label and ``bad``, the rows and :math:`\sum v` and each model's
    :math:`\sum v\,[p_m,\ p_m^2,\ \ell_m]`. The rows, their checks (``bad``, with the same bits as
    :func:`joint_cells_sql`, the oracle's included) and their per-row arithmetic are those of
    :func:`joint_cells_sql`. A field keeps its ``settings.max_levels`` levels with the most rows
    read (ties by name) and sums the others into ``__other__``, as the statistics query does; a
    missing value is the level ``__missing__``.

    Args:
      settings: the fine logit grid, probability bins and ``max_levels``.
      label, scores, weight, source, dialect, logit, negative_rate, negative_rate_column, oracle:
        as :func:`joint_cells_sql` takes them (the oracle only marks its invalid rows here).
      fields: the field columns (one or more).

    Returns:
      The query text; its result has the columns ``fid, level, bad, y, gb_0 .. gb_{M-1}, n, sv``
      and ``svp_m, svpp_m, snll_m`` for each model m
      (:func:`calib_jax.logs.paired_fields.joint_field_cells_from_result` reads it).

    Example:
      >>> from calib_jax.logs.accumulate import Settings
      >>> q = joint_field_cells_sql(Settings(), label="y", scores=["a", "b"], fields=["site", "ad"],
      ...                           weight=None, source="events")
      >>> q.count("UNION ALL"), "gb_1" in q and "'__other__'" in q
      (1, True)
    """
    from calib_jax.logs.accumulate import FIELD_CELL_BINS, OTHER

    if not fields:
        raise ValueError("`fields`: name one or more field columns")
    ctes, d = _joint_ctes(settings, label=label, scores=scores, weight=weight, source=source, dialect=dialect,
                          logit=logit, negative_rate=negative_rate, negative_rate_column=negative_rate_column,
                          oracle=oracle, fields=fields)
    H, K = settings.hist_bins, settings.max_levels
    ms = range(len(scores))
    gbs = ", ".join(f"gb_{m}" for m in ms)
    coarse = ", ".join(f"CAST(floor(hb_{m} * {FIELD_CELL_BINS} / {H}) AS {d.bigint}) AS gb_{m}" for m in ms)
    sums = ["sum(w) AS sv"]
    for m in ms:
        sums += [f"sum(w * p{m}) AS svp_{m}", f"sum(w * (p{m} * p{m})) AS svpp_{m}", f"sum(w * nll{m}) AS snll_{m}"]
    per_field = [f"SELECT {i} AS fid, f{i} AS level, bad, yi, {gbs}, count(*) AS n, {', '.join(sums)} FROM fc "
                 f"GROUP BY f{i}, bad, yi, {gbs}" for i in range(len(fields))]
    names = ["sv"] + [f"{s}_{m}" for m in ms for s in ("svp", "svpp", "snll")]
    kind = "logits" if logit else "probabilities"
    return (f"-- calib-jax compare --field: joint field cells of {len(scores)} models' {kind} ({d.name})\n"
            f"WITH {ctes},\n"
            f"fc AS (SELECT *, {coarse} FROM cells),\n"
            f"fl AS ({' UNION ALL '.join(per_field)}),\n"
            "lc AS (SELECT fid, level, sum(n) AS c FROM fl GROUP BY fid, level),\n"
            "lv AS (SELECT fid, level, row_number() OVER (PARTITION BY fid ORDER BY c DESC, level) AS rk FROM lc)\n"
            f"SELECT fid, lvl AS level, bad, yi AS y, {gbs}, sum(n) AS n, "
            + ", ".join(f"sum({c}) AS {c}" for c in names)
            + f" FROM (SELECT fl.fid, CASE WHEN lv.rk <= {K} THEN fl.level ELSE '{OTHER}' END AS lvl, bad, yi, "
            f"{', '.join(f'fl.gb_{m}' for m in ms)}, n, {', '.join(names)} FROM fl JOIN lv ON fl.fid = lv.fid "
            f"AND fl.level = lv.level) t GROUP BY fid, lvl, bad, yi, {gbs}")


def _joint_ctes(settings: Settings, *, label: str, scores: Sequence[str], weight: str | None, source: str,
                dialect: str, logit: bool, negative_rate: float | None, negative_rate_column: str | None,
                oracle: str | None, fields: Sequence[str] = ()) -> tuple[str, Any]:
    """The CTEs of the joint-cells query up to ``cells`` (each valid row's p, clipped logit, log
    loss, bins, weight ``w`` and, with an oracle, ``pi`` and each model's KL; with ``fields`` each
    row's levels ``f0 ..``), and the dialect."""
    from calib_jax.logs.sql import DIALECTS, logit_row_sql
    from calib_jax.logs.sql import float_literal as _lit

    checked, weights = _checked_rows_sql(label=label, scores=scores, weight=weight, source=source, dialect=dialect,
                                         logit=logit, negative_rate=negative_rate,
                                         negative_rate_column=negative_rate_column,
                                         oracle=oracle, fields=fields)  # refuses an unknown dialect
    d = DIALECTS[dialect]
    H, M, L = settings.hist_bins, settings.n_bins, float(settings.logit_range)
    lo, hi = _lit(_P_CLIP), _lit(1.0 - _P_CLIP)
    ms = range(len(scores))
    clean = ["CASE WHEN bad = 0 THEN y_in ELSE 0.0 END AS y",
             "CASE WHEN bad = 0 THEN w_in ELSE 0.0 END AS w" if weights
             else "CASE WHEN bad = 0 THEN 1.0 ELSE 0.0 END AS w"]
    if oracle is not None:
        clean.append("CASE WHEN bad = 0 THEN pi_in ELSE 0.0 END AS pi")
    clean += [f"f{i}" for i in range(len(fields))]
    Ls, L2 = _lit(L), _lit(2 * L)
    per = []
    if logit:
        # p = 1 / (1 + e^-o) (e^-o capped below overflow) and the log loss softplus(t), t = -o (2y - 1),
        # written max(t, 0) + ln(1 + e^-|t|), as the statistics query of a logit column
        clean += [f"CASE WHEN bad = 0 THEN x{m} ELSE 0.0 END AS o{m}" for m in ms]
        clip = ", ".join(f"{logit_row_sql(f'o{m}', f't{m}')[0]} AS p{m}, "
                         f"CASE WHEN y = 1 THEN -o{m} ELSE o{m} END AS t{m}" for m in ms)
        logs = ", ".join(f"{logit_row_sql(f'o{m}', f't{m}')[1]} AS nll{m}" for m in ms)
        per = [f"GREATEST(LEAST(o{m}, {Ls}), -{Ls}) AS oc{m}" for m in ms]
    else:
        clean += [f"CASE WHEN bad = 0 THEN x{m} ELSE 0.5 END AS p{m}" for m in ms]
        clip = ", ".join(f"GREATEST(LEAST(p{m}, {hi}), {lo}) AS pc{m}" for m in ms)
        logs = ", ".join(f"ln(pc{m}) AS lp{m}, ln(1.0 - pc{m}) AS l1p{m}" for m in ms)
        for m in ms:
            per += [f"GREATEST(LEAST(lp{m} - l1p{m}, {Ls}), -{Ls}) AS oc{m}",
                    f"CASE WHEN y = 1 THEN -lp{m} ELSE -l1p{m} END AS nll{m}"]
    if oracle is not None:  # KL(pi || p) with p clipped, as the statistics query writes it
        for m in ms:
            pc = f"GREATEST(LEAST(p{m}, {hi}), {lo})"
            per.append(f"(CASE WHEN pi > 0 THEN pi * ln(pi) ELSE 0.0 END) - pi * ln({pc}) "
                       f"+ (CASE WHEN pi < 1 THEN (1.0 - pi) * ln(1.0 - pi) ELSE 0.0 END) - (1.0 - pi) * ln(1.0 - {pc})"
                       f" AS kl{m}")
    binned = []
    for m in ms:
        binned += [f"CAST(GREATEST(LEAST(floor(p{m} * {M}), {M - 1}), 0) AS {d.bigint}) AS rb_{m}",
                   f"CAST(GREATEST(LEAST(floor((oc{m} + {Ls}) / {L2} * {H}), {H - 1}), 0) AS {d.bigint}) AS hb_{m}"]
    ctes = (f"{checked},\n"
            f"clean AS (SELECT bad, {', '.join(clean)} FROM chk),\n"
            f"logs AS (SELECT *, {logs} FROM (SELECT *, {clip} FROM clean) t0),\n"
            f"rowv AS (SELECT *, {', '.join(per)} FROM logs),\n"
            f"cells AS (SELECT *, {', '.join(binned)}, CAST(y AS {d.bigint}) AS yi FROM rowv)")
    return ctes, d


def _bad_model_sql(d: Any, m: int, logit: bool) -> str:
    """The SQL condition (dialect ``d``) under which model ``m``'s column ``x{m}`` of the ``chk`` rows
    is invalid: missing, NaN, and an infinite logit or a probability outside [0, 1]."""
    x = f"x{m}"
    missing = f"({x} IS NULL OR {d.isnan.format(x=x)})"
    return f"{missing} OR {d.isinf.format(x=x)}" if logit else f"{missing} OR {x} < 0 OR {x} > 1"


def _checked_rows_sql(*, label: str, scores: Sequence[str], weight: str | None, source: str, dialect: str,
                      logit: bool, negative_rate: float | None, negative_rate_column: str | None,
                      user: str | None = None, oracle: str | None = None,
                      fields: Sequence[str] = ()) -> tuple[str, bool]:
    """The CTEs ``src`` and ``chk`` of a comparison's queries: the rows read (``y_in``, ``x0 ..
    x{M-1}``, ``w_in`` and ``r_in`` where weighted, ``u_in`` the user as text with ``user``) and
    ``bad``, a bit per problem (1 label, 2 a model's column, 4 the weight, 8 the rate, 16 the
    oracle; ``pi_in`` the oracle with ``oracle``; ``f0 .. f{F-1}`` the ``fields`` as text, a missing
    value the level ``__missing__``, as the statistics query reads a field); and
    whether the rows carry a weight ``w_in``."""
    from calib_jax.logs.downsampling import MIN_RATE, weight_items_sql
    from calib_jax.logs.sql import DIALECTS

    if dialect not in DIALECTS:
        raise ValueError(f"dialect must be one of {sorted(DIALECTS)}, got {dialect!r}")
    d = DIALECTS[dialect]
    q = d.quote
    nan = lambda x: d.isnan.format(x=x)  # noqa: E731
    missing = lambda x: f"({x} IS NULL OR {nan(x)})"  # noqa: E731
    ms = range(len(scores))
    src = [f"CAST({q(label)} AS {d.double}) AS y_in"] + [f"CAST({q(s)} AS {d.double}) AS x{m}" for m, s in
                                                         zip(ms, scores)]
    cast = lambda c: None if c is None else f"CAST({q(c)} AS {d.double})"  # noqa: E731
    weights = weight_items_sql(f"CAST({q(label)} AS {d.double})", cast(weight), negative_rate,
                               cast(negative_rate_column))  # the population weight of a kept row
    src += weights
    if user is not None:  # GAUC's user: NULL stays NULL (a row without a user)
        src.append(f"CAST({q(user)} AS {d.string}) AS u_in")
    if oracle is not None:
        src.append(f"CAST({q(oracle)} AS {d.double}) AS pi_in")
    if fields:
        from calib_jax.logs.accumulate import MISSING

        src += [f"COALESCE(CAST({q(f)} AS {d.string}), '{MISSING}') AS f{i}" for i, f in enumerate(fields)]
    bad_score = " OR ".join(_bad_model_sql(d, m, logit) for m in ms)
    masks = [f"CASE WHEN {missing('y_in')} OR (y_in <> 0 AND y_in <> 1) THEN 1 ELSE 0 END",
             f"CASE WHEN {bad_score} THEN 2 ELSE 0 END"]
    if weight is not None:
        masks.append(f"CASE WHEN {missing('w_in')} OR w_in < 0 OR {d.isinf.format(x='w_in')} THEN 4 ELSE 0 END")
    if negative_rate_column is not None:
        masks.append(f"CASE WHEN {missing('r_in')} OR r_in < {MIN_RATE!r} OR r_in > 1 THEN 8 ELSE 0 END")
    if oracle is not None:
        masks.append(f"CASE WHEN {missing('pi_in')} OR pi_in < 0 OR pi_in > 1 THEN 16 ELSE 0 END")
    return (f"src AS (SELECT {', '.join(src)} FROM {source}),\n"
            f"chk AS (SELECT *, {' + '.join(f'({x})' for x in masks)} AS bad FROM src)"), bool(weights)


def paired_gauc_query(*, label: str, scores: Sequence[str], user: str, weight: str | None, source: str,
                      dialect: str = "duckdb", logit: bool = False, negative_rate: float | None = None,
                      negative_rate_column: str | None = None) -> str:
    """The query of every model's GAUC and every pair's cross moments on the rows that
    :func:`joint_cells_sql` counts as valid (:func:`calib_jax.logs.paired_gauc.paired_gauc_sql`).

    Args:
      label, scores, weight, source, dialect, logit, negative_rate, negative_rate_column: as
        :func:`joint_cells_sql` takes them.
      user: the user column.

    Returns:
      The query text (one result row).

    Example:
      >>> q = paired_gauc_query(label="y", scores=["a", "b"], user="uid", weight=None, source="events")
      >>> q.startswith("-- calib-jax compare --user") and "s2ab_e_0_1" in q
      True
    """
    from calib_jax.logs.paired_gauc import paired_gauc_sql
    from calib_jax.logs.sql import DIALECTS

    checked, weighted = _checked_rows_sql(label=label, scores=scores, weight=weight, source=source, dialect=dialect,
                                          logit=logit, negative_rate=negative_rate,
                                          negative_rate_column=negative_rate_column, user=user)
    body = paired_gauc_sql(checked="chk", n_models=len(scores), weighted=weighted,
                           double=DIALECTS[dialect].double)
    return f"-- calib-jax compare --user: GAUC of {len(scores)} models, paired\nWITH {checked},\n{body}"


_BAD = {1: "label: missing, NaN or not in {0, 1}", 2: "score: missing, NaN or outside [0, 1] (some model)",
        4: "weight: missing, NaN, negative or not finite", 8: "negative rate: missing, NaN or outside [1e-09, 1]",
        16: "oracle: missing, NaN or outside [0, 1]"}
_BAD_LOGIT = {**_BAD, 2: "logit: missing, NaN or not finite (some model)"}


def joint_cells_from_result(rows: Mapping[str, Any], n_models: int, *, source: str,
                            drop_invalid: bool = False, logit: bool = False,
                            top_gaps: np.ndarray | None = None,
                            columns: Mapping[int, str] | None = None) -> JointCells:
    """The :class:`JointCells` of a :func:`joint_cells_sql` result (columns as arrays).

    Args:
      rows: column name -> sequence (a ``pyarrow.Table.to_pydict()``, Spark rows gathered).
      n_models: M.
      source: the log's name, for messages.
      drop_invalid: drop the groups of invalid rows (counted in ``dropped``) instead of
        refusing the log with a ``ValueError`` that names the problems.
      logit: the models' columns were logits (the problem's name in the messages).
      top_gaps: with an oracle (the result holds :data:`ORACLE_SUMS`), (M, k) each model's
        largest gaps (:func:`joint_gaps_sql`).
      columns: the problem bit -> the text that names its column(s) in the message (the label,
        weight, rate and oracle columns, and the models' columns that hold invalid values);
        without it the message names the roles.

    Returns:
      :class:`JointCells` in the canonical order.

    Example:
      >>> r = {"bad": [0, 0], "y": [0, 1], "n": [2, 1], "hb_0": [5, 9], "rb_0": [1, 7], "hb_1": [6, 9],
      ...      "rb_1": [1, 8], **{f"{s}_{m}": [1.0, 2.0] for s in SUMS for m in range(2)}}
      >>> joint_cells_from_result(r, 2, source="log").n.tolist()
      [2.0, 1.0]
    """
    bad = np.asarray(rows["bad"], np.int64)
    n = np.asarray(rows["n"], np.float64)
    problems: dict[str, int] = {}
    for bit, what in (_BAD_LOGIT if logit else _BAD).items():
        k = int(n[(bad & bit) > 0].sum())
        if k:
            named = (columns or {}).get(bit)
            problems[what if named is None else f"{named}: {what.split(': ', 1)[1].replace(' (some model)', '')}"] = k
    rows_read = int(n.sum())
    if problems and not drop_invalid:
        listed = "; ".join(f"{k} rows with {w}" for w, k in problems.items())
        raise ValueError(f"{source}: {listed} — fix the log or pass --drop-invalid to drop them")
    ok = bad == 0
    if not ok.any():
        raise ValueError(f"{source}: no valid rows (read {rows_read})")
    col = lambda name: np.asarray(rows[name])[ok]  # noqa: E731
    hb = np.stack([col(f"hb_{m}").astype(np.int64) for m in range(n_models)], axis=1)
    rb = np.stack([col(f"rb_{m}").astype(np.int64) for m in range(n_models)], axis=1)
    names = (*SUMS, *ORACLE_SUMS) if "spi_0" in rows else SUMS
    sums = np.stack([np.stack([col(f"{s}_{m}").astype(np.float64) for s in names], axis=1) for m in range(n_models)])
    cells = JointCells(hb=hb, rb=rb, y=col("y").astype(np.int64), n=n[ok], sums=sums, rows_read=rows_read,
                       rows_used=int(n[ok].sum()), dropped=problems, top_gaps=top_gaps)
    return cells.sorted()


def accumulators(cells: JointCells, settings: Settings) -> list[Accumulator]:
    """One :class:`~calib_jax.logs.accumulate.Accumulator` per model, all drawing the same
    bootstrap counts per joint cell (:meth:`Accumulator.from_joint_cells`).

    Args:
      cells: the joint cells (canonical order).
      settings: the evaluation settings (``scheme="cells"``, no fields; ``oracle`` when the cells
        carry :data:`ORACLE_SUMS`).

    Returns:
      A list of M accumulators; ``acc.replicated()`` gives each model's B + 1 replicate tables.

    Example:
      >>> import numpy as np
      >>> c = joint_cells_from_rows(np.array([[0.1, 0.3], [0.6, 0.5]]), np.array([0, 1]))
      >>> [a.rows_used for a in accumulators(c, Settings(scheme="cells", n_boot=0))]
      [2, 2]
    """
    M = settings.n_bins
    out = []
    for m in range(cells.sums.shape[0]):
        index = (cells.hb[:, m] * M + cells.rb[:, m]) * 2 + cells.y
        out.append(Accumulator.from_joint_cells(settings, cell_index=index, cell=cells.sums[m], cell_n=cells.n,
                                                rows_read=cells.rows_read, rows_used=cells.rows_used,
                                                dropped=cells.dropped,
                                                top_gaps=None if cells.top_gaps is None else cells.top_gaps[m]))
    return out


def _directed(metrics: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The panel's metrics that have a better direction, with |bias| for calibration in the large."""
    out = {k: np.asarray(metrics[k], np.float64) for k in (*LOWER_IS_BETTER, *HIGHER_IS_BETTER) if k in metrics}
    if "bias" in metrics:
        out["abs_bias"] = np.abs(np.asarray(metrics["bias"], np.float64))
    return out


def paired_differences(panels: Sequence[Mapping[str, Any]], names: Sequence[str], *,
                       level: float = 0.95) -> list[dict[str, Any]]:
    r"""Every paired difference A - B of every directed metric, with its interval and verdict.

    .. math:: \hat\theta_A - \hat\theta_B,\quad
              \big[q_{\alpha/2},\ q_{1-\alpha/2}\big]\big(\theta_A^{*b} - \theta_B^{*b}\big)_{b=1..B}

    where replicate b of both models is the same resample (the panels must come from
    :func:`accumulators` of the same joint cells).

    Args:
      panels: :func:`calib_jax.logs.panel.compute_panel` of each model's replicated accumulator.
      names: the models' names (their score columns).
      level: interval level.

    Returns:
      One dict per (metric, A, B) with A before B in ``names``: ``metric, a, b, value_a,
      value_b, diff, lo, hi, better`` (``a``, ``b`` or ``None``) and ``verdict`` (a sentence).

    Example:
      >>> import numpy as np
      >>> panel = lambda x: {"metrics": {"brier": np.array(x)}}
      >>> d = paired_differences([panel([0.10, 0.10, 0.11, 0.09]), panel([0.12, 0.13, 0.12, 0.12])], ["new", "prod"])
      >>> d[0]["better"], round(d[0]["diff"], 3)
      ('new', -0.02)
    """
    from calib_jax.logs.common import difference_row
    from calib_jax.logs.panel import interval

    if len(panels) != len(names) or len(names) < 2:
        raise ValueError("`panels` and `names` must list the same two or more models")
    directed = [_directed(p["metrics"]) for p in panels]
    out = []
    for metric in directed[0]:
        lower = metric in LOWER_IS_BETTER
        for i in range(len(names)):
            for j in range(i + 1, len(names)):
                a, b = directed[i][metric], directed[j][metric]
                diff, lo, hi = interval(a - b, level)
                out.append(difference_row(metric, names[i], names[j], float(a[0]), float(b[0]), diff, lo, hi,
                                          lower=lower, undefined="undefined for one of the models",
                                          no_interval="run with --bootstrap B"))
    return out


# ---------------------------------------------------------------------------- the command
def _safe_name(i: int, name: str) -> str:
    return f"{i}_{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)[:40]}"


#: the files ``compare`` writes into ``--out`` beside one report per model under ``models/``
COMPARE_FILES = ("compare.json", "compare.md", "compare.csv", "reliability_overlay.png")
#: with ``--field``, the per-field table beside them (:func:`field_rows`)
FIELD_FILES = ("fields.csv", "fields.md")
#: the columns of ``fields.csv`` (and of :attr:`calib_jax.logs.api.Comparison.fields`): one row per
#: (field, metric, pair of models), each model's value with its interval, the paired difference
FIELD_COLUMNS = ("field", "metric", "a", "b", "value_a", "lo_a", "hi_a", "value_b", "lo_b", "hi_b", "diff", "lo",
                 "hi", "better", "verdict")


def field_rows(result: Mapping[str, Any]) -> list[list[Any]]:
    """The rows of ``fields.csv`` from ``compare.json``'s content (:data:`FIELD_COLUMNS`): per field
    of ``--field``, metric and pair of models (A before B), each model's plug-in value and 95%
    percentile interval, the paired difference A - B with its paired interval, the model it
    favours (``better``) and the verdict.

    Args:
      result: ``compare.json``'s content; a comparison without ``--field`` has no rows.

    Returns:
      A list of rows, each a list in the order of :data:`FIELD_COLUMNS`.

    Example:
      >>> from calib_jax.logs.comparison import field_rows
      >>> e = lambda v: {"value": v, "lo": v - 0.01, "hi": v + 0.01}
      >>> r = {"fields": {"site": {"metrics": {"a": {"field_ece": e(0.02)}, "b": {"field_ece": e(0.05)}},
      ...      "differences": [{"field": "site", "metric": "field_ece", "a": "a", "b": "b", "value_a": 0.02,
      ...                       "value_b": 0.05, "diff": -0.03, "lo": -0.04, "hi": -0.02, "better": "a",
      ...                       "verdict": "field_ece:site: a better"}]}}}
      >>> field_rows(r)[0][:6]
      ['site', 'field_ece', 'a', 'b', 0.02, 0.01]
    """
    out = []
    for f, t in (result.get("fields") or {}).items():
        for d in t["differences"]:
            ea, eb = t["metrics"][d["a"]][d["metric"]], t["metrics"][d["b"]][d["metric"]]
            out.append([f, d["metric"], d["a"], d["b"], ea["value"], ea["lo"], ea["hi"], eb["value"], eb["lo"],
                        eb["hi"], d["diff"], d["lo"], d["hi"], d["better"], d["verdict"]])
    return out


def _field_results(field_cells: Mapping[str, Any], names: Sequence[str],
                   opts: CompareOptions) -> dict[str, Any]:
    """``compare.json``'s ``fields``: per field its levels, joint field cells, each model's
    per-field values with intervals and every paired difference (:mod:`calib_jax.logs.paired_fields`)."""
    from calib_jax.logs.paired_fields import field_differences, field_replicates

    out = {}
    for i, f in enumerate(opts.field):
        c = field_cells[f]
        warn_if_respelled(str(opts.log), f, c.levels)
        reps = field_replicates(c, n_boot=opts.bootstrap, seed=opts.seed, stream=1 + i)
        values, rows = field_differences(reps, names, f)
        out[f] = {"levels": len(c.levels), "joint_cells": int(c.n.shape[0]), "metrics": values,
                  "differences": rows}
    return out


def _fields_markdown(result: Mapping[str, Any]) -> str:
    """``fields.md``: per field, each model's value and interval and every paired difference."""
    from calib_jax.logs.report import md_cell

    def ci(v: Any, lo: Any, hi: Any) -> str:
        return f"{_fmt(v)}" + (f" [{_fmt(lo)}, {_fmt(hi)}]" if lo is not None else "")

    lines = ["# Per-field comparison", "", f"{md_cell(result['input']['path'])}: {result['input']['rows_used']:,} "
             "rows. Each model's per-field metrics (sums over the field's levels; plug-in values with 95% "
             "percentile intervals) and every paired difference A - B, its interval from the same resamples of "
             "the field's joint cells for every model. Lower is better for every metric.", ""]
    for f, t in result["fields"].items():
        lines += [f"## {md_cell(f)}", "", f"{t['levels']:,} levels, {t['joint_cells']:,} joint field cells.", "",
                  "| metric | A | B | value A | value B | A - B | verdict |", "|---|---|---|---|---|---|---|"]
        for d in t["differences"]:
            ea, eb = t["metrics"][d["a"]][d["metric"]], t["metrics"][d["b"]][d["metric"]]
            lines.append(f"| {d['metric']} | {md_cell(d['a'])} | {md_cell(d['b'])} | "
                         f"{ci(ea['value'], ea['lo'], ea['hi'])} | {ci(eb['value'], eb['lo'], eb['hi'])} | "
                         f"{ci(d['diff'], d['lo'], d['hi'])} | {md_cell(d['verdict'])} |")
        lines.append("")
    return "\n".join(lines)


def _model_dir(out: Path, i: int, name: str) -> Path:
    """The folder of model ``i``'s report (``models/<i>_<name made safe>``)."""
    return out / "models" / _safe_name(i, name)


def output_files(out: Path, scores: Sequence[str], *, fields: Sequence[str] = ()) -> tuple[Path, ...]:
    """Every file :func:`run_compare` writes into the folder ``out`` for the score columns
    ``scores``: :data:`COMPARE_FILES`, with ``fields`` (``--field``) :data:`FIELD_FILES`, and each
    model's report files (its output guard's plan).

    Example:
      >>> [str(p.relative_to("o")) for p in output_files(Path("o"), ["prod", "new model"])][3:6]
      ['reliability_overlay.png', 'models/0_prod/report.json', 'models/0_prod/report.md']
      >>> [p.name for p in output_files(Path("o"), ["a", "b"], fields=["site"])][4:6]
      ['fields.csv', 'fields.md']
    """
    from calib_jax.logs.common import REPORT_FILES

    return (*(out / f for f in COMPARE_FILES), *(out / f for f in (FIELD_FILES if fields else ())),
            *(_model_dir(out, i, name) / f for i, name in enumerate(scores) for f in REPORT_FILES))


def _numeric(opts: CompareOptions) -> list[str]:
    """The numeric columns a comparison reads: the label, the models, the weight, the rate column
    and the oracle."""
    extra = [c for c in (opts.weight, opts.negative_rate_column, opts.oracle) if c is not None]
    return list(dict.fromkeys([opts.label, *opts.models, *extra]))


def _cells_arrow(opts: CompareOptions, settings: Settings) -> tuple[JointCells, Any, Any]:
    from calib_jax.logs import loaders
    from calib_jax.logs.common import one_file
    from calib_jax.logs.validate import Columns, Problems, clean_chunk

    path = one_file(opts.log)
    fmt = loaders.resolve_format(path, opts.format)
    logit = bool(opts.logit)
    cols = [Columns(label=opts.label, weight=opts.weight, score=None if logit else s, logit=s if logit else None,
                    negative_rate=opts.negative_rate, negative_rate_column=opts.negative_rate_column,
                    oracle=opts.oracle)
            for s in opts.models]
    numeric = _numeric(opts)
    each = [Problems() for _ in cols]  # each model's checks; the label and weight count once (model 0's)
    parts: list[JointCells] = []  # each chunk's joint cells: memory holds cells, not rows
    users = _UserRows() if opts.user is not None else None  # GAUC needs each user's rows together
    rows = bad = 0
    text = list(dict.fromkeys([*([opts.user] if opts.user is not None else []), *opts.field]))
    counter = None
    if opts.field:  # each field's joint cells, counted while the log streams (calib_jax.logs.paired_fields)
        from calib_jax.logs.paired_fields import FieldCellCounter

        counter = FieldCellCounter(opts.field, len(cols), max_levels=opts.max_levels)
    ids = loaders.id_columns(opts.user, opts.field)
    for batch in loaders.iter_batches(path, fmt, numeric=numeric, text=text, chunk_rows=opts.chunk_rows, ids=ids):
        chunks = [clean_chunk(batch, c, rows, each[m]) for m, c in enumerate(cols)]
        keep = np.logical_and.reduce([c.keep for c in chunks])
        rows += batch.num_rows
        bad += int(np.sum(~keep))
        if counter is not None:  # every row names levels (as in evaluate); the valid ones fill the cells
            counter.add({f: batch.column(batch.schema.get_field_index(f)) for f in opts.field}, keep,
                        *_field_rows(chunks, keep, settings, logit))
        if keep.any():
            x = np.stack([(c.o if logit else c.p)[keep] for c in chunks], axis=1)
            oracle = chunks[0].oracle  # the oracle's values (filled on invalid rows) with --oracle
            pi = oracle[keep] if oracle is not None else None
            parts.append(joint_cells_from_rows(np.stack([c.p[keep] for c in chunks], axis=1), chunks[0].y[keep],
                                               chunks[0].v[keep], settings, o=x if logit else None, pi=pi))
            if users is not None:
                users.add(batch.column(batch.schema.get_field_index(opts.user)), keep, x, chunks[0].y[keep],
                          chunks[0].v[keep])
    problems = Problems()
    problems.items = dict(each[0].items)
    for m, c in enumerate(cols[1:], start=1):
        problems.items.update({k: v for k, v in each[m].items.items() if k[0] == (c.logit if logit else c.score)})
    problems.bad_rows = bad
    if problems.bad_rows and not opts.drop_invalid:
        raise ValueError(f"{path}: {problems.describe()} — {problems.bad_rows} of {rows} rows invalid; fix the log "
                         "or pass --drop-invalid to drop them")
    if not parts:
        raise ValueError(f"{path}: no valid rows (read {rows})")
    key = np.concatenate([np.concatenate([c.hb, c.rb, c.y[:, None]], axis=1) for c in parts])
    gaps = None
    if opts.oracle is not None:  # each model's largest gaps over every chunk
        from calib_jax.logs.accumulate import top_values

        gaps = np.stack([top_values(np.concatenate([c.top_gaps[m] for c in parts if c.top_gaps is not None]))
                         for m in range(len(cols))])
    cells = _aggregate(key, np.concatenate([c.n for c in parts]), np.concatenate([c.sums for c in parts], axis=1),
                       rows_read=rows, dropped=problems.as_dict(), top_gaps=gaps)
    return cells, (users.sums() if users is not None else None), (counter.cells() if counter is not None else None)


def _field_rows(chunks: Sequence[Any], keep: np.ndarray, settings: Settings,
                logit: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The kept rows' coarse logit bin of each model (k, M), labels (k,) and each model's field
    sums v [1, p, p², log loss] (M, k, 4), from the row arithmetic of the joint cells
    (:func:`row_sums`)."""
    from calib_jax.logs.accumulate import FIELD_CELL_BINS

    y, v = chunks[0].y[keep], chunks[0].v[keep]
    gbs, sums = [], []
    for c in chunks:
        hb, _, s = row_sums(c.p[keep], y, v, settings, o=c.o[keep] if logit else None)
        gbs.append(hb * FIELD_CELL_BINS // settings.hist_bins)
        sums.append(s[:, [0, 1, 2, 5]])
    return np.stack(gbs, axis=1), y.astype(np.int64), np.stack(sums)


class _UserRows:
    """The user, the models' columns, label and weight of every valid row the arrow engine reads
    (8 (M + 2) bytes a row plus the user ids, in memory)."""

    def __init__(self) -> None:
        self.users: list[Any] = []
        self.x: list[np.ndarray] = []
        self.y: list[np.ndarray] = []
        self.v: list[np.ndarray] = []

    def add(self, users: Any, keep: np.ndarray, x: np.ndarray, y: np.ndarray, v: np.ndarray) -> None:
        import pyarrow as pa

        self.users.append(users.filter(pa.array(keep)))
        self.x.append(x)
        self.y.append(y)
        self.v.append(v)

    def sums(self) -> Any:
        import pyarrow as pa

        from calib_jax.logs.paired_gauc import paired_user_auc_sums

        users = pa.chunked_array(self.users, type=pa.string())
        return paired_user_auc_sums(users, np.concatenate(self.x), np.concatenate(self.y), np.concatenate(self.v))


def _problem_columns(opts: CompareOptions, rows: Mapping[str, Any]) -> dict[int, str] | None:
    """The columns each problem bit of a refused log names (``None`` when the log is not refused):
    the label, weight, rate and oracle columns as given, and for the models' bit the columns that
    hold invalid values, found by one more small query, run only then (the joint cells' ``bad``
    marks a row whose column of *some* model is invalid)."""
    bad = np.asarray(rows.get("bad", []), np.int64)
    if opts.drop_invalid or not np.any(bad):
        return None
    from calib_jax.logs.engines import query_columns

    q = repr
    names = {1: f"column {q(opts.label)}", 4: f"column {q(opts.weight)}",
             8: f"column {q(opts.negative_rate_column)}", 16: f"column {q(opts.oracle)}"}
    if np.any(bad & 2):
        def count_sql(source: str, dialect: str) -> str:
            from calib_jax.logs.sql import DIALECTS

            checked, _ = _checked_rows_sql(label=opts.label, scores=opts.models, weight=opts.weight, source=source,
                                           dialect=dialect, logit=bool(opts.logit), negative_rate=opts.negative_rate,
                                           negative_rate_column=opts.negative_rate_column, oracle=opts.oracle)
            sums = ", ".join(f"SUM(CASE WHEN {_bad_model_sql(DIALECTS[dialect], m, bool(opts.logit))} THEN 1 ELSE 0 "
                             f"END) AS b{m}" for m in range(len(opts.models)))
            return f"WITH {checked}\nSELECT {sums} FROM chk"

        got = query_columns(opts, _numeric(opts), (), count_sql)
        held = {c: int(got[f"b{m}"][0] or 0) for m, c in enumerate(opts.models) if got[f"b{m}"][0]}
        names[2] = (f"column {q(next(iter(held)))}" if len(held) == 1 else
                    "columns " + ", ".join(f"{q(c)} ({k} rows)" for c, k in held.items()))
    return names


def _cells_sql(opts: CompareOptions, settings: Settings) -> tuple[JointCells, Any, Any]:
    from calib_jax.logs.engines import query_columns

    logit = bool(opts.logit)
    # the fields are read (and so checked to exist) with the first query, before any work
    rows = query_columns(opts, _numeric(opts), opts.field, lambda source, dialect: joint_cells_sql(
        settings, label=opts.label, scores=opts.models, weight=opts.weight, source=source, dialect=dialect,
        logit=logit, negative_rate=opts.negative_rate, negative_rate_column=opts.negative_rate_column,
        oracle=opts.oracle))
    gaps = None
    if opts.oracle is not None:  # a small second query: each model's largest gaps (its Chebyshev distance)
        got = query_columns(opts, _numeric(opts), (), lambda source, dialect: joint_gaps_sql(
            label=opts.label, scores=opts.models, weight=opts.weight, source=source, dialect=dialect,
            oracle=opts.oracle, logit=logit, negative_rate=opts.negative_rate,
            negative_rate_column=opts.negative_rate_column))
        m_of, gap = np.asarray(got.get("m", []), np.int64), np.asarray(got.get("gap", []), np.float64)
        from calib_jax.logs.accumulate import top_values

        gaps = np.stack([top_values(gap[m_of == m]) for m in range(len(opts.models))])
    cells = joint_cells_from_result(rows, len(opts.models), source=str(opts.log), drop_invalid=opts.drop_invalid,
                                    logit=logit, top_gaps=gaps, columns=_problem_columns(opts, rows))
    fields = None
    if opts.field:  # another scan: each field's joint cells (the main joint cells hold no levels)
        from calib_jax.logs.paired_fields import joint_field_cells_from_result

        got = query_columns(opts, _numeric(opts), opts.field, lambda source, dialect: joint_field_cells_sql(
            settings, label=opts.label, scores=opts.models, fields=opts.field, weight=opts.weight, source=source,
            dialect=dialect, logit=logit, negative_rate=opts.negative_rate,
            negative_rate_column=opts.negative_rate_column, oracle=opts.oracle))
        fields = joint_field_cells_from_result(got, opts.field, len(opts.models))
    if opts.user is None:
        return cells, None, fields
    from calib_jax.logs.paired_gauc import paired_sums_from_result

    # a second scan of the log: GAUC groups rows by user, the joint cells by score bins
    got = query_columns(opts, _numeric(opts), (opts.user,), lambda source, dialect: paired_gauc_query(
        label=opts.label, scores=opts.models, user=opts.user, weight=opts.weight, source=source, dialect=dialect,
        logit=logit, negative_rate=opts.negative_rate, negative_rate_column=opts.negative_rate_column),
        ids=(opts.user,))
    return cells, paired_sums_from_result({k: v[0] for k, v in got.items()}, len(opts.models)), fields


def _check_args(opts: CompareOptions) -> None:
    from calib_jax.logs.downsampling import check_rate_options
    from calib_jax.logs.gauc import check_gauc_weight

    if opts.score and opts.logit:
        raise ValueError("--score and --logit: give every model as probabilities (--score) or every model as "
                         "logits (--logit), not both")
    flag = "--logit" if opts.logit else "--score"
    check_engine_settings(opts, opts.engine)
    if len(opts.models) < 2:
        raise ValueError(f"{flag}: give two or more columns to compare, one per model (for one model: calib-jax "
                         "evaluate)")
    if len(set(opts.models)) != len(opts.models):
        raise ValueError(f"{flag}: a column is named twice ({', '.join(opts.models)})")
    if opts.label in opts.models or (opts.weight is not None and opts.weight in (opts.label, *opts.models)):
        raise ValueError(f"--label, {flag} and --weight must name different columns")
    if opts.negative_rate_column is not None and opts.negative_rate_column in (opts.label, *opts.models, opts.weight):
        raise ValueError(f"--negative-rate-column must name another column than --label, {flag} and --weight")
    if opts.user is not None and opts.user in (opts.label, *opts.models, opts.weight, opts.negative_rate_column):
        raise ValueError(f"--user must name another column than --label, {flag}, --weight and "
                         "--negative-rate-column")
    if opts.oracle is not None and opts.oracle in (opts.label, *opts.models, opts.weight, opts.negative_rate_column,
                                                   opts.user):
        raise ValueError(f"--oracle must name another column than --label, {flag}, --weight, --user and "
                         "--negative-rate-column")
    if len(set(opts.field)) != len(opts.field):
        raise ValueError(f"--field: a column is named twice ({', '.join(opts.field)})")
    taken = [opts.label, *opts.models, opts.weight, opts.negative_rate_column, opts.oracle]
    for f in opts.field:  # a level per click or per score value: the per-field tables of no question
        if f in taken:
            raise ValueError(f"--field must name another column than --label, {flag}, --weight, --oracle and "
                             f"--negative-rate-column (it names {f!r})")
    check_option_range("--max-levels", opts.max_levels, MAX_LEVELS_RANGE)
    check_gauc_weight(opts.gauc_weight)
    check_option_range("--bootstrap", opts.bootstrap, (0, BOOTSTRAP_MAX))
    if opts.bootstrap == 1:  # one replicate has no spread: evaluate and evaluate --by refuse it too
        raise ValueError("--bootstrap must be 0 (no intervals) or >= 2")
    check_rate_options(opts.negative_rate, opts.negative_rate_column)
    if not 2 <= opts.bins <= 1000 or not HIST_BINS_RANGE[0] <= opts.hist_bins <= HIST_BINS_RANGE[1]:
        raise ValueError("--bins must lie in [2, 1000] and --hist-bins in [16, 65536]")


def run_compare(opts: CompareOptions) -> dict[str, Any]:
    """``calib-jax compare``: joint cells by the engine, each model's panel and report, the
    paired differences and their verdicts; writes ``compare.{json,md,csv}``, with ``--field``
    ``fields.{csv,md}`` (each field's paired per-field metrics), the overlaid reliability diagram
    and one full report per model under ``models/`` (:func:`output_files`; the CSVs' text inert to
    spreadsheets, :func:`calib_jax.logs.common.write_csv`)."""
    from calib_jax import io as cio
    from calib_jax.logs.common import finite_or_none, out_dir, plain_figure_text, say, write_csv
    from calib_jax.logs.panel import compute_panel, interval
    from calib_jax.logs.report import build_report, write_outputs
    from calib_jax.logs.validate import check_weight_sum

    t0 = time.perf_counter()
    _check_args(opts)
    settings = Settings(n_boot=opts.bootstrap, seed=opts.seed, n_bins=opts.bins, hist_bins=opts.hist_bins,
                        scheme="cells", negative_rate=opts.negative_rate,
                        negative_rate_column=opts.negative_rate_column, oracle=opts.oracle is not None,
                        max_levels=opts.max_levels)
    out = out_dir(Path(opts.out))
    try:
        cells, user_sums, field_cells = (_cells_arrow(opts, settings) if opts.engine == "arrow"
                                         else _cells_sql(opts, settings))
    except ValueError as e:  # a --field column the log lacks: say which option named it
        missing = [f for f in opts.field if f"column {f!r} not found" in str(e)]
        if missing:
            raise ValueError(f"--field {missing[0]}: {e}") from None
        raise
    with np.errstate(over="ignore"):  # an overflowing total is what the check reports
        total = float(np.sum(cells.sums[0, :, 0]))  # every model's rows weigh the same
    check_weight_sum(total, source=str(opts.log), column=opts.weight, rows=cells.rows_used)
    accs = accumulators(cells, settings)
    panels = [compute_panel(a) for a in replicated_jointly(accs)]
    names = list(opts.models)
    diffs = paired_differences(panels, names)
    if user_sums is not None:  # GAUC: the delta method over users, paired (calib_jax.logs.paired_gauc)
        from calib_jax.logs.gauc import add_gauc
        from calib_jax.logs.paired_gauc import gauc_rows

        at = max((k + 1 for k, d in enumerate(diffs) if d["metric"] == "auc"), default=len(diffs))
        diffs[at:at] = gauc_rows(user_sums, names, opts.gauc_weight)
    per_model = {}
    for m, (name, panel) in enumerate(zip(names, panels, strict=True)):
        rep = build_report(panel)
        if user_sums is not None:
            add_gauc(rep, user_sums.model(m), opts.gauc_weight)
        rep["input"] = {"path": str(opts.log), ("logit" if opts.logit else "score"): name, "engine": opts.engine,
                        "oracle": opts.oracle,
                        "negative_rate": opts.negative_rate, "negative_rate_column": opts.negative_rate_column,
                        "rows_read": cells.rows_read, "rows_used": cells.rows_used,
                        "rows_dropped": cells.rows_read - cells.rows_used, "dropped": dict(cells.dropped)}
        rep["settings"] = settings.to_dict()
        with plain_figure_text():  # a column named 'a$x$' is drawn as written, not as mathtext
            write_outputs(_model_dir(out, m, name), rep)
        per_model[name] = {k: dict(zip(("value", "lo", "hi"), finite_or_none(interval(v)), strict=True))
                           for k, v in _directed(panel["metrics"]).items()}
        if user_sums is not None:
            g = rep["gauc"][opts.gauc_weight]
            per_model[name]["gauc"] = {"value": g["value"], "lo": g["lo"], "hi": g["hi"]}
    for d in diffs:  # an undefined metric (NE of a log with one class) is null in JSON, not NaN
        d.update(zip(("value_a", "value_b", "diff", "lo", "hi"),
                     finite_or_none([d["value_a"], d["value_b"], d["diff"], d["lo"], d["hi"]]), strict=True))
    per_field = _field_results(field_cells, names, opts) if field_cells is not None else None
    wall = time.perf_counter() - t0
    result = {
        "models": names, "engine": opts.engine, "joint_cells": int(cells.n.shape[0]),
        "input": {"path": str(opts.log), "label": opts.label, "weight": opts.weight,
                  "negative_rate": opts.negative_rate, "negative_rate_column": opts.negative_rate_column,
                  "models_are": "logits" if opts.logit else "probabilities",
                  "user": opts.user, "gauc_weight": opts.gauc_weight if opts.user is not None else None,
                  "oracle": opts.oracle,
                  **({"fields": list(opts.field), "max_levels": opts.max_levels} if opts.field else {}),
                  "rows_read": cells.rows_read,
                  "rows_used": cells.rows_used, "dropped": dict(cells.dropped)},
        "metrics": per_model, "differences": diffs,
        **({"fields": per_field} if per_field is not None else {}),
        "method": "paired Poisson bootstrap over joint cells (one count per cell shared by all models), "
                  f"B = {opts.bootstrap}, 95% percentile intervals"
                  + ("; GAUC: paired delta method over users" if user_sums is not None else "")
                  + ("; fields: paired Poisson bootstrap over each field's joint cells (level, every model's "
                     "coarse logit bin, label)" if per_field is not None else ""),
        "provenance": cio.provenance({"command": "compare", **settings.to_dict()}, seed=opts.seed,
                                     wall_time_s=wall),
    }
    json_path, md_path, csv_path, png_path = (out / f for f in COMPARE_FILES)
    cio.write_json(json_path, result, allow_nan=False)
    header = ["metric", "a", "b", "value_a", "value_b", "diff", "lo", "hi", "better"]
    write_csv(csv_path, header, [[d[k] for k in header] for d in diffs])
    cio.atomic_write_text(md_path, _markdown(result))
    with plain_figure_text():
        cio.atomic_write_bytes(png_path, _overlay_png(panels, names))
    if per_field is not None:
        fcsv, fmd = (out / f for f in FIELD_FILES)
        write_csv(fcsv, FIELD_COLUMNS, field_rows(result))
        cio.atomic_write_text(fmd, _fields_markdown(result))
    for d in diffs:
        if d["metric"] in ("ne", "ece", "abs_bias", "auc", "gauc", "brier"):
            say(f"  {d['verdict']}")
    for t in (per_field or {}).values():
        for d in t["differences"]:
            if d["metric"] in ("field_ece", "field_rce"):
                say(f"  {d['verdict']}")
    if per_field is not None:
        say(f"  per field: {out / FIELD_FILES[1]}  ({', '.join(opts.field)})")
    say(f"  comparison: {md_path}  ({cells.rows_used:,} rows, {result['joint_cells']:,} joint cells, "
         f"{wall:.1f} s)")
    return result



def _fmt(x: Any) -> str:
    return "" if x is None else f"{x:.5g}" if isinstance(x, float) else str(x)


def _markdown(result: Mapping[str, Any]) -> str:
    from calib_jax.logs.downsampling import rate_note
    from calib_jax.logs.report import md_cell

    names = result["models"]
    lines = ["# Model comparison", "", f"{md_cell(result['input']['path'])}: {result['input']['rows_used']:,} rows, "
             f"{result['joint_cells']:,} joint cells; {md_cell(result['method'])}.", ""]
    if result["input"].get("negative_rate") is not None or result["input"].get("negative_rate_column") is not None:
        lines += [rate_note(result["input"].get("negative_rate"), result["input"].get("negative_rate_column")), ""]
    lines += ["## Verdicts", ""]
    lines += [f"- {md_cell(d['verdict'])}" for d in result["differences"]]
    lines += ["", "## Each model", "", "| metric | " + " | ".join(md_cell(n) for n in names) + " |",
              "|---" * (len(names) + 1) + "|"]
    for metric in result["metrics"][names[0]]:
        cells = []
        for n in names:
            e = result["metrics"][n][metric]
            ci = f" [{_fmt(e['lo'])}, {_fmt(e['hi'])}]" if e["lo"] is not None else ""
            cells.append(f"{_fmt(e['value'])}{ci}")
        lines.append(f"| {metric} | " + " | ".join(cells) + " |")
    if result.get("fields"):
        lines += ["", "## Per field", "", "Each model's per-field metrics and their paired differences: "
                  "[fields.md](fields.md).", ""]
        lines += [f"- {md_cell(d['verdict'])}" for t in result["fields"].values() for d in t["differences"]
                  if d["metric"] in ("field_ece", "field_rce")]
    lines += ["", "![reliability](reliability_overlay.png)", ""]
    return "\n".join(lines)


def _overlay_png(panels: Sequence[Mapping[str, Any]], names: Sequence[str]) -> bytes:
    """Every model's reliability diagram (equal-mass bins of its own scores) on one plot."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.2, 4.6), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    top = 0.0
    for name, panel in zip(names, panels, strict=True):
        r = panel["reliability"]
        x, y = np.asarray(r["mean_p"])[0], np.asarray(r["ctr"])[0]
        ok = np.isfinite(x) & np.isfinite(y)
        ax.plot(x[ok], y[ok], marker="o", ms=3, label=name)
        top = max(top, float(np.max(x[ok], initial=0)), float(np.max(y[ok], initial=0)))
    top = top * 1.05 or 1.0
    ax.plot([0, top], [0, top], color="grey", lw=0.8, ls="--")
    ax.set_xlabel("mean score (equal-mass bins)")
    ax.set_ylabel("click rate")
    ax.legend(frameon=False)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()
