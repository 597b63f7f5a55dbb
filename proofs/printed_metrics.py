r"""Metric formulas printed in "Calibration is Grouping" Appendix C: KL, generalised KL (α-divergence), bias.

* KL: the printed :math:`\frac1N\sum_i \pi_i\log(\pi_i/p_i)` keeps only the Y = 1 half of the
  Bernoulli divergence; it can be negative.  The divergence is
  :math:`\pi\log\frac{\pi}{p} + (1-\pi)\log\frac{1-\pi}{1-p} \ge 0`.
* α-divergence: the printed :math:`\frac{1}{\alpha(\alpha-1)}(\pi^\alpha + (\alpha-1)\pi -
  \alpha\pi p^{1-\alpha})` does not vanish at p = π.  The Amari α-divergence between
  Bernoulli laws is :math:`\frac{\pi^\alpha p^{1-\alpha} + (1-\pi)^\alpha(1-p)^{1-\alpha} - 1}{\alpha(\alpha-1)}`.
* bias: the printed ratio :math:`\bar p/\bar y` equals 1 for a model calibrated in the mean;
  the tables read it as a deviation, :math:`\bar p/\bar y - 1`.
"""

from __future__ import annotations

import sympy as sp

from proofs._common import ProofResult, call, crosscheck, refuted, register, worst


def _kl(t, p):
    return t * sp.log(t / p) + (1 - t) * sp.log((1 - t) / (1 - p))


def _amari(t, p, a):
    return (t**a * p ** (1 - a) + (1 - t) ** a * (1 - p) ** (1 - a) - 1) / (a * (a - 1))


