"""Nothing silently wrong (issue 30): every public metric, decomposition, loss and calibrator
fit refuses a bad value in any array argument, at every size.

* Eagerly: ``ValueError`` naming the argument, for NaN, +-inf and finite values outside the
  argument's domain (tests/bad_inputs.py lists the calls and the roles of their arguments).
  The eager checks run inside one compiled program (calib_jax._src.eager); an earlier version
  missed NaN from 4096 rows on, because XLA:CPU's vectorised float ``max`` drops NaN, so the
  sizes straddle 4096 and go up to 10^6.
* Under ``jax.jit`` (values cannot raise): every floating output is NaN, never a plausible
  number.
"""

from __future__ import annotations

import os
import warnings

import bad_inputs as B
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import calib_jax as cj

EDGE_SIZES = (1, 7, 4095, 4096, 4097)
#: calls whose eager programs are cheap enough to run at 10^6 rows in the unit suite
FAST = ("brier", "nll", "ece", "gce", "auc", "lcce", "brier_grouping", "platt.fit")
#: generated cases of the property test per run (CALIB_JAX_BAD_INPUT_EXAMPLES for more)
EXAMPLES = int(os.environ.get("CALIB_JAX_BAD_INPUT_EXAMPLES", "20"))
_BY_NAME = {case.name: case for case in B.CASES}


def _assert_names_argument(case: B.Case, arrays: dict, arg: str, value: float, position: int) -> None:
    bad = B.corrupt(arrays, case, arg, value, position)
    msg = case.args[arg][1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fallback warnings of fits never replace the error
        with pytest.raises(ValueError, match=f"`{msg}`".replace("[", r"\[").replace("]", r"\]")):
            case.call(**bad)


@pytest.mark.parametrize("n", [*EDGE_SIZES, 10**5, 10**6])
@pytest.mark.parametrize("name", FAST)
def test_nan_and_out_of_domain_values_raise_at_every_size(name, n):
    """The sizes of the reported failure (one NaN in ``probs`` or ``labels`` returned NaN or a
    plausible ECE from n = 4096 on) and beyond, for the calls it named."""
    case = _BY_NAME[name]
    if n < case.min_n:
        pytest.skip("below the call's minimum size")
    if n > 10**5 and name in ("lcce", "platt.fit"):
        pytest.skip("10^6 rows of the slowest two: 10^5 already exceeds the reported 4096")
    rng = np.random.default_rng(n)
    arrays = B.valid_arrays(case, n, rng)
    for arg, (role, _) in case.args.items():
        for value in B.bad_values(role):
            _assert_names_argument(case, arrays, arg, value, int(rng.integers(n)))


def test_the_reported_case():
    """``ece`` with one NaN label at n = 4096 returned 0.0198 (issue 30)."""
    rng = np.random.default_rng(0)
    p = rng.uniform(0.01, 0.99, 4096).astype(np.float32)
    y = (rng.uniform(size=4096) < p).astype(np.float32)
    y[2048] = np.nan
    with pytest.raises(ValueError, match="`labels` contains 1 NaN"):
        cj.ece(p, y)


_SIZES = st.one_of(st.sampled_from(EDGE_SIZES), st.integers(1, 200_000))


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=st.sampled_from(B.CASES), n=_SIZES, data=st.data())
def test_any_bad_value_in_any_argument_raises_naming_it(case, n, data):
    """Property: a public call, at any size from 1 to 2 * 10^5, with one bad value (NaN, +-inf
    or out of domain) at a random position of any of its array arguments, raises
    ``ValueError`` naming that argument."""
    n = max(min(n, case.max_n), case.min_n)
    if case.name.endswith(".fit"):
        n = min(n, 20_000)  # the fits' programs are slow to compile for each new size
    arg = data.draw(st.sampled_from(sorted(case.args)), label="argument")
    value = data.draw(st.sampled_from(B.bad_values(case.args[arg][0])), label="value")
    position = data.draw(st.integers(0, n - 1), label="position")
    arrays = B.valid_arrays(case, n, np.random.default_rng(n))
    _assert_names_argument(case, arrays, arg, value, position)


