"""Retention through the package: ``retain`` and ``aretain`` on a thread a
real LangGraph graph wrote (a dry run changes nothing, the run removes
what it counted, ``get_state_history`` ends at the oldest kept checkpoint,
the thread continues), a policy that contradicts itself as a typed
exception before anything is removed, and the ``retention=`` option
running a policy in the background, on every backend."""

from __future__ import annotations

import operator
import time
from datetime import timedelta
from typing import Annotated, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from langgraph_checkpoint_rs import (
    InvalidInputError,
    InvalidPolicyError,
    Retention,
    RetentionReport,
    SqliteSaver,
)


class State(TypedDict):
    count: int
    log: Annotated[list, operator.add]


def graph(saver):
    """A loop of one node counting up to the next multiple of ten."""
    builder = StateGraph(State)
    builder.add_node("inc", lambda s: {"count": s["count"] + 1, "log": [s["count"]]})
    builder.add_edge(START, "inc")
    builder.add_conditional_edges("inc", lambda s: END if s["count"] % 10 == 0 else "inc", ["inc", END])
    return builder.compile(checkpointer=saver)


CONFIG = {"configurable": {"thread_id": "kept"}}


def history(app) -> list:
    return list(app.get_state_history(CONFIG))


def test_retain_keeps_the_last_and_the_thread_continues(open_saver) -> None:
    saver = open_saver()
    app = graph(saver)
    app.invoke({"count": 1, "log": []}, CONFIG)
    before = history(app)
    assert len(before) >= 10
    dry = saver.retain(keep_last=3, thread_ids=["kept"], dry_run=True)
    assert isinstance(dry, RetentionReport) and dry.dry_run
    assert dry.checkpoints_removed == len(before) - 3
    assert [s.config for s in history(app)] == [s.config for s in before]
    run = saver.retain(keep_last=3, thread_ids=["kept"], batch=2)
    assert (run.dry_run, run.checkpoints_removed, run.threads_scanned) == (False, len(before) - 3, 1)
    kept = history(app)
    assert [s.config for s in kept] == [s.config for s in before[:3]]
    assert kept[-1].parent_config is None
    assert app.get_state(CONFIG).values["count"] == 10
    assert app.invoke({"count": 11, "log": []}, CONFIG)["count"] == 20
    assert len(history(app)) > 3
    # a second run with the same policy finds only what the new run added
    again = saver.retain(keep_last=3, thread_ids=["kept"], dry_run=True)
    assert again.checkpoints_removed == len(history(app)) - 3


async def test_aretain_over_every_thread(open_saver) -> None:
    saver = open_saver()
    app = graph(saver)
    for thread in ("a", "b"):
        await app.ainvoke({"count": 1, "log": []}, {"configurable": {"thread_id": thread}})
    report = await saver.aretain(keep_last=2, keep_newer_than=timedelta(0), delete_idle_threads=3600.0 * 24 * 365)
    assert report.threads_scanned == 2
    for thread in ("a", "b"):
        left = [s async for s in app.aget_state_history({"configurable": {"thread_id": thread}})]
        assert len(left) == 2 and left[-1].parent_config is None


def test_a_policy_that_contradicts_itself_is_typed(open_saver) -> None:
    saver = open_saver()
    graph(saver).invoke({"count": 1, "log": []}, CONFIG)
    count = len(list(saver.list(CONFIG)))
    for bad in (
        {},
        {"keep_last": 0},
        {"keep_newer_than": 3600, "delete_idle_threads": 60},
        {"keep_last": 1, "mark_key": ""},
    ):
        with pytest.raises(InvalidPolicyError) as err:
            saver.retain(**bad)
        assert err.value.kind == "invalid_policy" and not err.value.retryable
        assert isinstance(err.value, InvalidInputError) and isinstance(err.value, ValueError)
    with pytest.raises(InvalidInputError) as err:
        saver.retain(keep_newer_than=-1.0)
    assert not isinstance(err.value, InvalidPolicyError)
    with pytest.raises(InvalidInputError):
        saver.retain(keep_last=1, batch=0)
    assert len(list(saver.list(CONFIG))) == count


def test_the_retention_option_runs_in_the_background(tmp_path) -> None:
    path = str(tmp_path / "bg.sqlite")
    with pytest.raises(InvalidPolicyError):
        SqliteSaver(path, retention=Retention(every=1, keep_last=0))
    with SqliteSaver.from_conn_string(path, retention=Retention(every=timedelta(seconds=1), keep_last=2)) as saver:
        app = graph(saver)
        app.invoke({"count": 1, "log": []}, CONFIG)
        deadline = time.monotonic() + 10
        while len(history(app)) > 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(history(app)) == 2
