"""A conformance set for LangGraph ``BaseStore`` implementations: one named
check per rule, written against the public sync API (and ``batch`` with
LangGraph's op classes), with LangGraph's ``InMemoryStore`` as the
reference where the SQL stores answer otherwise (as LangGraph's maintainers
advise for custom stores: langchain-ai/docs#4163).

A check takes ``make(index=None, ttl=None)``, which returns a fresh, empty
store (``index`` LangGraph's index config, ``ttl`` its TTL config), and
raises (``AssertionError`` or the store's own exception) when the store
breaks the rule. The same functions run against this package's stores and
against LangGraph's own (test_store_conformance.py).
"""

from __future__ import annotations

import importlib.util
import math
import time
from collections.abc import Callable
from pathlib import Path

from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)

DIMS = 64


def _peer_module():
    """scripts/store_python_peer.py, whose ``hashed_ngrams`` is the crate's
    test embedding (``HashedNgramEmbeddings``) in Python."""
    path = Path(__file__).resolve().parents[2] / "scripts" / "store_python_peer.py"
    loaded = importlib.util.spec_from_file_location("store_python_peer", path)
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return module


_hashed_ngrams = _peer_module().hashed_ngrams


def hashed_ngrams(text: str, dims: int = DIMS) -> list[float]:
    """The crate's test embedding: 3-character windows of the text padded
    with a space, FNV-1a 32, counts."""
    return _hashed_ngrams(text, dims)


def embed(texts: list[str]) -> list[list[float]]:
    return [hashed_ngrams(t) for t in texts]


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


# fields given both as LangGraph's `fields` and as `text_fields` (the key
# LangGraph's SqliteStore reads)
INDEX = {"dims": DIMS, "embed": embed, "fields": ["text"], "text_fields": ["text"]}
TTL = {"refresh_on_read": True, "default_ttl": None, "omit_expired": True}
# a TTL that has run out after EXPIRE_WAIT seconds
SHORT_TTL = 0.1 / 60
EXPIRE_WAIT = 0.3

Make = Callable[..., object]
CHECKS: dict[str, Callable[[Make], None]] = {}


def check(fn: Callable[[Make], None]) -> Callable[[Make], None]:
    CHECKS[fn.__name__] = fn
    return fn


def keys(items) -> list[str]:
    return [i.key for i in items]


def raises(kind: type[BaseException], fn: Callable[[], object]) -> BaseException:
    try:
        fn()
    except kind as e:
        return e
    raise AssertionError(f"expected {kind.__name__}")


# --- items -------------------------------------------------------------------


@check
def put_get_round_trip(make: Make) -> None:
    s = make()
    value = {"text": "héllo", "n": 1, "f": 1.5, "ok": True, "none": None, "list": [1, {"a": "b"}], "obj": {"x": {}}}
    s.put(("users", "1"), "k", value)
    got = s.get(("users", "1"), "k")
    assert got is not None and got.value == value and got.key == "k" and got.namespace == ("users", "1")
    assert got.created_at is not None and got.updated_at is not None


@check
def get_missing_is_none(make: Make) -> None:
    s = make()
    assert s.get(("users",), "nope") is None


@check
def put_overwrites(make: Make) -> None:
    s = make()
    s.put(("a",), "k", {"v": 1})
    s.put(("a",), "k", {"w": 2})
    assert s.get(("a",), "k").value == {"w": 2}
    assert keys(s.search(("a",))) == ["k"]


@check
def delete_removes(make: Make) -> None:
    s = make()
    s.put(("a",), "k", {"v": 1})
    s.delete(("a",), "k")
    assert s.get(("a",), "k") is None
    assert s.search(("a",)) == []


@check
def delete_missing_is_noop(make: Make) -> None:
    s = make()
    s.delete(("a",), "missing")
    assert s.get(("a",), "missing") is None


@check
def put_non_object_value_refused(make: Make) -> None:
    s = make()
    raises(TypeError, lambda: s.put(("a",), "k", [1, 2]))
    assert s.get(("a",), "k") is None


