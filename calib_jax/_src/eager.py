"""Eager calls that cost what jitted calls cost (the library's calling style).

Most users call a metric eagerly on NumPy arrays. Run op by op, a public function would
dispatch dozens of small computations and validate its inputs on the host, one pass per
check. :func:`compiled` wraps a public function so that an eager call instead runs **one**
compiled computation, keyed by its static arguments, that returns the result together with
one boolean: "some input is invalid". While that computation is traced, every check of
:mod:`calib_jax._src.validation` that cannot look at values (its inputs are tracers) records the
condition that would have made it raise (:func:`flag`). When the flag comes back set, the
call is repeated on the plain path, whose eager checks raise the usual ``ValueError`` naming
the argument; valid inputs never pay for it.

Inside a user's ``jit`` / ``vmap`` / ``grad`` (some argument is a tracer) values cannot
raise, and the function would compute on invalid values as given. There the wrapper traces
the same checks and returns NaN in every floating output when one fails (:func:`poisoned`):
a NaN label, a probability of 1.5 or a negative weight never yields a plausible number.
Integer outputs (counts, fallback codes) are returned as computed. The checks cost one
predicate reduction per array argument; ``with unchecked():`` traces the function without
them (the Monte Carlo engine does, for inputs valid by construction).

The plain path (the function itself) is used unchanged

* inside a user's ``jit`` / ``vmap`` / ``grad`` under ``unchecked()``,
* for arguments the compiled path does not take: lists and tuples of numbers, unhashable
  objects that hold no array, pytrees that mix arrays with other leaves (the array arguments must be NumPy or
  JAX arrays, or pytrees -- ``NamedTuple``, registered dataclass, ``dict`` -- whose leaves
  all are; ``None``, ``bool``, ``int``, ``float``, ``str`` and hashable values whose leaves
  are functions or strings, such as a tuple of metric functions, are static),
* for a signature whose tracing fails (e.g. a size inferred from concrete values, such as
  ``field_ece``'s default ``n_groups``), remembered per static values and shapes, and
* everywhere when ``$CALIB_JAX_FUSED_EAGER`` is ``0``.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["compiled", "flag", "collecting", "unchecked", "poisoned"]

F = TypeVar("F", bound=Callable[..., Any])
_STATE = threading.local()
_STATIC = (bool, int, float, str, type(None))
_PLAIN_KINDS = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD,
                inspect.Parameter.POSITIONAL_ONLY)


def collecting() -> bool:
    """True while a :func:`compiled` wrapper traces its function."""
    return getattr(_STATE, "flags", None) is not None


@contextlib.contextmanager
def unchecked() -> Any:
    """Trace public functions without their input checks (module docstring).

    Only what is *traced* inside the block is affected: eager calls still raise on bad input,
    and a function that ``jax.jit`` traced before the block keeps its cached, checked trace
    (wrap a fresh function). Use it around the first call of a jitted function whose inputs
    are valid by construction (simulated data) to save one reduction per array argument.
    The setting is per thread and restored on exit, also when the block raises; blocks nest.

    Yields:
      ``None``; the ``with`` block is the scope in which functions are traced unchecked.

    Example:
      >>> import jax, jax.numpy as jnp, calib_jax as cj
      >>> p, y = jnp.array([0.2, 1.5]), jnp.array([0.0, 1.0])  # a probability above 1
      >>> bool(jnp.isnan(jax.jit(cj.brier)(p, y)))  # checked: NaN, not a plausible number
      True
      >>> with cj.unchecked():
      ...     round(float(jax.jit(lambda a, b: cj.brier(a, b))(p, y)), 4)  # the values as given
      0.145
    """
    before = getattr(_STATE, "unchecked", False)
    _STATE.unchecked = True
    try:
        yield
    finally:
        _STATE.unchecked = before


def _traced(args: tuple, kwargs: dict) -> bool:
    return any(isinstance(leaf, jax.core.Tracer)
               for leaf in jax.tree_util.tree_leaves((args, kwargs)))


def poisoned(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` traced with its input checks: every floating output (and a
    gradient taken through it) is NaN where a check fails (under ``vmap``, per batch
    element)."""
    out, flags = _collect(fn, (args, kwargs), args, kwargs)
    if not flags:
        return out
    bad = jnp.any(jnp.stack(flags))

    def poison(leaf: Any) -> Any:
        # a product, not a select: the value is unchanged bit for bit when the checks pass,
        # and a gradient taken through the call is NaN too when they fail
        if isinstance(leaf, jax.Array) and jnp.issubdtype(leaf.dtype, jnp.inexact):
            return leaf * jnp.where(bad, jnp.asarray(jnp.nan, leaf.dtype), jnp.asarray(1, leaf.dtype))
        return leaf

    return jax.tree_util.tree_map(poison, out)


