"""Group metrics on data sharded over 4 (virtual CPU) devices equal the single-device run.

A subprocess is started with ``XLA_FLAGS=--xla_force_host_platform_device_count=4`` (the
flag must be set before JAX initialises).  It

1. shards the rows over a 4-device mesh with ``NamedSharding`` and evaluates jitted group
   metrics / decompositions, and the same functions on unsharded data;
2. computes :func:`calib_jax.groupstats.group_stats` per shard, on each shard's device, and
   merges them;

and prints JSON.  The parent compares both with the single-device values and with the
plain-NumPy reference.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import reference as R

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    """
    import json
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import AxisType, NamedSharding, PartitionSpec
    jax.config.update("jax_numpy_rank_promotion", "raise")
    from calib_jax import decompositions as D
    from calib_jax import metrics as M
    from calib_jax.groupstats import group_stats, merge, summarize

    assert jax.device_count() == 4, jax.devices()
    rng = np.random.default_rng(5)
    n, K = 4096, 8
    p = rng.uniform(0, 1, n).astype(np.float32)
    y = (rng.uniform(size=n) < p ** 1.4).astype(np.float32)
    g = rng.integers(0, K, n).astype(np.int32)
    w = rng.uniform(0.5, 1.5, n).astype(np.float32)
    soft = rng.dirichlet(np.ones(K), n).astype(np.float32)

    def metrics(p, y, g, w, soft):
        bg = D.brier_grouping(p, y, g, n_groups=K, weights=w)
        return jnp.stack([
            M.gce(p, y, g, n_groups=K, weights=w),
            M.gce(p, y, soft, weights=w),
            M.ece(p, y, n_bins=15, weights=w),
            M.field_ece(p, y, g, n_groups=K, weights=w),
            M.field_rce(p, y, g, n_groups=K, weights=w),
            M.brier(p, y, weights=w),
            bg.rel, bg.res, bg.delta, bg.unc,
        ])

    f = jax.jit(metrics)

    def run_sharded(axis_type):
        mesh = jax.make_mesh((4,), ("data",), axis_types=(axis_type,))
        rows = NamedSharding(mesh, PartitionSpec("data"))
        rows2 = NamedSharding(mesh, PartitionSpec("data", None))
        args = [jax.device_put(a, rows) for a in (p, y, g, w)] + [jax.device_put(soft, rows2)]
        assert len(args[0].sharding.device_set) == 4
        with jax.set_mesh(mesh):  # what the explicit mode asks of its users
            return np.asarray(f(*args)).tolist(), np.asarray(metrics(*args)).tolist()

    sharded, sharded_eager = run_sharded(AxisType.Auto)
    try:  # jax.make_mesh's default axis type (sharding in types)
        explicit, explicit_eager = run_sharded(AxisType.Explicit)
    except Exception as e:  # reported by the parent test
        explicit = explicit_eager = f"{type(e).__name__}: {str(e).splitlines()[0]}"

    single = f(*[jax.device_put(a, jax.devices()[0]) for a in (p, y, g, w, soft)])

    # per-shard statistics on each shard's own device, merged by adding
    parts = []
    for i, dev in enumerate(jax.devices()):
        sl = slice(i * n // 4, (i + 1) * n // 4)
        parts.append(group_stats(*[jax.device_put(a[sl], dev) for a in (p, y, g)],
                                 n_groups=K, weights=jax.device_put(w[sl], dev)))
    merged = parts[0]
    for s in parts[1:]:
        merged = merge(jax.device_put(merged, jax.devices()[0]),
                       jax.device_put(s, jax.devices()[0]))
    whole = group_stats(p, y, g, n_groups=K, weights=w)
    summ = summarize(merged)
    print(json.dumps({
        "sharded": sharded,
        "explicit": explicit,
        "explicit_eager": explicit_eager,
        "sharded_eager": sharded_eager,
        "single": np.asarray(single).tolist(),
        "merged": [np.asarray(x).tolist() for x in merged],
        "whole": [np.asarray(x).tolist() for x in whole],
        "merged_gce": float(jnp.sum(summ.mass * (summ.mu - summ.pi) ** 2)),
    }))
    """
)


@pytest.fixture(scope="module")
def sharded_run():
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                        " --xla_force_host_platform_device_count=4").strip()
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _reference_values():
    rng = np.random.default_rng(5)
    n, K = 4096, 8
    p = rng.uniform(0, 1, n).astype(np.float32).astype(np.float64)
    y = (rng.uniform(size=n) < p ** 1.4).astype(np.float64)
    g = rng.integers(0, K, n)
    w = rng.uniform(0.5, 1.5, n).astype(np.float32).astype(np.float64)
    soft = rng.dirichlet(np.ones(K), n).astype(np.float32).astype(np.float64)
    soft = soft / soft.sum(axis=1, keepdims=True)
    bg = R.brier_grouping(p, y, g, n_groups=K, weights=w)
    return [
        R.gce(p, y, g, n_groups=K, weights=w),
        R.gce(p, y, soft, weights=w),
        R.ece(p, y, n_bins=15, weights=w),
        R.field_ece(p, y, g, w),
        R.field_rce(p, y, g, weights=w),
        R.brier(p, y, w),
        bg["rel"], bg["res"], bg["delta"], bg["unc"],
    ], R.group_sums(p, y, g, n_groups=K, weights=w)


def test_sharded_metrics_equal_single_device(sharded_run):
    sharded = np.array(sharded_run["sharded"])
    single = np.array(sharded_run["single"])
    np.testing.assert_allclose(sharded, single, rtol=1e-5, atol=1e-7)
    ref, _ = _reference_values()
    np.testing.assert_allclose(sharded, ref, rtol=1e-4, atol=1e-6)


def test_explicit_axis_mesh_equals_single_device(sharded_run):
    """``jax.make_mesh`` defaults to ``AxisType.Explicit`` (sharding in types)."""
    for key in ("explicit", "explicit_eager", "sharded_eager"):  # jitted and eager calls
        got = sharded_run[key]
        assert not isinstance(got, str), got
        np.testing.assert_allclose(np.array(got), np.array(sharded_run["single"]), rtol=1e-5,
                                   atol=1e-7, err_msg=key)


def test_per_shard_group_stats_merge_to_whole(sharded_run):
    merged = np.array(sharded_run["merged"]).T
    whole = np.array(sharded_run["whole"]).T
    np.testing.assert_allclose(merged, whole, rtol=1e-5, atol=1e-3)
    _, sums = _reference_values()
    np.testing.assert_allclose(merged, sums, rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(sharded_run["merged_gce"], sharded_run["single"][0], rtol=1e-4,
                               atol=1e-7)


@pytest.mark.slow
def test_study_is_byte_identical_across_reruns_and_host_device_counts(tmp_path):
    """The Fig 3 study (smoke preset, three metrics) run with 1 host device and then with 2
    (``$CALIB_JAX_CPU_DEVICES``) writes byte-identical trial arrays and tables: trials are
    keyed by their index, not by the device that ran them."""
    outs = {}
    for n_dev in (1, 2):
        out = tmp_path / f"dev{n_dev}"
        env = {**os.environ, "CALIB_JAX_CPU_DEVICES": str(n_dev), "CALIB_JAX_CHECKPOINTS": str(tmp_path / "ck"),
               "JAX_PLATFORMS": "cpu"}
        env.pop("XLA_FLAGS", None)
        # three metrics and 10 bootstrap draws: the trials' keying is what is tested, and every
        # metric compiles its own programs at the default LLVM level in each fresh process
        subprocess.run([sys.executable, "-m", "experiments", "run", "mc_spearman", "--smoke", "--out", str(out),
                        "--set", "metrics=['ece', 'lcce', 'oracle_brier']", "--set", "n_boot=10",
                        "--no-progress"], cwd=ROOT, env=env, check=True, capture_output=True, timeout=900)
        prov = json.loads((out / "provenance.json").read_text())
        assert len(prov["devices"]) == n_dev
        outs[n_dev] = out
    for name in ("trials_fixed.npz", "trials_pooled.npz", "spearman_fixed.csv", "paired_fixed.csv"):
        a, b = (outs[d] / name for d in (1, 2))
        if name.endswith(".npz"):
            with np.load(a) as za, np.load(b) as zb:
                for k in za.files:
                    np.testing.assert_array_equal(za[k], zb[k])
        else:
            assert a.read_bytes() == b.read_bytes(), name
