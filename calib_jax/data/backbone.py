"""A flax CTR backbone (field embeddings + MLP) and its cached outputs.

The model ("Calibration is Grouping" (VR-SAG; anonymous authors, under review), §2.2, uses
a frozen backbone with penultimate embedding ``z(x)`` and logit ``o``): every categorical
field ``f`` has an embedding table ``E_f``; the embedded
fields and the standardised dense features are concatenated and passed through an MLP,

.. math::

    h_0 = [E_1[x_1], \\dots, E_F[x_F], x_{dense}], \\quad
    h_{l+1} = \\mathrm{relu}(W_l h_l + b_l), \\quad z = h_L \\in \\mathbb{R}^m, \\quad
    o = w^\\top z + c, \\quad \\hat p = \\sigma(o).

It is trained for ``epochs`` (default one) pass(es) of Adam (optax) on the binary
cross-entropy computed from logits (``optax.sigmoid_binary_cross_entropy``).  Like many
production CTR pipelines it can train on negatively down-sampled data without
correcting the logit (``neg_sample_rate < 1``), which makes the backbone over-estimate
the CTR by a factor of about ``1 / neg_sample_rate`` in odds, as the backbone of the
paper does (Table 7: mean pCTR 0.041 vs CTR 0.031).  Set ``neg_sample_rate=1`` for an
unbiased fit.

:func:`load_or_train` simulates the log (:mod:`calib_jax.data.simulator`), splits it as
the paper does (:func:`calib_jax.data.splits.paper_splits`), trains on the training rows
(without D_val) and exports ``(o, z, fields, labels, oracle, pctr)`` for D_val, D_ho and
the test rows.  The result is cached on disk under a hash of (simulator config, backbone
config, seed, exposure); a changed config retrains.
"""

from __future__ import annotations

import dataclasses
import functools
import io as _io
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from scipy.special import expit as _expit

from calib_jax._src.precision import MATMUL
from calib_jax._src.seeds import key_of_seed
from calib_jax._src.validation import check_flag_option, check_number_option
from calib_jax.data import simulator as _sim
from calib_jax.data.splits import numpy_rng, paper_splits
from calib_jax.io import atomic_output_dir, atomic_write_bytes, write_json

__all__ = [
    "BackboneConfig",
    "CTRBackbone",
    "SplitOutputs",
    "BackboneOutputs",
    "TrainedBackbone",
    "train_backbone",
    "fit_and_export",
    "predict",
    "load_or_train",
    "fresh_impressions",
    "default_cache_dir",
    "backbone_metrics",
    "DEFAULT_FIELDS",
]

_CACHE_VERSION = 3  # bump whenever training or export changes (invalidates caches)

#: Simulator fields fed to the backbone by default (the latent regime is not observable).
DEFAULT_FIELDS: tuple[str, ...] = (
    "user_cohort", "user_bucket", "ad", "advertiser", "creative", "media", "placement",
    "position", "hour",
)


@dataclasses.dataclass(frozen=True)
class BackboneConfig:
    """Backbone architecture, training and split settings.

    Attributes:
      embed_dim: embedding size per field.
      hidden: widths of the hidden layers before the penultimate one.
      embedding_dim: m, the width of the penultimate layer z (default 64).
      batch_size, learning_rate, epochs: Adam training (one epoch by default).
      neg_sample_rate: fraction of negatives kept for training (1 = all).
      segment_neg_rates: optional extra keep-rate of training negatives per level of
        ``segment_field`` (a negative of segment ``s`` is kept with probability
        ``neg_sample_rate * segment_neg_rates[s]``). Only the training rows are sampled;
        D_val, D_ho and test keep every row. Negative down-sampling that differs by segment
        (traffic source, campaign type) shifts the backbone's logit by about
        ``-log(rate_s)`` in segment ``s``: a group-wise miscalibration that one global
        calibrator cannot remove. With the segment among ``fields`` the embedding carries
        it: the "grouping world" of the calibrator comparison ("Calibration is Grouping",
        Tables 1-5).
      segment_field: the field whose levels ``segment_neg_rates`` index (default the
        simulator's ``regime``).
      fields: simulator fields used as inputs (names of ``simulator.FIELD_NAMES``).
      use_dense: feed the dense features.
      test_frac, val_frac, ho_frac, chronological: the split (see ``splits.paper_splits``).
      predict_batch: rows per jitted prediction call.
    """

    embed_dim: int = 8
    hidden: tuple[int, ...] = (256,)
    embedding_dim: int = 64
    batch_size: int = 1024
    learning_rate: float = 2e-3
    epochs: int = 1
    neg_sample_rate: float = 0.7
    segment_neg_rates: tuple[float, ...] | None = None
    segment_field: str = "regime"
    fields: tuple[str, ...] = DEFAULT_FIELDS
    use_dense: bool = True
    test_frac: float = 0.2
    val_frac: float = 0.1
    ho_frac: float = 0.1
    chronological: bool = True
    predict_batch: int = 65_536

    def __post_init__(self) -> None:
        for name in ("embed_dim", "embedding_dim", "batch_size", "epochs", "predict_batch"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"`{name}` must be a positive int, got {v!r}")
        # each refused when the configuration is built: a NaN or infinite learning rate trained the
        # backbone to NaN, a width of 0 or a negative one built a layer, "no" for `use_dense` is true,
        # and `fields="media"` was read as the fields "m", "e", "d", "i", "a"
        check_number_option(self.neg_sample_rate, "neg_sample_rate", "a number in (0, 1]", lambda v: 0.0 < v <= 1.0)
        check_number_option(self.learning_rate, "learning_rate", "a finite number > 0", lambda v: 0.0 < v < np.inf)
        if not isinstance(self.hidden, tuple) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in self.hidden):
            raise ValueError(f"`hidden` must be a tuple of positive int widths (() for none), got {self.hidden!r}")
        if not isinstance(self.fields, tuple) or not all(isinstance(f, str) for f in self.fields):
            raise ValueError(f"`fields` must be a tuple of field names, got {self.fields!r}")
        if not self.fields:
            raise ValueError("`fields` must name at least one field")
        if len(set(self.fields)) != len(self.fields):
            raise ValueError(f"`fields` names a field more than once: {self.fields!r}")
        if not isinstance(self.segment_field, str):
            raise ValueError(f"`segment_field` must be a field name, got {self.segment_field!r}")
        for name in ("use_dense", "chronological"):
            check_flag_option(getattr(self, name), name)
        rates = self.segment_neg_rates
        if rates is not None:
            try:
                if not isinstance(rates, tuple) or not rates:
                    raise ValueError
                for r in rates:
                    check_number_option(r, "segment_neg_rates", "a rate", lambda v: 0.0 < v <= 1.0)
            except ValueError:
                raise ValueError(f"`segment_neg_rates` must be None or a non-empty tuple of rates in (0, 1], "
                                 f"got {rates!r}") from None

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v)
                for k, v in dataclasses.asdict(self).items()}


