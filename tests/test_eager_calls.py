"""Eager calls of the public metrics compile once and keep memory flat (SPEC §2 calling style).

After a warm-up call, calling a metric or decomposition eagerly on fresh data of the same
shape must compile nothing new: every public function validates its concrete inputs and then
runs module-level compiled cores whose static arguments are declared. Before this test,
``lcce`` and ``calibrated_log_loss`` compiled on every call (fresh closures under vmap and
fori_loop), 200 compilations in 200 calls.
"""

from __future__ import annotations

import logging
import resource

import jax
import numpy as np
import pytest

from benchmarks.eager_calls import CALLS
from benchmarks.eager_calls import make_data as _data


class _CompileCounter(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "Compiling" in record.getMessage():
            self.count += 1


@pytest.mark.parametrize("name", list(CALLS))
def test_eager_calls_compile_once_and_memory_stays_flat(name):
    fn, rng, key = CALLS[name], np.random.default_rng(0), jax.random.key(0)
    for i in range(3):  # warm-up: the first call compiles
        jax.block_until_ready(fn(_data(rng, key, i)))
    counter, logger = _CompileCounter(), logging.getLogger("jax")
    logger.addHandler(counter)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        with jax.log_compiles(True):
            for i in range(3, 203):
                jax.block_until_ready(fn(_data(rng, key, i)))
    finally:
        logger.removeHandler(counter)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
    assert counter.count == 0, f"{name}: {counter.count} compilations in 200 eager calls"
    assert grown_mb < 20, f"{name}: peak RSS grew {grown_mb:.1f} MB over 200 calls"
