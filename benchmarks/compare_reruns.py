"""How far a rerun of ``compare_calibrators`` under other fitting options moved the study: its
seconds by phase, which methods' numbers changed, by how much against the splits' own spread,
and which verdicts turned.

The faster ways of fitting the D_val heads (``--set sag_heads=together``: every SAG / VR-SAG
head's partitions in one lock-step L-BFGS program, each head on its own bootstrap draw;
``--set nc_heads=batched``: the ten Neural Calibration fits as one vmapped program) equal the
default sequential fits only to float32 rounding, which a non-convex fit (SAG's grouping heads,
"Calibration is Grouping", anonymous authors, under review, eq. 8-11) or an early-stopping
choice (Neural Calibration) can carry into another optimum. Whether a study may switch to them
is an empirical question about *its* numbers: this page answers it for one output folder run
both ways with the same seed and configuration otherwise.

    python -m benchmarks.compare_reruns --before figures/compare_calibrators_paper \\
        --after /path/to/rerun [--ledger-before A.csv --ledger-after B.csv] [--out ...]

The page reports

* the configuration keys that differ (anything beyond the options named is flagged);
* each world's seconds by phase before and after (``provenance.json``'s ``phase_seconds``) and
  their ratio;
* every method whose split values (``per_split.npz``) are not the same bits in both runs,
  and whether that is only the methods the changed options fit (SAG / VR-SAG heads for
  ``sag_heads``, Neural Calibration for ``nc_heads``): every other method must repeat to the
  bit, since it sees the same data, keys and splits;
* for each changed method, world and metric of Table 1 (ECE, LCCE, oracle Brier, Brier+) and
  NLL: the two means, their difference, and that difference in units of the splits' standard
  deviation (the spread the study's own intervals are built from);
* the study's orderings (``claims.csv``: A < B with the crossed fits x folds t-interval, the
  ledger's rule ``hi < 0`` reproduces, ``lo > 0`` refuted, else inconclusive) whose verdict
  differs between the runs, with both intervals; and, given the claims ledgers regenerated from
  each run, every ledger row whose verdict differs.

Writes ``<out>.csv`` (the changed methods' rows) and ``<out>.md``.
"""

from __future__ import annotations

import argparse
import csv
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
#: the metrics a changed method is reported on: Table 1's and the likelihood
METRICS = ("ECE", "LCCE", "Brier", "Brier+", "NLL")
#: which methods' fits each optional fitting setting of compare_calibrators touches
TOUCHES: dict[str, Callable[[str], bool]] = {
    "sag_heads": lambda method: "SAG" in method,
    "nc_heads": lambda method: method == "Neural Calibration",
}


def config_difference(before: Mapping[str, Any], after: Mapping[str, Any],
                      defaults: Mapping[str, Any] | None = None) -> dict[str, tuple[Any, Any]]:
    """The configuration keys whose values differ, as ``{key: (before, after)}``; a key absent
    from one side reads as its value in ``defaults`` (an optional setting a run did not name).

    >>> config_difference({"a": 1, "b": 2}, {"a": 1, "b": 3, "c": "x"}, {"c": "x"})
    {'b': (2, 3)}
    """
    defaults = defaults or {}
    keys = sorted(set(before) | set(after))
    got = {k: (before.get(k, defaults.get(k)), after.get(k, defaults.get(k))) for k in keys}
    return {k: v for k, v in got.items() if v[0] != v[1]}


def phase_seconds(provenance: Mapping[str, Any], part: str = "datasets") -> dict[str, dict[str, float]]:
    """Each data set's seconds by phase from a ``compare_calibrators`` provenance (``part``: the
    key holding them, ``"worlds"`` for grouping and ablation).

    >>> phase_seconds({"datasets": {"w": {"phase_seconds": {"fits": 2.0, "splits": 1.5}}, "v": {}}})
    {'w': {'fits': 2.0, 'splits': 1.5}}
    """
    return {ds: {k: float(v) for k, v in info["phase_seconds"].items()}
            for ds, info in provenance.get(part, {}).items() if "phase_seconds" in info}


