/*
 * check_dag.c — random dependency graphs: every job runs exactly once and only after all of its
 * dependencies finished (their effects visible), fences resolved from another thread at random
 * times, waiting on the sinks covers everything; 0, 1, 2 and 4 workers. Also submission from inside
 * running jobs (nested, with waits on workers) and from several external threads at once.
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jobs.h"
#include "jobs_test_util.h"

#define MAX_DEPS 4

struct dag;

struct node {
	struct dag *g;
	int index;
	int ndeps;
	int deps[MAX_DEPS];
	int fences;            /* 0..2, resolved by the resolver thread */
	bool sink;             /* nobody depends on it */
	uint64_t payload;      /* written by the body, read by dependents (plain: ordering test) */
};

struct dag {
	jobs_sched *s;
	int n;
	struct node *nodes;
	_Atomic int *ran;           /* bodies run per job */
	_Atomic int *finished;      /* set (release) at the end of the body */
	_Atomic int *cleaned;       /* cleanups per job */
	_Atomic jobs_id *ids;       /* published (release) after submission, for the resolver */
	_Atomic int order_errors;   /* a job started before a dependency finished */
	_Atomic int payload_errors; /* a dependency's plain write was not visible */
	int *fence_list;            /* one entry per fence: the job index, shuffled */
	int n_fences;
	uint64_t resolver_seed;
	_Atomic int resolve_errors;
};

static uint64_t payload_of(int i)
{
	return (uint64_t)i * 0x9E3779B97F4A7C15ull + 17;
}

static void node_body(jobs_worker *w, void *arg, jobs_run *run)
{
	struct node *nd = arg;
	struct dag *g = nd->g;
	for (int k = 0; k < nd->ndeps; k++) {
		int d = nd->deps[k];
		if (!atomic_load_explicit(&g->finished[d], memory_order_acquire))
			atomic_fetch_add(&g->order_errors, 1);
		/* completion of a dependency happens-before our start: its plain write is visible */
		if (g->nodes[d].payload != payload_of(d))
			atomic_fetch_add(&g->payload_errors, 1);
	}
	atomic_fetch_add_explicit(&g->ran[nd->index], 1, memory_order_relaxed);
	nd->payload = payload_of(nd->index);
	atomic_store_explicit(&g->finished[nd->index], 1, memory_order_release);
}

static void node_cleanup(void *arg, bool ran)
{
	struct node *nd = arg;
	atomic_fetch_add_explicit(&nd->g->cleaned[nd->index], 1, memory_order_relaxed);
}

static void *resolver_main(void *arg)
{
	struct dag *g = arg;
	uint64_t rng = g->resolver_seed;
	for (int k = 0; k < g->n_fences; k++) {
		int i = g->fence_list[k];
		jobs_id id;
		uint64_t start = jt_now_ns();
		while ((id = atomic_load_explicit(&g->ids[i], memory_order_acquire)) == 0) {
			if (jt_now_ns() - start > JT_SAFETY_NS) {
				atomic_fetch_add(&g->resolve_errors, 1);
				return NULL;
			}
			sched_yield();
		}
		uint64_t r = jt_below(&rng, 100);
		if (r < 5)
			jt_sleep_us((unsigned)jt_below(&rng, 200));
		else if (r < 30)
			sched_yield();
		if (jobs_fence_resolve(g->s, id) != JOBS_OK)
			atomic_fetch_add(&g->resolve_errors, 1);
	}
	return NULL;
}

