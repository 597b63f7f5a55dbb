"""Simulator configuration: sizes and parameters, the standard scales, the names and
cardinalities of the logged columns, a stable hash of configs, and the layout of the
persistent market (:class:`World`; drawn by ``_world``, read by ``_traffic``, so both
import it from here and neither imports the other).

Private module: the public surface is listed in :mod:`calib_jax.data.simulator`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import numbers
from typing import Any, NamedTuple

import jax

from calib_jax._src.validation import check_text_keys

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


@dataclasses.dataclass(frozen=True)
class SimulatorConfig:
    """Frozen, hashable simulator configuration (static under ``jit``).

    Sizes:

    - ``n_users``, ``n_cohorts``, ``n_user_buckets``: user population, cohorts, hashed id buckets.
    - ``n_ads``, ``n_advertisers``, ``n_creatives``: ads, their advertisers and creative formats.
    - ``n_media``, ``n_placements``: media and placements per media (placement ids are global,
      ``media * n_placements + local``).
    - ``n_slots``: ad slots (positions) per request; ``n_hours``; ``n_regimes``: latent regimes.
    - ``latent_dim``: dimension of the user/ad latent vectors.
    - ``n_candidates``: candidate ads per request.
    - ``requests_per_chunk``, ``n_chunks``: requests per jitted chunk and number of chunks.

    Oracle CTR:

    - ``intercept`` (b), ``*_std``: main-effect scales; ``hour_amplitude``: amplitude of the
      diurnal effect; ``position_effects`` (one per slot); ``interaction_scale`` (lambda);
      ``regime_shift`` (delta_g, re-centred on the regime mix); ``regime_interaction`` (kappa_g),
      both one entry per regime; ``regime_cohort_std``, ``regime_hour_amplitude``: how strongly
      the cohort and the hour select the regime; ``user_age_weight`` (w).

    Production model:

    - ``ad_error_std`` (s_e), ``noise_std`` (s_eps), ``prod_regime_shift`` (extra tilde-delta_g,
      one per regime); ``prod_logit_scale`` (s_p, default 1): the production score's logit is
      multiplied by s_p after its intercept is set on the pilot, so s_p < 1 makes it
      under-confident (every logit pulled towards 0, a CTR of a few percent over-estimated
      several-fold: a miscalibration one temperature removes); ``pilot_requests``: size of
      the pilot sample that sets the production intercept b' (see :func:`make_world`);
      ``prod_regime_scale`` (r_g, one per regime, or empty for all 1): the production logit
      of an impression in regime g is multiplied by s_p r_g, a temperature that differs by
      regime. No global temperature or monotone map of the score undoes it (at one score the
      regimes' click rates differ), while a per-group temperature on an embedding that
      carries the regime does.

    Auction and bidding:

    - ``value_log_std`` (advertiser value per click is log-normal), ``budget_per_request`` (total
      budget per request over all advertisers, in value units), ``budget_log_std``,
      ``pacing_lr``, ``pacing_min``, ``pacing_max``, ``reserve_price``.

    Traffic:

    - ``user_zipf``, ``ad_zipf``: popularity exponents (index ``floor(N * u**zipf)``).

    Every size must be an int >= 1, with ``n_slots <= n_candidates <= n_ads`` and
    ``n_advertisers <= n_ads``; the per-slot and per-regime tuples need one entry per slot or
    regime. Every other setting is a finite real number (an int or a float, never a bool) in
    its domain (:data:`SETTING_DOMAINS`): ``intercept``, ``user_age_weight`` and the entries of
    ``position_effects``, ``regime_shift`` and ``prod_regime_shift`` any real; the standard
    deviations, amplitudes, ``interaction_scale``, the entries of ``regime_interaction``,
    ``pacing_lr`` and ``reserve_price`` >= 0; ``prod_logit_scale``, ``budget_per_request``,
    ``pacing_min``, ``pacing_max`` and the Zipf exponents > 0; and ``pacing_min <=
    pacing_max``. A violation raises ``ValueError`` naming the field when the config is built
    (a NaN intercept, an infinite noise or a zero Zipf exponent would otherwise simulate an
    all-NaN or one-user log). Use :func:`tiny_config`,
    :func:`default_config` or :func:`paper_config` (with keyword overrides) rather than the
    bare defaults, which are the default scale. The config is hashable, so the simulator's
    jitted chunk takes it as a static argument (a new config compiles anew; only
    ``n_chunks`` does not shape a chunk).

    Example:
      >>> from calib_jax.data.simulator import SimulatorConfig, tiny_config
      >>> cfg = tiny_config(n_chunks=2)
      >>> cfg.n_requests  # requests_per_chunk * n_chunks = 4096 * 2
      8192
      >>> cfg.to_dict()["position_effects"]
      [0.0, -0.4, -0.8]
      >>> SimulatorConfig(n_slots=2)  # position_effects still has 3 entries
      Traceback (most recent call last):
        ...
      ValueError: `position_effects` needs 2 entries (one per slot), got 3
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
    prod_logit_scale: float = 1.0
    prod_regime_scale: tuple[float, ...] = ()
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
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 2**31 - 1:
                # JAX counts and indexes in int32: 2**31 user buckets overflowed inside simulate
                raise ValueError(f"`{name}` must be a positive int below 2**31, got {v!r}")
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
        if not isinstance(self.prod_regime_scale, tuple | list):
            raise ValueError(f"`prod_regime_scale` must be a tuple of numbers, got {self.prod_regime_scale!r}")
        if len(self.prod_regime_scale) not in (0, self.n_regimes):
            raise ValueError(f"`prod_regime_scale` needs {self.n_regimes} entries (one per regime) or none, "
                             f"got {len(self.prod_regime_scale)}")
        for name, domain in SETTING_DOMAINS.items():
            value = getattr(self, name)
            if name in _TUPLE_SETTINGS:
                if not isinstance(value, tuple | list):
                    raise ValueError(f"`{name}` must be a tuple of numbers, got {value!r}")
                for v in value:
                    _check_number(name, v, domain, entry=True)
                # stored as a tuple of floats: a list made the config unhashable (so unusable as
                # a static argument), and an int (-5) hashed apart from the equal float (-5.0)
                object.__setattr__(self, name, tuple(float(v) for v in value))
            else:
                _check_number(name, value, domain)
                object.__setattr__(self, name, float(value))
        if not self.pacing_min <= self.pacing_max:
            raise ValueError(f"need `pacing_min` <= `pacing_max`, got {self.pacing_min!r} > {self.pacing_max!r}")

    @property
    def n_requests(self) -> int:
        """Total number of requests (``requests_per_chunk * n_chunks``)."""
        return self.requests_per_chunk * self.n_chunks

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python dict (for provenance records and hashing)."""
        return {k: (list(v) if isinstance(v, tuple) else v)
                for k, v in dataclasses.asdict(self).items()}


#: the domain of every numeric setting that is not a size: "real" (any finite number),
#: "nonnegative" (finite, >= 0) or "positive" (finite, > 0); a tuple setting's every entry
SETTING_DOMAINS: dict[str, str] = {
    "intercept": "real", "user_age_weight": "real", "position_effects": "real", "regime_shift": "real",
    "prod_regime_shift": "real",
    **{k: "nonnegative" for k in ("cohort_std", "user_std", "ad_quality_std", "advertiser_std", "creative_std",
                                  "media_std", "placement_std", "hour_amplitude", "interaction_scale",
                                  "regime_interaction", "regime_cohort_std", "regime_hour_amplitude", "ad_error_std",
                                  "noise_std", "value_log_std", "budget_log_std", "pacing_lr", "reserve_price")},
    **{k: "positive" for k in ("prod_logit_scale", "prod_regime_scale", "budget_per_request", "pacing_min",
                               "pacing_max", "user_zipf", "ad_zipf")},
}
_TUPLE_SETTINGS = ("position_effects", "regime_shift", "prod_regime_shift", "regime_interaction", "prod_regime_scale")
_DOMAIN_WORDS = {"real": "a finite number", "nonnegative": "a finite number >= 0", "positive": "a finite number > 0"}


#: the largest finite float32 (the simulator's working precision)
_FLOAT32_MAX = 3.4028234663852886e38


def _check_number(name: str, value: Any, domain: str, *, entry: bool = False) -> None:
    """``ValueError`` naming the setting unless ``value`` is a real number (not a bool) in ``domain``
    and finite in float32, where the simulator computes (1e308 became inf there)."""
    ok = (isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))
          and abs(float(value)) <= _FLOAT32_MAX)
    if ok:
        ok = domain == "real" or (float(value) >= 0.0 if domain == "nonnegative" else float(value) > 0.0)
    if not ok:
        what = f"every entry of `{name}`" if entry else f"`{name}`"
        raise ValueError(f"{what} must be {_DOMAIN_WORDS[domain]}, got {value!r}")


def default_config(**overrides: Any) -> SimulatorConfig:
    """Default scale: ~393k requests, ~1.1M logged impressions, CTR about 3%.

    The default :class:`SimulatorConfig` (200k users, 2,000 ads, 12 chunks of 32,768 requests);
    :func:`calib_jax.data.backbone.load_or_train` simulates it when given no config.

    Args:
      **overrides: any :class:`SimulatorConfig` field, replacing the default (e.g.
        ``n_chunks=4``); an unknown name raises ``TypeError``, an invalid value ``ValueError``.

    Returns:
      A frozen :class:`SimulatorConfig`.

    Example:
      >>> from calib_jax.data.simulator import default_config
      >>> cfg = default_config()
      >>> cfg.requests_per_chunk, cfg.n_chunks, cfg.n_requests  # 32768 * 12
      (32768, 12, 393216)
      >>> default_config(n_chunks=4).n_requests
      131072
    """
    return dataclasses.replace(SimulatorConfig(), **overrides)


def tiny_config(**overrides: Any) -> SimulatorConfig:
    """A tiny world for tests (a few thousand requests; compiles and runs in seconds).

    2,000 users, 300 ads, 30 advertisers, 12 candidates per request and 4 chunks of 4,096
    requests (about 49k logged impressions). The examples of this package use it, most with
    ``n_chunks=1``, which does not change the compiled chunk.

    Args:
      **overrides: any :class:`SimulatorConfig` field, replacing the tiny value; an unknown
        name raises ``TypeError``, an invalid value ``ValueError``.

    Returns:
      A frozen :class:`SimulatorConfig`.

    Example:
      >>> from calib_jax.data.simulator import tiny_config
      >>> cfg = tiny_config()
      >>> cfg.n_users, cfg.n_ads, cfg.n_candidates, cfg.n_slots
      (2000, 300, 12, 3)
      >>> cfg.n_requests, tiny_config(n_chunks=1).n_requests  # 4096 requests per chunk
      (16384, 4096)
    """
    base = SimulatorConfig(
        n_users=2_000, n_cohorts=6, n_user_buckets=64, n_ads=300, n_advertisers=30,
        n_creatives=4, n_media=4, n_placements=3, latent_dim=4, n_candidates=12,
        requests_per_chunk=4_096, n_chunks=4,
    )
    return dataclasses.replace(base, **overrides)


def paper_config(**overrides: Any) -> SimulatorConfig:
    """The paper's scale: ~15M logged impressions, CTR about 3%.

    The size of the AdAuction dataset in Table 7 of "Calibration is Grouping" (VR-SAG;
    anonymous authors, under review): 2M users, 20,000 ads, 1,000 advertisers, 80 chunks of
    65,536 requests. Stream it with :func:`simulate_to_disk`; it is too large to keep in
    memory comfortably.

    Args:
      **overrides: any :class:`SimulatorConfig` field, replacing the paper's value; an unknown
        name raises ``TypeError``, an invalid value ``ValueError``.

    Returns:
      A frozen :class:`SimulatorConfig`.

    Example:
      >>> from calib_jax.data.simulator import paper_config
      >>> cfg = paper_config()
      >>> cfg.n_users, cfg.n_ads, cfg.n_requests  # 65536 requests * 80 chunks
      (2000000, 20000, 5242880)
    """
    base = SimulatorConfig(
        n_users=2_000_000, n_user_buckets=16_384, n_ads=20_000, n_advertisers=1_000,
        requests_per_chunk=65_536, n_chunks=80,
    )
    return dataclasses.replace(base, **overrides)


def field_cardinalities(config: SimulatorConfig) -> dict[str, int]:
    """Number of distinct values of every categorical field (ids are in ``[0, card)``).

    Args:
      config: the simulator configuration.

    Returns:
      A dict from every name of :data:`FIELD_NAMES` (in that order) to its number of ids;
      placement ids are global, so ``placement`` has ``n_media * n_placements`` of them.
      These are the embedding-table sizes the backbone needs.

    Example:
      >>> from calib_jax.data.simulator import field_cardinalities, tiny_config
      >>> card = field_cardinalities(tiny_config())
      >>> card["ad"], card["placement"], card["position"]  # 300 ads; 4 media x 3 placements; 3 slots
      (300, 12, 3)
    """
    c = check_config(config)
    return {
        "user_cohort": c.n_cohorts, "user_bucket": c.n_user_buckets, "ad": c.n_ads,
        "advertiser": c.n_advertisers, "creative": c.n_creatives, "media": c.n_media,
        "placement": c.n_media * c.n_placements, "position": c.n_slots, "hour": c.n_hours,
        "regime": c.n_regimes,
    }


def config_hash(*configs: Any, extra: Any = None) -> str:
    """A stable 16-hex-digit hash of dataclass configs (and any JSON-able ``extra``).

    The first 16 hex digits of the SHA-256 of the configs' fields and ``extra`` as sorted-key
    JSON, so equal configs give the same hash in every process and on every machine (unlike
    Python's ``hash``). It names cache files and run directories.

    Args:
      *configs: dataclass instances (their fields are hashed) or JSON-able values; order
        matters.
      extra: optional JSON-able value hashed with them (a seed, a mode, a format version);
        anything not JSON-able is hashed by its ``repr``. Every mapping key, in ``extra``
        and in the configs, nested ones too, must be a ``str`` (else ``ValueError``: JSON
        writes ``1`` and ``"1"`` alike, so the two would share a cache name).

    Returns:
      A string of 16 lowercase hex digits.

    Example:
      >>> from calib_jax.data.simulator import config_hash, tiny_config
      >>> h = config_hash(tiny_config())
      >>> len(h), h == config_hash(tiny_config()), h == config_hash(tiny_config(n_chunks=2))
      (16, True, False)
      >>> h == config_hash(tiny_config(), extra=[0, "auction"])
      False
    """
    payload = [_hashed_fields(c) if dataclasses.is_dataclass(c) and not isinstance(c, type)
               else c for c in configs]
    check_text_keys(payload, "configs")
    check_text_keys(extra, "extra")
    blob = json.dumps([payload, extra], sort_keys=True, default=repr).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


#: fields added after cache files and run folders were named by :func:`config_hash`: at these
#: default values they are left out of the hash, so every earlier name stays valid
_HASH_NEUTRAL_DEFAULTS: dict[str, Any] = {"prod_logit_scale": 1.0, "prod_regime_scale": ()}


def _hashed_fields(config: Any) -> dict[str, Any]:
    fields = dataclasses.asdict(config)
    if isinstance(config, SimulatorConfig):
        fields = {k: v for k, v in fields.items()
                  if not (k in _HASH_NEUTRAL_DEFAULTS and v == _HASH_NEUTRAL_DEFAULTS[k])}
    return fields


def shape_config(config: SimulatorConfig) -> SimulatorConfig:
    """The config with fields that never shape a chunk normalised (fewer recompilations)."""
    return dataclasses.replace(check_config(config), n_chunks=1)


def check_config(config: Any, name: str = "config") -> SimulatorConfig:
    """``config`` if it is a :class:`SimulatorConfig`, else ``ValueError`` naming ``name`` (a
    dict failed in ``dataclasses.replace``, ``None`` in an attribute lookup)."""
    if not isinstance(config, SimulatorConfig):
        raise ValueError(f"`{name}` must be a SimulatorConfig (e.g. tiny_config(), default_config()), got "
                         f"{type(config).__name__}")
    return config


class World(NamedTuple):
    """All persistent parameters of one simulated market (arrays).

    Drawn by :func:`make_world`. Sizes: U = ``n_users``, A = ``n_ads``, V = ``n_advertisers``,
    C = ``n_cohorts``, K = ``n_creatives``, M = ``n_media``, P = ``n_placements``, H = ``n_hours``,
    S = ``n_slots``, G = ``n_regimes``, d = ``latent_dim``. Float arrays are float32, id arrays
    int32. The symbols are those of the model in :mod:`calib_jax.data.simulator`.

    Attributes:
      user_cohort: (U,) cohort id of every user, in [0, C).
      user_bias: (U,) user main effect beta_u.
      user_age: (U,) standard-normal dense feature x_u with a small effect (weight w).
      user_vec: (U, d) user latent vectors U_u.
      ad_advertiser: (A,) advertiser id of every ad (every advertiser owns at least one ad).
      ad_creative: (A,) creative id of every ad, in [0, K).
      ad_quality: (A,) ad main effect q_a.
      ad_vec: (A, d) ad latent vectors V_a.
      ad_error: (A,) persistent production error e_a of every ad.
      ad_hist: (A,) noisy observed quality (``ad_quality`` plus noise; a dense feature).
      ad_age: (A,) uninformative dense feature.
      advertiser_effect: (V,) advertiser main effect.
      advertiser_value: (V,) positive value per click (log-normal).
      advertiser_budget: (V,) target spend per chunk.
      cohort_effect: (C,) cohort main effect.
      creative_effect: (K,) creative main effect.
      media_effect: (M,) media main effect.
      placement_effect: (M * P,) placement main effect (global placement ids).
      hour_effect: (H,) diurnal main effect.
      position_effect: (S,) slot effect rho_s (``config.position_effects``).
      media_logits: (M,) logits of the traffic mix over media.
      hour_logits: (H,) logits of the diurnal traffic.
      regime_cohort: (C, G) regime logits by cohort.
      regime_hour: (H, G) regime logits by hour.
      regime_shift: (G,) regime shift delta_g, re-centred on the regime frequencies.
      regime_interaction: (G,) regime interaction strength kappa_g.
      prod_regime_shift: (G,) extra production distortion tilde-delta_g.
      kappa_bar: () regime-averaged interaction strength used by the production model.
      intercept: () oracle intercept b.
      prod_intercept: () production intercept b' (set on the pilot sample).
    """

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
