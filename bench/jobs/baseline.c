/*
 * baseline.c — the simplest "hand a task to another thread and block until it ran": one dedicated
 * thread, one mutex, two condition variables. Both sides sleep in the kernel while they wait.
 */
#include <pthread.h>

#include "bench.h"

struct handoff {
	pthread_mutex_t mu;
	pthread_cond_t req_cv, done_cv;
	int req, done, quit;
	long counter;
};

static void trivial(struct handoff *h)
{
	++*(volatile long *)&h->counter;
}

static void *server(void *arg)
{
	struct handoff *h = arg;
	pthread_mutex_lock(&h->mu);
	for (;;) {
		while (!h->req && !h->quit)
			pthread_cond_wait(&h->req_cv, &h->mu);
		if (h->quit)
			break;
		h->req = 0;
		trivial(h);
		h->done = 1;
		pthread_cond_signal(&h->done_cv);
	}
	pthread_mutex_unlock(&h->mu);
	return NULL;
}

bool condvar_roundtrip(long iters, uint64_t *ns)
{
	struct handoff h = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
			    0, 0, 0, 0};
	pthread_t t;
	if (pthread_create(&t, NULL, server, &h) != 0)
		return false;
	for (long i = 0; i < iters; i++) {
		uint64_t t0 = bench_now_ns();
		pthread_mutex_lock(&h.mu);
		h.req = 1;
		pthread_cond_signal(&h.req_cv);
		while (!h.done)
			pthread_cond_wait(&h.done_cv, &h.mu);
		h.done = 0;
		pthread_mutex_unlock(&h.mu);
		ns[i] = bench_now_ns() - t0;
	}
	pthread_mutex_lock(&h.mu);
	h.quit = 1;
	pthread_cond_signal(&h.req_cv);
	pthread_mutex_unlock(&h.mu);
	pthread_join(t, NULL);
	return h.counter == iters;
}

/* The trickle: the server runs each request and goes back to its condvar; nobody waits for it. */
static void *trickle_server(void *arg)
{
	struct handoff *h = arg;
	pthread_mutex_lock(&h->mu);
	for (;;) {
		while (!h->req && !h->quit)
			pthread_cond_wait(&h->req_cv, &h->mu);
		if (h->quit)
			break;
		h->req = 0;
		trivial(h);
	}
	pthread_mutex_unlock(&h->mu);
	return NULL;
}

static void trickle_send(void *ctx)
{
	struct handoff *h = ctx;
	pthread_mutex_lock(&h->mu);
	h->req = 1;
	pthread_cond_signal(&h->req_cv);
	pthread_mutex_unlock(&h->mu);
}

double condvar_trickle_pct(double rate_hz, uint64_t measure_ns)
{
	struct handoff h = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
			    0, 0, 0, 0};
	pthread_t t;
	if (pthread_create(&t, NULL, trickle_server, &h) != 0)
		return -1;
	double pct = bench_trickle_pct(rate_hz, measure_ns, trickle_send, &h, NULL);
	pthread_mutex_lock(&h.mu);
	h.quit = 1;
	pthread_cond_signal(&h.req_cv);
	pthread_mutex_unlock(&h.mu);
	pthread_join(t, NULL);
	return pct;
}
