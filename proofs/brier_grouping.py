r"""Soft-grouping Brier identity ("Calibration is Grouping" eq. 6 and Appendix A.2, Steps 1-3).

.. math::
    \frac{1}{V}\sum_i v_i (y_i - p_i)^2 = \bar y(1-\bar y) + \sum_k w_k(\mu_k-\pi_k)^2
      - \sum_k w_k(\pi_k-\bar y)^2 + \sum_k w_k(\sigma_k^2 - 2\gamma_k)

for soft memberships (rows on the simplex), hard ids, and sample weights.  Each displayed
step of App. A.2 is checked on symbolic data, then the identity is assembled as a chain;
it is also verified end to end on small symbolic data sets.
"""

from __future__ import annotations

import sympy as sp

from proofs import _common as pc


def _eq6_rhs(d, g):
    yb = d.ybar
    K = d.K
    unc = yb * (1 - yb)
    rel = sp.Add(*[g.w[k] * (g.mu[k] - g.pi[k]) ** 2 for k in range(K)])
    res = sp.Add(*[g.w[k] * (g.pi[k] - yb) ** 2 for k in range(K)])
    delta = sp.Add(*[g.w[k] * (g.var[k] - 2 * g.cov[k]) for k in range(K)])
    return unc, rel, res, delta


def _brier(d):
    return d.mean([(yi - pi) ** 2 for yi, pi in zip(d.y, d.p)])