@check
def put_invalid_namespace_refused(make: Make) -> None:
    s = make()
    for ns in [(), ("langgraph", "x"), ("a.b",), ("a", ""), ("a", 1)]:
        raises(InvalidNamespaceError, lambda ns=ns: s.put(ns, "k", {"v": 1}))
    assert s.list_namespaces() == []


@check
def batch_put_empty_namespace_refused(make: Make) -> None:
    s = make()
    raises(InvalidNamespaceError, lambda: s.batch([PutOp((), "k", {"v": 1})]))
    assert s.search(()) == []


@check
def batch_put_reserved_root_refused(make: Make) -> None:
    s = make()
    raises(InvalidNamespaceError, lambda: s.batch([PutOp(("langgraph", "x"), "k", {"v": 1})]))
    assert s.search(()) == []


@check
def batch_label_with_period_refused(make: Make) -> None:
    s = make()
    s.put(("a", "b"), "k", {"v": 1})
    # ("a.b",) must not address ("a", "b") in a store that joins labels with "."
    raises(InvalidNamespaceError, lambda: s.batch([GetOp(("a.b",), "k")]))
    raises(InvalidNamespaceError, lambda: s.batch([PutOp(("a.b",), "k", None)]))
    assert s.get(("a", "b"), "k") is not None


# --- batches -----------------------------------------------------------------


@check
def batch_results_in_op_order(make: Make) -> None:
    s = make()
    s.put(("a",), "x", {"v": 1})
    out = s.batch(
        [
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
            PutOp(("b",), "y", {"v": 2}),
            GetOp(("a",), "x"),
            SearchOp(("a",), None, 10, 0),
            GetOp(("a",), "missing"),
        ]
    )
    assert len(out) == 5
    assert out[0] == [("a",)] and out[1] is None and out[2].value == {"v": 1}
    assert keys(out[3]) == ["x"] and out[4] is None


@check
def batch_reads_see_state_before_puts(make: Make) -> None:
    s = make()
    s.put(("a",), "x", {"v": 1})
    out = s.batch([PutOp(("a",), "x", {"v": 2}), GetOp(("a",), "x"), PutOp(("a",), "y", {"v": 3}), SearchOp(("a",), None, 10, 0)])
    assert out[1].value == {"v": 1}
    assert keys(out[3]) == ["x"]
    assert s.get(("a",), "x").value == {"v": 2} and s.get(("a",), "y").value == {"v": 3}


@check
def batch_last_put_wins(make: Make) -> None:
    s = make()
    s.batch([PutOp(("a",), "x", {"v": 1}), PutOp(("a",), "x", {"v": 2}), PutOp(("a",), "y", {"v": 1}), PutOp(("a",), "y", None)])
    assert s.get(("a",), "x").value == {"v": 2}
    assert s.get(("a",), "y") is None


@check
def batch_refused_stores_nothing(make: Make) -> None:
    s = make()
    raises(InvalidNamespaceError, lambda: s.batch([PutOp(("a",), "ok", {"v": 1}), PutOp(("b.c",), "bad", {"v": 1})]))
    assert s.get(("a",), "ok") is None


# --- search ------------------------------------------------------------------


def _numbers(make: Make):
    s = make()
    for i in range(1, 6):
        value = {"n": i, "parity": "even" if i % 2 == 0 else "odd", "meta": {"lang": "en" if i < 3 else "fr"}}
        if i == 5:
            del value["parity"]
        s.put(("nums",), f"k{i}", value)
    return s


def _filtered(make: Make, flt: dict) -> list[str]:
    return sorted(keys(_numbers(make).search(("nums",), filter=flt, limit=100)))


