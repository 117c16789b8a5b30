/*
 * grace.pml — Promela model of the snapshot store's grace period and seal publication
 * (engine/grace.{h,c}; previously the "Snapshot grace period" section of engine/store.c with
 * ovs_store_seal, reclaim_limbo and empty_limbo). See verify/README.md.
 *
 * One column, one sealer doing SEALS seals, NR readers looping pin/unpin forever.
 * Version i is built by seal i, snapshot i is published by seal i (slot 0 of each is the state
 * before the first seal); slots are never reused, so "freed" is a state of its own.
 *
 * Properties (assertions; every one carries its tag on its line, run.sh reads it back):
 *   P1  no version (and no snapshot) is freed while a reader can dereference it: a reader inside
 *       its section holds the pointer it loaded, or outside it holds a reference. Checked at every
 *       dereference and, at every free, against what each reader holds.
 *   P2  a pinned reader sees a complete version (initialisation before publication).
 *   P3  lifecycle: allocated -> complete -> published -> retired -> freed, refcounts never negative.
 *
 * Memory model. Promela is sequentially consistent. By default the reader's loads that are not
 * seq_cst read any value C11 allows them (a superset, see README.md):
 *   W1  the first parity load (acquire) may return either parity;
 *   W2  the snapshot load (acquire) may return any snapshot from the one published before the
 *       parity store that the re-check read (happens-before through that store) up to the newest;
 *   W3  a load of a version's `older` link (acquire) may return the link as it was before the
 *       sealer cut it, unless the cut happens-before the load through the parity store.
 * -DSC_ONLY turns those off (every load reads the latest store).
 *
 * Negative variants (each must produce a counterexample; they imply SC_ONLY, so a counterexample
 * is an interleaving that real hardware can run):
 *   NEG_NO_RECHECK         the reader does not re-check the parity after counting itself in
 *   NEG_CHECK_BEFORE_FLIP  the sealer loads readers[old] before the parity flip (also what an
 *                          acquire, not seq_cst, load permits: store->load reordering)
 *   NEG_PUBLISH_EARLY      the sealer publishes the snapshot before the version is complete
 *   NEG_PIN_AFTER_LEAVE    the reader takes its references after leaving the section
 *   NEG_CUT_AFTER_FLIP     the sealer cuts retention after the parity flip (store.md: "the cut is
 *                          sequenced before the flip")
 */

#ifndef NR
#define NR 2
#endif
#ifndef SEALS
#define SEALS 3
#endif
#ifndef KEEP
#define KEEP 2 /* retention depth (st->retention; 2 by default) */
#endif

#if defined(NEG_NO_RECHECK) || defined(NEG_CHECK_BEFORE_FLIP) || defined(NEG_PUBLISH_EARLY) || defined(NEG_PIN_AFTER_LEAVE) || \
    defined(NEG_CUT_AFTER_FLIP)
#ifndef SC_ONLY
#define SC_ONLY
#endif
#endif

#define NV (SEALS + 1) /* version slots = snapshot slots */
#define H (KEEP + 2)    /* versions one read pins at most (read.c: retention + 2) */
#define HV(j) hold_v[me * H + (j)]
#define NONE 255

/* version lifecycle, in order */
#define V_UNUSED 0
#define V_ALLOC 1     /* allocated, being initialised by the sealer */
#define V_COMPLETE 2  /* initialised (rows, chunks, link to the older version) */
#define V_PUBLISHED 3 /* reachable from the published snapshot */
#define V_RETIRED 4   /* cut from retention, in the limbo */
#define V_FREED 5

/* snapshot lifecycle */
#define S_UNUSED 0
#define S_LIVE 1
#define S_RETIRED 2 /* in the limbo */
#define S_FREED 3

/* ---- shared state (engine/grace.h: snapshot, parity, readers[2]) ---- */
byte parity;
byte readers[2];
byte snapshot; /* the published snapshot's slot */

