/*
 * peer_tbb.cpp — oneTBB peer: fib with tbb::task_group (one group per level: run n-1, compute n-2
 * in place, wait), flat run()/wait() batches, and an external "enqueue and block until it ran"
 * round trip. Thread counts are imposed with tbb::task_arena (plus tbb::global_control, so that a
 * 1-thread figure cannot borrow workers).
 */
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>
#include <oneapi/tbb/version.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <sched.h>

#include "bench.h"

namespace {

long fib_tbb(int n)
{
	if (n < 2)
		return n;
	long x, y;
	tbb::task_group g;
	g.run([&x, n] { x = fib_tbb(n - 1); });
	y = fib_tbb(n - 2);
	g.wait();
	return x + y;
}

// Runs f inside an arena of `threads` slots (the caller takes one), with the global parallelism
// capped at the same number.
template <class F> void in_arena(int threads, F &&f)
{
	tbb::global_control gc(tbb::global_control::max_allowed_parallelism, (size_t)threads);
	tbb::task_arena arena(threads, 1);
	arena.execute(f);
}

inline void cpu_relax()
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

// A peer that throws (cannot create threads, out of memory) reports "unavailable", never aborts.
template <class R, class F> R guarded(R fail, F &&f)
{
	try {
		return f();
	} catch (...) {
		return fail;
	}
}

} // namespace

extern "C" bool tbb_available(void)
{
	return true;
}

extern "C" const char *tbb_version(void)
{
	static char buf[64];
	std::snprintf(buf, sizeof buf, "oneTBB %d.%d (runtime interface %d)", TBB_VERSION_MAJOR,
		      TBB_VERSION_MINOR, TBB_runtime_interface_version());
	return buf;
}

extern "C" uint64_t tbb_fib_ns(int threads, int n, long *result)
{
	return guarded<uint64_t>(0, [&]() -> uint64_t {
		uint64_t t0 = 0, t1 = 0;
		long r = -1;
		in_arena(threads, [&] {
			t0 = bench_now_ns();
			r = fib_tbb(n);
			t1 = bench_now_ns();
		});
		*result = r;
		return t1 - t0;
	});
}

extern "C" uint64_t tbb_spawn_batches_ns(int threads, long k, long batches, long *check)
{
	return guarded<uint64_t>(0, [&]() -> uint64_t {
		uint64_t t0 = 0, t1 = 0;
		std::unique_ptr<long[]> out(new long[(size_t)k]);
		long *o = out.get();
		long sum = 0;
		in_arena(threads, [&] {
			t0 = bench_now_ns();
			for (long b = 0; b < batches; b++) {
				tbb::task_group g;
				for (long i = 0; i < k; i++)
					g.run([o, i] { o[i] = 2 * i + 1; });
				g.wait();
				for (long i = 0; i < k; i++)
					sum += o[i];
			}
			t1 = bench_now_ns();
		});
		*check = sum;
		return t1 - t0;
	});
}

// task_arena::enqueue of a trivial functor into an arena whose slots are all for TBB's workers
// (the main thread never joins it), then the main thread waits for the functor's flag: spinning
// with pause for a while, then yielding. This is "hand a task to the pool and block until it ran"
// without the main thread ever running the task itself.
extern "C" bool tbb_roundtrip(int threads, long iters, uint64_t *ns)
{
	return guarded<bool>(false, [&]() -> bool {
		tbb::global_control gc(tbb::global_control::max_allowed_parallelism, (size_t)threads + 1);
		tbb::task_arena arena(threads, 0);
		arena.initialize();
		std::atomic<long> counter{0};
		for (long i = 0; i < iters; i++) {
			std::atomic<bool> done{false};
			uint64_t t0 = bench_now_ns();
			arena.enqueue([&counter, &done] {
				counter.fetch_add(1, std::memory_order_relaxed);
				done.store(true, std::memory_order_release);
			});
			unsigned spins = 0;
			while (!done.load(std::memory_order_acquire)) {
				if (++spins < 64)
					cpu_relax();
				else
					sched_yield();
			}
			ns[i] = bench_now_ns() - t0;
		}
		return counter.load() == iters;
	});
}

extern "C" double tbb_idle_pct(int threads, int n, uint64_t settle_ns, uint64_t measure_ns)
{
	return guarded<double>(-1.0, [&]() -> double {
		tbb::global_control gc(tbb::global_control::max_allowed_parallelism, (size_t)threads);
		tbb::task_arena arena(threads, 1);
		long r = 0;
		arena.execute([&] { r = fib_tbb(n); });
		(void)r;
		// the arena and its workers are still alive while we measure
		return bench_idle_cpu_pct(settle_ns, measure_ns);
	});
}
