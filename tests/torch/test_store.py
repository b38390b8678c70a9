"""dcomm's store calls over a torch store (bindings/torch/store_adapter.cpp), on a real TCPStore in this process:
a bounded wait that times out must leave the connection usable. torch 1.13's client did not recover from a timed
wait whose keys were set later while it was not waiting: its next call read the server's late answer and hung until
the store's timeout (CI: a rank joining late left the others' rendezvous stuck for 120 s)."""
import socket
import sys
import threading
import time
from datetime import timedelta

import torch.distributed as dist

import dcomm_torch


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fail(msg):
    print("FAIL:", msg, flush=True)
    sys.exit(1)


def main():
    port = free_port()
    store_timeout = timedelta(seconds=10)
    server = dist.TCPStore("127.0.0.1", port, 2, True, timeout=store_timeout, wait_for_workers=False)
    client = dist.TCPStore("127.0.0.1", port, 2, False, timeout=store_timeout)
    server.set("a", "A")

    # A wait that times out, then its key set while nobody waits, then other calls: each answers at once.
    for attempt in range(3):
        key = f"late{attempt}"
        start = time.monotonic()
        try:
            dcomm_torch._store_wait(client, [key], timedelta(milliseconds=200))
            fail(f"a wait for '{key}', never set, returned")
        except RuntimeError as e:
            took = time.monotonic() - start
            if "not set" not in str(e) or not 0.15 < took < 2.0:
                fail(f"the wait for '{key}' raised after {took:.2f} s: {e}")
        server.set(key, "L")
        time.sleep(0.1)  # the server's answer to any wait still pending in it lands now
        start = time.monotonic()
        got = dcomm_torch._store_get(client, "a")
        took = time.monotonic() - start
        if got != b"A" or took > 2.0:
            fail(f"after a timed-out wait, get('a') returned {got!r} after {took:.2f} s (the store's timeout is 10 s)")
        if dcomm_torch._store_get(client, key) != b"L":
            fail(f"get('{key}') after it was set")

    # A wait whose key comes while it waits returns once it is there; a get waits for its key the same way.
    threading.Timer(0.3, lambda: server.set("soon", "S")).start()
    start = time.monotonic()
    dcomm_torch._store_wait(client, ["soon"], timedelta(seconds=5))
    took = time.monotonic() - start
    if not 0.25 < took < 2.0:
        fail(f"the wait for 'soon' (set at 0.3 s) returned after {took:.2f} s")
    threading.Timer(0.3, lambda: server.set("later", "T")).start()
    if dcomm_torch._store_get(client, "later") != b"T":
        fail("get('later') that waited for its key")
    print("OK: the torch store's connection stays usable after timed-out waits", flush=True)


if __name__ == "__main__":
    main()
