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
