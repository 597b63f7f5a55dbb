"""Is Neural Calibration bit-identical run to run on this backend, and which lookup makes it so?

Run on a lent GPU machine by ``h100_session.sh``: once as the library sets XLA up (it asks for
deterministic GPU ops, ``calib_jax/_src/startup.py``) and once under
``XLA_FLAGS=--xla_gpu_deterministic_ops=false``. ``--one-hot`` looks the field embeddings up as
a one-hot product instead of a gather (so their gradient is a matrix product, not a scatter-add):
measured on an H100, that alone did not make the fits reproducible (the spline's knot gather
remains). Prints, per data size, the largest parameter difference between three fits with the
same key and the wall time of each fit (the first one compiles).

    python -m benchmarks.device.nc_determinism [--one-hot]
"""

from __future__ import annotations

import argparse
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np


class OneHotEmbed(nn.Embed):
    """``nn.Embed`` whose lookup is ``one_hot(ids) @ table`` (exact: one nonzero term per row)."""

    def __call__(self, inputs):  # type: ignore[override]
        onehot = jax.nn.one_hot(inputs, self.num_embeddings, dtype=self.embedding.dtype)
        return jnp.dot(onehot, self.embedding, precision=jax.lax.Precision.HIGHEST)


def data(n: int, vocab: tuple[int, ...], seed: int = 0):
    rng = np.random.default_rng(seed)
    f = np.stack([rng.integers(0, v, n) for v in vocab], 1)
    true = -1.5 + rng.normal(size=n) + 0.5 * np.sin(f[:, 0])
    o = (true + 0.3 * rng.normal(size=n)).astype(np.float32)
    y = (rng.random(n) < 1 / (1 + np.exp(-true))).astype(np.float32)
    return o, y, f


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--one-hot", action="store_true")
    args = ap.parse_args()
    if args.one_hot:
        setattr(nn, "Embed", OneHotEmbed)  # noqa: B010 (the module looks nn.Embed up at call time)
    from calib_jax.calibrators import neural_calibration as nc

    print("backend", jax.default_backend(), "one_hot", args.one_hot)
    for n, vocab in [(3000, (5, 3)), (100_000, (1000, 50))]:
        o, y, f = data(n, vocab)
        fits, times = [], []
        for _ in range(3):
            t = time.perf_counter()
            p = nc.fit(o, y, context={"fields": f}, key=jax.random.key(0), n_steps=200, n_knots=20)
            jax.block_until_ready(jax.tree.leaves(p))
            times.append(time.perf_counter() - t)
            fits.append([np.asarray(a, dtype=np.float64) for a in jax.tree.leaves(p)])
        diff = max(float(np.max(np.abs(a - b))) for f1 in fits[1:] for a, b in zip(fits[0], f1))
        print(f"n={n} vocab={vocab}: max |fit_i - fit_0| = {diff:.3g}; fit s = "
              + ", ".join(f"{t:.2f}" for t in times))


if __name__ == "__main__":
    main()
