#!/usr/bin/env python3
"""Draws the comparison as SVG charts (standard library only, SVG written by
hand):

- `cost-<saver>.svg`, one per backend: median microseconds per call of every
  operation, Rust vs Python vs the physical floor (log scale), from the
  JSON lines of bench_python.py and benches/workload/;
- `scaling.svg`: microseconds per call vs checkpoints per thread (10 to
  10 000) per backend and operation, from the JSON lines that
  `cargo bench -p checkpointer-benches --bench scaling` prints on stdout.

    python3 scripts/charts.py --python python.jsonl --rust rust.jsonl [--scaling scaling.jsonl] [--out docs/img]
        [--title "T=20 x S=50, ..."]

scripts/compare-python.sh runs it on the files of its run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_table as ct  # noqa: E402

COLORS = {"rust": "#b7410e", "python": "#3572a5", "floor": "#7f7f7f"}
LINE_COLORS = ["#b7410e", "#3572a5", "#2e8b57", "#8e44ad", "#d4a017", "#555555"]
FONT = 'font-family="DejaVu Sans, Arial, sans-serif"'


def esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def fmt_us(v: float) -> str:
    if v >= 1000:
        return f"{v / 1000:,.3g} ms"
    return f"{v:,.3g} us"


def decades(lo: float, hi: float) -> tuple[int, int]:
    return math.floor(math.log10(lo)), math.ceil(math.log10(hi))


class Svg:
    def __init__(self, w: int, h: int):
        self.w, self.h, self.parts = w, h, []

    def add(self, s: str) -> None:
        self.parts.append(s)

    def text(self, x, y, s, size=12, anchor="start", weight="normal", fill="#222"):
        self.add(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
                 f'font-weight="{weight}" fill="{fill}" {FONT}>{esc(s)}</text>')

    def line(self, x1, y1, x2, y2, stroke="#ccc", width=1, dash=None):
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.add(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{stroke}" '
                 f'stroke-width="{width}"{d}/>')

    def rect(self, x, y, w, h, fill, title=None):
        t = f"<title>{esc(title)}</title>" if title else ""
        self.add(f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0.5):.1f}" height="{h:.1f}" fill="{fill}">{t}</rect>')

    def save(self, path: str) -> None:
        with open(path, "w") as f:
            f.write(f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.w}" height="{self.h}" '
                    f'viewBox="0 0 {self.w} {self.h}">\n<rect width="100%" height="100%" fill="white"/>\n')
            f.write("\n".join(self.parts))
            f.write("\n</svg>\n")


def cost_chart(saver: str, py: dict, rs: dict, title: str, path: str) -> bool:
    rows = []
    for op, label, _, _ in ct.OPS:
        p, r = py.get((saver, op)), rs.get((saver, op))
        if not p or not r:
            continue
        rows.append((label, ct.rust_us(r), ct.python_us(p), r.get("floor_us")))
    if not rows:
        return False
    vals = [v for _, a, b, f in rows for v in (a, b, f) if v]
    lo, hi = decades(min(vals), max(vals))
    left, right, top, bar, gap = 170, 40, 62, 9, 12
    group = 3 * bar + gap
    width = 820
    height = top + group * len(rows) + 50
    plot_w = width - left - right
    svg = Svg(width, height)

    def xpos(v: float) -> float:
        return left + (math.log10(v) - lo) / (hi - lo) * plot_w

    svg.text(12, 22, f"{saver}: median time per call (log scale), Rust vs Python vs floor", 15, weight="bold")
    svg.text(12, 40, title, 11, fill="#555")
    for i, (name, key) in enumerate([("Rust (crate)", "rust"), ("Python (LangGraph)", "python"),
                                     ("floor (raw store)", "floor")]):
        x = left + i * 170
        svg.rect(x, 48, 12, 9, COLORS[key])
        svg.text(x + 16, 57, name, 11)
    bottom = top + group * len(rows)
    for d in range(lo, hi + 1):
        x = xpos(10 ** d)
        svg.line(x, top - 4, x, bottom, "#ddd")
        svg.text(x, bottom + 16, fmt_us(10 ** d), 10, "middle", fill="#555")
    for i, (label, r, p, f) in enumerate(rows):
        y = top + i * group
        svg.text(left - 8, y + 1.5 * bar + 4, label, 11, "end")
        for j, (key, v) in enumerate([("rust", r), ("python", p), ("floor", f)]):
            if not v:
                continue
            yy = y + j * bar
            x = xpos(v)
            svg.rect(left, yy, x - left, bar - 1, COLORS[key], f"{key}: {fmt_us(v)}")
            svg.text(x + 3, yy + bar - 1.5, fmt_us(v), 9, fill="#333")
    svg.line(left, top - 4, left, bottom, "#888")
    svg.save(path)
    return True


def scaling_chart(lines: list[dict], title: str, path: str) -> bool:
    by_saver: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for r in lines:
        if r.get("bench") != "scaling":
            continue
        us = r.get("median_us", r["us_per_op"])
        by_saver.setdefault(r["saver"], {}).setdefault(r["op"], []).append((r["checkpoints"], us))
    savers = [s for s in ct.SAVERS if s in by_saver]
    if not savers:
        return False
    pw, ph, left, top, gap = 300, 230, 60, 70, 70
    width = left + len(savers) * (pw + gap) + 150
    height = top + ph + 60
    svg = Svg(width, height)
    svg.text(12, 22, "Cost per call vs checkpoints per thread (benches/scaling.rs, log-log)", 15, weight="bold")
    svg.text(12, 40, title, 11, fill="#555")
    ops = sorted({op for s in savers for op in by_saver[s]})
    color = {op: LINE_COLORS[i % len(LINE_COLORS)] for i, op in enumerate(ops)}
    for i, s in enumerate(savers):
        x0 = left + i * (pw + gap)
        pts = [p for op in by_saver[s].values() for p in op]
        nlo, nhi = decades(min(n for n, _ in pts), max(n for n, _ in pts))
        nhi = max(nhi, nlo + 1)
        vlo, vhi = decades(min(v for _, v in pts), max(v for _, v in pts))
        vhi = max(vhi, vlo + 1)

        def xy(n: float, v: float) -> tuple[float, float]:
            return (x0 + (math.log10(n) - nlo) / (nhi - nlo) * pw,
                    top + ph - (math.log10(v) - vlo) / (vhi - vlo) * ph)

        svg.text(x0 + pw / 2, top - 10, s, 13, "middle", "bold")
        for d in range(nlo, nhi + 1):
            x, _ = xy(10 ** d, 10 ** vlo)
            svg.line(x, top, x, top + ph, "#eee")
            svg.text(x, top + ph + 15, f"{10 ** d:,}", 10, "middle", fill="#555")
        for d in range(vlo, vhi + 1):
            _, y = xy(10 ** nlo, 10 ** d)
            svg.line(x0, y, x0 + pw, y, "#eee")
            svg.text(x0 - 4, y + 3, fmt_us(10 ** d), 9, "end", fill="#555")
        svg.add(f'<rect x="{x0}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>')
        svg.text(x0 + pw / 2, top + ph + 32, "checkpoints per thread", 10, "middle", fill="#555")
        for op, points in sorted(by_saver[s].items()):
            points.sort()
            coords = [xy(n, v) for n, v in points]
            d = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
            svg.add(f'<polyline points="{d}" fill="none" stroke="{color[op]}" stroke-width="2"/>')
            for (n, v), (x, y) in zip(points, coords):
                svg.add(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color[op]}">'
                        f"<title>{esc(f'{s} {op} at {n}: {fmt_us(v)}')}</title></circle>")
    lx = left + len(savers) * (pw + gap) - 10
    for i, op in enumerate(ops):
        y = top + 10 + i * 18
        svg.line(lx, y, lx + 18, y, color[op], 2)
        svg.text(lx + 24, y + 4, op, 11)
    svg.save(path)
    return True


def load_lines(path: str) -> list[dict]:
    out = []
    with open(path) as f:
        for line in f:
            if line.startswith("{"):
                out.append(json.loads(line))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python")
    ap.add_argument("--rust")
    ap.add_argument("--scaling")
    ap.add_argument("--out", default="docs/img")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    written = []
    if a.python and a.rust:
        py, rs = ct.load(a.python), ct.load(a.rust)
        title = a.title
        if not title:
            meta = next((r for (s, op), r in rs.items() if op == "put"), None)
            if meta:
                wl = meta["workload"]
                title = (f"workload T={wl['threads']} x S={wl['steps']}, R={wl['random_gets']}, "
                         f"repeats={wl['repeats']}; medians of per-call timings")
        for s in ct.SAVERS:
            p = os.path.join(a.out, f"cost-{s}.svg")
            if cost_chart(s, py, rs, title, p):
                written.append(p)
    if a.scaling and os.path.exists(a.scaling):
        lines = load_lines(a.scaling)
        first = next((r for r in lines if r.get("bench") == "scaling"), {})
        stat = "median" if "median_us" in first else "mean"
        p = os.path.join(a.out, "scaling.svg")
        if scaling_chart(lines, f"{stat} us per call over {first.get('calls', '?')} calls; "
                                "constant-size checkpoints (~2 KB)", p):
            written.append(p)
    for p in written:
        print(p)


if __name__ == "__main__":
    main()
