#!/usr/bin/env python3
"""Reads meson's testlog.json and prints the closing line CI reads: 'N passed, N failed, N skipped'."""
import json
import sys

passed = failed = skipped = 0
failures = []
with open(sys.argv[1]) as f:
    for line in f:
        line = line.strip()
        if not line:
            continue
        t = json.loads(line)
        result = t.get("result")
        if result in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif result == "SKIP":
            skipped += 1
        else:
            failed += 1
            failures.append(f"{t.get('name')} ({result})")
for name in failures:
    print(f"FAILED: {name}")
print(f"{passed} passed, {failed} failed, {skipped} skipped")
