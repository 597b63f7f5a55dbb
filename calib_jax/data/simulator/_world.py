"""The persistent market: users, ads, advertisers, media, regimes and the production
intercept, all drawn once from the world key.

Private module: the public surface is listed in :mod:`calib_jax.data.simulator`.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp

from calib_jax._src.precision import MATMUL
from calib_jax._src.validation import check_key
from calib_jax.data.simulator._config import SimulatorConfig, World, shape_config
from calib_jax.data.simulator._traffic import (
    candidate_logits,
    request_draws,
    sample_candidates,
    sample_contexts,
)


def make_world(config: SimulatorConfig, key: jax.Array) -> World:
    """Draw every persistent parameter of the market from ``key``.

    The regime shifts are re-centred on the marginal regime frequencies.  The production
    intercept ``b'`` is then set on a pilot sample of ``pilot_requests`` requests (all
    eligible candidates, slot 0, a key of its own) so that the mean production pCTR equals
    the mean oracle CTR over the *candidate population*: the production model is
    calibrated on average before any auction, and the over-estimation seen in the logs is
    the auction's selection bias (plus nothing else).

    The draws are one jitted call with ``config`` static (the first call for a config
    compiles, which takes seconds; ``n_chunks`` is ignored there, so configs that differ only
    in it share the compilation). :func:`simulate` and its relatives draw the world from
    ``fold_in(key, 0)``; pass that key to get the same world.

    Args:
      config: the simulator configuration (its sizes give the arrays' shapes).
      key: a JAX PRNG key (``jax.random.key(seed)``).

    Returns:
      A :class:`World` of JAX arrays (see there for the fields and shapes).

    Example:
      >>> import jax
      >>> from calib_jax.data.simulator import make_world, tiny_config
      >>> world = make_world(tiny_config(n_chunks=1), jax.random.key(0))
      >>> world.user_vec.shape, world.ad_vec.shape, world.regime_shift.shape  # U=2000, A=300, d=4, G=3
      ((2000, 4), (300, 4), (3,))
      >>> round(float(world.intercept), 2)  # b = config.intercept; b' is fitted on the pilot
      -5.15
    """
    return _make_world(check_key(key), config=shape_config(config))


class _Stream:
    """Slices of one big random block (one threefry call compiles much faster than many)."""

    def __init__(self, block: jax.Array) -> None:
        self.block, self.pos = block, 0

    def take(self, shape: tuple[int, ...]) -> jax.Array:
        size = math.prod(shape)
        out = self.block[self.pos:self.pos + size].reshape(shape)
        self.pos += size
        return out


@functools.partial(jax.jit, static_argnames=("config",))
def _make_world(key: jax.Array, *, config: SimulatorConfig) -> World:
    c = config
    f32 = jnp.float32
    k_norm, k_unif, k_pilot = jax.random.split(key, 3)
    U, A, V = c.n_users, c.n_ads, c.n_advertisers
    n_normal = (U * (2 + c.latent_dim) + A * (4 + c.latent_dim) + 3 * V
                + c.n_cohorts * (1 + c.n_regimes) + c.n_creatives + 2 * c.n_media
                + c.n_media * c.n_placements)
    z = _Stream(jax.random.normal(k_norm, (n_normal,), dtype=f32))
    u = _Stream(jax.random.uniform(k_unif, (U + 3 * A,), dtype=f32))

    def normal(shape, scale):
        return scale * z.take(shape)

    def randint(shape, n):
        return jnp.minimum((u.take(shape) * n).astype(jnp.int32), n - 1)

    user_cohort = randint((U,), c.n_cohorts)
    ad_advertiser = jnp.concatenate([
        jnp.arange(V, dtype=jnp.int32),  # every advertiser owns at least one ad
        randint((A - V,), V),
    ])
    ad_advertiser = ad_advertiser[jnp.argsort(u.take((A,)))]  # random permutation
    ad_creative = randint((A,), c.n_creatives)
    ad_quality = normal((A,), c.ad_quality_std)
    hours = jnp.arange(c.n_hours, dtype=f32)
    phase = 2.0 * math.pi * hours / c.n_hours
    hour_effect = c.hour_amplitude * jnp.sin(phase - 1.0)
    regime_hour = c.regime_hour_amplitude * jnp.stack(
        [jnp.cos(phase - 2.0 * math.pi * g / c.n_regimes) for g in range(c.n_regimes)], axis=1
    )
    regime_cohort = normal((c.n_cohorts, c.n_regimes), c.regime_cohort_std)
    hour_logits = 0.8 * jnp.sin(phase - 2.0)
    # marginal regime frequencies (uniform cohorts, diurnal hours)
    hour_p = jax.nn.softmax(hour_logits)
    probs = jax.nn.softmax(regime_cohort[:, None, :] + regime_hour[None, :, :], axis=-1)
    regime_freq = jnp.einsum("chg,h->g", probs, hour_p, precision=MATMUL) / c.n_cohorts
    shift = jnp.asarray(c.regime_shift, f32)
    shift = shift - jnp.sum(regime_freq * shift)
    kappa = jnp.asarray(c.regime_interaction, f32)
    budget_share = jax.nn.softmax(normal((V,), c.budget_log_std))
    intercept = jnp.asarray(c.intercept, f32)
    world = World(
        user_cohort=user_cohort,
        user_bias=normal((U,), c.user_std),
        user_age=normal((U,), 1.0),
        user_vec=normal((U, c.latent_dim), 1.0),
        ad_advertiser=ad_advertiser,
        ad_creative=ad_creative,
        ad_quality=ad_quality,
        ad_vec=normal((A, c.latent_dim), 1.0),
        ad_error=normal((A,), c.ad_error_std),
        ad_hist=ad_quality + normal((A,), 0.5 * c.ad_quality_std),
        ad_age=normal((A,), 1.0),
        advertiser_effect=normal((V,), c.advertiser_std),
        advertiser_value=jnp.exp(normal((V,), c.value_log_std)),
        advertiser_budget=budget_share * (c.budget_per_request * c.requests_per_chunk),
        cohort_effect=normal((c.n_cohorts,), c.cohort_std),
        creative_effect=normal((c.n_creatives,), c.creative_std),
        media_effect=normal((c.n_media,), c.media_std),
        placement_effect=normal((c.n_media * c.n_placements,), c.placement_std),
        hour_effect=hour_effect,
        position_effect=jnp.asarray(c.position_effects, f32),
        media_logits=normal((c.n_media,), 0.7),
        hour_logits=hour_logits,
        regime_cohort=regime_cohort,
        regime_hour=regime_hour,
        regime_shift=shift,
        regime_interaction=kappa,
        prod_regime_shift=jnp.asarray(c.prod_regime_shift, f32),
        kappa_bar=jnp.sum(regime_freq * kappa),
        intercept=intercept,
        prod_intercept=intercept,
    )
    return world._replace(prod_intercept=intercept + _pilot_offset(c, world, k_pilot))


def _pilot_offset(config: SimulatorConfig, world: World, key: jax.Array) -> jax.Array:
    """Scalar b solving mean sigma(ell + b) = mean sigma(eta) on a pilot candidate sample."""
    # the intercept calibrates the unscaled score; prod_logit_scale and prod_regime_scale distort it afterwards
    cfg = dataclasses.replace(config, requests_per_chunk=config.pilot_requests, prod_logit_scale=1.0,
                              prod_regime_scale=())
    d = request_draws(cfg, key, cfg.pilot_requests)
    user, cohort, hour, media, placement, regime = sample_contexts(cfg, world, d)
    cand, valid = sample_candidates(cfg, d)
    eta, ell = candidate_logits(cfg, world, user, cohort, hour, media, placement, regime,
                                 cand, d["noise"])
    w = valid.astype(eta.dtype)
    target = jnp.sum(w * jax.nn.sigmoid(eta)) / jnp.sum(w)

    def newton(_, b):
        p = jax.nn.sigmoid(ell + b)
        f = jnp.sum(w * p) / jnp.sum(w) - target
        fp = jnp.sum(w * p * (1.0 - p)) / jnp.sum(w)
        return b - f / fp

    return jax.lax.fori_loop(0, 30, newton, jnp.zeros((), eta.dtype))


def world_and_request_keys(key: jax.Array) -> tuple[jax.Array, jax.Array]:
    key = check_key(key)  # a jnp.int32 seed passed the old isinstance test and failed inside JAX
    return jax.random.fold_in(key, 0), jax.random.fold_in(key, 1)