@register("printed_metrics")
def prove() -> ProofResult:
    r = ProofResult(
        "printed_metrics",
        "App. C oracle metrics: full Bernoulli KL >= 0; Amari alpha-divergence (zero at p = pi, >= 0, "
        "KL limits); bias as pbar/ybar - 1",
        '"Calibration is Grouping" Appendix C (sufficient- and insufficient-information metric lists)',
        "exact evaluation of counterexamples; sympy simplify / limit; AM-GM and Gibbs lower bounds checked "
        "by exact zero tests",
    )
    t, p = sp.symbols("pi p", positive=True)
    a = sp.Symbol("alpha", positive=True)
    tc, pc = sp.symbols("pic pc", positive=True)  # 1 - pi, 1 - p
    # KL
    t0, p0 = sp.Rational(1, 2), sp.Rational(9, 10)
    half = t0 * sp.log(t0 / p0)
    full = _kl(t0, p0)
    refuted(r, "App. C KL", "KL(pi || p) = (1/N) sum_i pi_i log(pi_i / p_i)",
            bool(half < 0) and bool(full > 0),
            "exact evaluation: the printed sum is not a divergence (it is negative here); "
            "corrected: the full Bernoulli KL below",
            f"pi = 1/2, p = 9/10: printed = {sp.simplify(half)} = {float(half):.4f} < 0, "
            f"full KL = {sp.simplify(full)} = {float(full):.4f}")
    r.claim("App. C KL corrected (zero)", "KL(pi || pi) = 0 for the full Bernoulli KL",
            sp.simplify(_kl(t, t)) == 0, "sympy simplify")
    r.check("App. C KL corrected (>= 0)",
            "full KL >= pi (1 - p/pi) + (1-pi)(1 - (1-p)/(1-pi)) = 0 (log z <= z - 1, Gibbs)",
            t * (1 - p / t) + (1 - t) * (1 - (1 - p) / (1 - t)))
    # alpha-divergence
    a0, t1 = sp.Rational(1, 2), sp.Rational(1, 4)
    printed = lambda tt, pp, aa: (tt**aa + (aa - 1) * tt - aa * tt * pp ** (1 - aa)) / (aa * (aa - 1))
    at_eq = sp.nsimplify(printed(t1, t1, a0))
    refuted(r, "App. C generalized KL",
            "KL_alpha(pi || p) = (1/N) sum_i [pi_i^alpha + (alpha-1) pi_i - alpha pi_i p_i^(1-alpha)] / (alpha(alpha-1))",
            at_eq != 0,
            "exact evaluation at p = pi, where any divergence must vanish; corrected: Amari alpha-divergence "
            "between Bernoulli(pi) and Bernoulli(p)",
            f"alpha = 1/2, pi = p = 1/4: printed value = {at_eq} (= {float(at_eq):.4f}), not 0")
    r.claim("App. C alpha-divergence corrected (zero)", "D_alpha(pi || pi) = 0",
            sp.simplify(_amari(t, t, a)) == 0, "sympy simplify")
    r.check("App. C alpha-divergence corrected (>= 0 for 0 < alpha < 1)",
            "weighted AM-GM: pi^a p^(1-a) + (1-pi)^a (1-p)^(1-a) <= a pi + (1-a) p + a(1-pi) + (1-a)(1-p) = 1, "
            "and a(a-1) < 0",
            a * t + (1 - a) * p + a * (1 - t) + (1 - a) * (1 - p) - 1)
    t2, p2 = sp.Rational(3, 10), sp.Rational(7, 10)
    lim1 = sp.limit(_amari(t2, p2, a), a, 1)
    lim0 = sp.limit(_amari(t2, p2, a), a, 0)
    r.claim("App. C alpha-divergence corrected (limits)",
            "alpha -> 1 gives KL(pi || p), alpha -> 0 gives KL(p || pi)",
            sp.simplify(lim1 - _kl(t2, p2)) == 0 and sp.simplify(lim0 - _kl(p2, t2)) == 0,
            "sympy limit at pi = 3/10, p = 7/10")
    r.claim("App. C alpha-divergence corrected (alpha = 1/2)",
            "D_1/2 = 4 (1 - sqrt(pi p) - sqrt((1-pi)(1-p))) = 4 x squared Hellinger distance",
            sp.simplify(_amari(t, p, sp.Rational(1, 2)).subs({1 - t: tc, 1 - p: pc})
                        - 4 * (1 - sp.sqrt(t * p) - sp.sqrt(tc * pc))) == 0,
            "sympy simplify with 1 - pi, 1 - p replaced by positive symbols")
    # bias
    pb = (sp.Rational(1, 4) + sp.Rational(3, 4)) / 2
    yb = sp.Rational(1, 2)
    refuted(r, "App. C bias", "bias = pbar / ybar (and abs_bias = sum_k w_k |pbar_k / ybar_k|)",
            pb / yb == 1,
            "exact evaluation: for predictions calibrated in the mean the printed ratio is 1, not 0, so a "
            "table of 'bias' values near 0 can only be pbar/ybar - 1 (used in calib_jax.metrics.bias/abs_bias)",
            f"p = (1/4, 3/4), y = (0, 1): pbar = ybar = {yb}, printed bias = {pb / yb}, corrected bias = {pb / yb - 1}")
    f_kl = sp.lambdify((t, p), _kl(t, p), "numpy")
    f_am = sp.lambdify((t, p, a), _amari(t, p, a), "numpy")

    def run():
        import jax.numpy as jnp
        import numpy as np

        from calib_jax.metrics import abs_bias, bias, oracle_alpha_divergence, oracle_kl

        rng = np.random.default_rng(10)
        err = 0.0
        for _ in range(4):
            m = 12
            pp = rng.uniform(0.05, 0.95, size=m)
            tt = rng.uniform(0.05, 0.95, size=m)
            yy = rng.integers(0, 2, size=m).astype(float)
            field = np.repeat(np.arange(3), 4)
            yy[::4] = 1.0  # every field value has a click
            args = (jnp.asarray(pp), jnp.asarray(tt))
            err = worst(err, float(call(oracle_kl, *args)) - float(np.mean(f_kl(tt, pp))))
            for al in (0.3, 0.5, 0.8):
                err = worst(err, float(call(oracle_alpha_divergence, *args, alpha=al))
                            - float(np.mean(f_am(tt, pp, al))))
            err = worst(err, float(call(bias, jnp.asarray(pp), jnp.asarray(yy))) - (pp.mean() / yy.mean() - 1))
            ref = sum(np.mean(field == k) * abs(pp[field == k].mean() / yy[field == k].mean() - 1) for k in range(3))
            err = worst(err, float(call(abs_bias, jnp.asarray(pp), jnp.asarray(yy), jnp.asarray(field), n_groups=3))
                        - ref)
        return err

    crosscheck(r, "calib_jax.metrics.oracle_kl / oracle_alpha_divergence / bias / abs_bias", run)
    return r
