r"""Grouping decomposition of the negative log-likelihood ("Calibration is Grouping" Appendix B, eqs. 14-15).

.. math::
    \mathrm{NLL} = H(\bar\pi) + \sum_k w_k \mathrm{KL}(\pi_k\|\mu_k)
      - \Bigl(H(\bar\pi) - \sum_k w_k H(\pi_k)\Bigr) + \sum_k w_k R_k
      - \sum_k w_k \frac{\gamma_k}{\mu_k(1-\mu_k)}

Logarithms enter through placeholder symbols (``L[p_i] = log p_i``, ``L[1-mu_k] = log(1 - mu_k)``,
...).  After writing ``log(a/b) = log a - log b`` (valid for positive a, b) every expression
is linear in the placeholders with rational coefficients, so the exact zero test proves that
each coefficient vanishes, which is sufficient for the identity.
"""

from __future__ import annotations

import sympy as sp

from proofs import _common as pc


class _Logs:
    """Placeholders for logarithms of data and group statistics."""

    def __init__(self, d, g):
        n, K = d.n, d.K
        self.lp = sp.symbols(f"Lp1:{n + 1}")  # log p_i
        self.lq = sp.symbols(f"Lq1:{n + 1}")  # log(1 - p_i)
        self.lm = sp.symbols(f"Lmu1:{K + 1}")  # log mu_k
        self.lmc = sp.symbols(f"Lmuc1:{K + 1}")  # log(1 - mu_k)
        self.lpi = sp.symbols(f"Lpi1:{K + 1}")  # log pi_k
        self.lpic = sp.symbols(f"Lpic1:{K + 1}")  # log(1 - pi_k)
        self.lyb, self.lybc = sp.symbols("Lybar Lybarc")  # log ybar, log(1 - ybar)

    def numeric(self, d, g, nd):
        import numpy as np

        def log(z):  # 0 log 0 = 0: a zero argument only ever has a zero coefficient
            with np.errstate(divide="ignore"):
                return np.where(z > 0, np.log(np.where(z > 0, z, 1.0)), 0.0)

        out = {}
        for i in range(d.n):
            out[self.lp[i]] = np.log(nd.values[d.p[i]])
            out[self.lq[i]] = np.log1p(-nd.values[d.p[i]])
        for k in range(d.K):
            mu, pi = pc.evaluate(g.mu[k], nd), pc.evaluate(g.pi[k], nd)
            out[self.lm[k]], out[self.lmc[k]] = log(mu), log(1 - mu)
            out[self.lpi[k]], out[self.lpic[k]] = log(pi), log(1 - pi)
        yb = pc.evaluate(d.ybar, nd)
        out[self.lyb], out[self.lybc] = log(yb), log(1 - yb)
        return out


def _H(a, la, lac):
    return -(a * la + (1 - a) * lac)


def _KL(a, la, lac, lb, lbc):
    return a * (la - lb) + (1 - a) * (lac - lbc)


def _terms(d, g, L):
    """Symbolic NLL and its five terms (UNC, REL, RES, CURV, COV)."""
    K = d.K
    phi = [-(d.y[i] * L.lp[i] + (1 - d.y[i]) * L.lq[i]) for i in range(d.n)]
    nll = d.mean(phi)
    yb = d.ybar
    unc = _H(yb, L.lyb, L.lybc)
    rel = sp.Add(*[g.w[k] * _KL(g.pi[k], L.lpi[k], L.lpic[k], L.lm[k], L.lmc[k]) for k in range(K)])
    res = unc - sp.Add(*[g.w[k] * _H(g.pi[k], L.lpi[k], L.lpic[k]) for k in range(K)])
    curv = sp.Add(*[g.w[k] * _remainder(d, g, L, k) for k in range(K)])
    cov = sp.Add(*[g.w[k] * g.cov[k] / (g.mu[k] * (1 - g.mu[k])) for k in range(K)])
    return nll, unc, rel, res, curv, cov


def _remainder(d, g, L, k):
    """R_k = E[phi_Y(p) - phi_Y(mu_k) - phi_Y'(mu_k)(p - mu_k) | G_k] (Bregman remainder)."""
    mu = g.mu[k]
    r = []
    for i in range(d.n):
        yi = d.y[i]
        phi_p = -(yi * L.lp[i] + (1 - yi) * L.lq[i])
        phi_m = -(yi * L.lm[k] + (1 - yi) * L.lmc[k])
        dphi = -yi / mu + (1 - yi) / (1 - mu)
        r.append(phi_p - phi_m - dphi * (d.p[i] - mu))
    return g.cond(d, k, r)


