"""NumPy host calls from compiled code that are safe on several CPU devices at once.

calib_jax runs two steps on the host because NumPy/SciPy do them faster than XLA:CPU: the
argsort of ``calib_jax._src.sorting`` and the pool-adjacent-violators fit of ``calib_jax._src.pav``.
``jax.pure_callback`` would do, but before calling the Python function it ``device_put``s
every argument onto ``cpu:0`` (``jax/_src/callback.py``, ``pure_callback_impl``). With
several host devices (``--xla_force_host_platform_device_count`` or ``jax_num_cpu_devices``,
how the Monte Carlo engine uses every core) that transfer can wait on ``cpu:0`` while
``cpu:0``'s own computation is parked in a callback: the run deadlocks (measured: 2 of 3
runs of a 64-trial panel on 2 host devices hung, and a 128-trial Fig 3 panel hung).

:func:`host_call` emits the same XLA host callback (``jax.interpreters.mlir.
emit_python_callback``) but hands the callback the NumPy views XLA already passes, with no
device transfer, so each device's callback runs independently. It is

* ``jit``-able, with the manual sharding ``pure_callback`` uses inside ``shard_map`` (each
  device calls back on its own shard);
* ``vmap``-able: every argument is broadcast to the batch (``pure_callback``'s
  ``vmap_method="broadcast_all"``) and ``fn`` must accept leading batch axes;
* not differentiable (sort orders and isotonic fits are used as constants).

Off the CPU backend, or if this JAX lacks the pieces used here, it is ``jax.pure_callback``
with ``vmap_method="broadcast_all"`` (on a GPU/TPU the transfer goes to a different device
and cannot deadlock this way).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

__all__ = ["host_call"]

try:  # the pieces pure_callback is built from; private, hence guarded
    from jax._src.callback import _callback_op_sharding
    from jax.extend.core import Primitive
    from jax.interpreters import batching, mlir

    _AVAILABLE = True
except ImportError:  # pragma: no cover - other JAX versions
    _AVAILABLE = False


def _out_avals(result: Sequence[jax.ShapeDtypeStruct]) -> tuple[Any, ...]:
    return tuple(jax.core.ShapedArray(tuple(r.shape), np.dtype(r.dtype)) for r in result)


if _AVAILABLE:
    _host_call_p = Primitive("calib_jax_host_call")
    _host_call_p.multiple_results = True

    def _impl(*args: Any, fn: Callable, out_avals: tuple) -> list:
        outs = fn(*(np.asarray(a) for a in args))
        return [jax.numpy.asarray(np.asarray(o, a.dtype)) for o, a in zip(outs, out_avals, strict=True)]

    def _abstract(*avals: Any, fn: Callable, out_avals: tuple) -> tuple:
        return out_avals

    def _batch(args: Sequence[Any], dims: Sequence[Any], *, fn: Callable, out_avals: tuple) -> tuple:
        size = next(a.shape[d] for a, d in zip(args, dims, strict=True) if d is not None)
        args = [batching.bdim_at_front(a, d, size) for a, d in zip(args, dims, strict=True)]
        outs = tuple(jax.core.ShapedArray((size, *o.shape), o.dtype) for o in out_avals)
        return _host_call_p.bind(*args, fn=fn, out_avals=outs), [0] * len(outs)

    def _lowering(ctx: Any, *args: Any, fn: Callable, out_avals: tuple) -> Sequence[Any]:
        sharding = _callback_op_sharding(ctx.module_context.axis_context, None, ctx.avals_out)

        def callback(*flat: np.ndarray) -> tuple:
            outs = fn(*flat)
            return tuple(np.asarray(o, a.dtype) for o, a in zip(outs, out_avals, strict=True))

        result, _, _ = mlir.emit_python_callback(
            ctx, callback, None, list(args), ctx.avals_in, ctx.avals_out,
            has_side_effect=False, returns_token=False, sharding=sharding)
        return result

    _host_call_p.def_impl(_impl)
    _host_call_p.def_abstract_eval(_abstract)
    batching.primitive_batchers[_host_call_p] = _batch
    mlir.register_lowering(_host_call_p, _lowering, platform="cpu")


def host_call(fn: Callable[..., Sequence[np.ndarray]], result: Sequence[jax.ShapeDtypeStruct],
              *args: jax.Array) -> list[jax.Array]:
    """``fn(*numpy_args) -> sequence of arrays`` called on the host from traced code.

    ``result`` gives the shape and dtype of each output. ``fn`` must be pure, accept
    leading batch axes on every argument (all arguments are broadcast to the batch under
    ``vmap``), and be a stable object (a module-level function), since it keys the
    compilation cache.
    """
    if _AVAILABLE and jax.default_backend() == "cpu":
        return list(_host_call_p.bind(*args, fn=fn, out_avals=_out_avals(result)))
    outs = jax.pure_callback(_as_tuple(fn), tuple(result), *args, vmap_method="broadcast_all")
    return list(outs)


@functools.cache
def _as_tuple(fn: Callable) -> Callable:
    """``fn`` returning a tuple (one stable wrapper per ``fn``, so compilations are reused)."""
    return lambda *a: tuple(fn(*a))
