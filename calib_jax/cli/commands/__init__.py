"""``calib-jax`` subcommands, one module each: ``evaluate``, ``fit``, ``apply``, ``simulate``,
``sql`` (:mod:`~calib_jax.cli.commands.print_sql`), ``merge``, ``compare`` and ``studies``.

Each module holds its subcommand's parser (``add_parser``), its typed options (``Options``, a
frozen dataclass of :mod:`calib_jax.logs.options`) and its ``run``;
:mod:`~calib_jax.cli.commands.program` assembles the parser and converts the parsed arguments
to the options at the edge. :func:`main` parses the arguments, runs one command and returns
the exit status: 0 on success, 2 for a bad input (the message, naming the file, the column and
the number of rows, goes to stderr), 3 when ``evaluate`` stopped early on purpose (its
checkpoint is saved; rerun with ``--resume``), 130 when interrupted by Ctrl-C (SIGINT) or
SIGTERM (the one line ``calib-jax <command>: interrupted``). Every message is printable text:
control and escape sequences that come from a file (its name, header or values) are shown as
``\\xNN``.
"""

from calib_jax.cli.commands.fit import CELL_FIT_METHODS
from calib_jax.cli.commands.program import build_parser, main
from calib_jax.logs.outputs import INCOMPLETE, REPORT_FILES, STATE_FILE

__all__ = ["main", "build_parser", "CELL_FIT_METHODS", "INCOMPLETE", "REPORT_FILES", "STATE_FILE"]
