"""Logged impressions: the record type, the chunked simulation (in memory) and the
Table-7 summary statistics of a log.

Private module: the public surface is listed in :mod:`calib_jax.data.simulator`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax.data.simulator._auction import check_exposure, chunk_of
from calib_jax.data.simulator._config import FIELD_NAMES, SimulatorConfig, World, check_config, shape_config
from calib_jax.data.simulator._world import make_world, world_and_request_keys


class _ImpressionsFields(NamedTuple):
    """The fields of :class:`Impressions` (see there)."""

    fields: np.ndarray
    dense: np.ndarray
    click: np.ndarray
    oracle: np.ndarray
    pctr: np.ndarray
    pctr_logit: np.ndarray
    price: np.ndarray
    request: np.ndarray

    def field(self, name: str) -> np.ndarray:
        """One categorical column by name (see :data:`FIELD_NAMES`)."""
        if name not in FIELD_NAMES:
            raise ValueError(f"`name` must be one of {FIELD_NAMES}, got {name!r}")
        return self.fields[:, FIELD_NAMES.index(name)]


class Impressions(_ImpressionsFields):
    """Logged impressions (NumPy arrays, one row per impression).

    ``len(imp)`` is the number of impressions and ``imp.field(name)`` one column of
    ``fields`` by its name in :data:`FIELD_NAMES`.

    Attributes:
      fields: (n, 10) int32 categorical fields, columns :data:`FIELD_NAMES`.
      dense: (n, 4) float32 dense features, columns :data:`DENSE_NAMES`.
      click: (n,) int8 click drawn from the oracle CTR.
      oracle: (n,) float32 oracle (true) CTR.
      pctr: (n,) float32 production pCTR; pctr_logit: (n,) its logit.
      price: (n,) float32 price paid (second price; 0 under random exposure).
      request: (n,) int64 global request index.
    """

    __slots__ = ()

    def __len__(self) -> int:  # number of impressions
        return int(self.click.shape[0])

    def _replace(self, **changes: Any) -> Impressions:
        """A copy with some fields replaced (``len`` counts rows, so not tuple._make)."""
        return type(self)(**{**self._asdict(), **changes})


def check_impressions(imp: Any, name: str = "imp") -> Impressions:
    """``imp`` if it is :class:`Impressions` whose columns all have one row count, else
    ``ValueError`` naming ``name`` and the column (a click column one row short ended in a
    NumPy ``IndexError``, a dict in an ``AttributeError``)."""
    if not isinstance(imp, Impressions):
        raise ValueError(f"`{name}` must be simulator Impressions, got {type(imp).__name__}")
    n = len(imp)
    for column, values in imp._asdict().items():
        if np.shape(values)[:1] != (n,):
            raise ValueError(f"`{name}.{column}` has shape {np.shape(values)}, the log has {n} rows (`click`)")
    return imp


def _to_impressions(out: dict, chunk: int, config: SimulatorConfig) -> Impressions:
    host = jax.device_get(out)
    mask = np.asarray(host["filled"]).reshape(-1)
    R, S = config.requests_per_chunk, config.n_slots
    request = (np.int64(chunk) * R + np.repeat(np.arange(R, dtype=np.int64), S))[mask]

    def flat(name, dtype):
        a = np.asarray(host[name])
        return a.reshape((R * S,) + a.shape[2:])[mask].astype(dtype, copy=False)

    return Impressions(
        fields=flat("fields", np.int32), dense=flat("dense", np.float32),
        click=flat("click", np.int8), oracle=flat("oracle", np.float32),
        pctr=flat("pctr", np.float32), pctr_logit=flat("pctr_logit", np.float32),
        price=flat("price", np.float32), request=request,
    )


def iter_chunks(config: SimulatorConfig, key: jax.Array, *, exposure: str = "auction",
                start: int = 0, pacing: np.ndarray | None = None,
                world: World | None = None) -> Iterator[tuple[int, Impressions, np.ndarray]]:
    """Yield ``(chunk_index, impressions, pacing_after_chunk)`` for every chunk.

    A generator: chunk ``i`` is simulated (one jitted call, ``config`` static) only when it is
    asked for, so memory stays at one chunk; the pacing state is carried from chunk to chunk.
    Runs a host loop; not jit-able.

    Args:
      config: the simulator configuration.
      key: PRNG key; the world uses ``fold_in(key, 0)``, chunk ``i`` uses
        ``fold_in(fold_in(key, 1), i)``.  The same key gives the same world and the same
        requests for both exposure modes.  A key that is not a JAX array (an int, say) raises
        ``ValueError``.
      exposure: ``"auction"`` (winners of second-price auctions are logged) or
        ``"random"`` (uniformly random eligible candidates are shown; same pCTR, no
        pacing, price 0).  Another value raises ``ValueError``.
      start, pacing: resume from chunk ``start`` (an int in [0, ``n_chunks``]) with the
        (``n_advertisers``,) pacing state saved after chunk ``start - 1`` (used by
        :func:`simulate_to_disk`); ``pacing=None`` starts every multiplier at ``pacing_max``.
        Another ``start``, or a pacing state of another shape or not finite and positive,
        raises ``ValueError`` naming it (at the first chunk asked for).
      world: a precomputed :func:`make_world` result (defaults to the key's world).

    Yields:
      ``(i, impressions, pacing)`` for ``i = start, ..., n_chunks - 1``: the chunk index, its
      logged :class:`Impressions` (``request`` counts globally, from ``i * requests_per_chunk``)
      and the (``n_advertisers``,) float32 NumPy pacing multipliers after the chunk.

    Example:
      >>> import jax
      >>> from calib_jax.data.simulator import iter_chunks, tiny_config
      >>> for i, imp, pacing in iter_chunks(tiny_config(n_chunks=2), jax.random.key(0)):
      ...     print(i, int(imp.request.min()), pacing.shape)  # 4096 requests per chunk, 30 advertisers
      0 0 (30,)
      1 4096 (30,)
    """
    check_exposure(exposure)
    config = check_config(config)
    # start=5 of 1 chunk yielded nothing, and a NaN pacing state a log of NaN bids, both silently
    if isinstance(start, bool) or not isinstance(start, int | np.integer) or not 0 <= start <= config.n_chunks:
        raise ValueError(f"`start` must be an int in [0, n_chunks={config.n_chunks}], got {start!r}")
    if pacing is not None:
        state = np.asarray(pacing, np.float64)
        if state.shape != (config.n_advertisers,) or not np.all(np.isfinite(state) & (state > 0)):
            raise ValueError(f"`pacing` must be ({config.n_advertisers},) finite positive multipliers (one per "
                             f"advertiser), got shape {state.shape}")
    k_world, k_req = world_and_request_keys(key)
    if world is None:
        world = make_world(config, k_world)
    if pacing is None:
        pacing_arr = jnp.full((config.n_advertisers,), config.pacing_max, jnp.float32)
    else:
        pacing_arr = jnp.asarray(pacing, jnp.float32)
    for i in range(start, config.n_chunks):
        out, pacing_arr, _ = chunk_of(world, pacing_arr, jax.random.fold_in(k_req, i),
                                    config=shape_config(config), exposure=exposure)
        yield i, _to_impressions(out, i, config), np.asarray(pacing_arr)


def concat_impressions(parts: list[Impressions]) -> Impressions:
    return Impressions(*[np.concatenate([getattr(p, f) for p in parts], axis=0)
                         for f in Impressions._fields])


def simulate(config: SimulatorConfig, key: jax.Array, *, exposure: str = "auction") -> Impressions:
    """Run the whole simulation in memory and return the logged impressions.

    See the module docstring for the model; ``exposure="random"`` shows random eligible
    candidates instead of auction winners (same world, requests and pCTR), which isolates
    the selection bias created by the auction.  The chunks of :func:`iter_chunks`,
    concatenated; deterministic per key.  Runs a host loop over jitted chunks; not jit-able.
    The first call for a config compiles the world and the chunk (seconds, even for
    :func:`tiny_config`); later calls with the same config (any ``n_chunks``) reuse them.

    Args:
      config: the simulator configuration (all ``n_chunks`` chunks are kept in memory: use
        :func:`simulate_to_disk` for :func:`paper_config`).
      key: a JAX PRNG key (``jax.random.key(seed)``); an int seed raises ``ValueError``.
      exposure: ``"auction"`` (log the auction winners) or ``"random"`` (log uniformly random
        eligible candidates); another value raises ``ValueError``.

    Returns:
      :class:`Impressions` with at most ``n_requests * n_slots`` rows (a slot stays empty when
      too few bids clear the reserve), in request order.

    Example:
      >>> import jax
      >>> from calib_jax.data.simulator import FIELD_NAMES, simulate, tiny_config
      >>> imp = simulate(tiny_config(n_chunks=1), jax.random.key(0))
      >>> imp.fields.shape[1] == len(FIELD_NAMES), imp.dense.shape[1]
      (True, 4)
      >>> len(imp) <= 4096 * 3  # requests x slots
      True
    """
    return concat_impressions([imp for _, imp, _ in iter_chunks(config, key, exposure=exposure)])


# --------------------------------------------------------------------------------------
# Dataset statistics (Table 7 of "Calibration is Grouping")
# --------------------------------------------------------------------------------------


def summary_stats(imp: Impressions) -> dict[str, Any]:
    """Table-7 style statistics of a log plus per-regime calibration ratios.

    The dataset statistics of Table 7 of "Calibration is Grouping" (VR-SAG; anonymous
    authors, under review), computed in float64 with NumPy on the host (not jit-able).

    Args:
      imp: a non-empty :class:`Impressions` log (an empty one raises ``ValueError``).

    Returns:
      A dict with ``impressions``, ``clicks``, ``ctr``, ``mean_oracle``,
      ``mean_pctr``, ``ratio_pctr_oracle`` (mean pCTR / mean oracle CTR), ``ratio_pctr_ctr`` (NaN without clicks),
      and ``regimes``: a list of per-regime dicts (``regime``, ``share`` of impressions,
      ``ctr``, ``mean_oracle``, ``mean_pctr`` and the calibration deviation
      ``calibration_dev = mean(pCTR) / mean(oracle) - 1``, positive = over-estimation), one
      per regime present in the log, in regime order.

    Example:
      >>> import jax
      >>> from calib_jax.data.simulator import simulate, summary_stats, tiny_config
      >>> stats = summary_stats(simulate(tiny_config(n_chunks=1), jax.random.key(0)))
      >>> 0.02 < stats["ctr"] < 0.05, stats["ratio_pctr_oracle"] > 1.1  # CTR ~3%; selection bias
      (True, True)
      >>> [r["calibration_dev"] > 0 for r in stats["regimes"]]  # regime 0 is under-estimated
      [False, True, True]
    """
    n = len(check_impressions(imp))
    if n == 0:
        raise ValueError("`imp` holds no impression")
    oracle = imp.oracle.astype(np.float64)
    pctr = imp.pctr.astype(np.float64)
    click = imp.click.astype(np.float64)
    out: dict[str, Any] = {
        "impressions": n, "clicks": int(click.sum()), "ctr": float(click.mean()),
        "mean_oracle": float(oracle.mean()), "mean_pctr": float(pctr.mean()),
    }
    out["ratio_pctr_oracle"] = out["mean_pctr"] / out["mean_oracle"]
    # no clicks: the ratio is undefined (NaN), where dividing by 1e-12 reported 3e10
    out["ratio_pctr_ctr"] = out["mean_pctr"] / out["ctr"] if out["ctr"] > 0 else float("nan")
    regime = imp.field("regime")
    regimes = []
    for g in np.unique(regime):
        m = regime == g
        mo, mp = float(oracle[m].mean()), float(pctr[m].mean())
        regimes.append({"regime": int(g), "share": float(m.mean()), "ctr": float(click[m].mean()),
                        "mean_oracle": mo, "mean_pctr": mp, "calibration_dev": mp / mo - 1.0})
    out["regimes"] = regimes
    return out
