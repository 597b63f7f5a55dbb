"""Population designs: the fixed design really holds the population law fixed."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from calib_jax import montecarlo as mc

N = 4000
ONE_CANDIDATE = mc.VariantConfig(n_candidates=1)  # no auction selection: rows = population rows


@pytest.mark.slow  # 11 s (CI time)
def test_fixed_world_hits_its_target_ctr():
    for target in (0.005, 0.03, 0.3):
        w = mc.fixed_world(mc.world_key(3), target_ctr=target)
        pop = mc.sample_population(w.key, 200_000, row_key=jax.random.key(11), intercept=w.intercept)
        assert float(pop.oracle.mean()) == pytest.approx(target, rel=0.02)
    with pytest.raises(ValueError, match="target_ctr"):
        mc.fixed_world(mc.world_key(0), target_ctr=1.5)


@pytest.mark.slow  # 19 s (CI time)
def test_fixed_world_compiled_bisection_equals_op_by_op():
    w = mc.fixed_world(mc.world_key(0), target_ctr=0.03, n_ref=4096)
    with jax.disable_jit():
        ref = mc.fixed_world(mc.world_key(0), target_ctr=0.03, n_ref=4096)
    assert np.asarray(w.intercept).view(np.uint32) == np.asarray(ref.intercept).view(np.uint32)


@pytest.mark.slow  # 20 s (CI time)
def test_fixed_design_holds_the_law_and_varies_rows_and_variants():
    w = mc.fixed_world(mc.world_key(0), target_ctr=0.03)
    rows = jax.random.key(5)
    a = mc.sample_trial_data(jax.random.key(1), N, variant=ONE_CANDIDATE, row_key=rows, world=w)
    b = mc.sample_trial_data(jax.random.key(2), N, variant=ONE_CANDIDATE, row_key=rows, world=w)
    # same rows, same law -> the same oracle CTRs; different trial keys -> different models
    np.testing.assert_array_equal(np.asarray(a.oracle), np.asarray(b.oracle))
    assert not np.allclose(np.asarray(a.logits), np.asarray(b.logits))
    # other rows from the same law: different rows, same field-level CTRs up to sampling noise
    c = mc.sample_trial_data(jax.random.key(1), N, variant=ONE_CANDIDATE, row_key=jax.random.key(6), world=w)
    assert not np.array_equal(np.asarray(a.oracle), np.asarray(c.oracle))
    big = [mc.sample_trial_data(jax.random.key(k), 100_000, variant=ONE_CANDIDATE,
                                row_key=jax.random.key(100 + k), world=w) for k in (1, 2)]
    means = [[float(d.oracle[d.fields[:, 0] == m].mean()) for m in range(3)] for d in big]
    np.testing.assert_allclose(means[0], means[1], rtol=0.03)
    # the pooled design redraws the law: same rows, other trial key -> other oracle CTRs
    p1 = mc.sample_trial_data(jax.random.key(1), N, variant=ONE_CANDIDATE, row_key=rows)
    p2 = mc.sample_trial_data(jax.random.key(2), N, variant=ONE_CANDIDATE, row_key=rows)
    assert not np.allclose(np.asarray(p1.oracle), np.asarray(p2.oracle))


@pytest.mark.slow  # 17 s; trial determinism also in test_montecarlo_engine
def test_design_trials_are_deterministic_and_named():
    for design in ("fixed", "pooled"):
        trial, panel, info = mc.make_design_trial(design, 500, seed=0, metrics=["ece", "lcce"])
        assert info["design"] == design and panel.metrics == ("ece", "lcce", "oracle_brier")
        run = jax.jit(trial)  # one compiled program run twice: the same bits
        v1, r1 = run(jax.random.key(4))
        v2, r2 = run(jax.random.key(4))
        np.testing.assert_array_equal(np.asarray(v1), np.asarray(v2))
        assert float(r1) == float(r2) > 0
    with pytest.raises(ValueError, match="design"):
        mc.make_design_trial("nope", 10, seed=0)
    with pytest.raises(ValueError, match="unknown panel column"):
        mc.panel_for(["ece", "nope"])


@pytest.mark.slow  # 20 s (CI time)
def test_population_trial_equals_the_closed_over_world_and_compiles_once_for_both_designs(tmp_path):
    from calib_jax.montecarlo import engine

    panel = mc.panel_for(["ece", "field_rce"], n_levels=mc.ScenarioConfig().n_media)
    metrics = mc.metric_panel(panel)
    world = mc.fixed_world(mc.world_key(0), target_ctr=0.03)
    key = jax.random.key(3)
    engine._CHUNK_CACHE.clear()
    runs = {}
    for name, w in (("fixed", world), ("pooled", None)):
        bound = mc.make_population_trial(N, w, panel=panel)
        closed = mc.make_trial(N, metrics=metrics, world=w)
        runs[name] = mc.run_trials(bound, key, 8, chunk_size=8, progress=False, checkpoint_dir=tmp_path,
                                   config={"study": "same config for both designs"})
        want = mc.run_trials(closed, key, 8, chunk_size=8, progress=False)
        for got, ref in zip(runs[name], want, strict=True):  # bit for bit
            np.testing.assert_array_equal(np.asarray(got).view(np.uint32), np.asarray(ref).view(np.uint32))
    assert not np.array_equal(runs["fixed"][1], runs["pooled"][1])
    # one trial function for both designs, hence one compiled chunk (plus one per closure)
    assert mc.make_population_trial(N, world, panel=panel).fn is mc.make_population_trial(N, None, panel=panel).fn
    assert len(engine._CHUNK_CACHE) == 3
    # ... but never one checkpoint: the law's values are part of the configuration hash
    assert len([d for d in tmp_path.iterdir() if d.is_dir()]) == 2
    # raw uint32 trial keys select raw key data
    raw = jax.random.PRNGKey(1)
    np.testing.assert_array_equal(mc.PopulationLaw.of(world).coefficient_key(raw), jax.random.key_data(world.key))
    np.testing.assert_array_equal(mc.PopulationLaw.of(None).coefficient_key(raw), raw)


def test_rank_consistency_pairs_and_rows():
    rng = np.random.default_rng(0)
    ref = rng.normal(size=200)
    v = np.stack([ref + 0.1 * rng.normal(size=200), ref + 2 * rng.normal(size=200), ref], 1)
    rc = mc.rank_consistency(v, ["lcce", "ece", "oracle_brier"], key=jax.random.key(0), n_boot=300)
    assert [r[0] for r in rc.rows()] == ["lcce", "ece"]
    d = rc.paired[("lcce", "ece")]
    assert d.diff > 0 and d.lo > 0 and d.share_a_better > 0.99
    s = rc.summary()
    assert set(s["rho"]) == {"lcce", "ece"} and "lcce - ece" in s["paired"]
    with pytest.raises(ValueError, match="reference"):
        mc.rank_consistency(v, ["a", "b", "c"], key=jax.random.key(0))