class CTRBackbone(nn.Module):
    """Field embeddings + MLP; ``__call__(fields, dense) -> (logit (B,), z (B, m))``.

    All fields share one embedding table with per-field offsets (a single gather).
    A ``flax.linen`` module (hashable, so it can be a static argument of ``jit``):
    ``__call__`` takes ``fields`` (B, F) int ids, column ``j`` in ``[0, cardinalities[j])``,
    and optional ``dense`` (B, D) float features (already standardised), and returns the
    logit o (B,) and the penultimate embedding z (B, ``embedding_dim``), non-negative
    (a ReLU layer). It is pure JAX: ``init`` / ``apply`` trace under ``jit``.

    Attributes:
      cardinalities: number of ids of every field (F ints >= 1).
      embed_dim: embedding size per field.
      hidden: widths of the ReLU hidden layers before the penultimate one (``()`` for none).
      embedding_dim: m, the width of the penultimate ReLU layer z.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax.data.backbone import CTRBackbone
      >>> model = CTRBackbone(cardinalities=(2, 3), embed_dim=2, hidden=(), embedding_dim=4)
      >>> fields = jnp.array([[0, 2], [1, 0], [1, 1]])  # 3 rows, 2 fields
      >>> params = jax.jit(model.init)(jax.random.key(0), fields)  # jit: one compilation
      >>> logit, z = model.apply(params, fields)
      >>> logit.shape, z.shape
      ((3,), (3, 4))
    """

    cardinalities: tuple[int, ...]
    embed_dim: int = 8
    hidden: tuple[int, ...] = (256,)
    embedding_dim: int = 64

    @nn.compact
    def __call__(self, fields: jax.Array, dense: jax.Array | None = None
                 ) -> tuple[jax.Array, jax.Array]:
        offsets = np.concatenate([[0], np.cumsum(self.cardinalities)[:-1]]).astype(np.int32)
        table = nn.Embed(int(sum(self.cardinalities)), self.embed_dim, name="embed",
                         embedding_init=nn.initializers.normal(0.05))
        h = table(fields + jnp.asarray(offsets)[None, :])
        h = h.reshape((h.shape[0], -1))
        if dense is not None:
            h = jnp.concatenate([h, dense], axis=1)
        for i, width in enumerate(self.hidden):
            h = nn.relu(nn.Dense(width, name=f"hidden_{i}", precision=MATMUL)(h))
        z = nn.relu(nn.Dense(self.embedding_dim, name="penultimate", precision=MATMUL)(h))
        logit = nn.Dense(1, name="head", precision=MATMUL)(z)[:, 0]
        return logit, z


class TrainedBackbone(NamedTuple):
    """A fitted backbone: module, parameters and the dense standardisation.

    Returned by :func:`train_backbone`; :func:`predict` applies it.

    Attributes:
      model: the :class:`CTRBackbone` module (architecture and cardinalities).
      params: its flax parameter tree (``{"params": {...}}``).
      dense_mean: (D,) float32 mean of the training rows' dense features, or None when the
        model was trained without dense features.
      dense_std: (D,) float32 standard deviation used to standardise them (1 for
        (near-)constant columns), or None.
    """

    model: CTRBackbone
    params: Any
    dense_mean: np.ndarray | None
    dense_std: np.ndarray | None


def _model(cfg: BackboneConfig, cards: Sequence[int]) -> CTRBackbone:
    """The :class:`CTRBackbone` of a config over fields with ``cards`` ids each."""
    return CTRBackbone(tuple(int(c) for c in cards), cfg.embed_dim, tuple(cfg.hidden), cfg.embedding_dim)


def _cache_ident(sim_cfg: _sim.SimulatorConfig, bb_cfg: BackboneConfig, seed: int, exposure: str) -> str:
    """The hash that names a backbone's cache files (every setting that changes them)."""
    return _sim.config_hash(sim_cfg, bb_cfg, extra=[int(seed), exposure, _CACHE_VERSION])


def _standardise(dense: np.ndarray | None, mean, std) -> jax.Array | None:
    if dense is None:
        return None
    return jnp.asarray((np.asarray(dense, np.float32) - mean) / std)


