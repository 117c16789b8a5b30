/* sequencer.c — mutation admission and in-flight tracking (see sequencer.h). */
#include "sequencer.h"

#include <stdlib.h>

#include "errors.h"
#include "query.h"

void ovs_sequencer_applied(ovs_column *c, ovstage_ordinal_t ordinal)
{
	/* relaxed: ordered before the op's done flag (release), which ovs_inflight_done's recompute
	 * acquires before it reads this; a CAS loop, as several ops may complete at once. */
	uint64_t m = atomic_load_explicit(&c->max_applied, memory_order_relaxed);
	while (ordinal > m && !atomic_compare_exchange_weak_explicit(&c->max_applied, &m, ordinal,
								     memory_order_relaxed, memory_order_relaxed))
		;
}

static bool touches(const ovs_inflight *f, ovx_token_t col)
{
	for (size_t i = 0; i < f->ncols; i++)
		if (f->cols[i] == col)
			return true;
	return false;
}

/* The highest ordinal column c is written at: what completed, or what is admitted and in flight.
 * Caller holds seq_lock (admissions, which raise max_written, are excluded meanwhile). */
static uint64_t written_through_locked(ovs_stage *st, ovs_column *c)
{
	uint64_t m = 0;
	for (const ovs_inflight *g = st->inflight; g; g = g->next)
		/* acquire: a done op's ovs_sequencer_applied is visible below. Whole-prim mutations
		 * (cols NULL) never raise max_written. */
		if (!atomic_load_explicit(&g->done, memory_order_acquire) && g->cols && g->ordinal > m &&
		    touches(g, c->name))
			m = g->ordinal;
	uint64_t a = atomic_load_explicit(&c->max_applied, memory_order_relaxed);
	return a > m ? a : m;
}

/* Whether f left a column it touches unwritten at its ordinal (its op failed or was cancelled). */
static bool left_unapplied(ovs_stage *st, const ovs_inflight *f)
{
	for (size_t i = 0; f->cols && i < f->ncols; i++) {
		ovs_column *c = ovs_column_find(st, f->cols[i]);
		if (c && atomic_load_explicit(&c->max_applied, memory_order_relaxed) < f->ordinal)
			return true;
	}
	return false;
}

void ovs_inflight_done(ovs_stage *st, ovs_inflight *f)
{
	if (!left_unapplied(st, f)) {
		/* release: pruning (under the lock) frees the record after seeing it done. */
		atomic_store_explicit(&f->done, true, memory_order_release);
		return;
	}
	/* Under the lock, f done first: a concurrent recompute (another failed op) then no longer
	 * counts f, and no admission interleaves. f may be pruned as soon as we unlock. */
	pthread_mutex_lock(&st->seq_lock);
	atomic_store_explicit(&f->done, true, memory_order_release);
	for (size_t i = 0; i < f->ncols; i++) {
		ovs_column *c = ovs_column_find(st, f->cols[i]);
		if (c)
			/* relaxed: max_written is stored under seq_lock only; readers take it as a hint
			 * ordered by their own floor load (read.c). */
			atomic_store_explicit(&c->max_written, written_through_locked(st, c), memory_order_relaxed);
	}
	pthread_mutex_unlock(&st->seq_lock);
}

/* Frees records of finished mutations. Caller holds seq_lock. */
static void prune_locked(ovs_stage *st)
{
	ovs_inflight **pp = &st->inflight;
	while (*pp) {
		ovs_inflight *f = *pp;
		if (atomic_load_explicit(&f->done, memory_order_acquire)) {
			*pp = f->next;
			free(f->cols);
			free(f);
		} else {
			pp = &f->next;
		}
	}
}

