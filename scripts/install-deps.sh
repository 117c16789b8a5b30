#!/usr/bin/env bash
# Installs every Debian package the build, the tests and the benchmarks need. Idempotent: packages
# already present are left alone, and the package index is refreshed only when something is missing.
# Runs apt-get directly as root, or through sudo otherwise.
set -euo pipefail

packages=(
	build-essential cmake pkg-config     # toolchain
	libck-dev libhwloc-dev libdlpack-dev # library dependencies
	check libsubunit-dev                 # test framework
	libtbb-dev liblmdb-dev               # benchmark peers (oneTBB, LMDB); OpenMP comes with gcc
	python3-dev python3-venv python3-pip # the Python extension; its venv (numpy, pytest) is made below
	spin                                 # model checker for verify/ (the grace-period model)
	clang libclang-rt-14-dev             # libFuzzer targets in fuzz/ (clang 14 with its fuzzer runtime)
)

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done

if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: all ${#packages[@]} packages present"
else
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then
		sudo="sudo"
	fi
	echo "install-deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -q
	$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The Python suite's interpreter: a venv of the python3 on PATH with numpy and pytest from pip, in
# build/pyvenv (scripts/test.sh hands it to CMake). Made once; pip runs only when one is missing.
root=$(cd "$(dirname "$0")/.." && pwd)
venv=$root/build/pyvenv
if ! "$venv/bin/python" -c "import numpy, pytest" 2>/dev/null; then
	echo "install-deps: making $venv (numpy, pytest)"
	rm -rf "$venv"
	python3 -m venv "$venv"
	"$venv/bin/python" -m pip install -q --disable-pip-version-check numpy pytest
else
	echo "install-deps: $venv has numpy and pytest"
fi
# warp (NVIDIA's warp-lang, CPU arrays): the suite's lane-fold test with warp's own vec3f arrays.
# Best effort: where no wheel exists for this platform that one test says so and is skipped.
if ! "$venv/bin/python" -c "import warp" 2>/dev/null; then
	echo "install-deps: adding warp-lang to $venv"
	"$venv/bin/python" -m pip install -q --disable-pip-version-check warp-lang ||
		echo "install-deps: warp-lang could not be installed (the warp test will be skipped)"
fi
