#!/usr/bin/env bash
# Runs the reference workload (../shared/peer/WORKLOAD.md) on Python's savers
# (bench_python.py) and on ours (benches/workload/) back to back (per
# saver: Python, then Rust), with the
# same flags and durability, each on a fresh PostgreSQL database (Redis: one
# server for both, each side under fresh key prefixes that it deletes
# afterwards), and prints
# the Rust/Python speed ratio per operation and backend, storage and peak RSS.
#
#   scripts/compare-python.sh                       # -T 20 -S 100 --repeats 1, all savers, a few minutes
#   scripts/compare-python.sh -T 100 -S 100 --repeats 3 --savers memory,sqlite
#   scripts/compare-python.sh --savers redis        # RedisSaver vs langgraph-checkpoint-plainredis
#
# Extra flags are passed to both benches after the defaults (the last one
# wins). Environment: CHECKPOINTER_PG_URL (server URL without a database,
# default postgresql://postgres@127.0.0.1:5432), CHECKPOINTER_REDIS_URL (the
# Redis server of the redis saver, default redis://127.0.0.1:6379; never
# flushed), CHECKPOINTER_VENV (venv dir,
# default target/peer-venv), PEER_DIR (where bench_python.py is,
# default testdata/peer), OUT_DIR
# (default target/compare-python/<UTC time>), COMPARE_CONCURRENCY (1 = also
# run benches/concurrency.rs and scripts/concurrency_python.py: 1, 4, 16
# concurrent writers; 0 = skip; default 1), CONC_STEPS (puts per writer,
# default 100), COMPARE_SCALING (1 = also run benches/scaling.rs, 10 to
# 10 000 checkpoints per thread; 0 = skip; default 1; SCALING_SIZES and
# SCALING_CALLS pass through), CHARTS_DIR (where scripts/charts.py writes the
# SVG charts, default docs/img; empty = no charts). Without a reachable
# PostgreSQL server the postgres saver is left out, with a warning; the redis
# saver is in the default list when the Redis server answers PING (asked
# for by --savers and not answering: left out, with a warning).
#
# Besides the savers it times the msgpack decode of the workload's latest
# checkpoint blob (the SQLite run stores it in $OUT_DIR): `workload --decode`
# against scripts/decode_python.py (ormsgpack.unpackb).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

# bench_python.py (the Python side of the workload), copied into testdata/peer.
peer="${PEER_DIR:-$root/testdata/peer}"
if [ ! -f "$peer/bench_python.py" ]; then
  echo "bench_python.py not found in $peer (PEER_DIR)" >&2
  exit 1
fi
peer="$(cd "$peer" && pwd)"

# The Python peers (installed once, pinned in testdata/peer/VERSIONS.txt).
venv="${CHECKPOINTER_VENV:-$root/target/peer-venv}"
py="$(scripts/python-venv.sh "$venv" | tail -n 1)"

redis_url="${CHECKPOINTER_REDIS_URL:-redis://127.0.0.1:6379}"
redis_up() {
  "$py" - "$redis_url" <<'PY' >/dev/null 2>&1
import sys, redis
redis.Redis.from_url(sys.argv[1], socket_connect_timeout=3, socket_timeout=3).ping()
PY
}

