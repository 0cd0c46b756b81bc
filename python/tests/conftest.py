"""Services for the package's tests.

SQLite needs nothing. PostgreSQL comes from ``CHECKPOINTER_PG_URL`` (a server
URL without a database, as ``.ci/run`` exports; default
``postgresql://postgres@127.0.0.1:5432``): each store gets a database of its
own, dropped at the end. Redis comes from ``CHECKPOINTER_REDIS_URL`` (default
``redis://127.0.0.1:6379``): each store gets a key prefix of its own, deleted
at the end. Without a server these tests are skipped with the reason, except
under ``CI=true``, where they fail.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator

import pytest

PG_URL = os.environ.get("CHECKPOINTER_PG_URL", "postgresql://postgres@127.0.0.1:5432").rstrip("/")
REDIS_URL = os.environ.get("CHECKPOINTER_REDIS_URL", "redis://127.0.0.1:6379")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
RUN = f"{os.getpid()}_{uuid.uuid4().hex[:6]}"


def unavailable(reason: str) -> None:
    """Fails under CI, skips (with the reason) elsewhere."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: required)")
    pytest.skip(reason)


def _pg_admin():
    import psycopg

    return psycopg.connect(f"{PG_URL}/postgres", autocommit=True, connect_timeout=3)


class PgDatabases:
    """Creates databases for one test session and drops them at the end."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.error: str | None = None
        try:
            with _pg_admin() as conn:
                conn.execute("SELECT 1")
        except Exception as e:  # noqa: BLE001 - any failure means "no server"
            self.error = f"no PostgreSQL at {PG_URL}: {e}"

    def new(self) -> str:
        if self.error:
            unavailable(self.error)
        name = f"ckpt_test_py_{RUN}_{len(self.names)}"
        with _pg_admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self.names.append(name)
        return f"{PG_URL}/{name}"

    def drop_all(self) -> None:
        if not self.names:
            return
        with _pg_admin() as conn:
            for name in self.names:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class RedisPrefixes:
    """Hands out key prefixes for one test session and deletes their keys."""

    def __init__(self) -> None:
        self.prefixes: list[str] = []
        self.error: str | None = None
        try:
            out = subprocess.run(
                ["redis-cli", "-u", REDIS_URL, "ping"], capture_output=True, text=True, timeout=5
            )
            if out.stdout.strip() != "PONG":
                self.error = f"no Redis at {REDIS_URL}: {out.stdout.strip() or out.stderr.strip()}"
        except (OSError, subprocess.TimeoutExpired) as e:
            self.error = f"no Redis at {REDIS_URL} (redis-cli: {e})"

    def new(self) -> str:
        if self.error:
            unavailable(self.error)
        prefix = f"pytest-{RUN}-{len(self.prefixes)}"
        self.prefixes.append(prefix)
        return prefix

    def delete_all(self) -> None:
        if self.error or not self.prefixes:
            return
        script = (
            "local n = 0 for _, k in ipairs(redis.call('KEYS', ARGV[1])) do "
            "redis.call('UNLINK', k) n = n + 1 end return n"
        )
        subprocess.run(
            ["redis-cli", "-u", REDIS_URL, "EVAL", script, "0", f"*pytest-{RUN}-*"],
            capture_output=True,
            timeout=30,
        )


@pytest.fixture(scope="session")
def pg_databases() -> Iterator[PgDatabases]:
    dbs = PgDatabases()
    yield dbs
    dbs.drop_all()


@pytest.fixture(scope="session")
def redis_prefixes() -> Iterator[RedisPrefixes]:
    prefixes = RedisPrefixes()
    yield prefixes
    prefixes.delete_all()


BACKENDS = ["sqlite", "postgres", "redis"]


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def open_saver(backend, tmp_path, pg_databases, redis_prefixes):
    """``open_saver(serde=None)``: a fresh, empty sync saver of the backend
    (closed at the end of the test); ``open_saver.url`` after the first call
    is where it stores (a file path, a database URL or a key prefix)."""
    from langgraph_checkpoint_rs import PostgresSaver, RedisSaver, SqliteSaver

    opened = []

    def make(serde=None):
        if backend == "sqlite":
            make.url = str(tmp_path / f"store-{len(opened)}.sqlite")
            saver = SqliteSaver(make.url, serde=serde)
        elif backend == "postgres":
            make.url = pg_databases.new()
            saver = PostgresSaver(make.url, serde=serde)
            saver.setup()
        else:
            make.url = redis_prefixes.new()
            saver = RedisSaver(REDIS_URL, key_prefix=make.url, serde=serde)
        opened.append(saver)
        return saver

    yield make
    for saver in opened:
        try:
            saver.close()
        except Exception:  # noqa: BLE001 - a test may have closed it already
            pass
