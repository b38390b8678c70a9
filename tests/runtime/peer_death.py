#!/usr/bin/env python3
"""Runs mp_peer_death under dcomm-run and checks that every survivor reported the dead rank by name."""
import re
import subprocess
import sys
import time

run, prog, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
t0 = time.monotonic()
p = subprocess.run([run, "--standalone", "--nproc-per-node", "3", "--", prog] + extra,
                   capture_output=True, text=True, timeout=120)
elapsed = time.monotonic() - t0
out = p.stdout + p.stderr
problems = []
if p.returncode == 0:
    problems.append("dcomm-run exited 0 although a rank was killed")
for r in (0, 2):
    # The error names the dead rank and its pid (shm: "process P (rank 1) ... exited"; ucx: "rank 1 ... (pid P)").
    pat = rf"survivor rank {r}: RemoteError: .*rank 1\b.*(pid \d+|process \d+ \(rank 1\))"
    if not re.search(pat, out):
        problems.append(f"rank {r} did not report rank 1's death (looked for /{pat}/)")
if not re.search(r"\[1\] rank 1 \(.*\): signal 9 SIGKILL", out):
    problems.append("the launcher's summary does not put rank 1's SIGKILL first")
if elapsed > 60:
    problems.append(f"took {elapsed:.1f} s: survivors should notice within seconds")
if problems:
    print(out)
    print("\n".join("FAILED: " + x for x in problems))
    sys.exit(1)
print(f"ok: both survivors named the dead rank; {elapsed:.2f} s in all")
