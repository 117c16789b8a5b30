#!/usr/bin/env bash
# Runs the GPU-marked Python tests (python/tests/test_gpu.py) on a machine with a CUDA device and
# torch and/or cupy installed. Builds the C library and the extension first (release), then runs
# pytest on the gpu marker with -rs so every skip prints its reason.
#   usage: bash python/tests/run_gpu.sh [extra pytest args]
# PYTHON selects the interpreter (default: python3 on PATH; it needs numpy, pytest, torch/cupy).
set -euo pipefail
cd "$(dirname "$0")/../.."
py=${PYTHON:-python3}
"$py" -c "import numpy, pytest" || { echo "run_gpu.sh: $py needs numpy and pytest" >&2; exit 2; }
cmake -S . -B build/gpu-python -DCMAKE_BUILD_TYPE=Release -DOVSTAGE_BUILD_BENCH=OFF -DOVSTAGE_BUILD_TESTS=OFF \
	-DOVSTAGE_REQUIRE_PYTHON=ON -DPython3_EXECUTABLE="$(command -v "$py")" >/dev/null
cmake --build build/gpu-python -j"$(nproc)" --target ovstage_python
PYTHONPATH=build/gpu-python/python "$py" -m pytest -q -rs -p no:cacheprovider -m gpu python/tests "$@"