/* ---- objects ---- */
byte vstate[NV];
byte vrefs[NV];    /* ovs_version.refs: the chain, snapshots, pinned readers, the limbo */
byte older[NV];    /* ovs_version.older (an owned reference) */
byte sstate[NV];
byte sver[NV];     /* the snapshot's version (it holds a reference) */

/* ---- sealer-owned ---- */
byte latest;       /* c->latest (the chain's reference) */
bool lim_used;     /* ovs_limbo */
byte lim_parity;
byte lim_snap;
byte lim_ver;      /* the version cut from retention (at most one per seal with KEEP fixed) */

/* ---- ghosts ---- */
byte flips;        /* parity stores so far (flip k is seal k's) */
byte link_was[NV]; /* older[x] before the cut */
byte cut_at[NV];   /* the seal that cut older[x] (0: not cut) */
byte hold_s[NR];   /* the snapshot reader r has loaded and may still dereference */
byte hold_v[NR * H]; /* the versions reader r has loaded or pinned: HV(0) .. HV(H - 1) */

/* Frees are checked against what every reader holds (P1). */
inline check_unheld_version(x)
{
	for (i : 0 .. NR * H - 1) {
		assert(hold_v[i] != x) /* P1 */
	}
}

inline check_unheld_snapshot(x)
{
	for (i : 0 .. NR - 1) {
		assert(hold_s[i] != x) /* P1 */
	}
}

/* A reader reads a version's fields. */
inline deref_version(x)
{
	assert(vstate[x] != V_FREED && vstate[x] != V_UNUSED); /* P1 */
	assert(vstate[x] >= V_COMPLETE) /* P2 */
}

/* ovs_version_ref: relaxed fetch_add; taking a reference needs a live one to copy. */
inline version_ref(x)
{
	atomic {
		deref_version(x);
		assert(vrefs[x] > 0); /* P1 */
		vrefs[x]++;
		printf("    version %d pinned\n", x)
	}
}

/* ovs_version_unref / version_free: acq_rel fetch_sub; the last holder frees the version and
 * drops the reference it held on the older one. */
inline version_unref(x)
{
	atomic {
		tv = x;
		do
		:: tv == NONE -> break
		:: else ->
			assert(vrefs[tv] > 0); /* P3 */
			vrefs[tv]--;
			if
			:: vrefs[tv] > 0 -> tv = NONE
			:: else ->
				printf("    version %d: last reference dropped, freed\n", tv);
				check_unheld_version(tv);
				assert(vstate[tv] == V_RETIRED); /* P3 */
				vstate[tv] = V_FREED;
				tmp = older[tv];
				older[tv] = NONE;
				tv = tmp
			fi
		od;
		tmp = 0;
		i = 0
	}
}

/* empty_limbo: drop the cut versions, then free_snapshot (drops its references, frees it). */
inline empty_limbo()
{
	if
	:: lim_ver != NONE ->
		version_unref(lim_ver);
		lim_ver = NONE
	:: else
	fi;
	version_unref(sver[lim_snap]);
	atomic {
		printf("    snapshot %d freed\n", lim_snap);
		check_unheld_snapshot(lim_snap);
		assert(sstate[lim_snap] == S_RETIRED); /* P3 */
		sstate[lim_snap] = S_FREED;
		lim_snap = 0;
		lim_parity = 0;
		lim_used = false
	}
}

/* trim_retention: cut the versions beyond KEEP from the chain (release store of NULL) and bury
 * them in the limbo (the chain's reference moves there). */
inline trim_retention()
{
	atomic {
		x = k;
		i = 1;
		do
		:: i < KEEP && x != NONE -> x = older[x]; i++
		:: else -> break
		od;
		if
		:: x != NONE && older[x] != NONE ->
			lim_ver = older[x];
			assert(vstate[lim_ver] == V_PUBLISHED); /* P3 */
			vstate[lim_ver] = V_RETIRED;
			printf("seal %d: cuts version %d from retention\n", k, lim_ver);
			link_was[x] = older[x];
			cut_at[x] = k;
			older[x] = NONE
		:: else
		fi;
		x = 0;
		i = 0
	}
}

