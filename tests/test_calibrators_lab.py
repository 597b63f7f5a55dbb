"""The textbook lab (seeds/004 §6) is reproduced, and the reliability diagram draws the
right bins."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import log_expit

from experiments import textbook_lab


def test_textbook_lab_reproduces_published_table(tmp_path):
    summary = textbook_lab.main(["--out", str(tmp_path)])
    ours, pub = summary["ours"], textbook_lab.PUBLISHED
    explained = {"Platt intercept b", "ECE Platt"}
    for q, v in pub.items():
        if q not in explained:
            assert abs(ours[q] - v) <= textbook_lab.TOLERANCE, q
    assert set(summary["mismatched"]) <= explained
    # The two exceptions: the published Platt fit stopped early (scikit-learn tol=1e-4).
    # Our intercept is the exact maximum-likelihood point, checked with scipy BFGS ...
    gen = np.random.default_rng(20240617)
    z, _, y = textbook_lab.simulate_split(gen, 4000, 2.3, 1.4)

    def nll(t):
        u = t[0] * z + t[1]
        return -np.mean(y * log_expit(u) + (1 - y) * log_expit(-u))

    ref = minimize(nll, np.array([1.0, 0.0]), method="BFGS", options={"gtol": 1e-12}).x
    np.testing.assert_allclose([ours["Platt slope a"], ours["Platt intercept b"]], ref, atol=1e-7)
    # ... and the textbook's own code, rerun, prints the published numbers.
    rerun = summary["textbook_code_rerun"]
    if rerun is not None:
        for q, v in pub.items():
            assert abs(rerun[q] - v) <= textbook_lab.TOLERANCE, q
    # outputs
    for name in ("table.csv", "table.md", "reliability.png", "reliability.pdf",
                 "reliability_all.png", "notes.md", "provenance.json"):
        assert (tmp_path / name).is_file(), name
    prov = json.loads((tmp_path / "provenance.json").read_text())
    assert prov["seed"] == 20240617 and prov["config"]["n"] == 4000


def test_reliability_diagram_bins_match_numpy(rng):
    from calib_jax.plotting import plt
    from calib_jax.plotting.reliability import reliability_bins, reliability_diagram

    p = rng.uniform(size=500)
    p[:3] = [0.0, 1.0, 0.5]
    y = (rng.uniform(size=500) < p).astype(float)
    counts, conf, rate, edges = reliability_bins(p, y, n_bins=10)
    idx = np.minimum((p * 10).astype(int), 9)
    for m in range(10):
        sel = idx == m
        assert counts[m] == sel.sum()
        if sel.any():
            assert conf[m] == pytest.approx(p[sel].mean())
            assert rate[m] == pytest.approx(y[sel].mean())
    fig, ax = plt.subplots()
    fig2, ax2 = reliability_diagram(p, y, n_bins=10, ax=ax, title="t")
    assert fig2 is fig and ax2 is ax and "ECE" in ax.get_title()
    assert len(ax.patches) == int((counts > 0).sum())
    plt.close(fig)
    with pytest.raises(ValueError, match="probs"):
        reliability_diagram(p + 2.0, y)
