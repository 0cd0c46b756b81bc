"""LangGraph's official conformance suite (langgraph-checkpoint-conformance,
pinned in testdata/peer/VERSIONS.txt) against each saver of the package.

The suite counts a capability as present only when the class overrides its
async method, and its ``passed_all()`` ignores capabilities it did not
detect; so this test asserts every one of the eight capabilities detected
and passed, with nothing skipped, and the total number of tests run.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import Capability
from langgraph.checkpoint.conformance.report import ProgressCallbacks
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

from langgraph_checkpoint_rs import AsyncPostgresSaver, AsyncRedisSaver, AsyncSqliteSaver

from .conftest import REDIS_URL

# what langgraph-checkpoint-conformance 0.0.2 runs: 8 capabilities, 81 tests
CAPABILITIES = 8
TESTS = 81
AES_KEY = b"0123456789abcdef0123456789abcdef"


def _check(report) -> None:
    report.print_report()
    assert {c.value for c in Capability} == set(report.results), "a capability went unreported"
    assert len(report.results) == CAPABILITIES
    for name, result in report.results.items():
        assert result.detected, f"{name} not detected: the saver does not override its async method"
        assert result.passed is True, f"{name}: {result.failures}"
        assert result.tests_failed == 0, f"{name}: {result.failures}"
        assert result.tests_skipped == 0, f"{name}: {result.tests_skipped} skipped"
    assert sum(r.tests_passed for r in report.results.values()) == TESTS
    assert report.conformance_level() == "FULL"


def _serde(encrypted: bool):
    return EncryptedSerializer.from_pycryptodome_aes(key=AES_KEY) if encrypted else None


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
async def test_sqlite(encrypted: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        counter = iter(range(1_000))

        @checkpointer_test(name=f"langgraph_checkpoint_rs.AsyncSqliteSaver[{'aes' if encrypted else 'plain'}]")
        async def factory():
            path = Path(tmp) / f"store-{next(counter)}.sqlite"
            async with AsyncSqliteSaver.from_conn_string(str(path), serde=_serde(encrypted)) as saver:
                yield saver

        _check(await validate(factory, progress=ProgressCallbacks.verbose()))


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
async def test_postgres(encrypted: bool, pg_databases) -> None:
    @checkpointer_test(name=f"langgraph_checkpoint_rs.AsyncPostgresSaver[{'aes' if encrypted else 'plain'}]")
    async def factory():
        url = pg_databases.new()
        async with AsyncPostgresSaver.from_conn_string(url, serde=_serde(encrypted)) as saver:
            await saver.setup()
            yield saver

    _check(await validate(factory, progress=ProgressCallbacks.verbose()))


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
async def test_redis(encrypted: bool, redis_prefixes) -> None:
    @checkpointer_test(name=f"langgraph_checkpoint_rs.AsyncRedisSaver[{'aes' if encrypted else 'plain'}]")
    async def factory():
        prefix = redis_prefixes.new()
        async with AsyncRedisSaver.from_conn_string(
            REDIS_URL, key_prefix=prefix, serde=_serde(encrypted)
        ) as saver:
            yield saver

    _check(await validate(factory, progress=ProgressCallbacks.verbose()))
