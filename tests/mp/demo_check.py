#!/usr/bin/env python3
"""dcomm-demo under dcomm-run on 3 ranks: every rank reports correct results, and rank 0 reports the warmed
time, the first call apart, a copy of the same bytes and the cost model's table. Usage: demo_check.py RUN DEMO"""
import re
import subprocess
import sys

run, demo = sys.argv[1], sys.argv[2]
r = subprocess.run([run, "--nproc-per-node", "3", "--", demo, "100003"], capture_output=True, text=True, timeout=100)
out = r.stdout
problems = []
if r.returncode != 0:
    problems.append(f"exit {r.returncode}")
if out.count("all results correct") != 3:
    problems.append("want 3 ranks with correct results")
if not re.search(r"\[rank 0\]: all_reduce of 100003 doubles \(0\.8 MiB\) on 3 ranks: [0-9.]+ ms per call warmed "
                 r"\(median of 5, [0-9.]+ GB/s algbw\); the first call took [0-9.]+ ms", out):
    problems.append("rank 0's warmed timing line")
if not re.search(r"\[rank 0\]: for comparison: one copy of the same bytes inside one process takes [0-9.]+ ms", out):
    problems.append("rank 0's comparison line")
if "[rank 0]: choice: " not in out:
    problems.append("the cost model's table")
if problems:
    sys.exit(f"FAIL: {'; '.join(problems)}\n--- stdout:\n{out}\n--- stderr:\n{r.stderr}")
print(out)
