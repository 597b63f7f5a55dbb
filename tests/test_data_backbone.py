"""Tests of calib_jax.data.backbone (tiny world) and calib_jax.data.splits."""

from __future__ import annotations

import dataclasses
import shutil

import jax
import numpy as np
import pytest

from calib_jax.data import backbone as bb
from calib_jax.data import simulator as sim
from calib_jax.data import splits as sp

SIM = sim.tiny_config(n_chunks=3)
BB = bb.BackboneConfig(embed_dim=4, hidden=(32,), embedding_dim=16, batch_size=256,
                       learning_rate=5e-3, predict_batch=8192)


# ------------------------------------------------------------------------------ splits


def test_paper_splits_partition_sizes_and_determinism():
    n = 10_000
    s = sp.paper_splits(jax.random.key(0), n)
    allidx = np.concatenate(list(s))
    np.testing.assert_array_equal(np.sort(allidx), np.arange(n))  # a partition
    assert len(s.val) == round(0.1 * 8000) and len(s.holdout) == round(0.1 * 2000)
    assert len(s.test) == 1800 and len(s.train) == 7200
    assert s.test.min() >= 8000 and s.holdout.min() >= 8000  # chronological test part
    s2 = sp.paper_splits(jax.random.key(0), n)
    for a, b in zip(s, s2):
        np.testing.assert_array_equal(a, b)
    s3 = sp.paper_splits(jax.random.key(1), n)
    assert not np.array_equal(s.val, s3.val)
    r = sp.paper_splits(jax.random.key(0), n, chronological=False)
    assert r.test.min() < 8000
    np.testing.assert_array_equal(np.sort(np.concatenate(list(r))), np.arange(n))


def test_random_test_splits():
    ts = sp.random_test_splits(jax.random.key(0), 500, n_splits=7, holdout_frac=0.1)
    assert ts.holdout.shape == (7, 50) and ts.evaluation.shape == (7, 450)
    for h, e in zip(ts.holdout, ts.evaluation):
        np.testing.assert_array_equal(np.sort(np.concatenate([h, e])), np.arange(500))
    assert len({tuple(h) for h in ts.holdout}) == 7  # the splits differ
    # split s depends only on (key, s)
    more = sp.random_test_splits(jax.random.key(0), 500, n_splits=9)
    np.testing.assert_array_equal(more.holdout[:7], ts.holdout)
    boot = sp.random_test_splits(jax.random.key(0), 500, n_splits=3, holdout_frac=0.0)
    assert boot.holdout.shape == (3, 0) and boot.evaluation.shape == (3, 500)
    assert len(np.unique(boot.evaluation[0])) < 500  # with replacement


def test_split_validation():
    with pytest.raises(ValueError, match="test_frac"):
        sp.train_test_split(jax.random.key(0), 100, test_frac=1.5)
    with pytest.raises(ValueError, match="n_splits"):
        sp.random_test_splits(jax.random.key(0), 100, n_splits=0)
    with pytest.raises(ValueError, match="key"):
        sp.numpy_rng("seed")
    with pytest.raises(ValueError, match="holdout_frac"):
        sp.random_test_splits(jax.random.key(0), 5, holdout_frac=0.01)
    assert sp.numpy_rng(3).integers(1 << 30) == sp.numpy_rng(3).integers(1 << 30)


# ------------------------------------------------------------------------------ backbone


def test_model_shapes_and_training_reduces_loss(rng):
    n, cards = 4096, (5, 7)
    fields = np.stack([rng.integers(0, c, n) for c in cards], axis=1)
    logit = np.array([-3.0, -2.0, -1.0, 0.0, 1.0])[fields[:, 0]]
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.int8)
    cfg = dataclasses.replace(BB, neg_sample_rate=1.0, epochs=3)
    trained = bb.train_backbone(fields, y, cardinalities=cards, config=cfg, key=jax.random.key(0))
    o, z = bb.predict(trained, fields, batch_size=1000)
    assert o.shape == (n,) and z.shape == (n, cfg.embedding_dim)
    assert np.all(z >= 0)  # relu features
    p = 1 / (1 + np.exp(-o.astype(np.float64)))
    ll = -np.mean(y * np.log(p) + (1 - y) * np.log1p(-p))
    base = y.mean()
    ll0 = -(base * np.log(base) + (1 - base) * np.log1p(-base))
    assert ll < ll0 - 0.05  # learnt the field effect
    # per-level predicted rates are ordered like the true ones
    rates = [p[fields[:, 0] == k].mean() for k in range(5)]
    assert np.all(np.diff(rates) > 0)
    with pytest.raises(ValueError, match="fields"):
        bb.train_backbone(fields + 10, y, cardinalities=cards, config=cfg, key=jax.random.key(0))
    with pytest.raises(ValueError, match="labels"):
        bb.train_backbone(fields, y + 2, cardinalities=cards, config=cfg, key=jax.random.key(0))


