"""An AdAuction-like ad-auction simulator with oracle click-through rates.

The simulator stands in for the proprietary one behind the AdAuction dataset of
seeds/000 (§3 "Dataset with ground-truth CTR", Appendix H.2, Table 7).  It keeps the
mechanism that matters for calibration studies: auto-bidding agents bid
``value x pCTR x pacing`` with a *noisy production pCTR*, second-price auctions pick the
winners, and only winners are logged.  Ads whose production pCTR is over-estimated bid
too high, win more often and are over-represented in the log (sample selection bias), so
the logged production pCTR over-estimates the logged click rate although it is nearly
unbiased over all candidates (compare ``exposure="auction"`` with ``exposure="random"``).

Generative model (all parameters drawn once per world from the key, see
:func:`make_world`).  For request ``r`` (user ``u``, cohort ``c(u)``, media ``m``,
placement ``l``, hour ``h``, latent regime ``g``) and candidate ad ``a`` (advertiser
``v(a)``, creative ``k(a)``) shown in slot ``s``, the oracle logit is

.. math::

    \\eta = b + \\alpha_{c} + \\beta_u + w\\,x_u + q_a + \\alpha_{v} + \\alpha_{k}
          + \\alpha_m + \\alpha_l + \\alpha_h + \\rho_s
          + \\delta_g + \\kappa_g \\, \\lambda \\, \\frac{U_u^\\top V_a}{\\sqrt{d}},
    \\qquad \\pi = \\sigma(\\eta),

with main effects, a user x ad latent interaction and regime-specific terms
(shift ``delta_g``, interaction strength ``kappa_g``).  The production model knows every
main effect but not the regime: it uses the regime-averaged shift and interaction
strength, plus a persistent per-ad error ``e_a`` and per-impression noise ``eps``,

.. math::

    \\ell = b' + (\\text{main effects}) + \\tilde\\delta_g
          + \\bar\\kappa \\, \\lambda \\, \\frac{U_u^\\top V_a}{\\sqrt{d}} + e_a + \\varepsilon,
    \\qquad \\hat p = \\sigma(\\ell),

where the intercept ``b'`` is set on a pilot sample so that the mean production pCTR
matches the mean oracle CTR over all candidates (the production model is calibrated on
average before the auction; this also absorbs the Jensen inflation of the noise) and
``tilde-delta_g`` is an optional extra regime distortion (default 0).  Regimes with
``delta_g > bar-delta`` are under-estimated and the others over-estimated, so the
production model's miscalibration differs in sign across regimes.

Bidding and auctions: advertiser ``v`` bids ``value_v * m_v * hat-p`` (position-free
pCTR); the ``n_slots`` highest bids above the reserve win slots 0, 1, ... (generalised
second price: the winner of slot ``s`` pays the next-highest bid, at least the reserve).
After every chunk of requests each pacing multiplier moves towards spending the
advertiser's budget evenly over the chunks,
``m_v <- clip(m_v * exp(eta_p * (B_v - spend_v) / B_v), m_min, m_max)``.

Everything is vectorised JAX; a chunk of requests is one jitted call, chunks run in a
Python loop carrying the pacing state, and every chunk's key is ``fold_in(key, chunk)``,
so results are deterministic per key.  :func:`simulate_to_disk` streams chunks to
``.npz`` files with a manifest (atomic writes, resumable) for the paper scale.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io as _io
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax.io import atomic_write_bytes, write_json

__all__ = [
    "SimulatorConfig",
    "default_config",
    "tiny_config",
    "paper_config",
    "World",
    "Impressions",
    "FullMatrix",
    "FIELD_NAMES",
    "DENSE_NAMES",
    "field_cardinalities",
    "config_hash",
    "make_world",
    "iter_chunks",
    "simulate",
    "simulate_to_disk",
    "load_from_disk",
    "simulate_full_matrix",
    "summary_stats",
]

#: Names of the columns of :attr:`Impressions.fields` (in order).
FIELD_NAMES: tuple[str, ...] = (
    "user_cohort",
    "user_bucket",
    "ad",
    "advertiser",
    "creative",
    "media",
    "placement",
    "position",
    "hour",
    "regime",
)
#: Names of the columns of :attr:`Impressions.dense` (in order).
DENSE_NAMES: tuple[str, ...] = ("user_activity", "user_age", "ad_hist_quality", "ad_age")

_EXPOSURES = ("auction", "random")
_FULL_MATRIX_STREAM = 2**31 - 1  # fold_in index of the full-matrix contexts (never a chunk)


@dataclasses.dataclass(frozen=True)
class SimulatorConfig:
    """Frozen, hashable simulator configuration (static under ``jit``).

    Sizes:
      n_users, n_cohorts, n_user_buckets: user population, cohorts, hashed id buckets.
      n_ads, n_advertisers, n_creatives: ads, their advertisers and creative formats.
      n_media, n_placements: media and placements per media (placement ids are global,
        ``media * n_placements + local``).
      n_slots: ad slots (positions) per request; n_hours; n_regimes: latent regimes.
      latent_dim: dimension of the user/ad latent vectors.
      n_candidates: candidate ads per request.
      requests_per_chunk, n_chunks: requests per jitted chunk and number of chunks.
    Oracle CTR:
      intercept, *_std: main-effect scales; position_effects (one per slot);
      interaction_scale (lambda); regime_shift (delta_g, re-centred on the regime mix);
      regime_interaction (kappa_g); user_age_weight (w).
    Production model:
      ad_error_std (s_e), noise_std (s_eps), prod_regime_shift (extra tilde-delta_g).
    Auction and bidding:
      value_log_std (advertiser value per click is log-normal), budget_per_request (total
      budget per request over all advertisers, in value units), budget_log_std,
      pacing_lr, pacing_min, pacing_max, reserve_price.
    Traffic:
      user_zipf, ad_zipf: popularity exponents (index ``floor(N * u**zipf)``).
    """

    n_users: int = 200_000
    n_cohorts: int = 12
    n_user_buckets: int = 1024
    n_ads: int = 2_000
    n_advertisers: int = 200
    n_creatives: int = 8
    n_media: int = 8
    n_placements: int = 6
    n_slots: int = 3
    n_hours: int = 24
    n_regimes: int = 3
    latent_dim: int = 8
    n_candidates: int = 24
    requests_per_chunk: int = 32_768
    n_chunks: int = 12
    # oracle CTR
    intercept: float = -5.15
    cohort_std: float = 0.35
    user_std: float = 0.35
    user_age_weight: float = 0.2
    ad_quality_std: float = 0.6
    advertiser_std: float = 0.25
    creative_std: float = 0.25
    media_std: float = 0.35
    placement_std: float = 0.25
    hour_amplitude: float = 0.25
    position_effects: tuple[float, ...] = (0.0, -0.4, -0.8)
    interaction_scale: float = 0.8
    regime_shift: tuple[float, ...] = (0.5, 0.0, -0.35)
    regime_interaction: tuple[float, ...] = (1.15, 1.0, 0.85)
    regime_cohort_std: float = 1.0
    regime_hour_amplitude: float = 0.8
    # production pCTR
    ad_error_std: float = 0.55
    noise_std: float = 0.3
    prod_regime_shift: tuple[float, ...] = (0.0, 0.0, 0.0)
    # bidding / auction
    value_log_std: float = 0.5
    budget_per_request: float = 0.02
    budget_log_std: float = 0.8
    pacing_lr: float = 0.5
    pacing_min: float = 0.05
    pacing_max: float = 1.0
    reserve_price: float = 1e-3
    # traffic
    user_zipf: float = 2.0
    ad_zipf: float = 1.5
    pilot_requests: int = 8_192

    def __post_init__(self) -> None:
        ints = ("n_users", "n_cohorts", "n_user_buckets", "n_ads", "n_advertisers",
                "n_creatives", "n_media", "n_placements", "n_slots", "n_hours", "n_regimes",
                "latent_dim", "n_candidates", "requests_per_chunk", "n_chunks",
                "pilot_requests")
        for name in ints:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"`{name}` must be a positive int, got {v!r}")
        if self.n_candidates < self.n_slots:
            raise ValueError(
                f"`n_candidates` ({self.n_candidates}) must be >= `n_slots` ({self.n_slots})"
            )
        if self.n_ads < self.n_candidates:
            raise ValueError(f"`n_ads` ({self.n_ads}) must be >= `n_candidates`")
        if self.n_advertisers > self.n_ads:
            raise ValueError("`n_advertisers` must be <= `n_ads`")
        if len(self.position_effects) != self.n_slots:
            raise ValueError(
                f"`position_effects` needs {self.n_slots} entries (one per slot), "
                f"got {len(self.position_effects)}"
            )
        for name in ("regime_shift", "regime_interaction", "prod_regime_shift"):
            if len(getattr(self, name)) != self.n_regimes:
                raise ValueError(f"`{name}` needs {self.n_regimes} entries (one per regime)")
        if not 0.0 < self.pacing_min <= self.pacing_max:
            raise ValueError("need 0 < `pacing_min` <= `pacing_max`")
        if self.budget_per_request <= 0.0:
            raise ValueError("`budget_per_request` must be > 0")

    @property
    def n_requests(self) -> int:
        """Total number of requests (``requests_per_chunk * n_chunks``)."""
        return self.requests_per_chunk * self.n_chunks

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python dict (for provenance records and hashing)."""
        return {k: (list(v) if isinstance(v, tuple) else v)
                for k, v in dataclasses.asdict(self).items()}


