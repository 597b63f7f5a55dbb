"""The ``calib-jax`` program: its parser, made of one parser per subcommand, the dispatch to
the subcommand's ``run`` with its typed options, and the exit-status contract of :func:`main`."""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from calib_jax._src.startup import numpy_huge_pages_off
from calib_jax.cli.commands import apply, compare, evaluate, fit, merge, print_sql, simulate, studies
from calib_jax.logs.common import inert, say
from calib_jax.logs.inputs import check_outputs_outside_log
from calib_jax.logs.options import options_from
from calib_jax.logs.signals import INTERRUPTED, SIGNALS, install_signal_handlers

__all__ = ["SUBCOMMANDS", "build_parser", "run_parsed", "main"]

#: the subcommands in the order of ``calib-jax --help``: each module has ``NAME``, ``Options``,
#: ``add_parser(subparsers)``, ``files(options)`` (what a run reads and writes) and ``run(options)``
SUBCOMMANDS: tuple[ModuleType, ...] = (evaluate, fit, apply, simulate, print_sql, merge, compare, studies)
#: the subcommands that compile JAX programs (kept in the persistent compilation cache)
_COMPILING = ("evaluate", "compare", "merge", "fit", "apply")
#: the commands whose ``--out`` is a folder of files (``apply`` and ``simulate`` write one file)
_FOLDER_OUTPUT = ("evaluate", "compare", "merge")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``calib-jax``: one subparser per module of :data:`SUBCOMMANDS`.

    Example:
      >>> build_parser().parse_args(["simulate", "--out", "log.parquet"]).scale
      'tiny'
    """
    ap = argparse.ArgumentParser(prog="calib-jax", description="Calibration report, recalibration and paper studies "
                                 "for your own click logs.")
    sub = ap.add_subparsers(dest="command", required=True)
    for module in SUBCOMMANDS:
        module.add_parser(sub)
    return ap


def _module(command: str) -> ModuleType:
    return next(m for m in SUBCOMMANDS if m.NAME == command)


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv``, to name it in a message before the arguments are parsed."""
    names = {m.NAME for m in SUBCOMMANDS}
    return next((a for a in argv if a in names), None)


def run_parsed(args: argparse.Namespace) -> int:
    """Run a parsed command line: its namespace becomes the subcommand's typed options here, at
    the edge, and nothing below reads the namespace. Returns the exit status (exceptions are
    reported by :func:`main`).

    The command runs inside :func:`calib_jax.io.guard_outputs` with its module's
    ``files(options)`` (:class:`~calib_jax.logs.common.Files`: the resolved input files and every
    file it writes): an output that is an input (by path, link or hard link) is refused before
    any work, and every write of the run goes through the guarded writer, which refuses an input
    and an undeclared target alike. An output that the log's folder or pattern would read as
    part of the log on its next run is refused too
    (:func:`~calib_jax.logs.inputs.check_outputs_outside_log`), and so is a second run that
    names an output (``--out``, ``--save``) another run is writing (:func:`calib_jax.io.exclusive_target`).
    A command that writes a folder (``evaluate``, ``compare``, ``merge``) removes at its end the
    files an earlier run wrote there and this one did not (:func:`calib_jax.io.fresh_outputs`)."""
    from calib_jax import io as cio

    if args.command in _COMPILING:
        # the command's programs (the panel, the tests, the calibrators) are most of its
        # fixed cost: kept across runs, a second run compiles nothing
        cio.enable_compile_cache(min_compile_time_s=0.0)
    module = _module(args.command)
    opts = options_from(module.Options, args)
    plan = module.files(opts)
    flag, target = next(((f"--{k}", getattr(opts, k)) for k in ("out", "save") if getattr(opts, k, None)),
                        ("--out", None))
    folder = Path(target) if target is not None and args.command in _FOLDER_OUTPUT else None
    outputs = (*plan.outputs, folder / cio.OUTPUTS_LIST) if folder is not None else plan.outputs
    with cio.guard_outputs(plan.inputs, outputs):  # first: an output that replaces an input
        check_outputs_outside_log(getattr(opts, "log", None), plan.outputs, getattr(opts, "format", "auto"))
        with cio.exclusive_target(target, flag):  # one run at a time per output folder or file
            # a report folder holds one run's files: an earlier run's that this one does not
            # write again are removed at its end (only files this package listed there)
            with cio.fresh_outputs(folder) if folder is not None else contextlib.nullcontext():
                result = module.run(opts)
    return result if isinstance(result, int) else 0


def _one_line(e: BaseException) -> str:
    """An exception's message on one line (a parser's message may span several), made inert
    (:func:`inert`): the message may quote a file's header or values."""
    return inert(" ".join(str(e).split()))


def _program_name(command: str | None) -> str:
    """``calib-jax <command>``, the prefix of every line the program writes on stderr."""
    return f"calib-jax {command}" if command else "calib-jax"


def _outcome(e: BaseException | None, command: str | None) -> tuple[int, str]:
    """The exit status and the stderr line of a command that raised ``e`` (``None``: it was
    interrupted, whatever it raised)."""
    name = _program_name(command)
    if e is None or isinstance(e, KeyboardInterrupt):
        return INTERRUPTED, f"{name}: interrupted"
    if isinstance(e, evaluate.Stopped):
        return 3, _one_line(e)
    if isinstance(e, ValueError | OSError | EOFError | zlib.error | UnicodeError):
        # OSError carries the file name (permissions, a full disk, a folder in the way)
        return 2, f"{name}: error: {_one_line(e)}"
    if isinstance(e, MemoryError):
        return 2, f"{name}: error: out of memory (use a smaller --chunk-rows, --bootstrap or --max-levels)"
    return 2, (f"{name}: error: unexpected {type(e).__name__}: {_one_line(e)} (please report this with the "
               "command line)")