def train_backbone(fields: np.ndarray, labels: np.ndarray, *, cardinalities: Sequence[int],
                   dense: np.ndarray | None = None, config: BackboneConfig | None = None,
                   key: jax.Array, segment: np.ndarray | None = None) -> TrainedBackbone:
    """Train :class:`CTRBackbone` with Adam for ``config.epochs`` epoch(s).

    Args:
      fields: (n, F) int categorical ids, column ``j`` in ``[0, cardinalities[j])``.
      labels: (n,) clicks in {0, 1}.
      cardinalities: number of ids per field.
      dense: optional (n, D) dense features (standardised with training statistics).
      config: architecture and optimiser settings (``fields``/split settings unused here).
      key: PRNG key (initialisation, negative down-sampling, shuffling).
      segment: (n,) int levels indexing ``config.segment_neg_rates`` (required with it).

    Minibatches have a fixed size; each epoch drops the last incomplete batch.  The whole
    epoch is one ``lax.scan`` (one compilation).  Negatives are down-sampled with
    ``config.neg_sample_rate`` (times ``segment_neg_rates[segment]``) once, before training;
    the logit is not corrected, so a rate below 1 inflates the predicted CTR. The head's
    bias starts at the logit of the kept rows' click rate.  Host code (NumPy data handling
    around the jitted epoch); not jit-able.

    Returns:
      A :class:`TrainedBackbone` (module, parameters, dense mean and std). Invalid input (a
      shape mismatch, a label other than 0/1, an id out of range, non-finite dense values,
      fewer kept rows than ``batch_size``) raises ``ValueError``.

    Example:
      >>> import jax, numpy as np
      >>> from calib_jax.data.backbone import BackboneConfig, predict, train_backbone
      >>> fields = np.tile([[0, 0], [0, 1], [1, 0], [1, 1]], (8, 1))  # 32 rows, 2 binary fields
      >>> labels = fields[:, 0]  # a click exactly when field 0 is 1
      >>> cfg = BackboneConfig(embed_dim=2, hidden=(), embedding_dim=4, batch_size=8,
      ...                      learning_rate=0.05, epochs=5, neg_sample_rate=1.0)
      >>> train_backbone(fields, 2 * labels, cardinalities=[2, 2], config=cfg, key=jax.random.key(0))
      Traceback (most recent call last):
        ...
      ValueError: `labels` must be 0 or 1

      Initialising and compiling the model take about 5 s even at this size, so the training
      is skipped here:

      >>> trained = train_backbone(fields, labels, cardinalities=[2, 2], config=cfg,
      ...                          key=jax.random.key(0))  # doctest: +SKIP
      >>> logits, z = predict(trained, fields)  # doctest: +SKIP
      >>> logits.shape, z.shape  # doctest: +SKIP
      ((32,), (32, 4))
      >>> bool(logits[labels == 1].mean() > logits[labels == 0].mean())  # it learnt field 0  # doctest: +SKIP
      True
    """
    cfg = config if config is not None else BackboneConfig()
    fields = np.asarray(fields)
    labels = np.asarray(labels)
    if fields.ndim != 2:
        raise ValueError(f"`fields` must be 2-D (n, F), got shape {fields.shape}")
    n = fields.shape[0]
    if labels.shape != (n,):
        raise ValueError(f"`labels` has shape {labels.shape}, expected ({n},)")
    if not np.all((labels == 0) | (labels == 1)):
        raise ValueError("`labels` must be 0 or 1")
    cards = tuple(int(c) for c in cardinalities)
    if len(cards) != fields.shape[1]:
        raise ValueError(f"`cardinalities` has {len(cards)} entries for {fields.shape[1]} fields")
    if fields.min() < 0 or np.any(fields.max(axis=0) >= np.asarray(cards)):
        raise ValueError("`fields` ids must lie in [0, cardinality) per column")
    if dense is not None:
        dense = np.asarray(dense, np.float32)
        if dense.shape[0] != n or dense.ndim != 2:
            raise ValueError(f"`dense` must have shape ({n}, D), got {dense.shape}")
        if not np.all(np.isfinite(dense)):
            raise ValueError("`dense` contains NaN/inf")
    rng = numpy_rng(key, 7)
    keep = np.ones(n, bool)
    rate: Any = cfg.neg_sample_rate
    if cfg.segment_neg_rates is not None:
        if segment is None or np.shape(segment) != (n,):
            raise ValueError("`segment` (n,) is required with `config.segment_neg_rates`")
        seg_rates = np.asarray(cfg.segment_neg_rates, np.float64)
        if segment.min() < 0 or segment.max() >= seg_rates.size:
            raise ValueError(f"`segment` levels must lie in [0, {seg_rates.size}) "
                             f"(one `segment_neg_rates` entry per level)")
        rate = cfg.neg_sample_rate * seg_rates[np.asarray(segment)]
    if np.any(np.asarray(rate) < 1.0):
        keep = (labels == 1) | (rng.random(n) < rate)
    rows = np.flatnonzero(keep)
    n_batches = rows.size // cfg.batch_size
    if n_batches < 1:
        raise ValueError(f"need at least `batch_size`={cfg.batch_size} training rows, got {rows.size}")
    mean = std = None
    if dense is not None:
        mean = dense[rows].mean(axis=0)
        std = dense[rows].std(axis=0)
        std = np.where(std > 1e-3, std, 1.0).astype(np.float32)  # (near-)constant columns
    model = _model(cfg, cards)
    k_init = jax.random.fold_in(key, 1)
    d0 = None if dense is None else jnp.zeros((2, dense.shape[1]), jnp.float32)
    params = model.init(k_init, jnp.zeros((2, len(cards)), jnp.int32), d0)
    # start the head at the base rate of the (down-sampled) training rows
    rate = float(np.clip(labels[rows].mean(), 1e-4, 1 - 1e-4))
    params = jax.tree_util.tree_map(lambda x: x, params)
    params["params"]["head"]["bias"] = jnp.full((1,), np.log(rate / (1 - rate)), jnp.float32)
    opt_state = optax.adam(cfg.learning_rate).init(params)
    B = cfg.batch_size
    for e in range(cfg.epochs):
        order = rows[rng.permutation(rows.size)[: n_batches * B]]
        f = jnp.asarray(fields[order].astype(np.int32).reshape(n_batches, B, -1))
        y = jnp.asarray(labels[order].astype(np.float32).reshape(n_batches, B))
        dz = None
        if dense is not None:
            dz = jnp.asarray((dense[order] - mean) / std).reshape(n_batches, B, -1)
        params, opt_state, _ = _train_epoch(params, opt_state, f, dz, y, model=model,
                                            learning_rate=float(cfg.learning_rate))
        del e
    return TrainedBackbone(model=model, params=params, dense_mean=mean, dense_std=std)


@functools.partial(jax.jit, static_argnames=("model", "learning_rate"))
def _train_epoch(params, opt_state, f, d, y, *, model: CTRBackbone, learning_rate: float):
    """One epoch of Adam steps as a ``lax.scan`` over the (n_batches, B, ...) arrays."""
    tx = optax.adam(learning_rate)

    def loss_fn(p, fb, db, yb):
        logit, _ = model.apply(p, fb, db)
        return jnp.mean(optax.sigmoid_binary_cross_entropy(logit, yb))

    def step(carry, batch):
        p, s = carry
        fb, db, yb = batch
        loss, g = jax.value_and_grad(loss_fn)(p, fb, db, yb)
        updates, s = tx.update(g, s, p)
        return (optax.apply_updates(p, updates), s), loss

    (params, opt_state), losses = jax.lax.scan(step, (params, opt_state), (f, d, y))
    return params, opt_state, losses


