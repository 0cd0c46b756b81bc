"""Our SqliteSaver against LangGraph's own (langgraph-checkpoint-sqlite,
pinned): the same history written by each gives the same rows, byte for
byte, and each reads what the other wrote, plain and encrypted."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.sqlite import SqliteSaver as PySqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver as PyAsyncSqliteSaver

from langgraph_checkpoint_rs import AsyncSqliteSaver, SqliteSaver

from . import scenario

KEY = b"fedcba9876543210fedcba9876543210"


def rows(path: Path) -> dict[str, list[tuple]]:
    conn = sqlite3.connect(path)
    try:
        return {
            "checkpoints": conn.execute(
                "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, "
                "checkpoint, metadata FROM checkpoints ORDER BY 1, 2, 3"
            ).fetchall(),
            "writes": conn.execute(
                "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value, "
                "task_path FROM writes ORDER BY 1, 2, 3, 4, 5"
            ).fetchall(),
        }
    finally:
        conn.close()


def python_saver(path: Path, serde=None):
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = PySqliteSaver(conn, serde=serde)
    saver.setup()
    return saver, conn


def serdes():
    return [
        pytest.param(lambda: None, id="plain"),
        pytest.param(lambda: EncryptedSerializer.from_pycryptodome_aes(key=KEY), id="encrypted"),
    ]


@pytest.mark.parametrize("make_serde", serdes())
def test_same_rows_as_python(tmp_path: Path, make_serde) -> None:
    ours, theirs = tmp_path / "ours.sqlite", tmp_path / "theirs.sqlite"
    with SqliteSaver.from_conn_string(str(ours), serde=make_serde()) as saver:
        scenario.replay(saver)
    saver_py, conn = python_saver(theirs, make_serde())
    scenario.replay(saver_py)
    conn.close()
    a, b = rows(ours), rows(theirs)
    assert len(a["checkpoints"]) == 9 and len(a["writes"]) == 54
    if make_serde() is None:
        assert a == b
    else:
        # AES-EAX takes a fresh nonce per value: compare everything but the
        # ciphertexts, and the plaintexts after decrypting with Python's serde
        serde = make_serde()
        for table, value_cols in (("checkpoints", (4, 5)), ("writes", (6, 7))):
            for ra, rb in zip(a[table], b[table], strict=True):
                t, v = value_cols
                keep = [i for i in range(len(ra)) if i not in value_cols]
                assert [ra[i] for i in keep] == [rb[i] for i in keep]
                assert ra[t] == rb[t] and ra[t].endswith("+aes"), (ra[t], rb[t])
                assert ra[v] != rb[v]
                assert serde.loads_typed((ra[t], ra[v])) == serde.loads_typed((rb[t], rb[v]))


@pytest.mark.parametrize("make_serde", serdes())
def test_each_reads_what_the_other_wrote(tmp_path: Path, make_serde) -> None:
    ours, theirs = tmp_path / "ours.sqlite", tmp_path / "theirs.sqlite"
    with SqliteSaver.from_conn_string(str(ours), serde=make_serde()) as saver:
        scenario.replay(saver)
        written_by_us = scenario.everything(saver)
    saver_py, conn = python_saver(theirs, make_serde())
    scenario.replay(saver_py)
    written_by_python = scenario.everything(saver_py)
    conn.close()
    assert written_by_us == written_by_python
    assert len(written_by_us) == 9

    # Python reads our file, we read Python's
    saver_py, conn = python_saver(ours, make_serde())
    assert scenario.everything(saver_py) == written_by_us
    conn.close()
    with SqliteSaver.from_conn_string(str(theirs), serde=make_serde()) as saver:
        assert scenario.everything(saver) == written_by_python
        # and keeps writing into it: Python sees the new checkpoint
        latest = saver.get_tuple({"configurable": {"thread_id": "t-1"}})
        new_id = str(uuid6(clock_seq=99))
        nxt = dict(latest.checkpoint, id=new_id)
        saver.put(latest.config, nxt, {"source": "update", "step": 9}, {})
    saver_py, conn = python_saver(theirs, make_serde())
    got = saver_py.get_tuple({"configurable": {"thread_id": "t-1"}})
    conn.close()
    assert got.checkpoint["id"] == new_id
    assert got.metadata["step"] == 9
    assert got.parent_config["configurable"]["checkpoint_id"] == latest.checkpoint["id"]


async def test_async_savers_read_each_other(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours.sqlite", tmp_path / "theirs.sqlite"
    async with AsyncSqliteSaver.from_conn_string(str(ours)) as saver:
        await scenario.areplay(saver)
    async with PyAsyncSqliteSaver.from_conn_string(str(theirs)) as saver_py:
        await scenario.areplay(saver_py)
    assert rows(ours) == rows(theirs)
    async with PyAsyncSqliteSaver.from_conn_string(str(ours)) as saver_py:
        theirs_view = [scenario.canonical(t) async for t in saver_py.alist(None)]
    async with AsyncSqliteSaver.from_conn_string(str(ours)) as saver:
        ours_view = [scenario.canonical(t) async for t in saver.alist(None)]
    assert ours_view == theirs_view and len(ours_view) == 9


def test_a_sqlite3_connection_opens_its_file(tmp_path: Path) -> None:
    path = tmp_path / "conn.sqlite"
    conn = sqlite3.connect(path)
    saver = SqliteSaver(conn)
    scenario.replay(saver)
    saver.close()
    conn.close()
    assert len(rows(path)["checkpoints"]) == 9
    with pytest.raises(TypeError, match="in-memory"):
        SqliteSaver(sqlite3.connect(":memory:"))
