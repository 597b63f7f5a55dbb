"""Tests of calib_jax.data.simulator on a tiny world (independent NumPy checks)."""

from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np
import pytest

from calib_jax.data import simulator as sim

CFG = sim.tiny_config()


@pytest.fixture(scope="module")
def logged() -> sim.Impressions:
    return sim.simulate(CFG, jax.random.key(0))


@pytest.fixture(scope="module")
def random_exposed() -> sim.Impressions:
    return sim.simulate(CFG, jax.random.key(0), exposure="random")


def _assert_same(a: sim.Impressions, b: sim.Impressions) -> None:
    for name in sim.Impressions._fields:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


def test_deterministic_per_key_and_changes_with_key(logged):
    again = sim.simulate(CFG, jax.random.key(0))
    _assert_same(logged, again)
    other = sim.simulate(CFG, jax.random.key(1))
    assert len(other) != len(logged) or not np.array_equal(other.oracle, logged.oracle)


def test_shapes_ranges_and_oracle_in_open_interval(logged):
    n = len(logged)
    assert n > 0.9 * CFG.n_requests * CFG.n_slots  # nearly every slot is filled
    assert logged.fields.shape == (n, len(sim.FIELD_NAMES))
    assert logged.dense.shape == (n, len(sim.DENSE_NAMES))
    assert np.all(np.isfinite(logged.dense))
    cards = sim.field_cardinalities(CFG)
    for j, name in enumerate(sim.FIELD_NAMES):
        col = logged.fields[:, j]
        assert col.min() >= 0 and col.max() < cards[name], name
    assert np.all((logged.oracle > 0) & (logged.oracle < 1))
    assert np.all((logged.pctr > 0) & (logged.pctr < 1))
    np.testing.assert_allclose(logged.pctr, 1 / (1 + np.exp(-logged.pctr_logit.astype(np.float64))),
                               rtol=1e-5)
    assert set(np.unique(logged.click)) <= {0, 1}
    # the advertiser column is a function of the ad column
    ad, adv = logged.field("ad"), logged.field("advertiser")
    first = {}
    for a, v in zip(ad.tolist(), adv.tolist()):
        assert first.setdefault(a, v) == v
    # at most one impression per (request, position)
    key = logged.request * CFG.n_slots + logged.field("position")
    assert np.unique(key).size == n


def test_click_rate_matches_oracle_within_binomial_ci(logged, random_exposed):
    for imp in (logged, random_exposed):
        p = imp.oracle.astype(np.float64)
        se = np.sqrt(np.sum(p * (1 - p))) / p.size  # exact sd of the mean of Bernoulli(p_i)
        assert abs(imp.click.mean() - p.mean()) < 4 * se


def test_ctr_is_in_the_papers_range(logged):
    assert 0.015 < logged.click.mean() < 0.06


def test_selection_bias_from_the_auction_and_not_from_random_exposure(logged, random_exposed):
    ratio_auction = logged.pctr.mean() / logged.oracle.mean()
    ratio_random = random_exposed.pctr.mean() / random_exposed.oracle.mean()
    assert ratio_auction > 1.1
    assert abs(ratio_random - 1.0) < 0.3 * (ratio_auction - 1.0)
    # the persistent per-ad error is what wins: logged ads are over-estimated on average
    assert np.mean(logged.pctr_logit - np.log(logged.oracle / (1 - logged.oracle))) > 0.1


def test_per_regime_miscalibration_differs_in_sign(logged):
    devs = [r["calibration_dev"] for r in sim.summary_stats(logged)["regimes"]]
    assert len(devs) == CFG.n_regimes
    assert min(devs) < -0.05 and max(devs) > 0.05


def test_summary_stats_against_numpy(logged):
    st = sim.summary_stats(logged)
    assert st["impressions"] == len(logged)
    assert st["clicks"] == int(logged.click.sum())
    np.testing.assert_allclose(st["mean_pctr"], logged.pctr.astype(np.float64).mean(), rtol=1e-12)
    regime = logged.field("regime")
    shares = np.bincount(regime, minlength=CFG.n_regimes) / len(logged)
    np.testing.assert_allclose([r["share"] for r in st["regimes"]], shares[shares > 0])


