"""How a benchmark writes its page: the same rows as ``<out>.csv`` and as the Markdown table of
``<out>.md`` below the page's text, both written atomically, and the page printed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def write_page(out: str | Path, text: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Write ``<out>.csv`` (``header``, ``rows``) and ``<out>.md`` (``text``, then the rows as a
    Markdown table with 4 significant digits), print the Markdown and return it.

    Example:
      >>> import tempfile
      >>> from pathlib import Path
      >>> out = Path(tempfile.mkdtemp()) / "page"
      >>> md = write_page(out, "# A page\\n\\n", ["n", "s"], [[10, 0.5]])  # doctest: +ELLIPSIS
      # A page
      ...
      >>> out.with_suffix(".csv").read_text().splitlines()
      ['n,s', '10,0.5']
    """
    from calib_jax.io import atomic_write_text, markdown_table, write_csv

    out = Path(out)
    write_csv(out.with_suffix(".csv"), header, rows)
    page = text + markdown_table(header, rows, digits=4) + "\n"
    atomic_write_text(out.with_suffix(".md"), page)
    print(page)
    return page


def conditions(started: float, load_start: float, reference_s: float) -> str:
    """The sentence a page states its measuring conditions in: the seconds since ``started``
    (a ``time.perf_counter()`` reading), the 1-min load average at the start (``load_start``)
    and now, the cores, and the machine reference workload's seconds (``reference_s``, from
    :func:`benchmarks.machine_speed.reference_seconds`).

    Example:
      >>> import time
      >>> conditions(time.perf_counter(), 0.5, 0.016).startswith("Measured in 0 s; 1-min load average 0.50")
      True
    """
    import os
    import time

    return (f"Measured in {time.perf_counter() - started:.0f} s; 1-min load average {load_start:.2f} at the start, "
            f"{os.getloadavg()[0]:.2f} at the end, on {os.cpu_count()} cores; machine reference workload "
            f"(`benchmarks/machine_speed.py`) {1000 * reference_s:.0f} ms.")
