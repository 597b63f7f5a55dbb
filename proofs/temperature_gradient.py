r"""Temperature-scaling gradient (the textbook chapter on model calibration,
§4.3, and the SymPy check of its §6).

Binary case, :math:`\beta = 1/T`, :math:`\tilde p = \sigma(\beta z)`:

.. math:: \frac{d}{d\beta}\bigl[-y\log\sigma(\beta z) - (1-y)\log(1-\sigma(\beta z))\bigr]
          = (\sigma(\beta z) - y)\, z ,

for every real z (the textbook chapter's SymPy cell declares z > 0 and y > 0; neither is needed).  The
multi-class form :math:`\partial_\beta[-\log \mathrm{softmax}(\beta z)_c] = E_{j\sim p}[z_j] - z_c`
is checked for three classes, and the Platt gradients (textbook chapter §4.1) as well.
"""

from __future__ import annotations

import sympy as sp

from proofs._common import ProofResult, call, crosscheck, register, worst


@register("temperature_gradient")
def prove() -> ProofResult:
    r = ProofResult(
        "temperature_gradient",
        "d/d beta NLL(sigma(beta z), y) = (sigma(beta z) - y) z",
        "the textbook chapter on model calibration, §4.3 (gradient display) and §6 (SymPy check); "
        "§4.1 Platt gradients",
        "sympy diff + simplify (z real, beta real, y symbolic; and y in {0, 1} separately)",
    )
    z, beta, a, b = sp.symbols("z beta a b", real=True)
    y = sp.Symbol("y")
    sig = lambda u: 1 / (1 + sp.exp(-u))
    nll = lambda u, yy: -yy * sp.log(sig(u)) - (1 - yy) * sp.log(1 - sig(u))
    g = sp.diff(nll(beta * z, y), beta)
    r.claim("binary temperature gradient", "d/d beta [-y log s - (1-y) log(1-s)], s = sigma(beta z), equals (s - y) z",
            sp.simplify(g - (sig(beta * z) - y) * z) == 0, "sympy diff + simplify, z real (not only z > 0)")
    r.claim("binary temperature gradient, y in {0, 1}", "same identity for y = 0 and y = 1 separately",
            all(sp.simplify(sp.diff(nll(beta * z, yy), beta) - (sig(beta * z) - yy) * z) == 0 for yy in (0, 1)),
            "sympy diff + simplify")
    r.claim("second derivative (convexity in beta)", "d^2/d beta^2 = z^2 s (1 - s) >= 0",
            sp.simplify(sp.diff(nll(beta * z, y), beta, 2) - z**2 * sig(beta * z) * (1 - sig(beta * z))) == 0,
            "sympy diff + simplify")
    zs = sp.symbols("z1:4", real=True)
    ok = True
    for c in range(3):
        ex = [sp.exp(beta * zj) for zj in zs]
        lsm = -(beta * zs[c] - sp.log(sp.Add(*ex)))
        expected = sp.Add(*[zj * e for zj, e in zip(zs, ex)]) / sp.Add(*ex) - zs[c]
        ok &= sp.simplify(sp.diff(lsm, beta) - expected) == 0
    r.claim("multi-class gradient (3 classes, textbook chapter §4.3)",
            "d/d beta [-log softmax(beta z)_c] = E_{j ~ p}[z_j] - z_c", ok, "sympy diff + simplify, each c")
    r.claim("binary case of the multi-class form", "logits (0, z): E_j[z_j] - z_y = s z - y z",
            sp.simplify(sp.exp(beta * z) * z / (1 + sp.exp(beta * z)) - sig(beta * z) * z) == 0, "sympy simplify")
    r.claim("Platt gradients (textbook chapter §4.1)", "d/da, d/db of NLL(sigma(a z + b), y) = ((s - y) z, s - y)",
            sp.simplify(sp.diff(nll(a * z + b, y), a) - (sig(a * z + b) - y) * z) == 0
            and sp.simplify(sp.diff(nll(a * z + b, y), b) - (sig(a * z + b) - y)) == 0, "sympy diff + simplify")
    grad_expr = (sig(beta * z) - y) * z
    f_grad = sp.lambdify((beta, z, y), grad_expr, "numpy")

    def run():
        import jax
        import jax.numpy as jnp
        import numpy as np

        from calib_jax.calibrators import temperature
        from calib_jax.metrics import nll, nll_logits

        def loss(b_, z_, y_, w_):
            return nll_logits(b_ * z_, y_, weights=w_)

        def loss_cal(b_, z_, y_, w_):  # through the calibrator's own predict()
            params = temperature.TemperatureParams(beta=b_, fallback=jnp.asarray(False))
            return nll(temperature.predict(params, z_), y_, weights=w_)

        grad = jax.jit(jax.grad(loss))
        grad_cal = jax.jit(jax.grad(loss_cal))
        rng = np.random.default_rng(8)
        err = 0.0
        for _ in range(4):
            zz = rng.normal(0.0, 3.0, size=20)
            yy = (rng.uniform(size=20) < 1 / (1 + np.exp(-zz / 2.0))).astype(float)
            ww = rng.uniform(0.5, 2.0, size=20)
            for bb in (0.3, 1.0, 2.2):
                jg = grad(jnp.asarray(bb), jnp.asarray(zz), jnp.asarray(yy), jnp.asarray(ww))
                ref = float(np.sum(ww * f_grad(bb, zz, yy)) / np.sum(ww))
                err = worst(err, float(jg) - ref)
                if bb <= 1.0:  # keep sigma(beta z) away from 1 so the probability-space loss is exact
                    jc = grad_cal(jnp.asarray(bb), jnp.asarray(zz), jnp.asarray(yy), jnp.asarray(ww))
                    err = worst(err, float(jc) - ref)
            # first-order condition at the fitted temperature
            params = call(temperature.fit, jnp.asarray(zz), jnp.asarray(yy), weights=jnp.asarray(ww))
            if not bool(params.fallback) and float(params.beta) > 0:
                err = worst(err, float(np.sum(ww * f_grad(float(params.beta), zz, yy)) / np.sum(ww)))
            pred = temperature.predict(params, jnp.asarray(zz))
            err = worst(err, float(jnp.max(jnp.abs(pred - 1 / (1 + jnp.exp(-params.beta * jnp.asarray(zz)))))))
        return err

    crosscheck(r, "jax.grad of metrics.nll_logits(beta z) and of metrics.nll(temperature.predict(beta, z)); "
               "gradient = 0 at the beta fitted by calibrators.temperature.fit", run, tol=1e-8)
    return r
