/*
 * deque.h — operations on a worker's split deque besides the inline fast paths of
 * jobs_forkjoin.h. `_owner` functions run on the deque's own thread only; jobs_steal runs on any
 * other worker (a thief).
 */
#ifndef OVSTAGE_JOBS_DEQUE_H
#define OVSTAGE_JOBS_DEQUE_H

#include "jobs_forkjoin.h"

enum { JOBS_STEAL_OK = 0, JOBS_STEAL_EMPTY = 1, JOBS_STEAL_BUSY = 2 };

/* Steal the oldest public frame of victim and run it on self. Lock-free: fails with BUSY only
 * when another thief or the owner moved ts at the same time. */
int jobs_steal(jobs_worker *self, jobs_worker *victim);

/* Pop and run (or wait for) frames until top == base: used to run detached jobs that a job left on
 * the deque, keeping the stack discipline. */
void jobs_sync_to_owner(jobs_worker *w, jobs_frame *base);

/* Make every private frame public (before blocking in a wait, so that nothing we hold is stuck). */
void jobs_publish_all_owner(jobs_worker *w);

/* One spin-wait hint to the CPU (x86 pause, arm64 yield). */
static inline void jobs_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* Spin with pause, then yield. */
void jobs_backoff(unsigned *spins);

#endif /* OVSTAGE_JOBS_DEQUE_H */
