"""Runs testdata/store/sequence.json against LangGraph's InMemoryStore with
the crate's test embedding (HashedNgramEmbeddings, re-implemented here) and
prints the results as JSON (timestamps left out): what the crate's
InMemoryStore must return. `python store_python_peer.py SEQUENCE > OUT`.
"""

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
        return PutOp(tuple(spec["ns"]), spec["key"], spec["value"], index=index)
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


def main():
    seq = json.load(open(sys.argv[1]))
    dims = seq["dims"]
    store = InMemoryStore(
        index={"dims": dims, "embed": lambda texts: [hashed_ngrams(t, dims) for t in texts], "fields": seq["fields"]}
    )
    out = []
    for batch in seq["batches"]:
        results = store.batch([to_op(s) for s in batch])
        out.append([result(s, r) for s, r in zip(batch, results)])
    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
