"""Redis savers on plain Redis, Valkey or Redis Cluster (core commands and
Lua only, no modules), with optional TTL: the layout of the crate's
``RedisSaver``, so Rust and Python services share one store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypedDict
from urllib.parse import quote

from langgraph.checkpoint.serde.base import SerializerProtocol

from . import _core
from ._base import RustCheckpointSaver, effective_serde, native_serde_args
from .fencing import Fence, fence_args
from .retention import Retention


class TTLConfig(TypedDict, total=False):
    """LangGraph's TTL settings: ``default_ttl`` in minutes, and whether
    reads renew it (``refresh_on_read``)."""

    default_ttl: float
    refresh_on_read: bool


def _with_prefix(url: str, key_prefix: str | None) -> str:
    """The URL with ``key_prefix`` in its query (``prefix=``, the one way a
    store URL gives it; for a cluster list, on its last node)."""
    if key_prefix is None:
        return url
    last_node = url[max(url.rfind(",redis://"), url.rfind(",rediss://")) + 1 :]
    return f"{url}{'&' if '?' in last_node else '?'}prefix={quote(key_prefix, safe='')}"


def _open(
    aio: bool,
    url: str,
    key_prefix: str | None,
    ttl: TTLConfig | None,
    serde: SerializerProtocol,
    fence: Fence | None = None,
) -> Any:
    if not isinstance(url, str):
        raise TypeError(f"RedisSaver takes a redis:// or rediss:// URL, not {type(url).__name__}")
    minutes = ttl.get("default_ttl") if ttl else None
    return _core.open(
        aio,
        _with_prefix(url, key_prefix),
        "redis",
        ttl_minutes=None if minutes is None else float(minutes),
        refresh_on_read=bool(ttl.get("refresh_on_read", False)) if ttl else False,
        **native_serde_args(serde),
        **fence_args(fence),
    )


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
        fence: Fence | None = None,
        retention: Retention | None = None,
        _core_handle: Any = None,
    ) -> None:
        super().__init__(serde=serde)
        self._core = _core_handle or _open(False, redis_url, key_prefix, ttl, self.serde, fence)
        self._start_retention(retention)

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        redis_url: str,
        *,
        serde: SerializerProtocol | None = None,
        key_prefix: str | None = None,
        ttl: TTLConfig | None = None,
        fence: Fence | None = None,
        retention: Retention | None = None,
    ) -> Iterator[RedisSaver]:
        saver = cls(redis_url, serde=serde, key_prefix=key_prefix, ttl=ttl, fence=fence, retention=retention)
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
        fence: Fence | None = None,
        retention: Retention | None = None,
    ) -> AsyncIterator[AsyncRedisSaver]:
        handle = await _open(True, redis_url, key_prefix, ttl, effective_serde(cls, serde), fence)
        saver = cls(redis_url, serde=serde, key_prefix=key_prefix, ttl=ttl, _core_handle=handle, retention=retention)
        try:
            yield saver
        finally:
            await saver.aclose()

    async def setup(self) -> None:  # type: ignore[override]
        """Nothing to do."""
        await self._core.setup(True)


__all__ = ["AsyncRedisSaver", "RedisSaver", "TTLConfig"]
