"""Eager input validation shared by the public API.

Public functions call these helpers on their inputs.  When an input is a concrete array
(NumPy, Python, or a committed ``jax.Array``) the value checks run and raise a
``ValueError`` that names the argument.  When it is a tracer (inside ``jit``/``vmap``/
``grad``) only static checks (shape, ndim) raise: value checks cannot raise under tracing,
so they are recorded (:func:`calib_jax._src.eager.flag`) and a failed one makes the public
call's output NaN, while the numerical code on valid input is written with ``jnp.where``
guards that never produce NaN from 0/0.  Inside an eager call's compiled computation
(:mod:`calib_jax._src.eager`) the value checks become predicate reductions,
``any(not valid(x))``, where ``valid`` is a conjunction of ordered comparisons and
``isfinite``: IEEE 754 makes every ordered comparison with NaN
false, so NaN fails every check without relying on how a backend's ``min``/``max`` treat
NaN. (An earlier version used ``max |x| < inf``; XLA:CPU's vectorised float ``max`` drops
NaN from 4096 elements on, so NaN passed. Measured on the 2-core CPU at 10^6 float32 rows,
``all(isfinite(x))`` costs 0.39 ms against 0.33 ms for the float max.) XLA:CPU reads
subnormal inputs as zero, so there a value such as -1e-45 passes as the 0 the computation
itself then uses; the NumPy checks of the plain path reject it.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax._src.eager import flag, ids_beyond_32_bits

__all__ = [
    "is_concrete",
    "as_float_array",
    "check_probs",
    "check_labels",
    "check_logits",
    "check_oracle",
    "check_weights",
    "weight_range",
    "check_hard_groups",
    "host_ids",
    "inferred_levels",
    "check_soft_groups",
    "check_integer_ids",
    "check_same_length",
    "check_sample",
    "check_positive_int",
    "check_choice",
    "on_host",
    "block_values",
    "block_ids",
    "check_key",
    "order_in_float32",
    "scaled_in_float64",
    "config_range",
    "config_number",
]


def is_concrete(x: Any) -> bool:
    """True when ``x`` holds values we can inspect (not a JAX tracer)."""
    return not isinstance(x, jax.core.Tracer)


#: host copies of the arrays validated last (id -> (weak reference, values)), so that the
#: several checks of one argument read it from the device once, and a NumPy argument is
#: checked on the NumPy array it came from (no round trip); bounded, so memory stays flat
_HOST: dict[int, tuple[Any, np.ndarray]] = {}
_HOST_SLOTS = 8


def _remember(arr: jax.Array, values: np.ndarray) -> np.ndarray:
    try:
        ref = weakref.ref(arr)
    except TypeError:
        return values
    if len(_HOST) >= _HOST_SLOTS:
        _HOST.pop(next(iter(_HOST)))
    _HOST[id(arr)] = (ref, values)
    return values


def _values(x: Any) -> np.ndarray:
    hit = _HOST.get(id(x))
    if hit is not None and hit[0]() is x:
        return hit[1]
    return _remember(x, np.asarray(jax.device_get(x))) if isinstance(x, jax.Array) else np.asarray(x)


def _not_finite(arr: jax.Array) -> jax.Array:
    """Traced "some value is NaN or infinite": a predicate reduction of ``isfinite``."""
    return ~jnp.all(jnp.isfinite(arr))


def _outside_unit_interval(arr: jax.Array) -> jax.Array:
    """Traced "some value is outside [0, 1], NaN or infinite": ``0 <= x <= 1`` is false for
    NaN (an ordered comparison with NaN is false in IEEE 754)."""
    return ~jnp.all((arr >= 0.0) & (arr <= 1.0))


def _not_binary(arr: jax.Array) -> jax.Array:
    """Traced "some value is not 0 or 1" (NaN compares unequal to both)."""
    return ~jnp.all((arr == 0.0) | (arr == 1.0))


def as_float_array(x: Any, name: str, *, ndim: int | None = 1) -> jax.Array:
    """Convert to a floating JAX array (float32 unless x64 is enabled), check its rank and that
    every value is finite."""
    arr = _as_float(x, name, ndim=ndim)
    if is_concrete(arr):
        _raise_not_finite(arr, name)
    else:
        flag(_not_finite(arr))
    return arr


def _on_cpu(arr: jax.Array) -> bool:
    """True when ``arr`` lives on one CPU device, where ``np.asarray(arr)`` is a read-only view
    of its buffer (no copy)."""
    devices = arr.devices()
    return len(devices) == 1 and next(iter(devices)).platform == "cpu"


def _raise_not_finite(arr: jax.Array, name: str) -> None:
    v = _values(arr)
    if not np.all(np.isfinite(v)):
        bad = int(np.sum(~np.isfinite(v)))
        raise ValueError(f"`{name}` contains {bad} NaN/inf value(s)")


def _as_float(x: Any, name: str, *, ndim: int | None = 1) -> jax.Array:
    """:func:`as_float_array` without the finiteness check (callers whose traced check
    already fails on non-finite values)."""
    if x is None:
        raise ValueError(f"`{name}` is required, got None")
    host = None if isinstance(x, jax.Array | jax.core.Tracer) else np.asarray(x)
    dtype = host.dtype if host is not None else x.dtype
    real = (host.dtype.kind in "biuf" if host is not None else
            any(jnp.issubdtype(dtype, t) for t in (jnp.floating, jnp.integer, jnp.bool_)))
    if not real:  # text failed inside JAX naming nothing; a complex value lost its imaginary part
        what = "text" if host is not None and host.dtype.kind in "US" else f"dtype {dtype}"
        raise ValueError(f"`{name}` must hold real numbers, got {what}")
    arr = x if host is None else jnp.asarray(host)
    if host is not None and arr.dtype == host.dtype:
        # the checks read the values ``arr`` holds (``jnp.asarray`` copied the caller's array, so
        # later edits of it cannot leak in): on the CPU a read-only view of ``arr``'s buffer, not
        # a second copy (a SAG prediction at 2.75M rows spent 0.6 s copying its embedding
        # again); elsewhere (or while tracing) a host copy, cheaper than reading the device back
        _remember(arr, np.asarray(arr) if is_concrete(arr) and _on_cpu(arr) else host.copy())
    if not jnp.issubdtype(arr.dtype, jnp.floating):
        arr = arr.astype(jnp.result_type(float))
    elif jnp.finfo(arr.dtype).bits < 32:
        # float16 / bfloat16 (a model's half-precision output): computed in float32, since their
        # sums overflow at 65,504 rows (float16) and their 8 or 11 bits of mantissa stop counting
        # rows one by one at 256 or 2,048 (ECE, AUC and normalized entropy came out 0 or NaN on
        # 10^5 rows)
        arr = arr.astype(jnp.float32)
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"`{name}` must be {ndim}-D, got shape {tuple(arr.shape)}")
    if ndim == 1 and arr.shape[0] == 0:
        raise ValueError(f"`{name}` is empty")
    return arr


def check_probs(x: Any, name: str = "probs") -> jax.Array:
    """Probabilities: 1-D, finite, in [0, 1]."""
    arr = _as_float(x, name)
    if is_concrete(arr):
        _raise_not_finite(arr, name)
        v = _values(arr)
        if v.min() < 0.0 or v.max() > 1.0:
            raise ValueError(
                f"`{name}` must lie in [0, 1], got values in [{v.min():.6g}, {v.max():.6g}]"
            )
    else:
        flag(_outside_unit_interval(arr))
    return arr


def check_oracle(x: Any, name: str = "oracle") -> jax.Array:
    """True probabilities: same contract as :func:`check_probs`."""
    return check_probs(x, name)


def check_logits(x: Any, name: str = "logits") -> jax.Array:
    """Logits: 1-D and finite."""
    return as_float_array(x, name)


def check_labels(x: Any, name: str = "labels") -> jax.Array:
    """Binary labels in {0, 1}; returned as a float array (0.0 / 1.0)."""
    arr = _as_float(x, name)
    if is_concrete(arr):
        _raise_not_finite(arr, name)
        v = _values(arr)
        if not np.all((v == 0.0) | (v == 1.0)):
            bad = np.unique(v[(v != 0.0) & (v != 1.0)])[:5]
            raise ValueError(f"`{name}` must be 0 or 1, found values such as {bad.tolist()}")
    else:
        flag(_not_binary(arr))
    return arr


def weight_range(dtype: Any) -> tuple[float, float]:
    r"""The weights a computation in ``dtype`` keeps exact: ``(smallest positive weight, largest
    total)``.

    The metrics form products of two weights or of two weight totals (AUC's
    :math:`\sum v_i v_j` over pairs and its :math:`V^+ V^-`, the effective sample size
    :math:`(\sum v)^2 / \sum v^2`). With :math:`t` the dtype's smallest normal number and
    :math:`m` its largest, every such product stays a normal, finite number when each positive
    weight is at least :math:`2\sqrt{t}` and the total at most :math:`\sqrt{m}/2` (a product
    then lies in :math:`[4t, m/4]`). Below or above, a product underflows to 0 (XLA:CPU flushes
    subnormal numbers to zero) or overflows, and AUC came out 0, 0.5 or NaN, ECE and Brier NaN.
    float32 (and narrower types, which the metrics do not compute in): about
    :math:`[2.2 \times 10^{-19}, 9.2 \times 10^{18}]`; float64: about
    :math:`[3 \times 10^{-154}, 6.7 \times 10^{153}]`. Weights outside are refused, not
    rescaled: a rescaling is exact only for the functions that depend on the weights through
    their ratios, and not every user of the weights (a calibrator's regularised fit, group
    totals) is one of them.

    Args:
      dtype: the floating dtype of the weights as the computation holds them.

    Returns:
      ``(lo, hi)`` as Python floats.

    Example:
      >>> lo, hi = weight_range("float32")
      >>> f"{lo:.2e} {hi:.2e}"
      '2.17e-19 9.22e+18'
    """
    info = np.finfo(np.promote_types(np.dtype(dtype), np.float32))
    return 2.0 * math.sqrt(float(info.tiny)), math.sqrt(float(info.max)) / 2.0


def check_weights(x: Any, n: int, name: str = "weights") -> jax.Array | None:
    """Optional non-negative sample weights of length n with a positive total, every positive
    weight and the total inside :func:`weight_range` of their dtype (concrete: ``ValueError``
    naming the argument; traced: the checked call's output is NaN)."""
    return _nonnegative_vector(x, n, name, positive_total=True)


def check_nonnegative(x: Any, n: int, name: str = "weights") -> jax.Array | None:
    """Optional finite non-negative values of length n (weights whose total may be 0: bin and
    cluster building blocks, where an all-zero weight vector gives empty bins, not 0/0)."""
    return _nonnegative_vector(x, n, name, positive_total=False)


def _nonnegative_vector(x: Any, n: int, name: str, *, positive_total: bool) -> jax.Array | None:
    if x is None:
        return None
    arr = _as_float(x, name)
    if arr.shape[0] != n:
        raise ValueError(f"`{name}` has length {arr.shape[0]}, expected {n}")
    if is_concrete(arr):
        _raise_not_finite(arr, name)
        v = _values(arr)
        if v.size and v.min() < 0.0:
            raise ValueError(f"`{name}` must be non-negative, got minimum {v.min():.6g}")
        if positive_total:
            _raise_outside_weight_range(v, arr.dtype, name)
    else:
        # NaN fails both comparisons; a sum that overflows to inf fails the last one
        bad = ~jnp.all((arr >= 0.0) & (arr < jnp.inf))
        if positive_total:
            lo, hi = weight_range(arr.dtype)
            total = jnp.sum(arr)
            # a weight flushed to zero (subnormal) is 0 here: the total then catches it
            bad = bad | ~jnp.all((arr == 0.0) | (arr >= lo)) | ~((total > 0.0) & (total <= hi))
        flag(bad)
    return arr


def _raise_outside_weight_range(v: np.ndarray, dtype: Any, name: str) -> None:
    """``ValueError`` naming ``name`` when the weights ``v`` sum to 0, or a positive weight or
    the total lies outside :func:`weight_range`. ``v`` holds the values the computation holds
    (a float64 weight below float32's range that became 0 in the conversion is a weight of 0,
    as on the compiled path, which checks the converted values)."""
    lo, hi = weight_range(dtype)
    positive = v[v > 0]
    if positive.size == 0:
        raise ValueError(f"`{name}` must have a positive sum")
    low = float(positive.min())
    total = float(np.sum(v, dtype=np.float64))
    kind = np.dtype(np.promote_types(np.dtype(dtype), np.float32)).name
    rescale = ("rescale the weights (a weighted mean or ratio, such as every metric, is unchanged when all weights "
               "are multiplied by one number)")
    if low < lo:
        raise ValueError(f"`{name}` holds a positive weight {low:.3g}, below {lo:.3g}: {kind} products of two such "
                         f"weights underflow to 0; {rescale}")
    if total > hi:
        raise ValueError(f"`{name}` sum to {total:.3g}, above {hi:.3g}: {kind} products of two such totals overflow; "
                         f"{rescale}")


#: an inferred number of levels above both the rows and this is taken as sparse ids (a hash, a
#: user id) and the ids are made dense (:func:`inferred_levels`)
SPARSE_LEVELS = 2**16


def _dense_codes(v: np.ndarray) -> np.ndarray:
    """Each id's rank among the distinct ids (the same grouping, in the ids' order), int32."""
    return np.unique(v, return_inverse=True)[1].reshape(v.shape).astype(np.int32)


def host_ids(x: Any, name: str, *, dense: bool = False) -> Any:
    """Integer ids given on the host (NumPy, a list, pandas), made safe to hand to JAX.

    JAX's default 32-bit mode converts an int64 array by wrapping every value modulo 2**32 (a
    warning, then the wrong ids: ``2**32 + 1`` becomes ``1`` and joins that group), and float64
    ids become float32, which merges integers above 2**24 (``16777217.0`` becomes ``16777216``).
    Integer-valued float64 ids above 2**24 are therefore taken as integers here, and ids outside
    the int32 range are made dense (``dense``: the caller needs only which rows share an id, as
    GAUC's users) or refused with a ``ValueError`` naming ``name``. JAX arrays and tracers, whose
    values are already 32-bit (or 64-bit by the user's choice), and everything else are returned
    as they are, for the caller's own checks."""
    if x is None or isinstance(x, jax.Array | jax.core.Tracer):
        return x
    try:
        v = np.asarray(x)
    except (TypeError, ValueError):
        return x
    if not ids_beyond_32_bits(v):
        return x
    if v.dtype.kind == "f":  # float64 above 2**24: taken as integers when they are
        with np.errstate(invalid="ignore"):
            if not (np.all(np.isfinite(v)) and np.all(v == np.round(v))):
                return x  # the caller's checks name what is wrong
        if np.abs(v).max() >= 2.0**63:
            raise ValueError(f"`{name}` holds ids up to {np.abs(v).max():g}, beyond any 64-bit integer")
        v = v.astype(np.int64)
    lo, hi = int(v.min()), int(v.max())
    if lo >= -(2**31) and hi <= INT32_MAX:
        return v
    if dense:
        return _dense_codes(v)
    raise ValueError(f"`{name}` holds values in [{lo}, {hi}], beyond the int32 range that JAX keeps (it would wrap "
                     "them onto other values); pass values below 2**31 (ids can be made dense with "
                     "np.unique(ids, return_inverse=True)[1])")


def inferred_levels(x: Any, name: str, n: int) -> tuple[Any, int]:
    """The ids of ``x`` and their number of levels when the caller gives none: the largest id + 1,
    or, when that exceeds both the rows ``n`` and :data:`SPARSE_LEVELS` or the int32 range, the
    ids made dense (each id's rank among the distinct ids, in order), so that sparse ids (hashes,
    user ids) cost their distinct values, not their largest value, in memory. Dense ids give the
    same grouping: a metric where a level without rows contributes nothing is unchanged. Concrete
    ``x`` only; an id that is not a non-negative integer raises ``ValueError`` naming ``name``."""
    x = host_ids(x, name, dense=True)
    v = _values(x) if isinstance(x, jax.Array) else np.asarray(x)
    if not v.size:
        return x, 1
    if v.dtype.kind not in "iu":
        with np.errstate(invalid="ignore"):
            if not (np.all(np.isfinite(v)) and np.all(v == np.round(v))):
                raise ValueError(f"`{name}` must hold integer group ids")
    if v.min() < 0:
        raise ValueError(f"`{name}` ids must be non-negative, got minimum {v.min():g}")
    top = int(v.max())
    if top + 1 > max(n, SPARSE_LEVELS) or top > INT32_MAX:
        codes = _dense_codes(v)
        return codes, int(codes.max()) + 1
    return x, top + 1


def check_hard_groups(x: Any, n: int, n_groups: int, name: str = "groups", count_name: str = "n_groups") -> jax.Array:
    """Hard group ids: 1-D integers in [0, n_groups), ``n_groups`` not a sparse count
    (:func:`check_group_count`, whose message calls it ``count_name``)."""
    if x is None:
        raise ValueError(f"`{name}` is required, got None")
    check_group_count(n_groups, n, count_name)
    x = host_ids(x, name)
    arr = x if isinstance(x, jax.Array) else jnp.asarray(x)
    if arr.ndim != 1:
        raise ValueError(f"`{name}` must be 1-D ids or 2-D memberships, got shape {arr.shape}")
    if arr.shape[0] != n:
        raise ValueError(f"`{name}` has length {arr.shape[0]}, expected {n}")
    if not jnp.issubdtype(arr.dtype, jnp.integer):
        if is_concrete(arr):
            v = _values(arr)
            if not np.all(np.isfinite(v)) or not np.all(v == np.round(v)):
                raise ValueError(f"`{name}` must hold integer group ids")
            if v.min() < 0 or v.max() >= n_groups:
                raise ValueError(
                    f"`{name}` ids must lie in [0, {n_groups}), got range [{v.min():g}, {v.max():g}]")
        else:
            # checked before the cast, whose result for NaN, inf or 1e10 is backend-defined;
            # NaN fails every comparison
            flag(~jnp.all((arr == jnp.round(arr)) & (arr >= 0) & (arr < n_groups)))
        arr = arr.astype(jnp.int32)
    if is_concrete(arr):
        v = _values(arr)
        if v.min() < 0 or v.max() >= n_groups:
            raise ValueError(
                f"`{name}` ids must lie in [0, {n_groups}), got range [{v.min()}, {v.max()}]"
            )
    else:
        flag((jnp.min(arr) < 0) | (jnp.max(arr) >= n_groups))
    return arr


def check_integer_ids(x: Any, n: int, name: str, *, minimum: int | None = None, dense: bool = False) -> jax.Array:
    """Integer codes with no upper bound (user ids, 1-based ranks): 1-D of length ``n``,
    finite, integer-valued and, when ``minimum`` is given, ``>= minimum``; returned as int32.
    Float input is checked before the cast (whose result for NaN or inf is backend-defined).
    Host ids beyond int32 are refused, or with ``dense`` (ids whose only meaning is which rows
    share one) replaced by their ranks (:func:`host_ids`)."""
    if x is None:
        raise ValueError(f"`{name}` is required, got None")
    x = host_ids(x, name, dense=dense)
    arr = x if isinstance(x, jax.Array | jax.core.Tracer) else jnp.asarray(x)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"`{name}` must have shape ({n},), got {tuple(arr.shape)}")
    low = "" if minimum is None else f" >= {minimum}"
    if is_concrete(arr):
        v = _values(arr)
        if not np.all(np.isfinite(v)) or not np.all(v == np.round(v)) or (
                minimum is not None and v.min() < minimum):
            raise ValueError(f"`{name}` must hold finite integers{low}")
    elif jnp.issubdtype(arr.dtype, jnp.floating):
        ok = jnp.isfinite(arr) & (arr == jnp.round(arr))
        flag(~jnp.all(ok if minimum is None else ok & (arr >= minimum)))
    elif minimum is not None:
        flag(~jnp.all(arr >= minimum))
    return arr.astype(jnp.int32)


