#!/usr/bin/env bash
# seal_ab.sh — the per-seal time of scattered writes (bench/stage/seal_scatter.c) of this work tree
# beside another revision's (default: main), in one run on one machine: both libraries are built
# (Release, CUDA and Python off), the same bench source is compiled against each, and the two run
# alternately, RUNS times each; prints every run and the median of the runs' medians.
# Usage: bench/tools/seal_ab.sh [REF [RUNS [P K STEPS]]]   (default: main 5 1048576 1000 200)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
ref=${1:-main}
runs=${2:-5}
args=("${3:-1048576}" "${4:-1000}" "${5:-200}")
work=$root/build/seal-ab
. bench/tools/ab_lib.sh
ab_build "$ref" "$work"
ab_compile "$work" seal seal_scatter.c
declare -A med
for i in $(seq "$runs"); do
	for side in ref this; do
		line=$("$work/seal_$side" "${args[@]}")
		echo "run $i $side ($([ $side = ref ] && echo "$ref" || echo "work tree")): $line"
		med[$side]+="$(sed 's/.*median_us=\([0-9.]*\).*/\1/' <<<"$line") "
	done
done
for side in ref this; do
	m=$(printf '%s\n' ${med[$side]} | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	echo "median of $runs runs, $side: $m us"
done
