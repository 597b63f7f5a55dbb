"""Data: the AdAuction-like simulator, the CTR backbone, Open Bandit, splits.

Submodules (imported lazily, so ``import calib_jax.data.simulator`` does not pull in flax):

* :mod:`calib_jax.data.simulator` — ``SimulatorConfig``, ``default_config``,
  ``tiny_config``, ``paper_config``, ``simulate``, ``iter_chunks``, ``simulate_to_disk``,
  ``load_from_disk``, ``simulate_full_matrix``, ``summary_stats``, ``FIELD_NAMES``.
* :mod:`calib_jax.data.backbone` — ``BackboneConfig``, ``CTRBackbone`` (flax.linen),
  ``train_backbone``, ``predict``, ``load_or_train`` -> ``BackboneOutputs`` (val / holdout /
  test ``SplitOutputs``), ``backbone_metrics``, ``default_cache_dir``.
* :mod:`calib_jax.data.open_bandit` — ``load_open_bandit``, ``load_or_train_open_bandit``.
* :mod:`calib_jax.data.splits` — ``paper_splits``, ``random_test_splits``,
  ``train_test_split``, ``subsplit``.
* :mod:`calib_jax.data.movielens` — ``load`` (MovieLens-100K from where the user installed
  it), ``find``, ``paper_split``.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["simulator", "backbone", "open_bandit", "splits", "movielens"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
