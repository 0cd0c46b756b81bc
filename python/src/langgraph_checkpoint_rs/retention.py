"""Retention: stores that stay small without breaking time travel.

``saver.retain(keep_last=20, delete_idle_threads=timedelta(days=30))``
applies a policy now; ``retention=Retention(..., every=timedelta(hours=1))``
given to a saver runs it in the background while the saver is open. Both
go through the Rust core's engine, in bounded batches, each one atomic, so
a run can be stopped or killed at any point and the next one finishes it.

What stays is the union of the keep rules: the newest ``keep_last``
checkpoints of each thread and namespace and those younger than
``keep_newer_than``; the latest checkpoint of each namespace, checkpoints
holding interrupts or pending writes, fork points, checkpoints whose
metadata has ``mark_key`` (``"pinned"`` by default) and what a kept
checkpoint's delta channels need always stay. ``delete_idle_threads``
removes whole threads whose latest checkpoint is older. A kept checkpoint
whose parent went has no parent: ``get_state_history`` ends there.

A policy that contradicts itself (no rule, ``keep_last=0`` without
``delete_idle_threads``, an idle age shorter than ``keep_newer_than``)
raises :class:`~langgraph_checkpoint_rs.errors.InvalidPolicyError` before
anything is removed. ``dry_run=True`` writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any


def _seconds(age: timedelta | float | None) -> float | None:
    if age is None:
        return None
    if isinstance(age, timedelta):
        return age.total_seconds()
    return float(age)


def _policy(
    keep_last: int | None,
    keep_newer_than: timedelta | float | None,
    delete_idle_threads: timedelta | float | None,
    mark_key: str | None,
) -> dict[str, Any]:
    return {
        "keep_last": keep_last,
        "keep_newer_than": _seconds(keep_newer_than),
        "delete_idle_threads": _seconds(delete_idle_threads),
        "mark_key": mark_key,
    }


@dataclass(frozen=True)
class Retention:
    """A policy run in the background every ``every`` (seconds or a
    ``timedelta``) while the saver it is given to is open; ages are seconds
    or ``timedelta``. A failed run is retried at the next period."""

    every: timedelta | float
    keep_last: int | None = None
    keep_newer_than: timedelta | float | None = None
    delete_idle_threads: timedelta | float | None = None
    mark_key: str | None = None

    def _core_args(self) -> dict[str, Any]:
        args = _policy(self.keep_last, self.keep_newer_than, self.delete_idle_threads, self.mark_key)
        args["every_seconds"] = _seconds(self.every)
        return args


@dataclass(frozen=True)
class RetentionReport:
    """What a run removed, or with ``dry_run`` would remove."""

    dry_run: bool
    threads_scanned: int
    threads_deleted: int
    checkpoints_scanned: int
    checkpoints_removed: int
    writes_removed: int
    parents_cleared: int
    batches: int


class RetentionMethods:
    """``retain`` and ``aretain`` of the package's savers, and the start of
    their ``retention=`` option."""

    _core: Any

    def _start_retention(self, retention: Retention | None) -> None:
        if retention is None:
            return
        try:
            self._core.start_retention(**retention._core_args())
        except BaseException:
            self._core.close(False)
            raise

    def retain(self, **policy: Any) -> RetentionReport:
        """Applies a retention policy: keywords ``keep_last``,
        ``keep_newer_than`` and ``delete_idle_threads`` (seconds or
        ``timedelta``), ``mark_key``; ``thread_ids`` (every thread by
        default), ``batch`` checkpoints per atomic step, and ``dry_run`` to
        only count what would go."""
        return RetentionReport(*self._core.retain(False, **_core_call(**policy)))

    async def aretain(self, **policy: Any) -> RetentionReport:
        """``retain`` without blocking the event loop."""
        return RetentionReport(*await self._core.retain(True, **_core_call(**policy)))


def _core_call(
    *,
    keep_last: int | None = None,
    keep_newer_than: timedelta | float | None = None,
    delete_idle_threads: timedelta | float | None = None,
    mark_key: str | None = None,
    thread_ids: Sequence[str] | None = None,
    batch: int | None = None,
    dry_run: bool = False,
) -> dict[str, Any]:
    """The core's ``retain`` keywords of ``retain``'s (an unknown one is a
    ``TypeError``)."""
    args = _policy(keep_last, keep_newer_than, delete_idle_threads, mark_key)
    args["threads"] = None if thread_ids is None else [str(t) for t in thread_ids]
    args["batch"] = batch
    args["dry_run"] = dry_run
    return args


__all__ = ["Retention", "RetentionMethods", "RetentionReport"]