def check_soft_groups(x: Any, n: int, name: str = "groups") -> jax.Array:
    """Soft memberships (n, K): finite, non-negative, rows summing to 1 (tolerance 1e-4)."""
    arr = _as_float(x, name, ndim=2)
    if arr.shape[0] != n:
        raise ValueError(f"`{name}` has {arr.shape[0]} rows, expected {n}")
    if is_concrete(arr):
        _raise_not_finite(arr, name)
        v = _values(arr)
        if v.min() < 0.0:
            raise ValueError(f"`{name}` memberships must be non-negative")
        rows = v.sum(axis=1)
        if not np.allclose(rows, 1.0, atol=1e-4):
            worst = float(np.max(np.abs(rows - 1.0)))
            raise ValueError(f"`{name}` rows must sum to 1 (worst deviation {worst:.3g})")
    else:
        # NaN fails both comparisons and an infinite membership makes its row sum infinite
        row_gap = jnp.abs(jnp.sum(arr, axis=1) - 1.0)
        flag(~(jnp.all(arr >= 0.0) & jnp.all(row_gap <= 1e-4 + 1e-5)))
    return arr


def check_same_length(n: int, **arrays: Any) -> None:
    """Every given array has leading dimension n."""
    for name, a in arrays.items():
        if a is None:
            continue
        if a.shape[0] != n:
            raise ValueError(f"`{name}` has length {a.shape[0]}, expected {n} (length of the first argument)")


