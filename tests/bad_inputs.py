"""A table of the public library calls that take arrays, with the role of every array
argument, for the bad-input tests (tests/test_bad_inputs.py).

Each :class:`Case` builds valid arguments of any length ``n`` (:func:`valid_arrays`) and
calls the function with them; :func:`corrupt` puts one bad value (NaN, +-inf, or a finite
value outside the argument's domain) at one position of one argument. The contract tested
against the table: an eager call with a corrupted argument raises ``ValueError`` whose
message names that argument.

:data:`SCALAR_CASES` lists the non-array arguments with a domain (a degrees-of-freedom
correction, a clip, a penalty weight, a PRNG key, a dict of hyper-parameters): a bad value
raises ``ValueError`` naming the argument eagerly, and under ``jit`` makes the output NaN (a
traceable scalar) or raises while tracing (a static one).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

import calib_jax.decompositions as D
from calib_jax import calibrators as C
from calib_jax import inference as T
from calib_jax import losses as L
from calib_jax import metrics as M

G = 5  # group / field levels

#: finite values outside each role's domain (NaN and +-inf are bad for every float role)
OUT_OF_DOMAIN: dict[str, tuple[float, ...]] = {
    "probs": (1.5, -0.25),
    "labels": (0.5, 2.0, -1.0),
    "logits": (),
    "weights": (-1.0,),
    "groups": (-1.0, float(G), 1.5),
    "users": (1.5,),
    "ranks": (0.0, -3.0, 2.5),
    "fields2d": (-1.0, 1.5),
    "embedding": (),
    "targets": (),
    # binomial counts: successes k <= trials n (valid_arrays draws k < 50 <= n)
    "successes": (-1.0, 1e6),
    "trials": (-1.0,),
}
NON_FINITE = (np.nan, np.inf, -np.inf)


@dataclasses.dataclass(frozen=True)
class Case:
    """One public call: ``call(**arrays)``; ``args`` maps each array argument to its role and
    to the name its error message must carry."""

    name: str
    call: Callable[..., Any]
    args: dict[str, tuple[str, str]]
    min_n: int = 1
    #: largest size the property test draws (the quadratic SKCE and the fits take long beyond)
    max_n: int = 200_000


def valid_arrays(case: Case, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Valid arguments of length ``n`` (labels hold both classes when ``n >= 2``)."""
    out: dict[str, np.ndarray] = {}
    probs = rng.uniform(0.02, 0.98, n).astype(np.float32)
    for arg, (role, _) in case.args.items():
        if role in ("probs", "oracle"):
            out[arg] = rng.uniform(0.02, 0.98, n).astype(np.float32) if arg != "probs" else probs
        elif role == "labels":
            y = (rng.uniform(size=n) < probs).astype(np.float32)
            y[: min(n, 2)] = [0.0, 1.0][: min(n, 2)]
            out[arg] = y
        elif role in ("logits", "targets"):
            out[arg] = rng.normal(size=n).astype(np.float32)
        elif role == "weights":
            out[arg] = rng.uniform(0.5, 1.5, n).astype(np.float32)
        elif role == "groups":
            out[arg] = rng.integers(0, G, n).astype(np.float32)  # float codes, as a CSV gives them
        elif role == "fields2d":
            out[arg] = rng.integers(0, G, (n, 2)).astype(np.float32)
        elif role == "users":
            out[arg] = rng.integers(0, max(1, n // 10), n).astype(np.float32)
        elif role == "ranks":
            out[arg] = rng.integers(1, 30, n).astype(np.float32)
        elif role == "embedding":
            out[arg] = rng.normal(size=(n, 3)).astype(np.float32)
        elif role == "successes":
            out[arg] = rng.integers(0, 50, n).astype(np.float32)
        elif role == "trials":
            out[arg] = rng.integers(50, 100, n).astype(np.float32)
        else:  # pragma: no cover - a typo in the table
            raise KeyError(role)
    return out


def corrupt(arrays: dict[str, np.ndarray], case: Case, arg: str, value: float, position: int
            ) -> dict[str, np.ndarray]:
    """A copy of ``arrays`` with ``value`` at row ``position`` of argument ``arg``."""
    out = {k: v.copy() for k, v in arrays.items()}
    out[arg][position % out[arg].shape[0]] = value
    return out


def bad_values(role: str) -> tuple[float, ...]:
    return NON_FINITE + OUT_OF_DOMAIN.get("probs" if role == "oracle" else role, ())


_KEY = jax.random.key(0)
_P = {"probs": ("probs", "probs")}
_PY = {"probs": ("probs", "probs"), "labels": ("labels", "labels")}
_PYW = {**_PY, "weights": ("weights", "weights")}
_OY = {"logits": ("logits", "logits"), "labels": ("labels", "labels")}
_OYW = {**_OY, "weights": ("weights", "weights")}
_PO = {"probs": ("probs", "probs"), "oracle": ("oracle", "oracle")}


def _fit(name: str, **hyper: Any) -> Callable[..., Any]:
    def call(logits, labels, weights, **context):
        return C.REGISTRY[name].fit(logits, labels, weights=weights, context=context or None, **hyper)
    return call


CASES: tuple[Case, ...] = (
    Case("brier", lambda probs, labels, weights: M.brier(probs, labels, weights=weights), _PYW),
    Case("mse", lambda probs, labels, weights: M.mse(probs, labels, weights=weights), _PYW),
    Case("mae", lambda probs, labels, weights: M.mae(probs, labels, weights=weights), _PYW),
    Case("nll", lambda probs, labels, weights: M.nll(probs, labels, weights=weights), _PYW),
    Case("nll_logits", lambda logits, labels, weights: M.nll_logits(logits, labels, weights=weights), _OYW),
    Case("ece", lambda probs, labels, weights: M.ece(probs, labels, weights=weights), _PYW),
    Case("ece_quantile", lambda probs, labels, weights: M.ece(probs, labels, strategy="quantile",
                                                                weights=weights), _PYW, min_n=15),
    Case("gce", lambda probs, labels, groups, weights: M.gce(probs, labels, groups, n_groups=G, weights=weights),
         {**_PYW, "groups": ("groups", "groups")}),
    Case("lcce", lambda logits, labels, weights: M.lcce(logits, labels, key=_KEY, weights=weights), _OYW,
         min_n=4),
    Case("lcce_probs", lambda logits, labels, probs: M.lcce(logits, labels, key=_KEY, probs=probs),
         {**_OY, "probs": ("probs", "probs")}, min_n=4),
    Case("lcce_random", lambda probs, labels, weights: M.lcce_random(probs, labels, key=_KEY, weights=weights),
         _PYW, min_n=4),
    Case("field_ece", lambda probs, labels, field, weights: M.field_ece(probs, labels, field, n_groups=G,
                                                                          weights=weights),
         {**_PYW, "field": ("groups", "field")}),
    Case("field_rce", lambda probs, labels, field, weights: M.field_rce(probs, labels, field, n_groups=G,
                                                                          weights=weights),
         {**_PYW, "field": ("groups", "field")}),
    Case("bias", lambda probs, labels, weights: M.bias(probs, labels, weights=weights), _PYW, min_n=2),
    Case("abs_bias", lambda probs, labels, field, weights: M.abs_bias(probs, labels, field, n_groups=G,
                                                                        weights=weights),
         {**_PYW, "field": ("groups", "field")}, min_n=2),
    # AUC ranks scores: any finite real is valid (the argument is named `probs`)
    Case("auc", lambda probs, labels, weights: M.auc(probs, labels, weights=weights),
         {**_PYW, "probs": ("logits", "probs")}, min_n=2),
    Case("accuracy", lambda probs, labels, weights: M.accuracy(probs, labels, weights=weights), _PYW),
    Case("acc_diff", lambda probs, base_probs, labels: M.acc_diff(probs, base_probs, labels),
         {**_PY, "base_probs": ("probs", "base_probs")}),
    Case("auc_diff", lambda probs, base_probs, labels: M.auc_diff(probs, base_probs, labels),
         {"probs": ("logits", "probs"), "labels": ("labels", "labels"), "base_probs": ("logits", "base_probs")},
         min_n=2),
    Case("ece_at_n", lambda probs, labels, users, scores: M.ece_at_n(probs, labels, users=users, scores=scores),
         {**_PY, "users": ("users", "users"), "scores": ("logits", "scores")}),
    Case("rdece_at_n", lambda probs, labels, ranks: M.rdece_at_n(probs, labels, ranks=ranks),
         {**_PY, "ranks": ("ranks", "ranks")}, min_n=2),
    Case("fit_logit_bias", lambda logits, labels, weights: M.fit_logit_bias(logits, labels, weights=weights),
         _OYW),
    Case("calibrated_log_loss", lambda logits, labels: M.calibrated_log_loss(logits, labels, key=_KEY),
         _OY, min_n=4),
    Case("calibrated_quadratic_loss",
         lambda preds, targets: M.calibrated_quadratic_loss(preds, targets, key=_KEY),
         {"preds": ("logits", "preds"), "targets": ("targets", "targets")}, min_n=4),
    Case("oracle_brier", lambda probs, oracle: M.oracle_brier(probs, oracle), _PO),
    Case("oracle_mae", lambda probs, oracle: M.oracle_mae(probs, oracle), _PO),
    Case("oracle_kl", lambda probs, oracle: M.oracle_kl(probs, oracle), _PO),
    Case("oracle_alpha_divergence", lambda probs, oracle: M.oracle_alpha_divergence(probs, oracle), _PO),
    Case("oracle_chebyshev", lambda probs, oracle: M.oracle_chebyshev(probs, oracle), _PO),
    Case("pearson", lambda probs, oracle: M.pearson(probs, oracle), _PO, min_n=2),
    Case("spearman", lambda probs, oracle: M.spearman(probs, oracle), _PO, min_n=2),
    Case("smooth_ece", lambda probs, labels, weights: M.smooth_ece(probs, labels, weights=weights), _PYW),
    Case("cumulative_calibration_error",
         lambda probs, labels, weights: M.cumulative_calibration_error(probs, labels, weights=weights), _PYW),
    Case("multicalibration_error",
         lambda probs, labels, fields, weights: M.multicalibration_error(probs, labels, fields, n_levels=G,
                                                                          weights=weights),
         {**_PYW, "fields": ("groups", "fields")}),
    Case("skce", lambda probs, labels, weights: M.skce(probs, labels, weights=weights), _PYW, min_n=2,
         max_n=4_000),
    Case("debiased_ece_sq", lambda probs, labels, weights: M.debiased_ece_sq(probs, labels, weights=weights),
         _PYW, min_n=15),
    Case("ece_sweep", lambda probs, labels, weights: M.ece_sweep(probs, labels, weights=weights), _PYW),
    Case("ici", lambda probs, labels, weights: M.ici(probs, labels, weights=weights), _PYW, min_n=2),
    Case("normalized_entropy", lambda probs, labels, weights: M.normalized_entropy(probs, labels, weights=weights),
         _PYW, min_n=2),
    Case("calibration_ratio", lambda probs, labels, weights: M.calibration_ratio(probs, labels, weights=weights),
         _PYW, min_n=2),
    Case("normalized_entropy_by_group", lambda probs, labels, groups, weights: M.normalized_entropy_by_group(
        probs, labels, groups, n_groups=G, weights=weights), {**_PYW, "groups": ("groups", "groups")}, min_n=2),
    Case("calibration_ratio_by_group", lambda probs, labels, groups, weights: M.calibration_ratio_by_group(
        probs, labels, groups, n_groups=G, weights=weights), {**_PYW, "groups": ("groups", "groups")}, min_n=2),
    Case("gauc", lambda probs, labels, users, weights: M.gauc(probs, labels, users, weights=weights),
         {"probs": ("logits", "scores"), "labels": ("labels", "labels"), "users": ("users", "users"),
          "weights": ("weights", "weights")}, min_n=2),
    Case("spiegelhalter_z", lambda probs, labels, weights: T.spiegelhalter_z(probs, labels, weights=weights), _PYW),
    Case("hosmer_lemeshow", lambda probs, labels, weights: T.hosmer_lemeshow(probs, labels, weights=weights), _PYW),
    Case("cox_calibration", lambda probs, labels, weights: T.cox_calibration(probs, labels, weights=weights),
         _PYW, min_n=2),
    Case("corp_test", lambda probs, labels: T.corp_test(probs, labels, key=_KEY, n_resamples=3), _PY,
         max_n=20_000),
    Case("brier_grouping", lambda probs, labels, groups, weights: D.brier_grouping(probs, labels, groups,
                                                                                 n_groups=G, weights=weights),
         {**_PYW, "groups": ("groups", "groups")}),
    Case("murphy", lambda probs, labels, weights: D.murphy(probs, labels, weights=weights), _PYW),
    Case("nll_grouping", lambda probs, labels, groups, weights: D.nll_grouping(probs, labels, groups,
                                                                             n_groups=G, weights=weights),
         {**_PYW, "groups": ("groups", "groups")}),
    Case("corp", lambda probs, labels, weights: D.corp(probs, labels, weights=weights), _PYW),
    Case("group_summary", lambda probs, labels, groups, weights: D.group_summary(probs, labels, groups,
                                                                               n_groups=G, weights=weights),
         {**_PYW, "groups": ("groups", "groups")}),
    *(Case(f"{name}.fit", _fit(name), _OYW, min_n=2)
      for name in ("temperature", "platt", "beta", "histogram_binning", "isotonic", "ilps")),
    Case("sag_ts.fit", _fit("sag_ts", n_steps=2),
         {**_OYW, "embedding": ("embedding", "context['embedding']")}, min_n=4),
    Case("vrsag_ps.fit", _fit("vrsag_ps", n_steps=2),
         {**_OYW, "embedding": ("embedding", "context['embedding']")}, min_n=4),
    Case("neural_calibration.fit", _fit("neural_calibration", n_steps=2),
         {**_OYW, "fields": ("fields2d", "context['fields']")}, min_n=4),
    Case("top_n.fit", _fit("top_n"), {**_OYW, "ranks": ("ranks", "context['ranks']")}, min_n=2),
    Case("binomial_interval", lambda k, n: T.binomial_interval(k, n),
         {"k": ("successes", "k"), "n": ("trials", "n")}),
    Case("binomial_interval_jeffreys", lambda k, n: T.binomial_interval(k, n, method="jeffreys"),
         {"k": ("successes", "k"), "n": ("trials", "n")}),
)


@dataclasses.dataclass(frozen=True)
class ScalarCase:
    """One public call with a non-array argument (a size, a clip, a penalty weight, a key, a
    dict of hyper-parameters): ``call(arrays, value)`` runs it on valid ``arrays`` (built as
    for :class:`Case` from ``args``) with ``value`` for the argument named ``arg``.

    ``good`` is a valid value, ``bad`` values outside the argument's domain. ``traceable``:
    the argument may be a traced scalar under ``jit``, where a bad value makes every floating
    output NaN; ``False``: its check is static (a Python int, a key's type) and raises while
    tracing; ``None``: a host-only call (no ``jit``)."""

    name: str
    call: Callable[[dict[str, np.ndarray], Any], Any]
    args: dict[str, tuple[str, str]]
    arg: str
    good: Any
    bad: tuple[Any, ...]
    traceable: bool | None


def _vrsag(a: dict[str, np.ndarray], lam_v: Any) -> Any:
    n = a["logits"].shape[0]
    h = np.stack([np.sin(np.arange(n)), np.cos(np.arange(n)), np.zeros(n)], axis=1).astype(np.float32)
    return L.vrsag_loss(a["logits"], a["labels"], h, np.ones(3, np.float32), lam_v=lam_v)


def _penalty(a: dict[str, np.ndarray], lam_v: Any) -> Any:
    n = a["probs"].shape[0]
    q = np.stack([np.arange(n) % 2, 1 - np.arange(n) % 2], axis=1).astype(np.float32)
    return L.variance_penalty(a["probs"], q, lam_v=lam_v)


def _sklearn(a: dict[str, np.ndarray], hyper: Any) -> Any:
    return C.SklearnCalibrator("histogram_binning", hyper=hyper).fit(a["logits"][:, None], a["labels"])


_EPS_BAD = (0.0, 0.5, 0.7, -1e-3, float("nan"), float("inf"))
_WEIGHT_BAD = (-0.5, -float("inf"), float("inf"), float("nan"))
_KEY_BAD = (0, np.array([1.5, 2.5], np.float32), np.zeros(3, np.uint32), "seed")
SCALAR_CASES: tuple[ScalarCase, ...] = (
    # ddof >= n_groups leaves no degrees of freedom (the p-value was NaN, the call silent)
    ScalarCase("hosmer_lemeshow.ddof", lambda a, d: T.hosmer_lemeshow(a["probs"], a["labels"], n_groups=G, ddof=d),
               _PY, "ddof", 2, (G, G + 1, -1, 2.5, True), False),
    ScalarCase("normalized_entropy.eps", lambda a, e: M.normalized_entropy(a["probs"], a["labels"], eps=e),
               _PY, "eps", 1e-6, _EPS_BAD, True),
    ScalarCase("normalized_entropy_by_group.eps",
               lambda a, e: M.normalized_entropy_by_group(a["probs"], a["labels"], a["groups"], n_groups=G, eps=e),
               {**_PY, "groups": ("groups", "groups")}, "eps", 1e-6, _EPS_BAD, True),
    ScalarCase("vrsag_loss.lam_v", _vrsag, _OY, "lam_v", 0.5, _WEIGHT_BAD, True),
    ScalarCase("vrsag_loss.lam", lambda a, lam: L.vrsag_loss(
        a["logits"], a["labels"], np.zeros((a["logits"].shape[0], 2), np.float32), np.ones(2, np.float32),
        head_weights=np.ones((3, 2), np.float32), lam=lam), _OY, "lam", 0.1, _WEIGHT_BAD, True),
    ScalarCase("variance_penalty.lam_v", _penalty, _P, "lam_v", 0.5, _WEIGHT_BAD, True),
    ScalarCase("corp_test.key", lambda a, k: T.corp_test(a["probs"], a["labels"], key=k, n_resamples=3), _PY,
               "key", _KEY, (*_KEY_BAD, jax.random.split(_KEY, 2)), False),
    ScalarCase("SklearnCalibrator.hyper", _sklearn, _OY, "hyper", {"n_bins": 5},
               ({"n_binz": 5}, {"key": 0}, {"weights": None}), None),
    # a size beyond int32 (JAX's counts) ended in an OverflowError or an endless program before
    # 2026-12-06; every size and step count is now checked by the same rule
    ScalarCase("ece.n_bins", lambda a, b: M.ece(a["probs"], a["labels"], n_bins=b), _PY, "n_bins", 15,
               (0, -1, 2**31, 2**40, 2.5, True), False),
)


#: public calls of the modules the table covers (tests/test_public_lists.py) that are not in
#: the table, each with the reason; a new public call must be added to :data:`CASES` or here
NOT_IN_TABLE: dict[str, str] = {
    "gap_norm": "takes a GroupStats (already checked when it was built), not arrays of rows",
}

