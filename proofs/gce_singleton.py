r"""GCE with singleton groups equals the Brier score ("Calibration is Grouping" eq. 7 and eq. 6).

With one group per observation, :math:`\mu_i = p_i`, :math:`\pi_i = y_i`,
:math:`w_i = v_i / V`, so :math:`\mathrm{GCE} = \sum_i w_i (p_i - y_i)^2 = \mathrm{Brier}`;
in eq. 6 then σ² = γ = 0 and (with y² = y) RES = UNC, leaving Brier = REL.
"""

from __future__ import annotations

import sympy as sp

from proofs import _common as pc


@pc.proof(
    "gce_singleton",
    "GCE(singleton groups) = Brier (weighted)",
    '"Calibration is Grouping" eq. 7 (\'GCE = REL of eq. 6\')',
    "exact zero tests on symbolic data, n=5 observations each in its own group, symbolic weights",
)
def prove(r: pc.ProofResult) -> pc.ProofResult:
    n = 5
    d = pc.sym_data(n, n, weighted=True, hard=list(range(n)))
    g = pc.group_exprs(d)
    gce = sp.Add(*[g.w[k] * (g.mu[k] - g.pi[k]) ** 2 for k in range(n)])
    brier = d.mean([(yi - pi) ** 2 for yi, pi in zip(d.y, d.p)])
    r.check("group statistics", "mu_i = p_i, pi_i = y_i, w_i = v_i / V",
            sp.Add(*[(g.mu[k] - d.p[k]) ** 2 + (g.pi[k] - d.y[k]) ** 2 + (g.w[k] - d.v[k] / d.V) ** 2
                     for k in range(n)]))
    r.check("GCE = Brier", "sum_k w_k (mu_k - pi_k)^2 = (1/V) sum_i v_i (y_i - p_i)^2", gce - brier)
    r.check("Delta = 0", "sigma_k^2 = gamma_k = 0 for singletons",
            sp.Add(*[g.var[k] ** 2 + g.cov[k] ** 2 for k in range(n)]))
    res = sp.Add(*[g.w[k] * (g.pi[k] - d.ybar) ** 2 for k in range(n)])
    r.check("RES = UNC", "sum_i w_i (y_i - ybar)^2 = ybar(1 - ybar) (y^2 = y)",
            res - d.ybar * (1 - d.ybar), binary=d.y)

    def run():
        from calib_jax.metrics import brier as jbrier
        from calib_jax.metrics import gce as jgce

        nd = pc.random_instances(d, seed=3, hard=list(range(n)))
        ref = pc.evaluate(brier, nd)
        err = 0.0
        for j, (p, y, q, w) in enumerate(nd.jax_draws()):
            a = pc.call(jgce, p, y, q, n_groups=n, weights=w)
            b = pc.call(jbrier, p, y, weights=w)
            err = pc.worst(err, float(a) - ref[j], float(b) - ref[j])
        return err

    pc.crosscheck(r, "calib_jax.metrics.gce (singletons) and metrics.brier", run)

    def run_rel():
        from calib_jax.decompositions import brier_grouping
        from calib_jax.metrics import gce as jgce

        ds = pc.sym_data(4, 3, weighted=True)
        gs = pc.group_exprs(ds)
        rel = sp.Add(*[gs.w[k] * (gs.mu[k] - gs.pi[k]) ** 2 for k in range(ds.K)])
        nd = pc.random_instances(ds, seed=12)
        ref = pc.evaluate(rel, nd)
        err = 0.0
        for j, (p, y, q, w) in enumerate(nd.jax_draws()):
            err = pc.worst(err, float(pc.call(jgce, p, y, q, weights=w)) - ref[j],
                        float(pc.call(brier_grouping, p, y, q, weights=w).rel) - ref[j])
        return err

    pc.crosscheck(r, "eq. 7 = REL of eq. 6: metrics.gce (soft, weighted) = brier_grouping.rel", run_rel)
    return r
