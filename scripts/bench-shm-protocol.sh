#!/usr/bin/env bash
# A/B of the shm transport's large-message protocol (transports/shm/shm_protocol.hpp): the point-to-point
# collectives beside OpenMPI in the same processes, with DCOMM_SHM_PROTOCOL=auto (the measured choice), cma and
# stream, RUNS times each, 2 ranks under mpirun --bind-to core (and --bind-to none with PLACEMENT=unbound). Writes one
# JSON per run into OUT, each rank's log (what it measured, what it chose, how many streams were pulled) beside it,
# and prints one ratio table per protocol (dcomm time / MPI time). Run it on a quiet machine.
#   scripts/bench-shm-protocol.sh [OUT] [RUNS]      e.g. scripts/bench-shm-protocol.sh /tmp/shm-protocol 2
#   (COLLS="sendrecv broadcast" for fewer collectives)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/dcomm-shm-protocol}"
runs="${2:-2}"
bind=core
[ "${PLACEMENT:-bound}" = unbound ] && bind=none
bench=build/tools/bench/dcomm-bench
[ -x "$bench" ] || { echo "bench-shm-protocol: build first ($bench is missing)" >&2; exit 2; }
mkdir -p "$out"
read -r -a colls <<<"${COLLS:-sendrecv broadcast scatter gather all_to_all all_gather}"

for r in $(seq 1 "$runs"); do
  for proto in auto cma stream; do
    for coll in "${colls[@]}"; do
      tag="$proto-$coll-run$r"
      echo "bench-shm-protocol: $tag ($(date -u +%H:%M:%S))" >&2
      DCOMM_SHM_PROTOCOL=$proto DCOMM_LOG_LEVEL=info \
        mpirun -np 2 --allow-run-as-root --oversubscribe --bind-to "$bind" -x DCOMM_SHM_PROTOCOL -x DCOMM_LOG_LEVEL \
        "$bench" "$coll" -b 64K -e 64M -f 4 -n 20 -w 5 --vs mpi --json "$out/$tag.json" >"$out/$tag.log" 2>&1
      grep -h "shm rank .*received" "$out/$tag.log" >&2 || true
    done
  done
done

for proto in auto cma stream; do
  for coll in "${colls[@]}"; do
    python3 tools/bench/ratio_table.py --time mean --label "$coll, DCOMM_SHM_PROTOCOL=$proto, bind-to $bind" \
      "$out/$proto-$coll"-run*.json
    echo
  done
done
