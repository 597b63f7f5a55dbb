"""How ``compare_calibrators`` evaluates one split, fold or resample: every metric of
"Calibration is Grouping" Tables 1, 3 and 5 as one jitted function of a method's predictions
and the rows, and the derived columns of its Table 4.

The study (:mod:`experiments.compare_calibrators`) calls :func:`metric_function` once per data
set and static configuration and reuses it for every method, split, refit fold and bootstrap
replicate, so each compiles once. Measured design choices (``benchmarks/results/split_sort.md``):
every metric orders its own rows (one shared argsort and the gathers it needs cost more than
the sorts they save), and both LCCE norms come from one clustering.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax import bootstrap as boot
from calib_jax import metrics as M

__all__ = ["metric_values", "metric_function", "derived_metrics", "evaluate", "evaluate_backbone",
           "derived_bootstrap"]


def metric_values(p, o, y, g, oracle, *, weights, key, n_groups: int, n_restarts: int,
                  has_oracle: bool, presorted: bool, mce_levels: int = 0) -> dict[str, jax.Array]:
    """Every metric of Tables 1, 3, 5 for scores ``p`` (AccDiff / AUCDiff are derived from
    ``Acc`` and ``AUC`` against the backbone's). ``presorted``: rows ascend in ``p``.

    ``g`` is (n, F) integer field codes: column 0 is the Table 3 grouping field (abs_bias), and
    with ``mce_levels > 0`` every column defines the segments of the multicalibration error
    ``MCE`` (Guy et al. 2025, sigma scale, codes < ``mce_levels``). MCE sorts every segment, so it is
    left out of the row bootstrap and gets its intervals from the independent refits."""
    # both LCCE norms from one histogram and one clustering (each equal to its own call to float rounding)
    lcce_l2, lcce_l1 = M.lcce(o, y, probs=p, key=key, n_restarts=n_restarts, weights=weights, norm=("l2", "l1"))
    res = {
        "ECE": M.ece(p, y, weights=weights),
        "LCCE": lcce_l2,
        "LCCE-l1": lcce_l1,
        "NLL": M.nll(p, y, weights=weights),
        "AUC": M.auc(p, y, weights=weights, presorted=presorted),
        "Acc": M.accuracy(p, y, weights=weights),
        "bias": M.bias(p, y, weights=weights),
        "abs_bias": M.abs_bias(p, y, g[:, 0], n_groups=n_groups, weights=weights),
    }
    if mce_levels:
        res["MCE"] = M.multicalibration_error(p, y, g, n_levels=mce_levels, weights=weights)
    if has_oracle:
        res["Brier+"] = M.oracle_mae(p, oracle, weights=weights)
        res["Brier"] = M.oracle_brier(p, oracle, weights=weights)
    return res


@functools.lru_cache(maxsize=16)
def metric_function(n_groups: int, n_restarts: int, has_oracle: bool, presorted: bool, key_data: tuple[int, ...],
                    mce_levels: int = 0):
    """One metric function per static configuration (reused across methods, so the bootstrap
    and the per-split evaluation compile once per data set)."""
    key = jax.random.wrap_key_data(jnp.asarray(key_data, jnp.uint32))

    def stat(p, o, y, g, oracle, *, weights):
        return metric_values(p, o, y, g, oracle, weights=weights, key=key, n_groups=n_groups,
                             n_restarts=n_restarts, has_oracle=has_oracle, presorted=presorted,
                             mce_levels=mce_levels)

    return stat


def derived_metrics(res: dict[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
    """AccDiff and AUCDiff ("Calibration is Grouping" App. E.1) against the backbone's Acc and AUC."""
    out = {k: v for k, v in res.items() if k != "Acc"}
    out["AccDiff"] = (res["Acc"] - base["Acc"]) / base["Acc"]
    out["AUCDiff"] = (res["AUC"] - base["AUC"]) / base["AUC"]
    return out



def evaluate(stat, p, part, g):
    """One split's metrics of predictions ``p`` on the rows ``part`` (segment codes ``g``), as
    device arrays (one jitted program; the callers fetch them with one ``jax.device_get``).
    With ``p`` and ``part`` on the device it makes no implicit host transfer: the unit weights
    are made by a jitted program (``jnp.ones`` outside ``jit`` copies its fill value from the
    host), ``tests/test_transfer_guard.py``."""
    oracle = part["oracle"] if part["oracle"] is not None else p
    w = _ones(p.shape)
    return _eval_jit(stat, jnp.asarray(p), jnp.asarray(part["logits"]), jnp.asarray(part["labels"]),
                     jnp.asarray(g), jnp.asarray(oracle), w)


@functools.partial(jax.jit, static_argnames=("shape",))
def _ones(shape: tuple[int, ...]) -> jax.Array:
    return jnp.ones(shape, jnp.float32)


@functools.partial(jax.jit, static_argnames=("stat",))
def _eval_jit(stat, p, o, y, g, oracle, w):
    return stat(p, o, y, g, oracle, weights=w)



def evaluate_backbone(stat, part, g):
    """The metrics of the uncalibrated row: :func:`evaluate` of sigma(logits) on ``part``, as floats."""
    p = np.asarray(jax.nn.sigmoid(part["logits"]), np.float32)
    return {k: float(v) for k, v in jax.device_get(evaluate(stat, p, part, g)).items()}


def derived_bootstrap(b: boot.BootstrapResult, base: boot.BootstrapResult) -> boot.BootstrapResult:
    """A method's row bootstrap with the derived columns (:func:`derived_metrics`) computed per
    replicate against the uncalibrated row's replicate on the same resample (``base``), and
    their percentile intervals."""
    est = derived_metrics(dict(b.estimate), base.estimate)
    reps = derived_metrics(dict(b.replicates), base.replicates)
    lo = {k: float(np.quantile(v, (1 - b.level) / 2)) for k, v in reps.items()}
    hi = {k: float(np.quantile(v, (1 + b.level) / 2)) for k, v in reps.items()}
    return b._replace(estimate={k: float(v) for k, v in est.items()}, lo=lo, hi=hi, replicates=reps)