_CHECKS = {"logits": check_logits, "probs": check_probs, "labels": check_labels,
           "oracle": check_oracle}


def check_sample(scores: Any, target: Any, weights: Any, *, scores_kind: str = "logits",
                 target_kind: str = "labels", prefix: str = ""
                 ) -> tuple[jax.Array, jax.Array, jax.Array | None]:
    """Check one sample ``(scores, target, weights)`` and return it as arrays.

    ``scores`` is checked as ``"logits"`` or ``"probs"`` and ``target`` as ``"labels"`` or
    ``"oracle"`` (the kind, after ``prefix``, is also the argument name in messages); then
    ``target`` must match the length of ``scores``, and the optional ``weights`` are checked
    by :func:`check_weights` (``None`` stays ``None``).
    """
    s = _CHECKS[scores_kind](scores, prefix + scores_kind)
    t = _CHECKS[target_kind](target, prefix + target_kind)
    check_same_length(s.shape[0], **{target_kind: t})
    return s, t, check_weights(weights, s.shape[0], prefix + "weights")


def check_condition(bad: Any, message: str) -> None:
    """Raise ``ValueError(message)`` when the condition ``bad`` holds on concrete values; under
    tracing, record it (:func:`calib_jax._src.eager.flag`) so the checked call returns NaN."""
    if is_concrete(bad):
        if bool(np.any(np.asarray(jax.device_get(bad)))):
            raise ValueError(message)
    else:
        flag(bad)


