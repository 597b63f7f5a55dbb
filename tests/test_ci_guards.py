"""The guards that keep the whole suite honest and alive in CI.

* A skip for a missing module or program fails a CI run (``CALIB_JAX_CI=1``), other skips do not.
* A long-lived process sheds its compiled programs before the kernel's cap on memory mappings
  (``calib_jax._src.mappings``): XLA:CPU segfaults at the cap.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import pytest

from calib_jax._src import mappings

TESTS = pathlib.Path(__file__).parent


def _run_probe(tmp_path: pathlib.Path, ci: bool) -> subprocess.CompletedProcess:
    probe = tmp_path / "test_probe.py"
    probe.write_text(textwrap.dedent('''
        import pytest

        def test_needs_a_missing_module():
            pytest.importorskip("calib_jax_no_such_module")

        def test_outside_the_domain():
            pytest.skip("below the call's minimum size")

        def test_runs():
            assert True
    '''))
    env = {**os.environ, "PYTHONPATH": str(TESTS), "CALIB_JAX_CI": "1" if ci else "0"}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider",
                           "-p", "no:xdist", "-c", os.devnull, "--rootdir", str(tmp_path), str(probe)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)


def test_a_skip_for_a_missing_module_fails_ci_and_others_do_not(tmp_path):
    ci = _run_probe(tmp_path, ci=True)
    assert ci.returncode == 1, ci.stdout + ci.stderr
    assert "1 test(s) skipped for a missing install" in ci.stdout
    assert "test_needs_a_missing_module" in ci.stdout and "calib_jax_no_such_module" in ci.stdout
    assert "test_outside_the_domain: " not in ci.stdout  # a skip that holds on every machine
    local = _run_probe(tmp_path, ci=False)
    assert local.returncode == 0, local.stdout + local.stderr
    assert "1 passed, 2 skipped" in local.stdout


@pytest.mark.skipif(mappings.mapping_count() is None, reason="no /proc/self/maps on this system")
def test_compiled_programs_hold_mappings_and_the_guard_releases_them(monkeypatch):
    """Each new executable adds memory mappings that live as long as JAX's caches; emptying the
    caches past the threshold gives them back (the measured cost is what makes a worker of a
    thousand tests reach the kernel's 65,530)."""
    if jax.default_backend() != "cpu":  # seen on an H100: the driver's own mappings come and go
        pytest.skip("the guard counts XLA:CPU's executables (host machine code); a GPU's are not mapped")
    jax.clear_caches()
    before = mappings.mapping_count()
    fns = [jax.jit(lambda x, i=i: jnp.sin(x) * i) for i in range(40)]
    for i, f in enumerate(fns):
        f(jnp.ones(i + 1)).block_until_ready()  # 40 shapes: 40 executables
    grown = mappings.mapping_count() - before
    assert grown >= 40 * 4, f"{grown} mappings for 40 executables"
    monkeypatch.setattr(mappings, "mapping_limit", lambda: 10 ** 9)
    assert mappings.release_compiled_if_near_limit() is False  # far below: nothing emptied
    monkeypatch.setattr(mappings, "mapping_limit", lambda: before + grown // 2)
    assert mappings.release_compiled_if_near_limit(0.5) is True
    assert mappings.mapping_count() - before < grown // 4
    assert float(fns[3](jnp.ones(4))[0]) == pytest.approx(3 * float(jnp.sin(1.0)))  # recompiles


def test_the_guard_checks_its_argument():
    for bad in (0.0, 1.0, -0.5, float("nan")):
        with pytest.raises(ValueError, match="`fraction`"):
            mappings.release_compiled_if_near_limit(bad)
