"""One Python racing writer of ``test_race.py``: a LangGraph ``StateGraph``
compiled on a fenced saver of this package, invoked on one thread again and
again while the worker owns it.

Usage: ``python race_worker.py BACKEND WHERE THREAD WRITER LEASE_MS LOG``
(BACKEND ``sqlite`` with WHERE a file, ``postgres`` with a database URL,
``redis`` with ``URL|PREFIX``, the URL a node list for a cluster).

Each turn: ``acquire`` (polled every 20 ms), then ``invoke`` with
``durability="sync"`` until a write is refused (``FencedError``). Every
``put`` and ``put_writes`` the graph makes is logged as it returns or is
refused, one fsync'd line each, in the format of ``examples/race_worker.rs``
(``READY``, ``OWN``, ``PUT``, ``WRITES``, ``REFUSED_PUT``, ``REFUSED_WRITES``,
``ERROR``); a write's token is the one string value a node wrote.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph

from langgraph_checkpoint_rs import (
    Fence,
    FencedError,
    PostgresSaver,
    RedisSaver,
    SqliteSaver,
)


class Log:
    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._lock = threading.Lock()

    def line(self, text: str) -> None:
        stamp = time.time_ns() // 1000
        data = f"{stamp} {text}\n".encode()
        with self._lock:
            os.write(self._fd, data)
            os.fsync(self._fd)


def open_saver(backend: str, where: str, fence: Fence) -> Any:
    if backend == "sqlite":
        return SqliteSaver(where, fence=fence)
    if backend == "postgres":
        return PostgresSaver(where, fence=fence)
    url, prefix = where.split("|", 1)
    return RedisSaver(url, key_prefix=prefix, fence=fence)


def logged(saver: Any, log: Log) -> None:
    """Wraps the saver's ``put`` and ``put_writes`` (the ones the graph
    calls) to log each acknowledgement and each refusal."""
    put, put_writes = saver.put, saver.put_writes

    def logged_put(config: dict, checkpoint: dict, metadata: dict, versions: dict) -> dict:
        cid = checkpoint["id"]
        parent = config["configurable"].get("checkpoint_id") or "-"
        try:
            out = put(config, checkpoint, metadata, versions)
        except FencedError:
            log.line(f"REFUSED_PUT {cid}")
            raise
        log.line(f"PUT {cid} {parent}")
        return out

    def logged_put_writes(config: dict, writes: Any, task_id: str, task_path: str = "") -> None:
        cid = config["configurable"]["checkpoint_id"]
        tokens = [f"{c}={v}" for c, v in writes if isinstance(v, str) and v.startswith("tok:")]
        fields = f"{cid} {task_id} {' '.join(tokens) if tokens else '-'}"
        try:
            put_writes(config, writes, task_id, task_path)
        except FencedError:
            log.line(f"REFUSED_WRITES {fields}")
            raise
        log.line(f"WRITES {fields}")

    saver.put = logged_put
    saver.put_writes = logged_put_writes


class State(TypedDict):
    last: str
    n: int


def graph(saver: Any, writer: str) -> Any:
    counter = iter(range(1, 1 << 62))

    def node(name: str):
        def run(state: State) -> dict:
            # a node's work, and a token naming this execution
            time.sleep(random.uniform(0, 0.01))
            return {"last": f"tok:{writer}:{name}{next(counter)}", "n": state.get("n", 0) + 1}

        return run

    builder = StateGraph(State)
    builder.add_node("plan", node("plan"))
    builder.add_node("act", node("act"))
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=saver)


def main() -> None:
    backend, where, thread, writer, lease_ms, log_path = sys.argv[1:7]
    log = Log(log_path)
    try:
        saver = open_saver(backend, where, Fence(writer=writer, lease_seconds=int(lease_ms) / 1000))
        logged(saver, log)
        app = graph(saver, writer)
        cfg = {"configurable": {"thread_id": thread}}
        log.line("READY")
        turn = 0
        while True:
            while True:
                try:
                    lease = saver.acquire(thread)
                    break
                except FencedError:
                    time.sleep(0.02)
            log.line(f"OWN {lease.epoch}")
            try:
                while True:
                    turn += 1
                    app.invoke({"last": f"input:{writer}:{turn}", "n": 0}, cfg, durability="sync")
            except FencedError:
                continue
    except BaseException as e:  # noqa: BLE001 - logged for the harness, then fatal
        log.line("ERROR " + repr(e).replace("\n", " "))
        raise SystemExit(1) from e


if __name__ == "__main__":
    main()
