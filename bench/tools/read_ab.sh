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
work=$root/build/read-ab
. bench/tools/ab_lib.sh
ab_build "$ref" "$work"
ab_compile "$work" read read_latest.c
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
