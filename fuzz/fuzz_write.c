/*
 * fuzz/fuzz_write.c — libFuzzer target: decodes the input into write batches
 * (ovstage_write_attributes / ovstage_write_attribute) over one instance and checks:
 *  - every enqueue returns a documented status (never INTERNAL), with an op id iff accepted;
 *  - a rejected call has called the deleter of every distinct managed tensor it was given exactly
 *    once by the time it returns;
 *  - an accepted op's managed tensors have their deleters called at most once, and exactly once
 *    after the instance is destroyed (checked at the periodic full reset every FZ_RESET_EVERY
 *    iterations and at exit);
 *  - every accepted op waits OK and releases OK; destroy succeeds (nothing left held).
 * Input: a sequence of commands; each starts with a byte selecting write batch / single write /
 * floor advance.
 */
#include "fuzz_common.h"

#define FZ_MAX_BATCH 4
#define FZ_MAX_TENSORS 6
#define FZ_MAX_COUNT 300

/* A managed tensor we own: its deleter counts calls; freed only once its count is final. */
typedef struct fz_managed {
	DLManagedTensorVersioned mt;
	fz_tensor_store ts;
	int calls;
	struct fz_managed *next;
} fz_managed;

static void released_all(void);
static fz_proc FP = { .after_destroy = released_all };
static fz_managed *pending;    /* managed tensors of accepted ops: checked after destroy */

static void count_deleter(DLManagedTensorVersioned *self)
{
	fz_managed *m = (fz_managed *)self->manager_ctx;
	FZ_CHECK(m != NULL && &m->mt == self, "deleter called with a foreign tensor");
	m->calls++;
	FZ_CHECK(m->calls == 1, "deleter called %d times", m->calls);
}

static void managed_free(fz_managed *m)
{
	free(m->ts.buf);
	free(m);
}

/* After each destroy: every accepted op's managed tensors were released exactly once. */
static void released_all(void)
{
	while (pending) {
		fz_managed *m = pending;
		pending = m->next;
		FZ_CHECK(m->calls == 1, "accepted managed tensor released %d times after destroy", m->calls);
		managed_free(m);
	}
}

static void at_exit(void)
{
	fz_proc_exit(&FP);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fz_proc_init(&FP, at_exit);
	return 0;
}

static uint64_t pick_ordinal(fz_in *in)
{
	uint8_t b = fz_u8(in);
	switch (b >> 5) {
	case 0: return 0;
	case 1: return FP.floor_ord; /* at the floor: rejected */
	case 2: return FP.floor_ord ? FP.floor_ord - 1 : 0;
	case 3: return UINT64_MAX;
	case 4: return fz_u64(in);
	default: return FP.floor_ord + 1 + (b & 15);
	}
}

/* One decoded write entry with everything it points at. */
typedef struct {
	ovstage_attribute_write_t w;
	DLTensor tensors[FZ_MAX_TENSORS];
	fz_tensor_store stores[FZ_MAX_TENSORS];
	const DLManagedTensorVersioned *mptrs[FZ_MAX_TENSORS];
	fz_managed *owned[FZ_MAX_TENSORS]; /* distinct managed tensors this entry created */
	int n_owned;
	uint32_t *index_map;
	uint64_t *mask;
	int n_tensors_decoded;
} fz_entry;

static void decode_entry(fz_in *in, fz_entry *e, fz_managed **batch_managed, int *n_batch_managed)
{
	memset(e, 0, sizeof *e);
	e->w.attribute = fz_pick_attr(&FP.f, fz_u8(in));
	ovstage_write_data_t *d = &e->w.data;
	uint8_t b = fz_u8(in);
	uint32_t nt = b & 7;
	if (nt > FZ_MAX_TENSORS)
		nt = 1;
	int managed = (b & 0x08) != 0;
	int both = (b & 0xf0) == 0xf0; /* rare: tensors and managed_tensors together */
	d->is_array = (b & 0x10) != 0;
	uint8_t b2 = fz_u8(in);
	d->semantic = (ovstage_attribute_semantic_t)(b2 < 240 ? b2 % 16 : b2);
	uint8_t cb = fz_u8(in);
	uint32_t count = 0;
	switch (cb >> 6) {
	case 0: count = 0; break;
	case 1: count = cb & 7; break;
	case 2: count = (uint32_t)(fz_u16(in) % FZ_MAX_COUNT); break;
	default: count = (cb & 1) ? UINT32_MAX : (uint32_t)FZ_NPRIMS + (cb & 3); break;
	}
	d->count = count;
	int want_map = (cb & 0x10) != 0, want_mask = (cb & 0x20) != 0;
	if (count <= FZ_MAX_COUNT) {
		if (want_map) {
			e->index_map = malloc(sizeof(uint32_t) * (count ? count : 1));
			for (uint32_t i = 0; i < count; i++) {
				uint8_t v = fz_u8(in);
				e->index_map[i] = v < 250 ? v % 8 : (v == 255 ? UINT32_MAX : v);
			}
			d->index_map = e->index_map;
		}
		if (want_mask) {
			size_t words = (count + 63) / 64;
			e->mask = malloc(sizeof(uint64_t) * (words ? words : 1));
			for (size_t i = 0; i < words; i++)
				e->mask[i] = fz_u64(in);
			d->mask = e->mask;
		}
	}
	d->tensor_count = nt;
	for (uint32_t i = 0; i < nt; i++) {
		if (!managed || both) {
			fz_decode_tensor(in, &e->tensors[i], &e->stores[i]);
			e->n_tensors_decoded = (int)i + 1;
		}
		if (managed) {
			uint8_t mb = fz_u8(in);
			if (mb == 0xff) {
				e->mptrs[i] = NULL; /* rejected: NULL entry */
				continue;
			}
			if (mb >= 0xf0 && *n_batch_managed > 0) { /* rare: a pointer repeated within the batch */
				e->mptrs[i] = &batch_managed[(mb & 0xf) % *n_batch_managed]->mt;
				continue;
			}
			fz_managed *m = calloc(1, sizeof *m);
			fz_decode_tensor(in, &m->mt.dl_tensor, &m->ts);
			m->mt.version.major = (mb & 0x80) ? (uint32_t)(mb & 3) : DLPACK_MAJOR_VERSION;
			m->mt.version.minor = DLPACK_MINOR_VERSION;
			m->mt.manager_ctx = m;
			m->mt.deleter = count_deleter;
			m->mt.flags = (mb & 0x40) ? (uint64_t)(mb & 7) : 0;
			/* shape/strides point into m->ts (the decoder pointed them into its store) */
			e->mptrs[i] = &m->mt;
			e->owned[e->n_owned++] = m;
			if (*n_batch_managed < FZ_MAX_BATCH * FZ_MAX_TENSORS)
				batch_managed[(*n_batch_managed)++] = m;
		}
	}
	if (!managed || both)
		d->tensors = nt || !(b & 0x20) ? e->tensors : NULL;
	if (managed)
		d->managed_tensors = e->mptrs;
	if ((b & 0xe0) == 0xe0 && !managed)
		d->tensors = NULL; /* rare: no payload at all */
	uint8_t cs = fz_u8(in);
	if (cs == 0xfe)
		d->cuda_sync.stream = 1; /* default stream on host tensors */
}

