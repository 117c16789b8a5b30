/* sequencer.c — mutation admission and in-flight tracking (see sequencer.h). */
#include "sequencer.h"

#include <stdlib.h>

#include "errors.h"
#include "names.h"

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
		ovs_column *c = ovs_column_find(&st->store, f->cols[i]);
		if (c && atomic_load_explicit(&c->max_applied, memory_order_relaxed) < f->ordinal)
			return true;
	}
	return false;
}

/* The record whose op this thread is submitting under seq_lock: when that submission fails, the
 * op's cleanup runs inside it and calls ovs_inflight_done with seq_lock already held by this
 * thread. Thread-local, so no other thread ever sees it. */
static _Thread_local const ovs_inflight *tls_submitting;

void ovs_inflight_done(ovs_stage *st, ovs_inflight *f)
{
	if (f == tls_submitting) {
		/* A failed submission (ovs_sequencer_submit_mutation frees f): never linked, it raised no
		 * max_written, so there is nothing to recompute — and locking would deadlock
		 * (check_alloc_fail finding). relaxed: f is private to this thread. */
		atomic_store_explicit(&f->done, true, memory_order_relaxed);
		return;
	}
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
		ovs_column *c = ovs_column_find(&st->store, f->cols[i]);
		if (c)
			/* relaxed: max_written is stored under seq_lock only; readers take it as a hint
			 * ordered by their own floor load (read.c). */
			atomic_store_explicit(&c->max_written, written_through_locked(st, c), memory_order_relaxed);
	}
	pthread_mutex_unlock(&st->seq_lock);
}

