"""What a compilation goes through in a process without a persistent cache.

The test workers' crashes (segmentation faults while compiling, JAX 0.10.2) had
``jax._src.compiler._compile_and_write_cache`` on their native stack with no persistent cache
directory set, which read as if the cache were to blame. It was not: JAX sends every
compilation through that function while ``jax_enable_compilation_cache`` is true (its default)
and only skips the write when no directory is set. The cause was the kernel's cap on memory
mappings (``calib_jax._src.mappings``). This test pins the path, so that a JAX upgrade that
changes it is noticed before a crash is diagnosed from a stale premise.
"""

from __future__ import annotations

import os
import subprocess
import sys

_PROBE = """
import jax, jax.numpy as jnp
from jax._src import compilation_cache, compiler
assert jax.config.jax_compilation_cache_dir in (None, "")
calls = []
original = compiler._compile_and_write_cache
def spy(*args, **kwargs):
    calls.append(1)
    return original(*args, **kwargs)
compiler._compile_and_write_cache = spy
out = jax.jit(lambda x: x * 3.25 - 0.125)(jnp.arange(7.0))
assert float(out[-1]) == 6 * 3.25 - 0.125
assert calls, "the compilation no longer passes through _compile_and_write_cache: reread the crash notes"
assert compilation_cache._cache is None  # nothing persistent was opened, nothing written
print("ok")
"""


def test_without_a_cache_directory_compilations_pass_through_the_cache_writer_and_store_nothing():
    # a fresh process without a cache directory, whatever the caller's JAX_* settings
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    env["JAX_PLATFORMS"] = "cpu"
    r = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]
