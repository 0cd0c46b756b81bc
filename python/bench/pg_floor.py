#!/usr/bin/env python3
"""PostgreSQL writes awaited one at a time, against a bare statement: what
one graph task waits for at each step.

    floor-insert   psycopg (async, autocommit): INSERT of a 2 KB row into a
                   scratch table, one commit each
    floor-select   psycopg: SELECT 1 (a round trip, no commit)
    rs             langgraph_checkpoint_rs.postgres.AsyncPostgresSaver:
                   aput, then aput_writes of two writes, one after the other
    py             langgraph.checkpoint.postgres.aio.AsyncPostgresSaver on a
                   psycopg_pool.AsyncConnectionPool (autocommit,
                   prepare_threshold=0, dict_row, as LangGraph's docs set it up)

The kinds alternate within each round (reversed every other round); each
round the savers start on fresh tables in a database of their own, created
on the server and dropped afterwards. The checkpoints carry a messages
channel of five 240-byte strings and an integer, both in new_versions. The
report: per kind and call, the median over the rounds of each round's median,
in us.

    python python/bench/pg_floor.py [--pg-url postgresql://postgres@127.0.0.1:5432] [--calls 300] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid

PG_TABLES = ["checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations"]


async def floor(url: str, calls: int) -> dict[str, list[int]]:
    import psycopg

    out: dict[str, list[int]] = {"insert": [], "select 1": []}
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as c:
        await c.execute("CREATE TABLE IF NOT EXISTS pg_floor_rows (k text PRIMARY KEY, v bytea)")
        payload = b"x" * 2000
        for _ in range(calls):
            t0 = time.perf_counter_ns()
            await c.execute("INSERT INTO pg_floor_rows VALUES (%s, %s)", (uuid.uuid4().hex, payload))
            out["insert"].append(time.perf_counter_ns() - t0)
        for _ in range(calls):
            t0 = time.perf_counter_ns()
            await c.execute("SELECT 1")
            out["select 1"].append(time.perf_counter_ns() - t0)
        await c.execute("DROP TABLE pg_floor_rows")
    return out


async def writes(saver, calls: int) -> dict[str, list[int]]:
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.base.id import uuid6

    out: dict[str, list[int]] = {"aput": [], "aput_writes": []}
    cfg = {"configurable": {"thread_id": uuid.uuid4().hex, "checkpoint_ns": ""}}
    for i in range(calls):
        cp = empty_checkpoint()
        cp["id"] = str(uuid6())
        version = f"{i + 1:032}.0"
        cp["channel_values"] = {"messages": ["hello world " * 20] * 5, "turn": i}
        cp["channel_versions"] = {"messages": version, "turn": version}
        t0 = time.perf_counter_ns()
        cfg = await saver.aput(cfg, cp, {"step": i, "source": "loop"}, dict(cp["channel_versions"]))
        out["aput"].append(time.perf_counter_ns() - t0)
        t0 = time.perf_counter_ns()
        await saver.aput_writes(cfg, [("messages", "x" * 200), ("turn", i)], str(uuid.uuid4()), "")
        out["aput_writes"].append(time.perf_counter_ns() - t0)
    stored = await saver.aget_tuple(cfg)
    assert stored is not None and stored.checkpoint["channel_values"]["turn"] == calls - 1
    return out


async def drop_tables(url: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as c:
        for t in PG_TABLES:
            await c.execute(f"DROP TABLE IF EXISTS {t} CASCADE")


async def run_kind(kind: str, url: str, calls: int) -> dict[str, list[int]]:
    if kind == "floor":
        return await floor(url, calls)
    await drop_tables(url)
    if kind == "rs":
        from langgraph_checkpoint_rs.postgres import AsyncPostgresSaver as Rs

        async with Rs.from_conn_string(url) as saver:
            await saver.setup()
            return await writes(saver, calls)
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver as Py
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    async with AsyncConnectionPool(url, max_size=4, kwargs=kwargs, open=False) as pool:
        saver = Py(conn=pool)
        await saver.setup()
        return await writes(saver, calls)


def admin(server: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True, connect_timeout=5) as c:
        c.execute(sql)


async def measure(server: str, calls: int, rounds: int) -> dict[str, list[float]]:
    kinds = ["floor", "rs", "py"]
    medians: dict[str, list[float]] = {}
    db = f"ckpt_pg_floor_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    admin(server, f'CREATE DATABASE "{db}"')
    try:
        for r in range(rounds):
            for kind in kinds if r % 2 == 0 else kinds[::-1]:
                res = await run_kind(kind, f"{server}/{db}", calls)
                for call, samples in res.items():
                    medians.setdefault(f"{kind} {call}", []).append(statistics.median(samples) / 1000)
                print(f"round {r + 1}/{rounds}: {kind} done", file=sys.stderr, flush=True)
    finally:
        admin(server, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    return medians


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pg-url", default=os.environ.get("CHECKPOINTER_PG_URL", "postgresql://postgres@127.0.0.1:5432"),
                    help="server URL without a database (a database is created and dropped)")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    medians = asyncio.run(measure(args.pg_url.rstrip("/"), args.calls, args.rounds))
    print(f"PostgreSQL calls awaited one at a time (python/bench/pg_floor.py): {args.calls} calls per kind, "
          f"{args.rounds} rounds alternated; us, median over the rounds of each round's median call.")
    print()
    print("| call | us |")
    print("|---|---:|")
    for name, xs in medians.items():
        print(f"| {name} | {statistics.median(xs):,.1f} |")


if __name__ == "__main__":
    main()
