"""PostgreSQL savers and stores: LangGraph's tables and migrations, shared
with Python's ``PostgresSaver`` and ``PostgresStore`` (each reads what the
other writes), on the Rust core's connection pool.

Swap ``from langgraph.checkpoint.postgres import PostgresSaver`` for
``from langgraph_checkpoint_rs.postgres import PostgresSaver`` (and
``AsyncPostgresSaver`` from ``langgraph.checkpoint.postgres.aio`` likewise),
and ``from langgraph.store.postgres import PostgresStore`` for
``from langgraph_checkpoint_rs.postgres import PostgresStore`` (and
``AsyncPostgresStore``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.store.base import IndexConfig, TTLConfig

from . import _core
from ._base import RustCheckpointSaver, native_serde_args
from ._store import AsyncStoreMethods, RustStore
from .fencing import Fence, fence_args
from .retention import Retention


# the libpq settings the core's driver (tokio-postgres) understands
_DRIVER_KEYS = frozenset(
    {
        "host", "hostaddr", "port", "user", "password", "dbname", "options",
        "application_name", "sslmode", "connect_timeout", "keepalives",
        "keepalives_idle", "keepalives_interval", "keepalives_retries",
        "tcp_user_timeout", "target_session_attrs", "channel_binding",
        "load_balance_hosts",
    }
)  # fmt: skip


def _conn_string_of(conn: Any) -> str:
    """A connection string for what Python's saver takes: a string, or a
    psycopg connection or pool, whose settings the core's own pool reuses
    (the object itself stays the caller's)."""
    if isinstance(conn, str):
        return conn
    conninfo = getattr(conn, "conninfo", None)  # psycopg_pool pools
    if isinstance(conninfo, str):
        return conninfo
    info = getattr(conn, "info", None)  # psycopg connections
    if info is not None and isinstance(getattr(info, "dsn", None), str):
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        params = {k: v for k, v in conninfo_to_dict(info.dsn).items() if k in _DRIVER_KEYS}
        if getattr(info, "password", None):
            params["password"] = info.password
        return make_conninfo(**params)
    raise TypeError(
        "the Rust core takes a connection string, or a psycopg connection or pool "
        f"to read one from, not {type(conn).__name__}"
    )


class PostgresSaver(RustCheckpointSaver):
    """A checkpoint saver on PostgreSQL, sync and async.

    ``conn`` is a ``postgresql://`` URL or a ``key=value`` string, or a
    psycopg connection or pool to take the settings from (as Python's
    ``PostgresSaver(conn)``; the core opens connections of its own).
    Connections open when first needed, up to ``max_connections`` (16 by
    default); call ``setup()`` once to create or migrate the tables, as with
    Python's saver.

    Example::

        from langgraph_checkpoint_rs.postgres import PostgresSaver

        with PostgresSaver.from_conn_string("postgresql://localhost/db") as saver:
            saver.setup()
            graph = builder.compile(checkpointer=saver)
    """

    def __init__(
        self,
        conn: Any,
        *,
        serde: SerializerProtocol | None = None,
        max_connections: int | None = None,
        fence: Fence | None = None,
        retention: Retention | None = None,
        _core_handle: Any = None,
    ) -> None:
        conn_string = _conn_string_of(conn)
        super().__init__(serde=serde)
        self._core = _core_handle or _core.open(
            False,
            conn_string,
            "postgres",
            fill_from_parent=False,
            lazy=True,
            max_connections=max_connections,
            **native_serde_args(self.serde),
            **fence_args(fence),
        )
        self._start_retention(retention)

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        pipeline: bool = False,
        serde: SerializerProtocol | None = None,
        max_connections: int | None = None,
        fence: Fence | None = None,
        retention: Retention | None = None,
    ) -> Iterator[PostgresSaver]:
        """A saver for the duration of the block. ``pipeline`` is accepted
        for compatibility; the core batches on its own."""
        saver = cls(conn_string, serde=serde, max_connections=max_connections, fence=fence, retention=retention)
        try:
            yield saver
        finally:
            saver.close()

    def setup(self) -> None:
        """Creates the tables or brings them to the latest migration, as
        Python's ``PostgresSaver.setup()`` does (same statements, same
        ``checkpoint_migrations`` rows)."""
        self._core.setup(False)


