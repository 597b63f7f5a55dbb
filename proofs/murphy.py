r"""Murphy's decomposition for forecasts with discrete levels ("Calibration is Grouping" Appendix A.1, eq. 13).

.. math::
    \mathrm{BS} = \bar Y(1-\bar Y) + \sum_r \frac{n_r}{n}(p_r - o_r)^2
                  - \sum_r \frac{n_r}{n}(o_r - \bar Y)^2 .

Every displayed step of A.1 is checked on symbolic data (n = 5 observations on R = 2
forecast levels, as printed; and a weighted variant with R = 3 levels).
"""

from __future__ import annotations

import sympy as sp

from proofs import _common as pc


def _setup(levels: list[int], weighted: bool):
    n, R = len(levels), max(levels) + 1
    Y = sp.symbols(f"y1:{n + 1}")
    f = sp.symbols(f"f1:{R + 1}")  # forecast level values p_r
    v = sp.symbols(f"v1:{n + 1}", positive=True) if weighted else (sp.Integer(1),) * n
    V = sp.Add(*v)
    nr = [sp.Add(*[v[i] for i in range(n) if levels[i] == r]) for r in range(R)]
    o = [sp.Add(*[v[i] * Y[i] for i in range(n) if levels[i] == r]) / nr[r] for r in range(R)]
    ybar = sp.Add(*[v[i] * Y[i] for i in range(n)]) / V
    p = [f[levels[i]] for i in range(n)]
    oi = [o[levels[i]] for i in range(n)]
    bs = sp.Add(*[v[i] * (Y[i] - p[i]) ** 2 for i in range(n)]) / V
    unc = ybar * (1 - ybar)
    rel = sp.Add(*[nr[r] / V * (f[r] - o[r]) ** 2 for r in range(R)])
    res = sp.Add(*[nr[r] / V * (o[r] - ybar) ** 2 for r in range(R)])
    return dict(n=n, R=R, Y=Y, f=f, v=v, V=V, nr=nr, o=o, ybar=ybar, p=p, oi=oi, bs=bs,
                unc=unc, rel=rel, res=res, levels=levels)


@pc.proof(
    "murphy",
    "BS = UNC + REL - RES for forecasts taking discrete levels p_r (Delta = 0)",
    '"Calibration is Grouping" Appendix A.1 (eq. 13 and (Murphy))',
    "exact zero tests on symbolic data: n = 5 labels on R = 2 symbolic levels (unweighted, as printed) "
    "and n = 5 weighted labels on R = 3 levels; y^2 = y",
)
def prove(r: pc.ProofResult) -> pc.ProofResult:
    for tag, levels, weighted in (("n=5, R=2", [0, 0, 1, 1, 1], False),
                                  ("weighted n=5, R=3", [0, 1, 1, 2, 2], True)):
        s = _setup(levels, weighted)
        n, v, V, Y, p, oi = s["n"], s["v"], s["V"], s["Y"], s["p"], s["oi"]
        a = sp.Add(*[v[i] * (Y[i] - oi[i]) ** 2 for i in range(n)]) / V
        b = sp.Add(*[v[i] * (oi[i] - p[i]) ** 2 for i in range(n)]) / V
        c = 2 * sp.Add(*[v[i] * (Y[i] - oi[i]) * (oi[i] - p[i]) for i in range(n)]) / V
        r.check(f"A.1 eq. 13 ({tag})", "BS = mean (Y-o)^2 + mean (o-p)^2 + 2 mean (Y-o)(o-p)",
                s["bs"] - (a + b + c), method="exact zero test (holds for any real Y)")
        for rr in range(s["R"]):
            idx = [i for i in range(n) if levels[i] == rr]
            r.check(f"A.1 cross term ({tag}, r={rr + 1})",
                    "sum_{i in I_r} (Y_i - o_r)(o_r - p_r) = 0",
                    sp.Add(*[v[i] * (Y[i] - s["o"][rr]) * (s["o"][rr] - s["f"][rr]) for i in idx]))
        r.check(f"A.1 grouping, within term ({tag})", "mean (Y - o)^2 = sum_r (n_r/n) o_r (1 - o_r)",
                a - sp.Add(*[s["nr"][q] / V * s["o"][q] * (1 - s["o"][q]) for q in range(s["R"])]), binary=Y)
        r.check(f"A.1 grouping, law of total variance ({tag})",
                "sum_r (n_r/n) o_r(1-o_r) = Ybar(1-Ybar) - sum_r (n_r/n)(o_r - Ybar)^2",
                sp.Add(*[s["nr"][q] / V * s["o"][q] * (1 - s["o"][q]) for q in range(s["R"])]) - (s["unc"] - s["res"]))
        r.check(f"A.1 (Murphy) ({tag})", "BS = UNC + REL - RES",
                s["bs"] - (s["unc"] + s["rel"] - s["res"]), binary=Y)
    # The textbook chapter on model calibration (§2) states the three-term form for bins whose
    # forecast value is the bin's mean confidence; with scores that vary inside a bin the
    # identity needs Delta ("Calibration is Grouping" eq. 6).
    y1, y2 = sp.symbols("y1 y2")
    p_bin = (sp.Rational(1, 5), sp.Rational(4, 5))
    conf, acc = sum(p_bin) / 2, sp.Rational(1, 2)
    bs = ((0 - p_bin[0]) ** 2 + (1 - p_bin[1]) ** 2) / 2
    three = (conf - acc) ** 2 - 0 + acc * (1 - acc)
    r.remark("textbook chapter §2 and §6 'three-term identity for binned forecasts'",
             "exact only when every forecast in a bin equals the bin's value; for bins of varying scores "
             "(p_m = mean confidence) the Brier score is REL - RES + UNC + Delta",
             "exact evaluation; calib_jax.decompositions.murphy(n_bins=M) reports Delta (cross-checked)",
             f"one bin, p = (1/5, 4/5), y = (0, 1): conf = acc = 1/2, REL - RES + UNC = {three}, Brier = {bs}")
    _crosscheck(r)
    return r