#: the cases whose programs (an incomplete beta inverse) run long at LLVM level 0 (tests/conftest.py)
_RUN_LONG = {"binomial_interval", "binomial_interval_jeffreys"}


@pytest.mark.parametrize("case", [
    pytest.param(c, marks=pytest.mark.optimized_codegen) if c.name in _RUN_LONG else c
    for c in B.CASES if not c.name.endswith(".fit")], ids=lambda c: c.name)
def test_under_jit_a_bad_value_gives_nan_never_a_number(case):
    """Under ``jax.jit`` a failed check cannot raise: every floating output is NaN (at 5000
    rows, above the size where the old checks went blind)."""
    n = 5000
    arrays = B.valid_arrays(case, n, np.random.default_rng(1))
    f = jax.jit(case.call)
    ok = f(**arrays)
    assert all(np.all(np.isfinite(np.asarray(leaf))) for leaf in jax.tree_util.tree_leaves(ok)
               if np.issubdtype(np.asarray(leaf).dtype, np.floating)), "valid input must give a finite result"
    for arg, (role, _) in case.args.items():
        for value in dict.fromkeys((np.nan, B.bad_values(role)[-1])):
            out = f(**B.corrupt(arrays, case, arg, value, n // 3))
            floats = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(out)
                      if np.issubdtype(np.asarray(leaf).dtype, np.floating)]
            assert floats and all(np.all(np.isnan(x)) for x in floats), (arg, value)


@pytest.mark.parametrize("name", ["ece", "brier_grouping", "nll", "field_rce", "lcce", "nll_grouping"])
def test_the_checks_lower_for_cuda(name):
    """The traced checks and the NaN they put on a failed call are part of the CUDA program
    (exported on the CPU, where no GPU is lent): ``isfinite`` or ordered comparisons, and the
    NaN constant of the poisoned output."""
    from jax import export

    case = _BY_NAME[name]
    arrays = B.valid_arrays(case, 64, np.random.default_rng(0))
    text = export.export(jax.jit(case.call), platforms=["cuda"])(**arrays).mlir_module()
    assert "0x7FC00000" in text  # float32 NaN: the poison
    assert "stablehlo.compare" in text


def test_value_checks_of_closed_over_constants_work_under_jit():
    """Inside a user's jit, an input closed over as a constant is concrete, but jnp ops on it
    are traced: the eager value checks must run on the host (they raised
    TracerBoolConversionError for AUC's presorted check, Neural Calibration's field ids and
    the L2 penalty's W)."""
    import jax
    import jax.numpy as jnp

    from calib_jax import losses, metrics
    from calib_jax.calibrators import neural_calibration as nc

    p = jnp.linspace(0.1, 0.9, 50)
    y = jnp.asarray(np.tile([0.0, 1.0], 25))
    got = jax.jit(lambda w: metrics.auc(p, y, weights=w, presorted=True))(jnp.ones(50))
    assert float(got) == pytest.approx(float(metrics.auc(p, y)))
    backwards = p[::-1]
    with pytest.raises(ValueError, match="ascending"):
        jax.jit(lambda w: metrics.auc(backwards, y, weights=w, presorted=True))(jnp.ones(50))
    W = jnp.ones((3, 2))
    assert float(jax.jit(lambda lam: losses.l2_penalty(W, lam=lam))(0.5)) == pytest.approx(0.5)
    fields = jnp.asarray(np.stack([np.arange(50) % 3, np.arange(50) % 2], 1))
    prm = nc.fit(np.log(p / (1 - p)), y, context={"fields": fields}, n_steps=3)
    out = jax.jit(lambda o: nc.predict(prm, o, context={"fields": fields}))(jnp.zeros(50))
    np.testing.assert_allclose(out, nc.predict(prm, jnp.zeros(50), context={"fields": fields}), rtol=1e-6)


# ---------------------------------------------------------------------------- non-array arguments
def _scalar_arrays(case: B.ScalarCase, n: int = 64) -> dict:
    return B.valid_arrays(B.Case(case.name, lambda: None, case.args), n, np.random.default_rng(3))


def _floats(out) -> list[np.ndarray]:
    return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(out)
            if np.issubdtype(np.asarray(leaf).dtype, np.floating)]


