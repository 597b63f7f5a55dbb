"""What ``field_calibration --paper`` costs on this machine, phase by phase: one refit of each
setting timed twice (the first with compilation and the bootstrap, then another), times how
often the paper preset does it.

The study (``experiments/field_calibration.py``; Field-aware Calibration (Pan et al.), §5)
refits everything
``repeats`` times (5) in each setting: the main setting (the base models trained on D_train, the
calibrators fitted on D_dev's 200,000 rows) and the data-shift ablation (Table 6, lower block:
the base model trained on D_dev, the calibrators fitted on D_train's 600,000 rows). Each refit's
phases, as ``experiments.field_calibration.one_run`` records them with ``timings`` (every phase
waited for before its clock stops):

* ``train``: Model-1 and, in the main setting, Model-2 (the paper's network: 256-dimensional
  embeddings, 200-200 ReLU, one epoch of Adam; the data-shift setting reports no Model-2 and,
  since 2026-12-05, trains none);
* ``infer``: their logits and Model-1's penultimate embedding (200 dimensions) on D_dev and
  D_test;
* ``fit <method>``: each calibrator's fit and its test predictions (Neural Calibration's
  includes the choice of its budget on the last quarter of D_dev);
* ``metrics``: the test metrics of every method;
* ``bootstrap``: the first refit's paired row bootstrap (``n_boot`` resamples).

The projection of a setting is the first refit plus ``repeats - 1`` times the second (which
compiles nothing new), beside the committed run's seconds of that setting
(``figures/field_calibration_paper/provenance.json``, whose machine load is not recorded). The
Open Bandit settings (about 8% of the committed run) are not timed here: the page adds the
committed run's seconds for them, labelled as such, and so for a simulator setting left out
with ``--settings`` (:func:`untimed_settings`); where a setting is neither timed nor in the
committed run, the page projects no preset. The 30-minute target is the research loop's.

    python -m benchmarks.bench_field_budget [--settings main shift] [--set sag_solver=sequential]
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
COMMITTED = Path(__file__).resolve().parents[1] / "figures" / "field_calibration_paper" / "provenance.json"
TARGET_MIN = 30.0
SETTINGS = {"main": False, "shift": True}


def measure(config: Mapping[str, Any], settings: Sequence[str], dataset: str = "simulator") -> dict[str, Any]:
    """Time two refits of each setting of ``field_calibration`` on ``dataset``.

    Args:
      config: the study's configuration (a preset of ``experiments.field_calibration.PRESETS``).
      settings: names among ``"main"`` and ``"shift"``.
      dataset: the data set (``"simulator"`` or ``"open_bandit"``).

    Returns:
      ``{"data_s": seconds, "first": {setting: {phase: s}}, "again": {setting: {phase: s}},
      "calibrators": [...]}``.

    Example:
      >>> from experiments.field_calibration import PRESETS
      >>> m = measure(PRESETS["smoke"], ["shift"])  # doctest: +SKIP
      >>> sorted(m["first"]["shift"])[:3]  # doctest: +SKIP
      ['bootstrap', 'fit isotonic', 'fit neural_calibration']
    """
    import jax

    import calib_jax.calibrators.neural_calibration  # noqa: F401  (registers)
    import calib_jax.calibrators.sag  # noqa: F401  (registers)
    from calib_jax import calibrators as C
    from experiments import field_calibration as FC

    calibrators = [c for c in config["calibrators"] if c != "mcgrad" or C.multicalibration.available()]
    t0 = time.perf_counter()
    data = FC.load_dataset(dataset, config[dataset], int(config.get("seed", 0)))
    data_s = time.perf_counter() - t0
    key = jax.random.key(int(config.get("seed", 0)))
    first: dict[str, dict[str, float]] = {}
    again: dict[str, dict[str, float]] = {}
    for label in settings:
        for r, store in enumerate((first, again)):
            timings: dict[str, float] = {}
            FC.one_run(data, config["model"], calibrators, jax.random.fold_in(key, r), shift=SETTINGS[label],
                       nc_grid=config["nc_grid"], n_boot=int(config["n_boot"]) if r == 0 else 0, timings=timings,
                       sag_solver=config.get("sag_solver", FC.OPTIONAL_SETTINGS["sag_solver"]))
            store[label] = timings
            print(f"[bench_field_budget] {label}, refit {r + 1}: "
                  + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()), flush=True)
    return {"data_s": data_s, "first": first, "again": again, "calibrators": calibrators}


def project(meas: Mapping[str, Any], repeats: int, committed: Mapping[str, float] | None = None,
            dataset: str = "simulator") -> list[list[Any]]:
    """Rows ``[dataset, setting, phase, first_s, again_s, projected_s, committed_s]``: each
    phase's projection is ``first + (repeats - 1) * again`` (the bootstrap runs once), then one
    total row per setting beside the committed run's seconds of that setting.

    Args:
      meas: the result of :func:`measure`.
      repeats: the preset's refits per setting.
      committed: the committed run's ``phase_seconds`` (keys ``"<dataset>/<setting>"``), if any.
      dataset: the data set measured.

    Returns:
      The rows, phases of each setting first, then its total.

    Example:
      >>> meas = {"first": {"main": {"train": 10.0, "bootstrap": 4.0}},
      ...         "again": {"main": {"train": 8.0}}}
      >>> [r[5] for r in project(meas, repeats=5)]
      [42.0, 4.0, 46.0]
    """
    committed = committed or {}
    rows: list[list[Any]] = []
    for label, phases in meas["first"].items():
        later = meas["again"][label]
        total = 0.0
        for phase, first in phases.items():
            again = later.get(phase, 0.0)
            projected = first + (repeats - 1) * again
            total += projected
            rows.append([dataset, label, phase, first, again if phase in later else None, projected, None])
        rows.append([dataset, label, "setting, every phase", sum(phases.values()), sum(later.values()), total,
                     committed.get(f"{dataset}/{label}")])
    return rows


def untimed_settings(committed: Mapping[str, float], timed: Sequence[str]) -> tuple[dict[str, float], list[str]]:
    """The committed run's seconds that stand in for what this run does not time, and the
    simulator settings that neither this run nor the committed one covers.

    Args:
      committed: the committed run's ``phase_seconds`` (keys ``"<dataset>/<setting>"``).
      timed: the simulator settings timed here (names of :data:`SETTINGS`).

    Returns:
      ``(added, missing)``: every other data set's seconds and those of each simulator setting
      not timed (its data loading is timed here), and the simulator settings in neither.

    Example:
      >>> untimed_settings({"simulator/data": 2.0, "simulator/main": 400.0, "simulator/shift": 1500.0,
      ...                   "open_bandit/main": 40.0}, ["shift"])
      ({'simulator/main': 400.0, 'open_bandit/main': 40.0}, [])
      >>> untimed_settings({}, ["shift"])
      ({}, ['main'])
    """
    added = {k: v for k, v in committed.items()
             if not k.startswith("simulator/") or (k.split("/")[1] in SETTINGS and k.split("/")[1] not in timed)}
    missing = [s for s in SETTINGS if s not in timed and f"simulator/{s}" not in committed]
    return added, missing


def main(argv: Sequence[str] | None = None) -> list[list[Any]]:
    """Measure, project and write ``field_budget.{csv,md}`` (module docstring).

    Args:
      argv: ``--settings``, ``--preset`` (default ``paper``), ``--set KEY=VALUE`` (the study's own
        ``--set``, checked as the study checks it; for tests), ``--out``; ``None`` reads
        ``sys.argv``.

    Returns:
      The CSV's rows.

    Example:
      >>> rows = main(["--preset", "smoke", "--out", "/tmp/field_budget"])  # doctest: +SKIP
    """
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    ap.add_argument("--preset", default="paper", choices=("smoke", "quick", "paper"))
    ap.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", default=str(RESULTS / "field_budget"))
    args = ap.parse_args(argv)
    from benchmarks import machine_speed
    from benchmarks.pages import write_page
    from calib_jax._src.startup import numpy_huge_pages_off
    from experiments import _study, registry

    if argv is None:  # the program: as the study runs (python -m experiments), unless NUMPY_MADVISE_HUGEPAGE is set
        numpy_huge_pages_off()

    sets = [a for item in args.set for a in ("--set", item)]
    _, _, config = _study.resolve(registry.get("field_calibration"), [f"--{args.preset}", *sets, "--show-config"])
    warnings.simplefilter("ignore")  # calibrators' fallback warnings: the study counts them itself
    out = Path(args.out)
    reference_before = machine_speed.previous_reference(out.with_suffix(".csv"), column="first_s")
    load_start = os.getloadavg()[0]
    t0 = time.perf_counter()
    reference = machine_speed.reference_seconds()
    committed: dict[str, float] = {}
    if args.preset == "paper" and COMMITTED.exists():
        committed = json.loads(COMMITTED.read_text()).get("phase_seconds", {})
    meas = measure(config, args.settings)
    repeats = int(config["repeats"])
    rows = project(meas, repeats, committed)
    simulator = sum(r[5] for r in rows if r[2] == "setting, every phase") + meas["data_s"]
    other, missing = untimed_settings(committed, args.settings)
    preset = simulator + sum(other.values())
    rows.append(["simulator", "data", "load", meas["data_s"], None, meas["data_s"], committed.get("simulator/data")])
    for k, v in other.items():
        rows.append([k.split("/")[0], k.split("/")[1], "committed run (not timed here)", None, None, v, v])
    as_committed = ", ".join(k.replace("_", " ").replace("/", " ") for k in other)
    rows.append(["the preset", f"simulator {' and '.join(args.settings)} timed"
                 + (f"; {as_committed} as committed" if other else ""),
                 "sum", None, None, None if missing else preset, sum(committed.values()) or None])
    rows.append(["machine", machine_speed.ROW_LABEL, machine_speed.DESCRIPTION, reference, None, reference, None])
    header = ["dataset", "setting", "phase", "first_s", "again_s", "projected_s", "committed_s"]
    phase_rows = [r for r in rows if r[0] == "simulator"
                  and r[2] not in ("setting, every phase", "load", "committed run (not timed here)")]
    by_phase: dict[str, float] = {}
    for r in phase_rows:
        by_phase[r[2]] = by_phase.get(r[2], 0.0) + r[5]
    shares = ", ".join(f"{k} {100 * v / preset:.0f}% ({v / 60:.1f} min)"
                       for k, v in sorted(by_phase.items(), key=lambda kv: -kv[1]))
    if missing:
        projection = (f"The preset is not projected: its simulator {' and '.join(missing)} setting was neither "
                      "timed here nor found in the committed run.")
    else:
        verdict = "met" if preset / 60 <= TARGET_MIN else "MISSED"
        projection = (f"The preset projects to {preset / 60:.0f} min against the {TARGET_MIN:.0f}-min target: "
                      f"**{verdict}**" + (f" ({as_committed} as the committed run took)." if other else "."))
    text = (f"# field_calibration --{args.preset}: the budget by phase\n\n"
            f"Measured in {time.perf_counter() - t0:.0f} s; 1-min load average {load_start:.2f} at the start, "
            f"{os.getloadavg()[0]:.2f} at the end, on {os.cpu_count()} cores of {machine_speed.cpu_description()}. "
            f"{machine_speed.comparison_sentence(reference, reference_before)} "
            f"SAG and VR-SAG fitted with the {config.get('sag_solver', 'sequential')} solver "
            f"(the study's `sag_solver`). "
            f"{projection} Shares of the preset, summed over the settings timed: {shares}. Method: "
            f"`benchmarks/bench_field_budget.py` (module docstring).\n\n")
    write_page(out, text, header, rows)
    return rows


if __name__ == "__main__":
    main()
