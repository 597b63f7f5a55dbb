"""Hostile input to the writers, the Monte Carlo configurations, the loaders and the plots (a
fuzz of 610 cases over ``calib_jax.io``, ``plotting``, ``data`` and the ``montecarlo`` study
API, 2026-12-06). Each case failed on the code before: a guard given one path as a ``str``
let that file be overwritten, a panel's field 2 silently read the cohort, a CTR range reaching
0 made every trial NaN without a word, seed ``2**32`` built seed 0's world, and the writers
split a ``str`` row into characters or left half their files behind an error.
"""

from __future__ import annotations

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from calib_jax import io as cio
from calib_jax import montecarlo as mc
from calib_jax.data import movielens, splits
from calib_jax.data import simulator as sim

pd = pytest.importorskip("pandas")


# ------------------------------------------------------------------ nothing of the user's lost
def test_a_guard_given_one_path_as_text_guards_that_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "log.csv").write_text("p,y\n0.5,1\n")
    with pytest.raises(ValueError, match="this input would be overwritten"):
        with cio.guard_outputs("log.csv"):  # iterated before: 'l', 'o', 'g', ... guarded, the log not
            cio.atomic_write_text("log.csv", "OVERWRITTEN")
    assert (tmp_path / "log.csv").read_text() == "p,y\n0.5,1\n"


def test_a_table_or_figure_whose_target_fails_writes_none_of_its_files(tmp_path):
    with pytest.raises(ValueError, match="`digits` must be an int >= 0"):
        cio.write_table(tmp_path / "t", ["a"], [[0.5]], digits=2.5)
    (tmp_path / "u.md").mkdir()
    with pytest.raises(ValueError, match="u.md: is a folder"):
        cio.write_table(tmp_path / "u", ["a"], [[0.5]])
    from calib_jax.plotting import plt, save_figure

    (tmp_path / "fig.pdf").mkdir()
    fig, _ = plt.subplots(figsize=(1, 1))
    with pytest.raises(ValueError, match="fig.pdf: is a folder"):
        save_figure(fig, tmp_path / "fig", dpi=20)
    assert not plt.fignum_exists(fig.number)  # closed either way
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig.pdf", "u.md"]  # no t.csv, u.csv, fig.png


# ------------------------------------------------------------------ the writers
def test_cells_are_the_numbers_they_hold_and_rows_fit_the_header(tmp_path):
    import ml_dtypes

    for nan in (jnp.float32(np.nan), np.array(np.nan), ml_dtypes.bfloat16("nan")):
        with pytest.raises(ValueError, match="row 0, column 'ece' is nan"):
            cio.write_csv(tmp_path / "x.csv", ["method", "ece"], [["platt", nan]], allow_nan=False)
    text = cio.write_csv(tmp_path / "y.csv", ["ece"], [[jnp.float32(0.1)], [np.float32(0.1)]]).read_text()
    assert text.splitlines()[1:] == [repr(float(np.float32(0.1)))] * 2  # repr of the value, as documented
    for header, rows, match in ((["a", "b", "c"], [[1, 2]], "row 0 has 2 cells under a header of 3"),
                                ("abc", [[1, 2, 3]], "`header` must be a list"),
                                (["name"], ["platt"], "row 0 must be a list of cells")):
        with pytest.raises(ValueError, match=match):
            cio.write_csv(tmp_path / "z.csv", header, rows)
    table = cio.markdown_table(["kind", "ece"], [["jax", jnp.float32(0.0123456)], ["0-d", np.array(0.0123456)],
                                                 ["bf16", ml_dtypes.bfloat16(0.0123)], ["pipe", "|bias|"]])
    assert table.splitlines()[2:] == ["| jax | 0.0123 |", "| 0-d | 0.0123 |", "| bf16 | 0.0123 |",
                                      "| pipe | \\|bias\\| |"]  # a bare | would start a third column


def test_json_refuses_keys_that_would_collide_and_names_a_nan(tmp_path):
    with pytest.raises(ValueError, match="two keys are both written as '1'"):
        cio.write_json(tmp_path / "k.json", {1: "int key", "1": "str key"})
    with pytest.raises(ValueError, match=r"k.json: the value\['runs'\]\[1\] \(nan\) is not a finite number"):
        cio.write_json(tmp_path / "k.json", {"runs": [0.5, float("nan")]}, allow_nan=False)
    assert not (tmp_path / "k.json").exists()