def _taylor(r: pc.ProofResult) -> None:
    m, x = sp.symbols("mu p", positive=True)
    t, u = sp.symbols("t u", positive=True)
    dlt = x - m
    phi1 = lambda z: -sp.log(z)
    phi0 = lambda z: -sp.log(1 - z)
    r.claim("App. B Step 2 derivatives",
            "phi_Y'(mu) = -Y/mu + (1-Y)/(1-mu), phi_Y''(xi) = Y/xi^2 + (1-Y)/(1-xi)^2",
            all(sp.simplify(sp.diff(-(Y * sp.log(u) + (1 - Y) * sp.log(1 - u)), u) - (-Y / u + (1 - Y) / (1 - u))) == 0
                and sp.simplify(sp.diff(-(Y * sp.log(u) + (1 - Y) * sp.log(1 - u)), u, 2) - (Y / u**2 + (1 - Y) / (1 - u) ** 2)) == 0
                for Y in (0, 1)), "sympy diff + simplify for Y = 0 and Y = 1")
    integrand1 = (1 - t) * sp.diff(phi1(u), u, 2).subs(u, m + t * dlt) * dlt**2
    xi = m + t * dlt
    F = -x / xi - sp.log(xi)  # antiderivative in t, verified by differentiation below
    integral1 = F.subs(t, 1) - F.subs(t, 0)
    target1 = phi1(x) - phi1(m) - sp.diff(phi1(u), u).subs(u, m) * dlt
    ok1 = sp.simplify(sp.diff(F, t) - integrand1) == 0 and \
        sp.simplify(sp.expand_log(integral1 - target1, force=True)) == 0
    r.claim("App. B Step 2 Taylor, Y = 1",
            "phi_1(p) = phi_1(mu) + phi_1'(mu) delta + int_0^1 (1-t) phi_1''(mu + t delta) delta^2 dt",
            ok1, "antiderivative F(t) = -p/xi - log xi, xi = mu + t delta (F' = integrand checked), F(1) - F(0) "
            "(p, mu > 0 so mu + t delta > 0 on [0, 1])")
    integrand0 = (1 - t) * sp.diff(phi0(u), u, 2).subs(u, m + t * dlt) * dlt**2
    target0 = phi0(x) - phi0(m) - sp.diff(phi0(u), u).subs(u, m) * dlt
    swap = {x: 1 - x, m: 1 - m}
    ok0 = sp.simplify(integrand0 - integrand1.subs(swap, simultaneous=True)) == 0 and \
        sp.simplify(target0 - target1.subs(swap, simultaneous=True)) == 0
    r.claim("App. B Step 2 Taylor, Y = 0",
            "same expansion for phi_0(p) = -log(1-p)",
            ok0, "the Y = 0 integrand and Taylor residual are the Y = 1 ones at (1-p, 1-mu); "
            "the Y = 1 case (proved above) applies because 1-p, 1-mu > 0")
    # R_k >= 0: closed form of the per-observation remainder and its sign.
    s = sp.symbols("s", positive=True)
    G = s - sp.log(s)  # antiderivative of (s - 1)/s, verified by differentiation
    g_int = G.subs(s, u) - G.subs(s, 1) if sp.simplify(sp.diff(G, s) - (s - 1) / s) == 0 else sp.nan
    ok_closed = sp.simplify(sp.expand_log(target1 - (x / m - 1 - sp.log(x / m)), force=True)) == 0
    ok_g = sp.simplify(g_int - (u - 1 - sp.log(u))) == 0
    r.claim("App. B R_k >= 0",
            "R_k = E[int_0^1 (1-t) phi_Y''(mu+t delta) delta^2 dt | G_k] >= 0",
            ok_closed and ok_g,
            "integrand (1-t) * [Y/xi^2 + (1-Y)/(1-xi)^2] * delta^2 >= 0 for t in [0,1] and xi in (0,1); "
            "closed form for Y=1: r = u - 1 - log u with u = p/mu, and u - 1 - log u = int_1^u (s-1)/s ds "
            "(verified), whose integrand has the sign of u - 1, hence r >= 0 (Y=0: u = (1-p)/(1-mu)); "
            "R_k is a non-negative weighted mean of such r_i")