static void check_random_dag(int workers, uint64_t seed, int n)
{
	jobs_sched *s = jt_sched(workers);
	struct dag *g = calloc(1, sizeof *g);
	g->s = s;
	g->n = n;
	g->nodes = calloc((size_t)n, sizeof *g->nodes);
	g->ran = calloc((size_t)n, sizeof *g->ran);
	g->finished = calloc((size_t)n, sizeof *g->finished);
	g->cleaned = calloc((size_t)n, sizeof *g->cleaned);
	g->ids = calloc((size_t)n, sizeof *g->ids);
	g->fence_list = calloc((size_t)n * 2, sizeof *g->fence_list);
	g->resolver_seed = seed ^ 0xabcdef;
	uint64_t rng = seed;
	for (int i = 0; i < n; i++) {
		struct node *nd = &g->nodes[i];
		nd->g = g;
		nd->index = i;
		nd->sink = true;
		int want = i == 0 ? 0 : (int)jt_below(&rng, MAX_DEPS + 1);
		for (int k = 0; k < want; k++) {
			/* mostly recent jobs (long chains), sometimes anything earlier */
			int d = jt_below(&rng, 4) == 0 ? (int)jt_below(&rng, (uint64_t)i)
						       : i - 1 - (int)jt_below(&rng, (uint64_t)(i < 16 ? i : 16));
			nd->deps[nd->ndeps++] = d;
			g->nodes[d].sink = false;
		}
		uint64_t f = jt_below(&rng, 10);
		nd->fences = f == 0 ? 2 : f < 3 ? 1 : 0;
		for (int k = 0; k < nd->fences; k++)
			g->fence_list[g->n_fences++] = i;
	}
	for (int k = g->n_fences - 1; k > 0; k--) { /* shuffle: fences resolve in random order */
		int j = (int)jt_below(&rng, (uint64_t)k + 1);
		int t = g->fence_list[k];
		g->fence_list[k] = g->fence_list[j];
		g->fence_list[j] = t;
	}
	pthread_t resolver;
	ck_assert(pthread_create(&resolver, NULL, resolver_main, g) == 0);
	jobs_id last = 0;
	for (int i = 0; i < n; i++) {
		struct node *nd = &g->nodes[i];
		jobs_id after[MAX_DEPS];
		for (int k = 0; k < nd->ndeps; k++)
			after[k] = atomic_load_explicit(&g->ids[nd->deps[k]], memory_order_relaxed);
		jobs_job_desc d = {.fn = node_body, .arg = nd, .cleanup = node_cleanup, .after = after,
				   .after_count = (size_t)nd->ndeps, .fences = (uint32_t)nd->fences};
		jobs_id id = jt_submit(s, &d, last);
		atomic_store_explicit(&g->ids[i], id, memory_order_release);
		if (!nd->fences)
			last = id;
	}
	int sinks = 0;
	for (int i = 0; i < n; i++) {
		if (!g->nodes[i].sink)
			continue;
		sinks++;
		jobs_status st = jobs_wait(s, g->ids[i], JT_WAIT_NS);
		ck_assert_msg(st == JOBS_OK, "workers=%d seed=%llu: wait on sink %d: %s", workers,
			      (unsigned long long)seed, i, jt_status_name(st));
	}
	pthread_join(resolver, NULL);
	ck_assert_msg(atomic_load(&g->resolve_errors) == 0, "workers=%d seed=%llu: %d fence resolutions failed",
		      workers, (unsigned long long)seed, atomic_load(&g->resolve_errors));
	/* waiting on the sinks covered every job: all complete already */
	for (int i = 0; i < n; i++) {
		ck_assert_msg(atomic_load(&g->ran[i]) == 1, "workers=%d seed=%llu: job %d ran %d times",
			      workers, (unsigned long long)seed, i, atomic_load(&g->ran[i]));
		ck_assert_msg(atomic_load(&g->cleaned[i]) == 1,
			      "workers=%d seed=%llu: job %d cleaned up %d times", workers,
			      (unsigned long long)seed, i, atomic_load(&g->cleaned[i]));
		jobs_status st = jobs_poll(s, g->ids[i]);
		ck_assert_msg(st == JOBS_OK, "workers=%d seed=%llu: job %d polls %s after its sinks were waited",
			      workers, (unsigned long long)seed, i, jt_status_name(st));
	}
	ck_assert_msg(atomic_load(&g->order_errors) == 0,
		      "workers=%d seed=%llu: %d jobs started before a dependency finished", workers,
		      (unsigned long long)seed, atomic_load(&g->order_errors));
	ck_assert_msg(atomic_load(&g->payload_errors) == 0,
		      "workers=%d seed=%llu: %d dependency writes not visible to dependents", workers,
		      (unsigned long long)seed, atomic_load(&g->payload_errors));
	ck_assert_msg(sinks > 0, "no sinks");
	for (int i = 0; i < n; i++)
		jt_assert_status(jobs_release(s, g->ids[i]), JOBS_OK, "release");
	jobs_stats stats;
	jobs_sched_stats(s, &stats);
	ck_assert_msg(stats.receipts_live == 0, "receipts_live %llu after releasing all",
		      (unsigned long long)stats.receipts_live);
	jobs_sched_destroy(s);
	free(g->nodes);
	free((void *)g->ran);
	free((void *)g->finished);
	free((void *)g->cleaned);
	free((void *)g->ids);
	free(g->fence_list);
	free(g);
}

static const int dag_workers[] = {0, 1, 2, 4};

