"""The savers' sync API, the extended operations, delta-channel history,
errors, and what the async and sync halves share, on every backend."""

from __future__ import annotations

import sqlite3

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_checkpoint_rs import (
    CheckpointerError,
    InvalidInputError,
    PostgresSaver,
    RedisSaver,
    SerdeError,
    StorageError,
    ThreadExistsError,
    UnsupportedError,
)

from . import scenario


def checkpoint(values: dict, versions: dict, seen: dict | None = None) -> dict:
    return {
        "v": 4,
        "ts": "2026-12-02T06:00:00+00:00",
        "id": str(uuid6(clock_seq=0)),
        "channel_values": values,
        "channel_versions": versions,
        "versions_seen": seen or {},
        "updated_channels": sorted(versions),
    }


def config(thread: str, checkpoint_id: str | None = None, ns: str = "") -> dict:
    c = {"thread_id": thread, "checkpoint_ns": ns}
    if checkpoint_id:
        c["checkpoint_id"] = checkpoint_id
    return {"configurable": c}


def chain(saver, thread: str, steps: int, ns: str = "") -> list[dict]:
    """``steps`` checkpoints, each with writes on "log" and "other"; a seed
    of "log" only at the root (a delta channel's snapshot)."""
    configs = []
    parent = config(thread, ns=ns)
    version = None
    for step in range(steps):
        version = saver.get_next_version(version, None)
        values = {"log": ["seed"]} if step == 0 else {"other": step}
        versions = {"log": saver.get_next_version(None, None), "other": version}
        stored = saver.put(
            parent,
            checkpoint(values, versions),
            {"source": "loop", "step": step, "parents": {}, "run_id": f"run-{step % 2}"},
            {"other": version} if step else versions,
        )
        saver.put_writes(stored, [("log", f"w{step}"), ("other", step)], f"task-{step}", f"path-{step}")
        saver.put_writes(stored, [("log", f"x{step}")], f"task-b{step}", "")
        configs.append(stored)
        parent = stored
    return configs


def test_sync_api(open_saver) -> None:
    saver = open_saver()
    scenario.replay(saver)
    everything = scenario.everything(saver)
    assert len(everything) == 9
    # get_tuple: latest per (thread, ns), and by id
    latest = saver.get_tuple(config("t-2", ns="child:1"))
    assert latest.config["configurable"]["checkpoint_ns"] == "child:1"
    assert latest.metadata["step"] == 2 and latest.metadata["user"] == "ana"
    assert "note" in latest.metadata and "\x00" not in latest.metadata["note"]
    # writes in (task_path, task_id, idx) order: special channels' fixed
    # negative indexes (__interrupt__ -3, __error__ -1) first in their task
    assert [w[1] for w in latest.pending_writes][:2] == ["__interrupt__", "__error__"]
    by_id = saver.get_tuple(latest.parent_config)
    assert by_id.config == latest.parent_config
    assert saver.get(latest.config)["id"] == latest.checkpoint["id"]
    assert saver.get_tuple(config("nobody")) is None
    # list: namespaces, filter, before, limit
    assert len(list(saver.list(config("t-2")))) == 3
    assert len(list(saver.list({"configurable": {"thread_id": "t-2"}}))) == 6
    assert len(list(saver.list(None))) == 9
    assert [t.metadata["step"] for t in saver.list(None, filter={"step": 1})] == [1, 1, 1]
    assert len(list(saver.list(None, filter={"step": 1, "tenant": "acme"}))) == 3
    assert list(saver.list(None, filter={"step": 99})) == []
    page = list(saver.list(config("t-1"), limit=2))
    assert len(page) == 2
    rest = list(saver.list(config("t-1"), before=page[-1].config))
    assert [t.checkpoint["id"] for t in page + rest] == [
        t.checkpoint["id"] for t in saver.list(config("t-1"))
    ]
    # delete_thread
    saver.delete_thread("t-1")
    assert saver.get_tuple(config("t-1")) is None
    assert len(list(saver.list(None))) == 6


async def test_async_api_reads_as_sync(open_saver) -> None:
    saver = open_saver()
    await scenario.areplay(saver)
    sync = scenario.everything(saver)
    async_view = []
    for thread in scenario.threads():
        async_view.extend([scenario.canonical(t) async for t in saver.alist({"configurable": {"thread_id": thread}})])
    assert async_view == sync
    t = await saver.aget_tuple(config("t-1"))
    assert scenario.canonical(t) == scenario.canonical(saver.get_tuple(config("t-1")))
    assert (await saver.aget(config("t-1")))["id"] == t.checkpoint["id"]
    assert [x.metadata["step"] async for x in saver.alist(None, filter={"step": 0}, limit=2)] == [0, 0]


