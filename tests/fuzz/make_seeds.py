#!/usr/bin/env python3
"""Writes the fuzz target's seed corpus: valid request sequences as the fuzzer's input format (see fuzz_store.cpp):
records of [u8 client][frame]. Each seed starts with the client's hello, so the fuzzer begins past authentication."""
import os
import struct
import sys

MAGIC = 0x54534344
OPS = dict(hello=1, set=2, get=3, add=4, compare_set=5, check=6, wait=7, delete=8, num_keys=9, multi_get=10,
           multi_set=11)


def frame(op, payload=b""):
    return struct.pack("<IBBHI", MAGIC, 1, OPS[op], 0, len(payload)) + payload


def s(b):
    b = b.encode() if isinstance(b, str) else b
    return struct.pack("<I", len(b)) + b


def keys(*ks):
    return struct.pack("<I", len(ks)) + b"".join(s(k) for k in ks)


def hello(secret="fuzz-secret", run_id="DCOMM_RUN_ID=fuzz", world=3):
    return frame("hello", s(secret) + s(run_id) + struct.pack("<q", world))


def rec(client, fr):
    return bytes([client]) + fr


SEEDS = {
    "set_get": [rec(0, hello()), rec(0, frame("set", s("k") + s(b"v\0v"))), rec(0, frame("get", s("k")))],
    "add": [rec(0, hello()), rec(0, frame("add", s("n") + struct.pack("<q", 5))),
            rec(0, frame("add", s("n") + struct.pack("<q", -7))), rec(0, frame("num_keys"))],
    "park_then_set": [rec(0, hello()), rec(1, hello()), rec(0, frame("get", s("late"))),
                      rec(1, frame("set", s("late") + s("x"))), rec(0, frame("check", keys("late", "no")))],
    "wait_multi": [rec(0, hello()), rec(1, hello()), rec(2, hello()), rec(0, frame("wait", keys("a", "b"))),
                   rec(2, frame("multi_get", keys("a", "b"))),
                   rec(1, frame("multi_set", struct.pack("<I", 2) + s("a") + s("1") + s("b") + s("2")))],
    "compare_set_delete": [rec(0, hello()), rec(0, frame("compare_set", s("c") + s("") + s("first"))),
                           rec(0, frame("compare_set", s("c") + s("first") + s("second"))),
                           rec(0, frame("delete", s("c"))), rec(0, frame("delete", s("c")))],
    "disconnect_parked": [rec(0, hello()), rec(1, hello()), rec(0, frame("get", s("k"))), bytes([0x80]),
                          rec(1, frame("set", s("k") + s("v")))],
    "old_hello": [rec(0, frame("hello", s("fuzz-secret"))), rec(0, frame("set", s("k") + s("v")))],
    "wrong_secret": [rec(0, hello(secret="nope")), rec(0, frame("get", s("k")))],
    "other_job": [rec(0, hello(run_id="DCOMM_RUN_ID=other", world=2)), rec(0, frame("num_keys"))],
    "big_value": [rec(0, hello()), rec(0, frame("set", s("big") + s(b"\x01" * 600)))],
}

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for name, records in SEEDS.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(b"".join(records))
