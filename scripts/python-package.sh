#!/usr/bin/env bash
# Builds the Python package (python/, langgraph-checkpoint-rs) into a venv
# with `pip install ./python` and runs its tests (pytest: LangGraph's
# conformance suite on every backend, the cross-reads with LangGraph's own
# savers, real StateGraph runs, the async behaviour).
#
# Usage: scripts/python-package.sh [pytest arguments...]
#   CHECKPOINTER_PY_VENV  the venv (default target/py-pkg-venv; created once,
#                         pinned by testdata/peer/VERSIONS.txt and
#                         python/requirements-test.txt)
#   PY_PROFILE            cargo profile of the extension: release (default) or dev
#   CHECKPOINTER_PG_URL, CHECKPOINTER_REDIS_URL, CI: see python/tests/conftest.py
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${CHECKPOINTER_PY_VENV:-$root/target/py-pkg-venv}"
req="$root/testdata/peer/VERSIONS.txt"
extra="$root/python/requirements-test.txt"
stamp="$venv/.installed-$(cat "$req" "$extra" | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req" -r "$extra"
  touch "$stamp"
fi
profile="${PY_PROFILE:-release}"
# maturin builds the wheel (cargo's incremental build makes a rebuild cheap)
MATURIN_PEP517_ARGS="--profile $profile" PATH="$venv/bin:$PATH" \
  "$venv/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$root/python"
"$venv/bin/python" -c "import langgraph_checkpoint_rs as m; print('langgraph-checkpoint-rs', m.__version__, 'from', m.__file__)"
cd "$root/python"
exec "$venv/bin/python" -m pytest -p no:cacheprovider tests "$@"
