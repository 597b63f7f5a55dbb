"""Typed options of the ``calib-jax`` subcommands: what each command reads from its command line.

The parser of each subcommand (:mod:`calib_jax.cli.commands`) turns its argparse namespace into
one of these frozen dataclasses at the edge (:func:`options_from`); the code below the parser
(the engines, :mod:`~calib_jax.logs.comparison`, :mod:`~calib_jax.logs.slicing`) reads typed,
immutable fields and never the namespace. The field names are the long options with dashes as
underscores, so ``--hist-bins 512`` is ``hist_bins=512``.

Example:
  >>> import argparse
  >>> ns = argparse.Namespace(params="p.json", log="in.csv", out="out.csv", column="calibrated",
  ...                         format="auto", chunk_rows=1024, quiet=True, command="apply")
  >>> options_from(ApplyOptions, ns).chunk_rows
  1024
"""

from __future__ import annotations

import argparse
import dataclasses
import numbers
from typing import Any, TypeVar

__all__ = ["ColumnOptions", "SparkOptions", "EvaluateOptions", "CompareOptions", "FitOptions", "ApplyOptions",
           "SimulateOptions", "SqlOptions", "MergeOptions", "options_from", "check_seed_option", "plain_numbers",
           "check_chunk_rows", "check_engine_settings"]

T = TypeVar("T")


def options_from(cls: type[T], ns: argparse.Namespace) -> T:
    """The options ``cls`` (a dataclass of this module) of a parsed command line: every field
    taken from the namespace attribute of the same name; lists (repeatable options) become
    tuples so the options stay immutable.

    Args:
      cls: the options class of the subcommand.
      ns: what ``argparse`` parsed; attributes that ``cls`` does not name are ignored.

    Returns:
      An instance of ``cls``.
    """
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        v = getattr(ns, f.name)
        values[f.name] = tuple(v) if isinstance(v, list) else v
    return cls(**values)


#: the bounds of ``--hist-bins`` (the fine logit grid) and ``--max-levels`` in every command that
#: takes them (``evaluate`` checks only the lower end of ``--max-levels``: it keeps the levels a
#: log holds up to that cap)
HIST_BINS_RANGE = (16, 1 << 16)
MAX_LEVELS_RANGE = (1, 10_000_000)
#: the most ``--bins`` (ECE and MCE bins; ``compare`` keeps its own [2, 1000]) and ``--bootstrap``
#: replicates any command takes: ``--bins 2**31`` asked for 896 TiB and ``--bootstrap 10**7`` for
#: 6.7 GiB before a row was read; the fine grid has at most 2^16 bins, and percentile intervals
#: settle long before 10^5 replicates
BINS_MAX = 1 << 16
BOOTSTRAP_MAX = 100_000


