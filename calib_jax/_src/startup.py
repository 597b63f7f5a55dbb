"""First code of ``import calib_jax`` (imported before any other module, see calib_jax/__init__.py).

Only for the ``calib-jax`` command: see :func:`_end_the_command_if_interrupted_while_loading`.
"""


def _end_the_command_if_interrupted_while_loading() -> None:
    """``calib-jax`` / ``python -m calib_jax`` only: Ctrl-C or SIGTERM while the modules load
    (seconds: jax, scipy), before ``calib_jax.cli.commands.main`` installs its handlers, ends
    the process at once with exit 130 and one line, not a traceback (nothing is written yet).
    Any other program importing calib_jax keeps its handlers."""
    import os
    import signal
    import sys

    argv, orig = sys.argv, list(getattr(sys, "orig_argv", ()))
    by_module = argv[:1] == ["-m"] and "-m" in orig[:-1] and orig[orig.index("-m") + 1] == "calib_jax"
    by_script = bool(argv) and os.path.basename(argv[0]).removesuffix(".exe") == "calib-jax"
    if not (by_module or by_script):
        return
    command = next((a for a in argv[1:] if a in ("evaluate", "fit", "apply", "simulate", "merge", "sql",
                                                   "studies")), None)
    line = f"calib-jax{f' {command}' if command else ''}: interrupted\n".encode()

    def end(signum: int, frame: object) -> None:
        os.write(2, line)
        os._exit(130)

    try:
        signal.signal(signal.SIGINT, end)
        signal.signal(signal.SIGTERM, end)
    except ValueError:  # not the main thread
        pass


_end_the_command_if_interrupted_while_loading()
