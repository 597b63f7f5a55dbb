"""calib_jax: calibration theory and metric studies for CTR models, in JAX.

The public surface, by layer (see docs/ARCHITECTURE.md):

* :mod:`calib_jax.groupstats` — one-pass mergeable group statistics.
* :mod:`calib_jax.partitions` — bins, 1-D k-means on logits, random groups.
* :mod:`calib_jax.metrics` — every calibration metric (all re-exported here).
* :mod:`calib_jax.inference` — tests of calibration with p-values (Spiegelhalter,
  Hosmer–Lemeshow, Cox, CORP resampling) and exact binomial intervals (re-exported here).
* :mod:`calib_jax.decompositions` — Brier/NLL grouping, Murphy and CORP decompositions.
* :mod:`calib_jax.losses` — the SAG / VR-SAG training objective and its terms.
* :mod:`calib_jax.calibrators` — post-hoc calibrators, their registry and the scikit-learn
  estimator.
* :mod:`calib_jax.data` — simulator, backbone, Open Bandit loader, splits.
* :mod:`calib_jax.montecarlo` — Monte Carlo metric studies.
* :mod:`calib_jax.plotting`, :mod:`calib_jax.io` — figures and atomic, resumable outputs.
* :mod:`calib_jax.logs` — your prediction logs from Python (the engine of the ``calib-jax``
  command): reports, comparisons, slices and fits on files, lakes, DuckDB, Spark or tables.

Everything is imported on first attribute access (``calib_jax.ece`` imports
:mod:`calib_jax.metrics` and JAX then): ``import calib_jax`` itself loads no JAX, so a program
that needs only :mod:`calib_jax.logs`' NumPy report path (``calib-jax evaluate`` on statistics
from an engine) starts in a fraction of a second.
"""

import calib_jax._src.startup  # noqa: F401, I001 - first, before jax loads: see its docstring
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names of __all__, for type checkers; at run time __getattr__ imports them
    from calib_jax import decompositions, groupstats, inference, metrics, partitions
    from calib_jax._src.eager import unchecked
    from calib_jax.decompositions import brier_grouping, corp, murphy, nll_grouping
    from calib_jax.groupstats import group_stats, merge, summarize
    from calib_jax.inference import (
        binomial_interval,
        corp_test,
        cox_calibration,
        hosmer_lemeshow,
        spiegelhalter_z,
    )
    from calib_jax.metrics import (
        abs_bias,
        acc_diff,
        accuracy,
        auc,
        auc_diff,
        bias,
        brier,
        calibrated_log_loss,
        calibrated_quadratic_loss,
        calibration_ratio,
        calibration_ratio_by_group,
        cumulative_calibration_error,
        debiased_ece_sq,
        ece,
        ece_at_n,
        ece_sweep,
        field_ece,
        field_rce,
        fit_logit_bias,
        gap_norm,
        gauc,
        gce,
        ici,
        lcce,
        lcce_random,
        mae,
        mse,
        multicalibration_error,
        nll,
        nll_logits,
        normalized_entropy,
        normalized_entropy_by_group,
        oracle_alpha_divergence,
        oracle_brier,
        oracle_chebyshev,
        oracle_kl,
        oracle_mae,
        pearson,
        rdece_at_n,
        skce,
        smooth_ece,
        spearman,
    )

__version__ = "0.1.0"

_LAZY_SUBMODULES = ("calibrators", "data", "montecarlo", "losses", "plotting", "io")
_SUBMODULES = ("groupstats", "partitions", "metrics", "inference", "decompositions", *_LAZY_SUBMODULES)

__all__ = [
    # layers
    "groupstats", "partitions", "metrics", "inference", "decompositions",
    *_LAZY_SUBMODULES,
    # group statistics and decompositions
    "group_stats", "merge", "summarize", "brier_grouping", "nll_grouping", "murphy", "corp",
    # tests of calibration
    "spiegelhalter_z", "hosmer_lemeshow", "cox_calibration", "corp_test", "binomial_interval",
    # every metric
    "abs_bias",
    "acc_diff",
    "accuracy",
    "auc",
    "auc_diff",
    "bias",
    "brier",
    "calibrated_log_loss",
    "calibrated_quadratic_loss",
    "calibration_ratio",
    "calibration_ratio_by_group",
    "cumulative_calibration_error",
    "debiased_ece_sq",
    "ece",
    "ece_at_n",
    "ece_sweep",
    "field_ece",
    "field_rce",
    "fit_logit_bias",
    "gap_norm",
    "gauc",
    "gce",
    "ici",
    "lcce",
    "lcce_random",
    "mae",
    "mse",
    "multicalibration_error",
    "nll",
    "nll_logits",
    "normalized_entropy",
    "normalized_entropy_by_group",
    "oracle_alpha_divergence",
    "oracle_brier",
    "oracle_chebyshev",
    "oracle_kl",
    "oracle_mae",
    "pearson",
    "rdece_at_n",
    "skce",
    "smooth_ece",
    "spearman",
    # eager checks off for a block of calls
    "unchecked",
]


def _home(name: str) -> str | None:
    """The module that defines the public attribute ``name`` (None: not one of ours)."""
    if name in _SUBMODULES:
        return f"calib_jax.{name}"
    if name == "unchecked":
        return "calib_jax._src.eager"
    if name in ("brier_grouping", "nll_grouping", "murphy", "corp"):
        return "calib_jax.decompositions"
    if name in ("group_stats", "merge", "summarize"):
        return "calib_jax.groupstats"
    if name in ("spiegelhalter_z", "hosmer_lemeshow", "cox_calibration", "corp_test", "binomial_interval"):
        return "calib_jax.inference"
    if name in __all__:
        return "calib_jax.metrics"
    return None


def __getattr__(name: str) -> Any:
    """Import a layer (and JAX) on the first access to it or to one of its names (PEP 562)."""
    home = _home(name)
    if home is None:
        raise AttributeError(f"module 'calib_jax' has no attribute {name!r}")
    import importlib

    module = importlib.import_module(home)
    value = module if name in _SUBMODULES else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