def test_second_price_and_random_exposure_prices(logged, random_exposed):
    assert np.all(logged.price >= CFG.reserve_price * (1 - 1e-6))
    # within a request, the price paid never increases with the slot (ranked by bid)
    order = np.lexsort((logged.field("position"), logged.request))
    req, price = logged.request[order], logged.price[order]
    same = req[1:] == req[:-1]
    assert np.all(price[1:][same] <= price[:-1][same] + 1e-7)
    assert np.all(random_exposed.price == 0)


def test_pacing_moves_towards_the_budget():
    world = sim.make_world(CFG, jax.random.fold_in(jax.random.key(0), 0))
    budget = np.asarray(world.advertiser_budget)
    prev = np.full(CFG.n_advertisers, CFG.pacing_max)
    for _, imp, pacing in sim.iter_chunks(CFG, jax.random.key(0)):
        spend = np.bincount(imp.field("advertiser"), weights=imp.price,
                            minlength=CFG.n_advertisers)
        free = (pacing > CFG.pacing_min + 1e-6) & (pacing < CFG.pacing_max - 1e-6)
        over = spend > budget * 1.01
        under = spend < budget * 0.99
        assert np.all(pacing[free & over] < prev[free & over])
        assert np.all(pacing[free & under] > prev[free & under])
        prev = pacing
    assert prev.mean() < CFG.pacing_max  # budgets bind for some advertisers


def test_full_matrix_shapes_and_determinism():
    fm = sim.simulate_full_matrix(CFG, jax.random.key(3), 50, 40)
    assert fm.oracle.shape == fm.pctr.shape == fm.click.shape == (50, 40)
    assert np.all((fm.oracle > 0) & (fm.oracle < 1))
    assert fm.user_fields.shape == (50, 6) and fm.item_fields.shape == (40, 3)
    np.testing.assert_array_equal(fm.item_fields[:, 0], np.arange(40))
    fm2 = sim.simulate_full_matrix(CFG, jax.random.key(3), 50, 40)
    np.testing.assert_array_equal(fm.oracle, fm2.oracle)
    # users differ in their preferences: rows are not all the same ranking
    assert np.std(np.argmax(fm.oracle, axis=1)) > 0
    with pytest.raises(ValueError, match="n_items"):
        sim.simulate_full_matrix(CFG, jax.random.key(3), 5, CFG.n_ads + 1)


def test_stream_to_disk_resumes_to_the_same_result(tmp_path, logged):
    out = tmp_path / "sim"
    manifest = sim.simulate_to_disk(CFG, jax.random.key(0), out)
    full = sim.load_from_disk(out)
    _assert_same(full, logged)
    # simulate an interruption after two chunks, then resume
    m = json.loads(manifest.read_text())
    for e in m["chunks"][2:]:
        (out / e["file"]).unlink()
    m["chunks"], m["complete"] = m["chunks"][:2], False
    manifest.write_text(json.dumps(m))
    sim.simulate_to_disk(CFG, jax.random.key(0), out)
    assert json.loads(manifest.read_text())["complete"]
    _assert_same(sim.load_from_disk(out), logged)
    with pytest.raises(ValueError, match="out_dir"):
        sim.simulate_to_disk(CFG, jax.random.key(1), out)


def test_config_validation_names_the_argument():
    with pytest.raises(ValueError, match="position_effects"):
        sim.tiny_config(n_slots=2)
    with pytest.raises(ValueError, match="n_candidates"):
        sim.tiny_config(n_candidates=2)
    with pytest.raises(ValueError, match="regime_shift"):
        sim.tiny_config(n_regimes=2)
    with pytest.raises(ValueError, match="exposure"):
        sim.simulate(CFG, jax.random.key(0), exposure="oracle")
    with pytest.raises(ValueError, match="name"):
        sim.Impressions(*[np.zeros(1)] * 8).field("nope")


