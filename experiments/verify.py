"""``python -m experiments verify [STUDY ...] [--paper]``: rerun studies and compare every
committed number with the rerun.

A reader who doubts a committed output reruns it on their own machine. For each study this
command runs it into a temporary folder at the scale of the committed output it checks
(quick by default; ``--paper`` checks ``figures/<study>_paper``), walks every number of the
two summaries (``provenance.json#summary``) side by side, and prints what moved beyond the
study's tolerance (:data:`TOLERANCES`) and whether any verdict of the claims ledger changes
when the rerun replaces the committed output. It never writes into ``figures/``.

What "same answers" means (the README states it):

* **the same machine type**: a rerun is bit-identical, for any number of devices (the
  studies fix their keys, shard deterministically and fold results in a fixed order);
* **another machine type or backend**: float32 reductions are ordered differently by other
  CPU vector units and by GPUs, so numbers agree to a stated tolerance. Closed-form and
  Monte Carlo studies agree to ``rtol`` 1e-4; studies that train a backbone (the simulator's
  DNN, recommenders) amplify the last-digit differences through hundreds of optimiser
  steps, and agree to ``rtol`` 2e-2 (measured: another 2-core EPYC reproduced the simulator
  backbone's validation AUC to 3-4 digits, 0.7430 against 0.7426). A second moment of the
  scores moves more: the grouping study's null-world score variances moved by 2.3% between an
  Intel Xeon with AVX-512 and an AMD EPYC without it (2026-12-05), and with them one Fig 7
  verdict (``benchmarks/results/grouping_machine_rerun.md``). A verdict that changes within
  these tolerances is fragile, and this command reports it.
* **a difference with its interval** (a summary node with numbers ``lo`` and ``hi``: a paired
  difference, an estimate) is judged on the scale of its committed interval, not its size:
  a difference of two near-equal methods is a small number, and a move that is small against
  the two means and against the interval can be large against the difference itself. Its
  numbers are compared with ``atol + rtol * max(|x|, hi - lo)``, and every interval whose side
  of 0 turns (``lo > 0``, ``hi < 0``, or neither) is reported and counted as a problem, ledger
  row or not (``benchmarks/results/field_machine_rerun.md``: the quick output of
  ``field_calibration`` from an Intel Xeon with AVX-512 rerun on an AMD EPYC without it);
* **never the timing fields**: wall times, fit times and throughputs (``simulate_seconds``,
  ``phase_seconds``, ``fit_times``, ``rows_per_second``; one rule, :data:`TIMING`) measure the
  machine and its load, not the study, and are left out of the comparison.

Exit status 1 when a number moved beyond its tolerance, an interval turned to another side of 0
or a verdict of the claims ledger changed.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from experiments import claims as C
from experiments import registry

#: (rtol, atol) per study for a rerun on another machine type; the default is DEFAULT_TOL
DEFAULT_TOL = (1e-4, 1e-7)
#: studies whose numbers pass through a trained network or a long optimisation
TRAINED = ("simulator_stats", "compare_calibrators", "field_calibration", "grouping", "ablation",
           "topn_calibration", "calibrated_logloss", "mc_spearman_simulator", "metric_accuracy")
TOLERANCES: dict[str, tuple[float, float]] = {name: (2e-2, 1e-5) for name in TRAINED}


#: a timing field: a key (at any depth of the path, so a whole ``phase_seconds`` or ``fit_times``
#: subtree) that is a wall time, a duration or a throughput -- ``wall``, ``seconds``, ``*_seconds``,
#: ``*_s``, ``*_time(s)``, ``*_per_second``. It measures the machine and its load, not the study:
#: :func:`compare` leaves it out, so a clean rerun reports no problem
TIMING = re.compile(r"(^|_)(wall|seconds?|s|times?|wall_time)$|_per_second$")


def is_timing(path: str) -> bool:
    """True when the summary path ``path`` (``a/b/c``) is or lies under a timing field (:data:`TIMING`).

    Example:
      >>> [is_timing(p) for p in ("simulate_seconds", "phase_seconds/fit", "fit_times/sim/Platt",
      ...                          "backbone/rows_per_second", "designs/fixed/rho/lcce", "claims/0/refit_share_fit")]
      [True, True, True, True, False, False]
    """
    return any(TIMING.search(part) for part in path.split("/"))


def leaves(node: Any, prefix: str = "") -> Iterator[tuple[str, float]]:
    """Every number of a JSON tree as ``(key/path, value)`` (booleans and strings skipped)."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from leaves(v, f"{prefix}/{k}" if prefix else str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from leaves(v, f"{prefix}/{i}")
    elif isinstance(node, int | float) and not isinstance(node, bool):
        yield prefix, float(node)


