"""``calib-jax``: a command-line front door for your own click logs.

Subcommands (``calib-jax --help``; also ``python -m calib_jax``):

* ``evaluate LOG`` — streams the log in chunks (flat memory, resumable checkpoints) and
  writes a calibration report: metric panel with 95% bootstrap intervals, per-field
  tables, decompositions, a reliability diagram, Markdown/CSV/JSON and one self-contained
  HTML page.
* ``compare LOG --score A --score B`` — two or more models on one log, paired differences.
* ``fit LOG --method M --save FILE`` / ``apply FILE LOG --out LOG2`` — fit a calibrator of
  :mod:`calib_jax.calibrators` and apply it to another log (versioned JSON parameter file).
* ``simulate``, ``sql``, ``merge``; ``studies`` names the studies' own command
  (``calib-jax-studies``).

Every command ends with exit 0, 2 (one message naming the file and column), 3 (stopped on
purpose) or 130 (Ctrl-C or SIGTERM: ``calib-jax <command>: interrupted``), never with a
traceback; its messages are printable text whatever the names and values in the files
(:func:`calib_jax.cli.commands.main`).

This package is the shell only: :mod:`~calib_jax.cli.commands` holds one module per
subcommand (its parser, what it reads and writes, and a ``run`` that calls the engine),
``program`` the parser, the dispatch and the exit-status contract. The engine — reading,
statistics, panel, report, comparison, slices, fits — is :mod:`calib_jax.logs`, which a
notebook calls directly.
"""

from calib_jax.cli.commands import main as main

__all__ = ["main"]