@pytest.mark.parametrize("case", B.SCALAR_CASES, ids=lambda c: c.name)
def test_a_bad_non_array_argument_raises_naming_it(case):
    """A Hosmer-Lemeshow ``ddof`` at or above the groups, NE's ``eps`` outside (0, 0.5), a
    negative or infinite penalty weight of the VR-SAG loss, a non-key ``key`` to corp_test and
    an unknown ``hyper`` key of the scikit-learn estimator ran on (NaN p-value, a log loss of a
    clip above 1/2, a loss that rewards variance, JAX's TypeError, fit's TypeError): each is a
    ``ValueError`` naming the argument, and the valid value passes."""
    arrays = _scalar_arrays(case)
    ok = case.call(arrays, case.good)
    if case.traceable is not None:
        assert all(np.all(np.isfinite(x)) for x in _floats(ok)), "the valid value must give a finite result"
    for value in case.bad:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(ValueError, match=f"`{case.arg}`"):
                case.call(arrays, value)


@pytest.mark.parametrize("case", [c for c in B.SCALAR_CASES if c.traceable is not None], ids=lambda c: c.name)
def test_a_bad_non_array_argument_under_jit(case):
    """Under ``jax.jit``: a traced scalar with a bad value makes every floating output NaN; a
    static argument (a Python int, a key's type) raises ``ValueError`` while tracing."""
    arrays = _scalar_arrays(case)
    if case.traceable:
        f = jax.jit(lambda v: case.call(arrays, v))
        assert all(np.all(np.isfinite(x)) for x in _floats(f(case.good)))
        for value in case.bad:
            out = _floats(f(value))
            assert out and all(np.all(np.isnan(x)) for x in out), (case.name, value)
        return
    for value in case.bad:
        if isinstance(value, str):
            continue  # not a valid jit argument: closed over below
        with pytest.raises(ValueError, match=f"`{case.arg}`"):
            jax.jit(lambda a, v=value: case.call(a, v))(arrays)


def test_hosmer_lemeshow_ddof_above_the_non_empty_groups():
    """Tied scores leave quantile groups empty: ``ddof`` below ``n_groups`` can still leave no
    degrees of freedom. Eagerly a ``ValueError`` naming ``ddof`` (the p-value was NaN with
    df = 0 reported as a number); under ``jit`` every field NaN."""
    p = np.repeat([0.2, 0.6], 50).astype(np.float32)  # two distinct scores: 2 non-empty groups of 10
    y = (np.arange(100) % 3 == 0).astype(np.float32)
    assert float(cj.inference.hosmer_lemeshow(p, y, ddof=1).df) == 1.0
    with pytest.raises(ValueError, match="`ddof`"):
        cj.inference.hosmer_lemeshow(p, y, ddof=2)
    out = jax.jit(lambda q: cj.inference.hosmer_lemeshow(q, y, ddof=2))(p)
    assert all(np.isnan(np.asarray(x)) for x in out)


def test_binomial_interval_under_jit_refuses_impossible_counts():
    """``binomial_interval`` under jit returned plausible numbers for k > n ([1, 1]) and NaN k
    ([4e-19, 4e-19]); now NaN, as the eager call raises naming the argument."""
    f = jax.jit(lambda k, n: cj.inference.binomial_interval(k, n))
    for k, n in ((50.0, 40.0), (np.nan, 40.0), (-1.0, 40.0), (3.0, np.inf), (3.0, -2.0)):
        r = f(k, n)
        assert np.isnan(float(r.lo)) and np.isnan(float(r.hi)), (k, n)
    r = f(3.0, 40.0)
    assert 0.0 < float(r.lo) < 3 / 40 < float(r.hi) < 1.0
    for k, n, arg in ((50, 40, "k"), (np.nan, 40, "k"), (-1, 40, "k"), (3, np.inf, "n"), (0, -2, "n")):
        with pytest.raises(ValueError, match=f"`{arg}`"):
            cj.inference.binomial_interval(k, n)


