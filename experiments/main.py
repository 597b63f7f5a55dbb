"""The main job (``make run``): the quick default studies, in dependency order.

Each entry is an experiment module with ``main(argv)``; every study writes its figures,
tables and provenance into figures/<study>/.  Pass study names to run a subset:

    python -m experiments.main                 # everything below, quick settings
    python -m experiments.main metrics_demo    # one study
"""

from __future__ import annotations

import importlib
import sys
import time

# (module, argv) in dependency order; all quick defaults.
STUDIES: list[tuple[str, list[str]]] = [
    ("metrics_demo", []),  # metric panel + decompositions on a synthetic population
    ("simulator_stats", ["--quick"]),  # builds the default simulator dataset + backbone (cached)
    ("textbook_lab", []),  # seeds/004 §6 table and reliability diagrams
    ("mc_spearman", ["--quick"]),  # Fig 3: Spearman heatmap of every metric vs the oracle Brier
    ("compare_calibrators", ["--quick"]),  # Tables 1-5 of seeds/000 on the simulator and Open Bandit
]


def main(argv: list[str] | None = None) -> None:
    names = sys.argv[1:] if argv is None else argv
    todo = [s for s in STUDIES if not names or s[0] in names]
    unknown = set(names) - {s[0] for s in STUDIES}
    if unknown:
        raise SystemExit(f"unknown studies {sorted(unknown)}; known: {[s[0] for s in STUDIES]}")
    t_all = time.perf_counter()
    for name, args in todo:
        t0 = time.perf_counter()
        print(f"=== {name} ===", flush=True)
        importlib.import_module(f"experiments.{name}").main(args)
        print(f"=== {name}: {time.perf_counter() - t0:.1f} s ===", flush=True)
    print(f"main job done in {time.perf_counter() - t_all:.1f} s")


if __name__ == "__main__":
    main()
