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
    plan, state as send's:
        START -> plan -(Send("worker", {"item": i}) per item of the plan)-> worker -> sum -> END
        plan doubles the input items; worker and sum as send's worker and reduce
    route_join, state as join's:
        START -> a;  a -(route: "b", or END when the input was "skip")-> b;
        a and b -> c (add_edge(["a", "b"], "c"));  b -> END;  c -> END
        (a writes the join's barrier before its conditional edge's trigger)

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


def plan(state: SendState) -> dict:
    return {"items": [i * 2 for i in state["items"]]}


def build_plan(saver: SqliteSaver):
    g = StateGraph(SendState)
    g.add_node("plan", plan)
    g.add_node("worker", worker)
    g.add_node("sum", reduce)
    g.add_edge(START, "plan")
    g.add_conditional_edges("plan", fan, ["worker"])
    g.add_edge("worker", "sum")
    g.add_edge("sum", END)
    return g.compile(checkpointer=saver)


def route(state: JoinState) -> str:
    # the entry before a's own is the run's input
    return END if state["log"][-2:-1] == ["skip"] else "b"


def build_route_join(saver: SqliteSaver):
    g = StateGraph(JoinState)
    for tag in ("a", "b", "c"):
        g.add_node(tag, logger(tag))
    g.add_edge(START, "a")
    g.add_conditional_edges("a", route, ["b", END])
    g.add_edge(["a", "b"], "c")
    g.add_edge("b", END)
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


GRAPHS = {"send": build_send, "join": build_join, "plan": build_plan, "route_join": build_route_join}


def main() -> None:
    peer.graph_main(__doc__, GRAPHS, cmd_run, cmd_resume)


if __name__ == "__main__":
    main()
