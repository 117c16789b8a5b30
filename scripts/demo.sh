#!/usr/bin/env bash
# Installs the dependencies, builds the project (optimised) and runs the main demo.
# Until the stage engine lands, the demo is the job-system benchmark in its quick form.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j"$(nproc 2>/dev/null || echo 2)" --target ovstage_bench_jobs
exec build/release/bench/jobs/ovstage_bench_jobs --quick "$@"