def test_extended_operations(open_saver) -> None:
    saver = open_saver()
    scenario.replay(saver)
    # copy_thread: whole, namespaces and writes included; the target exists after
    saver.copy_thread("t-2", "t-copy")
    def view(thread):
        # everything but the thread id, which the copy changes
        return [
            (t.config["configurable"]["checkpoint_ns"], t.checkpoint, t.metadata, t.pending_writes)
            for t in saver.list({"configurable": {"thread_id": thread}})
        ]

    assert view("t-2") == view("t-copy") and len(view("t-2")) == 6
    with pytest.raises(ThreadExistsError) as err:
        saver.copy_thread("t-1", "t-copy")
    assert err.value.kind == "thread_exists" and err.value.retryable is False
    # delete_for_runs: the run ids come from config["metadata"]
    saver.delete_for_runs(["run-t-1-0"])
    assert [t.metadata["step"] for t in saver.list(config("t-1"))] == [2]
    saver.delete_for_runs([])
    # prune keep_latest keeps one checkpoint per namespace, with its writes
    saver.prune(["t-2"])
    kept = list(saver.list({"configurable": {"thread_id": "t-2"}}))
    assert sorted(t.config["configurable"]["checkpoint_ns"] for t in kept) == ["", "child:1"]
    assert all(len(t.pending_writes) == 6 for t in kept)
    saver.prune(["t-copy"], strategy="delete")
    assert list(saver.list({"configurable": {"thread_id": "t-copy"}})) == []
    with pytest.raises(InvalidInputError, match="keep_newest"):
        saver.prune(["t-2"], strategy="keep_newest")


async def test_extended_operations_async(open_saver) -> None:
    saver = open_saver()
    await scenario.areplay(saver)
    await saver.acopy_thread("t-1", "t-c")
    assert len([t async for t in saver.alist(config("t-c"))]) == 3
    with pytest.raises(ThreadExistsError):
        await saver.acopy_thread("t-1", "t-c")
    await saver.adelete_for_runs(["run-t-1-1"])
    assert [t.metadata["step"] async for t in saver.alist(config("t-1"))] == [1, 0]
    await saver.aprune(["t-c"], strategy="keep_latest")
    assert len([t async for t in saver.alist(config("t-c"))]) == 1
    await saver.adelete_thread("t-c")
    assert await saver.aget_tuple(config("t-c")) is None


@pytest.mark.parametrize("channels", [["log"], ["log", "other"], ["other", "missing", "log"]])
def test_delta_channel_history_matches_the_base_walk(open_saver, channels) -> None:
    """The saver's own walk gives what LangGraph's default implementation
    (get_tuple along parent_config) gives on the same store."""
    saver = open_saver()
    configs = chain(saver, "d", 6)
    chain(saver, "d", 3, ns="sub:1")
    for target in (configs[-1], configs[3], configs[0], config("d")):
        ours = saver.get_delta_channel_history(config=target, channels=channels)
        base = BaseCheckpointSaver.get_delta_channel_history(saver, config=target, channels=channels)
        assert ours == base, target
    full = saver.get_delta_channel_history(config=configs[-1], channels=channels)
    assert full["log"]["seed"] == ["seed"]
    # the root's writes come first, each checkpoint's in (task_path, task_id, idx) order
    assert [w[2] for w in full["log"]["writes"]][:4] == ["x0", "w0", "x1", "w1"]
    assert saver.get_delta_channel_history(config=configs[-1], channels=[]) == {}


async def test_delta_channel_history_async(open_saver) -> None:
    saver = open_saver()
    configs = chain(saver, "d", 4)
    ours = await saver.aget_delta_channel_history(config=configs[-1], channels=["log", "other"])
    base = await BaseCheckpointSaver.aget_delta_channel_history(
        saver, config=configs[-1], channels=["log", "other"]
    )
    assert ours == base
    assert len(ours["log"]["writes"]) == 6


def test_with_allowlist_shares_the_store(open_saver) -> None:
    saver = open_saver(serde=JsonPlusSerializer(allowed_msgpack_modules=[("tests.scenario", "Mood")]))
    clone = saver.with_allowlist([("tests.scenario", "Profile")])
    assert clone is not saver and clone._core is saver._core
    scenario.replay(clone)
    assert len(list(saver.list(None))) == 9


