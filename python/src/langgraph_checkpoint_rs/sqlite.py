"""SQLite savers: LangGraph's ``checkpoints`` and ``writes`` tables, written
with the same bytes Python's ``SqliteSaver`` writes, by the Rust core (WAL,
one writer thread, a pool of readers: no "database is locked" between
concurrent writers of one process).

Swap ``from langgraph.checkpoint.sqlite import SqliteSaver`` for
``from langgraph_checkpoint_rs.sqlite import SqliteSaver`` (and
``AsyncSqliteSaver`` from ``langgraph.checkpoint.sqlite.aio`` likewise).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from . import _core
from ._base import (
    RustCheckpointSaver,
    _transport,
    effective_serde,
    native_serde_args,
    require_msgpack,
)
from .errors import CheckpointerError, SerdeError


def _path_of(conn: str | sqlite3.Connection) -> str:
    if isinstance(conn, sqlite3.Connection):
        # a drop-in for SqliteSaver(conn): open the connection's file
        for _seq, name, file in conn.execute("PRAGMA database_list"):
            if name == "main" and file:
                return file
        raise TypeError(
            "SqliteSaver needs a database file: a sqlite3 connection to an "
            "in-memory database cannot be shared with the Rust core; use "
            'SqliteSaver.from_conn_string(":memory:") instead'
        )
    if not isinstance(conn, str):
        raise TypeError(f"expected a path or a sqlite3.Connection, got {type(conn).__name__}")
    return conn


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
        _core_handle: Any = None,
    ) -> None:
        super().__init__(serde=serde)
        native = native_serde_args(self.serde)
        self._core = _core_handle or _core.open_sqlite(False, _path_of(conn), **native)
        # what encodes a checkpoint for its row: the saver's serializer, or
        # (when the core encrypts with the AES key natively) the one inside
        # its EncryptedSerializer, whose plaintext the core seals
        self._checkpoint_serde = _transport(self.serde) if "aes_key" in native else self.serde

    @classmethod
    @contextmanager
    def from_conn_string(
        cls, conn_string: str, *, serde: SerializerProtocol | None = None
    ) -> Iterator[SqliteSaver]:
        """Opens the file (creating it and its tables) and closes it after."""
        saver = cls(conn_string, serde=serde)
        try:
            yield saver
        finally:
            saver.close()

    def setup(self) -> None:
        """Nothing to do: the tables are created when the saver opens."""
        self._core.setup(False)

    # Reads hand the stored rows to the saver's serializer, as Python's
    # SqliteSaver does: the checkpoint blob and each write are exactly the
    # bytes its serializer decodes, and the metadata is JSON.

    def _row_tuple(self, row: tuple, asked: RunnableConfig | None = None) -> CheckpointTuple:
        try:
            return self._decode_row(row, asked)
        except CheckpointerError:
            raise
        except Exception as e:  # noqa: BLE001 - the serializer's own errors
            thread_id, ns, checkpoint_id = row[0], row[1], row[2]
            err = SerdeError(
                f"serialization error: checkpoint {checkpoint_id!r} of thread {thread_id!r} "
                f"(namespace {ns!r}) cannot be decoded: {type(e).__name__}: {e}"
            )
            err.kind = "serde"
            err.retryable = False
            raise err from e

    def _decode_row(self, row: tuple, asked: RunnableConfig | None) -> CheckpointTuple:
        thread_id, ns, checkpoint_id, parent_id, tag, blob, metadata, writes = row
        loads = self.serde.loads_typed
        return CheckpointTuple(
            config=asked
            if asked is not None
            else {
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": ns,
                    "checkpoint_id": checkpoint_id,
                }
            },
            checkpoint=loads((tag, blob)),
            metadata=json.loads(metadata) if metadata else {},
            parent_config={
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": ns,
                    "checkpoint_id": parent_id,
                }
            }
            if parent_id
            else None,
            pending_writes=[(t, c, loads((wt, v))) for t, c, wt, v in writes],
        )

    def _core_put(
        self,
        aio: bool,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Any:
        # the checkpoint goes into its row as the serializer encoded it, as
        # Python's SqliteSaver stores it (nothing decodes it on the way)
        configurable = config["configurable"]
        tag, data = self._checkpoint_serde.dumps_typed(checkpoint)
        require_msgpack(tag, "a checkpoint")
        return self._core.put_raw(
            aio,
            str(configurable["thread_id"]),
            configurable.get("checkpoint_ns", "") or "",
            configurable.get("checkpoint_id"),
            checkpoint["id"],
            tag,
            data,
            self._dumps(get_checkpoint_metadata(config, metadata)),
        )

    def _core_get_tuple(self, aio: bool, thread_id: str, ns: str, checkpoint_id: str | None) -> Any:
        return self._core.get_tuple_raw(aio, thread_id, ns, checkpoint_id)

    def _core_list(self, *args: Any) -> Any:
        return self._core.list_raw(*args)

    def _read_one(self, raw: list[tuple], asked: RunnableConfig | None) -> CheckpointTuple:
        return self._row_tuple(raw[0], asked)

    def _read_batch(self, raw: list[tuple]) -> list[CheckpointTuple]:
        return [self._row_tuple(row) for row in raw]


class AsyncSqliteSaver(SqliteSaver):
    """``SqliteSaver`` opened and closed from async code, as
    ``langgraph.checkpoint.sqlite.aio.AsyncSqliteSaver`` is; its sync
    methods work too, from any thread."""

    @classmethod
    @asynccontextmanager
    async def from_conn_string(  # type: ignore[override]
        cls, conn_string: str, *, serde: SerializerProtocol | None = None
    ) -> AsyncIterator[AsyncSqliteSaver]:
        """Opens the file without blocking the event loop, closes it after."""
        native = native_serde_args(effective_serde(cls, serde))
        handle = await _core.open_sqlite(True, _path_of(conn_string), **native)
        saver = cls(conn_string, serde=serde, _core_handle=handle)
        try:
            yield saver
        finally:
            await saver.aclose()

    async def setup(self) -> None:  # type: ignore[override]
        """Nothing to do: the tables are created when the saver opens."""
        await self._core.setup(True)


__all__ = ["AsyncSqliteSaver", "SqliteSaver"]
