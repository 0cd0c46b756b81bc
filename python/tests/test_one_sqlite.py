"""One process, one SQLite: Python's ``sqlite3`` (and LangGraph's own
``SqliteSaver`` on it) and our savers writing one file at once.

Two SQLite libraries in one process do not see each other's POSIX locks
(closing a file in one drops the other's locks): our writes would run
through a lock Python's connection holds. The extension therefore runs on
the library Python's ``_sqlite3`` loaded; these tests check that it does.
"""

from __future__ import annotations

import ctypes
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver as PySqliteSaver

import langgraph_checkpoint_rs
from langgraph_checkpoint_rs import SqliteSaver, _core, _sqlite_library
from langgraph_checkpoint_rs._sqlite_library import mapped_file, missing_sqlite_message

ROUNDS = 40


def config(thread_id: str) -> dict:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def put_one(saver, thread_id: str, step: int) -> str:
    checkpoint = empty_checkpoint()
    saver.put(config(thread_id), checkpoint, {"source": "loop", "step": step}, {})
    return checkpoint["id"]


def sqlite_files() -> set[str]:
    with open("/proc/self/maps", encoding="utf-8") as maps:
        lines = maps.read().splitlines()
    return {
        line.split(None, 5)[5]
        for line in lines
        if len(line.split(None, 5)) == 6 and "libsqlite3" in line.split(None, 5)[5]
    }


def test_one_sqlite_library_in_the_process() -> None:
    files = sqlite_files()
    assert len(files) <= 1, f"two SQLite libraries mapped: {files}"
    # the extension defines no SQLite of its own (SQLite's file header magic
    # is in every build of it)
    assert b"SQLite format 3\0" not in Path(_core.__file__).read_bytes()
    if files:
        # and that one library is the one Python's _sqlite3 calls
        import _sqlite3

        handle = ctypes.CDLL(_sqlite3.__file__)
        address = ctypes.cast(handle.sqlite3_libversion_number, ctypes.c_void_p).value
        with open("/proc/self/maps", encoding="utf-8") as maps:
            assert mapped_file(address, maps) in files


def test_a_python_write_lock_holds_our_writer(tmp_path: Path) -> None:
    """Python's connection holds the write lock: our put waits for its
    commit (with a second SQLite it would write straight through)."""
    path = str(tmp_path / "shared.sqlite")
    with SqliteSaver.from_conn_string(path) as saver:
        put_one(saver, "before", 0)
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("CREATE TABLE python_side (n INTEGER)")
        done = threading.Event()
        errors: list[BaseException] = []

        def write() -> None:
            try:
                put_one(saver, "during", 1)
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)
            done.set()

        writer = threading.Thread(target=write)
        writer.start()
        held = not done.wait(1.0)
        conn.execute("COMMIT")
        writer.join(30)
        conn.close()
        assert not errors, errors
        assert held, "our saver wrote while Python's sqlite3 held the write lock: two SQLite copies"
        assert saver.get_tuple(config("during")) is not None


def test_python_and_rust_savers_share_one_file_under_load(tmp_path: Path) -> None:
    """Threads of LangGraph's SqliteSaver, plain sqlite3 inserts and our
    saver write one WAL file at once: nothing is lost, nothing reports
    "database is locked"."""
    path = str(tmp_path / "shared.sqlite")
    setup = sqlite3.connect(path)
    setup.execute("PRAGMA journal_mode=WAL")
    setup.execute("CREATE TABLE python_rows (writer INTEGER, n INTEGER)")
    setup.commit()
    PySqliteSaver(setup).setup()
    setup.close()
    errors: list[BaseException] = []
    ours: dict[str, str] = {}
    theirs: dict[str, str] = {}
    start = threading.Barrier(5)

    def guarded(work):
        def run(*args):
            try:
                start.wait()
                work(*args)
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        return run

    @guarded
    def python_saver(writer: int) -> None:
        conn = sqlite3.connect(path, timeout=30, check_same_thread=False)
        saver = PySqliteSaver(conn)
        for n in range(ROUNDS):
            theirs[f"py-{writer}-{n}"] = put_one(saver, f"py-{writer}-{n}", n)
        conn.close()

    @guarded
    def python_rows(writer: int) -> None:
        conn = sqlite3.connect(path, timeout=30)
        for n in range(ROUNDS):
            with conn:
                conn.execute("INSERT INTO python_rows VALUES (?, ?)", (writer, n))
            conn.execute("SELECT count(*) FROM checkpoints").fetchone()
        conn.close()

    @guarded
    def rust_saver(writer: int, saver: SqliteSaver) -> None:
        for n in range(ROUNDS):
            thread_id = f"rs-{writer}-{n}"
            ours[thread_id] = put_one(saver, thread_id, n)
            got = saver.get_tuple(config(thread_id))
            assert got is not None and got.checkpoint["id"] == ours[thread_id]

    with SqliteSaver.from_conn_string(path) as saver:
        threads = [
            threading.Thread(target=python_saver, args=(0,)),
            threading.Thread(target=python_rows, args=(1,)),
            threading.Thread(target=python_rows, args=(2,)),
            threading.Thread(target=rust_saver, args=(3, saver)),
            threading.Thread(target=rust_saver, args=(4, saver)),
        ]
        began = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads), "a writer hung"
        assert not errors, errors
        assert time.monotonic() - began < 120
        # we read Python's checkpoints, Python reads ours
        for thread_id, checkpoint_id in theirs.items():
            assert saver.get_tuple(config(thread_id)).checkpoint["id"] == checkpoint_id
    conn = sqlite3.connect(path, check_same_thread=False)
    py_saver = PySqliteSaver(conn)
    for thread_id, checkpoint_id in ours.items():
        assert py_saver.get_tuple(config(thread_id)).checkpoint["id"] == checkpoint_id
    assert conn.execute("SELECT count(*) FROM python_rows").fetchone() == (2 * ROUNDS,)
    assert conn.execute("SELECT count(*) FROM checkpoints").fetchone() == (3 * ROUNDS,)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()


def test_the_missing_library_message_says_what_to_do() -> None:
    message = missing_sqlite_message(None, "undefined symbol: sqlite3_open_v2")
    assert "links libsqlite3 dynamically" in message
    assert "--no-binary" in message and "undefined symbol" in message
    old = missing_sqlite_message("/usr/lib/libsqlite3.so.0", "undefined symbol: sqlite3_x")
    assert "3.34.1 or newer" in old
    assert langgraph_checkpoint_rs.__version__ == _core.__version__


def test_a_second_sqlite_is_warned_about(monkeypatch: pytest.MonkeyPatch) -> None:
    """A _sqlite3 with SQLite linked in and hidden cannot lend it: a build
    that loads anyway (from source) runs on another copy, and says so."""
    monkeypatch.setattr(_sqlite_library, "python_sqlite_library", lambda: _sqlite_library.HIDDEN)
    with pytest.warns(RuntimeWarning, match="another copy"):
        assert _sqlite_library.import_core("langgraph_checkpoint_rs") is _core
