#!/usr/bin/env bash
# The long shrink matrix (issue 17): RUNS random cases of tests/failure/shrink_matrix.py (kill one, two at once, two
# in turn, one during the shrink, a stopped rank; 4, 5 and 7 ranks; shm and ucx) through dcomm-run --keep-going,
# then the kill-to-shrunk-group times at each size (median and worst). CI runs six fixed cases (suite mp).
#   usage: scripts/shrink-matrix.sh [RUNS]          (default 30; WITH_UCX=0 for shm only)
#          scripts/shrink-matrix.sh timing [RUNS]   (kill one rank at 4 and 7 ranks, RUNS each: the times only)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/tools/dcomm-run ] || bash scripts/build.sh
if [ "${1:-}" = timing ]; then
  exec python3 tests/failure/shrink_matrix.py build/tools/dcomm-run build/tests/failure/mp_shrink timing "${2:-10}"
fi
exec python3 tests/failure/shrink_matrix.py build/tools/dcomm-run build/tests/failure/mp_shrink matrix "${1:-30}"