def _linear_term(r: pc.ProofResult, d, g) -> None:
    K = d.K
    for k in range(K):  # K = 1 with generic weights: every group of any partition
        mu, cov = g.mu[k], g.cov[k]
        delta = [pi - mu for pi in d.p]
        c = lambda z, k=k: g.cond(d, k, z)
        lin = c([(-yi / mu + (1 - yi) / (1 - mu)) * di for yi, di in zip(d.y, delta)])
        e_d = c(delta)
        e_yd = c([yi * di for yi, di in zip(d.y, delta)])
        e_1yd = c([(1 - yi) * di for yi, di in zip(d.y, delta)])
        sfx = ""
        r.check("App. B linear term, E[delta|G_k] = 0" + sfx, "E[delta | G_k] = 0", e_d)
        r.check("App. B linear term, E[Y delta|G_k] = gamma_k" + sfx, "E[Y delta | G_k] = gamma_k", e_yd - cov)
        r.check("App. B linear term, E[(1-Y) delta|G_k] = -gamma_k" + sfx,
                "E[(1-Y) delta | G_k] = -gamma_k (not stated in the paper; follows from the two above)",
                e_1yd + cov)
        if k == 0:
            ex = "; ".join(_linear_counterexample())
            r.false_as_printed(
                "App. B linear term, 1st equality" + sfx,
                "E[phi'_Y(mu_k) delta | G_k] = -gamma_k/mu_k - (1/(1-mu_k)) E[(1-Y) delta | G_k]",
                lin - (-cov / mu - e_1yd / (1 - mu)),
                ex + ". Corrected: E[phi'_Y(mu_k) delta|G_k] = -gamma_k/mu_k + (1/(1-mu_k)) E[(1-Y)delta|G_k] "
                "(proved below)")
            r.check("App. B linear term, 1st equality corrected" + sfx,
                    "E[phi'_Y(mu_k) delta | G_k] = -gamma_k/mu_k + (1/(1-mu_k)) E[(1-Y) delta | G_k]",
                    lin - (-cov / mu + e_1yd / (1 - mu)))
            r.check("App. B linear term, 2nd equality (given the 1st)" + sfx,
                    "-gamma_k/mu_k - (1/(1-mu_k)) E[(1-Y)delta|G_k] = -gamma_k/mu_k + gamma_k/(1-mu_k)",
                    (-cov / mu - e_1yd / (1 - mu)) - (-cov / mu + cov / (1 - mu)))
            gm, mm = sp.symbols("gamma mu", positive=True)
            r.false_as_printed(
                "App. B linear term, 3rd equality",
                "-gamma_k/mu_k + gamma_k/(1-mu_k) = -gamma_k/(mu_k(1-mu_k))",
                (-gm / mm + gm / (1 - mm)) - (-gm / (mm * (1 - mm))),
                "gamma = 1/100, mu = 1/4: LHS = -1/75 (= -0.01333), RHS = -4/75 (= -0.05333); in general "
                "LHS = gamma (2 mu - 1)/(mu (1 - mu)). The two printed errors do not cancel; only the final "
                "value is right")
        r.check("App. B linear term, result" + sfx,
                "E[phi'_Y(mu_k) delta | G_k] = -gamma_k/(mu_k(1-mu_k))",
                lin - (-cov / (mu * (1 - mu))))


def _linear_counterexample() -> list[str]:
    d = pc.sym_data(4, 1, weighted=False, hard=[0, 0, 0, 0])
    g = pc.group_exprs(d)
    vals = dict(zip(d.p, [sp.Rational(1, 10), sp.Rational(2, 10), sp.Rational(3, 10), sp.Rational(4, 10)]))
    vals.update(zip(d.y, [0, 0, 1, 1]))
    mu, cov = g.mu[0].subs(vals), g.cov[0].subs(vals)
    delta = [pi.subs(vals) - mu for pi in d.p]
    ys = [vals[yi] for yi in d.y]
    true = sum((-yi / mu + (1 - yi) / (1 - mu)) * di for yi, di in zip(ys, delta)) / 4
    e1yd = sum((1 - yi) * di for yi, di in zip(ys, delta)) / 4
    printed = -cov / mu - e1yd / (1 - mu)
    return [f"p = (1/10, 2/10, 3/10, 4/10), y = (0, 0, 1, 1), one group: mu = {mu}, gamma = {cov}, "
            f"E[(1-Y)delta] = {e1yd}; E[phi' delta] = {true} (= {float(true):.6g}) but the printed "
            f"right-hand side is {printed} (= {float(printed):.6g})"]


