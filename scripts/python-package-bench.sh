#!/usr/bin/env bash
# Benchmarks the Python package langgraph-checkpoint-rs (python/, release
# build) against LangGraph's own Python savers, on the same servers with the
# same durability:
#
#   (a) testdata/peer/bench_python.py, the reference workload (WORKLOAD.md),
#       on sqlite vs rs-sqlite, postgres vs rs-postgres, redis vs rs-redis
#       (the Python peer of Redis is langgraph-checkpoint-plainredis), each
#       pair alternated ROUNDS times (Python first in odd rounds, ours first
#       in even ones), then a side-by-side table per operation
#       (python/bench/package_table.py: medians over the rounds);
#   (b) python/bench/bench_async.py, a LangGraph StateGraph run by N
#       concurrent asyncio tasks (1 and 16 by default) on each async saver,
#       against a saver that stores nothing: graph runs/s and the time each
#       saver adds to a graph step.
#
#   scripts/python-package-bench.sh                # both parts, small sizes, ~8 min on 2 cores
#   scripts/python-package-bench.sh --quick        # smoke run: tiny sizes, one round, ~3 min
#   scripts/python-package-bench.sh --setup-only   # create the venv, build and install, print its python
#   scripts/python-package-bench.sh --only workload|async
#   BENCH_T=20 BENCH_S=100 ROUNDS=3 ASYNC_ROUNDS=5 scripts/python-package-bench.sh   # ~10 min
#
# A first run also builds the package (~5 min on 2 cores).
#
# The venv is SEPARATE from the test venv (target/py-venv is not touched):
# PY_BENCH_VENV (default target/py-bench-venv) gets testdata/peer/VERSIONS.txt
# and scripts/peer-extra.txt once (cached by a stamp, as scripts/python-venv.sh
# does), then the package by `pip install <tree>/python` (maturin's PEP 517
# build: release profile), again only when a source of the package or of the
# crate changed (a second stamp). Which tree: PKG_SOURCE=head (default) builds
# the committed state, HEAD exported by `git archive` to target/py-bench-src,
# so that edits others have in progress in the shared working tree are not
# measured by accident (the stamp: HEAD's versions of src/, python/src/,
# python/Cargo.toml, python/pyproject.toml, Cargo.toml, Cargo.lock; commits
# elsewhere, e.g. to python/bench/, rebuild nothing); PKG_SOURCE=worktree
# runs `pip install ./python` on the working tree as it is (the stamp: a
# hash of those files). The table names the source. The cargo build goes to PY_BENCH_CARGO_TARGET (default
# target/py-bench-cargo), so it neither waits on nor blocks the cargo lock of
# target/.
#
# Environment: CHECKPOINTER_PG_URL (server URL without a database, default
# postgresql://postgres@127.0.0.1:5432; the bench creates a database
# ckpt_bench_py_<time>_<pid> and drops it on exit), CHECKPOINTER_REDIS_URL
# (default redis://127.0.0.1:6379; fresh key prefixes, deleted afterwards,
# never flushed), OUT_DIR (default target/python-package-bench/<UTC time>),
# SAVERS (pairs for part (a), default sqlite,postgres,redis), BENCH_T,
# BENCH_S (threads and checkpoints per thread of part (a), default 20 and
# 50), BENCH_R, BENCH_G (random gets, global filters; default 200, 5),
# ROUNDS (alternations per pair, default 3), ASYNC_TASKS (default 1,16),
# ASYNC_RUNS (graph runs per conversation, default 10), ASYNC_ROUNDS (default
# 3), ASYNC_SAVERS (default: all of bench_async.py's), ASYNC_DURABILITY
# (LangGraph's durability, default async), LANGGRAPH_RS_WORKERS (tokio
# workers of the package, default 2). Without a reachable PostgreSQL or
# Redis server that backend is left out with a warning.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

quick="" setup_only="" only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --setup-only) setup_only=1 ;;
    --only) only="${2:?--only needs workload or async}"; shift ;;
    --only=*) only="${1#--only=}" ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

