"""``calib-jax``: a command-line front door for your own click logs.

Subcommands (``calib-jax --help``; also ``python -m calib_jax``):

* ``evaluate LOG`` — streams the log in chunks (flat memory, resumable checkpoints) and
  writes a calibration report: metric panel with 95% bootstrap intervals, per-field
  tables, decompositions, a reliability diagram, Markdown/CSV/JSON and one self-contained
  HTML page.
* ``fit LOG --method M --save FILE`` / ``apply FILE LOG --out LOG2`` — fit a calibrator of
  :mod:`calib_jax.calibrators` and apply it to another log (versioned JSON parameter file).
* ``studies`` — the paper studies of ``experiments/`` and how to run them.

Every command ends with exit 0, 2 (one message naming the file and column), 3 (stopped on
purpose) or 130 (Ctrl-C or SIGTERM: ``calib-jax <command>: interrupted``), never with a
traceback; its messages are printable text whatever the names and values in the files
(:func:`calib_jax.cli.commands.main`).

Modules: :mod:`~calib_jax.cli.loaders` (formats), :mod:`~calib_jax.cli.validate` (row
checks; consistency of aggregates and saved states), :mod:`~calib_jax.cli.accumulate`
(mergeable streaming statistics),
:mod:`~calib_jax.cli.panel` (metrics from the statistics), :mod:`~calib_jax.cli.report`
(outputs), :mod:`~calib_jax.cli.params` (parameter files), :mod:`~calib_jax.cli.options`
(each subcommand's typed options), :mod:`~calib_jax.cli.commands` (one module per subcommand:
its parser and its ``run``).  Like :mod:`calib_jax.io` and :mod:`calib_jax.data`, this subpackage
touches the file system; the rest of the library does not.
"""

from calib_jax.cli.commands import main as main

__all__ = ["main"]
