"""Smoke tests of the Monte Carlo studies (tiny settings) and of the heatmap plot."""

from __future__ import annotations

import json

import numpy as np
import pytest

from calib_jax.plotting import plt
from calib_jax.plotting.heatmap import annotated_heatmap, correlation_bars


def test_annotated_heatmap_writes_values_in_cells():
    r = np.array([[1.0, 0.5], [0.5, 1.0]])
    fig = annotated_heatmap(r, ["a", "b"], title="t", caption="sign note")
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == ["1.00", "0.50", "0.50", "1.00", "sign note"]  # cells, then the caption
    plt.close(fig)
    with pytest.raises(ValueError, match="values"):
        annotated_heatmap(np.zeros((2, 3)), ["a", "b"])
    fig = correlation_bars(np.array([0.2, 0.9]), ["x", "y"], err=np.array([0.1, 0.05]))
    plt.close(fig)


def _check_outputs(out, stems):
    for s in stems:
        assert (out / s).exists(), s
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["seed"] == 0 and "git_commit" in prov and prov["wall_time_s"] > 0


def test_mc_spearman_smoke(tmp_path):
    from experiments import mc_spearman

    s = mc_spearman.main(["--trials", "6", "--n", "600", "--out", str(tmp_path), "--no-progress"])
    assert -1.0 <= s["lcce_rho"] <= 1.0
    _check_outputs(tmp_path, ["fig3_spearman_matrix.png", "fig3_spearman_matrix.pdf",
                              "fig1_spearman_with_oracle_brier.png", "spearman_matrix.csv",
                              "spearman_with_oracle_brier.md"])


@pytest.mark.slow
def test_mc_std_smoke(tmp_path):
    from experiments import mc_std

    mc_std.main(["--trials", "5", "--n", "500", "--out", str(tmp_path), "--no-progress"])
    _check_outputs(tmp_path, ["fig4_spearman_std.png", "spearman_std_with_oracle_brier.csv"])


@pytest.mark.slow
def test_mc_improvement_smoke(tmp_path):
    from experiments import mc_improvement

    mc_improvement.main(["--trials", "5", "--n", "500", "--n-cal", "300", "--out",
                         str(tmp_path), "--no-progress"])
    _check_outputs(tmp_path, ["fig5_spearman_improvement.pdf",
                              "spearman_improvement_with_oracle_brier.md"])


@pytest.mark.slow
def test_mc_sample_size_smoke(tmp_path):
    from experiments import mc_sample_size

    mc_sample_size.main(["--trials", "5", "--n", "500", "--out", str(tmp_path), "--no-progress"])
    _check_outputs(tmp_path, ["fig6a_spearman_vs_sample_size.png", "spearman_vs_sample_size.csv"])


@pytest.mark.slow
def test_mc_lcce_sensitivity_smoke(tmp_path):
    from experiments import mc_lcce_sensitivity

    mc_lcce_sensitivity.main(["--trials", "5", "--n", "800", "--out", str(tmp_path),
                              "--no-progress"])
    _check_outputs(tmp_path, ["fig6b_lcce_grid.png", "table6_subsample.md", "restart_noise.csv"])


@pytest.mark.slow
def test_metric_accuracy_smoke(tmp_path):
    from experiments import metric_accuracy

    s = metric_accuracy.main(["--trials", "4", "--n", "500", "--out", str(tmp_path),
                              "--no-progress"])
    assert 0.0 <= s["cll_mean_accuracy"] <= 1.0
    _check_outputs(tmp_path, ["metric_accuracy.png", "metric_accuracy.csv",
                              "ll_vs_cll_mean_std.md"])
