"""File output for experiments: atomic writes, tables, provenance records.

This is the only library module (with ``calib_jax.data``) that touches the file system.
Every writer goes through :func:`atomic_output` (:func:`atomic_write_bytes` and the others
call it): the content is written to a temporary file in the target directory, flushed and
fsynced, then moved into place with ``os.replace`` so an interrupted run never leaves a
half-written output. While a :func:`guard_outputs` block is active (every ``calib-jax``
command runs in one), the same writer refuses a target that is one of the block's input files
and one that the block did not declare, so no output can replace an input.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import decimal
import io as _io
import json
import os
import platform
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_output",
    "atomic_output_dir",
    "guard_outputs",
    "OutputGuard",
    "exclusive_target",
    "fresh_outputs",
    "OUTPUTS_LIST",
    "check_output",
    "remove_output",
    "write_json",
    "write_csv",
    "check_targets",
    "markdown_table",
    "latex_table",
    "write_table",
    "provenance",
    "git_commit",
    "cpu_description",
    "figures_dir",
    "enable_compile_cache",
    "COMPILE_CACHE_ENV",
]

#: the persistent XLA compilation cache (set to an empty string to disable)
COMPILE_CACHE_ENV = "CALIB_JAX_XLA_CACHE"
#: the persistent compilation cache's size limit (least recently used entries are evicted)
COMPILE_CACHE_MAX_BYTES = 8 << 30

_PACKAGES = ("jax", "jaxlib", "optax", "flax", "numpy", "scipy", "sympy", "matplotlib")


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temp file + fsync + ``os.replace``).

    Readers see either the old file or the complete new one, never a partial write (see
    :func:`atomic_output`); the file gets the permissions of a normally written one (those
    of the file it replaces, else ``0666 & ~umask``). Host file I/O; not jit-able.

    Args:
      path: the file to write; its parent directories are created, an existing file is
        replaced.
      data: the bytes to write (a bytes-like object; a ``str`` raises ``ValueError``).

    Returns:
      ``path`` as a :class:`pathlib.Path`.

    Example:
      >>> import tempfile
      >>> from pathlib import Path
      >>> from calib_jax.io import atomic_write_bytes
      >>> with tempfile.TemporaryDirectory() as d:
      ...     path = atomic_write_bytes(Path(d) / "sub" / "blob.bin", b"abc")
      ...     print(path.name, path.read_bytes())
      blob.bin b'abc'
    """
    if isinstance(data, str):  # memoryview's TypeError named neither the argument nor the fix
        raise ValueError("`data` must be bytes, got a str (use atomic_write_text, or encode it)")
    with atomic_output(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Atomic UTF-8 text write.

    :func:`atomic_write_bytes` of ``text.encode("utf-8")`` (no newline translation). Host
    file I/O; not jit-able.

    Args:
      path: the file to write (parent directories are created).
      text: the text to write, a ``str`` that UTF-8 can encode (else ``ValueError``).

    Returns:
      ``path`` as a :class:`pathlib.Path`.

    Example:
      >>> import tempfile
      >>> from pathlib import Path
      >>> from calib_jax.io import atomic_write_text
      >>> with tempfile.TemporaryDirectory() as d:
      ...     print(atomic_write_text(Path(d) / "note.txt", "ece = 0.01").read_text(encoding="utf-8"))
      ece = 0.01
    """
    if not isinstance(text, str):
        raise ValueError(f"`text` must be a str, got {type(text).__name__}")
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as err:  # a lone surrogate
        raise ValueError(f"`text` for {path} cannot be written as UTF-8 ({err})") from None
    return atomic_write_bytes(path, data)


def _jsonable(x: Any, _open: frozenset[int] = frozenset()) -> Any:
    if isinstance(x, Mapping | list | tuple):
        if id(x) in _open:  # a container inside itself: Python's RecursionError named nothing
            raise ValueError("the object holds itself (a circular reference): JSON cannot write it")
        _open = _open | {id(x)}
    if isinstance(x, Mapping):
        out = {}
        for k, v in x.items():
            if str(k) in out:  # {1: a, "1": b} would keep one of them
                raise ValueError(f"two keys are both written as {str(k)!r} in JSON (keys are text): {list(x)}")
            out[str(k)] = _jsonable(v, _open)
        return out
    if isinstance(x, list | tuple):
        return [_jsonable(v, _open) for v in x]
    if isinstance(x, np.generic):  # a NumPy complex or datetime gives a Python object JSON has no form for
        value = x.item()
        return value if isinstance(value, float | int | str | bool) or value is None else str(value)
    if isinstance(x, np.ndarray):
        return x.tolist()
    if hasattr(x, "__array__") and hasattr(x, "shape"):
        return np.asarray(x).tolist()
    if isinstance(x, Path):
        return str(x)
    if isinstance(x, float | int | str | bool) or x is None:
        return x
    return repr(x)


def write_json(path: str | os.PathLike[str], obj: Any, *, allow_nan: bool = True) -> Path:
    """Atomic JSON write (NumPy/JAX values converted to plain Python).

    Mappings become objects (keys as strings), lists and tuples arrays, NumPy scalars and
    arrays (and JAX arrays) numbers and nested lists (a NumPy complex or date its text), paths
    strings, and any other object its ``repr``; a mapping or list that holds itself raises
    ``ValueError``. Written indented by 2 with a final newline. Host file I/O; not jit-able.

    Args:
      path: the file to write (parent directories are created).
      obj: the value to write. Two keys of one mapping that write as the same text (``1`` and
        ``"1"``) raise ``ValueError``: JSON would keep one of them.
      allow_nan: ``False`` writes strict JSON (RFC 8259): a NaN or infinite float anywhere
        in ``obj`` raises ``ValueError`` naming the file and where the value is, and nothing
        is written (the ``calib-jax`` report does so). ``True`` (default) writes them as the
        ``NaN`` / ``Infinity`` tokens of Python's :mod:`json`, which strict JSON readers reject.

    Returns:
      ``path`` as a :class:`pathlib.Path`.

    Example:
      >>> import json, tempfile
      >>> from pathlib import Path
      >>> import numpy as np
      >>> from calib_jax.io import write_json
      >>> with tempfile.TemporaryDirectory() as d:
      ...     path = write_json(Path(d) / "run.json", {"seed": np.int64(0), "ece": np.array([0.5, 0.25])})
      ...     print(json.loads(path.read_text()))
      {'seed': 0, 'ece': [0.5, 0.25]}
    """
    plain = _jsonable(obj)
    if not allow_nan:
        where = _first_non_finite(plain)
        if where is not None:
            raise ValueError(f"{path}: {where} is not a finite number; strict JSON has no NaN or infinity")
    return atomic_write_text(path, json.dumps(plain, indent=2, sort_keys=False, allow_nan=allow_nan) + "\n")


def _first_non_finite(x: Any, at: str = "the value") -> str | None:
    """Where the first NaN or infinite float of a plain JSON value is (``the value["a"][2]``)."""
    if isinstance(x, float):
        return None if np.isfinite(x) else f"{at} ({x!r})"
    items = x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, list) else ()
    for k, v in items:
        found = _first_non_finite(v, f"{at}[{k!r}]")
        if found is not None:
            return found
    return None


def _scalar(v: Any) -> Any:
    """A table cell as a plain Python value: NumPy and JAX scalars and 0-d arrays (bfloat16
    included) and ``Decimal`` become ``float`` / ``int`` / ``bool``; anything else is kept."""
    if isinstance(v, decimal.Decimal):
        return float(v)
    if not isinstance(v, np.generic) and hasattr(v, "__array__") and getattr(v, "shape", None) == ():
        v = np.asarray(v)[()]
    if isinstance(v, np.generic):
        if np.dtype(v.dtype).kind in "biuSUOcMm":
            return v.item()
        try:  # float16/32/64, and ml_dtypes' bfloat16 (a kind "V" scalar)
            return float(v)
        except (TypeError, ValueError):
            return v
    return v


def _check_rows(header: Any, rows: Any, what: str) -> tuple[list[Any], list[list[Any]]]:
    """The header and rows as lists, each row as long as the header: a ``str`` given for either
    was written one character a cell, and a short row under a longer header shifted nothing
    but left its columns unnamed."""
    if isinstance(header, str | bytes) or not isinstance(header, Sequence | np.ndarray):
        raise ValueError(f"{what}: `header` must be a list of column names, got {type(header).__name__} {header!r}")
    header = list(header)
    out = []
    for i, r in enumerate(rows):
        if isinstance(r, str | bytes) or not isinstance(r, Sequence | np.ndarray):
            raise ValueError(f"{what}: row {i} must be a list of cells, got {type(r).__name__} {r!r}")
        r = list(r)
        if len(r) != len(header):
            raise ValueError(f"{what}: row {i} has {len(r)} cells under a header of {len(header)} columns")
        out.append(r)
    return header, out


def _fmt(v: Any, digits: int) -> str:
    """``digits`` decimals; a non-zero value that would print as zero keeps 3 significant
    digits in scientific notation (LCCE differences are ~1e-7); ``None`` (not applicable) is
    an empty cell, as in the CSV."""
    v = _scalar(v)
    if v is None:
        return ""
    if isinstance(v, float | np.floating):
        if not np.isfinite(v):
            return str(v)
        fv = float(v)
        if fv != 0.0 and abs(fv) < 0.5 * 10.0 ** (-digits):
            return f"{fv:.2e}"
        return f"{fv:.{digits}f}"
    return str(v)


def write_csv(path: str | os.PathLike[str], header: Sequence[str], rows: Sequence[Sequence[Any]], *,
              allow_nan: bool = True) -> Path:
    """Atomic CSV write with full float precision (repr).

    Floats (Python or NumPy) are written with ``repr`` so they read back exactly; other
    values with ``str``, and ``None`` as an empty cell. Rows end in ``\\n``; a cell holding a
    line break (``\\n`` or ``\\r``), a comma or a quote is quoted. Host file I/O; not jit-able.

    Args:
      path: the file to write (parent directories are created).
      header: the column names (a list: one ``str`` raises ``ValueError``).
      rows: the rows, each a sequence of values as long as the header (else ``ValueError``
        naming the row). NumPy and JAX scalars and 0-d arrays are written as the Python
        numbers they hold.
      allow_nan: ``False``: a NaN or infinite float raises ``ValueError`` (naming its row and
        column) and nothing is written, instead of a ``nan`` / ``inf`` cell.

    Returns:
      ``path`` as a :class:`pathlib.Path`.

    Example:
      >>> import tempfile
      >>> from pathlib import Path
      >>> from calib_jax.io import write_csv
      >>> with tempfile.TemporaryDirectory() as d:
      ...     path = write_csv(Path(d) / "res.csv", ["method", "ece", "n"], [["platt", 0.1 + 0.2, 100]])
      ...     print(path.read_text(), end="")
      method,ece,n
      platt,0.30000000000000004,100
    """
    # rows end in "\n"; the writer is told "\r\n" so that it quotes a cell holding either (told
    # "\n", it writes a lone "\r" unquoted, which readers take for a line break)
    row = _io.StringIO()
    w = csv.writer(row, lineterminator="\r\n")

    def line(cells: Sequence[Any]) -> str:
        row.seek(0)
        row.truncate()
        w.writerow(cells)
        return row.getvalue()[:-2] + "\n"

    header, table = _check_rows(header, rows, str(path))
    out = [line(header)]
    for i, r in enumerate(table):
        r = [_scalar(v) for v in r]
        if not allow_nan:
            for j, v in enumerate(r):
                if isinstance(v, float | np.floating) and not np.isfinite(v):
                    raise ValueError(f"{path}: row {i}, column {header[j]!r} is {v!r}: not a finite number")
        out.append(line([repr(float(v)) if isinstance(v, float | np.floating) else v for v in r]))
    return atomic_write_text(path, "".join(out))


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]], *, digits: int = 4) -> str:
    """A GitHub-flavoured Markdown table; floats rounded to ``digits``.

    A non-zero float that would round to zero is written with 3 significant digits in
    scientific notation instead; ``None`` is an empty cell; other values use ``str``.

    Args:
      header: the column names.
      rows: the rows, each a sequence of values as long as the header (else ``ValueError``).
        A ``|`` in a cell is escaped (``\\|``), so it does not start another column, and a
        line break is written as ``<br>``, so it does not end the row.
      digits: decimals of the floats, an int >= 0.

    Returns:
      The table as a string ending with a newline.

    Example:
      >>> from calib_jax.io import markdown_table
      >>> print(markdown_table(["method", "ece", "n"], [["platt", 0.012345, 1000], ["none", 3e-7, None]]), end="")
      | method | ece | n |
      |---|---|---|
      | platt | 0.0123 | 1000 |
      | none | 3.00e-07 |  |
    """
    digits = _check_digits(digits)
    header, table = _check_rows(header, rows, "markdown_table")
    lines = ["| " + " | ".join(_markdown_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    for r in table:
        lines.append("| " + " | ".join(_markdown_cell(_fmt(v, digits)) for v in r) + " |")
    return "\n".join(lines) + "\n"


def _markdown_cell(text: Any) -> str:
    """A cell's text: ``|`` escaped (it started another column) and each line break as ``<br>``
    (it ended the row there)."""
    return "<br>".join(str(text).replace("|", "\\|").splitlines())


def _check_digits(digits: Any) -> int:
    if isinstance(digits, bool) or not isinstance(digits, int | np.integer) or digits < 0:
        raise ValueError(f"`digits` must be an int >= 0, got {digits!r}")
    return int(digits)


def latex_table(header: Sequence[str], rows: Sequence[Sequence[Any]], *, digits: int = 4) -> str:
    r"""A booktabs LaTeX tabular; floats rounded to ``digits``.

    The first column is left-aligned, the others right-aligned; ``_``, ``%`` and ``&`` are
    escaped in every cell; values are formatted as in :func:`markdown_table`. The
    ``booktabs`` package provides ``\toprule``.

    Args:
      header: the column names.
      rows: the rows, each a sequence of values.
      digits: decimals of the floats, an int >= 0.

    Returns:
      The ``tabular`` environment as a string ending with a newline.

    Example:
      >>> from calib_jax.io import latex_table
      >>> print(latex_table(["method", "ece_l1"], [["platt", 0.012345]], digits=3), end="")
      \begin{tabular}{lr}
      \toprule
      method & ece\_l1 \\
      \midrule
      platt & 0.012 \\
      \bottomrule
      \end{tabular}
    """
    digits = _check_digits(digits)
    header, rows = _check_rows(header, rows, "latex_table")
    esc = lambda s: str(s).replace("_", r"\_").replace("%", r"\%").replace("&", r"\&")
    out = [r"\begin{tabular}{" + "l" + "r" * (len(header) - 1) + "}", r"\toprule"]
    out.append(" & ".join(esc(h) for h in header) + r" \\")
    out.append(r"\midrule")
    for r in rows:
        out.append(" & ".join(esc(_fmt(v, digits)) for v in r) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(out) + "\n"


def write_table(
    stem: str | os.PathLike[str],
    header: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    digits: int = 4,
    latex: bool = False,
) -> list[Path]:
    """Write ``stem.csv`` and ``stem.md`` (and ``stem.tex`` if ``latex``) atomically.

    The CSV keeps full precision (:func:`write_csv`); the Markdown and LaTeX tables round
    floats to ``digits`` (:func:`markdown_table`, :func:`latex_table`). Host file I/O; not
    jit-able.

    Args:
      stem: the path without suffix (any suffix is replaced); parent directories are created.
      header: the column names.
      rows: the rows, each a sequence of values.
      digits: decimals of the floats in the Markdown and LaTeX tables.
      latex: also write the LaTeX table.

    Returns:
      The written paths, ``[stem.csv, stem.md]`` plus ``stem.tex`` with ``latex``.

    Example:
      >>> import tempfile
      >>> from pathlib import Path
      >>> from calib_jax.io import write_table
      >>> with tempfile.TemporaryDirectory() as d:
      ...     paths = write_table(Path(d) / "results", ["method", "ece"], [["platt", 0.0123]], latex=True)
      ...     print([p.name for p in paths])
      ['results.csv', 'results.md', 'results.tex']
    """
    stem = Path(stem)
    # every text made and every target checked before the first write: a bad ``digits`` or a
    # folder named stem.md left stem.csv written beside an error
    texts = {".md": markdown_table(header, rows, digits=digits)}
    if latex:
        texts[".tex"] = latex_table(header, rows, digits=digits)
    check_targets([stem.with_suffix(ext) for ext in (".csv", *texts)])
    paths = [write_csv(stem.with_suffix(".csv"), header, rows)]
    paths += [atomic_write_text(stem.with_suffix(ext), text) for ext, text in texts.items()]
    return paths


def check_targets(paths: Sequence[str | os.PathLike[str]]) -> None:
    """Before a write of several files: ``ValueError`` naming the first target that is a folder
    or whose parent is a file, so that a later target's failure does not leave the earlier ones
    written. Host file I/O; not jit-able.

    Args:
      paths: the files about to be written.

    Returns:
      None; it raises ``ValueError`` or writes nothing.

    Example:
      >>> import tempfile
      >>> from pathlib import Path
      >>> from calib_jax.io import check_targets
      >>> with tempfile.TemporaryDirectory() as d:
      ...     (Path(d) / "t.md").mkdir()
      ...     try:
      ...         check_targets([Path(d) / "t.csv", Path(d) / "t.md"])
      ...     except ValueError as e:
      ...         print(str(e).replace(d, "D"))
      D/t.md: is a folder, not a file to write
    """
    for p in map(Path, paths):
        if p.is_dir():
            raise ValueError(f"{p}: is a folder, not a file to write")
        parent = next((a for a in p.parents if a.exists()), None)
        if parent is not None and not parent.is_dir():
            raise ValueError(f"{p}: {parent} is a file, not a folder")


def git_commit(cwd: str | os.PathLike[str] | None = None) -> str:
    """The current git commit (with ``-dirty`` if tracked files outside ``figures/`` and
    ``runs/`` have changes: a study rewriting its own committed outputs, or removing the
    committed stages of a run it just finished, does not make its code dirty), or
    ``"unknown"``.

    Runs ``git`` in a subprocess (host code; not jit-able); only changes under ``cwd`` count.

    Args:
      cwd: the directory to ask (default the current directory).

    Returns:
      The 40-hex-digit commit, ``"<commit>-dirty"``, or ``"unknown"`` outside a git
      repository or without ``git``.

    Example:
      >>> import tempfile
      >>> from calib_jax.io import git_commit
      >>> with tempfile.TemporaryDirectory() as d:  # not a repository
      ...     print(git_commit(d))
      unknown
    """
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)figures", ":(exclude)runs"],
            cwd=cwd, capture_output=True, text=True, check=True,
        ).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def provenance(config: Mapping[str, Any], *, seed: int | None, wall_time_s: float | None = None,
               extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A provenance record: config, seed, package versions, git commit, devices, wall time.

    Meant to be written next to results with :func:`write_json`. Host code; not jit-able.

    Args:
      config: the run's settings (copied into ``"config"``).
      seed: the run's seed, or None.
      wall_time_s: the run's wall time in seconds, or None.
      extra: optional further entries, added at the top level (they override the keys
        above).

    Returns:
      A dict with ``config``, ``seed``, ``created_utc`` (ISO 8601, seconds), ``git_commit``
      (of the current directory, see :func:`git_commit`), ``python``, ``platform``,
      ``packages`` (versions of jax, jaxlib, optax, flax, numpy, scipy, sympy, matplotlib;
      None if not installed), ``devices`` (JAX devices), ``x64`` and ``wall_time_s``, plus
      ``extra``. A process that never loaded JAX (a ``calib-jax evaluate`` report computed
      in NumPy from an engine's statistics) records no devices and ``x64`` None: JAX is not
      loaded for the record's sake.

    Example:
      >>> from calib_jax.io import provenance
      >>> rec = provenance({"n_bins": 15}, seed=0, wall_time_s=1.5, extra={"study": "demo"})
      >>> rec["config"], rec["seed"], rec["study"], "jax" in rec["packages"]
      ({'n_bins': 15}, 0, 'demo', True)
    """
    import sys

    if not isinstance(config, Mapping):  # None failed as "'NoneType' object is not iterable"
        raise ValueError(f"`config` must be a mapping of the run's settings, got {type(config).__name__}")
    versions: dict[str, str | None] = {}
    for p in _PACKAGES:
        try:
            versions[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            versions[p] = None
    rec: dict[str, Any] = {
        "config": dict(config),
        "seed": seed,
        "created_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu_description(),
        "packages": versions,
        "devices": [],
        "x64": None,
        "wall_time_s": wall_time_s,
    }
    if "jax" in sys.modules:
        import jax

        rec["devices"] = [str(d) for d in jax.devices()]
        rec["x64"] = bool(jax.numpy.zeros(()).dtype == jax.numpy.float64)
    if extra:
        rec.update(extra)
    return rec


def cpu_description() -> str:
    """The CPU's model name and whether it has AVX-512, from ``/proc/cpuinfo`` (``platform``'s
    processor name elsewhere, or "unknown CPU").

    XLA:CPU compiles one program to other machine code for another vector width, and the
    floating-point sums round differently: a study that trains a network (the simulator's null
    world trains its backbone) can give other numbers on another CPU type with the same seed and
    code, while repeating to the bit on one machine. Every provenance records it
    (:func:`provenance`) so that two runs' numbers are compared knowing whether their CPUs
    differ.

    Returns:
      For example ``"AMD EPYC (AVX-512: no)"``.

    Example:
      >>> from calib_jax.io import cpu_description
      >>> isinstance(cpu_description(), str)
      True
    """
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown CPU"
    names = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")]
    flags = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return f"{names[0] if names else 'unknown CPU'} (AVX-512: {'yes' if ' avx512f' in flags else 'no'})"


def figures_dir(study: str, root: str | os.PathLike[str] | None = None) -> Path:
    """``<root>/figures/<study>`` (root defaults to the current directory).

    The directory is created (with its parents) if missing. Host file I/O; not jit-able.

    Args:
      study: the study's name (one directory level, or a relative path without ``..``: the
        folder stays inside ``figures/``, else ``ValueError``).
      root: the directory holding ``figures/`` (default the current directory).

    Returns:
      The directory as a :class:`pathlib.Path`.

    Example:
      >>> import tempfile
      >>> from calib_jax.io import figures_dir
      >>> with tempfile.TemporaryDirectory() as d:
      ...     out = figures_dir("reliability", root=d)
      ...     print(out.relative_to(d).as_posix(), out.is_dir())
      figures/reliability True
    """
    if not isinstance(study, str | os.PathLike):  # None failed in Path's words
        raise ValueError(f"`study` must be a relative path inside figures/ (a str), got {type(study).__name__}")
    base = Path(root) if root is not None else Path.cwd()
    rel = Path(study)
    if not str(study) or rel.is_absolute() or ".." in rel.parts:  # "../../x" made a folder outside figures/
        raise ValueError(f"`study` must be a relative path inside figures/, got {study!r}")
    d = base / "figures" / rel
    d.mkdir(parents=True, exist_ok=True)
    return d


class Timer:
    """Context manager measuring wall time in seconds (``.seconds``)."""

    def __enter__(self) -> Timer:
        self._t0 = time.perf_counter()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._t0


def _umask() -> int:
    """The process umask, read without changing it for other threads where Linux allows
    (the ``Umask:`` line of ``/proc/self/status``, Linux 4.7+); elsewhere set and restored
    at once under a lock (the only portable way to read it)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o077)
        os.umask(mask)
    return mask


_UMASK_LOCK = threading.Lock()


def _path_list(paths: Any, name: str) -> list[str | os.PathLike[str]]:
    """Paths as a list: one ``str`` or path-like is one path (not its characters)."""
    if isinstance(paths, str | bytes | os.PathLike):
        return [paths]  # type: ignore[list-item]
    try:
        out = list(paths)
    except TypeError:
        raise ValueError(f"`{name}` must be a path or a list of paths, got {type(paths).__name__}") from None
    for p in out:
        if not isinstance(p, str | os.PathLike):
            raise ValueError(f"`{name}` must hold paths, got {type(p).__name__} {p!r}")
    return out


class OutputGuard:
    """The input files of a run and the files it declared it writes (see :func:`guard_outputs`).

    An input is known by its file identity (device and inode, ``os.stat`` following symbolic
    links), so a target that is the input under another name (a symbolic or hard link, ``..``
    in the path) is recognised as it; a declared output by its absolute path.

    Args:
      inputs: the files the run reads; a path that does not exist, or a folder, is skipped
        (nothing there can be replaced by a file).
      outputs: every file the run may write or remove, or ``None`` (any target that is not
        an input).

    Example:
      >>> import tempfile
      >>> from pathlib import Path
      >>> from calib_jax.io import OutputGuard
      >>> with tempfile.TemporaryDirectory() as d:
      ...     log = Path(d) / "log.csv"
      ...     _ = log.write_text("p,y\\n0.5,1\\n")
      ...     guard = OutputGuard([log], [Path(d) / "report.json"])
      ...     print(guard.input_at(Path(d) / "." / "log.csv") == log, guard.input_at(Path(d) / "report.json"))
      True None
    """

    def __init__(self, inputs: Iterable[str | os.PathLike[str]],
                 outputs: Iterable[str | os.PathLike[str]] | None = None) -> None:
        # one path given as a str is one path: iterated, its characters were the inputs, and the
        # file itself unguarded (so overwritten inside the block)
        inputs = _path_list(inputs, "inputs")
        outputs = None if outputs is None else _path_list(outputs, "outputs")
        self.inputs: dict[tuple[int, int], Path] = {}
        for f in inputs:
            st = _stat(f)
            if st is not None and not stat.S_ISDIR(st.st_mode):
                self.inputs.setdefault((st.st_dev, st.st_ino), Path(f))
        self.outputs = None if outputs is None else frozenset(os.path.abspath(o) for o in outputs)

    def input_at(self, path: str | os.PathLike[str]) -> Path | None:
        """The input file that ``path`` is (by device and inode), or ``None``."""
        st = _stat(path)
        return None if st is None else self.inputs.get((st.st_dev, st.st_ino))

    def check(self, path: str | os.PathLike[str]) -> None:
        """Refuse ``path`` as a target: ``ValueError`` naming the input and the output when it
        is an input file; ``RuntimeError`` when the run did not declare it (a programming
        error: an output that the up-front check of :func:`guard_outputs` never saw)."""
        if self.outputs is not None and os.path.abspath(path) not in self.outputs:
            raise RuntimeError(f"{path}: not among the outputs this command declared (calib_jax.io.guard_outputs); "
                               "nothing was written to it")
        inp = self.input_at(path)
        if inp is not None:
            raise ValueError(f"{inp}: this input would be overwritten by the output {path}; choose another output "
                             "name or folder")

    def check_declared(self) -> None:
        """:meth:`check` every declared output (in sorted order): the up-front refusal."""
        for o in sorted(self.outputs or ()):
            self.check(o)


def _stat(path: str | os.PathLike[str]) -> os.stat_result | None:
    """``os.stat(path)`` (links followed), or ``None`` where nothing can be reached there (a
    missing file or folder, a dangling link, a file where a folder should be, a name the
    system refuses)."""
    try:
        return os.stat(path)
    except (OSError, ValueError):
        return None


_GUARDS: list[OutputGuard] = []
_GUARDS_LOCK = threading.Lock()


@contextlib.contextmanager
def guard_outputs(inputs: Iterable[str | os.PathLike[str]],
                  outputs: Iterable[str | os.PathLike[str]] | None = None) -> Iterator[OutputGuard]:
    """Within the block, every write of this module (:func:`atomic_output` and all that call it,
    :func:`remove_output`) refuses a target that is one of ``inputs`` or not one of
    ``outputs``; on entry, every declared output is checked at once, so a run that would
    replace an input stops before any work, having written nothing.

    The rule: a target ``t`` is refused when ``stat(t)`` names the same file (device and
    inode) as an input, i.e. the same file by path, symbolic link or hard link
    (``os.path.samefile``). ``calib-jax`` runs each command inside one of these blocks with
    the command's resolved inputs (the literal file, every file a pattern or folder resolves
    to, parameter and state files) and the files it writes. Blocks may nest (all apply) and
    are process-wide (threads included). Host file I/O; not jit-able.

    Args:
      inputs: the files the run reads (missing paths and folders are skipped); one path alone
        is one input.
      outputs: every file the run may write or remove (absolute or relative to the current
        folder; one path alone is one output), or ``None`` to allow any target that is not an
        input.

    Yields:
      The :class:`OutputGuard`.

    Raises:
      ValueError: on entry, a declared output that is an input (naming both), and within
        the block, a write to an input.
      RuntimeError: within the block, a write to an undeclared target.

    Example:
      >>> import tempfile
      >>> from pathlib import Path
      >>> from calib_jax.io import atomic_write_text, guard_outputs
      >>> with tempfile.TemporaryDirectory() as d:
      ...     log = Path(d) / "tests.csv"
      ...     _ = log.write_text("p,y\\n0.5,1\\n")
      ...     try:
      ...         with guard_outputs([log], [Path(d) / "report.json", Path(d) / "tests.csv"]):
      ...             pass
      ...     except ValueError as e:
      ...         print(str(e).split(";")[0].replace(d, "D"))
      ...     with guard_outputs([log], [Path(d) / "report.json"]):
      ...         _ = atomic_write_text(Path(d) / "report.json", "{}")
      ...     print(sorted(p.name for p in Path(d).iterdir()), log.read_text().splitlines()[0])
      D/tests.csv: this input would be overwritten by the output D/tests.csv
      ['report.json', 'tests.csv'] p,y
    """
    guard = OutputGuard(inputs, outputs)
    guard.check_declared()
    with _GUARDS_LOCK:
        _GUARDS.append(guard)
    try:
        yield guard
    finally:
        with _GUARDS_LOCK:
            _GUARDS.remove(guard)


def _lock_file(target: str | os.PathLike[str]) -> Path:
    """The lock file of an output path: in a folder of this user's under the system's temporary
    folder, named by a hash of the absolute path (nothing is written beside the outputs)."""
    import hashlib

    user = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
    digest = hashlib.sha256(os.path.abspath(target).encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return Path(tempfile.gettempdir()) / f"calib-jax-locks-{user}" / f"{digest}.lock"


@contextlib.contextmanager
def exclusive_target(target: str | os.PathLike[str] | None, flag: str = "--out") -> Iterator[None]:
    """Hold ``target`` (an output folder or file) for one run: a second run of this user that
    names the same target while the first writes is refused at once, instead of the two
    interleaving their files (each file is written atomically, but a report folder is many
    files: two runs could leave one run's ``report.json`` beside the other's tables, both
    ending with exit 0). The lock is ``flock`` on a file under the temporary folder keyed by the
    target's absolute path; the system releases it when the process ends, however it ends.
    Where ``fcntl`` or the lock folder is unavailable, nothing is locked. Host file I/O.

    Args:
      target: the path the run writes (``None``: nothing held).
      flag: the option that named it, for the message.

    Yields:
      None, while the target is held.

    Raises:
      ValueError: another run holds the target (naming the option and the path).

    Example:
      >>> import tempfile
      >>> from calib_jax.io import exclusive_target
      >>> out = tempfile.mkdtemp()
      >>> with exclusive_target(out):
      ...     try:
      ...         with exclusive_target(out):  # as a second run would
      ...             pass
      ...     except ValueError as e:
      ...         print(str(e).replace(out, "OUT").split(";")[0])
      --out OUT: another calib-jax run is writing there now
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on POSIX
        yield
        return
    if target is None:
        yield
        return
    lock = _lock_file(target)
    try:
        lock.parent.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:  # a temporary folder that cannot be written: run unlocked, as before
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(f"{flag} {target}: another calib-jax run is writing there now; wait for it to end, or "
                             "choose another output") from None
        yield
    finally:
        os.close(fd)  # closing releases the lock


#: the file in an output folder that lists what the last run wrote there (JSON), so that the next
#: run into the folder can remove what it does not write again (:func:`fresh_outputs`)
OUTPUTS_LIST = ".calib-jax-outputs.json"

#: the folders of the active :func:`fresh_outputs` blocks, each with the files written into it and
#: the folders under it whose files are not recorded
_FRESH: list[tuple[Path, set[str], tuple[str, ...]]] = []


def _record_written(path: str | os.PathLike[str], *, removed: bool = False) -> None:
    """Note a file written (or removed) under every active :func:`fresh_outputs` folder holding it."""
    with _GUARDS_LOCK:
        if not _FRESH:
            return
        target = os.path.abspath(path)
        for folder, names, skip in _FRESH:
            rel = os.path.relpath(target, folder)
            if rel.startswith(os.pardir) or os.path.isabs(rel) or any(
                    target == s or target.startswith(s + os.sep) for s in skip):
                continue
            name = Path(rel).as_posix()
            if name == OUTPUTS_LIST:
                continue
            if removed:
                names.discard(name)
            else:
                names.add(name)


def _listed_outputs(folder: Path) -> list[str]:
    """The names the folder's :data:`OUTPUTS_LIST` holds: relative paths inside the folder only
    (an edited list naming ``..``, an absolute path or anything but text is read as no list)."""
    try:
        names = json.loads((folder / OUTPUTS_LIST).read_text(encoding="utf-8")).get("files")
    except (OSError, ValueError, AttributeError):
        return []
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        return []
    return [n for n in names if not Path(n).is_absolute() and os.pardir not in Path(n).parts
            and n != OUTPUTS_LIST and "\\" not in n]


def _through_link(root: Path, name: str) -> bool:
    """Whether ``root / name`` is a link or is reached through one (a subfolder the user replaced
    by a link to a folder of their own): such a file may lie outside the output folder."""
    path = root
    for part in Path(name).parts:
        path = path / part
        if path.is_symlink():
            return True
    return False


def _active_guards() -> list[OutputGuard]:
    """A snapshot of the active :func:`guard_outputs` blocks (process-wide, threads included)."""
    with _GUARDS_LOCK:
        return list(_GUARDS)


def _is_guarded_input(path: Path) -> bool:
    return any(g.input_at(path) is not None for g in _active_guards())


@contextlib.contextmanager
def fresh_outputs(folder: str | os.PathLike[str], *, keep: Iterable[str | os.PathLike[str]] = ()) -> Iterator[None]:
    """Within the block, note every file this module's writers put under ``folder``; when the block
    ends without an error, remove the files that the folder's previous run wrote and this one did
    not, so that the folder holds one run's outputs. Otherwise a run with other options (a report
    without ``--by``, a study with fewer designs) left the earlier run's tables beside its own, and
    a reader took them for this run's.

    Only files a run of this package wrote are removed: the block records the names it wrote in
    ``folder/.calib-jax-outputs.json`` (:data:`OUTPUTS_LIST`), and the next block removes those
    it does not write again. A file of the user in the folder is never listed, so never removed;
    neither is a listed name that is now an input of the running command (:func:`guard_outputs`),
    a link, a file reached through a linked subfolder, anything but a file, or one outside the
    folder. In a folder written before this list existed nothing is listed, so its earlier files
    stay (they are the user's to remove). After an error nothing is removed, and the list keeps
    the earlier names beside the new ones, so the next complete run removes both. Host file I/O;
    not jit-able.

    Under a :func:`guard_outputs` block, declare ``folder / OUTPUTS_LIST`` among the outputs.

    Args:
      folder: the output folder (it need not exist yet).
      keep: folders whose files are never recorded, so never removed (a checkpoint folder a
        user placed inside the output folder: a resumed run reads its chunks without writing
        them again).

    Yields:
      None.

    Example:
      >>> import tempfile
      >>> from pathlib import Path
      >>> from calib_jax.io import atomic_write_text, fresh_outputs
      >>> d = Path(tempfile.mkdtemp())
      >>> _ = (d / "notes.txt").write_text("mine")              # the user's own file
      >>> with fresh_outputs(d):
      ...     for name in ("report.json", "slices.csv"):
      ...         _ = atomic_write_text(d / name, "{}")
      >>> with fresh_outputs(d):                                  # a run that writes no slices
      ...     _ = atomic_write_text(d / "report.json", "{}")
      >>> sorted(p.name for p in d.iterdir())
      ['.calib-jax-outputs.json', 'notes.txt', 'report.json']
    """
    root = Path(os.path.abspath(folder))
    written: set[str] = set()
    entry = (root, written, tuple(os.path.abspath(k) for k in _path_list(keep, "keep")))
    with _GUARDS_LOCK:
        _FRESH.append(entry)
    ok = False
    try:
        yield
        ok = True
    finally:
        with _GUARDS_LOCK:
            _FRESH.remove(entry)
        if root.is_dir():
            try:
                _settle_outputs(root, {n for n in written if (root / n).is_file()}, remove_stale=ok)
            except Exception:
                if ok:  # after a failed run the list is bookkeeping: its error must not hide the run's
                    raise


def _settle_outputs(root: Path, written: set[str], *, remove_stale: bool) -> None:
    """Remove the listed files this run did not write (``remove_stale``), then list what the folder
    now holds of this package's outputs."""
    listed = _listed_outputs(root)
    keep = set(written)
    for name in listed:
        if name in written:
            continue
        path = root / name
        if _through_link(root, name) or not path.is_file() or _is_guarded_input(path):
            continue  # no longer this package's file: not removed, no longer listed
        if remove_stale:
            try:
                path.unlink()
            except OSError:
                keep.add(name)
        else:
            keep.add(name)
    if not keep and not listed:
        return
    # through the guarded writer: a command declares the list among its outputs, so a list that
    # is one of its inputs is refused before the run starts
    atomic_write_text(root / OUTPUTS_LIST, json.dumps({"written_by": "calib_jax", "files": sorted(keep)},
                                                      indent=1) + "\n")


def check_output(path: str | os.PathLike[str]) -> None:
    """Refuse ``path`` as a write target under every active :func:`guard_outputs` block
    (``ValueError`` for an input file, ``RuntimeError`` for an undeclared target); nothing
    outside a block. Every writer of this module calls it first. Host file I/O.

    Args:
      path: the file about to be written or removed.

    Returns:
      None; it raises instead of returning when the target is refused.

    Example:
      >>> from calib_jax.io import check_output
      >>> check_output("anything.txt")  # no guard active: allowed
    """
    for g in _active_guards():
        g.check(path)


def remove_output(path: str | os.PathLike[str]) -> bool:
    """Remove a file that the run wrote itself (a checkpoint, an ``INCOMPLETE`` marker), after
    :func:`check_output`: under a :func:`guard_outputs` block an input is never removed.

    Args:
      path: the file.

    Returns:
      ``True`` if it was removed, ``False`` if there was none.

    Example:
      >>> import tempfile
      >>> from pathlib import Path
      >>> from calib_jax.io import atomic_write_text, remove_output
      >>> with tempfile.TemporaryDirectory() as d:
      ...     marker = atomic_write_text(Path(d) / "INCOMPLETE", "writing")
      ...     print(remove_output(marker), remove_output(marker))
      True False
    """
    check_output(path)
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    finally:
        _record_written(path, removed=True)
    return True


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path`` for a streamed writer; on success it is
    fsynced and moved into place with ``os.replace`` (as :func:`atomic_write_bytes`), on
    failure removed, so ``path`` is either the complete new file or untouched.

    A context manager for writers that want a file name (``np.savez``, ``fig.savefig``,
    archives). The temporary file is created empty in ``path``'s directory (created if
    missing), so the final move stays on one file system, with the permissions
    ``open(path, "w")`` would give: those of the file it replaces, else ``0666 & ~umask``
    (``tempfile.mkstemp`` alone makes it 0600: reports the group could not read under umask
    022). Host file I/O; not jit-able.

    Args:
      path: the file to produce (a path whose last part is empty, ``""`` or ``"."``, raises
        ``ValueError``).

    Yields:
      The temporary file's :class:`pathlib.Path`; write the content there.

    Example:
      >>> import tempfile
      >>> from pathlib import Path
      >>> from calib_jax.io import atomic_output
      >>> with tempfile.TemporaryDirectory() as d:
      ...     target = Path(d) / "out.txt"
      ...     with atomic_output(target) as tmp:
      ...         _ = tmp.write_text("done")
      ...     try:
      ...         with atomic_output(target) as tmp:
      ...             _ = tmp.write_text("half")
      ...             raise RuntimeError("interrupted")
      ...     except RuntimeError:
      ...         pass
      ...     print(target.read_text(), sorted(p.name for p in Path(d).iterdir()))  # old content kept, no leftovers
      done ['out.txt']
    """
    check_output(path)  # never an input of a running command, never an undeclared output
    path = Path(path)
    if not path.name:  # '' or '.': the temporary file went into the folder, and the move failed with EBUSY
        raise ValueError(f"`path` {str(path)!r} names a folder, not a file")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp creates the file 0600; give it what open(path, "w") would have: the mode
        # of the file it replaces, else 0666 & ~umask
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode) if path.is_file() else 0o666 & ~_umask()
        except OSError:
            mode = 0o666 & ~_umask()
        os.chmod(tmp, mode)
    finally:
        os.close(fd)
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _record_written(path)


@contextlib.contextmanager
def atomic_output_dir(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary folder next to ``path`` for a writer of several files; on success its
    files are fsynced and the folder is renamed to ``path``, on failure it is removed, so
    ``path`` is either the complete new folder or absent. ``path`` must not exist yet.

    The folder counterpart of :func:`atomic_output`, for outputs too large for one file in
    memory (memory-mapped ``.npy`` columns). Host file I/O; not jit-able.

    Args:
      path: the folder to produce (its parent is created if missing).

    Yields:
      The temporary folder's :class:`pathlib.Path`; write the files there.

    Example:
      >>> import tempfile
      >>> from pathlib import Path
      >>> from calib_jax.io import atomic_output_dir
      >>> with tempfile.TemporaryDirectory() as d:
      ...     try:
      ...         with atomic_output_dir(Path(d) / "cols") as tmp:
      ...             _ = (tmp / "a.txt").write_text("half")
      ...             raise RuntimeError("interrupted")
      ...     except RuntimeError:
      ...         pass
      ...     print(sorted(p.name for p in Path(d).iterdir()))  # nothing left behind
      ...     with atomic_output_dir(Path(d) / "cols") as tmp:
      ...         _ = (tmp / "a.txt").write_text("done")
      ...     print(sorted(str(p.relative_to(d)) for p in Path(d).rglob("*")))
      []
      ['cols', 'cols/a.txt']
    """
    import shutil

    check_output(path)
    path = Path(path)
    if path.exists():
        raise ValueError(f"`path`: {path} exists already")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        os.chmod(tmp, 0o777 & ~_umask())
        yield tmp
        for f in tmp.iterdir():
            if f.is_file():
                with open(f, "rb+") as fh:
                    os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def enable_compile_cache(*, min_compile_time_s: float = 1.0) -> None:
    """Persist XLA compilations across runs (``$CALIB_JAX_XLA_CACHE``, default
    ``~/.cache/calib_jax/xla``; an empty string disables it), at most 8 GiB, every access
    under the cache's file lock so concurrent processes never read a half-written entry.

    It sets JAX's process-wide configuration (``jax_compilation_cache_dir`` and friends), so
    call it once at the start of a script, before the first compilation. If JAX is not loaded
    yet, it does not load it (about half a second, which a ``calib-jax evaluate`` on an
    engine's statistics never needs): it sets the same options as the environment variables
    JAX reads when it loads (``JAX_COMPILATION_CACHE_DIR`` and friends), which child processes
    inherit. Host code; not jit-able.

    Args:
      min_compile_time_s: programs that compile faster are not stored (the studies keep
        the long compilations; the ``calib-jax`` command stores all of its few dozen
        programs, which is most of its fixed cost); a finite non-negative number of seconds
        (else ``ValueError`` naming it, whether or not the cache is enabled).

    Returns:
      None.

    Example:
      >>> import os
      >>> from unittest import mock
      >>> import jax
      >>> from calib_jax.io import COMPILE_CACHE_ENV, enable_compile_cache
      >>> before = jax.config.jax_compilation_cache_dir
      >>> with mock.patch.dict(os.environ, {COMPILE_CACHE_ENV: ""}):  # disabled: nothing changes
      ...     enable_compile_cache()
      >>> jax.config.jax_compilation_cache_dir == before
      True

      In a script (skipped here, as it would change the JAX configuration of this process):

      >>> enable_compile_cache(min_compile_time_s=0.5)  # doctest: +SKIP
    """
    import sys

    # checked even while the cache is disabled: -5 or NaN reached JAX's configuration as given
    # (here, not with _src.validation, which would load JAX: the command's engine path never does)
    try:
        seconds = float(min_compile_time_s)
    except (TypeError, ValueError):
        seconds = float("nan")
    if isinstance(min_compile_time_s, bool) or not (np.isfinite(seconds) and seconds >= 0):
        raise ValueError(f"`min_compile_time_s` must be a finite number of seconds >= 0, got {min_compile_time_s!r}")
    min_compile_time_s = seconds
    d = os.environ.get(COMPILE_CACHE_ENV, str(Path.home() / ".cache" / "calib_jax" / "xla"))
    if d:
        # A size limit turns on the cache's file lock around every read and write. Without it
        # an entry is written in place, unlocked, and a second process (an xdist worker, a
        # study run beside the tests) can read it half-written: measured, one CI worker
        # aborted deserialising a Neural Calibration executable (2026-11-25).
        options = {"jax_compilation_cache_dir": d,
                   "jax_persistent_cache_min_compile_time_secs": float(min_compile_time_s),
                   "jax_compilation_cache_max_size": COMPILE_CACHE_MAX_BYTES}
        if "jax" in sys.modules:
            import jax

            for name, value in options.items():
                jax.config.update(name, value)
        else:  # read by JAX's configuration when it loads (jax._src.config: os.getenv(NAME.upper()))
            os.environ.update({name.upper(): str(value) for name, value in options.items()})
        _backfill_access_times(Path(d))


def _backfill_access_times(d: Path) -> None:
    """Give every entry written without the lock (no ``-atime`` file: an older cache) the
    access time JAX's eviction reads, so the first locked write does not fail on it."""
    if not d.is_dir():
        return
    stamp = time.time_ns().to_bytes(8, "little")
    for entry in d.glob("*-cache"):
        atime = entry.with_name(entry.name.removesuffix("-cache") + "-atime")
        if not atime.exists():
            try:
                atime.write_bytes(stamp)
            except OSError:  # a read-only cache is still readable
                return
