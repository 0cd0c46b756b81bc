"""Fencing from Python: savers opened with ``fence=Fence(...)`` write a
thread only while their writer holds its lease.

Two savers with different writers share one store (one SQLite file, one
Postgres database, one Redis key prefix), as two workers would: the one
that does not hold the thread has every write refused with ``FencedError``
and nothing of it stored; a real ``StateGraph`` compiled on each shows the
loser's ``invoke`` raising while the winner's lineage stays whole; a
released or expired lease lets the other writer take the thread over.
"""

from __future__ import annotations

import asyncio
import contextlib
import operator
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict
from uuid import uuid4

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph

from langgraph_checkpoint_rs import (
    AsyncPostgresSaver,
    AsyncRedisSaver,
    AsyncSqliteSaver,
    CheckpointerError,
    Fence,
    FencedError,
    InvalidInputError,
    Lease,
    PostgresSaver,
    RedisSaver,
    SqliteSaver,
)

from .conftest import REDIS_URL
from .ownership_spec import ALL_WRITE_OWNERSHIP_TESTS, run_write_ownership_tests

OpenFn = Callable[..., Any]


@pytest.fixture
def store(backend: str, tmp_path: Path, pg_databases, redis_prefixes) -> Iterator[OpenFn]:
    """``store(fence=None)``: a saver on the test's one store (a SQLite
    file, a Postgres database, a Redis prefix), each call a saver (and a
    connection pool) of its own, as a separate worker has."""
    opened: list[Any] = []
    if backend == "sqlite":
        where = str(tmp_path / "fenced.sqlite")
    elif backend == "postgres":
        where = pg_databases.new()
        with PostgresSaver.from_conn_string(where) as s:
            s.setup()
    else:
        where = redis_prefixes.new()

    def make(fence: Fence | None = None) -> Any:
        if backend == "sqlite":
            saver = SqliteSaver(where, fence=fence)
        elif backend == "postgres":
            saver = PostgresSaver(where, fence=fence)
        else:
            saver = RedisSaver(REDIS_URL, key_prefix=where, fence=fence)
        opened.append(saver)
        return saver

    make.where = where  # type: ignore[attr-defined]
    yield make
    for saver in opened:
        try:
            saver.close()
        except Exception:  # noqa: BLE001 - a test may have closed it already
            pass


def _cfg(thread_id: str, checkpoint_id: str | None = None) -> dict:
    configurable = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def _put(saver: Any, thread_id: str, parent: str | None = None, step: int = 0) -> str:
    checkpoint = empty_checkpoint()
    saver.put(_cfg(thread_id, parent), checkpoint, {"source": "loop", "step": step}, {})
    return checkpoint["id"]


def _ids(saver: Any, thread_id: str) -> list[str]:
    return [t.checkpoint["id"] for t in saver.list(_cfg(thread_id))]


def test_a_second_writer_is_refused_and_nothing_of_it_is_stored(store: OpenFn) -> None:
    a = store(Fence(writer="worker-a", lease_seconds=30))
    b = store(Fence(writer="worker-b", lease_seconds=30))
    plain = store()
    lease = a.acquire("t")
    assert isinstance(lease, Lease)
    assert (lease.thread_id, lease.writer, lease.lease_seconds) == ("t", "worker-a", 30.0)
    assert lease.epoch >= 1
    first = _put(a, "t")
    a.put_writes(_cfg("t", first), [("ch", "from a")], "task-a")

    with pytest.raises(FencedError) as refused:
        _put(b, "t", first, step=1)
    e = refused.value
    assert isinstance(e, CheckpointerError)
    assert (e.thread_id, e.writer, e.epoch) == ("t", "worker-b", 0)
    assert (e.kind, e.retryable) == ("fenced", False)
    assert "worker-b" in str(e)
    with pytest.raises(FencedError):
        b.put_writes(_cfg("t", first), [("ch", "from b")], "task-b")
    with pytest.raises(FencedError):
        b.delete_thread("t")
    with pytest.raises(FencedError):
        b.acquire("t")

    # only a's checkpoint and write, read by a saver that does not fence
    assert _ids(plain, "t") == [first]
    tup = plain.get_tuple(_cfg("t"))
    assert tup is not None and tup.pending_writes == [("task-a", "ch", "from a")]
    # the owner goes on writing, forks included
    second = _put(a, "t", first, step=1)
    fork = _put(a, "t", first, step=1)
    assert set(_ids(plain, "t")) == {first, second, fork}


