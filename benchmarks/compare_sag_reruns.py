"""How far a rerun of ``grouping`` or ``ablation`` moved the study: its seconds by world, which
of its values changed, how far each paired difference moved against its
own interval, and which "A beats B" verdicts turned.

The lock-step solver (``--set sag_solver=lockstep``: a fit's P partitions evaluated together,
one pass over the embedding per evaluation of the objective) equals the sequential fits only to
float32 rounding of the batched sums, which the non-convex grouping objective ("Calibration is
Grouping", anonymous authors, under review, eq. 8-11) can carry into another optimum. The two
studies of that paper that are made of nothing but SAG / VR-SAG fits -- the ablations of its
Fig. 2 and the within-group variances of its Fig. 7 -- may switch only if their own numbers
hold; this page answers that for one output folder run both ways with the same seed. It serves as
well for two runs of one configuration on two machines.

    python -m benchmarks.compare_sag_reruns --before figures/grouping_paper \\
        --after /path/to/rerun [--ledger-before A.csv --ledger-after B.csv] [--out ...]

The study is read from the folders' tables (``within_group_variance.csv`` and
``differences.csv`` for grouping; ``ablation.csv`` and ``paired.csv`` for ablation). The page
reports

* the configuration keys that differ (anything beyond ``sag_solver`` is flagged) and whether the
  two runs share a commit;
* each world's seconds by phase before and after (``provenance.json``: ``worlds.<world>.
  phase_seconds``);
* the value table's rows whose numbers are not the same in both runs, and whether those are only
  rows the solver fits: grouping's field and one-group rows are no SAG fit, see the same data and
  must repeat, so any change there is flagged;
* every paired difference (A - B, or setting - reference) with its crossed fits x folds
  interval: how far its estimate moved in units of the interval's half-width, and those whose
  side of 0 turned under the ledger's rule (``hi < 0``: A lower; ``lo > 0``: A higher; else not
  told apart); and, given the claims ledgers regenerated from each run, every ledger row citing
  the folder whose verdict turned.

Writes ``<out>.csv`` (every paired difference, before and after) and ``<out>.md``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.compare_field_reruns import side
from benchmarks.compare_reruns import (
    _fmt,
    _read_csv,
    cli,
    config_difference,
    ledger_lines,
    options_line,
    phase_seconds,
    runs_line,
    same_commit,
    seconds_cells,
)

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class StudyTables:
    """Where one study keeps its numbers: the value table (``values``: its key and value
    columns) and the paired-difference table (``pairs``: its key, estimate and interval
    columns); ``fitted(row)`` says whether the SAG solver made a value row."""

    values: str
    value_key: tuple[str, ...]
    value_columns: tuple[str, ...]
    pairs: str
    pair_key: tuple[str, ...]
    pair_columns: tuple[str, str, str]
    fitted: Callable[[Mapping[str, str]], bool]


STUDIES = {
    "grouping": StudyTables(
        "within_group_variance", ("world", "grouping", "memberships"), ("score_within_var", "oracle_within_var"),
        "differences", ("world", "comparison", "memberships", "quantity"), ("diff", "lo", "hi"),
        lambda row: row["grouping"] in ("SAG", "VR-SAG")),
    "ablation": StudyTables(
        "ablation", ("world", "ablation", "value", "fit"), ("ECE", "LCCE", "Brier"),
        "paired", ("world", "ablation", "value", "reference", "metric"), ("minus_reference", "ci_low", "ci_high"),
        lambda row: True),
}


def study_of(folder: Path) -> str | None:
    """The study whose tables ``folder`` holds (``None`` when it holds neither's).

    >>> study_of(Path("/nonexistent"))
    """
    for name, t in STUDIES.items():
        if (folder / "provenance.json").is_file() and (folder / f"{t.values}.csv").is_file() \
                and (folder / f"{t.pairs}.csv").is_file():
            return name
    return None


def changed_values(before: Sequence[Mapping[str, str]], after: Sequence[Mapping[str, str]], t: StudyTables
                   ) -> tuple[int, list[tuple[Mapping[str, str], str, float, float]]]:
    """The rows matched by ``t.value_key`` in both tables, and ``(row, column, before, after)`` for
    every value that is not the same number in both.

    >>> t = STUDIES["grouping"]
    >>> r = lambda g, v: {"world": "w", "grouping": g, "memberships": "hard", "score_within_var": v,
    ...                   "oracle_within_var": "1"}
    >>> n, got = changed_values([r("SAG", "0.5"), r("field", "2")], [r("SAG", "0.25"), r("field", "2")], t)
    >>> n, [(row["grouping"], c, b, a) for row, c, b, a in got]
    (2, [('SAG', 'score_within_var', 0.5, 0.25)])
    """
    key = lambda r: tuple(r[k] for k in t.value_key)  # noqa: E731
    rows_after = {key(r): r for r in after}
    n, out = 0, []
    for rb in before:
        ra = rows_after.get(key(rb))
        if ra is None:
            continue
        n += 1
        out += [(rb, c, float(rb[c]), float(ra[c])) for c in t.value_columns if ra[c] != rb[c]]
    return n, out


def moved_pairs(before: Sequence[Mapping[str, str]], after: Sequence[Mapping[str, str]], t: StudyTables
                ) -> list[list[Any]]:
    """For every paired difference in both tables: its key, the estimate and interval before and
    after, the move of the estimate over the earlier interval's half-width, and both sides of 0.

    >>> t = STUDIES["ablation"]
    >>> r = lambda d, lo, hi: {"world": "w", "ablation": "groups", "value": "3", "reference": "1", "metric": "ECE",
    ...                        "minus_reference": d, "ci_low": lo, "ci_high": hi}
    >>> [row[-3:] for row in moved_pairs([r("-2", "-3", "-1")], [r("-1.5", "-2.5", "0.5")], t)]
    [[0.5, 'A lower', 'not told apart']]
    """
    est, lo, hi = t.pair_columns
    key = lambda r: tuple(r[k] for k in t.pair_key)  # noqa: E731
    rows_after = {key(r): r for r in after}
    out = []
    for rb in before:
        ra = rows_after.get(key(rb))
        if ra is None:
            continue
        half = (float(rb[hi]) - float(rb[lo])) / 2
        move = (float(ra[est]) - float(rb[est])) / half if half > 0 else None
        out.append([*key(rb), float(rb[est]), float(rb[lo]), float(rb[hi]), float(ra[est]), float(ra[lo]),
                    float(ra[hi]), move, side(rb[lo], rb[hi]), side(ra[lo], ra[hi])])
    return out


def page(before: Path, after: Path, ledger_before: Path | None = None, ledger_after: Path | None = None,
         ledger_source: str | None = None, labels: tuple[str | None, str | None] = (None, None)
         ) -> tuple[str, list[str], list[list[Any]]]:
    """The page's text, header and rows for two output folders of ``grouping`` or ``ablation``."""
    import importlib

    name = study_of(after)
    if name is None or study_of(before) != name:
        raise ValueError(f"--before {before} and --after {after} are not output folders of one study "
                         f"({', '.join(STUDIES)})")
    t = STUDIES[name]
    optional = importlib.import_module(f"experiments.{name}").OPTIONAL_SETTINGS
    pb, pa = (json.loads((d / "provenance.json").read_text()) for d in (before, after))
    options = config_difference(pb["config"], pa["config"], optional)
    other = sorted(k for k in options if k != "sag_solver")
    cpus = [prov.get("cpu", "not recorded") for prov in (pb, pa)]
    lines = [f"# `{name}` rerun: what moved\n",
             runs_line(pb, pa, before, after, labels),
             f"CPU: {cpus[0]} before, {cpus[1]} after" + (" (the same type)." if cpus[0] == cpus[1] != "not recorded"
                                                           else "."),
             options_line(options)
             + (f" **Other configuration keys differ too: {', '.join(other)}.**" if other
                else " Nothing else in the configuration differs."),
             ("Both runs are of one commit: only the options differ." if same_commit(pb, pa) else
              "The commits differ, so a change of the code between them can move numbers too."),
             "XLA:CPU compiles for the CPU's vector width, so two CPU types can round the same program "
             "differently; a network trained on them (the null world's backbone) can differ beyond rounding.", ""]
    lines += ["## Seconds by world and phase", "", "| world | phase | before s | after s | after / before |",
              "|---|---|---|---|---|"]
    secs_b, secs_a = phase_seconds(pb, "worlds"), phase_seconds(pa, "worlds")
    total_b = total_a = 0.0
    for world, seconds in secs_a.items():
        for phase, s_a in seconds.items():
            s_b = secs_b.get(world, {}).get(phase)
            total_a += s_a
            total_b += s_b or 0.0
            lines.append(f"| {world} | {phase} | {seconds_cells(s_b, s_a)}")
    lines += ["", f"Wall time: {pb.get('wall_time_s', 0) / 60:.1f} min before, {pa.get('wall_time_s', 0) / 60:.1f} "
                  f"min after; phases {total_b / 60:.1f} and {total_a / 60:.1f} min ({total_a / total_b:.2f}x)."
              if total_b else "", "Two runs, not interleaved: another day, machine, load or commit moves these "
              "seconds too. A world resumed from a checkpoint carries the seconds of the run that computed it.", ""]

    values_before = _read_csv(before / f"{t.values}.csv")
    n_rows, changed = changed_values(values_before, _read_csv(after / f"{t.values}.csv"), t)
    moved_rows = {tuple(r[k] for k in t.value_key) for r, *_ in changed}
    unfitted = sorted({tuple(r[k] for k in t.value_key) for r, *_ in changed if not t.fitted(r)})
    n_unfitted = sum(not t.fitted(r) for r in values_before)
    rel = sorted(abs(a - b) / abs(b) for _, _, b, a in changed if b)
    lines += [f"## `{t.values}.csv`", "",
              f"{len(moved_rows)} of {n_rows} rows changed ({len(changed)} values of {n_rows * len(t.value_columns)})"
              + (f"; relative change: largest {rel[-1]:.2g}, median {rel[len(rel) // 2]:.2g}." if rel else ".")
              + (f" {n_unfitted} rows are no SAG fit" + (
                  f"; **{len(unfitted)} of them changed: {', '.join(' / '.join(k) for k in unfitted)}.**"
                  if unfitted else " and all of them repeat to the digit written.") if n_unfitted else ""), ""]

    pairs = moved_pairs(_read_csv(before / f"{t.pairs}.csv"), _read_csv(after / f"{t.pairs}.csv"), t)
    moves = sorted(abs(r[-3]) for r in pairs if r[-3] is not None)
    turned = [r for r in pairs if r[-2] != r[-1]]
    nk = len(t.pair_key)
    lines += [f"## `{t.pairs}.csv`: the paired differences", ""]
    if moves:
        worst = max((r for r in pairs if r[-3] is not None), key=lambda r: abs(r[-3]))
        lines.append(f"Over the {len(pairs)} differences the estimate moved by at most {moves[-1]:.2f} of its "
                     f"interval's half-width ({' / '.join(worst[:nk])}: {_fmt(worst[nk])} -> {_fmt(worst[nk + 3])}), "
                     f"the median {moves[len(moves) // 2]:.2g}; {sum(m > 0.5 for m in moves)} moved by more than "
                     "half of it.")
    lines += ["", f"{len(pairs) - len(turned)} of {len(pairs)} differences keep their side"
              + (", and these turn:" if turned else ".")]
    for r in turned:
        lines.append(f"- {' / '.join(r[:nk])}: {r[-2]} ({_fmt(r[nk])} [{_fmt(r[nk + 1])}, {_fmt(r[nk + 2])}]) -> "
                     f"{r[-1]} ({_fmt(r[nk + 3])} [{_fmt(r[nk + 4])}, {_fmt(r[nk + 5])}])")
    lines.append("")
    if ledger_before is not None and ledger_after is not None:
        lines += ledger_lines(ledger_before, ledger_after, ledger_source or f"figures/{before.name}/")
    header = [*t.pair_key, "before", "before lo", "before hi", "after", "after lo", "after hi",
              "move / half-width", "side before", "side after"]
    return "\n".join(lines) + "\n", header, pairs


def _not_an_output(folder: Path) -> str | None:
    if study_of(folder) is not None:
        return None
    return f"{folder} is not an output folder of {' or '.join(STUDIES)} (no provenance.json or tables)"


def main(argv: Sequence[str] | None = None) -> str:
    """Write the page (module docstring); ``argv`` as the command line, ``None`` reads ``sys.argv``."""
    return cli(argv, __doc__.splitlines()[0], RESULTS / "sag_solver_rerun", _not_an_output, page)


if __name__ == "__main__":
    main()
