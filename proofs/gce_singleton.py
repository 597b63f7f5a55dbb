r"""GCE with singleton groups equals the Brier score (seeds/000 eq. 7 and eq. 6).

With one group per observation, :math:`\mu_i = p_i`, :math:`\pi_i = y_i`,
:math:`w_i = v_i / V`, so :math:`\mathrm{GCE} = \sum_i w_i (p_i - y_i)^2 = \mathrm{Brier}`;
in eq. 6 then σ² = γ = 0 and (with y² = y) RES = UNC, leaving Brier = REL.
"""

from __future__ import annotations

import sympy as sp

from proofs._common import (
    ProofResult,
    call,
    crosscheck,
    evaluate,
    group_exprs,
    random_instances,
    register,
    sym_data,
    worst,
)


@register("gce_singleton")
def prove() -> ProofResult:
    r = ProofResult(
        "gce_singleton",
        "GCE(singleton groups) = Brier (weighted)",
        "seeds/000 eq. 7 ('GCE = REL of eq. 6'); SPEC §4",
        "exact zero tests on symbolic data, n=5 observations each in its own group, symbolic weights",
    )
    n = 5
    d = sym_data(n, n, weighted=True, hard=list(range(n)))
    g = group_exprs(d)
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
        import jax.numpy as jnp

        from calib_jax.metrics import brier as jbrier
        from calib_jax.metrics import gce as jgce

        nd = random_instances(d, seed=3, hard=list(range(n)))
        ref = evaluate(brier, nd)
        err = 0.0
        for j in range(len(nd.probs)):
            args = (jnp.asarray(nd.probs[j]), jnp.asarray(nd.labels[j]))
            w = jnp.asarray(nd.weights[j])
            a = call(jgce, *args, jnp.asarray(nd.groups[j]), n_groups=n, weights=w)
            b = call(jbrier, *args, weights=w)
            err = worst(err, float(a) - ref[j], float(b) - ref[j])
        return err

    crosscheck(r, "calib_jax.metrics.gce (singletons) and metrics.brier", run)

    def run_rel():
        import jax.numpy as jnp

        from calib_jax.decompositions import brier_grouping
        from calib_jax.metrics import gce as jgce

        ds = sym_data(4, 3, weighted=True)
        gs = group_exprs(ds)
        rel = sp.Add(*[gs.w[k] * (gs.mu[k] - gs.pi[k]) ** 2 for k in range(ds.K)])
        nd = random_instances(ds, seed=12)
        ref = evaluate(rel, nd)
        err = 0.0
        for j in range(len(nd.probs)):
            args = (jnp.asarray(nd.probs[j]), jnp.asarray(nd.labels[j]), jnp.asarray(nd.groups[j]))
            w = jnp.asarray(nd.weights[j])
            err = worst(err, float(call(jgce, *args, weights=w)) - ref[j],
                        float(call(brier_grouping, *args, weights=w).rel) - ref[j])
        return err

    crosscheck(r, "eq. 7 = REL of eq. 6: metrics.gce (soft, weighted) = brier_grouping.rel", run_rel)
    return r
