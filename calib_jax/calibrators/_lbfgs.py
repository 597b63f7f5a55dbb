r"""Full-batch L-BFGS with the stopping rules of ``torch.optim.LBFGS``, inside ``lax.scan``.

The SAG and VR-SAG fits ("Calibration is Grouping", §2.4 and App. I.1) run the public
reference code's optimiser, ``torch.optim.LBFGS(max_iter=100)`` with its default tolerances,
on a non-convex objective. This module is that driver in JAX, built from small pieces as optax
composes its optimisers: the update is ``optax.lbfgs`` (memory 100, torch's default history)
with a strong-Wolfe zoom line search, and :class:`StopRule` holds torch's three stopping tests
(Nocedal & Wright, *Numerical Optimization*, 2006, Alg. 7.5 for L-BFGS, Alg. 3.5-3.6 for the
zoom line search).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

__all__ = ["TORCH_TOL_GRAD", "TORCH_TOL_CHANGE", "StopRule", "minimize", "minimize_lockstep"]

#: the zoom line search's settings: optax's defaults of ``scale_by_zoom_linesearch``, 25 steps
_ZOOM = {"max_linesearch_steps": 25, "max_stepsize": None, "tol": 0.0, "increase_factor": 2.0, "slope_rtol": 1e-4,
         "curv_rtol": 0.9, "approx_dec_rtol": 1e-6, "interval_threshold": 1e-5}

#: torch.optim.LBFGS's default tolerances, which the reference code runs with
TORCH_TOL_GRAD = 1e-7
TORCH_TOL_CHANGE = 1e-9


class StopRule(NamedTuple):
    """When a fit stops, as ``torch.optim.LBFGS`` decides.

    Attributes:
      tol_grad: stop when the largest gradient entry is at most this (torch: 1e-7).
      tol_change: stop when the step's largest entry, or the change of the objective, is
        below this (torch: 1e-9).
      max_evals: stop after this many evaluations of the objective (torch: 1.25 x the
        iterations). ``StopRule(0, 0, inf)`` runs every iteration.

    Under ``jit`` the fields may be arrays (one compiled program for every rule).
    """

    tol_grad: Any = TORCH_TOL_GRAD
    tol_change: Any = TORCH_TOL_CHANGE
    max_evals: Any = None

    @classmethod
    def torch(cls, n_steps: int) -> StopRule:
        """torch's defaults for a fit of at most ``n_steps`` iterations.

        Example:
          >>> from calib_jax.calibrators._lbfgs import StopRule
          >>> StopRule.torch(100).max_evals
          125.0
        """
        return cls(TORCH_TOL_GRAD, TORCH_TOL_CHANGE, 1.25 * n_steps)

    @classmethod
    def for_steps(cls, stop: StopRule | None, n_steps: int) -> StopRule:
        """``stop`` for a fit of at most ``n_steps`` iterations: torch's rule when None, and
        torch's evaluation budget (1.25 x ``n_steps``) where ``stop`` leaves it unset.

        Example:
          >>> from calib_jax.calibrators._lbfgs import StopRule
          >>> StopRule.for_steps(StopRule(1e-5, 1e-9), 40).max_evals
          50.0
        """
        stop = cls.torch(n_steps) if stop is None else stop
        return stop._replace(max_evals=1.25 * n_steps) if stop.max_evals is None else stop

    def done(self, grad_max: jax.Array, step_max: jax.Array, change: jax.Array, evals: jax.Array) -> jax.Array:
        """Whether a fit stops after an iteration: the largest gradient entry ``grad_max`` at
        the new iterate, the step's largest entry ``step_max``, the objective's change
        ``change`` (absolute) and the evaluations so far ``evals``."""
        return ((grad_max <= self.tol_grad) | (step_max <= self.tol_change) | (change < self.tol_change)
                | (evals >= self.max_evals))


def _all_finite(tree: Any) -> jax.Array:
    """Whether every entry of every leaf is finite (a failed line search's iterate is not)."""
    return jnp.all(jnp.array([jnp.all(jnp.isfinite(leaf)) for leaf in jax.tree.leaves(tree)]))


def _leaves_max(tree: Any) -> jax.Array:
    return jnp.max(jnp.stack([jnp.max(jnp.abs(a)) for a in jax.tree.leaves(tree)]))


def minimize(fun: Callable[[Any], jax.Array], x0: Any, n_steps: int, stop: StopRule | None = None
             ) -> tuple[Any, jax.Array]:
    """At most ``n_steps`` L-BFGS iterations of ``fun`` from ``x0`` inside ``lax.scan``.

    A stopped fit keeps its iterate; the rest of the scan is a ``lax.cond`` branch that
    evaluates nothing (run under ``lax.map``, not ``vmap``, where it would be a select). A
    line search that fails (a non-finite iterate) keeps the previous iterate and stops.

    Why the stopping rules: after convergence the float32 objective is flat to its last digit
    and the line search flails (measured on the simulator's D_val, reference protocol: 3 to 25
    evaluations per step from step ~40 on, 100-400 per partition in all, against 105 for a
    partition that converges cleanly).

    Args:
      fun: the objective, a scalar function of a pytree of arrays.
      x0: the initial pytree.
      n_steps: the most iterations (static).
      stop: the :class:`StopRule` (default: torch's, :meth:`StopRule.torch`).

    Returns:
      ``(x, values)``: the last iterate and the objective at each iteration (repeated once
      stopped), shape (n_steps,).

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.calibrators._lbfgs import minimize
      >>> x, values = minimize(lambda x: jnp.sum((x - 3.0) ** 2), jnp.zeros(2), 20)
      >>> [round(float(v), 4) for v in x], values.shape
      ([3.0, 3.0], (20,))
    """
    stop = StopRule.for_steps(stop, n_steps)
    opt = optax.lbfgs(memory_size=100,
                      linesearch=optax.scale_by_zoom_linesearch(max_linesearch_steps=_ZOOM["max_linesearch_steps"]))
    vg = optax.value_and_grad_from_state(fun)

    def step(carry):
        x, state, _, evals = carry
        value, grad = vg(x, state=state)
        updates, state = opt.update(grad, state, x, value=value, grad=grad, value_fn=fun)
        x_new = optax.apply_updates(x, updates)
        # A failed line search must never poison the fit: keep the old iterate on non-finite.
        ok = _all_finite(x_new)
        x = jax.tree.map(lambda a, b: jnp.where(ok, a, b), x_new, x)
        evals = (evals + optax.tree.get(state, "info").num_linesearch_steps).astype(evals.dtype)
        new_value = optax.tree.get(state, "value")
        done = ~ok | stop.done(_leaves_max(optax.tree.get(state, "grad")), _leaves_max(updates),
                               jnp.abs(new_value - value), evals)
        return (x, state, done, evals), jnp.where(ok, new_value, value).astype(value0.dtype)

    def body(carry, _):
        stopped = lambda c: (c, jnp.asarray(optax.tree.get(c[1], "value"), value0.dtype))
        return jax.lax.cond(carry[2], stopped, step, carry)

    # the first evaluation, stored where optax keeps the line search's last one (so that
    # value_and_grad_from_state never needs its own branch)
    value0, grad0 = jax.value_and_grad(fun)(x0)
    state0 = optax.tree.set(opt.init(x0), value=value0, grad=grad0)
    done0 = _leaves_max(grad0) <= stop.tol_grad
    (x, _, _, _), values = jax.lax.scan(body, (x0, state0, done0, jnp.asarray(1, jnp.int32)), None, length=n_steps)
    return x, values


def _select(keep_new: jax.Array, new: Any, old: Any) -> Any:
    """Per problem (the leading axis of every leaf), ``new`` where ``keep_new`` (B,) else ``old``."""
    return jax.tree.map(lambda a, b: jnp.where(keep_new.reshape(keep_new.shape + (1,) * (a.ndim - 1)), a, b),
                        new, old)


def minimize_lockstep(fun: Callable[..., jax.Array], x0: Any, n_steps: int, stop: StopRule | None = None,
                      *, value_and_grad: Callable[..., tuple[jax.Array, Any]] | None = None,
                      aux: Any = None, counts: bool = False) -> tuple[Any, ...]:
    """:func:`minimize` of B problems at once, one batched evaluation of the objective at a
    time: ``x0``'s leaves have a leading axis B and ``fun`` maps one problem's pytree to its
    scalar objective.

    Every problem runs :func:`minimize`'s algorithm (optax's L-BFGS, memory 100, with its
    strong-Wolfe zoom line search, and torch's stopping rules), written as a machine that
    advances by one evaluation: each pass of the loop proposes every running problem's next
    trial point (the step size its line search would try next), evaluates all of them in one
    batched call (``vmap`` of ``value_and_grad``: data the problems share, such as an
    embedding, is read once per pass, not once per problem), hands each problem its
    evaluation, and, for each problem whose line search thereby ended, takes the L-BFGS step,
    applies the stopping rules and computes the next search direction. The problems do not
    wait for each other: one whose line search needs three evaluations where the others need
    one does not make them evaluate three times, so a fit of B problems makes as many batched
    evaluations as its longest problem makes evaluations (plus the first), not the sum over
    iterations of the longest line search. Measured on VR-SAG's ten partitions (10^5 rows,
    100 steps): 1.5 batched evaluations per iteration when every line search waited for the
    slowest, about 1.1 this way.

    Each problem's iterates are those of :func:`minimize` run on it alone, up to the float
    rounding of the batched arithmetic (the line search's phases are optax's own functions,
    called once to read the proposed step size and once with the evaluation). A stopped
    problem is frozen (its iterate and objective kept); the loop ends when every problem has
    stopped or made ``n_steps`` iterations.

    Args:
      fun: the objective of one problem.
      x0: the B initial pytrees, stacked on a leading axis.
      n_steps: the most iterations of each problem (static).
      stop: the :class:`StopRule` of every problem (default: torch's).
      value_and_grad: one problem's value and gradient (default ``jax.value_and_grad(fun)``);
        give one with a ``custom_vmap`` rule to evaluate the B problems by a batched program
        of your own (SAG's reads the rows once, in blocks, for all of them).
      aux: optional per-problem data, a pytree whose leaves have the leading axis B (for
        example which row weights each problem fits); then ``fun(x, aux_b)`` and
        ``value_and_grad(x, aux_b)`` take problem b's slice as a second argument, and they are
        batched over it together with ``x``. Not differentiated.
      counts: also return the number of batched evaluations after the first (the loop's
        passes) and each problem's own evaluations, (B,), as torch counts them (the first and
        every line-search evaluation until it stopped); for benchmarks (static).

    Returns:
      ``(x, values)``: the B last iterates (leading axis B) and the objectives after each
      iteration, (B, n_steps), the last one repeated once a problem has stopped; with
      ``counts``, ``(x, values, passes, evals)``.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.calibrators._lbfgs import minimize_lockstep
      >>> x, values = minimize_lockstep(lambda x: jnp.sum((x - 3.0) ** 2), jnp.zeros((2, 2)), 20)
      >>> x.shape, values.shape, [round(float(v), 4) for v in x[1]]
      ((2, 2), (2, 20), [3.0, 3.0])
    """
    out = _minimize_lockstep(fun, x0, n_steps, stop, value_and_grad=value_and_grad, aux=aux)
    return out if counts else out[:2]


class _Search(NamedTuple):
    """One problem's state between two batched evaluations of :func:`_minimize_lockstep`."""

    x: Any  # the iterate
    direction_state: Any  # optax's L-BFGS memory
    line: Any  # the line search along the current direction (optax's ZoomLinesearchState)
    value: jax.Array  # the objective at x
    grad: Any  # its gradient
    stepsize: jax.Array  # the last accepted step size (the next search's first guess)
    done: jax.Array
    evals: jax.Array  # evaluations so far, as torch counts them
    steps: jax.Array  # iterations made
    values: jax.Array  # (n_steps,) the objective after each iteration
    last: jax.Array  # the objective after the last iteration (x0's before any)


def _minimize_lockstep(fun, x0, n_steps: int, stop: StopRule | None = None, *, value_and_grad=None, aux=None):
    """:func:`minimize_lockstep`, also returning the number of batched evaluations after the
    first (the loop's passes) and each problem's own evaluations, (B,), as torch counts them
    (the first one and every line-search evaluation until it stopped)."""
    from optax._src import linesearch as optax_linesearch  # the zoom's phases, as optax runs them

    stop = StopRule.for_steps(stop, n_steps)
    init_line, step_line, line_running = optax_linesearch.zoom_linesearch(**_ZOOM)
    direction = optax.chain(optax.scale_by_lbfgs(memory_size=100), optax.scale(-1.0))
    zoom_init = optax.scale_by_zoom_linesearch(max_linesearch_steps=_ZOOM["max_linesearch_steps"]).init

    def bound_value_and_grad(a):
        f = fun if aux is None else (lambda x: fun(x, a))
        if value_and_grad is None:
            return jax.value_and_grad(f)
        return value_and_grad if aux is None else (lambda x: value_and_grad(x, a))

    evaluate = jax.vmap(lambda x, a: bound_value_and_grad(a)(x), in_axes=(0, None if aux is None else 0))

    def begin(x, direction_state, value, grad, stepsize):
        """A new line search from x along L-BFGS's direction; the first guess is the last step
        size (optax's ``initial_guess_strategy="keep"``)."""
        updates, direction_state = direction.update(grad, direction_state, x)
        line = init_line(updates, x, value=value, grad=grad, prev_stepsize=stepsize, initial_guess_strategy="keep")
        return line, direction_state

    value0, grad0 = evaluate(x0, aux)
    stepsize_dtype = jax.eval_shape(zoom_init, jax.tree.map(lambda a: a[0], x0)).learning_rate.dtype
    B = value0.shape[0]
    stepsize0 = jnp.ones((B,), stepsize_dtype)
    line0, direction_state0 = jax.vmap(begin)(x0, jax.vmap(direction.init)(x0), value0, grad0, stepsize0)
    ends = jnp.asarray(-jnp.finfo(value0.dtype).max / 4, value0.dtype)  # a decrease that satisfies every test

    def proposed_stepsize(line):
        """The step size the line search evaluates next: its step run with a stand-in
        objective whose value ends the search, of which only the proposal is read (it depends
        on the state alone)."""
        stand_in = lambda x, **_: (ends, jax.tree.map(jnp.zeros_like, x))  # noqa: E731
        return step_line(line, value_and_grad_fn=stand_in, fn_kwargs={}).stepsize

    def absorbed(line, evaluated):
        return step_line(line, value_and_grad_fn=lambda x, **_: evaluated, fn_kwargs={})

    def finish(s: _Search) -> _Search:
        """The L-BFGS iteration whose line search has ended: the step, torch's stopping tests,
        the objective recorded."""
        line = s.line
        updates = optax.tree.scale(line.stepsize, line.updates)
        x_new = optax.apply_updates(s.x, updates)
        # a failed line search must never poison the fit: keep the old iterate on non-finite
        ok = _all_finite(x_new)
        evals = (s.evals + line.count).astype(s.evals.dtype)
        value = line.value.astype(s.value.dtype)
        done = ~ok | stop.done(_leaves_max(line.grad), _leaves_max(updates), jnp.abs(value - s.value), evals)
        recorded = jnp.where(ok, value, s.value)
        return s._replace(
            x=jax.tree.map(lambda a, b: jnp.where(ok, a, b), x_new, s.x), value=value, grad=line.grad,
            stepsize=line.stepsize.astype(stepsize_dtype), done=done | (s.steps + 1 >= n_steps), evals=evals,
            steps=s.steps + 1, values=s.values.at[s.steps].set(recorded, mode="drop"), last=recorded)

    def after_ended(ended, s: _Search) -> _Search:
        s = _select(ended, jax.vmap(finish)(s), s)
        line, direction_state = jax.vmap(begin)(s.x, s.direction_state, s.value, s.grad, s.stepsize)
        again = ended & ~s.done
        return s._replace(line=_select(again, line, s.line),
                          direction_state=_select(again, direction_state, s.direction_state))

    def one_evaluation(carry):
        s, passes = carry
        stepsize = jax.vmap(proposed_stepsize)(s.line)
        points = jax.vmap(optax.tree.add_scale)(s.line.params, stepsize, s.line.updates)
        running = ~s.done
        line = _select(running, jax.vmap(absorbed)(s.line, evaluate(points, aux)), s.line)
        ended = running & ~jax.vmap(line_running)(line)
        s = s._replace(line=line)
        # most passes end some problem's line search; the others skip the L-BFGS bookkeeping
        s = jax.lax.cond(jnp.any(ended), after_ended, lambda _, s: s, ended, s)
        return s, passes + 1

    start = _Search(x=x0, direction_state=direction_state0, line=line0, value=value0, grad=grad0,
                    stepsize=stepsize0, done=(jax.vmap(_leaves_max)(grad0) <= stop.tol_grad) | (n_steps <= 0),
                    evals=jnp.ones((B,), jnp.int32), steps=jnp.zeros((B,), jnp.int32),
                    values=jnp.zeros((B, n_steps), value0.dtype), last=value0)
    s, passes = jax.lax.while_loop(lambda c: ~jnp.all(c[0].done), one_evaluation, (start, jnp.asarray(0, jnp.int32)))
    values = jnp.where(jnp.arange(n_steps)[None, :] < s.steps[:, None], s.values, s.last[:, None])
    return s.x, values, passes, s.evals
