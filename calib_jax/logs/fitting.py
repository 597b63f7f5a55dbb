"""A calibrator of :mod:`calib_jax.calibrators` fitted on a log (``calib-jax fit LOG --method M
--save FILE``, :func:`calib_jax.logs.fit`): its parameters as a versioned JSON record
(:mod:`calib_jax.logs.params`).

Two paths: the rows in memory (every method), or with ``--engine`` the log's cells (fine logit
bins by label) computed where the log lives, for the one-dimensional maps of the logit in
:data:`CELL_FIT_METHODS` (histogram binning exactly, the others up to the spread of the logits
within a fine bin).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from calib_jax.logs import loaders
from calib_jax.logs.common import one_file, say
from calib_jax.logs.inputs import (
    columns_of,
    query_cells,
    spark_input,
)
from calib_jax.logs.options import FitOptions, check_engine_settings

__all__ = ["CELL_FIT_METHODS", "fit_spec", "run_fit"]

#: the methods ``fit --engine`` fits from a log's cells (one-dimensional maps of the logit)
CELL_FIT_METHODS = ("temperature", "platt", "beta", "histogram_binning", "isotonic", "ilps")


def _read_all(opts: FitOptions, fmt: str, cols: Any, extra_numeric: Sequence[str] = ()):
    """Every valid row of a log in memory (``fit`` needs them all)."""
    import numpy as np
    import pyarrow as pa

    from calib_jax.logs.validate import BEYOND_FLOAT32, FLOAT32_MAX, Problems, clean_chunk

    problems = Problems()
    parts: dict[str, list[Any]] = {"o": [], "p": [], "y": [], "v": [], "keep": []}
    tables: list[Any] = []
    start = 0
    for batch in loaders.iter_batches(opts.log, fmt, numeric=[*cols.numeric, *extra_numeric], text=cols.fields,
                                      chunk_rows=opts.chunk_rows):
        ch = clean_chunk(batch, cols, start, problems)
        if cols.logit is not None and opts.method != "histogram_binning":  # finite, but inf in float32
            big = ch.keep & (np.abs(ch.o) > FLOAT32_MAX)
            problems.add(cols.logit, BEYOND_FLOAT32, big, start)
            ch.keep &= ~big
        if extra_numeric:
            for c in extra_numeric:
                x = np.asarray(batch.column(batch.schema.get_field_index(c)).to_numpy(zero_copy_only=False), float)
                problems.add(c, "missing or not finite", ~np.isfinite(x), start)
                ch.keep &= np.isfinite(x)
        start += batch.num_rows
        for k in parts:
            parts[k].append(getattr(ch, k))
        tables.append(batch)
    if start == 0:
        raise ValueError(f"{opts.log}: the log has no data rows")
    if problems and not opts.drop_invalid:
        raise ValueError(f"{opts.log}: {problems.describe()}; fix the log or pass --drop-invalid to drop them")
    keep = np.concatenate(parts["keep"])
    if not keep.any():
        raise ValueError(f"{opts.log}: no valid rows left after dropping {start} invalid rows "
                         f"({problems.describe()})")
    arrays = {k: np.concatenate(v)[keep] for k, v in parts.items() if k != "keep"}
    with np.errstate(over="ignore"):  # an overflow is what the check reports
        total = float(np.sum(arrays["v"]))
        clicks = float(np.sum(arrays["v"] * arrays["y"]))
        non_clicks = float(np.sum(arrays["v"] * (1.0 - arrays["y"])))
    _check_weights(total, source=str(opts.log), column=cols.weight)
    _check_classes(clicks, non_clicks, rows=int(arrays["o"].shape[0]), source=str(opts.log), label=cols.label,
                   weight=cols.weight)
    table = pa.Table.from_batches(tables).filter(pa.array(keep))
    return arrays, table, problems


def _check_weights(total: float, *, source: str, column: str | None) -> None:
    """The one rule of every fit, from rows or cells, on every engine and for every method: the
    valid rows' weights must not be all 0 (nothing to fit) and must sum to a total in
    :data:`calib_jax.logs.validate.WEIGHT_TOTAL_RANGE`, the range ``evaluate`` accepts
    (:func:`~calib_jax.logs.validate.check_weight_total`; the fits cast the weights to float32,
    which a total of 1e300 overflows); ``ValueError`` naming ``column``."""
    from calib_jax.logs.validate import check_weight_total

    if column is not None and total == 0:
        raise ValueError(f"{source}: the weights of column {column!r} are 0 on every valid row: nothing to fit")
    check_weight_total(total, source=source, column=column)


def _check_classes(clicks: float, non_clicks: float, *, rows: int, source: str, label: str,
                   weight: str | None) -> None:
    r"""The second rule of every fit: the valid rows must hold both labels with weight above 0.

    Every calibrator estimates the click rate as a function of the score, and a log of one
    label has no information about it: isotonic regression and histogram binning would map
    every score to exactly 0 (or 1), ILPS would keep the identity, and the parametric maps
    would fall back to a shift (:mod:`calib_jax.calibrators._failsafe`) that their per-group
    use in SAG needs but a whole log does not. So ``fit`` refuses such a log, on every engine
    and for every method, instead of saving a degenerate calibrator with exit 0.

    Args:
      clicks, non_clicks: the weighted counts of the valid rows with label 1 and 0
        (:math:`\sum_i v_i y_i` and :math:`\sum_i v_i (1 - y_i)`).
      rows: the number of valid rows, for the message.
      source: the file (or files) the rows come from; ``label``, ``weight``: their columns
        (``weight`` ``None``: every row weighs 1).

    Raises:
      ValueError: naming ``source`` and ``label`` (and ``weight``), when either count is 0.

    Example:
      >>> _check_classes(3.0, 7.0, rows=10, source="log.csv", label="click", weight=None)
      >>> _check_classes(0.0, 10.0, rows=10, source="log.csv", label="click", weight=None)
      Traceback (most recent call last):
      ...
      ValueError: log.csv: column 'click' holds no click (1) among the 10 valid rows: ...
    """
    if clicks > 0 and non_clicks > 0:
        return
    which = "no click (1)" if not clicks > 0 else "no non-click (0)"
    weighted = f" with a weight above 0 in column {weight!r}" if weight is not None else ""
    raise ValueError(f"{source}: column {label!r} holds {which}{weighted} among the {rows} valid rows: a "
                     "calibrator learns the click rate from both labels, so none can be fitted on this log")


def _cells_of_log(opts: FitOptions, engine: str) -> tuple[Any, str, str, Any]:
    """The log's cells (an :class:`~calib_jax.logs.accumulate.Accumulator` without bootstrap)
    from ``engine`` (``--save`` is none of the inputs: :func:`files`, checked before the run);
    ``(acc, where, format, columns)``."""
    import numpy as np

    from calib_jax.logs import engines, sql
    from calib_jax.logs.accumulate import Accumulator, Settings
    from calib_jax.logs.validate import Problems, clean_chunk

    if engine == "spark":
        fmt, inputs, where = spark_input(opts)
    elif engine == "duckdb":
        inp = engines.resolve_input(opts.log, opts.format, hive=opts.hive_partitioning)
        fmt, inputs, where = inp.format, list(inp.files), inp.spec
    else:
        path = one_file(opts.log)
        fmt, inputs, where = loaders.resolve_format(path, opts.format), [path], str(path)
    cols = columns_of(opts, fmt)
    if cols.fields:
        raise ValueError("--field: a fit from the log's cells uses the logit only; the methods that read fields "
                         "fit on the rows (leave out --engine)")
    settings = Settings(n_boot=0, hist_bins=opts.hist_bins, scheme="rows")
    problems = Problems()
    if engine == "arrow":
        acc = Accumulator(settings)
        start = 0
        for batch in loaders.iter_batches(inputs[0], fmt, numeric=cols.numeric, text=(), chunk_rows=opts.chunk_rows):
            ch = clean_chunk(batch, cols, start, problems)
            start += batch.num_rows
            with np.errstate(over="ignore", invalid="ignore"):  # overflowing weights: _check_weights says so
                acc.update(ch)
        acc.dropped = problems.as_dict()
        bad = acc.rows_read - acc.rows_used
    else:
        qcols = sql.QueryColumns.of(cols)
        table = query_cells(opts, engine, inp if engine == "duckdb" else None, qcols, settings)
        acc = sql.accumulator_from_aggregates(table, settings, source=where)
        counts = sql.problems_from_aggregates(table, qcols, source=where)
        for (col, reason), n in counts.items():
            problems.items[(col, reason)] = [n, -1]
        bad = acc.rows_read - acc.rows_used
        acc.dropped = problems.as_dict()
    if acc.rows_read == 0:
        raise ValueError(f"{where}: the log has no data rows")
    if bad and not opts.drop_invalid:
        raise ValueError(f"{where}: {problems.describe()} — {bad} of {acc.rows_read} rows invalid; fix the log or "
                         "pass --drop-invalid to drop them")
    if acc.rows_used == 0:
        raise ValueError(f"{where}: no valid rows left after dropping {acc.rows_read} invalid rows "
                         f"({problems.describe()})")
    with np.errstate(over="ignore"):  # an overflow is what the check reports
        by_label = np.sum(acc.hist.reshape(acc.R, -1, 2, 4)[0, :, :, 0], axis=0)  # weights of labels 0 and 1
        total = float(np.sum(by_label))
    _check_weights(total, source=where, column=cols.weight)
    _check_classes(float(by_label[1]), float(by_label[0]), rows=int(acc.rows_used), source=where, label=cols.label,
                   weight=cols.weight)
    return acc, where, fmt, cols


def _check_input_roles(cols: Any, features: tuple[str, ...]) -> None:
    """A feature column may be none of the label, the model's column, the weight and the rate
    column (a column may be both a field and a feature; the fields' roles are checked by
    :class:`calib_jax.logs.validate.Columns`, as for every command): a feature equal to the
    score failed inside Arrow ("exists 2 times in schema")."""
    model = ("--score", cols.score) if cols.score is not None else ("--logit", cols.logit)
    taken = {col: flag for flag, col in (("--label", cols.label), model, ("--weight", cols.weight),
                                        ("--negative-rate-column", cols.negative_rate_column)) if col is not None}
    for col in features:
        if col in taken:
            raise ValueError(f"--feature must name another column than {taken[col]} (both name {col!r})")
    if len(set(features)) != len(features):  # failed inside Arrow too
        raise ValueError(f"--feature: a column is named twice ({', '.join(features)})")


def fit_spec(opts: FitOptions) -> dict[str, Any]:
    """Fit the calibrator ``opts.method`` on the log's rows (in memory), or with ``opts.engine``
    on the log's cells; returns the parameters' record (what :func:`calib_jax.logs.params.save`
    writes), saving nothing."""
    from calib_jax.logs import params as P

    if Path(opts.save).is_dir():
        raise ValueError(f"--save {opts.save}: is a folder; name the parameter file to write")
    check_engine_settings(opts, opts.engine or "rows")
    if opts.engine is not None:
        return _spec_from_cells(opts, opts.engine)
    path = Path(opts.log)
    fmt = loaders.resolve_format(path, opts.format)
    cols = columns_of(opts, fmt)
    _check_input_roles(cols, tuple(opts.feature))
    P.check_method_inputs(opts.method, cols.fields, tuple(opts.feature))  # before the log is read
    arrays, table, problems = _read_all(opts, fmt, cols, extra_numeric=opts.feature)
    spec = P.fit_from_table(opts.method, arrays, table, fields=cols.fields, features=tuple(opts.feature),
                            max_levels=opts.max_levels, seed=opts.seed,
                            hyper={k: v for k, v in (("n_partitions", opts.partitions), ("n_steps", opts.steps))
                                   if v is not None})
    spec["inputs"].update({"score": cols.score, "logit": cols.logit, "label": cols.label, "weight": cols.weight,
                           "negative_rate": cols.negative_rate,
                           "negative_rate_column": cols.negative_rate_column, "source": str(path), "format": fmt,
                           "rows": int(arrays["o"].shape[0]),
                           "dropped": problems.as_dict()})
    return spec


def run_fit(opts: FitOptions) -> dict[str, Any]:
    """``calib-jax fit``: :func:`fit_spec`, then the parameter file ``opts.save`` written and one
    line said; returns the parameters' record."""
    from calib_jax.logs import params as P

    spec = fit_spec(opts)
    P.save(opts.save, spec)
    inputs = spec["inputs"]
    if "fitted_from" in inputs:
        say(f"fitted {opts.method} on the {inputs['fitted_from']['cells']} cells of {inputs['rows']} rows of "
            f"{inputs['source']} ({inputs['engine']}); saved {opts.save}")
    else:
        say(f"fitted {opts.method} on {inputs['rows']} rows of {inputs['source']}; saved {opts.save}")
    for f, share in (inputs.get("other_share") or {}).items():  # what apply compares its own share with
        if share > 0:
            say(f"  field {f!r}: {len(inputs['vocabularies'][f]) - 1} levels kept (--max-levels); the other "
                f"{100 * share:.1f}% of the rows share the level __other__")
    return spec


