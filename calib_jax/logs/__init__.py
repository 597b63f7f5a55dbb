"""``calib_jax.logs``: the log engine as a library — your prediction logs from Python.

The functions a notebook calls, each returning an object (Arrow tables with the intervals as
columns, ``.to_pandas()`` on every table, an inline HTML rendering, ``.save(folder)`` writing the
files of the matching command):

* :func:`evaluate` — the calibration report of a log (``calib-jax evaluate``);
* :func:`compare` — two or more models on one log, every paired difference with its interval
  (``calib-jax compare``);
* :func:`slices` — calibration per slice with change flags (``calib-jax evaluate --by``);
* :func:`fit` — a calibrator fitted on a log, its parameters to save or apply (``calib-jax fit``).

Each takes ``negative_rate=w`` for a log that kept only a fraction w of its non-clicks (negative
downsampling): every kept non-click then weighs 1/w, so the results are the full population's, and
the calibration tests run on the kept rows. :func:`recalibrate_probability` (and
:func:`recalibrate_logit`) map the probabilities of a model trained on such rows to the population
(:mod:`~calib_jax.logs.downsampling`).

A source is a path, a glob, a folder (a lake of Parquet / CSV files), a pyarrow ``Table``, a
pandas or polars ``DataFrame``, a DuckDB relation or a Spark ``DataFrame``.

Example:
  >>> from calib_jax import logs
  >>> r = logs.evaluate("log.parquet", score="pctr", label="click")  # doctest: +SKIP
  >>> r.metrics.to_pandas()  # doctest: +SKIP

The engine beneath them, one module per step: :mod:`~calib_jax.logs.loaders` (formats),
:mod:`~calib_jax.logs.validate` (row checks), :mod:`~calib_jax.logs.accumulate` (mergeable cell
tables and the cell bootstrap), :mod:`~calib_jax.logs.sql` (the same cells as one SQL aggregate),
:mod:`~calib_jax.logs.engines` (DuckDB, Spark), :mod:`~calib_jax.logs.panel` (every metric and test
from the tables), :mod:`~calib_jax.logs.cellstats`, :mod:`~calib_jax.logs.gauc`,
:mod:`~calib_jax.logs.report` (outputs), :mod:`~calib_jax.logs.comparison` (several models on one
log), :mod:`~calib_jax.logs.slicing` (per slice), :mod:`~calib_jax.logs.params` (parameter files),
:mod:`~calib_jax.logs.unseen` (what an applied log holds that the fit never saw),
:mod:`~calib_jax.logs.evaluation`, :mod:`~calib_jax.logs.fitting`, :mod:`~calib_jax.logs.applying`
and :mod:`~calib_jax.logs.merging` (each run as the commands run it) and
:mod:`~calib_jax.logs.options` (each run's typed options). The ``calib-jax`` command
(:mod:`calib_jax.cli`) parses its arguments into these options, calls the engine, prints and sets
the exit status.
"""

from calib_jax.logs.api import Comparison, Fit, Report, Slices, compare, evaluate, fit, slices
from calib_jax.logs.downsampling import kept_probability, recalibrate_logit, recalibrate_probability
from calib_jax.logs.unseen import RespelledLevelsWarning, UnseenInputsWarning

__all__ = ["evaluate", "compare", "slices", "fit", "Report", "Comparison", "Slices", "Fit",
           "recalibrate_probability", "recalibrate_logit", "kept_probability", "UnseenInputsWarning",
           "RespelledLevelsWarning"]