# ------------------------------------------------------------------ the Monte Carlo study API
def _trial_data(fields):
    p = jnp.array([0.2, 0.8, 0.2, 0.8, 0.3, 0.6])
    return mc.TrialData(logits=jnp.log(p / (1 - p)), probs=p, labels=jnp.array([0.0, 1.0, 0.0, 1.0, 1.0, 0.0]),
                        oracle=p, fields=jnp.asarray(fields, jnp.int32), regime=jnp.zeros(6, jnp.int32),
                        params=mc.VariantParams(*jnp.zeros(7)))


def test_a_panel_reads_the_field_it_names_over_all_its_levels():
    for field in (2, -1, True):  # 2 read the cohort: JAX clamps a column index
        with pytest.raises(ValueError, match="`field` must be 0 \\(media\\) or 1 \\(cohort\\)"):
            mc.panel_for(["gce_field"], field=field, n_levels=4)
    small = mc.metric_panel(mc.panel_for(["gce_field", "field_ece"], n_levels=2))  # the scenario draws 8 media
    for build in (lambda: mc.make_trial(200, metrics=small), lambda: mc.make_repeated_trial(200, 2, metrics=small)):
        with pytest.raises(ValueError, match="`n_levels`=2 of the panel is below the 8 levels of field 0"):
            build()  # under the engine's unchecked run, a GCE over 2 of 8 media came out finite and wrong
    mc.make_trial(200, metrics=mc.metric_panel(mc.panel_for(["gce_field"], n_levels=8)))
    d = _trial_data([[0, 0], [1, 1], [2, 0], [3, 1], [0, 0], [1, 1]])
    from calib_jax import metrics as M

    right = mc.metric_panel(mc.panel_for(["gce_field"], n_levels=4))
    assert float(mc.evaluate(d, jax.random.key(0), right)[0]) == pytest.approx(
        float(M.gce(d.probs, d.labels, d.fields[:, 0], n_groups=4)), rel=1e-6)


@pytest.mark.parametrize("option, value, match", [
    ("n_bins", 0, "`n_bins` must be >= 1"), ("n_clusters", 2.5, "`n_clusters` must be a Python int"),
    ("n_restarts", 0, "`n_restarts` must be >= 1"), ("n_groups_random", -1, "`n_groups_random` must be >= 1"),
    ("optimal_bins", 0, "`optimal_bins` must be >= 1"), ("cll_val_fraction", 1.0, "`cll_val_fraction` must be a number"),
    ("cll_val_fraction", "0.5", "`cll_val_fraction`"), ("alpha", float("nan"), "`alpha` must be a number in \\(0, 1\\)"),
    ("alpha", True, "`alpha`")])
def test_a_panel_option_is_refused_when_the_panel_is_built_under_its_own_name(option, value, match):
    # before, the panel was built and the first evaluation refused it under the metric's argument:
    # `optimal_bins=0` as "`n_bins` must be >= 1" (a different panel option), `cll_val_fraction` as `val_fraction`
    with pytest.raises(ValueError, match=match):
        mc.panel_for(None, modern=True, **{option: value})
    assert mc.panel_for(None, **{option: {"cll_val_fraction": 0.25, "alpha": 0.25}.get(option, 3)}).metrics


@pytest.mark.parametrize("kwargs, match", [
    (dict(base_ctr=(0.0, 0.1)), "`base_ctr` must be a range"), (dict(base_ctr=(0.1, float("nan"))), "`base_ctr`"),
    (dict(base_ctr=(0.2, 0.1)), "`base_ctr`"), (dict(interaction_scale=float("nan")), "`interaction_scale`"),
    (dict(field_scale=(-0.1, 0.5)), "`field_scale`"), (dict(n_media=0), "`n_media` must be >= 1")])
def test_a_scenario_that_cannot_draw_a_population_is_refused_when_built(kwargs, match):
    with pytest.raises(ValueError, match=match):
        mc.ScenarioConfig(**kwargs)  # (0, 0.1) made every trial's metrics NaN, without an error