def test_the_checks_read_the_converted_array_without_copying_it_again():
    """A NumPy argument is checked on the values of the JAX array it was converted to: on the
    CPU a view of that array's buffer (a second copy of a 2.75M x 64 embedding took 0.6 s per
    prediction), and an edit of the caller's array after the call does not change them."""
    from calib_jax._src import validation as V

    host = np.linspace(0.0, 1.0, 1000, dtype=np.float32)
    arr = V.as_float_array(host, "x")
    seen = V._values(arr)
    np.testing.assert_array_equal(seen, host)
    if jax.default_backend() == "cpu":
        assert seen.ctypes.data == arr.unsafe_buffer_pointer()  # a view, not a copy
    host[0] = np.nan  # the caller edits its array afterwards: the checked values are the converted ones
    assert np.isfinite(V._values(arr)[0]) and float(arr[0]) == 0.0
    with pytest.raises(ValueError, match="`x` contains 1 NaN"):
        V.as_float_array(host, "x")


_P = np.array([0.2, 0.7, 0.4, 0.9, 0.1, 0.6])
_Y = np.array([0.0, 1.0, 1.0, 1.0, 0.0, 0.0])
_G = np.array([0, 1, 0, 1, 0, 1])


@pytest.mark.parametrize("call, match", [
    # an option fuzz of every public metric (2026-12-06): each ran on, or failed in other words, before
    (lambda: cj.metrics.accuracy(_P, _Y, threshold=float("nan")), "`threshold` must be a real number, not NaN"),
    (lambda: cj.metrics.accuracy(_P, _Y, threshold="0.5"), "`threshold`"),  # a TypeError from `>`
    (lambda: cj.metrics.field_rce(_P, _Y, _G, eps=float("inf")), "`eps` must be a finite number > 0"),  # gave 0
    (lambda: cj.metrics.field_rce(_P, _Y, _G, eps=True), "`eps`"),
    (lambda: cj.metrics.skce(_P, _Y, bandwidth=float("inf")), "`bandwidth` must be a finite number > 0"),
    (lambda: cj.metrics.skce(_P, _Y, bandwidth="1"), "`bandwidth`"),  # a TypeError inside JAX
    (lambda: cj.metrics.ici(_P, _Y, bandwidth=True), "`bandwidth`"),
    (lambda: cj.metrics.smooth_ece(_P, _Y, min_bandwidth=float("inf")), "`min_bandwidth` must be a number in"),
    (lambda: cj.metrics.smooth_ece(_P, _Y, bandwidth=True), "`bandwidth` must be a number in"),
    (lambda: cj.metrics.smooth_ece(_P, _Y, return_bandwidth="no"), "`return_bandwidth` must be True or False"),
    (lambda: cj.metrics.ece_sweep(_P, _Y, return_bins=1), "`return_bins` must be True or False"),
    (lambda: cj.metrics.cumulative_calibration_error(_P, _Y, normalize="no"), "`normalize` must be True or"),
    (lambda: cj.metrics.multicalibration_error(_P, _Y, _G[:, None], max_depth=0.0, min_samples=1), "`max_depth`"),
    (lambda: cj.metrics.oracle_alpha_divergence(_P, _P, alpha="0.5"), "`alpha` must be a number in \\(0, 1\\)"),
    (lambda: cj.metrics.auc(_P, _Y, presorted=None), "`presorted` must be True or False"),
])
def test_a_metric_option_of_the_wrong_kind_is_refused_by_name(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_large_integer_options_are_taken_as_the_numbers_they_are():
    # 2**40 as a Python int overflowed JAX's int32 when passed on to the compiled metric
    assert float(cj.metrics.accuracy(_P, _Y, threshold=2**40)) == pytest.approx(float(np.mean(_Y == 0)))
    assert float(cj.metrics.field_rce(_P, _Y, _G, eps=2**40)) == pytest.approx(
        float(cj.metrics.field_rce(_P, _Y, _G, eps=float(2**40))))
    traced = jax.jit(lambda t: cj.metrics.accuracy(_P, _Y, threshold=t))(0.5)  # a traced threshold passes
    assert float(traced) == pytest.approx(float(cj.metrics.accuracy(_P, _Y, threshold=0.5)))
    bw = jax.jit(lambda b: cj.metrics.skce(_P, _Y, bandwidth=b))(jnp.float32(np.inf))  # traced: NaN, not a value
    assert np.isnan(float(bw))
