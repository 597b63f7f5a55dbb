"""Equivalences the docs state, so that a metric "proposed" as new is recognised as a built-in one.

* Equal-mass bins of the logits are the equal-mass bins of the probabilities (the sigmoid is
  increasing), so "ECE on logit quantile bins" is ECE+ (``ece(..., strategy="quantile")``).
* LCCE (eq. 12 of "Calibration is Grouping") is the reliability term REL of the grouping
  decomposition of the Brier score (its eq. 6) on LCCE's own logit clusters, and the GCE
  (eq. 7) on them: "the Brier reliability on logit k-means clusters" is LCCE.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax import decompositions as D
from calib_jax import metrics as M
from calib_jax import partitions as P


def test_ece_on_equal_mass_logit_bins_is_ece_plus():
    rng = np.random.default_rng(0)
    o = rng.normal(-2.0, 1.5, 20_000).astype(np.float32)
    p = np.asarray(jax.nn.sigmoid(o))
    y = (rng.random(o.size) < p).astype(np.float32)
    ids_o = np.asarray(P.quantile_bins(jnp.asarray(o), n_bins=15))
    np.testing.assert_array_equal(ids_o, np.asarray(P.quantile_bins(jnp.asarray(p), n_bins=15)))
    # the "new" metric, written in plain NumPy on the logit bins: sum_b w_b |mean p_b - mean y_b|
    user = sum(np.mean(ids_o == b) * abs(p[ids_o == b].mean() - y[ids_o == b].mean())
               for b in np.unique(ids_o))
    np.testing.assert_allclose(float(M.ece(p, y, n_bins=15, strategy="quantile")), user, rtol=1e-5)


def test_lcce_is_the_brier_reliability_and_the_gce_on_its_clusters():
    rng = np.random.default_rng(1)
    centres = np.array([-4.0, -2.0, 0.0, 2.0])
    ids = rng.integers(0, 4, 20_000)
    o = (centres[ids] + rng.normal(0.0, 0.2, ids.size)).astype(np.float32)  # four clear logit clusters
    p = jax.nn.sigmoid(o)
    y = (rng.random(ids.size) < np.asarray(jax.nn.sigmoid(o + 0.3))).astype(np.float32)  # miscalibrated
    g = jnp.asarray(ids)
    rel = float(D.brier_grouping(p, y, g, n_groups=4).rel)
    # two float32 reductions of 20,000 rows in different orders: a few ulps apart
    np.testing.assert_allclose(float(M.gce(p, y, g, n_groups=4)), rel, rtol=1e-5)
    for exact in (False, True):  # the histogram k-means and the exact one find the same clusters here
        np.testing.assert_allclose(float(M.lcce(o, y, n_clusters=4, init="quantile", exact=exact)), rel, rtol=1e-5)
    assert rel > 1e-3  # a real miscalibration, not 0 = 0
