#!/usr/bin/env bash
# The README's second command: install, build, and run the whole test suite. Ends with "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh || exit 1
bash scripts/build.sh || exit 1
meson test -C build --print-errorlogs --num-processes "${DCOMM_TEST_JOBS:-2}" "$@"
rc=$?
python3 scripts/summarize-tests.py build/meson-logs/testlog.json
exit $rc
