"""What the ``calib-jax`` subcommands share: their output folders, their messages and their figures.

* :func:`refuse_overwriting_inputs`, :func:`out_dir` — a command never changes its input files;
* :func:`inert`, :func:`say` — every message is printable text: control and escape sequences
  that come from a file (its name, header or values) are shown as ``\\xNN``;
* :func:`plain_figure_text` — figures show a file's or column's name as written;
* :func:`spark_conf` — ``--spark-conf KEY=VALUE`` settings.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

__all__ = ["refuse_overwriting_inputs", "out_dir", "one_file", "spark_conf", "plain_figure_text", "inert", "say",
           "finite_or_none"]


def refuse_overwriting_inputs(inputs: Sequence[str | os.PathLike[str]],
                              outputs: Sequence[str | os.PathLike[str]]) -> None:
    """Raise ``ValueError`` when an output of a command would replace one of its inputs (the
    same file by path, link or hard link): a command never changes its input files."""
    for o in map(Path, outputs):
        for i in map(Path, inputs):
            # only an existing output can replace an input; samefile sees links and hard links
            if o.exists() and i.exists() and os.path.samefile(o, i):
                raise ValueError(f"{i}: this input would be overwritten by the output {o}; "
                                 "choose another output name or folder")


def out_dir(out: Path) -> Path:
    """``out`` as an output folder: refused (``ValueError`` naming ``--out``) when it exists as a file."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: exists and is not a folder")
    return out


def one_file(log: str | os.PathLike[str]) -> Path:
    """The log of ``--engine arrow``: one file (globs and folders are the query engines' work)."""
    path = Path(log)
    if not path.is_file():
        raise ValueError(f"{path}: the arrow engine reads one file; globs and folders are read by --engine duckdb "
                         "or spark")
    return path


def finite_or_none(values: Sequence[float | None]) -> list[float | None]:
    """``None`` for what is not a finite number (JSON has no NaN: an undefined metric is null)."""
    import math

    return [v if v is not None and math.isfinite(v) else None for v in values]


def spark_conf(items: Sequence[str]) -> list[tuple[str, str]]:
    """``--spark-conf KEY=VALUE`` items as (key, value) pairs; one without ``=`` or a key is refused."""
    out = []
    for item in items:
        k, sep, v = item.partition("=")
        if not sep or not k.strip():
            raise ValueError(f"--spark-conf {item!r}: expected KEY=VALUE")
        out.append((k.strip(), v))
    return out


@contextlib.contextmanager
def plain_figure_text() -> Iterator[None]:
    """Matplotlib settings under which the report's figures show text as given: no mathtext
    (a log named ``a$x^{$.csv`` stops the run otherwise, or shows another name), no LaTeX
    (a user's matplotlibrc may turn it on), and no warning on stderr for a character of the
    name that the font lacks (a control character is drawn as a box)."""
    import warnings

    import matplotlib  # not calib_jax.plotting: its pyplot costs the command a tenth of its start-up

    with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False}), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from font")
        yield


def _escape(c: str) -> str:
    """One character that must not reach a terminal, as a visible escape: ``\\x1b``,
    ``\\u202e``; a byte that was not UTF-8 (a file name's surrogate escape) as ``\\xNN``."""
    cp = ord(c)
    if 0xDC80 <= cp <= 0xDCFF:
        return f"\\x{cp - 0xDC00:02x}"
    if cp < 0x100:
        return f"\\x{cp:02x}"
    return f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}"


def inert(text: str, *, lines: bool = False) -> str:
    """``text`` safe to print on a terminal: every character that is not printable (control
    and escape sequences, bidirectional overrides, zero-width and other format characters,
    undecodable bytes of a file name) becomes a visible escape such as ``\\x1b``.

    Column names, field values and file names come from the user's files; printed raw, an
    escape sequence in them could rewrite the terminal. Every message of the command goes
    through here.

    Args:
      text: the message.
      lines: keep its line breaks (a multi-line summary); otherwise they are escaped too.

    Returns:
      The text with only printable characters (and ``\\n`` when ``lines``).

    Example:
      >>> inert("log\\x1b[2J.csv: column 'p\\u202e' missing")
      "log\\\\x1b[2J.csv: column 'p\\\\u202e' missing"
      >>> print(inert("one\\ntwo\\r", lines=True))
      one
      two\\x0d
    """
    if text.isprintable():
        return text
    out = []
    for c in text:
        out.append(c if c.isprintable() or (lines and c == "\n") else _escape(c))
    return "".join(out)


def say(text: str, *, err: bool = False) -> None:
    """Print a message of the command (stdout, or stderr with ``err``), made inert."""
    print(inert(str(text), lines=True), file=sys.stderr if err else sys.stdout)
