"""What ``evaluate`` and ``merge`` write into ``--out``: the report files, the state file, the
``INCOMPLETE`` marker while they are written (the names: :mod:`calib_jax.logs.common`), and
:func:`write_report` that makes them all from an accumulated log."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from calib_jax.logs.common import CHECKPOINT, INCOMPLETE, REPORT_FILES, STATE_FILE, plain_figure_text, say
from calib_jax.logs.unseen import warn_if_respelled

__all__ = ["REPORT_FILES", "INCOMPLETE", "INCOMPLETE_TEXT", "STATE_FILE", "CHECKPOINT", "RunState", "report_files",
           "utf8_path", "weight_total", "write_report"]

INCOMPLETE_TEXT = ("This folder's report is incomplete: calib-jax was writing it when it stopped. Its other "
                   "files may be missing or come from an earlier run. Rerun the command (with --resume "
                   "after an evaluate that was stopped) to complete it.\n")


def report_files(out: Path) -> tuple[Path, ...]:
    """Every file :func:`write_report` may write or remove in ``out``: the report's files and
    the ``INCOMPLETE`` marker.

    Example:
      >>> [p.name for p in report_files(Path("out"))][-1]
      'INCOMPLETE'
    """
    return (*(out / f for f in REPORT_FILES), out / INCOMPLETE)


@dataclasses.dataclass
class RunState:
    """What a running command has reached, for its clean-up after a failure: once
    ``writing_report`` is set, a failure leaves the ``INCOMPLETE`` marker in place."""

    writing_report: bool = False


def utf8_path(path: str) -> str:
    """``path`` as valid UTF-8 text: undecodable bytes of a file name as ``\\xNN``.

    Example:
      >>> utf8_path("log\\udcff.csv")
      'log\\\\xff.csv'
    """
    try:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeError:  # a lone surrogate that no byte gave
        return path.encode("utf-8", "backslashreplace").decode("utf-8")


def weight_total(acc: Any) -> float:
    """The total weight of an accumulator's valid rows (its cells before the replicates are
    drawn): ``inf`` when the sums overflowed."""
    import numpy as np

    with np.errstate(over="ignore"):
        return float(np.sum(acc.cell[:, 0])) if acc.cells else float(acc.scal[0, 0])


def _version() -> str:
    from calib_jax import __version__

    return __version__


def write_report(acc: Any, out: Path, inp: dict[str, Any], extra_settings: dict[str, Any], t0: float, *,
                 command: str = "evaluate", gauc_weight: str = "impressions", gauc_sums: Any = None,
                 state: RunState | None = None) -> dict[str, Any]:
    """Panel, report and every output file of an accumulated log (``evaluate`` and ``merge``).

    Args:
      acc: the log's :class:`~calib_jax.logs.accumulate.Accumulator` (replicates not drawn yet).
      out: the output folder.
      inp: the input record of the report (``path``: one name or the merged parts' names).
      extra_settings: settings of the run recorded beside the accumulator's.
      t0: ``time.perf_counter()`` at the command's start (the wall time in the provenance).
      command: the command recorded in the provenance.
      gauc_weight: the user weight of the GAUC row of the metric panel.
      gauc_sums: :class:`calib_jax.logs.gauc.UserAUCSums`; GAUC joins the metrics when given.
      state: marked ``writing_report`` once the first output file is written.

    Returns:
      The report (``report.json``'s content).
    """
    from calib_jax import io as cio
    from calib_jax.logs.panel import compute_panel
    from calib_jax.logs.report import build_report, summary_text, write_outputs
    from calib_jax.logs.validate import check_weight_total

    # a file name's bytes that are not UTF-8 (kept by Python as lone surrogates) can be neither
    # drawn nor written as UTF-8: the report records them as \xNN
    paths = inp["path"]
    inp = {**inp, "path": utf8_path(paths) if isinstance(paths, str) else [utf8_path(p) for p in paths]}
    where = inp["path"] if isinstance(inp["path"], str) else "the merged parts"
    from calib_jax.logs.accumulate import check_block_count

    check_block_count(acc.rows_read, acc.settings, where)
    total = weight_total(acc)
    if total != 0:  # a total of 0 is refused below, with its own message
        check_weight_total(total, source=where, column=inp.get("columns", {}).get("weight"))
    full = acc.replicated()
    if not full.scal[0, 0] > 0:  # the total weight of the valid rows
        raise ValueError(f"{where}: the weights of the {acc.rows_used} valid rows sum to 0, so no metric is "
                         "defined")
    panel = compute_panel(full)
    rep = build_report(panel)
    if gauc_sums is not None:
        from calib_jax.logs.gauc import add_gauc

        add_gauc(rep, gauc_sums, gauc_weight)
    wall = time.perf_counter() - t0
    rep["input"] = {**inp, "rows_read": acc.rows_read, "rows_used": acc.rows_used,
                    "rows_dropped": acc.rows_read - acc.rows_used, "dropped": acc.dropped, "chunks": acc.chunks}
    rep["settings"] = acc.settings.to_dict() | extra_settings
    rep["provenance"] = cio.provenance({"command": command, **rep["settings"]}, seed=acc.settings.seed,
                                       wall_time_s=wall, extra={"calib_jax": _version(),
                                                                "rows_per_s": acc.rows_read / max(wall, 1e-9)})
    if state is not None:
        state.writing_report = True  # from here on a failure leaves the INCOMPLETE marker
    cio.atomic_write_text(out / INCOMPLETE, INCOMPLETE_TEXT)
    with plain_figure_text():  # the plot's title is the log's name: a `$` in it is a dollar sign
        write_outputs(out, rep)
    cio.remove_output(out / INCOMPLETE)
    for f in acc.settings.fields:
        warn_if_respelled(where, f, acc.levels(f))
    say(summary_text(rep))  # quotes the log's name and field names: made inert
    say(f"  report: {out / 'report.html'}  ({acc.rows_read / max(wall, 1e-9):,.0f} rows/s)")
    return rep