def default_config(**overrides: Any) -> SimulatorConfig:
    """Default scale: ~393k requests, ~1.1M logged impressions, CTR about 3%."""
    return dataclasses.replace(SimulatorConfig(), **overrides)


def tiny_config(**overrides: Any) -> SimulatorConfig:
    """A tiny world for tests (a few thousand requests; compiles and runs in seconds)."""
    base = SimulatorConfig(
        n_users=2_000, n_cohorts=6, n_user_buckets=64, n_ads=300, n_advertisers=30,
        n_creatives=4, n_media=4, n_placements=3, latent_dim=4, n_candidates=12,
        requests_per_chunk=4_096, n_chunks=4,
    )
    return dataclasses.replace(base, **overrides)


def paper_config(**overrides: Any) -> SimulatorConfig:
    """The paper's scale (seeds/000 Table 7): ~15M logged impressions, CTR about 3%.

    Stream it with :func:`simulate_to_disk`; it is too large to keep in memory comfortably.
    """
    base = SimulatorConfig(
        n_users=2_000_000, n_user_buckets=16_384, n_ads=20_000, n_advertisers=1_000,
        requests_per_chunk=65_536, n_chunks=80,
    )
    return dataclasses.replace(base, **overrides)


def field_cardinalities(config: SimulatorConfig) -> dict[str, int]:
    """Number of distinct values of every categorical field (ids are in ``[0, card)``)."""
    c = config
    return {
        "user_cohort": c.n_cohorts, "user_bucket": c.n_user_buckets, "ad": c.n_ads,
        "advertiser": c.n_advertisers, "creative": c.n_creatives, "media": c.n_media,
        "placement": c.n_media * c.n_placements, "position": c.n_slots, "hour": c.n_hours,
        "regime": c.n_regimes,
    }


