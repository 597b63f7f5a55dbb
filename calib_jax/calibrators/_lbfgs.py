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

__all__ = ["TORCH_TOL_GRAD", "TORCH_TOL_CHANGE", "StopRule", "minimize"]

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
    stop = StopRule.torch(n_steps) if stop is None else stop
    if stop.max_evals is None:
        stop = stop._replace(max_evals=1.25 * n_steps)
    opt = optax.lbfgs(memory_size=100, linesearch=optax.scale_by_zoom_linesearch(max_linesearch_steps=25))
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
