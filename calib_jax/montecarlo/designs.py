"""Population designs of the Monte Carlo metric studies ("Calibration is Grouping",
VR-SAG, anonymous authors, under review, §3.2 and App. C).

* ``fixed`` — the paper's protocol (§3.2: trials over random splits and model
  variants of *one* dataset, AdAuction, CTR about 3%): one population law drawn once from
  the study's seed (:func:`~calib_jax.montecarlo.scenarios.fixed_world`, mean oracle CTR at
  ``target_ctr``); model variants, rows and labels vary per trial. The default.
* ``pooled`` — "varying data distributions" (App. C.1): coefficients and base CTR
  (uniform on the logit scale between 1% and 10%) redrawn per trial, all trials pooled
  into one correlation.
* ``simulator`` — trials resampled from the logs of the ad-auction simulator
  (:func:`~calib_jax.montecarlo.panel.make_simulator_trial`), model variants applied to
  the production logit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from calib_jax._src.seeds import check_seed, key_of_seed
from calib_jax._src.validation import check_positive_int
from calib_jax.montecarlo.panel import PanelConfig, make_population_trial, make_simulator_trial, panel_for
from calib_jax.montecarlo.scenarios import FixedWorld, ScenarioConfig, fixed_world

__all__ = ["DESIGNS", "WORLD_TAG", "world_key", "make_design_trial"]

DESIGNS = ("fixed", "pooled", "simulator")
#: the fixed world's key is ``fold_in(key(seed), WORLD_TAG)``: never a trial index in practice
WORLD_TAG = 0xC0FFEE


def world_key(seed: int) -> jax.Array:
    """The key of the fixed design's population law for a study seed.

    ``fold_in(key(seed), WORLD_TAG)`` with ``WORLD_TAG = 0xC0FFEE`` (about 1.26e7), a trial
    index no study reaches: the world's key never equals a trial key ``fold_in(key(seed), t)``.

    Args:
      seed: the study seed, a 64-bit integer (not traceable; a negative one is its two's
        complement). Every bit counts (:func:`calib_jax._src.seeds.key_of_seed`):
        ``jax.random.key`` alone keeps 32 of them, so seed ``2**32`` built seed 0's world. A
        float such as 1.9 or a string raises ``ValueError`` naming ``seed``.

    Returns:
      A typed PRNG key of shape (). Host code; not jit-able in ``seed``.

    Example:
      >>> import jax
      >>> from calib_jax.montecarlo import world_key
      >>> k = world_key(0)
      >>> bool((jax.random.key_data(k) == jax.random.key_data(jax.random.fold_in(jax.random.key(0), 0xC0FFEE))).all())
      True
    """
    return jax.random.fold_in(key_of_seed(seed), WORLD_TAG)


def make_design_trial(design: str, n: int, *, seed: int, metrics: Sequence[Any] | None = None,
                      target_ctr: float = 0.03, simulator: str = "tiny",
                      scenario: ScenarioConfig = ScenarioConfig()
                      ) -> tuple[Callable[[jax.Array], Any], PanelConfig, dict[str, Any]]:
    """A trial ``key -> (metric vector, oracle Brier)`` under a population design (for
    ``fixed`` and ``pooled`` a :class:`~calib_jax.montecarlo.engine.BoundTrial`: one
    compilation serves both designs at one ``n``).

    Args:
      design: ``"fixed" | "pooled" | "simulator"`` (module docstring).
      n: rows per trial (a Python int >= 1; static; else ``ValueError`` naming ``n``).
      seed: the study seed (an integer, else ``ValueError``; fixes the fixed world and the
        simulator's logs).
      metrics: panel columns as :func:`~calib_jax.montecarlo.panel.panel_for` takes them:
        built-in names, user metrics (:class:`~calib_jax.montecarlo.panel.PanelMetric`,
        functions ``f(probs, labels, *, weights=None)``, ``"module:function"`` strings); the
        oracle Brier is appended; ``None``: the full panel.
      target_ctr: mean oracle CTR of the fixed world, in (0, 1).
      simulator: ``"tiny"`` (:func:`calib_jax.data.simulator.tiny_config`) or any other value
        (the default world) for the simulator design.
      scenario: the synthetic population family of the fixed and pooled designs.

    Returns:
      ``(trial, panel_config, info)``: the trial ``key -> (values, oracle_brier)`` (jit- and
      vmap-able), the :class:`~calib_jax.montecarlo.panel.PanelConfig` of its columns and a
      JSON-able ``info`` dict that records the design for provenance (``"design"``, and the
      target CTR and intercept, the base-CTR range or the simulator's log summary). Raises
      ``ValueError`` for an unknown design. Host code: the fixed design solves its
      intercept (seconds of compilation), the simulator design runs the simulator once.

    Example:
      >>> import jax
      >>> from calib_jax.montecarlo import make_design_trial
      >>> trial, cfg, info = make_design_trial("pooled", 100, seed=0, metrics=["brier"])
      >>> cfg.metrics, info
      (('brier', 'oracle_brier'), {'design': 'pooled', 'base_ctr_range': [0.01, 0.1]})
      >>> [a.shape for a in jax.eval_shape(trial, jax.random.key(0))]  # traced, not compiled
      [(2,), ()]
    """
    # int(2.7) and int('100') were taken as 2 and 100 rows; the simulator design read int(seed)
    n = check_positive_int(n, "n")
    check_seed(seed)
    if design == "simulator":
        from calib_jax.data import simulator as sim

        scfg = sim.tiny_config() if simulator == "tiny" else sim.default_config()
        trial, panel_cfg, info = make_simulator_trial(scfg, jax.random.key(int(seed) + 10_000), int(n),
                                                      metrics=metrics)
        return trial, panel_cfg, {"design": design, "simulator": simulator, **info}
    panel_cfg = panel_for(metrics, n_levels=scenario.n_media)
    # the fixed and pooled trials are one program with the population law as its input:
    # a study running both designs (or several seeds) at one n compiles it once
    if design == "pooled":
        pooled = make_population_trial(int(n), None, panel=panel_cfg, scenario=scenario)
        return pooled, panel_cfg, {"design": design, "base_ctr_range": list(scenario.base_ctr)}
    if design == "fixed":
        world: FixedWorld = fixed_world(world_key(seed), scenario, target_ctr=float(target_ctr))
        fixed = make_population_trial(int(n), world, panel=panel_cfg, scenario=scenario)
        return fixed, panel_cfg, {"design": design, "target_ctr": float(target_ctr),
                                  "intercept": float(np.asarray(world.intercept))}
    raise ValueError(f"`design` must be one of {DESIGNS}, got {design!r}")