@functools.partial(jax.jit, static_argnames=("model",))
def _apply(params, f, d, *, model: CTRBackbone):
    return model.apply(params, f, d)


def predict(trained: TrainedBackbone, fields: np.ndarray, dense: np.ndarray | None = None, *,
            batch_size: int = 65_536) -> tuple[np.ndarray, np.ndarray]:
    """Logits ``o`` (n,) and penultimate embeddings ``z`` (n, m) in fixed-size batches.

    Every batch is zero-padded to one size, the smallest power of two >= max(n, 1024) capped
    at ``batch_size``, so a model compiles once or twice however many rows it scores.  Host
    code around a jitted ``model.apply``; not jit-able.

    Args:
      trained: a :class:`TrainedBackbone` (from :func:`train_backbone`).
      fields: (n, F) int ids in the order and ranges the model was trained with.
      dense: (n, D) raw dense features (standardised here with the training statistics);
        required when the model was trained with dense features, ignored when it was not.
      batch_size: the largest number of rows per call, an int >= 1.

    Returns:
      ``(logits, z)``: (n,) float32 logits o (``sigmoid(o)`` is the pCTR) and (n, m) float32
      penultimate embeddings, as NumPy arrays.

    Example:
      >>> import jax, jax.numpy as jnp, numpy as np
      >>> from calib_jax.data.backbone import CTRBackbone, TrainedBackbone, predict
      >>> model = CTRBackbone(cardinalities=(2, 3), embed_dim=2, hidden=(), embedding_dim=4)
      >>> params = jax.jit(model.init)(jax.random.key(0), jnp.zeros((1, 2), jnp.int32))  # untrained
      >>> trained = TrainedBackbone(model, params, None, None)
      >>> logits, z = predict(trained, np.array([[0, 2], [1, 0], [1, 1]]))
      >>> logits.shape, z.shape, logits.dtype
      ((3,), (3, 4), dtype('float32'))
    """
    fields = np.asarray(fields, np.int32)
    n = fields.shape[0]
    logits, zs = [], []
    # every batch is padded to one size (a power of two <= batch_size): few compilations
    size = min(batch_size, 1 << max(int(n - 1).bit_length(), 10))
    for s in range(0, n, size):
        f = fields[s:s + size]
        m = f.shape[0]
        pad = size - m
        f = np.pad(f, ((0, pad), (0, 0)))
        d = None
        if dense is not None and trained.dense_mean is not None:
            raw = np.pad(np.asarray(dense[s:s + size], np.float32), ((0, pad), (0, 0)))
            d = _standardise(raw, trained.dense_mean, trained.dense_std)
        o, z = _apply(trained.params, jnp.asarray(f), d, model=trained.model)
        logits.append(np.asarray(o)[:m])
        zs.append(np.asarray(z)[:m])
    return np.concatenate(logits), np.concatenate(zs, axis=0)


# --------------------------------------------------------------------------------------
# Outputs and the on-disk cache
# --------------------------------------------------------------------------------------


class _SplitOutputsFields(NamedTuple):
    """The fields of :class:`SplitOutputs` (see there)."""

    logits: np.ndarray
    embedding: np.ndarray
    fields: np.ndarray
    labels: np.ndarray
    oracle: np.ndarray | None
    pctr: np.ndarray | None
    rows: np.ndarray

    @property
    def probs(self) -> np.ndarray:
        """The backbone pCTR sigma(o) (float32)."""
        return _expit(self.logits.astype(np.float64)).astype(np.float32)


class SplitOutputs(_SplitOutputsFields):
    """Backbone outputs on one split.

    Attributes:
      logits: (n,) backbone logit o.  embedding: (n, m) penultimate z.
      fields: (n, F) int32 all categorical fields of the log (``field_names`` of the
        parent :class:`BackboneOutputs`; includes fields the backbone did not see).
      labels: (n,) float32 clicks.  oracle: (n,) true CTR or None (real logs).
      pctr: (n,) production pCTR or None.  rows: (n,) int64 row indices into the log.
    """

    __slots__ = ()

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def _replace(self, **changes: Any) -> SplitOutputs:
        """A copy with some fields replaced (``len`` counts rows, so not tuple._make)."""
        return type(self)(**{**self._asdict(), **changes})


class BackboneOutputs(NamedTuple):
    """``val`` (D_val: fit calibrators), ``holdout`` (D_ho) and ``test`` (evaluation);
    ``field_names`` names the columns of ``fields``; ``info`` holds the configs, metrics,
    timings and whether the result came from the cache.

    Returned by :func:`fit_and_export`, :func:`load_or_train` and
    :func:`calib_jax.data.open_bandit.load_or_train_open_bandit`.

    Attributes:
      val: :class:`SplitOutputs` on D_val (held out of backbone training; fits calibrators).
      holdout: :class:`SplitOutputs` on D_ho (a hold-out taken from the test rows).
      test: :class:`SplitOutputs` on the evaluation rows.
      field_names: names of the columns of every split's ``fields``.
      info: dict of training facts (``train_rows``, ``train_seconds``, ``rows_per_second``);
        the cached loaders add the configs, the seed, the hash, ``from_cache`` and
        ``cache_path``.
    """

    val: SplitOutputs
    holdout: SplitOutputs
    test: SplitOutputs
    field_names: tuple[str, ...]
    info: dict[str, Any]


def default_cache_dir() -> Path:
    """``$CALIB_JAX_CACHE`` if set, else ``<repo>/.cache/calib_jax``.

    Where :func:`load_or_train` keeps its outputs. Host code; the directory is not created.

    Returns:
      A :class:`pathlib.Path` (``<repo>`` is the directory above the ``calib_jax`` package).

    Example:
      >>> import os
      >>> from unittest import mock
      >>> from calib_jax.data.backbone import default_cache_dir
      >>> with mock.patch.dict(os.environ, {"CALIB_JAX_CACHE": "/data/cache"}):
      ...     print(default_cache_dir().as_posix())
      /data/cache
      >>> with mock.patch.dict(os.environ, {"CALIB_JAX_CACHE": ""}):  # unset or empty: the repository's
      ...     default_cache_dir().parts[-2:]
      ('.cache', 'calib_jax')
    """
    env = os.environ.get("CALIB_JAX_CACHE")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / ".cache" / "calib_jax"