def config_hash(*configs: Any, extra: Any = None) -> str:
    """A stable 16-hex-digit hash of dataclass configs (and any JSON-able ``extra``)."""
    payload = [dataclasses.asdict(c) if dataclasses.is_dataclass(c) and not isinstance(c, type)
               else c for c in configs]
    blob = json.dumps([payload, extra], sort_keys=True, default=repr).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


# --------------------------------------------------------------------------------------
# World
# --------------------------------------------------------------------------------------


class World(NamedTuple):
    """All persistent parameters of one simulated market (arrays)."""

    user_cohort: jax.Array        # (U,) int
    user_bias: jax.Array          # (U,)
    user_age: jax.Array           # (U,) dense feature with a small effect
    user_vec: jax.Array           # (U, d)
    ad_advertiser: jax.Array      # (A,) int
    ad_creative: jax.Array        # (A,) int
    ad_quality: jax.Array         # (A,)
    ad_vec: jax.Array             # (A, d)
    ad_error: jax.Array           # (A,) persistent production error e_a
    ad_hist: jax.Array            # (A,) noisy observed quality (dense feature)
    ad_age: jax.Array             # (A,) uninformative dense feature
    advertiser_effect: jax.Array  # (V,)
    advertiser_value: jax.Array   # (V,) value per click
    advertiser_budget: jax.Array  # (V,) target spend per chunk
    cohort_effect: jax.Array      # (C,)
    creative_effect: jax.Array    # (K,)
    media_effect: jax.Array       # (M,)
    placement_effect: jax.Array   # (M * P,)
    hour_effect: jax.Array        # (H,)
    position_effect: jax.Array    # (S,)
    media_logits: jax.Array       # (M,) traffic mix
    hour_logits: jax.Array        # (H,) diurnal traffic
    regime_cohort: jax.Array      # (C, G) regime logits by cohort
    regime_hour: jax.Array        # (H, G) regime logits by hour
    regime_shift: jax.Array       # (G,) delta_g (re-centred)
    regime_interaction: jax.Array  # (G,) kappa_g
    prod_regime_shift: jax.Array  # (G,) extra production distortion
    kappa_bar: jax.Array          # () regime-averaged interaction strength
    intercept: jax.Array          # () b
    prod_intercept: jax.Array     # () b'


