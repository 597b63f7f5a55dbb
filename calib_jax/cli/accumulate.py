r"""Mergeable streaming statistics behind ``calib-jax evaluate`` (flat memory, resumable).

A log is read in chunks; each chunk adds its sufficient statistics (SPEC §3) to fixed-size
tables, so memory does not grow with the number of rows and two accumulators of disjoint
parts of a log add up (:meth:`Accumulator.merge`) to the accumulator of the whole.

Tables (all float64, one row per *replicate*, see below):

* ``scal`` — sums :math:`\sum v\,[1,\ y,\ p,\ (y-p)^2,\ \ell_{\rm NLL},\ |y-p|]` and, with
  an oracle CTR :math:`\pi`, :math:`\sum v\,[(\pi-p)^2,\ |\pi-p|,\ \mathrm{KL}(\pi\|p),\
  \pi,\ \pi^2,\ p^2,\ p\pi]`; plus the running :math:`\max|\pi - p|`.
* ``rel`` — the M equal-width probability bins :math:`[m/M,(m+1)/M)` (SPEC §2) split by
  label: :math:`\sum v\,[1,\ p,\ p^2]` per (bin, label).  ECE, MCE and the binned Brier
  grouping are *exact* functions of it.
* ``hist`` — a fine fixed grid of H equal-width logit bins on :math:`[-L, L]` (logits
  outside are clipped into the end bins) split by label: :math:`\sum v\,[1,\ p,\ p^2,\ o]`.
  The sort-based quantities are computed from it with a stated error:
  AUC counts pairs inside one fine bin as half-concordant, so
  :math:`|\widehat{\rm AUC} - {\rm AUC}| \le \frac{1}{2}\sum_h V^+_h V^-_h / (V^+V^-)`
  (reported as ``auc_bound``); ECE⁺ (equal-mass bins) and the LCCE clusters
  (deterministic 1-D k-means, ``init="quantile"``, on the histogram, as
  :func:`calib_jax.metrics.lcce` does in memory) place their boundaries on fine-bin edges
  (one bin = 2L/H logits, 0.0078 by default); CORP's isotonic fit is constant on fine bins
  and Murphy's partition is the fine bins (its Δ is reported, not dropped).
* ``fld[f]`` — per level of each categorical field f, split by label:
  :math:`\sum v\,[1,\ p,\ p^2]`.  A field keeps its first ``max_levels`` distinct values;
  later new values share the level ``__other__``; missing values are the level
  ``__missing__``.

Bootstrap.  Replicate 0 is the log itself; replicates 1..B reweight row i by a Poisson(1)
count drawn by :func:`calib_jax.bootstrap.resample_counts` from ``(seed, b, i)`` alone
(counter-based, ``scheme="poisson"``), so the streamed replicates are exactly those of an
in-memory :func:`calib_jax.bootstrap.bootstrap` with ``scheme="poisson"``, whatever the
chunking.  With ``block > 1`` consecutive rows form blocks that share one count (a block
bootstrap for logs whose neighbouring rows are dependent, and B/``block`` times fewer draws).
Row indices count every row read, dropped ones included, so dropping never shifts counts.
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy import sparse

__all__ = ["Settings", "Chunk", "Accumulator", "SCALARS", "ORACLE_SCALARS", "OTHER", "MISSING"]

SCALARS = ("w", "wy", "wp", "brier", "nll", "mae")
ORACLE_SCALARS = ("oracle_brier", "oracle_mae", "oracle_kl", "wpi", "wpipi", "wpp", "wppi")
OTHER = "__other__"
MISSING = "__missing__"
_EPS = 1e-12  # probability clip of the log loss and KL (float64, as calib_jax.metrics.nll)


@dataclasses.dataclass(frozen=True)
class Settings:
    """What an accumulator collects; fixed for a run (part of the checkpoint fingerprint).

    Attributes:
      fields: categorical columns with per-level tables.
      oracle: whether an oracle-CTR column is accumulated.
      n_boot: bootstrap replicates B (0: no intervals).
      block: rows per bootstrap block (1: row bootstrap).
      seed: bootstrap seed.
      n_bins: equal-width probability bins M of ECE/MCE (and equal-mass bins of ECE⁺).
      hist_bins, logit_range: the fine logit grid H on [-L, L].
      max_levels: distinct values kept per field before ``__other__``.
      n_clusters: LCCE clusters.
    """

    fields: tuple[str, ...] = ()
    oracle: bool = False
    n_boot: int = 100
    block: int = 1
    seed: int = 0
    n_bins: int = 15
    hist_bins: int = 4096
    logit_range: float = 16.0
    max_levels: int = 1000
    n_clusters: int = 4

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["fields"] = list(self.fields)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Settings:
        return cls(**{**d, "fields": tuple(d.get("fields", ()))})


@dataclasses.dataclass
class Chunk:
    """One validated chunk: ``keep`` marks the rows that enter the statistics."""

    p: np.ndarray  # (n,) probabilities (0 on dropped rows)
    o: np.ndarray  # (n,) logits (0 on dropped rows)
    y: np.ndarray  # (n,) 0/1
    v: np.ndarray  # (n,) weights (0 on dropped rows)
    keep: np.ndarray  # (n,) bool
    fields: dict[str, Any]  # name -> pyarrow string array
    oracle: np.ndarray | None = None
    nll: np.ndarray | None = None  # exact per-row log loss when logits were given

    @property
    def n(self) -> int:
        return int(self.p.shape[0])


def _scatter(cw: np.ndarray, idx: np.ndarray, x: np.ndarray, n_cells: int) -> np.ndarray:
    """``out[r, c*S + s] = sum_i cw[r, i] [idx_i = c] x[i, s]`` as one sparse product."""
    n, s = x.shape
    cols = (idx.astype(np.int64)[:, None] * s + np.arange(s)).ravel()
    m = sparse.csr_matrix((x.ravel(), cols, np.arange(0, n * s + 1, s)), shape=(n, n_cells * s))
    return np.asarray((m.T @ cw.T).T)


class Accumulator:
    """The streamed statistics of one log (see the module docstring)."""

    def __init__(self, settings: Settings, *, row_offset: int = 0):
        self.settings = settings
        s = settings
        self.R = s.n_boot + 1
        self.n_scal = len(SCALARS) + (len(ORACLE_SCALARS) if s.oracle else 0)
        self.scal = np.zeros((self.R, self.n_scal))
        self.rel = np.zeros((self.R, s.n_bins * 2 * 3))
        self.hist = np.zeros((self.R, s.hist_bins * 2 * 4))
        self.oracle_max = np.zeros(self.R)
        self.fld: dict[str, np.ndarray] = {f: np.zeros((self.R, 0)) for f in s.fields}
        self.vocab: dict[str, dict[str, int]] = {f: {} for f in s.fields}
        self.row_offset = int(row_offset)  # global index of the first row of this accumulator
        self.rows_read = 0  # rows seen (dropped ones included)
        self.rows_used = 0
        self.chunks = 0
        self.dropped: dict[str, int] = {}

    # ------------------------------------------------------------------ bootstrap counts
    def counts(self, n: int) -> np.ndarray:
        """(R, n) float64 replicate weights of the next ``n`` rows (row 0: ones)."""
        c = np.ones((self.R, n))
        s = self.settings
        if s.n_boot == 0 or n == 0:
            return c
        import jax

        from calib_jax.bootstrap import resample_counts

        key = jax.random.key(s.seed)
        start = self.row_offset + self.rows_read
        if s.block == 1:
            c[1:] = np.asarray(resample_counts(key, n, s.n_boot, scheme="poisson", row_offset=start))
        else:
            blk = np.arange(start, start + n) // s.block
            first = int(blk[0])
            units = np.asarray(resample_counts(key, int(blk[-1]) - first + 1, s.n_boot, scheme="poisson",
                                               row_offset=first))
            c[1:] = units[:, blk - first]
        return c

    # ------------------------------------------------------------------ fields
    def _level(self, f: str, value: str) -> int:
        voc = self.vocab[f]
        code = voc.get(value)
        if code is None:
            if len(voc) >= self.settings.max_levels and value != OTHER:
                return self._level(f, OTHER)
            code = voc[value] = len(voc)
        return code

    def encode(self, f: str, arr: Any) -> np.ndarray:
        """Integer level codes of a pyarrow string array (vocabulary grows as values appear)."""
        import pyarrow.compute as pc

        enc = pc.dictionary_encode(arr.fill_null(MISSING) if arr.null_count else arr)
        if hasattr(enc, "combine_chunks"):
            enc = enc.combine_chunks()
        uniq = enc.dictionary.to_pylist()
        lut = np.array([self._level(f, str(u)) for u in uniq], np.int64)
        idx = np.asarray(enc.indices.to_numpy(zero_copy_only=False), np.int64)
        return lut[idx] if lut.size else np.zeros(0, np.int64)

    def _grow(self, f: str) -> None:
        need = (len(self.vocab[f]) + 16) * 6
        if self.fld[f].shape[1] < len(self.vocab[f]) * 6:
            self.fld[f] = np.pad(self.fld[f], ((0, 0), (0, need - self.fld[f].shape[1])))

    # ------------------------------------------------------------------ update
    def update(self, ch: Chunk) -> None:
        """Add one chunk (rows ``rows_read .. rows_read + n`` of the log)."""
        s = self.settings
        n = ch.n
        cw = self.counts(n) * np.where(ch.keep, ch.v, 0.0)[None, :]
        p, y, o = ch.p, ch.y, ch.o
        pc = np.clip(p, _EPS, 1.0 - _EPS)
        nll = ch.nll if ch.nll is not None else -(y * np.log(pc) + (1.0 - y) * np.log1p(-pc))
        cols = [np.ones(n), y, p, (y - p) ** 2, nll, np.abs(y - p)]
        if s.oracle:
            pi = ch.oracle if ch.oracle is not None else np.zeros(n)
            pic = np.clip(pi, 0.0, 1.0)
            kl = (_xlogy(pic, pic) - pic * np.log(pc) + _xlogy(1 - pic, 1 - pic) - (1 - pic) * np.log1p(-pc))
            cols += [(pi - p) ** 2, np.abs(pi - p), kl, pi, pi * pi, p * p, p * pi]
            gap = np.where(ch.keep, np.abs(pi - p), 0.0)
            self.oracle_max = np.maximum(self.oracle_max, np.max(np.where(cw > 0, gap[None, :], 0.0), axis=1))
        x = np.where(ch.keep[:, None], np.stack(cols, axis=1), 0.0)
        self.scal += _scatter(cw, np.zeros(n, np.int64), x, 1)
        yi = y.astype(np.int64)
        rb = np.clip(np.floor(p * s.n_bins), 0, s.n_bins - 1).astype(np.int64)
        pp = np.stack([np.ones(n), p, p * p], axis=1)
        self.rel += _scatter(cw, rb * 2 + yi, pp, 2 * s.n_bins)
        oc = np.clip(o, -s.logit_range, s.logit_range)
        hb = np.clip(np.floor((oc + s.logit_range) / (2 * s.logit_range) * s.hist_bins), 0,
                     s.hist_bins - 1).astype(np.int64)
        self.hist += _scatter(cw, hb * 2 + yi, np.concatenate([pp, oc[:, None]], axis=1),
                              2 * s.hist_bins)
        for f in s.fields:
            codes = self.encode(f, ch.fields[f])
            self._grow(f)
            cap = self.fld[f].shape[1] // 6
            self.fld[f] += _scatter(cw, codes * 2 + yi, pp, 2 * cap)
        self.rows_read += n
        self.rows_used += int(np.sum(ch.keep))
        self.chunks += 1

    # ------------------------------------------------------------------ merge
    def merge(self, other: Accumulator) -> Accumulator:
        """Add the statistics of ``other`` (disjoint rows, same settings) into ``self``."""
        if other.settings != self.settings:
            raise ValueError("cannot merge accumulators with different settings")
        self.scal += other.scal
        self.rel += other.rel
        self.hist += other.hist
        self.oracle_max = np.maximum(self.oracle_max, other.oracle_max)
        for f in self.settings.fields:
            src = other.fld[f].reshape(self.R, -1, 6)
            for value, code in other.vocab[f].items():
                mine = self._level(f, value)
                self._grow(f)
                dst = self.fld[f].reshape(self.R, -1, 6)
                dst[:, mine] += src[:, code]
        self.rows_read += other.rows_read
        self.rows_used += other.rows_used
        self.chunks += other.chunks
        for k, c in other.dropped.items():
            self.dropped[k] = self.dropped.get(k, 0) + c
        return self

    # ------------------------------------------------------------------ checkpoint
    def to_bytes(self, meta: Mapping[str, Any]) -> bytes:
        """An ``.npz`` image of the state (tables + JSON metadata) for an atomic checkpoint."""
        info = {"settings": self.settings.to_dict(), "vocab": {f: list(v) for f, v in self.vocab.items()},
                "row_offset": self.row_offset, "rows_read": self.rows_read, "rows_used": self.rows_used,
                "chunks": self.chunks, "dropped": self.dropped, "meta": dict(meta), "version": 1}
        arrays = {"scal": self.scal, "rel": self.rel, "hist": self.hist, "oracle_max": self.oracle_max,
                  **{f"fld__{i}": self.fld[f] for i, f in enumerate(self.settings.fields)}}
        buf = io.BytesIO()
        np.savez(buf, info=np.array(json.dumps(info)), **arrays)  # type: ignore[arg-type]
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> tuple[Accumulator, dict[str, Any]]:
        """Inverse of :meth:`to_bytes`: ``(accumulator, meta)``."""
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            info = json.loads(str(z["info"]))
            acc = cls(Settings.from_dict(info["settings"]), row_offset=info["row_offset"])
            acc.scal, acc.rel, acc.hist, acc.oracle_max = z["scal"], z["rel"], z["hist"], z["oracle_max"]
            for i, f in enumerate(acc.settings.fields):
                acc.fld[f] = z[f"fld__{i}"]
        acc.vocab = {f: {v: k for k, v in enumerate(vals)} for f, vals in info["vocab"].items()}
        acc.rows_read, acc.rows_used, acc.chunks = info["rows_read"], info["rows_used"], info["chunks"]
        acc.dropped = dict(info["dropped"])
        return acc, info["meta"]

    def levels(self, f: str) -> list[str]:
        """The level names of field ``f`` in code order."""
        return list(self.vocab[f])


def _xlogy(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(a > 0, a * np.log(np.where(a > 0, b, 1.0)), 0.0)

