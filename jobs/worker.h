/*
 * worker.h — a worker's context: its split deque (shared and private halves) and bookkeeping.
 * Internal to jobs/. The layout is argued in docs/jobs.md: the fields thieves write live on their
 * own cache lines so that the owner's private fields never ping-pong.
 */
#ifndef OVSTAGE_JOBS_WORKER_H
#define OVSTAGE_JOBS_WORKER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jobs.h"

#define JOBS_LIKELY(x) __builtin_expect(!!(x), 1)
#define JOBS_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define JOBS_CACHE_LINE 64
#define JOBS_FRAME_PAYLOAD 48

/* A frame's argument/result area, as a type for stack copies. The payload is only ever accessed
 * through memcpy and through the pointer handed to the (opaque, indirectly called) frame function. */
typedef struct jobs_payload {
	_Alignas(16) unsigned char bytes[JOBS_FRAME_PAYLOAD]; /* the frame's arguments and results */
} jobs_payload;

/* Values of jobs_frame.thief other than a thief's jobs_worker pointer. */
#define JOBS_THIEF_TASK ((uintptr_t)1) /* spawned; if stolen, the thief has not recorded itself yet */
#define JOBS_THIEF_DONE ((uintptr_t)2) /* stolen and finished (or, detached, copied out) */

typedef void (*jobs_frame_fn)(jobs_worker *w, void *payload);

/* One deque entry: a spawned call, stored in place (no allocation). */
typedef struct jobs_frame {
	_Atomic uintptr_t thief; /* JOBS_THIEF_TASK / _DONE, or the worker that stole this frame */
	jobs_frame_fn fn;        /* what to run; written by the owner before publication */
	_Alignas(16) unsigned char payload[JOBS_FRAME_PAYLOAD]; /* arguments in, results out */
} jobs_frame;
_Static_assert(sizeof(jobs_frame) == JOBS_CACHE_LINE, "a frame is one cache line");

/* ts packs the thieves' tail (low half: index of the oldest public frame) and the split point
 * (high half: one past the newest public frame) so that one CAS checks and moves both. */
#define JOBS_TS(tail, split) (((uint64_t)(split) << 32) | (uint32_t)(tail))
#define JOBS_TS_TAIL(v) ((uint32_t)(v))
#define JOBS_TS_SPLIT(v) ((uint32_t)((v) >> 32))

struct jobs_sched;

struct jobs_worker {
	/* --- line 0: written by thieves (CAS on ts) and by the owner when it moves the split --- */
	_Alignas(JOBS_CACHE_LINE) _Atomic uint64_t ts; /* tail | split << 32; see JOBS_TS */
	_Atomic uint32_t allstolen; /* hint for thieves: 1 = every public frame was taken, skip me */

	/* --- line 1: thieves raise it to ask the owner to publish more frames --- */
	_Alignas(JOBS_CACHE_LINE) _Atomic uint32_t movesplit;

	/* --- line 2: written by the notifier that wakes this worker (and by destroy) --- */
	_Alignas(JOBS_CACHE_LINE) _Atomic uint32_t park; /* futex word: bumped by each wake aimed here */

	/* --- line 3+: owner-private (plain fields; only the owning thread touches them) --- */
	_Alignas(JOBS_CACHE_LINE) jobs_frame *top; /* next free frame */
	jobs_frame *task_split;    /* typed fast-path bound, max(split, task_floor); see jobs_set_split_owner */
	jobs_frame *end;           /* dq + capacity: spawning here overflows */
	jobs_frame *split;         /* owner's copy of the split point; `end` while allstolen_o */
	jobs_frame *dq;            /* the frame array (capacity frames + a guard) */
	jobs_frame *task_floor;    /* one past the highest frame pushed behind typed tasks' back (dq: none) */
	jobs_frame *task_lo;       /* the lowest such frame since the last reset (end + 1: none) */
	bool allstolen_o;          /* owner's copy of allstolen */
	bool searching;            /* counted as searching in sched->idle */
	unsigned depth;            /* nesting of help loops (wait/leapfrog), bounded by JOBS_MAX_HELP_DEPTH */
	uint32_t capacity;         /* frames in dq */
	int index;                 /* 0..workers-1; the helper context of a 0-worker pool is index 0 */
	struct jobs_sched *sched;  /* the pool this worker belongs to */
	int *victims;              /* steal order: other workers, nearest first (hwloc) */
	int n_victims;             /* entries in victims */
	int pu;                    /* the processing unit hwloc placed us on (-1: none) */

	/* --- statistics, written by the owner, read by jobs_sched_stats (relaxed) --- */
	_Alignas(JOBS_CACHE_LINE) _Atomic uint64_t n_run;    /* job bodies run */
	_Atomic uint64_t n_steals;  /* frames stolen by this worker */
	_Atomic uint64_t n_sleeps;  /* times this worker slept */
	_Atomic uint64_t n_wakeups; /* sleeps ended by a wake-up aimed at this worker (park changed) */
	_Atomic uint64_t n_empty_wakeups; /* wake-ups after which this worker found nothing to run */
};
_Static_assert(offsetof(struct jobs_worker, movesplit) == JOBS_CACHE_LINE, "movesplit: line 1");
_Static_assert(offsetof(struct jobs_worker, park) == 2 * JOBS_CACHE_LINE, "park: line 2, alone");
_Static_assert(offsetof(struct jobs_worker, top) == 3 * JOBS_CACHE_LINE, "private half: line 3");
_Static_assert(offsetof(struct jobs_worker, n_run) % JOBS_CACHE_LINE == 0, "statistics: own line");

/* Every write of the owner's split goes through here: the typed fast paths (jobs_task.h) test
 * task_split, which is split raised to task_floor. Owner only, plain fields. */
static inline void jobs_set_split_owner(jobs_worker *w, jobs_frame *split)
{
	w->split = split;
	w->task_split = split > w->task_floor ? split : w->task_floor;
}

/* A frame pushed at f by code other than the typed fast path that may still be on the deque when
 * control returns to a typed task (jobs_schedule_ready's detached jobs): typed tasks hold `top` in
 * a register, and a copy taken before this push is at or below f, so raising task_split above f
 * sends every such copy to the slow path, which re-reads w->top (docs/jobs.md, "Typed tasks"). */
static inline void jobs_task_mark_owner(jobs_worker *w, jobs_frame *f)
{
	if (f < w->task_lo)
		w->task_lo = f;
	if (f + 1 > w->task_floor)
		w->task_floor = f + 1;
	if (w->task_floor > w->task_split)
		w->task_split = w->task_floor;
}

/* Drops the marks once every marked frame is gone (top at or below the lowest): from then on no
 * typed task's copy of top is stale. Called on the typed slow paths. */
static inline void jobs_task_unmark_owner(jobs_worker *w)
{
	if (w->top <= w->task_lo) {
		w->task_lo = w->end + 1;
		w->task_floor = w->dq;
		w->task_split = w->split;
	}
}

/* Slow paths of the fork-join fast paths (deque.c). */
void jobs_spawn_slow_owner(jobs_worker *w);
/* Joins the top frame: returns true if it was a fork-join frame (results copied to out), false if
 * it was a detached job (which ran). */
bool jobs_pop_one_slow_owner(jobs_worker *w, void *out, size_t size);
_Noreturn void jobs_deque_overflow(jobs_worker *w);

/* The frame function of a detached job (a ready receipt pushed onto a deque); payload = slot. */
void jobs_detached_frame(jobs_worker *w, void *payload);

#endif /* OVSTAGE_JOBS_WORKER_H */