def test_configurations_are_checked_and_stay_hashable():
    with pytest.raises(ValueError, match="`p_active` must be a finite number in \\[0, 1\\]"):
        mc.VariantConfig(p_active=1.5)
    with pytest.raises(ValueError, match="`nonlinear`"):
        mc.VariantConfig(nonlinear=(-1.0, 0.5))  # a non-monotone map
    assert hash(mc.ScenarioConfig(base_ctr=[0.01, 0.1])) == hash(mc.ScenarioConfig())  # a list is a tuple
    cfg = sim.tiny_config()
    listed = sim.SimulatorConfig(**{**cfg.to_dict(), "position_effects": [0.0, -0.4, -0.8]})
    assert hash(listed) == hash(cfg)  # a list made the config unhashable: simulate could not take it
    assert sim.config_hash(sim.tiny_config(intercept=-5)) == sim.config_hash(sim.tiny_config(intercept=-5.0))
    with pytest.raises(ValueError, match="`n_user_buckets` must be a positive int below 2\\*\\*31"):
        sim.tiny_config(n_user_buckets=2**31)
    with pytest.raises(ValueError, match="`n_ref` must be >= 1"):
        mc.fixed_world(jax.random.key(0), n_ref=0)  # an intercept of 25, a CTR of 1
    key = jax.random.key(0)
    assert mc.config_hash({"a": 1}, key, 3, 4) != mc.config_hash({"a": 2}, key, 3, 4)
    for config in ({1: "a"}, {"n": {2: "b"}}):  # {1: a} and {"1": a} shared one checkpoint folder
        with pytest.raises(ValueError, match="configuration keys must be strings"):
            mc.config_hash(config, key, 3, 4)


def test_every_bit_of_a_seed_and_a_trial_index_counts():
    data = lambda k: np.asarray(jax.random.key_data(k)).tolist()  # noqa: E731
    assert data(mc.world_key(2**32)) != data(mc.world_key(0))  # jax.random.key kept 32 bits
    assert data(mc.world_key(5)) == data(jax.random.fold_in(jax.random.key(5), mc.designs.WORLD_TAG))
    with pytest.raises(ValueError, match="`seed` must be an integer"):
        mc.world_key(1.9)
    with pytest.raises(ValueError, match="`indices` must be a 1-D vector of integers in \\[0, 2\\*\\*32\\)"):
        mc.trial_keys(jax.random.key(0), np.array([0, 2**32], np.int64))  # 2**32 gave trial 0's key
    np.testing.assert_array_equal(np.asarray(jax.random.key_data(mc.trial_keys(jax.random.key(0), np.array([0, 7])))),
                                  np.asarray(jax.random.key_data(mc.trial_keys(jax.random.key(0), jnp.array([0, 7])))))


def test_runs_and_trials_name_a_bad_key_size_or_device_list(tmp_path):
    trial = lambda k: jax.random.uniform(k)  # noqa: E731
    with pytest.raises(ValueError, match="`key` must be one JAX PRNG key"):
        mc.run_trials(trial, 0, 4, chunk_size=4, progress=False)  # an AttributeError deep inside before
    with pytest.raises(ValueError, match="`devices` must be a non-empty list"):
        mc.run_trials(trial, jax.random.key(0), 4, chunk_size=4, progress=False, devices=[])
    assert mc.run_trials(trial, jax.random.PRNGKey(0), 4, chunk_size=4, progress=False).shape == (4,)
    with pytest.raises(ValueError, match="`n` must be >= 1"):
        mc.make_trial(-3)  # an MLIR error before
    with pytest.raises(ValueError, match="`study` must be a relative path inside figures/"):
        cio.figures_dir("../../x", root=tmp_path)
    assert not (tmp_path.parent / "x").exists()


def test_flags_formats_and_metric_lists_are_what_they_say():
    from calib_jax import metrics as M
    from calib_jax.plotting.heatmap import annotated_heatmap

    with pytest.raises(ValueError, match="`higher_is_better` of metric 'auc' must be True or False"):
        mc.PanelMetric("auc", M.auc, higher_is_better="no")  # a true string: the column was negated
    with pytest.raises(ValueError, match="not a mapping"):
        mc.panel_for({"ece": M.ece})  # read as its keys, the function dropped
    with pytest.raises(ValueError, match="`chronological` must be True or False"):
        splits.train_test_split(jax.random.key(0), 10, chronological="no")
    with pytest.raises(ValueError, match="`fmt` must be a str.format pattern"):
        annotated_heatmap(np.eye(2), ["a", "b"], fmt="%.2f")  # every cell read "%.2f"
    with pytest.raises(ValueError, match="`intercept` must be a finite number"):
        sim.tiny_config(intercept=1e308)  # inf in float32, where the simulator computes


def test_results_are_loaded_only_into_their_own_structure(tmp_path):
    trial = lambda k: {"u": jax.random.uniform(k), "z": jax.random.normal(k, (2,))}  # noqa: E731
    mc.run_trials(trial, jax.random.key(0), 5, chunk_size=4, progress=False, checkpoint_dir=tmp_path,
                  config={"demo": 1})
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    with pytest.raises(ValueError, match="holds 2 result arrays, the structure asked for has 1"):
        mc.load_results(run / "results.npz", {"z": 0})  # read 'u' as 'z' before


