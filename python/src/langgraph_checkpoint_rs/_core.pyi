"""Type stubs of the extension module (python/src/lib.rs).

Every method taking ``aio`` runs synchronously (GIL released) when it is
False and returns an awaitable when it is True. Payloads are msgpack made
and read by the saver's serializer (see ``_base.py``).
"""

from typing import Awaitable, Protocol

__version__: str

class Cipher(Protocol):
    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]: ...
    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes: ...

class Lister:
    def next(self, aio: bool, max: int) -> list[tuple] | Awaitable[list[tuple]]: ...

class RawLister:
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
        checkpoint: bytes,
        metadata: bytes,
        new_versions: bytes,
    ) -> None | Awaitable[None]: ...
    def put_raw(
        self,
        aio: bool,
        thread_id: str,
        checkpoint_ns: str,
        parent_id: str | None,
        checkpoint_id: str,
        tag: str,
        data: bytes,
        metadata: bytes,
    ) -> None | Awaitable[None]: ...
    def put_writes(
        self,
        aio: bool,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str | None,
        task_id: str,
        task_path: str,
        payload: bytes,
    ) -> None | Awaitable[None]: ...
    def get_tuple(
        self, aio: bool, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None
    ) -> tuple | None | Awaitable[tuple | None]: ...
    def list(
        self,
        thread_id: str | None,
        checkpoint_ns: str | None,
        checkpoint_id: str | None,
        filter: bytes | None,
        before: str | None,
        limit: int | None,
    ) -> Lister: ...
    def get_tuple_raw(
        self, aio: bool, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None
    ) -> list[tuple] | None | Awaitable[list[tuple] | None]: ...
    def list_raw(
        self,
        thread_id: str | None,
        checkpoint_ns: str | None,
        checkpoint_id: str | None,
        filter: bytes | None,
        before: str | None,
        limit: int | None,
    ) -> RawLister: ...
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
