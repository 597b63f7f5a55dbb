"""Sorting that is fast on every backend.

XLA:CPU's sort is several times slower than NumPy's.  On the CPU backend we therefore sort
through a host call into NumPy (``calib_jax._src.host_call``, safe on several host devices); on
CUDA and ROCm a float32 array is sorted as one array of packed 64-bit words
(:func:`packed_argsort`, the words the NumPy path sorts), other dtypes and other accelerators
use ``lax.sort``.  The packed words are made with integer operations that take ``-0.0``, ``+0.0``
and the subnormal values as one value and every NaN as one value sorted last, on the host and on
the device alike, so the CPU and GPU orders are the same bits (until 2026-12-07 the host call
took subnormals as zero only when it ran inside a jitted program, where XLA's threads flush
them, and ``lax.sort`` on a GPU keeps them apart unless ``--xla_gpu_ftz`` flushes them).
``jax.lax.platform_dependent`` picks the branch when a program is lowered, so one traced
program serves every backend: a metric jitted on a CPU-only machine exports for CUDA or TPU
with no host call in it (``tests/test_accelerator_lowering.py``; until 2026-12-05 the branch
was chosen from ``jax.default_backend()`` while tracing, and such an export failed on the CPU's
host call).  All are jit- and vmap-able (the callback is batched along leading axes).  Every
path is stable: tied values keep their index order (the packed float32 keys carry the index,
other dtypes use NumPy's stable sort, ``jnp.argsort`` is stable by default).  Callers that
need tie-invariance still group ties explicitly.

For float32 the NumPy path sorts packed 64-bit keys (order-preserving bits of the value in
the high bits, the index in the low bits), as float64 below 2^21 rows (exact: the words are
integers below 2^53): at n = 10^5 the whole call (order and tie bounds) takes 3.4 ms on
the 2-core CPU, against 5.3 ms for ``np.argsort`` and 14 ms for its stable sort.

One host call returns the order *and* the tie bounds of the sorted values
(:func:`argsort_with_ties`); :func:`argsort` is the same call, so XLA's common-subexpression
pass merges every sort of one array in a program into one host call (the Monte Carlo panel
sorts p for AUC, ECE+ and Spearman once). On the host the tie bounds visit only the runs of
equal keys (0.17 ms at n = 10^5); XLA:CPU's cumulative max/min scans cost ~1.5 ms each.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax._src.host_call import host_call

__all__ = ["argsort", "argsort_small_ints", "argsort_with_ties", "run_bounds", "packed_argsort"]


#: below this many rows the packed keys fit the 53-bit significand of a float64 (32 bits of
#: value, at most 21 of index) and are sorted as float64 (NumPy's vectorised float64 sort:
#: 2.3 ms against 3.2 ms for uint64 at n = 10^5 on the 2-core CPU)
F64_PACK_ROWS = 1 << 21


def _canonical_bits(u: jax.Array) -> jax.Array:
    """The uint32 bits of float32 values, made one word per value as the sorts compare them:
    ``-0.0`` and every subnormal value are ``+0.0`` (XLA:CPU's comparator flushes subnormals to
    zero, and NumPy running inside a jitted program's host call does too, on XLA's threads:
    done with integers, the order is the same on every thread and backend), and every NaN is
    the one quiet NaN, sorted last (the host's words: :func:`_np_canonical_bits`, the same words)."""
    u = jnp.where((u & jnp.uint32(0x7F800000)) == jnp.uint32(0), jnp.uint32(0), u)
    return jnp.where((u & jnp.uint32(0x7FFFFFFF)) > jnp.uint32(0x7F800000), jnp.uint32(0x7FC00000), u)


def _np_canonical_bits(u: np.ndarray) -> np.ndarray:
    """:func:`_canonical_bits` on the host, with the rare words to change found first: one
    subtraction and comparison of the magnitudes (41 us at 10^5 rows on the 2-core CPU, against
    187 us for the two full ``np.where`` passes), then only those words rewritten."""
    mag = u & np.uint32(0x7FFFFFFF)
    mag -= np.uint32(0x00800000)  # zeros and subnormals wrap around: both ends above 0x7F000000
    odd = mag > np.uint32(0x7F000000)
    if odd.any():
        u = u.copy()
        u[odd] = np.where((u[odd] & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000), np.uint32(0x7FC00000),
                          np.uint32(0))
    return u


def _np_sorted_keys(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(index, key)`` of a float32 vector sorted stably: ``key`` is the order-preserving
    uint32 image of each sorted value, ``index`` its position in ``x``.

    Sorts packed 64-bit words (key in the high bits, index in the low bits, so equal values
    keep their index order): as float64 when they fit its significand (every packed word is
    an integer below 2^53, converted exactly), as uint64 otherwise.
    """
    n = x.shape[0]
    u = _np_canonical_bits(np.ascontiguousarray(x).view(np.uint32))
    # order-preserving map of IEEE-754 bits: flip all bits of negatives, set the sign of positives
    flip = (-(u >> np.uint32(31)).astype(np.int32)).view(np.uint32) | np.uint32(0x80000000)
    packed = np.bitwise_xor(u, flip).astype(np.uint64)
    bits = max(int(n - 1).bit_length(), 1) if n <= F64_PACK_ROWS else 32
    packed <<= np.uint64(bits)
    packed |= np.arange(n, dtype=np.uint64)
    if bits < 32:
        as_float = packed.astype(np.float64)
        as_float.sort()
        packed = as_float.astype(np.uint64)
    else:
        packed.sort()
    index = (packed & np.uint64((1 << bits) - 1)).astype(np.int32)
    return index, (packed >> np.uint64(bits)).astype(np.uint32)


def _np_tie_bounds(xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First and last sorted position of each sorted element's tie group (NumPy).

    Only the runs of equal values are visited (usually a small fraction of the positions):
    every other position is its own first and last.
    """
    n = xs.shape[0]
    first = np.arange(n, dtype=np.int32)
    last = first.copy()
    tied = np.flatnonzero(xs[1:] == xs[:-1]).astype(np.int32) + 1  # equal to the predecessor
    if tied.size:
        new_run = np.empty(tied.size, bool)
        new_run[0] = True
        np.not_equal(tied[1:], tied[:-1] + 1, out=new_run[1:])
        run = np.cumsum(new_run, dtype=np.int32) - 1
        starts = np.flatnonzero(new_run)
        heads = tied[starts] - 1
        tails = tied[np.append(starts[1:] - 1, tied.size - 1)]
        first[tied] = heads[run]
        last[tied] = tails[run]
        last[heads] = tails
    return first, last


def np_argsort_with_ties_1d(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if x.shape[0] == 0:
        empty = np.zeros(0, np.int32)
        return empty, empty, empty
    if x.dtype == np.float32 and x.shape[0] < 2**31:
        index, key = _np_sorted_keys(x)
        first, last = _np_tie_bounds(key)  # equal keys <=> equal values (NaN aside)
        return index, first, last
    order = np.argsort(x, kind="stable").astype(np.int32)
    first, last = _np_tie_bounds(x[order])
    return order, first, last


def _np_argsort_with_ties(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = np.asarray(x)
    if x.ndim == 1:
        return np_argsort_with_ties_1d(x)
    rows = [np_argsort_with_ties_1d(r) for r in x.reshape(-1, x.shape[-1])]
    return tuple(np.stack([r[j] for r in rows]).reshape(x.shape) for j in range(3))  # type: ignore[return-value]


def run_bounds(start: jax.Array, end: jax.Array) -> tuple[jax.Array, jax.Array]:
    """First and last position of each position's run along the last axis, for runs that
    begin where ``start`` and finish where ``end`` (scans; ``start[..., 0]`` and
    ``end[..., -1]`` must be set)."""
    n = start.shape[-1]
    idx = jnp.arange(n, dtype=jnp.int32)
    first = jax.lax.cummax(jnp.where(start, idx, 0), axis=start.ndim - 1)
    last = jax.lax.cummin(jnp.where(end, idx, n - 1), axis=start.ndim - 1, reverse=True)
    return first, last


def tie_bounds(xs: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The accelerator path of the tie bounds (scans along the last axis)."""
    diff = xs[..., 1:] != xs[..., :-1]
    edge = jnp.ones(xs.shape[:-1] + (1,), bool)
    return run_bounds(jnp.concatenate([edge, diff], axis=-1), jnp.concatenate([diff, edge], axis=-1))


def argsort_with_ties(x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Stable ascending order of ``x`` along the last axis and the tie bounds of ``x[order]``.

    Returns ``(order, first, last)`` (int32, shape of ``x``): ``x[order]`` is ascending and
    sorted position ``i`` belongs to the run of equal values at positions
    ``first[i] .. last[i]``. Ranks with ties averaged are ``(first + last) / 2 + 1``.
    """
    packed = _gpu_branches(x, _packed_argsort_with_ties)
    return jax.lax.platform_dependent(x, cpu=_host_argsort_with_ties, default=_device_argsort_with_ties, **packed)


def _gpu_branches(x: jax.Array, packed: Any) -> dict[str, Any]:
    """The CUDA and ROCm branches of a sort of ``x``: the packed words (:func:`packed_argsort`)
    for float32 arrays, none (``lax.sort``, the default) for other dtypes."""
    return {"cuda": packed, "rocm": packed} if x.dtype == jnp.float32 and x.ndim else {}


def _host_argsort_with_ties(x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The CPU branch of :func:`argsort_with_ties`: one host call into NumPy."""
    shape = jax.ShapeDtypeStruct(x.shape, jnp.int32)
    order, first, last = host_call(_np_argsort_with_ties, [shape, shape, shape], x)
    return order, first, last


def _device_argsort_with_ties(x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The GPU/TPU branch of :func:`argsort_with_ties`: ``lax.sort`` and scans."""
    order = jnp.argsort(x, axis=-1).astype(jnp.int32)
    first, last = tie_bounds(jnp.take_along_axis(x, order, axis=-1))
    return order, first, last


def argsort(x: jax.Array) -> jax.Array:
    """Ascending stable argsort along the last axis (int32): ties keep their index order."""
    return jax.lax.platform_dependent(x, cpu=lambda v: _host_argsort_with_ties(v)[0],
                                      default=lambda v: jnp.argsort(v, axis=-1).astype(jnp.int32),
                                      **_gpu_branches(x, packed_argsort))


def packed_argsort(x: jax.Array) -> jax.Array:
    """Stable ascending argsort (int32) of float32 ``x`` along the last axis as *one* sort of
    64-bit words: the order-preserving uint32 image of each value in the high half, its index
    in the low half (the words the NumPy path sorts on the CPU, with 32 index bits).

    The permutation is the CPU branch's (:func:`argsort`) bit for bit, on every backend:
    ``-0.0``, ``+0.0`` and the subnormal values are one value (XLA:CPU's comparator flushes
    subnormals to zero), every NaN is one value sorted last, and the index breaks ties
    (``tests/test_engine_speed_paths.py``); the words are made with integer operations only,
    which no backend flushes or simplifies. ``jnp.argsort`` gives the same permutation on the
    CPU; on a GPU it keeps subnormal values apart (XLA:GPU flushes them only with
    ``--xla_gpu_ftz``). Speed: ``jnp.argsort`` sorts two operands (the values and an iota)
    with a float comparator that XLA runs through its generic sort, while a single operand of
    unsigned integers takes XLA:CPU's direct sort (on the 2-core CPU, 0.11 and 0.15 times the
    time at 10^5 and 10^6 rows, ``benchmarks/results/sort.md``) and is the kind of sort XLA:GPU
    hands to a radix sort (not yet timed on a GPU: ``benchmarks/bench_sort.py`` is the first
    step of ``benchmarks/device/gpu_session.sh``). It is the CUDA and ROCm branch of
    :func:`argsort` and :func:`argsort_with_ties` for float32; the CPU keeps NumPy's sort
    (faster still there) and other accelerators ``lax.sort``.

    The words are 64-bit, so they are formed and sorted under ``jax.enable_x64`` while the
    caller's program is traced, whatever the caller's setting; the result is int32. Works
    under ``jit`` and ``vmap``; rows beyond 2^31 - 1 are refused (``ValueError``), as is any
    dtype but float32.

    Example:
      >>> import jax.numpy as jnp, numpy as np
      >>> x = jnp.array([0.5, -0.0, jnp.nan, 0.0, -jnp.inf, 0.5, 1e-45])
      >>> packed_argsort(x).tolist()  # the zeros and the subnormal tie: index order
      [4, 1, 3, 6, 0, 5, 2]
    """
    return _packed_sort(x)[0]


def _packed_sort(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(order, sorted keys)`` of :func:`packed_argsort`: the keys (uint32) are equal exactly
    where the sorts take two values as equal, so the tie bounds are read from them."""
    x = jnp.asarray(x)
    if x.dtype != jnp.float32:
        raise ValueError(f"`x` must be float32, got {x.dtype}")
    if x.ndim == 0:
        raise ValueError("`x` must have at least one axis")
    if x.shape[-1] > 2**31 - 1:
        raise ValueError(f"`x` has {x.shape[-1]} entries along its last axis, more than an int32 index holds")
    u = _canonical_bits(jax.lax.bitcast_convert_type(x, jnp.uint32))
    # flip every bit of a negative value, set the sign bit of a positive one: unsigned order = value order
    key = jnp.where((u >> 31) == 1, ~u, u | jnp.uint32(0x80000000))
    with jax.enable_x64(True):
        index = jax.lax.broadcasted_iota(jnp.uint64, x.shape, x.ndim - 1)
        words = jnp.sort((key.astype(jnp.uint64) << jnp.uint64(32)) | index, axis=-1)
        order = (words & jnp.uint64(0xFFFFFFFF)).astype(jnp.uint32)
        keys = (words >> jnp.uint64(32)).astype(jnp.uint32)
    return order.astype(jnp.int32), keys


def _packed_argsort_with_ties(x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The CUDA/ROCm branch of :func:`argsort_with_ties` for float32: :func:`packed_argsort`
    and the tie bounds of its sorted keys (equal keys, equal values as the sort compares them)."""
    order, keys = _packed_sort(x)
    first, last = tie_bounds(keys)
    return order, first, last


def _np_argsort_small_ints(x: np.ndarray) -> tuple[np.ndarray]:
    """Stable argsort of non-negative integer codes along the last axis: NumPy's radix sort
    when the codes fit 16 bits (O(n)), its stable merge sort otherwise."""
    x = np.asarray(x)
    small = x.size == 0 or int(x.max()) < (1 << 16)
    keys = x.astype(np.uint16) if small else x
    return (np.argsort(keys, axis=-1, kind="stable").astype(np.int32),)


def argsort_small_ints(codes: jax.Array) -> jax.Array:
    """Stable ascending argsort (int32) of non-negative integer ``codes`` along the last axis.

    For segment ids: on the CPU a host call into NumPy's radix sort when the codes are below
    2^16 (measured at n = 2.1 x 10^5: 1.3 ms, against 21 ms for the int32 keys
    ``segment * n + rank`` it replaces in the multicalibration error); ``jnp.argsort``
    (stable) elsewhere. Sorting ``codes[order]`` stably orders rows by (code, position in
    ``order``)."""
    return jax.lax.platform_dependent(codes, cpu=_host_argsort_small_ints,
                                      default=lambda c: jnp.argsort(c, axis=-1, stable=True).astype(jnp.int32))


def _host_argsort_small_ints(codes: jax.Array) -> jax.Array:
    """The CPU branch of :func:`argsort_small_ints`: one host call into NumPy."""
    shape = jax.ShapeDtypeStruct(codes.shape, jnp.int32)
    return host_call(_np_argsort_small_ints, [shape], codes)[0]
