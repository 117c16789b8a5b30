/*
 * park.h — futex parking and monotonic time. Linux only (the engine targets Linux).
 * The futex word is a C11 atomic; every decision is taken on atomic loads with explicit order,
 * the futex only sleeps until the word may have changed (spurious wakeups are always allowed).
 *
 * Waiter flag (the idea of Concurrency Kit's ck_ec32, in our own C11 atomics so that
 * ThreadSanitizer sees every access): a waiter that is about to sleep sets a flag bit in the word
 * with a read-modify-write (jobs_futex_wait_flagged); a signaller that changes the word with a
 * read-modify-write calls FUTEX_WAKE only if the value it replaced had the flag
 * (jobs_futex_wake_flagged). Signalling a word nobody sleeps on then costs no system call.
 * No wake-up is lost, by the single modification order of the word: if the flag's RMW comes
 * first, the signaller's RMW reads a value with the flag (provided every modification in
 * between preserves it: the caller's obligation) and wakes; if the signaller's RMW comes first,
 * the flag's RMW reads the changed value and the waiter does not sleep. A signal that lands
 * between the flag's RMW and FUTEX_WAIT changed the word, so the kernel's compare fails and
 * the wait returns at once.
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

/* The waiter's half of the waiter-flag protocol: sets `flag` in *word and sleeps (at most
 * timeout_ns) only if the word still holds `seen` (compared without the flag), the value the
 * caller decided to wait on. Returns the value the RMW read. The caller re-reads the word (with
 * the order it needs) before deciding anything: a return says only that the word may have changed.
 * A waiter that stops waiting (timeout) leaves the flag set; the next signal then pays one
 * needless FUTEX_WAKE, never a lost one. */
static inline uint32_t jobs_futex_wait_flagged(_Atomic uint32_t *word, uint32_t seen, uint32_t flag,
					       uint64_t timeout_ns)
{
	/* relaxed: the protocol needs only the RMW's place in the word's modification order (see
	 * the top of this file); no data is read on the strength of this value. */
	uint32_t v = atomic_fetch_or_explicit(word, flag, memory_order_relaxed);
	if ((v | flag) == (seen | flag))
		jobs_futex_wait(word, v | flag, timeout_ns);
	return v;
}

/* The signaller's half: `old` is the value that the signaller's RMW on *word replaced. Wakes every
 * sleeper if one announced itself. */
static inline void jobs_futex_wake_flagged(_Atomic uint32_t *word, uint32_t old, uint32_t flag)
{
	if (old & flag)
		jobs_futex_wake(word, 1 << 30);
}

#endif /* OVSTAGE_JOBS_PARK_H */
