#!/usr/bin/env bash
# One prepared run on a lent NVIDIA GPU machine (no network there): the GPU test suite, the two
# metric benchmarks, the Fig 3 Monte Carlo study at paper scale and a probe of Neural Calibration's
# run-to-run determinism (nc_determinism.py), each under its own time limit,
# everything written to $OUT (default ./device_out) and packed into one tarball.
#
# The machine's own Python holds jax with the CUDA plugin; the reference libraries the tests
# compare against travel as wheels in .whl/ (see benchmarks/device/README.md).
set -u
OUT=${OUT:-$PWD/device_out}; mkdir -p "$OUT/r"; R=$OUT/r
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false MPLBACKEND=Agg
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=$PWD:/tmp/site
# installed too (no index, no build isolation): two tests run the package from other directories
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . > "$R/pip_install.log" 2>&1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
{ nvidia-smi; python3 -c "import jax,jaxlib,numpy,scipy,sys;print(sys.version);print('jax',jax.__version__,'jaxlib',jaxlib.__version__,'numpy',numpy.__version__,'scipy',scipy.__version__);print(jax.devices())"; } > "$R/env.txt" 2>&1
el env; cat "$R/env.txt" | tail -3
# 1. benchmarks on the quiet GPU, one after the other
el bench_metrics; timeout ${BENCH_METRICS_S:-100} python3 -m benchmarks.bench_metrics --out "$R/metrics_gpu" > "$R/bench_metrics.log" 2>&1; el "bench_metrics rc=$?"
el bench_eager;   timeout ${BENCH_EAGER_S:-90} python3 -m benchmarks.bench_eager --group metrics --memory-calls 100 --out "$R/eager_gpu" > "$R/bench_eager.log" 2>&1; el "bench_eager rc=$?"
# 2. the test suite on the GPU and the paper-scale Fig 3 study, side by side
( JAX_PLATFORMS=cuda,cpu timeout ${TEST_S:-320} python3 -m pytest -q -m "not slow" -n 12 -p no:cacheprovider -p no:benchmark \
    --durations=25 -o addopts="-ra --strict-markers" > "$R/test_gpu.log" 2>&1; echo "rc=$?" >> "$R/test_gpu.log" ) &
( timeout ${STUDY_S:-300} python3 -m experiments run mc_spearman --paper --no-progress --out "$R/mc_spearman_paper_gpu" \
    > "$R/mc_spearman.log" 2>&1; echo "rc=$?" >> "$R/mc_spearman.log"
  # 3. Neural Calibration run to run: the library's default (deterministic ops) and the opt-out
  for X in "" "--xla_gpu_deterministic_ops=false"; do
    echo "XLA_FLAGS=[$X]" >> "$R/nc_determinism.log"
    XLA_FLAGS="$X" timeout ${NC_S:-45} python3 -m benchmarks.device.nc_determinism >> "$R/nc_determinism.log" 2>&1
  done ) &
wait; el done
tail -5 "$R/test_gpu.log"; tail -3 "$R/mc_spearman.log"; cat "$R/nc_determinism.log"
tar -czf "$OUT/results.tgz" -C "$OUT" r && rm -rf "$R"