def check_chunk_rows(value: Any) -> None:
    """Refuse a ``--chunk-rows`` that is not an int >= 1 (``compare``, ``fit`` and ``apply``
    passed 0 to pyarrow, whose refusal named no option, and a cells fit ignored -3).

    Args:
      value: the parsed ``--chunk-rows``.

    Returns:
      None: it only raises.

    Raises:
      ValueError: ``--chunk-rows must be >= 1, got <value>`` (``evaluate``'s words).

    Example:
      >>> check_chunk_rows(1024)
      >>> check_chunk_rows(0)
      Traceback (most recent call last):
      ValueError: --chunk-rows must be >= 1, got 0
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"--chunk-rows must be >= 1, got {value!r}")


def check_engine_settings(opts: SparkOptions, engine: str) -> None:
    """Refuse a setting the run's engine does not read: ``--spark-master`` and ``--spark-conf``
    on any engine but Spark (the run would read the log in-process while the user believes a
    cluster did), and ``--hive-partitioning`` where one file is read (the arrow engine, the
    rows of ``fit`` without ``--engine``, ``--aggregates``), whose folders it never sees.

    Args:
      opts: the command's options (any :class:`SparkOptions`).
      engine: the engine the run uses: ``"duckdb"``, ``"spark"``, ``"arrow"``, ``"rows"``
        (``fit`` in memory) or ``"aggregates"``.

    Returns:
      None: it only raises.

    Raises:
      ValueError: naming the setting and the engine.

    Example:
      >>> check_engine_settings(SparkOptions(spark_master="local[2]"), "spark")
      >>> check_engine_settings(SparkOptions(spark_conf=("spark.sql.shuffle.partitions=8",)), "duckdb")
      Traceback (most recent call last):
      ValueError: --spark-conf is a setting of --engine spark; this run reads the log with --engine duckdb: ...
    """
    how = {"rows": "the rows of one file into memory (fit without --engine)", "arrow": "one file with --engine arrow",
           "aggregates": "an --aggregates file, with no engine"}.get(engine, f"the log with --engine {engine}")
    if engine != "spark":
        for flag, given in (("--spark-master", opts.spark_master is not None), ("--spark-conf", bool(opts.spark_conf))):
            if given:
                raise ValueError(f"{flag} is a setting of --engine spark; this run reads {how}: pass --engine spark, "
                                 f"or leave {flag} out")
    if opts.hive_partitioning and engine not in ("duckdb", "spark"):
        raise ValueError(f"--hive-partitioning reads the key=value folders of a folder or pattern (--engine duckdb or "
                         f"spark); this run reads {how}: leave --hive-partitioning out")


def check_option_range(flag: str, value: int, bounds: tuple[int, int]) -> None:
    """Refuse ``value`` of the option ``flag`` outside the closed range ``bounds``.

    Args:
      flag: the option as typed (``--hist-bins``); the library's names replace it in the
        messages of :mod:`calib_jax.logs`.
      value: its parsed value.
      bounds: ``(lo, hi)``, both allowed.

    Returns:
      None: it only raises.

    Raises:
      ValueError: ``<flag> must lie in [lo, hi], got <value>``.

    Example:
      >>> check_option_range("--hist-bins", 4096, HIST_BINS_RANGE)
      >>> check_option_range("--hist-bins", 8, HIST_BINS_RANGE)
      Traceback (most recent call last):
      ...
      ValueError: --hist-bins must lie in [16, 65536], got 8
    """
    lo, hi = bounds
    if not lo <= value <= hi:
        raise ValueError(f"{flag} must lie in [{lo}, {hi}], got {value}")


def plain_numbers(options: Any) -> None:
    """Replace, in the frozen ``options``, every NumPy integer or float by the Python number it
    holds: the library passes its callers' values through, and ``bins=np.int64(15)`` was
    accepted and then failed in the JSON writer of the report (``int64 is not JSON serializable``).

    Args:
      options: an instance of one of this module's dataclasses.

    Returns:
      None: the instance is changed in place (``object.__setattr__``, as frozen dataclasses allow
      in ``__post_init__``).

    Example:
      >>> import numpy as np
      >>> opts = CompareOptions(log="in.parquet", score=("a", "b"), bins=np.int64(20), negative_rate=np.float32(0.5))
      >>> type(opts.bins).__name__, type(opts.negative_rate).__name__
      ('int', 'float')
    """
    for f in dataclasses.fields(options):
        v = getattr(options, f.name)
        if isinstance(v, bool) or type(v) in (int, float):
            continue
        if isinstance(v, numbers.Integral):
            object.__setattr__(options, f.name, int(v))
        elif isinstance(v, numbers.Real) and type(v).__name__ != "bool_":
            object.__setattr__(options, f.name, float(v))


def check_seed_option(seed: Any) -> None:
    """Refuse a ``--seed`` outside [-2^63, 2^64 - 1] (:func:`calib_jax._src.seeds.check_seed`):
    every seeded command (``evaluate``, ``compare``, ``fit``, ``simulate``) takes the same
    64-bit seeds, uses all of their bits, and never reduces one silently (``jax.random.key``
    alone would read ``--seed 4294967296`` as ``--seed 0``).

    Args:
      seed: the parsed ``--seed``.

    Returns:
      None: it only raises.

    Raises:
      ValueError: naming ``--seed``, its value and the range.

    Example:
      >>> check_seed_option(-1)
      >>> check_seed_option(2**64)
      Traceback (most recent call last):
      ...
      ValueError: --seed 18446744073709551616: outside [-2^63, 2^64 - 1], the 64-bit seeds (a negative one is ...
    """
    from calib_jax._src.seeds import check_seed

    try:
        check_seed(seed, "--seed")
    except ValueError:
        raise ValueError(f"--seed {seed}: outside [-2^63, 2^64 - 1], the 64-bit seeds (a negative one is its two's "
                         "complement); seeds are never reduced, pick one in the range") from None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ColumnOptions:
    """The options of ``calib_jax.cli.commands.arguments.add_column_arguments``: a log's columns
    and how its rows are read (``evaluate``, ``fit``)."""

    score: str | None = None
    logit: str | None = None
    label: str | None = None
    weight: str | None = None
    negative_rate: float | None = None
    negative_rate_column: str | None = None
    field: tuple[str, ...] = ()
    format: str = "auto"
    chunk_rows: int = 262_144
    drop_invalid: bool = False
    quiet: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class SparkOptions:
    """The options of ``calib_jax.cli.commands.arguments.add_spark_arguments``."""

    spark_master: str | None = None
    spark_conf: tuple[str, ...] = ()
    hive_partitioning: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvaluateOptions(ColumnOptions, SparkOptions):
    """``calib-jax evaluate``: the log (or ``aggregates``), its columns, the engine, the report's
    settings, ``--by`` slices and the streamed reader's resume and part options."""

    log: str | None
    engine: str | None = None
    aggregates: str | None = None
    oracle: str | None = None
    user: str | None = None
    gauc_weight: str = "impressions"
    by: str | None = None
    every: str | None = None
    baseline: str | None = None
    alpha: float = 0.05
    out: str = "calib-jax-report"
    bootstrap: int = 100
    bootstrap_block: int = 1
    bootstrap_scheme: str | None = None
    seed: int = 0
    bins: int = 15
    hist_bins: int = 4096
    max_levels: int = 1000
    resume: bool = False
    state_only: bool = False
    row_offset: int = 0
    stop_after_chunks: int | None = None

    def __post_init__(self) -> None:
        plain_numbers(self)
        check_seed_option(self.seed)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CompareOptions(SparkOptions):
    """``calib-jax compare``: one log, two or more models' columns (probabilities in ``score`` or
    logits in ``logit``, one kind for all), the engine and the bootstrap; with ``user`` the paired
    GAUC difference (users weighted by ``gauc_weight``), with ``oracle`` the oracle metrics, with
    ``field`` each field's paired per-field metrics (``max_levels`` levels kept per field)."""

    log: str
    score: tuple[str, ...] = ()
    logit: tuple[str, ...] = ()
    label: str = "label"
    weight: str | None = None
    negative_rate: float | None = None
    negative_rate_column: str | None = None
    user: str | None = None
    gauc_weight: str = "impressions"
    oracle: str | None = None
    field: tuple[str, ...] = ()
    max_levels: int = 1000
    format: str = "auto"
    engine: str = "duckdb"
    out: str = "calib-jax-compare"
    bootstrap: int = 200
    seed: int = 0
    bins: int = 15
    hist_bins: int = 4096
    chunk_rows: int = 262_144
    drop_invalid: bool = False
    quiet: bool = False

    def __post_init__(self) -> None:
        plain_numbers(self)
        check_seed_option(self.seed)
        check_chunk_rows(self.chunk_rows)

    @property
    def models(self) -> tuple[str, ...]:
        """The models' columns, in order (``score`` or ``logit``)."""
        return self.score or self.logit


@dataclasses.dataclass(frozen=True, kw_only=True)
class FitOptions(ColumnOptions, SparkOptions):
    """``calib-jax fit``: the log, its columns, the calibrator and where its parameters go; with
    ``engine`` the fit reads the log's cells instead of its rows."""

    log: str
    method: str
    save: str
    feature: tuple[str, ...] = ()
    max_levels: int = 50
    seed: int = 0
    partitions: int | None = None
    steps: int | None = None
    engine: str | None = None
    hist_bins: int = 4096

    def __post_init__(self) -> None:
        plain_numbers(self)
        check_seed_option(self.seed)
        check_chunk_rows(self.chunk_rows)
        from calib_jax._src.validation import INT32_MAX

        for flag, value in (("--partitions", self.partitions), ("--steps", self.steps)):
            if value is not None and not 1 <= value <= INT32_MAX:
                raise ValueError(f"{flag} must lie in [1, 2**31 - 1], got {value}")
        check_option_range("--max-levels", self.max_levels, MAX_LEVELS_RANGE)
        check_option_range("--hist-bins", self.hist_bins, HIST_BINS_RANGE)


@dataclasses.dataclass(frozen=True)
class ApplyOptions:
    """``calib-jax apply``: a parameter file, the log it applies to and the output log."""

    params: str
    log: str
    out: str
    column: str = "calibrated"
    format: str = "auto"
    chunk_rows: int = 262_144
    quiet: bool = False

    def __post_init__(self) -> None:
        plain_numbers(self)
        check_chunk_rows(self.chunk_rows)
        if not isinstance(self.column, str) or not self.column.strip():
            # an empty name wrote a CSV header field "" and a Parquet column that no --score can name
            raise ValueError(f"--column must name the output's new column, got {self.column!r}")


@dataclasses.dataclass(frozen=True)
class SimulateOptions:
    """``calib-jax simulate``: the output log, the simulator's scale, seed and exposure."""

    out: str
    scale: str = "tiny"
    seed: int = 0
    exposure: str = "auction"

    def __post_init__(self) -> None:
        plain_numbers(self)
        check_seed_option(self.seed)


@dataclasses.dataclass(frozen=True)
class SqlOptions:
    """``calib-jax sql``: the dialect, the FROM item, the columns and the query's settings."""

    table: str
    label: str
    dialect: str = "duckdb"
    score: str | None = None
    logit: str | None = None
    weight: str | None = None
    negative_rate: float | None = None
    negative_rate_column: str | None = None
    field: tuple[str, ...] = ()
    oracle: str | None = None
    user: str | None = None
    bins: int = 15
    hist_bins: int = 4096
    max_levels: int = 1000
    out: str | None = None

    def __post_init__(self) -> None:
        plain_numbers(self)
        if not isinstance(self.table, str) or not self.table.strip():
            # an empty FROM item printed a query that no engine parses
            raise ValueError(f"--table must name the FROM item (a table or a table function), got {self.table!r}")


@dataclasses.dataclass(frozen=True)
class MergeOptions:
    """``calib-jax merge``: the state files (or folders) of ``evaluate --state-only`` runs."""

    states: tuple[str, ...]
    out: str = "calib-jax-report"
