"""The floor benchmarks of python/bench run, and measure what they say.

``sqlite_floor.py`` claims its raw statements write the rows Python's
``SqliteSaver`` writes: checked here row for row against Python's saver, and
ours against both. ``pg_floor.py`` runs end to end on a small size (it needs
PostgreSQL: skipped without it, failing under CI).
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys

from .conftest import PG_URL, unavailable

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench")
sys.path.insert(0, BENCH)

import sqlite_floor  # noqa: E402


def _rows(path: str) -> tuple[list[tuple], list[tuple]]:
    conn = sqlite3.connect(path)
    try:
        cps = conn.execute(
            "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata "
            "FROM checkpoints ORDER BY thread_id, checkpoint_ns, checkpoint_id"
        ).fetchall()
        writes = conn.execute(
            "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value "
            "FROM writes ORDER BY thread_id, checkpoint_ns, checkpoint_id, task_id, idx"
        ).fetchall()
    finally:
        conn.close()
    return cps, writes


def test_sqlite_floor_writes_the_rows_python_writes(tmp_path):
    ops = sqlite_floor.workload(threads=2, steps=6, seed=42)
    stored = {}
    for kind in ["floor", "sqlite", "rs-sqlite"]:
        path = str(tmp_path / f"{kind}.sqlite")
        clock = sqlite_floor.Clock()
        if kind == "floor":
            sqlite_floor.run_floor(path, ops, 2, clock, delete=False)
        else:
            sqlite_floor.run_saver(kind, path, ops, 2, clock, delete=False)
        assert len(clock.wall["put"]) == len(ops) == 12
        assert len(clock.wall["put_writes"]) == len(ops)
        stored[kind] = _rows(path)
    cps, writes = stored["sqlite"]
    assert len(cps) == 12 and len(writes) > 0
    assert stored["floor"] == stored["sqlite"]
    assert stored["rs-sqlite"] == stored["sqlite"]


def test_sqlite_floor_reports_every_kind():
    out = subprocess.run(
        [sys.executable, os.path.join(BENCH, "sqlite_floor.py"), "--threads", "2", "--steps", "3", "--rounds", "1"],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    rows = re.findall(r"^\| (\S+) \| (\S+) \| ([\d,.]+) \| ([\d,.]+) \| ([\d,.]+) \| (\d+) \|$", out.stdout, re.M)
    assert {(k, op) for k, op, *_ in rows} == {
        (k, op) for k in sqlite_floor.KINDS for op in sqlite_floor.OPS
    }
    assert all(float(r[2].replace(",", "")) > 0 for r in rows)


def test_pg_floor_runs():
    try:
        import psycopg

        with psycopg.connect(f"{PG_URL}/postgres", connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as e:  # noqa: BLE001 - any failure means "no server"
        unavailable(f"no PostgreSQL at {PG_URL}: {e}")
    out = subprocess.run(
        [sys.executable, os.path.join(BENCH, "pg_floor.py"), "--pg-url", PG_URL, "--calls", "5", "--rounds", "1"],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    names = re.findall(r"^\| ([a-z0-9_ ]+) \| [\d,.]+ \|$", out.stdout, re.M)
    assert set(names) == {"floor insert", "floor select 1", "rs aput", "rs aput_writes", "py aput", "py aput_writes"}
    with psycopg.connect(f"{PG_URL}/postgres", autocommit=True) as conn:
        left = conn.execute("SELECT count(*) FROM pg_database WHERE datname LIKE 'ckpt_pg_floor_%'").fetchone()[0]
    assert left == 0, "pg_floor.py left its database behind"