def test_release_then_takeover_and_the_old_owner_is_refused(store: OpenFn) -> None:
    a = store(Fence(writer="worker-a"))
    b = store(Fence(writer="worker-b"))
    with a.owning("t") as lease_a:
        assert lease_a.writer == "worker-a"
        first = _put(a, "t")
        assert a.renew("t").epoch == lease_a.epoch
    # released on exit: b takes the thread at once, with a greater epoch
    with b.owning("t") as lease_b:
        assert lease_b.epoch > lease_a.epoch
        second = _put(b, "t", first, step=1)
        with pytest.raises(FencedError) as refused:
            _put(a, "t", first, step=1)
        assert (refused.value.writer, refused.value.epoch) == ("worker-a", lease_a.epoch)
        with pytest.raises(FencedError):
            a.renew("t")
        assert a.release("t") is False
    assert b.release("t") is False  # released on exit already
    assert set(_ids(store(), "t")) == {first, second}
    # a takes it back only by acquiring
    assert a.acquire("t").epoch > lease_b.epoch
    _put(a, "t", second, step=2)


def test_an_expired_lease_is_taken_over(store: OpenFn) -> None:
    # long enough for b's first try to land within it on a loaded machine
    a = store(Fence(writer="worker-a", lease_seconds=1.5))
    b = store(Fence(writer="worker-b", lease_seconds=30))
    first = _put(a, "t")  # the first write takes the thread
    with pytest.raises(FencedError):
        b.acquire("t")
    time.sleep(2.0)
    taken = b.acquire("t")
    with pytest.raises(FencedError):
        _put(a, "t", first, step=1)
    second = _put(b, "t", first, step=1)
    assert _ids(store(), "t") == [second, first]
    assert taken.writer == "worker-b"


def test_fencing_arguments_and_unfenced_operations(store: OpenFn) -> None:
    plain = store()
    assert plain.fenced is False
    with pytest.raises(InvalidInputError, match="not fenced"):
        plain.acquire("t")
    for bad in ("", None):
        with pytest.raises(ValueError):
            Fence(writer=bad)  # type: ignore[arg-type]
    for bad_lease in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            Fence(writer="w", lease_seconds=bad_lease)
    with pytest.raises(InvalidInputError):
        store(Fence(writer="w", lease_seconds=2 * 24 * 3600))  # over a day
    fenced = store(Fence(writer="w"))
    assert fenced.fenced is True
    # the whole-thread operations are fenced, not refused: on threads no one
    # else holds they run
    fenced.prune(["t"])
    fenced.copy_thread("t", "u")


def test_maintenance_of_a_thread_another_writer_holds_is_refused(store: OpenFn) -> None:
    a = store(Fence(writer="owner", lease_seconds=30))
    b = store(Fence(writer="other", lease_seconds=30))
    plain = store()
    first = _put(a, "m")
    a.put_writes(_cfg("m", first), [("ch", "v")], "task")
    before = [(t.checkpoint["id"], t.pending_writes) for t in plain.list(_cfg("m"))]
    _put(plain, "src")
    for op in (lambda: b.prune(["m"]), lambda: b.prune(["m"], strategy="delete"), lambda: b.copy_thread("src", "m")):
        with pytest.raises(FencedError):
            op()
        assert [(t.checkpoint["id"], t.pending_writes) for t in plain.list(_cfg("m"))] == before
    a.prune(["m"], strategy="delete")
    assert _ids(plain, "m") == []


