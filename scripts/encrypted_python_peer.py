#!/usr/bin/env python3
"""Python side of tests/python/encryption.rs: LangGraph's real
EncryptedSerializer.from_pycryptodome_aes against the crate's.

    encrypted_python_peer.py encrypt KEYHEX|env
        prints one JSON line per sample value Python encrypts:
        {"name", "tag", "data", "plain_tag", "plain"} (bytes as hex; plain_* is
        JsonPlusSerializer's plaintext encoding of the same value)
    encrypted_python_peer.py decrypt KEYHEX|env
        reads JSON lines {"name", "tag", "data"} on stdin, decrypts each with
        Python's class and prints {"name", "plain_tag", "plain"}: the value
        re-encoded by JsonPlusSerializer without encryption, so the caller can
        compare it with its own plaintext encoding

`env` takes the key from LANGGRAPH_AES_KEY, as Python does by default.
"""

import datetime
import json
import sys
import uuid

from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer


def serializer(key_arg: str) -> EncryptedSerializer:
    if key_arg == "env":
        return EncryptedSerializer.from_pycryptodome_aes()
    return EncryptedSerializer.from_pycryptodome_aes(key=bytes.fromhex(key_arg))


SAMPLES = {
    "none": None,
    "bytes": b"\x00raw\xff",
    "str": "plaintext-password",
    "int": -40000,
    "float": 0.1,
    "map": {"a": 1, "b": [True, None, "é"]},
    "list": list(range(20)),
    "nested_bytes": {"b": b"x" * 300},
    "datetime": datetime.datetime(2024, 1, 2, 3, 4, 5, 678, tzinfo=datetime.timezone.utc),
    "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "set": {1},
    "big": "x" * 70000,
}


def main() -> None:
    command, key_arg = sys.argv[1], sys.argv[2]
    enc = serializer(key_arg)
    plain = JsonPlusSerializer()
    if command == "encrypt":
        for name, value in SAMPLES.items():
            tag, data = enc.dumps_typed(value)
            plain_tag, plain_data = plain.dumps_typed(value)
            print(json.dumps({"name": name, "tag": tag, "data": data.hex(), "plain_tag": plain_tag, "plain": plain_data.hex()}))
    elif command == "decrypt":
        for line in sys.stdin:
            if not line.strip():
                continue
            item = json.loads(line)
            value = enc.loads_typed((item["tag"], bytes.fromhex(item["data"])))
            plain_tag, plain_data = plain.dumps_typed(value)
            print(json.dumps({"name": item["name"], "plain_tag": plain_tag, "plain": plain_data.hex()}))
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main()
