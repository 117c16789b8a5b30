/*
 * jobs_task.h — typed fork-join tasks: the fast path of jobs_forkjoin.h without its costs.
 *
 *   JOBS_TASK_1(long, fib, int, n)
 *   {
 *       if (n < 2)
 *           return n;
 *       JOBS_SPAWN(fib, n - 1);        // a frame on this worker's deque, stealable from now on
 *       long b = JOBS_CALL(fib, n - 2); // a plain direct call
 *       long a = JOBS_SYNC(fib);        // runs the frame here (a direct call), or waits for its thief
 *       return a + b;
 *   }
 *   ...inside a job body or frame that received worker w:  long r = JOBS_TASK_RUN(w, fib, 40);
 *
 * JOBS_TASK_k(R, name, T1, a1, ..., Tk, ak) (k = 1..4) defines a task returning R (not void);
 * JOBS_VOID_TASK_k(name, T1, a1, ...) one returning nothing (_DECL_k/_IMPL_k: declaration and definition apart). Inside the body, JOBS_SPAWN,
 * JOBS_CALL and JOBS_SYNC name other tasks (or the same one); JOBS_WORKER is the worker running it
 * (for the rest of the jobs API). A task defined in one translation unit is used there (its
 * functions are static); declare it in several with the same macro if needed.
 *
 * Why this is faster than jobs_spawn_args/jobs_spawn/jobs_sync (docs/jobs.md, "Typed tasks"):
 *  - sync calls the task's function directly with its arguments read field by field from the
 *    frame, each with the width it was written with. The generic sync copies the whole argument
 *    struct with one wide load (memcpy of `size` bytes), which cannot be forwarded from the
 *    narrower stores that filled it and stalls until they retire (measured: a third of fib's time);
 *  - the call is direct (no function pointer), so the compiler inlines, keeps arguments in
 *    registers and returns the result in a register;
 *  - the deque's top travels in a register (a hidden parameter of every task function), and one
 *    bound, task_split, stands for the generic fast path's split, allstolen_o and fn tests (see
 *    below), so spawn and sync load no w->top and make two or three tests in all.
 * The frame layout, the thief protocol and every memory-ordering argument are those of the generic
 * frames (a typed frame's `fn` is a generated wrapper that a thief calls in place), so typed and
 * generic frames mix on one deque, and every slow path (publication, steals, leapfrogging,
 * detached jobs sitting above a frame) is the generic one. The typed fast paths add no atomic:
 * task_split and its marks are owner-private (docs/jobs.md, "Typed tasks").
 *
 * Contract: as jobs_forkjoin.h — owner only, LIFO (every JOBS_SPAWN matched by one JOBS_SYNC of
 * the same task, innermost first), arguments and result fit JOBS_FRAME_PAYLOAD bytes (checked at
 * compile time), spawn and sync wait-free while the frame is private. Because of the register copy
 * of top: generic frames spawned in a body (jobs_spawn) are joined before its next JOBS_SPAWN,
 * JOBS_SYNC or JOBS_CALL (spawn and join them in a function the body calls), and JOBS_SYNC does not
 * share an expression with another JOBS_* operation.
 */
#ifndef OVSTAGE_JOBS_TASK_H
#define OVSTAGE_JOBS_TASK_H

#include "jobs_forkjoin.h"

/* Plain `inline`, deliberately not always_inline: gcc then inlines spawn and sync in its IPA pass,
 * after function splitting has cut the task's leaf test (`if (n < 2) return n;`) off into a header
 * that callers inline, so leaf calls cost a compare instead of a call with six register saves.
 * With always_inline the sync's direct call is inlined early, tail-recursion elimination turns it
 * into a loop, and the split is refused ("incoming frequency is too large",
 * -fdump-tree-fnsplit-details): fib(34) took 37.6 ms instead of 25.3 ms (best of 15, 1 worker). */
#define JOBS_TASK_INLINE static inline __attribute__((unused))

/* The worker running the current task body. */
#define JOBS_WORKER jobs__w
/* Spawns task NAME(args...) onto this worker's deque. */
#define JOBS_SPAWN(NAME, ...) ((void)(jobs__top = NAME##_jobs_spawn(jobs__w, jobs__top, __VA_ARGS__)))
/* Joins the most recent spawn (of task NAME): its result (nothing for a void task). It moves the
 * body's copy of top: do not use it twice, or with JOBS_SPAWN/JOBS_CALL, in one expression. */