def test_versions_are_langgraph_format(open_saver) -> None:
    saver = open_saver()
    v1 = saver.get_next_version(None, None)
    v2 = saver.get_next_version(v1, None)
    v3 = saver.get_next_version(7, None)
    assert v1.startswith("0" * 31 + "1.") and v2.startswith("0" * 31 + "2.") and v3.startswith("0" * 31 + "8.")
    assert len(v1.split(".")[0]) == 32 and v1 < v2


def test_errors_are_typed(open_saver) -> None:
    saver = open_saver()
    stored = saver.put(config("e"), checkpoint({"a": 1}, {"a": "1"}), {}, {"a": "1"})
    with pytest.raises(InvalidInputError) as err:
        saver.put_writes(config("e"), [("a", 1)], "task")
    assert isinstance(err.value, ValueError) and err.value.retryable is False
    assert err.value.kind == "invalid_input"
    # what the serializer refuses is refused before anything is stored, as
    # Python's savers do
    with pytest.raises(TypeError):
        saver.put_writes(stored, [("a", object())], "task")
    assert saver.get_tuple(stored).pending_writes == []
    # a closed saver refuses every call
    saver.close()
    with pytest.raises(InvalidInputError, match="closed"):
        saver.get_tuple(stored)


class Plain:
    """msgpack cannot encode it; pickle can."""


def test_pickle_fallback_is_refused_not_stored(open_saver) -> None:
    saver = open_saver(serde=JsonPlusSerializer(pickle_fallback=True))
    stored = saver.put(config("p"), checkpoint({"a": 1}, {"a": "1"}), {}, {"a": "1"})
    with pytest.raises(UnsupportedError, match="pickle"):
        saver.put_writes(stored, [("a", Plain())], "task")
    assert saver.get_tuple(stored).pending_writes == []


def test_unreadable_bytes_are_a_serde_error(tmp_path) -> None:
    from langgraph_checkpoint_rs import SqliteSaver

    path = tmp_path / "bad.sqlite"
    with SqliteSaver.from_conn_string(str(path)) as saver:
        stored = saver.put(config("b"), checkpoint({"a": 1}, {"a": "1"}), {}, {"a": "1"})
    conn = sqlite3.connect(path)
    conn.execute("UPDATE checkpoints SET checkpoint = x'c1c1c1'")
    conn.commit()
    conn.close()
    with SqliteSaver.from_conn_string(str(path)) as saver:
        with pytest.raises(SerdeError) as err:
            saver.get_tuple(stored)
        assert err.value.kind == "serde" and not err.value.retryable


def test_encrypted_store_needs_the_key(tmp_path) -> None:
    from langgraph_checkpoint_rs import SqliteSaver

    key = b"k" * 32
    path = str(tmp_path / "enc.sqlite")
    with SqliteSaver.from_conn_string(path, serde=EncryptedSerializer.from_pycryptodome_aes(key=key)) as saver:
        stored = saver.put(config("x"), checkpoint({"a": "secret"}, {"a": "1"}), {}, {"a": "1"})
        saver.put_writes(stored, [("a", "also secret")], "t")
    raw = open(path, "rb").read()
    assert b"secret" not in raw
    with SqliteSaver.from_conn_string(path, serde=EncryptedSerializer.from_pycryptodome_aes(key=b"z" * 32)) as saver:
        with pytest.raises(CheckpointerError):
            saver.get_tuple(stored)


class XorCipher:
    """A cipher only Python knows (not pycryptodome's AES): the core calls it."""

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        return "xor", bytes(b ^ 0x5A for b in plaintext)

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        assert ciphername == "xor"
        return bytes(b ^ 0x5A for b in ciphertext)


def test_any_python_cipher_encrypts(open_saver) -> None:
    serde = EncryptedSerializer(XorCipher())
    saver = open_saver(serde=serde)
    scenario.replay(saver)
    assert len(scenario.everything(saver)) == 9
    got = saver.get_tuple(config("t-1"))
    assert got.checkpoint["channel_values"]["ratio"] == 2.25
    assert got.pending_writes[0][2] == [{"value": "ask", "id": "i2"}]


def test_unreachable_servers_fail_retryable_without_the_password() -> None:
    with pytest.raises(StorageError) as err:
        saver = PostgresSaver("postgresql://ana:s3cr3t-pw@127.0.0.1:1/db")
        saver.setup()
    assert err.value.retryable is True
    assert "s3cr3t-pw" not in str(err.value) and "s3cr3t-pw" not in repr(err.value)
    with pytest.raises(StorageError) as err:
        RedisSaver("redis://:s3cr3t-pw@127.0.0.1:1")
    assert "s3cr3t-pw" not in str(err.value)
    with pytest.raises(InvalidInputError):
        RedisSaver("http://example.com")


