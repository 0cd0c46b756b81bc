#!/usr/bin/env python3
"""SQLite writes one at a time, against their physical floor: the reference
workload's put phase (testdata/peer/bench_python.py's ``workload_ops``) and
one ``delete_thread`` per thread, on

    floor            the raw statements on Python's tables: Python's sqlite3,
                     rows encoded before the clock starts (the checkpoint by
                     LangGraph's serializer, metadata by json.dumps as
                     Python's saver does), BEGIN / INSERT (or DELETE) / COMMIT
    sqlite           langgraph.checkpoint.sqlite.SqliteSaver
    rs-sqlite        langgraph_checkpoint_rs.sqlite.SqliteSaver
    rs-sqlite-noidx  the same, with the crate's two listing indexes on
                     ``checkpoints`` dropped after setup() (an experiment: what
                     they cost; the saver creates them again on its next setup)

Every saver writes the same rows to a fresh file in a fresh temp dir, WAL with
``synchronous=FULL`` (SQLite's default, which Python's saver keeps and ours
sets), SQLite's automatic checkpoint every 1000 WAL pages on every side.
Kinds alternate within each round (reversed every other round); per kind and
operation the report gives the median over the rounds of each round's median
call, of its mean call, and of its median CPU time of the calling thread
(``time.thread_time_ns``: the kernel's share of writing and syncing
included), and the calls over 1.5 ms per round (the commits that ran SQLite's
checkpoint of the WAL into the database file: a mean moves with where those
land, a median does not).

    python python/bench/sqlite_floor.py [--threads 10] [--steps 100] [--rounds 6]

Needs the bench venv (scripts/python-package-bench.sh --setup-only prints its
python).  Standard library plus LangGraph and the package.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "testdata", "peer"))
import bench_python as wl  # noqa: E402

KINDS = ["floor", "sqlite", "rs-sqlite", "rs-sqlite-noidx"]
OPS = ["put", "put_writes", "delete_thread"]
INDEXES = ["checkpointer_checkpoints_thread_idx", "checkpointer_checkpoints_id_idx"]
SPIKE_NS = 1_500_000


def workload(threads: int, steps: int, seed: int) -> list[tuple]:
    """The put phase as bench_python.py runs it: (config, checkpoint,
    metadata, new_versions, writes, task_id, task_path) per step."""
    import random

    from langgraph.checkpoint.memory import InMemorySaver

    random.seed(seed)
    nv = InMemorySaver().get_next_version
    return [
        (cfg, cp, op["metadata"], new_versions, list(op["writes"]), op["writes_task_id"], op["writes_task_path"])
        for t in range(threads)
        for op, cfg, cp, new_versions in wl.put_arguments(seed, t, steps, nv)
    ]


class Clock:
    def __init__(self) -> None:
        self.wall: dict[str, list[int]] = {op: [] for op in OPS}
        self.cpu: dict[str, list[int]] = {op: [] for op in OPS}

    def time(self, op: str, f, *args):
        c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
        out = f(*args)
        self.wall[op].append(time.perf_counter_ns() - w0)
        self.cpu[op].append(time.thread_time_ns() - c0)
        return out


def run_floor(path: str, ops: list[tuple], threads: int, clock: Clock, delete: bool = True) -> None:
    """The raw statements: the rows Python's saver writes (same encoding,
    same statements), encoded before the clock starts."""
    from langgraph.checkpoint.base import WRITES_IDX_MAP, get_checkpoint_metadata
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    from langgraph.checkpoint.sqlite import SqliteSaver

    with SqliteSaver.from_conn_string(path) as s:
        s.setup()  # Python's tables, exactly
    serde = JsonPlusSerializer()
    rows = []
    for cfg, cp, md, _nv, writes, task_id, task_path in ops:
        conf = cfg["configurable"]
        tag, data = serde.dumps_typed(cp)
        meta = json.dumps(get_checkpoint_metadata(cfg, md), ensure_ascii=False).encode("utf-8", "ignore")
        w = [(conf["thread_id"], "", cp["id"], task_id, task_path, WRITES_IDX_MAP.get(ch, i), ch,
              *serde.dumps_typed(v)) for i, (ch, v) in enumerate(writes)]
        replace = all(ch in WRITES_IDX_MAP for ch, _ in writes)
        rows.append(((conf["thread_id"], "", cp["id"], conf.get("checkpoint_id"), tag, data, meta), w, replace))
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")

    def put(row):
        conn.execute("BEGIN")
        conn.execute("INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
                     "parent_checkpoint_id, type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)", row)
        conn.execute("COMMIT")

    def put_writes(w, replace):
        conn.execute("BEGIN")
        conn.executemany(("INSERT OR REPLACE" if replace else "INSERT OR IGNORE") + " INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, "
                         "task_path, idx, channel, type, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", w)
        conn.execute("COMMIT")

    def delete_thread(thread_id):
        conn.execute("BEGIN")
        conn.execute("DELETE FROM checkpoints WHERE thread_id = ?", (thread_id,))
        conn.execute("DELETE FROM writes WHERE thread_id = ?", (thread_id,))
        conn.execute("COMMIT")

    for row, w, replace in rows:
        clock.time("put", put, row)
        clock.time("put_writes", put_writes, w, replace)
    if delete:
        for t in range(threads):
            clock.time("delete_thread", delete_thread, wl.thread_id(t))
    conn.close()


def run_saver(kind: str, path: str, ops: list[tuple], threads: int, clock: Clock, delete: bool = True) -> None:
    if kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver
    else:
        from langgraph_checkpoint_rs.sqlite import SqliteSaver  # type: ignore[no-redef]
    with SqliteSaver.from_conn_string(path) as saver:
        saver.setup()
        if kind == "rs-sqlite-noidx":
            side = sqlite3.connect(path)
            for name in INDEXES:
                side.execute(f"DROP INDEX {name}")
            side.commit()
            side.close()
        for cfg, cp, md, nv, writes, task_id, task_path in ops:
            new_cfg = clock.time("put", saver.put, cfg, cp, md, nv)
            clock.time("put_writes", saver.put_writes, new_cfg, writes, task_id, task_path)
        if not delete:
            return
        for t in range(threads):
            clock.time("delete_thread", saver.delete_thread, wl.thread_id(t))
        assert saver.get_tuple({"configurable": {"thread_id": wl.thread_id(0), "checkpoint_ns": ""}}) is None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=10)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--tmpdir", default=None)
    args = ap.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    for k in kinds:
        if k not in KINDS:
            ap.error(f"unknown kind {k} ({', '.join(KINDS)})")
    ops = workload(args.threads, args.steps, args.seed)
    per: dict[str, list[Clock]] = {k: [] for k in kinds}
    for r in range(args.rounds):
        for kind in kinds if r % 2 == 0 else kinds[::-1]:
            d = tempfile.mkdtemp(prefix="sqlite-floor-", dir=args.tmpdir)
            try:
                clock = Clock()
                path = os.path.join(d, "bench.sqlite")
                if kind == "floor":
                    run_floor(path, ops, args.threads, clock)
                else:
                    run_saver(kind, path, ops, args.threads, clock)
                per[kind].append(clock)
            finally:
                shutil.rmtree(d, ignore_errors=True)
            print(f"round {r + 1}/{args.rounds}: {kind} done", file=sys.stderr, flush=True)

    def med(xs):
        return statistics.median(xs)

    print(f"SQLite writes against their floor (python/bench/sqlite_floor.py): {args.threads} threads x "
          f"{args.steps} steps, {args.rounds} rounds, kinds alternated; us per call, medians over the rounds "
          f"of each round's statistic; spikes = calls over 1.5 ms per round (WAL checkpoints).")
    print()
    print("| kind | op | median call | mean call | median CPU | spikes |")
    print("|---|---|---:|---:|---:|---:|")
    for op in OPS:
        for kind in kinds:
            clocks = per[kind]
            p50 = med([med(c.wall[op]) for c in clocks]) / 1000
            mean = med([statistics.fmean(c.wall[op]) for c in clocks]) / 1000
            cpu = med([med(c.cpu[op]) for c in clocks]) / 1000
            spikes = med([sum(1 for x in c.wall[op] if x > SPIKE_NS) for c in clocks])
            print(f"| {kind} | {op} | {p50:,.1f} | {mean:,.1f} | {cpu:,.1f} | {spikes:g} |")


if __name__ == "__main__":
    main()
