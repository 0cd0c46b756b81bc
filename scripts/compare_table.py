#!/usr/bin/env python3
"""Prints the Rust/Python speed ratio per operation and backend, and the
crate's cost over the physical floor of the same operation, with the
project's targets for each (OPS below), plus storage bytes, peak RSS, the
msgpack decode of the latest checkpoint and concurrent writers, from result
files in the line format of bench_python.py (Python's and
benches/workload/'s).

    python3 scripts/compare_table.py python.jsonl rust.jsonl [conc-python.jsonl conc-rust.jsonl]
        [--decode decode.jsonl]

The optional pair is the output of scripts/concurrency_python.py and
benches/concurrency.rs (aggregate puts/s of 1, 4, 16 concurrent writers);
--decode takes the lines of `workload --decode` and scripts/decode_python.py.

Times are medians of per-call timings (the mean runs 5-30 % above the median
on this workload): Rust `median_us` (median over repeats of each repeat's
median call; `us_per_op`, the mean, when absent) against Python's `p50_us`
(the median call of its median repeat). Ratio = Python median / Rust median
(= Rust speed / Python speed); crate / floor = Rust median / `floor_us` (the
median call of the floor, measured interleaved with the saver's calls).
Standard library only.
"""

from __future__ import annotations

import json
import sys

SAVERS = ["memory", "sqlite", "postgres", "redis"]
# (op, label, Rust/Python speed targets per saver, has a floor). The current
# table; list full history, the two filtered lists and delete_thread keep
# the targets of the earlier table (they have no floor). Redis (against langgraph-checkpoint-plainredis): put, get_tuple latest and list
# limit 10 >= 3x; None = no target (the ratio is shown, not judged).
OPS = [
    ("put", "put", (20, 1.3, 1.3, 3), True),
    ("put_writes", "put_writes", (10, 1.3, 1.2, None), True),
    ("get_tuple_latest", "get_tuple latest", (25, 2.5, 3, 3), True),
    ("get_tuple_by_id", "get_tuple by id", (25, 2, 2.5, None), True),
    ("list_limit10", "list limit 10", (50, 3, 2.5, 3), True),
    ("list_full", "list full history", (20, 5, 3, None), False),
    ("list_filter_thread", "list(thread, filter)", (20, 5, 3, None), False),
    ("list_filter_global", "list(None, filter)", (20, 5, 3, None), False),
    ("delete_thread", "delete_thread", (100, 5, 3, None), False),
]
# The workload's floors (benches/workload/floor.rs) cover these; Redis's
# floor (an EVALSHA round trip) is measured by benches/saver.rs instead.
NO_WORKLOAD_FLOOR = {"redis": "floor: in benches/saver.rs"}
# crate / floor, every operation with a floor, every backend
FLOOR_TARGET = 1.25
# aggregate puts/s of 16 concurrent writers, Rust / Python
CONC_TARGETS = {"sqlite": 5, "postgres": 10}
# our decode time / ormsgpack's
DECODE_TARGET = 0.8


def median(values: list[float]) -> float:
    """The median (mean of the two middle values for an even count)."""
    s = sorted(values)
    n = len(s)
    if n == 0:
        raise ValueError("median of nothing")
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def rust_us(r: dict) -> float:
    """The Rust line's median per call (its mean for lines without one)."""
    return r.get("median_us", r["us_per_op"])


def python_us(p: dict) -> float:
    """The Python line's median per call (its mean for lines without one)."""
    return p.get("p50_us", p["us_per_op"])


def speed_ratio(p: dict, r: dict) -> float:
    """Rust speed / Python speed = Python time / Rust time."""
    return python_us(p) / rust_us(r)


def floor_ratio(r: dict) -> float | None:
    """Crate time / floor time, or None without a floor."""
    f = r.get("floor_us")
    return rust_us(r) / f if f else None


def load(path: str) -> dict[tuple[str, str], dict]:
    rows = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                r = json.loads(line)
                rows[(r["saver"], r["op"])] = r
    return rows


def parse_argv(argv: list[str]) -> tuple[list[str], str | None]:
    pos, decode = [], None
    it = iter(argv)
    for a in it:
        if a == "--decode":
            decode = next(it, None)
        elif a.startswith("--decode="):
            decode = a.split("=", 1)[1]
        else:
            pos.append(a)
    return pos, decode


