#!/usr/bin/env bash
# Where device collectives spend their time, on a machine with one GPU (the device tool's):
#   run(command="bash scripts/gpu-diag.sh", carry=[".gpukit"])  after `bash scripts/gpu-kit.sh` here.
# Builds only what it runs, then: single device steps as the host sees them (one process, then two at once on the one
# GPU), device send/recv and all_reduce through dcomm-run without and with --check, 4 ranks, staged through host
# memory, gloo's all_reduce on CUDA tensors through torch.distributed in the same session (the peer), and the same
# again under MPS where the image has it. Each step bounded; about 5 minutes. Logs in $OUT (or /tmp/gpu-out).
set -uo pipefail
cd "$(dirname "$0")/.."
top=${OUT:-/tmp/gpu-out}
out=$top/logs  # the device tool brings back at most 8 files: every log goes into diag-logs.tgz
mkdir -p "$out"
# DIAG_STEPS picks sections (default all): lat sendrecv allreduce check four staged gloo mps chunks
steps=" ${DIAG_STEPS:-lat sendrecv allreduce check four staged gloo mps} "
want() { [[ "$steps" == *" $1 "* ]]; }
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
targets=(tools/dcomm-run tools/bench/dcomm-bench tests/cuda/dcomm-cuda-bench)
want race && targets=(tests/cuda/test_cuda_staging tests/cuda/test_cuda_ipc_mp)
want suite && targets+=($(ninja -C build-gpu -t targets all | grep -oE '^tests/cuda/[A-Za-z0-9_-]+:' | tr -d :))
ninja -C build-gpu "${targets[@]}" > "$out/build.log" 2>&1 ||
  { grep -E "error|Error" -A4 "$out/build.log" | head -60; exit 1; }

lat_pair() {  # LABEL: two latency tables at once on the one GPU
  timeout 30 $lat --latency --iters 300 > "$out/$1-a.txt" 2>&1 &
  timeout 30 $lat --latency --iters 300 > "$out/$1-b.txt" 2>&1
  wait
  cat "$out/$1-a.txt" "$out/$1-b.txt"
}
if want lat; then
  step "single device steps, one process"
  timeout 30 $lat --latency --iters 300 2>&1
  step "single device steps, two processes at once"
  lat_pair lat
fi
bench() {  # LABEL NPROC ARGS... ; env through DIAG_ENV
  local label=$1 n=$2
  shift 2
  timeout 60 env ${DIAG_ENV:-} $run --nproc-per-node "$n" --standalone --log-dir "$out/rank-logs-$label" --tee 3 \
    -- $b --device cuda "$@" \
    --json "$out/$label.json" > "$out/$label.txt" 2>&1
  local rc=$?
  echo "-- $label: exit $rc"
  if [ $rc -ne 0 ]; then
    for f in "$out/rank-logs-$label"/*/attempt_0/*/stderr.log; do echo "   $f:"; tail -4 "$f" | cut -c1-400; done
  fi
  grep -E "^\[rank 0\]: +[0-9]|error|FAILED" "$out/$label.txt" | cut -c1-330 | head -40
}
if want race; then
  # The transport tests that read device buffers written through the legacy stream, twice side by side (sharing
  # the GPU is what made the DMA land late on 2026-11-27).
  step "staging and cuda_ipc tests side by side"
  for round in 1 2; do
    timeout 60 build-gpu/tests/cuda/test_cuda_staging > "$out/race-staging-$round.log" 2>&1 &
    staging_pid=$!
    timeout 60 build-gpu/tests/cuda/test_cuda_ipc_mp > "$out/race-ipc-$round.log" 2>&1
    echo "round $round: cuda_ipc_mp exit $?"
    wait $staging_pid
    echo "round $round: cuda_staging exit $?"
    grep -hE "differs|is wrong|FAILED|passed|failed" "$out/race-staging-$round.log" "$out/race-ipc-$round.log" | head -8
  done
