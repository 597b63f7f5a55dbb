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
