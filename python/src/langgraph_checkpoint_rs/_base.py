"""The part every saver shares: LangGraph's saver interface over a Rust core.

Values cross into Rust as the ``(tag, bytes)`` pairs of the saver's own
serializer (the ``JsonPlusSerializer`` LangGraph uses, or the one inside an
``EncryptedSerializer``, whose cipher the core applies): the core stores
them as given, as Python's savers do, after the checks ``put`` applies, and
returns stored rows the same way, which the saver's serializer decodes. Sync
methods run on the calling thread with the GIL released; async methods
await the core's futures on the event loop.
"""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

from .errors import CheckpointerError, SerdeError, UnsupportedError
from .fencing import FencingMethods
from .retention import RetentionMethods

# tuples read per call into the core while listing
_BATCH = 64


def _transport(serde: SerializerProtocol) -> SerializerProtocol:
    """The serializer whose msgpack crosses into Rust: the saver's own, or
    the one inside an ``EncryptedSerializer`` (Rust encrypts what it stores)."""
    if isinstance(serde, EncryptedSerializer):
        return serde.serde
    return serde


def _pycryptodome_eax_key(cipher: Any) -> bytes | None:
    """The AES key of a cipher made by ``EncryptedSerializer.from_pycryptodome_aes()``
    in its default EAX mode, so that Rust encrypts natively; ``None`` for any
    other cipher (Rust then calls the cipher object itself)."""
    encrypt = getattr(type(cipher), "encrypt", None)
    if type(cipher).__name__ != "PycryptodomeAesCipher" or encrypt is None:
        return None
    closure = getattr(encrypt, "__closure__", None)
    if not closure:
        return None
    cells = dict(zip(encrypt.__code__.co_freevars, (c.cell_contents for c in closure)))
    key, kwargs = cells.get("key"), cells.get("kwargs")
    try:
        from Crypto.Cipher import AES
    except ImportError:  # pragma: no cover - the cipher itself needs it
        return None
    if isinstance(key, bytes) and kwargs == {"mode": AES.MODE_EAX}:
        return key
    return None


def native_serde_args(serde: SerializerProtocol | None) -> dict[str, Any]:
    """Keyword arguments of ``_core.open`` for the saver's serializer."""
    if isinstance(serde, EncryptedSerializer):
        key = _pycryptodome_eax_key(serde.cipher)
        if key is not None:
            return {"aes_key": key}
        return {"cipher": serde.cipher}
    return {}


def require_msgpack(tag: str, what: str) -> None:
    """Refuses a serializer's output that is not msgpack (plain, or sealed
    as ``msgpack+<cipher>``): what these savers store."""
    if tag.partition("+")[0] != "msgpack":
        raise UnsupportedError(
            f"the serializer encoded {what} as {tag!r}; these savers store "
            "msgpack (LangGraph's JsonPlusSerializer without pickle_fallback, "
            "optionally inside an EncryptedSerializer)"
        )


# the tags of JsonPlusSerializer's output the core stores (plain, or sealed
# as ``<tag>+<cipher>``)
_VALUE_TAGS = frozenset({"msgpack", "null", "bytes", "bytearray"})


def require_value_tag(tag: str) -> None:
    """Refuses a value the serializer encoded other than as these savers
    store values (pickle, for one)."""
    if tag.partition("+")[0] not in _VALUE_TAGS:
        raise UnsupportedError(
            f"the serializer encoded a value as {tag!r}; these savers store "
            "msgpack (LangGraph's JsonPlusSerializer without pickle_fallback, "
            "optionally inside an EncryptedSerializer)"
        )


def effective_serde(cls: type, serde: SerializerProtocol | None) -> SerializerProtocol:
    """The serializer an instance of ``cls`` made with ``serde`` uses, as
    ``BaseCheckpointSaver.__init__`` picks it (the class default when
    ``None``, with LangGraph's typed methods added): what an async opener
    needs before the instance exists."""
    probe = cls.__new__(cls)
    BaseCheckpointSaver.__init__(probe, serde=serde)
    return probe.serde


def _ids(config: RunnableConfig) -> tuple[str, str, str | None]:
    configurable = config["configurable"]
    return (
        str(configurable["thread_id"]),
        configurable.get("checkpoint_ns", "") or "",
        get_checkpoint_id(config),
    )