START_TEST(test_random_dag)
{
	int n = (int)jt_scaled(2000, 300);
	static const uint64_t seeds[] = {1, 0xdeadbeef, 424242};
	for (size_t k = 0; k < 3; k++)
		check_random_dag(dag_workers[_i], seeds[k], n);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Submission from inside running jobs: a tree of jobs, each submitting children (with dependencies
 * among siblings and a fence that a sibling resolves) and, on every other level, waiting for them
 * on its worker (which helps run other work meanwhile).
 */
struct tree_shared {
	jobs_sched *s;
	_Atomic int ran;          /* bodies run */
	_Atomic int cleaned;      /* cleanups */
	_Atomic int order_errors; /* a child started before the sibling it was submitted after */
};

struct tnode {
	struct tree_shared *t;
	int depth;
	_Atomic int done;           /* set (release) at the end of the body */
	struct tnode *must_be_done; /* the sibling this one was submitted after */
	jobs_id resolve;            /* a sibling's fence to resolve, or 0 */
	bool wait_children;         /* wait inside the body, or leave the children running */
	struct tnode *kids;         /* TREE_FANOUT children, or NULL */
	jobs_id kid_ids[4];         /* their receipts */
};

enum { TREE_FANOUT = 4, TREE_DEPTH = 4 };

static void tnode_cleanup(void *arg, bool ran)
{
	struct tnode *nd = arg;
	atomic_fetch_add(&nd->t->cleaned, 1);
}

static void tnode_body(jobs_worker *w, void *arg, jobs_run *run)
{
	struct tnode *nd = arg;
	struct tree_shared *t = nd->t;
	jt_check(w != NULL && jobs_current_worker(t->s) == w, "job body without its worker context");
	if (nd->must_be_done && !atomic_load_explicit(&nd->must_be_done->done, memory_order_acquire))
		atomic_fetch_add(&t->order_errors, 1);
	if (nd->resolve) {
		jobs_status st = jobs_fence_resolve(t->s, nd->resolve);
		jt_check(st == JOBS_OK, "job-side fence resolve: %s", jt_status_name(st));
	}
	if (nd->depth < TREE_DEPTH) {
		struct tnode *ch = calloc(TREE_FANOUT, sizeof *ch);
		nd->kids = ch;
		for (int i = 0; i < TREE_FANOUT; i++) {
			ch[i].t = t;
			ch[i].depth = nd->depth + 1;
			ch[i].wait_children = ((nd->depth + i) % 2) == 0;
		}
		/* child 0: held by a fence that child 2 resolves; child 1 after child 0; child 2 free;
		 * child 3 after children 1 and 2 */
		jobs_id *ids = nd->kid_ids;
		jobs_job_desc d0 = {.fn = tnode_body, .arg = &ch[0], .cleanup = tnode_cleanup, .fences = 1};
		jobs_status st = jobs_submit(t->s, &d0, &ids[0]);
		jt_check(st == JOBS_OK, "worker-side submit: %s", jt_status_name(st));
		ch[1].must_be_done = &ch[0];
		jobs_job_desc d1 = {.fn = tnode_body, .arg = &ch[1], .cleanup = tnode_cleanup,
				    .after = &ids[0], .after_count = 1};
		st = jobs_submit(t->s, &d1, &ids[1]);
		jt_check(st == JOBS_OK, "worker-side submit after: %s", jt_status_name(st));
		ch[2].resolve = ids[0];
		jobs_job_desc d2 = {.fn = tnode_body, .arg = &ch[2], .cleanup = tnode_cleanup};
		st = jobs_submit(t->s, &d2, &ids[2]);
		jt_check(st == JOBS_OK, "worker-side submit: %s", jt_status_name(st));
		ch[3].must_be_done = &ch[1];
		jobs_id two[2] = {ids[1], ids[2]};
		jobs_job_desc d3 = {.fn = tnode_body, .arg = &ch[3], .cleanup = tnode_cleanup,
				    .after = two, .after_count = 2};
		st = jobs_submit(t->s, &d3, &ids[3]);
		jt_check(st == JOBS_OK, "worker-side submit after 2: %s", jt_status_name(st));
		if (nd->wait_children) {
			/* waiting on child 3 covers children 0..2 */
			st = jobs_wait(t->s, ids[3], JOBS_TIMEOUT_INFINITE);
			jt_check(st == JOBS_OK, "worker-side wait: %s", jt_status_name(st));
			for (int i = 0; i < TREE_FANOUT; i++) {
				st = jobs_poll(t->s, ids[i]);
				jt_check(st == JOBS_OK, "child %d after waiting on child 3: %s", i,
					 jt_status_name(st));
			}
		}
	}
	atomic_fetch_add(&t->ran, 1);
	atomic_store_explicit(&nd->done, 1, memory_order_release);
}

START_TEST(test_worker_side_submission)
{
	int workers = dag_workers[_i];
	jobs_sched *s = jt_sched(workers);
	int expected = 0;
	for (int dd = 0, m = 1; dd <= TREE_DEPTH; dd++, m *= TREE_FANOUT)
		expected += m;
	int rounds = (int)jt_scaled(20, 3);
	for (int r = 0; r < rounds; r++) {
		struct tree_shared t = {.s = s};
		struct tnode *root = calloc(1, sizeof *root);
		root->t = &t;
		root->wait_children = r % 2 == 0;
		jobs_job_desc d = {.fn = tnode_body, .arg = root, .cleanup = tnode_cleanup};
		jobs_id id;
		jt_assert_status(jobs_submit(s, &d, &id), JOBS_OK, "submit root");
		jt_assert_status(jobs_wait(s, id, JT_WAIT_NS), JOBS_OK, "wait root");
		jt_assert_status(jobs_release(s, id), JOBS_OK, "release root");
		/* breadth-first: a node's completion publishes its children's receipts */
		struct tnode **queue = calloc((size_t)expected, sizeof *queue);
		int head = 0, tail = 0;
		queue[tail++] = root;
		while (head < tail) {
			struct tnode *nd = queue[head++];
			if (!nd->kids)
				continue;
			for (int i = 0; i < TREE_FANOUT; i++) {
				jobs_status st = jobs_wait(s, nd->kid_ids[i], JT_WAIT_NS);
				ck_assert_msg(st == JOBS_OK, "workers=%d round %d: child receipt %s", workers, r,
					      jt_status_name(st));
				jt_assert_status(jobs_release(s, nd->kid_ids[i]), JOBS_OK, "release child");
				ck_assert_msg(tail < expected, "more nodes than expected");
				queue[tail++] = &nd->kids[i];
			}
		}
		jt_assert_no_thread_failures();
		ck_assert_msg(tail == expected, "workers=%d round %d: %d nodes, expected %d", workers, r,
			      tail, expected);
		ck_assert_msg(atomic_load(&t.ran) == expected, "workers=%d round %d: %d bodies ran, expected %d",
			      workers, r, atomic_load(&t.ran), expected);
		ck_assert_msg(atomic_load(&t.cleaned) == expected, "workers=%d round %d: %d cleanups, expected %d",
			      workers, r, atomic_load(&t.cleaned), expected);
		ck_assert_msg(atomic_load(&t.order_errors) == 0,
			      "workers=%d round %d: %d jobs ran before their dependency", workers, r,
			      atomic_load(&t.order_errors));
		for (int i = tail - 1; i >= 0; i--)
			if (queue[i]->kids)
				free(queue[i]->kids);
		free(root);
		free(queue);
	}
	jobs_sched_destroy(s);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Several external threads submitting at once, with dependencies on their own and on each other's
 * jobs.
 */
enum { SUBMITTERS = 4 };

struct ext {
	jobs_sched *s;
	int per_thread;
	struct node *nodes;         /* SUBMITTERS * per_thread, node.g unused except counters */
	struct dag *g;              /* counters, ids */
};

struct ext_thread {
	struct ext *e;
	int t;
};

static void *ext_main(void *arg)
{
	struct ext_thread *et = arg;
	struct ext *e = et->e;
	struct dag *g = e->g;
	uint64_t rng = 1000 + (uint64_t)et->t;
	jobs_id last = 0;
	for (int k = 0; k < e->per_thread; k++) {
		int i = et->t * e->per_thread + k;
		struct node *nd = &g->nodes[i];
		jobs_id after[MAX_DEPS];
		int na = (int)jt_below(&rng, 3);
		for (int j = 0; j < na && k > 0; j++) { /* one of our own earlier jobs */
			int d = et->t * e->per_thread + (int)jt_below(&rng, (uint64_t)k);
			nd->deps[nd->ndeps] = d;
			after[nd->ndeps++] = atomic_load_explicit(&g->ids[d], memory_order_relaxed);
		}
		if (jt_below(&rng, 3) == 0) { /* someone else's job, if already published */
			int ot = (int)jt_below(&rng, SUBMITTERS);
			int ok = (int)jt_below(&rng, (uint64_t)e->per_thread);
			int d = ot * e->per_thread + ok;
			jobs_id id = atomic_load_explicit(&g->ids[d], memory_order_acquire);
			if (id && d != i) {
				nd->deps[nd->ndeps] = d;
				after[nd->ndeps++] = id;
			}
		}
		jobs_job_desc desc = {.fn = node_body, .arg = nd, .cleanup = node_cleanup, .after = after,
				      .after_count = (size_t)nd->ndeps};
		jobs_id id = 0;
		jobs_status st;
		uint64_t start = jt_now_ns();
		while ((st = jobs_submit(e->s, &desc, &id)) == JOBS_FULL) {
			if (jt_now_ns() - start > JT_SAFETY_NS)
				break;
			if (last)
				(void)jobs_wait(e->s, last, 1000000); /* helps in 0-worker pools */
			else
				sched_yield();
		}
		jt_check(st == JOBS_OK, "external submit: %s", jt_status_name(st));
		atomic_store_explicit(&g->ids[i], id, memory_order_release);
		last = id;
	}
	/* wait for our own jobs (in a 0-worker pool, this runs them) */
	for (int k = 0; k < e->per_thread; k++) {
		int i = et->t * e->per_thread + k;
		jobs_status st = jobs_wait(e->s, atomic_load(&g->ids[i]), JT_WAIT_NS);
		jt_check(st == JOBS_OK, "external wait on job %d: %s", i, jt_status_name(st));
	}
	return NULL;
}

START_TEST(test_external_submitters)
{
	int workers = dag_workers[_i];
	jobs_sched *s = jt_sched(workers);
	int per = (int)jt_scaled(1500, 150);
	int n = SUBMITTERS * per;
	struct dag *g = calloc(1, sizeof *g);
	g->s = s;
	g->n = n;
	g->nodes = calloc((size_t)n, sizeof *g->nodes);
	g->ran = calloc((size_t)n, sizeof *g->ran);
	g->finished = calloc((size_t)n, sizeof *g->finished);
	g->cleaned = calloc((size_t)n, sizeof *g->cleaned);
	g->ids = calloc((size_t)n, sizeof *g->ids);
	for (int i = 0; i < n; i++) {
		g->nodes[i].g = g;
		g->nodes[i].index = i;
	}
	struct ext e = {s, per, g->nodes, g};
	pthread_t th[SUBMITTERS];
	struct ext_thread et[SUBMITTERS];
	for (int t = 0; t < SUBMITTERS; t++) {
		et[t] = (struct ext_thread){&e, t};
		ck_assert(pthread_create(&th[t], NULL, ext_main, &et[t]) == 0);
	}
	for (int t = 0; t < SUBMITTERS; t++)
		pthread_join(th[t], NULL);
	jt_assert_no_thread_failures();
	for (int i = 0; i < n; i++) {
		ck_assert_msg(atomic_load(&g->ran[i]) == 1, "workers=%d: job %d ran %d times", workers, i,
			      atomic_load(&g->ran[i]));
		ck_assert_msg(atomic_load(&g->cleaned[i]) == 1, "workers=%d: job %d cleaned %d times",
			      workers, i, atomic_load(&g->cleaned[i]));
		jt_assert_status(jobs_release(s, g->ids[i]), JOBS_OK, "release");
	}
	ck_assert_msg(atomic_load(&g->order_errors) == 0, "workers=%d: %d jobs ran before a dependency",
		      workers, atomic_load(&g->order_errors));
	ck_assert_msg(atomic_load(&g->payload_errors) == 0,
		      "workers=%d: %d dependency writes not visible", workers,
		      atomic_load(&g->payload_errors));
	jobs_sched_destroy(s);
	free(g->nodes);
	free((void *)g->ran);
	free((void *)g->finished);
	free((void *)g->cleaned);
	free((void *)g->ids);
	free(g);
}
END_TEST

static Suite *dag_suite(void)
{
	Suite *su = suite_create("jobs_dag");
	TCase *tc = tcase_create("random");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_random_dag, 0, 4);
	suite_add_tcase(su, tc);
	tc = tcase_create("nested");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_worker_side_submission, 0, 4);
	suite_add_tcase(su, tc);
	tc = tcase_create("external");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_external_submitters, 0, 4);
	suite_add_tcase(su, tc);
	return su;
}

JT_MAIN(dag_suite)
