"""Plotting: functions take data (and an optional ``ax``) and return the figure; only
:func:`save_figure` writes files (PNG + PDF, atomically)."""

from __future__ import annotations

import io as _io
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from calib_jax.io import atomic_write_bytes  # noqa: E402

__all__ = ["save_figure", "plt"]


def save_figure(fig: matplotlib.figure.Figure, stem: str | os.PathLike[str], *, dpi: int = 150) -> list[Path]:
    """Write ``stem.png`` and ``stem.pdf`` atomically and close the figure."""
    stem = Path(stem)
    out = []
    for ext in ("png", "pdf"):
        buf = _io.BytesIO()
        # PDFs carry a creation date by default; drop it so reruns are byte-identical.
        meta = {"CreationDate": None} if ext == "pdf" else {"Software": None}
        fig.savefig(buf, format=ext, dpi=dpi, bbox_inches="tight", metadata=meta)
        out.append(atomic_write_bytes(stem.with_suffix(f".{ext}"), buf.getvalue()))
    plt.close(fig)
    return out