proctype sealer()
{
	byte k, p, old, x, tv, tmp, i;
	bool zero;

	k = 1;
	do
	:: k > SEALS -> break
	:: else ->
		/* reclaim_limbo: the previous seal's retirees, once readers[their parity] reads 0
		 * (seq_cst load, spinning: a blocking guard) */
		if
		:: lim_used ->
			atomic {
				readers[lim_parity] == 0;
				printf("seal %d: readers[%d] reads 0: empties the previous limbo\n", k, lim_parity)
			}
			empty_limbo()
		:: else
		fi;

		/* seal_column/build_version: a new version, linked to the previous one (relaxed store:
		 * published by the snapshot's release store; the chain's reference moves to it) */
		atomic {
			assert(vstate[k] == V_UNUSED);
			vstate[k] = V_ALLOC;
			vrefs[k] = 1;
#ifndef NEG_PUBLISH_EARLY
			vstate[k] = V_COMPLETE;
#endif
			older[k] = latest;
			latest = k;
			printf("seal %d: builds version %d\n", k, k)
		}

#ifndef NEG_CUT_AFTER_FLIP
		trim_retention();
#endif

		/* the new snapshot takes a reference on the latest version; release store publishes it */
		atomic {
			sver[k] = latest;
			vrefs[latest]++;
			sstate[k] = S_LIVE;
			old = snapshot;
			snapshot = k;
			printf("seal %d: publishes snapshot %d (version %d)\n", k, k, latest);
#ifndef NEG_PUBLISH_EARLY
			assert(vstate[k] == V_COMPLETE); /* P3 */
			vstate[k] = V_PUBLISHED
#endif
		}
#ifdef NEG_PUBLISH_EARLY
		atomic {
			vstate[k] = V_COMPLETE;
			printf("seal %d: completes version %d\n", k, k)
		}
		vstate[k] = V_PUBLISHED;
#endif

		/* flip the parity (seq_cst store), retire the old snapshot under the old parity, and
		 * free at once if readers[old parity] reads 0 (seq_cst load) */
		p = parity;
#ifdef NEG_CHECK_BEFORE_FLIP
		atomic {
			zero = (readers[p] == 0);
			printf("seal %d: readers[%d] reads %d\n", k, p, readers[p])
		}
#endif
		atomic {
			parity = 1 - p;
			printf("seal %d: flips parity %d -> %d, retires snapshot %d\n", k, p, 1 - p, old);
			flips++;
			sstate[old] = S_RETIRED;
			lim_snap = old;
			lim_parity = p;
			lim_used = true
		}
#ifdef NEG_CUT_AFTER_FLIP
		trim_retention();
#endif
#ifndef NEG_CHECK_BEFORE_FLIP
		atomic {
			zero = (readers[p] == 0);
			printf("seal %d: readers[%d] reads %d\n", k, p, readers[p])
		}
#endif
		if
		:: zero -> empty_limbo()
		:: else -> printf("seal %d: leaves the limbo to the next seal\n", k)
		fi;
		p = 0;
		old = 0;
		zero = false;
		k++
	od
}

