"""Python's SqliteStore against ours on the same data, alternated, medians.

    python scripts/store_side_by_side.py [--items 10000] [--rounds 7]
        [--ours "cargo bench -q -p checkpointer-benches --features sqlite-bundled,store --bench store -- --serve"]
    python scripts/store_side_by_side.py --postgres postgresql://postgres@127.0.0.1:5432 \
        --ours "cargo bench -q -p checkpointer-benches --features sqlite-bundled,store,postgres --bench store -- --serve"

With --postgres, Python's AsyncPostgresStore against our PostgresStore on
that server instead: ours fills a database of its own
(<--pg-prefix>_ours, default ckpt_store_sbs_ours), which is copied (CREATE
DATABASE ... TEMPLATE) for Python's (<--pg-prefix>_python), both analyzed;
both are dropped at the end. Without
pgvector on the server neither store has an index: no vector search.

Ours runs in benches/store.rs's `--serve` mode (the command above, or any
given with --ours). It fills one file with the items (the data of
benches/store.rs: item i in ("bench", "u{i % 100}"), key "k{i}", value
{"text": 8 words, "kind": "k{i % 8}", "n": i}, its text embedded with the
hashed n-gram test embedding, 128 dimensions); the file is copied, and
LangGraph's SqliteStore (sqlite-vec loaded) opens the copy, ours the
original: the same bytes, each its own file. Then, round by round, each
side runs the same operations (put: an item overwritten; get; search with
the filter {"kind": ...}; search of one namespace; vector search, limit 10),
who goes first alternating by round; each operation is timed where it runs
(perf_counter around the Python call, Instant around ours), so process
start-up and the pipe are not counted. Prints the median per operation and
the ratio.
"""

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from store_python_peer import connect, hashed_ngrams  # noqa: E402

DIMS = 128
SPACES = 100
WORDS = (
    "apple river stone cloud green rust python memory garden signal paper window engine silver forest "
    "market letter bridge summer winter castle planet doctor music travel coffee friend number yellow "
    "spring animal island pencil rocket candle orange basket mirror button jacket ticket rabbit bottle "
    "carpet dinner finger hammer kitten ladder meadow needle pepper puzzle saddle tunnel velvet wallet "
    "zipper anchor beacon cactus dragon falcon harbor"
).split()
assert len(WORDS) == 64

CASES = ["put", "get", "search_filter", "search_namespace", "vector_search"]


def text(seed):
    out = []
    for k in range(8):
        h = ((seed * 2654435761) ^ (k * 40503)) & 0xFFFFFFFF
        out.append(WORDS[(h >> 11) % 64])
    return " ".join(out)


def namespace(i):
    return ("bench", f"u{i % SPACES}")


def value(i, seed):
    return {"text": text(seed), "kind": f"k{i % 8}", "n": i}


class AsyncSide:
    """Python's AsyncPostgresStore driven from this synchronous loop: each
    operation awaited on one event loop (the loop's turn counted in)."""

    def __init__(self, url):
        import asyncio

        from langgraph.store.postgres import AsyncPostgresStore

        self.loop = asyncio.new_event_loop()
        self.cm = AsyncPostgresStore.from_conn_string(url)
        self.store = self.loop.run_until_complete(self.cm.__aenter__())
        self.loop.run_until_complete(self.store.setup())

    def put(self, *args, **kw):
        return self.loop.run_until_complete(self.store.aput(*args, **kw))

    def get(self, *args, **kw):
        return self.loop.run_until_complete(self.store.aget(*args, **kw))

    def search(self, *args, **kw):
        return self.loop.run_until_complete(self.store.asearch(*args, **kw))

    def close(self):
        import asyncio

        self.loop.run_until_complete(self.cm.__aexit__(None, None, None))
        # let the store's batching task finish its cancellation
        self.loop.run_until_complete(asyncio.sleep(0.05))
        self.loop.close()


def admin(url, *statements):
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for sql in statements:
            conn.execute(sql)


def with_db(url, name):
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path="/" + name))


