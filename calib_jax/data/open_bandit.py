"""Loader for the Open Bandit Dataset sample (Saito et al., ZOZOTOWN fashion e-commerce).

The shipped sample lives at ``<root>/{random,bts}/{men,women}/{men,women}.csv`` with an
``item_context.csv`` next to each log.  ``<root>`` is, in order of precedence, the
``path`` argument, the environment variable ``CALIB_JAX_OBD_PATH``, or
``<repo>/../shared/data/open_bandit``.

These are real logs without an oracle CTR: only label-based metrics apply.  The loader
uses the standard library ``csv`` module and NumPy only, and checks every file: a
missing file raises ``FileNotFoundError`` naming it; a missing column, a short row, a
non-numeric value, a click outside {0, 1}, a propensity outside (0, 1] or an item id
absent from the item context raises ``ValueError`` naming the file, the line and the
problem.

Conventions: positions are converted from the file's 1-based slots to 0-based ids;
hashed categorical features become integer codes (index in the sorted list of distinct
hashes of the loaded rows; the vocabularies are returned).
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from calib_jax._src.text_input import read_utf8

__all__ = [
    "OpenBanditData",
    "default_path",
    "load_open_bandit",
    "FIELD_NAMES",
    "backbone_config",
    "load_or_train_open_bandit",
]

_POLICIES = ("random", "bts")
_CAMPAIGNS = ("men", "women")
_N_USER_FEATURES = 4
_N_ITEM_CAT = 3

#: Names of the columns of :meth:`OpenBanditData.fields`.
FIELD_NAMES: tuple[str, ...] = ("item_id", "position", "user_feature_0", "user_feature_1",
                                "user_feature_2", "user_feature_3")


class _OpenBanditDataFields(NamedTuple):
    """The fields of :class:`OpenBanditData` (see there)."""

    item_id: np.ndarray
    position: np.ndarray
    click: np.ndarray
    propensity: np.ndarray
    user_features: np.ndarray
    affinity: np.ndarray
    policy: np.ndarray
    timestamp: np.ndarray
    item_numeric: np.ndarray
    item_categorical: np.ndarray
    user_vocab: tuple[tuple[str, ...], ...]
    item_vocab: tuple[tuple[str, ...], ...]
    files: tuple[str, ...]

    @property
    def n_items(self) -> int:
        return int(self.item_numeric.shape[0])

    def fields(self) -> np.ndarray:
        """(n, 6) int32: item_id, position, user_feature_0..3 (see :data:`FIELD_NAMES`)."""
        return np.concatenate([self.item_id[:, None], self.position[:, None],
                               self.user_features], axis=1).astype(np.int32)

    def cardinalities(self) -> dict[str, int]:
        out = {"item_id": self.n_items, "position": int(self.position.max()) + 1}
        for j, vocab in enumerate(self.user_vocab):
            out[f"user_feature_{j}"] = len(vocab)
        return out


class OpenBanditData(_OpenBanditDataFields):
    """One or more Open Bandit logs of a campaign, as arrays.

    Attributes:
      item_id: (n,) int32 item shown.  position: (n,) int32 slot, 0-based.
      click: (n,) int8.  propensity: (n,) float64 logging-policy propensity.
      user_features: (n, 4) int32 codes of the hashed user features.
      affinity: (n, n_items) float32 user-item affinity features.
      policy: (n,) int8, 0 = random, 1 = Bernoulli Thompson Sampling (bts).
      timestamp: (n,) str timestamps (rows are in file order).
      item_numeric: (n_items,) float64 ``item_feature_0``.
      item_categorical: (n_items, 3) int32 codes of ``item_feature_1..3``.
      user_vocab, item_vocab: tuples of the sorted hash strings behind the codes.
      files: the files read.
    """

    __slots__ = ()

    def __len__(self) -> int:
        return int(self.click.shape[0])

    def _replace(self, **changes: Any) -> OpenBanditData:
        """A copy with some fields replaced (``len`` counts rows, so not tuple._make)."""
        return type(self)(**{**self._asdict(), **changes})


def default_path() -> Path:
    """``$CALIB_JAX_OBD_PATH`` or ``<repo>/../shared/data/open_bandit``.

    The dataset root :func:`load_open_bandit` reads when given no ``path``. Host code; the
    directory need not exist.

    Returns:
      A :class:`pathlib.Path` (``<repo>`` is the directory above the ``calib_jax`` package).

    Example:
      >>> import os
      >>> from unittest import mock
      >>> from calib_jax.data.open_bandit import default_path
      >>> with mock.patch.dict(os.environ, {"CALIB_JAX_OBD_PATH": "/data/obd"}):
      ...     print(default_path().as_posix())
      /data/obd
      >>> with mock.patch.dict(os.environ, {"CALIB_JAX_OBD_PATH": ""}):  # unset or empty
      ...     default_path().parts[-3:]
      ('shared', 'data', 'open_bandit')
    """
    env = os.environ.get("CALIB_JAX_OBD_PATH")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2].parent / "shared" / "data" / "open_bandit"


def _read_csv(path: Path, required: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    if not path.is_file():
        raise FileNotFoundError(f"Open Bandit file not found: {path}")
    with io.StringIO(read_utf8(path), newline="") as fh:
        reader = csv.reader(fh)
        try:
            header = next(reader)
        except StopIteration:
            raise ValueError(f"{path}: the file is empty (no header line)") from None
        missing = [c for c in required if c not in header]
        if missing:
            raise ValueError(f"{path}: missing column(s) {missing} in the header")
        twice = sorted({c for c in required if header.count(c) > 1})
        if twice:  # the first of them was read, silently
            raise ValueError(f"{path}: column(s) {twice} appear more than once in the header")
        rows = []
        for line_no, row in enumerate(reader, start=2):
            if not row:
                continue
            if len(row) != len(header):
                raise ValueError(
                    f"{path}: line {line_no} has {len(row)} fields, expected {len(header)}")
            rows.append(row)
    if not rows:
        raise ValueError(f"{path}: no data rows")
    return header, rows


def _numeric(path: Path, header: list[str], rows: list[list[str]], col: str,
             dtype: Any) -> np.ndarray:
    j = header.index(col)
    out = np.empty(len(rows), dtype=dtype)
    for i, row in enumerate(rows):
        try:
            v = float(row[j])
        except ValueError:
            raise ValueError(
                f"{path}: line {i + 2}, column {col!r}: not a number: {row[j]!r}") from None
        if not np.isfinite(v):
            raise ValueError(f"{path}: line {i + 2}, column {col!r}: non-finite value {row[j]!r}")
        if np.issubdtype(dtype, np.integer) and v != int(v):
            raise ValueError(f"{path}: line {i + 2}, column {col!r}: not an integer: {row[j]!r}")
        info = np.iinfo(dtype) if np.issubdtype(dtype, np.integer) else np.finfo(dtype)
        if not float(info.min) <= v <= float(info.max):  # 2**40 wrapped to -1 in int32, 1e300 became inf in float32
            raise ValueError(f"{path}: line {i + 2}, column {col!r}: {row[j]!r} is beyond the {np.dtype(dtype).name} "
                             "range")
        out[i] = v
    return out


def _codes(values: list[str]) -> tuple[np.ndarray, tuple[str, ...]]:
    vocab = tuple(sorted(set(values)))
    index = {v: i for i, v in enumerate(vocab)}
    return np.fromiter((index[v] for v in values), np.int32, count=len(values)), vocab


def _check_choice(value: str, name: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {choices}, got {value!r}")


def load_open_bandit(path: str | os.PathLike[str] | None = None, *,
                     policy: str = "random", campaign: str = "men") -> OpenBanditData:
    """Load the Open Bandit sample of one or both campaigns under one or both logging policies.

    Args:
      path: dataset root (see the module docstring for the default).
      policy: ``"random"``, ``"bts"`` or ``"all"`` (both logs, concatenated in that order,
        with the ``policy`` column telling them apart).
      campaign: ``"men"``, ``"women"`` or ``"all"``: both campaigns (the whole 40,000-row
        sample with ``policy="all"``); the women's item ids follow the men's, each row's
        affinities sit in its campaign's block of columns (zeros elsewhere), the hashed
        features are coded over both campaigns, and the rows are sorted by timestamp so a
        chronological split sees both campaigns.

    Reads CSV files with the standard library on the host (not jit-able); each log of the
    sample has 10,000 rows, and the men's campaign has 34 items, the women's 46.

    Returns:
      :class:`OpenBanditData` (see there for the arrays). A bad ``policy`` or ``campaign``
      raises ``ValueError``; a missing directory or file ``FileNotFoundError``; a malformed
      file ``ValueError`` naming the file and line (see the module docstring).

    Example:
      >>> import tempfile
      >>> from calib_jax.data.open_bandit import load_open_bandit
      >>> load_open_bandit(policy="greedy")
      Traceback (most recent call last):
        ...
      ValueError: `policy` must be one of ('random', 'bts', 'all'), got 'greedy'
      >>> with tempfile.TemporaryDirectory() as d:  # an empty directory has no logs
      ...     load_open_bandit(d)
      Traceback (most recent call last):
        ...
      FileNotFoundError: Open Bandit file not found: .../random/men/item_context.csv

      With the sample at :func:`default_path` (not shipped with the package, so not run here):

      >>> data = load_open_bandit(policy="random", campaign="men")  # doctest: +SKIP
      >>> len(data), data.fields().shape, data.affinity.shape  # doctest: +SKIP
      (10000, (10000, 6), (10000, 34))
    """
    _check_choice(policy, "policy", (*_POLICIES, "all"))
    _check_choice(campaign, "campaign", (*_CAMPAIGNS, "all"))
    if campaign == "all":
        return _combine_campaigns([load_open_bandit(path, policy=policy, campaign=c) for c in _CAMPAIGNS])
    root = Path(path) if path is not None else default_path()
    if not root.is_dir():
        raise FileNotFoundError(
            f"Open Bandit directory not found: {root} (pass `path` or set CALIB_JAX_OBD_PATH)")
    policies = _POLICIES if policy == "all" else (policy,)
    ctx_path = root / policies[0] / campaign / "item_context.csv"
    ctx_cols = ["item_id", "item_feature_0"] + [f"item_feature_{k}" for k in range(1, 4)]
    ch, crows = _read_csv(ctx_path, ctx_cols)
    item_ids = _numeric(ctx_path, ch, crows, "item_id", np.int64)
    n_items = item_ids.size
    if not np.array_equal(np.sort(item_ids), np.arange(n_items)):
        raise ValueError(f"{ctx_path}: item_id must enumerate 0..{n_items - 1} exactly once")
    order = np.argsort(item_ids)
    item_numeric = _numeric(ctx_path, ch, crows, "item_feature_0", np.float64)[order]
    item_cat, item_vocab = [], []
    for k in range(1, _N_ITEM_CAT + 1):
        j = ch.index(f"item_feature_{k}")
        codes, vocab = _codes([r[j] for r in crows])
        item_cat.append(codes[order])
        item_vocab.append(vocab)

    log_cols = (["timestamp", "item_id", "position", "click", "propensity_score"]
                + [f"user_feature_{k}" for k in range(_N_USER_FEATURES)]
                + [f"user-item_affinity_{k}" for k in range(n_items)])
    parts: dict[str, list[np.ndarray]] = {k: [] for k in
                                           ("item", "pos", "click", "prop", "aff", "pol", "ts")}
    raw_user: list[list[str]] = [[] for _ in range(_N_USER_FEATURES)]
    files = [str(ctx_path)]
    for p_id, pol in enumerate(policies):
        log_path = root / pol / campaign / f"{campaign}.csv"
        h, rows = _read_csv(log_path, log_cols)
        files.append(str(log_path))
        item = _numeric(log_path, h, rows, "item_id", np.int64)
        bad = np.flatnonzero((item < 0) | (item >= n_items))
        if bad.size:
            raise ValueError(f"{log_path}: line {bad[0] + 2}: item_id {item[bad[0]]} is not in "
                             f"{ctx_path} (0..{n_items - 1})")
        pos = _numeric(log_path, h, rows, "position", np.int32)  # kept as int32: checked against its range
        if pos.min() < 1:
            i = int(np.argmin(pos))
            raise ValueError(f"{log_path}: line {i + 2}: position must be >= 1 (1-based slots)")
        click = _numeric(log_path, h, rows, "click", np.int64)
        bad = np.flatnonzero((click != 0) & (click != 1))
        if bad.size:
            raise ValueError(f"{log_path}: line {bad[0] + 2}: click must be 0 or 1, "
                             f"got {click[bad[0]]}")
        prop = _numeric(log_path, h, rows, "propensity_score", np.float64)
        bad = np.flatnonzero((prop <= 0) | (prop > 1))
        if bad.size:
            raise ValueError(f"{log_path}: line {bad[0] + 2}: propensity_score must lie in "
                             f"(0, 1], got {prop[bad[0]]}")
        aff = np.stack([_numeric(log_path, h, rows, f"user-item_affinity_{k}", np.float32)
                        for k in range(n_items)], axis=1)
        for k in range(_N_USER_FEATURES):
            j = h.index(f"user_feature_{k}")
            raw_user[k].extend(r[j] for r in rows)
        jt = h.index("timestamp")
        parts["item"].append(item)
        parts["pos"].append(pos - 1)
        parts["click"].append(click)
        parts["prop"].append(prop)
        parts["aff"].append(aff)
        parts["pol"].append(np.full(item.size, _POLICIES.index(pol), np.int8))
        parts["ts"].append(np.asarray([r[jt] for r in rows]))
        del p_id
    user_codes, user_vocab = zip(*[_codes(v) for v in raw_user])
    cat = lambda k: np.concatenate(parts[k])
    return OpenBanditData(
        item_id=cat("item").astype(np.int32), position=cat("pos").astype(np.int32),
        click=cat("click").astype(np.int8), propensity=cat("prop"),
        user_features=np.stack(user_codes, axis=1).astype(np.int32),
        affinity=cat("aff").astype(np.float32), policy=cat("pol"), timestamp=cat("ts"),
        item_numeric=item_numeric, item_categorical=np.stack(item_cat, axis=1),
        user_vocab=tuple(user_vocab), item_vocab=tuple(item_vocab), files=tuple(files),
    )


def backbone_config(**overrides: Any):
    """Backbone settings for the (small, 10k-row) Open Bandit logs: all six fields, the
    affinity features as dense input, batch 256, no negative down-sampling.

    Also one hidden layer of 128 units, a 64-wide embedding z and one epoch.

    Args:
      **overrides: any :class:`~calib_jax.data.backbone.BackboneConfig` field, replacing the
        value above; an unknown name raises ``TypeError``, an invalid value ``ValueError``.

    Returns:
      A frozen :class:`~calib_jax.data.backbone.BackboneConfig`.

    Example:
      >>> from calib_jax.data.open_bandit import FIELD_NAMES, backbone_config
      >>> cfg = backbone_config(epochs=2)
      >>> cfg.fields == FIELD_NAMES, cfg.batch_size, cfg.neg_sample_rate, cfg.epochs
      (True, 256, 1.0, 2)
    """
    import dataclasses

    from calib_jax.data.backbone import BackboneConfig

    base = BackboneConfig(fields=FIELD_NAMES, batch_size=256, neg_sample_rate=1.0,
                          embedding_dim=64, hidden=(128,), epochs=1)
    return dataclasses.replace(base, **overrides)


def _recode(codes: np.ndarray, vocab: tuple[str, ...], union: tuple[str, ...]) -> np.ndarray:
    lookup = {v: i for i, v in enumerate(union)}
    table = np.asarray([lookup[v] for v in vocab], np.int32)
    return table[codes] if codes.size else codes.astype(np.int32)


def _combine_campaigns(parts: Sequence[OpenBanditData]) -> OpenBanditData:
    """Both campaigns as one log (see :func:`load_open_bandit`, ``campaign="all"``)."""
    offsets = np.cumsum([0] + [d.n_items for d in parts])
    n_items = int(offsets[-1])
    n_user = len(parts[0].user_vocab)
    user_union = [tuple(sorted(set().union(*(d.user_vocab[k] for d in parts)))) for k in range(n_user)]
    item_union = [tuple(sorted(set().union(*(d.item_vocab[k] for d in parts))))
                  for k in range(len(parts[0].item_vocab))]
    aff = []
    for d, off in zip(parts, offsets):
        block = np.zeros((d.click.size, n_items), np.float32)
        block[:, off:off + d.n_items] = d.affinity
        aff.append(block)
    cat = np.concatenate
    user = cat([np.stack([_recode(d.user_features[:, k], d.user_vocab[k], user_union[k])
                          for k in range(n_user)], axis=1) for d in parts])
    ts = cat([d.timestamp for d in parts])
    order = np.argsort(ts, kind="stable")
    return OpenBanditData(
        item_id=cat([d.item_id + off for d, off in zip(parts, offsets)]).astype(np.int32)[order],
        position=cat([d.position for d in parts])[order], click=cat([d.click for d in parts])[order],
        propensity=cat([d.propensity for d in parts])[order], user_features=user[order],
        affinity=cat(aff)[order], policy=cat([d.policy for d in parts])[order], timestamp=ts[order],
        item_numeric=cat([d.item_numeric for d in parts]),
        item_categorical=cat([np.stack([_recode(d.item_categorical[:, k], d.item_vocab[k], item_union[k])
                                        for k in range(len(item_union))], axis=1) for d in parts]),
        user_vocab=tuple(user_union), item_vocab=tuple(item_union),
        files=tuple(f for d in parts for f in d.files),
    )


def load_or_train_open_bandit(path: str | os.PathLike[str] | None = None, *,
                              policy: str = "random", campaign: str = "men", bb_config=None,
                              seed: int = 0, cache_dir: str | os.PathLike[str] | None = None,
                              retrain: bool = False):
    """Train the backbone of :mod:`calib_jax.data.backbone` on an Open Bandit log.

    Fields are item_id, position and the four user features (:data:`FIELD_NAMES`); the
    user-item affinities are the dense input.  Returns a ``BackboneOutputs`` whose splits
    have ``oracle=None`` and ``pctr=None``.  Cached like ``backbone.load_or_train``, keyed
    by the content hash of the files read, the config and the seed.  Host code (CSV
    reading, training, file I/O); not jit-able.

    Args:
      path: dataset root (default :func:`default_path`).
      policy: ``"random"``, ``"bts"`` or ``"all"``, as in :func:`load_open_bandit`.
      campaign: ``"men"``, ``"women"`` or ``"all"``, as in :func:`load_open_bandit`.
      bb_config: a :class:`~calib_jax.data.backbone.BackboneConfig` whose ``fields`` are among
        :data:`FIELD_NAMES` (default :func:`backbone_config`).
      seed: an int seed; the split and the training use ``fold_in(key(seed), 1)``.
      cache_dir: cache directory (default
        :func:`~calib_jax.data.backbone.default_cache_dir`), created if missing.
      retrain: ignore an existing cache entry and overwrite it.

    Returns:
      :class:`~calib_jax.data.backbone.BackboneOutputs` (columns :data:`FIELD_NAMES`) whose
      ``info`` also holds the config, seed, policy, campaign, files, hash, ``total_seconds``,
      ``from_cache`` and ``cache_path``. Loading errors are those of :func:`load_open_bandit`.

    Example:
      >>> import tempfile
      >>> from calib_jax.data.open_bandit import backbone_config, load_or_train_open_bandit
      >>> load_or_train_open_bandit(campaign="kids")
      Traceback (most recent call last):
        ...
      ValueError: `campaign` must be one of ('men', 'women', 'all'), got 'kids'

      With the sample at :func:`default_path` (not shipped with the package; training also
      takes seconds), so not run here:

      >>> tmp = tempfile.TemporaryDirectory()
      >>> out = load_or_train_open_bandit(cache_dir=tmp.name)  # doctest: +SKIP
      >>> out.test.oracle is None, out.field_names[:2], out.info["from_cache"]  # doctest: +SKIP
      (True, ('item_id', 'position'), False)
      >>> tmp.cleanup()
    """
    import json
    import time

    from calib_jax.data import backbone as bb
    from calib_jax.data.simulator import config_hash
    from calib_jax.io import atomic_write_bytes, write_json

    data = load_open_bandit(path, policy=policy, campaign=campaign)
    cfg = bb_config if bb_config is not None else backbone_config()
    digest = hashlib.sha256()
    for f in data.files:
        digest.update(Path(f).read_bytes())
    root = Path(cache_dir) if cache_dir is not None else bb.default_cache_dir()
    ident = config_hash(cfg, extra=[digest.hexdigest(), policy, campaign, int(seed),
                                    bb._CACHE_VERSION])
    out_path = root / f"open_bandit_{ident}.npz"
    meta_path = out_path.with_suffix(".json")
    if out_path.exists() and meta_path.exists() and not retrain:
        parts = bb._unpack(out_path)
        info = json.loads(meta_path.read_text())
        info.update(from_cache=True, cache_path=str(out_path))
        return bb.BackboneOutputs(parts["val"], parts["holdout"], parts["test"],
                                  tuple(info["field_names"]), info)
    key = jax.random.fold_in(jax.random.key(int(seed)), 1)
    t0 = time.perf_counter()
    out = bb.fit_and_export(data.fields(), data.click, field_names=FIELD_NAMES,
                            cardinalities=data.cardinalities(), dense=data.affinity,
                            oracle=None, pctr=None, config=cfg, key=key)
    info = dict(out.info)
    info.update({
        "backbone_config": cfg.to_dict(), "seed": int(seed), "policy": policy,
        "campaign": campaign, "files": list(data.files), "hash": ident,
        "field_names": list(FIELD_NAMES), "total_seconds": time.perf_counter() - t0,
    })
    atomic_write_bytes(out_path, bb._pack({"val": out.val, "holdout": out.holdout,
                                           "test": out.test}))
    write_json(meta_path, info)
    return out._replace(info=dict(info, from_cache=False, cache_path=str(out_path)))
