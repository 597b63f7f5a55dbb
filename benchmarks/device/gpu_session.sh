#!/usr/bin/env bash
# One prepared command for a lent GPU machine with 15 minutes of device time in all: the research
# loop (research_loop.py) and the test suite on the GPU, in under 10 minutes (END_S, 550 s).
#
#   0. bench_sort at 10^5, 10^6 and 10^7 rows (seconds): jnp.argsort beside the packed 64-bit words,
#      the CUDA branch of the library's argsort since 2026-12-07, never timed on a GPU before;
#   1. mc_spearman --paper and bench_vrsag at 10^6 and 10^7 rows, one after the other on the quiet
#      machine (their timings are results);
#   2. one world of compare_calibrators --paper, beside the test suite on 10 of the 16 cores
#      (JAX_PLATFORMS=cuda,cpu; the files most about numerics first), both stopped at END_S: the
#      world's phase lines give its pace where it does not finish, and every failing test's
#      traceback is written as it happens (pytest_failures_log.py).
#
# Knobs: END_S; QUIET_STEPS (default "mc_spearman bench_vrsag"; empty skips part 1); DEVICE_TIME
# (research_loop --device-time: auto, the default, samples the GPU's utilization through NVML;
# trace is jax.profiler's, too heavy for these steps on the H200; none); TEST_WORKERS (10).
#
# The metric and eager-call benchmarks (h100_session.sh) are left out: they do not fit beside
# these in the 15 minutes. Results: $OUT/loop_quiet, $OUT/loop_busy (research_loop.{json,md} per
# device) and $OUT/tests/ under $OUT/r, packed into $OUT/results.tgz.
set -u
OUT0=${OUT:-$PWD/device_out}; OUT=$OUT0/r; mkdir -p "$OUT/tests"
END_S=${END_S:-550}
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false MPLBACKEND=Agg
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=$PWD:/tmp/site
# installed too (offline, no build isolation): two tests run the package from other directories
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . > "$OUT/tests/pip_install.log" 2>&1
{ nvidia-smi; python3 -c "import jax,jaxlib,numpy,scipy,sys;print(sys.version);print('jax',jax.__version__,'jaxlib',jaxlib.__version__,'numpy',numpy.__version__,'scipy',scipy.__version__);print(jax.devices())"; } > "$OUT/env.txt" 2>&1
el env; tail -2 "$OUT/env.txt"
python3 -m benchmarks.bench_sort --sizes 100000 1000000 10000000 --out "$OUT/sort" > "$OUT/sort.log" 2>&1
el sort done; tail -6 "$OUT/sort.log"
PROFILE_ARG="--device-time ${DEVICE_TIME:-auto}"
QUIET_STEPS=${QUIET_STEPS-mc_spearman bench_vrsag}
if [ -n "$QUIET_STEPS" ]; then
  python3 -m benchmarks.device.research_loop --out "$OUT/loop_quiet" --steps $QUIET_STEPS $PROFILE_ARG; el quiet steps done
fi
LEFT=$(( END_S - ($(date +%s) - T0) ))
FIRST="tests/test_sag.py tests/test_lbfgs_lockstep.py tests/test_sag_own_weights.py tests/test_transfer_guard.py
  tests/test_metrics_reference.py tests/test_metric_equivalences.py tests/test_metrics_edge.py tests/test_metrics_modern.py
  tests/test_calibrators.py tests/test_pav_device.py tests/test_sharding.py tests/test_montecarlo_user_metrics.py"
REST=$(ls tests/test_*.py | grep -v -x -F "$(echo $FIRST | tr ' ' '\n')")
( JAX_PLATFORMS=cuda,cpu PYTEST_FAILURES_LOG="$OUT/tests/failures.txt" timeout $(( LEFT - 5 )) python3 -m pytest \
    -m "not slow" -n ${TEST_WORKERS:-10} -v --tb=short -p no:cacheprovider -p no:benchmark -p benchmarks.device.pytest_failures_log \
    --durations=25 -o addopts="-ra --strict-markers" $FIRST $REST > "$OUT/tests/test_gpu.log" 2>&1
  echo "rc=$?" >> "$OUT/tests/test_gpu.log" ) &
python3 -m benchmarks.device.research_loop --out "$OUT/loop_busy" --steps compare_calibrators $PROFILE_ARG \
    --limit compare_calibrators=$(( LEFT - 10 ))
wait; el done
grep -c PASSED "$OUT/tests/test_gpu.log"; grep -c -E "FAILED|ERROR" "$OUT/tests/test_gpu.log"; tail -3 "$OUT/tests/test_gpu.log"
grep "^\[compare_calibrators\]" "$OUT"/loop_busy/*/compare_calibrators.log | tail -4
# only the tarball comes back whole (a lent machine returns a few files from $OUT)
tar -czf "$OUT0/results.tgz" -C "$OUT0" --exclude '*.trace' r && rm -rf "$OUT"
