#!/usr/bin/env python3
"""The transport suite in real processes: runs mp_transports through dcomm-run and checks what it printed.

usage: mp_tests.py DCOMM_RUN MP_TRANSPORTS CASE
  conformance_N   N ranks over shm: every rank exits 0
  conformance_streamed_N   the same without CMA and with small rings and chunks
  conformance_auto_N / conformance_stream_N / conformance_cma_N   large messages by the model's choice / forced
                                             to stream / forced to CMA (DCOMM_SHM_PROTOCOL; the default, measured,
                                             is what conformance_N runs)
  conformance_mixed_N   rank 1 refuses cross-memory attach, the others are forced to use it where they may
  staged_peer_killed_N   peer_killed with rank 0's message staged from (fake) device memory
  stream_peer_killed_N   peer_killed with the dead rank receiving through the ring: it dies mid-stream
  stream_sender_killed_N   the dead rank is the one streaming (to rank 0, which may be pulling the rest)
  split_sender_killed_N    the same sender, its message read by rank 0 and written by itself at once
  staging_N       N ranks over shm: device buffers (the fake stager's) staged over the host transport
  staging_ucx_N   the same over ucx (meson adds it only when the build has ucx)
  peer_killed_N   N ranks; the last kills itself (SIGKILL) while rank 0 sends to it: every survivor fails
                  within a few seconds (the op timeout is 120 s) naming the dead rank, its pid and its host
Exits 0 when the case passes, 1 with the launcher's output when it fails.
"""
import os
import re
import socket
import subprocess
import sys

RUN_TIMEOUT_S = 150
# Generous for a loaded 2-core machine, yet far below the 120 s op timeout the survivors wait with.
DEATH_NOTICED_S = 30


def run(nproc, mode, extra_env=None):
    env = dict(os.environ, DCOMM_TRANSPORT="shm")
    env.update(extra_env or {})
    args = [DCOMM_RUN, "--nproc-per-node", str(nproc), "--standalone", "--grace-period", "60", "--",
            MP_TRANSPORTS, mode]
    return subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env)


def fail(what, r):
    print(f"{what}\n--- exit {r.returncode}\n--- stdout:\n{r.stdout}\n--- stderr:\n{r.stderr}")
    sys.exit(1)


def conformance(nproc, extra_env=None, mode="conformance", transport="shm"):
    r = run(nproc, mode, dict(extra_env or {}, DCOMM_TRANSPORT=transport))
    if r.returncode != 0:
        fail(f"{mode} over {transport} with {nproc} processes failed", r)
    for rank in range(nproc):
        if f"rank {rank} over {transport}: 0 failure(s)" not in r.stdout:
            fail(f"rank {rank} did not report a clean {mode} run over {transport}", r)


def staging(nproc):
    conformance(nproc, mode="staging")


def staging_ucx(nproc):
    conformance(nproc, mode="staging", transport="ucx")


def conformance_streamed(nproc):
    # No cross-memory attach, and small rings, eager limits and chunks: large messages stream through the ring.
    conformance(nproc, {"DCOMM_SHM_CMA": "0", "DCOMM_SHM_RING_BYTES": "65536", "DCOMM_SHM_EAGER_BYTES": "1000",
                        "DCOMM_SHM_CHUNK_BYTES": "16000"})


def conformance_protocol(nproc, protocol):
    conformance(nproc, {"DCOMM_SHM_PROTOCOL": protocol})


def conformance_mixed(nproc):
    # Rank 1 may not read anyone (it streams every large message it receives); the others read rank 1 and each
    # other by CMA. Each receiver picks alone, so the group needs no agreement.
    conformance(nproc, {"DCOMM_SHM_PROTOCOL": "cma", "MP_DENY_CMA_RANK": "1"})


def peer_killed(nproc, mode="peer_killed", extra_env=None):
    r = run(nproc, mode, extra_env)
    dead = nproc - 1
    host = socket.gethostname()
    if r.returncode == 0:
        fail("dcomm-run succeeded although a rank was killed", r)
    for rank in range(dead):
        m = re.search(rf"SURVIVOR rank {rank} after ([0-9.]+) s: \[RemoteError\] (.*)", r.stdout)
        if not m:
            fail(f"survivor rank {rank} did not report the dead peer", r)
        seconds, text = float(m.group(1)), m.group(2)
        if seconds > DEATH_NOTICED_S:
            fail(f"rank {rank} noticed the death after {seconds} s", r)
        if f"rank {dead}" not in text or host not in text or "exited" not in text:
            fail(f"rank {rank}'s error does not name rank {dead}, host {host} and the exit: {text}", r)
    if mode == "stream_peer_killed" and "dies mid-stream" not in r.stdout:
        fail(f"rank {dead} did not die in the middle of the stream", r)


if __name__ == "__main__":
    DCOMM_RUN, MP_TRANSPORTS, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
    name, nproc = CASE.rsplit("_", 1)
    cases = {"conformance": conformance, "conformance_streamed": conformance_streamed, "peer_killed": peer_killed,
             "staging": staging, "staging_ucx": staging_ucx,
             "staged_peer_killed": lambda n: peer_killed(n, "staged_peer_killed"),
             "conformance_auto": lambda n: conformance_protocol(n, "auto"),
             "conformance_stream": lambda n: conformance_protocol(n, "stream"),
             "conformance_cma": lambda n: conformance_protocol(n, "cma"),
             "conformance_mixed": conformance_mixed,
             # No CMA: a receiver that may read the sender pulls a stalled stream whole, and might finish before it dies.
             "stream_peer_killed": lambda n: peer_killed(n, "stream_peer_killed",
                                                         {"DCOMM_SHM_PROTOCOL": "stream", "DCOMM_SHM_CMA": "0"}),
             "stream_sender_killed": lambda n: peer_killed(n, "stream_sender_killed", {"DCOMM_SHM_PROTOCOL": "stream"}),
             # The same sender, its message read by both sides (shm_split.hpp): it dies writing its part.
             "split_sender_killed": lambda n: peer_killed(n, "stream_sender_killed", {"DCOMM_SHM_PROTOCOL": "cma"})}
    cases[name](int(nproc))
    print(f"{CASE}: passed")
