"""Type stubs of the extension module (python/src/, ``_core``).

Every method taking ``aio`` runs synchronously (GIL released) when it is
False and returns an awaitable when it is True. Values are the ``(tag,
bytes)`` pairs of the saver's serializer; metadata, versions and filters
are msgpack (see ``_base.py``). A row is ``(thread_id, ns, id, parent | None,
tag, checkpoint, metadata tag, metadata, [(task_id, channel, tag, value)])``.
"""

from typing import Awaitable, Protocol

__version__: str

class Cipher(Protocol):
    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]: ...
    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes: ...

class Lister:
    def next(self, aio: bool, max: int) -> list[tuple] | Awaitable[list[tuple]]: ...

# a checkpoint: (thread_id, checkpoint_ns, checkpoint_id | None)
At = tuple[str, str, str | None]

# a lease: (thread_id, writer, epoch, lease_seconds)
LeaseRow = tuple[str, str, int, float]

class Core:
    @property
    def backend(self) -> str: ...
    @property
    def fenced(self) -> bool: ...
    def acquire(self, aio: bool, thread_id: str) -> LeaseRow | Awaitable[LeaseRow]: ...
    def renew(self, aio: bool, thread_id: str) -> LeaseRow | Awaitable[LeaseRow]: ...
    def release(self, aio: bool, thread_id: str) -> bool | Awaitable[bool]: ...
    def setup(self, aio: bool) -> None | Awaitable[None]: ...
    def close(self, aio: bool) -> None | Awaitable[None]: ...
    def put(
        self,
        aio: bool,
        parent: At,
        checkpoint_id: str,
        tag: str,
        data: bytes,
        metadata: bytes,
        new_versions: bytes,
    ) -> None | Awaitable[None]: ...
    def put_writes(
        self,
        aio: bool,
        at: At,
        task_id: str,
        task_path: str,
        writes: list[tuple[str, str, bytes]],
    ) -> None | Awaitable[None]: ...
    def get_tuple(self, aio: bool, at: At) -> list[tuple] | None | Awaitable[list[tuple] | None]: ...
    def list(
        self,
        # (thread_id, checkpoint_ns, checkpoint_id, msgpack(filter), before, limit)
        query: tuple[str | None, str | None, str | None, bytes | None, str | None, int | None],
    ) -> Lister: ...
    def delete_thread(self, aio: bool, thread_id: str) -> None | Awaitable[None]: ...
    def delete_for_runs(self, aio: bool, run_ids: list[str]) -> None | Awaitable[None]: ...
    def copy_thread(self, aio: bool, source: str, target: str) -> None | Awaitable[None]: ...
    def prune(self, aio: bool, thread_ids: list[str], strategy: str) -> None | Awaitable[None]: ...
    # (dry_run, threads_scanned, threads_deleted, checkpoints_scanned,
    #  checkpoints_removed, writes_removed, parents_cleared, batches); ages in seconds
    def retain(
        self,
        aio: bool,
        *,
        keep_last: int | None = None,
        keep_newer_than: float | None = None,
        delete_idle_threads: float | None = None,
        mark_key: str | None = None,
        threads: list[str] | None = None,
        batch: int | None = None,
        dry_run: bool = False,
    ) -> tuple | Awaitable[tuple]: ...
    def start_retention(
        self,
        *,
        every_seconds: float,
        keep_last: int | None = None,
        keep_newer_than: float | None = None,
        delete_idle_threads: float | None = None,
        mark_key: str | None = None,
    ) -> None: ...
    def delta_channel_history(
        self, aio: bool, at: At, channels: list[str]
    ) -> list[tuple] | Awaitable[list[tuple]]: ...

def open(
    aio: bool,
    url: str,
    backend: str,
    *,
    aes_key: bytes | None = None,
    cipher: Cipher | None = None,
    fill_from_parent: bool = True,
    lazy: bool = False,
    max_connections: int | None = None,
    ttl_minutes: float | None = None,
    refresh_on_read: bool = False,
    restore_journal: bool = True,
    writer: str | None = None,
    lease_seconds: float | None = None,
) -> Core | Awaitable[Core]: ...

# --- long-term memory stores (store.rs): LangGraph's op objects in, its
# Item / SearchItem / namespace tuples out ---------------------------------

class StoreCore:
    @property
    def backend(self) -> str: ...
    def batch(self, aio: bool, ops: list) -> list | Awaitable[list]: ...
    def setup(self, aio: bool) -> None | Awaitable[None]: ...
    def sweep_ttl(self, aio: bool) -> int | Awaitable[int]: ...
    def close(self, aio: bool) -> None | Awaitable[None]: ...

def open_sqlite_store(
    aio: bool,
    path: str,
    *,
    # (dims, LangChain Embeddings, fields)
    index: tuple[int, object, list[str]] | None = None,
    # (refresh_on_read, default_ttl minutes, sweep_interval_minutes)
    ttl: tuple[bool | None, float | None, int | None] | None = None,
) -> StoreCore | Awaitable[StoreCore]: ...

def open_postgres_store(
    url: str,
    *,
    index: tuple[int, object, list[str]] | None = None,
    ttl: tuple[bool | None, float | None, int | None] | None = None,
    max_connections: int | None = None,
) -> StoreCore: ...
