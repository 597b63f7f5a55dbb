"""The comparison's evaluation of one split (experiments/_compare_eval.py): every metric of the
tables from one jitted function, equal to the library's metrics called one by one, and the
derived Table 4 columns."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from calib_jax import bootstrap as boot
from calib_jax import metrics as M
from experiments import _compare_eval as E


@pytest.fixture(scope="module")
def part():
    rng = np.random.default_rng(0)
    n = 3000
    o = rng.normal(-2.5, 1.0, n).astype(np.float32)
    oracle = (1 / (1 + np.exp(-(0.8 * o - 0.3)))).astype(np.float32)
    y = (rng.random(n) < oracle).astype(np.float32)
    g = np.stack([rng.integers(0, 5, n), rng.integers(0, 3, n)], 1).astype(np.int32)
    return {"logits": o, "labels": y, "oracle": oracle}, g


def test_one_split_equals_the_metrics_called_one_by_one(part):
    rows, g = part
    key_data = (0, 11)
    stat = E.metric_function(5, 2, True, False, key_data, 5)
    assert E.metric_function(5, 2, True, False, key_data, 5) is stat  # one compiled function per configuration
    p = (1 / (1 + np.exp(-(0.8 * rows["logits"] - 0.2)))).astype(np.float32)
    got = {k: float(v) for k, v in jax.device_get(E.evaluate(stat, p, rows, g)).items()}
    key = jax.random.wrap_key_data(np.asarray(key_data, np.uint32))
    o, y, orc = rows["logits"], rows["labels"], rows["oracle"]
    want = {"ECE": M.ece(p, y), "LCCE": M.lcce(o, y, probs=p, key=key, n_restarts=2),
            "LCCE-l1": M.lcce(o, y, probs=p, key=key, n_restarts=2, norm="l1"), "NLL": M.nll(p, y),
            "AUC": M.auc(p, y), "Acc": M.accuracy(p, y), "bias": M.bias(p, y),
            "abs_bias": M.abs_bias(p, y, g[:, 0], n_groups=5),
            "MCE": M.multicalibration_error(p, y, g, n_levels=5), "Brier+": M.oracle_mae(p, orc),
            "Brier": M.oracle_brier(p, orc)}
    assert set(got) == set(want)
    for k, v in want.items():
        np.testing.assert_allclose(got[k], float(v), rtol=2e-6, atol=1e-9, err_msg=k)
    base = E.evaluate_backbone(stat, rows, g)
    np.testing.assert_allclose(base["NLL"], float(M.nll(jax.nn.sigmoid(o), y)), rtol=2e-6)


def test_derived_columns_are_relative_to_the_backbone():
    res = {"Acc": 0.96, "AUC": 0.81, "ECE": 0.01}
    base = {"Acc": 0.95, "AUC": 0.80}
    d = E.derived_metrics(res, base)
    assert "Acc" not in d and d["ECE"] == 0.01
    assert d["AccDiff"] == pytest.approx(0.01 / 0.95) and d["AUCDiff"] == pytest.approx(0.01 / 0.80)
    reps = {"Acc": np.array([0.96, 0.97, 0.95]), "AUC": np.array([0.81, 0.82, 0.80])}
    base_reps = {"Acc": np.array([0.95, 0.95, 0.95]), "AUC": np.array([0.80, 0.80, 0.80])}
    b = boot.BootstrapResult(estimate=res, lo={}, hi={}, replicates={**reps, "ECE": np.zeros(3)}, level=0.95,
                             fingerprint=())
    base_b = boot.BootstrapResult(estimate=base, lo={}, hi={}, replicates=base_reps, level=0.95, fingerprint=())
    out = E.derived_bootstrap(b, base_b)
    auc_diff = (reps["AUC"] - 0.80) / 0.80
    assert out.estimate["AUCDiff"] == pytest.approx(0.0125)
    assert out.lo["AUCDiff"] == pytest.approx(np.quantile(auc_diff, 0.025))
    assert out.hi["AUCDiff"] == pytest.approx(np.quantile(auc_diff, 0.975))
