"""One report from the states of several ``evaluate --state-only`` runs (``calib-jax merge
STATE...``: the parts of one log read by several workers, or one part per day)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from calib_jax.logs.common import out_dir
from calib_jax.logs.options import MergeOptions
from calib_jax.logs.outputs import STATE_FILE, write_report

__all__ = ["state_path", "run_merge"]


def state_path(item: str) -> Path:
    """A state argument: the file, or a folder's ``state.npz``."""
    p = Path(item)
    return p / STATE_FILE if p.is_dir() else p


def run_merge(opts: MergeOptions) -> dict[str, Any]:
    """Merge the states of ``evaluate --state-only`` runs (parts of one log, e.g. one per
    worker or per day) and write the report of the whole. The parts must share their settings;
    under the ``rows`` scheme their row ranges (``--row-offset``) must not overlap, since a row's
    bootstrap counts are keyed by its global index (the ``cells`` scheme draws at the merge)."""
    from calib_jax.logs.accumulate import Accumulator
    from calib_jax.logs.validate import check_accumulator

    t0 = time.perf_counter()
    out = out_dir(Path(opts.out))
    parts = []
    seen: dict[str, Path] = {}
    for item in opts.states:
        p = state_path(item)
        if not p.is_file():
            raise FileNotFoundError(f"{item}: no state file (expected {STATE_FILE} written by evaluate --state-only)")
        data = p.read_bytes()
        acc, meta = Accumulator.from_bytes(data, source=str(p))
        if acc.rows_read == 0:
            raise ValueError(f"{p}: an empty state (no rows read)")
        if not isinstance(meta.get("input"), dict) or not isinstance(meta["input"].get("columns"), dict):
            raise ValueError(f"{p}: not a state of `evaluate --state-only` (no input record)")
        weight = meta["input"]["columns"].get("weight")
        # tables that no log can have (forged or damaged): refused, naming the array and cell
        check_accumulator(acc, source=str(p), weight=weight if isinstance(weight, str) else None)
        fp = acc.fingerprint()
        if fp in seen:
            raise ValueError(f"{p}: holds the same statistics as {seen[fp]} (the same part twice would count its "
                             "rows twice)")
        seen[fp] = p
        parts.append((p, acc, meta))
    first_p, first, first_meta = parts[0]
    for p, acc, meta in parts[1:]:
        if acc.settings != first.settings:
            diff = [k for k, v in acc.settings.to_dict().items() if first.settings.to_dict()[k] != v]
            raise ValueError(f"{p}: settings differ from {first_p} in {', '.join(diff)} "
                             f"({acc.settings} vs {first.settings})")
        cols, cols0 = meta["input"]["columns"], first_meta["input"]["columns"]
        if cols != cols0:
            diff = sorted(k for k in set(cols) | set(cols0) if cols.get(k) != cols0.get(k))
            raise ValueError(f"{p}: read other columns than {first_p} (differs in: {', '.join(diff)}); the parts "
                             "of one report must measure the same score, label, weight, oracle and fields")
    if first.settings.scheme == "rows" and first.settings.n_boot > 0:
        spans = sorted((a.row_offset, a.row_offset + a.rows_read, str(p)) for p, a, _ in parts)
        for (_, end, a), (start, _, b) in zip(spans, spans[1:]):
            if start < end:
                raise ValueError(f"{a} and {b} overlap in rows ({start} < {end}): the rows scheme needs each part's "
                                 "--row-offset (its first row in the whole log)")
    merged = parts[0][1]
    for _, acc, _ in parts[1:]:
        merged = merged.merge(acc)
    if merged.rows_used == 0:
        raise ValueError("the merged parts have no valid rows")
    inp = {"path": [str(m.get("input", {}).get("path", p)) for p, _, m in parts],
           "format": sorted({str(m.get("input", {}).get("format", "")) for _, _, m in parts}),
           "columns": parts[0][2].get("input", {}).get("columns", {}), "parts": len(parts)}
    return write_report(merged, out, inp, {"chunk_rows": parts[0][2].get("chunk_rows")}, t0, command="merge")
