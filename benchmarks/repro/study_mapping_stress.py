"""The users' study path under the stress that crashed the test workers.

Several studies run one after another in one process (as ``python -m experiments.main`` does),
with the persistent compilation cache on and shared with a second process doing the same at
the same time. Every compiled program holds memory mappings (``calib_jax._src.mappings``), so
one such process accumulates thousands; with the kernel's cap lowered (so that the stress comes
in minutes rather than hours) the process either sheds its programs in time or dies in XLA.

Run as root on an otherwise idle machine (it lowers ``vm.max_map_count`` for its duration and
restores it)::

    python benchmarks/repro/study_mapping_stress.py --limit 12000            # with the guard
    python benchmarks/repro/study_mapping_stress.py --limit 12000 --no-guard # without it

Prints, per process, its exit status and its peak mapping count.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

STUDIES = ("compare_calibrators", "field_calibration", "topn_calibration")

_CHILD = r"""
import os, sys
if os.environ.get("STRESS_NO_GUARD") == "1":
    import calib_jax._src.mappings as m
    m.release_compiled_if_near_limit = lambda fraction=0.5: False  # every caller goes through m
from experiments import _study, registry
for name in sys.argv[1:]:
    _study.run_entry(registry.get(name), ["--smoke", "--out", os.path.join(os.environ["STRESS_OUT"], name),
                                          "--no-progress"])
print("done", flush=True)
"""


def _peak_watch(proc: subprocess.Popen, peaks: dict[int, int]) -> None:
    while proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/maps", "rb") as f:
                peaks[proc.pid] = max(peaks.get(proc.pid, 0), f.read().count(b"\n"))
        except OSError:
            pass
        time.sleep(0.5)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=12000)
    ap.add_argument("--no-guard", action="store_true")
    args = ap.parse_args()
    with open("/proc/sys/vm/max_map_count") as f:
        old = f.read().strip()
    work = tempfile.mkdtemp(prefix="map-stress-")
    env = {**os.environ, "CALIB_JAX_XLA_CACHE": os.path.join(work, "xla-cache"),
           "CALIB_JAX_CHECKPOINTS": os.path.join(work, "ckpt"), "STRESS_NO_GUARD": "1" if args.no_guard else "0"}
    orders = [STUDIES, STUDIES[::-1]]
    with open("/proc/sys/vm/max_map_count", "w") as f:
        f.write(str(args.limit))
    try:
        procs, watchers = [], []
        peaks: dict[Any, Any] = {}
        for i, order in enumerate(orders):
            e = {**env, "STRESS_OUT": os.path.join(work, f"out{i}")}
            p = subprocess.Popen([sys.executable, "-c", _CHILD, *order], env=e, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
            procs.append(p)
            w = threading.Thread(target=_peak_watch, args=(p, peaks), daemon=True)
            w.start()
            watchers.append(w)
        t0 = time.perf_counter()
        outs = [p.communicate()[0] for p in procs]
        wall = time.perf_counter() - t0
    finally:
        with open("/proc/sys/vm/max_map_count", "w") as f:
            f.write(old)
    print(f"vm.max_map_count {args.limit} (restored to {old}); guard {'off' if args.no_guard else 'on'}; "
          f"{wall:.0f} s")
    for p, out in zip(procs, outs, strict=True):
        tail = [ln for ln in out.splitlines() if "Segmentation" in ln or "Cannot allocate" in ln or ln == "done"]
        print(f"process {p.pid}: exit {p.returncode}, peak {peaks.get(p.pid, 0)} mappings; {tail[-3:]}")
    return 0 if all(p.returncode == 0 for p in procs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