# ------------------------------------------------------------------ splits and loaders
def test_splits_take_row_indices_and_name_the_fraction_given():
    key = jax.random.key(0)
    for idx, match in ((np.arange(10).reshape(5, 2), "must be a 1-D array"), (np.arange(5) + 0.7, "whole row indices"),
                       (np.array([np.nan, 1, 2, 3, 4.0]), "whole row indices")):
        with pytest.raises(ValueError, match=match):
            splits.subsplit(key, idx, frac=0.4)
    with pytest.raises(ValueError, match="`val_frac` must lie in \\(0, 1\\)"):
        splits.paper_splits(key, 1000, val_frac=1.5)  # said `frac`
    with pytest.raises(ValueError, match="`key` must be a JAX PRNG key or an int seed"):
        splits.numpy_rng(jnp.float32(0.7), 1)  # 0.7 and 0.2 drew one stream
    with pytest.raises(ValueError, match="stream ids must be ints >= 0"):
        splits.numpy_rng(key, 1.7)
    with pytest.raises(ValueError, match="`n` must be an int >= 5"):
        movielens.paper_split(key, 3)


def test_movielens_reads_timestamps_exactly_and_names_the_line(tmp_path):
    f = tmp_path / "u.data"
    f.write_text(f"1\t1\t3\t{2**53 + 1}\n--5\t1\t3\t1\n")
    r = movielens.load(f)
    assert int(r.timestamp[0]) == 2**53 + 1  # read through float before: off by one
    assert set(r.user_ids) == {"1", "--5"}  # an id that is not a number is text, not a crash in int()
    for text, match in (("1\t1\t3\t1e30\n", "line 1: timestamp '1e30' is beyond"),):
        f.write_text(text)
        with pytest.raises(ValueError, match=match):
            movielens.load(f)
    f.write_bytes("1\t1\t3\t1\n\xe9\t1\t3\t1\n".encode("latin-1"))
    with pytest.raises(ValueError, match="u.data, line 2: not UTF-8 text"):
        movielens.load(f)


