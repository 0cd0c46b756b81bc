"""SQLite savers and stores: LangGraph's ``checkpoints`` and ``writes``
tables, written with the same bytes Python's ``SqliteSaver`` writes, and
its long-term memory tables (``store``, ``store_vectors``), shared with
Python's ``SqliteStore``; by the Rust core (WAL, one writer thread, a pool
of readers: no "database is locked" between concurrent writers of one
process).

Swap ``from langgraph.checkpoint.sqlite import SqliteSaver`` for
``from langgraph_checkpoint_rs.sqlite import SqliteSaver`` (and
``AsyncSqliteSaver`` from ``langgraph.checkpoint.sqlite.aio`` likewise), and
``from langgraph.store.sqlite import SqliteStore`` for
``from langgraph_checkpoint_rs.sqlite import SqliteStore`` (``AsyncSqliteStore``
from ``langgraph.store.sqlite.aio`` likewise).
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.store.base import IndexConfig, TTLConfig

from . import _core
from ._base import RustCheckpointSaver, effective_serde, native_serde_args
from ._store import AsyncStoreMethods, RustStore
from .fencing import Fence, fence_args
from .retention import Retention


def _url_of(conn: str | sqlite3.Connection) -> str:
    """The store URL of a path: ``sqlite://`` and the path as it is (the
    core decodes nothing in it, so any file name round-trips;
    ``sqlite://:memory:`` is a private in-memory database)."""
    return "sqlite://" + _path_of(conn)


def _path_of(conn: str | sqlite3.Connection) -> str:
    if isinstance(conn, sqlite3.Connection):
        # a drop-in for SqliteSaver(conn): open the connection's file
        for _seq, name, file in conn.execute("PRAGMA database_list"):
            if name == "main" and file:
                return file
        raise TypeError(
            "the Rust core needs a database file: a sqlite3 connection to an "
            "in-memory database cannot be shared with it; use "
            'from_conn_string(":memory:") instead'
        )
    if not isinstance(conn, str):
        raise TypeError(f"expected a path or a sqlite3.Connection, got {type(conn).__name__}")
    return conn


def _open(
    aio: bool, conn: str | sqlite3.Connection, serde: SerializerProtocol, fence: Fence | None = None
) -> Any:
    """The core on the file: its tables created, as ``SqliteSaver.setup()``
    creates them; each checkpoint stored exactly as given; the file left
    in WAL mode when closed, as Python's saver leaves it."""
    return _core.open(
        aio,
        _url_of(conn),
        "sqlite",
        fill_from_parent=False,
        restore_journal=False,
        **native_serde_args(serde),
        **fence_args(fence),
    )


class SqliteSaver(RustCheckpointSaver):
    """A checkpoint saver on a SQLite file (``":memory:"`` for a private
    in-memory database), sync and async.

    Example::

        from langgraph_checkpoint_rs.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string("checkpoints.sqlite") as saver:
            graph = builder.compile(checkpointer=saver)
    """

    def __init__(
        self,
        conn: str | sqlite3.Connection = ":memory:",
        *,
        serde: SerializerProtocol | None = None,
        fence: Fence | None = None,
        retention: Retention | None = None,
        _core_handle: Any = None,
    ) -> None:
        super().__init__(serde=serde)
        self._core = _core_handle or _open(False, conn, self.serde, fence)
        self._start_retention(retention)

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        serde: SerializerProtocol | None = None,
        fence: Fence | None = None,
        retention: Retention | None = None,
    ) -> Iterator[SqliteSaver]:
        """Opens the file (creating it and its tables) and closes it after."""
        saver = cls(conn_string, serde=serde, fence=fence, retention=retention)
        try:
            yield saver
        finally:
            saver.close()

    def setup(self) -> None:
        """Nothing to do: the tables are created when the saver opens."""
        self._core.setup(False)


class AsyncSqliteSaver(SqliteSaver):
    """``SqliteSaver`` opened and closed from async code, as
    ``langgraph.checkpoint.sqlite.aio.AsyncSqliteSaver`` is; its sync
    methods work too, from any thread."""

    @classmethod
    @asynccontextmanager
    async def from_conn_string(  # type: ignore[override]
        cls,
        conn_string: str,
        *,
        serde: SerializerProtocol | None = None,
        fence: Fence | None = None,
        retention: Retention | None = None,
    ) -> AsyncIterator[AsyncSqliteSaver]:
        """Opens the file without blocking the event loop, closes it after."""
        handle = await _open(True, conn_string, effective_serde(cls, serde), fence)
        saver = cls(conn_string, serde=serde, _core_handle=handle, retention=retention)
        try:
            yield saver
        finally:
            await saver.aclose()

    async def setup(self) -> None:  # type: ignore[override]
        """Nothing to do: the tables are created when the saver opens."""
        await self._core.setup(True)


class SqliteStore(RustStore):
    """LangGraph's long-term memory store on a SQLite file (``":memory:"``
    for a private in-memory database), sync and async: Python's
    ``SqliteStore`` tables, created or migrated by its migrations when the
    store opens, so that both read each other's items in one file.

    ``index`` is LangGraph's ``{"dims": ..., "embed": ..., "fields": [...]}``
    (``embed`` a LangChain ``Embeddings`` or a sync or async function of a
    list of texts; the store calls it, and never fetches a model). ``ttl``
    is LangGraph's ``TTLConfig``; expired items are never returned, swept or
    not (``omit_expired`` always holds).

    Example::

        from langgraph_checkpoint_rs.sqlite import SqliteStore

        with SqliteStore.from_conn_string("memory.sqlite") as store:
            store.setup()
            store.put(("users", "42"), "prefs", {"theme": "dark"})
            graph = builder.compile(checkpointer=saver, store=store)
    """

    def __init__(
        self,
        conn: str | sqlite3.Connection = ":memory:",
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        _core_handle: Any = None,
    ) -> None:
        super().__init__(index=index, ttl=ttl)
        self._core = _core_handle or _core.open_sqlite_store(False, _path_of(conn), **self._open_args())

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
    ) -> Iterator[SqliteStore]:
        """Opens the file (creating it and its tables) and closes it after."""
        store = cls(conn_string, index=index, ttl=ttl)
        try:
            yield store
        finally:
            store.close()



class AsyncSqliteStore(AsyncStoreMethods, SqliteStore):
    """``SqliteStore`` opened and closed from async code, as
    ``langgraph.store.sqlite.aio.AsyncSqliteStore`` is; an async embedding
    function is awaited on the caller's event loop. Its sync methods work
    too, from any thread but the event loop's."""

    @classmethod
    @asynccontextmanager
    async def from_conn_string(  # type: ignore[override]
        cls,
        conn_string: str,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
    ) -> AsyncIterator[AsyncSqliteStore]:
        """Opens the file without blocking the event loop, closes it after."""
        probe = cls.__new__(cls)
        RustStore.__init__(probe, index=index, ttl=ttl)
        handle = await _core.open_sqlite_store(True, _path_of(conn_string), **probe._open_args())
        store = cls(conn_string, index=index, ttl=ttl, _core_handle=handle)
        try:
            yield store
        finally:
            await store.aclose()


__all__ = ["AsyncSqliteSaver", "AsyncSqliteStore", "SqliteSaver", "SqliteStore"]
