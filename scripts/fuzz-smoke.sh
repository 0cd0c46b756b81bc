#!/usr/bin/env bash
# Runs every cargo-fuzz target of fuzz/ for FUZZ_SECONDS seconds each
# (default 25) from the seed corpora scripts/fuzz-seeds.py writes, and fails
# on the first crash (the input is left in fuzz/artifacts/<target>/).
#
#   scripts/fuzz-smoke.sh [TARGET...]          (default: every target)
#   FUZZ_SECONDS=300 scripts/fuzz-smoke.sh     (the longer run of docs/reliability.md)
#
# cargo-fuzz needs nightly compiler flags (-Zsanitizer=address); on the
# stable toolchain RUSTC_BOOTSTRAP=1 allows them. cargo-fuzz is installed
# from crates.io when missing.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

seconds="${FUZZ_SECONDS:-25}"
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --version 0.13.2 --locked
fi

corpus="${FUZZ_CORPUS:-$root/fuzz/corpus}"
python3 scripts/fuzz-seeds.py "$corpus"

if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(cargo fuzz list)
fi

cargo fuzz build
for target in "${targets[@]}"; do
  printf '\n--> fuzz %s for %ss\n' "$target" "$seconds"
  log="$(mktemp)"
  if ! cargo fuzz run "$target" "$corpus/$target" -- \
      -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=4096 >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "fuzz target $target failed (see fuzz/artifacts/$target/)" >&2
    exit 1
  fi
  grep -E 'DONE|stat::number_of_executed_units|stat::peak_rss_mb' "$log" || true
  rm -f "$log"
done
printf '\nfuzz smoke: %s targets, no crash\n' "${#targets[@]}"
