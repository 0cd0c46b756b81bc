#!/usr/bin/env python3
"""Concurrent writers on Python's savers: the counterpart of
benches/concurrency.rs. W writers (Python threads, W = 1, 4, 16 by default)
each put the checkpoints of their own thread (thread w of WORKLOAD.md, built
with bench_python.py's generator) at the same time into one SqliteSaver file
or one PostgresSaver; prints the aggregate puts/s as one JSON line per
(saver, writers), in the format of the Rust bench.

    PY=target/peer-venv/bin/python
    $PY scripts/concurrency_python.py --peer-dir ../shared/peer \\
        --pg-server postgresql://postgres@127.0.0.1:5432

SQLite: SqliteSaver.from_conn_string (one connection shared by the threads,
WAL, synchronous=FULL as in the workload). Postgres: PostgresSaver on a
psycopg_pool.ConnectionPool with one connection per writer (autocommit,
prepare_threshold=0, dict_row, as LangGraph documents), in a fresh database
per run, dropped afterwards. Checkpoints are built before the clock starts.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
import uuid


def build_steps(bench, saver, w: int, steps: int, seed: int) -> list:
    """The put arguments of thread w, steps 0..steps (as bench_python.run_once)."""
    out = []
    msgs: list = []
    versions: dict = {}
    prev_msg_version = None
    for op in bench.workload_ops(seed, w, steps):
        s = op["step"]
        new_versions = {}
        for ch in op["changed_channels"]:
            versions[ch] = saver.get_next_version(versions.get(ch), None)
            new_versions[ch] = versions[ch]
        msgs.append(op["appended_message"])
        values = {"messages": list(msgs)}
        values.update(op["scalars"])
        cp = {
            "v": 4,
            "id": op["checkpoint_id"],
            "ts": op["ts"],
            "channel_values": values,
            "channel_versions": dict(versions),
            "versions_seen": {"agent": {"messages": prev_msg_version}} if s else {},
            "updated_channels": sorted(op["changed_channels"]),
        }
        cfg = {"configurable": {"thread_id": op["thread_id"], "checkpoint_ns": ""}}
        if op["parent_checkpoint_id"]:
            cfg["configurable"]["checkpoint_id"] = op["parent_checkpoint_id"]
        out.append((cfg, cp, op["metadata"], new_versions, op["checkpoint_id"]))
        prev_msg_version = versions["messages"]
    return out


def run(bench, saver, writers: int, steps: int, seed: int) -> float:
    work = [build_steps(bench, saver, w, steps, seed) for w in range(writers)]
    barrier = threading.Barrier(writers + 1)
    errors: list = []

    def writer(items: list) -> None:
        try:
            barrier.wait()
            for cfg, cp, md, nv, cid in items:
                new = saver.put(cfg, cp, md, nv)
                assert new["configurable"]["checkpoint_id"] == cid
        except Exception as e:  # reported after the join
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(items,)) for items in work]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    secs = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return secs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peer-dir", required=True, help="the shared/peer folder (for bench_python.py)")
    ap.add_argument("--savers", default="sqlite,postgres")
    ap.add_argument("--writers", default="1,4,16")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--pg-server", default=os.environ.get("CHECKPOINTER_PG_URL", "postgresql://postgres@127.0.0.1:5432"),
                    help="PostgreSQL server URL without a database")
    args = ap.parse_args()
    sys.path.insert(0, os.path.abspath(args.peer_dir))
    import bench_python as bench  # the workload generator of WORKLOAD.md

    random.seed(args.seed)
    server = args.pg_server.rstrip("/")
    for kind in [k.strip() for k in args.savers.split(",") if k.strip()]:
        for w in [int(x) for x in args.writers.split(",") if x.strip()]:
            if kind == "sqlite":
                from langgraph.checkpoint.sqlite import SqliteSaver

                with tempfile.TemporaryDirectory(prefix="conc-") as d:
                    with SqliteSaver.from_conn_string(os.path.join(d, "c.sqlite")) as saver:
                        saver.setup()
                        secs = run(bench, saver, w, args.steps, args.seed)
            elif kind == "postgres":
                import psycopg
                from psycopg.rows import dict_row
                from psycopg_pool import ConnectionPool
                from langgraph.checkpoint.postgres import PostgresSaver

                name = f"conc_py_{os.getpid()}_{uuid.uuid4().hex[:8]}"
                with psycopg.connect(f"{server}/postgres", autocommit=True) as c:
                    c.execute(f'CREATE DATABASE "{name}"')
                try:
                    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
                    with ConnectionPool(f"{server}/{name}", min_size=w, max_size=w, kwargs=kwargs, open=True) as pool:
                        saver = PostgresSaver(pool)
                        saver.setup()
                        secs = run(bench, saver, w, args.steps, args.seed)
                finally:
                    with psycopg.connect(f"{server}/postgres", autocommit=True) as c:
                        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            else:
                sys.exit(f"unknown saver {kind} (sqlite, postgres)")
            puts = w * args.steps
            print(json.dumps({"bench": "concurrency", "impl": "python", "saver": kind, "writers": w,
                              "steps": args.steps, "puts": puts, "seconds": round(secs, 4),
                              "puts_per_sec": round(puts / secs)}), flush=True)


if __name__ == "__main__":
    main()
