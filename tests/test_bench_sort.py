"""``benchmarks/bench_sort.py`` at a toy size: its page times the three ways on the same arrays,
each way's ratio is its time over jnp.argsort's, and a way that sorted otherwise would stop it."""

from __future__ import annotations

import csv

import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks import bench_sort


def test_the_page_times_every_way_on_the_same_rows(tmp_path):
    out = tmp_path / "sort"
    bench_sort.main(["--sizes", "3000", "20000", "--repeats", "2", "--out", str(out)])
    with out.with_suffix(".csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["rows"]) for r in rows] == [3000] * 3 + [20000] * 3
    for r in rows:
        assert float(r["ms"]) > 0
        base = next(float(b["ms"]) for b in rows if b["rows"] == r["rows"] and b["way"].startswith("jnp.argsort"))
        assert float(r["over_jnp_argsort"]) == pytest.approx(float(r["ms"]) / base)
    assert "the same permutation from every way (checked)" in out.with_suffix(".md").read_text()


def test_the_scores_hold_ties_and_a_different_order_is_refused(monkeypatch):
    p = bench_sort.scores(5000)
    assert p.dtype == np.float32 and np.unique(p).size < p.size  # ties, as logged scores have
    from calib_jax._src import sorting

    monkeypatch.setattr(sorting, "packed_argsort", lambda v: jnp.argsort(-v).astype(jnp.int32))
    with pytest.raises(AssertionError, match="another permutation"):
        bench_sort.measure([500], 1)