def seconds_cells(before: float | None, after: float) -> str:
    """The ``before s | after s | after / before |`` cells of a rerun page's seconds table (blank
    where the earlier run has no such phase).

    >>> seconds_cells(100.0, 60.0), seconds_cells(None, 60.0)
    ('100 | 60 | 0.60 |', ' | 60 |  |')
    """
    return f"{'' if before is None else f'{before:.0f}'} | {after:.0f} | " + (f"{after / before:.2f} |" if before
                                                                             else " |")


def options_line(options: Mapping[str, tuple[Any, Any]]) -> str:
    """``Options that differ: ...`` for :func:`config_difference`'s result.

    >>> options_line({"sag_solver": ("sequential", "lockstep")}), options_line({})
    ("Options that differ: `sag_solver` 'sequential' -> 'lockstep'.", 'Options that differ: none.')
    """
    return "Options that differ: " + ("; ".join(f"`{k}` {v[0]!r} -> {v[1]!r}" for k, v in options.items())
                                      or "none") + "."


def same_commit(pb: Mapping[str, Any], pa: Mapping[str, Any]) -> bool:
    """Whether two provenances name one (known) commit."""
    return pb.get("git_commit") is not None and pb.get("git_commit") == pa.get("git_commit")


def split_keys(npz: Mapping[str, np.ndarray]) -> dict[tuple[str, str, str], np.ndarray]:
    """``per_split.npz``'s arrays by (data set, method, metric)."""
    return {tuple(k.split("/", 2)): np.asarray(npz[k]) for k in npz.keys()}  # type: ignore[misc]


def changed_methods(before: Mapping[tuple[str, str, str], np.ndarray],
                    after: Mapping[tuple[str, str, str], np.ndarray]) -> dict[str, set[str]]:
    """Per data set, the methods with any metric whose split values are not the same bits in
    both runs (NaN equal to NaN); a key in only one run counts as changed.

    >>> a = {("w", "m", "E"): np.array([1.0, np.nan]), ("w", "n", "E"): np.array([2.0])}
    >>> changed_methods(a, {("w", "m", "E"): np.array([1.0, np.nan]), ("w", "n", "E"): np.array([2.5])})
    {'w': {'n'}}
    """
    out: dict[str, set[str]] = {}
    for key in sorted(set(before) | set(after)):
        ds, method, _ = key
        out.setdefault(ds, set())
        if key not in before or key not in after or not np.array_equal(before[key], after[key], equal_nan=True):
            out[ds].add(method)
    return out


def metric_rows(before: Mapping[tuple[str, str, str], np.ndarray], after: Mapping[tuple[str, str, str], np.ndarray],
                changed: Mapping[str, set[str]], metrics: Sequence[str] = METRICS) -> list[list[Any]]:
    """For each changed method, data set and metric: mean before, mean after, their difference
    and the difference over the before run's standard deviation across splits (ddof 1; empty
    when it is 0 or the values are not finite).

    >>> b = {("w", "m", "E"): np.array([1.0, 3.0])}
    >>> row = metric_rows(b, {("w", "m", "E"): np.array([2.0, 4.0])}, {"w": {"m"}}, ["E"])[0]
    >>> row[:6], round(row[6], 6)
    (['w', 'm', 'E', 2.0, 3.0, 1.0], 0.707107)
    """
    rows = []
    for ds in changed:
        for method in sorted(changed[ds]):
            for metric in metrics:
                key = (ds, method, metric)
                if key not in before or key not in after:
                    continue
                b, a = before[key], after[key]
                mb, ma = float(np.mean(b)), float(np.mean(a))
                sd = float(np.std(b, ddof=1)) if b.size > 1 else float("nan")
                scaled = (ma - mb) / sd if np.isfinite(sd) and sd > 0 and np.isfinite(ma - mb) else None
                rows.append([ds, method, metric, mb, ma, ma - mb, scaled])
    return rows


def _verdict(lo: Any, hi: Any) -> str:
    from experiments.ledger.rule import rule

    return rule("< 0", lo, hi)


