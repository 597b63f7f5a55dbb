"""Properties of the scenario generator and the model-variant families (SPEC §8)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats

from calib_jax import montecarlo as mc

N = 4000


def _params(**kw):
    base = dict(scale=1.0, bias=0.0, field_amp=0.0, regime_amp=0.0, noise_sd=0.0,
                nonlinear=0.0, selection=0.0)
    base.update(kw)
    return mc.VariantParams(**{k: jnp.asarray(v, jnp.float32) for k, v in base.items()})


def test_population_is_valid_and_deterministic(key):
    cfg = mc.ScenarioConfig()
    pop = mc.sample_population(key, N, cfg)
    pop2 = mc.sample_population(key, N, cfg)
    np.testing.assert_array_equal(np.asarray(pop.eta), np.asarray(pop2.eta))
    pi = np.asarray(pop.oracle)
    assert pi.shape == (N,) and np.all((pi > 0) & (pi < 1))
    np.testing.assert_allclose(pi, 1 / (1 + np.exp(-np.asarray(pop.eta, np.float64))), rtol=1e-5)
    f = np.asarray(pop.fields)
    assert f.shape == (N, 2) and f[:, 0].max() < cfg.n_media and f[:, 1].max() < cfg.n_cohorts
    assert f.min() >= 0 and set(np.unique(pop.regime)) <= {0, 1}
    # a new row key resamples rows from the same law (same coefficients)
    pop3 = mc.sample_population(key, N, cfg, row_key=jax.random.key(5))
    assert not np.array_equal(np.asarray(pop3.fields), f)


def test_identity_variant_is_perfectly_calibrated(key):
    d = mc.sample_trial_data(key, N, params=_params())
    np.testing.assert_allclose(np.asarray(d.probs), np.asarray(d.oracle), rtol=1e-5, atol=1e-7)
    assert set(np.unique(np.asarray(d.labels))) <= {0.0, 1.0}


def test_field_biases_cancel_globally_but_not_per_field(key):
    k1, k2 = jax.random.split(key)
    pop = mc.sample_population(k1, N)
    o0 = mc.apply_variant(k2, pop, _params(), 8)
    o1 = mc.apply_variant(k2, pop, _params(field_amp=0.5), 8)
    shift = np.asarray(o1 - o0, np.float64)
    assert abs(shift.mean()) < 1e-5  # impression-weighted mean of the shifts is 0
    media = np.asarray(pop.fields[:, 0])
    per = [shift[media == m].mean() for m in np.unique(media)]
    assert max(per) > 0.1 and min(per) < -0.1 or np.ptp(per) == 0.0


def test_monotone_nonlinear_distortion_preserves_order(key):
    k1, k2 = jax.random.split(key)
    pop = mc.sample_population(k1, N)
    o = np.asarray(mc.apply_variant(k2, pop, _params(nonlinear=-0.6, scale=1.3), 8))
    assert scipy.stats.spearmanr(o, np.asarray(pop.eta)).statistic > 1 - 1e-9


def test_selection_on_noisy_logits_overestimates(key):
    over = []
    for sel in (0.0, 3.0):
        d = mc.sample_trial_data(key, 20_000, params=_params(noise_sd=0.8, selection=sel))
        over.append(float(jnp.mean(d.probs) / jnp.mean(d.oracle)))
    # without selection the only excess is the Jensen term of the noise; with selection the
    # winners' noise is positive on average (winner's curse)
    assert over[1] > over[0] + 0.1


def test_draw_variant_respects_ranges(key):
    cfg = mc.VariantConfig()
    ps = jax.vmap(lambda k: mc.draw_variant(k, cfg))(jax.random.split(key, 200))
    s = np.asarray(ps.scale)
    assert np.all((s == 1.0) | ((s >= cfg.scale[0]) & (s <= cfg.scale[1])))
    assert 0.3 < np.mean(np.asarray(ps.noise_sd) > 0) < 0.9  # p_active = 0.6
    assert np.all(np.asarray(ps.nonlinear) > -1.0)  # keeps the map increasing


def test_logged_pool_trial(key):
    rng = np.random.default_rng(0)
    M = 3000
    pool = mc.LoggedPool(logits=jnp.asarray(rng.normal(-3, 1, M), jnp.float32),
                         oracle=jnp.asarray(rng.uniform(0.01, 0.2, M), jnp.float32),
                         fields=jnp.asarray(rng.integers(0, 4, (M, 2)), jnp.int32),
                         regime=jnp.asarray(rng.integers(0, 2, M), jnp.int32))
    d = mc.sample_logged_trial_data(key, pool, 500, 4)
    assert d.logits.shape == (500,) and d.fields.shape == (500, 2)
    assert float(d.params.selection) == 0.0
    assert np.all(np.isin(np.asarray(d.oracle), np.asarray(pool.oracle)))
