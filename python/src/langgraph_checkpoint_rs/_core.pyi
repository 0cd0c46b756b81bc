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

class Core:
    @property
    def backend(self) -> str: ...
    def setup(self, aio: bool) -> None | Awaitable[None]: ...
    def close(self, aio: bool) -> None | Awaitable[None]: ...
    def put(
        self,
        aio: bool,
        thread_id: str,
        checkpoint_ns: str,
        parent_id: str | None,
        checkpoint_id: str,
        tag: str,
        data: bytes,
        metadata: bytes,
        new_versions: bytes,
    ) -> None | Awaitable[None]: ...
    def put_writes(
        self,
        aio: bool,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str | None,
        task_id: str,
        task_path: str,
        writes: list[tuple[str, str, bytes]],
    ) -> None | Awaitable[None]: ...
    def get_tuple(
        self, aio: bool, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None
    ) -> list[tuple] | None | Awaitable[list[tuple] | None]: ...
    def list(
        self,
        thread_id: str | None,
        checkpoint_ns: str | None,
        checkpoint_id: str | None,
        filter: bytes | None,
        before: str | None,
        limit: int | None,
    ) -> Lister: ...
    def delete_thread(self, aio: bool, thread_id: str) -> None | Awaitable[None]: ...
    def delete_for_runs(self, aio: bool, run_ids: list[str]) -> None | Awaitable[None]: ...
    def copy_thread(self, aio: bool, source: str, target: str) -> None | Awaitable[None]: ...
    def prune(self, aio: bool, thread_ids: list[str], strategy: str) -> None | Awaitable[None]: ...
    def delta_channel_history(
        self, aio: bool, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None, channels: list[str]
    ) -> list[tuple] | Awaitable[list[tuple]]: ...

def open_sqlite(
    aio: bool, path: str, aes_key: bytes | None = None, cipher: Cipher | None = None
) -> Core | Awaitable[Core]: ...
def open_postgres(
    aio: bool,
    url: str,
    max_connections: int | None = None,
    aes_key: bytes | None = None,
    cipher: Cipher | None = None,
) -> Core | Awaitable[Core]: ...
def open_redis(
    aio: bool,
    url: str,
    key_prefix: str | None = None,
    ttl_minutes: float | None = None,
    refresh_on_read: bool = False,
    aes_key: bytes | None = None,
    cipher: Cipher | None = None,
) -> Core | Awaitable[Core]: ...
