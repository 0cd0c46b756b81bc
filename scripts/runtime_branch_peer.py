#!/usr/bin/env python3
"""Python LangGraph peer for two more graphs of the Rust mini runtime
(examples/mini_runtime/publish.rs and chat.rs), run by the real LangGraph
runtime over Python's SqliteSaver; the rows, the dump and the history come
out in the shapes of mini_runtime_peer.py, whose helpers it reuses.

Graphs:

    publish  (state {messages: list of {"id", "role", "content"} merged by id})
        START -> plan -> write -> wrap -> END
        write (a subgraph: START -> draft -> confirm -> END)
        confirm: interrupt({"question": "publish the draft?"})

    chat     (state {messages: Annotated[list, add_messages]}, LangChain messages)
        START -> greet -> ask -> answer -> tidy -> END
        ask: interrupt("what do you want to know?"), adds the answer as a HumanMessage
        answer: adds an AIMessage and rewrites the greeting by its id
        tidy: RemoveMessage of the question

Usage (every subcommand prints one JSON document on stdout):

    runtime_branch_peer.py run     --graph G --db F --thread T --input TEXT
    runtime_branch_peer.py resume  --graph G --db F --thread T --answer A [--by-id]
    runtime_branch_peer.py history --graph G --db F --thread T
    runtime_branch_peer.py dump    --db F [--thread T]

`resume --by-id` answers the one pending interrupt by its id
(`Command(resume={id: A})`), as a parent answers its subgraph's.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any, TypedDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mini_runtime_peer as peer  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.graph.message import add_messages  # noqa: E402
from langgraph.types import Command, interrupt  # noqa: E402

_plain_jsonable = peer.jsonable


def jsonable(obj: Any) -> Any:
    """The peer's JSON shape, with LangChain messages shown field by field."""
    if isinstance(obj, BaseMessage):
        return {
            "__type__": f"{type(obj).__module__}.{type(obj).__name__}",
            **{k: jsonable(v) for k, v in obj.model_dump().items()},
        }
    return _plain_jsonable(obj)


peer.jsonable = jsonable


class State(TypedDict):
    messages: Annotated[list, peer.add_by_id]


def say(state: State, content: str) -> dict:
    n = len(state["messages"])
    return {"messages": [{"id": f"ai-{n}", "role": "ai", "content": content}]}


def confirm(state: State) -> dict:
    answer = interrupt({"question": "publish the draft?"})
    return say(state, "published" if answer == "yes" else "dropped")


def build_publish(saver: SqliteSaver):
    sub = StateGraph(State)
    sub.add_node("draft", lambda s: say(s, "draft"))
    sub.add_node("confirm", confirm)
    sub.add_edge(START, "draft")
    sub.add_edge("draft", "confirm")
    sub.add_edge("confirm", END)

    builder = StateGraph(State)
    builder.add_node("plan", lambda s: say(s, "plan"))
    builder.add_node("write", sub.compile())  # no checkpointer: inherits the parent's
    builder.add_node("wrap", lambda s: say(s, "done"))
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "write")
    builder.add_edge("write", "wrap")
    builder.add_edge("wrap", END)
    return builder.compile(checkpointer=saver)


class ChatState(TypedDict):
    messages: Annotated[list, add_messages]


def greet(state: ChatState) -> dict:
    return {"messages": [AIMessage("hello! what can I do?", id=f"ai-{len(state['messages'])}")]}


def ask(state: ChatState) -> dict:
    question = interrupt("what do you want to know?")
    return {"messages": [HumanMessage(question, id=f"human-{len(state['messages'])}")]}


def answer(state: ChatState) -> dict:
    greeting = next(m.id for m in state["messages"] if m.type == "ai")
    return {
        "messages": [
            AIMessage("it is noon", id=f"ai-{len(state['messages'])}"),
            AIMessage("hello!", id=greeting),
        ]
    }


def tidy(state: ChatState) -> dict:
    question = next(m.id for m in reversed(state["messages"]) if m.type == "human")
    return {"messages": [RemoveMessage(id=question)]}


def build_chat(saver: SqliteSaver):
    builder = StateGraph(ChatState)
    for name, fn in [("greet", greet), ("ask", ask), ("answer", answer), ("tidy", tidy)]:
        builder.add_node(name, fn)
    builder.add_edge(START, "greet")
    builder.add_edge("greet", "ask")
    builder.add_edge("ask", "answer")
    builder.add_edge("answer", "tidy")
    builder.add_edge("tidy", END)
    return builder.compile(checkpointer=saver)


GRAPHS = {"publish": build_publish, "chat": build_chat}


def cmd_run(args, graph) -> Any:
    cfg = peer.config_for(args.thread)
    if args.graph == "chat":
        first = HumanMessage(args.input, id="human-0")
    else:
        first = {"id": "user-0", "role": "user", "content": args.input}
    graph.invoke({"messages": [first]}, cfg)
    return peer.state_json(graph, cfg)


def cmd_resume(args, graph) -> Any:
    cfg = peer.config_for(args.thread)
    if args.by_id:
        pending = graph.get_state(cfg).interrupts
        if len(pending) != 1:
            raise SystemExit(f"expected one pending interrupt, found {len(pending)}")
        graph.invoke(Command(resume={pending[0].id: args.answer}), cfg)
    else:
        graph.invoke(Command(resume=args.answer), cfg)
    return peer.state_json(graph, cfg)


def main() -> None:
    peer.graph_main(__doc__, GRAPHS, cmd_run, cmd_resume, ("--by-id",))


if __name__ == "__main__":
    main()
