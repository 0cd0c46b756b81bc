#!/usr/bin/env python3
"""Python side of the PostgreSQL compatibility tests (tests/python/postgres.rs).

    pg_python_peer.py setup  URL   run PostgresSaver.setup() on the database
    pg_python_peer.py graphs URL   setup, then run real LangGraph graphs on it

The graphs are those of the shared fixtures (../shared/peer/README.md):
a_one_node (thread 12345), b_reducer (b-1 invoked twice, b-2 once),
c_subgraph (c-1, a compiled subgraph in its own namespace) and f_messages
(f-1, agent -> tools -> agent with LangChain messages), each checkpointed by
langgraph-checkpoint-postgres's PostgresSaver.
"""

import operator
import sys
from typing import Annotated, TypedDict

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages


def a_one_node(saver: PostgresSaver) -> None:
    class State(TypedDict, total=False):
        name: str
        address: str

    def get_address(state: State) -> dict:
        return {"address": f"123 Main St, home of {state['name']}"}

    g = StateGraph(State)
    g.add_node("get_address", get_address)
    g.add_edge(START, "get_address")
    g.add_edge("get_address", END)
    app = g.compile(checkpointer=saver)
    app.invoke({"name": "Alice"}, {"configurable": {"thread_id": "12345"}})


def b_reducer(saver: PostgresSaver) -> None:
    class State(TypedDict, total=False):
        items: Annotated[list, operator.add]
        count: int

    def step_a(state: State) -> dict:
        return {"items": ["a"], "count": state.get("count", 0) + 1}

    def step_b(state: State) -> dict:
        return {"items": ["b"], "count": state["count"] + 1}

    g = StateGraph(State)
    g.add_node("step_a", step_a)
    g.add_node("step_b", step_b)
    g.add_edge(START, "step_a")
    g.add_edge("step_a", "step_b")
    g.add_edge("step_b", END)
    app = g.compile(checkpointer=saver)
    app.invoke({"items": ["start"]}, {"configurable": {"thread_id": "b-1"}})
    app.invoke({"items": ["again"]}, {"configurable": {"thread_id": "b-1"}})
    app.invoke({"items": ["other"], "count": 10}, {"configurable": {"thread_id": "b-2"}})


def c_subgraph(saver: PostgresSaver) -> None:
    class State(TypedDict, total=False):
        text: str
        log: Annotated[list, operator.add]

    def inner_one(state: State) -> dict:
        return {"text": state["text"].upper(), "log": ["inner_one"]}

    def inner_two(state: State) -> dict:
        return {"text": state["text"] + "!", "log": ["inner_two"]}

    sub = StateGraph(State)
    sub.add_node("inner_one", inner_one)
    sub.add_node("inner_two", inner_two)
    sub.add_edge(START, "inner_one")
    sub.add_edge("inner_one", "inner_two")
    sub.add_edge("inner_two", END)
    child = sub.compile()

    def prepare(state: State) -> dict:
        return {"text": state["text"].strip(), "log": ["prepare"]}

    def finish(state: State) -> dict:
        return {"log": ["finish"]}

    g = StateGraph(State)
    g.add_node("prepare", prepare)
    g.add_node("child", child)
    g.add_node("finish", finish)
    g.add_edge(START, "prepare")
    g.add_edge("prepare", "child")
    g.add_edge("child", "finish")
    g.add_edge("finish", END)
    app = g.compile(checkpointer=saver)
    app.invoke({"text": "  hello  ", "log": []}, {"configurable": {"thread_id": "c-1"}})


def f_messages(saver: PostgresSaver) -> None:
    class State(TypedDict):
        messages: Annotated[list, add_messages]

    def agent(state: State) -> dict:
        last = state["messages"][-1]
        if isinstance(last, ToolMessage):
            return {"messages": [AIMessage(content=f"It is {last.content}.", id="ai-2")]}
        call = {"name": "clock", "args": {"tz": "UTC"}, "id": "call-1", "type": "tool_call"}
        return {"messages": [AIMessage(content="", tool_calls=[call], id="ai-1")]}

    def tools(state: State) -> dict:
        call = state["messages"][-1].tool_calls[0]
        return {"messages": [ToolMessage(content="12:00", tool_call_id=call["id"], name=call["name"], id="tool-1")]}

    def route(state: State) -> str:
        last = state["messages"][-1]
        return "tools" if getattr(last, "tool_calls", None) else END

    g = StateGraph(State)
    g.add_node("agent", agent)
    g.add_node("tools", tools)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tools", END])
    g.add_edge("tools", "agent")
    app = g.compile(checkpointer=saver)
    app.invoke({"messages": [HumanMessage(content="What time is it?", id="human-1")]}, {"configurable": {"thread_id": "f-1"}})


def main() -> None:
    if len(sys.argv) != 3 or sys.argv[1] not in ("setup", "graphs"):
        raise SystemExit(__doc__)
    command, url = sys.argv[1], sys.argv[2]
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        if command == "graphs":
            for scenario in (a_one_node, b_reducer, c_subgraph, f_messages):
                scenario(saver)


if __name__ == "__main__":
    main()
