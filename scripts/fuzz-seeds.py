#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (fuzz/fuzz_targets/*.rs) from
the spec's wire vectors and the fixtures of testdata/ (standard library only).

    scripts/fuzz-seeds.py [OUT_DIR]     (default: fuzz/corpus)

Sources:
* ../shared/spec/langgraph-checkpoint.md, when there (the spec is not in the
  repository; CHECKPOINTER_SHARED_DIR names another shared/ folder): every
  backticked hex string (msgpack payloads of §4.8, the AES-EAX vector of §5);
* testdata/fixtures/*.memory.json: every stored {"type", "hex"} payload;
* testdata/fixtures/*.sqlite: every checkpoint and write row (type,
  payload, metadata JSON), also as whole rows for the sqlite_row target.

Each seed is a file named by the SHA-1 of its bytes, in OUT_DIR/<target>/.
The input layout of each target is described at the top of its source.
"""

import hashlib
import json
import os
import re
import sqlite3
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOADS_TAGS = ["msgpack", "json", "null", "bytes", "bytearray", "empty", "pickle", "msgpack+aes", "", "MSGPACK"]
ENCRYPTED_TAGS = ["msgpack+aes", "null+aes", "bytes+aes", "msgpack", "msgpack+des", "json+aes"]


def spec_file() -> "Path | None":
    """The spec of ../shared (or CHECKPOINTER_SHARED_DIR), if there is one."""
    env = os.environ.get("CHECKPOINTER_SHARED_DIR")
    dirs = [Path(env)] if env else [ROOT.parent / "shared", ROOT.parent.parent / "shared"]
    for d in dirs:
        path = d / "spec" / "langgraph-checkpoint.md"
        if path.is_file():
            return path
    return None


class Corpus:
    def __init__(self, out: Path):
        self.out = out
        self.counts = {}

    def add(self, target: str, data: bytes) -> None:
        d = self.out / target
        d.mkdir(parents=True, exist_ok=True)
        name = hashlib.sha1(data).hexdigest()
        path = d / name
        if not path.exists():
            path.write_bytes(data)
            self.counts[target] = self.counts.get(target, 0) + 1

    def payload(self, tag: str, data: bytes) -> None:
        """A stored (tag, payload) pair, fed to every target that reads one."""
        if tag == "msgpack":
            self.add("msgpack_decode", data)
            self.add("encrypted_payload", b"\x01" + data)
        if tag in LOADS_TAGS:
            self.add("loads_typed", bytes([LOADS_TAGS.index(tag)]) + data)
        if tag == "json":
            self.add("json_metadata", b"\x01" + data)


def tag_field(tag) -> bytes:
    if tag is None:
        return b"\xff"
    raw = tag.encode()[:254]
    return bytes([len(raw)]) + raw


def sqlite_row(tag, checkpoint: bytes, metadata: bytes, write_tag, write_value: bytes) -> bytes:
    checkpoint = checkpoint[:0xFFFF]
    metadata = metadata[:0xFFFF]
    return (
        tag_field(tag)
        + struct.pack("<H", len(checkpoint))
        + checkpoint
        + struct.pack("<H", len(metadata))
        + metadata
        + tag_field(write_tag)
        + write_value
    )


def spec_vectors(corpus: Corpus, spec: Path) -> None:
    text = spec.read_text(encoding="utf-8")
    for m in re.finditer(r"`([0-9a-f]{2,})`", text):
        h = m.group(1)
        if len(h) % 2:
            continue
        data = bytes.fromhex(h)
        corpus.payload("msgpack", data)
    # The AES-EAX vector of §5 (split over three backticked parts there).
    vector = bytes.fromhex(
        "000102030405060708090a0b0c0d0e0f" "8ee76d82f558339f0a1b2b3ee26b5ee1" "a5d8639e"
    )
    for i in range(len(ENCRYPTED_TAGS)):
        corpus.add("encrypted_payload", bytes([2 * i]) + vector)


def memory_dumps(corpus: Corpus, path: Path) -> None:
    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("hex"), str) and isinstance(node.get("type"), str):
                corpus.payload(node["type"], bytes.fromhex(node["hex"]))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(json.loads(path.read_text(encoding="utf-8")))


def sqlite_files(corpus: Corpus, path: Path) -> None:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        writes = con.execute("SELECT type, value FROM writes").fetchall()
        for tag, value in writes:
            corpus.payload(tag, bytes(value or b""))
        first_write = writes[0] if writes else (None, b"")
        for tag, checkpoint, metadata in con.execute("SELECT type, checkpoint, metadata FROM checkpoints"):
            checkpoint = bytes(checkpoint or b"")
            metadata = bytes(metadata or b"")
            corpus.payload(tag, checkpoint)
            corpus.add("json_metadata", b"\x00" + metadata)
            corpus.add("sqlite_row", sqlite_row(tag, checkpoint, metadata, first_write[0], bytes(first_write[1] or b"")))
    finally:
        con.close()


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "fuzz" / "corpus"
    fixtures = ROOT / "testdata" / "fixtures"
    corpus = Corpus(out)
    spec = spec_file()
    if spec is None:
        print("no ../shared/spec: seeds from testdata/fixtures only", file=sys.stderr)
    else:
        spec_vectors(corpus, spec)
    for path in sorted(fixtures.glob("*.memory.json")):
        memory_dumps(corpus, path)
    for path in sorted(fixtures.glob("*.sqlite")):
        sqlite_files(corpus, path)
    # A few hand-made corner cases no fixture has.
    corpus.add("json_metadata", b"\x00" + b'{"a": NaN, "b": [1e400, -0.0, "\\u0000"], "\\ud800": {}}')
    corpus.add("json_metadata", b"\x01" + b'{"lc": 2, "type": "constructor", "id": ["os", "system"], "args": ["x"]}')
    corpus.add("sqlite_row", sqlite_row(None, b"", b"", None, b""))
    corpus.add("sqlite_row", sqlite_row("pickle", b"\x80\x04K\x01.", b"{}", "msgpack+aes", b"\x00" * 40))
    for target, n in sorted(corpus.counts.items()):
        print(f"{target}: {n} new seeds")


if __name__ == "__main__":
    main()