def _crosscheck(r: pc.ProofResult) -> None:
    import numpy as np

    def run():
        import jax.numpy as jnp

        from calib_jax.decompositions import murphy

        s = _setup([0, 1, 1, 2, 2], True)
        rng = np.random.default_rng(5)
        draws = 6
        vals = {}
        lev = rng.uniform(0.05, 0.95, size=(draws, s["R"]))
        lab = rng.integers(0, 2, size=(draws, s["n"])).astype(float)
        wts = rng.uniform(0.5, 2.0, size=(draws, s["n"]))
        for q in range(s["R"]):
            vals[s["f"][q]] = lev[:, q]
        for i in range(s["n"]):
            vals[s["Y"][i]] = lab[:, i]
            vals[s["v"][i]] = wts[:, i]

        class _ND:  # minimal NumData stand-in for evaluate()
            values = vals
            probs = lev

        terms = [pc.evaluate(s[t], _ND) for t in ("bs", "unc", "rel", "res")]
        err = 0.0
        for j in range(draws):
            probs = jnp.asarray(lev[j][s["levels"]])
            out = pc.call(murphy, probs, jnp.asarray(lab[j]), weights=jnp.asarray(wts[j]))
            got = [pc.field_of(out, "score"), pc.field_of(out, "unc", "uncertainty"),
                   pc.field_of(out, "rel", "reliability"), pc.field_of(out, "res", "resolution")]
            err = pc.worst(err, *[float(g) - t[j] for g, t in zip(got, terms)], float(pc.field_of(out, "delta")))
        return err

    pc.crosscheck(r, "calib_jax.decompositions.murphy (distinct forecast values, weighted)", run)

    def run_binned():
        import jax.numpy as jnp

        from calib_jax.decompositions import murphy
        from proofs._common import group_exprs, random_instances, sym_data

        M = 3
        rng = np.random.default_rng(11)
        err = 0.0
        for _ in range(3):
            p = rng.uniform(0.0, 1.0, size=9)
            y = rng.integers(0, 2, size=9).astype(float)
            ids = np.minimum((p * M).astype(int), M - 1)  # equal-width bins [m/M, (m+1)/M)
            d = sym_data(9, M, weighted=False, hard=list(ids))
            g = group_exprs(d)
            nd = random_instances(d, hard=list(ids), draws=1)
            nd.values.update({d.p[i]: np.array([p[i]]) for i in range(9)})
            nd.values.update({d.y[i]: np.array([y[i]]) for i in range(9)})
            delta = pc.evaluate(sp.Add(*[g.w[k] * (g.var[k] - 2 * g.cov[k]) for k in range(M)]), nd)[0]
            out = pc.call(murphy, jnp.asarray(p), jnp.asarray(y), n_bins=M)
            err = pc.worst(err, float(pc.field_of(out, "delta")) - delta)
        return err

    pc.crosscheck(r, "calib_jax.decompositions.murphy(n_bins=3) reports Delta of the bins", run_binned)
