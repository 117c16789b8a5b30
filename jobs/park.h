/*
 * park.h — futex parking and monotonic time. Linux only (the engine targets Linux).
 * The futex word is a C11 atomic; every decision is taken on atomic loads with explicit order,
 * the futex only sleeps until the word may have changed (spurious wakeups are always allowed).
 */
#ifndef OVSTAGE_JOBS_PARK_H
#define OVSTAGE_JOBS_PARK_H

#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static inline uint64_t jobs_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Sleeps while *word == expected, at most timeout_ns (~0 = no limit). */
static inline void jobs_futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t timeout_ns)
{
	struct timespec rel, *relp = NULL;
	if (timeout_ns != ~(uint64_t)0) {
		rel.tv_sec = (time_t)(timeout_ns / 1000000000u);
		rel.tv_nsec = (long)(timeout_ns % 1000000000u);
		relp = &rel;
	}
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, relp, NULL, 0);
}

static inline void jobs_futex_wake(_Atomic uint32_t *word, int n)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

#endif /* OVSTAGE_JOBS_PARK_H */
