"""Redis savers on plain Redis, Valkey or Redis Cluster (core commands and
Lua only, no modules), with optional TTL: the layout of the crate's
``RedisSaver``, so Rust and Python services share one store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypedDict

from langgraph.checkpoint.serde.base import SerializerProtocol

from . import _core
from ._base import RustCheckpointSaver, effective_serde, native_serde_args


class TTLConfig(TypedDict, total=False):
    """LangGraph's TTL settings: ``default_ttl`` in minutes, and whether
    reads renew it (``refresh_on_read``)."""

    default_ttl: float
    refresh_on_read: bool


def _open_args(url: str, key_prefix: str | None, ttl: TTLConfig | None, serde: SerializerProtocol) -> tuple:
    if not isinstance(url, str):
        raise TypeError(f"RedisSaver takes a redis:// or rediss:// URL, not {type(url).__name__}")
    minutes = ttl.get("default_ttl") if ttl else None
    refresh = bool(ttl.get("refresh_on_read", False)) if ttl else False
    return (url, key_prefix, None if minutes is None else float(minutes), refresh), native_serde_args(serde)


class RedisSaver(RustCheckpointSaver):
    """A checkpoint saver on Redis, sync and async.

    Example::

        from langgraph_checkpoint_rs.redis import RedisSaver

        with RedisSaver.from_conn_string("redis://localhost:6379",
                                         ttl={"default_ttl": 60}) as saver:
            graph = builder.compile(checkpointer=saver)
    """

    def __init__(
        self,
        redis_url: str,
        *,
        serde: SerializerProtocol | None = None,
        key_prefix: str | None = None,
        ttl: TTLConfig | None = None,
        _core_handle: Any = None,
    ) -> None:
        super().__init__(serde=serde)
        if _core_handle is None:
            args, kwargs = _open_args(redis_url, key_prefix, ttl, self.serde)
            _core_handle = _core.open_redis(False, *args, **kwargs)
        self._core = _core_handle

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        redis_url: str,
        *,
        serde: SerializerProtocol | None = None,
        key_prefix: str | None = None,
        ttl: TTLConfig | None = None,
    ) -> Iterator[RedisSaver]:
        saver = cls(redis_url, serde=serde, key_prefix=key_prefix, ttl=ttl)
        try:
            yield saver
        finally:
            saver.close()

    def setup(self) -> None:
        """Nothing to do: the saver checks the store's layout when it opens."""
        self._core.setup(False)


class AsyncRedisSaver(RedisSaver):
    """``RedisSaver`` opened from async code without blocking the loop."""

    @classmethod
    @asynccontextmanager
    async def from_conn_string(  # type: ignore[override]
        cls,
        redis_url: str,
        *,
        serde: SerializerProtocol | None = None,
        key_prefix: str | None = None,
        ttl: TTLConfig | None = None,
    ) -> AsyncIterator[AsyncRedisSaver]:
        args, kwargs = _open_args(redis_url, key_prefix, ttl, effective_serde(cls, serde))
        handle = await _core.open_redis(True, *args, **kwargs)
        saver = cls(redis_url, serde=serde, key_prefix=key_prefix, ttl=ttl, _core_handle=handle)
        try:
            yield saver
        finally:
            await saver.aclose()

    async def setup(self) -> None:  # type: ignore[override]
        """Nothing to do."""
        await self._core.setup(True)


__all__ = ["AsyncRedisSaver", "RedisSaver", "TTLConfig"]