def test_nul_in_ids_is_stored_exactly_or_refused(open_saver, backend) -> None:
    """The crate's contract: SQLite stores U+0000 in an id exactly (as
    Python's SqliteSaver does); PostgreSQL text and the Redis layout cannot
    hold it, and refuse it with InvalidInputError before writing anything."""
    saver = open_saver()
    cp = checkpoint({"a": 1}, {"a": "1"})
    if backend == "sqlite":
        stored = saver.put(config("nul\x00thread"), cp, {}, {"a": "1"})
        assert saver.get_tuple(stored).config["configurable"]["thread_id"] == "nul\x00thread"
    else:
        with pytest.raises(InvalidInputError):
            saver.put(config("nul\x00thread"), cp, {}, {"a": "1"})
        assert list(saver.list(None)) == []



def nested(levels: int) -> list:
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_nesting_limit_is_the_same_on_every_backend(open_saver) -> None:
    """A channel value nested as deep as the crate stores (126 levels: the
    checkpoint's map and its channel_values wrap it up to the decoder's
    128) reads back; one level deeper is refused before anything is stored."""
    saver = open_saver()
    stored = saver.put(config("deep"), checkpoint({"a": nested(126)}, {"a": "1"}), {}, {"a": "1"})
    assert saver.get_tuple(stored).checkpoint["channel_values"]["a"] == nested(126)
    with pytest.raises(SerdeError):
        saver.put(config("deeper"), checkpoint({"a": nested(127)}, {"a": "1"}), {}, {"a": "1"})
    assert saver.get_tuple(config("deeper")) is None


def test_a_checkpoint_the_serializer_pickles_is_refused(open_saver) -> None:
    saver = open_saver(serde=JsonPlusSerializer(pickle_fallback=True))
    with pytest.raises(UnsupportedError, match="pickle"):
        saver.put(config("pk"), checkpoint({"a": Plain()}, {"a": "1"}), {}, {"a": "1"})
    assert saver.get_tuple(config("pk")) is None


def test_any_sqlite_path_names_its_file(tmp_path) -> None:
    """A path reaches the core as written (spaces, ``?``, ``#``, ``%``,
    non-ASCII): the file Python's sqlite3 opens at that path, left in WAL
    mode when closed, as Python's SqliteSaver leaves it."""
    from langgraph_checkpoint_rs import SqliteSaver

    folder = tmp_path / "a b?c#d%20é"
    folder.mkdir()
    path = str(folder / "x %41?y#z ü.sqlite")
    with SqliteSaver.from_conn_string(path) as saver:
        stored = saver.put(config("p"), checkpoint({"a": 1}, {"a": "1"}), {}, {"a": "1"})
    assert [p.name for p in folder.iterdir() if p.suffix == ".sqlite"] == ["x %41?y#z ü.sqlite"]
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0] == 1
    finally:
        conn.close()
    with SqliteSaver.from_conn_string(path) as saver:
        assert saver.get_tuple(stored).checkpoint["channel_values"] == {"a": 1}


def test_a_key_prefix_is_taken_as_given(redis_prefixes) -> None:
    """Any prefix text (no braces) keys the store: the same prefix reads
    what was written, another does not."""
    from .conftest import REDIS_URL

    prefix = redis_prefixes.new() + " a/b?c&d=é%25"
    with RedisSaver.from_conn_string(REDIS_URL, key_prefix=prefix) as saver:
        stored = saver.put(config("k"), checkpoint({"a": 1}, {"a": "1"}), {}, {"a": "1"})
    with RedisSaver.from_conn_string(f"{REDIS_URL}?protocol=resp2", key_prefix=prefix) as saver:
        assert saver.get_tuple(stored) is not None
    with RedisSaver.from_conn_string(REDIS_URL, key_prefix=prefix + "x") as saver:
        assert saver.get_tuple(stored) is None


def test_a_url_of_another_store_is_refused(tmp_path) -> None:
    target = tmp_path / "x.sqlite"
    with pytest.raises(InvalidInputError, match="not a redis"):
        RedisSaver(f"sqlite://{target}")
    with pytest.raises(InvalidInputError, match="not a postgres"):
        PostgresSaver("redis://127.0.0.1:1")
    assert not target.exists()
