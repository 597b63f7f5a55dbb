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
        ok = jnp.all(jnp.array([jnp.all(jnp.isfinite(leaf)) for leaf in jax.tree.leaves(x_new)]))
        x = jax.tree.map(lambda a, b: jnp.where(ok, a, b), x_new, x)
        evals = evals + optax.tree.get(state, "info").num_linesearch_steps
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


def _lockstep_zoom(value_and_grad: Callable[[Any], tuple[jax.Array, Any]] | None = None
                   ) -> optax.GradientTransformationExtraArgs:
    """optax's zoom line search (``scale_by_zoom_linesearch`` with :data:`_ZOOM`), rewritten so
    that each of its iterations evaluates the objective exactly once, outside any branch.

    optax's iteration picks one of two phases (bracketing, zoom) with ``lax.cond``, and each
    phase proposes a step size, evaluates the objective there and updates the state. Under
    ``vmap`` the ``cond`` becomes a ``select`` and both phases evaluate. Here an iteration runs
    optax's own step twice around one evaluation: first with a stand-in objective whose value
    ends the search (so only the proposal is read: the step size of the phase the state is in,
    which depends on the state alone), then the objective at that step size, then optax's step
    again, handed that evaluation (the phase that was not taken gets it too; its result is
    discarded by the ``select``). The iterates are optax's, evaluation for evaluation.

    ``frozen`` (an extra argument of ``update``): a problem that has stopped searches no more,
    so under ``vmap`` it does not keep the others' loop going. ``value_and_grad``: the objective's
    value and gradient (default ``jax.value_and_grad`` of ``value_fn``)."""
    from optax._src import linesearch as optax_linesearch  # the zoom's phases, as optax runs them

    init_ls, step_ls, cond_ls = optax_linesearch.zoom_linesearch(**_ZOOM)
    reference = optax.scale_by_zoom_linesearch(max_linesearch_steps=_ZOOM["max_linesearch_steps"])

    def update_fn(updates, state, params, *, value, grad, value_fn, frozen=False, **extra_args):
        value_and_grad_fn = jax.value_and_grad(value_fn) if value_and_grad is None else value_and_grad
        ls0 = init_ls(updates, params, value=value, grad=grad, prev_stepsize=state.learning_rate,
                      initial_guess_strategy="keep")
        dtype = jnp.asarray(value).dtype
        ends = jnp.asarray(-jnp.finfo(dtype).max / 4, dtype)  # a decrease that satisfies every test

        def stand_in(x, **_):
            return ends, jax.tree.map(jnp.zeros_like, x)

        def body(ls):
            stepsize = step_ls(ls, value_and_grad_fn=stand_in, fn_kwargs={}).stepsize
            evaluated = value_and_grad_fn(optax.tree.add_scale(params, stepsize, updates))
            return step_ls(ls, value_and_grad_fn=lambda x, **_: evaluated, fn_kwargs={})

        running = ~jnp.asarray(frozen, bool)
        final = jax.lax.while_loop(lambda ls: cond_ls(ls) & running, body, ls0)
        new_state = type(state)(
            learning_rate=final.stepsize, value=final.value, grad=final.grad,
            info=type(state.info)(num_linesearch_steps=final.count, decrease_error=final.decrease_error,
                                  curvature_error=final.curvature_error))
        return optax.tree.scale(final.stepsize, updates), optax.tree.cast_like(new_state, other_tree=state)

    return optax.GradientTransformationExtraArgs(reference.init, update_fn)


