"""Exceptions raised by the Rust core.

Every error the core reports is a :class:`CheckpointerError` carrying the
crate's message, a ``kind`` and a ``retryable`` flag (``True`` only for
storage failures where nothing was applied and the call may simply be
repeated). Subclasses also derive from the built-in exception Python code
already expects for that kind of failure.
"""

from __future__ import annotations


class CheckpointerError(Exception):
    """A failure reported by the Rust core."""

    retryable: bool = False
    kind: str = "other"


class SerdeError(CheckpointerError, ValueError):
    """A value could not be encoded, or stored bytes could not be decoded."""


class InvalidInputError(CheckpointerError, ValueError):
    """An argument was refused (a malformed config, a payload over a limit)."""


class UnsupportedError(CheckpointerError, NotImplementedError):
    """The operation is not available for this saver or value."""


class ThreadExistsError(CheckpointerError):
    """``copy_thread``'s target already holds checkpoints."""


class EncryptionError(CheckpointerError):
    """Encrypting or decrypting a stored value failed."""


class StorageError(CheckpointerError):
    """The database failed; see ``retryable``."""


__all__ = [
    "CheckpointerError",
    "EncryptionError",
    "InvalidInputError",
    "SerdeError",
    "StorageError",
    "ThreadExistsError",
    "UnsupportedError",
]