def test_load_or_train_outputs_and_cache(tmp_path):
    out = bb.load_or_train(SIM, BB, seed=0, cache_dir=tmp_path)
    assert out.info["from_cache"] is False
    log = sim.simulate(SIM, jax.random.key(0))
    n = len(log)
    parts = (out.val, out.holdout, out.test)
    idx = np.concatenate([p.rows for p in parts])
    assert np.unique(idx).size == idx.size and idx.max() < n
    assert abs(len(out.val) - 0.08 * n) <= 2 and abs(len(out.holdout) - 0.02 * n) <= 2
    for p in parts:
        m = len(p)
        assert p.logits.shape == (m,) and p.embedding.shape == (m, BB.embedding_dim)
        assert p.fields.shape == (m, len(sim.FIELD_NAMES))
        # exported rows are the log's rows
        np.testing.assert_array_equal(p.fields, log.fields[p.rows])
        np.testing.assert_array_equal(p.labels, log.click[p.rows].astype(np.float32))
        np.testing.assert_array_equal(p.oracle, log.oracle[p.rows])
        np.testing.assert_array_equal(p.pctr, log.pctr[p.rows])
        assert np.all(np.isfinite(p.logits))
    # negative down-sampling (0.7) makes the backbone over-estimate on average
    assert out.test.probs.mean() > out.test.oracle.mean()

    cache_file = tmp_path / f"backbone_{out.info['hash']}.npz"
    mtime = cache_file.stat().st_mtime_ns
    again = bb.load_or_train(SIM, BB, seed=0, cache_dir=tmp_path)
    assert again.info["from_cache"] is True
    assert cache_file.stat().st_mtime_ns == mtime  # nothing rewritten: no training
    for a, b in zip((again.val, again.holdout, again.test), parts):
        np.testing.assert_array_equal(a.logits, b.logits)
        np.testing.assert_array_equal(a.embedding, b.embedding)
    assert again.field_names == sim.FIELD_NAMES

    # a changed config retrains into another cache entry (a split change: same shapes)
    changed = bb.load_or_train(SIM, dataclasses.replace(BB, ho_frac=0.2), seed=0,
                               cache_dir=tmp_path)
    assert changed.info["from_cache"] is False and changed.info["hash"] != out.info["hash"]
    assert len(changed.holdout) > len(out.holdout)
    assert len([p for p in tmp_path.glob("backbone_*.npz") if ".params" not in p.name]) == 2
    assert len(list(tmp_path.glob("backbone_*.params.npz"))) == 2  # each entry keeps its parameters


def test_backbone_metrics_against_numpy(rng):
    n = 2000
    o = rng.normal(-2.0, 1.0, n).astype(np.float32)
    p = 1 / (1 + np.exp(-o.astype(np.float64)))
    y = (rng.random(n) < p).astype(np.float32)
    part = bb.SplitOutputs(o, np.zeros((n, 2), np.float32), np.zeros((n, 1), np.int32), y,
                           p.astype(np.float32), None, np.arange(n))
    m = bb.backbone_metrics(part)
    pos, neg = p[y == 1], p[y == 0]
    auc = (np.sum(pos[:, None] > neg[None, :]) + 0.5 * np.sum(pos[:, None] == neg[None, :])) / (
        pos.size * neg.size)
    np.testing.assert_allclose(m["auc"], auc, rtol=1e-4)
    ll = -np.mean(y * np.log(p) + (1 - y) * np.log1p(-p))
    np.testing.assert_allclose(m["logloss"], ll, rtol=1e-4)
    np.testing.assert_allclose(m["oracle_brier"], 0.0, atol=1e-10)
    np.testing.assert_allclose(m["mean_pctr"], p.mean(), rtol=1e-5)


def test_cache_dir_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("CALIB_JAX_CACHE", str(tmp_path / "c"))
    assert bb.default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("CALIB_JAX_CACHE")
    assert bb.default_cache_dir().parts[-2:] == (".cache", "calib_jax")


