"""The metric panel of the Monte Carlo studies and the trial functions built on it.

A *metric* here is ``fn(data: TrialData, key) -> scalar`` where lower is better.  Every
entry calls the public :mod:`calib_jax.metrics` function with static options, so the
panel is exactly the library's metrics, evaluated on one trial.

Choosing the columns.  :func:`panel_for` is the one entry point: it takes built-in names and
user metrics (:class:`PanelMetric`, plain functions, ``"module:function"`` strings) and returns
the static :class:`PanelConfig`; :func:`metric_panel` turns a config into the column functions
the trial builders evaluate (they take the list, the config or the functions alike), and
:func:`lcce_metric` builds an LCCE column with other options (wrap it as
``PanelMetric(name, lcce_metric(...), inputs="trial")``).

Sign convention.  AUC and the correlations with the oracle (Pearson, Spearman) are
higher-is-better; the panel reports them as ``1 - AUC``, ``1 - Pearson`` and
``1 - Spearman`` so that *every* column is a loss and a positive Spearman coefficient with
the oracle Brier score always means agreement.  The signed global bias
:math:`\\bar p/\\bar y - 1` is not a loss; the panel uses its magnitude ``|bias|``.

Sorting cost.  Three panel entries sort the n scores (``1-AUC``, ``ECE+`` and ``1-Spearman``,
the latter twice: p and π).  ``calib_jax.metrics`` sorts through one NumPy host call per
array on the CPU (``calib_jax._src.sorting.argsort_with_ties``: the order and the tie bounds),
and XLA's common-subexpression pass merges the identical calls, so a trial sorts p once and
π once; the measured cost is in ``benchmarks/bench_montecarlo.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import importlib.util
import inspect
import keyword
import sys
import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax import metrics as M
from calib_jax._src.eager import compiled
from calib_jax._src.seeds import check_seed, key_of_seed
from calib_jax._src.validation import check_number_option, check_positive_int
from calib_jax.montecarlo.engine import BoundTrial
from calib_jax.montecarlo.scenarios import FixedWorld, PopulationLaw, ScenarioConfig
from calib_jax.montecarlo.variants import (
    LoggedPool,
    TrialData,
    VariantConfig,
    VariantParams,
    sample_logged_trial_data,
    sample_trial_data,
)
from calib_jax.partitions import assign_1d, kmeans_1d

__all__ = [
    "MetricFn",
    "PanelMetric",
    "PanelConfig",
    "LABEL_METRICS",
    "MODERN_METRICS",
    "ORACLE_METRICS",
    "REFERENCE",
    "metric_panel",
    "lcce_metric",
    "evaluate",
    "make_trial",
    "make_population_trial",
    "make_repeated_trial",
    "make_logged_trial",
    "panel_for",
    "check_metrics",
    "display_names",
]

MetricFn = Callable[[TrialData, jax.Array], jax.Array]

REFERENCE = "oracle_brier"

#: label-based ("insufficient information") metrics in panel order
LABEL_METRICS = (
    "brier", "nll", "mae", "ece", "ece_sq", "ece_plus", "mce", "gce_field", "lcce", "lcce_l1",
    "lcce_quantile", "lcce_optimal", "lcce_random", "field_ece", "field_rce", "abs_global_bias", "abs_bias",
    "one_minus_auc", "calibrated_log_loss",
)
#: oracle ("sufficient information") metrics in panel order; oracle_brier is the reference
ORACLE_METRICS = (
    "oracle_brier", "oracle_mae", "oracle_kl", "oracle_alpha", "oracle_chebyshev",
    "one_minus_pearson", "one_minus_spearman",
)

#: modern label-based metrics, an opt-in group: not in the default panel;
#: ask for them by name, or with ``panel_for(..., modern=True)``.  Options are fixed here
#: (smECE's fixed-point bandwidth; cumulative Kuiper raw and in sigmas, KS raw; the
#: multicalibration error in sigmas over the panel's grouping field (depth 1, segments of at
#: least 10 rows); SKCE by the block estimator (blocks of ``SKCE_BLOCK`` rows, Gaussian
#: kernel, bandwidth 0.1: the quadratic U-statistic is O(n²)); debiased squared ECE and
#: ECE-sweep on ``n_bins`` / up to 100 equal-mass bins; ICI with its default smoother).
MODERN_METRICS = (
    "smooth_ece", "cce_ks", "cce_kuiper", "cce_kuiper_sigma", "mce_field", "skce", "debiased_ece_sq",
    "ece_sweep", "ici",
)
SKCE_BLOCK = 64

#: short labels used in figures and tables
DISPLAY = {
    "brier": "Brier(y)", "nll": "NLL", "mae": "MAE", "ece": "ECE", "ece_sq": "ECE-sq",
    "ece_plus": "ECE+", "lcce_l1": "LCCE-l1",
    "mce": "MCE", "gce_field": "GCE(media)", "lcce": "LCCE", "lcce_quantile": "LCCE-q",
    "lcce_optimal": "LCCE-opt", "lcce_random": "LCCE-rand", "field_ece": "Field-ECE",
    "field_rce": "Field-RCE", "abs_global_bias": "abs(bias)", "abs_bias": "abs_bias",
    "one_minus_auc": "1-AUC", "calibrated_log_loss": "CLL",
    "oracle_brier": "Brier*", "oracle_mae": "Brier+*", "oracle_kl": "KL*",
    "oracle_alpha": "KL_a*", "oracle_chebyshev": "Cheb*", "one_minus_pearson": "1-Pearson*",
    "one_minus_spearman": "1-Spearman*",
    "smooth_ece": "smECE", "cce_ks": "CCE-KS", "cce_kuiper": "CCE-Kuiper", "cce_kuiper_sigma": "CCE-Kuiper(σ)",
    "mce_field": "MCE(σ)", "skce": "SKCE", "debiased_ece_sq": "dECE²", "ece_sweep": "ECE-sweep", "ici": "ICI",
}


#: a small panel (one metric of each kind the studies report) for smoke runs and quick checks
SMALL_PANEL = ("nll", "ece", "ece_plus", "lcce", "calibrated_log_loss", "oracle_brier")
#: every built-in column name
BUILT_IN = frozenset(LABEL_METRICS + MODERN_METRICS + ORACLE_METRICS)


#: a user column's key is ``fold_in(fold_in(key, USER_KEY_TAG), crc32(name))``: the built-in
#: columns keep theirs (``fold_in(key, j)``, j their index among the built-in columns)
USER_KEY_TAG = 0x05E7
#: what a :class:`PanelMetric`'s function is called on (its ``inputs``)
METRIC_INPUTS = ("probs", "logits", "oracle", "trial")

#: the errors JAX raises when a traced array is turned into a Python or NumPy value
_TRACER_ERRORS = (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError,
                  jax.errors.TracerBoolConversionError, jax.errors.TracerIntegerConversionError)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _metric_failure(name: str, e: BaseException) -> str:
    """One line saying how the user metric ``name`` failed with ``e``."""
    first = (str(e).strip().splitlines() or [""])[0]
    if isinstance(e, _TRACER_ERRORS):
        return (f"metric {name!r} cannot run under jax.jit / jax.vmap: it turns a traced array into a "
                f"Python or NumPy value (float(), int(), bool(), an `if` on an array, np.asarray()); compute "
                f"it with jax.numpy and return a JAX array ({type(e).__name__})")
    if (isinstance(e, TypeError) and ("immutable" in first or "item assignment" in first)) or \
            (isinstance(e, ValueError) and "read-only" in first) or \
            (isinstance(e, AttributeError) and ("can't set attribute" in first or "has no setter" in first)):
        return (f"metric {name!r} writes into its input ({type(e).__name__}); the trial's arrays are immutable "
                "and shared by every column: compute on a copy (x.at[i].set(v) returns one)")
    return f"metric {name!r} raised {type(e).__name__}: {first}"


@dataclasses.dataclass(frozen=True)
class PanelMetric:
    """A metric of the user's as a panel column, next to the built-in names.

    The column's value on one trial is the function called on that trial's
    :class:`~calib_jax.montecarlo.variants.TrialData` ``d`` according to ``inputs``:

    * ``"probs"`` — ``fn(d.probs, d.labels)``: any label-based metric with the signature of
      the library's, ``f(probs, labels, *, weights=None)`` (e.g. :func:`calib_jax.metrics.ece`);
    * ``"logits"`` — ``fn(d.logits, d.labels)`` (as :func:`calib_jax.metrics.lcce`);
    * ``"oracle"`` — ``fn(d.probs, d.oracle)``: a metric that needs the true CTR;
    * ``"trial"`` — ``fn(d, key)``: the whole trial (fields, regime, ...) and the column's own
      PRNG key, as the built-in columns (:data:`MetricFn`; e.g. :func:`lcce_metric`).

    Every column of the panel is a loss (lower is better): with ``higher_is_better=True``
    the column is ``-fn(...)``, so its Spearman with the oracle Brier keeps the panel's sign
    convention. The function must return a scalar and be traceable by ``jit`` and ``vmap``
    (``jax.numpy`` code; the calls of :mod:`calib_jax.metrics` and :mod:`calib_jax.validation`
    are). Adding a user column never changes the values of the built-in columns (their keys
    do not depend on it; the user column's key is one of its name), their order, or the
    checkpoint hash of a panel without user columns.

    Attributes:
      name: the column name (a Python identifier; not a built-in column's name).
      fn: the function, called as ``inputs`` says.
      label: the label of figures and tables (default: ``name``).
      inputs: ``"probs"``, ``"logits"``, ``"oracle"`` or ``"trial"`` (above).
      higher_is_better: negate the value so that the column is a loss.
      oracle: the column reads the true CTR (tables list it under "oracle"); ``True``
        whenever ``inputs="oracle"``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax import metrics, montecarlo as mc
      >>> def logit_ece(probs, labels, *, weights=None):  # ECE on 10 equal-width logit bins
      ...     z = jnp.log(probs) - jnp.log1p(-probs)
      ...     ids = jnp.clip(((z + 5.0) / 10.0 * 10).astype(jnp.int32), 0, 9)
      ...     return metrics.gce(probs, labels, ids, n_groups=10, norm="l1", weights=weights)
      >>> col = mc.PanelMetric("logit_ece", logit_ece, label="ECE(logit)")
      >>> cfg = mc.panel_for(["ece", col])
      >>> cfg.metrics, cfg.labels
      (('ece', 'logit_ece', 'oracle_brier'), ['ECE', 'ECE(logit)', 'Brier*'])
    """

    name: str
    fn: Callable[..., Any]
    label: str | None = None
    inputs: str = "probs"
    higher_is_better: bool = False
    oracle: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier() or keyword.iskeyword(self.name):
            raise ValueError(f"`name` must be a Python identifier, got {self.name!r}")
        if self.name in BUILT_IN:
            raise ValueError(f"`name` {self.name!r} is a built-in panel column; give the user metric another name")
        if not callable(self.fn):
            raise ValueError(f"`fn` of metric {self.name!r} must be callable, got {type(self.fn).__name__}")
        if self.inputs not in METRIC_INPUTS:
            raise ValueError(f"`inputs` of metric {self.name!r} must be one of {METRIC_INPUTS}, got {self.inputs!r}")
        if self.label is not None and not isinstance(self.label, str):
            raise ValueError(f"`label` of metric {self.name!r} must be a string, got {self.label!r}")
        for flag in ("higher_is_better", "oracle"):  # "no" is a true string: it negated the column
            if not isinstance(getattr(self, flag), bool | np.bool_):
                raise ValueError(f"`{flag}` of metric {self.name!r} must be True or False, got "
                                 f"{getattr(self, flag)!r}")
        if self.inputs == "oracle" and not self.oracle:
            object.__setattr__(self, "oracle", True)

    @classmethod
    def from_spec(cls, spec: str) -> PanelMetric:
        """The metric named by ``"module:function"`` or ``"path/to/file.py:function"``.

        The object found is used as it is when it is a :class:`PanelMetric`, and otherwise
        wrapped as ``PanelMetric(function_name, obj)`` (a label-based
        ``f(probs, labels, *, weights=None)``). This is how ``--set metrics=[...]`` of the
        Monte Carlo studies reaches a metric defined outside the package.

        Args:
          spec: ``"module:attribute"`` (an importable module, e.g. one in the working
            directory) or ``"file.py:attribute"`` (a Python file, loaded by path).

        Returns:
          A :class:`PanelMetric`. Raises ``ValueError`` naming the spec when the module, the
          file or the attribute is missing or the attribute is not callable. Host code.

        Example:
          >>> from calib_jax.montecarlo import PanelMetric
          >>> m = PanelMetric.from_spec("calib_jax.metrics:mse")
          >>> m.name, m.inputs, m.to_dict()["function"]
          ('mse', 'probs', 'calib_jax.metrics._pointwise:mse')
        """
        if not isinstance(spec, str) or spec.count(":") != 1 or not all(spec.split(":")):
            raise ValueError(f"metric {spec!r}: expected 'module:function' or 'file.py:function'")
        where, attr = spec.split(":")
        try:
            if where.endswith(".py"):
                path = Path(where).expanduser().resolve()
                if not path.is_file():
                    raise ValueError(f"metric {spec!r}: no file {str(path)!r}")
                module_name = "calib_jax_user_metrics_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
                module = sys.modules.get(module_name)
                if module is None:
                    loader_spec = importlib.util.spec_from_file_location(module_name, path)
                    assert loader_spec is not None and loader_spec.loader is not None
                    module = importlib.util.module_from_spec(loader_spec)
                    sys.modules[module_name] = module
                    try:
                        loader_spec.loader.exec_module(module)
                    except BaseException:
                        del sys.modules[module_name]  # a fixed file is read again
                        raise
            else:
                module = importlib.import_module(where)
        except ValueError:
            raise
        except Exception as e:  # ImportError, or the module's own error while it runs
            raise ValueError(f"metric {spec!r}: cannot import {where!r} ({type(e).__name__}: {e})") from e
        obj = getattr(module, attr, None)
        if isinstance(obj, PanelMetric):
            return obj
        if obj is None or not callable(obj):
            raise ValueError(f"metric {spec!r}: {where!r} has no function {attr!r}")
        return cls(attr, obj)

    def column(self) -> MetricFn:
        """The panel column ``fn(data, key) -> scalar`` (a :data:`MetricFn`; a loss).

        Returns:
          A jit- and vmap-able function of one trial. Calling or tracing it raises ``ValueError``
          naming the metric when the user function raises (saying what it did where that is
          known: turned a traced array into a Python value, wrote into its input), returns
          something other than a JAX array (a Python float), a non-scalar, or a value that is
          not a real number (a complex or boolean dtype).

        Example:
          >>> import jax, jax.numpy as jnp
          >>> from calib_jax import metrics, montecarlo as mc
          >>> col = mc.PanelMetric("auc", metrics.auc, higher_is_better=True).column()
          >>> p = jnp.array([0.2, 0.8, 0.3, 0.7]); y = jnp.array([0.0, 1.0, 0.0, 1.0])
          >>> d = mc.TrialData(logits=jnp.log(p / (1 - p)), probs=p, labels=y, oracle=p,
          ...                  fields=jnp.zeros((4, 2), jnp.int32), regime=jnp.zeros(4, jnp.int32),
          ...                  params=mc.VariantParams(*jnp.zeros(7)))
          >>> float(col(d, jax.random.key(0)))  # -AUC: the column is a loss
          -1.0
        """
        fn, inputs, name, sign = self.fn, self.inputs, self.name, -1.0 if self.higher_is_better else 1.0

        def column(d: TrialData, key: jax.Array) -> jax.Array:
            try:
                if inputs == "trial":
                    value = fn(d, key)
                else:
                    scores = d.logits if inputs == "logits" else d.probs
                    value = fn(scores, d.oracle if inputs == "oracle" else d.labels)
            except Exception as e:  # the user's code: say which metric, and what it did
                raise ValueError(_metric_failure(name, e)) from e
            if not isinstance(value, jax.Array):  # a tracer is a jax.Array: this is a host number
                raise ValueError(f"metric {name!r} returned {type(value).__name__} {_short(value)}, not a JAX "
                                 "array computed from its inputs (compute it with jax.numpy; a number that "
                                 "does not depend on the trial is a constant)")
            if value.shape != ():
                raise ValueError(f"metric {name!r} must return a scalar, got shape {value.shape}")
            if not (jnp.issubdtype(value.dtype, jnp.floating) or jnp.issubdtype(value.dtype, jnp.integer)):
                # a complex value was cast to its real part without a word
                raise ValueError(f"metric {name!r} must return a real number, got dtype {value.dtype}")
            return sign * value.astype(d.probs.dtype)

        column.user_key = zlib.crc32(name.encode()) & 0x7FFFFFFF  # type: ignore[attr-defined]
        return column

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able record: the function's ``module:qualname`` and a SHA-256 of its source
        (so a study's checkpoints are not reused after the function is edited).

        Returns:
          ``{"name", "label", "inputs", "higher_is_better", "oracle", "function",
          "source_sha256"}`` (the hash is ``None`` where the source cannot be read).

        Example:
          >>> from calib_jax import metrics, montecarlo as mc
          >>> rec = mc.PanelMetric("smooth", metrics.smooth_ece).to_dict()
          >>> rec["function"], len(rec["source_sha256"])
          ('calib_jax.metrics._modern:smooth_ece', 64)
        """
        fn = self.fn
        try:
            source: str | None = inspect.getsource(fn)
        except (OSError, TypeError):
            source = None
        return {"name": self.name, "label": self.label, "inputs": self.inputs,
                "higher_is_better": self.higher_is_better, "oracle": self.oracle,
                "function": f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', type(fn).__name__)}",
                "source_sha256": None if source is None else hashlib.sha256(source.encode()).hexdigest()}


@dataclasses.dataclass(frozen=True)
class PanelConfig:
    """Static options of the panel (hashable; JSON-able via :meth:`to_dict`). Build it with
    :func:`panel_for`, the one entry point for "which metrics a trial computes".

    Attributes:
      metrics: names of the columns to compute, in order: built-in names (``LABEL_METRICS +
        MODERN_METRICS + ORACLE_METRICS``) and the names of ``custom`` (the default is the
        seed-paper panel without the modern group).
      custom: the user's columns (:class:`PanelMetric`) that ``metrics`` names.
      n_bins: bins of ECE / ECE+ / MCE.
      n_clusters, n_restarts: LCCE clusters and restarts (paper defaults 4 and 4).
      n_groups_random: groups of LCCE-rand.
      field: which categorical field (0 = media, 1 = cohort) GCE / Field-ECE / Field-RCE /
        abs_bias group by; another value raises ``ValueError``.
      n_levels: number of levels of that field (static, needed under jit); the trial builders
        (:func:`make_trial` and kin) refuse a panel whose ``n_levels`` is below the levels their
        trials draw, since the engine's unchecked run would leave rows out silently.
      cll_val_fraction: test-validation fraction of the Calibrated Log Loss.
      alpha: order of the oracle alpha-divergence.
      optimal_bins: histogram bins of the optimal 1-D k-means behind ``lcce_optimal``.
    """

    metrics: tuple[str, ...] = LABEL_METRICS + ORACLE_METRICS
    custom: tuple[PanelMetric, ...] = ()
    n_bins: int = 15
    n_clusters: int = 4
    n_restarts: int = 4
    n_groups_random: int = 4
    field: int = 0
    n_levels: int = ScenarioConfig().n_media
    cll_val_fraction: float = 0.5
    alpha: float = 0.5
    optimal_bins: int = 256

    def __post_init__(self) -> None:
        if isinstance(self.metrics, str) or not all(isinstance(m, str) for m in self.metrics):
            raise ValueError("`metrics` of a PanelConfig must be a tuple of column names; "
                             "pass metric objects through panel_for([...])")
        if not all(isinstance(c, PanelMetric) for c in self.custom):
            raise ValueError("`custom` must hold PanelMetric objects")
        user = {c.name: c for c in self.custom}
        if len(user) != len(self.custom):
            raise ValueError(f"`custom` names a column twice: {[c.name for c in self.custom]}")
        seen = [m for i, m in enumerate(self.metrics) if m in self.metrics[:i]]
        if seen:
            raise ValueError(f"`metrics` lists {sorted(set(seen))} more than once")
        unknown = [m for m in self.metrics if m not in BUILT_IN and m not in user]
        if unknown:
            raise ValueError(f"`metrics` has unknown names {unknown}; known: {sorted(BUILT_IN)} "
                             "and the names of `custom` (user metrics: PanelMetric, or 'module:function')")
        if isinstance(self.field, bool) or not isinstance(self.field, int) or self.field not in (0, 1):
            raise ValueError(f"`field` must be 0 (media) or 1 (cohort), got {self.field!r}")
        check_positive_int(self.n_levels, "n_levels")
        # checked here, under the option's own name: the metrics check them too, but only when a panel
        # is first evaluated, and under their own argument names (`optimal_bins=0` was refused as
        # "`n_bins` must be >= 1", `cll_val_fraction` as `val_fraction`, `n_groups_random` as `n_groups`)
        for name in ("n_bins", "n_clusters", "n_restarts", "n_groups_random", "optimal_bins"):
            check_positive_int(getattr(self, name), name)
        for name, limits in (("cll_val_fraction", "the Calibrated Log Loss needs rows on both sides"),
                             ("alpha", "use oracle_kl for the limits")):
            check_number_option(getattr(self, name), name, f"a number in (0, 1) ({limits})", lambda v: 0 < v < 1)
        unused = [c.name for c in self.custom if c.name not in self.metrics]
        if unused:
            raise ValueError(f"`custom` defines {unused}, which `metrics` does not list")

    @property
    def labels(self) -> list[str]:
        """The figure and table label of every column, in order (``DISPLAY`` for built-in
        columns, a :class:`PanelMetric`'s ``label`` for the user's)."""
        return [self.label(m) for m in self.metrics]

    def label(self, name: str) -> str:
        """The label of one column (its name where it has none)."""
        for c in self.custom:
            if c.name == name:
                return c.label or c.name
        return DISPLAY.get(name, name)

    def needs(self, name: str) -> str:
        """``"oracle"`` for a column that reads the true CTR, else ``"label"``."""
        for c in self.custom:
            if c.name == name:
                return "oracle" if c.oracle else "label"
        return "oracle" if name in ORACLE_METRICS else "label"

    def to_dict(self) -> dict:
        """The options as a JSON-able dict; ``custom`` appears only when there are user columns,
        so a built-in panel records (and hashes) as it always has."""
        record = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "custom"}
        if self.custom:
            record["custom"] = [c.to_dict() for c in self.custom]
        return record


def lcce_metric(*, n_clusters: int = 4, n_restarts: int = 4, init: str = "random",
                subsample: int | None = None, norm: str = "l2") -> MetricFn:
    """An LCCE column with the given clustering options ("Calibration is Grouping", VR-SAG;
    anonymous authors, under review; eq. 12, App. C.3, H.1); ``norm="l2"`` is eq. 12 (squared
    gaps), ``"l1"`` the absolute gaps of ECE (eq. 2).

    The column calls :func:`calib_jax.metrics.lcce` on the trial's logits and labels, with the
    column's key when ``init="random"`` or ``subsample`` needs one.

    Args:
      n_clusters: number of logit clusters K (int >= 1; static).
      n_restarts: k-means restarts averaged over with ``init="random"`` (int >= 1; static).
      init: ``"random"`` (k-means++ seeding, the paper's form), ``"quantile"`` or
        ``"optimal"`` (deterministic; see :func:`calib_jax.partitions.kmeans_1d`).
      subsample: centroids estimated from this many rows drawn with replacement (int >= 1),
        or ``None`` for all rows.
      norm: ``"l2"`` (squared gaps) or ``"l1"`` (absolute gaps).

    Returns:
      A :data:`MetricFn` ``fn(data: TrialData, key) -> scalar`` (lower is better), jit- and
      vmap-able; options are checked when it is called.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax import montecarlo as mc
      >>> p = jnp.array([0.2, 0.8, 0.2, 0.8]); y = jnp.array([0.0, 1.0, 0.0, 1.0])
      >>> d = mc.TrialData(logits=jnp.log(p / (1 - p)), probs=p, labels=y, oracle=jnp.array([0.3, 0.7, 0.3, 0.7]),
      ...                  fields=jnp.zeros((4, 2), jnp.int32), regime=jnp.zeros(4, jnp.int32),
      ...                  params=mc.VariantParams(*jnp.zeros(7)))
      >>> fn = mc.lcce_metric(n_clusters=2, init="quantile")
      >>> round(float(fn(d, jax.random.key(0))), 4)  # clusters {0.2} and {0.8}: (0.5 0.2^2 + 0.5 0.2^2)
      0.04
    """

    def fn(d: TrialData, key: jax.Array) -> jax.Array:
        need_key = init == "random" or subsample is not None
        return M.lcce(d.logits, d.labels, n_clusters=n_clusters, n_restarts=n_restarts,
                      init=init, key=key if need_key else None, subsample=subsample, norm=norm)

    return fn


def _lcce_optimal(n_clusters: int, n_bins: int) -> MetricFn:
    """Seed-free LCCE on the optimal 1-D k-means of a coarser ``n_bins`` histogram.

    ``calib_jax.metrics.lcce(init="optimal")`` runs the dynamic programme on 2048 histogram
    bins (O(K B^2): ~0.3 s per trial at n = 2e4 here); the panel calls
    :func:`calib_jax.partitions.kmeans_1d` directly with fewer bins (the two exact Lloyd
    polish steps on the raw logits follow either way), then the GCE of eq. 12.
    """

    def fn(d: TrialData, key: jax.Array) -> jax.Array:
        km = kmeans_1d(d.logits, n_clusters=n_clusters, init="optimal", n_bins=n_bins, n_polish=6)
        ids = assign_1d(d.logits, km.thresholds)
        return M.gce(d.probs, d.labels, ids, n_groups=n_clusters)

    return fn


def metric_panel(cfg: PanelConfig = PanelConfig()) -> dict[str, MetricFn]:
    """The panel as an ordered ``{name: fn(data, key) -> scalar}`` (lower is better).

    Args:
      cfg: the panel's static options; ``cfg.metrics`` chooses and orders the columns (names
        from ``LABEL_METRICS``, ``MODERN_METRICS`` and ``ORACLE_METRICS``, and the user
        columns of ``cfg.custom``; build it with :func:`panel_for`).

    Returns:
      A dict from column name to :data:`MetricFn`, in the order of ``cfg.metrics``; every
      function is jit- and vmap-able. Raises ``ValueError`` for an unknown name. Keep the
      dict and reuse it: :func:`evaluate` compiles once per dict of functions.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax import montecarlo as mc
      >>> panel = mc.metric_panel(mc.panel_for(["brier", "ece"]))
      >>> list(panel)  # the reference is always appended
      ['brier', 'ece', 'oracle_brier']
      >>> p = jnp.array([0.2, 0.8, 0.2, 0.8]); y = jnp.array([0.0, 1.0, 0.0, 1.0])
      >>> d = mc.TrialData(logits=jnp.log(p / (1 - p)), probs=p, labels=y, oracle=jnp.array([0.3, 0.7, 0.3, 0.7]),
      ...                  fields=jnp.zeros((4, 2), jnp.int32), regime=jnp.zeros(4, jnp.int32),
      ...                  params=mc.VariantParams(*jnp.zeros(7)))
      >>> round(float(panel["brier"](d, jax.random.key(0))), 4)  # (0.2^2 + 0.2^2 + 0.2^2 + 0.2^2) / 4
      0.04
    """
    f = cfg.field
    K = cfg.n_levels

    def fld(d: TrialData) -> jax.Array:
        if not 0 <= f < d.fields.shape[1]:  # static: JAX would clamp the column (field 2 read the cohort)
            raise ValueError(f"`field` {f} of the panel is not a column of the trial's {d.fields.shape[1]} fields "
                             "(0 = media, 1 = cohort)")
        return d.fields[:, f]

    def by_field(metric: Callable[..., jax.Array], **kw: Any) -> MetricFn:
        """A metric over the field's levels, marked with ``(field, n_levels)`` so that the trial
        builders check ``n_levels`` against the trial's own levels (:func:`_check_field_levels`)."""
        def fn(d: TrialData, k: jax.Array) -> jax.Array:
            return metric(d.probs, d.labels, fld(d), **kw)
        fn.field_levels = (f, K)  # type: ignore[attr-defined]
        return fn

    every: dict[str, MetricFn] = {
        "brier": lambda d, k: M.brier(d.probs, d.labels),
        "nll": lambda d, k: M.nll_logits(d.logits, d.labels),
        "mae": lambda d, k: M.mae(d.probs, d.labels),
        "ece": lambda d, k: M.ece(d.probs, d.labels, n_bins=cfg.n_bins),
        "ece_sq": lambda d, k: M.ece(d.probs, d.labels, n_bins=cfg.n_bins, norm="l2"),
        "ece_plus": lambda d, k: M.ece(d.probs, d.labels, n_bins=cfg.n_bins, strategy="quantile"),
        "mce": lambda d, k: M.ece(d.probs, d.labels, n_bins=cfg.n_bins, norm="max"),
        "gce_field": by_field(M.gce, n_groups=K),
        "lcce": lcce_metric(n_clusters=cfg.n_clusters, n_restarts=cfg.n_restarts),
        "lcce_l1": lcce_metric(n_clusters=cfg.n_clusters, n_restarts=cfg.n_restarts, norm="l1"),
        "lcce_quantile": lcce_metric(n_clusters=cfg.n_clusters, init="quantile"),
        "lcce_optimal": _lcce_optimal(cfg.n_clusters, cfg.optimal_bins),
        "lcce_random": lambda d, k: M.lcce_random(d.probs, d.labels, key=k,
                                                  n_groups=cfg.n_groups_random),
        "field_ece": by_field(M.field_ece, n_groups=K),
        "field_rce": by_field(M.field_rce, n_groups=K),
        "abs_global_bias": lambda d, k: jnp.abs(M.bias(d.probs, d.labels)),
        "abs_bias": by_field(M.abs_bias, n_groups=K),
        "one_minus_auc": lambda d, k: 1.0 - M.auc(d.probs, d.labels),
        "calibrated_log_loss": lambda d, k: M.calibrated_log_loss(
            d.logits, d.labels, key=k, val_fraction=cfg.cll_val_fraction),
        "oracle_brier": lambda d, k: M.oracle_brier(d.probs, d.oracle),
        "oracle_mae": lambda d, k: M.oracle_mae(d.probs, d.oracle),
        "oracle_kl": lambda d, k: M.oracle_kl(d.probs, d.oracle),
        "oracle_alpha": lambda d, k: M.oracle_alpha_divergence(d.probs, d.oracle,
                                                               alpha=cfg.alpha),
        "oracle_chebyshev": lambda d, k: M.oracle_chebyshev(d.probs, d.oracle),
        "one_minus_pearson": lambda d, k: 1.0 - M.pearson(d.probs, d.oracle),
        "one_minus_spearman": lambda d, k: 1.0 - M.spearman(d.probs, d.oracle),
        # modern (opt-in) group
        "smooth_ece": lambda d, k: M.smooth_ece(d.probs, d.labels),
        "cce_ks": lambda d, k: M.cumulative_calibration_error(d.probs, d.labels, statistic="ks"),
        "cce_kuiper": lambda d, k: M.cumulative_calibration_error(d.probs, d.labels),
        "cce_kuiper_sigma": lambda d, k: M.cumulative_calibration_error(d.probs, d.labels, normalize=True),
        "mce_field": by_field(M.multicalibration_error, n_levels=K),
        "skce": lambda d, k: M.skce(d.probs, d.labels, estimator="block", block_size=SKCE_BLOCK),
        "debiased_ece_sq": lambda d, k: M.debiased_ece_sq(d.probs, d.labels, n_bins=cfg.n_bins),
        "ece_sweep": lambda d, k: M.ece_sweep(d.probs, d.labels),
        "ici": lambda d, k: M.ici(d.probs, d.labels),
    }
    user = {c.name: c for c in cfg.custom}
    return {m: user[m].column() if m in user else every[m] for m in cfg.metrics}


def evaluate(data: TrialData, key: jax.Array, metrics: Mapping[str, MetricFn]) -> jax.Array:
    """Evaluate every metric on one trial's data; returns a (len(metrics),) vector.

    Each built-in column gets its own key ``fold_in(key, j)`` (LCCE restarts, LCCE-rand groups,
    the CLL split), j its index among the built-in columns, and a user column
    (:class:`PanelMetric`) a key of its name (``USER_KEY_TAG``): appending a built-in column, or
    adding a user column anywhere, never changes the others.

    Called eagerly on concrete data, the whole panel runs as one compiled program per
    ``metrics`` mapping (its functions are the static part; keep the mapping of
    :func:`metric_panel` and reuse it), with the inputs validated in the same program;
    inside a user's ``jit`` / ``vmap`` it is traced as before.

    Args:
      data: one trial's :class:`~calib_jax.montecarlo.variants.TrialData` (length-n arrays:
        probabilities and oracle CTRs in [0, 1], labels in {0, 1}, real logits, (n, 2) int
        fields).
      key: the trial's metric key (typed or raw).
      metrics: ``{name: MetricFn}``, e.g. :func:`metric_panel`'s dict (static).

    Returns:
      A (len(metrics),) float array, in the order of ``metrics``. Called eagerly, invalid data
      (a probability outside [0, 1], a label other than 0/1, NaN, ...) raises ``ValueError``
      naming the argument, as the metric concerned does; under ``jit`` / ``vmap``, where values
      cannot raise, the same checks make the whole vector NaN. Inside
      :func:`~calib_jax.montecarlo.engine.run_trials` the checks are off (``unchecked``).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax import montecarlo as mc
      >>> p = jnp.array([0.2, 0.8, 0.2, 0.8]); y = jnp.array([0.0, 1.0, 0.0, 1.0])
      >>> d = mc.TrialData(logits=jnp.log(p / (1 - p)), probs=p, labels=y, oracle=jnp.array([0.3, 0.7, 0.3, 0.7]),
      ...                  fields=jnp.zeros((4, 2), jnp.int32), regime=jnp.zeros(4, jnp.int32),
      ...                  params=mc.VariantParams(*jnp.zeros(7)))
      >>> panel = mc.metric_panel(mc.panel_for(["brier"]))
      >>> [round(float(v), 4) for v in mc.evaluate(d, jax.random.key(0), panel)]  # Brier 0.2^2, Brier* 0.1^2
      [0.04, 0.01]
    """
    return _evaluate(data, key, tuple(metrics.values()))


def _evaluate_fns(data: TrialData, key: jax.Array, fns: tuple[MetricFn, ...]) -> jax.Array:
    vals, j = [], 0
    for fn in fns:
        user = getattr(fn, "user_key", None)
        if user is None:  # the j-th built-in column: the key it always had
            vals.append(fn(data, jax.random.fold_in(key, j)))
            j += 1
        else:  # a user column: a key of its name, wherever it sits
            vals.append(fn(data, jax.random.fold_in(jax.random.fold_in(key, USER_KEY_TAG), user)))
    return jnp.stack([jnp.asarray(v, jnp.result_type(float)) for v in vals])


_evaluate = compiled(_evaluate_fns)


def make_trial(
    n: int,
    *,
    scenario: ScenarioConfig = ScenarioConfig(),
    variant: VariantConfig = VariantConfig(),
    metrics: Mapping[str, MetricFn] | PanelConfig | Sequence[Any] | None = None,
    world: FixedWorld | None = None,
) -> Callable[[jax.Array], tuple[jax.Array, jax.Array]]:
    """A pure trial ``key -> (metric vector, oracle Brier)`` for the rank-consistency study.

    The key draws a population (:func:`~calib_jax.montecarlo.scenarios.sample_population`),
    a model variant and labels (:func:`~calib_jax.montecarlo.variants.sample_trial_data`);
    the metrics are evaluated on the ``n`` logged rows. With ``world`` (the fixed design,
    :func:`~calib_jax.montecarlo.scenarios.fixed_world`) the population law is that one
    world in every trial; without it (the pooled design) it is redrawn per trial.

    Args:
      n: logged rows per trial (int >= 1; static).
      scenario: the population family.
      variant: the model-variant family.
      metrics: the columns: ``{name: MetricFn}``, a :class:`PanelConfig`, or a list of
        built-in names and user metrics as :func:`panel_for` takes them (default: the full
        :func:`metric_panel`).
      world: the fixed design's population law, or ``None`` for the pooled design.

    Returns:
      A pure function ``trial(key) -> (values, oracle_brier)``: values (len(metrics),), and
      the trial's oracle Brier score (), float. It is jit- and vmap-able; pass it to
      :func:`~calib_jax.montecarlo.engine.run_trials`. (Compiling a trial takes seconds: the
      example only traces it.)

    Example:
      >>> import jax
      >>> from calib_jax import montecarlo as mc
      >>> trial = mc.make_trial(100, metrics=mc.metric_panel(mc.panel_for(["brier"])))
      >>> values, ref = jax.eval_shape(trial, jax.random.key(0))
      >>> values.shape, ref.shape  # [Brier, Brier*] and Brier* again
      ((2,), ())
    """
    n = check_positive_int(n, "n")  # a negative n failed in the compiler (an MLIR error)
    metrics = as_metric_fns(metrics)
    _check_field_levels(metrics, (scenario.n_media, scenario.n_cohorts))

    def trial(key: jax.Array) -> tuple[jax.Array, jax.Array]:
        return _population_trial_body(key, n, scenario, variant, metrics, world)

    return trial


def _population_trial_body(key: jax.Array, n: int, scenario: ScenarioConfig, variant: VariantConfig,
                           metrics: Mapping[str, MetricFn], world: FixedWorld | PopulationLaw | None
                           ) -> tuple[jax.Array, jax.Array]:
    k_data, k_metric = jax.random.split(key)
    d = sample_trial_data(k_data, n, scenario, variant, world=world)
    return evaluate(d, k_metric, metrics), M.oracle_brier(d.probs, d.oracle)


@functools.cache
def _law_trial(n: int, scenario: ScenarioConfig, variant: VariantConfig, panel: PanelConfig
               ) -> Callable[[jax.Array, PopulationLaw], tuple[jax.Array, jax.Array]]:
    """One trial function per static configuration (so the engine compiles it once)."""
    metrics = metric_panel(panel)
    _check_field_levels(metrics, (scenario.n_media, scenario.n_cohorts))

    def trial(key: jax.Array, law: PopulationLaw) -> tuple[jax.Array, jax.Array]:
        return _population_trial_body(key, n, scenario, variant, metrics, law)

    return trial


def make_population_trial(n: int, world: FixedWorld | None, *, panel: PanelConfig = PanelConfig(),
                          scenario: ScenarioConfig = ScenarioConfig(),
                          variant: VariantConfig = VariantConfig()) -> BoundTrial:
    """:func:`make_trial` of the panel ``panel`` under the fixed design (``world``) or the
    pooled one (``None``), as a :class:`~calib_jax.montecarlo.engine.BoundTrial` whose
    population law is an input of the compiled program: both designs (and any fixed world)
    at one ``n`` share one compilation. Each trial's output is bit for bit that of
    ``make_trial(n, scenario=scenario, variant=variant, metrics=metric_panel(panel), world=world)``.

    Args:
      n: logged rows per trial (int >= 1; static).
      world: the fixed design's :class:`~calib_jax.montecarlo.scenarios.FixedWorld`, or
        ``None`` for the pooled design (an argument of the program, not static).
      panel: the panel's options (static; hashable).
      scenario: the population family (static).
      variant: the model-variant family (static).

    Returns:
      A :class:`~calib_jax.montecarlo.engine.BoundTrial` ``key -> (values, oracle_brier)``
      whose ``fn`` is cached per ``(n, scenario, variant, panel)`` and whose ``args`` hold
      the :class:`~calib_jax.montecarlo.scenarios.PopulationLaw`. Jit- and vmap-able in the key.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax import montecarlo as mc
      >>> cfg = mc.panel_for(["brier"])
      >>> pooled = mc.make_population_trial(100, None, panel=cfg)
      >>> fixed = mc.make_population_trial(100, mc.FixedWorld(jax.random.key(1), jnp.float32(-3.5)), panel=cfg)
      >>> fixed.fn is pooled.fn  # one program for both designs: one compilation
      True
      >>> [a.shape for a in jax.eval_shape(fixed, jax.random.key(0))]
      [(2,), ()]
    """
    return BoundTrial(_law_trial(int(n), scenario, variant, panel), (PopulationLaw.of(world),))


def make_repeated_trial(
    n: int,
    n_repeats: int,
    *,
    scenario: ScenarioConfig = ScenarioConfig(),
    variant: VariantConfig = VariantConfig(),
    metrics: Mapping[str, MetricFn] | PanelConfig | Sequence[Any] | None = None,
    world: FixedWorld | None = None,
) -> Callable[[jax.Array], dict[str, Any]]:
    """A trial over one *configuration*: ``n_repeats`` fresh data sets from the same
    population law and model (Fig 4).  Returns the per-metric mean and standard deviation
    (ddof = 1) over the repeats, shape (len(metrics),) each. With ``world`` (the fixed
    design) a configuration is a model variant on that one population law.

    The trial key fixes the configuration (population coefficients, model variant, field-bias
    signs); repeat r draws its rows, labels and metric keys from ``fold_in(key, r + 1)``.

    Args:
      n: logged rows per repeat (int >= 1; static).
      n_repeats: data sets per configuration (int >= 2 for a finite standard deviation; static).
      scenario: the population family.
      variant: the model-variant family.
      metrics: the columns: ``{name: MetricFn}``, a :class:`PanelConfig`, or a list of
        built-in names and user metrics as :func:`panel_for` takes them (default: the full
        :func:`metric_panel`).
      world: the fixed design's population law, or ``None`` for the pooled design.

    Returns:
      A pure function ``trial(key) -> {"mean": (M,), "std": (M,)}`` (float; the repeats run
      in a ``lax.map``), jit- and vmap-able.

    Example:
      >>> import jax
      >>> from calib_jax import montecarlo as mc
      >>> trial = mc.make_repeated_trial(100, 3, metrics=mc.metric_panel(mc.panel_for(["brier"])))
      >>> {k: v.shape for k, v in jax.eval_shape(trial, jax.random.key(0)).items()}
      {'mean': (2,), 'std': (2,)}
    """
    metrics = as_metric_fns(metrics)
    _check_field_levels(metrics, (scenario.n_media, scenario.n_cohorts))

    def trial(key: jax.Array) -> dict[str, Any]:
        def rep(r):
            rk = jax.random.fold_in(key, r + 1)
            k_rows, k_metric = jax.random.split(rk)
            d = sample_trial_data(key, n, scenario, variant, row_key=k_rows, world=world)
            return evaluate(d, k_metric, metrics)

        vals = jax.lax.map(rep, jnp.arange(n_repeats))
        return {"mean": jnp.mean(vals, axis=0), "std": jnp.std(vals, axis=0, ddof=1)}

    return trial


def make_logged_trial(
    pool: LoggedPool,
    n: int,
    *,
    n_media: int,
    variant: VariantConfig = VariantConfig(),
    metrics: Mapping[str, MetricFn] | PanelConfig | Sequence[Any] | None = None,
) -> Callable[[jax.Array], tuple[jax.Array, jax.Array]]:
    """Like :func:`make_trial`, but each trial resamples ``n`` rows of a fixed pool of
    simulator logs (:func:`~calib_jax.montecarlo.variants.sample_logged_trial_data`).
    ``metrics`` must group by a field with ``n_media`` levels (``PanelConfig.n_levels``).

    Args:
      pool: the :class:`~calib_jax.montecarlo.variants.LoggedPool` to resample (length N).
      n: rows per trial (int >= 1; static), drawn with replacement.
      n_media: number of levels of the pool's media field (int >= 1; static).
      variant: the model-variant family (its candidate selection is not used).
      metrics: the columns as :func:`make_trial` takes them (default: the full panel with
        ``n_levels=n_media``; a list gets ``n_levels=n_media`` too).

    Returns:
      A pure function ``trial(key) -> (values, oracle_brier)`` as :func:`make_trial`'s, jit-
      and vmap-able (the pool is a constant of the compiled program).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax import montecarlo as mc
      >>> eta = jnp.linspace(-4.0, -1.0, 50)
      >>> pool = mc.LoggedPool(logits=eta, oracle=jax.nn.sigmoid(eta), fields=jnp.zeros((50, 2), jnp.int32),
      ...                      regime=jnp.zeros(50, jnp.int32))
      >>> panel = mc.metric_panel(mc.panel_for(["brier"], n_levels=1))
      >>> trial = mc.make_logged_trial(pool, 20, n_media=1, metrics=panel)
      >>> [a.shape for a in jax.eval_shape(trial, jax.random.key(0))]
      [(2,), ()]
    """
    metrics = as_metric_fns(metrics, n_levels=n_media)
    _check_field_levels(metrics, (n_media, None))

    def trial(key: jax.Array) -> tuple[jax.Array, jax.Array]:
        k_data, k_metric = jax.random.split(key)
        d = sample_logged_trial_data(k_data, pool, n, n_media, variant)
        return evaluate(d, k_metric, metrics), M.oracle_brier(d.probs, d.oracle)

    return trial


def panel_for(metrics: Sequence[str | PanelMetric | Callable[..., Any]] | None = None, *, modern: bool = False,
              **options: Any) -> PanelConfig:
    """The panel that computes ``metrics``: the one entry point for "which metrics a trial
    computes", built-in and user metrics alike. The reference (the oracle Brier) is always
    included; ``modern=True`` appends the ``MODERN_METRICS`` group (those not already listed).

    Args:
      metrics: the columns, in the order wanted (``None``: the default panel,
        ``LABEL_METRICS + ORACLE_METRICS``). Each is
        a built-in name (``LABEL_METRICS``, ``MODERN_METRICS``, ``ORACLE_METRICS``);
        a :class:`PanelMetric`;
        a function ``f(probs, labels, *, weights=None)`` (a label-based metric, named by its
        ``__name__``; lambdas need a :class:`PanelMetric`); or
        a string ``"module:function"`` / ``"file.py:function"`` (:meth:`PanelMetric.from_spec`).
        ``"oracle_brier"`` is appended when absent.
      modern: append the ``MODERN_METRICS`` not already listed.
      **options: the other :class:`PanelConfig` fields (``n_bins``, ``n_levels``, ...).

    Returns:
      A :class:`PanelConfig` (hashable, static). Raises ``ValueError`` for an unknown name, a
      name listed twice or a user metric named like a built-in column. Host code.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax import montecarlo as mc
      >>> cfg = mc.panel_for(["ece", "lcce"], n_bins=10)
      >>> cfg.metrics, cfg.n_bins
      (('ece', 'lcce', 'oracle_brier'), 10)
      >>> len(mc.panel_for(None).metrics), len(mc.panel_for(None, modern=True).metrics)  # 19 + 7, then + 9
      (26, 35)
      >>> def mean_gap(probs, labels, *, weights=None):  # a user metric: |mean p - mean y|
      ...     return jnp.abs(jnp.mean(probs) - jnp.mean(labels))
      >>> mc.panel_for(["ece", mean_gap]).metrics
      ('ece', 'mean_gap', 'oracle_brier')
    """
    if metrics is None:
        if not modern:
            return PanelConfig(**options)
        metrics = PanelConfig().metrics
    if isinstance(metrics, str | PanelMetric):
        metrics = [metrics]
    if isinstance(metrics, Mapping):  # {"ece": fn} was read as its keys, the functions dropped
        raise ValueError("`metrics` must be a list of names, PanelMetric objects or functions, not a mapping; "
                         "give a user function as PanelMetric(name, fn)")
    names: list[str] = []
    custom: list[PanelMetric] = []
    for m in metrics:
        if isinstance(m, str) and ":" in m:
            m = PanelMetric.from_spec(m)
        elif not isinstance(m, str | PanelMetric):
            if not callable(m):
                raise ValueError(f"`metrics`: expected names, PanelMetric objects or functions, got {m!r}")
            name = getattr(m, "__name__", "")
            if not name.isidentifier():
                raise ValueError(f"`metrics`: the function {m!r} has no usable name; wrap it in PanelMetric(name, fn)")
            m = PanelMetric(name, m)
        if isinstance(m, PanelMetric):
            custom.append(m)
            m = m.name
        elif m not in BUILT_IN:
            raise ValueError(f"`metrics`: unknown panel column {m!r}; known: {sorted(BUILT_IN)}, "
                             "or pass a PanelMetric, a function or 'module:function'")
        names.append(m)
    if modern:
        names += [m for m in MODERN_METRICS if m not in names]
    if REFERENCE not in names:
        names.append(REFERENCE)
    return PanelConfig(metrics=tuple(names), custom=tuple(custom), **options)


def _check_field_levels(metrics: Mapping[str, MetricFn], levels: tuple[int | None, ...]) -> None:
    """``ValueError`` naming ``n_levels`` when a panel column groups a field by fewer levels than
    the trials hold (``levels``: the media and cohort counts, None where unknown). The Monte Carlo
    engine runs without the metrics' own checks, so a GCE over 2 of 8 media came out finite and
    wrong (0.101 where all 8 give 0.0111)."""
    for name, fn in metrics.items():
        field, n_levels = getattr(fn, "field_levels", (None, None))
        if field is None or field >= len(levels) or levels[field] is None:
            continue
        if n_levels < levels[field]:
            raise ValueError(f"`n_levels`={n_levels} of the panel is below the {levels[field]} levels of field "
                             f"{field} ({('media', 'cohort')[field]}) that the trials draw: column {name!r} would "
                             "leave rows out; give n_levels >= that count")


def as_metric_fns(metrics: Mapping[str, MetricFn] | PanelConfig | Sequence[Any] | None, **options: Any
                  ) -> Mapping[str, MetricFn]:
    """The ``{name: MetricFn}`` of a trial builder's ``metrics`` argument.

    Args:
      metrics: a mapping of column functions (used as it is), a :class:`PanelConfig`, a
        sequence of columns as :func:`panel_for` takes them, or ``None`` (the default panel).
      **options: :class:`PanelConfig` options for a sequence or ``None`` (e.g. ``n_levels``).

    Returns:
      An ordered mapping from column name to :data:`MetricFn`. Host code.

    Example:
      >>> from calib_jax.montecarlo.panel import as_metric_fns
      >>> list(as_metric_fns(["brier"]))
      ['brier', 'oracle_brier']
    """
    if isinstance(metrics, Mapping):
        return metrics
    if isinstance(metrics, PanelConfig):
        return metric_panel(metrics)
    return metric_panel(panel_for(metrics, **options))



def _probe_data(n: int, n_trials: int, seed: int) -> tuple[TrialData, jax.Array]:
    """``n_trials`` probe trials of ``n`` rows as one batch (NumPy; nothing to compile), and their
    metric keys. Trial t draws its own population (base CTR between 1% and 10%, media effects)
    and its own model (temperature, bias, per-media biases, logit noise), so every metric that
    reads the model's calibration varies from trial to trial."""
    rng = np.random.default_rng([seed, n, n_trials])
    cfg = ScenarioConfig()
    t = n_trials
    media = rng.integers(0, cfg.n_media, (t, n))
    cohort = rng.integers(0, cfg.n_cohorts, (t, n))
    base = np.log(rng.uniform(0.01, 0.1, (t, 1)) / 0.9)
    eta = base + rng.normal(0.0, 0.6, (t, cfg.n_media))[np.arange(t)[:, None], media] + rng.normal(0.0, 0.8, (t, n))
    oracle = 1.0 / (1.0 + np.exp(-eta))
    scale, bias = rng.uniform(0.6, 1.6, (t, 1)), rng.normal(0.0, 0.4, (t, 1))
    field_bias = rng.normal(0.0, 0.3, (t, cfg.n_media))[np.arange(t)[:, None], media]
    logits = scale * (eta - base) + base + bias + field_bias + rng.normal(0.0, 0.2, (t, n))
    f32 = jnp.result_type(float)
    params = VariantParams(*(jnp.asarray(a, f32) for a in (scale[:, 0], bias[:, 0], *np.zeros((5, t)))))
    data = TrialData(logits=jnp.asarray(logits, f32), probs=jnp.asarray(1.0 / (1.0 + np.exp(-logits)), f32),
                     labels=jnp.asarray(rng.random((t, n)) < oracle, f32), oracle=jnp.asarray(oracle, f32),
                     fields=jnp.asarray(np.stack([media, cohort], axis=-1), jnp.int32),
                     regime=jnp.asarray(rng.integers(0, 2, (t, n)), jnp.int32), params=params)
    keys = jax.random.split(key_of_seed(seed), n_trials)  # every bit of a 64-bit seed
    return data, keys


def check_metrics(metrics: Sequence[PanelMetric] | PanelConfig, *, n: int = 1000, n_trials: int = 8,
                  seed: int = 0) -> None:
    """Probe user metrics on a few small trials before a study spends hours on them.

    Every :class:`PanelMetric` (of ``metrics``, or the ``custom`` columns of a
    :class:`PanelConfig`) is evaluated as the studies evaluate it, traced by ``jax.jit`` and
    ``jax.vmap``, on ``n_trials`` synthetic trials of ``n`` rows each, every trial with its own
    population (base CTR between 1% and 10%) and its own miscalibrated model (temperature, bias,
    per-media biases, logit noise). A metric is refused when it

    * raises, or cannot be traced (it turns a traced array into a Python value: ``float()``,
      ``np.asarray()``, an ``if`` on an array), or writes into its input;
    * returns something other than a JAX array (a Python float) or not a scalar;
    * returns NaN or an infinity on some probe trial;
    * is constant over the probe trials: its Spearman correlation with the oracle Brier score
      would be undefined (:func:`~calib_jax.montecarlo.bootstrap.bootstrap_spearman` reports
      such a column as undefined, never as 0).

    Args:
      metrics: the user metrics (a sequence of :class:`PanelMetric`, or one) or a panel
        configuration.
      n: rows per probe trial (int >= 10).
      n_trials: probe trials (int >= 2).
      seed: seed of the probe trials (an integer, :func:`calib_jax._src.seeds.check_seed`).

    Returns:
      ``None``. Raises ``ValueError`` naming the first metric refused and why. Host code: the
      probe trials are drawn with NumPy; each metric is compiled once (a fraction of a second).

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax import metrics, montecarlo as mc
      >>> mc.check_metrics([mc.PanelMetric("my_ece", metrics.ece)], n=200, n_trials=4)  # fine: None
      >>> half = mc.PanelMetric("half", lambda p, y: jnp.float32(0.5) + 0.0 * jnp.mean(p))
      >>> mc.check_metrics([half], n=200, n_trials=4)  # doctest: +ELLIPSIS
      Traceback (most recent call last):
      ValueError: metric 'half' is constant (0.5) over 4 probe trials of different populations ...
    """
    if isinstance(metrics, PanelMetric):  # one metric is one metric (it was not iterable)
        metrics = [metrics]
    custom = metrics.custom if isinstance(metrics, PanelConfig) else tuple(metrics)
    if not all(isinstance(c, PanelMetric) for c in custom):
        raise ValueError("`metrics` must hold PanelMetric objects (or be a PanelConfig)")
    # int('200') and int(200.9) were taken: every size and the seed must be an integer as given
    n, n_trials, seed = check_positive_int(n, "n"), check_positive_int(n_trials, "n_trials"), check_seed(seed)
    if n < 10 or n_trials < 2:
        raise ValueError(f"`n` must be >= 10 and `n_trials` >= 2, got {n!r} and {n_trials!r}")
    if not custom:
        return
    data, keys = _probe_data(n, n_trials, seed)
    for c in custom:
        try:
            values = np.asarray(jax.jit(jax.vmap(c.column()))(data, keys), np.float64)
        except ValueError:
            raise
        except Exception as e:  # an error of the compiled program (a batching rule, the runtime)
            raise ValueError(_metric_failure(c.name, e)) from e
        finite = np.isfinite(values)
        if not finite.all():
            what = "NaN" if np.isnan(values).any() else "an infinity"
            raise ValueError(f"metric {c.name!r} returned {what} on {int((~finite).sum())} of {n_trials} probe "
                             f"trials ({n} rows each); a metric must be finite on every trial")
        if np.all(values == values[0]):
            raise ValueError(f"metric {c.name!r} is constant ({values[0]:.6g}) over {n_trials} probe trials of "
                             "different populations and models: its Spearman correlation with the oracle Brier "
                             "score would be undefined")


def display_names(names: Sequence[str]) -> list[str]:
    """Display labels of panel columns (``DISPLAY``; unknown names are kept as they are).

    Args:
      names: panel column names (strings).

    Returns:
      A list of labels, one per name, in order.

    Example:
      >>> from calib_jax.montecarlo import display_names
      >>> display_names(["lcce", "oracle_brier", "my_metric"])
      ['LCCE', 'Brier*', 'my_metric']
    """
    return [DISPLAY.get(n, n) for n in names]


def panel_record(panel: PanelConfig = PanelConfig(), scenario: Any = None,
                 variant: VariantConfig = VariantConfig()) -> dict[str, Any]:
    """The scenario, variant-family and panel settings of a study as one JSON-able record
    (what a study's provenance and its checkpoint hash record).

    Args:
      panel: the panel's options.
      scenario: a :class:`~calib_jax.montecarlo.scenarios.ScenarioConfig` (or any object
        with ``to_dict()``); ``None``: the default scenario.
      variant: the model-variant family.

    Returns:
      ``{"scenario": dict, "variant": dict, "panel": dict}`` (the ``to_dict()`` of each).

    Example:
      >>> import json
      >>> from calib_jax import montecarlo as mc
      >>> rec = mc.panel_record(mc.panel_for(["ece"]))
      >>> sorted(rec), rec["panel"]["metrics"], rec["scenario"]["n_media"]
      (['panel', 'scenario', 'variant'], ('ece', 'oracle_brier'), 8)
      >>> len(json.dumps(rec)) > 0  # JSON-able (tuples become lists)
      True
    """
    scenario = ScenarioConfig() if scenario is None else scenario
    return {"scenario": scenario.to_dict(), "variant": variant.to_dict(), "panel": panel.to_dict()}


def make_simulator_trial(sim_config: Any, key: jax.Array, n: int, *,
                         metrics: Sequence[Any] | None = None
                         ) -> tuple[Callable[[jax.Array], tuple[jax.Array, jax.Array]], PanelConfig,
                                    dict[str, Any]]:
    """Trials resampled from the logs of the ad-auction simulator (``calib_jax.data.simulator``).

    The simulator is run once with ``sim_config`` and ``key``; every trial then resamples
    ``n`` logged rows and applies a model variant to the production logit
    (:func:`make_logged_trial`), grouping the field metrics by the ``media`` field.

    Args:
      sim_config: a :class:`calib_jax.data.simulator.SimulatorConfig` (e.g.
        :func:`~calib_jax.data.simulator.tiny_config`).
      key: PRNG key of the simulation (the pool of logs; the trials get their own keys).
      n: rows per trial (int >= 1; static), resampled with replacement from the logs.
      metrics: panel columns as :func:`panel_for` takes them (built-in names and user
        metrics; the oracle Brier is appended; ``None``: the full panel).

    Returns:
      ``(trial, panel_config, info)``: the trial ``key -> (values, oracle_brier)`` (jit- and
      vmap-able; the logs are constants of it), the :class:`PanelConfig` (``n_levels`` = the
      simulator's number of media) and ``info`` describing the logs (``"logged_rows"``,
      ``"mean_oracle"``: mean oracle CTR, ``"mean_pctr"``: mean production pCTR). Host code:
      it runs (and compiles) the simulator, about 10 s of CPU time even for the small world of
      the example, whose simulating lines are therefore skipped when the docs are tested.

    Example:
      >>> import jax
      >>> from calib_jax.data.simulator import tiny_config
      >>> from calib_jax.montecarlo import make_simulator_trial
      >>> sim_cfg = tiny_config(n_chunks=1, requests_per_chunk=256)  # 256 requests, 4 media
      >>> trial, cfg, info = make_simulator_trial(sim_cfg, jax.random.key(0), 100,
      ...                                         metrics=["brier"])  # doctest: +SKIP
      >>> cfg.metrics, cfg.n_levels, sorted(info)  # doctest: +SKIP
      (('brier', 'oracle_brier'), 4, ['logged_rows', 'mean_oracle', 'mean_pctr'])
      >>> info["logged_rows"] <= 256 * 3  # at most one impression per request and slot  # doctest: +SKIP
      True
    """
    from calib_jax.data import simulator as sim
    from calib_jax.montecarlo.variants import pool_from_impressions

    imp = sim.simulate(sim_config, key)
    pool = pool_from_impressions(imp)
    n_media = int(sim.field_cardinalities(sim_config)["media"])
    panel_cfg = panel_for(metrics, n_levels=n_media)
    trial = make_logged_trial(pool, int(n), n_media=n_media, metrics=metric_panel(panel_cfg))
    info = {"logged_rows": len(imp), "mean_oracle": float(np.mean(imp.oracle)),
            "mean_pctr": float(np.mean(imp.pctr))}
    return trial, panel_cfg, info
