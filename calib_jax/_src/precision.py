"""The matrix-product precision policy of calib_jax (docs/ARCHITECTURE.md, "Precision").

Every matrix product whose result is a statistic or a fit (group sums over soft memberships,
correlation matrices, linear predictors of the simulator and the Monte Carlo populations,
calibration heads and the networks the studies train) passes ``precision=MATMUL``:
float32-exact products on every backend. Without it, XLA on recent NVIDIA GPUs multiplies
float32 matrices in TF32 (10-bit mantissa), which moved a Spearman matrix by 5.6e-5 and SAG
memberships by 0.014 on an H100 while the CPU, which has no TF32, stayed exact.

``HIGHEST`` costs little here: the products are thin (n x K with K <= a few hundred) and
memory-bound, not FLOP-bound.
"""

from __future__ import annotations

import jax

#: the precision of every statistic- or fit-producing matrix product in calib_jax
MATMUL = jax.lax.Precision.HIGHEST