def flag(bad: Any) -> None:
    """Record a traced condition that makes the inputs invalid (no-op outside a trace of
    :func:`compiled`, e.g. inside a user's ``jit``, where invalid values cannot raise).

    A condition computed in a trace nested inside the collecting one (a private ``jax.jit``
    or loop body that the checked function calls) cannot leave that trace and is dropped;
    the public function checks its own arguments at the levels of its arguments' traces."""
    flags = getattr(_STATE, "flags", None)
    if flags is None:
        return
    b = jnp.any(jnp.asarray(bad, bool))
    if isinstance(b, jax.core.Tracer) and all(getattr(b, "_trace", None) is not t for t in _STATE.traces):
        return
    flags.append(b)


def _collect(fn: Callable[..., Any], reference: Any, args: tuple, kwargs: dict) -> tuple[Any, list]:
    """``fn(*args, **kwargs)`` and the conditions its checks flagged at the levels of the
    traces of the tracers in ``reference`` (the arguments)."""
    traces = tuple({id(t): t for t in (getattr(leaf, "_trace", None) for leaf in jax.tree_util.tree_leaves(reference)
                                       if isinstance(leaf, jax.core.Tracer))}.values())
    saved = getattr(_STATE, "flags", None), getattr(_STATE, "traces", ())
    _STATE.flags, _STATE.traces = [], traces
    try:
        out = fn(*args, **kwargs)
        flags = _STATE.flags
    finally:
        _STATE.flags, _STATE.traces = saved
    return out, flags


def _explicitly_sharded(v: Any) -> bool:
    """Whether ``v`` is an array (or tracer) sharded over an ``Explicit`` mesh axis
    (sharding in types, ``jax.make_mesh``'s default axis type)."""
    if not isinstance(v, jax.Array):
        return False
    try:
        sharding = jax.typeof(v).sharding
        axis_types = sharding.mesh.axis_types
    except (AttributeError, TypeError):
        return False
    explicit = {name for name, t in zip(sharding.mesh.axis_names, axis_types, strict=True)
                if t == jax.sharding.AxisType.Explicit}
    used = {a for entry in sharding.spec if entry is not None
            for a in (entry if isinstance(entry, tuple) else (entry,))}
    return bool(explicit & used)