@check
def search_prefix_matches_whole_labels(make: Make) -> None:
    s = make()
    s.put(("a", "b"), "1", {"v": 1})
    s.put(("a", "bc"), "2", {"v": 1})
    s.put(("a", "b", "c"), "3", {"v": 1})
    assert sorted(keys(s.search(("a", "b")))) == ["1", "3"]
    assert sorted(keys(s.search(("a",)))) == ["1", "2", "3"]
    assert sorted(keys(s.search(()))) == ["1", "2", "3"]


@check
def search_filter_implicit_eq(make: Make) -> None:
    assert _filtered(make, {"parity": "even"}) == ["k2", "k4"]


@check
def search_filter_comparisons(make: Make) -> None:
    assert _filtered(make, {"n": {"$eq": 3}}) == ["k3"]
    assert _filtered(make, {"n": {"$gt": 3}}) == ["k4", "k5"]
    assert _filtered(make, {"n": {"$gte": 3}}) == ["k3", "k4", "k5"]
    assert _filtered(make, {"n": {"$lt": 3}}) == ["k1", "k2"]
    assert _filtered(make, {"n": {"$lte": 3}}) == ["k1", "k2", "k3"]
    assert _filtered(make, {"n": {"$gt": 1, "$lt": 4}}) == ["k2", "k3"]


@check
def search_filter_ne(make: Make) -> None:
    assert _filtered(make, {"n": {"$ne": 3}}) == ["k1", "k2", "k4", "k5"]


@check
def search_filter_ne_matches_missing_field(make: Make) -> None:
    # the reference: a missing field is None, and None != "odd"
    assert _filtered(make, {"parity": {"$ne": "odd"}}) == ["k2", "k4", "k5"]


@check
def search_filter_nested_object(make: Make) -> None:
    assert _filtered(make, {"meta": {"lang": "fr"}}) == ["k3", "k4", "k5"]


@check
def search_filter_unknown_operator_refused(make: Make) -> None:
    s = _numbers(make)
    err = raises(ValueError, lambda: s.search(("nums",), filter={"n": {"$regex": "1"}}))
    assert "Unsupported operator" in str(err)


@check
def search_pages_partition_results(make: Make) -> None:
    s = _numbers(make)
    everything = keys(s.search(("nums",), limit=100))
    pages = [keys(s.search(("nums",), limit=2, offset=o)) for o in (0, 2, 4, 6)]
    assert len(everything) == 5
    assert [k for p in pages for k in p] == everything
    assert [len(p) for p in pages] == [2, 2, 1, 0]


# --- namespaces --------------------------------------------------------------


