"""The evaluation splits of "Calibration is Grouping" (VR-SAG; anonymous authors, under
review), Appendix I.1 and the paragraph of Table 7.

* train / test: the "standard" split of a log (chronological by default, as logs are).
* D_val: 10% of the training rows, held out of backbone training, to fit calibrators.
* D_ho: 10% of the test rows, a hold-out used by protocols that refit a calibrator on
  test-distribution data (the SAG reference-code protocol).
* 100 random test splits: each re-draws the hold-out / evaluation partition of the test
  set; metrics are averaged over the splits and methods compared with paired t-tests.

Index work is done in NumPy (a permutation of millions of rows is ~20x faster than
XLA:CPU's sort), with a ``numpy.random.Generator`` seeded from the JAX key's bits, so
every split is deterministic per key, and split ``s`` of :func:`random_test_splits` only
depends on ``(key, s)``.  All functions return sorted ``int64`` index arrays.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "Splits",
    "TestSplits",
    "numpy_rng",
    "train_test_split",
    "subsplit",
    "paper_splits",
    "random_test_splits",
]


def numpy_rng(key: Any, *streams: int) -> np.random.Generator:
    """A NumPy generator seeded from a JAX PRNG key (or an int seed) and stream ids.

    The generator is ``numpy.random.default_rng`` seeded with the key's 32-bit words followed
    by the stream ids, so one key gives independent, reproducible streams for different
    purposes. Host code; not jit-able (the key must be concrete).

    Args:
      key: a JAX PRNG key (new-style ``jax.random.key`` or raw ``jax.random.PRNGKey``
        uint32 array) or a Python/NumPy int seed (its low 64 bits are used); anything else
        raises ``ValueError``.
      *streams: non-negative int stream ids.

    Returns:
      A ``numpy.random.Generator``.

    Example:
      >>> import jax
      >>> from calib_jax.data.splits import numpy_rng
      >>> a = numpy_rng(jax.random.key(0), 1).random(3)
      >>> b = numpy_rng(jax.random.key(0), 1).random(3)
      >>> c = numpy_rng(jax.random.key(0), 2).random(3)
      >>> bool((a == b).all()), bool((a == c).all())  # same key and stream: same draws
      (True, False)
    """
    if isinstance(key, int | np.integer) and not isinstance(key, bool):
        bits = [int(key) & 0xFFFFFFFF, (int(key) >> 32) & 0xFFFFFFFF]
    elif isinstance(key, jax.Array) and jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) and key.shape == ():
        bits = np.asarray(jax.random.key_data(key)).astype(np.uint32).ravel().tolist()
    elif isinstance(key, jax.Array) and key.dtype == jnp.uint32 and key.shape == (2,):  # a raw PRNGKey
        bits = np.asarray(key).ravel().tolist()
    else:
        # a float array's bits were truncated to integers (0.7 and 0.2 drew one stream)
        what = type(key).__name__ if not isinstance(key, jax.Array) else f"an array of {key.dtype} {key.shape}"
        raise ValueError(f"`key` must be a JAX PRNG key or an int seed, got {what}")
    for s in streams:
        if isinstance(s, bool) or not isinstance(s, int | np.integer) or s < 0:
            raise ValueError(f"stream ids must be ints >= 0, got {s!r}")
    return np.random.default_rng([*bits, *[int(s) for s in streams]])


def _check_n(n: Any, name: str = "n") -> int:
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 2:
        raise ValueError(f"`{name}` must be an int >= 2, got {n!r}")
    return int(n)


def _check_frac(frac: float, name: str, *, allow_zero: bool = False) -> float:
    if isinstance(frac, bool) or not isinstance(frac, int | float | np.integer | np.floating):
        # '0.2' failed comparing a str with a float, naming nothing
        raise ValueError(f"`{name}` must be a number in {'[0' if allow_zero else '(0'}, 1), got {frac!r}")
    lo_ok = frac >= 0.0 if allow_zero else frac > 0.0
    if not (lo_ok and frac < 1.0):
        raise ValueError(f"`{name}` must lie in {'[0' if allow_zero else '(0'}, 1), got {frac!r}")
    return float(frac)


def _n_take(n: int, frac: float, name: str) -> int:
    m = int(round(frac * n))
    if frac > 0.0 and not 1 <= m < n:
        raise ValueError(f"`{name}`={frac} leaves an empty part for n={n}")
    return m


def train_test_split(key: Any, n: int, *, test_frac: float = 0.2,
                     chronological: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Split ``range(n)`` into train and test indices.

    ``chronological=True`` keeps the last ``round(test_frac * n)`` rows (logs are in
    time order) and ignores ``key``; otherwise a random subset is the test set.
    NumPy on the host; not jit-able.

    Args:
      key: a JAX PRNG key or an int seed (see :func:`numpy_rng`; stream 0); unused when
        ``chronological``.
      n: number of rows, an int >= 2.
      test_frac: fraction of rows in the test set, in (0, 1); it must leave both parts
        non-empty, else ``ValueError``.
      chronological: take the last rows (default) or a random subset as the test set.

    Returns:
      ``(train, test)``: sorted int64 index arrays that partition ``range(n)``, the test set
      with ``round(test_frac * n)`` rows.

    Example:
      >>> import jax
      >>> from calib_jax.data.splits import train_test_split
      >>> train, test = train_test_split(jax.random.key(0), 10, test_frac=0.2)
      >>> train.tolist(), test.tolist()  # chronological: the last 2 rows are the test set
      ([0, 1, 2, 3, 4, 5, 6, 7], [8, 9])
      >>> train, test = train_test_split(jax.random.key(0), 10, test_frac=0.2, chronological=False)
      >>> len(train), len(test), sorted(train.tolist() + test.tolist()) == list(range(10))
      (8, 2, True)
    """
    n = _check_n(n)
    m = _n_take(n, _check_frac(test_frac, "test_frac"), "test_frac")
    if not isinstance(chronological, bool | np.bool_):  # "no" is a true string
        raise ValueError(f"`chronological` must be True or False, got {chronological!r}")
    if chronological:
        return np.arange(n - m, dtype=np.int64)[:], np.arange(n - m, n, dtype=np.int64)
    perm = numpy_rng(key, 0).permutation(n)
    return np.sort(perm[m:]).astype(np.int64), np.sort(perm[:m]).astype(np.int64)


