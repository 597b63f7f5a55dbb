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
        base = os.environ.get(CHECKPOINT_ENV,
                              str(Path.home() / ".cache" / "calib_jax" / "checkpoints"))
        return Path(base, self.study, *parts)


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


def apply_overrides(config: Mapping[str, Any], sets: Sequence[str]) -> dict[str, Any]:
    """Apply ``key=value`` overrides (``a.b=value`` reaches into nested dicts).

    Values are Python literals (``n=20000``, ``sizes=[1000,3000]``, ``sim=tiny``); a key
    that the preset does not have is an error listing the keys it has.
    """
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
        if leaf not in node:
            raise ValueError(f"--set {dotted}: unknown setting {leaf!r}; known: {sorted(node)}")
        node[leaf] = _coerce(dotted, node[leaf], _parse_value(text))
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


# --------------------------------------------------------------------------- the CLI
def build_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """The one command line of every study."""
    p = argparse.ArgumentParser(prog=prog, description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
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
    """Run ``module.run(config, out)`` and write ``provenance.json`` next to its outputs."""
    from calib_jax.calibrators import CalibrationFallbackWarning
    from calib_jax.montecarlo import ResumedChunksWarning

    # Several studies in one process (the main job) compile thousands of programs: shed them
    # before the kernel's cap on memory mappings, where XLA:CPU segfaults (calib_jax._src.mappings)
    mappings.release_compiled_if_near_limit()
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


def run_entry(entry: Any, argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Parse ``argv`` for the registry ``entry`` and run it (the body of every ``main``)."""
    use_every_cpu_core()  # before anything touches a device
    unrolled_threefry_on_cpu()
    module = importlib.import_module(f"experiments.{entry.module}")
    doc = (module.__doc__ or "").strip()
    parser = build_parser(f"python -m experiments.{entry.module}"
                          if entry.name == entry.module else f"python -m experiments run {entry.name}",
                          f"{entry.title} [{entry.reproduces}]\n\n{doc}")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    config = preset(module, args.scale, entry.defaults)
    config = apply_overrides(config, args.sets)
    if args.seed is not None:
        config["seed"] = int(args.seed)
    config.setdefault("seed", 0)
    if args.show_config:
        import json

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

        return run_entry(registry.get(name), argv)

    main.__doc__ = f"Command line of the study ``{name}`` (see ``--help``)."
    return main
