#!/usr/bin/env bash
# The GPU checks of docs/cuda.md in one go, for a machine with a GPU (the device tool's, where it is run as
#   run(command="bash scripts/gpu-check.sh", carry=[".gpukit"])  after `bash scripts/gpu-kit.sh` here).
# Builds with the header kit (no UCX, no MPI there), runs the cuda suite, compute-sanitizer memcheck over the GPU
# tests, dcomm-cuda-bench (reduction kernels against device-to-device copies, same run), and all_reduce at 256 MiB
# with 2 and 4 ranks on the one GPU (cuda_ipc), then with 2 ranks staged through host memory (DCOMM_TRANSPORT=shm).
# Logs go to $OUT (the device tool's) or /tmp/gpu-out, and all of them packed in gpu-logs.tgz there (the device tool
# brings back at most 8 files). Every step is bounded, so the whole check fits a 15-minute lease (about 6 minutes on
# a 16-core H100 machine); the torch binding is left out (the image's torch is not Debian's).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/gpu-out}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
kit=()
[ -d .gpukit/include ] && kit=(-Dheader_kit=.gpukit/include)
step() { echo "== $* ($(date +%T))"; }

step setup
{ g++ --version | head -1; nvcc --version | tail -2; meson --version; } 2>&1
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
meson setup build-gpu "${kit[@]}" -Ducx=disabled -Dmpi=disabled -Dcuda=enabled -Dtorch=disabled > "$out/setup.log" 2>&1 ||
  { tail -40 "$out/setup.log"; exit 1; }
step build
ninja -C build-gpu > "$out/build.log" 2>&1 || { grep -E "error|Error" -A4 "$out/build.log" | head -60; exit 1; }

step "cuda suite"
meson test -C build-gpu --suite cuda --print-errorlogs --num-processes 1 --timeout-multiplier 0.4 > "$out/cuda-suite.log" 2>&1
echo "cuda suite exit $?"
cp build-gpu/meson-logs/testlog.txt "$out/cuda-testlog.txt" 2>/dev/null
grep -E "^ *[0-9]+/[0-9]+ |^(Ok|Fail|Skipped|Timeout):" "$out/cuda-suite.log"

step "reduction kernels vs device-to-device copies"
timeout 60 build-gpu/tests/cuda/dcomm-cuda-bench --max-bytes $((1 << 30)) | tee "$out/cuda-bench.txt"

bench() {  # NPROC LABEL [env...]
  local n=$1 label=$2
  shift 2
  # auto and the two extremes only: every algorithm at every size outran 90 s on the first GPU run (2026-11-27).
  timeout 90 env "$@" build-gpu/tools/dcomm-run --nproc-per-node "$n" --standalone -- build-gpu/tools/bench/dcomm-bench \
    all_reduce --device cuda -b 1M -e 256M -f 16 -n 20 -w 5 --check --algo auto,ring,one_to_all \
    --json "$out/allreduce-$label.json" > "$out/allreduce-$label.txt" 2>&1
  echo "all_reduce $label: exit $?"
  grep -E "^ *#|268435456" "$out/allreduce-$label.txt" | head -40
}
step "all_reduce on device buffers"
bench 2 cuda_ipc-2
bench 4 cuda_ipc-4
bench 2 staged-2 DCOMM_TRANSPORT=shm
step "compute-sanitizer memcheck"
for t in test_cuda_reduce_cuda test_cuda_stream_order test_cuda_device test_cuda_staging test_cuda_mesh \
    test_cuda_device_blocks; do
  timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 "build-gpu/tests/cuda/$t" \
    > "$out/memcheck-$t.log" 2>&1
  echo "memcheck $t: exit $? ($(grep -c '=========' "$out/memcheck-$t.log") sanitizer lines)"
done

step done
tar czf "$out/gpu-logs.tgz" -C "$out" --exclude gpu-logs.tgz . 2>/dev/null
