r"""Calibration metrics: label-based and oracle-based.

All functions are pure and jit/vmap-able (sizes that shape arrays are static keyword
arguments).  On concrete inputs they validate eagerly and raise ``ValueError`` naming the
argument; under tracing value checks cannot raise and every division is guarded so that
empty bins/groups contribute 0 and no NaN appears.

Label-based ("insufficient information") metrics compare scores with 0/1 labels; oracle
metrics ("sufficient information", "Calibration is Grouping", Appendix C) compare them with the true
probabilities π, available only in simulation.

Conventions that depart from a printed formula are stated in the function's docstring
(``bias``/``abs_bias`` report the deviation from 1; ``oracle_kl`` is the full Bernoulli KL;
``oracle_alpha_divergence`` uses the Amari/Cichocki α-family).

Layout (private modules, one idea each; import everything from :mod:`calib_jax.metrics`):

* ``_pointwise`` — Brier/MSE, MAE, log loss from probabilities or logits.
* ``_grouped`` — gap norms and calibration errors over a partition: ECE, GCE, LCCE,
  LCCE_rand, Field-ECE/RCE, global and field-wise bias.
* ``_ranking`` — AUC, accuracy and their relative changes.
* ``_topn`` — ECE@N and RDECE@N over each user's top-N list (Sato,
  "Calibrating the Predictions for Top-N Recommendations", RecSys 2024).
* ``_calibrated_loss`` — Calibrated Log / Quadratic Loss ("Calibration-then-Calculation", 2024).
* ``_oracle`` — metrics against the true probabilities, Pearson, Spearman.
* ``_modern`` — smooth ECE, ICI, SKCE, debiased squared ECE, ECE-sweep (the modern metrics).
* ``_cumulative`` — cumulative (KS / Kuiper) calibration errors and the multicalibration error.
* ``_practitioner`` — the production panel: normalized entropy, calibration ratio (overall
  and per level), group AUC.

The input checks and weighted means they share live in ``calib_jax._src.metric_inputs``.
"""

from calib_jax.metrics._calibrated_loss import calibrated_log_loss as calibrated_log_loss
from calib_jax.metrics._calibrated_loss import calibrated_quadratic_loss as calibrated_quadratic_loss
from calib_jax.metrics._calibrated_loss import fit_logit_bias as fit_logit_bias
from calib_jax.metrics._cumulative import cumulative_calibration_error as cumulative_calibration_error
from calib_jax.metrics._cumulative import multicalibration_error as multicalibration_error
from calib_jax.metrics._grouped import abs_bias as abs_bias
from calib_jax.metrics._grouped import bias as bias
from calib_jax.metrics._grouped import ece as ece
from calib_jax.metrics._grouped import field_ece as field_ece
from calib_jax.metrics._grouped import field_rce as field_rce
from calib_jax.metrics._grouped import gap_norm as gap_norm
from calib_jax.metrics._grouped import gce as gce
from calib_jax.metrics._grouped import lcce as lcce
from calib_jax.metrics._grouped import lcce_random as lcce_random
from calib_jax.metrics._modern import debiased_ece_sq as debiased_ece_sq
from calib_jax.metrics._modern import ece_sweep as ece_sweep
from calib_jax.metrics._modern import ici as ici
from calib_jax.metrics._modern import skce as skce
from calib_jax.metrics._modern import smooth_ece as smooth_ece
from calib_jax.metrics._oracle import oracle_alpha_divergence as oracle_alpha_divergence
from calib_jax.metrics._oracle import oracle_brier as oracle_brier
from calib_jax.metrics._oracle import oracle_chebyshev as oracle_chebyshev
from calib_jax.metrics._oracle import oracle_kl as oracle_kl
from calib_jax.metrics._oracle import oracle_mae as oracle_mae
from calib_jax.metrics._oracle import pearson as pearson
from calib_jax.metrics._oracle import spearman as spearman
from calib_jax.metrics._pointwise import brier as brier
from calib_jax.metrics._pointwise import mae as mae
from calib_jax.metrics._pointwise import mse as mse
from calib_jax.metrics._pointwise import nll as nll
from calib_jax.metrics._pointwise import nll_logits as nll_logits
from calib_jax.metrics._practitioner import GAUC as GAUC
from calib_jax.metrics._practitioner import PerGroup as PerGroup
from calib_jax.metrics._practitioner import calibration_ratio as calibration_ratio
from calib_jax.metrics._practitioner import calibration_ratio_by_group as calibration_ratio_by_group
from calib_jax.metrics._practitioner import gauc as gauc
from calib_jax.metrics._practitioner import normalized_entropy as normalized_entropy
from calib_jax.metrics._practitioner import normalized_entropy_by_group as normalized_entropy_by_group
from calib_jax.metrics._ranking import acc_diff as acc_diff
from calib_jax.metrics._ranking import accuracy as accuracy
from calib_jax.metrics._ranking import auc as auc
from calib_jax.metrics._ranking import auc_diff as auc_diff
from calib_jax.metrics._topn import ece_at_n as ece_at_n
from calib_jax.metrics._topn import rdece_at_n as rdece_at_n

__all__ = [
    "brier",
    "mse",
    "mae",
    "nll",
    "nll_logits",
    "ece",
    "gce",
    "lcce",
    "lcce_random",
    "field_ece",
    "field_rce",
    "bias",
    "abs_bias",
    "auc",
    "accuracy",
    "acc_diff",
    "auc_diff",
    "ece_at_n",
    "rdece_at_n",
    "fit_logit_bias",
    "calibrated_log_loss",
    "calibrated_quadratic_loss",
    "oracle_brier",
    "oracle_mae",
    "oracle_kl",
    "oracle_alpha_divergence",
    "oracle_chebyshev",
    "pearson",
    "spearman",
    "gap_norm",
    "smooth_ece",
    "cumulative_calibration_error",
    "multicalibration_error",
    "skce",
    "debiased_ece_sq",
    "ece_sweep",
    "ici",
    "normalized_entropy",
    "normalized_entropy_by_group",
    "calibration_ratio",
    "calibration_ratio_by_group",
    "gauc",
]

# Eager calls run one compiled computation each (calib_jax._src.eager); under a user's jit / vmap
# the functions are the ones imported above, unchanged.
from calib_jax._src.eager import compiled as _compiled  # noqa: E402

for _name in __all__:
    globals()[_name] = _compiled(globals()[_name])
del _name
