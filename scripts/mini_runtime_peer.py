#!/usr/bin/env python3
"""Python LangGraph peer for examples/mini_runtime.rs.

The same small graph as the Rust mini runtime, run by the real LangGraph
runtime over Python's SqliteSaver, so each side can read and continue the
other's threads.

Graph (state {messages: list of {"id", "role", "content"} merged by id}):

    START -> agent -(route)-> tools | review | END
    tools  (a subgraph: START -> lookup -> END) -> agent
    review (interrupt({"question": "send the answer?"})) -> END

Usage (every subcommand prints one JSON document on stdout):

    mini_runtime_peer.py run     --db F --thread T --input TEXT
    mini_runtime_peer.py resume  --db F --thread T --answer A
    mini_runtime_peer.py history --db F --thread T
    mini_runtime_peer.py dump    --db F [--thread T] [--hex]

`dump` decodes every row of the `checkpoints` and `writes` tables with the
saver's serde; `--hex` also prints each checkpoint blob in hex (write blobs
are always printed in hex, next to their `type` column).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sqlite3
import sys
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Interrupt, interrupt


def add_by_id(left: list | None, right: list | None) -> list:
    """Merge messages by id: a known id is replaced in place, others appended."""
    merged = list(left or [])
    index = {m["id"]: i for i, m in enumerate(merged)}
    for m in right or []:
        if m["id"] in index:
            merged[index[m["id"]]] = m
        else:
            index[m["id"]] = len(merged)
            merged.append(m)
    return merged


class State(TypedDict):
    messages: Annotated[list, add_by_id]


def agent(state: State) -> dict:
    messages = state["messages"]
    m = messages[-1]
    if m["role"] == "user" and "weather" in m["content"]:
        content = "calling the weather tool"
    elif m["role"] == "tool":
        content = "answer: " + m["content"]
    else:
        content = "echo: " + m["content"]
    return {"messages": [{"id": f"ai-{len(messages)}", "role": "ai", "content": content}]}


def route(state: State) -> str:
    m = state["messages"][-1]
    if m["role"] == "ai" and m["content"] == "calling the weather tool":
        return "tools"
    if m["content"].startswith("answer: "):
        return "review"
    return END


def lookup(state: State) -> dict:
    messages = state["messages"]
    return {
        "messages": [
            {"id": f"tool-{len(messages)}", "role": "tool", "content": "sunny in Paris"}
        ]
    }


def review(state: State) -> dict:
    messages = state["messages"]
    answer = interrupt({"question": "send the answer?"})
    return {
        "messages": [
            {
                "id": f"ai-{len(messages)}",
                "role": "ai",
                "content": "sent" if answer == "yes" else "discarded",
            }
        ]
    }


def build(saver: SqliteSaver):
    sub = StateGraph(State)
    sub.add_node("lookup", lookup)
    sub.add_edge(START, "lookup")
    sub.add_edge("lookup", END)
    subgraph = sub.compile()  # no checkpointer: inherits the parent's

    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_node("tools", subgraph)
    builder.add_node("review", review)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", "review", END])
    builder.add_edge("tools", "agent")
    builder.add_edge("review", END)
    return builder.compile(checkpointer=saver)


def jsonable(obj: Any) -> Any:
    """Turn decoded checkpoint values into JSON, keeping extension objects visible."""
    if isinstance(obj, Interrupt):
        return {
            "__type__": "langgraph.types.Interrupt",
            "__repr__": repr(obj),
            "value": jsonable(obj.value),
            "id": obj.id,
            "response_schema": jsonable(obj.response_schema),
        }
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return {"__set__": sorted(jsonable(v) for v in obj)}
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return {"__bytes_hex__": bytes(obj).hex()}
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    if dataclasses.is_dataclass(obj):
        return {
            "__type__": f"{type(obj).__module__}.{type(obj).__name__}",
            "__repr__": repr(obj),
            **{f.name: jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)},
        }
    return {"__type__": f"{type(obj).__module__}.{type(obj).__name__}", "__repr__": repr(obj)}


def config_for(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


def state_json(graph, cfg) -> dict:
    snap = graph.get_state(cfg)
    return {
        "values": jsonable(snap.values),
        "next": list(snap.next),
        "interrupted": bool(snap.interrupts),
        "interrupts": [
            {"id": i.id, "value": jsonable(i.value)} for i in snap.interrupts
        ],
        "checkpoint_id": snap.config["configurable"].get("checkpoint_id"),
    }


def cmd_run(args, graph) -> Any:
    cfg = config_for(args.thread)
    before = graph.get_state(cfg)
    n = len((before.values or {}).get("messages", []))
    graph.invoke(
        {"messages": [{"id": f"user-{n}", "role": "user", "content": args.input}]}, cfg
    )
    return state_json(graph, cfg)


def cmd_resume(args, graph) -> Any:
    cfg = config_for(args.thread)
    graph.invoke(Command(resume=args.answer), cfg)
    return state_json(graph, cfg)


def cmd_update(args, graph) -> Any:
    """`update_state` as node `--as-node` with one message."""
    cfg = config_for(args.thread)
    message = {"id": args.id, "role": args.role, "content": args.content}
    graph.update_state(cfg, {"messages": [message]}, as_node=args.as_node)
    return state_json(graph, cfg)


def cmd_history(args, graph) -> Any:
    out = []
    for snap in graph.get_state_history(config_for(args.thread)):
        parent = snap.parent_config["configurable"]["checkpoint_id"] if snap.parent_config else None
        out.append(
            {
                "checkpoint_id": snap.config["configurable"]["checkpoint_id"],
                "parent_checkpoint_id": parent,
                "step": snap.metadata.get("step"),
                "source": snap.metadata.get("source"),
                "next": list(snap.next),
                "values": jsonable(snap.values),
                "tasks": [
                    {
                        "id": t.id,
                        "name": t.name,
                        "path": jsonable(t.path),
                        "interrupts": [jsonable(i.value) for i in t.interrupts],
                        "interrupt_ids": [i.id for i in t.interrupts],
                    }
                    for t in snap.tasks
                ],
            }
        )
    return out


def cmd_dump(args, saver: SqliteSaver) -> Any:
    conn = sqlite3.connect(args.db)
    where, params = ("WHERE thread_id = ?", (args.thread,)) if args.thread else ("", ())
    checkpoints = []
    for row in conn.execute(
        "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, "
        f"checkpoint, metadata FROM checkpoints {where} "
        "ORDER BY thread_id, checkpoint_id, checkpoint_ns",
        params,
    ):
        thread_id, ns, cid, parent, typ, blob, meta = row
        ckpt = saver.serde.loads_typed((typ, blob))
        item = {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": cid,
            "parent_checkpoint_id": parent,
            "type": typ,
            "metadata": json.loads(meta) if meta is not None else None,
            "checkpoint": jsonable(ckpt),
        }
        if args.hex:
            item["checkpoint_hex"] = bytes(blob).hex()
        checkpoints.append(item)
    writes = []
    for row in conn.execute(
        "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, "
        f"type, value FROM writes {where} "
        "ORDER BY thread_id, checkpoint_id, checkpoint_ns, task_id, idx",
        params,
    ):
        thread_id, ns, cid, task_id, task_path, idx, channel, typ, blob = row
        value = saver.serde.loads_typed((typ, blob))
        writes.append(
            {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": cid,
                "task_id": task_id,
                "task_path": task_path,
                "idx": idx,
                "channel": channel,
                "type": typ,
                "value": jsonable(value),
                "value_repr": repr(value),
                "value_hex": bytes(blob).hex() if blob is not None else None,
            }
        )
    conn.close()
    return {"checkpoints": checkpoints, "writes": writes}


def add_dump_parser(sub) -> None:
    """The `dump` command every peer has: the file's rows, one thread's or all."""
    p = sub.add_parser("dump")
    p.add_argument("--db", required=True)
    p.add_argument("--thread")
    p.add_argument("--hex", action="store_true")


def answer(args, build, commands: dict) -> None:
    """Runs the parsed command on the SQLite file `--db` and prints its
    JSON: `dump` reads the rows, every other command of `commands` gets the
    graph `build(saver)` compiles."""
    with SqliteSaver.from_conn_string(args.db) as saver:
        if args.cmd == "dump":
            saver.setup()
            out = cmd_dump(args, saver)
        else:
            out = commands[args.cmd](args, build(saver))
    json.dump(out, sys.stdout, indent=2)
    sys.stdout.write("\n")


def graph_main(doc: str, graphs: dict, cmd_run, cmd_resume, resume_flags: tuple = ()) -> None:
    """The command line of a peer that runs one of several `graphs`:
    `run --input`, `resume --answer` (plus the boolean `resume_flags`) and
    `history`, each with `--graph --db --thread`, and `dump`."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name, extra in (("run", "--input"), ("resume", "--answer"), ("history", None)):
        p = sub.add_parser(name)
        p.add_argument("--graph", required=True, choices=sorted(graphs))
        p.add_argument("--db", required=True)
        p.add_argument("--thread", required=True)
        if extra:
            p.add_argument(extra, required=True)
        if name == "resume":
            for flag in resume_flags:
                p.add_argument(flag, action="store_true")
    add_dump_parser(sub)
    args = parser.parse_args()
    commands = {"run": cmd_run, "resume": cmd_resume, "history": cmd_history}
    answer(args, lambda saver: graphs[args.graph](saver), commands)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("run")
    p.add_argument("--db", required=True)
    p.add_argument("--thread", required=True)
    p.add_argument("--input", required=True)
    p = sub.add_parser("resume")
    p.add_argument("--db", required=True)
    p.add_argument("--thread", required=True)
    p.add_argument("--answer", required=True)
    p = sub.add_parser("update")
    p.add_argument("--db", required=True)
    p.add_argument("--thread", required=True)
    p.add_argument("--as-node", required=True)
    p.add_argument("--id", required=True)
    p.add_argument("--role", required=True)
    p.add_argument("--content", required=True)
    p = sub.add_parser("history")
    p.add_argument("--db", required=True)
    p.add_argument("--thread", required=True)
    add_dump_parser(sub)
    args = parser.parse_args()
    answer(args, build, {"run": cmd_run, "resume": cmd_resume, "update": cmd_update, "history": cmd_history})


if __name__ == "__main__":
    main()
