/*
 * lmdb_peer.c — the LMDB side: one environment on /dev/shm with MDB_NOSYNC | MDB_WRITEMAP (no
 * fsync, writes go straight into the shared map), one write transaction per ordinal that puts every
 * column's bytes under key (column id, ordinal) and deletes the ordinal that left the retention.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"

#ifdef OVSTAGE_BENCH_HAVE_LMDB
#include <lmdb.h>

struct lmdb_peer {
	MDB_env *env;
	MDB_dbi dbi;
	char dir[256];
};

bool lmdb_available(void)
{
	return true;
}

const char *lmdb_version_str(void)
{
	return mdb_version(NULL, NULL, NULL);
}

static void rm_dir(const char *dir)
{
	char p[300];
	snprintf(p, sizeof p, "%s/data.mdb", dir);
	unlink(p);
	snprintf(p, sizeof p, "%s/lock.mdb", dir);
	unlink(p);
	rmdir(dir);
}

lmdb_peer *lmdb_open_peer(const char *tag, size_t map_bytes)
{
	lmdb_peer *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	snprintf(p->dir, sizeof p->dir, "/dev/shm/ovstage_bench_lmdb_%d_%s", (int)getpid(), tag);
	rm_dir(p->dir);
	int rc = mkdir(p->dir, 0700) ? -1 : 0;
	if (!rc)
		rc = mdb_env_create(&p->env);
	if (!rc)
		rc = mdb_env_set_mapsize(p->env, map_bytes);
	if (!rc)
		rc = mdb_env_set_maxreaders(p->env, 16);
	if (!rc)
		rc = mdb_env_open(p->env, p->dir, MDB_NOSYNC | MDB_WRITEMAP | MDB_NOTLS, 0644);
	MDB_txn *txn = NULL;
	if (!rc)
		rc = mdb_txn_begin(p->env, NULL, 0, &txn);
	if (!rc)
		rc = mdb_dbi_open(txn, NULL, 0, &p->dbi);
	if (!rc)
		rc = mdb_txn_commit(txn);
	if (rc) {
		fprintf(stderr, "ovstage_bench_stage: LMDB open at %s: %s\n", p->dir,
			rc == -1 ? "mkdir failed" : mdb_strerror(rc));
		if (p->env)
			mdb_env_close(p->env);
		rm_dir(p->dir);
		free(p);
		return NULL;
	}
	return p;
}

void lmdb_close_peer(lmdb_peer *p)
{
	if (!p)
		return;
	mdb_env_close(p->env);
	rm_dir(p->dir);
	free(p);
}

/* Big-endian key so that keys sort by (column, ordinal). */
typedef struct lkey {
	unsigned char b[12];
} lkey;

static MDB_val make_key(lkey *k, int col, uint64_t ord)
{
	uint32_t c = (uint32_t)col;
	for (int i = 0; i < 4; i++)
		k->b[i] = (unsigned char)(c >> (24 - 8 * i));
	for (int i = 0; i < 8; i++)
		k->b[4 + i] = (unsigned char)(ord >> (56 - 8 * i));
	MDB_val v = { sizeof k->b, k->b };
	return v;
}

bool lmdb_commit(lmdb_peer *p, int ncols, uint64_t ordinal, const void *const *vals, size_t bytes, int keep)
{
	MDB_txn *txn;
	int rc = mdb_txn_begin(p->env, NULL, 0, &txn);
	if (rc)
		goto fail;
	for (int c = 0; c < ncols; c++) {
		lkey k;
		MDB_val key = make_key(&k, c, ordinal);
		MDB_val val = { bytes, (void *)(uintptr_t)vals[c] };
		rc = mdb_put(txn, p->dbi, &key, &val, 0);
		if (rc) {
			mdb_txn_abort(txn);
			goto fail;
		}
		if (ordinal > (uint64_t)keep) {
			MDB_val old = make_key(&k, c, ordinal - (uint64_t)keep);
			rc = mdb_del(txn, p->dbi, &old, NULL);
			if (rc && rc != MDB_NOTFOUND) {
				mdb_txn_abort(txn);
				goto fail;
			}
		}
	}
	rc = mdb_txn_commit(txn);
	if (!rc)
		return true;
fail:
	fprintf(stderr, "ovstage_bench_stage: LMDB commit of ordinal %llu: %s\n", (unsigned long long)ordinal,
		mdb_strerror(rc));
	return false;
}

int lmdb_read(lmdb_peer *p, int ncols, uint64_t ordinal, uint64_t *sum)
{
	MDB_txn *txn;
	if (mdb_txn_begin(p->env, NULL, MDB_RDONLY, &txn))
		return -1;
	int found = 0;
	for (int c = 0; c < ncols; c++) {
		lkey k;
		MDB_val key = make_key(&k, c, ordinal), val;
		if (mdb_get(txn, p->dbi, &key, &val) == 0) {
			*sum += *(const unsigned char *)val.mv_data;
			found++;
		}
	}
	mdb_txn_abort(txn);
	return found;
}

uint64_t lmdb_read_one_ns(lmdb_peer *p, int col, uint64_t ordinal, uint64_t *sum)
{
	uint64_t t0 = now_ns();
	MDB_txn *txn;
	if (mdb_txn_begin(p->env, NULL, MDB_RDONLY, &txn))
		return 0;
	lkey k;
	MDB_val key = make_key(&k, col, ordinal), val;
	int rc = mdb_get(txn, p->dbi, &key, &val);
	if (rc == 0)
		*sum += *(const unsigned char *)val.mv_data;
	mdb_txn_abort(txn);
	uint64_t t = now_ns() - t0;
	return rc == 0 ? (t ? t : 1) : 0;
}

#else /* no LMDB */

bool lmdb_available(void)
{
	return false;
}
const char *lmdb_version_str(void)
{
	return "LMDB not found";
}
lmdb_peer *lmdb_open_peer(const char *tag, size_t map_bytes)
{
	(void)tag;
	(void)map_bytes;
	return NULL;
}
void lmdb_close_peer(lmdb_peer *p)
{
	(void)p;
}
bool lmdb_commit(lmdb_peer *p, int ncols, uint64_t ordinal, const void *const *vals, size_t bytes, int keep)
{
	return false;
}
int lmdb_read(lmdb_peer *p, int ncols, uint64_t ordinal, uint64_t *sum)
{
	return -1;
}
uint64_t lmdb_read_one_ns(lmdb_peer *p, int col, uint64_t ordinal, uint64_t *sum)
{
	return 0;
}
#endif
