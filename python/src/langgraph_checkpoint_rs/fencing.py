"""Fencing: one writer per thread.

LangGraph's savers let any number of workers write one thread: two workers
continuing the same thread both succeed and its history forks. A saver
opened with ``fence=Fence(writer=..., lease_seconds=...)`` refuses that: it
writes a thread only while its writer holds the thread's *lease*, checked by
the store inside each write's own transaction or script. A write of a thread
another writer holds raises :class:`~langgraph_checkpoint_rs.errors.FencedError`
and stores nothing.

- A writer takes a thread with ``acquire`` (or ``with saver.owning(thread_id)``),
  or implicitly with its first write of a thread no one holds. Each
  acquisition gets a new *epoch*, greater than every earlier one of the thread.
- Each write that passes extends the lease by ``lease_seconds``; ``renew``
  extends it without writing (for a node that runs longer than the lease).
- A lease expires ``lease_seconds`` after its last write or renewal, on the
  store's clock; then another writer may acquire the thread, and the old
  writer's writes are refused from then on. ``release`` gives it up at once.
- A writer that lost or released a thread gets it back only by ``acquire``.

Savers without ``fence`` behave exactly as LangGraph's; Python's own savers
keep reading and resuming fenced threads. A fenced saver refuses
``delete_for_runs``, ``copy_thread`` and ``prune`` (``UnsupportedError``):
they write many threads and are not fenced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import TracebackType
from typing import Any


@dataclass(frozen=True)
class Fence:
    """A writer's identity and lease time, given to a saver as ``fence=``.

    Give each worker (each process) its own ``writer``.
    """

    writer: str
    lease_seconds: float = 30.0

    def __post_init__(self) -> None:
        if not isinstance(self.writer, str) or not self.writer:
            raise ValueError("Fence(writer=...) needs a non-empty string")
        seconds = self.lease_seconds
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise ValueError(f"lease_seconds must be a number, got {type(seconds).__name__}")
        if not (math.isfinite(seconds) and seconds > 0):
            raise ValueError(f"lease_seconds must be a positive number, got {seconds}")


def fence_args(fence: Fence | None) -> dict[str, Any]:
    """Keyword arguments of ``_core.open`` for ``fence``."""
    if fence is None:
        return {}
    if not isinstance(fence, Fence):
        raise TypeError(f"fence must be a langgraph_checkpoint_rs.Fence, not {type(fence).__name__}")
    return {"writer": fence.writer, "lease_seconds": float(fence.lease_seconds)}


@dataclass(frozen=True)
class Lease:
    """A lease a writer holds on a thread, as ``acquire`` and ``renew`` return it."""

    thread_id: str
    writer: str
    epoch: int
    lease_seconds: float


class Ownership:
    """``saver.owning(thread_id)``: acquires the thread's lease on entry
    (``with`` or ``async with``) and releases it on exit, even when the
    block raised. ``lease`` is the lease taken."""

    def __init__(self, saver: Any, thread_id: str) -> None:
        self._saver = saver
        self._thread_id = str(thread_id)
        self.lease: Lease | None = None

    def __enter__(self) -> Lease:
        self.lease = self._saver.acquire(self._thread_id)
        return self.lease

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._saver.release(self._thread_id)

    async def __aenter__(self) -> Lease:
        self.lease = await self._saver.aacquire(self._thread_id)
        return self.lease

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._saver.arelease(self._thread_id)


class FencingMethods:
    """The lease operations of a saver (``_core`` is its core); each raises
    ``InvalidInputError`` on a saver opened without ``fence``."""

    _core: Any

    @property
    def fenced(self) -> bool:
        """Whether the saver was opened with ``fence``."""
        return bool(self._core.fenced)

    def acquire(self, thread_id: str) -> Lease:
        """Takes the thread's lease for this saver's writer, with a new epoch:
        when no one holds it, its lease expired, or this writer holds it.
        Raises ``FencedError`` when another writer holds an unexpired lease."""
        return Lease(*self._core.acquire(False, str(thread_id)))

    def renew(self, thread_id: str) -> Lease:
        """Extends this writer's lease on the thread by the lease time.
        Raises ``FencedError`` when the writer does not hold it (never
        acquired, released, or taken over)."""
        return Lease(*self._core.renew(False, str(thread_id)))

    def release(self, thread_id: str) -> bool:
        """Gives the thread's lease up, so another writer can acquire it at
        once: ``True`` when this writer held it, ``False`` otherwise."""
        return bool(self._core.release(False, str(thread_id)))

    def owning(self, thread_id: str) -> Ownership:
        """``with saver.owning(thread_id):`` (or ``async with``): the thread
        acquired for the block and released after it."""
        return Ownership(self, thread_id)

    async def aacquire(self, thread_id: str) -> Lease:
        """Async ``acquire``."""
        return Lease(*await self._core.acquire(True, str(thread_id)))

    async def arenew(self, thread_id: str) -> Lease:
        """Async ``renew``."""
        return Lease(*await self._core.renew(True, str(thread_id)))

    async def arelease(self, thread_id: str) -> bool:
        """Async ``release``."""
        return bool(await self._core.release(True, str(thread_id)))


__all__ = ["Fence", "FencingMethods", "Lease", "Ownership", "fence_args"]