def backbone_metrics(part: SplitOutputs) -> dict[str, float]:
    """AUC, log loss, ECE (15 uniform bins), oracle Brier and mean pCTR vs CTR of a split
    (computed with :mod:`calib_jax.metrics`; ``auc_oracle_model`` is the AUC of the oracle
    CTR itself, the ceiling any model can reach).

    Args:
      part: a :class:`SplitOutputs` (the backbone pCTR is ``part.probs``, the labels
        ``part.labels``).

    Returns:
      A dict of Python numbers: ``n``, ``ctr``, ``mean_pctr``, ``auc``, ``logloss``, ``ece``,
      and, when ``part.oracle`` is set, ``mean_oracle``, ``oracle_brier`` (mean squared
      difference between pCTR and oracle CTR) and ``auc_oracle_model``. Host code calling the
      metrics eagerly; not jit-able (the metrics' input checks apply).

    Example:
      >>> import numpy as np
      >>> from calib_jax.data.backbone import SplitOutputs, backbone_metrics
      >>> part = SplitOutputs(
      ...     logits=np.array([-2.0, -1.0, 1.0, 2.0], np.float32), embedding=np.zeros((4, 1), np.float32),
      ...     fields=np.zeros((4, 1), np.int32), labels=np.array([0.0, 0.0, 1.0, 1.0], np.float32),
      ...     oracle=np.array([0.1, 0.3, 0.7, 0.9], np.float32), pctr=None, rows=np.arange(4))
      >>> m = backbone_metrics(part)
      >>> m["n"], m["ctr"], round(m["mean_pctr"], 4), round(m["auc"], 4)  # symmetric logits; perfect ranking
      (4, 0.5, 0.5, 1.0)
    """
    from calib_jax import metrics as M

    p = jnp.asarray(part.probs)
    y = jnp.asarray(part.labels)
    out = {
        "n": len(part), "ctr": float(part.labels.mean()), "mean_pctr": float(part.probs.mean()),
        "auc": float(M.auc(p, y)), "logloss": float(M.nll(p, y)),
        "ece": float(M.ece(p, y, n_bins=15)),
    }
    if part.oracle is not None:
        out["mean_oracle"] = float(part.oracle.mean())
        out["oracle_brier"] = float(M.oracle_brier(p, jnp.asarray(part.oracle)))
        out["auc_oracle_model"] = float(M.auc(jnp.asarray(part.oracle), y))
    return out


def _pack(parts: dict[str, SplitOutputs]) -> bytes:
    arrays = {}
    for name, part in parts.items():
        for f in SplitOutputs._fields:
            v = getattr(part, f)
            if v is not None:
                arrays[f"{name}__{f}"] = v
    buf = _io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]
    return buf.getvalue()


def _unpack(path: Path, names: Sequence[str] = ("val", "holdout", "test")) -> dict[str, SplitOutputs]:
    with np.load(path) as z:
        out: dict[str, SplitOutputs] = {}
        for name in names:
            kw: dict[str, Any] = {f: z[f"{name}__{f}"] if f"{name}__{f}" in z else None
                                  for f in SplitOutputs._fields}
            out[name] = SplitOutputs(**kw)
        return out


def _export(trained: TrainedBackbone, rows: np.ndarray, fields_all: np.ndarray,
            model_cols: list[int], dense: np.ndarray | None, labels: np.ndarray,
            oracle: np.ndarray | None, pctr: np.ndarray | None,
            batch_size: int) -> SplitOutputs:
    o, z = predict(trained, fields_all[rows][:, model_cols],
                   None if dense is None else dense[rows], batch_size=batch_size)
    return SplitOutputs(
        logits=o.astype(np.float32), embedding=z.astype(np.float32),
        fields=fields_all[rows].astype(np.int32), labels=labels[rows].astype(np.float32),
        oracle=None if oracle is None else oracle[rows].astype(np.float32),
        pctr=None if pctr is None else pctr[rows].astype(np.float32),
        rows=rows.astype(np.int64),
    )


