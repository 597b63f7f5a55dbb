"""Shared machinery for the symbolic proofs: result records, registry, symbolic data, zero test.

Zero test
---------
Every identity here is a rational function of the data (scores ``p_i``, labels ``y_i``,
weights ``v_i``, memberships ``q_ik``; logarithms enter only through placeholder symbols,
see :mod:`proofs.nll_grouping`).  :func:`is_zero` converts an expression to a fraction
``N / D`` over the rationals with a sparse polynomial numerator and a denominator kept as
a product of polynomial factors (no gcd computations, which is what makes ``sp.simplify``
slow here), then tests ``N == 0``.  With ``binary=labels`` every power ``y_i**m`` (m >= 1)
in ``N`` is replaced by ``y_i``; the reduced multilinear polynomial vanishes identically if
and only if ``N`` vanishes on all of ``{0, 1}^n``, i.e. the identity holds for every
Bernoulli label vector (the denominator being non-zero).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import sympy as sp
from sympy.polys.domains import QQ
from sympy.polys.rings import PolyRing

__all__ = [
    "Step",
    "CrossCheck",
    "ProofResult",
    "REGISTRY",
    "proof",
    "register",
    "run",
    "is_zero",
    "SymData",
    "sym_data",
    "GroupExprs",
    "group_exprs",
    "counterexample",
]

TRUE = "true"
FALSE_AS_PRINTED = "false-as-printed"
CORRECTED = "corrected-proved"
REMARK = "remark"
FAILED = "FAILED"


@dataclass
class Step:
    """One displayed step (or claim) of a paper, and what the proof found."""

    label: str
    claim: str
    status: str  # true | false-as-printed | corrected-proved | remark | FAILED
    method: str = ""
    counterexample: str = ""


@dataclass
class CrossCheck:
    """Numerical comparison of lambdified symbolic terms with the calib_jax implementation."""

    target: str
    status: str  # passed | failed | pending
    detail: str = ""
    max_abs_err: float = float("nan")


@dataclass
class ProofResult:
    name: str
    statement: str
    source: str
    method: str
    steps: list[Step] = field(default_factory=list)
    crosschecks: list[CrossCheck] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""

    @property
    def status(self) -> str:
        if self.error or any(s.status == FAILED for s in self.steps):
            return "FAILED"
        if any(c.status == "failed" for c in self.crosschecks):
            return "FAILED"
        if any(s.status == FALSE_AS_PRINTED for s in self.steps):
            return "false-as-printed(corrected)"
        return "proved"

    @property
    def crosscheck_status(self) -> str:
        if not self.crosschecks:
            return "n/a"
        sts = {c.status for c in self.crosschecks}
        if "failed" in sts:
            return "failed"
        if "pending" in sts:
            return "pending" if sts == {"pending"} else "partial (some pending)"
        return "passed"

    # -- helpers used by the proof modules -------------------------------------------------
    def check(self, label: str, claim: str, expr: sp.Expr, *, binary: Sequence[sp.Symbol] = (),
              method: str = "") -> bool:
        """Record a step that must hold: ``expr`` (LHS - RHS) is zero (see :func:`is_zero`)."""
        ok = is_zero(expr, binary=binary)
        how = method or ("exact rational zero test" + (" with y_i^m = y_i" if binary else ""))
        self.steps.append(Step(label, claim, TRUE if ok else FAILED, how))
        return ok

    def claim(self, label: str, claim: str, ok: bool, method: str) -> bool:
        self.steps.append(Step(label, claim, TRUE if ok else FAILED, method))
        return ok

    def false_as_printed(self, label: str, claim: str, expr: sp.Expr, counterexample: str, *,
                         binary: Sequence[sp.Symbol] = (), method: str = "") -> bool:
        """Record a printed step that is false: ``expr`` (printed LHS - RHS) must NOT vanish."""
        ok = not is_zero(expr, binary=binary)
        self.steps.append(Step(label, claim, FALSE_AS_PRINTED if ok else FAILED,
                               method or "printed LHS - RHS does not vanish", counterexample))
        return ok

    def remark(self, label: str, claim: str, method: str, counterexample: str = "") -> None:
        self.steps.append(Step(label, claim, REMARK, method, counterexample))


REGISTRY: dict[str, Callable[[], ProofResult]] = {}


def register(name: str) -> Callable[[Callable[[], ProofResult]], Callable[[], ProofResult]]:
    def deco(fn: Callable[[], ProofResult]) -> Callable[[], ProofResult]:
        REGISTRY[name] = fn
        return fn

    return deco


def proof(name: str, statement: str, source: str, method: str
          ) -> Callable[[Callable[[ProofResult], ProofResult]], Callable[[], ProofResult]]:
    """Register a proof: ``fn(r)`` receives a fresh :class:`ProofResult` holding the
    statement, its source in the papers and the method, adds its steps and cross-checks to
    it and returns it."""
    def deco(fn: Callable[[ProofResult], ProofResult]) -> Callable[[], ProofResult]:
        def run_proof() -> ProofResult:
            return fn(ProofResult(name, statement, source, method))

        run_proof.__doc__ = fn.__doc__
        return register(name)(run_proof)

    return deco


def run(name: str) -> ProofResult:
    """Run one registered proof, timing it and turning exceptions into a FAILED result."""
    t0 = time.perf_counter()
    try:
        res = REGISTRY[name]()
    except Exception as exc:  # noqa: BLE001 - recorded as a failure in the report
        res = ProofResult(name, "", "", "", error=f"{type(exc).__name__}: {exc}")
    res.seconds = time.perf_counter() - t0
    return res


# ------------------------------------------------------------------------------------------
# exact zero test
# ------------------------------------------------------------------------------------------
class _Frac:
    """Convert a rational sympy expression to (numerator poly, {factor index: power})."""

    def __init__(self, symbols: Sequence[sp.Symbol]):
        self.ring = PolyRing(list(symbols), QQ)
        self.gen = dict(zip(symbols, self.ring.gens))
        self.factors: list = []
        self.index: dict = {}
        self.cache: dict = {}

    def _factor(self, poly) -> int:
        if poly not in self.index:
            self.index[poly] = len(self.factors)
            self.factors.append(poly)
        return self.index[poly]

    def _den(self, den: dict):
        out = self.ring.one
        for a, e in den.items():
            out *= self.factors[a] ** e
        return out

    def _add(self, x, y):
        (n1, d1), (n2, d2) = x, y
        d = dict(d1)
        for a, e in d2.items():
            d[a] = max(d.get(a, 0), e)
        m1 = {a: e - d1.get(a, 0) for a, e in d.items() if e - d1.get(a, 0)}
        m2 = {a: e - d2.get(a, 0) for a, e in d.items() if e - d2.get(a, 0)}
        return n1 * self._den(m1) + n2 * self._den(m2), d

    def _mul(self, x, y):
        (n1, d1), (n2, d2) = x, y
        d = dict(d1)
        for a, e in d2.items():
            d[a] = d.get(a, 0) + e
        return n1 * n2, d

    def _inv(self, x):
        n, d = x
        if n == 0:
            raise ZeroDivisionError("division by an expression that is identically zero")
        if n.is_ground:
            return self._den(d) * (QQ.one / n.LC), {}
        return self._den(d), {self._factor(n): 1}

    def convert(self, e: sp.Expr):
        if e in self.cache:
            return self.cache[e]
        if e.is_Symbol:
            r = (self.gen[e], {})
        elif e.is_Rational:
            r = (self.ring(QQ(int(e.p), int(e.q))), {})
        elif e.is_Add or e.is_Mul:
            op = self._add if e.is_Add else self._mul
            r = None
            for a in e.args:
                c = self.convert(a)
                r = c if r is None else op(r, c)
        elif e.is_Pow and e.exp.is_Integer:
            b = self.convert(e.base)
            k = int(e.exp)
            if k < 0:
                b, k = self._inv(b), -k
            r = (b[0] ** k, {a: ex * k for a, ex in b[1].items()})
        else:
            raise TypeError(f"not a rational expression in its symbols: {e}")
        self.cache[e] = r
        return r


def is_zero(expr: sp.Expr, *, binary: Sequence[sp.Symbol] = ()) -> bool:
    """Exact test that the rational expression ``expr`` vanishes identically.

    With ``binary`` (label symbols) the test is for every assignment of those symbols in
    {0, 1}: the numerator is reduced to its multilinear form (``y**m -> y``) first.
    """
    expr = sp.sympify(expr)
    syms = sorted(expr.free_symbols, key=str)
    if not syms:
        return sp.nsimplify(expr) == 0
    conv = _Frac(syms)
    num, _ = conv.convert(expr)
    bset = set(binary)
    idx = {i for i, s in enumerate(syms) if s in bset}
    if idx and num != 0:
        red: dict = {}
        for mon, c in num.terms():
            mon = tuple(min(x, 1) if i in idx else x for i, x in enumerate(mon))
            red[mon] = red.get(mon, 0) + c
        return all(c == 0 for c in red.values())
    return num == 0


# ------------------------------------------------------------------------------------------
# symbolic data and group statistics ("Calibration is Grouping" App. A.2 "soft-stats")
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SymData:
    p: tuple  # scores p_i
    y: tuple  # labels y_i (binary: reduce with y^m = y)
    v: tuple  # sample weights v_i (symbols, or ones)
    q: tuple  # memberships q_ik (n x K); q_iK = 1 - sum_{k<K} q_ik substituted
    n: int
    K: int

    @property
    def V(self) -> sp.Expr:
        return sp.Add(*self.v)

    @property
    def ybar(self) -> sp.Expr:
        return sp.Add(*[vi * yi for vi, yi in zip(self.v, self.y)]) / self.V

    @property
    def pbar(self) -> sp.Expr:
        return sp.Add(*[vi * pi for vi, pi in zip(self.v, self.p)]) / self.V

    def mean(self, per_obs: Sequence[sp.Expr]) -> sp.Expr:
        """Weighted mean over observations (1/V) sum_i v_i z_i."""
        return sp.Add(*[vi * z for vi, z in zip(self.v, per_obs)]) / self.V


def sym_data(n: int, K: int, *, weighted: bool = True, hard: Sequence[int] | None = None,
             soft: bool = True) -> SymData:
    """Symbolic data set: n observations, K groups.

    ``hard`` gives fixed group ids (memberships 0/1); otherwise memberships are symbols
    ``q_ik`` with the last column ``1 - sum_{k<K} q_ik`` (the simplex constraint imposed by
    substitution).
    """
    p = sp.symbols(f"p1:{n + 1}")
    y = sp.symbols(f"y1:{n + 1}")
    v = sp.symbols(f"v1:{n + 1}", positive=True) if weighted else (sp.Integer(1),) * n
    rows = []
    for i in range(n):
        if hard is not None:
            rows.append(tuple(sp.Integer(int(hard[i] == k)) for k in range(K)))
        else:
            free = list(sp.symbols(f"q{i + 1}_1:{K}"))
            rows.append(tuple(free + [1 - sp.Add(*free)]))
    return SymData(p, y, v, tuple(rows), n, K)


@dataclass(frozen=True)
class GroupExprs:
    W: tuple  # raw group weight sum_i v_i q_ik
    w: tuple  # mass w_k
    mu: tuple
    pi: tuple
    var: tuple  # sigma_k^2 (definition form: centred second moment)
    cov: tuple  # gamma_k (definition form)

    def cond(self, d: SymData, k: int, per_obs: Sequence[sp.Expr]) -> sp.Expr:
        """Soft conditional expectation E[Z | G_k] = sum_i v_i q_ik z_i / W_k."""
        return sp.Add(*[d.v[i] * d.q[i][k] * per_obs[i] for i in range(d.n)]) / self.W[k]


def group_exprs(d: SymData) -> GroupExprs:
    W, w, mu, pi, var, cov = [], [], [], [], [], []
    for k in range(d.K):
        c = [d.v[i] * d.q[i][k] for i in range(d.n)]
        Wk = sp.Add(*c)
        mk = sp.Add(*[ci * pi_ for ci, pi_ in zip(c, d.p)]) / Wk
        pk = sp.Add(*[ci * yi for ci, yi in zip(c, d.y)]) / Wk
        W.append(Wk)
        w.append(Wk / d.V)
        mu.append(mk)
        pi.append(pk)
        var.append(sp.Add(*[ci * (pi_ - mk) ** 2 for ci, pi_ in zip(c, d.p)]) / Wk)
        cov.append(sp.Add(*[ci * (pi_ - mk) * (yi - pk) for ci, pi_, yi in zip(c, d.p, d.y)]) / Wk)
    return GroupExprs(tuple(W), tuple(w), tuple(mu), tuple(pi), tuple(var), tuple(cov))


def counterexample(**values) -> str:
    """Format a concrete counterexample (exact rationals shown as fractions and decimals)."""
    parts = []
    for k, v in values.items():
        if isinstance(v, sp.Basic) and v.is_number:
            parts.append(f"{k} = {v} (= {float(v):.6g})" if not v.is_Integer else f"{k} = {v}")
        elif isinstance(v, Fraction):
            parts.append(f"{k} = {v} (= {float(v):.6g})")
        else:
            parts.append(f"{k} = {v}")
    return "; ".join(parts)


# ------------------------------------------------------------------------------------------
# numerical cross-checks against calib_jax (float64)
# ------------------------------------------------------------------------------------------
_PENDING_ERRORS = (ImportError, AttributeError, NotImplementedError)


def crosscheck(res: ProofResult, target: str, fn: Callable[[], float], *, tol: float = 1e-9) -> None:
    """Run ``fn`` (returns the max abs error) with float64 enabled and record the outcome.

    A missing module or attribute of calib_jax (still being written) is recorded as
    ``pending``, never as ``passed``.
    """
    import jax

    t0 = time.perf_counter()
    try:
        with jax.enable_x64(True):
            err = float(fn())
    except _PENDING_ERRORS as exc:
        res.crosschecks.append(CrossCheck(target, "pending", f"{type(exc).__name__}: {exc}"))
        return
    except Exception as exc:  # noqa: BLE001 - any other error is a failed check
        res.crosschecks.append(CrossCheck(target, "failed", f"{type(exc).__name__}: {exc}"))
        return
    ok = err <= tol
    res.crosschecks.append(CrossCheck(target, "passed" if ok else "failed",
                                      f"max |symbolic - calib_jax| = {err:.2e} (tol {tol:.0e}; "
                                      f"{time.perf_counter() - t0:.1f} s)",
                                      err))


@dataclass
class NumData:
    """Random numeric instances of a :class:`SymData` (leading axis = draws)."""

    values: dict  # symbol -> (draws,) array
    probs: object  # (draws, n)
    labels: object  # (draws, n)
    weights: object  # (draws, n) or None
    groups: object  # (draws, n, K) soft memberships, or (draws, n) hard ids

    def jax_draws(self) -> list[tuple]:
        """Per draw, ``(probs, labels, groups, weights)`` as JAX arrays, the inputs of a
        calib_jax call (``weights`` is None for unweighted data).  Call it inside the
        cross-check, where float64 is enabled."""
        import jax.numpy as jnp

        w = [None] * len(self.probs) if self.weights is None else [jnp.asarray(x) for x in self.weights]
        return [(jnp.asarray(p), jnp.asarray(y), jnp.asarray(q), wj)
                for p, y, q, wj in zip(self.probs, self.labels, self.groups, w)]


def random_instances(d: SymData, *, draws: int = 4, seed: int = 0,
                     hard: Sequence[int] | None = None) -> NumData:
    import numpy as np

    rng = np.random.default_rng(seed)
    probs = rng.uniform(0.05, 0.95, size=(draws, d.n))
    labels = rng.integers(0, 2, size=(draws, d.n)).astype(float)
    labels[:, 0], labels[:, 1] = 0.0, 1.0  # both classes present
    weights = rng.uniform(0.5, 2.0, size=(draws, d.n)) if d.v[0] != 1 else None
    vals = {}
    for i in range(d.n):
        vals[d.p[i]] = probs[:, i]
        vals[d.y[i]] = labels[:, i]
        if weights is not None:
            vals[d.v[i]] = weights[:, i]
    if hard is not None:
        groups = np.tile(np.asarray(hard), (draws, 1))
    else:
        groups = rng.dirichlet(np.ones(d.K), size=(draws, d.n))
        for i in range(d.n):
            for k in range(d.K - 1):
                vals[d.q[i][k]] = groups[:, i, k]
    return NumData(vals, probs, labels, weights, groups)


def evaluate(expr: sp.Expr, nd: NumData, extra: dict | None = None):
    """Lambdify ``expr`` and evaluate it on every draw (numpy float64)."""
    import numpy as np

    vals = dict(nd.values)
    if extra:
        vals.update(extra)
    syms = sorted(sp.sympify(expr).free_symbols, key=str)
    f = sp.lambdify(syms, expr, "numpy")
    out = f(*[vals[s] for s in syms])
    return np.broadcast_to(np.asarray(out, dtype=float), (len(nd.probs),))


def refuted(res: ProofResult, label: str, claim: str, holds_for_counterexample: bool,
            method: str, cex: str) -> None:
    """Record a printed claim shown false by an exactly verified counterexample."""
    res.steps.append(Step(label, claim, FALSE_AS_PRINTED if holds_for_counterexample else FAILED,
                          method, cex))


def field_of(obj, *names):
    """First attribute of ``obj`` among ``names`` (AttributeError -> cross-check pending)."""
    for n in names:
        if hasattr(obj, n):
            return getattr(obj, n)
    raise AttributeError(f"none of the fields {names} on {type(obj).__name__}")


_JIT_CACHE: dict = {}


def call(fn, *args, **kwargs):
    """Call ``fn`` under ``jax.jit``, passing only the keyword arguments its signature accepts.

    Array arguments are traced; other keyword values (sizes, options) are static.  Jitting
    is both faster here (one XLA compile instead of one per primitive) and a check that the
    public function is jit-able.
    """
    import inspect

    import jax
    import numpy as np

    sig = inspect.signature(fn)
    if not any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        kwargs = {k: v for k, v in kwargs.items() if k in sig.parameters and v is not None}
    is_arr = lambda v: isinstance(v, np.ndarray | jax.Array)
    arr_kw = {k: v for k, v in kwargs.items() if is_arr(v)}
    static = tuple(sorted((k, v) for k, v in kwargs.items() if not is_arr(v)))
    key = (fn, static, tuple(sorted(arr_kw)))
    if key not in _JIT_CACHE:
        _JIT_CACHE[key] = jax.jit(lambda *a, **kw: fn(*a, **kw, **dict(static)))
    return _JIT_CACHE[key](*args, **arr_kw)


def stat_symbols(K: int, *names: str) -> tuple:
    """Group-statistic symbols w_k (w_K = 1 - sum_{k<K} w_k substituted) and named per-group symbols."""
    wf = list(sp.symbols(f"w1:{K}", positive=True))
    w = tuple(wf + [1 - sp.Add(*wf)])
    out = [w]
    for nm in names:
        out.append(tuple(sp.symbols(f"{nm}1:{K + 1}", real=True)))
    return tuple(out)


def worst(err: float, *diffs: float) -> float:
    """Running max of absolute differences; NaN counts as an infinite error."""
    for x in diffs:
        x = abs(float(x))
        err = float("inf") if x != x else max(err, x)
    return err
