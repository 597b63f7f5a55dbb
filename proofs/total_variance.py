r"""Law of total variance for soft groups ("Calibration is Grouping" Sec. 2.3 and App. A.2, Step 3).

.. math::
    \sum_k w_k \pi_k (1-\pi_k) = \bar y(1-\bar y) - \sum_k w_k (\pi_k - \bar y)^2,
    \qquad \bar y = \sum_k w_k \pi_k ,

so the paper's "Var(π_k)" is the w-weighted variance of the group click rates around ȳ.
"""

from __future__ import annotations

import sympy as sp

from proofs import _common as pc


def _terms(d, g):
    yb = d.ybar
    within = sp.Add(*[g.w[k] * g.pi[k] * (1 - g.pi[k]) for k in range(d.K)])
    res = sp.Add(*[g.w[k] * (g.pi[k] - yb) ** 2 for k in range(d.K)])
    return within, yb * (1 - yb), res


@pc.proof(
    "total_variance",
    "sum_k w_k pi_k(1-pi_k) = ybar(1-ybar) - sum_k w_k (pi_k - ybar)^2 for soft groups (weighted)",
    '"Calibration is Grouping" Sec. 2.3 (after eq. 6) and App. A.2 Step 3',
    "lemmas sum_k w_k = 1 and sum_k w_k pi_k = ybar on symbolic data (n=4, K=3, soft q, "
    "symbolic weights); the identity on group statistics (K=5); end to end on soft data",
)
def prove(r: pc.ProofResult) -> pc.ProofResult:
    d = pc.sym_data(4, 3, weighted=True)
    g = pc.group_exprs(d)
    r.check("mass lemma", "sum_k w_k = 1 (uses sum_k q_ik = 1)", sp.Add(*g.w) - 1)
    r.check("mean lemma", "sum_k w_k pi_k = ybar (uses sum_k q_ik = 1)",
            sp.Add(*[g.w[k] * g.pi[k] for k in range(d.K)]) - d.ybar)
    K = 5
    w, p_ = pc.stat_symbols(K, "pi")
    yb = sp.Add(*[w[k] * p_[k] for k in range(K)])
    r.check("identity (statistics, K=5)",
            "sum_k w_k pi_k(1-pi_k) = ybar(1-ybar) - sum_k w_k(pi_k-ybar)^2 with ybar = sum_k w_k pi_k",
            sp.Add(*[w[k] * p_[k] * (1 - p_[k]) for k in range(K)])
            - (yb * (1 - yb) - sp.Add(*[w[k] * (p_[k] - yb) ** 2 for k in range(K)])))
    for label, dd in (("soft n=3 K=2", pc.sym_data(3, 2, weighted=False)),
                      ("soft weighted n=2 K=2", pc.sym_data(2, 2, weighted=True)),
                      ("hard weighted n=4 K=2", pc.sym_data(4, 2, weighted=True, hard=[0, 1, 1, 1]))):
        gg = pc.group_exprs(dd)
        within, unc, res = _terms(dd, gg)
        r.check(f"identity end to end ({label})", "sum_k w_k pi_k(1-pi_k) = UNC - RES", within - (unc - res))
    # In which sense is RES = "Var(pi_k)"?
    d1 = pc.sym_data(4, 2, weighted=False, hard=[0, 1, 1, 1])
    g1 = pc.group_exprs(d1)
    vals = dict(zip(d1.y, [1, 0, 0, 1]))
    within, unc, res = (t.subs(vals) for t in _terms(d1, g1))
    pis = [g1.pi[k].subs(vals) for k in range(2)]
    unweighted = sp.Rational(1, 2) * sum((x - sum(pis) / 2) ** 2 for x in pis)
    ok = res == unc - within and unweighted != res and within != unc - unweighted
    r.claim("'RES = Var(pi_k)' (Sec. 2.3, App. A.2)",
            "Var(pi_k) is the variance of pi_k under the group masses w_k, around ybar = sum_k w_k pi_k",
            ok, "identity above; exact rational evaluation")
    r.remark("'Var(pi_k)' read as an unweighted variance over groups",
             "the unweighted variance of the K group rates does not satisfy the law of total variance",
             "exact rational counterexample",
             f"hard groups {{1}}, {{2,3,4}}, y = (1, 0, 0, 1): pi = {pis}, w = (1/4, 3/4); "
             f"w-weighted Var = {res}, unweighted Var = {unweighted}; "
             f"sum_k w_k pi_k(1-pi_k) = {within} = UNC - {res}, but UNC - {unweighted} = {unc - unweighted}")

    def run():
        import jax.numpy as jnp

        from calib_jax.decompositions import brier_grouping

        dd = pc.sym_data(4, 3, weighted=True)
        gg = pc.group_exprs(dd)
        nd = pc.random_instances(dd, seed=2)
        within, unc, res = (pc.evaluate(t, nd) for t in _terms(dd, gg))
        err = 0.0
        for j, (p, y, q, w) in enumerate(nd.jax_draws()):
            out = pc.call(brier_grouping, p, y, q, weights=w)
            s = pc.field_of(out, "groups")
            w_in = float(jnp.sum(s.mass * s.pi * (1 - s.pi)))
            err = pc.worst(err, w_in - within[j], float(out.unc) - unc[j], float(out.res) - res[j],
                        w_in - (float(out.unc) - float(out.res)))
        return err

    pc.crosscheck(r, "calib_jax.decompositions.brier_grouping (unc, res, group summary)", run)
    return r