def _on_auto_axes(fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """Run ``fn`` on explicitly sharded inputs with the mesh axes switched to ``Auto``
    (``jax.sharding.auto_axes``): XLA partitions the group sums (scatter-adds) as it does on
    an ``Auto`` mesh, and the result (a statistic, small) comes back replicated. Needs the
    mesh context the explicit mode itself needs (``with jax.set_mesh(mesh):``)."""
    arrays = [i for i, v in enumerate(args) if isinstance(v, jax.Array)]
    named = [k for k, v in kwargs.items() if isinstance(v, jax.Array)]

    def call(pos: list, kw: dict) -> Any:
        full = list(args)
        for i, v in zip(arrays, pos, strict=True):
            full[i] = v
        return fn(*full, **{**kwargs, **kw})

    return jax.sharding.auto_axes(call, out_sharding=jax.sharding.PartitionSpec())(
        [args[i] for i in arrays], {k: kwargs[k] for k in named})


def _enabled() -> bool:
    return os.environ.get("CALIB_JAX_FUSED_EAGER", "1") != "0"


def _array(v: Any) -> bool:
    return isinstance(v, np.ndarray | jax.Array) and not isinstance(v, jax.core.Tracer)


#: the public functions' arguments that hold integer ids (groups, users, ranks, codes)
_ID_ARGS = frozenset({"users", "user_ids", "item_ids", "ids", "field", "fields", "groups", "blocks", "ranks",
                      "segment", "codes"})


#: the largest integer float32 holds exactly (every integer up to it, none of the odd ones above)
FLOAT32_EXACT_INT = 2**24


def ids_beyond_32_bits(v: Any) -> bool:
    """A NumPy array of ids that JAX's 32-bit conversion would change: 64-bit (or unsigned
    32-bit) integers outside the int32 range, which it wraps onto other ids, or float64 values
    above 2**24, where float32 merges neighbouring integers. Such an argument takes the plain
    path, whose checks (:func:`~calib_jax._src.validation.host_ids`) read the ids before any
    conversion; an O(n) minimum and maximum on the host."""
    if not isinstance(v, np.ndarray) or not v.size:
        return False
    if v.dtype.kind in "iu" and (v.dtype.itemsize > 4 or v.dtype.kind == "u" and v.dtype.itemsize == 4):
        return bool(v.min() < -(2**31) or v.max() > 2**31 - 1)
    if v.dtype.kind == "f" and v.dtype.itemsize > 4:
        return bool(np.nanmax(np.abs(v)) > FLOAT32_EXACT_INT) if not np.all(np.isnan(v)) else False
    return False


def _kind(v: Any) -> tuple[str, Any]:
    """How the compiled path takes an argument that is neither an array nor a scalar:
    ``("arrays", signature)`` for a pytree whose leaves are all concrete arrays (a
    ``NamedTuple`` of fitted parameters, a :class:`~calib_jax.partitions.Histogram1D`, a
    ``dict`` of arrays; its structure and leaf shapes are the signature), ``("static",
    v)`` for a hashable value whose leaves are functions or strings (a tuple of metric
    functions), and ``("plain", None)`` for anything else: lists or tuples of numbers stay
    data, converted and checked by the function itself as before, tracers, ..."""
    leaves, tree = jax.tree_util.tree_flatten(v)
    if leaves and all(_array(leaf) for leaf in leaves):
        return "arrays", (tree, tuple((leaf.shape, leaf.dtype) for leaf in leaves))
    if not all(callable(leaf) or isinstance(leaf, str) for leaf in leaves):
        return "plain", None
    try:
        hash(v)
    except TypeError:
        return "plain", None
    return "static", v


def compiled(fn: F) -> F:
    """Wrap a public function so that an eager call runs one compiled computation (module
    docstring); results equal the function's own under ``jax.jit``."""
    sig = inspect.signature(fn)
    if any(p.kind in _PLAIN_KINDS for p in sig.parameters.values()):
        return fn
    cores: dict[tuple, Callable[..., Any]] = {}
    plain: set[tuple] = set()
    names = tuple(sig.parameters)
    n_positional = sum(p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD for p in sig.parameters.values())

    def core(static: tuple) -> Callable[..., Any]:
        def run(arrays: dict[str, Any]) -> tuple[Any, jax.Array | None]:
            out, flags = _collect(fn, arrays, (), {**arrays, **dict(static)})
            # no check recorded (partitions, summaries): no flag to compute or read back,
            # and the call returns as asynchronously as a jitted one
            bad = jnp.any(jnp.stack(flags)) if flags else None
            return out, bad

        return jax.jit(run)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if any(_explicitly_sharded(v) for v in (*args, *kwargs.values())):
            return _on_auto_axes(fn, args, kwargs)
        if collecting():
            return fn(*args, **kwargs)
        if _traced(args, kwargs):  # a user's jit / vmap / grad: checks poison the outputs
            if getattr(_STATE, "unchecked", False):
                return fn(*args, **kwargs)
            return poisoned(fn, *args, **kwargs)
        if not _enabled():
            return fn(*args, **kwargs)
        # the arguments by name, as ``sig.bind`` would give them (a third of its cost); a
        # call that binds wrongly fails in the trace below and takes the plain path, which
        # raises Python's own TypeError
        if len(args) > n_positional or any(k in names[:len(args)] for k in kwargs):
            return fn(*args, **kwargs)
        arrays: dict[str, Any] = {}
        static: list[tuple[str, Any]] = []
        signature: list[tuple[Any, ...]] = []
        for name, v in (*zip(names, args, strict=False), *kwargs.items()):
            if _array(v):
                if name in _ID_ARGS and ids_beyond_32_bits(v):
                    return fn(*args, **kwargs)
                arrays[name] = v
                signature.append((name, v.shape, v.dtype))
            elif isinstance(v, _STATIC):
                static.append((name, v))
            else:
                kind, sig_or_value = _kind(v)
                if kind == "arrays":
                    arrays[name] = v
                    signature.append((name, sig_or_value))
                elif kind == "static":
                    static.append((name, v))
                else:  # lists, tracers, ...: the plain path
                    return fn(*args, **kwargs)
        skey = tuple(static)
        shapes = (skey, tuple(signature))
        if shapes in plain:
            return fn(*args, **kwargs)
        run = cores.get(skey)
        if run is None:
            run = cores[skey] = core(skey)
        try:
            out, bad = run(arrays)
        except Exception:  # tracing needs concrete values (or the inputs are malformed)
            plain.add(shapes)
            return fn(*args, **kwargs)
        if bad is not None and np.asarray(bad):  # a third of the cost of bool(bad) on a jax.Array
            return fn(*args, **kwargs)  # the eager checks raise the message naming the argument
        return out

    return wrapper  # type: ignore[return-value]