@pytest.mark.asyncio
async def test_every_opener_takes_a_fence(backend: str, store: OpenFn) -> None:
    store()
    where, fence = store.where, Fence(writer="w", lease_seconds=5)  # type: ignore[attr-defined]
    if backend == "sqlite":
        sync_cm, async_cm = SqliteSaver.from_conn_string, AsyncSqliteSaver.from_conn_string
        args: tuple = (where,)
        kwargs: dict = {"fence": fence}
    elif backend == "postgres":
        sync_cm, async_cm = PostgresSaver.from_conn_string, AsyncPostgresSaver.from_conn_string
        args, kwargs = (where,), {"fence": fence}
    else:
        sync_cm, async_cm = RedisSaver.from_conn_string, AsyncRedisSaver.from_conn_string
        args, kwargs = (REDIS_URL,), {"key_prefix": where, "fence": fence}
    with sync_cm(*args, **kwargs) as saver:
        assert saver.fenced is True
        first = saver.acquire("o")
        assert (first.writer, first.lease_seconds) == ("w", 5.0)
    async with async_cm(*args, **kwargs) as saver:
        assert saver.fenced is True
        # the same writer takes its thread again, with a new epoch
        assert (await saver.aacquire("o")).epoch > first.epoch
        assert await saver.arelease("o") is True


class State(TypedDict):
    items: Annotated[list[str], operator.add]


def _graph(saver: Any) -> Any:
    def first(state: State) -> dict:
        return {"items": ["first"]}

    def second(state: State) -> dict:
        return {"items": ["second"]}

    builder = StateGraph(State)
    builder.add_node("first", first)
    builder.add_node("second", second)
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    builder.add_edge("second", END)
    return builder.compile(checkpointer=saver)


def _lineage(saver: Any, thread_id: str) -> list[Any]:
    """The thread's checkpoints, newest first, checked to form one chain:
    each one's parent is the next (no fork, nothing off the tip's lineage)."""
    history = list(saver.list(_cfg(thread_id)))
    for child, parent in zip(history, history[1:]):
        assert child.parent_config is not None
        assert child.parent_config["configurable"]["checkpoint_id"] == parent.checkpoint["id"]
    assert history[-1].parent_config is None
    return history


def test_the_losers_invoke_raises_and_the_winners_lineage_is_intact(store: OpenFn) -> None:
    winner = store(Fence(writer="worker-a"))
    loser = store(Fence(writer="worker-b"))
    plain = store()
    cfg = _cfg("g")
    with winner.owning("g"):
        out = _graph(winner).invoke({"items": ["a"]}, cfg)
        assert out == {"items": ["a", "first", "second"]}
        before = _lineage(plain, "g")
        with pytest.raises(FencedError) as refused:
            _graph(loser).invoke({"items": ["b"]}, cfg)
        assert (refused.value.thread_id, refused.value.writer) == ("g", "worker-b")
        after = _lineage(plain, "g")
        assert [t.checkpoint["id"] for t in after] == [t.checkpoint["id"] for t in before]
        assert after[0].pending_writes == before[0].pending_writes
        assert _graph(plain).get_state(cfg).values == {"items": ["a", "first", "second"]}
        # the winner goes on from its own tip
        _graph(winner).invoke({"items": ["a2"]}, cfg)
    # released: the other worker takes over and continues the winner's lineage
    with loser.owning("g"):
        out = _graph(loser).invoke({"items": ["b"]}, cfg)
    assert out == {"items": ["a", "first", "second", "a2", "first", "second", "b", "first", "second"]}
    assert len(_lineage(plain, "g")) == 12  # 4 checkpoints per run, one chain