@contextlib.contextmanager
def _warnings_as_lines(command: str | None) -> Iterator[None]:
    """While the command runs, a warning it shows reads as one line, ``calib-jax <command>:
    warning: <message>`` (made inert), instead of Python's ``<file>:<line>: <Category>: <message>``
    followed by a line of the program's source (``sys.exit(main())``). Only the text changes:
    which warnings are shown, and a caller's ``warnings.catch_warnings(record=True)``, are as
    before."""
    previous = warnings.formatwarning
    name = _program_name(command)

    def one_line(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 line: str | None = None) -> str:
        return f"{name}: warning: {inert(' '.join(str(message).split()))}\n"

    warnings.formatwarning = one_line
    try:
        yield
    finally:
        warnings.formatwarning = previous


class _InertStream:
    """A text stream whose writes are made inert (argparse prints its errors itself)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(inert(text, lines=True))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``calib-jax`` / ``python -m calib_jax``; returns the exit status.

    The contract (README, "What the command promises"): exit 0 with complete, finite outputs,
    or exit 2 with one message naming the file, column or argument; 3 when ``evaluate`` was
    stopped on purpose (checkpoint kept). Never a traceback, never a changed input file, and
    every message printable (:func:`inert`: control and escape sequences from a file's header,
    values or name are shown as ``\\xNN``).
    A warning shown while the command runs is one line, ``calib-jax <command>: warning: ...``
    (:func:`_warnings_as_lines`).

    Ctrl-C (SIGINT) and SIGTERM, at any moment of the command, end it with exit 130 and the
    one line ``calib-jax <command>: interrupted`` on stderr (130 for both, what a shell shows
    for Ctrl-C, so scripts test one status): the report files are written atomically and the
    folder keeps its ``INCOMPLETE`` marker until the last one is, an interrupted ``evaluate``
    keeps its checkpoint for ``--resume``, and a run without ``--resume`` starts afresh. An
    interrupt turned by a query engine into its own error counts as an interrupt. A signal
    while a module loads is delivered once the import has returned
    (:func:`~calib_jax.logs.signals.inside_import`: raised there, it can make a native
    extension abort the process). Called as the program (``argv`` None), an interrupted
    command ends the process here with ``os._exit(130)`` once the line is written (the
    interpreter's shut-down would kill itself with SIGINT if a library had recorded the
    interrupt as unhandled), and once any other command has ended, its status stands: SIGINT
    and SIGTERM are ignored until the process exits (Python puts the default handlers back
    part-way through its shut-down, where a signal would kill the process: status -2, no
    line). Called from Python with ``argv``, the caller's handlers are restored on return.

    Args:
      argv: the arguments after the program name; ``None`` reads ``sys.argv`` (the program).

    Returns:
      The exit status: 0, 2 (bad input), 3 (stopped on purpose) or 130 (interrupted).

    Example:
      >>> main(["sql", "--dialect", "duckdb", "--table", "t", "--score", "p", "--label", "y",
      ...       "--bins", "0"])
      2
    """
    import signal

    if argv is None:  # the program: its own process (a caller's process keeps NumPy's default)
        numpy_huge_pages_off()
    raw = list(sys.argv[1:] if argv is None else argv)
    command = _command_of(raw)
    SIGNALS.start(command)
    previous = install_signal_handlers()
    args: argparse.Namespace | None = None
    rc, message = 0, ""
    try:
        try:
            err, sys.stderr = sys.stderr, _InertStream(sys.stderr)  # argparse prints its errors itself
            try:
                args = build_parser().parse_args(raw)
            finally:
                sys.stderr = err
            command = SIGNALS.command = args.command
            with _warnings_as_lines(command):
                rc = run_parsed(args)
            SIGNALS.stop()  # here, so that a signal at this very moment is still caught below
        except SystemExit:
            if SIGNALS.stop() is None:
                raise  # argparse: --help (0) or a usage error (2), already printed
        except BaseException as e:  # noqa: BLE001 - the contract: one message, never a traceback
            SIGNALS.stop()
            rc, message = _outcome(e, command)
    except KeyboardInterrupt:  # delivered again just as the command ended: it was interrupted
        SIGNALS.stop()
    finally:
        SIGNALS.stop()
        for s, h in previous.items():
            # the program's command has ended, and its status stands: a later signal is ignored
            # (a handler would be put back to the default part-way through the interpreter's
            # shut-down, where the signal would kill the process)
            signal.signal(s, signal.SIG_IGN if argv is None else h)
    if SIGNALS.signum is not None:  # an interrupt, whatever a library made of it
        rc, message = _outcome(None, command)
    if message:
        say(message, err=True)
    if argv is None and rc == INTERRUPTED:
        _end_interrupted_program()
    return rc


def _end_interrupted_program() -> None:
    """End the program at once with exit 130, its output flushed: no interpreter shut-down."""
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed or broken stream must not stop the exit
            pass
    os._exit(INTERRUPTED)