#: the largest size or count :func:`check_positive_int` accepts (int32's largest value)
INT32_MAX = 2**31 - 1


def check_positive_int(value: Any, name: str, *, maximum: int | None = None) -> int:
    """A static positive integer (sizes that shape arrays, and counts of steps), at most
    :data:`INT32_MAX`: JAX indexes and counts in int32, so a larger value would end in an
    ``OverflowError`` (or an endless program) instead of this message."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"`{name}` must be a Python int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"`{name}` must be >= 1, got {value}")
    if value > INT32_MAX:
        raise ValueError(f"`{name}` must be at most {INT32_MAX} (2**31 - 1), got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"`{name}`={value} is larger than the number of samples ({maximum})")
    return int(value)


def on_host(x: Any, name: str) -> Any:
    """A building block's array argument: JAX arrays, tracers and NumPy arrays as they are;
    lists, tuples and pandas objects (whose index JAX would refuse) as NumPy arrays; None, or
    what NumPy cannot make an array of, a ``ValueError`` naming ``name``."""
    if x is None:
        raise ValueError(f"`{name}` is required, got None")
    if isinstance(x, jax.Array | jax.core.Tracer | np.ndarray):
        return x
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as err:
        raise ValueError(f"`{name}` must be an array of numbers: {err}") from None
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"`{name}` must hold numbers, got dtype {arr.dtype}")
    return arr


def block_values(x: Any, name: str, *, ndims: tuple[int, ...] = (1, 2)) -> Any:
    """The values a building block sums (:func:`calib_jax.groupstats.segment_sums` and kin):
    numbers of rank in ``ndims`` (static checks: they hold under ``jit`` too); float16 and
    bfloat16 as float32 (summed in their own precision, 2,000 rows of 1.0 summed to 256 in
    bfloat16); host input as a JAX array."""
    x = on_host(x, name)
    if x.ndim not in ndims:
        raise ValueError(f"`{name}` must be {' or '.join(f'{d}-D' for d in ndims)}, got shape {tuple(x.shape)}")
    if not jnp.issubdtype(x.dtype, jnp.number) and x.dtype != bool:
        raise ValueError(f"`{name}` must hold numbers, got dtype {x.dtype}")
    if jnp.issubdtype(x.dtype, jnp.floating) and jnp.finfo(x.dtype).bits < 32:
        x = x.astype(np.float32) if isinstance(x, np.ndarray) else x.astype(jnp.float32)
    return jnp.asarray(x) if isinstance(x, np.ndarray) else x


def block_ids(x: Any, n: int, num_segments: int, name: str) -> Any:
    """Segment ids of a building block: 1-D of length ``n`` and of an integer (or bool) dtype,
    checked statically (under ``jit`` too). Ids given on the host (NumPy, a list, pandas) are
    also checked for their values: float ids must be finite integers (``ValueError`` naming
    ``name``), and ids outside ``[0, num_segments)`` become -1, the id every block drops, before
    JAX sees them: JAX's 32-bit conversion would otherwise wrap an int64 id of ``2**32 + 1``
    onto segment 1."""
    x = on_host(x, name)
    if x.ndim != 1 or x.shape[0] != n:
        raise ValueError(f"`{name}` must have shape ({n},), one id per row of the values, got {tuple(x.shape)}")
    if not isinstance(x, np.ndarray):
        if not (jnp.issubdtype(x.dtype, jnp.integer) or x.dtype == bool):
            raise ValueError(f"`{name}` must hold integer ids, got dtype {x.dtype}")
        return x
    if x.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            if not (np.all(np.isfinite(x)) and np.all(x == np.round(x))):
                raise ValueError(f"`{name}` must hold integer ids (finite whole numbers)")
    outside = (x < 0) | (x >= num_segments)
    return jnp.asarray(np.where(outside, -1, x).astype(np.int32))


def check_key(key: Any, name: str = "key") -> jax.Array:
    """A single JAX PRNG key: a typed key of shape () (``jax.random.key``) or a legacy raw
    ``uint32[2]`` key (``jax.random.PRNGKey``); anything else (a seed, a float array, a batch of
    keys) raises ``ValueError`` naming ``name``. Its type is static, so a wrong one raises also
    under ``jit``."""
    dtype = getattr(key, "dtype", None)
    shape = tuple(getattr(key, "shape", ()))
    typed = dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
    if typed and shape == ():
        return key
    if not typed and dtype is not None and dtype == np.uint32 and shape == (2,):
        return key if isinstance(key, jax.Array | jax.core.Tracer) else jnp.asarray(key)
    what = type(key).__name__ if dtype is None else f"an array of dtype {dtype} and shape {shape}"
    raise ValueError(f"`{name}` must be one JAX PRNG key (jax.random.key(seed), shape ()), got {what}")


def _merging_columns(v: np.ndarray) -> np.ndarray:
    """Per column of ``v`` (axis 0), whether it is finite and handing it to JAX's 32-bit mode
    would change which of its values are equal: integers beyond int32 (wrapped modulo 2**32), or
    a conversion to float32 that makes distinct values equal (float64 values closer than its
    spacing, integers above 2**24)."""
    cols = v.reshape(v.shape[0], -1)
    out = np.zeros(cols.shape[1], bool)
    for j in range(cols.shape[1]):
        c = cols[:, j]
        if c.dtype.kind in "iu":
            if int(c.min()) < -(2**31) or int(c.max()) > INT32_MAX:
                out[j] = True
                continue
        elif not np.all(np.isfinite(c)):
            continue  # the caller's meaning of NaN and infinity is kept
        with np.errstate(over="ignore", invalid="ignore"):
            out[j] = np.unique(c).size != np.unique(c.astype(np.float32)).size
    return out


def _host_numbers(x: Any) -> np.ndarray | None:
    """``x`` as a NumPy array of numbers when it was given on the host (not a JAX array or a
    tracer) and float32 is JAX's working precision; else None."""
    if isinstance(x, jax.Array | jax.core.Tracer) or jnp.result_type(float) == jnp.float64:
        return None
    try:
        v = np.asarray(x)
    except (TypeError, ValueError):
        return None
    return v if v.dtype.kind in "iuf" and v.ndim in (1, 2) and v.size else None


