"""Model-variant families: how a trial's model logits depart from the oracle.

Each trial draws a :class:`VariantParams` from a :class:`VariantConfig` and turns the oracle
logits :math:`\\eta` of a population into model logits :math:`o`:

.. math::

    o_i = \\bar\\eta + s(\\eta_i - \\bar\\eta) + b
          + d_{m(i)} + \\rho\\,(2g_i - 1) + \\epsilon_i,\\qquad
    o_i \\leftarrow o_i + a \\tanh(o_i - \\bar o),

with, each switched on independently with probability ``p_active``:

* global temperature / bias: slope :math:`s` (inverse temperature around the population's
  mean logit) and offset :math:`b`;
* field-wise opposite biases: per-media shifts :math:`d_m = A\\,\\mathrm{sign}_m` centred so
  that their impression-weighted mean is 0 — the errors cancel globally (to first order in
  probability), so the overall bias hides them ("Calibration is Grouping", VR-SAG; anonymous
  authors, under review; App. E);
* a latent-regime bias :math:`\\pm\\rho` of opposite sign in the two regimes (no field
  exposes it);
* added logit noise :math:`\\epsilon_i \\sim N(0, \\sigma^2)` (a less informative model);
* a monotone non-linear distortion :math:`a\\tanh(\\cdot)` with :math:`a > -1`, which keeps
  the map increasing (AUC unchanged) but bends the reliability curve;
* selection-bias over-estimation: each impression is won by one of ``n_candidates``
  candidate rows, chosen with probability :math:`\\propto \\exp(\\lambda o)` (Gumbel-max).  With
  noisy logits the winners are those whose noise happened to be positive, so the logged
  predictions over-estimate their oracle CTR (the winner's curse of the same paper, §3).

Labels are Bernoulli draws from the (selected) oracle CTRs.

Simulator-derived variants.  :func:`sample_logged_trial_data` draws a trial from a fixed
pool of *logged* impressions of :mod:`calib_jax.data.simulator` (auction winners, so the
production pCTR already carries the simulator's selection bias and its regime-dependent
miscalibration): ``n`` rows are resampled with replacement, the variant distortion above
(without the candidate selection) is applied to the production logit, and labels are
redrawn from the oracle CTR.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from calib_jax._src import validation as V
from calib_jax._src.fusion import materialize
from calib_jax.montecarlo.scenarios import FixedWorld, Population, PopulationLaw, ScenarioConfig, sample_population

__all__ = [
    "VariantConfig",
    "VariantParams",
    "TrialData",
    "draw_variant",
    "apply_variant",
    "sample_trial_data",
    "LoggedPool",
    "pool_from_impressions",
    "sample_logged_trial_data",
]


@dataclasses.dataclass(frozen=True)
class VariantConfig:
    r"""Ranges of the per-trial distortions (hashable, JSON-able via :meth:`to_dict`).

    Ranges are (low, high) of a uniform draw; ``bias_sd`` is a normal standard deviation.
    ``p_active`` is the probability that each component is switched on in a trial.

    Attributes:
      p_active: probability in [0, 1] that each of the seven components is on.
      scale: range of the slope :math:`s` (inverse temperature; off: 1).
      bias_sd: standard deviation (>= 0) of the logit offset :math:`b` (off: 0).
      field_bias: range of the amplitude :math:`A` of the opposite per-media shifts.
      regime_bias: range of the latent-regime shift :math:`\rho`.
      noise_sd: range of the logit-noise standard deviation :math:`\sigma`.
      nonlinear: range of the distortion :math:`a` (keep the low end > -1: monotone map).
      selection: range of the selection strength :math:`\lambda` (0: winners at random).
      n_candidates: candidate rows per logged impression (int >= 1; 1: no selection; static).

    Checked when built (``ValueError`` naming the field): the ranges are finite with low <=
    high, ``scale`` above 0, ``noise_sd`` and ``selection`` at least 0, ``nonlinear`` above -1.

    Example:
      >>> from calib_jax.montecarlo import VariantConfig
      >>> cfg = VariantConfig(p_active=0.0)  # every component off: model = oracle
      >>> cfg.to_dict()["p_active"], cfg.n_candidates
      (0.0, 2)
    """

    p_active: float = 0.6
    scale: tuple[float, float] = (0.6, 1.5)
    bias_sd: float = 0.3
    field_bias: tuple[float, float] = (0.0, 0.6)
    regime_bias: tuple[float, float] = (0.0, 0.6)
    noise_sd: tuple[float, float] = (0.0, 0.8)
    nonlinear: tuple[float, float] = (-0.6, 0.8)
    selection: tuple[float, float] = (0.0, 3.0)
    n_candidates: int = 2

    def __post_init__(self) -> None:
        object.__setattr__(self, "p_active", V.config_number(self.p_active, "p_active", low=0.0, high=1.0))
        object.__setattr__(self, "bias_sd", V.config_number(self.bias_sd, "bias_sd", low=0.0))
        # (name, lowest value, whether the lowest is excluded)
        bounds = (("scale", 0.0, True), ("field_bias", -math.inf, False), ("regime_bias", -math.inf, False),
                  ("noise_sd", 0.0, False), ("nonlinear", -1.0, True), ("selection", 0.0, False))
        for name, low, open_low in bounds:
            object.__setattr__(self, name, V.config_range(getattr(self, name), name, low=low, open_low=open_low))
        V.check_positive_int(self.n_candidates, "n_candidates")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


class VariantParams(NamedTuple):
    r"""The distortion of one trial (all scalars; 0 / 1 means "off").

    Attributes:
      scale: () slope :math:`s` around the mean logit (1 when off).
      bias: () logit offset :math:`b` (0 when off).
      field_amp: () amplitude :math:`A` of the per-media shifts (0 when off).
      regime_amp: () latent-regime shift :math:`\rho` (0 when off).
      noise_sd: () logit-noise standard deviation :math:`\sigma` (0 when off).
      nonlinear: () distortion :math:`a` of :math:`a\tanh(o - \bar o)` (0 when off).
      selection: () selection strength :math:`\lambda` (0 when off).

    Example:
      >>> from calib_jax.montecarlo import VariantParams
      >>> VariantParams(scale=1.0, bias=0.5, field_amp=0.0, regime_amp=0.0, noise_sd=0.0,
      ...               nonlinear=0.0, selection=0.0).bias  # only a global logit offset
      0.5
    """

    scale: jax.Array
    bias: jax.Array
    field_amp: jax.Array
    regime_amp: jax.Array
    noise_sd: jax.Array
    nonlinear: jax.Array
    selection: jax.Array


class TrialData(NamedTuple):
    r"""What a trial's metric panel sees (length-``n`` arrays) plus the variant drawn.

    Attributes:
      logits: (n,) float model logits :math:`o_i`.
      probs: (n,) float model probabilities :math:`\sigma(o_i)`.
      labels: (n,) float labels in {0, 1}, drawn from ``oracle``.
      oracle: (n,) float oracle CTRs in (0, 1).
      fields: (n, 2) int32 ``[media, cohort]``.
      regime: (n,) int32 latent regime in {0, 1}.
      params: the trial's :class:`VariantParams`.

    See :func:`~calib_jax.montecarlo.panel.evaluate` for an example built by hand.
    """

    logits: jax.Array
    probs: jax.Array
    labels: jax.Array
    oracle: jax.Array
    fields: jax.Array  # (n, 2) int32 [media, cohort]
    regime: jax.Array
    params: VariantParams


def _u(key: jax.Array, lo_hi: tuple[float, float]) -> jax.Array:
    return jax.random.uniform(key, (), minval=lo_hi[0], maxval=lo_hi[1])


def draw_variant(key: jax.Array, cfg: VariantConfig = VariantConfig()) -> VariantParams:
    """Draw one trial's distortion from ``cfg`` (pure; vmap-able in ``key``).

    Each of the seven components is switched on independently with probability
    ``cfg.p_active`` and then drawn from its range; off components take their neutral value.

    Args:
      key: PRNG key (typed or raw).
      cfg: the distortion family (hashable; static under ``jit``).

    Returns:
      :class:`VariantParams` of () float arrays. Jit- and vmap-able in ``key``.

    Example:
      >>> import jax
      >>> from calib_jax.montecarlo import VariantConfig, draw_variant
      >>> p = jax.jit(lambda k: draw_variant(k, VariantConfig(p_active=0.0)))(jax.random.key(0))
      >>> [float(v) for v in p]  # all off: scale 1, everything else 0
      [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    """
    ks = jax.random.split(key, 14)
    on = jax.random.bernoulli(ks[0], cfg.p_active, (7,))
    pick = lambda i, val, off: jnp.where(on[i], val, off)
    return VariantParams(
        scale=pick(0, _u(ks[1], cfg.scale), 1.0),
        bias=pick(1, cfg.bias_sd * jax.random.normal(ks[2]), 0.0),
        field_amp=pick(2, _u(ks[3], cfg.field_bias), 0.0),
        regime_amp=pick(3, _u(ks[4], cfg.regime_bias), 0.0),
        noise_sd=pick(4, _u(ks[5], cfg.noise_sd), 0.0),
        nonlinear=pick(5, _u(ks[6], cfg.nonlinear), 0.0),
        selection=pick(6, _u(ks[7], cfg.selection), 0.0),
    )


def apply_variant(key: jax.Array, pop: Population, params: VariantParams, n_media: int, *,
                  row_key: jax.Array | None = None) -> jax.Array:
    """Model logits for every row of ``pop`` under the distortion ``params`` (module formula).

    ``key`` fixes the model (the signs of the field biases); ``row_key`` (default: derived
    from ``key``) draws the per-row logit noise.

    Args:
      key: PRNG key of the model (typed or raw).
      pop: the :class:`~calib_jax.montecarlo.scenarios.Population` (n rows; its ``eta``,
        ``fields[:, 0]`` media ids in ``[0, n_media)`` and ``regime`` are used).
      params: the distortion (scalars or () arrays; see :class:`VariantParams`).
      n_media: number of media levels (int >= 1; static).
      row_key: optional PRNG key of the logit noise.

    Returns:
      (n,) float model logits :math:`o`. Jit- and vmap-able; no input checks.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax.montecarlo import Population, VariantParams, apply_variant
      >>> eta = jnp.array([-2.0, -1.0, 0.0, 1.0])
      >>> pop = Population(eta=eta, oracle=jax.nn.sigmoid(eta), fields=jnp.zeros((4, 2), jnp.int32),
      ...                  regime=jnp.zeros(4, jnp.int32), x=jnp.zeros((4, 1)))
      >>> params = VariantParams(scale=2.0, bias=0.5, field_amp=0.0, regime_amp=0.0, noise_sd=0.0,
      ...                        nonlinear=0.0, selection=0.0)
      >>> o = jax.jit(lambda k: apply_variant(k, pop, params, 1))(jax.random.key(0))
      >>> o.round(4).tolist()  # -0.5 + 2 (eta + 0.5) + 0.5 = 2 eta + 1
      [-3.0, -1.0, 1.0, 3.0]
    """
    k_sign, k_noise = jax.random.split(key)
    if row_key is not None:
        k_noise = row_key
    eta = pop.eta
    center = jnp.mean(eta)
    o = center + params.scale * (eta - center) + params.bias
    media = pop.fields[:, 0]
    signs, = materialize(jnp.where(jax.random.bernoulli(k_sign, 0.5, (n_media,)), 1.0, -1.0))
    d = params.field_amp * signs[media]
    o = o + d - jnp.mean(d)  # impression-weighted mean of the field shifts is 0
    o = o + params.regime_amp * (2.0 * pop.regime.astype(o.dtype) - 1.0)
    o = o + params.noise_sd * jax.random.normal(k_noise, eta.shape)
    o = o + params.nonlinear * jnp.tanh(o - jnp.mean(o))
    return o


def sample_trial_data(
    key: jax.Array,
    n: int,
    scenario: ScenarioConfig = ScenarioConfig(),
    variant: VariantConfig = VariantConfig(),
    *,
    params: VariantParams | None = None,
    row_key: jax.Array | None = None,
    world: FixedWorld | PopulationLaw | None = None,
) -> TrialData:
    """Population + model variant + selection + labels for one trial (pure, static ``n``).

    Args:
      key: the trial's key.  It fixes the *configuration*: the population's coefficients,
        the variant's parameters and the field-bias signs.
      n: number of logged rows (static).
      scenario: population family.
      variant: distortion family (ignored for the draw when ``params`` is given, but its
        ``n_candidates`` still sets the candidate-set size).
      params: a fixed distortion instead of a random draw.
      row_key: key of everything sampled per row (rows, logit noise, auction winners,
        labels).  Default: derived from ``key``.  Keeping ``key`` and varying ``row_key``
        repeats one configuration on fresh data.
      world: the ``fixed`` design (:func:`~calib_jax.montecarlo.scenarios.fixed_world`): the
        population's coefficients come from ``world`` instead of ``key``, so only the
        variant, the rows and the labels change from trial to trial. A
        :class:`~calib_jax.montecarlo.scenarios.PopulationLaw` chooses between the two designs
        with arrays (the same draws as a ``FixedWorld`` or ``None``).

    Returns:
      :class:`TrialData` of ``n`` rows. With ``variant.n_candidates = m > 1`` the population
      has ``n * m`` rows and each logged row is the winner of its ``m`` candidates. Jit- and
      vmap-able in the keys, with ``n``, ``scenario`` and ``variant`` static; no input checks.
      (Compiling it takes seconds: the example only traces it.)

    Example:
      >>> import jax
      >>> from calib_jax.montecarlo import sample_trial_data
      >>> d = jax.eval_shape(lambda k: sample_trial_data(k, 100), jax.random.key(0))
      >>> d.logits.shape, d.labels.shape, d.fields.shape, d.params.scale.shape
      ((100,), (100,), (100, 2), ())
    """
    k_pop, k_var, k_apply = jax.random.split(key, 3)
    rk = jax.random.split(jax.random.fold_in(key, 11) if row_key is None else row_key, 4)
    m = int(variant.n_candidates)
    if params is None:
        params = draw_variant(k_var, variant)
    if world is None:
        pop = sample_population(k_pop, n * m, scenario, row_key=rk[0])
    elif isinstance(world, PopulationLaw):
        pop = sample_population(world.coefficient_key(k_pop), n * m, scenario, row_key=rk[0],
                                intercept=world.intercept, use_intercept=world.fixed)
    else:
        pop = sample_population(world.key, n * m, scenario, row_key=rk[0], intercept=world.intercept)
    o = apply_variant(k_apply, pop, params, scenario.n_media, row_key=rk[1])
    if m > 1:
        score = params.selection * o.reshape(n, m) + jax.random.gumbel(rk[2], (n, m))
        win = jnp.argmax(score, axis=1) + m * jnp.arange(n)
        pop = jax.tree_util.tree_map(lambda a: a[win], pop)
        o = o[win]
    labels = jax.random.bernoulli(rk[3], pop.oracle).astype(o.dtype)
    return TrialData(
        logits=o,
        probs=jax.nn.sigmoid(o),
        labels=labels,
        oracle=pop.oracle,
        fields=pop.fields,
        regime=pop.regime,
        params=params,
    )


class LoggedPool(NamedTuple):
    """A fixed pool of logged impressions to resample trials from (length-N arrays).

    Attributes:
      logits: (N,) float production-model logits.
      oracle: (N,) float oracle CTRs in (0, 1).
      fields: (N, 2) int32 ``[media, cohort]``.
      regime: (N,) int32 latent regime in {0, 1}.

    See :func:`pool_from_impressions` (from simulator logs) and
    :func:`~calib_jax.montecarlo.panel.make_logged_trial` for examples.
    """

    logits: jax.Array  # production-model logits
    oracle: jax.Array  # oracle CTR
    fields: jax.Array  # (N, 2) int32 [media, cohort]
    regime: jax.Array  # (N,) int32 latent regime


def pool_from_impressions(imp) -> LoggedPool:
    """A :class:`LoggedPool` from ``calib_jax.data.simulator.Impressions``.

    Takes the production logit (``pctr_logit``), the oracle CTR and the ``media`` and
    ``user_cohort`` fields; the simulator's regime ids are folded to {0, 1} (regime > 0).

    Args:
      imp: :class:`calib_jax.data.simulator.Impressions` of N logged rows.

    Returns:
      :class:`LoggedPool` of JAX arrays (float32 logits and oracle, int32 fields and
      regime). Host code (reads NumPy arrays); not jit-able. A non-finite logit, an oracle
      outside [0, 1] or a field id beyond int32 raises ``ValueError`` naming it.

    Example:
      >>> import numpy as np
      >>> from calib_jax.data.simulator import FIELD_NAMES, Impressions
      >>> from calib_jax.montecarlo import pool_from_impressions
      >>> fields = np.zeros((3, len(FIELD_NAMES)), np.int32)
      >>> fields[:, FIELD_NAMES.index("media")] = [0, 1, 1]
      >>> fields[:, FIELD_NAMES.index("regime")] = [0, 1, 2]
      >>> f32 = np.full(3, 0.05, np.float32)
      >>> imp = Impressions(fields=fields, dense=np.zeros((3, 4), np.float32), click=np.zeros(3, np.int8),
      ...                   oracle=f32, pctr=f32, pctr_logit=np.log(f32 / (1 - f32)), price=0 * f32,
      ...                   request=np.arange(3))
      >>> pool = pool_from_impressions(imp)
      >>> pool.fields.tolist(), pool.regime.tolist()  # [media, cohort]; regimes 1 and 2 become 1
      ([[0, 0], [1, 0], [1, 0]], [0, 1, 1])
    """
    # int64 ids beyond int32 would wrap onto other levels in JAX's 32-bit mode: refused, naming them
    media = V.host_ids(imp.field("media"), "imp media field")
    cohort = V.host_ids(imp.field("user_cohort"), "imp user_cohort field")
    regime = V.host_ids(imp.field("regime"), "imp regime field")
    return LoggedPool(
        logits=V.check_logits(imp.pctr_logit, "imp.pctr_logit"),
        oracle=V.check_probs(imp.oracle, "imp.oracle"),
        fields=jnp.stack([jnp.asarray(media, jnp.int32), jnp.asarray(cohort, jnp.int32)], 1),
        regime=(jnp.asarray(regime, jnp.int32) > 0).astype(jnp.int32),
    )


def sample_logged_trial_data(key: jax.Array, pool: LoggedPool, n: int, n_media: int,
                             variant: VariantConfig = VariantConfig()) -> TrialData:
    """Resample ``n`` logged rows, distort the production logit by a drawn variant (no
    candidate selection: the log is already auction-selected), redraw labels from the oracle.

    Args:
      key: the trial's PRNG key (rows, variant, noise and labels are split from it).
      pool: the :class:`LoggedPool` (N rows) to draw from, uniformly with replacement.
      n: rows per trial (int >= 1; static).
      n_media: number of media levels of the pool (int >= 1; static).
      variant: the distortion family (static; ``selection`` is forced to 0).

    Returns:
      :class:`TrialData` of ``n`` rows (``params.selection`` = 0). Jit- and vmap-able in
      ``key``; no input checks.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax.montecarlo import LoggedPool, sample_logged_trial_data
      >>> eta = jnp.linspace(-4.0, -1.0, 50)
      >>> pool = LoggedPool(logits=eta, oracle=jax.nn.sigmoid(eta), fields=jnp.zeros((50, 2), jnp.int32),
      ...                   regime=jnp.zeros(50, jnp.int32))
      >>> d = jax.eval_shape(lambda k: sample_logged_trial_data(k, pool, 20, 1), jax.random.key(0))
      >>> d.logits.shape, d.fields.shape
      ((20,), (20, 2))
    """
    k_idx, k_var, k_apply, k_rows, k_lab = jax.random.split(key, 5)
    idx = jax.random.randint(k_idx, (n,), 0, pool.logits.shape[0])
    params = draw_variant(k_var, variant)._replace(selection=jnp.zeros(()))
    oracle = pool.oracle[idx]
    pop = Population(eta=pool.logits[idx], oracle=oracle, fields=pool.fields[idx],
                     regime=pool.regime[idx], x=jnp.zeros((n, 1), oracle.dtype))
    o = apply_variant(k_apply, pop, params, n_media, row_key=k_rows)
    labels = jax.random.bernoulli(k_lab, oracle).astype(o.dtype)
    return TrialData(logits=o, probs=jax.nn.sigmoid(o), labels=labels, oracle=oracle,
                     fields=pop.fields, regime=pop.regime, params=params)
