"""Plotting: functions take data (and an optional ``ax``) and return the figure; only
:func:`save_figure` writes files (PNG + PDF, atomically).

Text given by the caller (titles, axis and tick labels, legend entries, captions) is shown as
given: no mathtext and no LaTeX, so a ``$`` is a dollar sign. Such text is often a file,
field or metric name, and one with two ``$`` would otherwise render as math or stop the
figure with a parse error.
"""

from __future__ import annotations

import io as _io
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from calib_jax.io import atomic_write_bytes, check_targets  # noqa: E402

__all__ = ["save_figure", "plt"]


def save_figure(fig: matplotlib.figure.Figure, stem: str | os.PathLike[str], *, dpi: int = 150) -> list[Path]:
    """Write ``stem.png`` and ``stem.pdf`` atomically and close the figure.

    Both files are rendered in memory with ``bbox_inches="tight"`` and written with
    :func:`calib_jax.io.atomic_write_bytes`; the PDF's creation date and the PNG's software
    tag are dropped, so saving the same figure again gives byte-identical files. Host
    code; not jit-able.

    Args:
      fig: the matplotlib figure (closed afterwards, so do not reuse it); anything else raises
        ``ValueError``.
      stem: the path without suffix (any suffix is replaced); parent directories are created.
      dpi: resolution of the PNG in dots per inch, an int >= 1.

    Returns:
      ``[stem.png, stem.pdf]`` as :class:`pathlib.Path` objects. A target that is a folder
      raises ``ValueError`` before either file is written; the figure is closed either way.

    Example:
      >>> import tempfile
      >>> from pathlib import Path
      >>> from calib_jax.plotting import plt, save_figure
      >>> fig, ax = plt.subplots(figsize=(2, 2))
      >>> _ = ax.plot([0, 1], [0, 1])
      >>> with tempfile.TemporaryDirectory() as d:
      ...     paths = save_figure(fig, Path(d) / "diagonal", dpi=50)
      ...     print([p.name for p in paths], all(p.stat().st_size > 0 for p in paths))
      ['diagonal.png', 'diagonal.pdf'] True
      >>> plt.fignum_exists(fig.number)  # closed
      False
    """
    if not isinstance(fig, matplotlib.figure.Figure):  # None failed as an AttributeError, naming nothing
        raise ValueError(f"`fig` must be a matplotlib Figure, got {type(fig).__name__}")
    stem = Path(stem)
    try:
        if isinstance(dpi, bool) or not isinstance(dpi, int | float) or not dpi >= 1:
            raise ValueError(f"`dpi` must be a number >= 1, got {dpi!r}")
        # both files rendered and both targets checked before the first write: a folder named
        # stem.pdf left stem.png written beside the error
        check_targets([stem.with_suffix(".png"), stem.with_suffix(".pdf")])
        data = {}
        for ext in ("png", "pdf"):
            buf = _io.BytesIO()
            # PDFs carry a creation date by default; drop it so reruns are byte-identical.
            meta = {"CreationDate": None} if ext == "pdf" else {"Software": None}
            fig.savefig(buf, format=ext, dpi=dpi, bbox_inches="tight", metadata=meta)
            data[ext] = buf.getvalue()
        return [atomic_write_bytes(stem.with_suffix(f".{ext}"), b) for ext, b in data.items()]
    finally:
        plt.close(fig)