def run(store, case, n, items):
    """Operation n of a case, as benches/store.rs runs it."""
    i = (n * 7919) % items
    if case == "put":
        store.put(namespace(i), f"k{i}", value(i, items + n))
    elif case == "get":
        assert store.get(namespace(i), f"k{i}") is not None
    elif case == "search_filter":
        found = store.search(("bench",), filter={"kind": f"k{n % 8}"}, limit=10)
        assert len(found) == 10
    elif case == "search_namespace":
        found = store.search(namespace(n), limit=10)
        assert len(found) == 10
    else:
        found = store.search(("bench",), query=text((2**64 - 1) // 2 + n), limit=10)
        assert found[0].score is not None


class Ours:
    def __init__(self, command):
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, **cmd):
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            sys.exit("ours stopped")
        return json.loads(line)

    def close(self):
        self.proc.stdin.write('{"cmd": "quit"}\n')
        self.proc.stdin.close()
        self.proc.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--ours",
        default="cargo bench -q -p checkpointer-benches --features sqlite-bundled,store --bench store -- --serve",
    )
    parser.add_argument("--dir", help="where the two files go (default: a temporary directory)")
    parser.add_argument("--postgres", help="a server URL: AsyncPostgresStore against our PostgresStore")
    parser.add_argument("--pg-prefix", default="ckpt_store_sbs", help="names of the two databases made (_ours, _python)")
    args = parser.parse_args()
    if args.postgres:
        return main_postgres(args)
    items = args.items
    # operations per round: more of the cheap ones; fewer at a million items
    counts = {"put": 20, "get": 200, "search_filter": 20, "search_namespace": 50, "vector_search": 10}
    if items >= 100_000:
        counts.update(search_filter=4, vector_search=3, search_namespace=10)
    work = args.dir or tempfile.mkdtemp(prefix="store-sbs-")
    os.makedirs(work, exist_ok=True)
    ours_db, py_db = os.path.join(work, "ours.sqlite"), os.path.join(work, "python.sqlite")
    for f in (ours_db, py_db):
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(f + suffix):
                os.remove(f + suffix)
    ours = Ours(shlex.split(args.ours))
    filled = ours.ask(cmd="open", db=ours_db, items=items, fill=True)["fill_s"]
    print(f"filled {items} items (ours, batches of 1000) in {filled:.1f} s", file=sys.stderr)
    ours.ask(cmd="close")
    for suffix in ("", "-wal"):
        if os.path.exists(ours_db + suffix):
            shutil.copyfile(ours_db + suffix, py_db + suffix)
    ours.ask(cmd="open", db=ours_db, items=items, fill=False)

    from langgraph.store.sqlite import SqliteStore

    conn = connect(py_db)
    index = {
        "dims": DIMS,
        "embed": lambda texts: [hashed_ngrams(t, DIMS) for t in texts],
        "fields": ["text"],
        "text_fields": ["text"],
    }
    py = SqliteStore(conn, index=index)
    py.setup()

    times = alternate(py, ours, CASES, counts, items, args.rounds)
    ours.ask(cmd="close")
    ours.close()
    conn.close()

    report(f"SqliteStore side by side, {items} items, {args.rounds} rounds alternated", CASES, times)
    if not args.dir:
        shutil.rmtree(work)


def main_postgres(args):
    items = args.items
    cases = [c for c in CASES if c != "vector_search"]
    counts = {"put": 20, "get": 200, "search_filter": 20, "search_namespace": 50}
    ours_name, py_name = f"{args.pg_prefix}_ours", f"{args.pg_prefix}_python"
    admin(args.postgres, f"DROP DATABASE IF EXISTS {py_name}", f"DROP DATABASE IF EXISTS {ours_name}")
    admin(args.postgres, f"CREATE DATABASE {ours_name}")
    ours_url, py_url = with_db(args.postgres, ours_name), with_db(args.postgres, py_name)
    ours = Ours(shlex.split(args.ours))
    filled = ours.ask(cmd="open", url=ours_url, items=items, fill=True)["fill_s"]
    print(f"filled {items} items (ours, batches of 1000) in {filled:.1f} s", file=sys.stderr)
    ours.ask(cmd="close")
    admin(args.postgres, f"CREATE DATABASE {py_name} TEMPLATE {ours_name}")
    admin(py_url, "ANALYZE store")
    admin(ours_url, "ANALYZE store")
    ours.ask(cmd="open", url=ours_url, items=items, fill=False)
    py = AsyncSide(py_url)
    times = alternate(py, ours, cases, counts, items, args.rounds)
    ours.ask(cmd="close")
    ours.close()
    py.close()
    report(f"AsyncPostgresStore side by side, {items} items, {args.rounds} rounds alternated", cases, times)
    admin(args.postgres, f"DROP DATABASE IF EXISTS {py_name}", f"DROP DATABASE IF EXISTS {ours_name}")


def alternate(py, ours, cases, counts, items, rounds):
    """Round by round each side runs the same operations, who goes first
    alternating; the times per (side, case)."""
    times = {(side, c): [] for side in ("python", "ours") for c in cases}
    start = {c: 0 for c in cases}
    for r in range(rounds):
        for case in cases:
            first, count = start[case], counts[case]
            start[case] += count
            sides = ["python", "ours"] if r % 2 == 0 else ["ours", "python"]
            for side in sides:
                if side == "python":
                    for n in range(first, first + count):
                        t = time.perf_counter()
                        run(py, case, n, items)
                        times[(side, case)].append(time.perf_counter() - t)
                else:
                    got = ours.ask(cmd="run", op=case, **{"from": first}, count=count, items=items)
                    times[(side, case)].extend(got["times"])
        print(f"round {r + 1}/{rounds}", file=sys.stderr)
    return times


def report(title, cases, times):
    print(f"{title} (median per operation)")
    print(f"{'operation':<18} {'Python':>12} {'ours':>12} {'ratio':>8}")
    for case in cases:
        p = statistics.median(times[("python", case)])
        o = statistics.median(times[("ours", case)])
        print(f"{case:<18} {fmt(p):>12} {fmt(o):>12} {p / o:>7.1f}x")


def fmt(seconds):
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} us"


if __name__ == "__main__":
    main()
