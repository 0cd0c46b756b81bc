#!/usr/bin/env python3
"""Fail when README.md or docs/*.md name a repository path a clone does not have.

Checked: markdown links and images (resolved from the page's folder; an
`#anchor` into a markdown page must name one of its headings), and, in inline
code and in sh/text/console code blocks (not in a fence without a language,
such as a folder tree), words that start with a top-level folder of the
repository (`scripts/…`, `testdata/…`) or with `../` (resolved from the
repository root, as the pages write them). A trailing `/` names a folder,
`*` and `<name>` are wildcards. The files are those of `git ls-files`, so a
path only the author's machine has fails. Generated folders (`target/`) are
not in `git ls-files` and are not checked.

Run from anywhere: python3 scripts/check-doc-paths.py
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import subprocess
import sys

ROOT = subprocess.run(
    ["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True
).stdout.strip()
FILES = subprocess.run(
    ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
).stdout.split("\0")
FILES = [f for f in FILES if f]
FILE_SET = set(FILES)
DIRS = {posixpath.dirname(f) for f in FILES}
for d in list(DIRS):
    while d:
        d = posixpath.dirname(d)
        DIRS.add(d)
TOP_DIRS = sorted({f.split("/", 1)[0] for f in FILES if "/" in f})

FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+-]*)")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
PATH_WORD = re.compile(
    r"(?<![\w./:@$-])((?:\.\./)+[\w.*<>-]+(?:/[\w.*<>-]*)*|(?:"
    + "|".join(re.escape(d) for d in TOP_DIRS)
    + r")/[\w.*<>/-]*)"
)
SHELL_FENCES = {"sh", "bash", "shell", "console", "text"}


def exists(path: str) -> bool:
    """Whether `path` (repository-relative, maybe a folder or a pattern) is in the clone."""
    path = re.sub(r"<[^>]*>", "*", path)
    path = path.rstrip(".,;:")
    is_dir = path.endswith("/")
    path = posixpath.normpath(path) if path.strip("/") else ""
    if path.startswith("../") or path == "..":
        return False
    if any(ch in path for ch in "*?["):
        if is_dir:
            return any(fnmatch.fnmatch(d, path) for d in DIRS)
        return any(fnmatch.fnmatch(f, path) for f in FILES) or any(
            fnmatch.fnmatch(d, path) for d in DIRS
        )
    if is_dir:
        return path in DIRS
    return path in FILE_SET or path in DIRS


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: str) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        for line in f:
            if FENCE.match(line):
                fenced = not fenced
                continue
            m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                s = slug(m.group(1))
                n = seen.get(s, 0)
                seen[s] = n + 1
                found.add(s if n == 0 else f"{s}-{n}")
    return found


def check(page: str) -> list[str]:
    problems = []
    base = posixpath.dirname(page)
    fenced, fence_lang = False, ""
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        lines = f.read().splitlines()
    for no, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if m:
            fenced, fence_lang = (not fenced), m.group(2).lower()
            continue
        spans: list[str] = []
        if fenced:
            if fence_lang in SHELL_FENCES:
                spans.append(line)
        else:
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                    continue  # https:, mailto:, …
                path, _, anchor = target.partition("#")
                resolved = posixpath.normpath(posixpath.join(base, path)) if path else page
                if path and not exists(resolved):
                    problems.append(f"{page}:{no}: link to {target}: {resolved} is not in the clone")
                elif anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
                    problems.append(f"{page}:{no}: link to {target}: no heading #{anchor} in {resolved}")
            spans.extend(code for _, code in INLINE_CODE.findall(line))
        for span in spans:
            for word in PATH_WORD.findall(span):
                if not exists(word):
                    problems.append(f"{page}:{no}: `{word}` is not in the clone")
    return problems


def main() -> int:
    pages = ["README.md"] + sorted(
        f for f in FILES if f.startswith("docs/") and f.endswith(".md") and f.count("/") == 1
    )
    problems = [p for page in pages if os.path.exists(os.path.join(ROOT, page)) for p in check(page)]
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"{len(problems)} path(s) named in the docs are not in a clone", file=sys.stderr)
        return 1
    print(f"checked {len(pages)} page(s): every path they name is in the clone")
    return 0


if __name__ == "__main__":
    sys.exit(main())