@pc.proof(
    "brier_grouping",
    "Brier = UNC + REL - RES + Delta with UNC = ybar(1-ybar), REL = sum_k w_k (mu_k-pi_k)^2, "
    "RES = sum_k w_k (pi_k-ybar)^2, Delta = sum_k w_k (sigma_k^2 - 2 gamma_k), soft or hard groups, weighted",
    '"Calibration is Grouping" eq. 6, Sec. 2.3 and Appendix A.2',
    "per-step exact zero tests on symbolic data (n=4, K=3, soft q with sum_k q_ik = 1, "
    "symbolic weights, y^2 = y), chain of proven equalities, plus end-to-end checks "
    "(soft n=3 K=2; weighted soft n=2 K=2; hard weighted n=4 K=2)",
)
def prove(r: pc.ProofResult) -> pc.ProofResult:
    d = pc.sym_data(4, 3, weighted=True)
    g = pc.group_exprs(d)
    y = d.y
    S = [(yi - pi) ** 2 for yi, pi in zip(d.y, d.p)]
    # Step 1: law of total expectation for soft conditionals.
    r.check("A.2 Step 1 (1)", "E[S] = sum_k w_k E[S | G_k] (soft conditionals)",
            _brier(d) - sp.Add(*[g.w[k] * g.cond(d, k, S) for k in range(d.K)]))
    r.check("A.2 soft-stats", "sum_k w_k = 1 and sum_k w_k pi_k = E[Y] (needs sum_k q_ik = 1)",
            (sp.Add(*g.w) - 1) ** 2 + (sp.Add(*[g.w[k] * g.pi[k] for k in range(d.K)]) - d.ybar) ** 2)
    # Step 2, per group.
    for k in range(d.K):
        mu, pi, var, cov = g.mu[k], g.pi[k], g.var[k], g.cov[k]
        c = lambda z, k=k: g.cond(d, k, z)
        r.check(f"A.2 Step 2 moments (k={k + 1})", "E[Y^2|G_k] = pi_k (Y^2 = Y)",
                c([yi ** 2 for yi in y]) - pi, binary=y)
        r.check(f"A.2 Step 2 moments (k={k + 1})", "E[pY|G_k] = mu_k pi_k + gamma_k",
                c([pi_ * yi for pi_, yi in zip(d.p, y)]) - (mu * pi + cov))
        r.check(f"A.2 Step 2 moments (k={k + 1})", "E[p^2|G_k] = mu_k^2 + sigma_k^2",
                c([pi_ ** 2 for pi_ in d.p]) - (mu ** 2 + var))
        r.check(f"A.2 Step 2 (2) line 1 (k={k + 1})",
                "E[(Y-p)^2|G_k] = pi_k - 2(mu_k pi_k + gamma_k) + (mu_k^2 + sigma_k^2)",
                c(S) - (pi - 2 * (mu * pi + cov) + mu ** 2 + var), binary=y)
        r.check(f"A.2 Step 2 (2) line 2 (k={k + 1})",
                "... = pi_k(1-pi_k) + (pi_k-mu_k)^2 + sigma_k^2 - 2 gamma_k",
                c(S) - (pi * (1 - pi) + (pi - mu) ** 2 + var - 2 * cov), binary=y)
    # Step 3 at the level of group statistics (valid for every data set by the lemmas above).
    K = 4
    w, m, p_, s2, ga = pc.stat_symbols(K, "mu", "pi", "s", "gamma")
    yb = sp.Add(*[w[k] * p_[k] for k in range(K)])
    lhs = sp.Add(*[w[k] * (p_[k] * (1 - p_[k]) + (p_[k] - m[k]) ** 2 + s2[k] - 2 * ga[k]) for k in range(K)])
    r.check("A.2 Step 3 / eq. 6 (statistics, K=4)",
            "sum_k w_k[pi_k(1-pi_k) + (pi_k-mu_k)^2 + sigma_k^2 - 2gamma_k] = UNC + REL - RES + Delta "
            "given sum_k w_k = 1, ybar = sum_k w_k pi_k",
            lhs - (yb * (1 - yb) + sp.Add(*[w[k] * (m[k] - p_[k]) ** 2 for k in range(K)])
                   - sp.Add(*[w[k] * (p_[k] - yb) ** 2 for k in range(K)])
                   + sp.Add(*[w[k] * (s2[k] - 2 * ga[k]) for k in range(K)])))
    # End-to-end on symbolic data.
    for label, dd in (("soft n=3 K=2", pc.sym_data(3, 2, weighted=False)),
                      ("soft weighted n=2 K=2", pc.sym_data(2, 2, weighted=True)),
                      ("hard weighted n=4 K=2", pc.sym_data(4, 2, weighted=True, hard=[0, 0, 1, 1]))):
        gg = pc.group_exprs(dd)
        unc, rel, res, delta = _eq6_rhs(dd, gg)
        r.check(f"eq. 6 end to end ({label})", "Brier = UNC + REL - RES + Delta",
                _brier(dd) - (unc + rel - res + delta), binary=dd.y)
    # Hard memberships recover the hard-bin formulas (App. A.2, end of "Hard vs. soft grouping").
    dh = pc.sym_data(4, 2, weighted=False, hard=[0, 1, 1, 0])
    gh = pc.group_exprs(dh)
    bins = ([0, 3], [1, 2])
    plain = sp.Add(*[(gh.mu[k] - sp.Add(*[dh.p[i] for i in ix]) / len(ix)) ** 2
                     + (gh.pi[k] - sp.Add(*[dh.y[i] for i in ix]) / len(ix)) ** 2
                     + (gh.w[k] - sp.Rational(len(ix), 4)) ** 2
                     + (gh.var[k] - sp.Add(*[(dh.p[i] - sp.Add(*[dh.p[j] for j in ix]) / len(ix)) ** 2
                                             for i in ix]) / len(ix)) ** 2
                     for k, ix in enumerate(bins)])
    r.check("A.2 hard vs soft", "one-hot q_ik gives the plain per-bin mass, mean, rate and variance", plain)
    # Delta takes both signs.
    d2 = pc.sym_data(2, 1, weighted=False, hard=[0, 0])
    g2 = pc.group_exprs(d2)
    dl = lambda pp: (g2.var[0] - 2 * g2.cov[0]).subs({d2.p[0]: pp[0], d2.p[1]: pp[1], d2.y[0]: 0, d2.y[1]: 1})
    neg, pos = dl((sp.Rational(1, 5), sp.Rational(4, 5))), dl((sp.Rational(4, 5), sp.Rational(1, 5)))
    r.claim("A.2 'Delta is not sign-definite'", "Delta can be negative or positive",
            bool(neg < 0) and bool(pos > 0),
            f"exact evaluation, one group with y = (0, 1): p = (1/5, 4/5) gives Delta = {neg}; "
            f"p = (4/5, 1/5) gives Delta = {pos}")
    # Murphy special case and the main-text "only when" claim.
    dc = pc.sym_data(4, 2, weighted=True, hard=[0, 0, 1, 1])
    a, b = sp.symbols("a b")
    gc = pc.group_exprs(dc)
    sub = {dc.p[0]: a, dc.p[1]: a, dc.p[2]: b, dc.p[3]: b}
    r.check("A.2 after Step 3", "constant scores within each group => sigma_k^2 = gamma_k = 0, Delta = 0",
            sp.Add(*[(gc.var[k].subs(sub)) ** 2 + gc.cov[k].subs(sub) ** 2 for k in range(2)]))
    d1 = pc.sym_data(4, 1, weighted=False, hard=[0, 0, 0, 0])
    g1 = pc.group_exprs(d1)
    vals = dict(zip(d1.p, [sp.Rational(1, 10), sp.Rational(7, 10), sp.Rational(3, 10), sp.Rational(9, 10)]))
    vals.update(zip(d1.y, [0, 0, 1, 1]))
    var, cov = g1.var[0].subs(vals), g1.cov[0].subs(vals)
    unc, rel, res, delta = (t.subs(vals) for t in _eq6_rhs(d1, g1))
    brier = _brier(d1).subs(vals)
    ok = var != 0 and delta == 0 and brier == unc + rel - res
    pc.refuted(r, "Sec. 2.3 after eq. 6",
            "the Murphy form UNC + REL - RES is recovered ONLY when every group collapses to one "
            "forecast (sigma_k^2 = gamma_k = 0)", ok,
            "exact rational evaluation; correct statement: the three-term form holds iff "
            "sum_k w_k(sigma_k^2 - 2 gamma_k) = 0, which sigma_k^2 = gamma_k = 0 implies but does not require",
            f"one group, p = (1/10, 7/10, 3/10, 9/10), y = (0, 0, 1, 1): sigma^2 = {var}, gamma = {cov}, "
            f"Delta = {delta}, Brier = {brier} = UNC + REL - RES = {unc} + {rel} - {res}")
    _crosscheck(r)
    return r


