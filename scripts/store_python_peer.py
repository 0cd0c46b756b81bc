"""Runs an op sequence (testdata/store/sequence.json) against one of
LangGraph's stores with the crate's test embedding (HashedNgramEmbeddings,
re-implemented here) and prints the results as JSON (timestamps left out).

    python store_python_peer.py SEQUENCE > OUT
        LangGraph's InMemoryStore: what the crate's InMemoryStore must return.
    python store_python_peer.py --store sqlite --db FILE SEQUENCE > OUT
        LangGraph's SqliteStore on FILE (created or migrated; TTL on, reads
        refreshing), so that a sequence of puts leaves FILE for the crate's
        SqliteStore to read, and a sequence of reads shows what Python reads
        from a FILE the crate wrote. A batch Python's store fails is run
        again op by op, each failing op's result {"error": message}.

    python store_python_peer.py --store postgres --url URL SEQUENCE > OUT
        LangGraph's PostgresStore (langgraph-checkpoint-postgres) on the
        database at URL (set up; TTL on, reads refreshing), without an
        index: vector search needs pgvector, which a server may lack, so
        the sequence's queries are plain searches there. As --store sqlite
        otherwise.

A put may carry "ttl" (minutes). The sequence's "fields" are given to the
SqliteStore both as `fields` and as `text_fields`, the key its
`_ensure_index_config` reads (it ignores `fields`).
"""

import argparse
import contextlib
import json
import sys

from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore


def fnv1a(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h ^= b
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def hashed_ngrams(text: str, dims: int) -> list[float]:
    chars = " " + text + " "
    windows = [chars] if len(chars) < 3 else [chars[i : i + 3] for i in range(len(chars) - 2)]
    vec = [0.0] * dims
    for w in windows:
        vec[fnv1a(w.encode("utf-8")) % dims] += 1.0
    return vec


def to_op(spec):
    kind = spec["op"]
    if kind == "put":
        index = spec.get("index")
        return PutOp(tuple(spec["ns"]), spec["key"], spec["value"], index=index, ttl=spec.get("ttl"))
    if kind == "delete":
        return PutOp(tuple(spec["ns"]), spec["key"], None)
    if kind == "get":
        return GetOp(tuple(spec["ns"]), spec["key"])
    if kind == "search":
        return SearchOp(
            tuple(spec["prefix"]), spec.get("filter"), spec["limit"], spec["offset"], spec.get("query")
        )
    if kind == "list":
        conds = []
        if spec.get("prefix"):
            conds.append(MatchCondition("prefix", tuple(spec["prefix"])))
        if spec.get("suffix"):
            conds.append(MatchCondition("suffix", tuple(spec["suffix"])))
        return ListNamespacesOp(tuple(conds), spec.get("max_depth"), spec["limit"], spec["offset"])
    raise ValueError(kind)


def item(i, score=False):
    if i is None:
        return None
    out = {"ns": list(i.namespace), "key": i.key, "value": i.value}
    if score:
        out["score"] = i.score
    return out


def result(spec, r):
    kind = spec["op"]
    if kind == "get":
        return item(r)
    if kind == "search":
        return [item(i, True) for i in r]
    if kind == "list":
        return [list(ns) for ns in r]
    return None


def connect(path):
    """A connection Python's SqliteStore can load sqlite-vec into: the
    standard sqlite3 module's, or pysqlite3's where CPython was built
    without loadable extensions (pyenv's default)."""
    import sqlite3

    if not hasattr(sqlite3.Connection, "enable_load_extension"):
        try:
            from pysqlite3 import dbapi2 as sqlite3
        except ImportError:
            sys.exit(
                "this Python's sqlite3 cannot load extensions (sqlite-vec) and pysqlite3 is missing: "
                "pip install -r scripts/peer-extra.txt (pysqlite3-binary)"
            )
    return sqlite3.connect(path, check_same_thread=False, isolation_level=None)


def open_store(args, seq, stack):
    dims = seq["dims"]
    index = {
        "dims": dims,
        "embed": lambda texts: [hashed_ngrams(t, dims) for t in texts],
        "fields": seq["fields"],
    }
    if args.store == "memory":
        return InMemoryStore(index=index), None
    if args.store == "postgres":
        from langgraph.store.postgres import PostgresStore

        store = stack.enter_context(PostgresStore.from_conn_string(args.url, ttl={"refresh_on_read": True}))
        store.setup()
        return store, None
    from langgraph.store.sqlite import SqliteStore

    conn = connect(args.db)
    index["text_fields"] = seq["fields"]
    store = SqliteStore(conn, index=index, ttl={"refresh_on_read": True})
    store.setup()
    return store, conn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("sequence")
    parser.add_argument("--store", choices=["memory", "sqlite", "postgres"], default="memory")
    parser.add_argument("--db")
    parser.add_argument("--url")
    args = parser.parse_args()
    seq = json.load(open(args.sequence))
    stack = contextlib.ExitStack()
    store, conn = open_store(args, seq, stack)
    out = []
    for batch in seq["batches"]:
        try:
            results = store.batch([to_op(s) for s in batch])
            out.append([result(s, r) for s, r in zip(batch, results)])
        except Exception:
            if args.store == "memory":
                raise
            alone = []
            for s in batch:
                try:
                    alone.append(result(s, store.batch([to_op(s)])[0]))
                except Exception as e:  # noqa: BLE001 - reported as the op's result
                    alone.append({"error": f"{type(e).__name__}: {e}"})
            out.append(alone)
    if conn is not None:
        conn.close()
    stack.close()
    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
