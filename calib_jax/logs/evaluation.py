"""The calibration report of a log (``calib-jax evaluate LOG``, :func:`calib_jax.logs.evaluate`).

The log is read by one of three engines (:data:`~calib_jax.logs.engines.ENGINES`): one
SQL query in DuckDB or Spark that returns the log's cells, or the streamed reader (``arrow``)
that accumulates them chunk by chunk with a checkpoint after each (``--resume``). The cells
become an :class:`~calib_jax.logs.accumulate.Accumulator` whichever engine read them, and
:func:`~calib_jax.logs.outputs.write_report` makes the report from it. ``--by COL``
hands over to :func:`calib_jax.logs.slicing.run_slices`; ``--aggregates FILE`` reads the result of
``calib-jax sql`` run in a warehouse instead of a log.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import time
from pathlib import Path
from typing import Any

from calib_jax.logs import loaders
from calib_jax.logs.common import out_dir, say
from calib_jax.logs.inputs import (
    columns_of,
    progress_bar,
    query_cells,
    spark_input,
)
from calib_jax.logs.options import (
    BINS_MAX,
    BOOTSTRAP_MAX,
    HIST_BINS_RANGE,
    EvaluateOptions,
    check_engine_settings,
    check_option_range,
)
from calib_jax.logs.outputs import (
    CHECKPOINT,
    INCOMPLETE,
    INCOMPLETE_TEXT,
    STATE_FILE,
    RunState,
    weight_total,
    write_report,
)
from calib_jax.logs.signals import SIGNALS

__all__ = ["CHECKPOINT_EVERY_S", "Stopped", "run_evaluate", "engine_of", "settings_of"]

#: seconds between two checkpoints of the streamed reader (``--resume`` redoes at most this much
#: reading after an interruption). The first chunk always writes one, and so does the chunk that
#: ``--stop-after-chunks`` stops at. Every chunk wrote one before: about 12 ms each, a tenth of
#: a run's time at 10^7 rows.
CHECKPOINT_EVERY_S = 10.0


class Stopped(Exception):
    """Raised by the hidden ``--stop-after-chunks N`` switch (tests of ``--resume``): the run
    stopped on purpose after N chunks, its checkpoint saved."""


def fingerprint(path: Path, fmt: str, cols: Any, settings: Any, chunk_rows: int) -> dict[str, Any]:
    """What a checkpoint was made for (the file, its size and time, the columns and settings):
    ``--resume`` refuses a checkpoint whose fingerprint differs."""
    st = path.stat()
    return {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "format": fmt,
            "columns": {k: v for k, v in vars(cols).items()}, "settings": settings.to_dict(),
            "chunk_rows": chunk_rows}


def settings_of(opts: EvaluateOptions, cols: Any) -> Any:
    """The :class:`Settings` of an ``evaluate`` command line (bounds checked)."""
    from calib_jax.logs.accumulate import Settings

    for name, val, lo in (("--bootstrap", opts.bootstrap, 0), ("--bootstrap-block", opts.bootstrap_block, 1),
                          ("--chunk-rows", opts.chunk_rows, 1), ("--bins", opts.bins, 1),
                          ("--hist-bins", opts.hist_bins, 16), ("--max-levels", opts.max_levels, 1)):
        if val < lo:
            raise ValueError(f"{name} must be >= {lo}, got {val}")
    check_option_range("--hist-bins", opts.hist_bins, HIST_BINS_RANGE)  # the lower end checked above
    check_option_range("--bins", opts.bins, (1, BINS_MAX))
    check_option_range("--bootstrap", opts.bootstrap, (0, BOOTSTRAP_MAX))
    if opts.bootstrap == 1:
        raise ValueError("--bootstrap must be 0 (no intervals) or >= 2")
    from calib_jax.logs.gauc import check_gauc_weight

    check_gauc_weight(opts.gauc_weight)  # a KeyError when GAUC was computed, unread without --user
    scheme = opts.bootstrap_scheme or ("rows" if opts.bootstrap_block > 1 else "cells")
    settings = Settings(fields=tuple(cols.fields), oracle=cols.oracle is not None, n_boot=opts.bootstrap,
                        block=opts.bootstrap_block, seed=opts.seed, n_bins=opts.bins, hist_bins=opts.hist_bins,
                        max_levels=opts.max_levels, scheme=scheme, negative_rate=cols.negative_rate,
                        negative_rate_column=cols.negative_rate_column)
    check_table_size(settings)
    return settings


def check_table_size(settings: Any) -> None:
    """Refuse settings whose tables exceed :data:`~calib_jax.logs.accumulate.MAX_ELEMENTS` float64
    numbers (4 GiB) before anything is allocated, naming the options that set their size: each
    option within its own range, ``--bins`` times ``--hist-bins`` (the cell bootstrap's main cells)
    or ``--bootstrap`` times either (the rows bootstrap's tables) could still ask for tens of GiB.

    Args:
      settings: the run's :class:`~calib_jax.logs.accumulate.Settings`.

    Returns:
      None; ``ValueError`` when the tables are too large.

    Example:
      >>> from calib_jax.logs.accumulate import Settings
      >>> check_table_size(Settings(scheme="cells", n_boot=100))
      >>> check_table_size(Settings(scheme="cells", n_boot=100, n_bins=65536))  # doctest: +ELLIPSIS
      Traceback (most recent call last):
      ...
      ValueError: --bins 65536 with --hist-bins 4096 needs 4,295,393,287 numbers (32.0 GiB) for the report's ...
    """
    from calib_jax.logs.accumulate import MAX_ELEMENTS, table_elements

    need = table_elements(settings)
    if need <= MAX_ELEMENTS:
        return
    if settings.scheme == "cells":
        why = "the cell bootstrap keeps 2 x bins x hist-bins cells; lower --bins or --hist-bins"
    else:
        why = "the rows bootstrap keeps each replicate's bins; lower --bootstrap, --bins or --hist-bins"
    raise ValueError(f"--bins {settings.n_bins} with --hist-bins {settings.hist_bins}"
                     + ("" if settings.scheme == "cells" else f" and --bootstrap {settings.n_boot}")
                     + f" needs {need:,} numbers ({need * 8 / 2**30:.1f} GiB) for the report's tables, more than "
                     f"{MAX_ELEMENTS:,} (4 GiB): {why}")


def engine_of(opts: EvaluateOptions) -> tuple[str, str]:
    """The engine of an ``evaluate`` run and what it reads: ``("aggregates", FILE)`` for
    ``--aggregates``; else the engine as asked, ``arrow`` for what only the streamed reader does
    (``--resume``, the rows bootstrap), else ``duckdb`` (``arrow`` without it), with the log.
    A setting the engine does not read is refused (:func:`~calib_jax.logs.options.check_engine_settings`)."""
    engine, source = _engine_and_source(opts)
    check_engine_settings(opts, engine)
    return engine, source


def _engine_and_source(opts: EvaluateOptions) -> tuple[str, str]:
    needs_arrow = [flag for flag, on in (("--resume", opts.resume),
                                         ("--bootstrap-scheme rows", opts.bootstrap_scheme == "rows"
                                          and opts.bootstrap > 0),
                                         ("--bootstrap-block", opts.bootstrap_block > 1),
                                         ("--stop-after-chunks", opts.stop_after_chunks is not None)) if on]
    if opts.aggregates is not None:
        if opts.log is not None:
            raise ValueError("give either a log or --aggregates FILE, not both")
        if opts.engine not in (None, "duckdb") or needs_arrow:
            raise ValueError(f"--aggregates is evaluated without an engine; {(needs_arrow or ['--engine'])[0]} "
                             "does not apply")
        return "aggregates", opts.aggregates
    if opts.log is None:
        raise ValueError("give the log to evaluate (a file, a glob or a folder), or --aggregates FILE")
    if opts.engine is not None:
        if opts.engine != "arrow" and needs_arrow:
            raise ValueError(f"{needs_arrow[0]} needs --engine arrow (the {opts.engine} engine reads the log in "
                             "one query: nothing to resume, no per-row bootstrap counts)")
        return str(opts.engine), opts.log
    if needs_arrow:
        return "arrow", opts.log
    try:
        import duckdb  # noqa: F401
    except ImportError:  # pragma: no cover - without the cli extra's duckdb
        return "arrow", opts.log
    return "duckdb", opts.log


def run_evaluate(opts: EvaluateOptions) -> dict[str, Any]:
    """Read the log, accumulate, compute the panel, write the outputs; returns the report
    (``report.json``'s content; with ``state_only``, the state file's path; with ``by``, the
    slices' table)."""
    from calib_jax import io as cio
    from calib_jax.logs.accumulate import Accumulator
    from calib_jax.logs.validate import Problems, check_accumulator

    t0 = time.perf_counter()
    engine, source = engine_of(opts)
    if opts.by is not None:
        from calib_jax.logs.slicing import run_slices

        return run_slices(opts, engine)
    if opts.every is not None or opts.baseline is not None:
        raise ValueError("--every and --baseline need --by COL")
    if opts.user is not None and (opts.resume or opts.state_only):
        raise ValueError(f"--user: GAUC is not additive over parts of a log (a user's rows may lie in several), so "
                         f"it does not combine with {'--resume' if opts.resume else '--state-only'}")
    if engine != "arrow":
        return _evaluate_sql(opts, engine, source, t0)
    path = Path(source)
    if not path.exists() and set("*?[") & set(str(path)) or path.is_dir() and not loaders.is_open_bandit_dir(path):
        raise ValueError(f"{path}: the arrow engine reads one file; globs and folders are read by --engine duckdb "
                         "or spark")
    fmt = loaders.resolve_format(path, opts.format)
    cols = columns_of(opts, fmt)
    settings = settings_of(opts, cols)
    out = out_dir(Path(opts.out))
    created = not out.exists()
    ckpt = out / CHECKPOINT
    fp = fingerprint(path, fmt, cols, settings, opts.chunk_rows)
    if opts.row_offset < 0:
        raise ValueError(f"--row-offset must be >= 0, got {opts.row_offset}")
    acc = Accumulator(settings, row_offset=opts.row_offset)
    problems = Problems()
    if opts.resume and ckpt.exists():
        acc, meta = Accumulator.from_bytes(ckpt.read_bytes(), source=str(ckpt))
        check_accumulator(acc, source=str(ckpt), weight=cols.weight)
        saved_problems = meta.pop("_problems", [])
        if meta != json.loads(json.dumps(fp)):
            diff = sorted(k for k in fp if json.loads(json.dumps(fp)).get(k) != meta.get(k))
            raise ValueError(f"{ckpt}: checkpoint was made for another input or settings (differs in: "
                             f"{', '.join(diff)}); delete it or run without --resume")
        problems = Problems.from_json(saved_problems)
        say(f"resuming after {acc.rows_read} rows ({acc.chunks} chunks)", err=True)
    job = _StreamJob(path=path, fmt=fmt, cols=cols, out=out, ckpt=ckpt, fingerprint=fp)
    try:
        return _evaluate_stream(opts, job, acc, problems, t0)
    except (Stopped, KeyboardInterrupt):
        raise  # the checkpoint stays for --resume
    except BaseException:
        if SIGNALS.signum is not None:
            raise  # an interrupt that a library turned into its own error: the checkpoint stays too
        # a run that failed on its input leaves no checkpoint (a rerun starts afresh) and, unless
        # it failed while writing the report files, no INCOMPLETE marker either
        cio.remove_output(ckpt)
        if not job.state.writing_report:
            if not opts.state_only:  # a state-only run writes no marker
                cio.remove_output(out / INCOMPLETE)
            if created and out.is_dir() and not any(out.iterdir()):
                out.rmdir()
        raise


@dataclasses.dataclass(frozen=True)
class _StreamJob:
    """The streamed reader's run: the file and its columns, the output folder, the checkpoint
    and what it was made for, and how far the run got (:class:`RunState`)."""

    path: Path
    fmt: str
    cols: Any
    out: Path
    ckpt: Path
    fingerprint: dict[str, Any]
    state: RunState = dataclasses.field(default_factory=RunState)


def _with_field_codes(batches: Any, fields: Any, skip: int) -> Any:
    """Each batch after the first ``skip`` (which a resumed run has already added) with its
    fields dictionary-encoded (:func:`~calib_jax.logs.accumulate.dictionary_encoded`, the
    stateless part of the accumulator's level codes), for the read-ahead thread."""
    from calib_jax.logs.accumulate import dictionary_encoded

    for batch in itertools.islice(batches, skip, None):
        yield batch, {f: dictionary_encoded(batch.column(batch.schema.get_field_index(f))) for f in fields}


def _evaluate_stream(opts: EvaluateOptions, job: _StreamJob, acc: Any, problems: Any, t0: float) -> dict[str, Any]:
    from calib_jax import io as cio
    from calib_jax.logs.validate import clean_chunk

    path, fmt, cols, out, ckpt = job.path, job.fmt, job.cols, job.out, job.ckpt
    known = loaders.count_rows(path, fmt)
    if known is not None and not opts.state_only:  # before the read where the rows are known (Parquet)
        from calib_jax.logs.accumulate import check_block_count

        check_block_count(known, acc.settings, str(path))
    if not opts.state_only:
        cio.atomic_write_text(out / INCOMPLETE, INCOMPLETE_TEXT)
    skip = acc.chunks
    bar = progress_bar(known, opts.quiet, "evaluate")
    bar.update(acc.rows_read)
    counting_only = False
    rows_total = acc.rows_read
    users = _UserRows() if cols.user is not None else None
    saved_at: float | None = None  # when the checkpoint was last written (the first chunk always writes one)
    try:
        read = loaders.iter_batches(path, fmt, numeric=cols.numeric, text=cols.text, chunk_rows=opts.chunk_rows,
                                    ids=loaders.id_columns(cols.user, cols.fields))
        with contextlib.closing(loaders.read_ahead(_with_field_codes(read, cols.fields, skip))) as batches:
            for batch, codes in batches:
                n_bad_before = problems.bad_rows
                chunk = clean_chunk(batch, cols, rows_total, problems)
                chunk.fields.update(codes)
                rows_total += batch.num_rows
                bar.update(batch.num_rows)
                if problems.bad_rows > n_bad_before and not opts.drop_invalid:
                    counting_only = True  # keep reading only to count the bad rows
                if counting_only:
                    continue
                acc.update(chunk)
                if users is not None:
                    users.add(batch, cols, chunk)
                stop_here = opts.stop_after_chunks is not None and acc.chunks >= opts.stop_after_chunks
                if saved_at is None or stop_here or time.monotonic() - saved_at >= CHECKPOINT_EVERY_S:
                    cio.atomic_write_bytes(ckpt, acc.to_bytes({**job.fingerprint, "_problems": problems.to_json()}))
                    saved_at = time.monotonic()
                if stop_here:
                    raise Stopped(f"stopped after {opts.stop_after_chunks} chunks; checkpoint saved in {opts.out} "
                                  "(rerun with --resume)")
    finally:
        bar.close()
    if counting_only:
        raise ValueError(f"{path}: {problems.describe()} — {problems.bad_rows} of {rows_total} rows invalid; "
                         "fix the log or pass --drop-invalid to drop them")
    if opts.drop_invalid:
        for k, n in problems.as_dict().items():
            acc.dropped[k] = acc.dropped.get(k, 0) + n
    if acc.rows_read == 0:
        raise ValueError(f"{path}: the log has no data rows")
    if acc.rows_used == 0:
        raise ValueError(f"{path}: no valid rows left after dropping {acc.rows_read} invalid rows "
                         f"({problems.describe()})")
    inp = {"path": str(path), "format": fmt, "columns": vars(cols)}
    if opts.state_only:
        from calib_jax.logs.validate import check_weight_total

        check_weight_total(weight_total(acc), source=str(path), column=cols.weight, parts=True)
        cio.atomic_write_bytes(out / STATE_FILE, acc.to_bytes({"input": inp, "chunk_rows": opts.chunk_rows}))
        cio.remove_output(ckpt)
        say(f"state of {acc.rows_read} rows (from row {acc.row_offset}) saved: {out / STATE_FILE}")
        return {"state": str(out / STATE_FILE)}
    rep = write_report(acc, out, inp, {"chunk_rows": opts.chunk_rows}, t0, gauc_weight=opts.gauc_weight,
                       gauc_sums=users.sums() if users is not None else None, state=job.state)
    cio.remove_output(ckpt)
    if opts.drop_invalid and acc.rows_read > acc.rows_used:
        say(f"dropped {acc.rows_read - acc.rows_used} invalid rows: {problems.describe()}", err=True)
    return rep


class _UserRows:
    """The user, score, label and weight of every valid row the arrow engine reads (GAUC needs
    each user's rows together: 16 bytes a row plus the user ids, in memory)."""

    def __init__(self) -> None:
        self.users: list[Any] = []
        self.x: list[Any] = []
        self.y: list[Any] = []
        self.v: list[Any] = []

    def add(self, batch: Any, cols: Any, chunk: Any) -> None:
        import pyarrow as pa

        keep = chunk.keep
        self.users.append(batch.column(batch.schema.get_field_index(cols.user)).filter(pa.array(keep)))
        self.x.append((chunk.p if cols.score is not None else chunk.o)[keep])
        self.y.append(chunk.y[keep])
        self.v.append(chunk.v[keep])

    def sums(self) -> Any:
        import numpy as np
        import pyarrow as pa

        from calib_jax.logs.gauc import user_auc_sums

        users = pa.chunked_array(self.users, type=pa.string()) if self.users else pa.chunked_array([], pa.string())
        cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0)  # noqa: E731
        return user_auc_sums(users, cat(self.x), cat(self.y), cat(self.v))


def _evaluate_sql(opts: EvaluateOptions, engine: str, source: str, t0: float) -> dict[str, Any]:
    """``evaluate`` by a query engine (``duckdb``, ``spark``) or from ``--aggregates``: the log's
    cells in one query (:mod:`calib_jax.logs.sql`), then the report as for the arrow path."""
    import dataclasses

    from calib_jax import io as cio
    from calib_jax.logs import engines, sql
    from calib_jax.logs.validate import Columns, Problems

    if engine == "aggregates":
        src = Path(source)
        table = _read_aggregates(src)
        meta = sql.query_settings_of(table, source=str(src))
        qcols = sql.columns_of_result(meta)
        _same_query(opts, meta, qcols, src)
        cols = Columns(**dataclasses.asdict(qcols))
        where, fmt = str(src), "aggregates"
    else:
        if engine == "duckdb":
            inp = engines.resolve_input(source, opts.format, hive=opts.hive_partitioning)
            fmt, where = inp.format, inp.spec
        else:
            fmt, _, where = spark_input(opts)
        cols = columns_of(opts, fmt)
        qcols = sql.QueryColumns.of(cols)
    settings = settings_of(opts, cols)
    out = out_dir(Path(opts.out))
    if engine != "aggregates":
        table = query_cells(opts, engine, inp if engine == "duckdb" else None, qcols, settings)
    acc = sql.accumulator_from_aggregates(table, settings, source=where)
    if acc.rows_read == 0:
        raise ValueError(f"{where}: the log has no data rows")
    counts = sql.problems_from_aggregates(table, qcols, source=where)
    problems = Problems()
    if counts:
        # the first offending rows (a second scan, in file order) only for the message that stops
        # the run; with --drop-invalid the counts suffice
        firsts = engines.first_problem_rows(inp, qcols) if engine == "duckdb" and not opts.drop_invalid else {}
        for i, (role, reason) in enumerate(sql.PROBLEM_BITS):
            col = getattr(qcols, role)
            if (col, reason) in counts:
                rows = [r for m, r in firsts.items() if m >> i & 1]
                problems.items[(col, reason)] = [counts[(col, reason)], min(rows) if rows else -1]
        problems.bad_rows = acc.rows_read - acc.rows_used
        if not opts.drop_invalid:
            raise ValueError(f"{where}: {problems.describe()} — {problems.bad_rows} of {acc.rows_read} rows invalid; "
                             "fix the log or pass --drop-invalid to drop them")
        acc.dropped = problems.as_dict()
    if acc.rows_used == 0:
        raise ValueError(f"{where}: no valid rows left after dropping {acc.rows_read} invalid rows "
                         f"({problems.describe()})")
    record = {"path": where, "format": fmt, "columns": vars(cols), "engine": engine}
    if opts.state_only:
        cio.atomic_write_bytes(out / STATE_FILE, acc.to_bytes({"input": record, "chunk_rows": None}))
        say(f"state of {acc.rows_read} rows saved: {out / STATE_FILE}")
        return {"state": str(out / STATE_FILE)}
    from calib_jax.logs.gauc import sums_from_aggregates

    gauc_sums = sums_from_aggregates(table, source=where)
    if qcols.user is not None and gauc_sums is None:
        raise ValueError(f"{where}: the aggregates have no GAUC rows although their query read the user column "
                         f"{qcols.user!r}")
    rep = write_report(acc, out, record, {"engine": engine}, t0, gauc_weight=opts.gauc_weight, gauc_sums=gauc_sums)
    if opts.drop_invalid and acc.rows_read > acc.rows_used:
        say(f"dropped {acc.rows_read - acc.rows_used} invalid rows: {problems.describe()}", err=True)
    return rep


def _read_aggregates(path: Path) -> Any:
    """A ``calib-jax sql`` result exported as CSV / TSV or Parquet, as a pyarrow table."""
    pa = loaders.require_pyarrow()
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            return pq.read_table(path)
        import pyarrow.csv as pcsv

        delim = "\t" if path.suffix.lower() in (".tsv", ".txt") else ","
        return pcsv.read_csv(path, parse_options=pcsv.ParseOptions(delimiter=delim),
                             convert_options=pcsv.ConvertOptions(column_types={"kind": pa.string(),
                                                                               "level": pa.string()},
                                                                 strings_can_be_null=False))
    except (pa.ArrowException, OSError) as e:
        raise ValueError(f"{path}: not a readable CSV or Parquet export of the aggregates: {e}") from None


def _same_query(opts: EvaluateOptions, meta: dict[str, Any], qcols: Any, src: Path) -> None:
    """The command line of ``evaluate --aggregates`` must describe the query that made them."""
    for flag, key, val in (("--bins", "n_bins", opts.bins), ("--hist-bins", "hist_bins", opts.hist_bins),
                           ("--max-levels", "max_levels", opts.max_levels)):
        if meta.get(key) != val:
            raise ValueError(f"{src}: the aggregates were computed with {flag} {meta.get(key)}; pass {flag} "
                             f"{meta.get(key)} (now {val})")
    given = {"score": opts.score, "logit": opts.logit, "label": opts.label, "weight": opts.weight,
             "oracle": opts.oracle, "user": opts.user, "negative_rate": opts.negative_rate,
             "negative_rate_column": opts.negative_rate_column}
    for k, v in given.items():
        flag = "--" + k.replace("_", "-")
        if v is not None and getattr(qcols, k) != v:
            was = f"with {flag} {getattr(qcols, k)}" if getattr(qcols, k) is not None else f"without {flag}"
            raise ValueError(f"{src}: the aggregates were computed {was}, not with {flag} {v}")
    if opts.field and tuple(dict.fromkeys(opts.field)) != qcols.fields:
        raise ValueError(f"{src}: the aggregates hold the fields {list(qcols.fields)}, not {opts.field}")