def _per_merging_column(x: Any, transform: Any, *, max_rows: int | None = None) -> Any:
    """``x`` with ``transform`` (a float64 column -> a column) applied to each column (axis 0) of
    host values that JAX's 32-bit types would merge (:func:`_merging_columns`), as a float64
    array; ``x`` itself when it is not such host data, has no such column or more than
    ``max_rows`` rows."""
    v = _host_numbers(x)
    if v is None or (max_rows is not None and v.shape[0] > max_rows):
        return x
    merging = _merging_columns(v)
    if not merging.any():
        return x
    raw = v.reshape(v.shape[0], -1)
    cols = raw.astype(np.float64)
    for j in np.flatnonzero(merging):
        cols[:, j] = transform(raw[:, j])
    return cols.reshape(v.shape)


def _dense_ranks(c: np.ndarray) -> np.ndarray:
    return np.unique(c, return_inverse=True)[1].reshape(-1)


def _centred_and_scaled(c: np.ndarray) -> np.ndarray:
    c = c.astype(np.float64) - c.astype(np.float64).mean()
    scale = np.max(np.abs(c))
    return c / scale if scale > 0 else np.zeros_like(c)


def order_in_float32(x: Any) -> Any:
    """For functions of the order of values alone (ranks, Spearman coefficients, equal-mass
    bins): the columns (axis 0) of host values whose conversion to JAX's 32-bit types would tie
    distinct values (float64 values closer than float32's spacing, integers above 2**24 or
    beyond int32) are replaced by their dense ranks (0, 1, 2, ... in their order, equal values
    sharing one), which keep every comparison within the column; anything else, and columns
    holding NaN or infinity (whose meaning the caller defines), as they are. Ranks above 2**24
    rows would round themselves, so longer columns are left too."""
    out = _per_merging_column(x, _dense_ranks, max_rows=2**24)
    return out if out is x else out.astype(np.float32)


