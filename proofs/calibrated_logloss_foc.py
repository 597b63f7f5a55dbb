r"""First-order condition of the Calibrated Log Loss bias fit ("Calibration-then-Calculation" §3, eq. 6).

For a shift c of the logits on the test-validation part,

.. math::
    L(c) = \frac{1}{V}\sum_i v_i\,[-y_i\log\sigma(l_i + c) - (1-y_i)\log(1-\sigma(l_i+c))],\quad
    L'(c) = \frac{1}{V}\sum_i v_i(\sigma(l_i + c) - y_i),\quad
    L''(c) = \frac{1}{V}\sum_i v_i\,\sigma(1-\sigma) > 0 ,

so the unique minimiser c* (it exists iff 0 < ȳ < 1) makes the bias-adjusted predictions
calibrated in the mean on that part: :math:`\sum_i v_i\sigma(l_i + c^*) = \sum_i v_i y_i`.
"""

from __future__ import annotations

import sympy as sp

from proofs._common import ProofResult, call, crosscheck, register, worst


@register("calibrated_logloss_foc")
def prove() -> ProofResult:
    r = ProofResult(
        "calibrated_logloss_foc",
        "at the optimal logit shift c*, mean_v sigma(l_i + c*) = mean_v y_i on the test-validation split",
        '"Calibration-then-Calculation" §3 (eq. 6 and the calibration statement after it)',
        "sympy diff + simplify on symbolic data (n = 4 logits, weights, labels); y in {0, 1} per observation",
    )
    n = 4
    ls = sp.symbols(f"l1:{n + 1}", real=True)
    ys = sp.symbols(f"y1:{n + 1}")
    vs = sp.symbols(f"v1:{n + 1}", positive=True)
    c = sp.Symbol("c", real=True)
    sig = lambda u: 1 / (1 + sp.exp(-u))
    V = sp.Add(*vs)
    terms = [v * (-y * sp.log(sig(l + c)) - (1 - y) * sp.log(1 - sig(l + c))) for v, y, l in zip(vs, ys, ls)]
    u, yy = sp.Symbol("u", real=True), sp.Symbol("y")
    per = -yy * sp.log(sig(u)) - (1 - yy) * sp.log(1 - sig(u))
    r.claim("per-observation derivative", "d/du [-y log sigma(u) - (1-y) log(1-sigma(u))] = sigma(u) - y",
            sp.simplify(sp.diff(per, u) - (sig(u) - yy)) == 0, "sympy diff + simplify")
    r.claim("per-observation second derivative", "d^2/du^2 [...] = sigma(u)(1 - sigma(u)) > 0",
            sp.simplify(sp.diff(per, u, 2) - sig(u) * (1 - sig(u))) == 0, "sympy diff + simplify")
    # L(c) = (1/V) sum_i terms_i: differentiate term by term (linearity), each term by the chain rule
    ok1 = all(sp.simplify(sp.diff(t_, c) - v * (sig(l + c) - y)) == 0 for t_, v, y, l in zip(terms, vs, ys, ls))
    r.claim("L'(c)", "L'(c) = (1/V) sum_i v_i (sigma(l_i + c) - y_i)  (n = 4, weighted)", ok1,
            "sympy diff + simplify of each summand of the n = 4 weighted loss (differentiation is linear)")
    ok2 = all(sp.simplify(sp.diff(t_, c, 2) - v * sig(l + c) * (1 - sig(l + c))) == 0
              for t_, v, l in zip(terms, vs, ls))
    r.claim("L''(c) > 0", "L''(c) = (1/V) sum_i v_i sigma(l_i + c)(1 - sigma(l_i + c)) > 0 (strictly convex)",
            ok2, "sympy diff + simplify per summand; each summand is a product of positive factors")
    V = sp.Add(*vs)
    lhs = sp.Add(*[v * (sig(l + c) - y) for v, y, l in zip(vs, ys, ls)]) / V
    rhs = sp.Add(*[v * sig(l + c) for v, l in zip(vs, ls)]) / V - sp.Add(*[v * y for v, y in zip(vs, ys)]) / V
    r.claim("first-order condition", "L'(c*) = 0  <=>  sum_i v_i sigma(l_i + c*) / V = sum_i v_i y_i / V",
            sp.expand(lhs - rhs) == 0, "exact rearrangement of L'(c) (sympy expand)")
    r.claim("existence", "sum_i v_i sigma(l_i + c) increases from 0 (c -> -inf) to V (c -> +inf), so a root "
            "exists iff 0 < sum v y < V (both classes present)",
            all(sp.limit(sig(ls[0] + c), c, lim) == val for lim, val in ((-sp.oo, 0), (sp.oo, 1))),
            "sympy limits + monotonicity (L'' > 0)")
    f_sig = sp.lambdify((ls[0], c), sig(ls[0] + c), "numpy")

    def run():
        import jax
        import jax.numpy as jnp
        import numpy as np
        from scipy.optimize import brentq

        from calib_jax.metrics import calibrated_log_loss, fit_logit_bias, nll_logits

        grad = jax.jit(jax.grad(lambda c_, l_, y_, w_: nll_logits(l_ + c_, y_, weights=w_)))

        def one(rng):
            err = 0.0
            m = 40
            lo = rng.normal(-1.0, 2.0, size=m)
            y = (rng.uniform(size=m) < 1 / (1 + np.exp(-(lo + 0.7)))).astype(float)
            y[:2] = (0.0, 1.0)
            w = rng.uniform(0.5, 2.0, size=m)
            mask = np.zeros(m, bool)
            mask[: m // 2] = True
            cstar = float(call(fit_logit_bias, jnp.asarray(lo[mask]), jnp.asarray(y[mask]),
                               weights=jnp.asarray(w[mask])))
            # FOC: the shifted predictions are calibrated in the (weighted) mean on the split
            err = worst(err, np.sum(w[mask] * f_sig(lo[mask], cstar)) / np.sum(w[mask])
                        - np.sum(w[mask] * y[mask]) / np.sum(w[mask]))
            ref_c = brentq(lambda cc: np.sum(w[mask] * (f_sig(lo[mask], cc) - y[mask])), -30, 30, xtol=1e-14)
            err = worst(err, cstar - ref_c)
            cll = call(calibrated_log_loss, jnp.asarray(lo), jnp.asarray(y), val_mask=jnp.asarray(mask),
                       weights=jnp.asarray(w))
            ref = call(nll_logits, jnp.asarray(lo[~mask] + ref_c), jnp.asarray(y[~mask]),
                       weights=jnp.asarray(w[~mask]))
            err = worst(err, float(cll) - float(ref))
            g = grad(jnp.asarray(cstar), jnp.asarray(lo[mask]), jnp.asarray(y[mask]), jnp.asarray(w[mask]))
            return worst(err, float(g))

        rng = np.random.default_rng(9)
        return max(one(rng) for _ in range(4))

    crosscheck(r, "calib_jax.metrics.fit_logit_bias / calibrated_log_loss (FOC, scipy brentq root)", run, tol=1e-8)
    return r
