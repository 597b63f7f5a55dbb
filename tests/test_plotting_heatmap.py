"""The heatmap plot of the Monte Carlo studies."""

from __future__ import annotations

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

# The studies' smoke tests are generated from the registry: tests/test_studies.py.


def test_figures_refuse_data_they_would_cut_broadcast_or_misplace():
    """Found while documenting: these silently cut longer label lists, broadcast a single value
    over every bar, dropped a band or failed with an unrelated TypeError."""
    import numpy as np
    import pytest

    from calib_jax.plotting.grouping import grouping_figure, plot_group_scatter, plot_within_group_variance
    from calib_jax.plotting.heatmap import correlation_bars, rho_curves

    est, truth = np.array([0.1, 0.2, 0.3]), np.array([0.1, 0.25, 0.3])
    with pytest.raises(ValueError, match="`groups`"):
        plot_group_scatter(est, truth, np.array([0, 1, 0, 1]))
    with pytest.raises(ValueError, match="`truth`"):
        plot_group_scatter(est, np.array([0.1, np.nan, 0.3]), np.array([0, 1, 0]))
    with pytest.raises(ValueError, match="`score_var`"):
        plot_within_group_variance(["a", "b"], [1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="`groupings` is empty"):
        grouping_figure(est, truth, {}, [], [])
    with pytest.raises(ValueError, match="`score_var`"):
        grouping_figure(est, truth, {"g": np.array([0, 1, 0])}, [1.0, 2.0, 3.0], [1.0])
    with pytest.raises(ValueError, match="`labels`"):
        correlation_bars(np.array([0.5, 0.7]), ["a", "b", "c"])
    with pytest.raises(ValueError, match="`err`"):
        correlation_bars(np.array([0.5, 0.7]), ["a", "b"], err=np.array([0.1, 0.1, 0.1]))
    with pytest.raises(ValueError, match="`lo` and `hi`"):
        rho_curves([1, 2], {"a": [0.1, 0.2]}, lo={"a": [0.0, 0.1]})
    with pytest.raises(ValueError, match="`curves` is empty"):
        rho_curves([1, 2], {})
    with pytest.raises(ValueError, match="positive on a log axis"):
        rho_curves([0, 2], {"a": [0.1, 0.2]})
