"""calib_jax: calibration theory and metric studies for CTR models, in JAX.

The public surface, by layer (see docs/ARCHITECTURE.md):

* :mod:`calib_jax.groupstats` — one-pass mergeable group statistics (SPEC §3).
* :mod:`calib_jax.partitions` — bins, 1-D k-means on logits, random groups.
* :mod:`calib_jax.metrics` — every calibration metric (SPEC §4).
* :mod:`calib_jax.inference` — tests of calibration with p-values (Spiegelhalter,
  Hosmer–Lemeshow, Cox, CORP resampling) and exact binomial intervals.
* :mod:`calib_jax.decompositions` — Brier/NLL grouping, Murphy and CORP decompositions (SPEC §5).
* :mod:`calib_jax.calibrators` — post-hoc calibrators and their registry (SPEC §6).
* :mod:`calib_jax.data` — simulator, backbone, Open Bandit loader, splits (SPEC §7).
* :mod:`calib_jax.montecarlo` — Monte Carlo metric studies (SPEC §8).
"""

from calib_jax import decompositions as decompositions
from calib_jax import groupstats as groupstats
from calib_jax import inference as inference
from calib_jax import metrics as metrics
from calib_jax import partitions as partitions
from calib_jax._eager import unchecked as unchecked
from calib_jax.decompositions import brier_grouping as brier_grouping
from calib_jax.decompositions import corp as corp
from calib_jax.decompositions import murphy as murphy
from calib_jax.decompositions import nll_grouping as nll_grouping
from calib_jax.groupstats import group_stats as group_stats
from calib_jax.groupstats import merge as merge
from calib_jax.groupstats import summarize as summarize
from calib_jax.metrics import (
    abs_bias as abs_bias,
)
from calib_jax.metrics import (
    acc_diff as acc_diff,
)
from calib_jax.metrics import (
    accuracy as accuracy,
)
from calib_jax.metrics import (
    auc as auc,
)
from calib_jax.metrics import (
    auc_diff as auc_diff,
)
from calib_jax.metrics import (
    bias as bias,
)
from calib_jax.metrics import (
    brier as brier,
)
from calib_jax.metrics import (
    calibrated_log_loss as calibrated_log_loss,
)
from calib_jax.metrics import (
    calibrated_quadratic_loss as calibrated_quadratic_loss,
)
from calib_jax.metrics import calibration_ratio as calibration_ratio
from calib_jax.metrics import (
    ece as ece,
)
from calib_jax.metrics import (
    ece_at_n as ece_at_n,
)
from calib_jax.metrics import (
    field_ece as field_ece,
)
from calib_jax.metrics import (
    field_rce as field_rce,
)
from calib_jax.metrics import gauc as gauc
from calib_jax.metrics import (
    gce as gce,
)
from calib_jax.metrics import (
    lcce as lcce,
)
from calib_jax.metrics import (
    lcce_random as lcce_random,
)
from calib_jax.metrics import (
    mae as mae,
)
from calib_jax.metrics import (
    mse as mse,
)
from calib_jax.metrics import (
    nll as nll,
)
from calib_jax.metrics import (
    nll_logits as nll_logits,
)
from calib_jax.metrics import normalized_entropy as normalized_entropy
from calib_jax.metrics import (
    oracle_alpha_divergence as oracle_alpha_divergence,
)
from calib_jax.metrics import (
    oracle_brier as oracle_brier,
)
from calib_jax.metrics import (
    oracle_chebyshev as oracle_chebyshev,
)
from calib_jax.metrics import (
    oracle_kl as oracle_kl,
)
from calib_jax.metrics import (
    oracle_mae as oracle_mae,
)
from calib_jax.metrics import (
    pearson as pearson,
)
from calib_jax.metrics import (
    rdece_at_n as rdece_at_n,
)
from calib_jax.metrics import (
    spearman as spearman,
)

__version__ = "0.1.0"

_LAZY_SUBMODULES = ("calibrators", "data", "montecarlo", "losses", "plotting", "io")


def __getattr__(name: str):
    """Import heavier subpackages (flax, optax, matplotlib) on first attribute access."""
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f"calib_jax.{name}")
    raise AttributeError(f"module 'calib_jax' has no attribute {name!r}")
