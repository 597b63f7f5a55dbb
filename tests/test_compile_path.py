"""What a compilation goes through when the tests run without a persistent cache.

A worker crash (a segmentation fault while compiling, JAX 0.10.2) had
``jax._src.compiler._compile_and_write_cache`` on its native stack although the tests run with
no persistent compilation cache (``tests/conftest.py``), which read as if the cache were to
blame. It is not: JAX sends every compilation through that function while
``jax_enable_compilation_cache`` is true (its default) and only skips the write when no cache
directory is set. This test pins that reading, so a JAX upgrade that changes the path is noticed
before a crash is diagnosed from a stale premise.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def test_without_a_cache_directory_compilations_pass_through_the_cache_writer_and_store_nothing(monkeypatch):
    from jax._src import compilation_cache, compiler

    assert jax.config.jax_compilation_cache_dir in (None, "")  # the tests' setting
    calls = []
    original = compiler._compile_and_write_cache

    def spy(*args, **kwargs):
        calls.append(kwargs.get("module_name", args[5] if len(args) > 5 else None))
        return original(*args, **kwargs)

    monkeypatch.setattr(compiler, "_compile_and_write_cache", spy)
    # a program no other test compiles (a fresh closure constant), so it is not in memory
    out = jax.jit(lambda x: x * 3.25 - 0.125)(jnp.arange(7.0))
    assert float(out[-1]) == 6 * 3.25 - 0.125
    assert calls, "the compilation no longer passes through _compile_and_write_cache: reread the crash notes"
    assert compilation_cache._cache is None  # nothing persistent was opened, nothing written