defaults=(-T 20 -S 100 --repeats 1)
flags=("${defaults[@]}" "$@")
savers="memory,sqlite,postgres"
asked=""
for ((i = 0; i < ${#flags[@]}; i++)); do
  case "${flags[$i]}" in
    --savers) savers="${flags[$((i + 1))]:-$savers}" asked=1 ;;
    --savers=*) savers="${flags[$i]#--savers=}" asked=1 ;;
  esac
done
if [ -z "$asked" ]; then
  if redis_up; then savers="$savers,redis"; fi
elif [[ ",$savers," == *",redis,"* ]] && ! redis_up; then
  echo "warning: no Redis server at $redis_url: leaving out the redis saver" >&2
  savers="$(echo ",$savers," | sed 's/,redis,/,/g; s/^,//; s/,$//')"
fi
if [ -z "$savers" ]; then
  echo "no saver left to run" >&2
  exit 1
fi

server="${CHECKPOINTER_PG_URL:-postgresql://postgres@127.0.0.1:5432}"
server="${server%/}"
dbs=()
pgdb() { # pgdb create|drop NAME
  "$py" - "$server/postgres" "$1" "$2" <<'PY'
import sys, psycopg
url, action, name = sys.argv[1:]
with psycopg.connect(url, autocommit=True, connect_timeout=5) as c:
    if action == "create":
        c.execute(f'CREATE DATABASE "{name}"')
    else:
        c.execute(f'DROP DATABASE IF EXISTS "{name}"')
PY
}
cleanup() {
  for d in "${dbs[@]}"; do pgdb drop "$d" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT
pg_py="" pg_rs=""
if [[ ",$savers," == *",postgres,"* ]]; then
  tag="$(date -u +%Y%m%d%H%M%S)_$$"
  if pgdb create "cmp_py_$tag" 2>/dev/null; then
    dbs+=("cmp_py_$tag")
    pgdb create "cmp_rs_$tag"
    dbs+=("cmp_rs_$tag")
    pg_py="$server/cmp_py_$tag"
    pg_rs="$server/cmp_rs_$tag"
  else
    echo "warning: no PostgreSQL server at $server: leaving out the postgres saver" >&2
    savers="$(echo ",$savers," | sed 's/,postgres,/,/g; s/^,//; s/,$//')"
  fi
fi
[ -n "$pg_py" ] || pg_py="$server/unused" pg_rs="$server/unused"

out="${OUT_DIR:-$root/target/compare-python/$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$out"

echo "building benches/workload (the bench profile: release) ..." >&2
rust_bin=$(cargo bench -p checkpointer-benches --quiet --all-features --bench workload --no-run --message-format=json |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "workload" and m.get("executable"):
        print(m["executable"])')
[ -x "$rust_bin" ] || { echo "cannot find the workload bench's executable" >&2; exit 1; }

# Python then Rust for each saver in turn, so the two runs of a backend are
# seconds apart (disk and load drift on a shared machine is large).
IFS=, read -r -a saver_list <<<"$savers"
for s in "${saver_list[@]}"; do
  echo "python: bench_python.py ${flags[*]} --savers $s" >&2
  "$py" "$peer/bench_python.py" "${flags[@]}" --savers "$s" --pg-url "$pg_py" --redis-url "$redis_url" \
    --out "$out/python.jsonl" >/dev/null 2>>"$out/python.log"
  echo "rust:   workload ${flags[*]} --savers $s" >&2
  "$rust_bin" "${flags[@]}" --savers "$s" --pg-url "$pg_rs" --redis-url "$redis_url" \
    --blob-out "$out/latest-checkpoint.msgpack" --out "$out/rust.jsonl" >/dev/null 2>>"$out/rust.log"
done

decode_args=()
if [ -f "$out/latest-checkpoint.msgpack" ]; then
  echo "decode: the latest checkpoint blob, Rust then Python" >&2
  "$rust_bin" --decode "$out/latest-checkpoint.msgpack" --out "$out/decode.jsonl" >/dev/null
  "$py" scripts/decode_python.py "$out/latest-checkpoint.msgpack" --out "$out/decode.jsonl" >/dev/null
  decode_args=(--decode "$out/decode.jsonl")
fi

conc_files=()
# (the concurrency benches cover SQLite and PostgreSQL)
conc_savers="$(echo ",$savers," | sed 's/,memory,/,/g; s/,redis,/,/g; s/^,//; s/,$//')"
if [ "${COMPARE_CONCURRENCY:-1}" = 1 ] && [ -n "$conc_savers" ]; then
  steps="${CONC_STEPS:-100}"
  echo "python: concurrency_python.py --steps $steps --savers $conc_savers" >&2
  "$py" scripts/concurrency_python.py --peer-dir "$peer" --savers "$conc_savers" --steps "$steps" \
    --pg-server "$server" >"$out/conc-python.jsonl" 2>"$out/conc-python.log"
  echo "rust:   cargo bench -p checkpointer-benches --bench concurrency (CONC_STEPS=$steps)" >&2
  CONC_STEPS="$steps" CONC_SAVERS="$conc_savers" CHECKPOINTER_PG_URL="$server" \
    cargo bench -p checkpointer-benches --quiet --all-features --bench concurrency >"$out/conc-rust.jsonl" 2>"$out/conc-rust.log"
  conc_files=("$out/conc-python.jsonl" "$out/conc-rust.jsonl")
fi

if [ "${COMPARE_SCALING:-1}" = 1 ]; then
  echo "rust:   cargo bench -p checkpointer-benches --bench scaling (SCALING_SIZES=${SCALING_SIZES:-10,1000,10000})" >&2
  SCALING_SAVERS="$savers" CHECKPOINTER_PG_URL="$server" CHECKPOINTER_REDIS_URL="$redis_url" \
    cargo bench -p checkpointer-benches --quiet --all-features --bench scaling >"$out/scaling.jsonl" 2>"$out/scaling.log"
fi

charts="${CHARTS_DIR-$root/docs/img}"
if [ -n "$charts" ]; then
  python3 scripts/charts.py --python "$out/python.jsonl" --rust "$out/rust.jsonl" \
    --scaling "$out/scaling.jsonl" --out "$charts" >&2
fi

{
  echo "Machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -sr)"
  echo "Command: scripts/compare-python.sh ${*}"
  echo
  python3 scripts/compare_table.py "$out/python.jsonl" "$out/rust.jsonl" "${conc_files[@]}" "${decode_args[@]}"
} | tee "$out/table.md"
echo "raw results: $out" >&2