def _tree(make: Make):
    s = make()
    for ns in [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f"), ("a", "c", "f"), ("x", "f")]:
        s.put(ns, "k", {"v": 1})
    return s


@check
def list_namespaces_prefix(make: Make) -> None:
    s = _tree(make)
    assert s.list_namespaces(prefix=("a", "b")) == [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f")]


@check
def list_namespaces_suffix_and_wildcard(make: Make) -> None:
    s = _tree(make)
    assert s.list_namespaces(suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f"), ("x", "f")]
    assert s.list_namespaces(prefix=("a", "*", "f")) == [("a", "b", "f"), ("a", "c", "f")]
    assert s.list_namespaces(prefix=("a",), suffix=("*", "f")) == [("a", "b", "f"), ("a", "c", "f")]


@check
def list_namespaces_max_depth(make: Make) -> None:
    s = _tree(make)
    assert s.list_namespaces(prefix=("a", "b"), max_depth=3) == [("a", "b", "c"), ("a", "b", "d"), ("a", "b", "f")]
    assert s.list_namespaces(max_depth=1) == [("a",), ("x",)]


@check
def list_namespaces_sorted_and_paged(make: Make) -> None:
    s = _tree(make)
    everything = s.list_namespaces()
    assert everything == sorted(everything) and len(everything) == 6
    assert s.list_namespaces(limit=2, offset=1) == everything[1:3]


@check
def list_namespaces_only_holding_items(make: Make) -> None:
    s = make()
    s.put(("a",), "k", {"v": 1})
    s.get(("b",), "k")
    s.delete(("a",), "k")
    s.put(("c",), "k", {"v": 1})
    assert s.list_namespaces() == [("c",)]


# --- TTL ---------------------------------------------------------------------


def _expired(make: Make):
    s = make(ttl=TTL)
    s.put(("t",), "gone", {"v": 1}, ttl=SHORT_TTL)
    s.put(("t",), "kept", {"v": 2}, ttl=60)
    s.put(("u",), "gone", {"v": 3}, ttl=SHORT_TTL)
    time.sleep(EXPIRE_WAIT)
    return s


@check
def ttl_expired_not_read(make: Make) -> None:
    s = _expired(make)
    assert s.get(("t",), "gone") is None
    assert s.get(("t",), "kept").value == {"v": 2}


@check
def ttl_expired_not_searched(make: Make) -> None:
    s = _expired(make)
    assert keys(s.search(("t",))) == ["kept"]


@check
def ttl_expired_not_listed(make: Make) -> None:
    s = _expired(make)
    assert s.list_namespaces() == [("t",)]


@check
def ttl_sweep_removes_expired(make: Make) -> None:
    s = make(ttl=TTL)
    s.put(("t",), "gone", {"v": 1}, ttl=SHORT_TTL)
    s.put(("t",), "kept", {"v": 2})
    time.sleep(1.1)  # SQL stores compare with whole seconds
    assert s.sweep_ttl() == 1
    assert keys(s.search(("t",), limit=10)) == ["kept"]


# --- vector search -----------------------------------------------------------

DOCS = {
    "rust": "rust tutorial for beginners",
    "python": "python guide for data science",
    "go": "go concurrency patterns",
    "cook": "cooking pasta at home",
}


def _docs(make: Make):
    s = make(index=INDEX)
    for k, text in DOCS.items():
        s.put(("docs",), k, {"text": text, "kind": "food" if k == "cook" else "code"})
    return s


@check
def vector_search_ranks_by_similarity(make: Make) -> None:
    s = _docs(make)
    query = "a rust tutorial"
    found = s.search(("docs",), query=query, limit=10)
    q = hashed_ngrams(query)
    want = sorted(DOCS, key=lambda k: -cosine(q, hashed_ngrams(DOCS[k])))
    assert keys(found) == want
    for item in found:
        assert math.isclose(item.score, cosine(q, hashed_ngrams(DOCS[item.key])), rel_tol=1e-6)


@check
def vector_search_with_filter(make: Make) -> None:
    s = _docs(make)
    found = s.search(("docs",), query="pasta", filter={"kind": "code"}, limit=10)
    assert sorted(keys(found)) == ["go", "python", "rust"]


@check
def vector_search_keeps_unembedded_items(make: Make) -> None:
    s = _docs(make)
    s.put(("docs",), "plain", {"text": "rust rust rust"}, index=False)
    found = s.search(("docs",), query="rust", limit=10)
    assert sorted(keys(found)) == sorted([*DOCS, "plain"])
    assert found[-1].key == "plain" and found[-1].score is None


@check
def vector_search_pages_partition_results(make: Make) -> None:
    s = make(index=INDEX)
    for i in range(6):
        s.put(("docs",), f"d{i}", {"text": [f"note {i} on rust", f"rust {i}", f"more rust {i}"]}, index=["text[*]"])
    everything = keys(s.search(("docs",), query="rust", limit=100))
    pages = [keys(s.search(("docs",), query="rust", limit=2, offset=o)) for o in (0, 2, 4)]
    assert len(everything) == 6
    assert [k for p in pages for k in p] == everything


@check
def vector_batch_shared_text(make: Make) -> None:
    s = make(index=INDEX)
    s.batch([PutOp(("docs",), "a", {"text": "same words"}), PutOp(("docs",), "b", {"text": "same words"})])
    found = s.search(("docs",), query="same words", limit=10)
    assert sorted(keys(found)) == ["a", "b"]
    assert all(math.isclose(f.score, 1.0, rel_tol=1e-6) for f in found)
