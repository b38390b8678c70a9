#!/usr/bin/env bash
# The larger kill matrix of issue 12: RUNS launches of mp_kill_point through dcomm-run (default 40), alternating shm
# and ucx, 4 and 5 ranks, a random victim killed (SIGKILL) at a random moment from startup to mid-loop; then one
# rank stopped (SIGSTOP) with an 8 s timeout. Prints per run, then: runs, how many named the right rank (every
# survivor, within 3 s, nothing left in /dev/shm), the slowest detection, and the stalled-rank report.
#   scripts/kill-matrix.sh [RUNS] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-40}"
build="${2:-build}"
exec python3 tests/failure/kill_matrix.py "$build/tools/dcomm-run" "$build/tests/failure/mp_kill_point" matrix "$runs"