# ---- the venv: peers pinned once, then the package (release) ---------------
venv="${PY_BENCH_VENV:-$root/target/py-bench-venv}"
req="$root/testdata/peer/VERSIONS.txt"
extra="$root/scripts/peer-extra.txt"
stamp="$venv/.installed-$(cat "$req" "$extra" | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "creating $venv (peers from VERSIONS.txt + peer-extra.txt) ..." >&2
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req" -r "$extra" >&2
  touch "$stamp"
fi
py="$venv/bin/python"

# Rebuild the package when a source of it or of the crate changed (the
# extension a `maturin develop` left in python/src is not a source).
pkg_source="${PKG_SOURCE:-head}"
case "$pkg_source" in
  head)
    src_hash="$(git rev-parse HEAD:src HEAD:python/src HEAD:python/Cargo.toml HEAD:python/pyproject.toml \
      HEAD:Cargo.toml HEAD:Cargo.lock | sha256sum | cut -c1-16)"
    pkg_desc="git HEAD $(git rev-parse --short HEAD) (committed state; sources $src_hash)"
    ;;
  worktree)
    src_hash="$(
      git ls-files -co --exclude-standard -- src python/src python/Cargo.toml python/pyproject.toml Cargo.toml Cargo.lock |
        grep -v -E '\.(so|pyd)$' | sort | while read -r f; do
        if [ -f "$f" ]; then sha256sum "$f"; fi
      done | sha256sum | cut -c1-16
    )"
    pkg_desc="working tree at HEAD $(git rev-parse --short HEAD) with $(git status --porcelain -- src python/src python/Cargo.toml Cargo.toml Cargo.lock | wc -l) changed files (sources $src_hash)"
    ;;
  *) echo "PKG_SOURCE is head or worktree, not $pkg_source" >&2; exit 2 ;;
esac
pkg_stamp="$venv/.package-$pkg_source-$src_hash"
if [ ! -f "$pkg_stamp" ]; then
  if [ "$pkg_source" = head ]; then
    pkg_dir="$root/target/py-bench-src"
    rm -rf "$pkg_dir"
    mkdir -p "$pkg_dir"
    git archive HEAD | tar -x -C "$pkg_dir"
    pkg_dir="$pkg_dir/python"
  else
    pkg_dir=./python
  fi
  echo "pip install $pkg_dir (release build of $pkg_desc; cargo target ${PY_BENCH_CARGO_TARGET:-target/py-bench-cargo}) ..." >&2
  t0=$(date +%s)
  CARGO_TARGET_DIR="${PY_BENCH_CARGO_TARGET:-$root/target/py-bench-cargo}" \
    "$venv/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$pkg_dir" >&2
  "$venv/bin/pip" check >&2
  rm -f "$venv"/.package-*
  echo "$pkg_desc" >"$pkg_stamp"
  echo "built and installed in $(($(date +%s) - t0)) s" >&2
fi
pkg_desc="$(cat "$pkg_stamp")"
# the installed package, not python/src (the tests' develop build)
(cd / && "$py" -c 'import langgraph_checkpoint_rs as m, sys; assert "site-packages" in m.__file__, m.__file__; print("package", m.__version__, m.__file__, file=sys.stderr)')
if [ -n "$setup_only" ]; then
  echo "$py"
  exit 0
fi

# ---- servers ------------------------------------------------------------------
redis_url="${CHECKPOINTER_REDIS_URL:-redis://127.0.0.1:6379}"
server="${CHECKPOINTER_PG_URL:-postgresql://postgres@127.0.0.1:5432}"
server="${server%/}"
redis_ok=1 pg_ok=1
"$py" - "$redis_url" <<'PY' >/dev/null 2>&1 || redis_ok=""
import sys, redis
redis.Redis.from_url(sys.argv[1], socket_connect_timeout=3, socket_timeout=3).ping()
PY
pgdb() { # pgdb create|drop NAME
  "$py" - "$server/postgres" "$1" "$2" <<'PY'
import sys, psycopg
url, action, name = sys.argv[1:]
with psycopg.connect(url, autocommit=True, connect_timeout=5) as c:
    if action == "create":
        c.execute(f'CREATE DATABASE "{name}"')
    else:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
PY
}
db="ckpt_bench_py_$(date -u +%Y%m%d%H%M%S)_$$"
cleanup() { [ -z "$pg_ok" ] || pgdb drop "$db" >/dev/null 2>&1 || true; }
trap cleanup EXIT
pgdb create "$db" 2>/dev/null || pg_ok=""
pg_url="$server/$db"
[ -n "$pg_ok" ] || echo "warning: no PostgreSQL server at $server: leaving out postgres" >&2
[ -n "$redis_ok" ] || echo "warning: no Redis server at $redis_url: leaving out redis" >&2

