"""How calib_jax's computations run: private plumbing shared by the public layers.

Nothing here is public API; names and signatures may change without notice.

* ``eager`` — one compiled program per eager call, input checks recorded under tracing
  (NaN outputs under a user's ``jit``), :func:`calib_jax.unchecked`.
* ``validation`` — the input checks (``ValueError`` naming the argument).
* ``host_call`` — NumPy/SciPy callbacks safe on several host devices.
* ``sorting``, ``ranks`` — host-sorted argsort on the CPU (``lax.sort`` elsewhere), tie
  groups and average ranks.
* ``pav``, ``pav_device`` — pool-adjacent-violators on the host, and its device branch.
* ``linalg`` — small SPD solves without LAPACK (vmap-friendly).
* ``threefry`` — Threefry lowered unrolled on the CPU.
* ``fusion`` — an identity that bounds XLA fusion.
* ``precision`` — the matmul precision every product states.
"""