def _crosscheck(r: pc.ProofResult) -> None:
    cases = (("soft, weighted", pc.sym_data(4, 3, weighted=True), None),
             ("hard, unweighted", pc.sym_data(5, 3, weighted=False, hard=[0, 1, 1, 2, 2]), [0, 1, 1, 2, 2]))
    for label, d, hard in cases:
        def run(d=d, hard=hard):
            from calib_jax.decompositions import brier_grouping
            from calib_jax.metrics import brier

            g = pc.group_exprs(d)
            nd = pc.random_instances(d, hard=hard, seed=1)
            terms = [pc.evaluate(t, nd) for t in _eq6_rhs(d, g)] + [pc.evaluate(_brier(d), nd)]
            err = 0.0
            for j, (p, y, q, wts) in enumerate(nd.jax_draws()):
                out = pc.call(brier_grouping, p, y, q, n_groups=d.K if hard else None, weights=wts)
                got = [pc.field_of(out, "unc", "uncertainty"), pc.field_of(out, "rel", "reliability"),
                       pc.field_of(out, "res", "resolution"), pc.field_of(out, "delta")]
                got.append(pc.call(brier, p, y, weights=wts))
                err = pc.worst(err, *[float(a) - t[j] for a, t in zip(got, terms)])
            return err

        pc.crosscheck(r, f"calib_jax.decompositions.brier_grouping + metrics.brier ({label})", run)
