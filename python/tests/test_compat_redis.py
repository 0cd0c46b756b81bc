"""Our RedisSaver shares its store with the crate's Rust `RedisSaver` (there
is no Python saver with this layout): what the package writes, the Rust
CLI (`checkpointer`, a separate program on the crate) exports as the same
dump as Python's own SqliteSaver's file of the same history; and what the
CLI copies into Redis, the package reads back.

The CLI comes from ``CHECKPOINTER_CLI`` or ``{debug,release}/checkpointer``
under the target directory cargo reports for this workspace (``cargo build -p
checkpointer-cli``; ``CARGO_TARGET_DIR`` and ``.cargo/config.toml`` are
honoured); without it these tests are skipped, or fail under CI.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver as PySqliteSaver

from langgraph_checkpoint_rs import RedisSaver

from . import scenario
from .conftest import REDIS_URL, unavailable

ROOT = Path(__file__).resolve().parents[2]


def target_dir() -> Path:
    """Where cargo puts this workspace's builds, as `cargo metadata` says."""
    try:
        out = subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--no-deps"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    except OSError:
        out = None
    if out is not None and out.returncode == 0:
        return Path(json.loads(out.stdout)["target_directory"])
    return Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")


def cli() -> str:
    explicit = os.environ.get("CHECKPOINTER_CLI")
    candidates = [explicit] if explicit else [
        str(target_dir() / profile / "checkpointer") for profile in ("debug", "release")
    ]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    unavailable("no checkpointer CLI (set CHECKPOINTER_CLI or run `cargo build -p checkpointer-cli`)")
    raise AssertionError("unreachable")


def export(url: str) -> dict:
    """The CLI's canonical dump, without the line naming the store."""
    out = subprocess.run(
        [cli(), "export", "--normalize", "--no-progress", "--color", "never", url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    dump = json.loads(out.stdout)
    dump.pop("source")
    return dump


def redis_url(prefix: str) -> str:
    return f"{REDIS_URL}?prefix={prefix}"


def python_sqlite_store(path: Path) -> list[tuple]:
    # no value changes without a new version: Redis keeps one value per
    # (channel, version), as Python's PostgresSaver does for its blobs
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = PySqliteSaver(conn)
    saver.setup()
    scenario.replay(saver, stale_version=False)
    everything = scenario.everything(saver)
    conn.close()
    return everything


def test_the_rust_saver_reads_what_the_package_wrote(tmp_path: Path, redis_prefixes) -> None:
    prefix = redis_prefixes.new()
    with RedisSaver.from_conn_string(REDIS_URL, key_prefix=prefix) as saver:
        scenario.replay(saver, stale_version=False)
    python_sqlite_store(tmp_path / "python.sqlite")
    ours = export(redis_url(prefix))
    theirs = export(f"sqlite://{tmp_path / 'python.sqlite'}")
    assert ours == theirs
    assert ours["summary"]["checkpoints"] == 9 and not ours["errors"]


def test_the_package_reads_what_the_rust_saver_wrote(tmp_path: Path, redis_prefixes) -> None:
    expected = python_sqlite_store(tmp_path / "python.sqlite")
    prefix = redis_prefixes.new()
    out = subprocess.run(
        [cli(), "copy", "--no-progress", f"sqlite://{tmp_path / 'python.sqlite'}", redis_url(prefix)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    with RedisSaver.from_conn_string(REDIS_URL, key_prefix=prefix) as saver:
        assert scenario.everything(saver) == expected
        assert len(expected) == 9


@pytest.mark.parametrize("refresh", [False, True])
def test_ttl_is_set_on_every_key(redis_prefixes, refresh: bool) -> None:
    prefix = redis_prefixes.new()
    ttl = {"default_ttl": 5, "refresh_on_read": refresh}
    with RedisSaver.from_conn_string(REDIS_URL, key_prefix=prefix, ttl=ttl) as saver:
        scenario.replay(saver, stale_version=False)
        assert len(scenario.everything(saver)) == 9
    keys = subprocess.run(
        ["redis-cli", "-u", REDIS_URL, "--scan", "--pattern", f"*{prefix}*"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout.split()
    # every key of a thread; the global index (another slot) is swept instead
    thread_keys = [k for k in keys if ":v2:{" in k and "{#index}" not in k]
    assert len(thread_keys) >= 9, keys
    for key in thread_keys:
        pttl = int(
            subprocess.run(
                ["redis-cli", "-u", REDIS_URL, "PTTL", key], capture_output=True, text=True, timeout=10
            ).stdout.strip()
        )
        assert 0 < pttl <= 5 * 60_000, (key, pttl)
