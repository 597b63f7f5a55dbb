"""One chunk of requests through the market: auto-bidding with pacing, generalised
second-price auctions (or random exposure), clicks, and the slot-level arrays to log.

Private module: the public surface is listed in :mod:`calib_jax.data.simulator`.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from calib_jax.data.simulator._config import SimulatorConfig, World
from calib_jax.data.simulator._traffic import (
    candidate_logits,
    production_scale,
    request_draws,
    sample_candidates,
    sample_contexts,
)
from calib_jax.groupstats import deterministic_segment_sum

_EXPOSURES = ("auction", "random")


def check_exposure(exposure: str) -> str:
    if exposure not in _EXPOSURES:
        raise ValueError(f"`exposure` must be one of {_EXPOSURES}, got {exposure!r}")
    return exposure


@functools.partial(jax.jit, static_argnames=("config", "exposure"))
def chunk_of(world: World, pacing: jax.Array, key: jax.Array, *, config: SimulatorConfig,
           exposure: str):
    """One chunk of requests -> slot-level arrays (R, S) plus the new pacing state."""
    c = config
    S = c.n_slots
    d = request_draws(c, key, c.requests_per_chunk)
    user, cohort, hour, media, placement, regime = sample_contexts(c, world, d)
    cand, valid = sample_candidates(c, d)
    eta0, ell0 = candidate_logits(c, world, user, cohort, hour, media, placement, regime,
                                   cand, d["noise"])
    adv = world.ad_advertiser[cand]
    if exposure == "auction":
        bid = world.advertiser_value[adv] * pacing[adv] * jax.nn.sigmoid(ell0)
        bid = jnp.where(valid, bid, -1.0)
        top, idx = jax.lax.top_k(bid, S + 1)  # S winners + the runner-up prices them
        filled = top[:, :S] >= c.reserve_price
        price = jnp.maximum(top[:, 1:], c.reserve_price)
        price = jnp.where(filled, price, 0.0)
        win = idx[:, :S]
    else:  # random exposure: S distinct eligible candidates uniformly at random
        score = jnp.where(valid, d["select"], -1.0)
        top, win = jax.lax.top_k(score, S)
        filled = top >= 0.0
        price = jnp.zeros(filled.shape, jnp.float32)
    ad = jnp.take_along_axis(cand, win, axis=1)
    pos = world.position_effect[None, :]
    eta = jnp.take_along_axis(eta0, win, axis=1) + pos
    ell = jnp.take_along_axis(ell0, win, axis=1) + production_scale(c, pos, regime)
    oracle = jax.nn.sigmoid(eta)
    click = d["click"] < oracle
    ad_adv = world.ad_advertiser[ad]
    spend = deterministic_segment_sum(price.reshape(-1), ad_adv.reshape(-1), c.n_advertisers)
    if exposure == "auction":
        budget = world.advertiser_budget
        step = jnp.exp(c.pacing_lr * jnp.clip((budget - spend) / budget, -2.0, 1.0))
        new_pacing = jnp.clip(pacing * step, c.pacing_min, c.pacing_max)
    else:
        new_pacing = pacing
    R = c.requests_per_chunk

    def per_slot(x):
        return jnp.broadcast_to(x[:, None], (R, S))

    slot = jnp.broadcast_to(jnp.arange(S)[None, :], (R, S))
    user_s = per_slot(user)
    fields = jnp.stack([
        per_slot(cohort), user_s % c.n_user_buckets, ad, ad_adv, world.ad_creative[ad],
        per_slot(media), per_slot(placement), slot, per_slot(hour), per_slot(regime),
    ], axis=-1).astype(jnp.int32)
    n_users = float(c.n_users)
    activity = -jnp.log((user_s.astype(jnp.float32) + 1.0) / n_users)
    dense = jnp.stack([
        activity / c.user_zipf - 1.0, world.user_age[user_s], world.ad_hist[ad],
        world.ad_age[ad],
    ], axis=-1).astype(jnp.float32)
    out = dict(fields=fields, dense=dense, click=click, oracle=oracle,
               pctr=jax.nn.sigmoid(ell), pctr_logit=ell, price=price, filled=filled)
    return out, new_pacing, spend
