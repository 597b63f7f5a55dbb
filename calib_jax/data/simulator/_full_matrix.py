"""A fully observed user x item matrix of oracle and production CTRs (KuaiRec-style),
from the same world and CTR model as the logs.

Private module: the public surface is listed in :mod:`calib_jax.data.simulator`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax.data.simulator._config import SimulatorConfig, World, shape_config
from calib_jax.data.simulator._traffic import candidate_logits, categorical, request_draws
from calib_jax.data.simulator._world import make_world, world_and_request_keys

_FULL_MATRIX_STREAM = 2**31 - 1  # fold_in index of the full-matrix contexts (never a chunk)


class FullMatrix(NamedTuple):
    """Oracle preferences for every user x item pair (a KuaiRec-style dense matrix).

    Attributes:
      oracle: (n_users, n_items) true click probability.
      pctr, pctr_logit: (n_users, n_items) production pCTR and its logit.
      click: (n_users, n_items) int8 clicks drawn from ``oracle``.
      user_fields: (n_users, 6) int32: user_cohort, user_bucket, media, placement, hour,
        regime (one context per user).
      item_fields: (n_items, 3) int32: ad, advertiser, creative.
    """

    oracle: np.ndarray
    pctr: np.ndarray
    pctr_logit: np.ndarray
    click: np.ndarray
    user_fields: np.ndarray
    item_fields: np.ndarray


def simulate_full_matrix(config: SimulatorConfig, key: jax.Array, n_users: int,
                         n_items: int) -> FullMatrix:
    """Oracle CTR of the ``n_users`` most active users on the first ``n_items`` ads.

    Every user gets one context (media, placement, hour, regime drawn as for a request)
    and every pair is scored at slot 0 with the same oracle / production model as the
    logged data (same world for the same key).  No auction: the matrix is fully observed,
    like the KuaiRec small matrix, for top-N calibration studies.

    Users are ranked by activity (user ``0`` is the most active under the Zipf traffic), so
    the first ``n_users`` ids are the most active users. One jitted call with ``config``,
    ``n_users`` and ``n_items`` static (each new size compiles); host code around it, not
    jit-able.

    Args:
      config: the simulator configuration.
      key: a JAX PRNG key; the world is the one :func:`simulate` draws from the same key.
      n_users: number of users (rows), an int in [1, ``config.n_users``].
      n_items: number of ads (columns), an int in [1, ``config.n_ads``].

    Returns:
      A :class:`FullMatrix` of NumPy arrays: ``oracle``, ``pctr``, ``pctr_logit`` (float32)
      and ``click`` (int8) of shape (n_users, n_items), ``user_fields`` (n_users, 6) and
      ``item_fields`` (n_items, 3), int32. A size out of range raises ``ValueError``.

    Example:
      >>> import jax
      >>> from calib_jax.data.simulator import simulate_full_matrix, tiny_config
      >>> m = simulate_full_matrix(tiny_config(n_chunks=1), jax.random.key(0), n_users=5, n_items=7)
      >>> m.oracle.shape, m.user_fields.shape, m.item_fields[:, 0].tolist()  # items are ads 0..6
      ((5, 7), (5, 6), [0, 1, 2, 3, 4, 5, 6])
      >>> bool(((m.oracle > 0) & (m.oracle < 1)).all())
      True
    """
    c = config
    for name, v, hi in (("n_users", n_users, c.n_users), ("n_items", n_items, c.n_ads)):
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= hi:
            raise ValueError(f"`{name}` must be an int in [1, {hi}], got {v!r}")
    k_world, k_req = world_and_request_keys(key)
    world = make_world(c, k_world)
    arrays = _full_matrix(world, k_req, config=shape_config(c), n_users=n_users, n_items=n_items)
    oracle, ell, click, user_fields, item_fields = jax.device_get(arrays)
    return FullMatrix(
        oracle=np.asarray(oracle, np.float32),
        pctr=(1.0 / (1.0 + np.exp(-ell.astype(np.float64)))).astype(np.float32),
        pctr_logit=np.asarray(ell, np.float32), click=np.asarray(click, np.int8),
        user_fields=np.asarray(user_fields, np.int32),
        item_fields=np.asarray(item_fields, np.int32),
    )


@functools.partial(jax.jit, static_argnames=("config", "n_users", "n_items"))
def _full_matrix(world: World, k_req: jax.Array, *, config: SimulatorConfig, n_users: int,
                 n_items: int):
    c = config
    k_ctx, k_pair = jax.random.split(jax.random.fold_in(k_req, _FULL_MATRIX_STREAM))
    d = request_draws(c, k_ctx, n_users)
    user = jnp.arange(n_users, dtype=jnp.int32)
    cohort = world.user_cohort[user]
    hour = categorical(d["hour"], world.hour_logits)
    media = categorical(d["media"], world.media_logits)
    local = jnp.minimum((d["placement"] * c.n_placements).astype(jnp.int32), c.n_placements - 1)
    placement = media * c.n_placements + local
    regime = categorical(d["regime"], world.regime_cohort[cohort] + world.regime_hour[hour])
    items = jnp.arange(n_items, dtype=jnp.int32)
    cand = jnp.broadcast_to(items[None, :], (n_users, n_items))
    u_pair = jax.random.uniform(k_pair, (2, n_users, n_items), dtype=jnp.float32)
    eta, ell = candidate_logits(c, world, user, cohort, hour, media, placement, regime,
                                 cand, u_pair[0])
    oracle = jax.nn.sigmoid(eta)
    click = u_pair[1] < oracle
    user_fields = jnp.stack([cohort, user % c.n_user_buckets, media, placement, hour, regime],
                            axis=1)
    item_fields = jnp.stack([items, world.ad_advertiser[items], world.ad_creative[items]], axis=1)
    return oracle, ell, click, user_fields, item_fields