void ovs_inflight_done_applied(ovs_stage *st, ovs_inflight *f, bool all_applied)
{
	if (!all_applied || f == tls_submitting) {
		ovs_inflight_done(st, f);
		return;
	}
	/* left_unapplied(st, f) is false: every column's max_applied is at f's ordinal or above.
	 * release: pruning (under the lock) frees the record after seeing it done. */
	atomic_store_explicit(&f->done, true, memory_order_release);
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

/* Refuses a mutation at submission: frees its record and column list, runs its cleanup. */
static ovstage_enqueue_result_t reject(ovs_inflight *f, ovx_token_t *cols, const ovs_op_desc *op,
				       ovs_inflight **out_inflight, ovstage_api_status_t s)
{
	*out_inflight = NULL;
	free(cols);
	free(f);
	if (op->cleanup)
		op->cleanup(op->arg, false);
	return ovs_rejected(s);
}

/* The column of cols[i] as ovs_column_find answers it: the op's own slot when that holds a
 * published column (its identity never changes once published: no lookup, two of them per column of
 * every write before), else a lookup (a prepared column may have been published meanwhile by another
 * call under its name). slots: NULL, or parallel to cols (ovs_sequencer_submit_mutation). */
static ovs_column *column_of(ovs_stage *st, const ovx_token_t *cols, ovs_column **const *slots, size_t i)
{
	ovs_column *c = slots ? *slots[i] : NULL; /* prepared: owned by this call, constant once published */
	return c && !c->prepared ? c : ovs_column_find(&st->store, cols[i]);
}

/* The requested floor a mutation at `ordinal` on cols (NULL = every column) is not above: true,
 * with the floor and the column's name (NULL for the stage's ALL floor). A column not created yet
 * is checked against new_floor, the floor it is created with (ovs_column_publish). Caller holds
 * seq_lock. */
static bool at_or_below_floor_locked(ovs_stage *st, ovstage_ordinal_t ordinal, const ovx_token_t *cols,
				     ovs_column **const *slots, size_t ncols, uint64_t new_floor, uint64_t *fl,
				     const char **name)
{
	*name = NULL;
	*fl = st->all_floor_requested;
	if (!cols && ordinal <= *fl)
		return true;
	size_t nc = cols ? ncols : atomic_load_explicit(&st->store.ncols, memory_order_acquire);
	ovs_column **all = cols ? NULL : atomic_load_explicit(&st->store.cols, memory_order_acquire);
	for (size_t i = 0; i < nc; i++) {
		ovs_column *c = cols ? column_of(st, cols, slots, i) : all[i];
		/* relaxed: floor_requested is stored under seq_lock, which we hold. */
		*fl = c ? atomic_load_explicit(&c->floor_requested, memory_order_relaxed) : new_floor;
		if (ordinal <= *fl) {
			*name = ovs_attr_name(st, cols ? cols[i] : c->name);
			return true;
		}
	}
	return false;
}

/* Submits op under seq_lock (held). An op that may run inline must not run under the lock, and one
 * whose columns are published after its submission (`hold`) must not run before: it is submitted
 * held by one private fence (*held = true), which the caller resolves after unlocking (running it
 * then, if it is runnable). An op with fences of its own is held by them already. */
static ovstage_enqueue_result_t submit_held_locked(ovs_stage *st, const ovs_op_desc *op, bool hold, bool *held)
{
	ovs_op_desc d = *op;
	*held = (op->run_inline || hold) && op->fences == 0;
	if (*held)
		d.fences = 1;
	return ovs_op_submit(st, &d);
}

/* Resolves the private fence of submit_held_locked (after unlocking). */
static void release_held(ovs_stage *st, ovstage_enqueue_result_t r, bool held)
{
	if (held && r.status == OVSTAGE_OK)
		jobs_fence_resolve(st->sched, r.op_index); /* cannot fail: the job waits for this fence */
}

ovstage_enqueue_result_t ovs_sequencer_submit_mutation(ovs_stage *st, ovstage_ordinal_t ordinal, ovx_token_t *cols,
						       size_t ncols, ovs_column **const *slots, const ovs_op_desc *op,
						       ovs_inflight **out_inflight)
{
	return ovs_sequencer_submit_mutation_if(st, ordinal, cols, ncols, slots, op, out_inflight, NULL, NULL);
}

ovstage_enqueue_result_t ovs_sequencer_submit_mutation_if(ovs_stage *st, ovstage_ordinal_t ordinal, ovx_token_t *cols,
							  size_t ncols, ovs_column **const *slots,
							  const ovs_op_desc *op, ovs_inflight **out_inflight,
							  ovs_admit_fn admit, void *admit_arg)
{
	bool prepared = false; /* a column of the op is still to be published */
	for (size_t i = 0; slots && i < ncols; i++)
		prepared = prepared || (*slots[i])->prepared;
	ovs_inflight *f = calloc(1, sizeof *f);
	if (!f)
		return reject(NULL, cols, op, out_inflight,
			      ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory registering an op"));
	f->ordinal = ordinal;
	f->cols = cols;
	f->ncols = ncols;
	atomic_init(&f->done, false);
	*out_inflight = f;
	pthread_mutex_lock(&st->seq_lock);
	prune_locked(st);
	/* Admission: above every floor an accepted advance asked for. */
	uint64_t fl;
	const char *name;
	/* acquire: the stage floor a seal stored (with release) after its columns' floors. Read once:
	 * the op's new columns are checked against it and published with it, even if a seal moves the
	 * stage floor meanwhile (a column created by an earlier call would not have moved either: that
	 * seal's column list was taken before) */
	uint64_t new_floor = atomic_load_explicit(&st->store.all_floor, memory_order_acquire);
	if (at_or_below_floor_locked(st, ordinal, cols, slots, ncols, new_floor, &fl, &name)) {
		pthread_mutex_unlock(&st->seq_lock);
		if (name)
			ovs_err_set(OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION,
				    "ordinal %llu is not above the write floor %llu of \"%s\"", (unsigned long long)ordinal,
				    (unsigned long long)fl, name);
		else
			ovs_err_set(OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION, "ordinal %llu is not above the write floor %llu",
				    (unsigned long long)ordinal, (unsigned long long)fl);
		return reject(f, cols, op, out_inflight, OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION);
	}
	ovstage_api_status_t as = admit ? admit(admit_arg) : OVSTAGE_OK; /* sets the last error */
	if (as != OVSTAGE_OK) {
		pthread_mutex_unlock(&st->seq_lock);
		return reject(f, cols, op, out_inflight, as);
	}
	/* The op's arg holds `f` (via *out_inflight) before it can run: we are still inside the lock,
	 * and the op only marks it done, which pruning reads under this lock. */
	bool held;
	tls_submitting = f;
	ovstage_enqueue_result_t r = submit_held_locked(st, op, prepared, &held);
	tls_submitting = NULL;
	if (r.status != OVSTAGE_OK) {
		pthread_mutex_unlock(&st->seq_lock);
		/* the op's cleanup ran inside ovs_op_submit and may have marked f done: free it here */
		free(f->cols);
		free(f);
		return r;
	}
	/* Admitted and submitted (not runnable yet: held): its new columns become visible now, under
	 * seq_lock, so that an advance admitted after this op includes them (and the max_written below
	 * finds them). Publishing cannot fail (ovs_column_prepare reserved the room). The op reads its
	 * slots after its fence is resolved, which orders these stores before. */
	for (size_t i = 0; prepared && i < ncols; i++)
		*slots[i] = ovs_column_publish(&st->store, *slots[i], new_floor);
	f->op = r.op_index;
	for (size_t i = 0; cols && i < ncols; i++) {
		/* The slots only while our private fence holds the op (published above): once runnable it
		 * may finish on a worker and free them with its state (fuzz_api found that, ASan). */
		ovs_column *c = held ? column_of(st, cols, slots, i) : ovs_column_find(&st->store, cols[i]);
		if (c) {
			/* relaxed: stored under seq_lock only (here and in ovs_inflight_done). */
			uint64_t m = atomic_load_explicit(&c->max_written, memory_order_relaxed);
			if (ordinal > m)
				atomic_store_explicit(&c->max_written, ordinal, memory_order_relaxed);
		}
	}
	f->next = st->inflight;
	st->inflight = f;
	pthread_mutex_unlock(&st->seq_lock);
	release_held(st, r, held);
	return r;
}

/* Appends id to a growable dependency list; false when out of memory. */
static bool deps_push(jobs_id **deps, size_t *n, size_t *cap, jobs_id id)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		jobs_id *nd = realloc(*deps, nc * sizeof *nd);
		if (!nd)
			return false;
		*deps = nd;
		*cap = nc;
	}
	(*deps)[(*n)++] = id;
	return true;
}

