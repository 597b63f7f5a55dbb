"""The main job (``make run``): the registry's main-job studies at quick scale, in order.

    python -m experiments.main                  # every main-job study
    python -m experiments.main metrics_demo     # a subset, by registry name

The list lives in :mod:`experiments.registry` (``main_job=True``); there is no second list.
After the studies the claims ledger (``figures/claims/``) and the README's result blocks are
regenerated from the committed outputs.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

from experiments import registry
from experiments._study import run_entry


def main(argv: Sequence[str] | None = None) -> None:
    names = list(sys.argv[1:] if argv is None else argv)
    todo = registry.main_job() if not names else [registry.get(n) for n in names]
    t_all = time.perf_counter()
    for entry in todo:
        t0 = time.perf_counter()
        print(f"=== {entry.name} ({entry.reproduces}) ===", flush=True)
        run_entry(entry, ["--quick"])
        print(f"=== {entry.name}: {time.perf_counter() - t0:.1f} s ===", flush=True)
    from experiments import claims, readme

    claims.main([])
    readme.main([])
    print(f"main job done in {time.perf_counter() - t_all:.1f} s")


if __name__ == "__main__":
    main()
