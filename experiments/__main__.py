"""``python -m experiments``: list the studies, run any of them, or run the main job.

    python -m experiments list                       # every study: paper place, commands, time
    python -m experiments run mc_std --paper         # one study (all study options accepted)
    python -m experiments main [NAME ...]            # the main job (quick scale), or a subset
    python -m experiments verify [NAME ...] [--paper]  # rerun and compare with the committed outputs
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from experiments import registry


def _fmt_time(seconds: float | None, approx: bool) -> str:
    if seconds is None:
        return "-"
    txt = f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"
    return ("~" if approx else "") + txt


def list_studies() -> str:
    """The registry as a Markdown table (name, paper place, commands, expected times)."""
    lines = ["| study | reproduces | what it measures | quick | paper | main job |",
             "|---|---|---|---|---|---|"]
    for s in registry.STUDIES:
        lines.append(f"| `{s.name}` | {s.reproduces} | {s.title} | {_fmt_time(s.quick_s, s.approx)} "
                     f"| {_fmt_time(s.paper_s, s.approx)} | {'yes' if s.main_job else ''} |")
    lines += ["", "Run one: `python -m experiments run <study> [--smoke|--quick|--paper] "
              "[--seed S] [--out DIR] [--set key=value ...] [--resume] [--no-progress]`",
              "(or `python -m experiments.<module>` with the same options; `--help` lists them).",
              "Times: wall time on the 2-core CPU; `~` = measured under load or projected.",
              "The symbolic proofs are separate: `python -m proofs`."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> object:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help"}:
        print(__doc__)
        return None
    cmd, rest = args[0], args[1:]
    if cmd == "list":
        print(list_studies())
        return None
    if cmd == "run":
        if not rest or rest[0].startswith("-"):
            raise SystemExit("usage: python -m experiments run <study> [options]; "
                             "see `python -m experiments list`")
        from experiments._study import run_entry

        try:
            entry = registry.get(rest[0])
        except KeyError as e:
            raise SystemExit(str(e.args[0])) from None
        return run_entry(entry, rest[1:])
    if cmd == "main":
        from experiments.main import main as main_job

        return main_job(rest)
    if cmd == "verify":
        from experiments.verify import main as verify_main

        raise SystemExit(verify_main(rest))
    raise SystemExit(f"unknown command {cmd!r}; use list, run, main or verify")


def cli() -> None:
    """The ``calib-jax-studies`` command: :func:`main` without handing its result to the shell.

    Bad input (a ``ValueError``: an unknown setting, a value of the wrong type, a user metric
    that cannot be imported) ends in one line on stderr and exit status 2, not a traceback.
    """
    try:
        main()
    except ValueError as e:
        print(f"experiments: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    cli()
