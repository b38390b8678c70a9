#!/usr/bin/env bash
# Where device collectives spend their time, on a machine with one GPU (the device tool's):
#   run(command="bash scripts/gpu-diag.sh", carry=[".gpukit"])  after `bash scripts/gpu-kit.sh` here.
# Builds only what it runs, then: single device steps as the host sees them (one process, then two at once on the one
# GPU), device send/recv and all_reduce through dcomm-run without and with --check, 4 ranks, staged through host
# memory, gloo's all_reduce on CUDA tensors through torch.distributed in the same session (the peer), and the same
# again under MPS where the image has it. Each step bounded; about 5 minutes. Logs in $OUT (or /tmp/gpu-out).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/gpu-out}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
kit=()
[ -d .gpukit/include ] && kit=(-Dheader_kit=.gpukit/include)
step() { echo "== $* ($(date +%T))"; }
b=build-gpu/tools/bench/dcomm-bench
run=build-gpu/tools/dcomm-run
lat=build-gpu/tests/cuda/dcomm-cuda-bench

step setup
nvidia-smi --query-gpu=name,compute_mode,clocks.sm --format=csv 2>&1
if [ ! -f build-gpu/build.ninja ]; then
  meson setup build-gpu "${kit[@]}" -Ducx=disabled -Dmpi=disabled -Dcuda=enabled -Dtorch=disabled \
    > "$out/setup.log" 2>&1 || { tail -40 "$out/setup.log"; exit 1; }
fi
step build
ninja -C build-gpu tools/dcomm-run tools/bench/dcomm-bench tests/cuda/dcomm-cuda-bench > "$out/build.log" 2>&1 ||
  { grep -E "error|Error" -A4 "$out/build.log" | head -60; exit 1; }

step "single device steps, one process"
timeout 30 $lat --latency --iters 300
step "single device steps, two processes at once"
timeout 30 $lat --latency --iters 300 > "$out/lat-a.txt" 2>&1 &
timeout 30 $lat --latency --iters 300 > "$out/lat-b.txt" 2>&1
wait
cat "$out/lat-a.txt" "$out/lat-b.txt"

bench() {  # LABEL NPROC ARGS... ; env through DIAG_ENV
  local label=$1 n=$2
  shift 2
  timeout 60 env ${DIAG_ENV:-} $run --nproc-per-node "$n" --standalone -- $b --device cuda "$@" \
    --json "$out/$label.json" > "$out/$label.txt" 2>&1
  echo "-- $label: exit $?"
  grep -vE "^\s*$" "$out/$label.txt" | grep -vE "^#\s*$" | head -40
}
step "device send/recv, 2 ranks"
bench sendrecv-2 2 sendrecv -b 8 -e 64M -f 16 -n 50 -w 10
step "device all_reduce, 2 ranks, no check"
bench allreduce-2 2 all_reduce -b 8 -e 256M -f 8 -n 20 -w 5 --algo auto,ring,one_to_all
step "device all_reduce, 2 ranks, --check (session 9's numbers had it)"
bench allreduce-2-check 2 all_reduce -b 1M -e 16M -f 16 -n 20 -w 5 --check
step "device all_reduce, 4 ranks"
bench allreduce-4 4 all_reduce -b 8 -e 256M -f 32 -n 20 -w 5
step "device all_reduce, 2 ranks staged through host memory"
DIAG_ENV=DCOMM_TRANSPORT=shm bench allreduce-2-staged 2 all_reduce -b 8 -e 256M -f 32 -n 20 -w 5

step "peer: gloo all_reduce on CUDA tensors, torch.distributed, 2 ranks"
timeout 90 python3 scripts/gpu-peer-gloo.py 2>&1 | tail -20

if command -v nvidia-cuda-mps-control > /dev/null; then
  step "MPS"
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
  mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
  if nvidia-cuda-mps-control -d; then
    timeout 30 $lat --latency --iters 300 > "$out/lat-mps-a.txt" 2>&1 &
    timeout 30 $lat --latency --iters 300 > "$out/lat-mps-b.txt" 2>&1
    wait
    cat "$out/lat-mps-a.txt" "$out/lat-mps-b.txt"
    bench allreduce-2-mps 2 all_reduce -b 8 -e 256M -f 8 -n 20 -w 5
    bench sendrecv-2-mps 2 sendrecv -b 8 -e 64M -f 16 -n 50 -w 10
    echo quit | nvidia-cuda-mps-control
    tail -5 $CUDA_MPS_LOG_DIRECTORY/control.log 2>/dev/null
  fi
else
  echo "no nvidia-cuda-mps-control"
fi
step done
tar czf "$out/diag-logs.tgz" -C "$out" --exclude diag-logs.tgz . 2>/dev/null
