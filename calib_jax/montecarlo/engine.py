"""Chunked, sharded, resumable execution of Monte Carlo trials.

A *trial* is a pure function ``trial_fn(key) -> pytree of arrays``.  :func:`run_trials`
evaluates it for ``n_trials`` keys and stacks the outputs along a leading trial axis:

* **Bound trials.**  A :class:`BoundTrial` ``(fn, args)`` is the trial ``key -> fn(key, *args)``
  whose ``args`` (arrays) are inputs of the compiled program rather than constants baked
  into it: trials that differ only in those arrays (the fixed and pooled population designs
  of one study) share one compilation.
* **Keys.**  Trial ``t`` always receives ``jax.random.fold_in(key, t)``.  The result of a
  trial therefore depends only on ``(key, t)``: not on the chunk size, the number of
  devices, or whether the run was interrupted and resumed.
* **Chunks.**  Trials are evaluated ``chunk_size`` at a time with ``jax.vmap`` inside one
  compiled function, so memory is bounded by one chunk whatever ``n_trials`` is.  The last
  chunk is padded (the padded trials are computed and discarded) so a single compiled
  executable serves every chunk.
* **Devices.**  The trial axis of a chunk is split over a 1-D :class:`jax.sharding.Mesh`
  of all devices with ``shard_map``; ``chunk_size`` is rounded up to a multiple of twice the
  device count times ``trials_per_step``.  On one CPU this is a no-op; on 4 host devices (or
  GPUs) each device evaluates a quarter of the chunk, ``trials_per_step`` trials at a time
  (vmapped), with the same compiled per-trial program whatever the device count, so the
  results are bit-identical to the 1-device run.
* **Processes.**  Under ``jax.distributed`` (several processes, e.g. one per host, each
  with its local devices) ``jax.devices()`` is the global device list and the mesh spans
  every process: each process computes its devices' slice of every chunk and the slices are
  all-gathered, so every process returns the same array, equal to the one-process result.
  Only process 0 writes checkpoints (on a file system all processes share).
* **Checkpoints.**  With ``checkpoint_dir`` every finished chunk is written atomically as
  ``chunk_00000.npz`` next to a ``manifest.json`` that records a hash of the run's
  configuration (the ``config`` mapping, the key, ``n_trials`` and ``chunk_size``).  A
  rerun with the same hash loads the finished chunks and only computes the missing ones;
  a different configuration uses a different sub-directory, so stale chunks are never
  mixed in.  The stacked result is written atomically as ``results.npz`` at the end.
  The hash names the computation, not the code that ran it: each chunk also records the
  git commit of ``calib_jax`` that wrote it, and a run that reuses chunks written by
  another commit (or by a tree with uncommitted changes, or before commits were recorded)
  warns with :class:`ResumedChunksWarning`, which the study harness writes into the
  provenance. Delete the checkpoint folder to recompute them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import io as _io
import json
import math
import warnings
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from calib_jax._src.eager import unchecked
from calib_jax._src.threefry import unrolled_threefry_on_cpu
from calib_jax._src.validation import check_key, check_positive_int, check_text_keys
from calib_jax.io import atomic_write_bytes, git_commit, write_json

__all__ = ["BoundTrial", "ResumedChunksWarning", "run_trials", "trial_keys", "config_hash", "load_results"]

_AXIS = "trials"
#: default ``trials_per_step`` on the CPU backend and on accelerators (see :func:`run_trials`)
CPU_TRIALS_PER_STEP = 2
ACCELERATOR_TRIALS_PER_STEP = 8


@dataclasses.dataclass(frozen=True, eq=False)
class BoundTrial:
    """The trial ``key -> fn(key, *args)`` with ``args`` passed to the compiled chunk as inputs.

    :func:`run_trials` caches its compilation by ``fn`` (and the shapes of ``args``), so two
    bound trials with the same ``fn`` and differently valued ``args`` compile once. The
    checkpoint hash includes the values of ``args``.

    Attributes:
      fn: pure ``(key, *args) -> pytree of arrays`` (jit/vmap-able, static shapes); keep one
        function object per static configuration so that the compilation is reused.
      args: tuple of arrays (or pytrees of arrays, typed PRNG keys included), the same for
        every trial.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax.montecarlo import BoundTrial
      >>> trial = BoundTrial(lambda k, scale: scale * jax.random.uniform(k), (jnp.float32(2.0),))
      >>> key = jax.random.key(0)
      >>> bool(trial(key) == 2.0 * jax.random.uniform(key))  # trial(key) is fn(key, *args)
      True
    """

    fn: Callable[..., Any]
    args: tuple[Any, ...]

    def __call__(self, key: jax.Array) -> Any:
        return self.fn(key, *self.args)


def _args_fingerprint(args: tuple[Any, ...]) -> str:
    """SHA-256 of the values, shapes and dtypes of a bound trial's arguments."""
    h = hashlib.sha256()
    for leaf in jax.tree_util.tree_leaves(args):
        if jnp.issubdtype(jnp.result_type(leaf), jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        a = np.asarray(leaf)
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def trial_keys(key: jax.Array, indices: jax.Array) -> jax.Array:
    """Per-trial keys ``fold_in(key, t)`` for an integer vector of trial indices ``t``.

    These are the keys :func:`run_trials` gives its trials, so one trial of a study can be
    recomputed on its own.

    Args:
      key: the base PRNG key (typed, or raw ``uint32[2]``).
      indices: (k,) integer trial indices in ``[0, 2**32)`` (``fold_in`` reads 32 bits). An
        array of another dtype, and host indices outside the range, raise ``ValueError``
        naming ``indices``; the values of a device array are not read (no transfer).

    Returns:
      (k,) keys (typed keys for a typed ``key``; (k, 2) ``uint32`` key data for a raw one).
      Jit- and vmap-able.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax.montecarlo import trial_keys
      >>> key = jax.random.key(0)
      >>> keys = trial_keys(key, jnp.arange(3))
      >>> keys.shape, bool(jnp.all(jax.random.key_data(keys[2]) == jax.random.key_data(jax.random.fold_in(key, 2))))
      ((3,), True)
    """
    dtype = getattr(indices, "dtype", None)
    if dtype is not None and not jnp.issubdtype(dtype, jnp.integer):
        # a float index (1.7) was truncated by fold_in to another trial's key
        raise ValueError(f"`indices` must be integers, got {dtype}")
    if not isinstance(indices, jax.Array | jax.core.Tracer):
        host = np.asarray(indices)
        integers = host.dtype.kind in "iu" and host.ndim == 1
        if not integers or (host.size and (host.min() < 0 or host.max() > 2**32 - 1)):
            # fold_in reads 32 bits: an int64 index 2**32 wrapped to trial 0's key
            span = f" in [{host.min()}, {host.max()}]" if integers else ""
            raise ValueError(f"`indices` must be a 1-D vector of integers in [0, 2**32), got {host.dtype} "
                             f"{host.shape}{span}")
        indices = jnp.asarray(host.astype(np.uint32))
    key = check_key(key)
    if np.ndim(indices) != 1:
        raise ValueError(f"`indices` must be a 1-D vector of trial indices, got shape {np.shape(indices)}")
    return jax.vmap(lambda t: jax.random.fold_in(key, t))(indices)


def _key_fingerprint(key: jax.Array) -> list[int]:
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    return np.asarray(key).ravel().astype(np.int64).tolist()


def config_hash(config: Mapping[str, Any] | None, key: jax.Array, n_trials: int,
                chunk_size: int) -> str:
    """A short SHA-256 of everything that determines a run's results.

    The name of :func:`run_trials`' checkpoint sub-directory (which hashes its ``config``
    together with ``trials_per_step`` and a bound trial's arguments).

    Args:
      config: JSON-able mapping describing the trial, or ``None`` (values that are not JSON
        are hashed through their ``repr``); every key, nested ones too, a ``str`` (else
        ``ValueError``: JSON writes ``1`` and ``"1"`` alike).
      key: the base PRNG key (typed or raw; hashed through its key data, so both forms of one
        key give one hash).
      n_trials: number of trials (a positive int, else ``ValueError``).
      chunk_size: trials per chunk (a positive int, else ``ValueError``).

    Returns:
      A 16-character hexadecimal string. Runs on the host; not jit-able.

    Example:
      >>> import jax
      >>> from calib_jax.montecarlo import config_hash
      >>> h = config_hash({"n": 100}, jax.random.key(0), 10, 4)
      >>> len(h), h == config_hash({"n": 100}, jax.random.PRNGKey(0), 10, 4)
      (16, True)
      >>> h == config_hash({"n": 100}, jax.random.key(0), 11, 4)  # another run
      False
    """
    check_text_keys(config, "config")
    key = check_key(key)
    # int(2.9) hashed as 2: a run of 2.9 trials would have read the checkpoints of 2
    n_trials, chunk_size = check_positive_int(n_trials, "n_trials"), check_positive_int(chunk_size, "chunk_size")
    payload = {
        "config": dict(config) if config is not None else None,
        "key": _key_fingerprint(key),
        "n_trials": int(n_trials),
        "chunk_size": int(chunk_size),
    }
    text = json.dumps(payload, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class ResumedChunksWarning(UserWarning):
    """:func:`run_trials` reused checkpointed chunks that other code wrote (another commit
    of calib_jax, a tree with uncommitted changes, or a checkpoint older than this record).

    A :class:`UserWarning`; its message counts the reused chunks per writer and names the
    folder to delete to recompute them. ``warnings.simplefilter("error", ResumedChunksWarning)``
    makes such a rerun fail instead.

    Example:
      >>> from calib_jax.montecarlo import ResumedChunksWarning
      >>> issubclass(ResumedChunksWarning, UserWarning)
      True
    """


#: what a chunk written before writers were recorded reports
UNRECORDED = "unrecorded"


def _code_version() -> str:
    """The git commit of the calib_jax checkout in use (``-dirty`` with uncommitted changes
    outside ``figures/``), or ``"unknown"`` for an installed copy."""
    return git_commit(Path(__file__).resolve().parents[2])  # the checkout holding calib_jax/


def _save_npz(path: Path, leaves: list[np.ndarray], writer: str | None = None) -> None:
    buf = _io.BytesIO()
    members: dict[str, Any] = {f"leaf_{i}": leaf for i, leaf in enumerate(leaves)}
    if writer is not None:
        members["writer"] = np.array(writer)
    np.savez(buf, **members)
    atomic_write_bytes(path, buf.getvalue())


def _load_chunk(path: Path, n_leaves: int) -> tuple[list[np.ndarray], str]:
    """A checkpointed chunk's leaves and the code version that wrote it (one read); a file with
    another number of leaves is refused (read as ``like``'s first leaves, its columns went under
    other names)."""
    try:
        z = np.load(path)
    except FileNotFoundError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:  # NumPy's words named no file
        raise ValueError(f"{path}: not a results file of run_trials ({type(err).__name__}: {err})") from None
    with z:
        held = sum(1 for f in z.files if f.startswith("leaf_"))
        if held != n_leaves:
            raise ValueError(f"{path}: holds {held} result arrays, the structure asked for has {n_leaves}")
        return ([z[f"leaf_{i}"] for i in range(n_leaves)],
                str(z["writer"]) if "writer" in z.files else UNRECORDED)


def _load_npz(path: Path, n_leaves: int) -> list[np.ndarray]:
    return _load_chunk(path, n_leaves)[0]


def load_results(path: str | Path, like: Any) -> Any:
    """Load a ``results.npz`` written by :func:`run_trials` into the pytree structure of
    ``like`` (any pytree with the same structure, e.g. ``jax.eval_shape`` of the trial).

    Args:
      path: the ``results.npz`` file, ``checkpoint_dir/<config-hash>/results.npz``.
      like: a pytree with the structure (and number of leaves) of one trial's output; only
        its structure is used. A file holding another number of leaves raises ``ValueError``
        naming it.

    Returns:
      The stacked results: NumPy arrays with the leading trial axis, in the structure of
      ``like``. Runs on the host (file I/O); not jit-able.

    Example:
      >>> import os, tempfile
      >>> import jax, numpy as np
      >>> from calib_jax.montecarlo import load_results, run_trials
      >>> trial = lambda k: {"u": jax.random.uniform(k), "z": jax.random.normal(k, (2,))}
      >>> key = jax.random.key(0)
      >>> with tempfile.TemporaryDirectory() as d:
      ...     out = run_trials(trial, key, 5, chunk_size=4, progress=False, checkpoint_dir=d, config={"demo": 1})
      ...     (run,) = os.listdir(d)  # the configuration's hash
      ...     back = load_results(os.path.join(d, run, "results.npz"), jax.eval_shape(trial, key))
      >>> back["z"].shape, bool(np.array_equal(back["u"], out["u"]))
      ((5, 2), True)
    """
    leaves, treedef = jax.tree_util.tree_flatten(like)
    return jax.tree_util.tree_unflatten(treedef, _load_npz(Path(path), len(leaves)))


_CHUNK_CACHE: dict[tuple, tuple] = {}


def _to_host(x: jax.Array) -> np.ndarray:
    """The whole of a (possibly multi-process) sharded array on this host. Under
    ``jax.distributed`` each process holds only its devices' rows; they are all-gathered so
    that every process returns the full, identical result."""
    if x.is_fully_addressable:
        return np.asarray(jax.device_get(x))
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def _device_indices(host_idx: np.ndarray, sharded: NamedSharding) -> jax.Array:
    """The chunk's trial indices as one array sharded over the trial axis, each addressable
    device's slice placed by an explicit ``jax.device_put``. ``jax.make_array_from_callback``
    (the former construction, the same array) counts as an implicit host-to-device transfer
    under ``jax.transfer_guard("disallow")``; this keeps the loop over chunks free of implicit
    transfers (``tests/test_transfer_guard.py``) and works under ``jax.distributed`` too, where
    a process holds only its own devices' slices."""
    shape = host_idx.shape
    parts = [jax.device_put(host_idx[index], d)
             for d, index in sharded.addressable_devices_indices_map(shape).items()]
    return jax.make_array_from_single_device_arrays(shape, sharded, parts)


def _name_of(fn: Callable) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def _raise_untraceable(trial_fn: Callable, error: Exception) -> NoReturn:
    """``ValueError`` naming the trial function for what JAX raises when a trial does host work on a
    traced value, or returns something other than arrays (JAX's own messages name no argument of
    the run); any other ``TypeError`` (a wrong signature, a bug inside the trial) is re-raised as
    it is."""
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    if isinstance(error, jax.errors.ConcretizationTypeError | jax.errors.TracerArrayConversionError
                  | jax.errors.TracerIntegerConversionError):
        raise ValueError(
            f"`trial_fn` {_name_of(trial_fn)} is run under jax.jit and jax.vmap, where its draws are traced "
            f"values, and it needs one as a concrete number ({type(error).__name__}: {first}). A trial computes "
            "with jax.numpy on its draws: no float(), int(), bool() or np.asarray() of a drawn value, no Python "
            "`if` on one (use jnp.where), and array shapes that do not depend on the draws") from error
    if "is not a valid JAX type" in first:
        raise ValueError(f"`trial_fn` {_name_of(trial_fn)} must return a pytree of arrays (numbers, JAX or NumPy "
                         f"arrays, in dicts, lists or tuples); JAX said: {first}") from error
    raise error


def _compiled_chunk(trial_fn: Callable, key: jax.Array, args: tuple[Any, ...], chunk: int,
                    devices: tuple[jax.Device, ...], trials_per_step: int) -> tuple:
    """The jitted, sharded chunk function (cached per trial function, chunk size, devices,
    step and key type, so repeated runs of one study reuse the compilation).

    Each device runs the same computation on its slice of the chunk whatever the device
    count (``shard_map``): ``lax.map`` over steps of ``trials_per_step`` vmapped trials.
    The per-trial arithmetic is therefore the same on 1, 2 or 4 devices (or processes),
    which makes the results bit-identical across device counts; with a plain ``jit`` over a
    sharded batch, the per-device batch shape (and with it XLA's fusion and vectorisation)
    changed with the device count and moved results in the 7th digit. The N-device program
    is still compiled on its own, so trial code must avoid rewrites XLA applies in some
    programs only (a division by a broadcast scalar: see ``partitions.histogram_1d``)."""
    arg_types = jax.tree_util.tree_map(lambda a: (jnp.result_type(a), jnp.shape(a)), args)
    cache_key = (trial_fn, chunk, tuple(d.id for d in devices), key.dtype, key.shape, trials_per_step,
                 str(jax.tree_util.tree_structure(args)), tuple(jax.tree_util.tree_leaves(arg_types)))
    hit = _CHUNK_CACHE.get(cache_key)
    if hit is not None:
        return hit
    mesh = Mesh(np.array(devices), (_AXIS,))
    sharded = NamedSharding(mesh, P(_AXIS))

    def _local(base_key: jax.Array, idx: jax.Array, trial_args: tuple[Any, ...]) -> Any:
        # a scan over steps of ``trials_per_step`` vmapped trials; the engine gives every
        # device at least two steps, so the loop is never simplified away and the per-step
        # program is the same whatever the device count
        keys = trial_keys(base_key, idx)
        steps = keys.reshape(-1, trials_per_step, *keys.shape[1:])
        step = jax.vmap(lambda k: trial_fn(k, *trial_args))
        # trials draw valid data by construction: the public metrics are traced without
        # their input checks (one reduction per array and metric saved)
        with unchecked():
            _, out = jax.lax.scan(lambda carry, k: (carry, step(k)), None, steps)
        return jax.tree_util.tree_map(lambda x: x.reshape(-1, *x.shape[2:]), out)

    _chunk = jax.shard_map(_local, mesh=mesh, in_specs=(P(), P(_AXIS), P()), out_specs=P(_AXIS),
                           check_vma=False)
    try:
        out_shape = jax.eval_shape(_chunk, key, jax.ShapeDtypeStruct((chunk,), jnp.int32), args)
    except TypeError as e:  # JAX's tracing errors are TypeErrors, named by _raise_untraceable
        _raise_untraceable(trial_fn, e)
    if not jax.tree_util.tree_leaves(out_shape):
        raise ValueError(f"`trial_fn` {_name_of(trial_fn)} returned no arrays ({out_shape!r}): a trial returns the "
                         "pytree of arrays the run collects")
    fn = jax.jit(_chunk)
    if len(_CHUNK_CACHE) > 32:
        _CHUNK_CACHE.clear()
    _CHUNK_CACHE[cache_key] = (fn, sharded, out_shape)
    return fn, sharded, out_shape


def _check_trial_signature(fn: Callable[..., Any], n_args: int) -> None:
    """``ValueError`` naming ``trial_fn`` when it cannot be called with a key and the ``n_args``
    arguments of its :class:`BoundTrial` (Python's ``TypeError`` from inside the trace before)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or C function: nothing to check before the call
        return
    try:
        sig.bind(None, *([None] * n_args))
    except TypeError:
        takes = "a key" if not n_args else f"a key and {n_args} more argument{'s' * (n_args > 1)} (its BoundTrial's)"
        raise ValueError(f"`trial_fn` must take {takes}, got a function of {sig}") from None


def run_trials(
    trial_fn: Callable[[jax.Array], Any],
    key: jax.Array,
    n_trials: int,
    *,
    chunk_size: int,
    checkpoint_dir: str | Path | None = None,
    progress: bool = True,
    config: Mapping[str, Any] | None = None,
    devices: list[jax.Device] | None = None,
    on_chunk_done: Callable[[int], None] | None = None,
    trials_per_step: int | None = None,
) -> Any:
    """Evaluate ``trial_fn(fold_in(key, t))`` for ``t = 0 .. n_trials-1``.

    Args:
      trial_fn: pure ``key -> pytree of arrays`` (jit/vmap-able, static shapes), or a
        :class:`BoundTrial`, whose arguments are inputs of the compiled program (trials that
        differ only in them share one compilation).
      key: base PRNG key (raw ``uint32[2]`` or typed).
      n_trials: number of trials (positive int).
      chunk_size: trials per compiled, vmapped batch (rounded up to a multiple of the
        number of devices).  Bounds peak memory.
      checkpoint_dir: if given, finished chunks are saved under
        ``checkpoint_dir/<config-hash>/`` and reused by a later call with the same
        configuration; the stacked result is saved there as ``results.npz``.
      progress: show a tqdm progress bar (trials done / total).
      config: JSON-able mapping describing the trial (scenario, variants, metric options), or
        ``None``; part of the checkpoint hash.  Pass it whenever ``checkpoint_dir`` is used, otherwise
        two different trial functions with the same key would share checkpoints.
      devices: devices to shard the trial axis over (default ``jax.devices()``).
      on_chunk_done: optional hook called with the chunk index after each newly computed
        chunk has been checkpointed (used by the tests to simulate an interruption).
      trials_per_step: trials vmapped together inside a device (the rest of its slice is a
        ``lax.scan`` over such steps). Part of the program, hence of the checkpoint hash:
        results are bit-identical for any device or process count at a fixed step;
        ``chunk_size`` is rounded up to a multiple of ``2 x devices x trials_per_step``.
        Default (``None``): ``CPU_TRIALS_PER_STEP`` = 2 on the CPU, where a trial's arrays
        then stay in cache (Fig 3 panel at n = 10^5 on 2 host devices: 43 ms per trial with
        2, 54 ms with 8), ``ACCELERATOR_TRIALS_PER_STEP`` = 8 elsewhere.

    Returns:
      The trial outputs stacked along a new leading axis of length ``n_trials``, as NumPy
      arrays in the pytree structure returned by ``trial_fn``. Raises ``ValueError`` when
      ``n_trials``, ``chunk_size`` or ``trials_per_step`` is not a positive int, and naming
      ``trial_fn`` when it cannot be called with a key (and its BoundTrial's arguments), does
      host work on a traced draw (``float()``, a Python ``if``, ``np.asarray``, a shape drawn
      at random) or returns something that is not arrays; warns with
      :class:`ResumedChunksWarning` when it reuses chunks that other code wrote. Host code
      (it drives the compiled chunks and writes files); not jit-able. The chunk program is
      traced with the public metrics' input checks off (``calib_jax.unchecked``): trials
      must produce valid data by construction.

    Example:
      >>> import os, tempfile
      >>> import jax
      >>> from calib_jax.montecarlo import run_trials
      >>> trial = lambda k: {"u": jax.random.uniform(k), "z": jax.random.normal(k, (2,))}
      >>> key = jax.random.key(0)
      >>> out = run_trials(trial, key, 5, chunk_size=4, progress=False)
      >>> out["u"].shape, out["z"].shape  # 5 trials, padded to 2 chunks of 4
      ((5,), (5, 2))
      >>> bool(out["u"][3] == trial(jax.random.fold_in(key, 3))["u"])  # trial t gets fold_in(key, t)
      True
      >>> with tempfile.TemporaryDirectory() as d:  # checkpointed: rerunning reuses the chunks
      ...     _ = run_trials(trial, key, 5, chunk_size=4, progress=False, checkpoint_dir=d, config={"demo": 1})
      ...     (run,) = os.listdir(d)
      ...     sorted(f for f in os.listdir(os.path.join(d, run)) if not f.startswith("chunk_"))
      ['manifest.json', 'results.npz']
    """
    if isinstance(n_trials, bool) or not isinstance(n_trials, int | np.integer) or n_trials < 1:
        raise ValueError(f"`n_trials` must be a positive int, got {n_trials!r}")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int | np.integer) or chunk_size < 1:
        raise ValueError(f"`chunk_size` must be a positive int, got {chunk_size!r}")
    key = check_key(key)  # an int seed failed deep inside with an AttributeError
    if not callable(trial_fn):
        raise ValueError(f"`trial_fn` must be a function key -> results (or a BoundTrial), got "
                         f"{type(trial_fn).__name__}")
    if config is not None and not isinstance(config, Mapping):
        raise ValueError(f"`config` must be a mapping of the run's settings (or None), got {type(config).__name__}")
    devices = list(jax.devices()) if devices is None else list(devices)
    if not devices or not all(isinstance(d, jax.Device) for d in devices):
        raise ValueError(f"`devices` must be a non-empty list of JAX devices, got {devices!r}")
    n_dev = len(devices)
    if trials_per_step is None:
        trials_per_step = (CPU_TRIALS_PER_STEP if devices[0].platform == "cpu"
                           else ACCELERATOR_TRIALS_PER_STEP)
    if isinstance(trials_per_step, bool) or not isinstance(trials_per_step, int | np.integer) \
            or trials_per_step < 1:
        raise ValueError(f"`trials_per_step` must be a positive int, got {trials_per_step!r}")
    step = int(trials_per_step)
    unit = 2 * n_dev * step  # at least two steps per device (see _compiled_chunk)
    chunk = int(math.ceil(min(int(chunk_size), int(n_trials)) / unit) * unit)
    n_chunks = int(math.ceil(n_trials / chunk))

    fn, args = (trial_fn.fn, tuple(trial_fn.args)) if isinstance(trial_fn, BoundTrial) else (trial_fn, ())
    _check_trial_signature(fn, len(args))
    unrolled_threefry_on_cpu()  # same random bits, ~6x faster draws on XLA:CPU
    chunk_fn, sharded, out_shape = _compiled_chunk(fn, key, args, chunk, tuple(devices), step)
    flat_shape, treedef = jax.tree_util.tree_flatten(out_shape)

    ckpt: Path | None = None
    writer = ""
    reused: dict[str, int] = {}  # writer -> chunks reused that another code version wrote
    if checkpoint_dir is not None:
        writer = _code_version()
        bound = {"trial_args": _args_fingerprint(args)} if args else {}
        h = config_hash({"config": dict(config) if config is not None else None, "trials_per_step": step,
                         **bound}, key, n_trials, chunk)
        ckpt = Path(checkpoint_dir) / h
        ckpt.mkdir(parents=True, exist_ok=True)
        if jax.process_index() == 0:
            write_json(ckpt / "manifest.json", {
                "config_hash": h, "config": dict(config) if config is not None else None,
                "n_trials": int(n_trials), "chunk_size": chunk, "n_chunks": n_chunks,
                "key": _key_fingerprint(key),
            })

    parts: list[list[np.ndarray]] = []
    from tqdm.auto import tqdm

    with tqdm(total=int(n_trials), disable=not progress, desc="trials", unit="trial") as bar:
        for c in range(n_chunks):
            start = c * chunk
            valid = min(chunk, n_trials - start)
            path = ckpt / f"chunk_{c:05d}.npz" if ckpt is not None else None
            if path is not None and path.exists():
                leaves, w = _load_chunk(path, len(flat_shape))
                if w != writer:
                    reused[w] = reused.get(w, 0) + 1
            else:
                host_idx = np.arange(start, start + chunk, dtype=np.int32)
                idx = _device_indices(host_idx, sharded)
                out = chunk_fn(key, idx, args)
                leaves = [_to_host(x)[:valid] for x in jax.tree_util.tree_leaves(out)]
                if path is not None and jax.process_index() == 0:
                    _save_npz(path, leaves, writer)
                if on_chunk_done is not None:
                    on_chunk_done(c)
            parts.append(leaves)
            bar.update(valid)

    stacked = [np.concatenate([p[i] for p in parts], axis=0) for i in range(len(flat_shape))]
    if reused:
        warnings.warn(ResumedChunksWarning(
            f"{sum(reused.values())} of {n_chunks} chunks were reused from {ckpt} although other code wrote "
            f"them ({', '.join(f'{n} by {w}' for w, n in sorted(reused.items()))}; this code: {writer}); "
            "delete the folder to recompute them"), stacklevel=2)
    if ckpt is not None and jax.process_index() == 0:
        _save_npz(ckpt / "results.npz", stacked)
    return jax.tree_util.tree_unflatten(treedef, stacked)