def test_configs_are_hashable_and_hash_is_stable():
    assert sim.config_hash(CFG) == sim.config_hash(sim.tiny_config())
    assert sim.config_hash(CFG) != sim.config_hash(dataclasses.replace(CFG, noise_std=0.1))
    assert hash(sim.paper_config()) != hash(sim.default_config())
    assert sim.paper_config().n_requests * sim.paper_config().n_slots > 15e6


def test_config_hash_of_a_config_without_the_new_field_is_unchanged():
    # prod_logit_scale and prod_regime_scale were added after caches were named by the hash: at
    # their defaults they are left out, so the hash is the SHA-256 of the earlier field set (the
    # formula, by hand)
    import hashlib

    new = ("prod_logit_scale", "prod_regime_scale")
    fields = {k: v for k, v in dataclasses.asdict(CFG).items() if k not in new}
    blob = json.dumps([[fields], None], sort_keys=True, default=repr).encode()
    assert sim.config_hash(CFG) == hashlib.sha256(blob).hexdigest()[:16]
    assert sim.config_hash(CFG) != sim.config_hash(dataclasses.replace(CFG, prod_logit_scale=0.8))
    assert sim.config_hash(CFG) != sim.config_hash(dataclasses.replace(CFG, prod_regime_scale=(1.0, 1.0, 1.2)))


def test_prod_logit_scale_multiplies_the_production_logit():
    # random exposure: who is shown does not depend on the score, so the same impressions are
    # logged and only the production logit changes, by exactly the factor
    base = sim.simulate(CFG, jax.random.key(3), exposure="random")
    scaled = sim.simulate(dataclasses.replace(CFG, prod_logit_scale=0.75), jax.random.key(3), exposure="random")
    np.testing.assert_array_equal(base.oracle, scaled.oracle)
    np.testing.assert_array_equal(base.click, scaled.click)
    np.testing.assert_allclose(scaled.pctr_logit, 0.75 * np.asarray(base.pctr_logit), rtol=1e-5, atol=1e-5)
    # under-confident at a low CTR: the mean pCTR rises above the mean oracle CTR
    assert scaled.pctr.mean() > 1.3 * base.pctr.mean()
    with pytest.raises(ValueError, match="prod_logit_scale"):
        sim.tiny_config(prod_logit_scale=0.0)


@pytest.mark.default_codegen
def test_prod_regime_scale_multiplies_each_regimes_production_logit():
    # random exposure: the same impressions are logged; each row's production logit is the
    # unscaled one times s_p r_g of its regime, and the oracle and the clicks do not move
    r = (0.7, 1.0, 1.3)
    base = sim.simulate(CFG, jax.random.key(3), exposure="random")
    scaled = sim.simulate(dataclasses.replace(CFG, prod_logit_scale=0.75, prod_regime_scale=r), jax.random.key(3),
                          exposure="random")
    np.testing.assert_array_equal(base.oracle, scaled.oracle)
    np.testing.assert_array_equal(base.click, scaled.click)
    regime = np.asarray(base.fields)[:, list(sim.FIELD_NAMES).index("regime")]
    assert set(np.unique(regime)) == {0, 1, 2}
    factor = 0.75 * np.asarray(r)[regime]
    np.testing.assert_allclose(scaled.pctr_logit, factor * np.asarray(base.pctr_logit), rtol=1e-5, atol=1e-5)
    # all ones is the unscaled world, bit for bit
    ones = sim.simulate(dataclasses.replace(CFG, prod_regime_scale=(1.0, 1.0, 1.0)), jax.random.key(3),
                        exposure="random")
    np.testing.assert_array_equal(base.pctr_logit, ones.pctr_logit)
    for bad, match in (((1.0, 1.0), "one per regime"), ((1.0, 0.0, 1.0), "prod_regime_scale"),
                       ((1.0, float("nan"), 1.0), "prod_regime_scale"), (1.2, "prod_regime_scale")):
        with pytest.raises(ValueError, match=match):
            sim.tiny_config(prod_regime_scale=bad)


