"""``python -m calib_jax``: the ``calib-jax`` command (see :mod:`calib_jax.cli`).

Ctrl-C (SIGINT) or SIGTERM while the command's modules load, before
:func:`calib_jax.cli.commands.main` has its own handlers in place, ends as it does during
the command: exit 130 and the one line ``calib-jax <command>: interrupted``, no traceback.
"""

import signal
import sys

#: the subcommands, to name one in the message (the command's module may not be loaded yet)
_COMMANDS = ("evaluate", "compare", "fit", "apply", "simulate", "merge", "sql", "studies")


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _run() -> int:
    signal.signal(signal.SIGTERM, _raise_interrupt)  # SIGINT raises KeyboardInterrupt already
    try:
        from calib_jax.cli import main

        return main()
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the message below is the last word
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        command = next((a for a in sys.argv[1:] if a in _COMMANDS), None)
        sys.stderr.write(f"calib-jax{f' {command}' if command else ''}: interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(_run())
