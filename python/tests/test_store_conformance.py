"""The store conformance set (store_spec.py) against this package's
``SqliteStore`` and against LangGraph's own ``InMemoryStore`` and
``SqliteStore`` (langgraph 1.2.24, langgraph-checkpoint-sqlite 3.1.2).

Ours must pass every check. LangGraph's stores must pass every check except
those listed in ``LANGGRAPH_FAILS``, and must fail those: a listed check
that starts passing (LangGraph fixed it) fails this test, so the list stays
exact.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from . import store_spec as spec

# What LangGraph's own stores break, and why (checked by running them).
LANGGRAPH_FAILS: dict[str, dict[str, tuple[type[BaseException], str]]] = {
    "langgraph-memory": {
        "batch_put_empty_namespace_refused": (AssertionError, "batch() validates no namespace (only put() does)"),
        "batch_put_reserved_root_refused": (AssertionError, "batch() validates no namespace (only put() does)"),
        "batch_label_with_period_refused": (AssertionError, "batch() validates no namespace (only put() does)"),
        "batch_refused_stores_nothing": (AssertionError, "batch() validates no namespace: the bad op is stored too"),
        "list_namespaces_only_holding_items": (
            AssertionError,
            "lists namespaces that were only read, or whose items were all deleted",
        ),
        "ttl_expired_not_read": (NotImplementedError, "no TTL: put(ttl=...) raises NotImplementedError"),
        "ttl_expired_not_searched": (NotImplementedError, "no TTL: put(ttl=...) raises NotImplementedError"),
        "ttl_expired_not_listed": (NotImplementedError, "no TTL: put(ttl=...) raises NotImplementedError"),
        "ttl_sweep_removes_expired": (NotImplementedError, "no TTL: put(ttl=...) raises NotImplementedError"),
        "vector_batch_shared_text": (
            ValueError,
            "two items of one batch with the same text: 'Number of embeddings (1) does not match "
            "number of indices (2)', nothing stored",
        ),
    },
    "langgraph-sqlite": {
        "batch_put_empty_namespace_refused": (AssertionError, "batch() checks labels only (validate_op_namespace)"),
        "batch_put_reserved_root_refused": (AssertionError, "batch() checks labels only (validate_op_namespace)"),
        "search_filter_ne_matches_missing_field": (
            AssertionError,
            "SQL NULL != x: an item missing the field does not match $ne",
        ),
        "search_filter_nested_object": (ValueError, "a nested object filter raises 'Unsupported operator'"),
        "ttl_expired_not_read": (
            AssertionError,
            "returns expired items until a sweep, even with omit_expired=True (langgraph#8902)",
        ),
        "ttl_expired_not_searched": (
            AssertionError,
            "finds expired items until a sweep, even with omit_expired=True (langgraph#8902)",
        ),
        "ttl_expired_not_listed": (
            AssertionError,
            "lists the namespaces of expired items until a sweep (langgraph#8902)",
        ),
        "vector_search_keeps_unembedded_items": (AssertionError, "a vector search leaves out items without vectors"),
        "vector_search_pages_partition_results": (
            AssertionError,
            "takes the best 2 x limit vectors before one row per item and the offset: later pages come back short",
        ),
    },
}

STORES = ["rs-sqlite", "langgraph-memory", "langgraph-sqlite"]


def _python_sqlite_connect(path: str, vectors: bool):
    """A connection LangGraph's SqliteStore can load sqlite-vec into: the
    sqlite3 module's, or pysqlite3's where CPython cannot load extensions."""
    module = sqlite3
    if vectors and not hasattr(sqlite3.Connection, "enable_load_extension"):
        from pysqlite3 import dbapi2 as module  # type: ignore[no-redef]
    return module.connect(path, check_same_thread=False, isolation_level=None)


@pytest.fixture
def make_store(request, tmp_path) -> Iterator:
    """``make_store(kind)`` → ``make(index=None, ttl=None)``, a factory of
    fresh stores of that kind, closed at the end of the test."""
    opened: list = []

    def factory(kind: str):
        def make(index=None, ttl=None):
            path = str(tmp_path / f"store-{len(opened)}.sqlite")
            if kind == "rs-sqlite":
                from langgraph_checkpoint_rs.sqlite import SqliteStore

                store = SqliteStore(path, index=index, ttl=ttl)
                opened.append(store.close)
                return store
            if kind == "langgraph-memory":
                from langgraph.store.memory import InMemoryStore

                return InMemoryStore(index=index)
            from langgraph.store.sqlite import SqliteStore as PySqliteStore

            conn = _python_sqlite_connect(path, index is not None)
            opened.append(conn.close)
            store = PySqliteStore(conn, index=index, ttl=ttl)
            store.setup()
            return store

        return make

    yield factory
    for close in opened:
        close()


@pytest.mark.parametrize("check", sorted(spec.CHECKS))
@pytest.mark.parametrize("kind", STORES)
def test_store_check(kind: str, check: str, make_store) -> None:
    run = spec.CHECKS[check]
    expected = LANGGRAPH_FAILS.get(kind, {}).get(check)
    if expected is None:
        run(make_store(kind))
        return
    error, reason = expected
    with pytest.raises(error) as failed:
        run(make_store(kind))
    print(f"{kind} fails {check} as expected: {reason} ({type(failed.value).__name__}: {failed.value})")


def test_langgraph_failures_are_checks() -> None:
    """Every listed failure names a check of the set."""
    for kind, fails in LANGGRAPH_FAILS.items():
        assert kind in STORES
        assert set(fails) <= set(spec.CHECKS), set(fails) - set(spec.CHECKS)