def _run_stats_experiment(tmp_path, monkeypatch, backbone: bool):
    from experiments import _study
    from experiments import simulator_stats as ss

    monkeypatch.setenv("CALIB_JAX_CACHE", str(tmp_path / "cache"))
    config = dict(_study.preset(ss, "smoke"), seed=0, backbone=backbone)
    if backbone:
        config["backbone_config"] = dict(hidden=[16], embedding_dim=8, embed_dim=4, batch_size=256)
    out = _study.Output(tmp_path / "out", study="simulator_stats", scale="smoke", progress=False)
    res = _study.execute(ss, config, out)
    names = ["table7_dataset.csv", "table7_dataset.md", "regime_calibration.csv",
             "simulator_stats.png", "simulator_stats.pdf", "provenance.json", "results.json"]
    for name in names + (["backbone.csv", "backbone.md"] if backbone else []):
        assert (tmp_path / "out" / name).exists(), name
    return res


def test_simulator_stats_experiment_smoke(tmp_path, monkeypatch, logged):
    res = _run_stats_experiment(tmp_path, monkeypatch, backbone=False)
    ref = sim.summary_stats(logged)
    assert res["auction"]["impressions"] == ref["impressions"]
    assert res["auction"]["clicks"] == ref["clicks"]
    np.testing.assert_allclose(res["auction"]["mean_pctr"], ref["mean_pctr"], rtol=1e-9)
    for a, b in zip(res["auction"]["regimes"], ref["regimes"]):
        np.testing.assert_allclose(a["calibration_dev"], b["calibration_dev"], rtol=1e-9)
    assert "backbone" not in res


@pytest.mark.slow
def test_simulator_stats_experiment_with_backbone(tmp_path, monkeypatch):
    res = _run_stats_experiment(tmp_path, monkeypatch, backbone=True)
    assert res["backbone"]["metrics"]["test"]["n"] > 0


def test_simulate_log_is_the_impressions_as_a_production_log(tmp_path, logged):
    """``simulate_log`` (the public way to get a log with its true CTR) holds exactly the
    impressions of ``simulate`` for the same config and seed, written and read back unchanged
    in every format."""
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    imp = logged  # simulate(CFG, key(0))
    t = sim.simulate_log(CFG, seed=0, path=tmp_path / "log.parquet")
    assert t.num_rows == len(imp) and t.column_names == ["click", "pctr", "oracle_ctr", *sim.FIELD_NAMES]
    np.testing.assert_array_equal(t["click"].to_numpy(), imp.click)
    # pctr is the production model's sigmoid, computed here independently in float64
    np.testing.assert_allclose(t["pctr"].to_numpy(), 1 / (1 + np.exp(-imp.pctr_logit.astype(np.float64))),
                               rtol=1e-15)
    np.testing.assert_array_equal(t["oracle_ctr"].to_numpy(), imp.oracle.astype(np.float64))
    for j, name in enumerate(sim.FIELD_NAMES):
        np.testing.assert_array_equal(t[name].to_numpy(), imp.fields[:, j])
    assert pq.read_table(tmp_path / "log.parquet").equals(t)
    for suffix, sep in ((".csv", ","), (".tsv", "\t")):
        back = pcsv.read_csv(sim.write_log(t, tmp_path / f"log{suffix}"),
                             parse_options=pcsv.ParseOptions(delimiter=sep))
        np.testing.assert_array_equal(back["click"].to_numpy(), t["click"].to_numpy())
        np.testing.assert_allclose(back["pctr"].to_numpy(), t["pctr"].to_numpy(), rtol=1e-15)


def test_write_log_names_a_bad_path_and_leaves_nothing_behind(tmp_path):
    import pyarrow as pa

    t = pa.table({"click": [0, 1]})
    with pytest.raises(ValueError, match="`path`.*log.json"):
        sim.write_log(t, tmp_path / "log.json")
    (tmp_path / "dir.csv").mkdir()
    with pytest.raises(ValueError, match="`path`.*is a folder"):
        sim.write_log(t, tmp_path / "dir.csv")
    with pytest.raises(ValueError, match="`seed`"):
        sim.simulate_log(seed=1.5)  # type: ignore[arg-type]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.csv"]  # no temporary file left
