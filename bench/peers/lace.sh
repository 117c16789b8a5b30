#!/usr/bin/env bash
# Builds the Lace peer of bench/jobs (bench/peers/lace_fib.c) against a Lace source tree that lives
# OUTSIDE this repository. This script never downloads anything: fetch or unpack Lace yourself
# (github:trolando/lace; the figures in docs/performance.md use tag v1.4.2), then
#
#   bash bench/peers/lace.sh /path/to/lace-src [BUILD_DIR]
#
# BUILD_DIR defaults to /tmp/ovstage-peer-lace. The library is built with Lace's own CMake
# (Release, its own flags; no LTO); the driver with -O2, the flags of bench/jobs' own frames. The
# last line printed is the driver's path; give it to the benchmark:
#
#   build/release/bench/jobs/ovstage_bench_jobs --lace BUILD_DIR/ovstage_peer_lace_fib
#   (or OVSTAGE_PEER_LACE=BUILD_DIR/ovstage_peer_lace_fib in the environment)
#
# Without it the Lace rows print n/a. Nothing of Lace is ever copied into the repository.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${1:?usage: lace.sh LACE_SOURCE_DIR [BUILD_DIR]}
out=${2:-/tmp/ovstage-peer-lace}
src=$(cd "$src" && pwd)
if [ ! -f "$src/src/lace.h" ] || [ ! -f "$src/CMakeLists.txt" ]; then
	echo "lace.sh: $src does not look like a Lace source tree (no src/lace.h)" >&2
	exit 1
fi
case "$out" in
"$(cd "$here/../.." && pwd)"/*) echo "lace.sh: build outside the repository, not in $out" >&2; exit 1 ;;
esac
mkdir -p "$out"
cmake -S "$src" -B "$out/lace" -DCMAKE_BUILD_TYPE=Release -DLACE_BUILD_TESTS=OFF \
	-DLACE_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build "$out/lace" -j"$(nproc 2>/dev/null || echo 2)" --target lace >/dev/null
lib=$(find "$out/lace" -name liblace.a | head -n1)
[ -n "$lib" ] || { echo "lace.sh: liblace.a not found under $out/lace" >&2; exit 1; }
cc -std=gnu11 -O2 -I"$src/src" -I"$out/lace" "$here/lace_fib.c" "$lib" -lpthread \
	-o "$out/ovstage_peer_lace_fib"
version=$(sed -n 's/^ *VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt" | head -n1)
echo "${version:-unknown}" > "$out/VERSION"
echo "lace.sh: Lace ${version:-?} peer built" >&2
echo "$out/ovstage_peer_lace_fib"
