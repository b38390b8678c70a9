#!/usr/bin/env bash
# Instructions per small call, from callgrind, on 2 ranks under dcomm-run: deterministic where timings are not.
#   scripts/callgrind-small-call.sh [collective] [bytes] [build dir]
# Runs dcomm-bench under callgrind twice (N1 and N2 timed iterations) and divides the difference of the inclusive
# cost of ProcessGroupImpl::<collective> (the whole call, from the public API down) minus that of the waits
# (MeshImpl::wait_until: polling a peer's flag, which counts how long the peer took, not what the call costs) by
# N2 - N1. Prints it per rank, and the functions that take the most of it (self cost per call).
set -euo pipefail
coll=${1:-all_reduce}
bytes=${2:-8}
build=${3:-build}
n1=1000
n2=3000
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for n in $n1 $n2; do
  "$build/tools/dcomm-run" --standalone --nproc-per-node 2 -- \
    valgrind --tool=callgrind --callgrind-out-file="$out/cg.$n.%q{DCOMM_RANK}" \
    "$build/tools/bench/dcomm-bench" "$coll" -b "$bytes" -e "$bytes" -n "$n" -w 100 >"$out/log.$n" 2>&1 ||
    { cat "$out/log.$n"; exit 1; }
done
python3 - "$out" "$coll" $n1 $n2 <<'PY'
import re, subprocess, sys
out, coll, n1, n2 = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
fn_name = {"sendrecv": None}.get(coll, coll)

def costs(path, inclusive):
    text = subprocess.run(["callgrind_annotate", f"--inclusive={'yes' if inclusive else 'no'}", "--threshold=100",
                           path], capture_output=True, text=True).stdout
    got = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+(.*)$", line)
        if m:
            name = re.sub(r"\s*\[[^\]]*\]$", "", m.group(2))
            got[name] = got.get(name, 0) + int(m.group(1).replace(",", ""))
    return got

def pick(c, pattern):
    return sum(v for k, v in c.items() if re.search(pattern, k))

for rank in (0, 1):
    a = costs(f"{out}/cg.{n1}.{rank}", True)
    b = costs(f"{out}/cg.{n2}.{rank}", True)
    call = r"ProcessGroupImpl::%s\(" % (fn_name or "(send|recv)")
    wait = r"MeshImpl::wait_until\(|MeshImpl::wait\("
    per = ((pick(b, call) - pick(a, call)) - (pick(b, wait) - pick(a, wait))) / (n2 - n1)
    print(f"rank {rank}: {coll} {sys.argv[0] if False else ''}{per:,.0f} instructions per call, waits excluded")
    sa = costs(f"{out}/cg.{n1}.{rank}", False)
    sb = costs(f"{out}/cg.{n2}.{rank}", False)
    diff = sorted(((sb.get(k, 0) - sa.get(k, 0)) / (n2 - n1), k) for k in sb)
    for v, k in reversed(diff[-int(__import__("os").environ.get("TOP", "25")):]):
        if v >= 5:
            print(f"    {v:8.0f}  {k[:150]}")
PY
