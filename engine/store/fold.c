/* fold.c — the fold of change sets that left retention: by range reads and the fold job (fold.h). */
#include "fold.h"

#include "grace.h"
#include "lastchange.h"

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

/* The fold job: every column of the store with unfolded sets. */
static void lc_job(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)w;
	(void)run;
	ovs_store *st = arg;
	/* acquire (both): the column array and its entries, published by column creation */
	size_t n = atomic_load_explicit(&st->ncols, memory_order_acquire);
	ovs_column **cols = atomic_load_explicit(&st->cols, memory_order_acquire);
	for (size_t i = 0; i < n; i++)
		ovs_lc_fold_column(st, cols[i]);
	/* release: the next submission (the sealer's acquire exchange) comes after this job's work */
	atomic_store_explicit(&st->lc_job_busy, false, memory_order_release);
}

void ovs_lc_job_kick(ovs_store *st)
{
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
