"""MovieLens-100K from where the user installed it (:mod:`calib_jax.data.movielens`).

Checked against the published size of the data set (100,000 ratings of 943 users on 1,682
movies), against pandas reading the same file, across its two formats, on malformed lines and
on the message when no source holds it; and no MovieLens file is in the repository.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from calib_jax.data import movielens

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def no_sources(monkeypatch):
    """No environment variable and no installed recbole: only the ``path`` argument is left."""
    monkeypatch.delenv(movielens.ENV_VAR, raising=False)
    monkeypatch.setattr(movielens, "_recbole_file", lambda: None)


def test_the_installed_copy_is_movielens_100k_as_pandas_reads_it():
    if movielens._recbole_file() is None:
        pytest.skip("recbole is not installed (make installs it with --no-deps)")
    pd = pytest.importorskip("pandas")
    r = movielens.load()
    assert "recbole" not in sys.modules  # found on disk, never imported
    assert (len(r.rating), r.n_users, r.n_items) == (100_000, 943, 1_682)
    ref = pd.read_csv(r.source, sep="\t")
    ref.columns = ["user", "item", "rating", "timestamp"]
    np.testing.assert_array_equal(r.rating, ref["rating"].to_numpy(np.float32))
    np.testing.assert_array_equal(r.timestamp, ref["timestamp"].to_numpy(np.int64))
    np.testing.assert_array_equal(np.asarray(r.user_ids, dtype=np.int64)[r.user], ref["user"].to_numpy())
    np.testing.assert_array_equal(np.asarray(r.item_ids, dtype=np.int64)[r.item], ref["item"].to_numpy())
    assert r.user_ids[0] == "1" and r.item_ids[-1] == "1682"  # indices follow the ids' numeric order
    # the rating distribution of ML-100K: every value 1..5, mean 3.52986
    assert np.unique(r.rating).tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert float(np.mean(r.rating, dtype=np.float64)) == pytest.approx(3.52986, abs=1e-5)


def test_both_formats_and_a_folder_give_the_same_ratings(tmp_path, no_sources, monkeypatch):
    rows = [("196", "242", "3", "881250949"), ("186", "302", "3", "891717742"), ("22", "377", "1", "878887116"),
            ("196", "377", "4.5", "881250950")]
    (tmp_path / "grouplens").mkdir()
    (tmp_path / "grouplens" / "u.data").write_text("".join("\t".join(r) + "\n" for r in rows))
    (tmp_path / "recbole").mkdir()
    (tmp_path / "recbole" / "ml-100k.inter").write_text(
        "user_id:token\titem_id:token\trating:float\ttimestamp:float\n" + "".join("\t".join(r) + "\n" for r in rows))
    a = movielens.load(tmp_path / "grouplens")
    b = movielens.load(tmp_path / "recbole" / "ml-100k.inter")
    monkeypatch.setenv(movielens.ENV_VAR, str(tmp_path / "recbole"))
    c = movielens.load()
    for x in (b, c):
        for k in ("user", "item", "rating", "timestamp"):
            np.testing.assert_array_equal(getattr(a, k), getattr(x, k))
        assert (x.user_ids, x.item_ids) == (a.user_ids, a.item_ids) == (("22", "186", "196"), ("242", "302", "377"))
    assert a.user.tolist() == [2, 1, 0, 2] and a.rating.tolist() == [3.0, 3.0, 1.0, 4.5]


def test_without_a_source_one_line_names_every_source(no_sources, tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        movielens.load()
    msg = str(e.value)
    assert "\n" not in msg and movielens.ENV_VAR in msg and "path=" in msg and "recbole" in msg
    with pytest.raises(FileNotFoundError, match="looked for ml-100k.inter and u.data"):
        movielens.load(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such"):
        movielens.load(tmp_path / "missing.inter")
    # the command line a user types: one line, no traceback beyond the error's own
    run = subprocess.run([sys.executable, "-c", "import calib_jax.data.movielens as m; m._recbole_file = lambda: None;"
                          " m.load()"], capture_output=True, text=True, cwd=ROOT,
                         env={"PATH": "", "PYTHONPATH": str(ROOT)})
    assert run.returncode != 0 and run.stderr.strip().splitlines()[-1].startswith("FileNotFoundError: MovieLens-100K")


@pytest.mark.parametrize("line, problem", [
    ("1\t2\t3", "3 tab-separated fields"),
    ("1\t\t3\t881250949", "empty user or item id"),
    ("1\t2\tfour\t881250949", "rating 'four' is not a number"),
    ("1\t2\t7\t881250949", "rating '7' is outside [1, 5]"),
    ("1\t2\t0.5\t881250949", "outside [1, 5]"),
    ("1\t2\tnan\t881250949", "outside [1, 5]"),
    ("1\t2\t3\tlater", "timestamp 'later' is not a number"),
    ("1\t2\t3\t8812.5", "not a whole number"),
])
def test_a_malformed_line_is_named(tmp_path, no_sources, line, problem):
    f = tmp_path / "u.data"
    f.write_text("196\t242\t3\t881250949\n" + line + "\n")
    with pytest.raises(ValueError, match="line 2") as e:
        movielens.load(f)
    assert problem in str(e.value) and str(f) in str(e.value)


def test_a_wrong_header_and_an_empty_file_are_refused(tmp_path, no_sources):
    f = tmp_path / "ml-100k.inter"
    f.write_text("user_id:token\trating:float\titem_id:token\ttimestamp:float\n1\t2\t3\t4\n")
    with pytest.raises(ValueError, match="line 1: header"):
        movielens.load(f)
    f.write_text("\n")
    with pytest.raises(ValueError, match="no ratings"):
        movielens.load(f)


def test_the_paper_split_is_60_20_20_disjoint_and_seeded():
    import jax

    a = movielens.paper_split(jax.random.key(3), 1_000)
    b = movielens.paper_split(jax.random.key(3), 1_000)
    c = movielens.paper_split(jax.random.key(4), 1_000)
    assert [len(x) for x in a] == [600, 200, 200]
    assert np.array_equal(np.sort(np.concatenate(a)), np.arange(1_000))
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[2], c[2])


def test_no_movielens_file_is_in_the_repository():
    tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True, cwd=ROOT).stdout.splitlines()
    bad = [f for f in tracked if Path(f).name in ("u.data", "ml-100k.inter", "ratings.dat")
           or Path(f).suffix == ".inter"]
    assert not bad, bad
