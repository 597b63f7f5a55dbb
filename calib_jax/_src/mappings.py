"""Keep a long-lived process under the kernel's cap on memory mappings.

XLA:CPU keeps the machine code of every executable it compiles in memory mappings of its own
(6 to 24 per program, measured with JAX 0.10.2 on x86-64 Linux), and JAX keeps each
executable alive in its caches for as long as the jitted function lives: a module-level
``jax.jit`` function called with many shapes, or many such functions, hold thousands. Linux
caps the mappings of a process (``/proc/sys/vm/max_map_count``, 65,530 by default). At the cap
the next compilation's ``mmap`` fails and XLA does not recover: it logs ``LLVM compilation
error: Cannot allocate memory`` and the process dies of a segmentation fault inside
``backend_compile_and_load`` (or aborts while loading a persistent-cache entry, which maps code
as well). ``benchmarks/repro/xla_map_exhaustion.py`` reproduces it (in seconds with a lowered
cap); ``benchmarks/repro/study_mapping_stress.py`` shows it on the study path.

A process that compiles without end -- a test worker running a thousand tests, a study run
that fits hundreds of calibrators on many shapes, several studies in one command -- calls
:func:`release_compiled_if_near_limit` at points where no computation is in flight (between
tests, studies, splits). Past half the cap it empties JAX's in-memory caches
(``jax.clear_caches``), which frees the executables and their mappings; the programs still in
use compile again (or load from the persistent compilation cache) on their next call, with the
same results. Elsewhere (no ``/proc``: macOS, Windows) it does nothing.

Host-only code: never call it from inside ``jit``.
"""

from __future__ import annotations

import functools
import gc

import jax

__all__ = ["mapping_count", "mapping_limit", "release_compiled_if_near_limit"]

_MAPS = "/proc/self/maps"
_LIMIT = "/proc/sys/vm/max_map_count"


def mapping_count() -> int | None:
    """Memory mappings this process holds now (lines of ``/proc/self/maps``; ``None`` where the
    system has no such file)."""
    try:
        with open(_MAPS, "rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(functools.partial(f.read, 1 << 20), b""))
    except OSError:
        return None


@functools.cache
def mapping_limit() -> int | None:
    """The kernel's cap on one process's memory mappings (``vm.max_map_count``; ``None`` where
    the system does not expose it)."""
    try:
        with open(_LIMIT) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def release_compiled_if_near_limit(fraction: float = 0.5) -> bool:
    """Empty JAX's caches of compiled programs when this process holds more than ``fraction``
    of its allowed memory mappings (module docstring: XLA:CPU segfaults at the cap).

    Args:
      fraction: the share of ``vm.max_map_count`` above which the caches are emptied, in (0, 1).

    Returns:
      ``True`` when the caches were emptied, ``False`` otherwise (below the threshold, or no
      ``/proc`` to read).
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"`fraction` must be in (0, 1), got {fraction!r}")
    limit = mapping_limit()
    count = mapping_count() if limit is not None else None
    if count is None or limit is None or count < fraction * limit:
        return False
    jax.clear_caches()
    gc.collect()
    return True
