r"""Per-field metrics of several models on the same log, paired (``calib-jax compare --field COL``).

``evaluate --field F`` reports a model's metrics that are sums over the levels of a categorical
field F (the advertiser, the site): GCE, Field-ECE, Field-RCE and the weighted per-level
:math:`|\text{bias}|` (:func:`calib_jax.logs.panel.field_metrics`; Field-ECE and Field-RCE are
Pan et al., "Field-aware Calibration", WWW 2020, eqs. 5 and 6). ``evaluate`` bootstraps them from field
cells keyed by (level, coarse logit bin g, label) with the sums :math:`\sum v\,[1,\ p,\ p^2,\
\ell]` per cell, one ``Poisson(N_c)`` count per cell and replicate, each field drawing from its
own random stream (:mod:`calib_jax.logs.accumulate`).

Joint field cells. For M models the rows of a field are counted in cells keyed by (level,
every model's coarse logit bin :math:`g_1 .. g_M`, label), with each model's sums
:math:`\sum v\,[1,\ p_m,\ p_m^2,\ \ell_m]` (:class:`JointFieldCells`). Replicate b draws one
``Poisson(N_c)`` count per joint field cell (:func:`field_tables`), shared by every model, so
replicate b is the same resample of the field's rows for each model; model m's per-(level,
label) table of replicate b is the marginal of the scaled joint cells, and its metrics are
computed from it by the very function ``evaluate``'s panel uses. The difference A - B of a
metric gets the percentile interval of its B replicate differences and the comparison's verdict
(:func:`field_differences`, :func:`calib_jax.logs.common.difference_row`). A joint field cell
lies inside each model's own field cell, so the cell bootstrap's within-cell bound holds for
every model.

Decisions. The draws of field i (its place in ``--field``, from 0) use the stream ``1 + i`` of
the command's seed, as ``evaluate``'s field i does, so they are independent of the main joint
cells' draws (stream 0); the cells are drawn in the canonical order (level name, then
:math:`g_1 .. g_M`, then the label: :meth:`JointFieldCells.sorted`), which does not depend on the
engine or on the order rows are read. The levels are those ``evaluate`` keeps with the same
engine: DuckDB and Spark keep the ``max_levels`` levels with the most rows (ties by name; every
row read counts, as in ``evaluate``'s query) and sum the others into ``__other__``; the arrow
reader keeps the first ``max_levels`` values it meets
(:meth:`calib_jax.logs.accumulate.Accumulator.encode`). A missing value is the level
``__missing__``. The values reported are the plug-in estimates (what ``evaluate``'s report
gives as ``plug_in``; its ``value`` of a biased metric is bias-corrected), as the other
metrics of ``compare.json`` are; the intervals are percentile intervals, not bias-corrected:
with many small levels the plug-in Field-ECE can lie below its own interval (the bootstrap's
upward bias of a sum of absolute gaps; seen at 10^6 rows and 1,001 levels).

DuckDB and Spark compute the joint field cells of every field in one ``GROUP BY`` query
(:func:`calib_jax.logs.comparison.joint_field_cells_sql`, a second scan of the log: the main
joint cells do not hold the levels); the arrow engine counts them in NumPy while it streams
(:class:`FieldCellCounter`). Both read only the rows that are valid for every model, as the
main joint cells do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from calib_jax.logs.accumulate import FIELD_COLS, FIELD_STATS, Accumulator, Settings, cell_scales
from calib_jax.logs.panel import FIELD_METRICS, field_metrics, interval

__all__ = ["JointFieldCells", "FieldCellCounter", "joint_field_cells_from_result", "field_tables",
           "field_replicates", "field_differences", "FIELD_SUMS"]

#: the per-model sums of a joint field cell: v, v p, v p², v log loss
FIELD_SUMS = ("sv", "svp", "svpp", "snll")
#: replicates x cells held in memory at a time by :func:`field_tables`
_BLOCK_VALUES = 1 << 24


@dataclasses.dataclass(frozen=True)
class JointFieldCells:
    """The valid rows of a log counted in one field's joint cells of M models (module docstring).

    Attributes:
      field: the field's column.
      levels: the level names, in code order (sorted by name).
      level: (C,) each cell's level code.
      gb: (C, M) each model's coarse logit bin of the cell (64 bins on [-L, L]).
      y: (C,) the cell's label.
      n: (C,) rows in the cell.
      sums: (M, C, 4) each model's sums :data:`FIELD_SUMS` over the cell's rows.
    """

    field: str
    levels: tuple[str, ...]
    level: np.ndarray
    gb: np.ndarray
    y: np.ndarray
    n: np.ndarray
    sums: np.ndarray

    def sorted(self) -> JointFieldCells:
        """The cells in the canonical order (level name, each model's coarse bin, label): the order
        the bootstrap counts are drawn in, so every engine draws the same replicates.

        Returns:
          The same cells, reordered.

        Example:
          >>> import numpy as np
          >>> from calib_jax.logs.paired_fields import JointFieldCells
          >>> c = JointFieldCells("site", ("a", "b"), np.array([1, 0]), np.array([[3, 4], [5, 6]]),
          ...                     np.array([0, 1]), np.array([2.0, 1.0]), np.ones((2, 2, 4)))
          >>> c.sorted().level.tolist()
          [0, 1]
        """
        rank = np.empty(len(self.levels), np.int64)
        rank[sorted(range(len(self.levels)), key=self.levels.__getitem__)] = np.arange(len(self.levels))
        keys = [self.y] + [self.gb[:, m] for m in reversed(range(self.gb.shape[1]))] + [rank[self.level]]
        order = np.lexsort(keys)
        return dataclasses.replace(self, level=self.level[order], gb=self.gb[order], y=self.y[order],
                                   n=self.n[order], sums=self.sums[:, order])


def _unique_keys(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(key, axis=0, return_inverse=True)``, through one int64 per row when the
    columns' ranges fit in 62 bits."""
    if key.shape[0] == 0:
        return key.reshape(0, key.shape[1]), np.zeros(0, np.int64)
    hi = key.max(axis=0) + 1
    bits = np.ceil(np.log2(np.maximum(hi, 2))).astype(np.int64)
    if int(bits.sum()) > 62:
        uniq, inv = np.unique(key, axis=0, return_inverse=True)
        return uniq, inv.reshape(-1)
    shift = np.concatenate([np.cumsum(bits[::-1])[::-1][1:], [0]])
    packed = np.bitwise_or.reduce(key.astype(np.int64) << shift, axis=1)
    up, inv = np.unique(packed, return_inverse=True)
    return (up[:, None] >> shift) & ((np.int64(1) << bits) - 1), inv.reshape(-1)


def _aggregate(field: str, levels: Sequence[str], level: np.ndarray, gb: np.ndarray, y: np.ndarray, n: np.ndarray,
               sums: np.ndarray) -> JointFieldCells:
    """Add up the rows or partial cells of equal keys (level, g_1..g_M, y), re-code the levels by
    name (dropping none: a level may hold only invalid rows, as in ``evaluate``) and sort."""
    names = list(levels)
    by_name = sorted(range(len(names)), key=names.__getitem__)
    recode = np.empty(len(names), np.int64)
    recode[by_name] = np.arange(len(names))
    M = sums.shape[0]
    key = np.concatenate([recode[level][:, None] if len(names) else level[:, None].astype(np.int64),
                          gb.astype(np.int64), y.astype(np.int64)[:, None]], axis=1)
    uniq, inv = _unique_keys(key)
    C = uniq.shape[0]
    total = np.stack([np.stack([np.bincount(inv, weights=sums[m, :, j], minlength=C) for j in range(FIELD_STATS)],
                               axis=1) for m in range(M)]) if C else np.zeros((M, 0, FIELD_STATS))
    cells = JointFieldCells(field=field, levels=tuple(names[j] for j in by_name), level=uniq[:, 0],
                            gb=uniq[:, 1:1 + M], y=uniq[:, 1 + M], n=np.bincount(inv, weights=n, minlength=C),
                            sums=total)
    return cells.sorted()


class FieldCellCounter:
    """The arrow engine's joint field cells: counted chunk by chunk while the log streams, the
    levels kept as ``evaluate``'s streamed reader keeps them (its vocabulary code,
    :meth:`calib_jax.logs.accumulate.Accumulator.encode`: the first ``max_levels`` values met,
    every row read counting, later ones ``__other__``).

    Args:
      fields: the field columns.
      n_models: M.
      max_levels: levels kept per field before ``__other__``.

    Example:
      >>> import numpy as np, pyarrow as pa
      >>> from calib_jax.logs.paired_fields import FieldCellCounter
      >>> c = FieldCellCounter(["site"], 2, max_levels=10)
      >>> c.add({"site": pa.array(["a", "b", "a"])}, np.array([True, True, True]),
      ...       np.array([[30, 31], [33, 33], [30, 31]]), np.array([0, 1, 0]), np.ones((2, 3, 4)))
      >>> cells = c.cells()["site"]
      >>> cells.levels, cells.n.tolist()
      (('a', 'b'), [2.0, 1.0])
    """

    def __init__(self, fields: Sequence[str], n_models: int, *, max_levels: int = 1000) -> None:
        self.fields = tuple(fields)
        self.n_models = int(n_models)
        # evaluate's own level coding (no tables are filled: it only names the levels)
        self._vocab = Accumulator(Settings(fields=self.fields, max_levels=int(max_levels), n_boot=0, hist_bins=16))
        self._parts: dict[str, list[JointFieldCells]] = {f: [] for f in self.fields}

    def add(self, columns: Mapping[str, Any], keep: np.ndarray, gb: np.ndarray, y: np.ndarray,
            sums: np.ndarray) -> None:
        """Add one chunk.

        Args:
          columns: field -> the chunk's pyarrow string column, every row read (the invalid ones
            too: they name levels, as in ``evaluate``).
          keep: (n,) the rows valid for every model.
          gb: (k, M) each model's coarse logit bin of the k kept rows.
          y: (k,) their labels.
          sums: (M, k, 4) each model's :data:`FIELD_SUMS` of each kept row.

        Returns:
          None.
        """
        keep = np.asarray(keep, bool)
        for f in self.fields:
            codes = self._vocab.encode(f, columns[f])[keep]
            levels = list(self._vocab.vocab[f])
            self._parts[f].append(_aggregate(f, levels, codes, gb, y, np.ones(codes.shape[0]), sums))

    def cells(self) -> dict[str, JointFieldCells]:
        """Each field's joint cells over every chunk added (canonical order).

        Returns:
          field -> :class:`JointFieldCells`.
        """
        out = {}
        for f in self.fields:
            names = list(self._vocab.vocab[f])
            code = {name: i for i, name in enumerate(names)}
            parts = self._parts[f]
            level = np.concatenate([np.array([code[x] for x in p.levels], np.int64)[p.level] if p.levels
                                    else np.zeros(0, np.int64) for p in parts]) if parts else np.zeros(0, np.int64)
            gb = np.concatenate([p.gb for p in parts]) if parts else np.zeros((0, self.n_models), np.int64)
            y = np.concatenate([p.y for p in parts]) if parts else np.zeros(0, np.int64)
            n = np.concatenate([p.n for p in parts]) if parts else np.zeros(0)
            sums = np.concatenate([p.sums for p in parts], axis=1) if parts else np.zeros((self.n_models, 0,
                                                                                             FIELD_STATS))
            out[f] = _aggregate(f, names, level, gb, y, n, sums)
        return out


def joint_field_cells_from_result(rows: Mapping[str, Any], fields: Sequence[str], n_models: int) -> dict[
        str, JointFieldCells]:
    """Each field's :class:`JointFieldCells` from the result of
    :func:`calib_jax.logs.comparison.joint_field_cells_sql` (columns as arrays). Groups of invalid
    rows (``bad`` > 0; the main joint cells' query has refused or counted them) name levels but
    enter no cell.

    Args:
      rows: column name -> sequence: ``fid, level, bad, y, n, gb_m``, ``sv`` and per model m
        ``svp_m, svpp_m, snll_m``.
      fields: the field columns, in ``fid`` order.
      n_models: M.

    Returns:
      field -> :class:`JointFieldCells` (canonical order).

    Example:
      >>> from calib_jax.logs.paired_fields import joint_field_cells_from_result
      >>> r = {"fid": [0, 0], "level": ["b", "a"], "bad": [0, 0], "y": [1, 0], "n": [2, 3],
      ...      "gb_0": [40, 41], "gb_1": [40, 40], "sv": [2.0, 3.0],
      ...      **{f"{s}_{m}": [0.5, 0.6] for s in ("svp", "svpp", "snll") for m in range(2)}}
      >>> c = joint_field_cells_from_result(r, ["site"], 2)["site"]
      >>> c.levels, c.n.tolist(), c.sums[1, :, 0].tolist()
      (('a', 'b'), [3.0, 2.0], [3.0, 2.0])
    """
    fid = np.asarray(rows.get("fid", []), np.int64)
    level = np.asarray(["" if v is None else str(v) for v in rows.get("level", [])], dtype=object)
    bad = np.asarray(rows.get("bad", []), np.int64)
    n = np.asarray(rows.get("n", []), np.float64)
    y = np.asarray(rows.get("y", []), np.int64)
    gb = np.stack([np.asarray(rows.get(f"gb_{m}", []), np.int64) for m in range(n_models)], axis=1) \
        if len(fid) else np.zeros((0, n_models), np.int64)
    sv = np.asarray(rows.get("sv", []), np.float64)
    out = {}
    for i, f in enumerate(fields):
        sel = fid == i
        names, codes = np.unique(level[sel], return_inverse=True) if sel.any() else (np.zeros(0, object),
                                                                                   np.zeros(0, np.int64))
        ok = bad[sel] == 0
        sums = np.stack([np.stack([sv[sel][ok], *(np.asarray(rows[f"{s}_{m}"], np.float64)[sel][ok]
                                                  for s in FIELD_SUMS[1:])], axis=1) for m in range(n_models)]) \
            if ok.any() else np.zeros((n_models, 0, FIELD_STATS))
        out[f] = _aggregate(f, [str(x) for x in names], codes.reshape(-1)[ok], gb[sel][ok], y[sel][ok], n[sel][ok],
                            sums)
    return out


def field_tables(cells: JointFieldCells, *, n_boot: int, seed: int, stream: int) -> np.ndarray:
    r"""Each model's per-(level, label) table of every replicate: replicate 0 the log, replicates
    1..B the joint field cells scaled by one shared ``Poisson(N_c) / N_c`` per cell,

    .. math:: T^{(b)}_{m,k,y,s} = \sum_{c:\ \mathrm{level}_c = k,\ y_c = y} \frac{K_{bc}}{N_c}\,S_{m,c,s},
              \qquad K_{bc} \sim \mathrm{Poisson}(N_c),

    drawn by :func:`calib_jax.logs.accumulate.cell_scales` in the cells' canonical order.

    Args:
      cells: one field's joint cells (canonical order).
      n_boot: B, the replicates beyond the log (0: the log alone).
      seed: the bootstrap seed.
      stream: the field's stream, 1 + its index in ``--field``.

    Returns:
      (M, B + 1, K * 2 * 4) float64: the layout of an accumulator's field table
      (:data:`~calib_jax.logs.accumulate.FIELD_COLS` per level, K = ``len(cells.levels)``).

    Example:
      >>> import numpy as np
      >>> from calib_jax.logs.paired_fields import JointFieldCells
      >>> c = JointFieldCells("site", ("a",), np.array([0, 0]), np.array([[30, 30], [31, 35]]),
      ...                     np.array([0, 1]), np.array([3.0, 1.0]), np.arange(16.0).reshape(2, 2, 4))
      >>> from calib_jax.logs.paired_fields import field_tables
      >>> t = field_tables(c, n_boot=5, seed=0, stream=1)
      >>> t.shape, t[1, 0].tolist()
      ((2, 6, 8), [8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0])
    """
    M, C, _ = cells.sums.shape
    K = len(cells.levels)
    R = int(n_boot) + 1
    out = np.zeros((M, R, K * FIELD_COLS))
    if C == 0:
        return out
    from scipy import sparse

    col = (cells.level * 2 + cells.y)[:, None] * FIELD_STATS + np.arange(FIELD_STATS)
    mats = [sparse.csr_matrix((cells.sums[m].ravel(), col.ravel(), np.arange(0, C * FIELD_STATS + 1, FIELD_STATS)),
                              shape=(C, K * FIELD_COLS)) for m in range(M)]
    step = max(1, _BLOCK_VALUES // C)
    for lo in range(0, R, step):
        hi = min(R, lo + step)
        W = cell_scales(seed, cells.n, lo, hi, stream=stream)
        for m in range(M):
            out[m, lo:hi] = np.asarray((mats[m].T @ W.T).T)
    return out


def field_replicates(cells: JointFieldCells, *, n_boot: int, seed: int, stream: int) -> list[dict[str, np.ndarray]]:
    """Each model's per-field metrics of every replicate (:func:`field_tables`, then
    :func:`calib_jax.logs.panel.field_metrics`, as ``evaluate``'s panel computes them).

    Args:
      cells, n_boot, seed, stream: as :func:`field_tables` takes them.

    Returns:
      One dict per model: metric (:data:`~calib_jax.logs.panel.FIELD_METRICS`) -> (B + 1,) values,
      replicate 0 the log's.

    Example:
      >>> import numpy as np
      >>> from calib_jax.logs.paired_fields import JointFieldCells
      >>> c = JointFieldCells("site", ("a",), np.array([0, 0]), np.array([[30, 30], [31, 35]]),
      ...                     np.array([0, 1]), np.array([3.0, 1.0]),
      ...                     np.array([[[3, .3, .03, 0], [1, .1, .01, 0]], [[3, .6, .12, 0], [1, .2, .04, 0]]]))
      >>> from calib_jax.logs.paired_fields import field_replicates
      >>> [round(float(r["field_ece"][0]), 3) for r in field_replicates(c, n_boot=0, seed=0, stream=1)]
      [0.15, 0.05]
    """
    tables = field_tables(cells, n_boot=n_boot, seed=seed, stream=stream)
    return [field_metrics(t, len(cells.levels)) for t in tables]


def field_differences(replicates: Sequence[Mapping[str, np.ndarray]], names: Sequence[str], field: str, *,
                      level: float = 0.95) -> tuple[dict[str, dict[str, dict[str, Any]]], list[dict[str, Any]]]:
    r"""Each model's per-field values with intervals, and every paired difference A - B with its
    interval and verdict (lower is better for every field metric):

    .. math:: \hat\theta_A - \hat\theta_B,\quad
              \big[q_{\alpha/2},\ q_{1-\alpha/2}\big]\big(\theta_A^{*b} - \theta_B^{*b}\big)_{b=1..B}

    Args:
      replicates: per model, :func:`field_replicates`' dict (the same resamples for every model).
      names: the models' names.
      field: the field's column (the rows' ``field``; the verdicts name ``metric:field``).
      level: interval level.

    Returns:
      ``(values, rows)``: ``values[model][metric]`` = ``{"value", "lo", "hi"}`` (the plug-in and
      its percentile interval, ``None`` where undefined), and one row per (metric, A, B) with A
      before B in ``names``: ``field, metric, a, b, value_a, value_b, diff, lo, hi, better,
      verdict`` (:func:`calib_jax.logs.common.difference_row`).

    Example:
      >>> import numpy as np
      >>> from calib_jax.logs.paired_fields import field_differences
      >>> r = lambda x: {"field_ece": np.array(x)}
      >>> _, rows = field_differences([r([.01, .01, .012]), r([.03, .031, .029])], ["new", "prod"], "site")
      >>> rows[0]["metric"], rows[0]["better"], round(rows[0]["diff"], 3)
      ('field_ece', 'new', -0.02)
    """
    from calib_jax.logs.common import difference_row, finite_or_none

    if len(replicates) != len(names) or len(names) < 2:
        raise ValueError("`replicates` and `names` must list the same two or more models")
    metrics = [k for k in FIELD_METRICS if k in replicates[0]] + [k for k in replicates[0] if k not in FIELD_METRICS]
    values = {name: {k: dict(zip(("value", "lo", "hi"), finite_or_none(interval(r[k], level)), strict=True))
                     for k in metrics} for name, r in zip(names, replicates, strict=True)}
    rows = []
    for k in metrics:
        for i in range(len(names)):
            for j in range(i + 1, len(names)):
                a, b = np.asarray(replicates[i][k], np.float64), np.asarray(replicates[j][k], np.float64)
                diff, lo, hi = interval(a - b, level)
                d = difference_row(f"{k}:{field}", names[i], names[j], float(a[0]), float(b[0]), diff, lo, hi,
                                   lower=True, undefined="undefined for one of the models",
                                   no_interval="run with --bootstrap B")
                d.update(zip(("value_a", "value_b", "diff", "lo", "hi"),
                             finite_or_none([d["value_a"], d["value_b"], d["diff"], d["lo"], d["hi"]]), strict=True))
                rows.append({"field": field, **d, "metric": k})
    return values, rows
