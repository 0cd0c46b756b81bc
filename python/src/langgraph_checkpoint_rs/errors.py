"""Exceptions raised by the Rust core.

Every error the core reports is a :class:`CheckpointerError` carrying the
crate's message, a ``kind`` and a ``retryable`` flag (``True`` only for
storage failures where nothing was applied and the call may simply be
repeated). Subclasses also derive from the built-in exception Python code
already expects for that kind of failure.
"""

from __future__ import annotations

from langgraph.store.base import InvalidNamespaceError as _LangGraphInvalidNamespaceError


class CheckpointerError(Exception):
    """A failure reported by the Rust core."""

    retryable: bool = False
    kind: str = "other"


class SerdeError(CheckpointerError, ValueError):
    """A value could not be encoded, or stored bytes could not be decoded."""


class InvalidInputError(CheckpointerError, ValueError):
    """An argument was refused (a malformed config, a payload over a limit)."""


class InvalidPolicyError(InvalidInputError):
    """A retention policy contradicts itself (no rule, a rule that keeps not
    even a thread's latest checkpoint without deleting idle threads, an
    idle age shorter than the age it keeps): refused before anything is
    removed."""


class UnsupportedError(CheckpointerError, NotImplementedError):
    """The operation is not available for this saver or value."""


class ThreadExistsError(CheckpointerError):
    """``copy_thread``'s target already holds checkpoints."""


class EncryptionError(CheckpointerError):
    """Encrypting or decrypting a stored value failed."""


class FencedError(CheckpointerError):
    """A fenced saver's write was refused: its writer does not hold the
    thread's lease (another writer took it over, it was released, or it
    expired and was taken). Checked inside the write's own transaction or
    script, so nothing of the refused write was stored. Not retryable: the
    worker must ``acquire`` the thread again, after reading what the owner
    stored. ``thread_id``, ``writer`` and ``epoch`` (0: the writer never
    held the thread) name the refused write."""

    thread_id: str = ""
    writer: str = ""
    epoch: int = 0


class StorageError(CheckpointerError):
    """The database failed; see ``retryable``."""


class StoreInputError(InvalidInputError):
    """A long-term memory store refused an operation (an unsupported filter
    operator, a TTL that is not a finite non-negative number of minutes,
    vectors of another length than the index's ``dims``...); nothing of
    the batch was stored."""


class InvalidNamespaceError(StoreInputError, _LangGraphInvalidNamespaceError):
    """A namespace LangGraph refuses, with LangGraph's message; also
    ``langgraph.store.base.InvalidNamespaceError``."""


def namespace_error(namespace: tuple) -> InvalidNamespaceError:
    """The error for a refused namespace, with the message LangGraph's own
    validation gives it."""
    from langgraph.store.base import _validate_namespace

    try:
        _validate_namespace(namespace)
    except _LangGraphInvalidNamespaceError as e:
        message = str(e)
    else:  # refused by the core for a reason LangGraph's check lacks
        message = f"Invalid namespace {namespace!r}."
    err = InvalidNamespaceError(message)
    err.kind = "store"
    return err


__all__ = [
    "CheckpointerError",
    "EncryptionError",
    "FencedError",
    "InvalidInputError",
    "InvalidNamespaceError",
    "InvalidPolicyError",
    "SerdeError",
    "StorageError",
    "StoreInputError",
    "ThreadExistsError",
    "UnsupportedError",
]