def fit_and_export(fields_all: np.ndarray, labels: np.ndarray, *, field_names: Sequence[str],
                   cardinalities: dict[str, int], dense: np.ndarray | None,
                   oracle: np.ndarray | None, pctr: np.ndarray | None,
                   config: BackboneConfig, key: jax.Array) -> BackboneOutputs:
    """Split a log, train on train (without D_val), export val / holdout / test outputs.

    The split is :func:`calib_jax.data.splits.paper_splits` with the config's fractions;
    :func:`train_backbone` trains on the ``config.fields`` columns of the training rows (key
    ``fold_in(key, 11)``) and :func:`predict` scores D_val, D_ho and the test rows.  Host
    code; not jit-able.

    Args:
      fields_all: (n, F_all) int ids of every categorical column of the log, in time order
        (the exported ``fields`` keep all of them, also those the model does not see).
      labels: (n,) clicks in {0, 1}.
      field_names: the F_all column names of ``fields_all``.
      cardinalities: number of ids of every field named in ``config.fields``.
      dense: optional (n, D) dense features (used when ``config.use_dense``).
      oracle: optional (n,) true CTR in [0, 1] (simulated logs), copied into the splits.
      pctr: optional (n,) production pCTR in [0, 1], copied into the splits.
      config: a :class:`BackboneConfig` (fields used, architecture, training, split).
      key: a JAX PRNG key (split, down-sampling, initialisation, shuffling).

    Returns:
      :class:`BackboneOutputs` with ``field_names`` and ``info`` holding ``train_rows``,
      ``train_seconds`` and ``rows_per_second``. A name in ``config.fields`` (or
      ``config.segment_field``) missing from ``field_names`` raises ``ValueError``.

    Example:
      >>> import jax, numpy as np
      >>> from calib_jax.data.backbone import BackboneConfig, fit_and_export
      >>> rng = np.random.default_rng(0)
      >>> fields = np.stack([rng.integers(0, 4, 400), rng.integers(0, 3, 400)], axis=1)
      >>> labels = (rng.random(400) < np.where(fields[:, 0] >= 2, 0.6, 0.1)).astype(np.int8)
      >>> cfg = BackboneConfig(fields=("a",), embed_dim=2, hidden=(), embedding_dim=4,
      ...                      batch_size=16, learning_rate=0.05, neg_sample_rate=1.0, predict_batch=64)
      >>> kwargs = dict(dense=None, oracle=None, pctr=None, key=jax.random.key(0))
      >>> fit_and_export(fields, labels, field_names=("x", "y"), cardinalities={"a": 4}, config=cfg, **kwargs)
      Traceback (most recent call last):
        ...
      ValueError: `config.fields` names unknown field(s) ['a']; known: ('x', 'y')

      Training and exporting compile several programs (about 5 s even at this size), so the
      call is skipped here:

      >>> out = fit_and_export(fields, labels, field_names=("a", "b"), cardinalities={"a": 4},
      ...                      config=cfg, **kwargs)  # doctest: +SKIP
      >>> [len(part) for part in out[:3]]  # doctest: +SKIP
      [32, 8, 72]
      >>> out.test.fields.shape, out.test.embedding.shape  # doctest: +SKIP
      ((72, 2), (72, 4))

      (400 rows: 320 train rows, 32 of them moved to D_val; 80 test rows, 8 of them moved to
      D_ho; the exported ``fields`` keep both columns and z has m = 4.)
    """
    return _fit_and_export_trained(fields_all, labels, field_names=field_names, cardinalities=cardinalities,
                                   dense=dense, oracle=oracle, pctr=pctr, config=config, key=key)[0]


def _fit_and_export_trained(fields_all: np.ndarray, labels: np.ndarray, *, field_names: Sequence[str],
                            cardinalities: dict[str, int], dense: np.ndarray | None,
                            oracle: np.ndarray | None, pctr: np.ndarray | None,
                            config: BackboneConfig, key: jax.Array) -> tuple[BackboneOutputs, TrainedBackbone]:
    """:func:`fit_and_export` and the trained backbone (which :func:`load_or_train` caches)."""
    names = tuple(field_names)
    unknown = [f for f in config.fields if f not in names]
    if unknown:
        raise ValueError(f"`config.fields` names unknown field(s) {unknown}; known: {names}")
    cols = [names.index(f) for f in config.fields]
    n = labels.shape[0]
    splits = paper_splits(key, n, test_frac=config.test_frac, val_frac=config.val_frac,
                          ho_frac=config.ho_frac, chronological=config.chronological)
    t0 = time.perf_counter()
    use_dense = dense if config.use_dense else None
    segment = None
    if config.segment_neg_rates is not None:
        if config.segment_field not in names:
            raise ValueError(f"`config.segment_field` {config.segment_field!r} is not a field; known: {names}")
        segment = fields_all[splits.train][:, names.index(config.segment_field)]
    trained = train_backbone(
        fields_all[splits.train][:, cols], labels[splits.train],
        cardinalities=[cardinalities[f] for f in config.fields],
        dense=None if use_dense is None else use_dense[splits.train], config=config,
        key=jax.random.fold_in(key, 11), segment=segment)
    jax.block_until_ready(trained.params)
    train_s = time.perf_counter() - t0
    parts = {name: _export(trained, getattr(splits, name), fields_all, cols, use_dense, labels,
                           oracle, pctr, config.predict_batch)
             for name in ("val", "holdout", "test")}
    info = {"train_rows": int(splits.train.size), "train_seconds": train_s,
            "rows_per_second": splits.train.size * config.epochs / train_s}
    return BackboneOutputs(parts["val"], parts["holdout"], parts["test"], names, info), trained