def test_a_simulated_log_without_clicks_has_no_pctr_to_ctr_ratio(tmp_path):
    imp = sim.simulate(sim.tiny_config(n_chunks=1, requests_per_chunk=64, n_users=200, n_ads=50, n_advertisers=10),
                       jax.random.key(0))
    assert np.isnan(sim.summary_stats(imp._replace(click=np.zeros_like(imp.click)))["ratio_pctr_ctr"])
    with pytest.raises(ValueError, match="`key` must be one JAX PRNG key"):
        sim.simulate_to_disk(sim.tiny_config(n_chunks=1), 0, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # made before the key was refused
    os.makedirs(tmp_path / "bad")
    (tmp_path / "bad" / "manifest.json").write_text("{not json")
    with pytest.raises(ValueError, match="manifest.json: not a simulate_to_disk manifest"):
        sim.load_from_disk(tmp_path / "bad")


# ------------------------------------------------------------------ plots
def test_plots_read_labels_by_position_and_refuse_nan_groups():
    from matplotlib.colors import to_hex

    from calib_jax.plotting import plt
    from calib_jax.plotting.grouping import plot_group_scatter
    from calib_jax.plotting.heatmap import correlation_bars

    rho = np.array([0.62, 0.91, 0.35])
    fig = correlation_bars(rho, pd.Series(["ECE", "LCCE", "MCE"], index=[2, 1, 0]), highlight="ECE", caption=None)
    ax = fig.axes[0]
    bars = {t.get_text(): (round(b.get_width(), 2), to_hex(b.get_facecolor(), keep_alpha=False))
            for t, b in zip(ax.get_yticklabels(), ax.patches, strict=True)}
    plt.close(fig)
    assert {k: v[0] for k, v in bars.items()} == {"ECE": 0.62, "LCCE": 0.91, "MCE": 0.35}  # swapped by the index
    assert [k for k, v in bars.items() if v[1] == "#d62728"] == ["ECE"]
    est = np.array([0.1, 0.12, 0.3, 0.32, 0.5, 0.52])
    with pytest.raises(ValueError, match="`groups` contains 2 NaN"):
        plot_group_scatter(est, est, np.array([0, 0, 1, 1, np.nan, np.nan]))  # 4 of 6 points drawn before


def test_open_bandit_refuses_values_its_columns_cannot_hold(tmp_path):
    import csv as csvlib

    from calib_jax.data.open_bandit import load_open_bandit

    root = tmp_path / "obd"
    items = 2
    (root / "random" / "men").mkdir(parents=True)
    with open(root / "random" / "men" / "item_context.csv", "w", newline="") as f:
        w = csvlib.writer(f)
        w.writerow(["", "item_id", "item_feature_0", "item_feature_1", "item_feature_2", "item_feature_3"])
        for i in range(items):
            w.writerow([i, i, 0.5, f"c{i}", "x", "y"])

    def log(edit):
        header = (["", "timestamp", "item_id", "position", "click", "propensity_score"]
                  + [f"user_feature_{k}" for k in range(4)] + [f"user-item_affinity_{k}" for k in range(items)])
        rows = [[str(r), f"2019-11-24 00:00:0{r}", str(r % items), str(1 + r % 3), str(r % 2), "0.5"]
                + [f"u{k}{r % 2}" for k in range(4)] + ["0.0"] * items for r in range(4)]
        header, rows = edit(header, rows)
        with open(root / "random" / "men" / "men.csv", "w", newline="") as f:
            csvlib.writer(f).writerows([header, *rows])

    def position(header, rows):
        rows[1][3] = str(2**40)  # wrapped to -1 in the int32 column
        return header, rows

    def affinity(header, rows):
        rows[2][10] = "1e300"  # inf in float32, where the loader refuses inf in the file
        return header, rows

    def twice(header, rows):
        return header + ["click"], [r + ["1"] for r in rows]  # the first click column was read

    for edit, match in ((position, "line 3, column 'position': '1099511627776' is beyond the int32 range"),
                        (affinity, "line 4, column 'user-item_affinity_0': '1e300' is beyond the float32 range"),
                        (twice, r"column\(s\) \['click'\] appear more than once")):
        log(edit)
        with pytest.raises(ValueError, match=match):
            load_open_bandit(root, policy="random")
    log(lambda h, r: (h, r))
    assert json.dumps(load_open_bandit(root, policy="random").position.tolist()) == "[0, 1, 2, 0]"


def test_sizes_seeds_and_indices_are_integers_as_given():
    """A second pass of the same fuzz (2026-12-06): each call below was taken, truncated or
    ignored before."""
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="`n_trials` must be a Python int"):
        mc.config_hash({}, key, 2.9, 4)  # hashed as 2: a run of 2.9 trials read the checkpoints of 2
    assert mc.config_hash({}, key, np.int64(2), 4) == mc.config_hash({}, key, 2, 4)
    with pytest.raises(ValueError, match="`indices` must be integers, got float32"):
        mc.trial_keys(key, jnp.array([1.7]))  # fold_in truncated it to trial 1's key
    with pytest.raises(ValueError, match="`n` must be a Python int"):
        mc.make_design_trial("pooled", 2.7, seed=0, metrics=["brier"])  # 2 rows
    with pytest.raises(ValueError, match="`seed` must be an integer"):
        mc.make_design_trial("pooled", 100, seed=1.5, metrics=["brier"])
    from calib_jax import metrics as M

    user = [mc.PanelMetric("my_ece", M.ece)]
    for kwargs, match in ((dict(n="200"), "`n` must be a Python int"), (dict(n=200.9), "`n` must be a Python int"),
                          (dict(n=200, seed=1.5), "`seed` must be an integer")):
        with pytest.raises(ValueError, match=match):
            mc.check_metrics(user, n_trials=4, **kwargs)
    with pytest.raises(ValueError, match="`extra` has the key 1 \\(int\\)"):
        sim.config_hash(extra={1: "a"})  # named the cache of {"1": "a"}
    with pytest.raises(ValueError, match="must return a real number, got dtype complex64"):
        mc.check_metrics([mc.PanelMetric("c", lambda p, y: jnp.mean(p).astype(jnp.complex64))], n=200, n_trials=4)


def test_a_resumed_log_starts_at_a_chunk_it_has(tmp_path):
    cfg = sim.tiny_config(n_chunks=1)
    with pytest.raises(ValueError, match="`start` must be an int in \\[0, n_chunks=1\\], got 5"):
        list(sim.iter_chunks(cfg, jax.random.key(0), start=5))  # yielded nothing
    with pytest.raises(ValueError, match="`pacing` must be \\(30,\\) finite positive"):
        list(sim.iter_chunks(cfg, jax.random.key(0), pacing=np.full(30, np.nan)))  # NaN bids
    assert list(sim.iter_chunks(cfg, jax.random.key(0), start=1)) == []  # the end of a finished log