def minimize_lockstep(fun: Callable[..., jax.Array], x0: Any, n_steps: int, stop: StopRule | None = None,
                      *, value_and_grad: Callable[..., tuple[jax.Array, Any]] | None = None,
                      aux: Any = None) -> tuple[Any, jax.Array]:
    """:func:`minimize` of B problems at once, stepping together: ``x0``'s leaves have a
    leading axis B and ``fun`` maps one problem's pytree to its scalar objective.

    Every L-BFGS iteration and every line-search iteration evaluates the objective once for all
    B problems (``vmap`` of ``fun``: the problems' shared data, such as an embedding, is read once
    per evaluation, not once per problem). The algorithm is :func:`minimize`'s: optax's L-BFGS
    and zoom line search (:func:`_lockstep_zoom`, whose iterates equal optax's unbatched), and
    torch's stopping rules per problem; batched, the iterates differ from one problem's alone by
    the float rounding of the batched arithmetic. A stopped problem is frozen (its iterate and
    objective kept, its line search skipped); once every problem has stopped, the remaining
    iterations evaluate nothing.

    Args:
      fun: the objective of one problem.
      x0: the B initial pytrees, stacked on a leading axis.
      n_steps: the most iterations (static).
      stop: the :class:`StopRule` of every problem (default: torch's).
      value_and_grad: one problem's value and gradient (default ``jax.value_and_grad(fun)``);
        give one with a ``custom_vmap`` rule to evaluate the B problems by a batched program
        of your own (SAG's reads the rows once, in blocks, for all of them).
      aux: optional per-problem data, a pytree whose leaves have the leading axis B (for
        example which row weights each problem fits); then ``fun(x, aux_b)`` and
        ``value_and_grad(x, aux_b)`` take problem b's slice as a second argument, and they are
        batched over it together with ``x``. Not differentiated.

    Returns:
      ``(x, values)``: the B last iterates (leading axis B) and the objectives, (B, n_steps).

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.calibrators._lbfgs import minimize_lockstep
      >>> x, values = minimize_lockstep(lambda x: jnp.sum((x - 3.0) ** 2), jnp.zeros((2, 2)), 20)
      >>> x.shape, values.shape, [round(float(v), 4) for v in x[1]]
      ((2, 2), (2, 20), [3.0, 3.0])
    """
    stop = StopRule.for_steps(stop, n_steps)

    def bound(a):
        """One problem's objective, value-and-gradient and optimiser, with its slice ``a`` of
        ``aux`` bound (``a`` is None without ``aux``)."""
        f = fun if aux is None else (lambda x: fun(x, a))
        if value_and_grad is None:
            vg = jax.value_and_grad(f)
        else:
            vg = value_and_grad if aux is None else (lambda x: value_and_grad(x, a))
        return f, vg, optax.chain(optax.scale_by_lbfgs(memory_size=100), optax.scale(-1.0), _lockstep_zoom(vg))

    def one_step(x, state, done, evals, a):
        f, _, opt = bound(a)
        # the objective and gradient at x: the line search's last evaluation, kept in its state
        value, grad = optax.tree.get(state, "value"), optax.tree.get(state, "grad")
        updates, state_new = opt.update(grad, state, x, value=value, grad=grad, value_fn=f, frozen=done)
        x_new = optax.apply_updates(x, updates)
        ok = jnp.all(jnp.array([jnp.all(jnp.isfinite(leaf)) for leaf in jax.tree.leaves(x_new)]))
        evals_new = evals + optax.tree.get(state_new, "info").num_linesearch_steps
        new_value = optax.tree.get(state_new, "value")
        now_done = ~ok | stop.done(_leaves_max(optax.tree.get(state_new, "grad")), _leaves_max(updates),
                                   jnp.abs(new_value - value), evals_new)
        keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(done, b, a), new, old)  # noqa: E731
        x_out = keep(jax.tree.map(lambda a, b: jnp.where(ok, a, b), x_new, x), x)
        return (x_out, keep(state_new, state), done | now_done, jnp.where(done, evals, evals_new),
                jnp.where(done | ~ok, value, new_value).astype(value.dtype))

    def init(x, a):
        _, vg, opt = bound(a)
        value0, grad0 = vg(x)
        state0 = optax.tree.set(opt.init(x), value=value0, grad=grad0)
        return state0, _leaves_max(grad0) <= stop.tol_grad

    aux_axis = None if aux is None else 0
    state0, done0 = jax.vmap(init, in_axes=(0, aux_axis))(x0, aux)
    stepped = jax.vmap(one_step, in_axes=(0, 0, 0, 0, aux_axis))

    def body(carry, _):
        x, state, done, evals = carry
        x, state, done, evals, value = stepped(x, state, done, evals, aux)
        return (x, state, done, evals), value

    carry0 = (x0, state0, done0, jnp.ones(done0.shape, jnp.int32))
    (x, _, _, _), values = jax.lax.scan(body, carry0, None, length=n_steps)
    return x, values.T