def ordering_verdicts(claims: Sequence[Mapping[str, str]]) -> dict[tuple[str, ...], tuple[str, str, str, str]]:
    """``claims.csv``'s orderings ``A < B`` by (data set, protocol, claim, metric): the ledger's
    verdict from the crossed fits x folds interval (``refit_lo``, ``refit_hi``), the mean
    difference and the interval's ends as written.

    >>> ordering_verdicts([{"dataset": "w", "protocol": "p", "claim": "A < B", "metric": "LCCE",
    ...                     "refit_diff": "-2", "refit_lo": "-3", "refit_hi": "-1"}])
    {('w', 'p', 'A < B', 'LCCE'): ('reproduces', '-2', '-3', '-1')}
    """
    return {(c["dataset"], c["protocol"], c["claim"], c["metric"]):
            (_verdict(c["refit_lo"], c["refit_hi"]), c["refit_diff"], c["refit_lo"], c["refit_hi"]) for c in claims}


def ledger_changes(before: Sequence[Mapping[str, str]], after: Sequence[Mapping[str, str]],
                   source: str) -> tuple[int, list[tuple[Mapping[str, str], Mapping[str, str]]], int]:
    """The claims ledger rows citing ``source`` (a path prefix of the ``source`` column): how
    many there are after, the (before, after) pairs whose verdict differs (matched by paper,
    place, claim, scale and world), and how many rows exist in only one ledger.

    >>> r = lambda v: {"paper": "p", "place": "x", "claim": "c", "scale": "paper", "world": "w",
    ...                "verdict": v, "source": "figures/s/provenance.json#k"}
    >>> n, turned, unmatched = ledger_changes([r("refuted")], [r("reproduces")], "figures/s/")
    >>> n, [(b["verdict"], a["verdict"]) for b, a in turned], unmatched
    (1, [('refuted', 'reproduces')], 0)
    """
    key = lambda r: (r["paper"], r["place"], r["claim"], r["scale"], r["world"])  # noqa: E731
    pick = lambda rows: {key(r): r for r in rows if r["source"].startswith(source)}  # noqa: E731
    b, a = pick(before), pick(after)
    turned = [(b[k], a[k]) for k in a if k in b and b[k]["verdict"] != a[k]["verdict"]]
    return len(a), turned, len(set(a) ^ set(b))


def _read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _fmt(x: Any) -> str:
    return f"{float(x):+.3g}"


def runs_line(pb: Mapping[str, Any], pa: Mapping[str, Any], before: Path, after: Path,
              labels: tuple[str | None, str | None]) -> str:
    """The page's "Before: ... After: ..." sentence: each run's label (default its path), commit
    and date, from its provenance (``pb``, ``pa``)."""
    def one(p: Mapping[str, Any], folder: Path, label: str | None) -> str:
        return (f"{label or f'`{folder}`'} (commit {p.get('git_commit', '?')[:7]}, "
                f"{p.get('created_utc', '?')[:10]})")
    return f"Before: {one(pb, before, labels[0])}. After: {one(pa, after, labels[1])}."


def ledger_lines(ledger_before: Path, ledger_after: Path, source: str) -> list[str]:
    """The page's ledger paragraph: how many rows of the two regenerated claims ledgers citing
    ``source`` keep their verdict, and each one that turned (:func:`ledger_changes`)."""
    n, turned, unmatched = ledger_changes(_read_csv(ledger_before), _read_csv(ledger_after), source)
    if n == 0:
        return [f"No row of the claims ledger cites `{source}` (the ledger reads another output).", ""]
    lines = [f"The claims ledger regenerated from each run: {n - len(turned)} of {n} rows citing `{source}` keep "
             "their verdict" + (f" ({unmatched} rows exist in only one ledger)" if unmatched else "")
             + (", and these turn:" if turned else "."), ""]
    for rb, ra in turned:
        lines.append(f"- {ra['place']}, {ra['world']}: {ra['claim']}: {rb['verdict']} "
                     f"({_fmt(rb['ours'])} [{_fmt(rb['ci_low'])}, {_fmt(rb['ci_high'])}]) -> {ra['verdict']} "
                     f"({_fmt(ra['ours'])} [{_fmt(ra['ci_low'])}, {_fmt(ra['ci_high'])}])")
    return lines + [""]