out="${OUT_DIR:-$root/target/python-package-bench/$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$out"
if [ -n "$quick" ]; then
  T="${BENCH_T:-5}" S="${BENCH_S:-10}" R="${BENCH_R:-20}" G="${BENCH_G:-2}" rounds="${ROUNDS:-1}"
  a_runs="${ASYNC_RUNS:-3}" a_rounds="${ASYNC_ROUNDS:-1}"
else
  T="${BENCH_T:-20}" S="${BENCH_S:-50}" R="${BENCH_R:-200}" G="${BENCH_G:-5}" rounds="${ROUNDS:-3}"
  a_runs="${ASYNC_RUNS:-10}" a_rounds="${ASYNC_ROUNDS:-3}"
fi
machine="Machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$machine" >&2

# ---- (a) the reference workload, Python's saver vs ours, alternated -----------
if [ "$only" != async ]; then
  pairs=()
  IFS=, read -r -a wanted <<<"${SAVERS:-sqlite,postgres,redis}"
  for s in "${wanted[@]}"; do
    case "$s" in
      postgres) [ -n "$pg_ok" ] && pairs+=(postgres) ;;
      redis) [ -n "$redis_ok" ] && pairs+=(redis) ;;
      sqlite) pairs+=(sqlite) ;;
      *) echo "unknown saver $s (sqlite, postgres, redis)" >&2; exit 2 ;;
    esac
  done
  flags=(-T "$T" -S "$S" --random-gets "$R" --global-filters "$G" --repeats 1
         --pg-url "$pg_url" --redis-url "$redis_url")
  for ((r = 1; r <= rounds; r++)); do
    for s in "${pairs[@]}"; do
      if ((r % 2)); then order=("$s" "rs-$s"); else order=("rs-$s" "$s"); fi
      for k in "${order[@]}"; do
        echo "workload round $r/$rounds: $k (-T $T -S $S)" >&2
        "$py" testdata/peer/bench_python.py "${flags[@]}" --savers "$k" \
          --out "$out/workload.jsonl" >/dev/null 2>>"$out/workload.log"
      done
    done
  done
fi

# ---- (b) concurrent graphs ------------------------------------------------------
if [ "$only" != workload ]; then
  asavers="${ASYNC_SAVERS:-null,rs-sqlite,py-sqlite,rs-postgres,py-postgres,rs-redis,py-redis}"
  [ -n "$pg_ok" ] || asavers="$(echo ",$asavers," | sed 's/,rs-postgres,/,/; s/,py-postgres,/,/; s/^,//; s/,$//')"
  [ -n "$redis_ok" ] || asavers="$(echo ",$asavers," | sed 's/,rs-redis,/,/; s/,py-redis,/,/; s/^,//; s/,$//')"
  echo "bench_async.py --savers $asavers --tasks ${ASYNC_TASKS:-1,16} --runs $a_runs --rounds $a_rounds" >&2
  "$py" python/bench/bench_async.py --savers "$asavers" --tasks "${ASYNC_TASKS:-1,16}" \
    --runs "$a_runs" --rounds "$a_rounds" --durability "${ASYNC_DURABILITY:-async}" \
    --pg-url "$pg_url" --redis-url "$redis_url" \
    --out "$out/async.jsonl" --table "$out/async.md" >/dev/null 2>"$out/async.log"
fi

{
  echo "$machine; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "Package: $("$py" -c 'import importlib.metadata as m; print("langgraph-checkpoint-rs", m.version("langgraph-checkpoint-rs"))') (release build by pip install) of $pkg_desc"
  echo
  if [ -f "$out/workload.jsonl" ]; then
    "$py" python/bench/package_table.py "$out/workload.jsonl"
    echo
  fi
  if [ -f "$out/async.md" ]; then
    cat "$out/async.md"
  fi
} | tee "$out/table.md"
echo "raw results: $out" >&2
