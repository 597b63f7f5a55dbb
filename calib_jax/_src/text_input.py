"""Text files read whole as UTF-8, their decoding errors named by file and line (the MovieLens
and Open Bandit loaders)."""

from __future__ import annotations

from pathlib import Path


def read_utf8(path: Path, note: str = "") -> str:
    """The text of ``path`` decoded as UTF-8; a byte that is not UTF-8 raises ``ValueError``
    naming the file, its line and the byte (with ``note`` appended), where Python's
    ``UnicodeDecodeError`` named neither file nor line."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise ValueError(f"{path}, line {line}: not UTF-8 text (byte {data[e.start]:#x}){note}") from None