ovstage_enqueue_result_t ovs_sequencer_submit_mutation(ovs_stage *st, ovstage_ordinal_t ordinal, ovx_token_t *cols,
						       size_t ncols, const ovs_op_desc *op, ovs_inflight **out_inflight)
{
	ovs_inflight *f = calloc(1, sizeof *f);
	if (!f) {
		free(cols);
		if (op->cleanup)
			op->cleanup(op->arg, false);
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory registering an op"));
	}
	f->ordinal = ordinal;
	f->cols = cols;
	f->ncols = ncols;
	atomic_init(&f->done, false);
	*out_inflight = f;
	pthread_mutex_lock(&st->seq_lock);
	prune_locked(st);
	/* Admission: above every floor an accepted advance asked for. */
	if (ordinal <= st->all_floor_requested && !cols) {
		uint64_t fl = st->all_floor_requested;
		pthread_mutex_unlock(&st->seq_lock);
		*out_inflight = NULL;
		free(cols);
		free(f);
		if (op->cleanup)
			op->cleanup(op->arg, false);
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION,
						"ordinal %llu is not above the write floor %llu",
						(unsigned long long)ordinal, (unsigned long long)fl));
	}
	size_t n = cols ? ncols : 0;
	for (size_t i = 0; i < n; i++) {
		ovs_column *c = ovs_column_find(st, cols[i]);
		uint64_t fl = c ? atomic_load_explicit(&c->floor_requested, memory_order_relaxed) : st->all_floor_requested;
		if (ordinal <= fl) {
			pthread_mutex_unlock(&st->seq_lock);
			*out_inflight = NULL;
			const char *name = ovs_attr_name(st, cols[i]);
			ovs_err_set(OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION,
				    "ordinal %llu is not above the write floor %llu of \"%s\"",
				    (unsigned long long)ordinal, (unsigned long long)fl, name);
			free(cols);
			free(f);
			if (op->cleanup)
				op->cleanup(op->arg, false);
			return ovs_rejected(OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION);
		}
	}
	if (!cols) {
		/* A whole-prim mutation: above every column's requested floor too. */
		size_t nc = atomic_load_explicit(&st->ncols, memory_order_acquire);
		ovs_column **all = atomic_load_explicit(&st->cols, memory_order_acquire);
		for (size_t i = 0; i < nc; i++) {
			uint64_t fl = atomic_load_explicit(&all[i]->floor_requested, memory_order_relaxed);
			if (ordinal <= fl) {
				pthread_mutex_unlock(&st->seq_lock);
				*out_inflight = NULL;
				ovs_err_set(OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION,
					    "ordinal %llu is not above the write floor %llu of \"%s\"",
					    (unsigned long long)ordinal, (unsigned long long)fl,
					    ovs_attr_name(st, all[i]->name));
				free(f);
				if (op->cleanup)
					op->cleanup(op->arg, false);
				return ovs_rejected(OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION);
			}
		}
	}
	/* The op's arg holds `f` (via *out_inflight) before it can run: we are still inside the lock,
	 * and the op only marks it done, which pruning reads under this lock.
	 * An op that may run inline must not run here, under the lock: it is submitted held by one
	 * fence of ours, which we resolve after unlocking (running it then, if it is runnable). */
	ovs_op_desc held = *op;
	bool hold = op->run_inline && op->fences == 0;
	if (hold)
		held.fences = 1;
	ovstage_enqueue_result_t r = ovs_op_submit(st, &held);
	if (r.status != OVSTAGE_OK) {
		pthread_mutex_unlock(&st->seq_lock);
		/* the op's cleanup ran inside ovs_op_submit and may have marked f done: free it here */
		free(f->cols);
		free(f);
		return r;
	}
	f->op = r.op_index;
	for (size_t i = 0; i < n; i++) {
		ovs_column *c = ovs_column_find(st, cols[i]);
		if (c) {
			uint64_t m = atomic_load_explicit(&c->max_written, memory_order_relaxed);
			if (ordinal > m)
				atomic_store_explicit(&c->max_written, ordinal, memory_order_relaxed);
		}
	}
	f->next = st->inflight;
	st->inflight = f;
	pthread_mutex_unlock(&st->seq_lock);
	if (hold)
		jobs_fence_resolve(st->sched, r.op_index); /* cannot fail: the job waits for this fence */
	return r;
}
