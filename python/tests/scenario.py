"""A deterministic history of puts and writes, replayed on any saver, and the
helpers that compare what savers store and read back.

The values cover what LangGraph's serializer encodes as msgpack with ext
codes (messages, pydantic models, datetimes, uuids, sets, tuples, enums,
decimals, bytes), plus the shapes the savers treat specially: a value
with no version, a channel without a value, special write channels,
namespaces, metadata with configurable keys, integer versions.
"""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import uuid
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.base.id import uuid6
from pydantic import BaseModel


class Mood(enum.Enum):
    HAPPY = "happy"
    SAD = "sad"


class Profile(BaseModel):
    name: str
    tags: list[str]
    score: float


# uuid6 ids that sort in creation order (clock sequence = position), made
# once so that every replay stores the same ids
_IDS = [str(uuid6(clock_seq=i)) for i in range(16)]


def values(step: int) -> dict[str, Any]:
    return {
        "messages": [
            HumanMessage(content=f"question {step}", id=f"h{step}"),
            AIMessage(content=f"answer {step} é✓", id=f"a{step}", tool_calls=[]),
        ],
        "profile": Profile(name=f"user-{step}", tags=["a", "b"], score=step / 3),
        "when": dt.datetime(2026, 12, 2, 5, step, 7, 123456, tzinfo=dt.timezone.utc),
        "ids": {uuid.UUID(int=step), uuid.UUID(int=step + 1)},
        "pair": (step, "two", 3.5),
        "mood": Mood.HAPPY if step % 2 else Mood.SAD,
        "amount": decimal.Decimal("12.50"),
        "raw": bytes(range(step, step + 8)),
        "count": step,
        "ratio": step + 0.25,
        "flag": step % 2 == 0,
        "nothing": None,
        "text": "x" * step,
    }


def history(stale_version: bool = True) -> list[tuple[str, dict[str, Any]]]:
    """Operations as (kind, arguments), in order.

    ``stale_version``: the channel ``count`` changes value without a new
    version, and one checkpoint gives it its old version but no value
    (LangGraph's runtime does neither: a changed or emptied channel gets a
    new version). Python's savers store that as given. Left out where a
    saver keeps primitives in versioned blobs (Postgres with an encrypting
    serializer: our saver encrypts them, Python leaves them in plaintext),
    since there a version names one value.
    """
    ops: list[tuple[str, dict[str, Any]]] = []
    ids = _IDS
    k = 0
    for thread, ns_list in (("t-1", ("",)), ("t-2", ("", "child:1"))):
        for ns in ns_list:
            parent = None
            versions: dict[str, Any] = {}
            for step in range(3):
                cid = ids[k]
                k += 1
                vals = values(step)
                # versions: strings as LangGraph makes them, one channel with ints
                new_versions = {
                    ch: f"{step + 1:032}.{0.5:016}"
                    for ch in vals
                    if ch != "count" or step == 0 or not stale_version
                }
                new_versions["int_channel"] = step + 1
                versions.update(new_versions)
                channel_values = dict(vals)
                channel_values["int_channel"] = [step]
                if step == 2:
                    # a channel the step emptied (a new version, no value), and
                    # one with no value whose version the parent stored a value
                    # at: stored as given, nothing filled in from the parent
                    del channel_values["text"]
                    if stale_version:
                        del channel_values["count"]
                # keys in the order LangGraph's runtime builds them
                # (create_checkpoint / copy_checkpoint)
                checkpoint = {
                    "v": 4,
                    "ts": f"2026-12-02T05:0{step}:00.000000+00:00",
                    "id": cid,
                    "channel_values": channel_values,
                    "channel_versions": dict(versions),
                    "versions_seen": {
                        "__input__": {},
                        "node": {ch: v for ch, v in list(versions.items())[:3]},
                    },
                    "updated_channels": sorted(new_versions),
                }
                configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
                if parent:
                    configurable["checkpoint_id"] = parent
                config = {
                    "configurable": {**configurable, "user": "ana", "__private": 1, "attempt": 2},
                    "metadata": {"run_id": f"run-{thread}-{step // 2}", "tenant": "acme"},
                }
                metadata = {"source": "loop", "step": step, "parents": {}, "note": "nul\u0000gone"}
                ops.append(
                    (
                        "put",
                        {
                            "config": config,
                            "checkpoint": checkpoint,
                            "metadata": metadata,
                            "new_versions": new_versions,
                        },
                    )
                )
                wconfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": cid}}
                ops.append(
                    (
                        "put_writes",
                        {
                            "config": wconfig,
                            "writes": [
                                ("messages", [AIMessage(content=f"partial {step}", id=f"p{step}")]),
                                ("profile", Profile(name="w", tags=[], score=0.0)),
                                ("raw", b"\x00\x01"),
                                ("nothing", None),
                            ],
                            "task_id": f"task-{step}",
                            "task_path": f"~__pregel_pull, node{step}",
                        },
                    )
                )
                ops.append(
                    (
                        "put_writes",
                        {
                            "config": wconfig,
                            "writes": [
                                ("__error__", ValueError("boom").__class__.__name__),
                                ("__interrupt__", [{"value": "ask", "id": f"i{step}"}]),
                            ],
                            "task_id": f"task-b{step}",
                            "task_path": "",
                        },
                    )
                )
                parent = cid
    return ops


def replay(saver: BaseCheckpointSaver, stale_version: bool = True) -> None:
    for kind, args in history(stale_version):
        getattr(saver, kind)(**args)


async def areplay(saver: BaseCheckpointSaver, stale_version: bool = True) -> None:
    for kind, args in history(stale_version):
        await getattr(saver, "a" + kind)(**args)


def threads() -> list[str]:
    return ["t-1", "t-2"]


def canonical(t: CheckpointTuple) -> tuple:
    """A tuple as comparable data (configs reduced to their ids)."""

    def ids(config):
        if config is None:
            return None
        c = config["configurable"]
        return (c["thread_id"], c.get("checkpoint_ns", ""), c.get("checkpoint_id"))

    return (ids(t.config), t.checkpoint, t.metadata, ids(t.parent_config), list(t.pending_writes))


def everything(saver: BaseCheckpointSaver) -> list[tuple]:
    out = []
    for thread in threads():
        out.extend(canonical(t) for t in saver.list({"configurable": {"thread_id": thread}}))
    return out
