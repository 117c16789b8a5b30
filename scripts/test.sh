#!/usr/bin/env bash
# Installs the dependencies, then builds and runs every test suite in three builds:
#   release  — optimised (CMake Release: -O3), warnings as errors
#   asan     — AddressSanitizer + UndefinedBehaviorSanitizer (any report fails the test)
#   tsan     — ThreadSanitizer (any report fails the test)
# The release build also builds the Python package (python/) and runs its pytest suite through ctest.
# Usage: scripts/test.sh [release|asan|tsan ...]   (default: all three)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

bash scripts/install-deps.sh

builds=("$@")
if [ ${#builds[@]} -eq 0 ]; then
	builds=(release asan tsan)
fi
jobs=$(nproc 2>/dev/null || echo 2)

# Sanitizer reports must fail the run, not scroll past.
export ASAN_OPTIONS="abort_on_error=1:halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/tsan.supp"

# Some kernels randomise mmap more than ThreadSanitizer's shadow layout allows; then run the TSan
# build without address-space randomisation (only for that build).
tsan_prefix=()
tsan_works() {
	local probe=build/tsan-probe
	mkdir -p build
	printf 'int main(void){return 0;}\n' > "$probe.c"
	cc -fsanitize=thread "$probe.c" -o "$probe" 2>/dev/null && "${tsan_prefix[@]}" "$probe" >/dev/null 2>&1
}

for b in "${builds[@]}"; do
	case "$b" in
	release) flags=(-DCMAKE_BUILD_TYPE=Release -DOVSTAGE_WERROR=ON) ;;
	# The sanitizer builds compile the CUDA kernels for one architecture only (they run CPU-only
	# where there is no GPU; the release build keeps the fat binary): CI time on 2 cores.
	asan) flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DOVSTAGE_SANITIZE=address,undefined -DCMAKE_CUDA_ARCHITECTURES=90) ;;
	tsan) flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DOVSTAGE_SANITIZE=thread -DCMAKE_CUDA_ARCHITECTURES=90)
		if ! tsan_works; then
			tsan_prefix=(setarch "$(uname -m)" -R)
			tsan_works || { echo "test.sh: ThreadSanitizer cannot run on this machine" >&2; exit 1; }
			echo "test.sh: running the TSan build without ASLR (setarch -R)"
		fi ;;
	*) echo "test.sh: unknown build '$b' (release, asan, tsan)" >&2; exit 2 ;;
	esac
	echo "=== $b build ==="
	# Benchmarks are built in the release build only (they are not run here).
	bench=OFF
	[ "$b" = release ] && bench=ON
	# The Python package and its pytest suite: release build only (python/CMakeLists.txt).
	python=(-DOVSTAGE_BUILD_PYTHON=OFF)
	[ "$b" = release ] && python=(-DOVSTAGE_BUILD_PYTHON=ON -DOVSTAGE_REQUIRE_PYTHON=ON
		-DPython3_EXECUTABLE="$root/build/pyvenv/bin/python")
	cmake -S . -B "build/$b" "${flags[@]}" -DOVSTAGE_BUILD_BENCH=$bench "${python[@]}" >/dev/null
	cmake --build "build/$b" -j"$jobs"
	prefix=()
	[ "$b" = tsan ] && prefix=("${tsan_prefix[@]}")
	if [ ${#prefix[@]} -gt 0 ]; then
		"${prefix[@]}" ctest --test-dir "build/$b" --output-on-failure -j"$jobs"
	else
		ctest --test-dir "build/$b" --output-on-failure -j"$jobs"
	fi
done
# `pip install .` into a scratch venv (the README's Python install), then the seed example through it.
if [[ " ${builds[*]} " == *" release "* ]]; then
	echo "=== pip install . ==="
	rm -rf build/pip-venv
	python3 -m venv build/pip-venv
	build/pip-venv/bin/python -m pip install -q --disable-pip-version-check .
	out=$(cd build && pip-venv/bin/python "$root/examples/python/minimal.py")
	echo "$out"
	grep -qx "read back ordinal 1 \[1. 2. 3.\]" <<<"$out" || { echo "test.sh: pip-installed ovstage failed" >&2; exit 1; }
fi
# A short fuzz smoke run (fuzz/README.md): 20 s per libFuzzer target; a finding fails the run.
if command -v clang >/dev/null; then
	echo "=== fuzz smoke run ==="
	bash fuzz/run.sh 20
else
	echo "test.sh: clang not found, skipping the fuzz smoke run"
fi
echo "test.sh: all builds passed (${builds[*]})"
