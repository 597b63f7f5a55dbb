"""First code of ``import calib_jax`` (imported before any other module, see calib_jax/__init__.py).

* every program: :func:`_deterministic_gpu_ops` (bit-identical fits run to run on a GPU);
* the ``calib-jax`` command only: :func:`_end_the_command_if_interrupted_while_loading`;
* for the commands to call: :func:`numpy_huge_pages_off`.
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


def numpy_huge_pages_off() -> bool:
    """Stop NumPy from asking the kernel for transparent huge pages, unless the user chose.

    NumPy advises the kernel to back every array of 4 MB or more with huge pages
    (``madvise(MADV_HUGEPAGE)``). Where the kernel's defrag policy is ``madvise`` (the default
    of many distributions) and memory is fragmented, such an allocation can stall in direct
    compaction, in system time. Measured on the 2-core Xeon after a day of large runs
    (2026-12-05): one MCGrad prediction of 208,555 rows took 0.45 s, or 1.5-4.5 s in one call of
    three to six, the whole excess in the kernel (1.4 s of system time inside one
    ``numpy.c_`` of MCGrad's features); with huge pages off every call took 0.50-0.55 s, and the
    budget of ``compare_calibrators --paper`` projected 81 min against 87 min with them on.
    The commands this project runs as their own processes (``python -m experiments``,
    ``calib-jax``) call this once; a program that imports calib_jax keeps NumPy's default.

    NumPy's documented switch is the environment variable ``NUMPY_MADVISE_HUGEPAGE`` (read when
    NumPy is imported): a user who sets it keeps their choice. Otherwise it is set to ``0``
    (for child processes, and for this one when NumPy is not imported yet) and, when NumPy is
    already imported, its runtime switch is turned off. Returns whether huge pages are now off
    in this process (False when the user asked for them, or NumPy lacks the switch).

    Example (in a fresh process, as a command runs it):
      >>> import os, subprocess, sys
      >>> code = ("from calib_jax._src.startup import numpy_huge_pages_off as off; import os; "
      ...         "print(off(), os.environ['NUMPY_MADVISE_HUGEPAGE'])")
      >>> env = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
      >>> subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout.split()
      ['True', '0']
      >>> env["NUMPY_MADVISE_HUGEPAGE"] = "1"  # the user's choice stands
      >>> subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout.split()
      ['False', '1']
    """
    import os
    import sys

    chosen = os.environ.get("NUMPY_MADVISE_HUGEPAGE")
    if chosen is not None:
        return chosen == "0"
    os.environ["NUMPY_MADVISE_HUGEPAGE"] = "0"
    if "numpy" not in sys.modules:
        return True
    import importlib

    try:  # NumPy >= 2: the switch the environment variable sets when NumPy is imported
        switch = getattr(importlib.import_module("numpy._core.multiarray"), "_set_madvise_hugepage", None)
    except ImportError:
        switch = None
    if switch is None:
        return False
    switch(False)
    return True


_deterministic_gpu_ops()
_end_the_command_if_interrupted_while_loading()
