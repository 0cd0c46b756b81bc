"""The store conformance set (store_spec.py) against this package's
``SqliteStore`` and ``PostgresStore`` and against LangGraph's own
``InMemoryStore``, ``SqliteStore`` and ``PostgresStore`` (langgraph
1.2.24, langgraph-checkpoint-sqlite 3.1.2, langgraph-checkpoint-postgres
3.2.0).

Ours must pass every check. LangGraph's stores must pass every check except
those listed in ``LANGGRAPH_FAILS``, and must fail those: a listed check
that starts passing (LangGraph fixed it) fails this test, so the list stays
exact. Vector checks on PostgreSQL need pgvector: on a server without it,
ours must refuse the index at ``setup()`` with ``UnsupportedError`` (and
LangGraph's cannot run them: skipped, with the reason).
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterator

import pytest

from . import store_spec as spec
from .conftest import PG_URL, unavailable

# What both of LangGraph's SQL stores break
SQL_FAILS: dict[str, tuple[type[BaseException], str]] = {
    "batch_put_empty_namespace_refused": (AssertionError, "batch() checks labels only (validate_op_namespace)"),
    "batch_put_reserved_root_refused": (AssertionError, "batch() checks labels only (validate_op_namespace)"),
    "search_filter_ne_matches_missing_field": (
        AssertionError,
        "SQL NULL != x: an item missing the field does not match $ne",
    ),
    "search_filter_nested_object": (ValueError, "a nested object filter raises 'Unsupported operator'"),
}

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
        **SQL_FAILS,
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
    # its TTL checks pass: given omit_expired=True (store_spec.TTL) it hides expired items
    "langgraph-postgres": SQL_FAILS,
}

STORES = ["rs-sqlite", "rs-postgres", "langgraph-memory", "langgraph-sqlite", "langgraph-postgres"]


def _python_sqlite_connect(path: str, vectors: bool):
    """A connection LangGraph's SqliteStore can load sqlite-vec into: the
    sqlite3 module's, or pysqlite3's where CPython cannot load extensions."""
    module = sqlite3
    if vectors and not hasattr(sqlite3.Connection, "enable_load_extension"):
        from pysqlite3 import dbapi2 as module  # type: ignore[no-redef]
    return module.connect(path, check_same_thread=False, isolation_level=None)


@functools.cache
def _has_pgvector() -> bool:
    """Whether the test server can create pgvector's ``vector`` extension."""
    import psycopg

    with psycopg.connect(f"{PG_URL}/postgres", autocommit=True, connect_timeout=3) as conn:
        return conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone() is not None


@pytest.fixture
def make_store(request, tmp_path, pg_databases) -> Iterator:
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
            if kind == "rs-postgres":
                from langgraph_checkpoint_rs.postgres import PostgresStore

                store = PostgresStore(pg_databases.new(), index=index, ttl=ttl)
                opened.append(store.close)
                store.setup()
                return store
            if kind == "langgraph-postgres":
                import psycopg
                from langgraph.store.postgres import PostgresStore as PyPostgresStore
                from psycopg.rows import dict_row

                conn = psycopg.connect(pg_databases.new(), autocommit=True, prepare_threshold=0, row_factory=dict_row)
                opened.append(conn.close)
                store = PyPostgresStore(conn, index=index, ttl=ttl)
                store.setup()
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
def test_store_check(kind: str, check: str, make_store, pg_databases) -> None:
    run = spec.CHECKS[check]
    if kind.endswith("postgres") and pg_databases.error:
        unavailable(pg_databases.error)  # a failure under CI=true
    if kind.endswith("postgres") and check.startswith("vector") and not _has_pgvector():
        if kind == "langgraph-postgres":
            pytest.skip("this PostgreSQL server has no pgvector: LangGraph's PostgresStore cannot set up an index")
        from langgraph_checkpoint_rs import UnsupportedError

        with pytest.raises(UnsupportedError, match="pgvector"):
            run(make_store(kind))
        return
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
