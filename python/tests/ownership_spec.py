"""WRITE_OWNERSHIP checks: two writers on one thread, exactly one lineage
survives and the loser gets an error (the check langchain-ai/langgraph#8796
asks the official conformance suite for).

Laid out as the spec modules of ``langgraph-checkpoint-conformance`` are:
async check functions, the list of them, and a runner that returns
``(passed, failed, failure_names)`` and reports each result to an optional
callback. A check takes ``writers``: an async factory of two savers on one
store, as two workers (two processes) would hold them. It uses only
``BaseCheckpointSaver``'s async methods, so it runs on any saver, LangGraph's
own included.
"""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import uuid4

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance.test_utils import (
    generate_checkpoint,
    generate_config,
    generate_metadata,
)

Writers = Callable[[], Awaitable[tuple[BaseCheckpointSaver, BaseCheckpointSaver]]]


async def _put_child(saver: BaseCheckpointSaver, parent: dict, step: int, who: str) -> dict:
    cp = generate_checkpoint(channel_values={"who": f"{who}-{step}"})
    cp["channel_versions"] = {"who": step + 2}
    return await saver.aput(parent, cp, generate_metadata(step=step, writer=who), {"who": step + 2})


async def _off_the_tip(saver: BaseCheckpointSaver, tid: str) -> tuple[int, list[str]]:
    """How many checkpoints the thread holds, and those its latest
    checkpoint's lineage (parent links from the tip) does not reach."""
    parents: dict[str, str | None] = {}
    order: list[str] = []
    async for t in saver.alist(generate_config(tid)):
        cid = t.config["configurable"]["checkpoint_id"]
        parents[cid] = t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None
        order.append(cid)
    reached: set[str] = set()
    at = order[0] if order else None
    while at is not None and at not in reached:
        reached.add(at)
        at = parents.get(at)
    return len(order), [c for c in order if c not in reached]


async def test_write_ownership_second_writer_refused(writers: Writers) -> None:
    """A writer continues a thread; a second writer continuing it from the
    same checkpoint gets an error and stores nothing; the thread stays one
    lineage."""
    a, b = await writers()
    tid = str(uuid4())
    root = await _put_child(a, generate_config(tid), -1, "a")
    second: BaseException | None = None
    try:
        await _put_child(b, root, 0, "b")
    except Exception as e:  # noqa: BLE001 - any error is the refusal asked for
        second = e
    await _put_child(a, root, 0, "a")
    total, off = await _off_the_tip(a, tid)
    assert second is not None, "the second writer's put was accepted"
    assert not off, f"{len(off)} of {total} checkpoints are off the tip's lineage (a fork)"


async def test_write_ownership_racing_writers_one_lineage(writers: Writers, steps: int = 8) -> None:
    """Two writers race to extend one thread, each from its own last
    checkpoint: exactly one writes its whole chain, every write of the other
    raises, and every checkpoint lies on the tip's lineage."""
    a, b = await writers()
    tid = str(uuid4())
    errors: dict[str, int] = {"a": 0, "b": 0}

    async def chain(saver: BaseCheckpointSaver, who: str) -> None:
        parent = generate_config(tid)
        for step in range(steps):
            try:
                parent = await _put_child(saver, parent, step, who)
            except Exception:  # noqa: BLE001 - the loser's refusals
                errors[who] += 1
            await asyncio.sleep(0)

    await asyncio.gather(chain(a, "a"), chain(b, "b"))
    total, off = await _off_the_tip(a, tid)
    clean = [w for w, n in errors.items() if n == 0]
    assert len(clean) == 1, f"writers without an error: {clean} (errors {errors})"
    loser = "b" if clean == ["a"] else "a"
    assert errors[loser] == steps, f"the loser had {steps - errors[loser]} writes accepted"
    assert total == steps, f"{total} checkpoints stored, one writer's {steps} expected"
    assert not off, f"{len(off)} of {total} checkpoints are off the tip's lineage (a fork)"


ALL_WRITE_OWNERSHIP_TESTS = [
    test_write_ownership_second_writer_refused,
    test_write_ownership_racing_writers_one_lineage,
]


async def run_write_ownership_tests(
    writers: Writers,
    on_test_result: Callable[[str, str, bool, str | None], None] | None = None,
) -> tuple[int, int, list[str]]:
    """Run every write-ownership check. Returns (passed, failed, failure_names)."""
    passed = 0
    failed = 0
    failures: list[str] = []
    for test_fn in ALL_WRITE_OWNERSHIP_TESTS:
        try:
            await test_fn(writers)
            passed += 1
            if on_test_result:
                on_test_result("write_ownership", test_fn.__name__, True, None)
        except Exception as e:  # noqa: BLE001 - a failed check is a result
            failed += 1
            failures.append(f"{test_fn.__name__}: {e}")
            if on_test_result:
                on_test_result("write_ownership", test_fn.__name__, False, traceback.format_exc())
    return passed, failed, failures


__all__: list[Any] = [
    "ALL_WRITE_OWNERSHIP_TESTS",
    "Writers",
    "run_write_ownership_tests",
    "test_write_ownership_racing_writers_one_lineage",
    "test_write_ownership_second_writer_refused",
]
