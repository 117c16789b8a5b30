/*
 * deque.c — the split deque's slow paths: publishing frames, taking them back, stealing, and
 * leapfrogging while a stolen frame is being finished. The memory-ordering argument, operation by
 * operation, is in docs/jobs.md ("The split deque").
 *
 * Layout of one worker's frames:   dq ... [tail, split) public ... [split, top) private ... end
 * Thieves only ever take the frame at `tail`, by CAS on the packed (tail, split) word `ts`. The owner
 * moves `split` (also by CAS on ts, or by a plain store while nothing is public) and pops private
 * frames with no synchronisation at all.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deque.h"
#include "scheduler.h"

void jobs_backoff(unsigned *spins)
{
	if (++*spins < 64)
		jobs_cpu_relax();
	else
		sched_yield(); /* 2 cores, more threads: give the CPU to whoever we are waiting for */
}

_Noreturn void jobs_deque_overflow(jobs_worker *w)
{
	fprintf(stderr,
		"ovstage jobs: worker %d spawned more than deque_capacity = %u unjoined frames "
		"(fork-join depth x fan-out too large); raise jobs_config.deque_capacity\n",
		w->index, w->capacity);
	abort();
}

/* Frames about to become public get their thief word reset (the fast path does not touch it):
 * leapfrogging reads it to tell "stolen, thief not recorded yet" (TASK) from a thief or DONE.
 * relaxed: published together with the frames by the release on ts that follows. */
static void mark_published_owner(jobs_worker *w, uint32_t from, uint32_t to)
{
	for (uint32_t i = from; i < to; i++)
		atomic_store_explicit(&w->dq[i].thief, JOBS_THIEF_TASK, memory_order_relaxed);
}

/* Publish half of the private frames below `limit` (exclusive) to thieves, then clear the request.
 * Owner only. */
static void grow_shared_owner(jobs_worker *w, jobs_frame *limit)
{
	uint32_t s = (uint32_t)(w->split - w->dq);
	uint32_t l = (uint32_t)(limit - w->dq);
	/* relaxed: clearing the request before publishing is fine — a thief that asks again just
	 * makes us publish once more. */
	atomic_store_explicit(&w->movesplit, 0, memory_order_relaxed);
	if (l <= s)
		return;
	uint32_t newsplit = s + (l - s + 1) / 2;
	mark_published_owner(w, s, newsplit);
	/* relaxed load: only a starting guess for the CAS, which re-reads on failure. */
	uint64_t v = atomic_load_explicit(&w->ts, memory_order_relaxed);
	/* release: the frames below newsplit (their fn, payload and thief words, all written earlier by
	 * this thread) become visible to a thief whose acquiring CAS reads this value or any later one
	 * in the release sequence (later thieves' CASes are RMWs and continue it). */
	while (!atomic_compare_exchange_weak_explicit(&w->ts, &v, JOBS_TS(JOBS_TS_TAIL(v), newsplit),
						      memory_order_release, memory_order_relaxed))
		;
	jobs_set_split_owner(w, w->dq + newsplit);
	jobs_notify_work(w->sched);
}

void jobs_spawn_slow_owner(jobs_worker *w)
{
	/* capacity frames fit: the frame at `end` is the guard that jobs_spawn_args may hand out */
	if (JOBS_UNLIKELY(w->top > w->end))
		jobs_deque_overflow(w);
	if (w->allstolen_o) {
		/* Nothing is public and tail == split, so no thief can succeed a CAS on ts right now
		 * (they need tail < split): a plain store cannot lose a concurrent update. Publish just the
		 * new frame; thieves ask for more through movesplit. */
		uint32_t i = (uint32_t)(w->top - 1 - w->dq);
		mark_published_owner(w, i, i + 1);
		atomic_store_explicit(&w->movesplit, 0, memory_order_relaxed);
		/* release: the new frame's contents happen-before a thief's acquiring CAS on ts. */
		atomic_store_explicit(&w->ts, JOBS_TS(i, i + 1), memory_order_release);
		/* relaxed: a hint; a thief that still sees 1 merely skips us once. */
		atomic_store_explicit(&w->allstolen, 0, memory_order_relaxed);
		w->allstolen_o = false;
		jobs_set_split_owner(w, w->top);
		jobs_notify_work(w->sched);
	} else if (atomic_load_explicit(&w->movesplit, memory_order_relaxed)) {
		grow_shared_owner(w, w->top);
	}
}