def test_tables_keep_a_cell_on_its_row_and_plots_draw_what_they_name():
    import matplotlib.pyplot as plt

    from calib_jax.plotting.grouping import plot_ablation
    from calib_jax.plotting.heatmap import rho_curves

    assert cio.markdown_table(["a", "b"], [["two\nlines", "x|y"]]).splitlines()[2] == "| two<br>lines | x\\|y |"
    with pytest.raises(ValueError, match="`min_compile_time_s` must be a finite number of seconds >= 0"):
        cio.enable_compile_cache(min_compile_time_s=-5)
    with pytest.raises(ValueError, match="bands for labels not in `curves`: \\['b'\\]"):
        rho_curves([1, 2], {"a": [0.1, 0.2]}, lo={"b": [0, 0]}, hi={"b": [1, 1]})  # the band was dropped
    with pytest.raises(ValueError, match="`x` must be a 1-D sequence"):
        plot_ablation(np.ones((3, 2)), {"ECE": [1, 2, 3]}, xlabel="x")  # two lines under one label
    plt.close("all")


def test_keys_sizes_and_trial_functions_are_named_when_wrong():
    """A seed where a key belongs, and other wrong types, failed inside JAX or NumPy in words
    that named no argument; each now names it."""
    key = jax.random.key(0)
    for call in (lambda: sim.make_world(sim.tiny_config(), 0), lambda: sim.simulate(sim.tiny_config(), jnp.int32(0)),
                 lambda: mc.sample_population(0, 10), lambda: mc.fixed_world(0),
                 lambda: mc.trial_keys(0, jnp.arange(2)), lambda: mc.config_hash({}, 0, 3, 4)):
        with pytest.raises(ValueError, match="`key` must be one JAX PRNG key"):
            call()
    with pytest.raises(ValueError, match="`n` must be >= 1, got -1"):
        mc.sample_population(key, -1)  # an MLIR error before
    with pytest.raises(ValueError, match="`indices` must be a 1-D vector"):
        mc.trial_keys(key, jnp.array(3))
    with pytest.raises(ValueError, match="`trial_fn` must be a function"):
        mc.run_trials(5, key, 4, chunk_size=4, progress=False)
    with pytest.raises(ValueError, match="`config` must be a mapping"):
        mc.run_trials(lambda k: jax.random.uniform(k), key, 4, chunk_size=4, progress=False, config=[1, 2])
    raw = mc.sample_population(jax.random.PRNGKey(0), 5).oracle  # a raw uint32[2] key is a key
    np.testing.assert_array_equal(raw, mc.sample_population(jax.random.wrap_key_data(jax.random.PRNGKey(0)), 5).oracle)


def _host_float(k):
    return {"x": float(jax.random.uniform(k))}


def _python_if(k):
    u = jax.random.uniform(k)
    return {"x": u if u > 0.5 else -u}


def _numpy_of_a_draw(k):
    return {"x": np.asarray(jax.random.uniform(k))}


def _drawn_shape(k):
    return {"x": jnp.zeros(int(jax.random.randint(k, (), 1, 5)))}


def test_a_trial_function_that_jax_cannot_trace_is_named_with_what_a_trial_may_do():
    """Host work on a traced draw, and a result that is not arrays, failed in JAX's words
    (``ConcretizationTypeError``, "is not a valid JAX type") that named neither the trial nor the rule."""
    key = jax.random.key(0)
    for fn in (_host_float, _python_if, _numpy_of_a_draw, _drawn_shape):
        with pytest.raises(ValueError, match=f"`trial_fn` {fn.__name__} is run under jax.jit and jax.vmap") as err:
            mc.run_trials(fn, key, 4, chunk_size=4, progress=False)
        assert isinstance(err.value.__cause__, jax.errors.ConcretizationTypeError | jax.errors.TracerArrayConversionError)
    for result in ("abc", {"x": object()}):
        with pytest.raises(ValueError, match="must return a pytree of arrays"):
            mc.run_trials(lambda k, r=result: r, key, 4, chunk_size=4, progress=False)
    with pytest.raises(ValueError, match="returned no arrays"):  # ran and returned None before
        mc.run_trials(lambda k: None, key, 4, chunk_size=4, progress=False)
    # a wrong signature was Python's TypeError from inside the trace ("takes 0 positional arguments")
    for fn, got in ((lambda: 1.0, r"\(\)"), (lambda k, scale: k, r"\(k, scale\)")):
        with pytest.raises(ValueError, match=f"`trial_fn` must take a key, got a function of {got}"):
            mc.run_trials(fn, key, 4, chunk_size=4, progress=False)
    with pytest.raises(ValueError, match=r"must take a key and 2 more arguments \(its BoundTrial's\)"):
        mc.run_trials(mc.BoundTrial(lambda k, a: a, (1.0, 2.0)), key, 4, chunk_size=4, progress=False)
    takes_more = mc.run_trials(lambda k, *rest, scale=2.0: scale * jax.random.uniform(k), key, 4, chunk_size=4,
                               progress=False)  # defaults and *args are fine
    assert takes_more.shape == (4,)
    out = mc.run_trials(lambda k: {"x": jnp.where(jax.random.uniform(k) > 0.5, 1.0, -1.0)}, key, 4, chunk_size=4,
                        progress=False)
    assert set(np.unique(out["x"])) <= {-1.0, 1.0}


