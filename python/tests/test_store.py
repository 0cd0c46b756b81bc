"""The package's stores beyond the conformance set: LangGraph's exceptions
and messages, the caller's embedding function called from Rust (sync, and
async on the event loop), one SQLite file written by Python's
``SqliteStore`` and read by ours and the reverse (items, vectors, scores),
the TTL sweeper, and a LangGraph graph compiled with ``store=`` giving the
same outputs and stored items on ours and on LangGraph's ``SqliteStore``.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import GetOp, PutOp, SearchOp, _validate_namespace
from langgraph.store.base import InvalidNamespaceError as LangGraphInvalidNamespaceError
from langgraph.store.sqlite import SqliteStore as PySqliteStore
from langgraph.store.sqlite.aio import AsyncSqliteStore as PyAsyncSqliteStore
from typing_extensions import TypedDict

from langgraph_checkpoint_rs import InvalidNamespaceError, StoreInputError
from langgraph_checkpoint_rs.sqlite import AsyncSqliteStore, SqliteStore

from . import store_spec as spec
from .test_store_conformance import _python_sqlite_connect

DOCS = {
    ("docs", "a"): {"1": "rust tutorial for beginners", "2": "python guide"},
    ("docs", "b"): {"3": "go concurrency patterns", "4": "cooking pasta at home", "5": "rust ownership"},
}


def _langgraph_message(namespace: tuple) -> str:
    with pytest.raises(LangGraphInvalidNamespaceError) as e:
        _validate_namespace(namespace)
    return str(e.value)


# --- errors ---------------------------------------------------------------------


@pytest.mark.parametrize("namespace", [(), ("langgraph", "x"), ("a.b",), ("a", ""), ("a", 1), ("a", "b\x00")])
def test_invalid_namespace_is_langgraphs_error(tmp_path: Path, namespace: tuple) -> None:
    with SqliteStore.from_conn_string(str(tmp_path / "s.sqlite")) as store:
        with pytest.raises(InvalidNamespaceError) as e:
            store.batch([PutOp(("ok",), "k", {"v": 1}), PutOp(namespace, "k", {"v": 1})])
        assert isinstance(e.value, LangGraphInvalidNamespaceError)
        assert str(e.value) == _langgraph_message(namespace)
        assert store.get(("ok",), "k") is None


def test_filter_and_value_errors(tmp_path: Path) -> None:
    with SqliteStore.from_conn_string(str(tmp_path / "s.sqlite")) as store:
        with pytest.raises(ValueError, match=r"^Unsupported operator: \$regex$"):
            store.search(("a",), filter={"x": {"$regex": "y"}})
        with pytest.raises(TypeError):
            store.batch([PutOp(("a",), "k", 5)])
        with pytest.raises(StoreInputError, match="invalid ttl"):
            store.put(("a",), "k", {"v": 1}, ttl=float("nan"))
        with pytest.raises(TypeError, match="unknown store operation"):
            store.batch([("get", ("a",), "k")])
        assert store.search(()) == []


def test_embedding_errors_store_nothing(tmp_path: Path) -> None:
    class Boom(RuntimeError):
        pass

    def failing(texts: list[str]) -> list[list[float]]:
        raise Boom(f"no vectors for {len(texts)} texts")

    index = {"dims": spec.DIMS, "embed": failing, "fields": ["text"]}
    with SqliteStore.from_conn_string(str(tmp_path / "s.sqlite"), index=index) as store:
        with pytest.raises(Boom, match="no vectors for 1 texts"):
            store.put(("a",), "k", {"text": "hello"})
        assert store.get(("a",), "k") is None
    short = {"dims": spec.DIMS + 1, "embed": spec.embed, "fields": ["text"]}
    with SqliteStore.from_conn_string(str(tmp_path / "t.sqlite"), index=short) as store:
        with pytest.raises(StoreInputError, match="dimensions"):
            store.batch([PutOp(("a",), "ok", {"x": 1}, index=False), PutOp(("a",), "k", {"text": "hello"})])
        assert store.get(("a",), "ok") is None


# --- the embedding function, called from Rust -------------------------------------


def test_sync_embedding_is_called_in_batches(tmp_path: Path) -> None:
    calls: list[list[str]] = []

    def embed(texts: list[str]) -> list[list[float]]:
        calls.append(list(texts))
        return spec.embed(texts)

    index = {"dims": spec.DIMS, "embed": embed, "fields": ["text"]}
    with SqliteStore.from_conn_string(str(tmp_path / "s.sqlite"), index=index) as store:
        store.batch([PutOp(("d",), str(i), {"text": t}) for i, t in enumerate(["one", "two", "one"])])
        assert calls == [["one", "two"]]  # each distinct text once, in one call
        found = store.search(("d",), query="two")
        assert calls[-1] == ["two"]
        assert found[0].key == "1" and found[0].score == pytest.approx(1.0)


async def test_async_embedding_runs_on_the_event_loop(tmp_path: Path) -> None:
    loop = asyncio.get_running_loop()
    seen: list[tuple[bool, int]] = []

    async def embed(texts: list[str]) -> list[list[float]]:
        seen.append((asyncio.get_running_loop() is loop, len(texts)))
        await asyncio.sleep(0)
        return spec.embed(texts)

    index = {"dims": spec.DIMS, "embed": embed, "fields": ["text"]}
    async with AsyncSqliteStore.from_conn_string(str(tmp_path / "s.sqlite"), index=index) as store:
        await store.abatch([PutOp(("d",), k, {"text": t}) for k, t in DOCS[("docs", "b")].items()])
        found = await store.asearch(("d",), query="rust", limit=2)
        q = spec.hashed_ngrams("rust")
        docs = DOCS[("docs", "b")]
        assert [f.key for f in found] == sorted(docs, key=lambda k: -spec.cosine(q, spec.hashed_ngrams(docs[k])))[:2]
        assert seen == [(True, 3), (True, 1)]
        # the sync API of the same store, from a thread: no event loop there
        def sync_call():
            with pytest.raises(ValueError, match="async function"):
                store.put(("d",), "6", {"text": "more"})

        await asyncio.to_thread(sync_call)


async def test_async_store_with_sync_embedding(tmp_path: Path) -> None:
    threads: set[str] = set()

    def embed(texts: list[str]) -> list[list[float]]:
        threads.add(threading.current_thread().name)
        return spec.embed(texts)

    index = {"dims": spec.DIMS, "embed": embed, "fields": ["text"]}
    async with AsyncSqliteStore.from_conn_string(str(tmp_path / "s.sqlite"), index=index) as store:
        await store.aput(("d",), "k", {"text": "rust"})
        assert (await store.asearch(("d",), query="rust"))[0].key == "k"
    # LangChain runs a sync function of an async call in the loop's executor
    assert threading.main_thread().name not in threads and threads


# --- one file, both stores ----------------------------------------------------------


def _fill(store) -> None:
    for ns, docs in DOCS.items():
        for key, text in docs.items():
            store.put(ns, key, {"text": text, "n": int(key)})
    store.put(("docs", "a"), "plain", {"text": "rust rust", "n": 0}, index=False)


def _snapshot(store) -> tuple:
    items = sorted((i.namespace, i.key, i.value) for i in store.search((), limit=100))
    found = [(i.namespace, i.key, i.score) for i in store.search(("docs",), query="rust guide", limit=3)]
    return items, found, store.list_namespaces()


def test_python_store_file_read_by_ours_and_back(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.sqlite")
    conn = _python_sqlite_connect(path, True)
    theirs = PySqliteStore(conn, index=spec.INDEX, ttl={"refresh_on_read": True})
    theirs.setup()
    _fill(theirs)
    expected = _snapshot(theirs)
    conn.close()
    assert len(expected[0]) == 6 and len(expected[1]) == 3
    with SqliteStore.from_conn_string(path, index=spec.INDEX) as ours:
        # the same items, the same vector ranking with the same scores (to the last bit)
        assert _snapshot(ours) == expected
        assert ours.get(("docs", "b"), "5").value == {"text": "rust ownership", "n": 5}
        ours.put(("docs", "b"), "6", {"text": "rust guide to async", "n": 6})
        ours.delete(("docs", "a"), "2")
        after = _snapshot(ours)
    conn = _python_sqlite_connect(path, True)
    theirs = PySqliteStore(conn, index=spec.INDEX)
    theirs.setup()
    assert _snapshot(theirs) == after
    assert theirs.get(("docs", "b"), "6").value["n"] == 6
    assert theirs.get(("docs", "a"), "2") is None
    conn.close()


def test_our_file_read_by_python(tmp_path: Path) -> None:
    path = str(tmp_path / "ours.sqlite")
    with SqliteStore.from_conn_string(path, index=spec.INDEX, ttl={"default_ttl": 60}) as ours:
        _fill(ours)
        expected = _snapshot(ours)
    conn = _python_sqlite_connect(path, True)
    theirs = PySqliteStore(conn, index=spec.INDEX, ttl={"refresh_on_read": True})
    theirs.setup()
    assert _snapshot(theirs) == expected
    item = theirs.get(("docs", "a"), "1")
    assert item.value == {"text": "rust tutorial for beginners", "n": 1}
    assert item.created_at.tzinfo is not None
    row = conn.execute("SELECT ttl_minutes, expires_at IS NOT NULL FROM store WHERE key = '1'").fetchone()
    assert row == (60.0, 1)
    conn.close()


# --- TTL sweeper ------------------------------------------------------------------------


def test_ttl_sweeper_thread(tmp_path: Path) -> None:
    ttl = {"default_ttl": spec.SHORT_TTL, "sweep_interval_minutes": 0.2 / 60}
    with SqliteStore.from_conn_string(str(tmp_path / "s.sqlite"), ttl=ttl) as store:
        store.put(("t",), "gone", {"v": 1})
        store.put(("t",), "kept", {"v": 1}, ttl=None)
        future = store.start_ttl_sweeper()
        conn = _python_sqlite_connect(str(tmp_path / "s.sqlite"), False)
        for _ in range(50):
            if conn.execute("SELECT count(*) FROM store").fetchone()[0] == 1:
                break
            threading.Event().wait(0.1)
        assert [r[0] for r in conn.execute("SELECT key FROM store")] == ["kept"]
        conn.close()
        assert store.stop_ttl_sweeper(timeout=5)
        assert future.result(timeout=5) is None


async def test_ttl_sweeper_task(tmp_path: Path) -> None:
    ttl = {"default_ttl": spec.SHORT_TTL, "sweep_interval_minutes": 0.2 / 60}
    async with AsyncSqliteStore.from_conn_string(str(tmp_path / "s.sqlite"), ttl=ttl) as store:
        await store.aput(("t",), "gone", {"v": 1})
        await store.start_ttl_sweeper()
        await asyncio.sleep(1.5)
        assert await store.sweep_ttl() == 0  # already swept
        assert await store.stop_ttl_sweeper(timeout=5)


# --- a LangGraph graph with store= ------------------------------------------------------


class State(TypedDict, total=False):
    user: str
    text: str
    seen: list[str]


def _remember(state: State, runtime: Runtime) -> State:
    ns = ("memories", state["user"])
    seen = sorted(m.value["text"] for m in runtime.store.search(ns, limit=100))
    n = len(seen)
    runtime.store.put(ns, f"m{n}", {"text": state["text"], "n": n})
    return {"seen": seen}


async def _aremember(state: State, runtime: Runtime) -> State:
    ns = ("memories", state["user"])
    seen = sorted(m.value["text"] for m in await runtime.store.asearch(ns, limit=100))
    n = len(seen)
    await runtime.store.aput(ns, f"m{n}", {"text": state["text"], "n": n})
    return {"seen": seen}


def _graph(node, store):
    builder = StateGraph(State)
    builder.add_node("remember", node)
    builder.add_edge(START, "remember")
    return builder.compile(checkpointer=InMemorySaver(), store=store)


RUNS = [("t1", "u1", "likes rust"), ("t2", "u1", "lives in Paris"), ("t1", "u1", "has a cat"), ("t3", "u2", "hi")]


def _items(store) -> list:
    return sorted((i.namespace, i.key, i.value) for i in store.search(("memories",), limit=100))


def test_graph_with_store_same_on_ours_and_langgraphs(tmp_path: Path) -> None:
    results = []
    for kind in ("ours", "theirs"):
        path = str(tmp_path / f"{kind}.sqlite")
        store_cm = SqliteStore.from_conn_string(path) if kind == "ours" else PySqliteStore.from_conn_string(path)
        with store_cm as store:
            store.setup()
            graph = _graph(_remember, store)
            outputs = [
                graph.invoke({"user": u, "text": t}, {"configurable": {"thread_id": th}}) for th, u, t in RUNS
            ]
            results.append((outputs, _items(store)))
    assert results[0] == results[1]
    outputs, items = results[0]
    assert outputs[2]["seen"] == ["likes rust", "lives in Paris"]
    assert len(items) == 4


async def test_async_graph_with_store_same_on_ours_and_langgraphs(tmp_path: Path) -> None:
    results = []
    for kind in ("ours", "theirs"):
        path = str(tmp_path / f"{kind}.sqlite")
        cls = AsyncSqliteStore if kind == "ours" else PyAsyncSqliteStore
        async with cls.from_conn_string(path) as store:
            await store.setup()
            graph = _graph(_aremember, store)
            outputs = [
                await graph.ainvoke({"user": u, "text": t}, {"configurable": {"thread_id": th}})
                for th, u, t in RUNS
            ]
            found = await store.asearch(("memories",), limit=100)
            results.append((outputs, sorted((i.namespace, i.key, i.value) for i in found)))
    assert results[0] == results[1]
    assert results[0][0][2]["seen"] == ["likes rust", "lives in Paris"]


def test_reads_in_a_batch_with_getop_and_searchop(tmp_path: Path) -> None:
    with SqliteStore.from_conn_string(str(tmp_path / "s.sqlite")) as store:
        store.put(("a",), "k", {"v": 1})
        got, found = store.batch([GetOp(("a",), "k"), SearchOp(("a",), {"v": 1}, 10, 0)])
        assert type(got).__name__ == "Item" and got.value == {"v": 1}
        assert type(found[0]).__name__ == "SearchItem" and found[0].score is None


def test_readme_store_example_runs(tmp_path: Path, monkeypatch) -> None:
    """The store example of README-pypi.md, as written."""
    readme = (Path(__file__).parent.parent / "README-pypi.md").read_text()
    section = readme.split("## Long-term memory", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README-pypi.md", "exec"), {"__name__": "readme"})
    assert (tmp_path / "memory.sqlite").exists() and (tmp_path / "checkpoints.sqlite").exists()


async def test_async_postgres_store(pg_databases) -> None:
    from langgraph_checkpoint_rs import UnsupportedError
    from langgraph_checkpoint_rs.postgres import AsyncPostgresStore

    url = pg_databases.new()
    async with AsyncPostgresStore.from_conn_string(url, ttl={"default_ttl": 60}, pool_config={"max_size": 2}) as store:
        await store.setup()
        await store.aput(("users", "1"), "k", {"v": 1})
        assert (await store.aget(("users", "1"), "k")).value == {"v": 1}
        assert await store.alist_namespaces() == [("users", "1")]
    async with AsyncPostgresStore.from_conn_string(url, index=spec.INDEX) as store:
        try:
            await store.setup()
        except UnsupportedError as e:  # a server without pgvector: refused before anything is created
            assert "pgvector" in str(e)
        else:
            await store.aput(("docs",), "d", {"text": "rust"})
            assert (await store.asearch(("docs",), query="rust"))[0].key == "d"
