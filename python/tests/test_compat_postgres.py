"""Our PostgresSaver against LangGraph's own (langgraph-checkpoint-postgres,
pinned): the same history written by each gives the same rows, and each
reads what the other wrote, sync and async."""

from __future__ import annotations

import psycopg
import pytest
from langgraph.checkpoint.postgres import PostgresSaver as PyPostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver as PyAsyncPostgresSaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

from langgraph_checkpoint_rs import AsyncPostgresSaver, PostgresSaver

from . import scenario

KEY = b"fedcba9876543210fedcba9876543210"

TABLES = {
    "checkpoints": "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, "
    "checkpoint::text, metadata::text FROM checkpoints ORDER BY 1, 2, 3",
    "checkpoint_blobs": "SELECT thread_id, checkpoint_ns, channel, version, type, blob "
    "FROM checkpoint_blobs ORDER BY 1, 2, 3, 4",
    "checkpoint_writes": "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, "
    "blob, task_path FROM checkpoint_writes ORDER BY 1, 2, 3, 4, 5",
    "checkpoint_migrations": "SELECT v FROM checkpoint_migrations ORDER BY v",
}


def rows(url: str) -> dict[str, list[tuple]]:
    with psycopg.connect(url) as conn:
        return {name: conn.execute(sql).fetchall() for name, sql in TABLES.items()}


def python_saver(url: str, serde=None):
    conn = psycopg.connect(url, autocommit=True, prepare_threshold=0)
    saver = PyPostgresSaver(conn, serde=serde)
    saver.setup()
    return saver, conn


def test_same_rows_as_python(pg_databases) -> None:
    ours, theirs = pg_databases.new(), pg_databases.new()
    with PostgresSaver.from_conn_string(ours) as saver:
        saver.setup()
        scenario.replay(saver)
    saver_py, conn = python_saver(theirs)
    scenario.replay(saver_py)
    conn.close()
    a, b = rows(ours), rows(theirs)
    assert len(a["checkpoints"]) == 9 and len(a["checkpoint_writes"]) == 54
    for table in TABLES:
        assert a[table] == b[table], table


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
def test_each_reads_what_the_other_wrote(pg_databases, encrypted: bool) -> None:
    serde = (lambda: EncryptedSerializer.from_pycryptodome_aes(key=KEY)) if encrypted else (lambda: None)
    ours, theirs = pg_databases.new(), pg_databases.new()
    with PostgresSaver.from_conn_string(ours, serde=serde()) as saver:
        saver.setup()
        scenario.replay(saver, stale_version=not encrypted)
        written_by_us = scenario.everything(saver)
    saver_py, conn = python_saver(theirs, serde())
    scenario.replay(saver_py, stale_version=not encrypted)
    written_by_python = scenario.everything(saver_py)
    conn.close()
    assert written_by_us == written_by_python
    assert len(written_by_us) == 9

    saver_py, conn = python_saver(ours, serde())
    assert scenario.everything(saver_py) == written_by_us
    conn.close()
    with PostgresSaver.from_conn_string(theirs, serde=serde()) as saver:
        assert scenario.everything(saver) == written_by_python
    if encrypted:
        # Python leaves primitive values in the JSONB in plaintext even with
        # an EncryptedSerializer; ours stores them as encrypted blobs
        with psycopg.connect(ours) as conn:
            inline = conn.execute(
                "SELECT count(*) FROM checkpoints WHERE checkpoint -> 'channel_values' <> '{}'::jsonb"
            ).fetchone()[0]
            tags = {t for (t,) in conn.execute("SELECT DISTINCT type FROM checkpoint_blobs")}
        assert inline == 0
        assert tags <= {"msgpack+aes", "null+aes", "bytes+aes", "empty"}, tags


async def test_async_savers_read_each_other(pg_databases) -> None:
    ours, theirs = pg_databases.new(), pg_databases.new()
    async with AsyncPostgresSaver.from_conn_string(ours) as saver:
        await saver.setup()
        await scenario.areplay(saver)
    async with PyAsyncPostgresSaver.from_conn_string(theirs) as saver_py:
        await saver_py.setup()
        await scenario.areplay(saver_py)
    async with PyAsyncPostgresSaver.from_conn_string(ours) as saver_py:
        theirs_view = [scenario.canonical(t) async for t in saver_py.alist(None)]
    async with AsyncPostgresSaver.from_conn_string(theirs) as saver:
        ours_view = [scenario.canonical(t) async for t in saver.alist(None)]
    # one listing across threads: the order of threads is each saver's own
    assert {t[0]: t for t in ours_view} == {t[0]: t for t in theirs_view}
    assert len(ours_view) == 9


def test_takes_a_psycopg_connection_or_pool_as_python_does(pg_databases) -> None:
    from psycopg_pool import ConnectionPool

    url = pg_databases.new()
    with psycopg.connect(url, autocommit=True) as conn:
        saver = PostgresSaver(conn)
        saver.setup()
        scenario.replay(saver)
        saver.close()
    with ConnectionPool(url, open=True) as pool:
        saver = PostgresSaver(pool)
        assert len(scenario.everything(saver)) == 9
        saver.close()
    with pytest.raises(TypeError, match="psycopg"):
        PostgresSaver(42)
