"""The simulator's impressions as a log table (Arrow, Parquet or CSV), as a practitioner's log looks."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from calib_jax._src.seeds import key_of_seed
from calib_jax._src.table_files import LOG_SUFFIXES, table_writer
from calib_jax.data.simulator._config import FIELD_NAMES, SimulatorConfig, tiny_config
from calib_jax.data.simulator._log import Impressions, check_impressions, simulate


def _pyarrow() -> Any:
    try:
        import pyarrow
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise ImportError("a log table needs pyarrow: pip install 'calib_jax[cli]'") from None
    return pyarrow


def log_table(imp: Impressions) -> Any:
    r"""The logged impressions as an Arrow table with the columns of a production log.

    Columns: ``click`` (int8, the label :math:`y`), ``pctr`` (float64, the production model's
    prediction :math:`\hat p = \sigma(\ell)`, the score to evaluate), ``oracle_ctr``
    (float64, the true click probability :math:`\pi = \sigma(\eta)` that only a simulator
    knows) and one int32 column per categorical field of :data:`FIELD_NAMES` (the latent
    ``regime`` included: a field no production model sees). The model behind the columns is
    the module docstring's (the AdAuction stand-in of "Calibration is Grouping", §3 and
    Appendix H.2).

    Args:
      imp: impressions from :func:`simulate` (or :func:`load_from_disk`).

    Returns:
      A ``pyarrow.Table`` with ``len(imp)`` rows, in request order. Needs ``pyarrow`` (the
      ``cli`` extra); host code, not jit-able.

    Example:
      >>> import jax
      >>> from calib_jax.data.simulator import log_table, simulate, tiny_config
      >>> t = log_table(simulate(tiny_config(n_chunks=1), jax.random.key(0)))
      >>> t.column_names[:3], t.schema.field("click").type
      (['click', 'pctr', 'oracle_ctr'], DataType(int8))
    """
    pa = _pyarrow()
    imp = check_impressions(imp)
    cols: dict[str, Any] = {
        "click": np.asarray(imp.click).astype(np.int8),
        "pctr": 1.0 / (1.0 + np.exp(-np.asarray(imp.pctr_logit, np.float64))),
        "oracle_ctr": np.asarray(imp.oracle, np.float64),
    }
    fields = np.asarray(imp.fields)
    for j, name in enumerate(FIELD_NAMES):
        cols[name] = fields[:, j].astype(np.int32)
    return pa.table(cols)


def write_log(table: Any, path: str | os.PathLike[str]) -> Path:
    """Write a log table to ``path`` atomically, as Parquet (``.parquet``, ``.pq``), CSV
    (``.csv``) or tab-separated values (``.tsv``), chosen by the suffix.

    Args:
      table: a ``pyarrow.Table`` (e.g. :func:`log_table`'s).
      path: the file to write; its folder is created if missing. The file is either the
        complete new log or, if anything fails, left as it was (no partial file).

    Returns:
      The path written, as a :class:`pathlib.Path`. Another suffix, or a ``path`` that is a
      folder, raises ``ValueError`` naming ``path``. Host file I/O.

    Example:
      >>> import tempfile, pyarrow as pa
      >>> from pathlib import Path
      >>> from calib_jax.data.simulator import write_log
      >>> d = Path(tempfile.mkdtemp())
      >>> write_log(pa.table({"click": [0, 1], "pctr": [0.2, 0.7]}), d / "log.csv").read_text().splitlines()
      ['"click","pctr"', '0,0.2', '1,0.7']
    """
    from calib_jax import io as cio

    pa = _pyarrow()  # the install hint, before any file is touched
    if not isinstance(table, pa.Table):
        raise ValueError(f"`table` must be a pyarrow.Table (log_table(imp) makes one), got {type(table).__name__}")
    out = Path(path)
    suffix = out.suffix.lower()
    if suffix not in LOG_SUFFIXES:
        raise ValueError(f"`path` {out}: use a {', '.join(LOG_SUFFIXES)} file name")
    if out.is_dir():
        raise ValueError(f"`path` {out}: is a folder; name the log file")
    with cio.atomic_output(out) as tmp:  # removed if anything fails: no partial file
        writer = table_writer(tmp, suffix, table.schema)
        try:
            for batch in table.to_batches(max_chunksize=262_144):
                writer.write(batch)
        finally:
            writer.close()
    return out


def simulate_log(config: SimulatorConfig | None = None, *, seed: int = 0, exposure: str = "auction",
                 path: str | os.PathLike[str] | None = None) -> Any:
    """Simulate a log of impressions with their true CTR, as a table (and a file).

    :func:`simulate` followed by :func:`log_table` (and :func:`write_log` when ``path`` is
    given): the public way to get a practitioner-shaped log with ground truth, for the
    ``calib-jax`` command, DuckDB or Spark, or pandas (``table.to_pandas()``). The same as
    ``calib-jax simulate --out PATH --seed SEED``.

    Args:
      config: the simulator configuration (default :func:`tiny_config`: a few thousand
        requests, seconds; :func:`default_config`: about 1.1M impressions, minutes).
      seed: the simulation's seed, an integer in [-2^63, 2^64 - 1] (a negative one is its 64-bit
        two's complement); the table is the same for the same seed and config, and every bit of
        the seed counts (``2**32`` draws another log than ``0``). Another value raises
        ``ValueError`` naming ``seed``; it is never reduced.
      exposure: ``"auction"`` (the auction winners: the production pCTR is biased, as in a
        real log) or ``"random"`` (random eligible ads).
      path: optional ``.parquet`` / ``.pq`` / ``.csv`` / ``.tsv`` file to write (atomically).

    Returns:
      The ``pyarrow.Table`` of :func:`log_table`. Needs ``pyarrow``; host code (it runs and
      compiles the simulator), not jit-able.

    Example:
      >>> from calib_jax.data.simulator import simulate_log, tiny_config
      >>> t = simulate_log(tiny_config(n_chunks=1), seed=0)
      >>> t.num_rows > 0, float(t["oracle_ctr"].to_numpy().mean()) < 0.5
      (True, True)
    """
    cfg = tiny_config() if config is None else config
    if not isinstance(cfg, SimulatorConfig):
        raise ValueError(f"`config` must be a SimulatorConfig (tiny_config(), default_config(), ...), got "
                         f"{type(cfg).__name__}")
    key = key_of_seed(seed, "seed")  # all 64 bits (jax.random.key(seed) keeps 32 without x64)
    table = log_table(simulate(cfg, key, exposure=exposure))
    if path is not None:
        write_log(table, path)
    return table