@pc.proof(
    "nll_grouping",
    "NLL = UNC + REL - RES + CURV - COV with UNC = H(ybar), REL = sum_k w_k KL(pi_k||mu_k), "
    "RES = H(ybar) - sum_k w_k H(pi_k), CURV = sum_k w_k R_k (R_k >= 0), COV = sum_k w_k gamma_k/(mu_k(1-mu_k))",
    '"Calibration is Grouping" Appendix B (eqs. 14, 15 and Step 3)',
    "Taylor expansion with integral remainder integrated symbolically for Y = 0 and 1; "
    "every other step by exact zero tests on symbolic data (n=4, K=2, soft q, symbolic weights, "
    "y^2 = y) with log placeholders; end to end on soft data n=3, K=2",
)
def prove(r: pc.ProofResult) -> pc.ProofResult:
    d = pc.sym_data(4, 2, weighted=True)
    g = pc.group_exprs(d)
    L = _Logs(d, g)
    s = sp.symbols(f"s1:{d.n + 1}")
    r.check("App. B Step 1 (14)", "E[S] = sum_k w_k E[S | G_k] for any per-observation loss s_i",
            d.mean(s) - sp.Add(*[g.w[k] * g.cond(d, k, s) for k in range(d.K)]))
    _taylor(r)
    for k in range(d.K):
        mu, pi = g.mu[k], g.pi[k]
        const = g.cond(d, k, [-(yi * L.lm[k] + (1 - yi) * L.lmc[k]) for yi in d.y])
        r.check(f"App. B constant term (k={k + 1})",
                "E[phi_Y(mu_k) | G_k] = -pi_k log mu_k - (1-pi_k) log(1-mu_k)",
                const - (-(pi * L.lm[k] + (1 - pi) * L.lmc[k])))
        r.check(f"App. B cross-entropy identity (k={k + 1})",
                "-pi_k log mu_k - (1-pi_k) log(1-mu_k) = H(pi_k) + KL(pi_k || mu_k)",
                -(pi * L.lm[k] + (1 - pi) * L.lmc[k])
                - (_H(pi, L.lpi[k], L.lpic[k]) + _KL(pi, L.lpi[k], L.lpic[k], L.lm[k], L.lmc[k])))
    # Per-group steps: one group with arbitrary positive membership weights c_i = v_i q_ik
    # (covers every group of every soft or hard, weighted or unweighted partition).
    dg = pc.sym_data(4, 1, weighted=True, hard=[0, 0, 0, 0])
    gg1 = pc.group_exprs(dg)
    Lg = _Logs(dg, gg1)
    _linear_term(r, dg, gg1)
    phi = [-(dg.y[i] * Lg.lp[i] + (1 - dg.y[i]) * Lg.lq[i]) for i in range(dg.n)]
    mu, pi = gg1.mu[0], gg1.pi[0]
    rhs = (_H(pi, Lg.lpi[0], Lg.lpic[0]) + _KL(pi, Lg.lpi[0], Lg.lpic[0], Lg.lm[0], Lg.lmc[0])
           - gg1.cov[0] / (mu * (1 - mu)) + _remainder(dg, gg1, Lg, 0))
    r.check("App. B eq. 15 (one group, weights c_i = v_i q_ik symbolic)",
            "E[S_NLL | G_k] = H(pi_k) + KL(pi_k||mu_k) - gamma_k/(mu_k(1-mu_k)) + R_k",
            gg1.cond(dg, 0, phi) - rhs, binary=dg.y)
    # Step 3 on symbolic data, end to end.
    for label, dd in (("soft weighted n=2 K=2", pc.sym_data(2, 2, weighted=True)),
                      ("hard weighted n=4 K=2", pc.sym_data(4, 2, weighted=True, hard=[0, 0, 1, 1]))):
        gg = pc.group_exprs(dd)
        LL = _Logs(dd, gg)
        nll, unc, rel, res, curv, cov = _terms(dd, gg, LL)
        r.check(f"App. B Step 3 end to end ({label})", "NLL = UNC + REL - RES + CURV - COV",
                nll - (unc + rel - res + curv - cov), binary=dd.y)
    # The "entropy identity" H(ybar) - sum w H(pi_k) >= 0 (an inequality).
    K = d.K
    wsum = sp.Add(*[g.w[k] * g.pi[k] for k in range(K)])
    r.check("App. B Step 3 'entropy identity' (a)",
            "sum_k w_k pi_k = ybar, so RES = H(ybar) - sum_k w_k H(pi_k) = sum_k w_k KL(pi_k || ybar)",
            (wsum - d.ybar) ** 2 + (
                (_H(d.ybar, L.lyb, L.lybc) - sp.Add(*[g.w[k] * _H(g.pi[k], L.lpi[k], L.lpic[k]) for k in range(K)]))
                - sp.Add(*[g.w[k] * _KL(g.pi[k], L.lpi[k], L.lpic[k], L.lyb, L.lybc) for k in range(K)])) ** 2)
    a, b = sp.symbols("a b", positive=True)
    r.check("App. B Step 3 'entropy identity' (b)",
            "KL(a||b) >= 0 (Gibbs): with log z <= z - 1, KL(a||b) >= -a(b/a - 1) - (1-a)((1-b)/(1-a) - 1) = 0",
            -a * (b / a - 1) - (1 - a) * ((1 - b) / (1 - a) - 1),
            method="exact zero test of the lower bound; log z <= z - 1 is z - 1 - log z = int_1^z (s-1)/s ds >= 0 "
            "(proved in 'App. B R_k >= 0'); so RES >= 0 (the paper calls this inequality an identity)")
    dh = pc.sym_data(4, 2, weighted=True, hard=[0, 0, 1, 1])
    gh = pc.group_exprs(dh)
    Lh = _Logs(dh, gh)
    a_, b_ = sp.symbols("a b", positive=True)
    sub = {dh.p[0]: a_, dh.p[1]: a_, dh.p[2]: b_, dh.p[3]: b_}
    # p_i = mu_k inside group k, so log p_i = log mu_k and log(1-p_i) = log(1-mu_k)
    sub.update({Lh.lp[0]: Lh.lm[0], Lh.lp[1]: Lh.lm[0], Lh.lp[2]: Lh.lm[1], Lh.lp[3]: Lh.lm[1],
                Lh.lq[0]: Lh.lmc[0], Lh.lq[1]: Lh.lmc[0], Lh.lq[2]: Lh.lmc[1], Lh.lq[3]: Lh.lmc[1]})
    r.check("App. B after Step 3",
            "scores constant within each group => R_k = 0 and gamma_k = 0 (CURV = COV = 0)",
            sp.Add(*[_remainder(dh, gh, Lh, k).subs(sub) ** 2 + gh.cov[k].subs(sub) ** 2 for k in range(2)]))
    _crosscheck(r)
    return r


