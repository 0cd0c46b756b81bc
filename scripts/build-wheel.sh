#!/usr/bin/env bash
# Builds the Python package's binary wheel (abi3: one wheel for CPython
# 3.10 and newer, manylinux2014 x86_64, linked by zig against glibc 2.17)
# and its sdist, and checks the wheel with auditwheel.
#
# The wheel carries no SQLite and names no SQLite library: its sqlite3_*
# symbols stay undefined and are bound, at import, to the libsqlite3 that
# Python's own sqlite3 module loaded (python/src/langgraph_checkpoint_rs/
# _sqlite_library.py), so that one process has one SQLite and one set of
# file locks. libsqlite3-sys is pointed at an empty static archive for
# that: it links "libsqlite3.a", which adds nothing.
#
# Usage: scripts/build-wheel.sh [release|dev] [OUT_DIR]
#   release (default) for users; dev for CI (quicker to build, larger, slower)
#   OUT_DIR            where the wheel and sdist go (default target/wheels)
#   CHECKPOINTER_WHEEL_TOOLS  the tools venv (default target/wheel-tools;
#                      created once, pinned by python/requirements-wheel.txt)
#   WHEEL_ZIG=0        link with the host's toolchain instead of zig: the wheel
#                      is then tagged for this machine's glibc (CI uses it to
#                      reuse the workspace's compiled dependencies)
#   WHEEL_SDIST=0      skip the sdist
# Prints the wheel's path as the last line.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
profile="${1:-release}"
case "$profile" in
  release | dev) ;;
  *) echo "usage: $0 [release|dev] [OUT_DIR]" >&2; exit 2 ;;
esac
target_dir="${CARGO_TARGET_DIR:-$root/target}"
out="${2:-$target_dir/wheels}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

tools="${CHECKPOINTER_WHEEL_TOOLS:-$target_dir/wheel-tools}"
req="$root/python/requirements-wheel.txt"
stamp="$tools/.installed-$(sha256sum <"$req" | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  rm -rf "$tools"
  python3 -m venv "$tools" >&2
  "$tools/bin/pip" install --quiet --disable-pip-version-check -r "$req" >&2
  touch "$stamp"
fi

# libsqlite3-sys without `bundled` links the library SQLITE3_LIB_DIR names;
# an empty archive there leaves the symbols to the loader
nolib="$target_dir/sqlite3-from-python"
mkdir -p "$nolib"
printf '!<arch>\n' >"$nolib/libsqlite3.a"
export SQLITE3_LIB_DIR="$nolib" SQLITE3_INCLUDE_DIR="$nolib" SQLITE3_STATIC=1 SQLITE3_NO_PKG_CONFIG=1

rm -f "$out"/langgraph_checkpoint_rs-*.whl
args=(--manifest-path "$root/python/Cargo.toml" --profile "$profile" --out "$out")
if [ "${WHEEL_ZIG:-1}" = 1 ]; then
  args+=(--zig --compatibility manylinux2014 --target x86_64-unknown-linux-gnu)
else
  args+=(--compatibility linux)
fi
PATH="$tools/bin:$PATH" "$tools/bin/maturin" build --quiet "${args[@]}" >&2
wheel="$(ls "$out"/langgraph_checkpoint_rs-*.whl)"

# the extension must name no SQLite library and define no SQLite of its own
"$tools/bin/python" - "$wheel" <<'EOF' >&2
import io, sys, zipfile
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile

with zipfile.ZipFile(sys.argv[1]) as z:
    name = next(n for n in z.namelist() if n.endswith(".so"))
    elf = ELFFile(io.BytesIO(z.read(name)))
    needed = [t.needed for s in elf.iter_sections() if isinstance(s, DynamicSection)
              for t in s.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
    dynsym = elf.get_section_by_name(".dynsym")
    open_v2 = [s for s in dynsym.iter_symbols() if s.name == "sqlite3_open_v2"]
    problems = [f"links {n}" for n in needed if "sqlite" in n]
    if not open_v2 or open_v2[0]["st_shndx"] != "SHN_UNDEF":
        problems.append("does not leave sqlite3_open_v2 to the loader")
    if problems:
        sys.exit(f"{name}: " + "; ".join(problems))
    print(f"{name}: needs {', '.join(needed)}; sqlite3_* left to the loader")
EOF
if [ "${WHEEL_ZIG:-1}" = 1 ]; then
  "$tools/bin/auditwheel" show "$wheel" >&2
fi
if [ "${WHEEL_SDIST:-1}" = 1 ]; then
  rm -f "$out"/langgraph_checkpoint_rs-*.tar.gz
  "$tools/bin/maturin" sdist --manifest-path "$root/python/Cargo.toml" --out "$out" >&2
fi
ls -l "$out" >&2
echo "$wheel"
