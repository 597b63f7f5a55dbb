"""Requests and the CTR model: the uniforms of a batch of requests, request contexts
(user, hour, media, placement, regime), candidate ads, and the oracle and production
logits of every candidate.

Private module: the public surface is listed in :mod:`calib_jax.data.simulator`.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from calib_jax._src.precision import MATMUL
from calib_jax.data.simulator._config import SimulatorConfig, World


def categorical(u: jax.Array, logits: jax.Array) -> jax.Array:
    """Inverse-CDF draw: ``u`` (R,) uniform, ``logits`` (K,) or (R, K) -> ids (R,)."""
    cdf = jnp.cumsum(jax.nn.softmax(logits, axis=-1), axis=-1)
    if cdf.ndim == 1:
        cdf = jnp.broadcast_to(cdf[None, :], (u.shape[0], cdf.shape[0]))
    k = jnp.sum(u[:, None] >= cdf[:, :-1], axis=1)
    return k.astype(jnp.int32)


def request_draws(config: SimulatorConfig, key: jax.Array, n_requests: int) -> dict:
    """All uniforms one chunk needs, from a single threefry call, sliced by purpose."""
    C, S = config.n_candidates, config.n_slots
    widths = {"user": 1, "hour": 1, "media": 1, "placement": 1, "regime": 1,
              "cand": C, "noise": C, "select": C, "click": S}
    block = jax.random.uniform(key, (n_requests, sum(widths.values())), dtype=jnp.float32)
    out, pos = {}, 0
    for name, w in widths.items():
        out[name] = block[:, pos] if w == 1 else block[:, pos:pos + w]
        pos += w
    return out


def sample_contexts(config: SimulatorConfig, world: World, d: dict):
    c = config
    user = jnp.minimum((c.n_users * d["user"] ** c.user_zipf).astype(jnp.int32), c.n_users - 1)
    hour = categorical(d["hour"], world.hour_logits)
    media = categorical(d["media"], world.media_logits)
    local = jnp.minimum((d["placement"] * c.n_placements).astype(jnp.int32), c.n_placements - 1)
    placement = media * c.n_placements + local
    cohort = world.user_cohort[user]
    regime = categorical(d["regime"], world.regime_cohort[cohort] + world.regime_hour[hour])
    return user, cohort, hour, media, placement, regime


def sample_candidates(config: SimulatorConfig, d: dict):
    c = config
    cand = jnp.minimum((c.n_ads * d["cand"] ** c.ad_zipf).astype(jnp.int32), c.n_ads - 1)
    # a candidate repeated in the same request is dropped (only its first copy is eligible)
    same = cand[:, :, None] == cand[:, None, :]
    earlier = jnp.tril(jnp.ones((c.n_candidates, c.n_candidates), bool), k=-1)
    valid = ~jnp.any(same & earlier[None, :, :], axis=2)
    return cand, valid


def candidate_logits(config: SimulatorConfig, world: World, user, cohort, hour, media,
                      placement, regime, cand, u_noise):
    """Oracle logit and production logit of every candidate at slot 0, shapes (R, C)."""
    c = config
    main_req = (world.cohort_effect[cohort] + world.user_bias[user]
                + c.user_age_weight * world.user_age[user]
                + world.media_effect[media] + world.placement_effect[placement]
                + world.hour_effect[hour])
    main_ad = (world.ad_quality[cand] + world.advertiser_effect[world.ad_advertiser[cand]]
               + world.creative_effect[world.ad_creative[cand]])
    inter = (c.interaction_scale / math.sqrt(c.latent_dim)) * jnp.einsum(
        "rd,rcd->rc", world.user_vec[user], world.ad_vec[cand], precision=MATMUL)
    base = main_req[:, None] + main_ad
    eta = (world.intercept + base + world.regime_shift[regime][:, None]
           + world.regime_interaction[regime][:, None] * inter)
    eps = jax.scipy.special.ndtri(jnp.clip(u_noise, 1e-7, 1.0 - 1e-7))
    ell = (world.prod_intercept + base + world.prod_regime_shift[regime][:, None]
           + world.kappa_bar * inter + world.ad_error[cand] + c.noise_std * eps)
    return eta, production_scale(c, ell, regime)


def production_scale(config: SimulatorConfig, ell, regime):
    """The production logit ``ell`` (shape (R, ...) with one request per row, or (1, S) to
    broadcast) times ``prod_logit_scale`` and, when ``prod_regime_scale`` is set, times the
    scale of each request's ``regime`` (R,); left untouched at the defaults, so the default
    world's logs are unchanged bit for bit."""
    if not config.prod_regime_scale:
        return ell if config.prod_logit_scale == 1.0 else config.prod_logit_scale * ell
    r = jnp.asarray(config.prod_regime_scale, jnp.float32)[regime][:, None]
    return (config.prod_logit_scale * r) * ell
