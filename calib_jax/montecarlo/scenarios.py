"""Scenario generators: synthetic CTR populations with known oracle probabilities.

A scenario draws, from one key, a *population* of ``n`` impressions (``n`` is static):

* categorical fields ``media`` and ``cohort`` with skewed (random) frequencies,
* a latent binary ``regime`` (not observed as a field; its frequency depends on the
  cohort), used by the model variants to create miscalibration that differs in sign
  across regimes,
* dense features ``x`` (n, d),
* the oracle logit

  .. math:: \\eta_i = b_0 + a_{m(i)} + c_{c(i)} + u_{m(i)} v_{c(i)} + r_{g(i)} + x_i^\\top\\beta,

  and the oracle CTR :math:`\\pi_i = \\sigma(\\eta_i)`.

Two population designs use this generator (the study records which):

* ``fixed`` (the protocol of "Calibration is Grouping", VR-SAG, anonymous authors, under
  review, §3.2; the default): one population law is
  drawn once (:func:`fixed_world`: the coefficients' key, and the intercept that puts the
  population's mean oracle CTR at a target such as 3%); every trial draws new rows, a new
  model variant and new labels from that one law.
* ``pooled`` ("varying data distributions", App. C.1 of the same paper): the coefficients,
  including the base CTR (uniform on the logit scale in ``base_ctr``), are redrawn per trial.

Labels are drawn later, from ``pi``, after the model variant has been applied (see
:mod:`calib_jax.montecarlo.variants`).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from calib_jax._src import validation as V
from calib_jax._src.fusion import materialize
from calib_jax._src.precision import MATMUL

__all__ = ["ScenarioConfig", "Population", "FixedWorld", "PopulationLaw", "sample_population", "fixed_world"]


@dataclasses.dataclass(frozen=True)
class ScenarioConfig:
    """Static description of the population family (hashable; safe as a jit static arg).

    Attributes:
      n_media, n_cohorts: number of levels of the two categorical fields.
      n_dense: number of dense features.
      base_ctr: range (low, high) of the population's typical CTR; the intercept is drawn
        uniformly on the logit scale between these two.
      field_scale: range of the standard deviation of the media / cohort main effects.
      interaction_scale: standard deviation of the media x cohort interaction factors.
      regime_effect: range of the absolute logit shift between the two latent regimes.
      dense_scale: range of the norm of the dense-feature slope vector.

    Checked when built (``ValueError`` naming the field): sizes are positive ints
    (``n_dense`` >= 0), ``base_ctr`` lies in (0, 1), the other ranges and
    ``interaction_scale`` are finite and >= 0, and every range has low <= high.
    """

    n_media: int = 8
    n_cohorts: int = 6
    n_dense: int = 2
    base_ctr: tuple[float, float] = (0.01, 0.10)
    field_scale: tuple[float, float] = (0.2, 0.8)
    interaction_scale: float = 0.3
    regime_effect: tuple[float, float] = (0.0, 0.8)
    dense_scale: tuple[float, float] = (0.4, 1.2)

    def __post_init__(self) -> None:
        # checked when built: a CTR range reaching 0 made every trial's metrics NaN, silently
        for name in ("n_media", "n_cohorts"):
            V.check_positive_int(getattr(self, name), name)
        if isinstance(self.n_dense, bool) or not isinstance(self.n_dense, int) or self.n_dense < 0:
            raise ValueError(f"`n_dense` must be an int >= 0, got {self.n_dense!r}")
        ranges = {"base_ctr": V.config_range(self.base_ctr, "base_ctr", low=0.0, high=1.0, open_low=True,
                                             open_high=True)}
        for name in ("field_scale", "regime_effect", "dense_scale"):
            ranges[name] = V.config_range(getattr(self, name), name, low=0.0)
        for name, value in ranges.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "interaction_scale", V.config_number(self.interaction_scale, "interaction_scale",
                                                                      low=0.0))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


class Population(NamedTuple):
    r"""One drawn population (all arrays have leading length ``n``).

    Attributes:
      eta: (n,) float oracle logits :math:`\eta_i`.
      oracle: (n,) float oracle CTRs :math:`\sigma(\eta_i)` in (0, 1).
      fields: (n, 2) int32 categorical fields ``[media, cohort]``, media in
        ``[0, n_media)`` and cohort in ``[0, n_cohorts)``.
      regime: (n,) int32 latent regime in {0, 1}.
      x: (n, d) float dense features (d = ``n_dense``).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax.montecarlo import Population
      >>> eta = jnp.array([-2.0, 0.0])
      >>> pop = Population(eta=eta, oracle=jax.nn.sigmoid(eta), fields=jnp.zeros((2, 2), jnp.int32),
      ...                  regime=jnp.array([0, 1]), x=jnp.zeros((2, 1)))
      >>> round(float(pop.oracle[1]), 4)  # sigmoid(0)
      0.5
    """

    eta: jax.Array  # (n,) oracle logit
    oracle: jax.Array  # (n,) oracle CTR sigma(eta)
    fields: jax.Array  # (n, 2) int32: [media, cohort]
    regime: jax.Array  # (n,) int32 in {0, 1}
    x: jax.Array  # (n, d) dense features


def _uniform(key: jax.Array, lo_hi: tuple[float, float], shape: tuple[int, ...] = ()) -> jax.Array:
    lo, hi = lo_hi
    return jax.random.uniform(key, shape, minval=lo, maxval=hi)


def _categorical(key: jax.Array, logits: jax.Array, n: int) -> jax.Array:
    """Inverse-CDF categorical draw: one uniform per row (the Gumbel-max trick of
    ``jax.random.categorical`` needs K normal-cost draws per row, ~K x slower on CPU)."""
    cdf = jnp.cumsum(jax.nn.softmax(logits))
    u = jax.random.uniform(key, (n,))
    return jnp.minimum(jnp.sum(u[:, None] >= cdf[None, :-1], axis=1), logits.shape[0] - 1
                       ).astype(jnp.int32)


class FixedWorld(NamedTuple):
    """A population law held fixed across trials (the ``fixed`` design).

    Attributes:
      key: the key of the population's coefficients (effects, slopes, field frequencies).
      intercept: () the intercept :math:`b_0` that replaces the random base-CTR draw.
    """

    key: jax.Array
    intercept: jax.Array


class PopulationLaw(NamedTuple):
    """Either design's population law as arrays, so that one compiled trial serves both.

    With ``fixed`` true it is the ``fixed`` design's :class:`FixedWorld` (coefficients from
    ``key``, intercept ``intercept``); with ``fixed`` false the ``pooled`` design's law
    (coefficients and base CTR drawn from each trial's own key; ``key`` and ``intercept``
    unused). The choice is a select on the coefficient key and the intercept, so each design
    draws the same bits as with a :class:`FixedWorld` or no world.

    Attributes:
      fixed: () bool array, true for the fixed design.
      key: the fixed world's coefficient key (typed or raw; ``key(0)``, unused, when pooled).
      intercept: () float, the fixed world's intercept (0, unused, when pooled).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax.montecarlo import FixedWorld, PopulationLaw
      >>> bool(PopulationLaw.of(None).fixed)  # the pooled design
      False
      >>> wkey = jax.random.key(3)
      >>> law = PopulationLaw.of(FixedWorld(wkey, jnp.float32(-3.0)))
      >>> k = law.coefficient_key(jax.random.key(9))  # the world's key, not the trial's
      >>> bool(law.fixed), bool(jnp.all(jax.random.key_data(k) == jax.random.key_data(wkey)))
      (True, True)
    """

    fixed: jax.Array  # () bool
    key: jax.Array
    intercept: jax.Array  # ()

    @classmethod
    def of(cls, world: FixedWorld | None) -> PopulationLaw:
        """The law of ``world`` (``None``: the pooled design)."""
        if world is None:
            return cls(jnp.asarray(False), jax.random.key(0), jnp.zeros((), jnp.result_type(float)))
        return cls(jnp.asarray(True), world.key, jnp.asarray(world.intercept))

    def coefficient_key(self, trial_key: jax.Array) -> jax.Array:
        """``key`` under the fixed design, ``trial_key`` under the pooled one (typed keys, or
        raw ``uint32`` key data like ``trial_key``)."""
        typed = jnp.issubdtype(trial_key.dtype, jax.dtypes.prng_key)
        law = jax.random.key_data(self.key) if jnp.issubdtype(self.key.dtype, jax.dtypes.prng_key) else self.key
        data = jnp.where(self.fixed, law, jax.random.key_data(trial_key) if typed else trial_key)
        return jax.random.wrap_key_data(data, impl=jax.random.key_impl(trial_key)) if typed else data


def sample_population(key: jax.Array, n: int, cfg: ScenarioConfig = ScenarioConfig(), *,
                      row_key: jax.Array | None = None,
                      intercept: jax.Array | float | None = None,
                      use_intercept: jax.Array | None = None) -> Population:
    """Draw a population of ``n`` impressions with oracle CTRs (pure; jit/vmap-able in ``key``).

    Args:
      key: PRNG key of the population's *coefficients* (base CTR, effects, slopes).
      n: number of rows (static).
      cfg: the population family (hashable; static under ``jit``).
      row_key: PRNG key of the *rows* (fields, regimes, features).  Defaults to a key derived
        from ``key``; pass a separate key to resample rows from a fixed population law
        (the per-configuration repetitions of Fig 4).
      intercept: optional :math:`b_0` replacing the draw from ``cfg.base_ctr`` (the fixed
        design, :func:`fixed_world`); every other coefficient is drawn as without it.
      use_intercept: optional traced bool: replace the draw by ``intercept`` only where it is
        true (:class:`PopulationLaw`).

    Returns:
      :class:`Population` of ``n`` rows (float32 arrays unless x64 is on). Jit- and vmap-able
      with ``n`` and ``cfg`` static; only the static inputs are checked (the keys' type, ``n``
      a positive int: ``ValueError`` naming them), no values. (Compiling the generator takes seconds:
      the example only traces it.)

    Example:
      >>> import jax
      >>> from calib_jax.montecarlo import ScenarioConfig, sample_population
      >>> pop = jax.eval_shape(lambda k: sample_population(k, 100, ScenarioConfig(n_dense=3)), jax.random.key(0))
      >>> pop.eta.shape, pop.fields.shape, pop.fields.dtype, pop.x.shape
      ((100,), (100, 2), dtype('int32'), (100, 3))
    """
    # static checks only (the type of the key, the size): a seed or n=-1 failed inside JAX's compiler
    key, n = V.check_key(key), V.check_positive_int(n, "n")
    if row_key is not None:
        row_key = V.check_key(row_key, "row_key")
    ks = jax.random.split(key, 12)
    rk = jax.random.split(jax.random.fold_in(key, 7) if row_key is None else row_key, 5)
    logit_lo = jnp.log(cfg.base_ctr[0] / (1 - cfg.base_ctr[0]))
    logit_hi = jnp.log(cfg.base_ctr[1] / (1 - cfg.base_ctr[1]))
    b0 = jax.random.uniform(ks[0], (), minval=logit_lo, maxval=logit_hi)
    if intercept is not None:
        given = jnp.asarray(intercept, b0.dtype)
        b0 = given if use_intercept is None else jnp.where(use_intercept, given, b0)
    # Skewed field frequencies: random logits of the categorical distributions.
    media_logit = 1.0 * jax.random.normal(ks[1], (cfg.n_media,))
    cohort_logit = 0.7 * jax.random.normal(ks[2], (cfg.n_cohorts,))
    media = _categorical(rk[0], media_logit, n)
    cohort = _categorical(rk[1], cohort_logit, n)
    a = _uniform(ks[5], cfg.field_scale) * jax.random.normal(ks[6], (cfg.n_media,))
    c = _uniform(ks[7], cfg.field_scale) * jax.random.normal(ks[8], (cfg.n_cohorts,))
    uv = cfg.interaction_scale * jax.random.normal(ks[9], (2, max(cfg.n_media, cfg.n_cohorts)))
    # Latent regime: its frequency varies by cohort (so fields are only partly informative).
    kr, kb = jax.random.split(ks[10])
    p_regime = jax.nn.sigmoid(jax.random.normal(kr, (cfg.n_cohorts,)))
    # the coefficient tables are gathered by row below: computed once, not once per row
    a, c, uv, p_regime = materialize(a, c, uv, p_regime)
    regime = jax.random.bernoulli(rk[2], p_regime[cohort]).astype(jnp.int32)
    r_gap = _uniform(ks[11], cfg.regime_effect)
    x = jax.random.normal(rk[3], (n, cfg.n_dense))
    beta = jax.random.normal(kb, (cfg.n_dense,))
    beta = beta / jnp.linalg.norm(beta) * _uniform(jax.random.fold_in(kb, 1), cfg.dense_scale)
    eta = (b0 + a[media] + c[cohort] + uv[0, media] * uv[1, cohort]
           + r_gap * (regime.astype(x.dtype) - 0.5) + jnp.matmul(x, beta, precision=MATMUL))
    return Population(
        eta=eta,
        oracle=jax.nn.sigmoid(eta),
        fields=jnp.stack([media, cohort], axis=1),
        regime=regime,
        x=x,
    )


def fixed_world(key: jax.Array, cfg: ScenarioConfig = ScenarioConfig(), *,
                target_ctr: float = 0.03, n_ref: int = 1 << 16) -> FixedWorld:
    r"""The population law of the ``fixed`` design: coefficients from ``key``, and the
    intercept :math:`b_0` for which the population's mean oracle CTR equals ``target_ctr``.

    .. math:: \frac{1}{n_{ref}} \sum_i \sigma(b_0 + \eta_i - b_0^{draw}) = \text{target\_ctr}

    solved by 60 bisection steps on :math:`b_0 \in [-25, 25]` over ``n_ref`` reference rows
    of the population (their own row key, derived from ``key``). The mean CTR of the
    *logged* rows of a trial can differ from the target where a model variant selects rows
    (auction winners); studies report it.

    Args:
      key: PRNG key of the population's coefficients (e.g. :func:`~calib_jax.montecarlo.designs.world_key`).
      cfg: the population family (static).
      target_ctr: the population's mean oracle CTR, in (0, 1) (a Python number; static).
      n_ref: reference rows of the bisection (int >= 1; static).

    Returns:
      :class:`FixedWorld` with ``key`` and a () float ``intercept``. Raises ``ValueError`` for
      ``target_ctr`` outside (0, 1) or ``n_ref`` below 1. Jit-able in ``key`` (the bisection is one compiled
      program; compiling it takes seconds, so the example only traces it).

    Example:
      >>> import jax
      >>> from calib_jax.montecarlo import fixed_world
      >>> jax.eval_shape(fixed_world, jax.random.key(0)).intercept.shape
      ()
      >>> fixed_world(jax.random.key(0), target_ctr=1.5)
      Traceback (most recent call last):
        ...
      ValueError: `target_ctr` must be in (0, 1), got 1.5
    """
    if not 0.0 < float(target_ctr) < 1.0:
        raise ValueError(f"`target_ctr` must be in (0, 1), got {target_ctr!r}")
    key = V.check_key(key)
    n_ref = V.check_positive_int(n_ref, "n_ref")  # 0 rows bisected to an intercept of 25 (a CTR of 1)
    return FixedWorld(key=key, intercept=_fixed_world_intercept(key, cfg, float(target_ctr), int(n_ref)))


@functools.partial(jax.jit, static_argnums=(1, 2, 3))
def _fixed_world_intercept(key: jax.Array, cfg: ScenarioConfig, target_ctr: float, n_ref: int) -> jax.Array:
    """The bisection of :func:`fixed_world`, compiled as one program (2.4 s instead of 5 s
    op by op on the 2-core CPU; the same intercept, bit for bit)."""
    pop = sample_population(key, n_ref, cfg, row_key=jax.random.fold_in(key, 99), intercept=0.0)
    rest = pop.eta

    def step(_, lo_hi):
        lo, hi = lo_hi
        mid = 0.5 * (lo + hi)
        above = jnp.mean(jax.nn.sigmoid(mid + rest)) > target_ctr
        return jnp.where(above, lo, mid), jnp.where(above, mid, hi)

    lo, hi = jax.lax.fori_loop(0, 60, step, (jnp.asarray(-25.0, rest.dtype), jnp.asarray(25.0, rest.dtype)))
    return 0.5 * (lo + hi)
