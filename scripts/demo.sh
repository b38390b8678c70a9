#!/usr/bin/env bash
# The README's first command: install, build, and run dcomm's main job on 4 local ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
exec build/tools/dcomm-run --nproc-per-node "${NPROC:-4}" -- build/tools/dcomm-demo "$@"
