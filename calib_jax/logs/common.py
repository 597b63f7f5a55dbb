"""What the ``calib-jax`` subcommands share: their output folders, their messages and their figures.

* :class:`Files` — what a command reads and writes: :func:`calib_jax.cli.main`
  runs every command inside :func:`calib_jax.io.guard_outputs` with them, so the one writer of
  the project refuses an output that would replace an input (before any work, and at every
  write); :data:`REPORT_FILES` and the other names are the files the commands write;
* :func:`out_dir` — an output folder;
* :func:`write_csv`, :func:`csv_cell` — every CSV of the commands, with text that a spreadsheet
  would run as a formula made inert;
* :func:`inert`, :func:`say` — every message is printable text: control and escape sequences
  that come from a file (its name, header or values) are shown as ``\\xNN``;
* :func:`plain_figure_text` — figures show a file's or column's name as written;
* :func:`spark_conf` — ``--spark-conf KEY=VALUE`` settings.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["Files", "REPORT_TABLES", "REPORT_FILES", "INCOMPLETE", "STATE_FILE", "CHECKPOINT",
           "out_dir", "one_file", "spark_conf", "plain_figure_text", "inert", "say", "silent", "finite_or_none",
           "csv_cell", "write_csv", "difference_row"]

#: the tables of a report, each written as ``<name>.csv`` and ``<name>.md``
REPORT_TABLES = ("metrics", "fields", "decompositions", "tests")
#: every file of a report (``evaluate``, ``merge``, and each model of ``compare`` under ``models/``)
REPORT_FILES = ("report.json", "report.md", "report.html", "reliability.png",
                *(f"{t}.{ext}" for t in REPORT_TABLES for ext in ("csv", "md")))
#: present in ``--out`` while a report is being made; removed once every file is written
INCOMPLETE = "INCOMPLETE"
#: the merged statistics of ``evaluate --state-only`` (read by ``merge``)
STATE_FILE = "state.npz"
#: the streamed reader's checkpoint in ``--out`` (``evaluate --resume``)
CHECKPOINT = ".checkpoint.npz"


@dataclasses.dataclass(frozen=True)
class Files:
    """What one run of a command reads and writes: the plan of its output guard
    (:func:`calib_jax.io.guard_outputs`), made by each command module's ``files(options)``.

    Attributes:
      inputs: every file the run reads (the files a pattern or folder resolves to, by
        :func:`calib_jax.logs.inputs.log_files`; parameter and state files).
      outputs: every file the run may write or remove; a write elsewhere is refused.

    Example:
      >>> Files(inputs=(Path("log.csv"),), outputs=(Path("out") / "report.json",)).outputs[0].name
      'report.json'
    """

    inputs: tuple[Path, ...] = ()
    outputs: tuple[Path, ...] = ()

    @staticmethod
    def of(inputs: Iterable[str | os.PathLike[str]], outputs: Iterable[str | os.PathLike[str]]) -> Files:
        """``Files`` from any paths (made :class:`~pathlib.Path`)."""
        return Files(tuple(Path(p) for p in inputs), tuple(Path(p) for p in outputs))


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


#: whether :func:`say` prints (the library's entry points, :mod:`calib_jax.logs`, run silent)
_SPEAK: contextvars.ContextVar[bool] = contextvars.ContextVar("calib_jax_logs_speak", default=True)


def say(text: str, *, err: bool = False) -> None:
    """Print a message of the command (stdout, or stderr with ``err``), made inert; nothing
    inside :func:`silent`."""
    if _SPEAK.get():
        print(inert(str(text), lines=True), file=sys.stderr if err else sys.stdout)


@contextlib.contextmanager
def silent() -> Iterator[None]:
    """Within it, :func:`say` prints nothing (a library call returns its result instead).

    Example:
      >>> with silent():
      ...     say("not shown")
    """
    token = _SPEAK.set(False)
    try:
        yield
    finally:
        _SPEAK.reset(token)


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(x: Any) -> Any:
    """A CSV cell that a spreadsheet will not evaluate: text starting with ``=``, ``+``, ``-``,
    ``@``, a tab or a carriage return gets a leading apostrophe (OWASP's advice against CSV
    injection); other text and numbers are unchanged (a negative number is written as a number).

    Args:
      x: the cell's value.

    Returns:
      The value to write.

    Example:
      >>> print(csv_cell('=HYPERLINK("http://x", "y")'))
      '=HYPERLINK("http://x", "y")
      >>> csv_cell("-site"), csv_cell("\\tx"), csv_cell(-0.5), csv_cell("a=b")
      ("'-site", "'\\tx", -0.5, 'a=b')
    """
    if isinstance(x, str) and x.startswith(_FORMULA_START):
        return "'" + x
    return x


def write_csv(path: str | os.PathLike[str], header: Sequence[str], rows: Sequence[Sequence[Any]]) -> Path:
    """The one CSV writer of the commands: every header and cell through :func:`csv_cell`,
    floats at full precision, ``None`` an empty cell, a NaN or infinite number refused
    (:func:`calib_jax.io.write_csv` with ``allow_nan=False``), written atomically through the
    output guard.

    Args:
      path: the file.
      header: the column names.
      rows: the rows.

    Returns:
      ``path``.

    Example:
      >>> import tempfile
      >>> with tempfile.TemporaryDirectory() as d:
      ...     print(write_csv(Path(d) / "slices.csv", ["slice", "ne"], [["=1+1", 0.5], ["b", None]]).read_text(),
      ...           end="")
      slice,ne
      '=1+1,0.5
      b,
    """
    from calib_jax import io as cio

    return cio.write_csv(path, [csv_cell(h) for h in header], [[csv_cell(v) for v in r] for r in rows],
                         allow_nan=False)


def difference_row(metric: str, a: str, b: str, value_a: Any, value_b: Any, diff: float | None, lo: float | None,
                   hi: float | None, *, lower: bool, undefined: str, no_interval: str) -> dict[str, Any]:
    """One row of the comparison's differences: A − B with its interval, the model the interval
    favours (``better``: A when it excludes 0 on A's side, B on the other, else ``None``) and the
    verdict sentence.

    Args:
      metric: the metric's name.
      a, b: the two models' names.
      value_a, value_b: their values.
      diff, lo, hi: the difference A − B and its interval (``None``: not available).
      lower: whether the smaller value is better.
      undefined: the verdict's words when ``diff`` is missing or not finite.
      no_interval: the reason given when there is a difference but no interval.

    Returns:
      A dict with ``metric, a, b, value_a, value_b, diff, lo, hi, better, direction, verdict``.

    Example:
      >>> from calib_jax.logs.common import difference_row
      >>> difference_row("brier", "new", "prod", 0.10, 0.12, -0.02, -0.03, -0.01, lower=True,
      ...                undefined="", no_interval="")["verdict"]
      'brier: new better (95% CI of new - prod: -0.03 to -0.01)'
    """
    defined = diff is not None and math.isfinite(diff)
    better = None
    if lo is not None and hi is not None and defined:
        if (hi < 0) if lower else (lo > 0):
            better = a
        elif (lo > 0) if lower else (hi < 0):
            better = b
    ci = f" (95% CI of {a} - {b}: {lo:+.4g} to {hi:+.4g})" if lo is not None else ""
    if not defined:
        verdict = f"{metric}: {undefined}"
    elif lo is None:
        verdict = f"{metric}: {a} - {b} = {diff:+.4g} (no interval: {no_interval})"
    elif better is None:
        verdict = f"{metric}: no significant difference{ci}"
    else:
        verdict = f"{metric}: {better} better{ci}"
    return {"metric": metric, "a": a, "b": b, "value_a": value_a, "value_b": value_b, "diff": diff, "lo": lo,
            "hi": hi, "better": better, "direction": "lower" if lower else "higher", "verdict": verdict}

