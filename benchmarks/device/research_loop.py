"""The research loop on a lent accelerator (issue 69, item 6): the studies a researcher waits for,
each timed as device, host and compile time, in under 10 minutes of device time.

    python -m benchmarks.device.research_loop --out device_out            # on the GPU machine
    python -m benchmarks.device.research_loop --dry-run --out /tmp/dry    # CPU, smoke size, < 1 min idle

Steps, each in its own process under its own time limit (a step that runs out is recorded with
``rc`` 124 and what it measured so far is lost; the other steps still run):

1. ``mc_spearman``: ``python -m experiments run mc_spearman --paper`` (Fig 3, 2 x 5,000 trials at
   n = 10^5); issue target on one H100: 20 s.
2. ``compare_calibrators``: ``compare_calibrators --paper --set datasets=<world>``, one world
   (``--world``, default ``simulator``, the null world), 100 splits, the row bootstrap and the
   refits; issue target on one H100: 5 minutes. MCGrad (torch) is left out where it is not
   installed, as the study does everywhere.
3. ``bench_vrsag``: ``python -m benchmarks.bench_vrsag --n 1000000 10000000`` (VR-SAG+PS, m = 64,
   P = 10, K = 3, 100 L-BFGS steps; every row of its table).

``--dry-run`` runs the same three steps on the CPU at smoke size (the studies' ``--smoke``
presets trimmed further with ``--set``, bench_vrsag at n = 2,000 with 2 steps), for CI.

How each time is measured (per step, in the step's process):

* ``wall_s``: the step's wall-clock seconds from its first line to its last (the process's start
  and jax's import left out; the parent's ``process_s`` includes them).
* ``compile_s``: the seconds jax reports through ``jax.monitoring`` for tracing
  (``/jax/core/compile/jaxpr_trace_duration``), lowering to MLIR
  (``.../jaxpr_to_mlir_module_duration``) and XLA's compilation
  (``.../backend_compile_duration``), summed over every compilation of the step (host work
  during which the device waits); ``n_compiles`` counts the backend compilations. A jitted
  function traced inside another's trace reports its own trace too, so the tracing part can
  count some seconds twice: ``compile_s`` is an upper bound (its parts are in
  ``compile_parts_s``).
* ``device_s``: the time the device was busy, by one of two methods (``--device-time``;
  ``auto``, the default, takes ``nvml`` on an NVIDIA GPU where ``pynvml`` loads, else ``trace``).

  ``nvml``: the GPU's utilization read through NVML every 50 ms in a thread (the percentage of
  NVML's last sample period, 1/6 s to 1 s by product, in which a kernel ran), integrated over
  the step (:func:`utilization_seconds`). An estimate smoothed over NVML's period, at no cost to
  the step. It replaced the trace on the GPU after the first H200 run (2026-12-04): there the
  trace's CUPTI buffers overflowed (events dropped, so the trace undercounts) and both quiet
  steps ran out of their limits under it.

  ``trace``: from a ``jax.profiler`` trace of the step: the
  union of the intervals of every event on the device's planes (``/device:GPU:*``, kernels and
  copies of every stream; overlapping kernels counted once). On the CPU backend there is no
  device plane: the union of the XLA operation events on the XLA:CPU threads
  (``tf_XLA*`` lines of ``/host:CPU``) stands in for it, an underestimate (XLA:CPU runs small
  programs on the calling thread, whose events are left out). The trace runs without its Python
  tracer (host tracer level 1). ``--device-time none`` (or ``--no-profile``) measures nothing
  (``device_s`` then null).
* ``host_s``: ``wall_s - device_s - compile_s`` (at least 0): the time the device stood idle
  outside compilation -- Python, NumPy, data simulation, transfers, file writing. The three add
  up to the wall time when host work and device work do not overlap; an asynchronous dispatch
  that overlaps them makes ``host_s`` the host work the device did *not* hide.

Writes ``<out>/<device>/research_loop.{json,md}`` (``<device>`` is ``jax.devices()[0].device_kind``
made a folder name), each step's own outputs under ``<out>/<device>/<step>/`` and its log as
``<step>.log``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: the study's paper-scale steps and their time limits on the device machine (seconds; the
#: sum, 540, leaves a minute of the 10 for the machine's start and the record)
STEPS: dict[str, int] = {"mc_spearman": 120, "compare_calibrators": 300, "bench_vrsag": 120}
#: the dry run's time limit per step (seconds)
DRY_LIMIT_S = 120
COMPILE_EVENTS = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration",
                  "/jax/core/compile/backend_compile_duration")


def step_argv(step: str, out: Path, *, dry_run: bool, world: str) -> list[str]:
    """The command line of one step (arguments of ``python -m``).

    Args:
      step: one of :data:`STEPS`.
      out: the folder for the step's own outputs.
      dry_run: smoke size on the CPU instead of the paper's.
      world: the ``compare_calibrators`` data set of the one-world run.

    Returns:
      The list of arguments, starting with the module name.

    Example:
      >>> from pathlib import Path
      >>> step_argv("bench_vrsag", Path("o"), dry_run=False, world="simulator")[:4]
      ['benchmarks.bench_vrsag', '--n', '1000000', '10000000']
    """
    if step == "mc_spearman":
        size = (["--smoke", "--set", "designs=fixed", "--set", "n=200", "--set", "n_trials=4",
                 "--set", "chunk_size=4", "--set", "n_boot=10", "--set", "metrics=['ece', 'lcce', 'oracle_brier']"]
                if dry_run else ["--paper"])
        return ["experiments", "run", "mc_spearman", *size, "--no-progress", "--out", str(out)]
    if step == "compare_calibrators":
        size = (["--smoke", "--set", "methods=['Uncal', 'Platt scaling', 'SAG+TS']", "--set", "n_boot=5",
                 "--set", "sag_steps=2"] if dry_run else ["--paper"])
        # progress lines at paper scale: a run stopped by its time limit shows how far it came
        return ["experiments", "run", "compare_calibrators", *size, "--set", f"datasets={world}",
                *(["--no-progress"] if dry_run else []), "--out", str(out)]
    if step == "bench_vrsag":
        size = (["--n", "2000", "--m", "8", "--steps", "2", "--partitions", "2", "--old-steps", "1"]
                if dry_run else ["--n", "1000000", "10000000"])
        return ["benchmarks.bench_vrsag", *size, "--out", str(out / "vrsag")]
    raise ValueError(f"unknown step {step!r}; known: {list(STEPS)}")


def busy_seconds(intervals: Sequence[tuple[int, int]]) -> float:
    """The length of the union of ``(start_ns, end_ns)`` intervals, in seconds.

    Args:
      intervals: half-open intervals in nanoseconds, in any order, overlapping or not.

    Returns:
      The seconds covered by at least one interval.

    Example:
      >>> busy_seconds([(0, 2_000_000_000), (1_000_000_000, 3_000_000_000), (5_000_000_000, 6_000_000_000)])
      4.0
    """
    total, end = 0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total / 1e9


def device_seconds(trace_dir: str | Path) -> tuple[float | None, str]:
    """The device's busy seconds in the ``jax.profiler`` trace under ``trace_dir`` (the method is
    in the module docstring) and which planes gave them.

    Args:
      trace_dir: the ``log_dir`` given to ``jax.profiler.start_trace``.

    Returns:
      ``(seconds, source)``; ``(None, reason)`` when no trace or no device events were found.

    Example:
      >>> device_seconds("/nonexistent")
      (None, 'no trace written')
    """
    from jax.profiler import ProfileData

    files = sorted(glob.glob(os.path.join(str(trace_dir), "**", "*.xplane.pb"), recursive=True))
    if not files:
        return None, "no trace written"
    data = ProfileData.from_file(files[-1])
    device, cpu = [], []
    for plane in data.planes:
        if plane.name.startswith("/device:"):
            device += [(e.start_ns, e.start_ns + e.duration_ns) for line in plane.lines for e in line.events]
        elif plane.name == "/host:CPU":
            cpu += [(e.start_ns, e.start_ns + e.duration_ns) for line in plane.lines if line.name.startswith("tf_XLA")
                    for e in line.events if not e.name.startswith("ThreadpoolListener")]
    if device:
        return busy_seconds(device), "device planes (every stream's kernels and copies)"
    if cpu:
        return busy_seconds(cpu), "XLA:CPU threads' operation events (CPU backend: no device plane)"
    return None, "no device events in the trace"


def utilization_seconds(samples: Sequence[tuple[float, float]], end: float) -> float:
    """Busy seconds from utilization samples: sum_i u_i / 100 * (t_{i+1} - t_i), the last sample
    held until ``end``.

    Args:
      samples: ``(time_s, utilization_percent)`` in time order (NVML's ``utilization.gpu``: the
        percentage of its last sample period in which a kernel ran).
      end: the time the step ended, in the samples' clock.

    Returns:
      The estimated seconds the device was busy between the first sample and ``end``.

    Example:
      >>> utilization_seconds([(0.0, 100.0), (1.0, 50.0), (3.0, 0.0)], end=4.0)
      2.0
    """
    times = [t for t, _ in samples] + [end]
    return sum(u / 100.0 * max(times[i + 1] - t, 0.0) for i, (t, u) in enumerate(samples))


class UtilizationSampler:
    """Reads a utilization percentage every ``period`` seconds in a daemon thread from ``start()``
    to ``stop()``, which returns :func:`utilization_seconds` of the samples.

    Args:
      read: returns the device's utilization in percent (:func:`nvml_reader`).
      period: seconds between reads.

    Example:
      >>> sampler = UtilizationSampler(lambda: 100.0, period=0.01)
      >>> sampler.start(); time.sleep(0.1); busy = sampler.stop()
      >>> 0.05 < busy < 0.5
      True
    """

    def __init__(self, read: Any, period: float = 0.05) -> None:
        import threading

        self._read, self._period = read, period
        self._samples: list[tuple[float, float]] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._done.is_set():
            self._samples.append((time.perf_counter(), float(self._read())))
            self._done.wait(self._period)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> float:
        end = time.perf_counter()
        self._done.set()
        self._thread.join()
        return utilization_seconds([s for s in self._samples if s[0] <= end], end)


def nvml_reader(index: int = 0) -> Any:
    """A function that returns GPU ``index``'s utilization percentage through NVML, or ``None``
    where ``pynvml`` (package ``nvidia-ml-py``) or the NVIDIA driver is missing.

    Args:
      index: the GPU's NVML index.

    Returns:
      A callable without arguments, or ``None``.

    Example:
      >>> reader = nvml_reader()  # doctest: +SKIP
      >>> 0 <= reader() <= 100  # doctest: +SKIP
      True
    """
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        pynvml.nvmlDeviceGetUtilizationRates(handle)
    except Exception:  # no package, no driver, no device: the caller falls back
        return None
    return lambda: pynvml.nvmlDeviceGetUtilizationRates(handle).gpu


DEVICE_TIME_METHODS = ("auto", "nvml", "trace", "none")


def _child(step: str, out: Path, *, dry_run: bool, world: str, device_time: str = "auto") -> None:
    """Run one step in this process and write ``<out>/<step>.timing.json``."""
    import jax
    import jax.monitoring

    # before jax starts a backend (importing jax starts none): the package asks XLA for
    # deterministic GPU ops; imported after jax.devices(), it could only warn (first H200 run)
    import calib_jax  # noqa: F401

    compile_s = dict.fromkeys(COMPILE_EVENTS, 0.0)
    n_compiles = [0]

    def on_duration(event: str, duration_secs: float, **_: Any) -> None:
        if event in compile_s:
            compile_s[event] += duration_secs
            n_compiles[0] += event == COMPILE_EVENTS[2]

    jax.monitoring.register_event_duration_secs_listener(on_duration)
    argv = step_argv(step, out / step, dry_run=dry_run, world=world)
    trace = out / f"{step}.trace"
    record: dict[str, Any] = {"step": step, "command": "python -m " + " ".join(argv),
                              "device_kind": jax.devices()[0].device_kind, "backend": jax.default_backend(),
                              "n_devices": jax.device_count()}
    profile_error = ""
    sampler = None
    if device_time in ("auto", "nvml"):
        reader = nvml_reader() if jax.default_backend() == "gpu" else None
        if reader is not None:
            sampler, device_time = UtilizationSampler(reader), "nvml"
        elif device_time == "nvml":
            device_time, profile_error = "none", "--device-time nvml: no NVIDIA GPU readable through pynvml"
        else:
            device_time = "trace"
    profile = device_time == "trace"
    if profile:  # no Python tracer: it records every Python call and slowed the dry run tenfold
        options = jax.profiler.ProfileOptions()
        options.python_tracer_level = 0
        options.host_tracer_level = 1
        try:
            jax.profiler.start_trace(str(trace), profiler_options=options)
        except Exception as e:  # a profiler that cannot start (no CUPTI) costs device_s, not the step
            profile, profile_error = False, f"profiler did not start: {e!r}"[:300]
    t0 = time.perf_counter()
    if sampler is not None:
        sampler.start()
    try:
        if argv[0] == "experiments":
            from experiments.__main__ import main as experiments_main

            experiments_main(argv[1:])
        else:
            from benchmarks import bench_vrsag

            bench_vrsag.main(argv[1:])
        (jax.device_put(0.0) + 1).block_until_ready()  # every dispatched program has finished
    finally:
        record["wall_s"] = time.perf_counter() - t0
        nvml_busy = sampler.stop() if sampler is not None else None
        if profile:
            jax.profiler.stop_trace()
    record["compile_s"] = sum(compile_s.values())
    record["compile_parts_s"] = {k.rsplit("/", 1)[-1]: v for k, v in compile_s.items()}
    record["n_compiles"] = n_compiles[0]
    try:
        record["device_s"], record["device_time_source"] = (
            device_seconds(trace) if profile
            else (nvml_busy, "NVML utilization every 50 ms, integrated (an estimate)") if sampler is not None
            else (None, profile_error or "--device-time none"))
    except Exception as e:  # an unreadable trace costs device_s, not the step
        record["device_s"], record["device_time_source"] = None, f"trace not read: {e!r}"[:300]
    shutil.rmtree(trace, ignore_errors=True)
    busy = record["compile_s"] + (record["device_s"] or 0.0)
    record["host_s"] = max(record["wall_s"] - busy, 0.0) if record["device_s"] is not None else None
    (out / f"{step}.timing.json").write_text(json.dumps(record, indent=2))


def _device_info() -> dict[str, Any]:
    import jax
    import jaxlib

    d = jax.devices()[0]
    return {"device_kind": d.device_kind, "platform": d.platform, "n_devices": jax.device_count(),
            "jax": jax.__version__, "jaxlib": jaxlib.__version__, "python": sys.version.split()[0]}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower() or "device"


def _fmt(v: Any) -> str:
    return "-" if v is None else f"{v:.1f}" if isinstance(v, float) else str(v)


def markdown(record: dict[str, Any]) -> str:
    """The record as a Markdown page (one row per step).

    Args:
      record: the dictionary :func:`main` writes as ``research_loop.json``.

    Returns:
      Markdown text.

    Example:
      >>> rec = {"device": {"device_kind": "cpu", "platform": "cpu", "n_devices": 1, "jax": "0", "jaxlib": "0",
      ...        "python": "3"}, "dry_run": True, "total_s": 1.0,
      ...        "steps": [{"step": "mc_spearman", "rc": 0, "process_s": 1.0, "limit_s": 9}]}
      >>> "| mc_spearman | 0 |" in markdown(rec)
      True
    """
    d = record["device"]
    jobs = int(record.get("jobs", 1))
    together = f", {jobs} steps at once (their times overlap)" if jobs > 1 else ""
    lines = [f"# Research loop on {d['device_kind']} ({d['platform']}, {d['n_devices']} device(s))", "",
             f"jax {d['jax']}, jaxlib {d['jaxlib']}, Python {d['python']}; "
             f"{'dry run (CPU, smoke size)' if record['dry_run'] else 'paper scale'}; "
             f"{record['total_s']:.0f} s in all{together}. "
             "Method: `benchmarks/device/research_loop.py` (module docstring).", "",
             "| step | rc | process s | wall s | device s | compile s (compilations) | host s | limit s |",
             "|---|---|---|---|---|---|---|---|"]
    for s in record["steps"]:
        comp = f"{_fmt(s.get('compile_s'))} ({s.get('n_compiles', '-')})"
        lines.append(f"| {s['step']} | {s['rc']} | {_fmt(s['process_s'])} | {_fmt(s.get('wall_s'))} | "
                     f"{_fmt(s.get('device_s'))} | {comp} | {_fmt(s.get('host_s'))} | {s['limit_s']} |")
    lines += ["", "Commands:", ""] + [f"- `{s['step']}`: `{s.get('command', '-')}`" for s in record["steps"]]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the research loop's steps (module docstring) and write its record.

    Args:
      argv: command-line arguments (``--dry-run``, ``--out``, ``--world``, ``--steps``,
        ``--device-time``, ``--no-profile``, ``--jobs``, ``--limit STEP=SECONDS``); ``None`` reads
        ``sys.argv``.

    Returns:
      The record written as ``research_loop.json``: ``device``, ``dry_run``, ``total_s`` and
      ``steps`` (per step: ``rc``, ``process_s``, ``limit_s`` and the timings of the module
      docstring).

    Example:
      >>> rec = main(["--dry-run", "--steps", "bench_vrsag", "--out", "/tmp/loop"])  # doctest: +SKIP
      >>> rec["steps"][0]["rc"]  # doctest: +SKIP
      0
    """
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="the same steps on the CPU at smoke size")
    ap.add_argument("--out", default=os.environ.get("OUT", "device_out"))
    ap.add_argument("--world", default="simulator", help="the compare_calibrators data set of the one-world run")
    ap.add_argument("--steps", nargs="+", default=list(STEPS), choices=list(STEPS))
    ap.add_argument("--device-time", choices=DEVICE_TIME_METHODS, default="auto",
                    help="how device_s is measured (module docstring): auto, nvml, trace or none")
    ap.add_argument("--no-profile", action="store_true", help="the same as --device-time none")
    ap.add_argument("--jobs", type=int, default=1,
                    help="steps run at once (1, the default, for timings; more only to finish a dry run sooner)")
    ap.add_argument("--limit", nargs="+", default=[], metavar="STEP=SECONDS",
                    help="another time limit for a step than STEPS gives (paper scale only)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    out = Path(args.out)
    limits = dict(STEPS)
    for item in args.limit:
        step, _, seconds = item.partition("=")
        if step not in STEPS or not seconds.isdigit() or int(seconds) < 1:
            ap.error(f"--limit: expected STEP=SECONDS with STEP one of {list(STEPS)}, got {item!r}")
        limits[step] = int(seconds)
    device_time = "none" if args.no_profile else args.device_time
    if args.child:
        _child(args.child, out, dry_run=args.dry_run, world=args.world, device_time=device_time)
        return {}
    started = time.perf_counter()
    env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false", "MPLBACKEND": "Agg", "PYTHONUNBUFFERED": "1"}
    if args.dry_run:
        env["JAX_PLATFORMS"] = "cpu"
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    info = json.loads(subprocess.run(
        [sys.executable, "-c", "import json; from benchmarks.device.research_loop import _device_info; "
         "print(json.dumps(_device_info()))"], env=env, cwd=root, check=True, capture_output=True,
        text=True).stdout.strip().splitlines()[-1])
    folder = out / _slug(info["device_kind"])
    folder.mkdir(parents=True, exist_ok=True)
    def run_step(step: str) -> dict[str, Any]:
        limit = DRY_LIMIT_S if args.dry_run else limits[step]
        cmd = [sys.executable, "-m", "benchmarks.device.research_loop", "--child", step, "--out", str(folder),
               "--world", args.world, *(["--dry-run"] if args.dry_run else []),
               "--device-time", device_time]
        t0 = time.perf_counter()
        with open(folder / f"{step}.log", "w") as log:
            try:
                rc = subprocess.run(cmd, env=env, cwd=root, stdout=log, stderr=subprocess.STDOUT,
                                    timeout=limit).returncode
            except subprocess.TimeoutExpired:
                rc = 124
        row: dict[str, Any] = {"step": step, "rc": rc, "process_s": time.perf_counter() - t0, "limit_s": limit}
        timing = folder / f"{step}.timing.json"
        if rc == 0 and timing.exists():
            row.update(json.loads(timing.read_text()))
        else:
            row["command"] = "python -m " + " ".join(step_argv(step, folder / step, dry_run=args.dry_run,
                                                                   world=args.world))
        print(f"[research_loop] {step}: rc={rc}, {row['process_s']:.1f} s "
              f"(device {_fmt(row.get('device_s'))}, compile {_fmt(row.get('compile_s'))}, "
              f"host {_fmt(row.get('host_s'))})", flush=True)
        return row

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        steps = list(pool.map(run_step, args.steps))
    record = {"device": info, "dry_run": bool(args.dry_run), "world": args.world, "jobs": args.jobs,
              "total_s": time.perf_counter() - started, "steps": steps}
    (folder / "research_loop.json").write_text(json.dumps(record, indent=2))
    (folder / "research_loop.md").write_text(markdown(record))
    return record


if __name__ == "__main__":
    main()
