"""Memory per thread of Python's InMemorySaver: N threads (argv[1], default
200 000), each one checkpoint of one small channel ("name" = "Alice"), the
workload of benches/memory_per_thread.rs; the bytes the saver holds
afterwards as tracemalloc counts them (requested sizes), divided by N."""

import sys
import tracemalloc

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    metadata = {"source": "input", "step": -1, "parents": {}}
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    saver = InMemorySaver()
    for i in range(n):
        checkpoint = empty_checkpoint()
        version = saver.get_next_version(None, None)
        checkpoint["channel_values"] = {"name": "Alice"}
        checkpoint["channel_versions"] = {"name": version}
        config = {"configurable": {"thread_id": f"thread-{i}", "checkpoint_ns": ""}}
        saver.put(config, checkpoint, metadata, {"name": version})
    after = tracemalloc.get_traced_memory()[0]
    per = (after - before) / n
    print(f"python InMemorySaver: {n} threads, {per:.0f} bytes per thread ({per * n / 1e6:.1f} MB in all)")
    del saver


if __name__ == "__main__":
    main()
