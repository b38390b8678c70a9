#!/usr/bin/env bash
# Runs all of torch's generic distributed suite on the dcomm backend at WORLD_SIZE 2 and 3 (CI runs the subset in
# tests/torch/generic/ci_subset.txt). About half an hour per world size on a 2-core machine. Usage:
#   bash scripts/torch-generic-suite.sh [2 3] ; logs in build/torch-generic-<N>.log, counts at the end of each.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh || exit 1
py=/usr/bin/python3
mod_dir="$(pwd)/build/bindings/torch"
[ -f "$(ls "$mod_dir"/dcomm_torch*.so 2>/dev/null | head -1)" ] || { echo "no dcomm_torch in $mod_dir (torch not found at configure?)"; exit 1; }
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(2 3)
rc=0
for n in "${sizes[@]}"; do
  log="build/torch-generic-$n.log"
  echo "torch's generic suite on dcomm, WORLD_SIZE=$n -> $log"
  PYTHONPATH="$mod_dir" BACKEND=dcomm WORLD_SIZE=$n $py tests/torch/generic/run_generic.py > "$log" 2>&1 || rc=1
  sed -n '/^generic suite/,$p' "$log"
done
exit $rc