def _crosscheck(r: pc.ProofResult) -> None:
    for label, d, hard in (("soft, weighted", pc.sym_data(4, 2, weighted=True), None),
                           ("hard, unweighted", pc.sym_data(5, 2, weighted=False, hard=[0, 0, 1, 1, 1]),
                            [0, 0, 1, 1, 1])):
        def run(d=d, hard=hard):
            import jax.numpy as jnp

            from calib_jax.decompositions import nll_grouping
            from calib_jax.metrics import nll as jnll

            g = pc.group_exprs(d)
            L = _Logs(d, g)
            nd = pc.random_instances(d, seed=4, hard=hard)
            extra = L.numeric(d, g, nd)
            terms = [pc.evaluate(t, nd, extra) for t in _terms(d, g, L)]
            err = 0.0
            for j, (p, y, q, w) in enumerate(nd.jax_draws()):
                out = pc.call(nll_grouping, p, y, q, n_groups=d.K if hard else None, weights=w)
                got = [pc.call(jnll, p, y, weights=w)] + [
                    pc.field_of(out, nm) for nm in ("unc", "rel", "res", "curv", "cov")]
                err = pc.worst(err, *[float(a_) - t_[j] for a_, t_ in zip(got, terms)])
                rk = pc.field_of(out, "curv_k")
                if float(jnp.min(rk)) < 0:
                    return float("inf")
            return err

        pc.crosscheck(r, f"calib_jax.decompositions.nll_grouping + metrics.nll ({label})", run)

