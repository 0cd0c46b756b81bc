"""How the async methods behave on an event loop: the loop keeps running
while the core works, no thread is made per call, a cancelled call leaves
the saver usable, and sync calls release the GIL while they wait."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from langgraph.checkpoint.base.id import uuid6

from langgraph_checkpoint_rs import AsyncSqliteSaver, SqliteSaver

from .test_saver import checkpoint, config


def os_threads() -> int:
    """Threads of this process, Rust's included (threading only counts Python's)."""
    return len(os.listdir("/proc/self/task"))


def put_args(thread: str, step: int, size: int = 2_000):
    cp = checkpoint({"msg": "x" * size, "n": step}, {"msg": f"{step + 1}", "n": f"{step + 1}"})
    cp["id"] = str(uuid6(clock_seq=step))
    return config(thread), cp, {"source": "loop", "step": step}, {"msg": f"{step + 1}"}


async def test_the_loop_runs_while_the_core_works(tmp_path: Path) -> None:
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            await asyncio.sleep(0)
            ticks += 1

    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "loop.sqlite")) as saver:

        async def writer(task: int) -> None:
            for step in range(40):
                await saver.aput(*put_args(f"t{task}", step, 50_000))

        tick = asyncio.create_task(ticker())
        started = time.perf_counter()
        await asyncio.gather(*(writer(i) for i in range(8)))
        elapsed = time.perf_counter() - started
        done.set()
        await tick
        stored = [t async for t in saver.alist(None)]
    assert len(stored) == 320
    # 320 puts of 50 KB with a full fsync each take tens of milliseconds at
    # least; had they blocked the loop, the ticker would not have run between
    # them (it yields on every iteration)
    assert ticks > 320, (ticks, elapsed)


async def test_no_thread_per_call(tmp_path: Path) -> None:
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "threads.sqlite")) as saver:
        for step in range(50):  # warm up: runtime workers, readers, completion threads
            await saver.aput(*put_args("w", step))
            await saver.aget_tuple(config("w"))
        before = os_threads()
        for step in range(50, 1_050):
            await saver.aput(*put_args("w", step, 100))
            await saver.aget_tuple(config("w"))
        sequential = os_threads()

        async def reader() -> None:
            for _ in range(100):
                await saver.aget_tuple(config("w"))

        await asyncio.gather(*(reader() for _ in range(16)))
        concurrent = os_threads()
    # 2 000 sequential calls add no thread; 16 concurrent tasks at most a
    # bounded few (tokio's blocking pool serves completions and readers)
    assert sequential <= before + 2, (before, sequential)
    assert concurrent <= before + 20, (before, concurrent)


async def test_a_cancelled_call_leaves_the_saver_usable(tmp_path: Path) -> None:
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "cancel.sqlite")) as saver:
        cancelled = 0
        for step in range(20):
            # a put waits on the writer thread: cancel it while it does
            task = asyncio.ensure_future(saver.aput(*put_args("c", step, 100_000)))
            await asyncio.sleep(0)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                cancelled += 1
        assert cancelled > 0
        # a listing stopped early, and a call timed out before it ran
        listing = saver.alist(config("c"))
        await listing.aclose()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(saver.aget_tuple(config("c")), timeout=0)
        await saver.aput(*put_args("c", 20))
        assert (await saver.aget_tuple(config("c"))).metadata["step"] == 20
        # a cancelled put is whole or absent (one the writer had already
        # taken still commits: cancelling stops the waiting, not the write)
        stored = [t async for t in saver.alist(config("c"))]
        assert 1 <= len(stored) <= 21
        for t in stored:
            assert t.checkpoint["channel_values"]["msg"] in ("x" * 100_000, "x" * 2_000)


def test_sync_calls_release_the_gil(tmp_path: Path) -> None:
    """A sync put waiting on a SQLite lock held by Python's own ``sqlite3``
    in this process waits for it (the extension links the same libsqlite3
    as Python, so the two see each other's locks) and lets other Python
    threads run meanwhile."""
    path = tmp_path / "gil.sqlite"
    with SqliteSaver.from_conn_string(str(path)) as saver:
        saver.put(*put_args("g", 0))
        blocker = sqlite3.connect(path, timeout=0, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        counted = 0
        finished = threading.Event()

        def put_behind_the_lock() -> None:
            saver.put(*put_args("g", 1))
            finished.set()

        writer = threading.Thread(target=put_behind_the_lock)
        writer.start()
        time.sleep(0.05)  # the put is now waiting on the lock
        started = time.perf_counter()
        while time.perf_counter() - started < 0.3:
            counted += 1
        assert not finished.is_set(), "the put did not wait for the lock"
        blocker.execute("COMMIT")
        blocker.close()
        writer.join(timeout=30)
        assert finished.is_set()
        assert saver.get_tuple(config("g")).metadata["step"] == 1
    # 0.3 s of a pure-Python loop: hundreds of thousands of iterations when
    # the GIL is free; a handful of 5 ms switch intervals if it were held
    assert counted > 50_000, counted


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_gets_a_clear_error_not_a_hang(tmp_path: Path) -> None:
    with SqliteSaver.from_conn_string(str(tmp_path / "fork.sqlite")) as saver:
        saver.put(*put_args("f", 0))
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report what a call does, and leave at once
            os.close(read)
            try:
                saver.get_tuple(config("f"))
                outcome = b"no error"
            except Exception as e:  # noqa: BLE001 - reported to the parent
                outcome = f"{type(e).__name__}: {e}".encode()
            os.write(write, outcome)
            os._exit(0)
        os.close(write)
        _, status = os.waitpid(pid, 0)
        with os.fdopen(read, "rb") as f:
            outcome = f.read().decode()
        assert os.waitstatus_to_exitcode(status) == 0
        assert outcome.startswith("InvalidInputError") and "forked" in outcome, outcome
        # the parent is unaffected
        assert saver.get_tuple(config("f")).metadata["step"] == 0
