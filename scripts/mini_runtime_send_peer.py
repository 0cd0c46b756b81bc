#!/usr/bin/env python3
"""Python LangGraph peer for the mini runtime's Send and join graphs.

The same graphs as examples/mini_runtime/send_graphs.rs, run by the real
LangGraph runtime over Python's SqliteSaver, so each side can read and
continue the other's threads. Reuses mini_runtime_peer.py's dump and history.

Graphs:

    send (map-reduce), state {items: list, results: list (operator.add), total: int}:
        START -(Send("worker", {"item": i}) per item)-> worker -> reduce -> END
        worker on a negative item asks interrupt({"question": "keep <item>?"})
    join, state {log: list (operator.add)}:
        START -> a -> b;  a and b -> c (add_edge(["a", "b"], "c"));  c -> END

Every run uses durability="sync": with the default ("async") Python stores
a join barrier's set object while the next step is already adding to it,
so the stored set depends on thread timing.

Usage (every subcommand prints one JSON document on stdout):

    mini_runtime_send_peer.py run     --graph G --db F --thread T --input JSON
    mini_runtime_send_peer.py resume  --graph G --db F --thread T --answer A
    mini_runtime_send_peer.py history --graph G --db F --thread T
    mini_runtime_send_peer.py dump    --db F [--thread T] [--hex]
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import sys
from typing import Annotated, Any, TypedDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mini_runtime_peer as peer  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.types import Command, Send, interrupt  # noqa: E402

_plain_jsonable = peer.jsonable


def jsonable(obj: Any) -> Any:
    """The peer's rendering, with a Send's node and arg visible."""
    if isinstance(obj, Send):
        return {"__type__": "langgraph.types.Send", "node": obj.node, "arg": jsonable(obj.arg)}
    return _plain_jsonable(obj)


# the peer's dump and history render through this one
peer.jsonable = jsonable


class SendState(TypedDict):
    items: list
    results: Annotated[list, operator.add]
    total: int


def fan(state: SendState) -> list:
    return [Send("worker", {"item": i}) for i in state["items"]]


def worker(arg: dict) -> dict:
    item = arg["item"]
    if item < 0:
        answer = interrupt({"question": f"keep {item}?"})
        return {"results": [-item * 10] if answer == "yes" else []}
    return {"results": [item * 10]}


def reduce(state: SendState) -> dict:
    return {"total": sum(state["results"])}


def build_send(saver: SqliteSaver):
    g = StateGraph(SendState)
    g.add_node("worker", worker)
    g.add_node("reduce", reduce)
    g.add_conditional_edges(START, fan, ["worker"])
    g.add_edge("worker", "reduce")
    g.add_edge("reduce", END)
    return g.compile(checkpointer=saver)


class JoinState(TypedDict):
    log: Annotated[list, operator.add]


def logger(tag: str):
    return lambda state: {"log": [tag]}


def build_join(saver: SqliteSaver):
    g = StateGraph(JoinState)
    for tag in ("a", "b", "c"):
        g.add_node(tag, logger(tag))
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge(["a", "b"], "c")
    g.add_edge("c", END)
    return g.compile(checkpointer=saver)


def cmd_run(args, graph) -> Any:
    cfg = peer.config_for(args.thread)
    graph.invoke(json.loads(args.input), cfg, durability="sync")
    return peer.state_json(graph, cfg)


def cmd_resume(args, graph) -> Any:
    cfg = peer.config_for(args.thread)
    graph.invoke(Command(resume=args.answer), cfg, durability="sync")
    return peer.state_json(graph, cfg)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name, extra in (("run", "--input"), ("resume", "--answer"), ("history", None)):
        p = sub.add_parser(name)
        p.add_argument("--graph", required=True, choices=["send", "join"])
        p.add_argument("--db", required=True)
        p.add_argument("--thread", required=True)
        if extra:
            p.add_argument(extra, required=True)
    p = sub.add_parser("dump")
    p.add_argument("--db", required=True)
    p.add_argument("--thread")
    p.add_argument("--hex", action="store_true")
    args = parser.parse_args()

    with SqliteSaver.from_conn_string(args.db) as saver:
        if args.cmd == "dump":
            saver.setup()
            out = peer.cmd_dump(args, saver)
        else:
            graph = {"send": build_send, "join": build_join}[args.graph](saver)
            out = {"run": cmd_run, "resume": cmd_resume, "history": peer.cmd_history}[args.cmd](args, graph)
    json.dump(out, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