@pytest.mark.asyncio
async def test_async_owning_and_a_refused_ainvoke(store: OpenFn) -> None:
    winner = store(Fence(writer="worker-a"))
    loser = store(Fence(writer="worker-b"))
    cfg = _cfg("ga")
    async with winner.owning("ga") as lease:
        assert lease.writer == "worker-a"
        assert (await winner.arenew("ga")).epoch == lease.epoch
        await _graph(winner).ainvoke({"items": ["a"]}, cfg)
        with pytest.raises(FencedError):
            await _graph(loser).ainvoke({"items": ["b"]}, cfg)
        with pytest.raises(FencedError):
            await loser.aacquire("ga")
    assert await winner.arelease("ga") is False
    taken = await loser.aacquire("ga")
    assert taken.epoch > lease.epoch
    out = await _graph(loser).ainvoke({"items": ["b"]}, cfg)
    assert out == {"items": ["a", "first", "second", "b", "first", "second"]}
    assert await loser.arelease("ga") is True
    await asyncio.sleep(0)
    assert len(_lineage(store(), "ga")) == 8


def test_pythons_own_saver_reads_a_fenced_thread(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver as PySqliteSaver

    path = str(tmp_path / "shared.sqlite")
    cfg = _cfg("p")
    with SqliteSaver.from_conn_string(path, fence=Fence(writer="w")) as ours:
        with ours.owning("p"):
            _graph(ours).invoke({"items": ["x"]}, cfg)
    with PySqliteSaver.from_conn_string(path) as theirs:
        assert _graph(theirs).get_state(cfg).values == {"items": ["x", "first", "second"]}
        _graph(theirs).invoke({"items": ["y"]}, cfg)
        assert len(list(theirs.list(cfg))) == 8


@pytest.mark.parametrize("owning", [True, False], ids=["owning", "implicit"])
def test_two_racing_workers_leave_one_lineage(store: OpenFn, owning: bool) -> None:
    """Two threads, each a worker with a saver of its own, invoke one thread
    at once, rounds times each: every run either completes or raises
    ``FencedError``, and the thread is one chain holding exactly the
    completed runs (with ``owning`` the lease changes hands between runs;
    implicitly, the first writer keeps the thread)."""
    import threading

    rounds = 8
    savers = [store(Fence(writer=f"worker-{i}", lease_seconds=30)) for i in range(2)]
    graphs = [_graph(s) for s in savers]
    done = [0, 0]
    refused = [0, 0]
    other: list[BaseException] = []
    start = threading.Barrier(2)
    cfg = _cfg("race")

    def worker(i: int) -> None:
        start.wait()
        for r in range(rounds):
            try:
                if owning:
                    with savers[i].owning("race"):
                        graphs[i].invoke({"items": [f"w{i}-{r}"]}, cfg)
                else:
                    graphs[i].invoke({"items": [f"w{i}-{r}"]}, cfg)
                done[i] += 1
            except FencedError as e:
                assert e.thread_id == "race" and e.writer == f"worker-{i}"
                refused[i] += 1
            except BaseException as e:  # noqa: BLE001 - reported below
                other.append(e)
            # out of the lease: the other worker may take the thread now
            time.sleep(0.01 * (i + 1))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not other, other
    assert done[0] + refused[0] == rounds and done[1] + refused[1] == rounds
    assert sum(done) >= 1
    if not owning:
        # the first writer took the thread and kept it
        assert sorted(done) == [0, rounds]
    plain = store()
    assert len(_lineage(plain, "race")) == 4 * sum(done)
    items = _graph(plain).get_state(cfg).values["items"]
    assert len(items) == 3 * sum(done)
    inputs = [x for x in items if x.startswith("w")]
    assert sorted(x[:2] for x in inputs) == sorted(["w0"] * done[0] + ["w1"] * done[1])


# --- write ownership, in the official conformance suite's style ------------


@pytest.mark.asyncio
async def test_our_fenced_savers_pass_write_ownership(store: OpenFn) -> None:
    async def writers() -> tuple[Any, Any]:
        return store(Fence(writer=f"a-{uuid4()}")), store(Fence(writer=f"b-{uuid4()}"))

    passed, failed, failures = await run_write_ownership_tests(writers)
    assert (passed, failed) == (len(ALL_WRITE_OWNERSHIP_TESTS), 0), failures


@pytest.mark.asyncio
async def test_our_unfenced_savers_fail_write_ownership(store: OpenFn) -> None:
    """Without ``fence`` the savers behave as LangGraph's: both writers pass."""

    async def writers() -> tuple[Any, Any]:
        return store(), store()

    passed, failed, failures = await run_write_ownership_tests(writers)
    assert (passed, failed) == (0, len(ALL_WRITE_OWNERSHIP_TESTS)), failures


@pytest.mark.asyncio
@pytest.mark.parametrize("which", ["sqlite", "postgres"])
async def test_langgraphs_own_savers_fail_write_ownership(which: str, tmp_path: Path, pg_databases) -> None:
    """LangGraph's own SQLite and Postgres savers accept the second writer
    and fork the thread: every write-ownership check fails on them."""
    async with contextlib.AsyncExitStack() as stack:
        if which == "sqlite":
            from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver as LgAsyncSqliteSaver

            path = str(tmp_path / "langgraph.sqlite")

            async def open_one() -> Any:
                return await stack.enter_async_context(LgAsyncSqliteSaver.from_conn_string(path))
        else:
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver as LgAsyncPostgresSaver

            url = pg_databases.new()

            async def open_one() -> Any:
                saver = await stack.enter_async_context(LgAsyncPostgresSaver.from_conn_string(url))
                await saver.setup()
                return saver

        async def writers() -> tuple[Any, Any]:
            return await open_one(), await open_one()

        passed, failed, failures = await run_write_ownership_tests(writers)
    assert (passed, failed) == (0, len(ALL_WRITE_OWNERSHIP_TESTS)), failures
    assert "the second writer's put was accepted" in failures[0]
    assert "writers without an error: ['a', 'b']" in failures[1]


# --- automatic renewal ------------------------------------------------------


def _wait_for(cond: Callable[[], bool]) -> None:
    """Polls `cond` until it holds (a minute at most: a hung renewal fails)."""
    for _ in range(600):
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError("condition never held")


def test_owning_with_renewal_keeps_the_thread_past_its_lease(store: OpenFn) -> None:
    a = store(Fence(writer="renewing", lease_seconds=1.5))
    b = store(Fence(writer="waiting", lease_seconds=30))
    own = a.owning("r", renew=True)
    with own as lease:
        assert lease.lease_seconds == 1.5
        # four renewals: more than the lease has passed since the acquire
        _wait_for(lambda: own.renewals >= 4)
        with pytest.raises(FencedError):
            b.acquire("r")
        _put(a, "r")
    assert own.lost is None
    # the renewal stopped and the lease was released: b takes the thread
    b.acquire("r")
    with pytest.raises(FencedError):
        _put(a, "r")


def test_a_renewal_that_finds_the_thread_taken_stops_and_reports_it(store: OpenFn) -> None:
    a = store(Fence(writer="renewing", lease_seconds=1.5))
    b = store(Fence(writer="taker", lease_seconds=30))
    own = a.owning("x", renew=True)
    with own:
        assert a.release("x") is True  # as if the lease had expired
        b.acquire("x")
        _wait_for(lambda: own.lost is not None)
        assert isinstance(own.lost, FencedError)
        with pytest.raises(FencedError):
            _put(a, "x")


@pytest.mark.asyncio
async def test_async_owning_with_renewal(store: OpenFn) -> None:
    a = store(Fence(writer="renewing", lease_seconds=1.5))
    b = store(Fence(writer="waiting", lease_seconds=30))
    ctx = a.owning("ar2", renew=True)
    async with ctx:
        for _ in range(600):
            if ctx.renewals >= 4:
                break
            await asyncio.sleep(0.1)
        assert ctx.renewals >= 4
        with pytest.raises(FencedError):
            await b.aacquire("ar2")
    assert ctx._task is None and ctx.lost is None
    await b.aacquire("ar2")
