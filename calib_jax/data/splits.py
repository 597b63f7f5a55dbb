"""The evaluation splits of seeds/000 (Appendix I.1, Table 7 paragraph).

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
    """A NumPy generator seeded from a JAX PRNG key (or an int seed) and stream ids."""
    if isinstance(key, int | np.integer) and not isinstance(key, bool):
        bits = [int(key) & 0xFFFFFFFF, (int(key) >> 32) & 0xFFFFFFFF]
    elif isinstance(key, jax.Array):
        data = jax.random.key_data(key) if jax.dtypes.issubdtype(
            key.dtype, jax.dtypes.prng_key) else key
        bits = np.asarray(data).astype(np.uint32).ravel().tolist()
    else:
        raise ValueError(f"`key` must be a JAX PRNG key or an int seed, got {type(key).__name__}")
    return np.random.default_rng([*bits, *[int(s) for s in streams]])


def _check_n(n: Any, name: str = "n") -> int:
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 2:
        raise ValueError(f"`{name}` must be an int >= 2, got {n!r}")
    return int(n)


def _check_frac(frac: float, name: str, *, allow_zero: bool = False) -> float:
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
    """
    n = _check_n(n)
    m = _n_take(n, _check_frac(test_frac, "test_frac"), "test_frac")
    if chronological:
        return np.arange(n - m, dtype=np.int64)[:], np.arange(n - m, n, dtype=np.int64)
    perm = numpy_rng(key, 0).permutation(n)
    return np.sort(perm[m:]).astype(np.int64), np.sort(perm[:m]).astype(np.int64)


def subsplit(key: Any, idx: np.ndarray, *, frac: float, stream: int = 1
             ) -> tuple[np.ndarray, np.ndarray]:
    """Randomly move ``round(frac * len(idx))`` of ``idx`` into a second part.

    Returns ``(rest, part)``, both sorted.  Used for D_val (10% of train) and D_ho (10% of
    test).
    """
    idx = np.asarray(idx, dtype=np.int64)
    n = _check_n(idx.shape[0], "idx length")
    m = _n_take(n, _check_frac(frac, "frac"), "frac")
    perm = numpy_rng(key, stream).permutation(n)
    return np.sort(idx[perm[m:]]), np.sort(idx[perm[:m]])


class Splits(NamedTuple):
    """Row indices of the paper's parts: ``train`` excludes ``val``; ``test`` excludes
    ``holdout``."""

    train: np.ndarray
    val: np.ndarray
    holdout: np.ndarray
    test: np.ndarray


def paper_splits(key: Any, n: int, *, test_frac: float = 0.2, val_frac: float = 0.1,
                 ho_frac: float = 0.1, chronological: bool = True) -> Splits:
    """The split of seeds/000 Appendix I.1: train / D_val (10% of train) / D_ho (10% of
    test) / test.

    Example:
      >>> from calib_jax.data.splits import paper_splits
      >>> s = paper_splits(jax.random.key(0), 1000)
      >>> [len(p) for p in s]
      [720, 80, 20, 180]
    """
    train, test = train_test_split(key, n, test_frac=test_frac, chronological=chronological)
    train, val = subsplit(key, train, frac=val_frac, stream=1)
    test, holdout = subsplit(key, test, frac=ho_frac, stream=2)
    return Splits(train=train, val=val, holdout=holdout, test=test)


class TestSplits(NamedTuple):
    """``holdout`` (n_splits, m) and ``evaluation`` (n_splits, n - m) positions per split."""

    holdout: np.ndarray
    evaluation: np.ndarray


def random_test_splits(key: Any, n: int, *, n_splits: int = 100,
                       holdout_frac: float = 0.1) -> TestSplits:
    """The 100 random test splits of seeds/000 (Appendix I.1).

    Split ``s`` draws a random permutation of ``range(n)`` (a test set of ``n`` rows) from
    ``(key, s)`` and puts ``round(holdout_frac * n)`` positions into the hold-out part,
    the rest into the evaluation part.  With ``holdout_frac=0`` the hold-out is empty and
    each evaluation part is a bootstrap resample of size ``n`` (with replacement).
    Rows are equal-size across splits, so a metric can be vmapped over the split axis.
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