def make_world(config: SimulatorConfig, key: jax.Array) -> World:
    """Draw every persistent parameter of the market from ``key``.

    The regime shifts are re-centred on the marginal regime frequencies.  The production
    intercept ``b'`` is then set on a pilot sample of ``pilot_requests`` requests (all
    eligible candidates, slot 0, a key of its own) so that the mean production pCTR equals
    the mean oracle CTR over the *candidate population*: the production model is
    calibrated on average before any auction, and the over-estimation seen in the logs is
    the auction's selection bias (plus nothing else).
    """
    return _make_world(key, config=_static(config))


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
    regime_freq = jnp.einsum("chg,h->g", probs, hour_p) / c.n_cohorts
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
    cfg = dataclasses.replace(config, requests_per_chunk=config.pilot_requests)
    d = _request_draws(cfg, key, cfg.pilot_requests)
    user, cohort, hour, media, placement, regime = _sample_contexts(cfg, world, d)
    cand, valid = _sample_candidates(cfg, d)
    eta, ell = _candidate_logits(cfg, world, user, cohort, hour, media, placement, regime,
                                 cand, d["noise"])
    w = valid.astype(eta.dtype)
    target = jnp.sum(w * jax.nn.sigmoid(eta)) / jnp.sum(w)

    def newton(_, b):
        p = jax.nn.sigmoid(ell + b)
        f = jnp.sum(w * p) / jnp.sum(w) - target
        fp = jnp.sum(w * p * (1.0 - p)) / jnp.sum(w)
        return b - f / fp

    return jax.lax.fori_loop(0, 30, newton, jnp.zeros((), eta.dtype))


# --------------------------------------------------------------------------------------
# One chunk of requests
# --------------------------------------------------------------------------------------


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


def _categorical(u: jax.Array, logits: jax.Array) -> jax.Array:
    """Inverse-CDF draw: ``u`` (R,) uniform, ``logits`` (K,) or (R, K) -> ids (R,)."""
    cdf = jnp.cumsum(jax.nn.softmax(logits, axis=-1), axis=-1)
    if cdf.ndim == 1:
        cdf = jnp.broadcast_to(cdf[None, :], (u.shape[0], cdf.shape[0]))
    k = jnp.sum(u[:, None] >= cdf[:, :-1], axis=1)
    return k.astype(jnp.int32)


def _request_draws(config: SimulatorConfig, key: jax.Array, n_requests: int) -> dict:
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


