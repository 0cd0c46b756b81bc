#!/usr/bin/env bash
# Creates (once) a Python venv with the LangGraph peer packages pinned in
# testdata/peer/VERSIONS.txt plus scripts/peer-extra.txt (packages only the
# crate's tests need, e.g. pycryptodome) and prints its python path as the
# last line.
# Usage: scripts/python-venv.sh [VENV_DIR]   (default: target/peer-venv)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:-${CHECKPOINTER_VENV:-$root/target/peer-venv}}"
req="$root/testdata/peer/VERSIONS.txt"
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