def scaled_in_float64(x: Any) -> Any:
    """For functions invariant to shifting and scaling each column (Pearson correlations): the
    columns of host values whose conversion to float32 would tie distinct values (as
    :func:`order_in_float32`) are centred and scaled in float64 first, so that float32 keeps
    their differences; anything else, and columns holding NaN or infinity, as they are."""
    return _per_merging_column(x, _centred_and_scaled)


def config_range(value: Any, name: str, *, low: float = -np.inf, high: float = np.inf,
                 open_low: bool = False, open_high: bool = False) -> tuple[float, float]:
    """A configuration's (low, high) range: two finite numbers, low <= high, within the bounds
    (closed unless ``open_low`` / ``open_high``); returned as a tuple (a list made a frozen
    configuration unhashable, so unusable as a static argument); else ``ValueError`` naming
    ``name``."""
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be a (low, high) pair of numbers, got {value!r}") from None
    below = (lambda v: v <= low) if open_low else (lambda v: v < low)
    above = (lambda v: v >= high) if open_high else (lambda v: v > high)
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo > hi or below(lo) or above(hi):
        bounds = f"{'(' if open_low else '['}{low:g}, {high:g}{')' if open_high else ']'}"
        raise ValueError(f"`{name}` must be a range low <= high within {bounds}, got {value!r}")
    return (lo, hi)


