#!/usr/bin/env bash
# read_ab.sh — the latency of a latest read of a sealed column (bench/stage/read_latest.c) of this
# work tree beside another revision's (default: main), in one run on one machine: both libraries
# are built (Release, CUDA and Python off), the same bench source is compiled against each, and the
# two run alternately, RUNS times each, for each case (1 MiB, 64 MiB, 256 MiB by default).
# Usage: bench/tools/read_ab.sh [REF [RUNS [READS]]]   (default: main 5 20000)
#   CASES="P:lanes ..." overrides the cases (default "262144:1 16777216:1 16777216:4").
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
ref=${1:-main}
runs=${2:-5}
reads=${3:-20000}
cases=${CASES:-262144:1 16777216:1 16777216:4}
jobs=$(nproc 2>/dev/null || echo 2)
work=$root/build/read-ab
mkdir -p "$work"
cfg=(-DCMAKE_BUILD_TYPE=Release -DOVSTAGE_CUDA=OFF -DOVSTAGE_BUILD_PYTHON=OFF -DOVSTAGE_BUILD_BENCH=OFF
	-DOVSTAGE_BUILD_TESTS=OFF)
# the other revision's source, from git (its work tree is not touched)
rm -rf "$work/ref-src"
mkdir -p "$work/ref-src"
git archive "$ref" | tar -x -C "$work/ref-src"
build() { # src dir, build dir
	cmake -S "$1" -B "$2" "${cfg[@]}" >/dev/null
	cmake --build "$2" -j"$jobs" --target ovstage >/dev/null
}
build "$work/ref-src" "$work/ref-build"
build "$root" "$work/this-build"
b=$root/bench
for side in ref this; do
	cc -O2 -std=c11 -D_GNU_SOURCE -I"$root/include" -I"$b/stage" -I"$b/common" \
		"$b/stage/read_latest.c" "$b/stage/util.c" "$b/stage/stage_util.c" "$b/common/report.c" \
		-L"$work/$side-build" -Wl,-rpath,"$work/$side-build" -lovstage -lpthread -lm -o "$work/read_$side"
done
for c in $cases; do
	declare -A med=()
	for i in $(seq "$runs"); do
		for side in ref this; do
			line=$("$work/read_$side" "${c%%:*}" "${c##*:}" "$reads")
			echo "run $i $side ($([ $side = ref ] && echo "$ref" || echo "work tree")): $line"
			med[$side]+="$(sed 's/.* p50_us=\([0-9.]*\) p99_us=\([0-9.]*\).*/\1:\2/' <<<"$line") "
		done
	done
	for side in ref this; do
		p50=$(printf '%s\n' ${med[$side]} | cut -d: -f1 | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
		p99=$(printf '%s\n' ${med[$side]} | cut -d: -f2 | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
		echo "case $c, median of $runs runs, $side: p50 $p50 us, p99 $p99 us"
	done
	unset med
done
