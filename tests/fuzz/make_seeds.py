#!/usr/bin/env python3
"""Writes the seed corpus of tests/fuzz/fuzz_kvs_protocol: valid KVS frames of protocol version 2
(kvs/protocol.h), a whole session sealed under the fuzzer's session key, and addresses. Run it
again after changing the wire format: python3 tests/fuzz/make_seeds.py"""
import hashlib
import hmac
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
VERSION = 2
SESSION_KEY = bytes(range(32))  # session_key() in fuzz_kvs_protocol.cpp


def frame(body):
    return struct.pack(">I", len(body)) + body


def s(b):
    return struct.pack(">I", len(b)) + b


def sealer(key):
    """Seals frames in order: the body gets HMAC-SHA-256(key, u64 sequence || body)."""
    seq = [0]

    def seal(body):
        tag = hmac.new(key, struct.pack(">Q", seq[0]) + body, hashlib.sha256).digest()
        seq[0] += 1
        return frame(body + tag)

    return seal


NONCE = bytes(range(16))
SERVER_NONCE = bytes(range(16, 32))
PROOF = bytes(range(64, 96))
hello = frame(b"\x04" + struct.pack(">I", VERSION) + NONCE)
hello_v1 = frame(b"\x04" + struct.pack(">I", 1) + bytes(range(16)))  # an old peer's
proof = frame(b"\x05" + PROOF)
put_body = b"\x01" + s(b"comm0-n4/shm") + s(b"/ccl-123-abc 1048576 host/boot 00112233")
get_body = b"\x02" + s(b"comm0-n4/shm")
barrier_body = b"\x03" + s(b"comm0-n4/mapped") + struct.pack(">I", 4)
ok = frame(b"\x00" + s(b""))
challenge = frame(b"\x00" + s(SERVER_NONCE + PROOF))
refused = frame(b"\x02" + s(b"wrong proof of the job secret for this connection"))
seal = sealer(SESSION_KEY)
sealed = seal(put_body) + seal(get_body) + seal(barrier_body) + seal(get_body)
seeds = {
    "hello": hello,
    "hello_v1": hello_v1,
    "proof": proof,
    "put": frame(put_body),
    "get": frame(get_body),
    "barrier": frame(barrier_body),
    "reply_ok": ok,
    "reply_challenge": challenge,
    "reply_refused": refused,
    "session": hello + proof + frame(put_body) + frame(get_body) + frame(barrier_body),
    "session_sealed": hello + proof + sealed,
    "address": b"127.0.0.1:29501/000102030405060708090a0b0c0d0e0f",
    "address_no_secret": b"10.0.0.1:5",
}
os.makedirs(HERE, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