fi
if want suite; then
  step "cuda suite"
  timeout 170 meson test -C build-gpu --suite cuda --no-rebuild --num-processes 2 --timeout-multiplier 0.5 \
    > "$out/cuda-suite.log" 2>&1
  echo "cuda suite exit $?"
  cp build-gpu/meson-logs/testlog.txt "$out/cuda-testlog.txt" 2>/dev/null
  grep -E "^ *[0-9]+/[0-9]+ |^(Ok|Fail|Skipped|Timeout):" "$out/cuda-suite.log"
fi
want sendrecv && { step "device send/recv, 2 ranks"; bench sendrecv-2 2 sendrecv -b 8 -e 64M -f 16 -n 50 -w 10; }
want allreduce && { step "device all_reduce, 2 ranks, no check"
  bench allreduce-2 2 all_reduce -b 8 -e 16M -f 8 -n 20 -w 5 --algo auto,ring,one_to_all; }
want check && { step "device all_reduce, 2 ranks, --check (session 9's numbers had it)"
  bench allreduce-2-check 2 all_reduce -b 1M -e 16M -f 16 -n 20 -w 5 --check; }
want four && { step "device all_reduce, 4 ranks"; bench allreduce-4 4 all_reduce -b 8 -e 256M -f 32 -n 20 -w 5; }
want staged && { step "device all_reduce, 2 ranks staged through host memory"
  DIAG_ENV=DCOMM_TRANSPORT=shm bench allreduce-2-staged 2 all_reduce -b 8 -e 256M -f 32 -n 20 -w 5; }
want gloo && { step "peer: gloo all_reduce on CUDA tensors, torch.distributed, 2 ranks"
  timeout 90 python3 scripts/gpu-peer-gloo.py 2>&1 | tail -20; }

if want mps && command -v nvidia-cuda-mps-control > /dev/null; then
  step "MPS"
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
  mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
  if nvidia-cuda-mps-control -d; then
    want lat && lat_pair lat-mps
    bench allreduce-2-mps 2 all_reduce -b 8 -e 256M -f 8 -n 20 -w 5
    want sendrecv && bench sendrecv-2-mps 2 sendrecv -b 8 -e 64M -f 16 -n 50 -w 10
    if want final; then
      bench algos-mps-default 2 all_reduce -b 1M -e 256M -f 16 -n 10 -w 3 --algo auto,ring,double_tree,tree
      bench allreduce-4-mps 4 all_reduce -b 8 -e 256M -f 16 -n 10 -w 3
      # Seen once (first run of 2026-11-27 s11): rank 1 left a 128 MiB all_reduce while rank 0 was in it.
      bench hammer-128M-ring 2 all_reduce -b 128M -e 128M -n 30 -w 2 --algo ring --check
      bench hammer-128M-auto 2 all_reduce -b 32M -e 128M -f 4 -n 20 -w 2 --check
    fi
    if want chunks; then
      for chunk in 524288 8388608 67108864; do
        DIAG_ENV=DCOMM_CHUNK_BYTES=$chunk bench "algos-mps-chunk$chunk" 2 all_reduce -b 1M -e 256M -f 16 -n 10 -w 3 \
          --algo all
      done
      DIAG_ENV=DCOMM_CHUNK_BYTES=8388608 bench allreduce-4-mps-chunk8M 4 all_reduce -b 1M -e 256M -f 16 -n 10 -w 3 \
        --algo all
    fi
    echo quit | nvidia-cuda-mps-control
    tail -5 $CUDA_MPS_LOG_DIRECTORY/control.log 2>/dev/null
    cp -r $CUDA_MPS_LOG_DIRECTORY "$out/mps-log" 2>/dev/null
  fi
elif want mps; then
  echo "no nvidia-cuda-mps-control"
fi
step done
tar czf "$top/diag-logs.tgz" -C "$out" . 2>/dev/null
