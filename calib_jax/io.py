"""File output for experiments: atomic writes, tables, provenance records.

This is the only library module (with ``calib_jax.data``) that touches the file system.
Every writer goes through :func:`atomic_write_bytes`: the content is written to a
temporary file in the target directory, flushed and fsynced, then moved into place with
``os.replace`` so an interrupted run never leaves a half-written output.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import io as _io
import json
import os
import platform
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_output",
    "write_json",
    "write_csv",
    "markdown_table",
    "latex_table",
    "write_table",
    "provenance",
    "git_commit",
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
    """Write ``data`` to ``path`` atomically (temp file + fsync + ``os.replace``)."""
    with atomic_output(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Atomic UTF-8 text write."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def _jsonable(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    if hasattr(x, "__array__") and hasattr(x, "shape"):
        return np.asarray(x).tolist()
    if isinstance(x, Path):
        return str(x)
    if isinstance(x, float | int | str | bool) or x is None:
        return x
    return repr(x)


def write_json(path: str | os.PathLike[str], obj: Any) -> Path:
    """Atomic JSON write (NumPy/JAX values converted to plain Python)."""
    return atomic_write_text(path, json.dumps(_jsonable(obj), indent=2, sort_keys=False) + "\n")


def _fmt(v: Any, digits: int) -> str:
    """``digits`` decimals; a non-zero value that would print as zero keeps 3 significant
    digits in scientific notation (LCCE differences are ~1e-7); ``None`` (not applicable) is
    an empty cell, as in the CSV."""
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


def write_csv(path: str | os.PathLike[str], header: Sequence[str], rows: Sequence[Sequence[Any]]) -> Path:
    """Atomic CSV write with full float precision (repr)."""
    buf = _io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for r in rows:
        w.writerow([repr(float(v)) if isinstance(v, float | np.floating) else v for v in r])
    return atomic_write_text(path, buf.getvalue())


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]], *, digits: int = 4) -> str:
    """A GitHub-flavoured Markdown table; floats rounded to ``digits``."""
    lines = ["| " + " | ".join(map(str, header)) + " |", "|" + "---|" * len(header)]
    for r in rows:
        lines.append("| " + " | ".join(_fmt(v, digits) for v in r) + " |")
    return "\n".join(lines) + "\n"


def latex_table(header: Sequence[str], rows: Sequence[Sequence[Any]], *, digits: int = 4) -> str:
    """A booktabs LaTeX tabular; floats rounded to ``digits``."""
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
    """Write ``stem.csv`` and ``stem.md`` (and ``stem.tex`` if ``latex``) atomically."""
    stem = Path(stem)
    paths = [
        write_csv(stem.with_suffix(".csv"), header, rows),
        atomic_write_text(stem.with_suffix(".md"), markdown_table(header, rows, digits=digits)),
    ]
    if latex:
        paths.append(atomic_write_text(stem.with_suffix(".tex"), latex_table(header, rows, digits=digits)))
    return paths


def git_commit(cwd: str | os.PathLike[str] | None = None) -> str:
    """The current git commit (with ``-dirty`` if tracked files outside ``figures/`` have
    changes: a study rewriting its own committed outputs does not make its code dirty), or
    ``"unknown"``."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)figures"],
            cwd=cwd, capture_output=True, text=True, check=True,
        ).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def provenance(config: Mapping[str, Any], *, seed: int | None, wall_time_s: float | None = None,
               extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A provenance record: config, seed, package versions, git commit, devices, wall time."""
    import jax

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
        "packages": versions,
        "devices": [str(d) for d in jax.devices()],
        "x64": bool(jax.numpy.zeros(()).dtype == jax.numpy.float64),
        "wall_time_s": wall_time_s,
    }
    if extra:
        rec.update(extra)
    return rec


def figures_dir(study: str, root: str | os.PathLike[str] | None = None) -> Path:
    """``<root>/figures/<study>`` (root defaults to the current directory)."""
    base = Path(root) if root is not None else Path.cwd()
    d = base / "figures" / study
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


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path`` for a streamed writer; on success it is
    fsynced and moved into place with ``os.replace`` (as :func:`atomic_write_bytes`), on
    failure removed, so ``path`` is either the complete new file or untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
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


def enable_compile_cache(*, min_compile_time_s: float = 1.0) -> None:
    """Persist XLA compilations across runs (``$CALIB_JAX_XLA_CACHE``, default
    ``~/.cache/calib_jax/xla``; an empty string disables it), at most 8 GiB, every access
    under the cache's file lock so concurrent processes never read a half-written entry.

    Args:
      min_compile_time_s: programs that compile faster are not stored (the studies keep
        the long compilations; the ``calib-jax`` command stores all of its few dozen
        programs, which is most of its fixed cost).
    """
    import jax

    d = os.environ.get(COMPILE_CACHE_ENV, str(Path.home() / ".cache" / "calib_jax" / "xla"))
    if d:
        jax.config.update("jax_compilation_cache_dir", d)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_time_s))
        # A size limit turns on the cache's file lock around every read and write. Without it
        # an entry is written in place, unlocked, and a second process (an xdist worker, a
        # study run beside the tests) can read it half-written: measured, one CI worker
        # aborted deserialising a Neural Calibration executable (2026-11-25).
        jax.config.update("jax_compilation_cache_max_size", COMPILE_CACHE_MAX_BYTES)
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
