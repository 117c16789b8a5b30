#!/usr/bin/env bash
# commit_ab.sh — row (b) of `ovstage_bench_stage --only commit` (bench/stage/commit_b.c: 8 columns x
# 4 KiB per ordinal, write + advance + wait + release) of this work tree beside another revision's
# (default: main), with LMDB's peer, in one run on one machine: both libraries are built (Release,
# CUDA and Python off), the same bench source is compiled against each, and ref, this and LMDB run
# in turn, RUNS rounds, each side in a process of its own; with the reader thread, then alone.
# Prints every run, then per side the median rate and the median writer CPU per commit.
# Usage: bench/tools/commit_ab.sh [REF [RUNS [SECONDS]]]   (default: main 5 1)
set -euo pipefail
cd "$(dirname "$0")/../.."
ref=${1:-main}
runs=${2:-5}
secs=${3:-1}
work=$PWD/build/commit-ab
. bench/tools/ab_lib.sh
ab_build "$ref" "$work"
b=$PWD/bench
for side in ref this; do
	cc -O2 -std=c11 -D_GNU_SOURCE -DOVSTAGE_BENCH_HAVE_LMDB=1 -I"$PWD/include" -I"$b/stage" -I"$b/common" \
		"$b/stage/commit_b.c" "$b/stage/util.c" "$b/stage/stage_util.c" "$b/stage/lmdb_peer.c" \
		"$b/common/report.c" -L"$work/$side-build" -Wl,-rpath,"$work/$side-build" -lovstage -llmdb \
		-lpthread -lm -o "$work/commit_$side"
done
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for reader in 1 0; do
	declare -A rate=() cpu=()
	for i in $(seq "$runs"); do
		for side in ref this lmdb; do
			if [ "$side" = lmdb ]; then
				line=$("$work/commit_this" lmdb "$reader" "$secs")
			else
				line=$("$work/commit_$side" ours "$reader" "$secs")
			fi
			echo "reader=$reader run $i $side: $line"
			rate[$side]+="$(sed 's/.* rate=\([0-9.]*\).*/\1/' <<<"$line") "
			cpu[$side]+="$(sed 's/.* cpu_us=\([0-9.]*\).*/\1/' <<<"$line") "
		done
	done
	for side in ref this lmdb; do
		echo "reader=$reader median of $runs, $side: $(printf '%s\n' ${rate[$side]} | median) commits/s," \
			"writer CPU $(printf '%s\n' ${cpu[$side]} | median) us/commit (rates: ${rate[$side]})"
	done
	unset rate cpu
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
