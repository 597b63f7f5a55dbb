"""Minimal reproduction: XLA:CPU segfaults when a process runs out of memory mappings.

Every executable XLA:CPU compiles keeps its machine code in memory mappings of its own (6 for
this script's program, 18-24 for programs of other shapes measured with JAX 0.10.2 on x86-64
Linux), and JAX keeps each executable
alive in its caches for as long as the jitted function lives. Linux caps the mappings of one
process (``/proc/sys/vm/max_map_count``, 65,530 by default). Once the cap is reached the next
compilation's ``mmap`` fails; XLA logs ``LLVM compilation error: Cannot allocate memory`` and
then dereferences the missing code: a segmentation fault in
``jax/_src/compiler.py::backend_compile_and_load``, not a Python exception. Loading a
persistent-cache entry maps code too, and aborts the same way.

This is the cause of the worker crashes the test suite once saw after many hundreds of tests in
one xdist worker (see ``calib_jax._src.mappings`` for the guard that the tests and the studies
now use). It compiles distinct small programs (a new jitted function each) and keeps them,
printing the process's mapping count, until the cap is reached: about 11,000 programs (20
minutes) at the default cap, seconds with ``--limit`` (root: it lowers ``vm.max_map_count`` for
its run and restores it; run it on an otherwise idle machine, as every process is affected)::

    python benchmarks/repro/xla_map_exhaustion.py --limit 4000           # dies: exit status -11
    python benchmarks/repro/xla_map_exhaustion.py --limit 4000 --guard   # finishes
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp


def _mappings() -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


def main(guard: bool, new_limit: int | None) -> int:
    """With ``new_limit``: lower the cap, compile in a child process (a segfault there must
    not keep this process from restoring the cap), restore it, return the child's status."""
    if new_limit is None:
        _compile_until_the_cap(guard)
        return 0
    import subprocess

    with open("/proc/sys/vm/max_map_count") as f:
        old = f.read().strip()
    with open("/proc/sys/vm/max_map_count", "w") as f:
        f.write(str(new_limit))
    try:
        child = subprocess.run([sys.executable, "-X", "faulthandler", __file__, *(["--guard"] if guard else [])])
    finally:
        with open("/proc/sys/vm/max_map_count", "w") as f:
            f.write(old)
    print(f"exit status {child.returncode}; vm.max_map_count restored to {old}", flush=True)
    return child.returncode


def _compile_until_the_cap(guard: bool) -> None:
    with open("/proc/sys/vm/max_map_count") as f:
        limit = int(f.read())
    print(f"vm.max_map_count = {limit}", flush=True)
    keep = []
    x = jnp.ones(16)
    for i in range(limit // 4 + 1000):
        fn = jax.jit(lambda x, i=i: jnp.sin(x) * i + jnp.cumsum(x))
        fn(x).block_until_ready()  # a new function: a new executable
        keep.append(fn)
        if i % 250 == 0:
            print(f"{i:5d} programs alive, {_mappings():6d} mappings", flush=True)
        if guard:
            from calib_jax._src.mappings import release_compiled_if_near_limit

            release_compiled_if_near_limit()
    print("finished without a crash", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    raise SystemExit(main(guard="--guard" in args,
                          new_limit=int(args[args.index("--limit") + 1]) if "--limit" in args else None))
