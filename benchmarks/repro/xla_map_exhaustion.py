"""Minimal reproduction: XLA:CPU segfaults when a process runs out of memory mappings.

Every executable XLA:CPU compiles keeps its machine code in its own memory mappings (about 18
per small program, measured with JAX 0.10.2 on x86-64 Linux), and JAX keeps each executable
alive in its caches for as long as the jitted function lives. Linux caps the mappings of one
process (``/proc/sys/vm/max_map_count``, 65,530 by default). Once the cap is reached the next
compilation's ``mmap`` fails; XLA logs ``LLVM compilation error: Cannot allocate memory`` and
then dereferences the missing code: a segmentation fault in
``jax/_src/compiler.py::backend_compile_and_load``, not a Python exception. Loading a
persistent-cache entry maps code too, and aborts the same way.

This is the cause of the worker crashes the test suite once saw after many hundreds of tests in
one xdist worker (see ``calib_jax._src.mappings`` for the guard that the tests and the studies
now use). Run it on an idle machine; it needs no privileges and changes no setting::

    python benchmarks/repro/xla_map_exhaustion.py            # crashes: exit status -11
    python benchmarks/repro/xla_map_exhaustion.py --guard    # the same programs, released in time

It compiles distinct small programs (one new input shape each) and keeps them, printing the
process's mapping count, until the cap is reached (about 3,600 programs, a minute or two).
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp


def _mappings() -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


def main(guard: bool) -> None:
    with open("/proc/sys/vm/max_map_count") as f:
        limit = int(f.read())
    print(f"vm.max_map_count = {limit}", flush=True)
    keep = []
    for i in range(4 * limit // 18 + 1000):
        f = jax.jit(lambda x, i=i: jnp.sin(x) * i + jnp.cumsum(x))
        f(jnp.ones(i + 1)).block_until_ready()  # a new shape: a new executable
        keep.append(f)
        if i % 250 == 0:
            print(f"{i:5d} programs alive, {_mappings():6d} mappings", flush=True)
        if guard:
            from calib_jax._src.mappings import release_compiled_if_near_limit

            release_compiled_if_near_limit()
    print("finished without a crash", flush=True)


if __name__ == "__main__":
    main(guard="--guard" in sys.argv[1:])
