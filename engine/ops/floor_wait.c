/*
 * floor_wait.c — ovstage_ext_wait_write_floor: a consumer sleeps until a write floor reaches an
 * ordinal, woken by the seal that publishes it (store.h floor_seq / floor_waiters, seal.c
 * ovs_floor_notify). No polling: between publications the waiter sleeps on the futex word.
 */
#include "floor_wait.h"

#include "errors.h"
#include "names.h"
#include "park.h"

/* The floor the caller waits on: the column's (the stage floor while it has none), or the minimum
 * over columns (the stage floor when there are none) — as get_attribute_write_floor reports it.
 * acquire: pairs with publish's release stores of the floors (the snapshot through them is out). */
static uint64_t current_floor(ovs_store *st, ovx_token_t attr)
{
	if (attr) {
		ovs_column *c = ovs_column_find(st, attr);
		return atomic_load_explicit(c ? &c->floor : &st->all_floor, memory_order_acquire);
	}
	size_t nc = atomic_load_explicit(&st->ncols, memory_order_acquire);
	ovs_column **cols = atomic_load_explicit(&st->cols, memory_order_acquire);
	uint64_t v = nc ? UINT64_MAX : atomic_load_explicit(&st->all_floor, memory_order_acquire);
	for (size_t i = 0; i < nc; i++) {
		uint64_t f = atomic_load_explicit(&cols[i]->floor, memory_order_acquire);
		v = f < v ? f : v;
	}
	return v;
}

ovstage_api_status_t ovs_wait_write_floor(ovs_stage *st, ovx_string_or_token_t attribute, ovstage_ordinal_t ordinal,
					  ovstage_timeout_ns_t timeout)
{
	ovx_token_t attr;
	ovstage_api_status_t s = ovs_resolve_attr(st, attribute, true, &attr, "attribute");
	if (s != OVSTAGE_OK)
		return s;
	ovs_store *store = &st->store;
	uint64_t start = jobs_now_ns();
	if (timeout != OVSTAGE_TIMEOUT_INFINITE && timeout > UINT64_MAX - start)
		timeout = OVSTAGE_TIMEOUT_INFINITE; /* a deadline past the clock's range: no deadline */
	uint64_t deadline = timeout == OVSTAGE_TIMEOUT_INFINITE ? 0 : start + timeout;
	/* seq_cst: the Dekker pair with ovs_floor_notify (seal.c says why it suffices) */
	atomic_fetch_add_explicit(&store->floor_waiters, 1, memory_order_seq_cst);
	for (;;) {
		uint32_t seq = atomic_load_explicit(&store->floor_seq, memory_order_seq_cst);
		if (current_floor(store, attr) >= ordinal) {
			s = OVSTAGE_OK;
			break;
		}
		uint64_t now = timeout == OVSTAGE_TIMEOUT_INFINITE ? 0 : jobs_now_ns();
		if (timeout != OVSTAGE_TIMEOUT_INFINITE && now >= deadline) {
			s = ovs_err_set(OVSTAGE_ERROR_TIMEOUT, "the write floor%s%s is below %llu", attr ? " of " : "",
					attr ? ovs_attr_name(st, attr) : "", (unsigned long long)ordinal);
			break;
		}
		/* sleeps unless a publication bumped the word since we read it (then it returns at once) */
		jobs_futex_wait(&store->floor_seq, seq, timeout == OVSTAGE_TIMEOUT_INFINITE ? ~(uint64_t)0 : deadline - now);
	}
	/* relaxed: only a hint for the notifier (a stale count costs one futex call) */
	atomic_fetch_sub_explicit(&store->floor_waiters, 1, memory_order_relaxed);
	return s;
}
