#!/usr/bin/env bash
# One short GPU session for the learner-speed work: the CUDA-only tests, then the learner benchmarks, each step
# bounded by `timeout` and continuing when one fails. Results (JSON) and logs go to $OUT (and benchmarks/results).
#
#   OUT=/tmp/out bash benchmarks/gpu_session.sh            # on the GPU machine, from the repository root
#   bash benchmarks/gpu_session.sh --dry                   # here: the same steps on the CPU, tiny sizes
#
# Steps (each time-bounded: at most 30 + 110 + 240 + 200 s = 580 s in all; typically ~5 minutes):
#   1. nvidia-smi and the versions of torch / jax (and whether jax sees the GPU);
#   2. pytest tests/test_cuda_graphs.py (graphed update == eager update, re-capture, fallback), the feature cache on
#      the GPU (tests/test_feature_cache_device.py) and TF32 (tests/test_matmul_precision.py);
#   3. benchmarks/learner_speed.py, state: eager vs CUDA graphs (+ prefetch) for torch, the JAX backend with host
#      batches and with device replay, CUDA graphs with TF32, the independent JAX reference on its config
#      (-> learner_speed_cuda_<gpu>_graphs);
#   4. benchmarks/learner_speed.py, images (batch 256, two 128x128 cameras, frozen ResNet-10): eager, sampling +
#      prefetch, bf16 backbone, + channels-last, feature cache (on the GPU, no images in its batches), graphs, and
#      each with TF32 (-> learner_speed_cuda_<gpu>_images);
#   STEPS="env cuda_tests compile" runs only the named steps (a second session on the same code).
#   5. optional (WITH_COMPILE=1): the state cases with torch.compile, with and without graphs (-> ..._compile2).
#
# The JAX reference (bench_jax.py + benchutil.py) is not part of the repository: the script takes it from
# $REFERENCE_DIR, else shared/reference/ or ../shared/reference/ (copy /work/shared/reference to shared/reference in
# the checkout before the run so that it travels); without it the reference rows are skipped.
set -u
cd "$(dirname "$0")/.."
DRY=0
[ "${1:-}" = "--dry" ] && DRY=1
OUT="${OUT:-/tmp/gpu_session_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" OMP_WAIT_POLICY=PASSIVE ROBOT_RL_COMPILE=0
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # JAX and torch share the GPU in one process

REF=""
for d in "${REFERENCE_DIR:-}" shared/reference ../shared/reference; do
    if [ -n "$d" ] && [ -f "$d/bench_jax.py" ]; then REF="$d/bench_jax.py"; break; fi
done
REF_ARGS=(--reference none)
[ -n "$REF" ] && REF_ARGS=(--reference "$PY" --reference-script "$REF")

step() {  # step NAME SECONDS COMMAND...: run with a time limit, log to $OUT/NAME.log, never stop the script
    local name=$1 limit=$2
    shift 2
    if [ -n "${STEPS:-}" ] && [[ " $STEPS " != *" $name "* ]]; then echo "=== $name: skipped (STEPS)"; return; fi
    echo "=== $name (limit ${limit}s): $*"
    local t0=$SECONDS
    timeout --kill-after=10 "$limit" "$@" > >(tee "$OUT/$name.log") 2>&1
    local rc=$?
    echo "=== $name: exit $rc after $((SECONDS - t0)) s"
    echo "$name $rc $((SECONDS - t0))" >> "$OUT/steps.txt"
}

if [ "$DRY" = 1 ]; then
    DEV=cpu; TAG=dry
    STATE=(--state-utd 2 --ref-utd 2 --seconds 0.2 --rounds 1 --min-reps 1 --matmul-n 256 --ref-steps 2)
    IMAGE=(--image-utd 2 --image-batch 8 --image-size 64 --prefetch-transitions 200 --seconds 0.2 --rounds 1
           --min-reps 1 --matmul-n 256)
else
    DEV=cuda
    TAG=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | grep -oE '[AHBL][0-9]+' | head -1 \
          | tr '[:upper:]' '[:lower:]')
    TAG=${TAG:-gpu}
    STATE=(--seconds 1.5 --rounds 2 --ref-steps 300)  # JAX compiles + 2 reference runs: ~150-170 s
    IMAGE=(--image-batch 256 --image-size 128 --prefetch-transitions 2000 --seconds 2 --rounds 2)
fi

step env 30 bash -c "nvidia-smi || true; $PY -c 'import sys, torch; print(sys.version); print(\"torch\", torch.__version__, \"cuda\", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else \"\")'; $PY -c 'import jax; print(\"jax\", jax.__version__, jax.devices())' || true; echo reference: ${REF:-none}"
step cuda_tests 110 "$PY" -m pytest -q -p no:cacheprovider tests/test_cuda_graphs.py tests/test_feature_cache_device.py \
    tests/test_matmul_precision.py
step state 240 "$PY" benchmarks/learner_speed.py --device "$DEV" --backends torch,jax --skip-image --graphs --tf32 \
    --device-replay --skip-first-update "${REF_ARGS[@]}" "${STATE[@]}" --tag "${TAG}_graphs" --out "$OUT"
step images 200 "$PY" benchmarks/learner_speed.py --device "$DEV" --backends torch --skip-state --prefetch \
    --image-fast --graphs --tf32 "${IMAGE[@]}" --tag "${TAG}_images" --out "$OUT"
if [ "${WITH_COMPILE:-0}" = 1 ]; then
    step compile 240 "$PY" benchmarks/learner_speed.py --device "$DEV" --backends torch --skip-image --graphs \
        --compile --reference none "${STATE[@]}" --tag "${TAG}_compile2" --out "$OUT"
fi
[ "$DRY" = 1 ] || cp "$OUT"/learner_speed_*.json benchmarks/results/ 2>/dev/null || true
echo "=== done; results in $OUT:"
ls -l "$OUT"
