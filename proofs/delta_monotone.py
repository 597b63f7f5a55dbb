r"""Monotonicity of a group's Delta contribution in its within-group variance ("Calibration is Grouping" Sec. 2.3).

The contribution :math:`D_k = w_k(\sigma_k^2 - 2\gamma_k)` satisfies
:math:`\partial D_k / \partial \sigma_k^2 = w_k \ge 0` at fixed :math:`\gamma_k`.

The paper concludes that lowering the within-group variance always lowers that group's
contribution, whatever the signs.  Holding γ_k fixed is not what a
variance reduction does: shrinking scores towards the group mean,
:math:`p_i \mapsto \mu_k + t(p_i - \mu_k)`, leaves μ_k, π_k, w_k unchanged and gives
:math:`\sigma_k^2(t) = t^2\sigma_k^2`, :math:`\gamma_k(t) = t\gamma_k`, so
:math:`D_k(t) = w_k(t^2\sigma_k^2 - 2t\gamma_k)`, which *increases* as t decreases whenever
:math:`t < \gamma_k/\sigma_k^2`.  Both facts are proved here.
"""

from __future__ import annotations

import sympy as sp

from proofs import _common as pc


def _shrunk(d, g, t):
    """Scores shrunk towards their (hard) group mean by factor t."""
    out = []
    for i in range(d.n):
        k = next(kk for kk in range(d.K) if d.q[i][kk] == 1)
        out.append(g.mu[k] + t * (d.p[i] - g.mu[k]))
    return out


@pc.proof(
    "delta_monotone",
    "d/d(sigma_k^2) [w_k (sigma_k^2 - 2 gamma_k)] = w_k >= 0 at fixed gamma_k; under shrinkage towards "
    "the group mean the contribution is w_k (t^2 sigma_k^2 - 2 t gamma_k)",
    '"Calibration is Grouping" Sec. 2.3 (bold paragraph after eq. 6) and App. A.2',
    "symbolic differentiation; exact zero tests on symbolic data (hard groups, n = 5, K = 2, weighted) "
    "for the shrinkage path; exact counterexample to the unqualified claim",
)
def prove(r: pc.ProofResult) -> pc.ProofResult:
    w, s2, ga = sp.symbols("w sigma2 gamma", real=True)
    r.claim("fixed-gamma monotonicity", "d/d(sigma^2) w (sigma^2 - 2 gamma) = w (>= 0; > 0 if the group has mass)",
            sp.diff(w * (s2 - 2 * ga), s2) == w, "sympy diff")
    hard = [0, 0, 1, 1, 1]
    d = pc.sym_data(5, 2, weighted=True, hard=hard)
    g = pc.group_exprs(d)
    t = sp.Symbol("t", positive=True)
    ps = _shrunk(d, g, t)
    sub = dict(zip(d.p, ps))
    for k in range(d.K):
        r.check(f"shrinkage keeps mu_k (k={k + 1})", "mu_k(t) = mu_k", g.mu[k].xreplace(sub) - g.mu[k])
        r.check(f"shrinkage scales sigma_k^2 (k={k + 1})", "sigma_k^2(t) = t^2 sigma_k^2",
                g.var[k].xreplace(sub) - t**2 * g.var[k])
        r.check(f"shrinkage scales gamma_k (k={k + 1})", "gamma_k(t) = t gamma_k", g.cov[k].xreplace(sub) - t * g.cov[k])
    brier = lambda p: d.mean([(yi - pi) ** 2 for yi, pi in zip(d.y, p)])
    r.check("Brier along the shrinkage path",
            "Brier(t) - Brier(1) = sum_k w_k [(t^2 - 1) sigma_k^2 - 2 (t - 1) gamma_k]",
            brier(ps) - brier(d.p)
            - sp.Add(*[g.w[k] * ((t**2 - 1) * g.var[k] - 2 * (t - 1) * g.cov[k]) for k in range(d.K)]),
            binary=d.y)
    r.claim("derivative along the path", "d/dt w (t^2 sigma^2 - 2 t gamma) = 2 w (t sigma^2 - gamma): "
            "negative for t < gamma/sigma^2, so shrinking (t decreasing) raises the contribution there",
            sp.expand(sp.diff(w * (t**2 * s2 - 2 * t * ga), t) - 2 * w * (t * s2 - ga)) == 0, "sympy diff")
    # Exact counterexample to the unqualified claim.
    d2 = pc.sym_data(2, 1, weighted=False, hard=[0, 0])
    g2 = pc.group_exprs(d2)
    ex = {d2.p[0]: sp.Rational(1, 5), d2.p[1]: sp.Rational(4, 5), d2.y[0]: 0, d2.y[1]: 1}
    half = sp.Rational(1, 2)
    ps2 = _shrunk(d2, g2, half)
    ex_s = {d2.p[0]: ps2[0].subs(ex), d2.p[1]: ps2[1].subs(ex), d2.y[0]: 0, d2.y[1]: 1}
    v0, c0, v1, c1 = (g2.var[0].subs(ex), g2.cov[0].subs(ex), g2.var[0].subs(ex_s), g2.cov[0].subs(ex_s))
    b0 = d2.mean([(yi - pi) ** 2 for yi, pi in zip(d2.y, d2.p)]).subs(ex)
    b1 = d2.mean([(yi - pi) ** 2 for yi, pi in zip(d2.y, d2.p)]).subs(ex_s)
    ok = v1 < v0 and (v1 - 2 * c1) > (v0 - 2 * c0) and b1 > b0
    r.remark("Sec. 2.3: less within-group variance 'always' lowers the group's contribution",
             "true only at fixed gamma_k (proved above); a variance reduction by shrinkage also shrinks gamma_k "
             "and can increase the contribution and the Brier score" + ("" if ok else " [COUNTEREXAMPLE FAILED]"),
             "exact rational evaluation",
             f"one group, y = (0, 1), p = (1/5, 4/5) -> shrink by t = 1/2 to p = ({ex_s[d2.p[0]]}, {ex_s[d2.p[1]]}): "
             f"sigma^2 {v0} -> {v1}, gamma {c0} -> {c1}, sigma^2 - 2 gamma {v0 - 2 * c0} -> {v1 - 2 * c1}, "
             f"Brier {b0} -> {b1}")
    if not ok:
        r.claim("counterexample", "counterexample evaluates as stated", False, "exact evaluation")
    r.remark("feasibility at fixed gamma_k", "by Cauchy-Schwarz sigma_k^2 >= gamma_k^2 / (pi_k (1 - pi_k)), so "
             "sigma_k^2 cannot be reduced at fixed gamma_k below that floor", "see cauchy_schwarz")

    def run():
        import jax.numpy as jnp

        from calib_jax.decompositions import brier_grouping

        nd = pc.random_instances(d, seed=7, hard=hard)
        tt = 0.4
        pshr = {d.p[i]: pc.evaluate(ps[i].subs(t, tt), nd) for i in range(d.n)}
        pred = [pc.evaluate(g.w[k] * (tt**2 * g.var[k] - 2 * tt * g.cov[k]), nd) for k in range(d.K)]
        err = 0.0
        for j, (_, y, q, w) in enumerate(nd.jax_draws()):
            pj = jnp.asarray([pshr[d.p[i]][j] for i in range(d.n)])
            out = pc.call(brier_grouping, pj, y, q, n_groups=d.K, weights=w)
            dk = pc.field_of(out, "delta_k")
            err = pc.worst(err, *[float(dk[k]) - pred[k][j] for k in range(d.K)])
        return err

    pc.crosscheck(r, "calib_jax.decompositions.brier_grouping delta_k on shrunk scores", run)
    return r
