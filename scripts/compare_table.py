#!/usr/bin/env python3
"""Prints the Rust/Python speed ratio per operation and backend, with the
project's speed target for each (OPS below), plus storage bytes and peak RSS,
from two result files in the line format of bench_python.py (Python's and
examples/workload.rs's).

    python3 scripts/compare_table.py python.jsonl rust.jsonl [conc-python.jsonl conc-rust.jsonl]

The optional pair is the output of scripts/concurrency_python.py and
benches/concurrency.rs (aggregate puts/s of 1, 4, 16 concurrent writers).

Ratio = Rust ops/s / Python ops/s (= Python us per op / Rust us per op).
Standard library only.
"""

from __future__ import annotations

import json
import sys

SAVERS = ["memory", "sqlite", "postgres"]
# (op, label, targets per saver)
OPS = [
    ("put", "put", (20, 2, 3)),
    ("put_writes", "put_writes", (10, 2, 3)),
    ("get_tuple_latest", "get_tuple latest", (30, 5, 3)),
    ("get_tuple_by_id", "get_tuple by id", (30, 5, 3)),
    ("list_limit10", "list limit 10", (20, 5, 3)),
    ("list_full", "list full history", (20, 5, 3)),
    ("list_filter_thread", "list(thread, filter)", (20, 5, 3)),
    ("list_filter_global", "list(None, filter)", (20, 5, 3)),
    ("delete_thread", "delete_thread", (100, 5, 3)),
]


def load(path: str) -> dict[tuple[str, str], dict]:
    rows = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                r = json.loads(line)
                rows[(r["saver"], r["op"])] = r
    return rows


def main() -> None:
    if len(sys.argv) not in (3, 5):
        sys.exit(__doc__)
    py, rs = load(sys.argv[1]), load(sys.argv[2])
    savers = [s for s in SAVERS if (s, "put") in py and (s, "put") in rs]
    if not savers:
        sys.exit("no saver present in both files")
    wl = rs[(savers[0], "put")]["workload"]
    print(f"Workload: T={wl['threads']} x S={wl['steps']}, R={wl['random_gets']}, "
          f"G={wl['global_filters']}, seed={wl['seed']}, repeats={wl['repeats']} (median).")
    print("Rust speed / Python speed (same run); target in brackets; ok = target met.\n")
    print("| operation | " + " | ".join(savers) + " |")
    print("|---|" + "---:|" * len(savers))
    held, missed = [], []
    for op, label, targets in OPS:
        cells = []
        for s in savers:
            p, r = py.get((s, op)), rs.get((s, op))
            if not p or not r:
                cells.append("-")
                continue
            ratio = p["us_per_op"] / r["us_per_op"]
            target = targets[SAVERS.index(s)]
            ok = ratio >= target
            (held if ok else missed).append(f"{s} {label}")
            cells.append(f"{ratio:,.1f}x (>= {target}x) {'ok' if ok else 'MISS'}"
                         f"<br>{r['us_per_op']:,.1f} vs {p['us_per_op']:,.1f} us")
        print(f"| {label} | " + " | ".join(cells) + " |")
    cells = []
    for s in savers:
        p, r = py.get((s, "storage_after_put")), rs.get((s, "storage_after_put"))
        if not p or not r:
            cells.append("-")
            continue
        ok = r["bytes"] <= p["bytes"]
        (held if ok else missed).append(f"{s} storage")
        cells.append(f"{r['bytes'] / 1e6:,.2f} vs {p['bytes'] / 1e6:,.2f} MB ({r['bytes'] - p['bytes']:+,} B) "
                     f"{'ok' if ok else 'MISS'}")
    print("| storage after put (Rust vs Python) | " + " | ".join(cells) + " |")
    cells = []
    for s in savers:
        p, r = py.get((s, "peak_rss")), rs.get((s, "peak_rss"))
        if not p or not r:
            cells.append("-")
            continue
        frac = r["bytes"] / p["bytes"]
        text = f"{r['bytes'] / 1e6:,.0f} vs {p['bytes'] / 1e6:,.0f} MB ({frac:.2f}"
        if s == "memory":
            ok = frac <= 0.5
            (held if ok else missed).append("memory peak RSS")
            text += f", <= 0.5) {'ok' if ok else 'MISS'}"
        else:
            text += ")"
        cells.append(text)
    print("| peak RSS (Rust vs Python) | " + " | ".join(cells) + " |")
    cells = []
    for s in savers:
        p, r = py.get((s, "_meta")), rs.get((s, "_meta"))
        cells.append(f"{r['wall_s']:,.1f} vs {p['wall_s']:,.1f} s" if p and r else "-")
    print("| wall time (Rust vs Python) | " + " | ".join(cells) + " |")
    floor = [(op, rs.get(("sqlite", op + "_paired")), rs.get(("sqlite", op + "_floor"))) for op in ("put", "put_writes")]
    floor = [(op, r, f) for op, r, f in floor if r and f]
    if floor:
        print("\nSQLite floor: the put phase replayed through a fresh SqliteSaver and as raw rusqlite inserts of the "
              "same rows (same schema, transaction per call, sync mode), alternating call by call: "
              + "; ".join(f"{op} {r['us_per_op']:,.1f} us vs floor {f['us_per_op']:,.1f} us "
                          f"({r['us_per_op'] / f['us_per_op']:.2f}x the floor)" for op, r, f in floor))
    if len(sys.argv) == 5:
        conc(sys.argv[3], sys.argv[4], held, missed)
    print(f"\nTargets met ({len(held)}): " + (", ".join(held) or "none"))
    print(f"Targets missed ({len(missed)}): " + (", ".join(missed) or "none"))


def conc(py_path: str, rs_path: str, held: list, missed: list) -> None:
    def rows(path: str) -> dict:
        out = {}
        with open(path) as f:
            for line in f:
                if line.startswith("{"):  # skips e.g. "skipped: no PostgreSQL ..."
                    r = json.loads(line)
                    out[(r["saver"], r["writers"])] = r
        return out

    py, rs = rows(py_path), rows(rs_path)
    savers = [s for s in ("sqlite", "postgres") if any(k[0] == s for k in rs) and any(k[0] == s for k in py)]
    writers = sorted({k[1] for k in rs} & {k[1] for k in py})
    if not savers or not writers:
        return
    steps = next(iter(rs.values()))["steps"]
    print(f"\nConcurrent writers ({steps} puts each, distinct threads): aggregate puts/s, Rust vs Python, "
          "ratio (target at 16 writers: >= 10x)\n")
    print("| writers | " + " | ".join(savers) + " |")
    print("|---:|" + "---:|" * len(savers))
    for w in writers:
        cells = []
        for s in savers:
            p, r = py.get((s, w)), rs.get((s, w))
            if not p or not r:
                cells.append("-")
                continue
            ratio = r["puts_per_sec"] / p["puts_per_sec"]
            text = f"{r['puts_per_sec']:,.0f} vs {p['puts_per_sec']:,.0f} = {ratio:.1f}x"
            if w == 16:
                ok = ratio >= 10
                (held if ok else missed).append(f"{s} 16 writers")
                text += " ok" if ok else " MISS"
            cells.append(text)
        print(f"| {w} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