def test_config_validation():
    with pytest.raises(ValueError, match="neg_sample_rate"):
        bb.BackboneConfig(neg_sample_rate=0.0)
    with pytest.raises(ValueError, match="batch_size"):
        bb.BackboneConfig(batch_size=0)
    with pytest.raises(ValueError, match="config.fields"):
        bb.fit_and_export(np.zeros((10, 2), np.int32), np.zeros(10), field_names=("a", "b"),
                          cardinalities={"a": 1, "b": 1}, dense=None, oracle=None, pctr=None,
                          config=bb.BackboneConfig(fields=("c",)), key=jax.random.key(0))


@pytest.mark.parametrize("kwargs, match", [
    (dict(learning_rate=float("nan")), "`learning_rate` must be a finite number > 0"),  # trained to NaN before
    (dict(learning_rate=float("inf")), "`learning_rate`"), (dict(learning_rate="0.1"), "`learning_rate`"),
    (dict(neg_sample_rate="0.5"), "`neg_sample_rate` must be a number"),  # a TypeError from `<` before
    (dict(hidden=(0,)), "`hidden` must be a tuple of positive int widths"), (dict(hidden=(-3,)), "`hidden`"),
    (dict(hidden=32), "`hidden`"), (dict(fields="media"), "`fields` must be a tuple of field names"),
    (dict(fields=("media", "media")), "names a field more than once"), (dict(segment_field=0), "`segment_field`"),
    (dict(use_dense="no"), "`use_dense` must be True or False"),  # "no" is true: the dense features were fed
    (dict(chronological=1), "`chronological` must be True or False"),
    (dict(segment_neg_rates=()), "`segment_neg_rates` must be None or a non-empty tuple")])
