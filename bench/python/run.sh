#!/usr/bin/env bash
# bench/python/run.sh — the Python step loop (issue 10) beside its peers, measured in one run:
#   C       step_c.c against libovstage (the floor: no binding at all)
#   ext     the ovstage C extension (this repository's python/)
#   ctypes  a ctypes binding of the same calls, written for the benchmark only (step_loop.py)
# Prints per-step time, per-call time and the ratios. Needs a release build with the Python
# package (bash scripts/test.sh release, or cmake with -DOVSTAGE_BUILD_PYTHON=ON).
#   usage: bash bench/python/run.sh [prims=64] [steps=20000]
set -euo pipefail
cd "$(dirname "$0")/../.."
prims=${1:-64}
steps=${2:-20000}
build=${OVSTAGE_BUILD:-build/release}
py=${PYTHON:-build/pyvenv/bin/python}
[ -f "$build/libovstage.a" ] || { echo "run.sh: no $build/libovstage.a (build first)" >&2; exit 2; }
cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude bench/python/step_c.c "$build/libovstage.a" -lhwloc -lpthread -lm \
	-o "$build/bench_python_step_c"
c=$("$build/bench_python_step_c" "$prims" "$steps")
ext=$(PYTHONPATH="$build/python" "$py" bench/python/step_loop.py ext "$prims" "$steps")
ct=$(PYTHONPATH="$build/python" "$py" bench/python/step_loop.py ctypes "$prims" "$steps" "$build/libovstage.so")
echo "step loop: $prims prims x 8 float32 columns, write + seal + read into numpy, $steps steps ($(nproc) cores)"
"$py" - "$c" "$ext" "$ct" <<'PY'
import sys
rows = {}
for line in sys.argv[1:]:
    name, steps, secs, calls = line.split()
    rows[name] = (float(secs) / int(steps) * 1e6, int(calls))
c, e, t = rows["c"], rows["ext"], rows["ctypes"]
calls = c[1]
print(f"{'binding':8} {'us/step':>9} {'us/call':>8}")
for n, (us, _) in (("C", c), ("ext", e), ("ctypes", t)):
    print(f"{n:8} {us:9.2f} {us / calls:8.3f}")
print(f"ext vs C:      +{(e[0] - c[0]) / calls:.3f} us per call above C ({e[0] / c[0]:.2f}x the C step; {calls} calls/step)")
print(f"ext vs ctypes: {t[0] / e[0]:.2f}x faster per call ({(t[0]) / calls:.3f} vs {e[0] / calls:.3f} us)")
PY
