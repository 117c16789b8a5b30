/*
 * jobs_forkjoin.h — fork-join on the calling worker's split deque (Lace-style).
 *
 *   struct fib { int n; long r; };
 *   static void fib_frame(jobs_worker *w, void *p) {
 *       struct fib *a = p;
 *       if (a->n < 2) { a->r = a->n; return; }
 *       struct fib *child = jobs_spawn_args(w);   // reserve the next frame, fill its arguments
 *       *child = (struct fib){ a->n - 1, 0 };      // whole struct: see "Cost" below
 *       jobs_spawn(w, fib_frame);                  // publish it (stealable from now on)
 *       struct fib mine = { a->n - 2, 0 };
 *       fib_frame(w, &mine);
 *       struct fib done;
 *       jobs_sync(w, &done, sizeof done);          // run it here, or wait for its thief
 *       a->r = done.r + mine.r;
 *   }
 *
 * Contract (owner-only; the `_owner` functions below may only be called by the thread that runs
 * worker `w`, i.e. inside a job or frame that received `w`):
 *  - Frames are joined in LIFO order: every jobs_spawn is matched by one jobs_sync, innermost first.
 *    jobs_sync runs or waits for the frame and leaves its argument struct, results filled in, in `out`.
 *  - A payload holds at most JOBS_FRAME_PAYLOAD bytes, 16-byte aligned (JOBS_PAYLOAD_FITS checks).
 *  - A frame run by its owner runs on the caller's `out` buffer (the frame's deque slot is reused by
 *    the frames it spawns); a frame run by a thief runs in place in the slot, which the owner does
 *    not reuse until the thief is done. Either way the frame function sees a pointer to its
 *    arguments and writes its results there.
 *  - Progress: spawn and sync are wait-free while the frame is private (not published to thieves);
 *    a sync of a stolen frame helps (steals back from the thief) until the thief finishes it.
 *  - The deque holds `deque_capacity` frames; exceeding it is a programming error (fork-join depth
 *    times fan-out) and aborts with a message naming the capacity.
 *
 * Cost on the fast path: spawn = two stores + one relaxed load of `movesplit`;
 * sync = one relaxed load, a copy of the argument struct, an indirect call. No fences, no
 * read-modify-writes. Write the whole argument struct at once (a compound literal): a narrower
 * store followed by sync's wider copy stalls store-to-load forwarding (measured ~25% on fib).
 */
#ifndef OVSTAGE_JOBS_FORKJOIN_H
#define OVSTAGE_JOBS_FORKJOIN_H

#include <string.h>

#include "worker.h"

/* Reserves the next frame and returns its payload area for the caller to fill. */
static inline void *jobs_spawn_args(jobs_worker *w)
{
	return w->top->payload;
}

/* Publishes the reserved frame: from now on a thief may run fn(thief, payload). */
static inline void jobs_spawn(jobs_worker *w, jobs_frame_fn fn)
{
	jobs_frame *f = w->top;
	f->fn = fn; /* the frame's `thief` word is reset when (if ever) the frame is published */
	w->top = f + 1;
	/* relaxed: `movesplit` is a hint from thieves; seeing it late only delays publication. */
	if (JOBS_UNLIKELY(w->allstolen_o | atomic_load_explicit(&w->movesplit, memory_order_relaxed) |
			  (w->top > w->end)))
		jobs_spawn_slow_owner(w);
}

/* Compile-time check that an argument struct fits in a frame. */
#define JOBS_PAYLOAD_FITS(type) _Static_assert(sizeof(type) <= JOBS_FRAME_PAYLOAD, #type " fits a frame")

/* Joins the most recent frame. `out` must hold the frame's argument struct (`size` bytes, at most
 * JOBS_FRAME_PAYLOAD): a frame run here runs on `out` (the arguments are copied there first), a
 * stolen frame's results are copied there when its thief is done. */
static inline void jobs_sync(jobs_worker *w, void *out, size_t size)
{
	for (;;) {
		jobs_frame *f = w->top - 1;
		/* Private frame (at or above the split point) and no thief asking for more: no thief can
		 * ever have seen it, so we pop and run it with plain accesses. */
		if (JOBS_LIKELY(f >= w->split &&
				!atomic_load_explicit(&w->movesplit, memory_order_relaxed))) {
			jobs_frame_fn fn = f->fn;
			w->top = f;
			if (JOBS_LIKELY(fn != jobs_detached_frame)) {
				memcpy(out, f->payload, size);
				fn(w, out);
				return;
			}
			fn(w, f->payload); /* a detached job sat above our frame; it copies its slot out first */
			continue;
		}
		if (jobs_pop_one_slow_owner(w, out, size))
			return;
	}
}

#endif /* OVSTAGE_JOBS_FORKJOIN_H */
