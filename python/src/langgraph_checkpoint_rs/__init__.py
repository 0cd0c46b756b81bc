"""LangGraph checkpoint savers on a Rust core (the ``checkpointer`` crate).

``SqliteSaver``, ``PostgresSaver`` and ``RedisSaver`` (and their ``Async``
names) subclass LangGraph's ``BaseCheckpointSaver``, implement every sync
and async method including ``delete_for_runs``, ``copy_thread``, ``prune``
and ``get_delta_channel_history``, and store exactly what Python's own
savers store. ``SqliteStore`` and ``PostgresStore`` (and their ``Async`` names)
implement LangGraph's long-term memory ``BaseStore`` on Python's store
tables.
"""

from ._sqlite_library import import_core as _import_core

# before anything else touches ._core: the wheel's extension needs the SQLite
# library of Python's sqlite3 in the global scope (see _sqlite_library)
__version__ = _import_core(__name__).__version__

from .errors import (
    CheckpointerError,
    EncryptionError,
    FencedError,
    InvalidInputError,
    InvalidNamespaceError,
    InvalidPolicyError,
    SerdeError,
    StorageError,
    StoreInputError,
    ThreadExistsError,
    UnsupportedError,
)
from .fencing import Fence, Lease
from .postgres import AsyncPostgresSaver, AsyncPostgresStore, PostgresSaver, PostgresStore
from .redis import AsyncRedisSaver, RedisSaver
from .retention import Retention, RetentionReport
from .sqlite import AsyncSqliteSaver, AsyncSqliteStore, SqliteSaver, SqliteStore

__all__ = [
    "AsyncPostgresSaver",
    "AsyncPostgresStore",
    "AsyncRedisSaver",
    "AsyncSqliteSaver",
    "AsyncSqliteStore",
    "CheckpointerError",
    "EncryptionError",
    "Fence",
    "FencedError",
    "InvalidInputError",
    "InvalidNamespaceError",
    "InvalidPolicyError",
    "Lease",
    "PostgresSaver",
    "PostgresStore",
    "RedisSaver",
    "Retention",
    "RetentionReport",
    "SerdeError",
    "SqliteSaver",
    "SqliteStore",
    "StorageError",
    "StoreInputError",
    "ThreadExistsError",
    "UnsupportedError",
    "__version__",
]
