"""The study harness: everything every experiment shares, written once.

A *study* is one module in ``experiments/`` with three things (see ``docs/ARCHITECTURE.md``):

* ``PRESETS``: ``{"smoke": {...}, "quick": {...}, "paper": {...}}``, plain JSON-able dicts
  (the ``ml_collections`` style). ``smoke`` runs in seconds (tests), ``quick`` is the
  default (minutes on 2 CPU cores), ``paper`` is the paper's scale.
* ``run(config, out) -> summary``: does the work, writes every table and figure through
  ``out`` (an :class:`Output`) and returns a small JSON-able summary.
* optionally ``report(summary) -> str``: the one-line terminal summary.

and one line in :mod:`experiments.registry`. The module ends with
``main = entry_point(__name__)`` so ``python -m experiments.<study>`` works.

The harness owns, once for all studies: the command line (``--smoke | --quick | --paper``,
``--seed``, ``--out``, ``--set key=value``, ``--resume``, ``--no-progress``), the scale
presets, the output folder, provenance (config, seed, package versions, git commit,
devices, wall time, the command), atomic writes (every writer goes through
:mod:`calib_jax.io`), checkpoint paths, and the persistent XLA compile cache.
"""

from __future__ import annotations

import argparse
import ast
import collections
import contextlib
import copy
import hashlib
import importlib
import io as _io
import json
import math
import os
import pickle
import shlex
import shutil
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import jax
import numpy as np

from calib_jax import io as cio
from calib_jax._src import mappings
from calib_jax._src.threefry import unrolled_threefry_on_cpu

SCALES = ("smoke", "quick", "paper")

#: where long runs keep their chunk checkpoints (outside the committed figures/)
CHECKPOINT_ENV = "CALIB_JAX_CHECKPOINTS"
#: the persistent XLA compilation cache (calib_jax.io.enable_compile_cache)
COMPILE_CACHE_ENV = cio.COMPILE_CACHE_ENV


