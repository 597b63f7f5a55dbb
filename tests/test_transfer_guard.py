"""The hot loops make no implicit host transfer (issue 69, item 6: ready for the accelerator).

Each test compiles a hot loop once, then calls the compiled program again with its inputs
already on the device inside ``jax.transfer_guard("disallow")``: explicit transfers
(``jax.device_put``, ``jax.device_get``) stay allowed, implicit ones raise -- a NumPy array
or a Python scalar passed to a jitted function, ``float(x)`` of a device array, an eager
``jnp.ones`` (its fill value is copied from the host). The loops:

* a Monte Carlo chunk: :func:`calib_jax.montecarlo.run_trials` run again on a compiled chunk
  (its trial indices are placed by explicit ``device_put``, its outputs fetched by
  ``device_get``);
* a VR-SAG fit: the compiled L-BFGS fit of every partition (``sag._fit_soft``, sequential
  and lock-step), the whole loop of steps inside one program;
* a split's metrics in ``experiments/compare_calibrators.py`` (``_eval``: one program for
  every metric of one split's predictions).

What the guard cannot see on the CPU backend (jax 0.10): ``np.asarray`` of a CPU device array
is a zero-copy view, not a transfer, so it passes the guard here although it is a
device-to-host copy on a GPU; ``float(x)`` does raise. The positive controls below check that
the guard fires in this JAX version ("log" only logs; "disallow" raises).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from calib_jax import metrics as M
from calib_jax import montecarlo as mc
from calib_jax.calibrators import sag


def test_guard_fires_on_an_implicit_transfer():
    f = jax.jit(lambda x: 2.0 * x)
    x = np.ones(3, np.float32)
    f(x)
    with jax.transfer_guard("disallow"), pytest.raises(Exception, match="Disallowed host-to-device"):
        f(x)  # a NumPy argument: implicit host-to-device copy
    xd = jax.device_put(x)
    with jax.transfer_guard("disallow"):
        y = f(xd)  # already on the device
        jax.device_get(y)  # explicit: allowed
        with pytest.raises(Exception, match="Disallowed"):
            float(y[0])  # implicit device-to-host copy
        with pytest.raises(Exception, match="Disallowed host-to-device"):
            f(1.0)  # a Python scalar argument
        with pytest.raises(Exception, match="Disallowed host-to-device"):
            jnp.ones(3)  # eager: the fill value comes from the host


def _trial(key, scale):
    k1, k2 = jax.random.split(key)
    p = jax.random.uniform(k1, (64,), minval=0.01, maxval=0.99)
    y = (jax.random.uniform(k2, (64,)) < scale * p).astype(jnp.float32)
    return {"ece": M.ece(p, y), "nll": M.nll(p, y), "p": p[:2]}


def test_monte_carlo_chunk_makes_no_implicit_transfer():
    trial = mc.BoundTrial(_trial, (jax.device_put(np.float32(0.9)),))
    key = jax.random.key(3)
    first = mc.run_trials(trial, key, 6, chunk_size=4, trials_per_step=1, progress=False)  # compiles
    with jax.transfer_guard("disallow"):
        again = mc.run_trials(trial, key, 6, chunk_size=4, trials_per_step=1, progress=False)  # 2 chunks
    for k in first:
        np.testing.assert_array_equal(first[k], again[k])


def _sag_problem(n: int = 256, m: int = 4, P: int = 2, K: int = 2):
    rng = np.random.default_rng(0)
    z = rng.normal(size=(n, m)).astype(np.float32)
    o = (rng.normal(size=n) - 1.0).astype(np.float32)
    y = (rng.random(n) < 1 / (1 + np.exp(-o))).astype(np.float32)
    theta0 = sag.init_params(jax.random.key(0), m, n_groups=K, n_partitions=P)
    stop = sag.StopRule(*(jnp.asarray(a, jnp.float32) for a in sag.StopRule.torch(4)))
    data = jax.device_put((o, y, z.T, np.ones(n, np.float32), np.float32(0.1), np.float32(0.5)))
    return theta0, data, stop


@pytest.mark.parametrize("solver", ["sequential", "lockstep"])
def test_vrsag_fit_makes_no_implicit_transfer(solver):
    theta0, (o, y, zt, v, lam, lam_v), stop = _sag_problem()
    kw = dict(n_steps=4, use_beta=True, head_bias=True, solver=solver)
    first = sag._fit_soft(theta0, o, y, zt, v, lam, lam_v, stop, **kw)  # compiles
    with jax.transfer_guard("disallow"):
        again = jax.device_get(sag._fit_soft(theta0, o, y, zt, v, lam, lam_v, stop, **kw))
    for a, b in zip(jax.tree.leaves(jax.device_get(first)), jax.tree.leaves(again), strict=True):
        np.testing.assert_array_equal(a, b)


def test_split_metrics_make_no_implicit_transfer():
    from experiments import compare_calibrators as cc

    n = 400
    rng = np.random.default_rng(1)
    o = rng.normal(-1.5, 1.0, n).astype(np.float32)
    oracle = (1 / (1 + np.exp(-o))).astype(np.float32)
    y = (rng.random(n) < oracle).astype(np.float32)
    p = np.clip(oracle * 1.1, 0.0, 1.0).astype(np.float32)
    g = rng.integers(0, 3, (n, 2)).astype(np.int32)
    stat = cc.metric_function(3, 1, True, False, (0, 7), 3)
    part = cc._on_device({"logits": o, "labels": y, "oracle": oracle})
    p_dev, g_dev = jax.device_put(p), jax.device_put(g)
    first = jax.device_get(cc.evaluate(stat, p_dev, part, g_dev))  # compiles
    with jax.transfer_guard("disallow"):
        again = jax.device_get(cc.evaluate(stat, p_dev, part, g_dev))
    assert set(again) >= {"ECE", "LCCE", "NLL", "AUC", "MCE", "Brier"}
    for k in first:
        np.testing.assert_array_equal(first[k], again[k])
    # the split loop's predictions arrive as NumPy arrays (see the module docstring of the test):
    # passed as they are, they are an implicit copy per split and method
    with jax.transfer_guard("disallow"), pytest.raises(Exception, match="Disallowed host-to-device"):
        cc.evaluate(stat, p, part, g_dev)
