#!/usr/bin/env bash
# The performance matrix of issue 15: every collective beside OpenMPI in the same processes, at 2, 3 and 4 ranks,
# under three placements (mpirun --bind-to core, mpirun --bind-to none, dcomm-run), small (8 B, many iterations)
# and large (64 KiB - 64 MiB), RUNS times each (default 2, so agreement shows). Writes one JSON per run into OUT and
# prints one ratio table per configuration (dcomm time / MPI time; tools/bench/ratio_table.py). Run it on a quiet
# machine: nothing else building or testing.
#   scripts/bench-matrix.sh [OUT] [RUNS] [RANKS...]      e.g. scripts/bench-matrix.sh /tmp/matrix 2 2 3 4
# PLACEMENTS="bound unbound" leaves dcomm-run out (its OpenMPI side runs as singletons over TCP: 4+ minutes a run
# of the small sizes at 3-4 ranks, and not a fair peer).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/dcomm-bench-matrix}"
runs="${2:-2}"
ranks=("${@:3}")
[ ${#ranks[@]} -gt 0 ] || ranks=(2 3 4)
bench=build/tools/bench/dcomm-bench
run=build/tools/dcomm-run
[ -x "$bench" ] || { echo "bench-matrix: build first ($bench is missing)" >&2; exit 2; }
mkdir -p "$out"
cores=$(nproc)

launch() {  # placement nproc args...
  local placement=$1 np=$2; shift 2
  case $placement in
    bound)
      local bind=core
      [ "$np" -gt "$cores" ] && bind=core:overload-allowed
      mpirun -np "$np" --allow-run-as-root --oversubscribe --bind-to "$bind" "$bench" "$@" ;;
    unbound) mpirun -np "$np" --allow-run-as-root --oversubscribe --bind-to none "$bench" "$@" ;;
    dcomm-run) "$run" --standalone --nproc-per-node "$np" -- "$bench" "$@" ;;
  esac
}

for np in "${ranks[@]}"; do
  for placement in ${PLACEMENTS:-bound unbound dcomm-run}; do
    for r in $(seq 1 "$runs"); do
      tag="$placement-$np-run$r"
      echo "bench-matrix: $tag ($(date -u +%H:%M:%S))" >&2
      launch "$placement" "$np" all -b 8 -e 8 -n 20000 -w 2000 --vs mpi --json "$out/small-$tag.json" >/dev/null
      launch "$placement" "$np" all -b 64K -e 64M -f 4 -n 20 -w 5 --vs mpi --json "$out/large-$tag.json" >/dev/null
    done
  done
done

for np in "${ranks[@]}"; do
  for placement in ${PLACEMENTS:-bound unbound dcomm-run}; do
    for kind in small large; do
      stat=mean
      [ "$kind" = small ] && stat=p50
      python3 tools/bench/ratio_table.py --time "$stat" --label "$kind, $placement, $np ranks" \
        "$out/$kind-$placement-$np"-run*.json
      echo
      # 8 B also by the loop's time: what a library does between calls, outside the per-call timer, counted.
      if [ "$kind" = small ]; then
        python3 tools/bench/ratio_table.py --time loop --label "$kind, $placement, $np ranks, loop" \
          "$out/$kind-$placement-$np"-run*.json
        echo
      fi
    done
  done
done