# --------------------------------------------------------------------------- outputs
@dataclass
class Output:
    """Where a study writes, and how: every writer is atomic (temp file + rename).

    Attributes:
      dir: the output folder (created on first use).
      study: the registry name of the study (names the checkpoint folder).
      scale: ``"smoke" | "quick" | "paper"``.
      progress: whether long loops show a progress bar.
      resume: ``--resume`` was given: checkpoint every chunk and reuse finished ones.
      record: extra provenance entries (``out.record["simulator"] = {...}``).
    """

    dir: Path
    study: str = "study"
    scale: str = "quick"
    progress: bool = True
    resume: bool = False
    record: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.dir = Path(self.dir)
        self.dir.mkdir(parents=True, exist_ok=True)

    def path(self, name: str) -> Path:
        """``dir / name`` (for writers that need a path, e.g. a cache)."""
        return self.dir / name

    def table(self, stem: str, header: Sequence[str], rows: Sequence[Sequence[Any]], *,
              digits: int = 4, latex: bool = False) -> None:
        """``stem.csv`` (full precision) and ``stem.md`` (``digits``), ``stem.tex`` if asked."""
        cio.write_table(self.dir / stem, header, rows, digits=digits, latex=latex)

    def csv(self, name: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        cio.write_csv(self.dir / name, header, rows)

    def figure(self, fig: Any, stem: str) -> None:
        """``stem.png`` and ``stem.pdf``; the figure is closed afterwards."""
        from calib_jax.plotting import plt, save_figure

        save_figure(fig, self.dir / stem)
        plt.close(fig)

    def json(self, name: str, obj: Any) -> None:
        cio.write_json(self.dir / name, obj)

    def text(self, name: str, text: str) -> None:
        cio.atomic_write_text(self.dir / name, text)

    def npz(self, name: str, **arrays: Any) -> None:
        """Compressed ``.npz``; byte-identical for identical arrays (fixed member dates)."""
        buf = _io.BytesIO()
        np.savez_compressed(buf, **{k: np.asarray(v) for k, v in arrays.items()})
        cio.atomic_write_bytes(self.dir / name, buf.getvalue())

    def checkpointed(self, config: Mapping[str, Any], part: str, drop: str, label: str, extra: list[Any],
                     compute: Callable[[], dict[str, Any] | None]) -> dict[str, Any] | None:
        """``compute()`` (a dict with an ``info`` dict, or None), or its checkpoint: with
        checkpoints on (:meth:`checkpoint_dir`) each result is pickled as
        ``<part>/<label>-<hash>.pkl``, the hash of the configuration without ``config[drop]``
        and of ``extra``, so a rerun of the same command reads it back (its ``info`` then says
        ``resumed_from_checkpoint``). Every computed result's ``info`` records the commit it
        ran at (``git_commit``, taken before ``compute`` starts: HEAD may move during a
        computation of hours, and the computation may remove its own committed stages): a
        resumed run may join results from different commits."""
        from calib_jax.data.simulator import config_hash

        folder = self.checkpoint_dir(config, part)
        path = None
        if folder is not None:
            path = folder / f"{label}-{config_hash({k: v for k, v in config.items() if k != drop}, extra=extra)}.pkl"
            if path.exists():
                print(f"[{self.study}] {label}: resumed from {path}", flush=True)
                with path.open("rb") as f:
                    r = pickle.load(f)
                # this run's wall time does not include the result's: its phase_seconds do
                r["info"]["resumed_from_checkpoint"] = path.name
                return r
        commit = cio.git_commit()
        r = compute()
        if r is not None:
            r["info"]["git_commit"] = commit
            if path is not None:
                cio.atomic_write_bytes(path, pickle.dumps(_on_host(r)))
        return r

    def stage_store(self, config: Mapping[str, Any], part: str, drop: str, label: str,
                    extra: list[Any]) -> StageStore:
        """The :class:`StageStore` of the computation that :meth:`checkpointed` keys by the same
        arguments: folder ``<part>/stages/<label>-<hash>/`` when checkpoints are on, else a store
        that keeps nothing. A computation whose one result takes hours saves its stages there,
        so a stopped run resumes inside it, not only at the next result."""
        from calib_jax.data.simulator import config_hash

        folder = self.checkpoint_dir(config, part, "stages")
        if folder is not None:
            folder = folder / f"{label}-{config_hash({k: v for k, v in config.items() if k != drop}, extra=extra)}"
        # the commit of the code this process runs, taken now: HEAD may move while a run of hours goes on
        return StageStore(folder, self.study, None if folder is None else cio.git_commit())

    def checkpoint_dir(self, config: Mapping[str, Any], *parts: str) -> Path | None:
        """Checkpoint folder for the Monte Carlo engine, or ``None`` (no checkpoints).

        Checkpoints are kept when the preset says ``checkpoint: True`` (paper scale) or when
        ``--resume`` is given, under ``$CALIB_JAX_CHECKPOINTS/<study>/...`` (default
        ``~/.cache/calib_jax/checkpoints``). The engine keys every run by a hash of its
        configuration, so a rerun of the same command resumes where it stopped and a
        changed configuration never reuses stale chunks.
        """
        if not (config.get("checkpoint") or self.resume):
            return None
        return Path(checkpoint_base(), self.study, *parts)


def checkpoint_base() -> Path:
    """The folder of every study's checkpoints: ``$CALIB_JAX_CHECKPOINTS``, default
    ``~/.cache/calib_jax/checkpoints``.

    Returns:
      The folder (it need not exist).

    Example:
      >>> isinstance(checkpoint_base(), Path)
      True
    """
    return Path(os.environ.get(CHECKPOINT_ENV, str(Path.home() / ".cache" / "calib_jax" / "checkpoints")))


def data_fingerprint(arrays: Mapping[str, np.ndarray | None]) -> str:
    """A BLAKE2b digest (32 hex digits) of named arrays: their names, dtypes, shapes and bytes
    (None is hashed as its name alone). Two runs whose data differ in one bit get different
    fingerprints; :meth:`StageStore.check_data` uses it to refuse stages of other data.

    Args:
      arrays: name -> array (or None), hashed in the order of the names.

    Returns:
      The hex digest.

    Example:
      >>> a = np.arange(3.0)
      >>> data_fingerprint({"x": a}) == data_fingerprint({"x": a.copy()})
      True
      >>> data_fingerprint({"x": a}) == data_fingerprint({"x": np.nextafter(a, 9)})
      False
    """
    digest = hashlib.blake2b(digest_size=16)
    for name in sorted(arrays):
        value = arrays[name]
        digest.update(name.encode())
        if value is not None:
            value = np.ascontiguousarray(value)
            digest.update(f"{value.dtype.str}{value.shape}".encode())
            digest.update(memoryview(value).cast("B"))
    return digest.hexdigest()


@dataclass
class StageStore:
    """Checkpoints of the stages inside one long computation, each pickled (atomically) as
    ``<folder>/<stage>.pkl`` with its device arrays copied to the host.

    A rerun with the same configuration reads a saved stage back and goes on from it. The
    computation must make a resumed run give the same bits as an uninterrupted one: every
    random key is derived from the configuration and the stage's index, never from how far
    an earlier process got. ``folder=None`` keeps nothing (checkpoints off): ``load`` returns
    None and ``save`` does nothing.

    A run of hours may be stopped and resumed from several versions of the code: the first
    save of each stage by a process appends the stage, the git commit the process runs and the
    time to ``<folder>/history.json`` (:meth:`history`), so the result can say which code
    computed which stage.

    Attributes:
      folder: the folder of this computation's stages, or None.
      study: the study's name, for the progress lines.
      commit: the git commit of the code that runs the computation, recorded in
        :meth:`history` (default: the repository's commit at each stage's first save).

    Example:
      >>> import tempfile
      >>> from pathlib import Path
      >>> store = StageStore(Path(tempfile.mkdtemp()) / "run", "demo")
      >>> store.load("fits") is None
      True
      >>> store.save("fits", {"done": 3})
      >>> store.load("fits")  # doctest: +ELLIPSIS
      [demo] resumed fits from .../run/fits.pkl
      {'done': 3}
      >>> [h["stage"] for h in store.history()]  # one entry per stage and process
      ['fits']
      >>> store.clear(); store.load("fits") is None
      True
      >>> StageStore(None).load("fits") is None  # checkpoints off
      True
      >>> rows = {"x": np.arange(3.0)}
      >>> store.check_data(rows); store.check_data(rows)  # the same data: resumed
      >>> store.check_data({"x": np.arange(4.0)})  # doctest: +ELLIPSIS
      Traceback (most recent call last):
      ValueError: the stages in .../run were computed on other data (fingerprint ...
    """

    folder: Path | None
    study: str = "study"
    commit: str | None = None
    _logged: set[str] = field(default_factory=set, repr=False, compare=False)

    def load(self, stage: str) -> Any | None:
        """The saved value of ``stage``, or None when there is none (or checkpoints are off)."""
        if self.folder is None or not (self.folder / f"{stage}.pkl").exists():
            return None
        with (self.folder / f"{stage}.pkl").open("rb") as f:
            value = pickle.load(f)
        print(f"[{self.study}] resumed {stage} from {self.folder / stage}.pkl", flush=True)
        return value

    def save(self, stage: str, value: Any) -> None:
        """Pickle ``value`` as ``stage`` (replacing an earlier save atomically)."""
        if self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        cio.atomic_write_bytes(self.folder / f"{stage}.pkl", pickle.dumps(_on_host(value)))
        if stage not in self._logged:
            self._logged.add(stage)
            entry = {"stage": stage, "git_commit": self.commit or cio.git_commit(),
                     "first_save_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            cio.atomic_write_text(self.folder / "history.json", json.dumps([*self.history(), entry], indent=1))

    def check_data(self, arrays: Mapping[str, np.ndarray | None]) -> None:
        """Tie the saved stages to the data they were computed on: the first call writes the
        fingerprint of ``arrays`` (:func:`data_fingerprint`) to ``<folder>/data.json``; a later
        process whose data give another fingerprint gets a ``ValueError`` instead of stages
        computed on other rows. A run carried to another machine needs this: its simulated log
        and backbone are computed again there, and a CPU that rounds differently gives other data
        under the same configuration. With checkpoints off it does nothing, and the arrays are
        not read (at the paper's data size they are half a gigabyte).

        Args:
          arrays: name -> array (or None): every input the stages depend on.

        Raises:
          ValueError: the folder's stages were computed on data with another fingerprint.
        """
        if self.folder is None:
            return
        fingerprint = data_fingerprint(arrays)
        path = self.folder / "data.json"
        if path.exists():
            saved = json.loads(path.read_text())["fingerprint"]
            if saved != fingerprint:
                raise ValueError(
                    f"the stages in {self.folder} were computed on other data (fingerprint {saved}, this "
                    f"process loaded {fingerprint}): the simulated log or the backbone gave other bits here, "
                    "for example on a machine that rounds differently. Remove that folder to start the "
                    "computation again on these data.")
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        cio.atomic_write_text(path, json.dumps({"fingerprint": fingerprint}, indent=1))

    def history(self) -> list[dict[str, str]]:
        """Which code saved which stage: one ``{"stage", "git_commit", "first_save_utc"}`` per
        stage and process that saved it, oldest first (empty with checkpoints off, or for
        stages saved before this record was kept)."""
        path = None if self.folder is None else self.folder / "history.json"
        if path is None or not path.exists():
            return []
        return list(json.loads(path.read_text()))

    def clear(self) -> None:
        """Remove the folder of saved stages (once the computation's whole result is
        checkpointed), with any temporary file a killed write left in it."""
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


# --------------------------------------------------------------------------- configs
_WORDS = {"true": True, "false": False, "null": None}


def _parse_value(text: str) -> Any:
    """A Python literal (``20000``, ``[1, 2]``, ``True``), a JSON-style word (``true``,
    ``false``, ``null``, any case), else the text itself (a bare word is a string)."""
    if text.strip().lower() in _WORDS:
        return _WORDS[text.strip().lower()]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _coerce(key: str, old: Any, new: Any) -> Any:
    """Give ``new`` the type of the preset's ``old`` value where that is unambiguous."""
    if old is None or new is None:
        return new
    if isinstance(old, bool):
        if not isinstance(new, bool):
            raise ValueError(f"--set {key}: expected true/false (True/False), got {new!r}")
        return new
    if isinstance(old, int) and isinstance(new, int) and not isinstance(new, bool):
        return new
    if isinstance(old, float) and isinstance(new, int | float) and not isinstance(new, bool):
        return float(new)
    if isinstance(old, tuple | list) and isinstance(new, tuple | list):
        return type(old)(new)
    if isinstance(old, tuple | list) and not isinstance(new, tuple | list | dict):
        return type(old)([new])  # a single value for a list-valued setting
    if isinstance(old, str) and isinstance(new, str):
        return new
    if isinstance(old, dict) and isinstance(new, dict):
        return new
    raise ValueError(f"--set {key}: expected a value like {old!r}, got {new!r}")


def apply_overrides(config: Mapping[str, Any], sets: Sequence[str],
                    optional: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Apply ``key=value`` overrides (``a.b=value`` reaches into nested dicts).

    Values are Python literals (``n=20000``, ``sizes=[1000,3000]``, ``sim=tiny``); a key
    that the preset does not have is an error listing the keys it has, unless it is one of the
    study's ``optional`` top-level settings (name -> default; a study's ``OPTIONAL_SETTINGS``),
    which are in the configuration only at a value other than their default (set by ``--set``
    or held by the preset): a run at the default keeps the configuration, and the checkpoint
    folders, it had before the setting existed, however it was asked for.

    >>> apply_overrides({"n": 1, "fast": True}, ["n=2", "fast=False"], {"fast": False})
    {'n': 2}
    """
    optional = dict(optional or {})
    cfg = copy.deepcopy(dict(config))
    for item in sets:
        if "=" not in item:
            raise ValueError(f"--set expects key=value, got {item!r}")
        dotted, text = item.split("=", 1)
        *path, leaf = dotted.strip().split(".")
        node = cfg
        for p in path:
            if not isinstance(node.get(p), dict):
                raise ValueError(f"--set {dotted}: {p!r} is not a nested setting")
            node = node[p]
        if leaf not in node and not path and leaf in optional:
            node[leaf] = _coerce(dotted, optional[leaf], _parse_value(text))
            continue
        if leaf not in node:
            known = sorted(node) + ([f"{k} (optional)" for k in sorted(optional)] if not path else [])
            raise ValueError(f"--set {dotted}: unknown setting {leaf!r}; known: {known}")
        node[leaf] = _coerce(dotted, node[leaf], _parse_value(text))
    for name, default in optional.items():
        if name in cfg and cfg[name] == default:
            del cfg[name]
    return cfg


def preset(module: ModuleType, scale: str, defaults: Mapping[str, Any] | None = None
           ) -> dict[str, Any]:
    """A deep copy of ``module.PRESETS[scale]`` with the registry entry's defaults applied."""
    presets = module.PRESETS
    if scale not in presets:
        raise ValueError(f"{module.__name__} has no {scale!r} preset; it has {sorted(presets)}")
    cfg = copy.deepcopy(dict(presets[scale]))
    cfg.update(copy.deepcopy(dict(defaults or {})))
    return cfg


# --------------------------------------------------------------------------- setting domains
#: the largest count a setting may take: JAX indexes arrays (rows, trials, resamples) with int32
INT_MAX = 2**31 - 1
#: the seed range: ``jax.random.key`` keeps the low 32 bits of a seed (x64 off), so a larger or
#: negative seed would silently run the same trials as one in this range
SEED_RANGE = (0, 2**32 - 1)
#: the base CTRs of a Monte Carlo population (``target_ctr``, ``ctrs``, a metric-atlas setting):
#: the fixed world's intercept solves at both ends (-7.73 at 0.1%, -0.40 at 50%); at a smaller
#: rate most trials of n = 10^3 rows hold no click
CTR_RANGE = (0.001, 0.5)


def _show(value: Any) -> str:
    """``repr(value)``, shortened to 60 characters (a 1000-digit number stays readable)."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:45]}... ({len(text)} characters)"


class Domain:
    """The values one study setting may take. :meth:`problem` says what is wrong with a value
    (``None`` when it is in the domain); :meth:`describe` names the domain in words."""

    def describe(self) -> str:
        raise NotImplementedError

    def problem(self, value: Any) -> str | None:
        raise NotImplementedError

    def _expected(self, value: Any) -> str:
        return f"must be {self.describe()}, got {_show(value)}"


@dataclass(frozen=True)
class Int(Domain):
    """An integer in ``[lo, hi]`` (``True``/``False`` are not integers here)."""

    lo: int = 1
    hi: int = INT_MAX

    def describe(self) -> str:
        return f"an integer in [{self.lo}, {self.hi}]"

    def problem(self, value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int) or not self.lo <= value <= self.hi:
            return self._expected(value)
        return None


@dataclass(frozen=True)
class Real(Domain):
    """A finite number in the interval from ``lo`` to ``hi`` (``open_lo``/``open_hi``: the end
    itself excluded); an integer is a number, a boolean is not."""

    lo: float = -math.inf
    hi: float = math.inf
    open_lo: bool = False
    open_hi: bool = False

    def describe(self) -> str:
        if self.hi == math.inf:
            return "a finite number" if self.lo == -math.inf else \
                f"a finite number {'>' if self.open_lo else '>='} {self.lo:g}"
        return (f"a number in {'(' if self.open_lo else '['}{self.lo:g}, {self.hi:g}"
                f"{')' if self.open_hi else ']'}")

    def problem(self, value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            return self._expected(value)
        below = value <= self.lo if self.open_lo else value < self.lo
        above = value >= self.hi if self.open_hi else value > self.hi
        return self._expected(value) if below or above else None


@dataclass(frozen=True)
class Flag(Domain):
    """``true`` or ``false``."""

    def describe(self) -> str:
        return "true or false"

    def problem(self, value: Any) -> str | None:
        return None if isinstance(value, bool) else self._expected(value)


@dataclass(frozen=True)
class OneOf(Domain):
    """One of the strings ``choices`` (or of those a function returns: a registry read when the
    setting is checked)."""

    choices: tuple[str, ...] | Callable[[], Sequence[str]]

    def names(self) -> tuple[str, ...]:
        return tuple(self.choices() if callable(self.choices) else self.choices)

    def describe(self) -> str:
        return "one of " + ", ".join(repr(c) for c in self.names())

    def problem(self, value: Any) -> str | None:
        return None if isinstance(value, str) and value in self.names() else self._expected(value)


@dataclass(frozen=True)
class Maybe(Domain):
    """``None`` (``null``) or a value of ``inner``."""

    inner: Domain

    def describe(self) -> str:
        return f"null or {self.inner.describe()}"

    def problem(self, value: Any) -> str | None:
        return None if value is None or self.inner.problem(value) is None else self._expected(value)


@dataclass(frozen=True)
class Seq(Domain):
    """A list (or tuple) of at least ``min_len`` values, each of ``item``, distinct unless
    ``distinct=False`` (the widths of an MLP's layers may repeat; the rows of a table may not)."""

    item: Domain
    min_len: int = 1
    distinct: bool = True

    def describe(self) -> str:
        return (f"a list of at least {self.min_len}{' distinct' if self.distinct else ''} values, "
                f"each {self.item.describe()}")

    def problem(self, value: Any) -> str | None:
        if not isinstance(value, list | tuple):
            return f"must be a list ({self.describe()}), got {_show(value)}"
        if len(value) < self.min_len:
            return f"must list at least {self.min_len} value(s), got {_show(value)}"
        for i, v in enumerate(value):
            bad = self.item.problem(v)
            if bad is not None:
                return f"item {i} {bad}"
        seen: list[Any] = []
        for v in value:
            if self.distinct and v in seen:
                return f"lists {_show(v)} twice"
            seen.append(v)
        return None


@dataclass(frozen=True)
class Record(Domain):
    """A dict whose keys are among ``fields`` (a ``{key: Domain}`` map; ``None`` as a key's
    domain accepts any value there), every key of ``required`` present."""

    fields: Mapping[str, Domain | None] | Callable[[], Mapping[str, Domain | None]]
    required: tuple[str, ...] = ()

    def _fields(self) -> Mapping[str, Domain | None]:
        return self.fields() if callable(self.fields) else self.fields

    def describe(self) -> str:
        return f"a dict with keys among {sorted(self._fields())}"

    def problem(self, value: Any) -> str | None:
        fields = self._fields()
        if not isinstance(value, dict):
            return self._expected(value)
        unknown = sorted(str(k) for k in value if k not in fields)
        if unknown:
            return f"has unknown keys {unknown}; known: {sorted(fields)}"
        missing = [k for k in self.required if k not in value]
        if missing:
            return f"misses the keys {missing}"
        for k, v in value.items():
            d = fields[k]
            bad = None if d is None else d.problem(v)
            if bad is not None:
                return f"key {k!r} {bad}"
        return None

    def located_problem(self, value: Any) -> tuple[str, str] | None:
        """``(".key.subkey", problem)`` for the first bad value inside nested records (the dotted
        path that ``--set`` names), ``("", problem)`` for a problem of the dict itself, or None."""
        fields = self._fields()
        if isinstance(value, dict) and not any(k not in fields for k in value):
            for k, v in value.items():
                d = fields[k]
                if isinstance(d, Record) and isinstance(v, dict):
                    sub = d.located_problem(v)
                    if sub is not None:
                        return f".{k}{sub[0]}", sub[1]
                elif d is not None and (bad := d.problem(v)) is not None:
                    return f".{k}", bad
        bad = self.problem(value)
        return None if bad is None else ("", bad)


@dataclass(frozen=True)
class Metrics(Domain):
    """The panel columns of a Monte Carlo study: ``null`` (the study's default panel) or a list of
    distinct strings, each a built-in column or a user metric ``'module:function'`` /
    ``'file.py:function'``; the names are resolved, and user metrics imported and probed, by
    :func:`check_metrics_setting`."""

    def describe(self) -> str:
        return "null or a non-empty list of metric names ('ece', 'my_module:my_metric', 'file.py:f')"

    def problem(self, value: Any) -> str | None:
        if value is None or Seq(Text()).problem(value) is None:
            return None
        return self._expected(value)


@dataclass(frozen=True)
class Text(Domain):
    """A non-empty string."""

    def describe(self) -> str:
        return "a non-empty string"

    def problem(self, value: Any) -> str | None:
        return None if isinstance(value, str) and value.strip() else self._expected(value)


@dataclass(frozen=True)
class AtlasSetting(Domain):
    """A metric-atlas setting ``design@ctr/n``: a population design, the fixed world's base CTR
    (``-`` for none) and the rows per trial."""

    def describe(self) -> str:
        return (f"'design@ctr/n' with design one of {', '.join(_designs())}, ctr '-' or "
                f"{CTR.describe()}, n {ROWS.describe()} (e.g. 'fixed@0.03/10000')")

    def problem(self, value: Any) -> str | None:
        if not isinstance(value, str) or value.count("@") != 1 or value.count("/") != 1:
            return self._expected(value)
        design, rest = value.split("@")
        ctr, n = rest.split("/")
        try:
            ctr_value = None if ctr == "-" else float(ctr)
            n_value = int(n)
        except ValueError:
            return self._expected(value)
        if design not in _designs() or (ctr_value is not None and CTR.problem(ctr_value)) or ROWS.problem(n_value):
            return self._expected(value)
        return None


def _designs() -> tuple[str, ...]:
    from calib_jax.montecarlo.designs import DESIGNS

    return DESIGNS


def _worlds() -> tuple[str, ...]:
    from experiments._datasets import WORLDS

    return tuple(WORLDS)


def _datasets() -> tuple[str, ...]:
    from experiments._datasets import DATASETS

    return DATASETS


def _calibrators() -> tuple[str, ...]:
    import calib_jax.calibrators as C
    import calib_jax.calibrators.neural_calibration  # noqa: F401  (registers)
    import calib_jax.calibrators.sag  # noqa: F401  (registers)

    return tuple(sorted(C.REGISTRY))


def _simulator_fields() -> tuple[str, ...]:
    from calib_jax.data.simulator import FIELD_NAMES

    return FIELD_NAMES


def _open_bandit_fields() -> tuple[str, ...]:
    from calib_jax.data.open_bandit import FIELD_NAMES

    return FIELD_NAMES


def _backbone_fields() -> dict[str, Domain | None]:
    import dataclasses as _dc

    from calib_jax.data.backbone import BackboneConfig

    return {f.name: None for f in _dc.fields(BackboneConfig)}


def _module_names(module: str, attr: str) -> Callable[[], tuple[str, ...]]:
    """The keys of ``experiments.<module>.<attr>`` (read when the setting is checked)."""

    def names() -> tuple[str, ...]:
        return tuple(getattr(importlib.import_module(f"experiments.{module}"), attr))

    return names


#: the top-N study's recommenders (experiments._recommenders.MODELS)
_RECOMMENDERS = ("ItemKNN", "MF", "BPR", "NCF", "LightGCN")




SEED = Int(*SEED_RANGE)
ROWS = Int(100)  # rows of a Monte Carlo trial or a synthetic data set: fewer leave most bins empty
CTR = Real(*CTR_RANGE)
COUNT = Int(1)
LOGIT = Real(-30.0, 30.0)  # an intercept on the logit scale
RESAMPLES = Int(2)  # bootstrap resamples (a percentile interval needs two)
TRIALS = Int(3)  # Monte Carlo trials behind a Spearman interval (the bootstrap needs three)
WEIGHT = Real(0.0)  # a penalty weight or an exponent: finite, >= 0
RATE = Real(0.0, open_lo=True)  # a learning rate or a scale: finite, > 0
FRACTION = Real(0.0, 1.0, open_lo=True, open_hi=True)
SIM = OneOf(("tiny", "default", "paper"))  # experiments._datasets.load_dataset's simulator scales
LAYERS = Seq(COUNT, distinct=False)  # hidden-layer widths of an MLP
MC_DESIGNS = Seq(OneOf(_designs))
SYNTHETIC_DESIGNS = Seq(OneOf(("fixed", "pooled")))  # the studies that build trials on experiments._mc.design_world


def _recommender_hyper() -> dict[str, Domain | None]:
    """The domain of each recommender's hyper-parameters, as experiments._recommenders checks them."""
    learning = {"lr": RATE, "learning_rate": RATE, "amplify": RATE, "l2": WEIGHT, "lambda_reg": WEIGHT,
                "decay": WEIGHT, "pos_threshold": Real(), "n_layers": Int(0),
                "similarity": OneOf(("cosine", "cosine_full")), "propagation": OneOf(("auto", "sparse", "dense")),
                "mean_centered": Flag(), "use_bias": Flag()}
    from experiments._recommenders import DEFAULTS

    return {name: Record({k: learning.get(k, COUNT) for k in hp}) for name, hp in DEFAULTS.items()}

def _architecture_hyper() -> dict[str, Domain | None]:
    """The domain of each CTR architecture's hyper-parameters (experiments._ctr_models.make checks
    the values again when the model is built)."""
    from experiments._ctr_models import _SHARED, ARCHITECTURES

    domains: dict[str, Domain | None] = {
        "hidden": LAYERS, "cin_layer_size": LAYERS, "emb_init_std": WEIGHT, "precision": None,
        "use_linear": Flag(), "cin_split_half": Flag(), "cin_activation": OneOf(("relu", "tanh", "sigmoid", "linear"))}
    return {name: Record({k: domains.get(k, COUNT) for k in _SHARED + cls.OWN if k != "emb_dim"})
            for name, cls in ARCHITECTURES.items()}


#: Every setting of every study preset and the values it may take, declared once: the harness
#: checks the whole resolved configuration (preset, registry defaults, ``--set``, ``--seed``)
#: against it before anything is computed. A dotted key is a setting inside a nested one
#: (``ctr.n_boot``). A setting that means something else in one study is declared for that
#: study in :data:`STUDY_SETTINGS`. A preset setting declared in neither is an error (so a new
#: setting cannot skip the check: tests/test_harness_hostile.py runs every preset through it).
SETTINGS: dict[str, Domain] = {
    # every study
    "seed": SEED, "checkpoint": Flag(),
    # Monte Carlo studies (experiments/mc_*.py, metric_atlas, metric_accuracy)
    "n": ROWS, "n_trials": TRIALS, "chunk_size": COUNT, "n_boot": RESAMPLES, "designs": MC_DESIGNS,
    "target_ctr": CTR, "ctrs": Seq(CTR), "simulator": OneOf(("tiny", "default")), "metrics": Metrics(),
    "n_cal": ROWS, "n_repeats": Int(2), "n_rounds": Int(2), "n_runs": COUNT,
    "clusters": Seq(COUNT), "restarts": Seq(COUNT), "subsamples": Seq(COUNT),
    "table6_design": OneOf(("fixed", "pooled")), "table6_n": ROWS, "table6_subsamples": Seq(COUNT),
    "table6_trials": TRIALS, "table6_chunk_size": COUNT,
    "sizes": Seq(ROWS), "rows_per_size": Maybe(COUNT), "min_trials": TRIALS, "chunk_rows": COUNT,
    "settings": Seq(AtlasSetting()),
    # interval coverage
    "n_logs": COUNT, "n_rows": ROWS, "n_test_logs": COUNT, "corp_logs": COUNT,
    # textbook lab
    "n_bins": COUNT, "sharpen": RATE, "slope": RATE, "x64": Flag(),
    # simulator statistics and the world-match pilot
    "world": SIM, "backbone": Flag(), "backbone_config": Record(_backbone_fields),
    "sim": SIM, "n_chunks": COUNT, "candidates": Seq(OneOf(_module_names("world_match", "CANDIDATES"))),
    "n_splits": COUNT, "pool_frac": FRACTION, "pilot_seed": SEED, "lcce_restarts": COUNT,
    # the calibrator comparison, its ablations and the grouping study
    "datasets": Seq(OneOf(_datasets)), "worlds": Seq(OneOf(_worlds)),
    "methods": Seq(OneOf(_module_names("compare_calibrators", "_ALL"))),
    "sag_stop": OneOf(_module_names("compare_calibrators", "_SAG_STOP")),
    "head_draw": OneOf(("same", "bootstrap")), "refit_rows": OneOf(("fresh", "folds")),
    "nc_heads": OneOf(("sequential", "batched")),
    "sag_heads": OneOf(("sequential", "lockstep", "together")),
    "n_folds": COUNT, "head_fits": COUNT, "head_rows": Maybe(ROWS), "sag_steps": COUNT, "nc_steps": COUNT,
    "n_fits": COUNT, "max_val": Maybe(ROWS), "n_steps": COUNT, "lam": WEIGHT, "lam_v": WEIGHT,
    "base_groups": COUNT, "base_partitions": COUNT, "base_lam_v": WEIGHT,
    "partitions": Seq(COUNT), "groups": Seq(COUNT), "lam_vs": Seq(WEIGHT),
    "n_groups": COUNT, "n_partitions": COUNT, "field": OneOf(_simulator_fields),
    # field-aware calibration
    "simulator.scale": OneOf(("tiny", "quick", "default", "paper")), "simulator.max_rows": Maybe(ROWS),
    "simulator.field": OneOf(_simulator_fields), "simulator.epochs": COUNT,
    "open_bandit.policy": OneOf(("random", "bts", "all")), "open_bandit.campaign": OneOf(("men", "women", "all")),
    "open_bandit.max_rows": Maybe(ROWS), "open_bandit.field": OneOf(_open_bandit_fields),
    "open_bandit.epochs": COUNT,
    "sag_solver": OneOf(("sequential", "lockstep")),  # calib_jax.calibrators.sag.SOLVERS
    "model.emb_dim": COUNT, "model.hidden": LAYERS, "model.batch_size": COUNT, "model.lr": RATE,
    "nc_grid": Seq(Record({"lr": RATE, "n_steps": COUNT, "embed_dim": COUNT, "weight_decay": WEIGHT})),
    "calibrators": Seq(OneOf(_calibrators)), "repeats": COUNT, "shift_ablation": Flag(),
    # Calibrated Log Loss
    "parts": Seq(OneOf(("linear", "logistic", "ctr", "arch"))),
    "synthetic.d": COUNT, "synthetic.n_train": Int(10), "synthetic.n_test": ROWS, "synthetic.tv_fracs": Seq(FRACTION),
    "synthetic.rounds": COUNT, "synthetic.n_reps": Int(2), "synthetic.ece_bins": COUNT,
    "synthetic.lcce_clusters": COUNT,
    "synthetic.linear.intercept": LOGIT, "synthetic.linear.noise_sd": WEIGHT, "synthetic.linear.beta_hi": Real(),
    "synthetic.linear.beta_lo": Real(), "synthetic.logistic.intercept": LOGIT, "synthetic.logistic.beta_hi": Real(),
    "synthetic.logistic.beta_lo": Real(),
    "ctr.n_reps": Int(2), "ctr.batch_size": COUNT, "ctr.lr": RATE, "ctr.emb_dim": COUNT, "ctr.hidden": LAYERS,
    "ctr.tv_frac": FRACTION, "ctr.n_boot": RESAMPLES, "ctr.split": OneOf(("random", "time")),
    "ctr.sim_scale": OneOf(("tiny", "quick", "default", "paper")), "ctr.max_rows": Maybe(ROWS),
    "ctr.ece_bins": COUNT, "ctr.lcce_clusters": COUNT,
    "arch.models": Seq(OneOf(("FNN", "DeepFM", "DCN", "DCNMix", "xDeepFM"))), "arch.n_reps": Int(2),
    "arch.emb_dim": COUNT, "arch.hyper": Record(_architecture_hyper),
    # top-N calibration
    "n_users": Int(10), "n_items": Int(10), "dim": COUNT, "epochs": COUNT, "batch_size": COUNT, "lr": RATE,
    "l2": WEIGHT, "intercept": LOGIT, "top_n": COUNT, "ns": Seq(COUNT), "alpha": WEIGHT, "alphas": Seq(WEIGHT),
    "recommenders": Seq(OneOf(_RECOMMENDERS)), "sweep_recommender": Maybe(OneOf(_RECOMMENDERS)),
    "sweep_calibrator": OneOf(_calibrators), "max_bins": COUNT, "vad_replicates": Int(0),
    # per recommender, hyper-parameters over its library defaults (each name and value checked
    # by experiments._recommenders.train when the model is trained)
    "rec_hyper": Record(_recommender_hyper),
    "movielens": Flag(), "movielens_recommenders": Seq(OneOf(_RECOMMENDERS)), "movielens_max_ratings": Maybe(Int(100)),
}
#: Settings whose name means something else in one study: ``{module: {setting: Domain}}``.
STUDY_SETTINGS: dict[str, dict[str, Domain]] = {
    # these build their trials on experiments._mc.design_world: no simulator design
    "mc_std": {"designs": SYNTHETIC_DESIGNS},
    "mc_improvement": {"designs": SYNTHETIC_DESIGNS},
    "mc_lcce_sensitivity": {"designs": SYNTHETIC_DESIGNS},
    "field_calibration": {"datasets": Seq(OneOf(("simulator", "open_bandit")))},
    "world_match": {"sim": OneOf(("tiny", "default"))},
    "world_match_rows": {"sim": OneOf(("tiny", "default")),
                         "worlds": Seq(OneOf(_module_names("world_match_rows", "WORLDS"))),
                         "test_rows": Seq(Int(20))},
    "topn_calibration": {"sim": OneOf(("tiny", "default")), "n_groups": Seq(COUNT)},
}
#: Conditions between settings of one study: ``{module: ((settings, holds(config), what must hold), ...)}``.
RULES: dict[str, tuple[tuple[tuple[str, ...], Callable[[Mapping[str, Any]], bool], str], ...]] = {
    "mc_sample_size": ((("min_trials", "n_trials"), lambda c: c["min_trials"] <= c["n_trials"],
                        "min_trials must not exceed n_trials"),),
    "mc_lcce_sensitivity": ((("clusters", "n"), lambda c: max(c["clusters"]) <= c["n"],
                             "every number of clusters must be at most n (the rows of a trial)"),),
    "topn_calibration": (
        (("sweep_recommender", "recommenders"),
         lambda c: c.get("sweep_recommender") is None or c["sweep_recommender"] in c["recommenders"],
         "sweep_recommender must be one of recommenders"),
        (("top_n", "ns", "n_items"), lambda c: max(c["top_n"], *c["ns"]) <= c["n_items"],
         "top_n and every value of ns must be at most n_items"),
    ),
}


def setting_domain(study: str, key: str) -> Domain | None:
    """The :class:`Domain` of setting ``key`` (dotted for a nested one) of the study module
    ``study``: :data:`STUDY_SETTINGS` first, then :data:`SETTINGS`; ``None`` when undeclared."""
    return STUDY_SETTINGS.get(study, {}).get(key, SETTINGS.get(key))


def check_config(study: str, config: Mapping[str, Any], reference: Mapping[str, Any]) -> None:
    """Check a resolved study configuration against the declared domains, before anything runs.

    Every setting of ``reference`` (the study's preset) must be present in ``config`` with a
    value in its :class:`Domain` (:func:`setting_domain`); a dict in the preset is a group of
    settings, checked key by key (``ctr.n_boot``), unless its domain is a :class:`Record` (a
    dict-valued setting); the :data:`RULES` between settings must hold; ``seed`` is always
    allowed.

    Args:
      study: the study's module name (``"mc_spearman"``).
      config: the resolved configuration (preset, registry defaults, ``--set``, ``--seed``).
      reference: the preset it was resolved from (which settings exist, which are nested).

    Raises:
      ValueError: naming the first setting out of its domain, missing, unknown or undeclared,
        with the domain in words (``setting 'n' must be an integer in [100, 2147483647], got -5``).
    """

    def walk(node: Mapping[str, Any], ref: Mapping[str, Any], prefix: str) -> None:
        extra = sorted(set(node) - set(ref) - ({"seed"} if not prefix else set()))
        if extra:
            raise ValueError(f"setting {prefix.rstrip('.') or 'config'!r}: unknown keys {extra}; known: {sorted(ref)}")
        for key in [*ref, *(["seed"] if not prefix and "seed" in node and "seed" not in ref else [])]:
            name = prefix + key
            if key not in node:
                raise ValueError(f"setting {name!r} is missing (it was replaced by a dict without it)")
            domain = setting_domain(study, name)
            if isinstance(ref.get(key, 0), dict) and not isinstance(domain, Record):  # a group of settings
                if not isinstance(node[key], dict):
                    raise ValueError(f"setting {name!r} must be a dict of settings like {_show(ref[key])}, "
                                     f"got {_show(node[key])}")
                walk(node[key], ref[key], name + ".")
                continue
            if domain is None:
                raise ValueError(f"setting {name!r} of study {study!r} has no declared domain "
                                 "(experiments._study.SETTINGS)")
            if isinstance(domain, Record):  # the dotted path of a bad value inside it (rec_hyper.BPR.k)
                where = domain.located_problem(node[key])
                if where is not None:
                    raise ValueError(f"setting {name + where[0]!r} {where[1]}")
                continue
            bad = domain.problem(node[key])
            if bad is not None:
                raise ValueError(f"setting {name!r} {bad}")

    walk(config, reference, "")
    for keys, holds, what in RULES.get(study, ()):
        if not holds(config):
            raise ValueError(f"settings {', '.join(repr(k) for k in keys)}: {what}, got "
                             + ", ".join(f"{k}={_show(config[k])}" for k in keys))


def check_metrics_setting(config: Mapping[str, Any], *, probe: bool = True) -> None:
    """Resolve the ``metrics`` setting of a Monte Carlo study and probe its user metrics.

    The names go through :func:`calib_jax.montecarlo.panel_for` (an unknown column, a name
    listed twice, a user metric that cannot be imported: ``ValueError``). With ``probe``, every
    user metric is run on a few small trials by
    :func:`calib_jax.montecarlo.check_metrics` (one that raises, cannot be traced, returns NaN,
    inf, a Python number, a non-scalar, writes into its input or is constant is refused, by
    name). Does nothing when the study has no ``metrics`` setting or it is ``null``.

    Raises:
      ValueError: naming the setting and the metric.
    """
    if config.get("metrics") is None:
        return
    from calib_jax import montecarlo as mc

    try:
        panel = mc.panel_for(list(config["metrics"]))
        if probe and panel.custom:
            mc.check_metrics(panel)
    except ValueError as e:  # named as "metric '<name>' ..." already, or by the setting here
        raise ValueError(str(e) if str(e).startswith("metric ") else f"setting 'metrics': {e}") from None


def check_out(path: Path) -> Path:
    """The output folder ``path``, refused before anything runs when it cannot be one.

    Raises:
      ValueError: ``path`` (or a folder above it) is a file, or the nearest existing folder
        above it cannot be written.
    """
    path = Path(path)
    for above in (path, *path.parents):
        if above.exists() or above.is_symlink():
            if not above.is_dir():
                what = "is a file" if above == path else f"lies under {str(above)!r}, which is a file"
                raise ValueError(f"--out {str(path)!r} {what}, not a folder")
            if not os.access(above, os.W_OK | os.X_OK):
                raise ValueError(f"--out {str(path)!r}: cannot write into {str(above)!r}")
            break
    return path


# --------------------------------------------------------------------------- the CLI
class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are ``ValueError`` (one line on the command line, like
    every other bad input of the harness) instead of a usage text and ``SystemExit``."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise ValueError(f"{self.prog}: {message}")


def build_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """The one command line of every study (a malformed option raises ``ValueError``)."""
    p = _Parser(prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    scale = p.add_mutually_exclusive_group()
    scale.add_argument("--smoke", dest="scale", action="store_const", const="smoke",
                       help="tiny settings: runs in seconds (the tests use it)")
    scale.add_argument("--quick", dest="scale", action="store_const", const="quick",
                       help="the default: minutes on 2 CPU cores")
    scale.add_argument("--paper", dest="scale", action="store_const", const="paper",
                       help="the paper's scale (long; checkpointed where it is a Monte Carlo run)")
    p.set_defaults(scale="quick")
    p.add_argument("--seed", type=int, default=None,
                   help="master seed (default: the preset's, usually 0); runs are deterministic per seed")
    p.add_argument("--out", type=Path, default=None,
                   help="output folder (default figures/<study> for --quick, "
                        "figures/<study>_paper for --paper, figures/_smoke/<study> for --smoke)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override one setting of the preset (repeatable; a.b=v for nested ones)")
    p.add_argument("--resume", action="store_true",
                   help="checkpoint every chunk and continue from finished ones "
                        "(always on for paper-scale Monte Carlo runs)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.add_argument("--show-config", action="store_true",
                   help="print the resolved configuration and exit")
    return p


def default_out(name: str, scale: str) -> Path:
    return Path("figures") / {"quick": name, "paper": f"{name}_paper",
                              "smoke": f"_smoke/{name}"}[scale]


CPU_DEVICES_ENV = "CALIB_JAX_CPU_DEVICES"


def use_every_cpu_core() -> int | None:
    """Expose every usable CPU core as a JAX host device (``jax_num_cpu_devices``), so that
    the Monte Carlo engine, which splits each chunk of trials over ``jax.devices()``, runs
    one slice per core; results are bit-identical to one device (the engine runs the same
    per-device program whatever the count). ``$CALIB_JAX_CPU_DEVICES`` overrides the count
    (``1`` turns it off). Measured on the idle 2-core machine, Fig 3 panel at n = 10^5, one trial
    per step: 71 ms per trial on one device, 58 ms on two.

    The NumPy sorts and SciPy PAV fits run as host callbacks (``calib_jax._src.host_call``)
    that do not transfer their arguments to ``cpu:0``: with ``jax.pure_callback`` that
    transfer deadlocked two host devices (2 of 3 runs of a 64-trial panel at n = 10^4).

    Returns the count set, or None when it was left alone (one core, JAX already
    initialised its backends, a non-CPU platform requested, or ``XLA_FLAGS`` already forces
    a count). Only the CPU backend is affected; on GPU/TPU the engine uses the accelerators."""
    import jax

    default = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    n = int(os.environ.get(CPU_DEVICES_ENV, str(default)))
    if n <= 1 or "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", ""):
        return None
    if os.environ.get("JAX_PLATFORMS", "cpu").split(",")[0] not in ("", "cpu"):
        return None
    try:
        jax.config.update("jax_num_cpu_devices", n)
    except RuntimeError:  # backends already initialised (e.g. inside a test session)
        return None
    return n


class PhaseClock:
    """Wall seconds per phase of a run (``with clock("phase"): ...``; a phase entered again
    adds up), for the provenance's ``phase_seconds`` (``out.record["phase_seconds"] =
    clock.seconds``)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - t0


def _on_host(tree: Any) -> Any:
    """``tree`` with every device array copied to the host, dicts keeping their key order
    (``jax.device_get`` rebuilds dicts with sorted keys, which reorders a resumed run's
    table rows and columns)."""
    if isinstance(tree, dict):
        return {k: _on_host(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_on_host(v) for v in tree]
    return jax.device_get(tree)


def docstring_departures(doc: str | None) -> list[str]:
    """The departures from the paper that a study's docstring names, one string each.

    The section starts at the first line that begins with "Departures" and ends at the first
    line after a blank one that is not a bullet; each ``*`` bullet is one departure (a section
    without bullets is one). Markup (``**``, double backquotes) is dropped and lines are
    joined, so the provenance (``departures``) holds the docstring's own words: one source.

    Example:
      >>> doc = "\\n".join(["Intro.", "", "Departures, each with its reason:", "",
      ...                   "* **Data.** A", "  stand-in.", "* ``n`` runs.", "", "Run: x"])
      >>> docstring_departures(doc)
      ['Data. A stand-in.', 'n runs.']
    """
    lines = (doc or "").splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.strip().startswith("Departures")), None)
    if start is None:
        return []
    items: list[list[str]] = []
    para = [lines[start].strip()]
    blank = False
    for ln in lines[start + 1:]:
        text = ln.strip()
        if not text:
            blank = True
            continue
        if text.startswith("* "):
            items.append([text[2:]])
        elif items and ln.startswith("  ") and not blank:
            items[-1].append(text)
        elif not items and not blank:
            para.append(text)
        else:
            break
        blank = False
    chunks = [" ".join(it) for it in items] if items else [" ".join(para)]
    return [c.replace("**", "").replace("``", "").strip() for c in chunks]


def execute(module: ModuleType, config: Mapping[str, Any], out: Output, *,
            entry: Any = None, command: str | None = None) -> dict[str, Any]:
    """Run ``module.run(config, out)`` and write ``provenance.json`` next to its outputs; a second
    run into the same folder is refused while this one writes, and the files an earlier run wrote
    there and this one did not are removed at its end (:func:`calib_jax.io.fresh_outputs`)."""
    # Several studies in one process (the main job) compile thousands of programs: shed them
    # before the kernel's cap on memory mappings, where XLA:CPU segfaults (calib_jax._src.mappings)
    mappings.release_compiled_if_near_limit()
    # one run at a time per folder, and the folder then holds this run's files only: those an
    # earlier run wrote and this one does not (fewer designs, another world) are removed at its end
    # checkpoints placed inside the folder are kept: a resumed run reads its chunks without writing them
    with cio.exclusive_target(out.dir, "--out"), cio.fresh_outputs(out.dir, keep=[checkpoint_base()]):
        return _execute(module, config, out, entry=entry, command=command)


def _execute(module: ModuleType, config: Mapping[str, Any], out: Output, *,
             entry: Any = None, command: str | None = None) -> dict[str, Any]:
    from calib_jax.calibrators import CalibrationFallbackWarning
    from calib_jax.montecarlo import ResumedChunksWarning

    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        # A study fits hundreds of calibrators; the ones that fell back are counted into the
        # provenance (and printed once) instead of interrupting the run. Every other warning
        # keeps the caller's filters.
        warnings.simplefilter("always", CalibrationFallbackWarning)
        warnings.simplefilter("always", ResumedChunksWarning)
        summary = module.run(config, out)
    wall = time.perf_counter() - t0
    fallbacks = collections.Counter(str(w.message) for w in caught
                                    if issubclass(w.category, CalibrationFallbackWarning))
    resumed = [str(w.message) for w in caught if issubclass(w.category, ResumedChunksWarning)]
    for w in caught:
        if not issubclass(w.category, CalibrationFallbackWarning | ResumedChunksWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    for msg in resumed:
        print(f"[{getattr(entry, 'name', module.__name__)}] warning: {msg}", flush=True)
    if fallbacks:
        print(f"[{getattr(entry, 'name', module.__name__)}] {sum(fallbacks.values())} calibrator "
              f"fit(s) fell back (see provenance.json: calibrator_fallbacks)", flush=True)
    extra: dict[str, Any] = {"scale": out.scale, **out.record,
                             "calibrator_fallbacks": dict(fallbacks)}
    if resumed:  # chunks of this run that an earlier, different version of the code computed
        extra["resumed_from_other_code"] = resumed
    if entry is not None:
        extra.update(study=entry.name, reproduces=entry.reproduces)
    departures = docstring_departures(module.__doc__)
    if departures:
        extra["departures"] = departures
    if command is not None:
        extra["command"] = command
    extra["summary"] = summary
    cio.write_json(out.dir / "provenance.json",
                   cio.provenance(dict(config), seed=config.get("seed"), wall_time_s=wall,
                                  extra=extra))
    return summary


def resolve(entry: Any, argv: Sequence[str]) -> tuple[ModuleType, argparse.Namespace, dict[str, Any]]:
    """Parse ``argv`` for the registry ``entry`` and check everything it names, before any
    computation: the options, the resolved configuration against the declared domains
    (:func:`check_config`), ``--seed`` (:data:`SEED_RANGE`, refused, never reduced), the
    ``metrics`` setting and its user metrics (:func:`check_metrics_setting`; names only with
    ``--show-config``, which computes and writes nothing) and the output folder (:func:`check_out`;
    not for ``--show-config``).

    Returns:
      ``(module, args, config)``: the study module, the parsed options and the configuration.

    Raises:
      ValueError: one line naming the option, the setting or the metric.
    """
    module = importlib.import_module(f"experiments.{entry.module}")
    doc = (module.__doc__ or "").strip()
    parser = build_parser(f"python -m experiments.{entry.module}"
                          if entry.name == entry.module else f"python -m experiments run {entry.name}",
                          f"{entry.title} [{entry.reproduces}]\n\n{doc}")
    args = parser.parse_args(list(argv))
    reference = preset(module, args.scale, entry.defaults)
    optional = dict(getattr(module, "OPTIONAL_SETTINGS", {}))
    config = apply_overrides(reference, args.sets, optional)
    reference = {**{k: v for k, v in reference.items() if k not in optional or k in config},
                 **{k: v for k, v in optional.items() if k in config and k not in reference}}
    if args.seed is not None:
        bad = SEED.problem(args.seed)
        if bad is not None:
            raise ValueError(f"--seed {bad}")
        config["seed"] = int(args.seed)
    config.setdefault("seed", 0)
    check_config(entry.module, config, reference)
    check_metrics_setting(config, probe=not args.show_config)
    if not args.show_config:
        check_out(args.out if args.out is not None else default_out(entry.name, args.scale))
    return module, args, config


def run_entry(entry: Any, argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Parse ``argv`` for the registry ``entry`` and run it (the body of every ``main``); bad
    input raises ``ValueError`` before anything is computed or written (:func:`resolve`)."""
    use_every_cpu_core()  # before anything touches a device
    unrolled_threefry_on_cpu()
    argv = list(sys.argv[1:] if argv is None else argv)
    module, args, config = resolve(entry, argv)
    if args.show_config:
        print(json.dumps(cio._jsonable(config), indent=2))
        return {}
    cio.enable_compile_cache()
    out = Output(args.out if args.out is not None else default_out(entry.name, args.scale),
                 study=entry.name, scale=args.scale, progress=not args.no_progress,
                 resume=bool(args.resume))
    command = "python -m experiments run " + shlex.join([entry.name, *argv])
    summary = execute(module, config, out, entry=entry, command=command)
    report = getattr(module, "report", None)
    if report is not None:
        print(f"[{entry.name}] {report(summary)}", flush=True)
    return summary


def entry_point(module_name: str):
    """``main(argv=None)`` for the study module ``module_name`` (``main = entry_point(__name__)``)."""
    if module_name == "__main__":  # ``python -m experiments.<study>``
        module_name = sys.modules["__main__"].__spec__.name
    name = module_name.rsplit(".", 1)[-1]

    def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
        from experiments import registry

        if argv is None:  # the command line: bad input ends in one line and exit status 2
            from experiments.__main__ import exit_on_bad_input

            return exit_on_bad_input(f"python -m experiments.{name}", run_entry, registry.get(name))
        return run_entry(registry.get(name), argv)

    main.__doc__ = f"Command line of the study ``{name}`` (see ``--help``)."
    return main
