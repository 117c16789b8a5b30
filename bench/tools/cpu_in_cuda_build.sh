#!/usr/bin/env bash
# The CPU-only step loop (bench/stage --only steploop, host columns) in a build with the CUDA
# backend against one without, on a machine with a GPU: plain, with OVSTAGE_DISABLE_GPU=1, and the
# build without CUDA with CUDA initialised in the process before main (cuda_init_preload.c: the
# driver alone, and a primary context). Session 18 found the CUDA build 2.6-4.5x slower there
# (docs/performance.md); this tells the engine's own calls from the driver's presence.
# Usage (on the GPU machine, in the repository root): bash bench/tools/cpu_in_cuda_build.sh [CFG...]
#   CFG: PRIMS:PRODUCERS (default 4096:1 262144:1 262144:4). Builds build-cpu-cmp and build-cuda-cmp.
set -uo pipefail
bo() { (cmake -S . -B "$1" -DCMAKE_BUILD_TYPE=Release -DOVSTAGE_BUILD_TESTS=OFF -DOVSTAGE_BUILD_PYTHON=OFF \
          -DOVSTAGE_CUDA=$2 -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null &&
        cmake --build "$1" -j"$(nproc)" --target ovstage_bench_stage >/dev/null) || echo "build $1 failed"; }
bo build-cpu-cmp OFF & bo build-cuda-cmp AUTO & wait
cuda=$(dirname "$(dirname "$(command -v nvcc)")")
cc -O2 -shared -fPIC bench/tools/cuda_init_preload.c -I"$cuda/include" -L"$cuda/lib64" -lcudart \
  -o /tmp/libcuda_init_preload.so || echo "preload build failed"
run() { OVSTAGE_BENCH_STEPLOOP=$cfg timeout 60 "$@" --only steploop --reps 1 2>&1 | grep -E '^\| step loop' |
        grep -E 'steps/s|floor' | awk -F'|' '{printf "%s | ", $3}' | tr -s ' '; }
for cfg in ${*:-4096:1 262144:1 262144:4}; do for i in 1 2; do
  echo "$cfg cuda build: $(run build-cuda-cmp/bench/stage/ovstage_bench_stage)"
  echo "$cfg cuda build, OVSTAGE_DISABLE_GPU=1: $(OVSTAGE_DISABLE_GPU=1 run build-cuda-cmp/bench/stage/ovstage_bench_stage)"
  echo "$cfg cpu build: $(run build-cpu-cmp/bench/stage/ovstage_bench_stage)"
  echo "$cfg cpu build + cuda driver: $(CUDA_INIT_PRELOAD=count LD_PRELOAD=/tmp/libcuda_init_preload.so run build-cpu-cmp/bench/stage/ovstage_bench_stage)"
  echo "$cfg cpu build + cuda context: $(CUDA_INIT_PRELOAD=ctx LD_PRELOAD=/tmp/libcuda_init_preload.so run build-cpu-cmp/bench/stage/ovstage_bench_stage)"
done; done