def test_plots_name_the_option_that_matplotlib_would_have_refused():
    import matplotlib.pyplot as plt

    from calib_jax.plotting.heatmap import annotated_heatmap, correlation_bars, rho_curves

    for rho in (np.array([np.inf, 0.1]), np.array([]), np.full((2, 1), 0.1)):
        with pytest.raises(ValueError, match="`rho` must be a non-empty 1-D vector of coefficients"):
            correlation_bars(rho, ["a", "b"][: len(rho)])
    with pytest.raises(ValueError, match="`err` must hold non-negative distances"):
        correlation_bars(np.array([0.2, 0.1]), ["a", "b"], err=np.array([-0.1, 0.1]))
    correlation_bars(np.array([np.nan, 0.1]), ["a", "b"], err=np.array([np.nan, 0.1]))  # undefined: drawn as none
    with pytest.raises(ValueError, match="`vmin` and `vmax` must be finite numbers with vmin < vmax"):
        annotated_heatmap(np.eye(2), ["a", "b"], vmin=1, vmax=-1)
    with pytest.raises(ValueError, match="`values` must hold numbers"):
        annotated_heatmap(np.array([["a", "b"], ["c", "d"]]), ["a", "b"])
    with pytest.raises(ValueError, match="labels of `curves` and `emphasize` must be strings"):
        rho_curves([1, 2], {1: [0.1, 0.2]})
    plt.close("all")


def test_files_fractions_and_seeds_of_the_wrong_kind_are_named(tmp_path):
    import matplotlib.pyplot as plt

    from calib_jax import metrics as M
    from calib_jax.plotting.grouping import plot_group_scatter

    junk = tmp_path / "results.npz"
    junk.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="results.npz: not a results file of run_trials"):
        mc.load_results(junk, {"u": 0})  # NumPy's pickle message named no file
    with pytest.raises(FileNotFoundError):
        mc.load_results(tmp_path / "missing.npz", {"u": 0})
    mc.check_metrics(mc.PanelMetric("my_ece", M.ece), n=200, n_trials=4)  # one metric is a list of one
    with pytest.raises(ValueError, match="`test_frac` must be a number in \\(0, 1\\), got '0.2'"):
        splits.train_test_split(jax.random.key(0), 10, test_frac="0.2")
    e = np.linspace(0.1, 0.5, 10)
    with pytest.raises(ValueError, match="`seed` must be an integer, got 'x'"):
        plot_group_scatter(e, e, np.arange(10) % 3, max_points=5, seed="x")
    with pytest.raises(ValueError, match="`groups` must be a 1-D vector"):
        plot_group_scatter(e, e, (np.arange(10) % 3)[:, None])
    from calib_jax.plotting import save_figure
    from calib_jax.plotting.grouping import plot_within_group_variance
    from calib_jax.plotting.heatmap import correlation_bars

    with pytest.raises(ValueError, match="`fig` must be a matplotlib Figure, got NoneType"):
        save_figure(None, tmp_path / "fig")
    with pytest.raises(ValueError, match="`err` must have shape \\(3,\\) or \\(2, 3\\)"):
        correlation_bars(np.array([0.1, 0.2, 0.3]), ["a", "b", "c"], err=np.ones((3, 3)))
    with pytest.raises(ValueError, match="`score_var` must hold one variance per grouping"):
        plot_within_group_variance(["a", "b"], np.ones((2, 2)), [1.0, 2.0])
    mc.check_metrics(mc.PanelMetric("my_ece", M.ece), n=200, n_trials=4, seed=-1)  # a 64-bit seed: OverflowError
    plt.close("all")


