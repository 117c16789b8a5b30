# ab_lib.sh — what the A/B scripts of bench/tools share (sourced, not run): build this work tree's
# library and another revision's (Release, CUDA, Python, tests and benchmarks off), then compile one
# bench source against each, so that the two sides differ only in the library.
#   ab_build REF WORK     the libraries in WORK/ref-build and WORK/this-build (REF from git: the work
#                         tree is not touched)
#   ab_compile WORK NAME SRC   WORK/NAME_ref and WORK/NAME_this from bench/stage/SRC
# Callers run from the project root with `set -euo pipefail`.

ab_build() {
	local ref=$1 work=$2 jobs
	jobs=$(nproc 2>/dev/null || echo 2)
	local cfg=(-DCMAKE_BUILD_TYPE=Release -DOVSTAGE_CUDA=OFF -DOVSTAGE_BUILD_PYTHON=OFF -DOVSTAGE_BUILD_BENCH=OFF
		-DOVSTAGE_BUILD_TESTS=OFF)
	mkdir -p "$work"
	rm -rf "$work/ref-src"
	mkdir -p "$work/ref-src"
	git archive "$ref" | tar -x -C "$work/ref-src"
	local side src
	for side in ref this; do
		src=$PWD
		[ "$side" = ref ] && src=$work/ref-src
		cmake -S "$src" -B "$work/$side-build" "${cfg[@]}" >/dev/null
		cmake --build "$work/$side-build" -j"$jobs" --target ovstage >/dev/null
	done
}

ab_compile() {
	local work=$1 name=$2 src=$3 b=$PWD/bench side
	for side in ref this; do
		cc -O2 -std=c11 -D_GNU_SOURCE -I"$PWD/include" -I"$b/stage" -I"$b/common" \
			"$b/stage/$src" "$b/stage/util.c" "$b/stage/stage_util.c" "$b/common/report.c" \
			-L"$work/$side-build" -Wl,-rpath,"$work/$side-build" -lovstage -lpthread -lm -o "$work/${name}_$side"
	done
}