def _spec_from_cells(opts: FitOptions, engine: str) -> dict[str, Any]:
    """``fit`` with an engine: one query (or one streamed pass) for the cells, then the fit."""
    import numpy as np

    from calib_jax.logs import params as P

    if opts.method not in CELL_FIT_METHODS:
        raise ValueError(f"--method {opts.method} needs the rows (its fit reads more than the logit); --engine fits "
                         f"{', '.join(CELL_FIT_METHODS)} from the log's cells: leave out --engine to fit it")
    if opts.feature or opts.partitions is not None or opts.steps is not None:
        raise ValueError("--feature, --partitions and --steps are options of the row-level fits; "
                         "leave them out with --engine")
    t0 = time.perf_counter()
    acc, where, fmt, cols = _cells_of_log(opts, engine)
    seconds_cells = time.perf_counter() - t0
    spec = P.fit_from_cells(opts.method, acc, seed=opts.seed, logit_input=cols.logit is not None)
    spec["inputs"].update({"score": cols.score, "logit": cols.logit, "label": cols.label,
                           "weight": cols.weight, "negative_rate": cols.negative_rate,
                           "negative_rate_column": cols.negative_rate_column, "source": where,
                           "format": fmt, "rows": int(acc.rows_used),
                           "dropped": dict(acc.dropped), "engine": engine,
                           "fitted_from": {"cells": int(np.count_nonzero(acc.hist.reshape(-1, 4)[:, 0] > 0)),
                                           "hist_bins": acc.settings.hist_bins,
                                           "logit_range": acc.settings.logit_range,
                                           "seconds_cells": round(seconds_cells, 3),
                                           "seconds_fit": round(time.perf_counter() - t0 - seconds_cells, 3)}})
    return spec


