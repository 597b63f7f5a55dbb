"""The streamed reader's plumbing: the read-ahead thread, the throttled checkpoint, the field
codes made off the main thread and the accumulator's column sums, each against the plain
sequential computation it replaces."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from calib_jax import io as cio
from calib_jax.cli.commands import main
from calib_jax.logs import accumulate as A
from calib_jax.logs import evaluation as E
from calib_jax.logs import loaders


def _reader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "calib-jax-read-ahead"]


def test_read_ahead_keeps_the_order_and_ends_its_thread():
    assert list(loaders.read_ahead(iter(range(100)), depth=3)) == list(range(100))
    assert not _reader_threads()


def test_read_ahead_raises_the_producers_error_at_its_item():
    def items():
        yield 1
        yield 2
        raise ValueError("log.parquet: cannot be read: page 3")

    got = []
    with pytest.raises(ValueError, match="page 3"):
        for x in loaders.read_ahead(items()):
            got.append(x)
    assert got == [1, 2] and not _reader_threads()


def test_read_ahead_closed_early_stops_its_producer():
    produced = []

    def items():
        for i in range(10_000):
            produced.append(i)
            yield i

    gen = loaders.read_ahead(items(), depth=2)
    assert next(gen) == 0
    time.sleep(0.2)  # the producer fills its queue and waits
    gen.close()
    assert not _reader_threads()
    assert len(produced) <= 5  # one consumed, two queued, one handed over late, one being made


def test_read_ahead_refuses_a_bad_depth():
    with pytest.raises(ValueError, match="depth"):
        next(loaders.read_ahead(iter([1]), depth=0))


@pytest.mark.parametrize("null", [False, True])
def test_encode_of_the_dictionary_made_elsewhere_equals_encode_of_the_strings(null):
    rng = np.random.default_rng(0)
    values = [f"s{int(i)}" for i in rng.integers(0, 40, 3_000)]
    if null:
        values[5] = values[700] = None
    chunks = [pa.array(values[i:i + 1000]) for i in range(0, 3000, 1000)]
    s = A.Settings(fields=("site",), max_levels=30)  # overflow: the later levels become OTHER
    direct, pre = A.Accumulator(s), A.Accumulator(s)
    for arr in chunks:
        np.testing.assert_array_equal(direct.encode("site", arr), pre.encode("site", A.dictionary_encoded(arr)))
    assert direct.vocab == pre.vocab and (A.MISSING in direct.vocab["site"]) == null


def test_column_sums_of_a_chunk_equal_their_references():
    rng = np.random.default_rng(1)
    n = 10_000
    cols = [rng.standard_normal(n) * 10.0 ** rng.uniform(-4, 4, n) for _ in range(3)]
    scale = rng.uniform(0, 2, n)
    # one replicate: NumPy's pairwise sums; several: the sparse product of the replicate weights
    np.testing.assert_array_equal(A._sums(scale[None, :], cols)[0], [np.sum(scale * c) for c in cols])
    reps = np.stack([scale, 2.0 * scale])
    np.testing.assert_allclose(A._sums(reps, cols), [[float(np.sum(r * c)) for c in cols] for r in reps],
                               rtol=1e-12)
    idx = rng.integers(0, 7, n)
    many = A._bincount_cols(idx, np.stack(cols, axis=1), 7, scale=scale)
    for j, c in enumerate(cols):
        np.testing.assert_array_equal(many[:, j], np.bincount(idx, weights=scale * c, minlength=7))


def _parquet_log(path: Path, n: int = 12_000) -> Path:
    rng = np.random.default_rng(2)
    p = rng.uniform(0.02, 0.6, n)
    p[[10, 4_000]] = np.nan  # two invalid rows, dropped
    pq.write_table(pa.table({"p": p, "y": (rng.uniform(size=n) < np.nan_to_num(p)).astype(np.int8),
                             "site": pa.array([f"s{int(i)}" for i in rng.integers(0, 9, n)])}), path)
    return path


def test_the_checkpoint_is_throttled_and_a_resumed_run_gives_the_same_report(tmp_path, monkeypatch):
    log = _parquet_log(tmp_path / "log.parquet")
    args = ["evaluate", str(log), "--score", "p", "--label", "y", "--field", "site", "--engine", "arrow",
            "--chunk-rows", "1000", "--bootstrap", "8", "--drop-invalid", "--quiet"]
    writes = []
    real = cio.atomic_write_bytes

    def counting(path, data, *a, **k):
        if Path(path).name == ".checkpoint.npz":
            writes.append(Path(path))
        return real(path, data, *a, **k)

    monkeypatch.setattr(cio, "atomic_write_bytes", counting)
    monkeypatch.setattr(E, "CHECKPOINT_EVERY_S", float("inf"))
    cut = tmp_path / "cut"
    assert main([*args, "--out", str(cut), "--stop-after-chunks", "7"]) == 3
    assert len(writes) == 2  # after the first chunk, and at the chunk it stopped at (not after each of 7)
    assert main([*args, "--out", str(cut), "--resume"]) == 0
    assert main([*args, "--out", str(tmp_path / "whole")]) == 0

    def metrics(out: Path) -> list:
        rep = json.loads((out / "report.json").read_text())
        return [rep["metrics"], rep["fields"], rep["decompositions"]]

    assert metrics(cut) == metrics(tmp_path / "whole")
    monkeypatch.setattr(E, "CHECKPOINT_EVERY_S", 0.0)  # every chunk, as before the throttle
    writes.clear()
    assert main([*args, "--out", str(tmp_path / "every")]) == 0
    assert len(writes) == 12 and metrics(tmp_path / "every") == metrics(tmp_path / "whole")