def _sample_contexts(config: SimulatorConfig, world: World, d: dict):
    c = config
    user = jnp.minimum((c.n_users * d["user"] ** c.user_zipf).astype(jnp.int32), c.n_users - 1)
    hour = _categorical(d["hour"], world.hour_logits)
    media = _categorical(d["media"], world.media_logits)
    local = jnp.minimum((d["placement"] * c.n_placements).astype(jnp.int32), c.n_placements - 1)
    placement = media * c.n_placements + local
    cohort = world.user_cohort[user]
    regime = _categorical(d["regime"], world.regime_cohort[cohort] + world.regime_hour[hour])
    return user, cohort, hour, media, placement, regime


def _sample_candidates(config: SimulatorConfig, d: dict):
    c = config
    cand = jnp.minimum((c.n_ads * d["cand"] ** c.ad_zipf).astype(jnp.int32), c.n_ads - 1)
    # a candidate repeated in the same request is dropped (only its first copy is eligible)
    same = cand[:, :, None] == cand[:, None, :]
    earlier = jnp.tril(jnp.ones((c.n_candidates, c.n_candidates), bool), k=-1)
    valid = ~jnp.any(same & earlier[None, :, :], axis=2)
    return cand, valid


def _candidate_logits(config: SimulatorConfig, world: World, user, cohort, hour, media,
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
        "rd,rcd->rc", world.user_vec[user], world.ad_vec[cand])
    base = main_req[:, None] + main_ad
    eta = (world.intercept + base + world.regime_shift[regime][:, None]
           + world.regime_interaction[regime][:, None] * inter)
    eps = jax.scipy.special.ndtri(jnp.clip(u_noise, 1e-7, 1.0 - 1e-7))
    ell = (world.prod_intercept + base + world.prod_regime_shift[regime][:, None]
           + world.kappa_bar * inter + world.ad_error[cand] + c.noise_std * eps)
    return eta, ell