proctype reader(byte me)
{
	/* the pointers it holds are hold_s[me] and HV(0..j) (globals, so frees can check them) */
	byte p, f, j, x, tv, tmp, i;

end:
	do
	:: /* ovs_snapshot_enter */
		do
		::
			atomic {
#ifdef SC_ONLY
				p = parity;
#else
				if /* W1: acquire load, any parity */
				:: p = 0
				:: p = 1
				fi;
#endif
				printf("reader %d: loads parity %d\n", me, p)
			}
			atomic {
				readers[p]++; /* fetch_add seq_cst */
				printf("reader %d: readers[%d]++\n", me, p)
			}
#ifdef NEG_NO_RECHECK
			break
#else
			/* re-check: seq_cst load; f = the flip it read from (ghost) */
			atomic {
				if
				:: parity == p ->
#ifndef SC_ONLY
					f = flips
#else
					skip
#endif
				:: else -> f = NONE
				fi;
				printf("reader %d: re-check reads parity %d\n", me, parity)
			}
			if
			:: f != NONE -> break
			:: else ->
				atomic {
					readers[p]--; /* fetch_sub release: retry on the other counter */
					printf("reader %d: readers[%d]--, retries\n", me, p)
				}
				f = 0
			fi
#endif
		od;

		/* load the snapshot (acquire) */
		atomic {
#ifdef SC_ONLY
			hold_s[me] = snapshot
#else
			hold_s[me] = f; /* W2 */
			do
			:: hold_s[me] < snapshot -> hold_s[me]++
			:: break
			od;
#endif
			printf("reader %d: loads snapshot %d\n", me, hold_s[me])
		}
		/* ovs_snapshot_version: read the snapshot's version */
		atomic {
			assert(sstate[hold_s[me]] == S_LIVE || sstate[hold_s[me]] == S_RETIRED); /* P1 */
			HV(0) = sver[hold_s[me]];
			printf("reader %d: snapshot %d holds version %d\n", me, hold_s[me], HV(0));
			hold_s[me] = NONE
		}
		/* the version as of the read's end: read it and pin it (a relaxed increment) */
#ifndef NEG_PIN_AFTER_LEAVE
		version_ref(HV(0));
#endif
		/* a range read walks the chain (`older`, acquire), pinning each version it reaches */
		j = 0;
		do
		:: j + 1 < H ->
			atomic {
				deref_version(HV(j));
#ifdef SC_ONLY
				HV(j + 1) = older[HV(j)]
#else
				if /* W3 */
				:: HV(j + 1) = older[HV(j)]
				:: cut_at[HV(j)] > f -> HV(j + 1) = link_was[HV(j)]
				fi;
#endif
				printf("reader %d: version %d's older link reads %d\n", me, HV(j), HV(j + 1))
			}
			if
			:: HV(j + 1) == NONE -> break
			:: else ->
				j++;
#ifndef NEG_PIN_AFTER_LEAVE
				version_ref(HV(j))
#endif
			fi
		:: break
		od;

		/* ovs_snapshot_leave: fetch_sub release */
		atomic {
			readers[p]--;
			printf("reader %d: leaves (readers[%d]--)\n", me, p)
		}

#ifdef NEG_PIN_AFTER_LEAVE
		for (i : 0 .. j) {
			version_ref(HV(i))
		}
		i = 0;
#endif
		/* outside the section: read the pinned versions, then release them */
		do
		:: atomic {
				deref_version(HV(j));
				x = HV(j);
				HV(j) = NONE;
				printf("reader %d: releases version %d\n", me, x);
				version_unref(x);
				x = 0
			}
			if
			:: j == 0 -> break
			:: else -> j--
			fi
		od;
		p = 0;
		f = 0
	od
}

init
{
	byte i;

	atomic {
		for (i : 0 .. NV - 1) {
			older[i] = NONE;
			link_was[i] = NONE
		}
		for (i : 0 .. NR - 1) {
			hold_s[i] = NONE
		}
		for (i : 0 .. NR * H - 1) {
			hold_v[i] = NONE
		}
		/* the state before the first seal: version 0 on the chain, in snapshot 0 */
		vstate[0] = V_PUBLISHED;
		vrefs[0] = 2;
		latest = 0;
		sstate[0] = S_LIVE;
		sver[0] = 0;
		snapshot = 0;
		lim_ver = NONE;
		i = 0;
		run sealer();
		for (i : 0 .. NR - 1) {
			run reader(i)
		}
		i = 0
	}
}