class AsyncPostgresSaver(PostgresSaver):
    """``PostgresSaver`` set up from async code, as
    ``langgraph.checkpoint.postgres.aio.AsyncPostgresSaver`` is."""

    @classmethod
    @asynccontextmanager
    async def from_conn_string(  # type: ignore[override]
        cls,
        conn_string: str,
        *,
        pipeline: bool = False,
        serde: SerializerProtocol | None = None,
        max_connections: int | None = None,
        fence: Fence | None = None,
        retention: Retention | None = None,
    ) -> AsyncIterator[AsyncPostgresSaver]:
        saver = cls(conn_string, serde=serde, max_connections=max_connections, fence=fence, retention=retention)
        try:
            yield saver
        finally:
            await saver.aclose()

    async def setup(self) -> None:  # type: ignore[override]
        """Async ``setup``."""
        await self._core.setup(True)


class PostgresStore(RustStore):
    """LangGraph's long-term memory store on PostgreSQL, sync and async, on
    Python's ``PostgresStore`` tables and migrations (each reads the
    other's items). ``conn`` as ``PostgresSaver``'s; call ``setup()`` once
    to create or migrate the tables, as with Python's store. ``index``
    (vector search) needs pgvector on the server: without it ``setup()``
    raises ``UnsupportedError`` and creates nothing. ``ttl`` is LangGraph's
    ``TTLConfig``; expired items are never returned, swept or not.

    Example::

        from langgraph_checkpoint_rs.postgres import PostgresStore

        with PostgresStore.from_conn_string("postgresql://localhost/db") as store:
            store.setup()
            graph = builder.compile(checkpointer=saver, store=store)
    """

    def __init__(
        self,
        conn: Any,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        max_connections: int | None = None,
    ) -> None:
        super().__init__(index=index, ttl=ttl)
        self._core = _core.open_postgres_store(
            _conn_string_of(conn), max_connections=max_connections, **self._open_args()
        )

    @classmethod
    def _of_options(
        cls,
        conn_string: str,
        *,
        pipeline: bool = False,
        pool_config: dict[str, Any] | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        max_connections: int | None = None,
    ) -> Any:
        """A store of ``from_conn_string``'s options: ``pipeline`` and
        ``pool_config`` are accepted for compatibility (the core pools and
        batches on its own); ``pool_config["max_size"]`` sizes its pool
        unless ``max_connections`` does."""
        if max_connections is None and pool_config:
            max_connections = pool_config.get("max_size")
        return cls(conn_string, index=index, ttl=ttl, max_connections=max_connections)

    @classmethod
    @contextmanager
    def from_conn_string(cls, conn_string: str, **options: Any) -> Iterator[PostgresStore]:
        """A store for the duration of the block (options: ``index``,
        ``ttl``, ``max_connections``, ``pipeline``, ``pool_config``)."""
        store = cls._of_options(conn_string, **options)
        try:
            yield store
        finally:
            store.close()


class AsyncPostgresStore(AsyncStoreMethods, PostgresStore):
    """``PostgresStore`` set up and closed from async code, as
    ``langgraph.store.postgres.AsyncPostgresStore`` is."""

    @classmethod
    @asynccontextmanager
    async def from_conn_string(  # type: ignore[override]
        cls, conn_string: str, **options: Any
    ) -> AsyncIterator[AsyncPostgresStore]:
        """A store for the duration of the block, closed asynchronously."""
        store = cls._of_options(conn_string, **options)
        try:
            yield store
        finally:
            await store.aclose()


__all__ = ["AsyncPostgresSaver", "AsyncPostgresStore", "PostgresSaver", "PostgresStore"]
