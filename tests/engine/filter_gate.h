/*
 * filter_gate.h — a gate for tests that need a query to stay unresolved: gate_close() installs a
 * filter test hook that holds every filter op on its worker until gate_open();
 * gate_wait_entered() returns once one is held. One per test binary (static state); include it
 * from one translation unit. Filter ops run on workers, never in the call, so the hook never holds
 * the submitting thread.
 */
#ifndef OVSTAGE_TEST_FILTER_GATE_H
#define OVSTAGE_TEST_FILTER_GATE_H

#include <pthread.h>

#include "filter.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_entered; /* under g_mu */
static int g_open;    /* under g_mu */

static void gate_hook(void)
{
	pthread_mutex_lock(&g_mu);
	g_entered++;
	pthread_cond_broadcast(&g_cv);
	while (!g_open)
		pthread_cond_wait(&g_cv, &g_mu);
	pthread_mutex_unlock(&g_mu);
}

static void gate_close(void)
{
	pthread_mutex_lock(&g_mu);
	g_entered = 0;
	g_open = 0;
	pthread_mutex_unlock(&g_mu);
	ovs_filter_set_test_hook(gate_hook);
}

/* Waits until a filter op is held in the hook (so it is running on a worker, unresolved). */
static void gate_wait_entered(void)
{
	pthread_mutex_lock(&g_mu);
	while (!g_entered)
		pthread_cond_wait(&g_cv, &g_mu);
	pthread_mutex_unlock(&g_mu);
}

static void gate_open(void)
{
	ovs_filter_set_test_hook(NULL);
	pthread_mutex_lock(&g_mu);
	g_open = 1;
	pthread_cond_broadcast(&g_cv);
	pthread_mutex_unlock(&g_mu);
}

#endif /* OVSTAGE_TEST_FILTER_GATE_H */
