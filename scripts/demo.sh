#!/usr/bin/env bash
# Installs the dependencies, builds the project (optimised) and runs the main demo: a simulation
# loop of environments x bodies writing pose and velocity every step from several producer threads,
# a sealer advancing the write floor, and a consumer reading like a training loop and checking every
# value (examples/sim_demo.c). Extra arguments go to the demo (--envs, --bodies, --steps, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j"$(nproc 2>/dev/null || echo 2)" --target ovstage_demo_sim
exec build/release/examples/ovstage_demo_sim "$@"