static bool touches_any(const ovs_inflight *f, ovs_column *const *cols, size_t ncols)
{
	if (!f->cols)
		return true; /* a whole-prim mutation touches every column */
	for (size_t j = 0; j < ncols; j++)
		if (touches(f, cols[j]->name))
			return true;
	return false;
}

/* The advance's dependencies: the previous advance, and every mutation in flight at an ordinal
 * <= n touching one of cols. Caller holds seq_lock. *deps is malloc'd (NULL if none). */
static bool collect_deps_locked(ovs_stage *st, ovstage_ordinal_t n, ovs_column *const *cols, size_t ncols,
				jobs_id **deps, size_t *ndeps)
{
	size_t cap = 0;
	*deps = NULL;
	*ndeps = 0;
	for (ovs_inflight *f = st->inflight; f; f = f->next) {
		/* acquire: pairs with ovs_inflight_done's release (a done op needs no edge). */
		if (atomic_load_explicit(&f->done, memory_order_acquire) || f->ordinal > n || !touches_any(f, cols, ncols))
			continue;
		if (!deps_push(deps, ndeps, &cap, f->op))
			return false;
	}
	return !st->last_seal || deps_push(deps, ndeps, &cap, st->last_seal);
}

ovstage_enqueue_result_t ovs_sequencer_submit_advance(ovs_stage *st, ovstage_ordinal_t n, ovs_column *const *cols,
						      size_t ncols, bool all, const ovs_op_desc *op)
{
	pthread_mutex_lock(&st->seq_lock);
	for (size_t i = 0; i < ncols; i++)
		/* relaxed: read under seq_lock by admission, and by the seal job which runs after us. */
		if (n > atomic_load_explicit(&cols[i]->floor_requested, memory_order_relaxed))
			atomic_store_explicit(&cols[i]->floor_requested, n, memory_order_relaxed);
	if (all && n > st->all_floor_requested)
		st->all_floor_requested = n;
	jobs_id *deps;
	size_t ndeps;
	if (!collect_deps_locked(st, n, cols, ncols, &deps, &ndeps)) {
		pthread_mutex_unlock(&st->seq_lock);
		free(deps);
		if (op->cleanup)
			op->cleanup(op->arg, false);
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory"));
	}
	ovs_op_desc d = *op;
	d.after = deps;
	d.after_count = ndeps;
	bool held;
	ovstage_enqueue_result_t r = submit_held_locked(st, &d, false, &held);
	if (r.status == OVSTAGE_OK)
		st->last_seal = r.op_index;
	pthread_mutex_unlock(&st->seq_lock);
	free(deps);
	release_held(st, r, held);
	return r;
}
