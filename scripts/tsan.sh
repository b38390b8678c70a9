#!/usr/bin/env bash
# ThreadSanitizer over the `unit` and `mp` suites: configures ./build-tsan once (-Db_sanitize=thread; CUDA and MPI
# off: nvcc objects and libmpi are not instrumented), builds, and runs the suites with the suppressions in
# scripts/tsan.supp (each one says why it is benign). Any report fails the test it came from (TSan's exit code 66).
# Not part of CI (it takes several times the normal suite's time); run it after touching threads or shared state.
#   bash scripts/tsan.sh                 # both suites
#   bash scripts/tsan.sh --suite unit    # extra arguments go to meson test instead of the default suites
set -uo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build-tsan/build.ninja ]; then
  meson setup build-tsan -Db_sanitize=thread -Dbuildtype=debugoptimized -Dcuda=disabled -Dmpi=disabled || exit 1
fi
ninja -C build-tsan -j"$(nproc)" >/dev/null || ninja -C build-tsan -j1 || exit 1
export TSAN_OPTIONS="suppressions=$PWD/scripts/tsan.supp halt_on_error=0 exitcode=66 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
# TSan's shadow memory needs the address space of a kernel with at most 28 random mmap bits (newer kernels
# default to 32): run without address randomisation where the kernel allows more.
run=()
if [ "$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 0)" -gt 28 ]; then run=(setarch "$(uname -m)" -R); fi
args=("$@")
if [ ${#args[@]} -eq 0 ]; then args=(--suite unit --suite mp); fi
start=$(date +%s)
# Sanitized code runs 5-15 times slower: the tests' own time limits are stretched accordingly.
"${run[@]}" meson test -C build-tsan --print-errorlogs --num-processes "${DCOMM_TEST_JOBS:-2}" \
  --timeout-multiplier 4 "${args[@]}"
rc=$?
echo "tsan: $(( $(date +%s) - start )) s for the tests"
python3 scripts/summarize-tests.py build-tsan/meson-logs/testlog.json
exit $rc