def load_or_train(sim_config: _sim.SimulatorConfig | None = None,
                  bb_config: BackboneConfig | None = None, *, seed: int = 0,
                  cache_dir: str | os.PathLike[str] | None = None, exposure: str = "auction",
                  retrain: bool = False) -> BackboneOutputs:
    """Simulate, split, train the backbone and export its outputs, with an on-disk cache.

    The cache file is ``<cache_dir>/backbone_<hash>.npz`` (+ ``.json`` metadata) where the
    hash covers the simulator config, the backbone config, the seed, the exposure mode and
    a format version, so any change retrains.  ``cache_dir`` defaults to
    :func:`default_cache_dir` (``$CALIB_JAX_CACHE`` or ``<repo>/.cache/calib_jax``).

    The simulator uses ``key_of_seed(seed)`` (``jax.random.key(seed)`` for a seed below 2^32; a
    larger 64-bit seed is never reduced modulo 2^32); the split and the training use
    ``fold_in(key, 1)``.  ``info["from_cache"]`` tells whether training was skipped.
    Host code (simulation, training, file I/O); not jit-able.

    Args:
      sim_config: the simulator configuration (default :func:`~calib_jax.data.simulator.default_config`).
      bb_config: the :class:`BackboneConfig` (default ``BackboneConfig()``).
      seed: an int seed (a bool or non-int raises ``ValueError``).
      cache_dir: directory of the cache (created if missing).
      exposure: ``"auction"`` or ``"random"``, as in :func:`calib_jax.data.simulator.simulate`.
      retrain: ignore an existing cache entry and overwrite it.

    Returns:
      :class:`BackboneOutputs` (fields named by the simulator's ``FIELD_NAMES``, ``oracle``
      and ``pctr`` set); ``info`` also holds both configs, the seed, the exposure, the hash,
      the timings, ``log_rows``, ``from_cache`` and ``cache_path``.

    Example:
      >>> import tempfile
      >>> from calib_jax.data.backbone import BackboneConfig, load_or_train
      >>> from calib_jax.data.simulator import tiny_config
      >>> bb = BackboneConfig(hidden=(), embedding_dim=8, batch_size=256)
      >>> load_or_train(tiny_config(n_chunks=1), bb, seed=0.5)  # checked before any work
      Traceback (most recent call last):
        ...
      ValueError: `seed` must be an int, got 0.5

      Compiling the simulator and the training takes over ten seconds even at the tiny scale,
      so the calls below are skipped here:

      >>> tmp = tempfile.TemporaryDirectory()
      >>> first = load_or_train(tiny_config(n_chunks=1), bb, cache_dir=tmp.name)  # doctest: +SKIP
      >>> again = load_or_train(tiny_config(n_chunks=1), bb, cache_dir=tmp.name)  # doctest: +SKIP
      >>> first.info["from_cache"], again.info["from_cache"]  # doctest: +SKIP
      (False, True)
      >>> len(first.val) + len(first.holdout) + len(first.test) < first.info["log_rows"]  # doctest: +SKIP
      True
      >>> tmp.cleanup()
    """
    sim_cfg = sim_config if sim_config is not None else _sim.default_config()
    bb_cfg = bb_config if bb_config is not None else BackboneConfig()
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ValueError(f"`seed` must be an int, got {seed!r}")
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    ident = _cache_ident(sim_cfg, bb_cfg, seed, exposure)
    path = root / f"backbone_{ident}.npz"
    meta_path = path.with_suffix(".json")
    if path.exists() and meta_path.exists() and not retrain:
        parts = _unpack(path)
        info = json.loads(meta_path.read_text())
        info["from_cache"] = True
        info["cache_path"] = str(path)
        return BackboneOutputs(parts["val"], parts["holdout"], parts["test"],
                               tuple(info["field_names"]), info)
    key = key_of_seed(seed)
    t0 = time.perf_counter()
    log = _sim.simulate(sim_cfg, key, exposure=exposure)
    sim_s = time.perf_counter() - t0
    out, trained = _fit_and_export_trained(log.fields, log.click, field_names=_sim.FIELD_NAMES,
                                           cardinalities=_sim.field_cardinalities(sim_cfg), dense=log.dense,
                                           oracle=log.oracle, pctr=log.pctr, config=bb_cfg,
                                           key=jax.random.fold_in(key, 1))
    info = dict(out.info)
    _save_trained(path.with_suffix(".params.npz"), trained)
    info.update({
        "simulator_config": sim_cfg.to_dict(), "backbone_config": bb_cfg.to_dict(),
        "seed": int(seed), "exposure": exposure, "hash": ident, "simulate_seconds": sim_s,
        "log_rows": len(log), "field_names": list(_sim.FIELD_NAMES),
    })
    atomic_write_bytes(path, _pack({"val": out.val, "holdout": out.holdout, "test": out.test}))
    write_json(meta_path, info)
    info = dict(info, from_cache=False, cache_path=str(path))
    return out._replace(info=info)


def _save_trained(path: Path, trained: TrainedBackbone) -> None:
    """The parameters and dense scaling of a trained backbone, as one npz (atomic)."""
    from flax import traverse_util

    arrays = {f"p/{k}": np.asarray(v) for k, v in traverse_util.flatten_dict(trained.params, sep="/").items()}
    if trained.dense_mean is not None and trained.dense_std is not None:
        arrays["dense_mean"], arrays["dense_std"] = np.asarray(trained.dense_mean), np.asarray(trained.dense_std)
    buf = _io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]
    atomic_write_bytes(path, buf.getvalue())


def _load_trained(path: Path, model: CTRBackbone) -> TrainedBackbone:
    from flax import traverse_util

    with np.load(path) as z:
        params = traverse_util.unflatten_dict({k[2:]: jnp.asarray(z[k]) for k in z.files if k.startswith("p/")},
                                              sep="/")
        mean = z["dense_mean"] if "dense_mean" in z.files else None
        std = z["dense_std"] if "dense_std" in z.files else None
    return TrainedBackbone(model=model, params=params, dense_mean=mean, dense_std=std)