def main() -> None:
    pos, decode_path = parse_argv(sys.argv[1:])
    if len(pos) not in (2, 4):
        sys.exit(__doc__)
    py, rs = load(pos[0]), load(pos[1])
    savers = [s for s in SAVERS if (s, "put") in py and (s, "put") in rs]
    if not savers:
        sys.exit("no saver present in both files")
    wl = rs[(savers[0], "put")]["workload"]
    print(f"Workload: T={wl['threads']} x S={wl['steps']}, R={wl['random_gets']}, "
          f"G={wl['global_filters']}, seed={wl['seed']}, repeats={wl['repeats']}.")
    print("Each cell: Rust speed / Python speed (target), then Rust vs Python median us per call; "
          f"then crate / floor (target <= {FLOOR_TARGET}) with the floor's median us per call, measured "
          "interleaved with the saver's calls. ok = target met.\n")
    print("| operation | " + " | ".join(savers) + " |")
    print("|---|" + "---:|" * len(savers))
    held, missed = [], []
    for op, label, targets, has_floor in OPS:
        cells = []
        for s in savers:
            p, r = py.get((s, op)), rs.get((s, op))
            if not p or not r:
                cells.append("-")
                continue
            ratio = speed_ratio(p, r)
            target = targets[SAVERS.index(s)]
            if target is None:
                text = f"{ratio:,.1f}x (no target)"
            else:
                ok = ratio >= target
                (held if ok else missed).append(f"{s} {label}")
                text = f"{ratio:,.1f}x (>= {target}x) {'ok' if ok else 'MISS'}"
            text += f"<br>{rust_us(r):,.1f} vs {python_us(p):,.1f} us"
            fr = floor_ratio(r)
            if fr is not None:
                fok = fr <= FLOOR_TARGET
                (held if fok else missed).append(f"{s} {label} / floor")
                text += (f"<br>floor {r['floor_us']:,.2f} us: {fr:,.2f}x "
                         f"(<= {FLOOR_TARGET}) {'ok' if fok else 'MISS'}")
            elif has_floor:
                text += "<br>" + NO_WORKLOAD_FLOOR.get(s, "floor: not measured")
            cells.append(text)
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
        if "rss_anon_max_bytes" in r:
            text += (f"<br>Rust: RssAnon (heap) {r['rss_anon_max_bytes'] / 1e6:,.0f} MB, RssFile (file-backed: "
                     f"the executable, SQLite's mapped file) {r['rss_file_max_bytes'] / 1e6:,.0f} MB, "
                     "each its largest at a phase end")
        cells.append(text)
    print("| peak RSS (Rust vs Python) | " + " | ".join(cells) + " |")
    cells = []
    for s in savers:
        p, r = py.get((s, "_meta")), rs.get((s, "_meta"))
        cells.append(f"{r['wall_s']:,.1f} vs {p['wall_s']:,.1f} s" if p and r else "-")
    print("| wall time (Rust vs Python, Rust with its floors) | " + " | ".join(cells) + " |")
    if decode_path:
        decode(decode_path, held, missed)
    if len(pos) == 4:
        conc(pos[2], pos[3], held, missed)
    print(f"\nTargets met ({len(held)}): " + (", ".join(held) or "none"))
    print(f"Targets missed ({len(missed)}): " + (", ".join(missed) or "none"))


def decode(path: str, held: list, missed: list) -> None:
    rows = {}
    with open(path) as f:
        for line in f:
            if line.startswith("{"):
                r = json.loads(line)
                rows[r.get("impl")] = r
    r, p = rows.get("rust"), rows.get("python")
    if not r or not p:
        return
    frac = r["median_us"] / p["median_us"]
    ok = frac <= DECODE_TARGET
    (held if ok else missed).append("msgpack decode")
    extra = (f"; LangGraph's call (ext_hook, OPT_NON_STR_KEYS) {p['langgraph_median_us']:,.1f} us"
             if "langgraph_median_us" in p else "")
    print(f"\nmsgpack decode of the latest checkpoint blob ({r['bytes']:,} B, median per call, result dropped): "
          f"checkpointer::serde::msgpack::decode {r['median_us']:,.1f} us vs ormsgpack.unpackb "
          f"{p['median_us']:,.1f} us = {frac:.2f}x ormsgpack's time (<= {DECODE_TARGET}) "
          f"{'ok' if ok else 'MISS'}{extra}")


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
    targets = ", ".join(f"{s} >= {CONC_TARGETS[s]}x" for s in savers)
    print(f"\nConcurrent writers ({steps} puts each, distinct threads): aggregate puts/s, Rust vs Python, "
          f"ratio (target at 16 writers: {targets}; no floor measured)\n")
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
                ok = ratio >= CONC_TARGETS[s]
                (held if ok else missed).append(f"{s} 16 writers")
                text += " ok" if ok else " MISS"
            cells.append(text)
        print(f"| {w} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
