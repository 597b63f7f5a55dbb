"""A saved calibrator applied to every row of a log, streamed chunk by chunk (``calib-jax apply
PARAMS LOG --out LOG2``): the output is the log with one column added."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from calib_jax._src.table_files import table_writer
from calib_jax.logs import loaders
from calib_jax.logs.common import say
from calib_jax.logs.inputs import progress_bar
from calib_jax.logs.options import ApplyOptions
from calib_jax.logs.unseen import UnseenInputs

__all__ = ["run_apply"]


def run_apply(opts: ApplyOptions) -> Path:
    """Apply the calibrator of ``opts.params`` to every row of ``opts.log`` and write the log
    with the calibrated column added (atomically); returns the output's path.

    Every column of the log is copied as it is: a Parquet column keeps its type and values
    (float32, decimal, integers, strings, timestamps), a CSV or TSV cell its text; only the
    calibrated column (float64) is added. (A CSV log written as Parquet gets its columns as
    text, those the calibrator reads as numbers as float64.)

    SAG, VR-SAG and Neural Calibration map a field's level that the fit did not keep to
    ``__other__``: a line per field says how many rows did; where that share is well above what
    the fit expects on new rows (:mod:`calib_jax.logs.unseen`), it is an
    :class:`~calib_jax.logs.unseen.UnseenInputsWarning` naming the levels that are a kept level
    written another way (``1.0`` for ``1``). So are the rows of a SAG/VR-SAG feature outside the
    range the fit saw."""
    import numpy as np
    import pyarrow as pa

    from calib_jax import io as cio
    from calib_jax.logs import params as P

    path = Path(opts.log)
    out = Path(opts.out)
    spec = P.load(opts.params)
    inp = spec["inputs"]
    fmt = loaders.resolve_format(path, opts.format)
    src_col = inp["score"] or inp["logit"]
    suffix = out.suffix.lower()
    if suffix not in (".csv", ".tsv", ".parquet", ".pq"):
        raise ValueError(f"{out}: output suffix must be .csv, .tsv or .parquet")
    if out.is_dir():
        raise ValueError(f"--out {out}: is a folder; name the output log")
    P.check_apply_memory(spec, opts.chunk_rows, loaders.count_rows(path, fmt))
    text_in = fmt in ("csv", "tsv", "criteo", "avazu", "aliccp")
    # the columns the calibrator reads, as numbers and text; beside them, the same rows as read
    read = loaders.iter_batches(path, fmt, numeric=[src_col, *inp["features"]], text=inp["fields"],
                                chunk_rows=opts.chunk_rows, all_columns=text_in and suffix in (".parquet", ".pq"),
                                legacy_levels=P.legacy_levels(inp))
    copied = None if text_in and suffix in (".parquet", ".pq") else _as_read(path, fmt, opts.chunk_rows)
    writer: Any = None
    rows = 0
    tally = UnseenInputs(inp)
    bar = progress_bar(loaders.count_rows(path, fmt), opts.quiet, "apply")
    with cio.atomic_output(out) as tmp:
        try:
            for batch in read:
                x = np.asarray(batch.column(batch.schema.get_field_index(src_col)).to_numpy(zero_copy_only=False),
                               float)
                invalid = P.first_invalid(x, unit_interval=not inp["logit"], float32_range=P.float32_logits(spec))
                if invalid:
                    raise ValueError(f"{path}: column {src_col!r}: {invalid[0]} row{'s' if invalid[0] != 1 else ''} "
                                     f"{P.invalid_words(spec)} "
                                     f"(first at data row {rows + invalid[1] + 1})")
                for j, col in enumerate(inp["features"]):  # numeric columns of the SAG/VR-SAG embedding
                    f = np.asarray(batch.column(batch.schema.get_field_index(col)).to_numpy(zero_copy_only=False),
                                   float)
                    problem = P.feature_row_problem(f, inp, j)
                    if problem:
                        many = problem[1] != 1
                        if problem[0] == "missing or not finite":
                            raise ValueError(f"{path}: column {col!r}: {problem[1]} row{'s' if many else ''} "
                                             f"missing or not finite (first at data row {rows + problem[2] + 1})")
                        seen = inp.get("feature_range")
                        saw = f"; the fit saw values from {seen[j][0]!r} to {seen[j][1]!r}" if seen else ""
                        raise ValueError(f"{path}: column {col!r}: {problem[1]} {'rows lie' if many else 'row lies'} "
                                         f"{problem[0]} (first at data row {rows + problem[2] + 1}, value "
                                         f"{float(f[problem[2]])!r}){saw}")
                probs = np.asarray(P.predict_batch(spec, x, batch, tally), np.float64)
                wrong = ~((probs >= 0) & (probs <= 1))  # NaN included: never written as a result
                if wrong.any():
                    raise ValueError(f"{opts.params}: the calibrator gives {int(wrong.sum())} predictions that are "
                                     f"not probabilities (first at data row {rows + int(np.argmax(wrong)) + 1})")
                kept = batch if copied is None else copied.take(batch.num_rows)
                if opts.column in kept.schema.names:
                    raise ValueError(f"{path}: already has a column {opts.column!r}; choose another --column")
                kept = kept.append_column(opts.column, pa.array(probs, pa.float64()))
                if writer is None:
                    writer = table_writer(tmp, suffix, kept.schema)
                writer.write(kept)
                rows += batch.num_rows
                bar.update(batch.num_rows)
            if writer is None:
                raise ValueError(f"{path}: the log has no data rows")
        finally:
            bar.close()
            if writer is not None:
                writer.close()
    say(f"wrote {rows} rows with column {opts.column!r} to {out}")
    tally.rows = rows
    tally.report(str(path), say)
    return out


class _Rows:
    """The rows of a second read of the log, handed out in the slices the first read gives."""

    def __init__(self, batches: Any, path: Path) -> None:
        self.batches, self.path = iter(batches), path
        self.held: list[Any] = []
        self.n = 0

    def take(self, n: int) -> Any:
        """The next ``n`` rows, as one record batch."""
        import pyarrow as pa

        while self.n < n:
            b = next(self.batches, None)
            if b is None:
                raise ValueError(f"{self.path}: changed while it was read (fewer rows on the second read)")
            self.held.append(b)
            self.n += b.num_rows
        table = pa.Table.from_batches(self.held)
        head, rest = table.slice(0, n), table.slice(n)
        self.held, self.n = rest.to_batches(), rest.num_rows
        return head.combine_chunks().to_batches()[0]


def _as_read(path: Path, fmt: str, chunk_rows: int) -> _Rows:
    """Every column of the log as read, untouched (a Parquet column in its type, a CSV cell as
    its text), to copy beside the calibrated column."""
    return _Rows(loaders.iter_batches(path, fmt, numeric=[], text=[], chunk_rows=chunk_rows, all_columns=True), path)
