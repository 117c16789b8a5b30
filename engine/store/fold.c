/* fold.c — the fold of change sets that left retention: by range reads and the fold job (fold.h). */
#include "fold.h"

#include "grace.h"
#include "lastchange.h"
#include "seal.h"
#include "version.h"

/* Sets one pass of a fold pins (it passes again while there are more). */
#define FOLD_PASS 64

bool ovs_lc_unfolded(ovs_column *c)
{
	/* relaxed (both): a hint; the fold itself decides from what it pins */
	return atomic_load_explicit(&c->lcfold.left, memory_order_relaxed) >
	       atomic_load_explicit(&c->lcfold.folded, memory_order_relaxed);
}

void ovs_lc_fold_column(ovs_store *st, ovs_column *c)
{
	if (!ovs_lc_unfolded(c) || !ovs_lc_fold_trylock(&c->lcfold))
		return;
	ovs_chset *sets[FOLD_PASS];
	for (bool ok = true; ok;) {
		size_t n = ovs_pin_unfolded(&st->grace, c, sets, FOLD_PASS);
		for (size_t i = n; i-- > 0 && ok;) /* oldest first */
			if ((ok = ovs_lc_fold_set(&c->lcfold, sets[i])))
				/* release: the set's entries before the ordinal that says they are there
				 * (readers' and the sealer's acquire loads of `folded`) */
				atomic_store_explicit(&c->lcfold.folded, sets[i]->ordinal, memory_order_release);
		for (size_t i = 0; i < n; i++)
			ovs_chset_unref(sets[i]);
		ok = ok && n == FOLD_PASS;
	}
	ovs_lc_fold_unlock(&c->lcfold);
}

/* Copies the rows of the pooled change sets of c's retained versions (lastchange.h). Each version
 * is pinned while its set is copied: its delta holds the rows. */
static void copy_column(ovs_store *st, ovs_column *c)
{
	ovs_version *vs[FOLD_PASS];
	size_t n = 0;
	unsigned p = ovs_grace_enter(&st->grace);
	/* acquire on `older`: as in ovs_pin_history (grace.h) */
	for (ovs_version *v = ovs_snapshot_version(ovs_grace_snapshot_acq(&st->grace), c); v && n < FOLD_PASS;
	     v = atomic_load_explicit(&v->older, memory_order_acquire))
		/* relaxed: a hint; ovs_chset_copy decides */
		if (v->cs->pooled && !atomic_load_explicit(&v->cs->copy, memory_order_relaxed)) {
			ovs_version_ref(v);
			vs[n++] = v;
		}
	ovs_grace_leave(&st->grace, p);
	for (size_t i = 0; i < n; i++) {
		(void)ovs_chset_copy(vs[i]->cs); /* out of memory: the seal that cuts it copies */
		ovs_version_unref(vs[i]);
	}
}

/* The fold job: the copies of pooled sets' rows, then, when due, the fold of every column of the
 * store with unfolded sets. */
static void lc_job(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)w;
	(void)run;
	ovs_store *st = arg;
	/* acquire (both): the column array and its entries, published by column creation */
	size_t n = atomic_load_explicit(&st->ncols, memory_order_acquire);
	ovs_column **cols = atomic_load_explicit(&st->cols, memory_order_acquire);
	for (size_t i = 0; i < n; i++)
		copy_column(st, cols[i]);
	/* relaxed: set by the sealer before it submitted this job (the submission orders it) */
	if (atomic_exchange_explicit(&st->lc_fold_due, false, memory_order_relaxed))
		for (size_t i = 0; i < n; i++)
			ovs_lc_fold_column(st, cols[i]);
	/* release: the next submission (the sealer's acquire exchange) comes after this job's work */
	atomic_store_explicit(&st->lc_job_busy, false, memory_order_release);
}

void ovs_lc_job_kick(ovs_store *st, bool fold)
{
	if (fold) /* relaxed: the submission below (or the next one) orders it before the job */
		atomic_store_explicit(&st->lc_fold_due, true, memory_order_relaxed);
	/* acquire: pairs with the previous job's release of the flag */
	if (!st->sched || atomic_exchange_explicit(&st->lc_job_busy, true, memory_order_acquire))
		return;
	if (st->lc_job)
		jobs_release(st->sched, st->lc_job); /* that job finished its work: the flag was clear */
	st->lc_job = 0;
	jobs_job_desc jd = { 0 };
	jd.fn = lc_job;
	jd.arg = st;
	if (jobs_submit(st->sched, &jd, &st->lc_job) != JOBS_OK) {
		st->lc_job = 0; /* the next seal tries again */
		atomic_store_explicit(&st->lc_job_busy, false, memory_order_relaxed); /* ours: nothing ran */
	}
}

void ovs_lc_job_fini(ovs_store *st)
{
	if (!st->lc_job)
		return;
	(void)jobs_wait(st->sched, st->lc_job, JOBS_TIMEOUT_INFINITE);
	jobs_release(st->sched, st->lc_job);
	st->lc_job = 0;
}