#define JOBS_SYNC(NAME) NAME##_jobs_sync(jobs__w, --jobs__top)
/* Calls task NAME(args...) directly, on this worker. */
#define JOBS_CALL(NAME, ...) NAME##_jobs_work(jobs__w, jobs__top, __VA_ARGS__)
/* Calls task NAME(args...) from code that holds a worker w (a job body, a generic frame); w is
 * evaluated twice. */
#define JOBS_TASK_RUN(w, NAME, ...) NAME##_jobs_work((w), (w)->top, __VA_ARGS__)

/*
 * `top` in a register (docs/jobs.md, "Typed tasks"): every task function receives the deque's top
 * as its hidden parameter jobs__top, JOBS_SPAWN and JOBS_SYNC move that copy, and the fast paths
 * address frames through it, never loading w->top. They still store w->top (the generic code and
 * the slow paths read it). The copy can only be stale when something else pushed a frame that is
 * still there (a detached job made ready by a call in the body); such pushes raise task_split
 * above the frame (jobs_task_mark_owner), so a stale copy fails the fast-path test below and the
 * slow path re-reads w->top.
 *
 * One bound, task_split = max(split, task_floor), stands for the generic fast paths' split,
 * allstolen_o and fn tests (split is end while every public frame is stolen). Spawn at t is fast iff t >= task_split (not all stolen, so no
 * publication is due, and no marked frame at or above t), t < end (room) and no thief asks for
 * frames (movesplit, relaxed as in jobs_spawn); sync of f iff f >= task_split (private, nothing
 * marked above it) and movesplit is clear.
 */

/* Spawn's fast path, shared by every task: FILL stores the arguments into the frame's payload
 * (plain stores; see jobs_spawn for why nothing else is needed while the frame is private). */
#define JOBS__SPAWN_BODY(NAME, FILL)                                                                \
	NAME##_jobs_frame *jobs__p = (NAME##_jobs_frame *)(void *)jobs__f->payload;                 \
	FILL                                                                                        \
	jobs__f->fn = NAME##_jobs_stolen;                                                           \
	jobs__f++;                                                                                  \
	jobs__w->top = jobs__f;                                                                     \
	return jobs__f;

/* relaxed: `movesplit` is a hint from thieves; seeing it late only delays publication. */
#define JOBS__MOVESPLIT(w) atomic_load_explicit(&(w)->movesplit, memory_order_relaxed)

/* The generated functions of a task. PARAMS: ", T1 a1, ..."; FIELDS: "T1 a1; ..."; FILL: stores
 * of the arguments into jobs__p; FROMP: ", jobs__p->a1, ..."; ARGS: ", a1, ..."; */
