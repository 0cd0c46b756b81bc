#!/usr/bin/env python3
"""Takeover after a crashed owner, measured with Rust race workers alone.

Two `examples/race_worker.rs` processes race on one thread of a store
(each polls `acquire` every 20 ms and appends while it owns the thread).
Each round the owner (the worker with the highest epoch logged) runs a
random 0-600 ms, is SIGKILLed and replaced by a new worker; the takeover is
the time from the kill to the next `OWN` line of another worker (the
workers log in microseconds since the Unix epoch, the harness reads the
same clock). Prints the median and the maximum per store
(`docs/reliability.md`, *Takeover*).

    scripts/takeover.py WORKER LEASE_MS ROUNDS URL [URL ...]

WORKER is the race worker binary (`cargo build --example race_worker
--features sqlite-bundled,postgres,redis`); each URL a
`checkpointer::open` URL. Needs no Python package: test_race.py measures
the same with Python workers in the race too.
"""

from __future__ import annotations

import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid


def owns(log: str) -> list[tuple[float, int]]:
    """The (time in s, epoch) of every OWN line of a worker's log."""
    out = []
    try:
        with open(log, encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[1] == "OWN":
                    out.append((int(parts[0]) / 1e6, int(parts[2])))
                elif len(parts) > 1 and parts[1] == "ERROR":
                    raise SystemExit(f"{log}: {line.strip()}")
    except FileNotFoundError:
        pass
    return out


def measure(worker: str, lease_ms: int, rounds: int, url: str, tmp: str) -> list[float]:
    thread = f"takeover-{uuid.uuid4().hex[:12]}"
    procs: dict[str, subprocess.Popen[bytes]] = {}

    def start() -> None:
        name = f"w{len(procs)}-{uuid.uuid4().hex[:6]}"
        log = os.path.join(tmp, name + ".log")
        procs[log] = subprocess.Popen([worker, url, thread, name, str(lease_ms), log])

    def latest() -> tuple[str, float, int] | None:
        best = None
        for log, proc in procs.items():
            for t, epoch in owns(log):
                if proc.poll() is None and (best is None or epoch > best[2]):
                    best = (log, t, epoch)
        return best

    start()
    start()
    takeovers = []
    try:
        for _ in range(rounds):
            deadline = time.time() + 10
            while (owner := latest()) is None:
                if time.time() > deadline:
                    raise SystemExit(f"{url}: no worker took the thread")
                time.sleep(0.005)
            time.sleep(random.uniform(0, 0.6))
            owner = latest()
            procs[owner[0]].send_signal(signal.SIGKILL)
            killed = time.time()
            procs[owner[0]].wait()
            start()
            deadline = killed + 10
            while True:
                taken = [t for log, p in procs.items() if log != owner[0] for t, e in owns(log) if e > owner[2]]
                if taken:
                    takeovers.append(min(taken) - killed)
                    break
                if time.time() > deadline:
                    raise SystemExit(f"{url}: no takeover within 10 s")
                time.sleep(0.002)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
    return takeovers


def main() -> None:
    if len(sys.argv) < 5:
        raise SystemExit(__doc__)
    worker, lease_ms, rounds, urls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    for url in urls:
        with tempfile.TemporaryDirectory() as tmp:
            ms = [t * 1000 for t in measure(worker, lease_ms, rounds, url, tmp)]
        store = url.split(":", 1)[0]
        print(
            f"TAKEOVER {store}: lease {lease_ms} ms, {len(ms)} kills: median {statistics.median(ms):.0f} ms, "
            f"min {min(ms):.0f} ms, max {max(ms):.0f} ms",
            flush=True,
        )


if __name__ == "__main__":
    main()