def subsplit(key: Any, idx: np.ndarray, *, frac: float, stream: int = 1
             ) -> tuple[np.ndarray, np.ndarray]:
    """Randomly move ``round(frac * len(idx))`` of ``idx`` into a second part.

    Used for D_val (10% of train) and D_ho (10% of test).  NumPy on the host; not jit-able.

    Args:
      key: a JAX PRNG key or an int seed (see :func:`numpy_rng`).
      idx: (m,) row indices to split, m >= 2.
      frac: fraction moved to the second part, in (0, 1); it must leave both parts
        non-empty, else ``ValueError``.
      stream: the :func:`numpy_rng` stream id (different streams give independent draws
        from one key).

    Returns:
      ``(rest, part)``: sorted int64 arrays partitioning ``idx``, ``part`` with
      ``round(frac * m)`` entries.

    Example:
      >>> import jax, numpy as np
      >>> from calib_jax.data.splits import subsplit
      >>> rest, part = subsplit(jax.random.key(0), np.arange(100, 110), frac=0.3)
      >>> len(rest), len(part), sorted(rest.tolist() + part.tolist()) == list(range(100, 110))
      (7, 3, True)
    """
    return _subsplit(key, idx, frac, stream, "frac")


def _subsplit(key: Any, idx: Any, frac: float, stream: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`subsplit`, its messages naming the fraction ``name`` the caller was given."""
    held = np.asarray(idx)
    if held.ndim != 1 or held.dtype.kind not in "iuf":
        raise ValueError(f"`idx` must be a 1-D array of row indices, got {held.dtype} of shape {held.shape}")
    if held.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            if not (np.all(np.isfinite(held)) and np.all(held == np.round(held))):
                raise ValueError("`idx` must hold whole row indices (a NaN became -9223372036854775808, 0.7 became 0)")
    idx = held.astype(np.int64)
    n = _check_n(idx.shape[0], "idx length")
    m = _n_take(n, _check_frac(frac, name), name)
    perm = numpy_rng(key, stream).permutation(n)
    return np.sort(idx[perm[m:]]), np.sort(idx[perm[:m]])


class Splits(NamedTuple):
    """Row indices of the paper's parts: ``train`` excludes ``val``; ``test`` excludes
    ``holdout``.

    Returned by :func:`paper_splits`; the four parts partition ``range(n)``.

    Attributes:
      train: sorted int64 rows that train the backbone (the training set without D_val).
      val: sorted int64 rows of D_val, which fit the calibrators.
      holdout: sorted int64 rows of D_ho, a hold-out taken from the test set.
      test: sorted int64 rows of the evaluation set (the test set without D_ho).
    """

    train: np.ndarray
    val: np.ndarray
    holdout: np.ndarray
    test: np.ndarray


def paper_splits(key: Any, n: int, *, test_frac: float = 0.2, val_frac: float = 0.1,
                 ho_frac: float = 0.1, chronological: bool = True) -> Splits:
    """The split of "Calibration is Grouping" Appendix I.1: train / D_val (10% of train) /
    D_ho (10% of test) / test.

    :func:`train_test_split`, then :func:`subsplit` of the training rows (stream 1) and of
    the test rows (stream 2).  NumPy on the host; not jit-able.

    Args:
      key: a JAX PRNG key or an int seed (see :func:`numpy_rng`).
      n: number of rows in the log, an int >= 2.
      test_frac: fraction of all rows in the test set, in (0, 1).
      val_frac: fraction of the training rows moved to D_val, in (0, 1).
      ho_frac: fraction of the test rows moved to D_ho, in (0, 1).
      chronological: the test set is the last rows (default) or a random subset.

    Returns:
      :class:`Splits` ``(train, val, holdout, test)`` of sorted int64 indices partitioning
      ``range(n)``.  A fraction outside (0, 1), or one leaving a part empty, raises
      ``ValueError``.

    Example:
      >>> import jax
      >>> from calib_jax.data.splits import paper_splits
      >>> s = paper_splits(jax.random.key(0), 1000)
      >>> [len(p) for p in s]  # 800 train -> 720 + 80; 200 test -> 20 + 180
      [720, 80, 20, 180]
      >>> int(s.holdout.min()) >= 800  # chronological: D_ho and test are the last 200 rows
      True
    """
    train, test = train_test_split(key, n, test_frac=test_frac, chronological=chronological)
    train, val = _subsplit(key, train, val_frac, 1, "val_frac")
    test, holdout = _subsplit(key, test, ho_frac, 2, "ho_frac")
    return Splits(train=train, val=val, holdout=holdout, test=test)


class TestSplits(NamedTuple):
    """``holdout`` (n_splits, m) and ``evaluation`` (n_splits, n - m) positions per split.

    Returned by :func:`random_test_splits`; positions index the test set (``0..n-1``), not
    the log.

    Attributes:
      holdout: (n_splits, m) int64, row ``s`` the sorted hold-out positions of split ``s``
        (m = ``round(holdout_frac * n)``; zero columns when ``holdout_frac=0``).
      evaluation: (n_splits, n - m) int64, row ``s`` the sorted evaluation positions of
        split ``s`` (a bootstrap resample when ``holdout_frac=0``).
    """

    holdout: np.ndarray
    evaluation: np.ndarray


def random_test_splits(key: Any, n: int, *, n_splits: int = 100,
                       holdout_frac: float = 0.1) -> TestSplits:
    """The 100 random test splits of "Calibration is Grouping" (Appendix I.1).

    Split ``s`` draws a random permutation of ``range(n)`` (a test set of ``n`` rows) from
    ``(key, s)`` and puts ``round(holdout_frac * n)`` positions into the hold-out part,
    the rest into the evaluation part.  With ``holdout_frac=0`` the hold-out is empty and
    each evaluation part is a bootstrap resample of size ``n`` (with replacement).
    Rows are equal-size across splits, so a metric can be vmapped over the split axis.
    NumPy on the host; not jit-able.

    Args:
      key: a JAX PRNG key or an int seed (see :func:`numpy_rng`).
      n: number of test rows, an int >= 2.
      n_splits: number of splits, an int >= 1.
      holdout_frac: fraction of the rows in each hold-out part, in [0, 1); 0 gives bootstrap
        resamples instead.

    Returns:
      :class:`TestSplits` with ``holdout`` (n_splits, m) and ``evaluation``
      (n_splits, n - m) int64 arrays, ``m = round(holdout_frac * n)``.  An invalid argument
      raises ``ValueError``.

    Example:
      >>> import jax
      >>> from calib_jax.data.splits import random_test_splits
      >>> ts = random_test_splits(jax.random.key(0), 10, n_splits=3, holdout_frac=0.2)
      >>> ts.holdout.shape, ts.evaluation.shape
      ((3, 2), (3, 8))
      >>> boot = random_test_splits(jax.random.key(0), 10, n_splits=3, holdout_frac=0.0)
      >>> boot.holdout.shape, boot.evaluation.shape  # bootstrap: n draws with replacement
      ((3, 0), (3, 10))
    """
    n = _check_n(n)
    if isinstance(n_splits, bool) or not isinstance(n_splits, int) or n_splits < 1:
        raise ValueError(f"`n_splits` must be a positive int, got {n_splits!r}")
    frac = _check_frac(holdout_frac, "holdout_frac", allow_zero=True)
    m = _n_take(n, frac, "holdout_frac")
    ho = np.empty((n_splits, m), np.int64)
    ev = np.empty((n_splits, n - m), np.int64)
    for s in range(n_splits):
        rng = numpy_rng(key, 1000, s)
        if m == 0:
            ev[s] = np.sort(rng.integers(0, n, size=n))
        else:
            perm = rng.permutation(n)
            ho[s], ev[s] = np.sort(perm[:m]), np.sort(perm[m:])
    return TestSplits(holdout=ho, evaluation=ev)
