#!/usr/bin/env python3
"""all_reduce, reduce, reduce_scatter, all_to_all, all_gather, gather, scatter and broadcast [cma] (and the shm_direct rows, reduce[shm_pipe]) in real processes under dcomm-run: threshold sizes on
3 and 5 ranks, a rank that refuses cross-memory attach (the group must agree and fall back), and a rank killed mid
single copy or mid pipe (every survivor names it)."""
import re
import subprocess
import sys
import time

run, prog = sys.argv[1], sys.argv[2]
problems = []


def launch(n, *args, env=None):
    import os
    e = dict(os.environ)
    e.update(env or {})
    t0 = time.monotonic()
    p = subprocess.run([run, "--standalone", "--nproc-per-node", str(n), "--", prog, *args],
                       capture_output=True, text=True, timeout=240, env=e)
    return p, p.stdout + p.stderr, time.monotonic() - t0


# 5 ranks without the 4-16 MiB counts, which 3 ranks cover: CI time.
for n, env, expect_log in ((3, {}, None), (5, {"MP_CMA_NO_ROUNDS": "1"}, None),
                           (3, {"MP_CMA_DENY_RANK": "1", "DCOMM_LOG_LEVEL": "info"},
                            r"rank 1 may not use cross-memory attach"),
                           # No slots: the cma rows' addresses and last round go by messages (cma_peers.hpp).
                           (3, {"DCOMM_SLOTS": "0", "MP_CMA_NO_ROUNDS": "1"}, None)):
    env = dict(env, MP_CMA_NO_ROUNDS="1") if "MP_CMA_DENY_RANK" in env else env
    p, out, took = launch(n, "check", env=env)
    what = f"check on {n} ranks {env}"
    if p.returncode != 0:
        problems.append(f"{what}: exit {p.returncode}\n{out}")
    elif len(re.findall(r"rank \d+/\d+: \d+ calls, 0 failures", out)) != n:
        problems.append(f"{what}: not every rank reported 0 failures\n{out}")
    if expect_log and not re.search(expect_log, out):
        problems.append(f"{what}: no rank logged the fallback (/{expect_log}/)\n{out}")
    print(f"{what}: {took:.1f} s")

# all_reduce, reduce_scatter, all_to_all, all_gather, gather, scatter and broadcast [cma] (mid single copy), then the pipes of broadcast and all_gather [shm_direct] and
# reduce[shm_pipe] (mid pipe: a root waiting for acknowledgements,
# readers waiting for pieces).
single = {"": "all_reduce[cma]", "all_to_all": "all_to_all[cma]", "all_gather_cma": "all_gather[cma]",
          "gather_cma": "gather[cma]", "scatter_cma": "scatter[cma]", "broadcast_cma": "broadcast[cma]",
          "reduce_scatter_cma": "reduce_scatter[cma]"}
for what in ("", "all_to_all", "all_gather_cma", "gather_cma", "scatter_cma", "broadcast_cma", "reduce_scatter_cma",
             "broadcast", "all_gather",
             "reduce"):
    name = f"kill {single.get(what, what)}"
    p, out, took = launch(3, "kill", *([what] if what else []))
    if p.returncode == 0:
        problems.append(f"{name}: dcomm-run exited 0 although rank 1 was killed")
    for r in (0, 2):
        pat = rf"survivor rank {r}: RemoteError: .*rank 1\b"
        if not re.search(pat, out):
            problems.append(f"{name}: rank {r} did not report rank 1 (looked for /{pat}/)\n{out}")
    if took > 120:
        problems.append(f"{name}: took {took:.1f} s: survivors should notice within seconds")
    if what in single:
        mid_copy = re.search(r"could not (read|write) .* rank 1's memory .*process \d+ \(rank 1\) exited", out)
        print(f"{name}: {took:.1f} s; a survivor {'was' if mid_copy else 'was not'} in a single copy from rank 1")
    else:
        mid_pipe = re.search(r"waiting for (piece|rank 1's acknowledgement)", out)
        print(f"{name}: {took:.1f} s; a survivor {'was' if mid_pipe else 'was not'} waiting in the pipe")
if problems:
    print("\n".join("FAILED: " + x for x in problems))
    sys.exit(1)
print("ok")
