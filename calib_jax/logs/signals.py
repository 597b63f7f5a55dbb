"""Ctrl-C and SIGTERM while a ``calib-jax`` command runs: one path for both, exit 130, the
clean-up never cut short (:class:`Signals`; the contract is :func:`calib_jax.cli.commands.main`'s)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["INTERRUPTED", "REDELIVER_S", "SIGNALS", "Signals", "drops_exceptions", "inside_import",
           "install_signal_handlers"]

#: exit status after Ctrl-C (SIGINT) or SIGTERM: 128 + SIGINT, what a shell reports for Ctrl-C
INTERRUPTED = 130
#: seconds after which an interrupt that did not reach ``main`` (swallowed by a library) is
#: delivered again
REDELIVER_S = 2.0


class Signals:
    """Ctrl-C and SIGTERM while a command runs (see :func:`main`).

    The first signal raises ``KeyboardInterrupt`` where the program is (SIGTERM too, so both
    take the same path: the checkpoint is kept, the atomic writers remove their temporary
    files); later ones are only noted, so the clean-up that the first one started is not cut
    short. Where a raised exception would be dropped with "Exception ignored in ..." (a
    garbage-collector callback such as JAX's ``_xla_gc_callback``, a ``__del__``) or would
    break a module half-way through loading (:func:`inside_import`), the signal is delivered
    again a moment later, once that code has returned. An interrupt that
    a library turned into its own error (DuckDB's "Query interrupted", a Py4J error) or
    swallowed is still an interrupt: ``main`` looks at :attr:`signum`, and one that has not
    reached ``main`` after :data:`REDELIVER_S` seconds is raised again."""

    def __init__(self) -> None:
        import threading

        self.lock = threading.RLock()  # a handler may run in the main thread while it holds it
        self.signum: int | None = None  # the first signal of this command
        self.running = False  # between start() and stop()
        self.active = False  # the next signal raises KeyboardInterrupt
        self.timer: Any = None  # a pending delivery again
        self.command: str | None = None

    def start(self, command: str | None) -> None:
        with self.lock:
            self.signum, self.running, self.active, self.command = None, True, True, command

    def stop(self) -> int | None:
        """The command is over (its outcome is being reported): later signals are only noted."""
        with self.lock:
            self.running = self.active = False
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            return self.signum

    def handler(self, signum: int, frame: Any) -> None:
        if self.signum is None:
            self.signum = signum
        if not (self.active and self.running):
            return
        if drops_exceptions(frame) or inside_import(frame):
            # delivered again from another thread a moment later (from here, it would come back
            # at once, inside this handler), once the callback or the import has returned
            self._later(0.01, signum)
            return
        self.active = False  # the clean-up this exception starts runs undisturbed
        self._later(REDELIVER_S, signum)
        raise KeyboardInterrupt

    def _later(self, seconds: float, signum: int) -> None:
        import threading

        with self.lock:
            if self.timer is not None:
                self.timer.cancel()
            self.timer = threading.Timer(seconds, self._again, (signum,))
            self.timer.daemon = True
            self.timer.start()

    def _again(self, signum: int) -> None:
        """An interrupt that has not ended the command by now: deliver it again."""
        import _thread
        import signal

        with self.lock:
            if not self.running or self.timer is None:
                return
            self.timer = None
            self.active = True
            _thread.interrupt_main(signal.Signals(signum))


SIGNALS = Signals()


def drops_exceptions(frame: Any) -> bool:
    """Whether an exception raised in ``frame`` may be printed and dropped: the frame or a
    caller is a garbage-collector callback, a ``__del__`` or the weak-reference machinery
    (whose callbacks run when the collector frees an object). A false alarm costs only the
    10 ms of a delivery again."""
    import gc

    codes = {getattr(cb, "__code__", None) for cb in gc.callbacks}
    while frame is not None:
        code = frame.f_code
        if code in codes or code.co_name == "__del__" or Path(code.co_filename).name in WEAKREF_FILES:
            return True
        frame = frame.f_back
    return False


#: the modules whose functions run as weak-reference callbacks (exceptions there are dropped)
WEAKREF_FILES = ("weakref.py", "_weakrefset.py")
#: the frames of Python's import system (``co_filename`` of the frozen ``importlib`` modules)
IMPORT_FILES = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")


def inside_import(frame: Any) -> bool:
    """Whether ``frame`` or a caller is Python's import system: a module is loading there.

    An exception raised while a module loads leaves it half made, and a native extension
    loading then (its initialisation runs Python code, such as ``enum`` for the enumerations of
    a nanobind module) may end the process itself: measured with SIGINT sent to
    ``calib-jax evaluate`` 0.3-0.6 s after its start, while numpy, pyarrow and JAX load, 1 run
    in 30 aborted (``Critical nanobind error``, status -6) and 2 ended killed by SIGINT (-2)
    after printing the right line, because an extension that runs code while it loads records
    the ``KeyboardInterrupt`` as unhandled and the interpreter kills itself with SIGINT at exit.
    So such a signal is delivered again once the import has returned (loads take tens of
    milliseconds to a second)."""
    while frame is not None:
        if frame.f_code.co_filename in IMPORT_FILES:
            return True
        frame = frame.f_back
    return False


def install_signal_handlers() -> dict[int, Any]:
    """Route SIGINT and SIGTERM to :class:`Signals`; returns the handlers to restore (none
    outside the main thread, where Python cannot set handlers)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}
    previous: dict[int, Any] = {}
    for s in (signal.SIGINT, signal.SIGTERM):
        previous[s] = signal.getsignal(s)
        signal.signal(s, SIGNALS.handler)
    return previous
