#!/usr/bin/env bash
# Runs the GPU-marked Python tests (python/tests/test_gpu.py) and the CUDA stream-protocol tests
# (test_cuda_protocol.py, which then meet the real backend) on a machine with a CUDA device and torch
# and/or cupy installed. Builds the C library (with the CUDA backend: OVSTAGE_CUDA=ON by default here,
# so a missing toolkit fails the configure instead of skipping everything) and the extension first
# (release) into build/gpu-python, and imports the package from there: nothing needs to be installed
# but numpy and pytest (plus torch and/or cupy for the GPU tests). Then runs pytest with -rs so every
# skip prints its reason; then write_flavors.py (its GPU section) through test_examples.py. Every run
# always runs, and the exit status is non-zero if any failed.
#   usage: bash python/tests/run_gpu.sh [extra pytest args]
# PYTHON selects the interpreter (default: python3 on PATH). OVSTAGE_CUDA (ON/AUTO/OFF) and
# CUDA_ARCHS (e.g. 90: one architecture compiles faster) go to CMake.
# On the GPU machine, which lacks ck, hwloc and dlpack (../shared/docs/gpu-device.md), the carried
# .debs/ are unpacked into a private prefix first when pkg-config cannot find ck and hwloc.
set -euo pipefail
cd "$(dirname "$0")/../.."
py=${PYTHON:-python3}
"$py" -c "import numpy, pytest" || { echo "run_gpu.sh: $py needs numpy and pytest" >&2; exit 2; }
if ! pkg-config --exists ck hwloc 2>/dev/null && [ -f .debs/device-prefix.sh ]; then
	eval "$(bash .debs/device-prefix.sh .debs)"
fi
cmake_args=(-DCMAKE_BUILD_TYPE=Release -DOVSTAGE_BUILD_BENCH=OFF -DOVSTAGE_BUILD_TESTS=OFF
	-DOVSTAGE_CUDA="${OVSTAGE_CUDA:-ON}" -DOVSTAGE_REQUIRE_PYTHON=ON -DPython3_EXECUTABLE="$(command -v "$py")")
[ -n "${CUDA_ARCHS:-}" ] && cmake_args+=(-DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS")
cmake -S . -B build/gpu-python "${cmake_args[@]}" >/dev/null
cmake --build build/gpu-python -j"$(nproc)" --target ovstage_python
export PYTHONPATH=build/gpu-python/python
# What this run has: the interpreter, the CUDA libraries, and whether the stage can use a GPU.
"$py" - <<'PY'
import sys
import ovstage
print("run_gpu.sh: python", sys.version.split()[0], "ovstage from", ovstage.__file__)
for name in ("numpy", "torch", "cupy"):
    try:
        m = __import__(name)
        print(f"run_gpu.sh: {name} {m.__version__}")
    except Exception as e:  # not installed, or no CUDA runtime for it
        print(f"run_gpu.sh: {name} unavailable ({type(e).__name__}: {e})")
print("run_gpu.sh:", ovstage.gpu_status())
PY
rc=0
"$py" -m pytest -q -rs -p no:cacheprovider -m gpu python/tests "$@" || rc=$?
"$py" -m pytest -q -rs -p no:cacheprovider python/tests/test_cuda_protocol.py "$@" || rc=$((rc ? rc : $?))
# write_flavors.py's GPU section (a CUDA column read back through torch, cupy or warp) checked line by line
"$py" -m pytest -q -rs -p no:cacheprovider python/tests/test_examples.py -k write_flavors "$@" || rc=$((rc ? rc : $?))
exit "$rc"
