"""First code of ``import calib_jax`` (imported before any other module, see calib_jax/__init__.py).

* every program: :func:`_deterministic_gpu_ops` (bit-identical fits run to run on a GPU);
* the ``calib-jax`` command only: :func:`_end_the_command_if_interrupted_while_loading`.
"""

DETERMINISTIC_GPU_FLAG = "--xla_gpu_deterministic_ops=true"


def _deterministic_gpu_ops() -> None:
    """Ask XLA:GPU for deterministic scatter-adds and reductions unless the user chose.

    A gradient through a gather (an embedding lookup, a spline's knot values) is a scatter-add,
    which XLA:GPU runs with float atomics whose order changes from run to run. Measured on an
    NVIDIA H100 (jax 0.11.2): two Neural Calibration fits with the same key differed by up to
    3.6 in a parameter, and a retrained CTR backbone scored 22% of its rows differently; with
    ``--xla_gpu_deterministic_ops=true`` both were bit-identical, at 0.12 -> 0.36 s for a
    10^5-row Neural Calibration fit. Same answers from the same seed come first in this library,
    so the flag is appended to ``XLA_FLAGS`` (read when JAX starts its first backend; it does
    nothing on CPUs and TPUs). A user who names the flag (``=false`` for speed) keeps their
    choice. If a GPU backend was already started without it, a warning says the fits are not
    reproducible in this process.
    """
    import os
    import sys
    import warnings

    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_gpu_deterministic_ops" in flags:
        return
    bridge = sys.modules.get("jax._src.xla_bridge")
    started = getattr(bridge, "_backends", None) if bridge is not None else None
    if started:
        if "cuda" in started or "rocm" in started or "gpu" in started:
            warnings.warn("calib_jax was imported after JAX started its GPU backend without "
                          f"{DETERMINISTIC_GPU_FLAG} in XLA_FLAGS: fits are not bit-identical run "
                          "to run in this process", RuntimeWarning, stacklevel=3)
        return
    os.environ["XLA_FLAGS"] = f"{flags} {DETERMINISTIC_GPU_FLAG}".strip()


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
    command = next((a for a in argv[1:] if a in ("evaluate", "compare", "fit", "apply", "simulate", "merge", "sql",
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


_deterministic_gpu_ops()
_end_the_command_if_interrupted_while_loading()
