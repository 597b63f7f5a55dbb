"""``python -m experiments``: list the studies, run any of them, or run the main job.

    python -m experiments list                       # every study: paper place, commands, time
    python -m experiments run mc_std --paper         # one study (all study options accepted)
    python -m experiments main [NAME ...]            # the main job (quick scale), or a subset
    python -m experiments verify [NAME ...] [--paper]  # rerun and compare with the committed outputs
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

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


#: what ends a command in one line on stderr and exit status 2 instead of a traceback: bad input
#: (``ValueError``: an option, a setting, a user metric) and a study's refusal of non-finite
#: metric values (``FloatingPointError``, naming the columns)
BAD_INPUT = (ValueError, FloatingPointError)


def exit_on_bad_input(prog: str, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, with :data:`BAD_INPUT` ended as ``<prog>: error: <message>`` (the first
    line of the message) on stderr and exit status 2; every other exception propagates.

    Example:
      >>> exit_on_bad_input("demo", int, "12")
      12
      >>> exit_on_bad_input("demo", int, "twelve")  # doctest: +SKIP
      demo: error: invalid literal for int() with base 10: 'twelve'  (on stderr; exit status 2)
    """
    try:
        return fn(*args)
    except BAD_INPUT as e:
        lines = str(e).strip().splitlines() or [type(e).__name__]
        print(f"{prog}: error: {lines[0]}", file=sys.stderr)
        raise SystemExit(2) from None


def cli(argv: Sequence[str] | None = None) -> None:
    """The ``calib-jax-studies`` command: :func:`main` without handing its result to the shell.

    Bad input ends in one line on stderr (``experiments: error: ...``) and exit status 2, not a
    traceback, before anything is computed or written: a malformed option, a setting out of its
    domain (type, sign, range, an empty list; every study's settings are declared in
    ``experiments._study.SETTINGS``), a seed outside [0, 2^32 - 1], an ``--out`` that is a file,
    a user metric that cannot be imported or fails its probe (raises, cannot be traced, returns
    NaN, inf, a Python number or a non-scalar, writes into its input, is constant). A study that
    meets non-finite metric values later (a metric NaN in some trials) ends the same way,
    naming the columns.

    Args:
      argv: the arguments (default ``sys.argv[1:]``).

    Run as the program (``argv`` None), NumPy's huge pages are turned off first
    (:func:`calib_jax._src.startup.numpy_huge_pages_off`: they stalled large allocations for
    seconds on the 2-core machine), unless ``NUMPY_MADVISE_HUGEPAGE`` is set.
    """
    if argv is None:
        from calib_jax._src.startup import numpy_huge_pages_off

        numpy_huge_pages_off()
    exit_on_bad_input("experiments", main, argv)


if __name__ == "__main__":
    cli()
