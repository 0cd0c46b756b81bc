#!/usr/bin/env python3
"""Continue, with the real LangGraph runtime and Python's SqliteSaver, a
thread another implementation started in a SQLite file.

The graph is LangGraph's quickstart (START -> get_address -> END over a
state {name, address}). Usage: sqlite_python_continue.py DB THREAD NAME.
Prints one JSON object: the state Python found (values and checkpoint id),
the result of invoke({"name": NAME}) on the thread, and the thread's
checkpoint ids newest first.
"""

import json
import sys
from typing import TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    name: str
    address: str


def get_address(state: State) -> State:
    return {"address": f"123 Main St, home of {state['name']}"}


def main() -> None:
    db, thread, name = sys.argv[1:4]
    builder = StateGraph(State)
    builder.add_node("get_address", get_address)
    builder.add_edge(START, "get_address")
    builder.add_edge("get_address", END)
    with SqliteSaver.from_conn_string(db) as saver:
        graph = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": thread}}
        before = graph.get_state(config)
        result = graph.invoke({"name": name}, config)
        history = [s.config["configurable"]["checkpoint_id"] for s in graph.get_state_history(config)]
    print(
        json.dumps(
            {
                "before": before.values,
                "before_id": before.config["configurable"]["checkpoint_id"],
                "before_next": list(before.next),
                "result": result,
                "history": history,
            }
        )
    )


if __name__ == "__main__":
    main()
