#!/usr/bin/env python3
"""Side-by-side table of the reference workload (testdata/peer/bench_python.py)
on LangGraph's Python savers and on langgraph-checkpoint-rs's, per operation:
sqlite vs rs-sqlite, postgres vs rs-postgres, redis (langgraph-checkpoint-plainredis)
vs rs-redis.

    python3 python/bench/package_table.py workload.jsonl [more.jsonl ...] [--mean]

Input: the JSON lines of bench_python.py (any number of runs of each saver,
e.g. the alternated rounds of scripts/python-package-bench.sh).  Per (saver,
operation) the cell is the median over the runs of each run's median call
(``p50_us``, the statistic scripts/compare_table.py compares; ``--mean``: each
run's mean, ``us_per_op``).  Ratio = Python's time / ours (> 1: ours is
faster).  Storage and peak RSS: medians over the runs.  Standard library
only; the medians and labels are scripts/compare_table.py's.
"""

from __future__ import annotations

import json
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import compare_table as ct  # noqa: E402

BACKENDS = [("sqlite", "rs-sqlite"), ("postgres", "rs-postgres"), ("redis", "rs-redis")]


def load(paths: list[str]) -> dict[tuple[str, str], list[dict]]:
    rows: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for path in paths:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    r = json.loads(line)
                    if "saver" in r and "op" in r:
                        rows[(r["saver"], r["op"])].append(r)
    return rows


def main() -> None:
    argv = sys.argv[1:]
    use_mean = "--mean" in argv
    paths = [a for a in argv if a != "--mean"]
    if not paths:
        sys.exit(__doc__)
    rows = load(paths)
    backends = [(py, rs) for py, rs in BACKENDS if (py, "put") in rows and (rs, "put") in rows]
    if not backends:
        sys.exit("no backend with both the Python saver and ours in the input")

    def us(r: dict) -> float:
        return r["us_per_op"] if use_mean else ct.python_us(r)

    wl = rows[(backends[0][1], "put")][0]["workload"]
    runs = {py: len(rows[(rs, "put")]) for py, rs in backends}
    stat = "mean call" if use_mean else "median call"
    print(f"Reference workload (testdata/peer/bench_python.py): T={wl['threads']} x S={wl['steps']}, "
          f"R={wl['random_gets']}, G={wl['global_filters']}, seed={wl['seed']}; runs per saver: "
          + ", ".join(f"{py} {n}" for py, n in runs.items())
          + f". Each cell: ours vs Python, us per call ({stat} of each run, median over the runs), "
          "and Python's time / ours (> 1x: ours faster).\n")
    print("| operation | " + " | ".join(f"{py}: rs-{py} vs {py}" for py, _ in backends) + " |")
    print("|---|" + "---:|" * len(backends))
    slower = []
    for op, label, _targets, _floor in ct.OPS:
        cells = []
        for py, rs in backends:
            p, r = rows.get((py, op)), rows.get((rs, op))
            if not p or not r:
                cells.append("-")
                continue
            pu, ru = ct.median([us(x) for x in p]), ct.median([us(x) for x in r])
            ratio = pu / ru
            if ratio < 1:
                slower.append(f"{rs} {label} ({ru:,.1f} vs {pu:,.1f} us)")
            cells.append(f"{ru:,.1f} vs {pu:,.1f} ({ratio:,.2f}x)")
        print(f"| {label} | " + " | ".join(cells) + " |")
    for op, label in [("storage_after_put", "storage after put, MB"), ("peak_rss", "peak RSS of the worker, MB")]:
        cells = []
        for py, rs in backends:
            p, r = rows.get((py, op)), rows.get((rs, op))
            if not p or not r:
                cells.append("-")
                continue
            pb, rb = ct.median([x["bytes"] for x in p]), ct.median([x["bytes"] for x in r])
            cells.append(f"{rb / 1e6:,.2f} vs {pb / 1e6:,.2f}")
        print(f"| {label} | " + " | ".join(cells) + " |")
    cells = []
    for py, rs in backends:
        p, r = rows.get((py, "_meta")), rows.get((rs, "_meta"))
        cells.append(f"{ct.median([x['wall_s'] for x in r]):,.1f} vs {ct.median([x['wall_s'] for x in p]):,.1f}"
                     if p and r else "-")
    print("| wall time per run, s | " + " | ".join(cells) + " |")
    print("\nSlower than Python's saver: " + ("; ".join(slower) if slower else "none"))


if __name__ == "__main__":
    main()
