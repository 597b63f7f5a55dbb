"""Monte Carlo metric studies: scenarios, model variants, the metric panel, a
chunked/sharded/resumable trial engine and rank statistics.

A trial is a pure function ``key -> (metric vector, oracle Brier)``::

    from calib_jax import montecarlo as mc
    trial = mc.make_trial(20_000)                      # default scenario, variants, panel
    values, ref = mc.run_trials(trial, jax.random.key(0), 200, chunk_size=32)
    rho = mc.spearman_with(values, ref)                # Spearman of each metric with Brier*
"""

from calib_jax.montecarlo.analysis import RankConsistency as RankConsistency
from calib_jax.montecarlo.analysis import rank_consistency as rank_consistency
from calib_jax.montecarlo.bootstrap import BootstrapSpearman as BootstrapSpearman
from calib_jax.montecarlo.bootstrap import PairedDifference as PairedDifference
from calib_jax.montecarlo.bootstrap import bootstrap_counts as bootstrap_counts
from calib_jax.montecarlo.bootstrap import bootstrap_spearman as bootstrap_spearman
from calib_jax.montecarlo.bootstrap import paired_difference as paired_difference
from calib_jax.montecarlo.bootstrap import percentile_interval as percentile_interval
from calib_jax.montecarlo.designs import DESIGNS as DESIGNS
from calib_jax.montecarlo.designs import make_design_trial as make_design_trial
from calib_jax.montecarlo.designs import world_key as world_key
from calib_jax.montecarlo.engine import BoundTrial as BoundTrial
from calib_jax.montecarlo.engine import ResumedChunksWarning as ResumedChunksWarning
from calib_jax.montecarlo.engine import config_hash as config_hash
from calib_jax.montecarlo.engine import load_results as load_results
from calib_jax.montecarlo.engine import run_trials as run_trials
from calib_jax.montecarlo.engine import trial_keys as trial_keys
from calib_jax.montecarlo.panel import DISPLAY as DISPLAY
from calib_jax.montecarlo.panel import LABEL_METRICS as LABEL_METRICS
from calib_jax.montecarlo.panel import MODERN_METRICS as MODERN_METRICS
from calib_jax.montecarlo.panel import ORACLE_METRICS as ORACLE_METRICS
from calib_jax.montecarlo.panel import REFERENCE as REFERENCE
from calib_jax.montecarlo.panel import SMALL_PANEL as SMALL_PANEL
from calib_jax.montecarlo.panel import MetricFn as MetricFn
from calib_jax.montecarlo.panel import PanelConfig as PanelConfig
from calib_jax.montecarlo.panel import PanelMetric as PanelMetric
from calib_jax.montecarlo.panel import check_metrics as check_metrics
from calib_jax.montecarlo.panel import display_names as display_names
from calib_jax.montecarlo.panel import evaluate as evaluate
from calib_jax.montecarlo.panel import lcce_metric as lcce_metric
from calib_jax.montecarlo.panel import make_logged_trial as make_logged_trial
from calib_jax.montecarlo.panel import make_population_trial as make_population_trial
from calib_jax.montecarlo.panel import make_repeated_trial as make_repeated_trial
from calib_jax.montecarlo.panel import make_simulator_trial as make_simulator_trial
from calib_jax.montecarlo.panel import make_trial as make_trial
from calib_jax.montecarlo.panel import metric_panel as metric_panel
from calib_jax.montecarlo.panel import panel_for as panel_for
from calib_jax.montecarlo.panel import panel_record as panel_record
from calib_jax.montecarlo.scenarios import FixedWorld as FixedWorld
from calib_jax.montecarlo.scenarios import Population as Population
from calib_jax.montecarlo.scenarios import PopulationLaw as PopulationLaw
from calib_jax.montecarlo.scenarios import ScenarioConfig as ScenarioConfig
from calib_jax.montecarlo.scenarios import fixed_world as fixed_world
from calib_jax.montecarlo.scenarios import sample_population as sample_population
from calib_jax.montecarlo.stats import fisher_se as fisher_se
from calib_jax.montecarlo.stats import metric_accuracy as metric_accuracy
from calib_jax.montecarlo.stats import pearson_matrix as pearson_matrix
from calib_jax.montecarlo.stats import rankdata as rankdata
from calib_jax.montecarlo.stats import spearman_matrix as spearman_matrix
from calib_jax.montecarlo.stats import spearman_with as spearman_with
from calib_jax.montecarlo.variants import LoggedPool as LoggedPool
from calib_jax.montecarlo.variants import TrialData as TrialData
from calib_jax.montecarlo.variants import VariantConfig as VariantConfig
from calib_jax.montecarlo.variants import VariantParams as VariantParams
from calib_jax.montecarlo.variants import apply_variant as apply_variant
from calib_jax.montecarlo.variants import draw_variant as draw_variant
from calib_jax.montecarlo.variants import pool_from_impressions as pool_from_impressions
from calib_jax.montecarlo.variants import sample_logged_trial_data as sample_logged_trial_data
from calib_jax.montecarlo.variants import sample_trial_data as sample_trial_data

__all__ = [
    "run_trials", "BoundTrial", "ResumedChunksWarning", "trial_keys", "config_hash", "load_results",
    "MetricFn", "PanelMetric", "PanelConfig", "metric_panel", "lcce_metric", "evaluate", "make_trial",
    "make_population_trial", "make_repeated_trial", "make_logged_trial", "make_simulator_trial", "panel_record",
    "display_names", "panel_for", "check_metrics", "SMALL_PANEL", "LABEL_METRICS", "MODERN_METRICS", "ORACLE_METRICS",
    "REFERENCE", "DISPLAY",
    "ScenarioConfig", "Population", "sample_population", "FixedWorld", "PopulationLaw", "fixed_world",
    "BootstrapSpearman", "PairedDifference", "bootstrap_counts", "bootstrap_spearman", "paired_difference",
    "percentile_interval", "RankConsistency", "rank_consistency", "DESIGNS", "make_design_trial",
    "world_key",
    "VariantConfig", "VariantParams", "TrialData", "draw_variant", "apply_variant",
    "sample_trial_data", "LoggedPool", "pool_from_impressions", "sample_logged_trial_data",
    "rankdata", "pearson_matrix", "spearman_matrix", "spearman_with", "fisher_se",
    "metric_accuracy",
]
