#!/usr/bin/env python3
"""Times ormsgpack.unpackb of one msgpack blob call by call (the result
dropped inside the timed section), as `workload --decode FILE` does for
checkpointer::serde::msgpack::decode, and prints one JSON line.

    python decode_python.py BLOB [--calls N] [--out FILE]

`median_us` is plain `ormsgpack.unpackb(data)`; `langgraph_median_us` is the
call LangGraph's JsonPlusSerializer makes (`ext_hook` and
`OPT_NON_STR_KEYS`), when langgraph is importable.
"""

from __future__ import annotations

import argparse
import json
import time

import ormsgpack


def per_call(fn, data: bytes, calls: int) -> list[int]:
    for _ in range(50):
        fn(data)
    out = []
    clock = time.perf_counter_ns
    for _ in range(calls):
        t0 = clock()
        v = fn(data)
        del v
        out.append(clock() - t0)
    out.sort()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("blob")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--out")
    a = ap.parse_args()
    with open(a.blob, "rb") as f:
        data = f.read()
    smp = per_call(ormsgpack.unpackb, data, a.calls)
    n = len(smp)
    row = {
        "saver": "msgpack",
        "op": "decode_latest_checkpoint",
        "impl": "python",
        "what": "ormsgpack.unpackb of the same bytes, result dropped, per call",
        "bytes": len(data),
        "calls": n,
        "median_us": round(smp[n // 2] / 1000, 2),
        "us_per_op": round(sum(smp) / n / 1000, 2),
        "p99_us": round(smp[min(n - 1, n * 99 // 100)] / 1000, 2),
        "ormsgpack": ormsgpack.__version__,
    }
    try:
        from langgraph.checkpoint.serde.jsonplus import _msgpack_ext_hook

        opt = ormsgpack.OPT_NON_STR_KEYS
        lg = per_call(lambda d: ormsgpack.unpackb(d, ext_hook=_msgpack_ext_hook, option=opt), data, a.calls)
        row["langgraph_median_us"] = round(lg[len(lg) // 2] / 1000, 2)
    except ImportError:
        pass
    line = json.dumps(row)
    print(line)
    if a.out:
        with open(a.out, "a") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
