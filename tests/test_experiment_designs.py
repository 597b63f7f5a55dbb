"""The repeated-fit designs of the Fig 2 / Fig 7 studies: independent fitting sets and per-fold
within-group variances, against plain NumPy."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from experiments import _datasets
from experiments.grouping import fold_variances


class _Split(SimpleNamespace):
    def __len__(self) -> int:
        return len(self.labels)


def _split(n: int, start: float) -> _Split:
    """A stand-in for a backbone split: row ``i`` has logit ``start + i``."""
    logits = (start + np.arange(n)).astype(np.float32)
    return _Split(logits=logits, labels=(np.arange(n) % 2).astype(np.float32), embedding=np.stack([logits, -logits], 1))


def test_fitting_sets_are_the_logs_dval_then_disjoint_fresh_slices(monkeypatch):
    calls = []

    def fresh(name, *, seed, n_rows, sim):
        calls.append((name, seed, n_rows, sim))
        return _split(n_rows, 10_000.0)

    monkeypatch.setattr(_datasets, "fresh_test_rows", fresh)
    out = SimpleNamespace(val=_split(50, 0.0))
    sets, n = _datasets.fitting_sets("simulator", out, seed=3, n_sets=4, max_rows=20, sim="tiny")
    assert n == 20 and len(sets) == 4 and calls == [("simulator", 3, 60, "tiny")]
    idx = np.sort(np.random.default_rng(3).choice(50, 20, replace=False))
    np.testing.assert_array_equal(sets[0][0], out.val.logits[idx])  # the log's D_val, subsampled
    np.testing.assert_array_equal(sets[0][2], out.val.embedding[idx])
    seen: set[float] = set()
    for h, (o, y, z) in enumerate(sets[1:]):
        np.testing.assert_array_equal(o, 10_000.0 + np.arange(h * 20, (h + 1) * 20))  # its own slice
        assert o.shape == y.shape == (20,) and z.shape == (20, 2)
        assert not seen & set(o.tolist())
        seen |= set(o.tolist())
    # the whole D_val when it is smaller than max_rows (or max_rows is None); one set needs no fresh rows
    calls.clear()
    sets, n = _datasets.fitting_sets("simulator", out, seed=0, n_sets=1, max_rows=None)
    assert n == 50 and len(sets) == 1 and not calls
    np.testing.assert_array_equal(sets[0][0], out.val.logits)


def test_fitting_sets_needs_a_simulated_world():
    out = SimpleNamespace(val=_split(10, 0.0))
    with pytest.raises(ValueError, match="name"):
        _datasets.fitting_sets("open_bandit", out, seed=0, n_sets=2, max_rows=None)


def test_fold_variances_match_numpy():
    rng = np.random.default_rng(0)
    n, P, K, S = 600, 3, 4, 5
    v = rng.uniform(0.0, 0.1, n)
    q = rng.dirichlet(np.ones(K), size=(P, n))
    q[1] = np.eye(K)[q[1].argmax(1)]  # one hard partition
    fold = rng.permutation(n) % S
    folds = (fold[None, :] == np.arange(S)[:, None]).astype(float)
    got = fold_variances(v, q, folds)
    assert got.shape == (P, S)
    for p in range(P):
        for s in range(S):
            rows = fold == s
            w = q[p][rows]                        # (n_s, K)
            mass = w.sum(0)
            mu = (w * v[rows, None]).sum(0) / mass
            want = (w * (v[rows, None] - mu) ** 2).sum() / rows.sum()
            assert got[p, s] == pytest.approx(want, rel=2e-5)
