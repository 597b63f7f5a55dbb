"""The research loop on this machine: how long a researcher who changed a calibrator waits for
its comparison against the baselines, each run a fresh process as they would start it.

The loop is ``compare_calibrators`` restricted to the methods in question and one world (the
VR-SAG paper's Table 1 protocol: D_val heads, 100 or 10 splits of the standard test set, the
paired row bootstrap of split 0, refits on independent folds, and the claims with their paired
intervals), at the quick preset, which is a smoke test of a change, not its result:

    python -m experiments run compare_calibrators --quick --set "datasets=['simulator_grouping']" \\
        --set "methods=['Uncal', 'Temperature scaling', 'SAG+TS', 'VR-SAG+TS']" --out /tmp/loop

Each configuration runs as its own process with its own caches (``CALIB_JAX_CACHE``, the
simulated worlds and backbones, and ``CALIB_JAX_XLA_CACHE``, the persistent compilation cache),
first empty (``cold``: the world is simulated, the backbone trained and every program compiled)
and then as the first run left them (``warm``: the loop after an edit to a calibrator, whose
programs compile again but whose data are cached). ``wall_s`` is the process's wall-clock
seconds from its start (Python and jax's import included); the study's own phases are read from
the provenance it writes (``summary.info.<world>.phase_seconds``).

The paper preset is budgeted phase by phase by ``bench_compare_budget``; the quick preset with
every method and world takes about half an hour (``docs/guide/studies.md``). This page is the
loop before either.

    python -m benchmarks.bench_research_loop [--world simulator_grouping] [--methods ...]

Writes benchmarks/results/research_loop.{csv,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks import machine_speed
from benchmarks.pages import write_page

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parents[1]
#: a calibrator changed by the researcher and its baselines: VR-SAG+TS against SAG+TS, and both
#: against the global temperature scaling they extend (the paper's Table 1 chains of TS)
METHODS = ("Uncal", "Temperature scaling", "SAG+TS", "VR-SAG+TS")
WORLD = "simulator_grouping"


def command(preset: str, world: str, methods: Sequence[str], out: Path) -> list[str]:
    """The study's command line for one run of the loop.

    Args:
      preset: ``"smoke"``, ``"quick"`` or ``"paper"``.
      world: a comparison world of ``experiments._datasets.DATASETS``.
      methods: method names of ``experiments.compare_calibrators.METHODS``.
      out: the output folder.

    Returns:
      argv, starting with this Python.

    Example:
      >>> from pathlib import Path
      >>> command("quick", "simulator", ["Uncal"], Path("/tmp/x"))[3:6]
      ['run', 'compare_calibrators', '--quick']
    """
    return [sys.executable, "-m", "experiments", "run", "compare_calibrators", f"--{preset}",
            "--set", f"datasets={[world]!r}", "--set", f"methods={list(methods)!r}", "--out", str(out)]


def shown_arg(arg: str) -> str:
    """``arg`` as a POSIX shell reads it back, in double quotes where it needs quoting (the
    ``--set`` values hold brackets, quotes and spaces, never a double quote or a ``$``).

    Example:
      >>> print(shown_arg("datasets=['simulator']"), shown_arg("--quick"))
      "datasets=['simulator']" --quick
    """
    return f'"{arg}"' if set(arg) & set(" '[]*?") else arg


def run_once(argv: Sequence[str], caches: Path, world: str) -> dict[str, Any]:
    """Run the study once in a fresh process with its caches under ``caches``.

    Returns:
      ``{"wall_s", "study_wall_s", "phases": {phase: s}, "claims": n}``.

    Raises:
      RuntimeError: the study's process failed (its last lines in the message).
    """
    env = {**os.environ, "CALIB_JAX_CACHE": str(caches / "data"), "CALIB_JAX_XLA_CACHE": str(caches / "xla")}
    t0 = time.perf_counter()
    proc = subprocess.run(list(argv), cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise RuntimeError(f"the study failed ({proc.returncode}): {(proc.stdout + proc.stderr)[-2000:]}")
    out = Path(argv[argv.index("--out") + 1])
    prov = json.loads((out / "provenance.json").read_text())
    summary = prov["summary"]
    return {"wall_s": wall, "study_wall_s": float(prov["wall_time_s"]),
            "phases": dict(summary["info"][world]["phase_seconds"]), "claims": len(summary["claims"])}


def table(records: Mapping[str, Mapping[str, Any]]) -> list[list[Any]]:
    """One row per (run, quantity): the process's wall seconds, the study's own, and each phase.

    Example:
      >>> rec = {"quick, cold": {"wall_s": 60.0, "study_wall_s": 50.0, "phases": {"splits": 5.0}, "claims": 12}}
      >>> table(rec)[0], table(rec)[2], table(rec)[3][2]
      (['quick, cold', 'process wall', 60.0], ['quick, cold', 'phase: splits', 5.0], 45.0)
    """
    rows: list[list[Any]] = []
    for label, r in records.items():
        rows.append([label, "process wall", r["wall_s"]])
        rows.append([label, "study wall (provenance)", r["study_wall_s"]])
        rows += [[label, f"phase: {k}", v] for k, v in r["phases"].items()]
        rows.append([label, "study wall outside the phases (data, backbone, tables)",
                     r["study_wall_s"] - sum(r["phases"].values())])
    return rows


def main(argv: Sequence[str] | None = None) -> list[list[Any]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", default=WORLD)
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--presets", nargs="+", default=["quick", "smoke"], choices=["smoke", "quick", "paper"])
    ap.add_argument("--out", default=str(RESULTS / "research_loop"))
    args = ap.parse_args(argv)
    reference_before = machine_speed.previous_reference(Path(args.out).with_suffix(".csv"), column="seconds")
    reference = machine_speed.reference_seconds()
    load_start = os.getloadavg()[0]
    records: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for preset in args.presets:
            caches = Path(tmp) / preset
            for state in ("cold", "warm"):
                argv_ = command(preset, args.world, args.methods, Path(tmp) / f"{preset}_{state}")
                records[f"{preset}, {state}"] = run_once(argv_, caches, args.world)
                print(f"[research_loop] {preset}, {state}: {records[f'{preset}, {state}']['wall_s']:.1f} s",
                      flush=True)
    header = ["run", "quantity", "seconds"]
    rows = table(records) + [["machine", machine_speed.ROW_LABEL, reference]]
    out = Path(args.out)
    walls = "; ".join(f"{k} {r['wall_s']:.0f} s" for k, r in records.items())
    shown = " ".join(shown_arg(a) for a in command("quick", args.world, args.methods, Path("/tmp/loop"))[1:])
    text = (f"# The research loop: a changed calibrator against its baselines\n\n"
            f"One world (`{args.world}`), the methods {', '.join(args.methods)}; each run a fresh process, "
            f"`cold` with empty data and compilation caches, `warm` with the caches the cold run left. "
            f"Wall seconds: {walls}. 1-min load average {load_start:.2f} at the start, "
            f"{os.getloadavg()[0]:.2f} at the end, on {os.cpu_count()} cores of {machine_speed.cpu_description()}. "
            f"{machine_speed.comparison_sentence(reference, reference_before)} The command (quick preset):\n\n"
            f"    python {shown}\n\n"
            f"Method: `benchmarks/bench_research_loop.py` (module docstring).\n\n")
    write_page(out, text, header, rows)
    return rows


if __name__ == "__main__":
    main()