@functools.partial(jax.jit, static_argnames=("config", "exposure"))
def _chunk(world: World, pacing: jax.Array, key: jax.Array, *, config: SimulatorConfig,
           exposure: str):
    """One chunk of requests -> slot-level arrays (R, S) plus the new pacing state."""
    c = config
    S = c.n_slots
    d = _request_draws(c, key, c.requests_per_chunk)
    user, cohort, hour, media, placement, regime = _sample_contexts(c, world, d)
    cand, valid = _sample_candidates(c, d)
    eta0, ell0 = _candidate_logits(c, world, user, cohort, hour, media, placement, regime,
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
    ell = jnp.take_along_axis(ell0, win, axis=1) + pos
    oracle = jax.nn.sigmoid(eta)
    click = d["click"] < oracle
    ad_adv = world.ad_advertiser[ad]
    spend = jax.ops.segment_sum(price.reshape(-1), ad_adv.reshape(-1),
                                num_segments=c.n_advertisers)
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


def _static(config: SimulatorConfig) -> SimulatorConfig:
    """The config with fields that never shape a chunk normalised (fewer recompilations)."""
    return dataclasses.replace(config, n_chunks=1)


def _check_exposure(exposure: str) -> str:
    if exposure not in _EXPOSURES:
        raise ValueError(f"`exposure` must be one of {_EXPOSURES}, got {exposure!r}")
    return exposure


def _world_and_request_keys(key: jax.Array) -> tuple[jax.Array, jax.Array]:
    if not isinstance(key, jax.Array):
        raise ValueError("`key` must be a JAX PRNG key (e.g. jax.random.key(0))")
    return jax.random.fold_in(key, 0), jax.random.fold_in(key, 1)


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

    Args:
      config: the simulator configuration.
      key: PRNG key; the world uses ``fold_in(key, 0)``, chunk ``i`` uses
        ``fold_in(fold_in(key, 1), i)``.  The same key gives the same world and the same
        requests for both exposure modes.
      exposure: ``"auction"`` (winners of second-price auctions are logged) or
        ``"random"`` (uniformly random eligible candidates are shown; same pCTR, no
        pacing, price 0).
      start, pacing: resume from chunk ``start`` with the pacing state saved after chunk
        ``start - 1`` (used by :func:`simulate_to_disk`).
      world: a precomputed :func:`make_world` result (defaults to the key's world).
    """
    _check_exposure(exposure)
    k_world, k_req = _world_and_request_keys(key)
    if world is None:
        world = make_world(config, k_world)
    if pacing is None:
        pacing_arr = jnp.full((config.n_advertisers,), config.pacing_max, jnp.float32)
    else:
        pacing_arr = jnp.asarray(pacing, jnp.float32)
    for i in range(start, config.n_chunks):
        out, pacing_arr, _ = _chunk(world, pacing_arr, jax.random.fold_in(k_req, i),
                                    config=_static(config), exposure=exposure)
        yield i, _to_impressions(out, i, config), np.asarray(pacing_arr)


def _concat(parts: list[Impressions]) -> Impressions:
    return Impressions(*[np.concatenate([getattr(p, f) for p in parts], axis=0)
                         for f in Impressions._fields])


def simulate(config: SimulatorConfig, key: jax.Array, *, exposure: str = "auction") -> Impressions:
    """Run the whole simulation in memory and return the logged impressions.

    See the module docstring for the model; ``exposure="random"`` shows random eligible
    candidates instead of auction winners (same world, requests and pCTR), which isolates
    the selection bias created by the auction.

    Example:
      >>> imp = simulate(tiny_config(), jax.random.key(0))
      >>> imp.fields.shape[1] == len(FIELD_NAMES)
      True
    """
    return _concat([imp for _, imp, _ in iter_chunks(config, key, exposure=exposure)])


# --------------------------------------------------------------------------------------
# Streaming to disk
# --------------------------------------------------------------------------------------


def _npz_bytes(**arrays: np.ndarray) -> bytes:
    buf = _io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]
    return buf.getvalue()


def simulate_to_disk(config: SimulatorConfig, key: jax.Array, out_dir: str | os.PathLike[str],
                     *, exposure: str = "auction", resume: bool = True,
                     progress: bool = False) -> Path:
    """Stream the simulation to ``out_dir/chunk_XXXXX.npz`` plus ``manifest.json``.

    Each chunk file holds the impressions of one chunk and the pacing state after it, and
    is written atomically before the manifest is updated, so an interrupted run resumes
    from the last finished chunk (``resume=True``) and produces the same files as an
    uninterrupted one.  A manifest written for another configuration, key or exposure
    raises ``ValueError`` rather than mixing runs.  Memory stays at one chunk.

    Returns:
      The manifest path.
    """
    _check_exposure(exposure)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "manifest.json"
    key_data = np.asarray(jax.random.key_data(key)).ravel().tolist()
    ident = config_hash(config, extra=[key_data, exposure])
    manifest: dict[str, Any] = {
        "config_hash": ident, "config": config.to_dict(), "exposure": exposure,
        "key_data": key_data, "n_chunks": config.n_chunks, "chunks": [], "complete": False,
    }
    start, pacing = 0, None
    if manifest_path.exists() and resume:
        old = json.loads(manifest_path.read_text())
        if old.get("config_hash") != ident:
            raise ValueError(
                f"`out_dir` {out} holds a run with a different config/key/exposure "
                f"(manifest hash {old.get('config_hash')} != {ident}); use another directory"
            )
        manifest = old
        start = len(manifest["chunks"])
        if start:
            with np.load(out / manifest["chunks"][-1]["file"]) as z:
                pacing = z["pacing"]
    world = make_world(config, _world_and_request_keys(key)[0])
    it = iter_chunks(config, key, exposure=exposure, start=start, pacing=pacing, world=world)
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, total=config.n_chunks - start, desc="simulate")
    for i, imp, pac in it:
        name = f"chunk_{i:05d}.npz"
        atomic_write_bytes(out / name, _npz_bytes(pacing=pac, **imp._asdict()))
        manifest["chunks"].append({"file": name, "n": len(imp), "clicks": int(imp.click.sum())})
        manifest["complete"] = len(manifest["chunks"]) == config.n_chunks
        write_json(manifest_path, manifest)
    if not manifest["complete"]:
        manifest["complete"] = len(manifest["chunks"]) == config.n_chunks
        write_json(manifest_path, manifest)
    return manifest_path


def load_from_disk(out_dir: str | os.PathLike[str], *, chunks: slice | None = None) -> Impressions:
    """Concatenate the chunks written by :func:`simulate_to_disk` (optionally a slice)."""
    out = Path(out_dir)
    manifest_path = out / "manifest.json"
    if not manifest_path.exists():
        raise FileNotFoundError(f"no manifest.json in {out}: run simulate_to_disk first")
    manifest = json.loads(manifest_path.read_text())
    entries = manifest["chunks"][chunks] if chunks is not None else manifest["chunks"]
    parts = []
    for e in entries:
        with np.load(out / e["file"]) as z:
            parts.append(Impressions(*[z[f] for f in Impressions._fields]))
    if not parts:
        raise ValueError(f"`out_dir` {out} holds no finished chunk")
    return _concat(parts)


# --------------------------------------------------------------------------------------
# Fully observed user x item matrix
# --------------------------------------------------------------------------------------


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
    """
    c = config
    for name, v, hi in (("n_users", n_users, c.n_users), ("n_items", n_items, c.n_ads)):
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= hi:
            raise ValueError(f"`{name}` must be an int in [1, {hi}], got {v!r}")
    k_world, k_req = _world_and_request_keys(key)
    world = make_world(c, k_world)
    arrays = _full_matrix(world, k_req, config=_static(c), n_users=n_users, n_items=n_items)
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
    d = _request_draws(c, k_ctx, n_users)
    user = jnp.arange(n_users, dtype=jnp.int32)
    cohort = world.user_cohort[user]
    hour = _categorical(d["hour"], world.hour_logits)
    media = _categorical(d["media"], world.media_logits)
    local = jnp.minimum((d["placement"] * c.n_placements).astype(jnp.int32), c.n_placements - 1)
    placement = media * c.n_placements + local
    regime = _categorical(d["regime"], world.regime_cohort[cohort] + world.regime_hour[hour])
    items = jnp.arange(n_items, dtype=jnp.int32)
    cand = jnp.broadcast_to(items[None, :], (n_users, n_items))
    u_pair = jax.random.uniform(k_pair, (2, n_users, n_items), dtype=jnp.float32)
    eta, ell = _candidate_logits(c, world, user, cohort, hour, media, placement, regime,
                                 cand, u_pair[0])
    oracle = jax.nn.sigmoid(eta)
    click = u_pair[1] < oracle
    user_fields = jnp.stack([cohort, user % c.n_user_buckets, media, placement, hour, regime],
                            axis=1)
    item_fields = jnp.stack([items, world.ad_advertiser[items], world.ad_creative[items]], axis=1)
    return oracle, ell, click, user_fields, item_fields


# --------------------------------------------------------------------------------------
# Dataset statistics (seeds/000 Table 7)
# --------------------------------------------------------------------------------------


def summary_stats(imp: Impressions) -> dict[str, Any]:
    """Table-7 style statistics of a log plus per-regime calibration ratios.

    Returns a dict with ``impressions``, ``clicks``, ``ctr``, ``mean_oracle``,
    ``mean_pctr``, ``ratio_pctr_oracle`` (mean pCTR / mean oracle CTR), ``ratio_pctr_ctr``,
    and ``regimes``: a list of per-regime dicts with the share of impressions, mean oracle,
    mean pCTR and the calibration deviation ``mean(pCTR) / mean(oracle) - 1`` (positive =
    over-estimation).
    """
    n = len(imp)
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
    out["ratio_pctr_ctr"] = out["mean_pctr"] / max(out["ctr"], 1e-12)
    regime = imp.field("regime")
    regimes = []
    for g in np.unique(regime):
        m = regime == g
        mo, mp = float(oracle[m].mean()), float(pctr[m].mean())
        regimes.append({"regime": int(g), "share": float(m.mean()), "ctr": float(click[m].mean()),
                        "mean_oracle": mo, "mean_pctr": mp, "calibration_dev": mp / mo - 1.0})
    out["regimes"] = regimes
    return out