class RustCheckpointSaver(FencingMethods, RetentionMethods, BaseCheckpointSaver[str]):
    """LangGraph's ``BaseCheckpointSaver`` over a checkpointer core: every
    method sync and async, plus ``delete_for_runs``, ``copy_thread``,
    ``prune`` and ``get_delta_channel_history``; with ``fence``, one writer
    per thread (``acquire``, ``renew``, ``release``, ``owning``: see
    ``fencing``); retention policies (``retain``, ``aretain`` and the
    ``retention=`` option: see ``retention``).

    Use a backend's class (``SqliteSaver``, ``PostgresSaver``,
    ``RedisSaver``); this one only holds what they share.
    """

    _core: Any

    def __init__(self, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde)

    # --- the msgpack that crosses into Rust ---------------------------------

    def _dumps(self, obj: Any) -> bytes:
        tag, data = _transport(self.serde).dumps_typed(obj)
        require_msgpack(tag, "a value")
        return data

    def _loads(self, data: bytes) -> Any:
        return _transport(self.serde).loads_typed(("msgpack", data))

    def _put_args(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> tuple[tuple[str, str, str | None], str, str, bytes, bytes, bytes]:
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        ns = configurable.get("checkpoint_ns", "") or ""
        parent = configurable.get("checkpoint_id")
        metadata = get_checkpoint_metadata(config, metadata)
        # the checkpoint as the serializer encodes it, stored as given (the
        # core seals it when the saver encrypts)
        tag, data = _transport(self.serde).dumps_typed(checkpoint)
        require_msgpack(tag, "a checkpoint")
        return (
            (thread_id, ns, parent),
            checkpoint["id"],
            tag,
            data,
            self._dumps(metadata),
            self._dumps(new_versions),
        )

    def _core_put(
        self,
        aio: bool,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Any:
        """The core's put: its result (sync) or its future (async)."""
        return self._core.put(aio, *self._put_args(config, checkpoint, metadata, new_versions))

    @staticmethod
    def _put_result(config: RunnableConfig, checkpoint: Checkpoint) -> RunnableConfig:
        configurable = config["configurable"]
        return {
            "configurable": {
                "thread_id": configurable["thread_id"],
                "checkpoint_ns": configurable.get("checkpoint_ns", "") or "",
                "checkpoint_id": checkpoint["id"],
            }
        }

    def _writes_args(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> tuple[tuple[str, str, str | None], str, str, list[tuple[str, str, bytes]]]:
        dumps = _transport(self.serde).dumps_typed
        encoded = []
        for channel, value in writes:
            tag, data = dumps(value)
            require_value_tag(tag)
            encoded.append((channel, tag, data))
        return _ids(config), task_id, task_path, encoded

    # Reads hand the stored rows to the saver's serializer, as Python's
    # savers do: the checkpoint and each write are the bytes its serializer
    # decodes, the metadata JSON text (SQLite's rows) or msgpack.

    def _tuple(self, row: tuple, asked: RunnableConfig | None = None) -> CheckpointTuple:
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
        thread_id, ns, checkpoint_id, parent_id, tag, blob, meta_tag, metadata, writes = row
        loads = self.serde.loads_typed
        if meta_tag == "json":
            meta = json.loads(metadata) if metadata else {}
        else:
            meta = loads((meta_tag, metadata))
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
            metadata=meta,
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

    def _list_args(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> tuple[Any, ...]:
        if limit is not None and limit < 0:
            limit = None
        if config is None:
            thread_id = ns = checkpoint_id = None
        else:
            configurable = config.get("configurable", {})
            raw_thread = configurable.get("thread_id")
            thread_id = None if raw_thread is None else str(raw_thread)
            ns = configurable.get("checkpoint_ns")
            checkpoint_id = get_checkpoint_id(config)
        packed_filter = self._dumps(filter) if filter else None
        before_id = get_checkpoint_id(before) if before else None
        return thread_id, ns, checkpoint_id, packed_filter, before_id, limit

    def _delta(self, raw: list[tuple]) -> dict[str, DeltaChannelHistory]:
        loads = self._loads
        out: dict[str, DeltaChannelHistory] = {}
        for channel, (writes, seed) in raw:
            history: DeltaChannelHistory = {"writes": [(t, c, loads(v)) for t, c, v in writes]}
            if seed is not None:
                history["seed"] = loads(seed)
            out[channel] = history
        return out

    # --- sync ------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        at = _ids(config)
        rows = self._core.get_tuple(False, at)
        if rows is None:
            return None
        return self._tuple(rows[0], config if at[2] else None)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        lister = self._core.list(self._list_args(config, filter, before, limit))
        while True:
            batch = lister.next(False, _BATCH)
            if not batch:
                return
            for row in batch:
                yield self._tuple(row)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        self._core_put(False, config, checkpoint, metadata, new_versions)
        return self._put_result(config, checkpoint)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._core.put_writes(False, *self._writes_args(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._core.delete_thread(False, str(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._core.delete_for_runs(False, [str(r) for r in run_ids])

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._core.copy_thread(False, str(source_thread_id), str(target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._core.prune(False, [str(t) for t in thread_ids], strategy)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        if not channels:
            return {}
        raw = self._core.delta_channel_history(False, _ids(config), list(dict.fromkeys(channels)))
        return self._delta(raw)

    # --- async -----------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        at = _ids(config)
        rows = await self._core.get_tuple(True, at)
        if rows is None:
            return None
        return self._tuple(rows[0], config if at[2] else None)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        lister = self._core.list(self._list_args(config, filter, before, limit))
        while True:
            batch = await lister.next(True, _BATCH)
            if not batch:
                return
            for row in batch:
                yield self._tuple(row)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        await self._core_put(True, config, checkpoint, metadata, new_versions)
        return self._put_result(config, checkpoint)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._core.put_writes(True, *self._writes_args(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        await self._core.delete_thread(True, str(thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._core.delete_for_runs(True, [str(r) for r in run_ids])

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._core.copy_thread(True, str(source_thread_id), str(target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self._core.prune(True, [str(t) for t in thread_ids], strategy)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        if not channels:
            return {}
        raw = await self._core.delta_channel_history(True, _ids(config), list(dict.fromkeys(channels)))
        return self._delta(raw)

    # --- versions and lifecycle ---------------------------------------------------

    def get_next_version(self, current: str | int | None, channel: None = None) -> str:
        """LangGraph's version format: a zero-padded counter and a random
        fraction, as Python's SQLite and Postgres savers make them."""
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(current.split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"

    def close(self) -> None:
        """Finishes queued writes and closes the saver."""
        self._core.close(False)

    async def aclose(self) -> None:
        """Async ``close``."""
        await self._core.close(True)
