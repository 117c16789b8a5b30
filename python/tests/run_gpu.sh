#!/usr/bin/env bash
# Runs the GPU-marked Python tests (python/tests/test_gpu.py) and the CUDA stream-protocol tests
# (test_cuda_protocol.py, which then meet the real backend) on a machine with a CUDA device and torch
# and/or cupy installed. Builds the C library (with the CUDA backend: OVSTAGE_CUDA=ON by default here,
# so a missing toolkit fails the configure instead of skipping everything) and the extension first
# (release), then runs pytest with -rs so every skip prints its reason.
#   usage: bash python/tests/run_gpu.sh [extra pytest args]
# PYTHON selects the interpreter (default: python3 on PATH; it needs numpy, pytest, torch/cupy).
# OVSTAGE_CUDA (ON/AUTO/OFF) and CUDA_ARCHS (e.g. 90: one architecture compiles faster) go to CMake.
set -euo pipefail
cd "$(dirname "$0")/../.."
py=${PYTHON:-python3}
"$py" -c "import numpy, pytest" || { echo "run_gpu.sh: $py needs numpy and pytest" >&2; exit 2; }
arch=()
[ -n "${CUDA_ARCHS:-}" ] && arch=(-DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS")
cmake -S . -B build/gpu-python -DCMAKE_BUILD_TYPE=Release -DOVSTAGE_BUILD_BENCH=OFF -DOVSTAGE_BUILD_TESTS=OFF \
	-DOVSTAGE_CUDA="${OVSTAGE_CUDA:-ON}" "${arch[@]}" \
	-DOVSTAGE_REQUIRE_PYTHON=ON -DPython3_EXECUTABLE="$(command -v "$py")" >/dev/null
cmake --build build/gpu-python -j"$(nproc)" --target ovstage_python
export PYTHONPATH=build/gpu-python/python
"$py" -m pytest -q -rs -p no:cacheprovider -m gpu python/tests "$@"
"$py" -m pytest -q -rs -p no:cacheprovider python/tests/test_cuda_protocol.py "$@"