static void entry_free(fz_entry *e)
{
	for (int i = 0; i < e->n_tensors_decoded; i++)
		free(e->stores[i].buf);
	free(e->index_map);
	free(e->mask);
}

static void one_write(fz_in *in, int batch)
{
	fz_entry entries[FZ_MAX_BATCH];
	ovstage_attribute_write_t writes[FZ_MAX_BATCH];
	fz_managed *batch_managed[FZ_MAX_BATCH * FZ_MAX_TENSORS];
	int n_batch_managed = 0;
	uint8_t hb = fz_u8(in);
	size_t n = batch ? (hb & 3) + ((hb & 4) ? 1 : 0) : 1; /* 0..4 */
	if (n > FZ_MAX_BATCH)
		n = FZ_MAX_BATCH;
	ovstage_query_handle_t q = fz_pick_query(&FP.f, fz_u8(in));
	uint64_t ord = pick_ordinal(in);
	uint8_t pm = fz_u8(in);
	ovstage_prim_mode_t mode = (ovstage_prim_mode_t)(pm < 250 ? pm & 1 : pm);
	for (size_t i = 0; i < n; i++) {
		decode_entry(in, &entries[i], batch_managed, &n_batch_managed);
		writes[i] = entries[i].w;
	}
	ovstage_enqueue_result_t r;
	if (batch)
		r = ovstage_write_attributes(FP.f.st, q, (hb & 0x80) && n == 0 ? NULL : writes, n, ord, mode);
	else
		r = ovstage_write_attribute(FP.f.st, q, writes[0].attribute, ord, writes[0].data, mode);
	fz_check_enqueue(r, batch ? "write_attributes" : "write_attribute");
	if (r.status != OVSTAGE_OK) {
		/* rejected: every distinct managed tensor given was released exactly once, at the call */
		for (int i = 0; i < n_batch_managed; i++)
			FZ_CHECK(batch_managed[i]->calls == 1, "rejected write (status %d): deleter called %d times",
				 (int)r.status, batch_managed[i]->calls);
		for (int i = 0; i < n_batch_managed; i++)
			managed_free(batch_managed[i]);
	} else {
		fz_wait_release(FP.f.st, r.op_index);
		for (int i = 0; i < n_batch_managed; i++) {
			FZ_CHECK(batch_managed[i]->calls <= 1, "accepted write: deleter called %d times",
				 batch_managed[i]->calls);
			batch_managed[i]->next = pending;
			pending = batch_managed[i];
		}
	}
	for (size_t i = 0; i < n; i++)
		entry_free(&entries[i]);
}

static void advance_floor(fz_in *in)
{
	uint8_t b = fz_u8(in);
	fz_advance_floor(&FP, b, (b & 0x80) ? fz_u64(in) : 0, FP.f.tok[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fz_proc_next_input(&FP);
	fz_in in = { data, size };
	for (int cmd = 0; cmd < 8 && in.n; cmd++) {
		uint8_t c = fz_u8(&in);
		switch (c % 8) {
		case 0: case 1: case 2: one_write(&in, 1); break;
		case 3: case 4: case 5: one_write(&in, 0); break;
		case 6: advance_floor(&in); break;
		default:
			/* a floor far above: later writes are rejected (until the next reset) */
			if (c == 0xff) {
				ovstage_write_floor_desc_t d = { UINT64_MAX - 1, OVSTAGE_SCOPE_ALL, NULL, 0 };
				fz_enqueue_wait(FP.f.st, ovstage_advance_write_floor(FP.f.st, &d), "advance_write_floor max");
				FP.floor_ord = UINT64_MAX - 1;
			}
			break;
		}
	}
	return 0;
}
