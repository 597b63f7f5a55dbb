r"""Cauchy-Schwarz bound on the within-group covariance ("Calibration is Grouping" Sec. 2.3 and App. A.2).

.. math::
    |\gamma_k| \le \sigma_k \sqrt{\pi_k(1-\pi_k)}, \qquad
    \sigma_k^2 - 2\sigma_k\sqrt{\pi_k(1-\pi_k)} \le \sigma_k^2 - 2\gamma_k
      \le \sigma_k^2 + 2\sigma_k\sqrt{\pi_k(1-\pi_k)} .

Proof: the weighted Lagrange identity
:math:`(\sum c a^2)(\sum c b^2) - (\sum c a b)^2 = \tfrac12\sum_{i,j} c_i c_j (a_i b_j - a_j b_i)^2`
with :math:`a_i = p_i - \mu_k`, :math:`b_i = y_i - \pi_k`, :math:`c_i = v_i q_{ik} \ge 0`,
and :math:`\mathrm{Var}(Y|G_k) = \pi_k(1-\pi_k)` for binary labels.
"""

from __future__ import annotations

import sympy as sp

from proofs import _common as pc


@pc.proof(
    "cauchy_schwarz",
    "|gamma_k| <= sigma_k sqrt(pi_k(1-pi_k)) and "
    "sigma_k^2 - 2 sigma_k sqrt(pi_k(1-pi_k)) <= sigma_k^2 - 2 gamma_k <= sigma_k^2 + 2 sigma_k sqrt(pi_k(1-pi_k))",
    '"Calibration is Grouping" Sec. 2.3 and App. A.2 (\'Sign of Delta\')',
    "weighted Lagrange identity (sum of squares) on symbolic data, one group with n = 4 and "
    "arbitrary positive weights c_i = v_i q_ik, y^2 = y; the two-sided bound from |gamma| <= sigma s",
)
def prove(r: pc.ProofResult) -> pc.ProofResult:
    n = 4
    d = pc.sym_data(n, 1, weighted=True, hard=[0] * n)
    g = pc.group_exprs(d)
    c, W = d.v, g.W[0]
    a = [pi - g.mu[0] for pi in d.p]
    b = [yi - g.pi[0] for yi in d.y]
    A = sp.symbols("a1:5")
    B = sp.symbols("b1:5")
    lag = lambda a, b: sp.Rational(1, 2) * sp.Add(*[c[i] * c[j] * (a[i] * b[j] - a[j] * b[i]) ** 2
                                                     for i in range(n) for j in range(n)])
    r.check("Lagrange identity (generic vectors)",
            "(sum c a^2)(sum c b^2) - (sum c a b)^2 = 1/2 sum_ij c_i c_j (a_i b_j - a_j b_i)^2",
            sp.Add(*[c[i] * A[i] ** 2 for i in range(n)]) * sp.Add(*[c[i] * B[i] ** 2 for i in range(n)])
            - sp.Add(*[c[i] * A[i] * B[i] for i in range(n)]) ** 2 - lag(A, B))
    r.check("Var(Y | G_k) = pi_k (1 - pi_k)", "E[(Y - pi_k)^2 | G_k] = pi_k(1-pi_k) (y^2 = y)",
            g.cond(d, 0, [bi ** 2 for bi in b]) - g.pi[0] * (1 - g.pi[0]), binary=d.y)
    r.check("sum-of-squares certificate",
            "sigma_k^2 pi_k(1-pi_k) - gamma_k^2 = (1/(2 W_k^2)) sum_ij c_i c_j (a_i b_j - a_j b_i)^2 >= 0",
            g.var[0] * g.pi[0] * (1 - g.pi[0]) - g.cov[0] ** 2 - lag(a, b) / W ** 2, binary=d.y)
    sg, s_, ga = sp.symbols("sigma s gamma", nonnegative=True)
    r.check("two-sided bound",
            "(sigma^2 + 2 sigma s) - (sigma^2 - 2 gamma) = 2(sigma s + gamma) and "
            "(sigma^2 - 2 gamma) - (sigma^2 - 2 sigma s) = 2(sigma s - gamma); both >= 0 because |gamma| <= sigma s",
            ((sg**2 + 2 * sg * s_) - (sg**2 - 2 * ga) - 2 * (sg * s_ + ga)) ** 2
            + ((sg**2 - 2 * ga) - (sg**2 - 2 * sg * s_) - 2 * (sg * s_ - ga)) ** 2)
    # Qualitative claims next to the bound.
    half = sp.Rational(1, 2)
    r.claim("consequence", "gamma_k <= sigma_k / 2 (since pi(1-pi) <= 1/4): a group's contribution "
            "sigma_k^2 - 2 gamma_k can be negative only if sigma_k < 2 sqrt(pi_k(1-pi_k)) <= 1",
            sp.simplify(sp.Rational(1, 4) - half * (1 - half)) == 0 and
            sp.solve(sp.Symbol("x") * (1 - sp.Symbol("x")) - sp.Rational(1, 4), sp.Symbol("x")) == [half],
            "max of pi(1-pi) is 1/4 at pi = 1/2; sigma^2 - 2 gamma >= sigma^2 - 2 sigma s = sigma(sigma - 2 s)")
    d2 = pc.sym_data(2, 1, weighted=False, hard=[0, 0])
    g2 = pc.group_exprs(d2)
    ex = {d2.p[0]: sp.Rational(1, 5), d2.p[1]: sp.Rational(4, 5), d2.y[0]: 0, d2.y[1]: 1}
    v2, c2 = g2.var[0].subs(ex), g2.cov[0].subs(ex)
    r.remark("App. A.2: Delta negative through groups with 'small sigma_k' and 'large positive gamma_k'",
             "by the bound, gamma_k <= sigma_k sqrt(pi_k(1-pi_k)) <= sigma_k/2, so a small sigma_k forces a small "
             "gamma_k; negativity needs gamma_k > sigma_k^2/2, i.e. sigma_k < 2 sqrt(pi_k(1-pi_k)) (example below)",
             "exact evaluation",
             f"one group, y = (0, 1), p = (1/5, 4/5): sigma^2 = {v2}, gamma = {c2}, sigma^2 - 2 gamma = {v2 - 2 * c2} < 0")
    s_val = sp.sqrt(sp.Rational(3, 100) * sp.Rational(97, 100))
    sig = sp.Rational(1, 100)
    lower = sig**2 - 2 * sig * s_val
    r.remark("Sec. 2.3 / App. A.2: for small pi_k the lower bound is said to be near sigma_k^2",
             "the lower bound sigma^2 - 2 sigma s is close to sigma^2 only when sigma >> s = sqrt(pi(1-pi)); "
             "for small pi_k, s is about sqrt(pi_k), and whenever sigma_k is below that the lower bound is "
             "negative and much larger in magnitude than sigma^2, so the bound alone does not make Delta positive",
             "exact evaluation",
             f"pi_k = 0.03, sigma_k = 0.01: s = {float(s_val):.4f}, lower bound = {float(lower):.5f} "
             f"vs sigma^2 = {float(sig**2):.5f} (the bound is {float(-lower / sig**2):.0f}x sigma^2 in magnitude "
             "and negative)")

    def run():
        import jax.numpy as jnp

        from calib_jax.decompositions import group_summary

        dd = pc.sym_data(6, 3, weighted=True)
        nd = pc.random_instances(dd, seed=6)
        err = 0.0
        for j, (pj, yj, qj, wj) in enumerate(nd.jax_draws()):
            s = pc.call(group_summary, pj, yj, qj, weights=wj)
            gap = s.var * s.pi * (1 - s.pi) - s.cov**2  # must be >= 0 (sum of squares)
            err = pc.worst(err, float(jnp.maximum(-jnp.min(gap), 0.0)))
            # the certificate evaluated from the raw data equals the calib_jax gap
            p, y, w, q = (nd.probs[j], nd.labels[j], nd.weights[j], nd.groups[j])
            for k in range(dd.K):
                cc = w * q[:, k]
                W = cc.sum()
                aa, bb = p - float(s.mu[k]), y - float(s.pi[k])
                cert = 0.5 * float((cc[:, None] * cc[None, :] * (aa[:, None] * bb[None, :]
                                                                  - aa[None, :] * bb[:, None]) ** 2).sum()) / W**2
                err = pc.worst(err, cert - float(gap[k]))
        return err

    pc.crosscheck(r, "calib_jax.decompositions.group_summary (var, cov, pi): gap >= 0 and = SOS certificate", run)
    return r