/* The top frame f = top-1 lies in the public part (f < split, hence split == top). Take back the
 * upper half of what thieves have not taken. Sets allstolen_o if they took everything. */
static void shrink_shared_owner(jobs_worker *w)
{
	/* relaxed: a guess; the CAS below validates it. */
	uint64_t v = atomic_load_explicit(&w->ts, memory_order_relaxed);
	for (;;) {
		uint32_t tail = JOBS_TS_TAIL(v), split = JOBS_TS_SPLIT(v);
		if (tail == split)
			break; /* every public frame, ours included, was stolen */
		uint32_t newsplit = tail + (split - tail) / 2;
		/* seq_cst RMW: the owner-thief race on the last public frames is decided here — either our
		 * CAS sees the thieves' tail and moves split below the frames we take back, or a thief's
		 * CAS sees our new split and fails. Acquire is not needed for data (we only take frames we
		 * wrote), the total order on ts is what matters, and any RMW on ts gives it. */
		if (atomic_compare_exchange_weak_explicit(&w->ts, &v, JOBS_TS(tail, newsplit),
							  memory_order_seq_cst, memory_order_relaxed)) {
			jobs_set_split_owner(w, w->dq + newsplit);
			return;
		}
	}
	w->allstolen_o = true;
	jobs_set_split_owner(w, w->end);
	/* relaxed: hint for thieves (see struct). */
	atomic_store_explicit(&w->allstolen, 1, memory_order_relaxed);
}

/* Wait until the stolen frame f is finished, stealing back from its thief meanwhile (leapfrogging:
 * anything the thief spawned is part of our frame's work, and it sits deeper, so the nesting this
 * causes is bounded by the fork-join depth). */
static void leapfrog_owner(jobs_worker *w, jobs_frame *f)
{
	unsigned spins = 0;
	uintptr_t t;
	/* acquire: pairs with the thief's release store of DONE so that the results it wrote into the
	 * payload are visible after the loop. */
	while ((t = atomic_load_explicit(&f->thief, memory_order_acquire)) != JOBS_THIEF_DONE) {
		if (t != JOBS_THIEF_TASK && jobs_steal(w, (jobs_worker *)t) == JOBS_STEAL_OK) {
			spins = 0;
			continue;
		}
		jobs_backoff(&spins);
	}
}

bool jobs_pop_one_slow_owner(jobs_worker *w, void *out, size_t size)
{
	jobs_frame *f = w->top - 1;
	if (!w->allstolen_o && f < w->split)
		shrink_shared_owner(w);
	if (!w->allstolen_o && f >= w->split) {
		/* Private (perhaps after shrinking). Serve a pending request of a thief first, publishing
		 * from the frames below ours only. */
		if (atomic_load_explicit(&w->movesplit, memory_order_relaxed))
			grow_shared_owner(w, f);
		jobs_frame_fn fn = f->fn;
		w->top = f;
		if (fn == jobs_detached_frame) {
			fn(w, f->payload); /* copies the slot pointer out before running anything */
			return false;
		}
		if (out) {
			memcpy(out, f->payload, size);
			fn(w, out);
		} else {
			jobs_payload local; /* the caller discards results: run on a stack copy */
			memcpy(&local, f->payload, sizeof local);
			fn(w, &local);
		}
		return true;
	}
	/* Stolen. The thief runs it in place, in our slot, so `top` stays above f until the thief is
	 * done: whatever we run while leapfrogging spawns above it. */
	w->depth++;
	leapfrog_owner(w, f);
	w->depth--;
	w->top = f;
	/* While leapfrogging we spawned and joined frames above f; joining them left split at f+1 with
	 * nothing public (tail == split). Everything below f was stolen too (that is how we got here),
	 * so restore "all stolen": split must never stay above top. A plain store is safe: with
	 * tail == split no thief CAS can succeed. */
	if (!w->allstolen_o) {
		w->allstolen_o = true;
		jobs_set_split_owner(w, w->end);
		atomic_store_explicit(&w->allstolen, 1, memory_order_relaxed);
	}
	if (f->fn == jobs_detached_frame)
		return false;
	if (out)
		memcpy(out, f->payload, size);
	return true;
}

