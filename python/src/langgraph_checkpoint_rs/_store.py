"""The part every store shares: LangGraph's ``BaseStore`` over a Rust core.

``batch`` and ``abatch`` hand LangGraph's op objects (``GetOp``, ``PutOp``,
``SearchOp``, ``ListNamespacesOp``) to the core as they are; it reads them,
runs them as one batch (reads see the store as it was before the batch's
puts; several puts of one item: the last wins; a refused op stores
nothing) and answers with LangGraph's ``Item`` / ``SearchItem`` and
namespace tuples. The embedding function of ``index`` is called by the core,
in batches: on the calling thread for a sync call, on the event loop
(awaited) for an async one. Every item's TTL is honoured on read: an
expired item is never returned, swept or not.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Iterable
from typing import Any

from langgraph.store.base import BaseStore, IndexConfig, Op, Result, TTLConfig, ensure_embeddings

logger = logging.getLogger(__name__)


def index_args(index: IndexConfig | None) -> tuple[Any, tuple[int, Any, list[str]] | None]:
    """The embeddings and the core's ``(dims, embeddings, fields)`` of
    LangGraph's ``index`` config. ``fields`` (LangGraph's key) or
    ``text_fields`` (the key LangGraph's ``SqliteStore`` reads) name the
    embedded paths; the whole document (``$``) without either."""
    if not index:
        return None, None
    if "dims" not in index:
        raise ValueError("an index needs 'dims' (the length of the embedding vectors)")
    embeddings = ensure_embeddings(index.get("embed"))
    fields = index.get("fields") or index.get("text_fields") or ["$"]
    if isinstance(fields, str):
        fields = [fields]
    if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
        raise ValueError(f"index fields must be a list of paths, got {fields!r}")
    return embeddings, (int(index["dims"]), embeddings, list(fields))


def ttl_args(ttl: TTLConfig | None) -> tuple[bool | None, float | None, int | None] | None:
    """The core's ``(refresh_on_read, default_ttl, sweep_interval_minutes)``.
    ``omit_expired`` needs no setting: expired items are never read."""
    if ttl is None:
        return None
    default = ttl.get("default_ttl")
    interval = ttl.get("sweep_interval_minutes")
    return (
        ttl.get("refresh_on_read"),
        None if default is None else float(default),
        None if interval is None else int(interval),
    )


class RustStore(BaseStore):
    """LangGraph's ``BaseStore`` over a store core, sync and async, with
    TTL (``supports_ttl``) and, given ``index``, vector search.

    Use a backend's class (``SqliteStore``, ``PostgresStore``); this one only
    holds what they share.
    """

    supports_ttl = True
    _core: Any

    def __init__(self, *, index: IndexConfig | None = None, ttl: TTLConfig | None = None) -> None:
        self.embeddings, self._index = index_args(index)
        self.index_config = index
        self.ttl_config = ttl
        self._sweeper: threading.Thread | None = None
        self._sweeper_stop = threading.Event()
        self._async_sweeper: asyncio.Task[None] | None = None

    def _open_args(self) -> dict[str, Any]:
        return {"index": self._index, "ttl": ttl_args(self.ttl_config)}

    # --- LangGraph's BaseStore --------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return self._core.batch(False, list(ops))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await self._core.batch(True, list(ops))

    def setup(self) -> None:
        """Creates or migrates the tables, as LangGraph's ``setup()`` (a
        SQLite store's are ready when it opens)."""
        self._core.setup(False)

    # --- TTL ---------------------------------------------------------------------

    def sweep_ttl(self) -> int:
        """Deletes the expired items (with their vectors); how many."""
        return self._core.sweep_ttl(False)

    def _interval(self, minutes: float | None) -> float:
        config = self.ttl_config or {}
        return float(minutes or config.get("sweep_interval_minutes") or 5) * 60

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> concurrent.futures.Future[None]:
        """Sweeps every ``sweep_interval_minutes`` (the TTL config's, 5 by
        default) on a daemon thread until ``stop_ttl_sweeper``; the future
        ends with it (cancelling it stops the sweeper). Nothing to do
        without a TTL config."""
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        if not self.ttl_config:
            future.set_result(None)
            return future
        future.add_done_callback(lambda f: self._sweeper_stop.set() if f.cancelled() else None)
        if self._sweeper is not None and self._sweeper.is_alive():
            return future
        self._sweeper_stop.clear()
        interval = self._interval(sweep_interval_minutes)

        def sweep_loop() -> None:
            while not self._sweeper_stop.wait(interval):
                try:
                    swept = self.sweep_ttl()
                    if swept:
                        logger.info("store TTL sweeper deleted %d expired items", swept)
                except Exception:  # noqa: BLE001 - the next round tries again
                    logger.exception("store TTL sweep failed")
            if not future.done():
                future.set_result(None)

        self._sweeper = threading.Thread(target=sweep_loop, daemon=True, name="store-ttl-sweeper")
        self._sweeper.start()
        return future

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stops the sweeper thread: whether it stopped within ``timeout``
        seconds (or was not running)."""
        return self._stop_sweeper_thread(timeout)

    def _stop_sweeper_thread(self, timeout: float | None) -> bool:
        thread = self._sweeper
        if thread is None or not thread.is_alive():
            return True
        self._sweeper_stop.set()
        thread.join(timeout)
        if thread.is_alive():
            return False
        self._sweeper = None
        return True

    # --- lifecycle ------------------------------------------------------------------

    def close(self) -> None:
        """Stops the sweeper, finishes queued writes and closes the store."""
        self._stop_sweeper_thread(None)
        self._core.close(False)

    async def aclose(self) -> None:
        """Async ``close``."""
        await self.astop_ttl_sweeper()
        self._stop_sweeper_thread(None)
        await self._core.close(True)

    # --- async TTL (the async classes' start_ttl_sweeper / stop_ttl_sweeper) --

    async def asweep_ttl(self) -> int:
        """Async ``sweep_ttl``."""
        return await self._core.sweep_ttl(True)

    async def astart_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> asyncio.Task[None]:
        """Sweeps every ``sweep_interval_minutes`` in a task of the running
        loop until ``astop_ttl_sweeper`` (or the task is cancelled)."""
        if self._async_sweeper is not None and not self._async_sweeper.done():
            return self._async_sweeper
        interval = self._interval(sweep_interval_minutes)

        async def sweep_loop() -> None:
            if not self.ttl_config:
                return
            while True:
                await asyncio.sleep(interval)
                try:
                    swept = await self.asweep_ttl()
                    if swept:
                        logger.info("store TTL sweeper deleted %d expired items", swept)
                except Exception:  # noqa: BLE001 - the next round tries again
                    logger.exception("store TTL sweep failed")

        self._async_sweeper = asyncio.get_running_loop().create_task(sweep_loop())
        return self._async_sweeper

    async def astop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Cancels the sweeper task: whether it ended within ``timeout``."""
        task = self._async_sweeper
        if task is None or task.done():
            return True
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if not done:
            return False
        self._async_sweeper = None
        return True


class AsyncStoreMethods:
    """The async classes' ``setup``, ``sweep_ttl``, ``start_ttl_sweeper``,
    ``stop_ttl_sweeper`` (coroutines, as LangGraph's async stores have
    them) and ``async with``; mixed in before the sync class."""

    async def setup(self) -> None:  # type: ignore[override]
        """Async ``setup``."""
        await self._core.setup(True)  # type: ignore[attr-defined]

    async def sweep_ttl(self) -> int:  # type: ignore[override]
        """Deletes the expired items; how many."""
        return await self.asweep_ttl()  # type: ignore[attr-defined]

    async def start_ttl_sweeper(  # type: ignore[override]
        self, sweep_interval_minutes: float | None = None
    ) -> asyncio.Task[None]:
        """Sweeps periodically in a task of the running loop."""
        return await self.astart_ttl_sweeper(sweep_interval_minutes)  # type: ignore[attr-defined]

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:  # type: ignore[override]
        """Stops the sweeper task."""
        return await self.astop_ttl_sweeper(timeout)  # type: ignore[attr-defined]

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()  # type: ignore[attr-defined]
