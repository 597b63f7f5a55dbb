"""Tests of calib_jax.data.open_bandit against the shipped files (read with csv directly)."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import numpy as np
import pytest

from calib_jax.data import open_bandit as obd

ROOT = obd.default_path()
pytestmark = pytest.mark.skipif(not ROOT.is_dir(), reason=f"Open Bandit sample not at {ROOT}")


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def men() -> obd.OpenBanditData:
    return obd.load_open_bandit(policy="random", campaign="men")


def test_reads_shipped_files_like_csv_dictreader(men):
    rows = _rows(ROOT / "random" / "men" / "men.csv")
    assert len(men) == len(rows)
    np.testing.assert_array_equal(men.item_id, [int(r["item_id"]) for r in rows])
    np.testing.assert_array_equal(men.position, [int(r["position"]) - 1 for r in rows])
    np.testing.assert_array_equal(men.click, [int(r["click"]) for r in rows])
    np.testing.assert_allclose(men.propensity, [float(r["propensity_score"]) for r in rows])
    for k in range(4):
        vocab = men.user_vocab[k]
        decoded = [vocab[c] for c in men.user_features[:, k]]
        assert decoded == [r[f"user_feature_{k}"] for r in rows]
    np.testing.assert_allclose(men.affinity[:, 3], [float(r["user-item_affinity_3"]) for r in rows],
                               rtol=1e-6)
    ctx = _rows(ROOT / "random" / "men" / "item_context.csv")
    assert men.n_items == len(ctx)
    by_id = {int(r["item_id"]): r for r in ctx}
    np.testing.assert_allclose(men.item_numeric,
                               [float(by_id[i]["item_feature_0"]) for i in range(men.n_items)])
    fields = men.fields()
    assert fields.shape == (len(men), len(obd.FIELD_NAMES))
    cards = men.cardinalities()
    assert all(fields[:, j].max() < cards[name] for j, name in enumerate(obd.FIELD_NAMES))


def test_all_policies_concatenate():
    both = obd.load_open_bandit(policy="all", campaign="women")
    n_random = len(_rows(ROOT / "random" / "women" / "women.csv"))
    assert len(both) == n_random + len(_rows(ROOT / "bts" / "women" / "women.csv"))
    assert np.all(both.policy[:n_random] == 0) and np.all(both.policy[n_random:] == 1)


def _copy_campaign(tmp_path: Path) -> Path:
    root = tmp_path / "obd"
    dst = root / "random" / "men"
    dst.mkdir(parents=True)
    for name in ("men.csv", "item_context.csv"):
        shutil.copy(ROOT / "random" / "men" / name, dst / name)
        (dst / name).chmod(0o644)
    return root


def _rewrite(path: Path, edit) -> None:
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(edit(lines)))


def test_both_campaigns_combine_into_one_time_ordered_log():
    men = obd.load_open_bandit(policy="random", campaign="men")
    women = obd.load_open_bandit(policy="random", campaign="women")
    both = obd._combine_campaigns([men, women])  # what load_open_bandit(campaign="all") returns
    assert len(both.click) == len(men.click) + len(women.click) == 20_000
    assert both.click.sum() == men.click.sum() + women.click.sum()
    assert both.n_items == men.n_items + women.n_items
    assert np.all(both.timestamp[1:] >= both.timestamp[:-1])
    is_women = both.item_id >= men.n_items
    assert is_women.sum() == len(women.click)
    # each row's affinities sit in its campaign's block of columns
    assert np.all(both.affinity[is_women][:, :men.n_items] == 0)
    assert np.all(both.affinity[~is_women][:, men.n_items:] == 0)
    np.testing.assert_array_equal(np.sort(both.affinity[~is_women][:, :men.n_items].sum(1)),
                                  np.sort(men.affinity.sum(1)))
    # a hashed user feature keeps one code across campaigns
    for k in range(4):
        decoded = np.asarray(both.user_vocab[k])[both.user_features[:, k]]
        want = np.concatenate([np.asarray(men.user_vocab[k])[men.user_features[:, k]],
                               np.asarray(women.user_vocab[k])[women.user_features[:, k]]])
        assert sorted(decoded) == sorted(want)


def test_path_from_argument_and_environment(tmp_path, monkeypatch):
    root = _copy_campaign(tmp_path)
    assert len(obd.load_open_bandit(root)) == 10_000
    monkeypatch.setenv("CALIB_JAX_OBD_PATH", str(root))
    assert obd.default_path() == root
    with pytest.raises(FileNotFoundError, match="bts"):
        obd.load_open_bandit(policy="bts")
    with pytest.raises(FileNotFoundError, match="nowhere"):
        obd.load_open_bandit(tmp_path / "nowhere")


@pytest.mark.parametrize("case, match", [
    ("short_row", r"men\.csv: line 3 has"),
    ("bad_number", r"men\.csv: line 2, column 'click': not a number"),
    ("bad_click", r"men\.csv: line 2: click must be 0 or 1"),
    ("missing_column", r"men\.csv: missing column\(s\) \['propensity_score'\]"),
    ("unknown_item", r"men\.csv: line 2: item_id 999"),
    ("bad_propensity", r"men\.csv: line 2: propensity_score"),
    ("empty_context", r"item_context\.csv: the file is empty"),
])
def test_malformed_files_are_rejected_with_file_and_line(tmp_path, case, match):
    root = _copy_campaign(tmp_path)
    log = root / "random" / "men" / "men.csv"
    header = log.read_text().splitlines()[0].split(",")
    col = {name: j for j, name in enumerate(header)}

    def set_cell(name, value):
        def edit(lines):
            cells = lines[1].rstrip("\n").split(",")
            cells[col[name]] = value
            lines[1] = ",".join(cells) + "\n"
            return lines
        return edit

    if case == "short_row":
        _rewrite(log, lambda ls: ls[:2] + [ls[2].rsplit(",", 3)[0] + "\n"] + ls[3:])
    elif case == "bad_number":
        _rewrite(log, set_cell("click", "yes"))
    elif case == "bad_click":
        _rewrite(log, set_cell("click", "2"))
    elif case == "missing_column":
        _rewrite(log, lambda ls: [ls[0].replace("propensity_score", "propensity")] + ls[1:])
    elif case == "unknown_item":
        _rewrite(log, set_cell("item_id", "999"))
    elif case == "bad_propensity":
        _rewrite(log, set_cell("propensity_score", "0.0"))
    elif case == "empty_context":
        (root / "random" / "men" / "item_context.csv").write_text("")
    with pytest.raises(ValueError, match=match):
        obd.load_open_bandit(root)


def test_option_validation():
    with pytest.raises(ValueError, match="policy"):
        obd.load_open_bandit(policy="greedy")
    with pytest.raises(ValueError, match="campaign"):
        obd.load_open_bandit(campaign="kids")


def test_backbone_on_open_bandit(tmp_path):
    cfg = obd.backbone_config(hidden=(16,), embedding_dim=8, embed_dim=4)
    out = obd.load_or_train_open_bandit(bb_config=cfg, cache_dir=tmp_path)
    assert out.info["from_cache"] is False
    assert out.field_names == obd.FIELD_NAMES
    n = 10_000
    assert len(out.val) + len(out.holdout) + len(out.test) == round(0.8 * n * 0.1) + 2000
    for part in (out.val, out.holdout, out.test):
        assert part.oracle is None and part.pctr is None
        assert part.embedding.shape == (len(part), 8)
        assert np.all(np.isfinite(part.logits))
    assert 0.0 < out.test.probs.mean() < 0.1  # CTR of the sample is about 0.5%
    again = obd.load_or_train_open_bandit(bb_config=cfg, cache_dir=tmp_path)
    assert again.info["from_cache"] is True
    np.testing.assert_array_equal(again.test.logits, out.test.logits)
    assert again.test.oracle is None
