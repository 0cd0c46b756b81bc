"""PostgreSQL savers: LangGraph's tables and migrations, shared with Python's
``PostgresSaver`` (each reads what the other writes), on the Rust core's
connection pool.

Swap ``from langgraph.checkpoint.postgres import PostgresSaver`` for
``from langgraph_checkpoint_rs.postgres import PostgresSaver`` (and
``AsyncPostgresSaver`` from ``langgraph.checkpoint.postgres.aio`` likewise).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from . import _core
from ._base import RustCheckpointSaver, native_serde_args
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
        "PostgresSaver takes a connection string, or a psycopg connection or pool "
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


__all__ = ["AsyncPostgresSaver", "PostgresSaver"]
