#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, in build/fuzz) and runs each for the given time.
# Usage: fuzz/run.sh [seconds per target (default 30)] [target ...]   (default: fuzz_write fuzz_read fuzz_api)
# Each target starts from its committed seeds (fuzz/corpus/<target>, copied into
# build/fuzz/corpus/<target>, which then keeps growing across runs). Prints the executions reached
# and whether anything was found; a finding (crash, invariant abort, leak, timeout) is written to
# build/fuzz/artifacts/<target>/ and makes the script exit 1.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
secs=${1:-30}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(fuzz_write fuzz_read fuzz_api)

command -v clang >/dev/null || { echo "fuzz/run.sh: clang not found (scripts/install-deps.sh installs it)" >&2; exit 2; }
build=build/fuzz
# Without the CUDA backend: its objects would make the fuzzers link through nvcc's host compiler (gcc),
# which has no libFuzzer; the fuzzed API runs CPU-only either way (no GPU in the fuzzing runs).
CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOVSTAGE_FUZZ=ON \
	-DOVSTAGE_SANITIZE=address,undefined -DOVSTAGE_BUILD_TESTS=OFF -DOVSTAGE_BUILD_BENCH=OFF \
	-DOVSTAGE_CUDA=OFF -DOVSTAGE_BUILD_PYTHON=OFF >/dev/null
cmake --build "$build" -j"$(nproc 2>/dev/null || echo 2)" --target "${targets[@]}" >/dev/null

# abort_on_error: an ASan/UBSan report or an invariant abort() is a crash libFuzzer records.
# allocator_may_return_null: a huge allocation fails (the engine reports OUT_OF_MEMORY) instead of
# ASan aborting on it.
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:halt_on_error=1}:detect_leaks=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
status=0
for t in "${targets[@]}"; do
	corpus=$build/corpus/$t
	art=$build/artifacts/$t
	mkdir -p "$corpus" "$art"
	log=$build/$t.log
	# -detect_leaks=0: libFuzzer's per-input leak check runs LeakSanitizer while the engine's job
	# scheduler still holds finished ops in its mmap'd tables (which LSan does not scan), and reports
	# them as leaks; the targets check for leaks themselves at exit, after destroying the instance.
	rc=0
	"$build/fuzz/$t" -max_total_time="$secs" -timeout=25 -detect_leaks=0 -print_final_stats=1 \
		-artifact_prefix="$art/" "$corpus" "$root/fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
	if [ "$rc" -eq 0 ] && grep -q '^fuzz: clean exit' "$log"; then
		echo "fuzz/run.sh: $t: ${execs:-?} executions in ${secs}s (${rate:-?}/s), nothing found"
	else
		status=1
		echo "fuzz/run.sh: $t: FOUND something after ${execs:-?} executions (exit $rc); log $log, artifacts in $art:" >&2
		grep -E 'ERROR|runtime error|fuzz invariant|SUMMARY|leak at exit' "$log" | head -5 >&2 || true
		ls "$art" >&2
	fi
done
exit $status
