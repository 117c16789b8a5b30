/* exec.c — the parallel for over fork-join frames (see exec.h). */
#include "exec.h"

#include "jobs_forkjoin.h"

/* One range of a parallel for (fork-join frame payload). */
typedef struct pfor_args {
	ovs_range_fn fn; /* the body */
	void *ctx;       /* its argument (outlives the frames: the caller joins before returning) */
	size_t lo, hi;   /* this frame's range */
	size_t grain;    /* split stops at this length */
	size_t align;    /* split points are multiples of this */
} pfor_args;
JOBS_PAYLOAD_FITS(pfor_args);

static void pfor_frame(jobs_worker *w, void *p)
{
	pfor_args *a = p;
	while (a->hi - a->lo > a->grain) {
		size_t mid = (a->lo + (a->hi - a->lo) / 2 + a->align - 1) & ~(a->align - 1);
		if (mid <= a->lo || mid >= a->hi)
			break; /* alignment leaves nothing to split */
		pfor_args *child = jobs_spawn_args(w);
		*child = *a;
		child->lo = mid;
		jobs_spawn(w, pfor_frame);
		a->hi = mid;
		pfor_frame(w, a);
		pfor_args done;
		jobs_sync(w, &done, sizeof done); /* runs the other half here unless it was stolen */
		return;
	}
	a->fn(a->ctx, a->lo, a->hi);
}

void ovs_parallel_for(const ovs_exec *x, size_t n, size_t grain, size_t align, ovs_range_fn fn, void *ctx)
{
	if (!n)
		return;
	if (!x || !x->w || n <= grain) {
		fn(ctx, 0, n);
		return;
	}
	pfor_args a = { fn, ctx, 0, n, grain ? grain : 1, align ? align : 1 };
	pfor_frame(x->w, &a);
}