void jobs_sync_to_owner(jobs_worker *w, jobs_frame *base)
{
	while (w->top > base)
		(void)jobs_pop_one_slow_owner(w, NULL, 0);
}

void jobs_publish_all_owner(jobs_worker *w)
{
	if (w->allstolen_o || w->split >= w->top)
		return;
	uint32_t newsplit = (uint32_t)(w->top - w->dq);
	mark_published_owner(w, (uint32_t)(w->split - w->dq), newsplit);
	uint64_t v = atomic_load_explicit(&w->ts, memory_order_relaxed);
	/* release: as in grow_shared_owner. */
	while (!atomic_compare_exchange_weak_explicit(&w->ts, &v, JOBS_TS(JOBS_TS_TAIL(v), newsplit),
						      memory_order_release, memory_order_relaxed))
		;
	jobs_set_split_owner(w, w->top);
	jobs_notify_work(w->sched);
}

int jobs_steal(jobs_worker *self, jobs_worker *victim)
{
	/* relaxed: a hint only; acting on a stale value costs one failed attempt. */
	if (atomic_load_explicit(&victim->allstolen, memory_order_relaxed))
		return JOBS_STEAL_EMPTY;
	/* acquire: not strictly needed (the CAS below acquires), but it lets us skip the CAS when the
	 * deque is empty without reading a torn view. */
	uint64_t v = atomic_load_explicit(&victim->ts, memory_order_acquire);
	uint32_t tail = JOBS_TS_TAIL(v), split = JOBS_TS_SPLIT(v);
	if (tail >= split) {
		/* relaxed: a request, see grow_shared_owner. Test first to keep the line shared. */
		if (!atomic_load_explicit(&victim->movesplit, memory_order_relaxed))
			atomic_store_explicit(&victim->movesplit, 1, memory_order_relaxed);
		return JOBS_STEAL_EMPTY;
	}
	/* acq_rel: acquire synchronises with the owner's release that published frame `tail` (directly
	 * or through the release sequence of later CASes); seq_cst is not required because the
	 * owner-thief race is decided by the single modification order of ts. */
	if (!atomic_compare_exchange_strong_explicit(&victim->ts, &v, JOBS_TS(tail + 1, split),
						     memory_order_acq_rel, memory_order_relaxed))
		return JOBS_STEAL_BUSY;
	jobs_worker_found_work(self);
	jobs_frame *f = victim->dq + tail;
	/* relaxed: tells the owner whom to leapfrog; it only reads it to decide where to steal. */
	atomic_store_explicit(&f->thief, (uintptr_t)self, memory_order_relaxed);
	atomic_fetch_add_explicit(&self->n_steals, 1, memory_order_relaxed);
	jobs_frame *base = self->top;
	jobs_frame_fn fn = f->fn;
	if (fn == jobs_detached_frame) {
		void *slot;
		memcpy(&slot, f->payload, sizeof slot);
		/* release: our reads of the frame are done; the owner may reuse it once it sees DONE. */
		atomic_store_explicit(&f->thief, JOBS_THIEF_DONE, memory_order_release);
		jobs_detached_frame(self, &slot);
	} else {
		fn(self, f->payload);
		/* release: the results we wrote into the payload happen-before the owner's acquire. */
		atomic_store_explicit(&f->thief, JOBS_THIEF_DONE, memory_order_release);
	}
	/* The frame may have made jobs ready onto our deque: run them before returning. */
	jobs_sync_to_owner(self, base);
	return JOBS_STEAL_OK;
}
