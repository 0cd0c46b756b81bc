#!/usr/bin/env python3
"""Concurrent LangGraph graphs on async checkpoint savers: langgraph-checkpoint-rs
against LangGraph's own savers, and against a saver that stores nothing.

N asyncio tasks (--tasks, default 16; a comma list runs each count) each run
a small agent-like StateGraph --runs times (``ainvoke``) on a thread id of
their own, all at once, and the aggregate graph runs/s is measured.  Every
sample does the same work whatever N is: --threads conversations (default:
the largest task count) of --runs runs each, split over the N tasks (task i
takes threads i, i+N, ...), so "--tasks 1,16" compares one conversation at a
time (single-task latency) with 16 at once on identical work.  The
graph: START -> agent -> tools -> respond -> END over

    messages: Annotated[list, operator.add]   (langchain_core messages)
    turn: int, status: str, score: float       (scalar channels)

Each run appends a HumanMessage (the input), an AIMessage with a tool call
(agent), a ToolMessage (tools) and a final AIMessage (respond): about 200-400
bytes of payload per step, and the thread's history grows by 4 messages a run
(a conversation).  A run is 5 graph steps (supersteps: input, __start__ and
the 3 nodes), so 5 checkpoints and 4 pending-write batches per run with
durability "sync" or "async" (LangGraph's default, used here unless
--durability says otherwise), plus one aget_tuple when the run starts.

Savers (--savers, default all that are installed and reachable):

    null         stores nothing (aput returns the config, aput_writes does
                 nothing, aget_tuple returns None, alist yields nothing): the
                 cost of the graph alone
    rs-sqlite    langgraph_checkpoint_rs.sqlite.AsyncSqliteSaver, fresh temp file
    py-sqlite    langgraph.checkpoint.sqlite.aio.AsyncSqliteSaver, fresh temp
                 file (one aiosqlite connection, as it always has)
    rs-postgres  langgraph_checkpoint_rs.postgres.AsyncPostgresSaver
                 (max_connections=--pg-pool) on --pg-url, tables dropped, setup()
    py-postgres  langgraph.checkpoint.postgres.aio.AsyncPostgresSaver(conn=pool),
                 psycopg_pool.AsyncConnectionPool of --pg-pool connections
                 (autocommit, prepare_threshold=0, dict_row, as LangGraph's docs
                 set a pool up) on the same database, tables dropped, setup()
    rs-redis     langgraph_checkpoint_rs.redis.AsyncRedisSaver, fresh key prefix
    py-redis     langgraph_checkpoint_plainredis.AsyncRedisSaver (if installed),
                 fresh key prefix

Both SQLite savers run WAL with synchronous=FULL (one commit per write);
both Postgres savers write to the same server and database with the
server's synchronous_commit; both Redis savers to the same server; the same
durability for every saver.  Each sample opens the saver on fresh storage,
lets every task run the graph once on a warm-up thread (untimed; pools fill),
then times the N tasks' --runs runs each; after it, one thread's state is
read back and checked (4 messages per run).  Samples go round by round
(--rounds): in each round, for each task count, every saver once, the
order rotated from round to round.

Reported per (saver, tasks), medians over the rounds: runs/s (all tasks
together), us per step (wall time / graph steps run, all tasks together; with
--tasks 1 it is a single task's latency), and the time the saver adds to a
graph step = us per step with the saver - us per step with the null saver
(paired within each round), run latency p50/p99, and the process's CPU time
per step (all threads: the event loop, aiosqlite's thread, the Rust
runtime's; servers not included).  Output: one JSON line per (saver, tasks)
on stdout (and appended to --out), then a Markdown table (also written to
--table) with the ratios ours/Python and the issue's targets: with 16 tasks
>= 2x Python's runs/s on SQLite and PostgreSQL, and the time our saver adds
to a step at most half of what Python's adds.

Usage (a venv with langgraph-checkpoint-rs and the peers of
testdata/peer/VERSIONS.txt + scripts/peer-extra.txt, e.g. the one
scripts/python-package-bench.sh makes):

    python python/bench/bench_async.py --pg-url postgresql://postgres@127.0.0.1:5432/ckpt_bench_py_x
    python python/bench/bench_async.py --savers null,rs-sqlite,py-sqlite --tasks 1,16 --runs 10 --rounds 5
    python python/bench/bench_async.py --tasks 1 --runs 40        # single-task latency

WARNING: the postgres savers drop and recreate LangGraph's checkpoint tables
in --pg-url's database.  Redis: keys under fresh prefixes only, deleted after
each sample (never FLUSHDB).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import hashlib
import json
import operator
import os
import platform
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.graph import END, START, StateGraph

ALL_SAVERS = ["null", "rs-sqlite", "py-sqlite", "rs-postgres", "py-postgres", "rs-redis", "py-redis"]
# backend -> (ours, Python's); the targets (None: ratio shown, not judged)
PAIRS = [("sqlite", "rs-sqlite", "py-sqlite"), ("postgres", "rs-postgres", "py-postgres"),
         ("redis", "rs-redis", "py-redis")]
RUNS_TARGET = {"sqlite": 2.0, "postgres": 2.0, "redis": None}  # ours/Python runs/s at 16 tasks
ADDED_TARGET = 0.5  # ours added us/step <= 0.5 x Python's
PG_TABLES = ["checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations"]


# --------------------------------------------------------------------------
# The graph
# --------------------------------------------------------------------------


class AgentState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], operator.add]
    turn: int
    status: str
    score: float


def text(key: str, n: int) -> str:
    """n characters of deterministic text (hex of sha256 chains)."""
    out, i = [], 0
    while sum(map(len, out)) < n:
        out.append(hashlib.sha256(f"{key}:{i}".encode()).hexdigest())
        i += 1
    return "".join(out)[:n]


async def agent(state: AgentState) -> AgentState:
    turn = state.get("turn", 0) + 1
    question = state["messages"][-1].content
    return {
        "messages": [
            AIMessage(
                content=f"I will look that up. {text('agent:' + question[:16], 160)}",
                tool_calls=[{"name": "search", "args": {"query": question[:80], "k": 3}, "id": f"call-{turn}"}],
            )
        ],
        "turn": turn,
        "status": "calling_tool",
    }


async def tools(state: AgentState) -> AgentState:
    call = state["messages"][-1].tool_calls[0]
    return {
        "messages": [ToolMessage(content=text("tool:" + call["args"]["query"], 280), tool_call_id=call["id"], name="search")],
        "status": "tool_done",
    }


async def respond(state: AgentState) -> AgentState:
    turn = state["turn"]
    return {
        "messages": [AIMessage(content=f"Here is what I found: {text(f'answer:{turn}:' + state['messages'][-1].content[:16], 220)}")],
        "status": "answered",
        "score": turn * 0.25,
    }


def build_graph(saver: BaseCheckpointSaver) -> Any:
    g = StateGraph(AgentState)
    g.add_node("agent", agent)
    g.add_node("tools", tools)
    g.add_node("respond", respond)
    g.add_edge(START, "agent")
    g.add_edge("agent", "tools")
    g.add_edge("tools", "respond")
    g.add_edge("respond", END)
    return g.compile(checkpointer=saver)


def user_input(task: int, run: int) -> AgentState:
    return {"messages": [HumanMessage(content=f"Question {run} of task {task}: {text(f'q:{task}:{run}', 120)}")]}


# --------------------------------------------------------------------------
# Savers
# --------------------------------------------------------------------------


class NullSaver(BaseCheckpointSaver[str]):
    """Stores nothing: the graph's own cost, the baseline of 'time added'.
    Counts its calls (steps per run)."""

    def __init__(self) -> None:
        super().__init__()
        self.puts = 0
        self.write_batches = 0

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return None

    async def alist(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
                    before: RunnableConfig | None = None, limit: int | None = None) -> AsyncIterator[CheckpointTuple]:
        return
        yield  # an async generator that yields nothing

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                   new_versions: ChannelVersions) -> RunnableConfig:
        self.puts += 1
        c = config["configurable"]
        return {"configurable": {"thread_id": c["thread_id"], "checkpoint_ns": c.get("checkpoint_ns", ""),
                                 "checkpoint_id": checkpoint["id"]}}

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                          task_path: str = "") -> None:
        self.write_batches += 1

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return None

    def list(self, config: RunnableConfig | None, **kwargs: Any) -> Iterator[CheckpointTuple]:
        return iter(())

    def get_next_version(self, current: str | int | None, channel: None = None) -> str:
        # the format (and cost) of the real savers' versions
        v = 0 if current is None else current if isinstance(current, int) else int(current.split(".")[0])
        return f"{v + 1:032}.{random.random():016}"


def redis_unlink_prefix(url: str, prefix: str) -> int:
    import redis

    c = redis.Redis.from_url(url)
    try:
        pat = "".join("\\" + ch if ch in "*?[]\\" else ch for ch in prefix) + ":*"
        keys = list(c.scan_iter(match=pat, count=1000))
        for i in range(0, len(keys), 500):
            c.unlink(*keys[i : i + 500])
        return len(keys)
    finally:
        c.close()


async def drop_pg_tables(url: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as c:
        for tbl in PG_TABLES:
            await c.execute(f"DROP TABLE IF EXISTS {tbl} CASCADE")


@contextlib.asynccontextmanager
async def open_saver(kind: str, args: argparse.Namespace) -> AsyncIterator[BaseCheckpointSaver]:
    """The saver on fresh storage; cleans the storage up afterwards."""
    if kind == "null":
        yield NullSaver()
    elif kind in ("rs-sqlite", "py-sqlite"):
        tmp = tempfile.mkdtemp(prefix="bench-async-", dir=args.tmpdir)
        path = os.path.join(tmp, "bench.sqlite")
        try:
            if kind == "rs-sqlite":
                from langgraph_checkpoint_rs.sqlite import AsyncSqliteSaver
            else:
                from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
            async with AsyncSqliteSaver.from_conn_string(path) as saver:
                await saver.setup()
                yield saver
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    elif kind == "rs-postgres":
        from langgraph_checkpoint_rs.postgres import AsyncPostgresSaver

        await drop_pg_tables(args.pg_url)
        async with AsyncPostgresSaver.from_conn_string(args.pg_url, max_connections=args.pg_pool) as saver:
            await saver.setup()
            yield saver
    elif kind == "py-postgres":
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool

        await drop_pg_tables(args.pg_url)
        pool = AsyncConnectionPool(
            args.pg_url, min_size=args.pg_pool, max_size=args.pg_pool, open=False,
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        )
        await pool.open(wait=True)
        try:
            saver = AsyncPostgresSaver(conn=pool)
            await saver.setup()
            yield saver
        finally:
            await pool.close()
    elif kind in ("rs-redis", "py-redis"):
        prefix = f"bench-async-{kind}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            if kind == "rs-redis":
                from langgraph_checkpoint_rs.redis import AsyncRedisSaver

                async with AsyncRedisSaver.from_conn_string(args.redis_url, key_prefix=prefix) as saver:
                    yield saver
            else:
                from langgraph_checkpoint_plainredis import AsyncRedisSaver as PlainAsyncRedisSaver

                saver = PlainAsyncRedisSaver(url=args.redis_url, prefix=prefix)
                try:
                    yield saver
                finally:
                    await saver.aclose()
        finally:
            redis_unlink_prefix(args.redis_url, prefix)
    else:
        raise ValueError(f"unknown saver {kind!r} ({', '.join(ALL_SAVERS)})")


def available(kind: str) -> str | None:
    """None if the saver can run here, else why not."""
    mod = {"rs-sqlite": "langgraph_checkpoint_rs.sqlite", "py-sqlite": "langgraph.checkpoint.sqlite.aio",
           "rs-postgres": "langgraph_checkpoint_rs.postgres", "py-postgres": "langgraph.checkpoint.postgres.aio",
           "rs-redis": "langgraph_checkpoint_rs.redis", "py-redis": "langgraph_checkpoint_plainredis"}.get(kind)
    if mod:
        try:
            __import__(mod)
        except ImportError as e:
            return f"{mod} is not installed ({e})"
    return None


# --------------------------------------------------------------------------
# One sample
# --------------------------------------------------------------------------


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def sample(kind: str, tasks: int, threads: int, args: argparse.Namespace, steps_per_run: int,
                 tag: str) -> dict[str, Any]:
    async with open_saver(kind, args) as saver:
        graph = build_graph(saver)
        cfg_of = lambda tid: {"configurable": {"thread_id": tid}}  # noqa: E731
        # warm-up: one run per task on threads of their own (pools fill, caches warm)
        await asyncio.gather(*(graph.ainvoke(user_input(i, 0), cfg_of(f"{tag}-warm-{i}"), durability=args.durability)
                               for i in range(tasks)))
        gc.collect()
        latencies: list[int] = []
        pc = time.perf_counter_ns

        async def task(i: int) -> None:
            for t in range(i, threads, tasks):  # this task's conversations, one after another
                cfg = cfg_of(f"{tag}-thread-{t}")
                for r in range(args.runs):
                    t0 = pc()
                    await graph.ainvoke(user_input(t, r), cfg, durability=args.durability)
                    latencies.append(pc() - t0)

        gc_was = gc.isenabled()
        c0, l0, w0 = cpu_s(), time.thread_time(), pc()
        await asyncio.gather(*(task(i) for i in range(tasks)))
        wall_ns = pc() - w0
        cpu, loop_cpu = cpu_s() - c0, time.thread_time() - l0
        assert gc.isenabled() == gc_was
        if kind != "null":
            # what was stored reads back: 4 messages per run on one task's thread
            st = await graph.aget_state(cfg_of(f"{tag}-thread-{threads - 1}"))
            n = len(st.values["messages"])
            assert n == 4 * args.runs, (kind, n)
            assert st.values["turn"] == args.runs, (kind, st.values["turn"])
    runs = threads * args.runs
    assert len(latencies) == runs
    steps = runs * steps_per_run
    lat = sorted(latencies)
    return {
        "runs_per_s": runs / (wall_ns / 1e9),
        "us_per_step": wall_ns / 1e3 / steps,
        "wall_s": wall_ns / 1e9,
        "run_p50_ms": lat[len(lat) // 2] / 1e6,
        "run_p99_ms": lat[min(len(lat) - 1, len(lat) * 99 // 100)] / 1e6,
        "cpu_us_per_step": cpu * 1e6 / steps,
        "loop_cpu_us_per_step": loop_cpu * 1e6 / steps,
    }


async def steps_per_run_of_graph() -> tuple[int, int]:
    """Checkpoints and write batches of one run (durability "sync")."""
    null = NullSaver()
    await build_graph(null).ainvoke(user_input(0, 0), {"configurable": {"thread_id": "count"}}, durability="sync")
    return null.puts, null.write_batches


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def fmt_ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def markdown(summary: dict[tuple[str, int], dict], task_counts: list[int], args: argparse.Namespace,
             steps_per_run: int, threads: int, load_start: tuple, load_end: tuple) -> str:
    lines = [
        f"Concurrent StateGraph runs (python/bench/bench_async.py): per sample {threads} conversations x "
        f"{args.runs} runs, split over the tasks; {steps_per_run} steps per run, durability {args.durability!r}, "
        f"medians of {args.rounds} rounds (load average {load_start[0]:.1f} at the start, {load_end[0]:.1f} at the end); "
        "added = us per step with the saver - with the null saver (paired per round). "
        f"Targets: runs/s ours/Python >= 2x with 16 tasks (SQLite, PostgreSQL); added ours/Python <= {ADDED_TARGET}.",
        "",
        "| tasks | backend | runs/s ours | runs/s Python | ours/Python | added us/step ours | added us/step Python "
        "| ours/Python added | run p50 ms ours / Python | CPU us/step ours / Python |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in task_counts:
        null = summary.get(("null", n))
        if null:
            lines.append(f"| {n} | null (graph alone) | {null['runs_per_s']:,.1f} | | | "
                         f"{null['us_per_step']:,.0f} us/step | | | {null['run_p50_ms']:,.2f} | "
                         f"{null['cpu_us_per_step']:,.0f} |")
        for backend, ours_k, py_k in PAIRS:
            o, p = summary.get((ours_k, n)), summary.get((py_k, n))
            if not o and not p:
                continue
            cell = lambda r, key, f: "-" if not r or r.get(key) is None else f.format(r[key])  # noqa: E731
            ratio = o["runs_per_s"] / p["runs_per_s"] if o and p else None
            rt = RUNS_TARGET[backend]
            judge = ""
            if ratio is not None and rt is not None and n == 16:
                judge = " ok" if ratio >= rt else " MISS"
            added_ratio = None
            ajudge = ""
            if o and p and o.get("added_us_per_step") is not None and p.get("added_us_per_step"):
                added_ratio = o["added_us_per_step"] / p["added_us_per_step"]
                if RUNS_TARGET[backend] is not None:
                    ajudge = " ok" if added_ratio <= ADDED_TARGET else " MISS"
            py_name = {"sqlite": "aiosqlite", "postgres": f"pool {args.pg_pool}", "redis": "plainredis"}[backend]
            lines.append(
                f"| {n} | {backend} (Python: {py_name}) | {cell(o, 'runs_per_s', '{:,.1f}')} | {cell(p, 'runs_per_s', '{:,.1f}')} "
                f"| {fmt_ratio(ratio)}{judge} | {cell(o, 'added_us_per_step', '{:,.0f}')} "
                f"| {cell(p, 'added_us_per_step', '{:,.0f}')} | {fmt_ratio(added_ratio)}{ajudge} "
                f"| {cell(o, 'run_p50_ms', '{:,.2f}')} / {cell(p, 'run_p50_ms', '{:,.2f}')} "
                f"| {cell(o, 'cpu_us_per_step', '{:,.0f}')} / {cell(p, 'cpu_us_per_step', '{:,.0f}')} |"
            )
    return "\n".join(lines) + "\n"


def pkg_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for p in ["langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite", "langgraph-checkpoint-postgres",
              "langgraph-checkpoint-plainredis", "langgraph-checkpoint-rs", "langchain-core", "aiosqlite",
              "psycopg", "psycopg-pool", "redis", "ormsgpack"]:
        with contextlib.suppress(PackageNotFoundError):
            out[p] = version(p)
    return out


async def amain(args: argparse.Namespace) -> None:
    savers = [k.strip() for k in args.savers.split(",") if k.strip()]
    for k in savers:
        if k not in ALL_SAVERS:
            sys.exit(f"unknown saver {k!r} ({', '.join(ALL_SAVERS)})")
    if "null" not in savers:
        savers.insert(0, "null")  # the baseline of "added"
    kept = []
    for k in savers:
        why = available(k)
        if why:
            print(f"[bench_async] leaving out {k}: {why}", file=sys.stderr)
        else:
            kept.append(k)
    savers = kept
    task_counts = [int(x) for x in str(args.tasks).split(",") if x.strip()]
    threads = args.threads or max(task_counts)
    if threads < max(task_counts):
        sys.exit("--threads must be at least the largest --tasks")
    load_start = os.getloadavg()
    steps_per_run, write_batches = await steps_per_run_of_graph()
    samples: dict[tuple[str, int], list[dict]] = {}
    for rnd in range(args.rounds):
        for n in task_counts:
            rot = rnd % len(savers)
            order = savers[rot:] + savers[:rot]
            for k in order:
                tag = f"r{rnd}-n{n}-{uuid.uuid4().hex[:6]}"
                s = await sample(k, n, threads, args, steps_per_run, tag)
                samples.setdefault((k, n), []).append(s)
                print(f"[bench_async] round {rnd + 1}/{args.rounds} tasks {n} {k}: {s['runs_per_s']:,.1f} runs/s, "
                      f"{s['us_per_step']:,.0f} us/step, run p50 {s['run_p50_ms']:.2f} ms", file=sys.stderr, flush=True)
    load_end = os.getloadavg()
    summary: dict[tuple[str, int], dict] = {}
    versions = pkg_versions()
    rows = []
    for n in task_counts:
        null = samples.get(("null", n))
        for k in savers:
            ss = samples[(k, n)]
            row: dict[str, Any] = {
                "bench": "bench_async",
                "saver": k,
                "tasks": n,
                "threads": threads,
                "runs_per_thread": args.runs,
                "rounds": args.rounds,
                "durability": args.durability,
                "steps_per_run": steps_per_run,
                "write_batches_per_run": write_batches,
                "runs_per_s": round(med([s["runs_per_s"] for s in ss]), 2),
                "runs_per_s_each_round": [round(s["runs_per_s"], 2) for s in ss],
                "us_per_step": round(med([s["us_per_step"] for s in ss]), 1),
                "run_p50_ms": round(med([s["run_p50_ms"] for s in ss]), 3),
                "run_p99_ms": round(med([s["run_p99_ms"] for s in ss]), 3),
                "cpu_us_per_step": round(med([s["cpu_us_per_step"] for s in ss]), 1),
                "loop_cpu_us_per_step": round(med([s["loop_cpu_us_per_step"] for s in ss]), 1),
            }
            if null and k != "null":
                added = [s["us_per_step"] - b["us_per_step"] for s, b in zip(ss, null)]
                row["added_us_per_step"] = round(med(added), 1)
                row["added_us_per_step_each_round"] = [round(a, 1) for a in added]
            if k == "py-postgres":
                row["pool"] = args.pg_pool
            if k == "rs-postgres":
                row["max_connections"] = args.pg_pool
            if k.startswith("rs-"):
                row["langgraph_rs_workers"] = os.environ.get("LANGGRAPH_RS_WORKERS", "2 (default)")
            row["loadavg_start_end"] = [round(x, 2) for x in load_start + load_end]
            row["versions"] = versions
            row["python"] = platform.python_version()
            summary[(k, n)] = row
            rows.append(row)
    text_out = "".join(json.dumps(r) + "\n" for r in rows)
    sys.stdout.write(text_out)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text_out)
    table = markdown(summary, task_counts, args, steps_per_run, threads, load_start, load_end)
    sys.stdout.write("\n" + table)
    if args.table:
        with open(args.table, "w") as f:
            f.write(table)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--savers", default=",".join(ALL_SAVERS), help=f"comma list of {','.join(ALL_SAVERS)} (null is always run)")
    ap.add_argument("--tasks", default="16", help="concurrent asyncio tasks; a comma list runs each (default 16; 1 = single-task latency)")
    ap.add_argument("--runs", type=int, default=10, help="graph runs (ainvoke) per conversation (thread id) (default 10)")
    ap.add_argument("--threads", type=int, default=None,
                    help="conversations per sample, split over the tasks (default: the largest --tasks)")
    ap.add_argument("--rounds", type=int, default=3, help="samples per (saver, tasks), interleaved; medians reported (default 3)")
    ap.add_argument("--durability", default="async", choices=["async", "sync", "exit"],
                    help="LangGraph's durability for every saver (default async, LangGraph's default)")
    ap.add_argument("--pg-url", default=os.environ.get("PEER_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
                    help="PostgreSQL database of both Postgres savers (default $PEER_PG_URL). "
                         "WARNING: drops and recreates the checkpoint tables there.")
    ap.add_argument("--pg-pool", type=int, default=16, help="connections of each Postgres saver's pool (default 16)")
    ap.add_argument("--redis-url", default=os.environ.get("PEER_REDIS_URL", "redis://127.0.0.1:6379"),
                    help="Redis server of both Redis savers (default $PEER_REDIS_URL or redis://127.0.0.1:6379)")
    ap.add_argument("--tmpdir", default=None, help="parent dir of the SQLite temp dirs (default: system temp)")
    ap.add_argument("--out", default=None, help="also append the JSON lines to this file")
    ap.add_argument("--table", default=None, help="also write the Markdown table to this file")
    args = ap.parse_args()
    asyncio.run(amain(args))


if __name__ == "__main__":
    main()
