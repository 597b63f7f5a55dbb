"""``import calib_jax`` asks XLA:GPU for deterministic ops unless the user chose (startup.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import jax
import pytest

from calib_jax._src.startup import DETERMINISTIC_GPU_FLAG

SHOW = "import os, calib_jax; print(os.environ.get('XLA_FLAGS', ''))"


def _flags_after_import(xla_flags: str | None, code: str = SHOW, platforms: str | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    if platforms is not None:
        env["JAX_PLATFORMS"] = platforms
    if xla_flags is not None:
        env["XLA_FLAGS"] = xla_flags
    out = subprocess.run([sys.executable, "-W", "error", "-c", code], env=env, capture_output=True,
                         text=True, check=True)
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""


@pytest.mark.parametrize("given, expected", [
    (None, DETERMINISTIC_GPU_FLAG),
    ("--xla_force_host_platform_device_count=2",
     f"--xla_force_host_platform_device_count=2 {DETERMINISTIC_GPU_FLAG}"),
    ("--xla_gpu_deterministic_ops=false", "--xla_gpu_deterministic_ops=false"),  # the user's choice stays
])
def test_import_asks_for_deterministic_gpu_ops_unless_the_flag_is_named(given, expected):
    assert _flags_after_import(given) == expected


def test_a_backend_started_before_the_import_is_left_alone():
    # JAX read XLA_FLAGS when it started the CPU backend: changing them now would be a lie, and
    # a CPU backend needs no warning (-W error would turn one into a failure)
    # (JAX_PLATFORMS=cpu: on a machine with a GPU, jnp.ones would start the GPU backend)
    code = "import jax.numpy as jnp; jnp.ones(2).sum(); " + SHOW
    assert _flags_after_import(None, code, platforms="cpu") == ""


@pytest.mark.skipif("cuda" not in {d.platform for d in jax.devices()}, reason="needs a CUDA GPU")
def test_a_gpu_backend_started_before_the_import_warns():
    # the flag can no longer reach XLA:GPU: the import says so rather than pretend
    code = "import jax.numpy as jnp; jnp.ones(2).sum(); " + SHOW
    with pytest.raises(subprocess.CalledProcessError) as failed:
        _flags_after_import(None, code, platforms="cuda")
    assert "RuntimeWarning" in failed.value.stderr and DETERMINISTIC_GPU_FLAG in failed.value.stderr


def test_the_flag_is_accepted_by_this_jaxlib():
    # an unknown XLA flag aborts the process: the CPU build must parse the GPU flag
    code = "import calib_jax, jax.numpy as jnp; print(float(jnp.ones(3).sum()))"
    assert _flags_after_import(None, code) == "3.0"
