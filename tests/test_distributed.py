"""The Monte Carlo engine under ``jax.distributed``: two local CPU processes (gloo
collectives), each with two host devices, one global mesh of four devices, return the same
trials as one process with one device, bit for bit.

Each worker is a subprocess (``jax.distributed.initialize`` must run before JAX starts its
backends); the parent compares the workers' arrays with its own single-device run.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import numpy as np

from calib_jax import montecarlo as mc

ROOT = Path(__file__).resolve().parents[1]
N, TRIALS, CHUNK = 600, 8, 8
METRICS = ["ece", "lcce", "field_ece", "oracle_brier"]

WORKER = textwrap.dedent(
    """
    import sys
    import jax
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.config.update("jax_num_cpu_devices", 2)
    pid, port, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    jax.distributed.initialize("127.0.0.1:" + port, num_processes=2, process_id=pid)
    import numpy as np
    from calib_jax import montecarlo as mc
    assert jax.process_count() == 2 and len(jax.devices()) == 4, jax.devices()
    trial, _, _ = mc.make_design_trial("fixed", {n}, seed=0, metrics={metrics})
    values, oracle = mc.run_trials(trial, jax.random.key(3), {trials}, chunk_size={chunk},
                                  trials_per_step=2, progress=False)
    np.savez(out, values=np.asarray(values), oracle=np.asarray(oracle))
    jax.distributed.shutdown()
    """
).format(n=N, metrics=METRICS, trials=TRIALS, chunk=CHUNK)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_equal_one_process(tmp_path):
    port = str(_free_port())
    # the workers compile as this process does (tests/conftest.py's optimization level), since
    # their values are compared with this process's bit for bit; no forced host device count
    env = dict(os.environ)
    env["XLA_FLAGS"] = " ".join(f for f in env.get("XLA_FLAGS", "").split()
                                if "xla_force_host_platform_device_count" not in f)
    env.update(JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(i), port, str(tmp_path / f"p{i}.npz")],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in range(2)]
    logs = [p.communicate(timeout=600)[0] for p in procs]
    for p, log in zip(procs, logs, strict=True):
        assert p.returncode == 0, log[-3000:]

    trial, _, _ = mc.make_design_trial("fixed", N, seed=0, metrics=METRICS)
    values, oracle = mc.run_trials(trial, jax.random.key(3), TRIALS, chunk_size=CHUNK, trials_per_step=2,
                                   progress=False, devices=jax.devices()[:1])
    for i in range(2):
        with np.load(tmp_path / f"p{i}.npz") as z:
            np.testing.assert_array_equal(z["values"], np.asarray(values))
            np.testing.assert_array_equal(z["oracle"], np.asarray(oracle))
