r"""Top-N focused calibration (TNF; Sato, "Calibrating the Predictions for Top-N
Recommendations" (RecSys 2024), §4.2).

Only the top-N items of each user's ranked list are used to fit.  They are split by rank
into ``n_g`` contiguous rank groups (default ``n_g = N / 5``, five ranks per group), and one
*base* calibrator is fitted per group with the rank-discount weights

.. math:: v_i \leftarrow v_i\,(1 / r_i)^{\alpha}\qquad(\alpha = 1 \text{ by default}),

so that calibration at the head of the list counts most.  Any registered calibrator whose
``fit`` accepts ``weights`` can be the base (``"platt"``, ``"isotonic"``, ``"beta"``,
``"histogram_binning"``, ...).

Choices the paper leaves open:

* Ranks come from ``context["ranks"]`` (n,) integers, 1 = top of the list.
* Group boundaries: ranks ``1..N`` are cut at ``round(linspace(0, N, n_g + 1))``, so the
  groups are equal when ``n_g`` divides ``N`` (the paper's case) and differ by at most one
  rank otherwise.
* Rows ranked below ``N`` (and every row of a rank group with no fitting rows) are served
  by a *fallback* base calibrator fitted on all rows without rank weights (the paper's
  "Original" method); TNF itself only promises calibration inside the top N.

``fit`` is eager (it selects rows with NumPy); ``predict`` is a pure JAX function of the
fitted parameters and is jit-able.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax._src import validation as V
from calib_jax.calibrators._base import REGISTRY, Calibrator, public_entry, register
from calib_jax.calibrators._common import ArrayLike, Context, KeyArg

__all__ = ["TopNParams", "rank_groups", "rank_weights", "fit", "predict", "CALIBRATOR"]


@dataclasses.dataclass(frozen=True)
class TopNParams:
    """Fitted TNF calibrator (pytree).

    Attributes:
      groups: tuple of fitted base params, one per rank group (``None`` if a group was empty).
      fallback: base params fitted on all rows (ranks beyond ``top_n``, empty groups).
      edges: (n_g + 1,) rank boundaries; group g holds ranks ``edges[g] < r <= edges[g+1]``.
      base: registry name of the base calibrator (static).
    """

    groups: tuple[Any, ...]
    fallback: Any
    edges: tuple[int, ...] = dataclasses.field(metadata={"static": True})
    base: str = dataclasses.field(default="platt", metadata={"static": True})


jax.tree_util.register_dataclass(
    TopNParams, data_fields=["groups", "fallback"], meta_fields=["edges", "base"]
)


def _ranks(context: Mapping[str, Any] | None, n: int) -> jax.Array:
    if context is None or context.get("ranks") is None:
        raise ValueError("`context['ranks']` (n,) int ranks (1 = top) is required for top_n")
    return V.check_integer_ids(context["ranks"], n, "context['ranks']", minimum=1)


def rank_groups(ranks: Any, *, top_n: int = 20, n_rank_groups: int | None = None) -> jax.Array:
    """Rank-group id per row: 0..n_g-1 for ranks 1..N, and -1 below the top N (Sato,
    "Calibrating the Predictions for Top-N Recommendations" (RecSys 2024), §4.2).

    Ranks 1..N are cut into ``n_g`` contiguous groups at ``round(linspace(0, N, n_g + 1))``:
    group g holds the ranks ``edges[g] < r <= edges[g + 1]``.

    Args:
      ranks: (n,) integer ranks >= 1, 1 = top of the list.
      top_n: N, the list length calibrated for, an int >= 1 (static under ``jit``).
      n_rank_groups: n_g, an int in [1, N] (static); default ``max(1, N // 5)``, five ranks
        per group.

    Returns:
      (n,) int32 group ids in ``0..n_g - 1``, and -1 for ranks above N. Called eagerly, a
      rank that is not an integer >= 1 raises ``ValueError``; under ``jit`` / ``vmap`` a rank
      below 1 gets -1 (in no group), as the ids are integers and cannot be NaN. ``top_n`` and
      ``n_rank_groups`` are static; a bad one raises ``ValueError``.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.calibrators.top_n import rank_groups
      >>> rank_groups(jnp.array([1, 2, 3, 4, 5, 6, 7]), top_n=6, n_rank_groups=3).tolist()  # 2 ranks a group
      [0, 0, 1, 1, 2, 2, -1]
    """
    top_n = V.check_positive_int(top_n, "top_n")
    n_g = max(1, top_n // 5) if n_rank_groups is None else V.check_positive_int(
        n_rank_groups, "n_rank_groups", maximum=top_n)
    edges = _edges(top_n, n_g)
    r = jnp.asarray(V.host_ids(ranks, "ranks"))  # an int64 rank beyond int32 would wrap into the top N
    if V.is_concrete(r):
        V.check_integer_ids(r, r.shape[0], "ranks", minimum=1)
    g = jnp.searchsorted(jnp.asarray(edges[1:]), r, side="left").astype(jnp.int32)
    return jnp.where((r >= 1) & (r <= top_n), g, -1)


def _edges(top_n: int, n_g: int) -> tuple[int, ...]:
    return tuple(int(e) for e in np.round(np.linspace(0, top_n, n_g + 1)))


def rank_weights(ranks: Any, *, alpha: float = 1.0) -> jax.Array:
    r"""Rank-discount weights :math:`(1/r)^\alpha` (Sato, "Calibrating the Predictions for
    Top-N Recommendations" (RecSys 2024), §4.2): the head of the list counts most.

    Args:
      ranks: (n,) ranks >= 1 (1 = top of the list); ints or floats.
      alpha: discount exponent, >= 0 (0 gives equal weights).

    Returns:
      (n,) float weights in (0, 1] (JAX's default float dtype). Called eagerly, a rank below 1
      (or NaN) or a negative ``alpha`` raises ``ValueError``; under ``jit`` / ``vmap`` such a
      rank's weight is NaN.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.calibrators.top_n import rank_weights
      >>> rank_weights(jnp.array([1, 2, 4])).tolist()             # 1/r
      [1.0, 0.5, 0.25]
      >>> rank_weights(jnp.array([1, 2, 4]), alpha=2.0).tolist()  # 1/r^2
      [1.0, 0.25, 0.0625]
    """
    r = jnp.asarray(ranks, jnp.result_type(float))
    if V.is_concrete(alpha) and not float(alpha) >= 0:
        raise ValueError(f"`alpha` must be >= 0, got {alpha}")
    if V.is_concrete(r) and not bool(jnp.all(r >= 1)):
        raise ValueError("`ranks` must be >= 1 (1 = top of the list)")
    return jnp.where(r >= 1, jnp.power(1.0 / jnp.where(r >= 1, r, 1.0), alpha), jnp.nan)


# Calibrator records passed directly (not by registry name), keyed by their name so that
# the fitted params can carry a hashable static reference without touching the REGISTRY.
_UNREGISTERED: dict[str, Calibrator] = {}


def _lookup(name: str) -> Calibrator:
    return _UNREGISTERED[name] if name in _UNREGISTERED else REGISTRY[name]


def _base(base: str | Calibrator) -> Calibrator:
    if isinstance(base, Calibrator):
        if REGISTRY.get(base.name) is not base:
            _UNREGISTERED[base.name] = base
        return base
    if base not in REGISTRY:
        raise ValueError(f"`base` calibrator {base!r} is not registered; known: {sorted(REGISTRY)}")
    return REGISTRY[base]


@public_entry
def fit(logits: ArrayLike, labels: ArrayLike, *, weights: ArrayLike | None = None, key: KeyArg = None,
        context: Context = None, base: str | Calibrator = "platt", top_n: int = 20, n_rank_groups: int | None = None,
        alpha: float = 1.0, base_kwargs: Mapping[str, Any] | None = None) -> TopNParams:
    r"""Fit TNF: one weighted base calibrator per rank group of the top-N lists.

    .. math::

        \theta_g = \arg\min_\theta \sum_{i:\,r_i\in G_g} v_i\,(1/r_i)^\alpha\,
                   \ell\big(c_\theta(o_i), y_i\big),\qquad g = 1..n_g

    Args:
      logits: (n,) uncalibrated logits of the calibration split, real.
      labels: (n,) labels in {0, 1}.
      weights: optional (n,) non-negative row weights (they multiply the rank weights).
      key: passed (folded per group) to base calibrators that use one (default
        ``jax.random.key(0)``).
      context: must hold ``"ranks"`` (n,) ints >= 1 (1 = top); the whole context is
        forwarded, row-subset per group, to the base calibrator.
      base: registry name (e.g. ``"platt"``, ``"temperature"``, ``"isotonic"``) or
        :class:`~calib_jax.calibrators.Calibrator` record whose ``fit`` accepts ``weights``.
      top_n: N, the list length calibrated for, an int >= 1.
      n_rank_groups: n_g, an int in [1, N] (default ``max(1, N // 5)``).
      alpha: discount exponent, >= 0.
      base_kwargs: extra hyper-parameters for the base ``fit``.

    Returns:
      :class:`TopNParams`: ``groups`` (one base params per rank group, ``None`` for a group
      without rows), ``fallback`` (the base fitted on all rows, unweighted by rank), ``edges``
      (n_g + 1,) and the ``base`` name. Not jit-able: rows are selected on the host (NumPy)
      and each base fit runs eagerly. Invalid input (NaN or inf logits, labels other than
      0/1, negative weights, missing ranks or ranks < 1, an unknown base, a bad option) raises
      ``ValueError``; the base calibrators' fail-safe warnings pass through.

    Example:
      >>> import numpy as np
      >>> from calib_jax.calibrators import top_n
      >>> rng = np.random.default_rng(0)
      >>> r = rng.integers(1, 13, 2000)                          # ranks 1..12
      >>> z = rng.normal(0.0, 2.0, 2000).astype(np.float32)
      >>> T = np.where(r <= 5, 2.0, 1.0)                         # logits 2x too confident in ranks 1-5
      >>> y = (rng.random(2000) < 1 / (1 + np.exp(-z / T))).astype(np.float32)
      >>> params = top_n.fit(z, y, context={"ranks": r}, base="temperature", top_n=10, n_rank_groups=2)
      >>> params.edges, params.base                              # groups: ranks 1-5 and 6-10
      ((0, 5, 10), 'temperature')
      >>> [round(float(g.temperature)) for g in params.groups]   # the true temperatures
      [2, 1]
    """
    o, y, w = V.check_sample(logits, labels, weights)
    n = o.shape[0]
    r = _ranks(context, n)
    top_n = V.check_positive_int(top_n, "top_n")
    n_g = max(1, top_n // 5) if n_rank_groups is None else V.check_positive_int(
        n_rank_groups, "n_rank_groups", maximum=top_n)
    if not float(alpha) >= 0:
        raise ValueError(f"`alpha` must be non-negative, got {alpha}")
    cal = _base(base)
    kw = dict(base_kwargs or {})
    key = jax.random.key(0) if key is None else key
    edges = _edges(top_n, n_g)
    g = np.asarray(rank_groups(r, top_n=top_n, n_rank_groups=n_g))
    v = np.ones(n, np.float64) if w is None else np.asarray(w, np.float64)
    rw = v * np.asarray(rank_weights(r, alpha=alpha), np.float64)
    o_np, y_np = np.asarray(o), np.asarray(y)

    def sub_context(rows):
        if context is None:
            return None
        out = {}
        for k_, val in context.items():
            a = np.asarray(val) if val is not None else None
            out[k_] = a[rows] if a is not None and a.ndim >= 1 and a.shape[0] == n else val
        return out

    groups: list[Any] = []
    for j in range(n_g):
        rows = np.flatnonzero(g == j)
        if not rows.size or rw[rows].sum() <= 0:
            groups.append(None)
            continue
        # the fit is invariant to a per-group scale of the weights; scaling the rank weights
        # to the group's row-weight total keeps the fail-safe event counts in row units
        gw = rw[rows] * (v[rows].sum() / rw[rows].sum())
        rows, gw = _bucketed(rows, gw, n, cal.name)
        groups.append(cal.fit(o_np[rows], y_np[rows], weights=gw.astype(o_np.dtype),
                              key=jax.random.fold_in(key, j), context=sub_context(rows), **kw))
    fallback = cal.fit(o_np, y_np, weights=None if w is None else np.asarray(w),
                       key=jax.random.fold_in(key, n_g), context=context, **kw)
    return TopNParams(groups=tuple(groups), fallback=fallback, edges=edges, base=cal.name)


@public_entry
def predict(params: TopNParams, logits: Any, *, context: Mapping[str, Any] | None = None
            ) -> jax.Array:
    """Calibrated probabilities: each row through its rank group's calibrator (fallback outside).

    Args:
      params: a fitted :class:`TopNParams`.
      logits: (n,) uncalibrated logits, real.
      context: must hold ``"ranks"`` (n,) ints >= 1; forwarded to the base ``predict``.

    Returns:
      (n,) probabilities in [0, 1]: a row ranked in group g takes ``params.groups[g]``'s
      prediction, a row ranked below N (or in a group without a fit) ``params.fallback``'s.
      jit-able when the base calibrator's ``predict`` is (every registered base but
      ``mcgrad``); eager calls raise ``ValueError`` for NaN or inf logits or invalid ranks.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.calibrators.temperature import TemperatureParams
      >>> from calib_jax.calibrators.top_n import TopNParams, predict
      >>> ts = lambda beta: TemperatureParams(beta=jnp.float32(beta), fallback=jnp.int32(0))
      >>> params = TopNParams(groups=(ts(2.0), ts(0.5)), fallback=ts(1.0), edges=(0, 5, 10),
      ...                     base="temperature")                # ranks 1-5, 6-10, then the fallback
      >>> p = predict(params, jnp.ones(3), context={"ranks": jnp.array([1, 7, 30])})
      >>> [round(float(v), 4) for v in p]                        # sigma(2), sigma(1/2), sigma(1)
      [0.8808, 0.6225, 0.7311]
    """
    o = V.check_logits(logits)
    r = _ranks(context, o.shape[0])
    cal = _lookup(params.base)
    top_n = params.edges[-1]
    g = rank_groups(r, top_n=top_n, n_rank_groups=len(params.groups))
    out = cal.predict(params.fallback, o, context=context)
    for j, prm in enumerate(params.groups):
        if prm is None:
            continue
        out = jnp.where(g == j, cal.predict(prm, o, context=context), out)
    return out


#: base calibrators whose fit gives a zero-weight row no influence at all (measured: the
#: fitted map moves by at most one float32 rounding), so a group's rows can be padded with
#: zero-weight copies; ``ilps`` is not among them (its fit moved by 1e-2: the knots and the
#: penalty depend on the row count), nor are the context-dependent heads
_ZERO_WEIGHT_EXACT = frozenset({"temperature", "platt", "beta", "histogram_binning", "isotonic"})


def _bucketed(rows: np.ndarray, weights: np.ndarray, n: int, base: str) -> tuple[np.ndarray, np.ndarray]:
    """A rank group's rows padded to the next power of two (at most ``n``) with zero-weight
    copies of its first row, for the bases of :data:`_ZERO_WEIGHT_EXACT`: each group's row
    count changes from fit to fit, and every new count compiled the base's fit again (five
    compilations per eager ``fit`` at n = 10^4, 5.9 s a call); with the padding the counts
    take a handful of values and a repeated fit compiles nothing."""
    k = rows.size
    if base not in _ZERO_WEIGHT_EXACT or k >= n:
        return rows, weights
    pad = min(1 << (k - 1).bit_length(), n) - k
    if pad <= 0:
        return rows, weights
    return (np.concatenate([rows, np.repeat(rows[:1], pad)]),
            np.concatenate([weights, np.zeros(pad, weights.dtype)]))


def _fit_registered(logits, labels, *, weights=None, key=None, context=None, **hyper):
    return fit(logits, labels, weights=weights, key=key, context=context, **hyper)


CALIBRATOR = register(Calibrator(name="top_n", fit=_fit_registered, predict=predict,
                                 monotone=False, needs=("ranks",),
                                 defaults=dict(base="platt", top_n=20, alpha=1.0)))
