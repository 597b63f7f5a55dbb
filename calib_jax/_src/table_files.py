"""Streamed writers of Arrow tables to log files (Parquet, CSV, TSV), chosen by the suffix.

Shared by ``calib-jax apply`` and :func:`calib_jax.data.simulator.write_log`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: the file types a log is written as, by suffix
LOG_SUFFIXES = (".parquet", ".pq", ".csv", ".tsv")


def table_writer(path: Path, suffix: str, schema: Any) -> Any:
    """An open pyarrow writer of ``schema`` to ``path`` (``.write(batch)``, ``.close()``):
    Parquet for ``.parquet`` / ``.pq``, tab-separated for ``.tsv``, CSV otherwise."""
    if suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        return pq.ParquetWriter(path, schema)
    import pyarrow.csv as pcsv

    opts = pcsv.WriteOptions(delimiter="\t" if suffix == ".tsv" else ",")
    return pcsv.CSVWriter(path, schema, write_options=opts)