def config_number(value: Any, name: str, *, low: float = -np.inf, high: float = np.inf) -> float:
    """A configuration's finite number in [low, high]; else ``ValueError`` naming ``name``."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be a number, got {value!r}") from None
    if not (np.isfinite(v) and low <= v <= high):
        raise ValueError(f"`{name}` must be a finite number in [{low:g}, {high:g}], got {value!r}")
    return v


def check_number_option(value: Any, name: str, what: str, ok: Callable[[float], bool], *,
                        traced_ok: bool = False) -> None:
    """``ValueError`` naming ``name`` unless ``value`` is a real number (not text, not a bool, one
    value) for which ``ok`` holds. A value traced by a caller's ``jax.jit`` cannot be read: it
    passes where ``traced_ok`` (options a fit may take as arrays), and is refused otherwise.

    Example:
      >>> check_number_option(0.5, "lam", "a finite number >= 0", lambda v: 0 <= v < float("inf"))
      >>> check_number_option(True, "lam", "a finite number >= 0", lambda v: v >= 0)
      Traceback (most recent call last):
      ...
      ValueError: `lam` must be a finite number >= 0, got True
    """
    if not is_concrete(value):
        if traced_ok:
            return
        raise ValueError(f"`{name}` must be a concrete number, not a traced value")
    arr = None if isinstance(value, str | bytes) else np.asarray(value)
    if arr is None or arr.ndim or arr.dtype.kind not in "iuf" or not ok(float(arr)):
        raise ValueError(f"`{name}` must be {what}, got {value!r}")


def check_flag_option(value: Any, name: str) -> bool:
    """``value`` as a bool, or ``ValueError`` naming ``name`` (``"no"`` and ``1`` are not booleans:
    ``bool("no")`` is true)."""
    if not isinstance(value, bool | np.bool_):
        raise ValueError(f"`{name}` must be True or False, got {value!r}")
    return bool(value)


def check_text_keys(value: Any, where: str) -> None:
    """``ValueError`` naming where a mapping key that is not a ``str`` sits, in ``value`` and every
    mapping, list or tuple nested in it. The configuration hashes serialise through JSON, which
    writes every key as text: ``{1: "a"}`` and ``{"1": "a"}`` hashed alike (two runs shared one
    checkpoint or cache name), and keys of both kinds could not be sorted."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"`{where}` has the key {k!r} ({type(k).__name__}): configuration keys must be "
                                 "strings")
            check_text_keys(v, f"{where}[{k!r}]")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            check_text_keys(v, f"{where}[{i}]")


