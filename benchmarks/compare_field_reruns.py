"""How far a rerun of ``field_calibration`` under another fitting option moved the study: its
seconds by setting, which methods' numbers changed, by how much against the test rows' own
noise, and which of its "A beats B" verdicts turned.

The lock-step solver of SAG and VR-SAG (``--set sag_solver=lockstep``: a fit's P partitions
evaluated together, one pass over the embedding per evaluation) equals the sequential fits only
to float32 rounding of the batched sums, which the non-convex grouping objective ("Calibration
is Grouping", anonymous authors, under review, eq. 8-11) can carry into another optimum. Whether
the field-aware study (Pan et al., "Field-aware Calibration", §5) may switch is a question about
its own numbers; this page answers it for one output folder run both ways with the same seed.
Given two runs of the same configuration (another machine type, another commit) it says what
moved with no method flagged (``benchmarks/results/field_machine_rerun.md``: the quick output
of an Intel Xeon with AVX-512 rerun on an AMD EPYC without it).

    python -m benchmarks.compare_field_reruns --before figures/field_calibration_paper \\
        --after /path/to/rerun [--ledger-before A.csv --ledger-after B.csv] [--out ...]

The page reports

* the configuration keys that differ (anything beyond ``sag_solver`` is flagged) and whether the
  two runs share a commit;
* the seconds of each (data set, setting) before and after (``provenance.json``'s
  ``phase_seconds``);
* per table (``<data set>_<setting>.csv``, the means over the refits), the methods whose values
  are not the same numbers, and whether those are only the methods the option fits (SAG and
  VR-SAG): every other method sees the same data, keys and base models and must repeat;
* each changed mean, its difference, and that difference over the standard error of the test
  rows (the first refit's 95% row-bootstrap interval, ``intervals_*.csv``, width / 3.92);
* the study's paired differences (``paired_*``: the first refit's row bootstrap; ``refits_*``:
  the paired t-interval over refits) whose side turned under the ledger's rule (``hi < 0``:
  A lower; ``lo > 0``: A higher; else not told apart); and, given the claims ledgers regenerated
  from each run, every ledger row citing the folder whose verdict turned.

Writes ``<out>.csv`` (the changed means) and ``<out>.md``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.compare_reruns import (
    _fmt,
    _read_csv,
    cli,
    config_difference,
    ledger_lines,
    options_line,
    runs_line,
    same_commit,
    seconds_cells,
)

RESULTS = Path(__file__).resolve().parent / "results"
#: the methods each optional fitting setting of field_calibration fits
TOUCHES = {"sag_solver": ("SAG", "VR-SAG")}
_SIDES = {"reproduces": "A lower", "refuted": "A higher", "inconclusive": "not told apart",
          "no interval": "no interval"}


def side(lo: Any, hi: Any) -> str:
    """Which side of 0 the interval of ``A - B`` lies on, by the ledger's rule.

    >>> side(-2, -1), side(1, 2), side(-1, 1)
    ('A lower', 'A higher', 'not told apart')
    """
    from experiments.ledger.rule import rule

    return _SIDES[rule("< 0", lo, hi)]


def table_names(folder: Path) -> list[str]:
    """The ``<data set>_<setting>`` tables of a field_calibration output folder."""
    prefixes = ("intervals_", "paired_", "refits_")
    return sorted(p.stem for p in folder.glob("*_*.csv") if not p.stem.startswith(prefixes))


def changed_means(before: Sequence[Mapping[str, str]], after: Sequence[Mapping[str, str]],
                  intervals: Sequence[Mapping[str, str]] | None = None) -> list[list[Any]]:
    """``[method, metric, before, after, after - before, difference / row se]`` for every value of
    a method's row that is not the same number in both tables (matched by method); the row
    standard error is the first refit's bootstrap interval width over 3.92 (``None`` without it).

    >>> b = [{"method": "A", "training data": "x", "AUC": "0.7"}, {"method": "B", "training data": "x", "AUC": "0.6"}]
    >>> a = [{"method": "A", "training data": "x", "AUC": "0.7"}, {"method": "B", "training data": "x", "AUC": "0.61"}]
    >>> ci = [{"method": "B", "metric": "AUC", "ci_low": "0.5", "ci_high": "0.892"}]
    >>> [[m, k, round(d, 6), round(z, 6)] for m, k, _, _, d, z in changed_means(b, a, ci)]
    [['B', 'AUC', 0.01, 0.1]]
    """
    se = {(r["method"], r["metric"]): (float(r["ci_high"]) - float(r["ci_low"])) / 3.92 for r in intervals or []}
    rows_a = {r["method"]: r for r in after}
    out = []
    for rb in before:
        ra = rows_a.get(rb["method"])
        if ra is None:
            continue
        for k, vb in rb.items():
            if k in ("method", "training data") or ra.get(k) == vb:
                continue
            d = float(ra[k]) - float(vb)
            s = se.get((rb["method"], k))
            out.append([rb["method"], k, float(vb), float(ra[k]), d, d / s if s else None])
    return out


def turned_sides(before: Sequence[Mapping[str, str]], after: Sequence[Mapping[str, str]]
                 ) -> tuple[int, list[tuple[tuple[str, str, str], Mapping[str, str], Mapping[str, str]]]]:
    """The rows of a paired table (``method_a``, ``method_b``, ``metric``, ``a_minus_b``,
    ``ci_low``, ``ci_high``) in both runs, and the (key, before, after) of those whose side
    turned.

    >>> r = lambda lo, hi: {"method_a": "A", "method_b": "B", "metric": "AUC", "a_minus_b": "0",
    ...                     "ci_low": lo, "ci_high": hi}
    >>> n, turned = turned_sides([r("-2", "-1")], [r("-1", "1")])
    >>> n, [k for k, _, _ in turned]
    (1, [('A', 'B', 'AUC')])
    """
    key = lambda r: (r["method_a"], r["method_b"], r["metric"])  # noqa: E731
    b = {key(r): r for r in before}
    both = [(key(r), b[key(r)], r) for r in after if key(r) in b]
    return len(both), [(k, rb, ra) for k, rb, ra in both
                       if side(rb["ci_low"], rb["ci_high"]) != side(ra["ci_low"], ra["ci_high"])]


def page(before: Path, after: Path, ledger_before: Path | None = None, ledger_after: Path | None = None,
         ledger_source: str | None = None, labels: tuple[str | None, str | None] = (None, None)
         ) -> tuple[str, list[str], list[list[Any]]]:
    """The page's text, header and rows for two output folders of ``field_calibration``."""
    from experiments.field_calibration import OPTIONAL_SETTINGS

    pb, pa = (json.loads((d / "provenance.json").read_text()) for d in (before, after))
    options = config_difference(pb["config"], pa["config"], OPTIONAL_SETTINGS)
    other = sorted(k for k in options if k not in TOUCHES)
    touched = {m for k in options for m in TOUCHES.get(k, ())}
    what = "rerun with another fitting option" if options else "rerun (no option differs: another machine or commit)"
    if same_commit(pb, pa):
        commits = "Both runs are of one commit" + (": only the option differs." if options else ".")
    else:
        commits = ("The commits differ, so a change of the code between them can move numbers too"
                   + (": a method that the option does not fit and that changed anyway is flagged below."
                      if options else "."))
    lines = [f"# `{pb.get('study', 'field_calibration')}` {what}: what moved\n",
             runs_line(pb, pa, before, after, labels),
             options_line(options)
             + (f" **Other configuration keys differ too: {', '.join(other)}.**" if other
                else " Nothing else in the configuration differs."),
             commits, ""]
    sb, sa = pb.get("phase_seconds", {}), pa.get("phase_seconds", {})
    lines += ["## Seconds by data set and setting", "", "| phase | before s | after s | after / before |",
              "|---|---|---|---|"]
    for k, s_after in sa.items():
        lines.append(f"| {k} | {seconds_cells(sb.get(k), s_after)}")
    tb, ta = sum(sb.values()), sum(sa.values())
    if tb:
        lines += ["", f"In all: {tb / 60:.0f} min before, {ta / 60:.0f} min after ({ta / tb:.2f}x). Two runs, "
                      "not interleaved: another day, load or commit moves these seconds too. A setting resumed "
                      "from a checkpoint carries the seconds of the run that computed it."]
    lines += ["", "## Which methods' numbers changed", ""]
    rows: list[list[Any]] = []
    for name in table_names(after):
        if not (before / f"{name}.csv").is_file():
            continue
        ci = after / f"intervals_{name}.csv"
        table_after = _read_csv(after / f"{name}.csv")
        got = changed_means(_read_csv(before / f"{name}.csv"), table_after, _read_csv(ci) if ci.is_file() else None)
        rows += [[name, *r] for r in got]
        methods = [r["method"] for r in table_after]
        moved = sorted({r[0] for r in got})
        unexpected = [m for m in moved if m not in touched] if options else []  # no option: any method may move
        lines.append(f"- {name}: {len(moved)} of {len(methods)} methods changed ({', '.join(moved) or 'none'}); "
                     f"the other {len(methods) - len(moved)} repeat to the digit written."
                     + (f" **Unexpected: {', '.join(unexpected)} changed although the option does not fit "
                        "them.**" if unexpected else ""))
    scaled = [abs(r[6]) for r in rows if r[6] is not None]
    if scaled:
        worst = max((r for r in rows if r[6] is not None), key=lambda r: abs(r[6]))
        lines += ["", f"Over the {len(rows)} changed means: the largest difference is {max(scaled):.2f} standard "
                      f"errors of the test rows ({worst[1]} {worst[2]} in {worst[0]}: {worst[3]:.6g} -> "
                      f"{worst[4]:.6g}); the median {sorted(scaled)[len(scaled) // 2]:.2f}."]
    lines += ["", "## Verdicts", ""]
    for kind, what in (("paired", "the first refit's paired row bootstrap"),
                       ("refits", "the paired t-interval over the refits")):
        n_all, turned_all = 0, []
        for name in table_names(after):
            p_b, p_a = before / f"{kind}_{name}.csv", after / f"{kind}_{name}.csv"
            if p_b.is_file() and p_a.is_file():
                n, turned = turned_sides(_read_csv(p_b), _read_csv(p_a))
                n_all += n
                turned_all += [(name, *t) for t in turned]
        lines.append(f"`{kind}_*` ({what}): {n_all - len(turned_all)} of {n_all} differences A - B keep their side"
                     + (", and these turn:" if turned_all else "."))
        for name, (a, b, metric), rb, ra in turned_all:
            lines.append(f"- {name}: {a} - {b}, {metric}: {side(rb['ci_low'], rb['ci_high'])} "
                         f"({_fmt(rb['a_minus_b'])} [{_fmt(rb['ci_low'])}, {_fmt(rb['ci_high'])}]) -> "
                         f"{side(ra['ci_low'], ra['ci_high'])} ({_fmt(ra['a_minus_b'])} "
                         f"[{_fmt(ra['ci_low'])}, {_fmt(ra['ci_high'])}])")
        lines.append("")
    if ledger_before is not None and ledger_after is not None:
        lines += ledger_lines(ledger_before, ledger_after, ledger_source or f"figures/{before.name}/")
    lines += ["## The changed means", ""]
    header = ["table", "method", "metric", "before", "after", "after - before", "difference / row se"]
    return "\n".join(lines) + "\n", header, rows


def _not_an_output(folder: Path) -> str | None:
    if (folder / "provenance.json").is_file() and table_names(folder):
        return None
    return f"{folder} is not a field_calibration output folder (no provenance.json or tables)"


def main(argv: Sequence[str] | None = None) -> str:
    """Write the page (module docstring); ``argv`` as the command line, ``None`` reads ``sys.argv``."""
    return cli(argv, __doc__.splitlines()[0], RESULTS / "field_solver_rerun", _not_an_output, page)


if __name__ == "__main__":
    main()