def cli(argv: Sequence[str] | None, description: str, default_out: Path,
        not_an_output: Callable[[Path], str | None], page_fn: Callable[..., tuple[str, list[str], list[list[Any]]]]
        ) -> str:
    """The command line shared by the rerun pages: ``--before``, ``--after``, the optional pair
    ``--ledger-before`` / ``--ledger-after``, ``--ledger-source``, ``--label-before``,
    ``--label-after`` and ``--out``. ``not_an_output(folder)`` names why a folder is not the
    study's output (``None`` when it is); ``page_fn`` builds the page as :func:`page` does."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--before", required=True, help="the committed output folder")
    ap.add_argument("--after", required=True, help="the rerun's output folder")
    ap.add_argument("--ledger-before", default=None, help="claims.csv of the ledger built from --before")
    ap.add_argument("--ledger-after", default=None, help="claims.csv of the ledger built from --after")
    ap.add_argument("--ledger-source", default=None,
                    help="the ledger rows' source prefix to compare (default figures/<before's name>/)")
    ap.add_argument("--label-before", default=None, help="how the page names --before (default its path)")
    ap.add_argument("--label-after", default=None, help="how the page names --after (default its path)")
    ap.add_argument("--out", default=str(default_out))
    args = ap.parse_args(argv)
    for flag in ("before", "after"):
        why = not_an_output(Path(getattr(args, flag)))
        if why:
            ap.error(f"--{flag}: {why}")
    if (args.ledger_before is None) != (args.ledger_after is None):
        ap.error("--ledger-before and --ledger-after go together")
    from benchmarks.pages import write_page

    text, header, rows = page_fn(Path(args.before), Path(args.after),
                                 None if args.ledger_before is None else Path(args.ledger_before),
                                 None if args.ledger_after is None else Path(args.ledger_after), args.ledger_source,
                                 (args.label_before, args.label_after))
    return write_page(args.out, text, header, rows)


def page(before: Path, after: Path, ledger_before: Path | None = None, ledger_after: Path | None = None,
         ledger_source: str | None = None, labels: tuple[str | None, str | None] = (None, None)
         ) -> tuple[str, list[str], list[list[Any]]]:
    """The page's text, header and rows for two output folders of ``compare_calibrators``
    (``labels``: how the page names them, default their paths)."""
    from experiments.compare_calibrators import OPTIONAL_SETTINGS

    pb, pa = (json.loads((d / "provenance.json").read_text()) for d in (before, after))
    options = config_difference(pb["config"], pa["config"], OPTIONAL_SETTINGS)
    options.pop("datasets", None)  # compared on the data sets both hold (below)
    other = sorted(k for k in options if k not in TOUCHES)
    with np.load(before / "per_split.npz") as zb, np.load(after / "per_split.npz") as za:
        sb, sa = split_keys(zb), split_keys(za)
    # the data sets both runs hold (a run of some of the preset's data sets keeps their positions)
    common = sorted({k[0] for k in sb} & {k[0] for k in sa})
    only = sorted({k[0] for k in sb} ^ {k[0] for k in sa})
    sb, sa = ({k: v for k, v in d.items() if k[0] in common} for d in (sb, sa))
    changed = changed_methods(sb, sa)
    touched = lambda m: any(TOUCHES[k](m) for k in options if k in TOUCHES)  # noqa: E731
    unexpected = {ds: sorted(m for m in ms if not touched(m)) for ds, ms in changed.items()}
    methods_all = {ds: {m for (d, m, _) in sb if d == ds} for ds in changed}
    moved_keys = lambda ds, m: sorted(k[2] for k in sb if k[:2] == (ds, m)  # noqa: E731
                                      and (k not in sa or not np.array_equal(sb[k], sa[k], equal_nan=True)))
    lines = [f"# `{pb.get('study', 'compare_calibrators')}` rerun with other fitting options: what moved\n",
             runs_line(pb, pa, before, after, labels),
             options_line(options)
             + (f" **Other configuration keys differ too: {', '.join(other)}** (the runs are not the same "
                "study otherwise)." if other else " Nothing else in the configuration differs.")
             + f" Compared on the data sets both runs hold: {', '.join(common)}"
             + (f" (in one run only: {', '.join(only)})." if only else "."),
             ("Both runs are of one commit: only the options differ." if same_commit(pb, pa) else
              "The commits differ, so a change of the code between them can move numbers too: a method that "
              "no differing option fits and that changed anyway is flagged below."),
             ""]
    # seconds
    secs_b, secs_a = phase_seconds(pb), phase_seconds(pa)
    lines += ["## Seconds by phase", "", "| data set | phase | before s | after s | after / before |",
              "|---|---|---|---|---|"]
    total_b = total_a = 0.0
    for ds in (d for d in secs_a if d in common):
        for phase, s_after in secs_a[ds].items():
            lines.append(f"| {ds} | {phase} | {seconds_cells(secs_b.get(ds, {}).get(phase), s_after)}")
        db, da = sum(secs_b.get(ds, {}).values()), sum(secs_a[ds].values())
        total_b, total_a = total_b + db, total_a + da
        lines.append(f"| {ds} | **all phases** | {db:.0f} | {da:.0f} | {da / db:.2f} |" if db else
                     f"| {ds} | **all phases** |  | {da:.0f} |  |")
    if total_b:
        lines += ["", f"In all: {total_b / 60:.0f} min before, {total_a / 60:.0f} min after "
                      f"({total_a / total_b:.2f}x; the phases' sums, which leave out simulating each world and "
                      "training its backbone). Two runs, not interleaved: another day, load or commit moves "
                      "these seconds as much as the options do."]
    # which methods changed
    lines += ["", "## Which methods' numbers changed", ""]
    for ds in changed:
        same = len(methods_all[ds]) - len(changed[ds])
        lines.append(f"- {ds}: {len(changed[ds])} of {len(methods_all[ds])} methods changed "
                     f"({', '.join(sorted(changed[ds])) or 'none'}); the other {same} repeat to the bit."
                     + (" **Unexpected: " + "; ".join(f"{m} ({', '.join(moved_keys(ds, m))})" for m in unexpected[ds])
                        + " changed although no differing option fits them.**" if unexpected[ds] else ""))
    rows = metric_rows(sb, sa, changed)
    scaled = [abs(r[6]) for r in rows if r[6] is not None]
    n_splits = max((v.size for v in sb.values()), default=0)
    if scaled:
        worst = max(rows, key=lambda r: -1.0 if r[6] is None else abs(r[6]))
        lines += ["", f"Over the {len(rows)} changed (world, method, metric) means: the median |difference| is "
                      f"{np.median(scaled):.3f} and the largest {max(scaled):.3f} standard deviations of the "
                      f"{n_splits} splits (largest: {worst[1]} {worst[2]} on {worst[0]}, {worst[3]:.4g} -> "
                      f"{worst[4]:.4g}). The table below has every row."]
    # verdicts
    ob, oa = (ordering_verdicts(_read_csv(d / "claims.csv")) for d in (before, after))
    both = [k for k in oa if k in ob]
    turned = sorted(k for k in both if ob[k][0] != oa[k][0])
    lines += ["", "## Verdicts", "",
              f"The study's orderings (`claims.csv`, crossed fits x folds interval, the ledger's rule): "
              f"{len(both) - len(turned)} of {len(both)} keep their verdict"
              + (", and these turn:" if turned else "."), ""]
    if turned:
        lines += ["| data set | protocol | ordering | metric | before | after |", "|---|---|---|---|---|---|"]
        for k in turned:
            (vb, db_, lb, hb), (va, da_, la, ha) = ob[k], oa[k]
            lines.append(f"| {' | '.join(k)} | {vb}: {_fmt(db_)} [{_fmt(lb)}, {_fmt(hb)}] | "
                         f"{va}: {_fmt(da_)} [{_fmt(la)}, {_fmt(ha)}] |")
        lines.append("")
    if ledger_before is not None and ledger_after is not None:
        lines += ledger_lines(ledger_before, ledger_after, ledger_source or f"figures/{before.name}/")
    lines += ["## The changed means", ""]
    header = ["data set", "method", "metric", "mean before", "mean after", "after - before",
              "difference / splits' std"]
    return "\n".join(lines) + "\n", header, rows


def _not_an_output(folder: Path) -> str | None:
    missing = [n for n in ("provenance.json", "per_split.npz", "claims.csv") if not (folder / n).is_file()]
    return f"{folder} has no {missing[0]} (not a compare_calibrators output folder)" if missing else None


def main(argv: Sequence[str] | None = None) -> str:
    """Write the page (module docstring); ``argv`` as the command line, ``None`` reads ``sys.argv``."""
    return cli(argv, __doc__.splitlines()[0], RESULTS / "heads_rerun", _not_an_output, page)


if __name__ == "__main__":
    main()