def test_simulator_entry_points_name_a_config_or_log_of_the_wrong_kind(tmp_path):
    cfg = sim.tiny_config(n_chunks=1)
    imp = sim.simulate(cfg, jax.random.key(0))
    short = imp._replace(click=imp.click[:-1])
    with pytest.raises(ValueError, match="`imp.fields` has shape \\(12288, 10\\), the log has 12287 rows"):
        sim.summary_stats(short)  # a NumPy IndexError before
    with pytest.raises(ValueError, match="`imp` must be simulator Impressions, got dict"):
        sim.log_table({})
    with pytest.raises(ValueError, match="`config` must be a SimulatorConfig"):
        sim.simulate({}, jax.random.key(0))  # dataclasses.replace's TypeError before
    with pytest.raises(ValueError, match="`config` must be a SimulatorConfig"):
        sim.field_cardinalities(None)
    with pytest.raises(ValueError, match="`table` must be a pyarrow.Table"):
        sim.write_log({}, tmp_path / "log.csv")
    assert not (tmp_path / "log.csv").exists()
    sim.simulate_to_disk(cfg, jax.random.key(0), tmp_path / "run")
    with pytest.raises(ValueError, match="`chunks` must be a slice"):
        sim.load_from_disk(tmp_path / "run", chunks=0)
    assert len(sim.load_from_disk(tmp_path / "run", chunks=slice(0, 1))) == len(imp)


def test_the_writers_name_text_bytes_and_objects_they_cannot_write(tmp_path, monkeypatch):
    loop = {"a": 1}
    loop["self"] = loop
    with pytest.raises(ValueError, match="holds itself"):
        cio.write_json(tmp_path / "loop.json", loop)  # a RecursionError before
    shared = [1, 2]
    cio.write_json(tmp_path / "shared.json", {"a": shared, "b": shared})  # shared, not circular
    out = cio.write_json(tmp_path / "np.json", {"z": np.complex128(1 + 2j), "t": np.datetime64("2026-01-01")})
    assert json.loads(out.read_text()) == {"z": "(1+2j)", "t": "2026-01-01"}  # a TypeError before
    with pytest.raises(ValueError, match="`text` must be a str, got bytes"):
        cio.atomic_write_text(tmp_path / "t.txt", b"x")
    with pytest.raises(ValueError, match="cannot be written as UTF-8"):
        cio.atomic_write_text(tmp_path / "t.txt", "\ud800")
    with pytest.raises(ValueError, match="`data` must be bytes, got a str"):
        cio.atomic_write_bytes(tmp_path / "t.bin", "x")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="names a folder, not a file"):
        cio.write_csv("", ["a"], [[1]])  # EBUSY moving a temporary file onto '.'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["np.json", "shared.json"]


def test_text_complex_values_and_mixed_ids_are_named():
    """Text or complex values where real numbers belong: text failed inside JAX naming nothing,
    and a complex vector lost its imaginary part without a word (every metric's input check)."""
    import matplotlib.pyplot as plt

    from calib_jax import metrics as M
    from calib_jax.plotting.grouping import plot_group_scatter
    from calib_jax.plotting.reliability import reliability_bins

    with pytest.raises(ValueError, match="`probs` must hold real numbers, got text"):
        reliability_bins("abc", [1, 0, 1])
    for probs in (np.array([0.1 + 1j, 0.5]), jnp.array([0.1 + 0j, 0.5])):
        with pytest.raises(ValueError, match="`probs` must hold real numbers, got dtype complex"):
            M.ece(probs, np.array([0.0, 1.0]))
    assert float(M.ece(np.array([0.1, 0.5]), np.array([False, True]))) == pytest.approx(0.3)  # booleans are 0/1
    e = np.linspace(0.1, 0.5, 4)
    with pytest.raises(ValueError, match="`groups` must hold ids of one kind"):
        plot_group_scatter(e, e, np.array([1, None, 2, 3], dtype=object))
    with pytest.raises(ValueError, match="`path` must be a file or folder path"):
        movielens.load(5)
    with pytest.raises(ValueError, match="`study` must be a relative path inside figures/ \\(a str\\)"):
        cio.figures_dir(None)
    with pytest.raises(ValueError, match="`config` must be a mapping"):
        cio.provenance(None, seed=0)
    plt.close("all")
