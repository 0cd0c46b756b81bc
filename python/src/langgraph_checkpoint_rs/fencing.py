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
keep reading and resuming fenced threads. ``prune``, ``copy_thread`` (its
target) and ``delete_for_runs`` of a fenced saver are fenced too: they
change only threads its writer holds (``delete_for_runs`` raises
``FencedError``, removing nothing, when a run has checkpoints on a thread the
writer never took).

A graph run that outlives its lease (a node slower than ``lease_seconds``)
keeps the thread with ``with saver.owning(thread_id, renew=True):``: a
background renewal every third of the lease while the block runs, stopped on
exit. When the thread was lost anyway (the process stalled past the lease and
another writer took over), the run's next write raises ``FencedError`` from
``invoke``/``ainvoke``: nothing of that write is stored, the steps it stored
before stay (they are the old owner's, on the lineage the new owner
continues from), and the context's ``lost`` holds the renewal's error.
"""

from __future__ import annotations

import asyncio
import math
import threading
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from .errors import FencedError


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
    block raised. ``lease`` is the lease taken. With ``renew=True`` the lease
    is renewed in the background every third of the lease time while the
    block runs (a thread for ``with``, a task of the running loop for
    ``async with``), and the renewal stops on exit; ``lost`` is the error of
    a renewal that found the thread taken (then renewal stops, and the
    block's next write raises ``FencedError``)."""

    def __init__(self, saver: Any, thread_id: str, renew: bool = False) -> None:
        self._saver = saver
        self._thread_id = str(thread_id)
        self._renew = bool(renew)
        self.lease: Lease | None = None
        self.lost: BaseException | None = None
        self.renewals = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task[None] | None = None

    def _period(self) -> float:
        assert self.lease is not None
        return self.lease.lease_seconds / 3.0

    def _renewed(self, error: Exception | None) -> bool:
        """Accounts for one renewal (``error`` is what it raised, if
        anything); ``False`` when renewal must stop: the thread was taken."""
        if error is None:
            self.renewals += 1
            return True
        if isinstance(error, FencedError):
            self.lost = error
            return False
        return True  # any other failure is retried next period

    def _renew_loop(self) -> None:
        while not self._stop.wait(self._period()):
            error: Exception | None = None
            try:
                self._saver.renew(self._thread_id)
            except Exception as e:  # noqa: BLE001 - judged by _renewed
                error = e
            if not self._renewed(error):
                return

    async def _arenew_loop(self) -> None:
        while True:
            await asyncio.sleep(self._period())
            error: Exception | None = None
            try:
                await self._saver.arenew(self._thread_id)
            except Exception as e:  # noqa: BLE001 - judged by _renewed
                error = e
            if not self._renewed(error):
                return

    def __enter__(self) -> Lease:
        self.lease = self._saver.acquire(self._thread_id)
        if self._renew:
            self._thread = threading.Thread(target=self._renew_loop, name="lease-renewal", daemon=True)
            self._thread.start()
        return self.lease

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        self._saver.release(self._thread_id)

    async def __aenter__(self) -> Lease:
        self.lease = await self._saver.aacquire(self._thread_id)
        if self._renew:
            self._task = asyncio.get_running_loop().create_task(self._arenew_loop())
        return self.lease

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
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

    def owning(self, thread_id: str, renew: bool = False) -> Ownership:
        """``with saver.owning(thread_id):`` (or ``async with``): the thread
        acquired for the block and released after it; ``renew=True`` renews
        the lease in the background every third of the lease time until the
        block ends (see :class:`Ownership`)."""
        return Ownership(self, thread_id, renew)

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
