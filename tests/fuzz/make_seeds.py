#!/usr/bin/env python3
"""Writes the seed corpus of tests/fuzz/fuzz_kvs_protocol: valid KVS frames (kvs/protocol.h) and
addresses. Run it again after changing the wire format: python3 tests/fuzz/make_seeds.py"""
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def frame(body):
    return struct.pack(">I", len(body)) + body


def s(b):
    return struct.pack(">I", len(b)) + b


SECRET = bytes(range(16))
hello = frame(b"\x04" + struct.pack(">I", 1) + SECRET)
put = frame(b"\x01" + s(b"comm0-n4/shm") + s(b"/ccl-123-abc 1048576 host/boot 00112233"))
get = frame(b"\x02" + s(b"comm0-n4/shm"))
barrier = frame(b"\x03" + s(b"comm0-n4/mapped") + struct.pack(">I", 4))
ok = frame(b"\x00" + s(b""))
refused = frame(b"\x02" + s(b"wrong job secret"))
seeds = {
    "hello": hello,
    "put": put,
    "get": get,
    "barrier": barrier,
    "reply_ok": ok,
    "reply_refused": refused,
    "session": hello + put + get + barrier + get,
    "address": b"127.0.0.1:29501/000102030405060708090a0b0c0d0e0f",
    "address_no_secret": b"10.0.0.1:5",
}
os.makedirs(HERE, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
