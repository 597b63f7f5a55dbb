"""A fixed reference workload timed beside a benchmark, so that its pages can be compared
across sessions.

The 2-core machines this project is measured on are not all equally fast: on 2026-12-03 an idle
machine ran the unchanged Neural Calibration and MCGrad fits of ``bench_compare_budget`` 15% and
54% slower than the machine of the page it replaced (20.5 s and 14.2 s a head against 17.8 s and
9.2 s), and this workload itself took 86 ms and 108 ms in two runs minutes apart. A page's absolute seconds then
mix the code's change with the machine's. Each page that records :func:`reference_seconds`
says how fast its machine was, and :func:`previous_reference` reads the value from the page
being replaced, so the new page can state the ratio of the two machines beside its own numbers.

The workload depends on nothing in this project: NumPy's sort of 2^21 float32 values and a
1024 x 1024 float32 matrix product (BLAS), best of five.
"""

from __future__ import annotations

import csv
import time
from pathlib import Path

#: the row label under which a page's csv records the reference workload's seconds
ROW_LABEL = "machine reference workload"
DESCRIPTION = "NumPy sort of 2^21 float32 + 1024^2 float32 matmul, best of 5"


def reference_seconds(repeats: int = 5) -> float:
    """Best-of-``repeats`` seconds of the reference workload (about 0.1-0.2 s each).

    Example:
      >>> from benchmarks.machine_speed import reference_seconds
      >>> reference_seconds(repeats=1) > 0
      True
    """
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.random(1 << 21, dtype=np.float32)
    a = rng.random((1024, 1024), dtype=np.float32)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.sort(x)
        a @ a
        best = min(best, time.perf_counter() - t0)
    return best


def cpu_description() -> str:
    """The CPU's model name and whether it has AVX-512 (:func:`calib_jax.io.cpu_description`,
    which every study's provenance records). XLA:CPU's code for the same program differs with
    the vector width, and so does its speed relative to this module's NumPy workload: on
    2026-12-03 an "AMD EPYC" without AVX-512 ran the reference workload in 32-43 ms against
    86-108 ms on one with it, yet a VR-SAG evaluation took longer on it. Pages compare machines
    by both.

    Example:
      >>> from benchmarks.machine_speed import cpu_description
      >>> isinstance(cpu_description(), str)
      True
    """
    from calib_jax.io import cpu_description as describe

    return describe()


def previous_reference(csv_path: Path, column: str = "unit_s") -> float | None:
    """The reference seconds recorded in an existing page's csv (the row with :data:`ROW_LABEL`
    in one of its first three cells), or None when the file or the row is missing."""
    if not Path(csv_path).exists():
        return None
    with Path(csv_path).open(newline="") as f:
        for row in csv.DictReader(f):
            if ROW_LABEL in list(row.values())[:3]:
                try:
                    return float(row[column])
                except (KeyError, TypeError, ValueError):
                    return None
    return None


def comparison_sentence(now: float, before: float | None) -> str:
    """One sentence for a page: this machine's reference seconds and, when the replaced page
    recorded one, how the two machines compare.

    Example:
      >>> from benchmarks.machine_speed import comparison_sentence
      >>> comparison_sentence(0.2, 0.16).split("; ")[1]
      'the page this one replaced recorded 160 ms (time ratio 1.25: this machine is slower).'
    """
    text = f"Machine reference workload ({DESCRIPTION}): {1e3 * now:.0f} ms"
    if before is None:
        return text + "; the page this one replaced recorded none."
    ratio = now / before
    pace = "slower" if ratio > 1.05 else "faster" if ratio < 1 / 1.05 else "about as fast"
    return text + (f"; the page this one replaced recorded {1e3 * before:.0f} ms (time ratio {ratio:.2f}: this machine "
                   f"is {pace}).")
