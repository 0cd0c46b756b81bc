#!/usr/bin/env bash
# Builds the Python package (python/, langgraph-checkpoint-rs) into a venv
# with `pip install ./python` (or installs a wheel, PY_WHEEL) and runs its
# tests (pytest: LangGraph's conformance suite on every backend, the
# cross-reads with LangGraph's own savers, real StateGraph runs, the async
# behaviour, one process sharing a SQLite file with Python's sqlite3).
#
# Usage: scripts/python-package.sh [pytest arguments...]
#   CHECKPOINTER_PY_VENV  the venv (default target/py-pkg-venv; created once,
#                         pinned by testdata/peer/VERSIONS.txt and
#                         python/requirements-test.txt)
#   PY_PROFILE            cargo profile of the extension: release (default) or dev
#   PY_WHEEL              a wheel built by scripts/build-wheel.sh: installed
#                         instead of building ./python, and installed and
#                         tested with no cargo or rustc on PATH (default venv
#                         then target/py-wheel-venv)
#   CHECKPOINTER_PG_URL, CHECKPOINTER_REDIS_URL, CI: see python/tests/conftest.py
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
wheel="${PY_WHEEL:-}"
if [ -n "$wheel" ]; then
  wheel="$(cd "$(dirname "$wheel")" && pwd)/$(basename "$wheel")"
  venv="${CHECKPOINTER_PY_VENV:-$root/target/py-wheel-venv}"
else
  venv="${CHECKPOINTER_PY_VENV:-$root/target/py-pkg-venv}"
fi
req="$root/testdata/peer/VERSIONS.txt"
extra="$root/python/requirements-test.txt"
stamp="$venv/.installed-$(cat "$req" "$extra" | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req" -r "$extra"
  touch "$stamp"
fi
if [ -n "$wheel" ]; then
  # what a user without Rust has: every directory with cargo or rustc leaves PATH
  norust=""
  IFS=: read -ra dirs <<<"$PATH"
  for d in "${dirs[@]}"; do
    [ -e "$d/cargo" ] || [ -e "$d/rustc" ] || norust="${norust:+$norust:}$d"
  done
  export PATH="$venv/bin:$norust"
  if command -v cargo >/dev/null || command -v rustc >/dev/null; then
    echo "cargo or rustc is still on PATH ($PATH)" >&2
    exit 1
  fi
  "$venv/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel"
else
  profile="${PY_PROFILE:-release}"
  # maturin builds the wheel (cargo's incremental build makes a rebuild cheap)
  MATURIN_PEP517_ARGS="--profile $profile" PATH="$venv/bin:$PATH" \
    "$venv/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$root/python"
fi
"$venv/bin/python" -c "import langgraph_checkpoint_rs as m; print('langgraph-checkpoint-rs', m.__version__, 'from', m.__file__)"
cd "$root/python"
exec "$venv/bin/python" -m pytest -p no:cacheprovider tests "$@"