def intervals(node: Any, prefix: str = "") -> Iterator[tuple[str, float, float]]:
    """Every interval of a JSON tree: ``(path of the node, lo, hi)`` for each dict holding numbers
    ``lo`` and ``hi``.

    Example:
      >>> list(intervals({"A - B": {"AUC": {"diff": -0.01, "lo": -0.02, "hi": 0.004}}, "n": 3}))
      [('A - B/AUC', -0.02, 0.004)]
    """
    if isinstance(node, dict):
        lo, hi = node.get("lo"), node.get("hi")
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in (lo, hi)):
            yield prefix, float(lo), float(hi)
        for k, v in node.items():
            yield from intervals(v, f"{prefix}/{k}" if prefix else str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from intervals(v, f"{prefix}/{i}")


def side(lo: float, hi: float) -> str:
    """The side of 0 an interval lies on: ``"above 0"``, ``"below 0"`` or ``"spans 0"`` (NaN bounds
    span it).

    Example:
      >>> side(0.1, 0.3), side(-0.3, -0.1), side(-0.1, 0.1)
      ('above 0', 'below 0', 'spans 0')
    """
    return "above 0" if lo > 0 else "below 0" if hi < 0 else "spans 0"


def compare(committed: dict[str, Any], rerun: dict[str, Any], rtol: float, atol: float) -> dict[str, Any]:
    """Numbers of ``committed`` against ``rerun``: how many agree within ``atol + rtol*|x|``
    (``atol + rtol*max(|x|, hi - lo)`` for the numbers of a node with an interval, its committed
    width: :func:`intervals`), which moved (largest first), which are missing from either side,
    and which intervals turned to another side of 0 (``"turned"``: path, side before, side
    after). Timing fields (:func:`is_timing`) are left out and counted in ``"timing_skipped"``.

    Example:
      >>> committed = {"A - B": {"diff": 0.001, "lo": -0.01, "hi": 0.012}, "A": 0.5}
      >>> res = compare(committed, {"A - B": {"diff": 0.0011, "lo": 0.0002, "hi": 0.012}, "A": 0.5}, 2e-2, 1e-7)
      >>> res["moved"], res["turned"]   # diff moved by 1% of the width; lo by 93%
      ([('A - B/lo', -0.01, 0.0002)], [('A - B', 'spans 0', 'above 0')])
    """
    a, b = dict(leaves(committed)), dict(leaves(rerun))
    timing = {k for k in a.keys() | b.keys() if is_timing(k)}
    a = {k: v for k, v in a.items() if k not in timing}
    b = {k: v for k, v in b.items() if k not in timing}
    before = {path: (lo, hi) for path, lo, hi in intervals(committed)}
    side_after = {path: side(lo, hi) for path, lo, hi in intervals(rerun)}
    moved = []
    for k in a.keys() & b.keys():
        x, y = a[k], b[k]
        if math.isnan(x) and math.isnan(y):
            continue
        lo, hi = before.get(k.rpartition("/")[0], (0.0, 0.0))
        width = hi - lo if math.isfinite(hi - lo) else 0.0
        if not abs(x - y) <= atol + rtol * max(abs(x), width):
            moved.append((k, x, y))
    moved.sort(key=lambda t: -abs(t[2] - t[1]) / (abs(t[1]) + atol))
    side_before = {path: side(*bounds) for path, bounds in before.items() if path in side_after}
    turned = [(path, was, side_after[path]) for path, was in sorted(side_before.items()) if was != side_after[path]]
    return {"compared": len(a.keys() & b.keys()), "moved": moved, "only_committed": sorted(a.keys() - b.keys()),
            "only_rerun": sorted(b.keys() - a.keys()), "timing_skipped": len(timing), "turned": turned}


def _ledger_with(figures: Path) -> list[C.Row]:
    old = C.FIGURES
    C.FIGURES = figures
    try:
        return C.ledger()
    finally:
        C.FIGURES = old


def verify(names: Sequence[str], *, paper: bool = False, workdir: Path | None = None) -> int:
    """Rerun ``names`` and compare; returns the number of problems (moved numbers, intervals
    turned to another side of 0, changed ledger verdicts). ``workdir`` holds the reruns (a
    temporary folder by default)."""
    suffix = "_paper" if paper else ""
    tmp = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="calib_jax_verify_"))
    figures = tmp / "figures"
    if not figures.exists():
        shutil.copytree(C.FIGURES, figures)
    problems = 0
    for name in names:
        registry.get(name)  # a KeyError names the known studies
        committed_path = C.FIGURES / f"{name}{suffix}" / "provenance.json"
        if not committed_path.exists():
            print(f"[verify] {name}: no committed {'paper' if paper else 'quick'} output, skipped")
            continue
        committed = json.loads(committed_path.read_text())
        out = figures / f"{name}{suffix}"
        shutil.rmtree(out, ignore_errors=True)
        cmd = [sys.executable, "-m", "experiments", "run", name, "--paper" if paper else "--quick",
               "--out", str(out), "--no-progress", "--seed", str(committed.get("config", {}).get("seed", 0))]
        print(f"[verify] {name}: {' '.join(cmd[1:])}", flush=True)
        if subprocess.run(cmd, cwd=C.ROOT).returncode != 0:
            print(f"[verify] {name}: the rerun failed")
            problems += 1
            continue
        rerun = json.loads((out / "provenance.json").read_text())
        rtol, atol = TOLERANCES.get(name, DEFAULT_TOL)
        res = compare(committed.get("summary", {}), rerun.get("summary", {}), rtol, atol)
        print(f"[verify] {name}: {res['compared']} numbers compared ({res['timing_skipped']} timing fields left "
              f"out), {len(res['moved'])} moved beyond rtol {rtol:g} / atol {atol:g} (committed by "
              f"{committed.get('git_commit', '?')}, rerun by {rerun.get('git_commit', '?')})")
        for k, x, y in res["moved"][:20]:
            print(f"    {k}: {x:.6g} -> {y:.6g}")
        if len(res["moved"]) > 20:
            print(f"    ... and {len(res['moved']) - 20} more")
        if res["only_committed"] or res["only_rerun"]:
            print(f"    keys only in the committed output: {len(res['only_committed'])}; only in the rerun: "
                  f"{len(res['only_rerun'])} (the code changed since the output was committed)")
        if res["turned"]:
            print(f"    {len(res['turned'])} interval(s) turned to another side of 0:")
            for path, was, now in res["turned"][:20]:
                print(f"    {path}: {was} -> {now}")
            if len(res["turned"]) > 20:
                print(f"    ... and {len(res['turned']) - 20} more")
        problems += len(res["moved"]) + len(res["turned"])
    before, after = C.ledger(), _ledger_with(figures)
    changed = [(a["claim"], a["verdict"], b["verdict"]) for a, b in zip(before, after, strict=False)
               if a["claim"] == b["claim"] and a["verdict"] != b["verdict"]]
    print(f"[verify] ledger: {len(changed)} verdict(s) changed" + ("" if changed else " (none)"))
    for claim, a, b in changed:
        print(f"    {claim}: {a} -> {b}")
    if workdir is None:
        shutil.rmtree(tmp, ignore_errors=True)
    return problems + len(changed)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments verify", description=__doc__.split("\n\n")[0])
    p.add_argument("studies", nargs="*", help="studies to rerun (default: every main-job study)")
    p.add_argument("--paper", action="store_true", help="check the committed paper-scale outputs")
    p.add_argument("--keep", type=Path, default=None, help="keep the reruns in this folder")
    args = p.parse_args(argv)
    names = args.studies or [s.name for s in registry.STUDIES if s.main_job]
    unknown = [n for n in names if n not in {s.name for s in registry.STUDIES}]
    if unknown:
        raise SystemExit(f"unknown studies {unknown}; see `python -m experiments list`")
    problems = verify(names, paper=args.paper, workdir=args.keep)
    print(f"[verify] {'OK' if not problems else f'{problems} problem(s)'}")
    return 1 if problems else 0