def check_choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    """A static string option from a fixed set."""
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {choices}, got {value!r}")
    return str(value)


def check_groups(groups: jax.Array, n: int, n_groups: int | None) -> jax.Array:
    """Checked group memberships of ``n`` rows: soft ``(n, K)`` weights, or hard ids in
    ``[0, n_groups)`` (``n_groups`` required then and matching the soft width when given)."""
    groups = host_ids(groups, "groups")
    arr = groups if isinstance(groups, jax.Array) else jnp.asarray(groups)
    if arr.ndim == 2:
        g = check_soft_groups(arr, n)
        if n_groups is not None and n_groups != g.shape[1]:
            raise ValueError(f"`n_groups`={n_groups} does not match `groups` with {g.shape[1]} columns")
        return g
    if n_groups is None:
        raise ValueError("`n_groups` is required (static) when `groups` holds hard ids")
    check_positive_int(n_groups, "n_groups")
    return check_hard_groups(arr, n, n_groups)


#: above this many groups, and more than ``SPARSE_GROUPS_PER_ROW`` groups a row, hard ids are
#: refused as sparse (:func:`check_group_count`)
SPARSE_GROUPS_LIMIT = 1 << 26
SPARSE_GROUPS_PER_ROW = 16


def check_group_count(n_groups: int, n: int, name: str = "n_groups") -> None:
    """Refuse a count of hard groups that can only be sparse ids: more than 2^26 groups and more
    than 16 a row. Every per-group output has ``n_groups`` entries, so 10^9 + 1 groups over 200
    rows allocated arrays of gigabytes and ran for minutes without an answer; at most ``n`` of
    the groups can hold a row. The message says how to make the ids dense."""
    if n_groups > SPARSE_GROUPS_LIMIT and n_groups > SPARSE_GROUPS_PER_ROW * n:
        raise ValueError(
            f"`{name}`={n_groups:,} for {n:,} rows: every per-group output would have {n_groups:,} entries, at "
            f"most {n:,} of them non-empty. Pass dense ids instead (ids, inverse = np.unique(groups, "
            f"return_inverse=True); groups=inverse, n_groups=len(ids))")
