#!/usr/bin/env bash
# The research loop on a lent GPU machine (issue 69, item 6), one prepared command of under 10
# minutes: mc_spearman --paper, one world of compare_calibrators --paper and bench_vrsag at 10^6
# and 10^7 rows, each timed as device, compile and host seconds (research_loop.py's docstring
# says how), written to $OUT/<device>/research_loop.{json,md} and packed into $OUT/results.tgz.
#
#   bash benchmarks/device/research_loop.sh                 # on the GPU machine
#   WORLD=simulator_adauction bash benchmarks/device/research_loop.sh
#   bash benchmarks/device/research_loop.sh --dry-run       # here, on the CPU, at smoke size
#
# The machine's own Python holds jax with the CUDA plugin (see README.md); nothing is installed
# but the package itself, from the checkout, as h100_session.sh does.
set -u
OUT=${OUT:-$PWD/device_out}; mkdir -p "$OUT"
PY=${PY:-python3}
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false MPLBACKEND=Agg
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
{ nvidia-smi 2>/dev/null; $PY -c "import jax,jaxlib,numpy,sys;print(sys.version);print('jax',jax.__version__,'jaxlib',jaxlib.__version__,'numpy',numpy.__version__);print(jax.devices())"; } > "$OUT/env.txt" 2>&1
tail -1 "$OUT/env.txt"
# the steps' own limits add up to 540 s; this one stops the whole at 580 s
timeout ${LOOP_S:-580} $PY -m benchmarks.device.research_loop --out "$OUT" --world "${WORLD:-simulator}" "$@"
echo "rc=$?"
cat "$OUT"/*/research_loop.md 2>/dev/null
T=$(mktemp); tar -czf "$T" -C "$OUT" --exclude results.tgz --exclude '*.trace' . && mv "$T" "$OUT/results.tgz"