def fresh_impressions(sim_config: _sim.SimulatorConfig | None = None, bb_config: BackboneConfig | None = None,
                      *, n_rows: int, seed: int = 0, cache_dir: str | os.PathLike[str] | None = None,
                      exposure: str = "auction") -> SplitOutputs:
    """``n_rows`` new impressions of the same world, logged after the backbone's log and scored
    by the backbone :func:`load_or_train` trains for the same arguments.

    The simulator's chunks are deterministic per key and ``n_chunks`` does not shape the world
    or a chunk, so chunks ``n_chunks, n_chunks + 1, ...`` of the same key continue the same
    world (its advertisers, users and production score), with the request stream and the
    pacing state carried on from the log. They are independent of the log's impressions given
    the world: an evaluation set of any size for a design that needs independent replicates
    of a test set (e.g. refits each on a hold-out of the table's size). Cached next to the
    backbone as the folder ``backbone_<hash>.fresh-<n_rows>/``, one ``.npy`` file per column,
    written piece by piece as the chunks are simulated and scored, and returned memory-mapped
    read-only, so that ten test sets of a 15M-impression world (30M rows, 10 GB) never sit in
    memory; the pieces keep :func:`predict`'s batches, so the scores are those of one call on
    all rows, bit for bit. (An older ``.npz`` entry of the same name is still read.) The
    backbone is trained first if it is not cached (or was cached without its parameters).
    Host code; not jit-able.

    Args:
      sim_config, bb_config, seed, cache_dir, exposure: as in :func:`load_or_train`.
      n_rows: the number of impressions, an int >= 1.

    Returns:
      :class:`SplitOutputs` of the first ``n_rows`` impressions after the log, in time order
      (``rows`` counts from 0 at the first of them; ``oracle`` and ``pctr`` set), as read-only
      arrays on the memory-mapped cache.

    Example:
      >>> from calib_jax.data.backbone import fresh_impressions
      >>> fresh_impressions(n_rows=0)
      Traceback (most recent call last):
        ...
      ValueError: `n_rows` must be an int >= 1, got 0

      Simulating and training take seconds even at the tiny scale, so the call is skipped here:

      >>> from calib_jax.data.simulator import tiny_config
      >>> new = fresh_impressions(tiny_config(n_chunks=1), n_rows=1000)  # doctest: +SKIP
      >>> len(new), new.oracle is not None  # doctest: +SKIP
      (1000, True)
    """
    if isinstance(n_rows, bool) or not isinstance(n_rows, int | np.integer) or n_rows < 1:
        raise ValueError(f"`n_rows` must be an int >= 1, got {n_rows!r}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ValueError(f"`seed` must be an int, got {seed!r}")
    sim_cfg = sim_config if sim_config is not None else _sim.default_config()
    bb_cfg = bb_config if bb_config is not None else BackboneConfig()
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    ident = _cache_ident(sim_cfg, bb_cfg, seed, exposure)
    legacy = root / f"backbone_{ident}.fresh-{int(n_rows)}.npz"  # written before 2026-11-28
    if legacy.exists():
        return _unpack(legacy, ("fresh",))["fresh"]
    folder = root / f"backbone_{ident}.fresh-{int(n_rows)}"
    if (folder / _FRESH_DONE).exists():
        return _open_fresh(folder)
    params_path = root / f"backbone_{ident}.params.npz"
    if not params_path.exists():  # trains (or retrains an entry cached without its parameters)
        load_or_train(sim_cfg, bb_cfg, seed=seed, cache_dir=root, exposure=exposure,
                      retrain=(root / f"backbone_{ident}.npz").exists())
    cards = _sim.field_cardinalities(sim_cfg)
    trained = _load_trained(params_path, _model(bb_cfg, [cards[f] for f in bb_cfg.fields]))
    # continue the key's chunk stream past the log (the log's chunks are re-run for the pacing)
    longer = dataclasses.replace(sim_cfg, n_chunks=sim_cfg.n_chunks + max(64, 4 * sim_cfg.n_chunks))
    names = tuple(_sim.FIELD_NAMES)
    cols = [names.index(f) for f in bb_cfg.fields]
    with atomic_output_dir(folder) as tmp:
        writer = _FreshWriter(tmp, trained, n_rows, cols, bb_cfg)
        for i, imp, _ in _sim.iter_chunks(longer, key_of_seed(seed), exposure=exposure):
            if i >= sim_cfg.n_chunks and writer.add(imp):
                break
        if not writer.finish():
            raise ValueError(f"`n_rows`={n_rows} needs more than {longer.n_chunks - sim_cfg.n_chunks} further chunks")
        (tmp / _FRESH_DONE).write_text(json.dumps({"n_rows": int(n_rows), "ident": ident}))
    return _open_fresh(folder)


#: the marker of a finished fresh-impressions folder (written last, inside the atomic folder)
_FRESH_DONE = "done.json"
#: fresh impressions are scored in pieces of this many prediction batches
FRESH_PIECE_BATCHES = 16


def _open_fresh(folder: Path) -> SplitOutputs:
    """The cached fresh impressions of ``folder``, every column memory-mapped read-only (the
    paper-scale world's ten table-sized test sets do not fit in memory)."""
    def col(f: str) -> np.ndarray | None:
        return np.asarray(np.load(folder / f"{f}.npy", mmap_mode="r")) if (folder / f"{f}.npy").exists() else None

    oracle, pctr = col("oracle"), col("pctr")
    required = {f: col(f) for f in ("logits", "embedding", "fields", "labels", "rows")}
    missing = [f for f, v in required.items() if v is None]
    if missing:
        raise ValueError(f"the fresh-impressions cache {folder} lacks {missing}; delete the folder to rebuild it")
    return SplitOutputs(**{f: v for f, v in required.items() if v is not None}, oracle=oracle, pctr=pctr)


class _FreshWriter:
    """Scores simulated impressions piece by piece into memory-mapped ``.npy`` columns.

    Every piece but the last starts at a multiple of the prediction batch and holds
    :data:`FRESH_PIECE_BATCHES` batches, and the last holds at least one whole batch (when
    there are that many rows), so :func:`predict` cuts the same batches, padded to the same
    size, as on all rows at once: the scores are the one-shot scores, bit for bit."""

    def __init__(self, folder: Path, trained: TrainedBackbone, n_rows: int, cols: list[int],
                 config: BackboneConfig) -> None:
        self.folder, self.trained, self.n, self.cols, self.config = folder, trained, int(n_rows), cols, config
        self.piece = FRESH_PIECE_BATCHES * int(config.predict_batch)
        self.pending: list[_sim.Impressions] = []
        self.n_pending = 0
        self.done = 0  # rows scored and written
        self.columns: dict[str, np.memmap] = {}

    def add(self, imp: _sim.Impressions) -> bool:
        """Take one chunk's impressions; score every whole piece that leaves at least one batch
        for the last. True once ``n_rows`` impressions have been taken."""
        self.pending.append(imp)
        self.n_pending += len(imp)
        while (self.n_pending >= self.piece and self.n - (self.done + self.piece) >= self.config.predict_batch):
            self._score(self.piece)
        return self.done + self.n_pending >= self.n

    def finish(self) -> bool:
        """Score the rest (up to ``n_rows``); False when the stream ended short of ``n_rows``."""
        if self.done + self.n_pending < self.n:
            return False
        self._score(self.n - self.done)
        for col in self.columns.values():
            col.flush()
        return True

    def _score(self, k: int) -> None:
        raw = _sim.Impressions(*[np.concatenate([getattr(p, f) for p in self.pending])
                                 for f in _sim.Impressions._fields])
        take = _sim.Impressions(*[v[:k] for v in raw])
        rest = _sim.Impressions(*[v[k:] for v in raw])
        self.pending, self.n_pending = ([rest], len(rest.click)) if len(rest.click) else ([], 0)
        out = _export(self.trained, np.arange(k), take.fields, self.cols,
                      take.dense if self.config.use_dense else None, take.click, take.oracle, take.pctr,
                      self.config.predict_batch)
        out = out._replace(rows=out.rows + self.done)
        for f in SplitOutputs._fields:
            v = getattr(out, f)
            if v is None:
                continue
            if f not in self.columns:
                self.columns[f] = np.lib.format.open_memmap(self.folder / f"{f}.npy", mode="w+", dtype=v.dtype,
                                                            shape=(self.n, *v.shape[1:]))
            self.columns[f][self.done:self.done + k] = v
        self.done += k