#define JOBS__TASK(R, NAME, PARAMS, FIELDS, FILL, FROMP, ARGS)                                     \
	typedef struct NAME##_jobs_frame {                                                          \
		JOBS__ID FIELDS                                                                     \
		R jobs__res;                                                                        \
	} NAME##_jobs_frame;                                                                        \
	_Static_assert(sizeof(NAME##_jobs_frame) <= JOBS_FRAME_PAYLOAD, #NAME "'s frame fits");     \
	_Static_assert(_Alignof(NAME##_jobs_frame) <= 16, #NAME "'s frame alignment");              \
	static R NAME##_jobs_work(jobs_worker *jobs__w, jobs_frame *jobs__top JOBS__ID PARAMS);     \
	/* A thief (or the generic slow path) runs the frame on its payload. */                     \
	static __attribute__((unused)) void NAME##_jobs_stolen(jobs_worker *jobs__w, void *jobs__pv) \
	{                                                                                           \
		NAME##_jobs_frame *jobs__p = jobs__pv;                                              \
		R jobs__r = NAME##_jobs_work(jobs__w, jobs__w->top JOBS__ID FROMP);                 \
		jobs__p->jobs__res = jobs__r;                                                       \
	}                                                                                           \
	JOBS__TASK_SPAWN(NAME, PARAMS, FILL, ARGS)                                                  \
	static __attribute__((noinline, unused)) R NAME##_jobs_sync_slow(jobs_worker *jobs__w)      \
	{                                                                                           \
		NAME##_jobs_frame jobs__fr;                                                         \
		jobs_sync(jobs__w, &jobs__fr, sizeof jobs__fr);                                     \
		jobs_task_unmark_owner(jobs__w);                                                    \
		return jobs__fr.jobs__res;                                                          \
	}                                                                                           \
	/* jobs__f: the frame to join (the body's copy of top, already decremented) */             \
	JOBS_TASK_INLINE R NAME##_jobs_sync(jobs_worker *jobs__w, jobs_frame *jobs__f)              \
	{                                                                                           \
		if (JOBS_LIKELY(jobs__f >= jobs__w->task_split && !JOBS__MOVESPLIT(jobs__w))) {     \
			jobs__w->top = jobs__f;                                                     \
			NAME##_jobs_frame *jobs__p = (NAME##_jobs_frame *)(void *)jobs__f->payload; \
			/* the arguments are read before the call: its spawns reuse the slot */     \
			return NAME##_jobs_work(jobs__w, jobs__f JOBS__ID FROMP);                   \
		}                                                                                   \
		return NAME##_jobs_sync_slow(jobs__w);                                              \
	}

/* Spawn, fast and slow. The slow one re-reads w->top (the copy may be stale), writes the frame
 * there and leaves publication, the overflow check and thieves' requests to the generic slow
 * path; it returns the new top, which becomes the body's copy. */
#define JOBS__TASK_SPAWN(NAME, PARAMS, FILL, ARGS)                                                 \
	static __attribute__((noinline, unused)) jobs_frame *NAME##_jobs_spawn_slow(                \
		jobs_worker *jobs__w JOBS__ID PARAMS)                                               \
	{                                                                                           \
		jobs_task_unmark_owner(jobs__w);                                                    \
		jobs_frame *jobs__f = jobs__w->top;                                                 \
		NAME##_jobs_frame *jobs__p = (NAME##_jobs_frame *)(void *)jobs__f->payload;         \
		JOBS__ID FILL                                                                       \
		jobs__f->fn = NAME##_jobs_stolen;                                                   \
		jobs__w->top = jobs__f + 1;                                                         \
		jobs_spawn_slow_owner(jobs__w);                                                     \
		return jobs__w->top;                                                                \
	}                                                                                           \
	/* jobs__f: the body's copy of top */                                                       \
	JOBS_TASK_INLINE jobs_frame *NAME##_jobs_spawn(jobs_worker *jobs__w, jobs_frame *jobs__f JOBS__ID PARAMS) \
	{                                                                                           \
		if (JOBS_LIKELY(jobs__f >= jobs__w->task_split && jobs__f < jobs__w->end &&         \
				!JOBS__MOVESPLIT(jobs__w))) {                                       \
			JOBS__SPAWN_BODY(NAME, JOBS__ID FILL)                                       \
		}                                                                                   \
		return NAME##_jobs_spawn_slow(jobs__w JOBS__ID ARGS);                               \
	}

#define JOBS__VOID_TASK(NAME, PARAMS, FIELDS, FILL, FROMP, ARGS)                                   \
	typedef struct NAME##_jobs_frame {                                                          \
		JOBS__ID FIELDS                                                                     \
	} NAME##_jobs_frame;                                                                        \
	_Static_assert(sizeof(NAME##_jobs_frame) <= JOBS_FRAME_PAYLOAD, #NAME "'s frame fits");     \
	_Static_assert(_Alignof(NAME##_jobs_frame) <= 16, #NAME "'s frame alignment");              \
	static void NAME##_jobs_work(jobs_worker *jobs__w, jobs_frame *jobs__top JOBS__ID PARAMS);  \
	static __attribute__((unused)) void NAME##_jobs_stolen(jobs_worker *jobs__w, void *jobs__pv) \
	{                                                                                           \
		NAME##_jobs_frame *jobs__p = jobs__pv;                                              \
		NAME##_jobs_work(jobs__w, jobs__w->top JOBS__ID FROMP);                             \
	}                                                                                           \
	JOBS__TASK_SPAWN(NAME, PARAMS, FILL, ARGS)                                                  \
	static __attribute__((noinline, unused)) void NAME##_jobs_sync_slow(jobs_worker *jobs__w)   \
	{                                                                                           \
		NAME##_jobs_frame jobs__fr;                                                         \
		jobs_sync(jobs__w, &jobs__fr, sizeof jobs__fr);                                     \
		jobs_task_unmark_owner(jobs__w);                                                    \
	}                                                                                           \
	JOBS_TASK_INLINE void NAME##_jobs_sync(jobs_worker *jobs__w, jobs_frame *jobs__f)           \
	{                                                                                           \
		if (JOBS_LIKELY(jobs__f >= jobs__w->task_split && !JOBS__MOVESPLIT(jobs__w))) {     \
			jobs__w->top = jobs__f;                                                     \
			NAME##_jobs_frame *jobs__p = (NAME##_jobs_frame *)(void *)jobs__f->payload; \
			NAME##_jobs_work(jobs__w, jobs__f JOBS__ID FROMP);                          \
			return;                                                                     \
		}                                                                                   \
		NAME##_jobs_sync_slow(jobs__w);                                                     \
	}

/* A list in parentheses, without them (lets a macro argument start with a comma). */
#define JOBS__ID(...) __VA_ARGS__
/* The hidden parameters of a task body may go unused (a task that spawns nothing). */
#define JOBS__UNUSED __attribute__((unused))

/* Arity 1..4. JOBS_TASK_DECL_k declares a task (use it before a task that calls it is defined, e.g.
 * for mutual recursion), JOBS_TASK_IMPL_k starts its definition, JOBS_TASK_k does both. */
#define JOBS_TASK_DECL_1(R, NAME, T1, A1) \
	JOBS__TASK(R, NAME, (, T1 A1), (T1 A1;), (jobs__p->A1 = A1;), (, jobs__p->A1), (, A1))
#define JOBS_TASK_IMPL_1(R, NAME, T1, A1) static R NAME##_jobs_work(jobs_worker *jobs__w, jobs_frame *jobs__top JOBS__UNUSED, T1 A1)
#define JOBS_TASK_1(R, NAME, T1, A1) JOBS_TASK_DECL_1(R, NAME, T1, A1) JOBS_TASK_IMPL_1(R, NAME, T1, A1)
#define JOBS_TASK_DECL_2(R, NAME, T1, A1, T2, A2) \
	JOBS__TASK(R, NAME, (, T1 A1, T2 A2), (T1 A1; T2 A2;), (jobs__p->A1 = A1; jobs__p->A2 = A2;), (, jobs__p->A1, jobs__p->A2), (, A1, A2))
#define JOBS_TASK_IMPL_2(R, NAME, T1, A1, T2, A2) static R NAME##_jobs_work(jobs_worker *jobs__w, jobs_frame *jobs__top JOBS__UNUSED, T1 A1, T2 A2)
#define JOBS_TASK_2(R, NAME, T1, A1, T2, A2) JOBS_TASK_DECL_2(R, NAME, T1, A1, T2, A2) JOBS_TASK_IMPL_2(R, NAME, T1, A1, T2, A2)
#define JOBS_TASK_DECL_3(R, NAME, T1, A1, T2, A2, T3, A3) \
	JOBS__TASK(R, NAME, (, T1 A1, T2 A2, T3 A3), (T1 A1; T2 A2; T3 A3;), (jobs__p->A1 = A1; jobs__p->A2 = A2; jobs__p->A3 = A3;), (, jobs__p->A1, jobs__p->A2, jobs__p->A3), (, A1, A2, A3))
#define JOBS_TASK_IMPL_3(R, NAME, T1, A1, T2, A2, T3, A3) static R NAME##_jobs_work(jobs_worker *jobs__w, jobs_frame *jobs__top JOBS__UNUSED, T1 A1, T2 A2, T3 A3)
#define JOBS_TASK_3(R, NAME, T1, A1, T2, A2, T3, A3) JOBS_TASK_DECL_3(R, NAME, T1, A1, T2, A2, T3, A3) JOBS_TASK_IMPL_3(R, NAME, T1, A1, T2, A2, T3, A3)
#define JOBS_TASK_DECL_4(R, NAME, T1, A1, T2, A2, T3, A3, T4, A4) \
	JOBS__TASK(R, NAME, (, T1 A1, T2 A2, T3 A3, T4 A4), (T1 A1; T2 A2; T3 A3; T4 A4;), (jobs__p->A1 = A1; jobs__p->A2 = A2; jobs__p->A3 = A3; jobs__p->A4 = A4;), (, jobs__p->A1, jobs__p->A2, jobs__p->A3, jobs__p->A4), (, A1, A2, A3, A4))
#define JOBS_TASK_IMPL_4(R, NAME, T1, A1, T2, A2, T3, A3, T4, A4) static R NAME##_jobs_work(jobs_worker *jobs__w, jobs_frame *jobs__top JOBS__UNUSED, T1 A1, T2 A2, T3 A3, T4 A4)
#define JOBS_TASK_4(R, NAME, T1, A1, T2, A2, T3, A3, T4, A4) JOBS_TASK_DECL_4(R, NAME, T1, A1, T2, A2, T3, A3, T4, A4) JOBS_TASK_IMPL_4(R, NAME, T1, A1, T2, A2, T3, A3, T4, A4)
#define JOBS_VOID_TASK_DECL_1(NAME, T1, A1) \
	JOBS__VOID_TASK(NAME, (, T1 A1), (T1 A1;), (jobs__p->A1 = A1;), (, jobs__p->A1), (, A1))
#define JOBS_VOID_TASK_IMPL_1(NAME, T1, A1) static void NAME##_jobs_work(jobs_worker *jobs__w, jobs_frame *jobs__top JOBS__UNUSED, T1 A1)
#define JOBS_VOID_TASK_1(NAME, T1, A1) JOBS_VOID_TASK_DECL_1(NAME, T1, A1) JOBS_VOID_TASK_IMPL_1(NAME, T1, A1)
#define JOBS_VOID_TASK_DECL_2(NAME, T1, A1, T2, A2) \
	JOBS__VOID_TASK(NAME, (, T1 A1, T2 A2), (T1 A1; T2 A2;), (jobs__p->A1 = A1; jobs__p->A2 = A2;), (, jobs__p->A1, jobs__p->A2), (, A1, A2))
#define JOBS_VOID_TASK_IMPL_2(NAME, T1, A1, T2, A2) static void NAME##_jobs_work(jobs_worker *jobs__w, jobs_frame *jobs__top JOBS__UNUSED, T1 A1, T2 A2)
#define JOBS_VOID_TASK_2(NAME, T1, A1, T2, A2) JOBS_VOID_TASK_DECL_2(NAME, T1, A1, T2, A2) JOBS_VOID_TASK_IMPL_2(NAME, T1, A1, T2, A2)
#define JOBS_VOID_TASK_DECL_3(NAME, T1, A1, T2, A2, T3, A3) \
	JOBS__VOID_TASK(NAME, (, T1 A1, T2 A2, T3 A3), (T1 A1; T2 A2; T3 A3;), (jobs__p->A1 = A1; jobs__p->A2 = A2; jobs__p->A3 = A3;), (, jobs__p->A1, jobs__p->A2, jobs__p->A3), (, A1, A2, A3))
#define JOBS_VOID_TASK_IMPL_3(NAME, T1, A1, T2, A2, T3, A3) static void NAME##_jobs_work(jobs_worker *jobs__w, jobs_frame *jobs__top JOBS__UNUSED, T1 A1, T2 A2, T3 A3)
#define JOBS_VOID_TASK_3(NAME, T1, A1, T2, A2, T3, A3) JOBS_VOID_TASK_DECL_3(NAME, T1, A1, T2, A2, T3, A3) JOBS_VOID_TASK_IMPL_3(NAME, T1, A1, T2, A2, T3, A3)
#define JOBS_VOID_TASK_DECL_4(NAME, T1, A1, T2, A2, T3, A3, T4, A4) \
	JOBS__VOID_TASK(NAME, (, T1 A1, T2 A2, T3 A3, T4 A4), (T1 A1; T2 A2; T3 A3; T4 A4;), (jobs__p->A1 = A1; jobs__p->A2 = A2; jobs__p->A3 = A3; jobs__p->A4 = A4;), (, jobs__p->A1, jobs__p->A2, jobs__p->A3, jobs__p->A4), (, A1, A2, A3, A4))
#define JOBS_VOID_TASK_IMPL_4(NAME, T1, A1, T2, A2, T3, A3, T4, A4) static void NAME##_jobs_work(jobs_worker *jobs__w, jobs_frame *jobs__top JOBS__UNUSED, T1 A1, T2 A2, T3 A3, T4 A4)
#define JOBS_VOID_TASK_4(NAME, T1, A1, T2, A2, T3, A3, T4, A4) JOBS_VOID_TASK_DECL_4(NAME, T1, A1, T2, A2, T3, A3, T4, A4) JOBS_VOID_TASK_IMPL_4(NAME, T1, A1, T2, A2, T3, A3, T4, A4)

#endif /* OVSTAGE_JOBS_TASK_H */
