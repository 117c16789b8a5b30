#!/usr/bin/env bash
# On the GPU machine (the device tool): build the CUDA build, run the GPU suite, compute-sanitizer
# (memcheck with leak check, racecheck) on it, and bench/gpu; every log goes to $OUT (or ./device-out).
# Usage: bash scripts/device-gpu.sh [build|test|sanitize|bench|python|demo|gpu-ab|stage-ab|jobs-ab|jobs-lace|fuzz]...
#        (default: build test sanitize bench)
# .debs must hold the benchmark peers too (docs/gpu.md, "Recipe": EXTRA_DEBS for oneTBB and LMDB).
set -uo pipefail
out=${OUT:-device-out}; mkdir -p "$out"
eval "$(bash .debs/device-prefix.sh .debs)"
steps=${*:-build test sanitize bench}
for s in $steps; do
  case $s in
    build) { cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
               -DOVSTAGE_BUILD_BENCH=ON -DOVSTAGE_BUILD_PYTHON=OFF >/dev/null &&
             cmake --build build-gpu -j16 2>&1 | grep -E 'error|warning' ; } >"$out/build.log" 2>&1
           echo "build rc=${PIPESTATUS[0]}"; tail -5 "$out/build.log" ;;
    test) (cd build-gpu && timeout 300 ctest -L gpu --output-on-failure) >"$out/test.log" 2>&1
          echo "test rc=$?"; tail -15 "$out/test.log" ;;
    sanitize) for t in ovstage_test_gpu ovstage_test_gpu_hierarchy; do for tool in memcheck racecheck; do
                extra=; [ $tool = memcheck ] && extra="--leak-check full"
                log=$tool; [ $t = ovstage_test_gpu ] || log=$tool-${t#ovstage_test_gpu_}
                OVSTAGE_GPU_TEST_DIV=20 CK_FORK=no timeout 240 compute-sanitizer --tool $tool $extra \
                  --error-exitcode 9 build-gpu/tests/gpu/$t >"$out/$log.log" 2>&1
                echo "$t $tool rc=$?"; tail -4 "$out/$log.log"; done; done ;;
    bench) timeout 240 build-gpu/bench/gpu/ovstage_bench_gpu --markdown ${BENCH_ONLY:+--only $BENCH_ONLY} \
             >"$out/bench.md" 2>&1; echo "bench rc=$?"; cat "$out/bench.md" ;;
    gpu-ab) # bench/gpu of an old tree (OLD_SRC, default old-src/) against this one, interleaved, three runs
            # each; BENCH_ONLY picks rows (default sparse); one summary line per run
            old=${OLD_SRC:-old-src}; [ -d "$old" ] || { echo "gpu-ab: no $old/"; continue; }
            (cd "$old" && cmake -S . -B build-old -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
               -DOVSTAGE_BUILD_BENCH=ON -DOVSTAGE_BUILD_PYTHON=OFF -DOVSTAGE_BUILD_TESTS=OFF >/dev/null &&
             cmake --build build-old -j16 --target ovstage_bench_gpu >/dev/null) || echo "gpu-ab: old build failed"
            for i in 1 2 3; do for v in old new; do
              b=build-gpu/bench/gpu/ovstage_bench_gpu; [ $v = old ] && b=$old/build-old/bench/gpu/ovstage_bench_gpu
              timeout 120 $b --markdown --only ${BENCH_ONLY:-sparse} >"$out/gpu-$v-$i.md" 2>&1
              echo "$v $i: $(grep -E 'step:|^\| ' "$out/gpu-$v-$i.md" | grep -v -E '^\| (row|---)' | tr '\n' ' ' | tr -s ' ')"
            done; done ;;
    stage-ab) # bench/stage, an old tree (old-src/, e.g. `git archive OLD | tar -x -C old-src`) against
              # this one, interleaved, three runs each; STAGE_ONLY picks sections (default: commit latency)
              [ -d old-src ] || { echo "stage-ab: no old-src/"; continue; }
              (cd old-src && cmake -S . -B build-old -DCMAKE_BUILD_TYPE=Release -DOVSTAGE_BUILD_TESTS=OFF >/dev/null &&
               cmake --build build-old -j16 --target ovstage_bench_stage >/dev/null) || echo "stage-ab: old build failed"
              for i in 1 2 3; do for v in old new; do
                b=build-gpu/bench/stage/ovstage_bench_stage; [ $v = old ] && b=old-src/build-old/bench/stage/ovstage_bench_stage
                for sec in ${STAGE_ONLY:-commit latency}; do
                  timeout 200 $b --only $sec >"$out/stage-$v-$sec-$i.md" 2>&1
                  echo "$v $sec $i: $(grep -E '^\| \((a|b|c)\) per|^\| latest read|^\| tiny' "$out/stage-$v-$sec-$i.md" | awk -F'|' '{printf "%s=%s; ", substr($2,1,28), $3}')"
                done; done; done ;;
    jobs-ab) # bench/jobs of old-src/ against this tree, interleaved, three runs each (fib 34)
              (cd old-src && cmake -S . -B build-old -DCMAKE_BUILD_TYPE=Release -DOVSTAGE_BUILD_TESTS=OFF >/dev/null &&
               cmake --build build-old -j16 --target ovstage_bench_jobs >/dev/null) || echo "jobs-ab: old build failed"
              for i in 1 2 3; do for v in old new; do
                b=build-gpu/bench/jobs/ovstage_bench_jobs; [ $v = old ] && b=old-src/build-old/bench/jobs/ovstage_bench_jobs
                timeout 150 $b --fib 34 --markdown >"$out/jobs-$v-$i.md" 2>&1; echo "jobs $v $i rc=$?"; done; done ;;
    jobs-lace) # bench/jobs at fib(LACE_FIB, default 40) beside Lace, built by bench/peers/lace.sh from LACE_SRC
               # (a Lace source tree carried outside git, e.g. build/lace-src; never committed)
              cp -r "${LACE_SRC:-build/lace-src}" /tmp/lace-src && bash bench/peers/lace.sh /tmp/lace-src /tmp/lace-peer >/dev/null 2>&1 ||
                echo "jobs-lace: Lace peer build failed"
              timeout 240 build-gpu/bench/jobs/ovstage_bench_jobs --fib ${LACE_FIB:-40} --reps 3 --no-slow-peers --markdown \
                --lace /tmp/lace-peer/ovstage_peer_lace_fib >"$out/jobs-lace.md" 2>&1; echo "jobs-lace rc=$?"
              grep -E '^\| (fib|per-spawn|submit|idle|CPU under)' "$out/jobs-lace.md" | awk -F'|' '{printf "%s | %s | %s | %s\n", substr($2,1,60), $3, $5, $6}' ;;
    fuzz) # the libFuzzer targets with 16 workers: FUZZ_RUNS executions per worker (default 625000: 10^7 per
          # target), FUZZ_TARGETS (default fuzz_write fuzz_read), FUZZ_SECS a time cap per target
          # FUZZ_PREBUILT: a folder with target binaries built on the dev machine (its clang has
          # compiler-rt, the device's has none) and optionally <target>.corpus.tar to start from;
          # OVSTAGE_WORKERS (default 2 here) keeps 16 processes from running 16 workers each.
          export OVSTAGE_WORKERS=${OVSTAGE_WORKERS:-2}
          if [ -n "${FUZZ_PREBUILT:-}" ]; then
            mkdir -p build/fuzz/fuzz
            for t in ${FUZZ_TARGETS:-fuzz_write fuzz_read}; do
              cp "$FUZZ_PREBUILT/$t" build/fuzz/fuzz/ && mkdir -p build/fuzz/corpus/$t
              [ -f "$FUZZ_PREBUILT/$t.corpus.tar" ] && tar -xf "$FUZZ_PREBUILT/$t.corpus.tar" -C build/fuzz/corpus/$t
            done
          else
            mkdir -p /tmp/clangbin
            for t in clang clang++; do v=$(ls /usr/bin/$t-[0-9]* 2>/dev/null | sort -V | tail -1)
              [ -n "$v" ] && ln -sf "$v" /tmp/clangbin/$t; done
            export PATH=/tmp/clangbin:$PATH
            bash fuzz/run.sh 1 >/dev/null 2>&1 || true # builds build/fuzz (and runs each target for 1 s)
          fi
          export ASAN_OPTIONS=abort_on_error=1:halt_on_error=1:detect_leaks=1:allocator_may_return_null=1
          for t in ${FUZZ_TARGETS:-fuzz_write fuzz_read}; do
            mkdir -p build/fuzz/corpus/$t build/fuzz/artifacts/$t
            (cd build/fuzz && timeout $(( ${FUZZ_SECS:-280} + 30 )) ./fuzz/$t -jobs=16 -workers=16 -runs=${FUZZ_RUNS:-625000} \
              -max_total_time=${FUZZ_SECS:-280} -timeout=25 -detect_leaks=0 -print_final_stats=1 \
              -artifact_prefix=artifacts/$t/ corpus/$t ../../fuzz/corpus/$t >"$out/$t.log" 2>&1)
            echo "$t rc=$? executions: $(cat build/fuzz/fuzz-*.log 2>/dev/null | awk '/^stat::number_of_executed_units:/ {n += $2} END {print n + 0}')" \
              "clean exits: $(cat build/fuzz/fuzz-*.log 2>/dev/null | grep -c '^fuzz: clean exit') findings: $(ls build/fuzz/artifacts/$t | wc -l)"
            mv build/fuzz/fuzz-*.log "$out/" 2>/dev/null; mkdir -p "$out/$t-jobs"; mv "$out"/fuzz-*.log "$out/$t-jobs/" 2>/dev/null
            cp -r build/fuzz/artifacts/$t "$out/$t-artifacts" 2>/dev/null
            tar -cf "$out/$t.corpus.tar" -C build/fuzz/corpus/$t . 2>/dev/null
          done ;;
    demo) for dev in cpu cuda; do for p in 2 4; do
            timeout 120 build-gpu/examples/ovstage_demo_sim --device $dev --envs 4096 --producers $p --steps 4000 --quiet \
              >"$out/demo-$dev-$p.txt" 2>&1; echo "demo $dev envs 4096 producers $p rc=$?"
            grep -E 'steps/s|write op|floor advance|latest read|mismatches|peak' "$out/demo-$dev-$p.txt"; done; done ;;
    python) CUDA_ARCHS=90 PYTHON=python3 timeout 300 bash python/tests/run_gpu.sh >"$out/python.log" 2>&1
            echo "python rc=$?"; tail -30 "$out/python.log" ;;
  esac
done