def test_a_backbone_configuration_that_cannot_train_is_refused_when_built(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bb.BackboneConfig(**kwargs)
    assert bb.BackboneConfig(hidden=(), use_dense=np.bool_(False), learning_rate=np.float32(1e-3)).hidden == ()


def test_segment_negative_sampling_miscalibrates_by_segment(tmp_path):
    """The grouping world: negatives of segment s kept at rate r_s in training shift the
    backbone's odds in s by about 1 / r_s on the (unsampled) test split, while a backbone
    trained without it stays close to calibrated in every segment."""
    cfg_sim = sim.tiny_config(n_chunks=6)
    base = dataclasses.replace(BB, neg_sample_rate=1.0, fields=bb.DEFAULT_FIELDS + ("regime",))
    seg = dataclasses.replace(base, segment_neg_rates=(1.0, 0.25, 1.0))
    ratios = {}
    for name, cfg in (("base", base), ("seg", seg)):
        out = bb.load_or_train(cfg_sim, cfg, seed=0, cache_dir=tmp_path)
        t = out.test
        regime = t.fields[:, sim.FIELD_NAMES.index("regime")]
        p = 1 / (1 + np.exp(-t.logits.astype(np.float64)))
        ratios[name] = {r: p[regime == r].mean() / t.labels[regime == r].mean() for r in range(3)}
    # odds shift of ~4 (1 / 0.25) in segment 1 only: its over-prediction relative to segment 0
    assert ratios["seg"][1] / ratios["seg"][0] > 2.0
    assert 0.67 < ratios["base"][1] / ratios["base"][0] < 1.5
    with pytest.raises(ValueError, match="segment_neg_rates"):
        bb.BackboneConfig(segment_neg_rates=(1.0, 0.0))


def test_fresh_impressions_continue_the_same_world_scored_by_the_cached_backbone(tmp_path):
    """The impressions after the log are the simulator's next chunks of the same key (checked
    against one longer simulation), scored by the very backbone the cache holds (its saved
    parameters reproduce the cached test logits), and cached themselves."""
    out = bb.load_or_train(SIM, BB, seed=0, cache_dir=tmp_path)
    n = len(out.test)
    new = bb.fresh_impressions(SIM, BB, n_rows=n, seed=0, cache_dir=tmp_path)
    assert len(new) == n and new.oracle is not None and np.all(np.isfinite(new.logits))
    log = sim.simulate(SIM, jax.random.key(0))
    longer = sim.simulate(dataclasses.replace(SIM, n_chunks=SIM.n_chunks + 3), jax.random.key(0))
    assert len(longer) >= len(log) + n
    np.testing.assert_array_equal(longer.fields[: len(log)], log.fields)  # the log is its prefix
    after = slice(len(log), len(log) + n)
    np.testing.assert_array_equal(new.fields, longer.fields[after])
    np.testing.assert_array_equal(new.labels, longer.click[after].astype(np.float32))
    np.testing.assert_array_equal(new.oracle, longer.oracle[after])
    assert longer.request[after].min() >= SIM.n_requests  # requests after the log's
    # the saved parameters are the backbone's: they reproduce the cached test logits
    cols = [sim.FIELD_NAMES.index(f) for f in BB.fields]
    cards = sim.field_cardinalities(SIM)
    model = bb.CTRBackbone(tuple(cards[f] for f in BB.fields), BB.embed_dim, tuple(BB.hidden), BB.embedding_dim)
    trained = bb._load_trained(tmp_path / f"backbone_{out.info['hash']}.params.npz", model)
    dense = BB.use_dense
    o, _ = bb.predict(trained, log.fields[out.test.rows][:, cols], log.dense[out.test.rows] if dense else None,
                      batch_size=BB.predict_batch)
    np.testing.assert_allclose(o, out.test.logits, rtol=0, atol=1e-6)
    o_new, _ = bb.predict(trained, new.fields[:, cols], longer.dense[after] if dense else None,
                          batch_size=BB.predict_batch)
    np.testing.assert_allclose(o_new, new.logits, rtol=0, atol=1e-6)
    # cached: the same arrays again, without simulating
    again = bb.fresh_impressions(SIM, BB, n_rows=n, seed=0, cache_dir=tmp_path)
    np.testing.assert_array_equal(again.logits, new.logits)
    # a backbone cached without its parameters (an older cache) is retrained, to the same result
    (tmp_path / f"backbone_{out.info['hash']}.params.npz").unlink()
    shutil.rmtree(tmp_path / f"backbone_{out.info['hash']}.fresh-{n}")
    redo = bb.fresh_impressions(SIM, BB, n_rows=n, seed=0, cache_dir=tmp_path)
    np.testing.assert_array_equal(redo.logits, new.logits)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # no temporary folder left
    with pytest.raises(ValueError, match="n_rows"):
        bb.fresh_impressions(SIM, BB, n_rows=0, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="seed"):
        bb.fresh_impressions(SIM, BB, n_rows=10, seed=0.5, cache_dir=tmp_path)  # type: ignore[arg-type]


def test_fresh_impressions_scored_in_pieces_equal_the_one_shot_scores(tmp_path, monkeypatch):
    """Scored piece by piece into memory-mapped columns (one prediction batch a piece, the last
    piece longer than a batch, so never padded to a smaller size), the fresh impressions are
    the bits of scoring all rows at once."""
    small = dataclasses.replace(BB, predict_batch=4096)
    out = bb.load_or_train(SIM, small, seed=0, cache_dir=tmp_path)
    monkeypatch.setattr(bb, "FRESH_PIECE_BATCHES", 1)
    n = 3 * 4096 + 700  # pieces of 4,096 rows at 0 and 4,096, and the last of 4,796 at 8,192
    new = bb.fresh_impressions(SIM, small, n_rows=n, seed=0, cache_dir=tmp_path)
    assert len(new) == n and not new.embedding.flags.writeable  # memory-mapped, read-only
    longer = sim.simulate(dataclasses.replace(SIM, n_chunks=SIM.n_chunks + 3), jax.random.key(0))
    after = slice(int(out.info["log_rows"]), int(out.info["log_rows"]) + n)
    cards = sim.field_cardinalities(SIM)
    model = bb.CTRBackbone(tuple(cards[f] for f in BB.fields), BB.embed_dim, tuple(BB.hidden), BB.embedding_dim)
    trained = bb._load_trained(tmp_path / f"backbone_{out.info['hash']}.params.npz", model)
    cols = [sim.FIELD_NAMES.index(f) for f in BB.fields]
    o, z = bb.predict(trained, longer.fields[after][:, cols], longer.dense[after] if BB.use_dense else None,
                      batch_size=small.predict_batch)
    np.testing.assert_array_equal(new.logits, o)
    np.testing.assert_array_equal(new.embedding, z)
    np.testing.assert_array_equal(new.fields, longer.fields[after])
    np.testing.assert_array_equal(new.pctr, longer.pctr[after])
    np.testing.assert_array_equal(new.rows, np.arange(n))
    # a cache written before the columns were memory-mapped (one .npz) is still read
    legacy = tmp_path / f"backbone_{out.info['hash']}.fresh-{n}.npz"
    legacy.write_bytes(bb._pack({"fresh": new._replace(logits=new.logits + 1)}))
    np.testing.assert_array_equal(bb.fresh_impressions(SIM, small, n_rows=n, seed=0, cache_dir=tmp_path).logits,
                                  o + 1)
