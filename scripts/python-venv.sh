#!/usr/bin/env bash
# Creates (once) a Python venv with the LangGraph peer packages pinned in
# ../shared/peer/VERSIONS.txt plus scripts/peer-extra.txt (packages only the
# crate's tests need, e.g. pycryptodome) and prints its python path as the
# last line.
# Usage: scripts/python-venv.sh [VENV_DIR]   (default: target/peer-venv)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:-${CHECKPOINTER_VENV:-$root/target/peer-venv}}"
# ../shared next to the repository, or the nearest ancestor's shared/ (a
# worktree under <root>/wt/<branch>); CHECKPOINTER_SHARED_DIR overrides.
shared="${CHECKPOINTER_SHARED_DIR:-}"
if [ -z "$shared" ]; then
  for dir in "$root/../shared" "$root/../../shared"; do
    if [ -f "$dir/peer/VERSIONS.txt" ]; then shared="$dir"; break; fi
  done
fi
req="${shared:-$root/../shared}/peer/VERSIONS.txt"
if [ ! -f "$req" ]; then
  echo "missing $req" >&2
  exit 1
fi
extra="$root/scripts/peer-extra.txt"
stamp="$venv/.installed-$(cat "$req" "$extra" | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req" -r "$extra" >&2
  touch "$stamp"
fi
echo "$venv/bin/python"
