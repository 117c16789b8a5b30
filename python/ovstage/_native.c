/*
 * ovstage/_native.c — the CPython extension behind `import ovstage`: a binding of the ovstage C API
 * (include/ovstage/ headers) with zero-copy DLPack in both directions.
 *
 * Object model (every rule here exists so that bad input raises instead of crashing):
 *  - StageBase owns one ovstage_instance_t. Every object that holds an engine resource (a live op id,
 *    a query / read / map / ordinal-query handle, an unreleased read group) holds a strong reference
 *    to its StageBase and sits in the stage's `live` list. destroy() marks the stage closed (the API
 *    then refuses every call), waits and releases what the list holds, and destroys the instance when
 *    the list is empty; a read group still viewed by a numpy array or a DLPack consumer stays pinned,
 *    and the instance goes when the last such view goes.
 *  - Operation keeps everything a submitted op borrows (tensor descriptors, index maps, masks, the
 *    producers' DLPack capsules) until the op is waited; an Operation collected unwaited waits for
 *    its op first (the engine reads those inputs until the op completes).
 *  - A read group's array(i) / dlpack(i) views hold a Pin; release_group() makes the group refuse
 *    further access at once and gives the group back to the engine when the last Pin goes, so a view
 *    never outlives its memory. A map group's views must be gone before unmap (the engine takes the
 *    buffer at unmap): unmap refuses while any is alive.
 *  - The GIL is released around every call that can wait or copy; long waits run in slices of
 *    OVS_SLICE_NS so that Ctrl-C raises KeyboardInterrupt and leaves the op and the stage usable.
 *  - No Python object is touched by an engine thread: the engine is given client-managed tensors
 *    (never a Python deleter), and the log trampoline takes the GIL before it calls back.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include <ovstage/ovstage.h>
#include <ovstage/ovstage_ext.h>
#include <ovx/path_dictionary/path_dictionary.h>

#define OVS_SLICE_NS 50000000ull  /* 50 ms: how often a long wait checks for signals */
#define OVS_GIL_COPY_BYTES 65536u /* writes copying more than this release the GIL */
#define OVS_MAX_NDIM 32

/* ---- Module state (one interpreter) --------------------------------------------------------- */

static PyObject *g_error_class;     /* ovstage.OvstageError, registered from Python */
static PyObject *g_ovx_error_class; /* ovstage.OvxError */
static PyObject *g_query_result_class, *g_attribute_meta_class, *g_dldatatype_class;
static PyObject *g_hier_item_class, *g_hier_result_class, *g_hier_model_class;
static PyObject *g_log_callback; /* current Python log callback, or NULL */
static PyObject *s_dlpack, *s_dlpack_device, *s_max_version, *s_stream, *s_version_tuple;
static PyObject *s_attribute, *s_tensors, *s_is_array, *s_index_map, *s_mask, *s_count, *s_cuda_event,
	*s_cuda_stream, *s_semantic, *s_end_ordinal, *s_start_ordinal, *s_predicates, *s_op, *s_values, *s_code,
	*s_bits, *s_lanes, *s_ptr, *s_cuda_event_attr, *s_cuda_stream_attr;

static const char *status_name(int code)
{
	switch (code) {
	case OVSTAGE_OK: return "OK";
	case OVSTAGE_ERROR_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
	case OVSTAGE_ERROR_INVALID_HANDLE: return "INVALID_HANDLE";
	case OVSTAGE_ERROR_NOT_FOUND: return "NOT_FOUND";
	case OVSTAGE_ERROR_PRIM_NOT_FOUND: return "PRIM_NOT_FOUND";
	case OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION: return "WRITE_FLOOR_VIOLATION";
	case OVSTAGE_ERROR_NOT_SUPPORTED: return "NOT_SUPPORTED";
	case OVSTAGE_ERROR_QUEUE_FULL: return "QUEUE_FULL";
	case OVSTAGE_ERROR_END_OF_ITERATION: return "END_OF_ITERATION";
	case OVSTAGE_ERROR_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
	case OVSTAGE_ERROR_LAYOUT_CHANGED: return "LAYOUT_CHANGED";
	case OVSTAGE_ERROR_TIMEOUT: return "TIMEOUT";
	case OVSTAGE_ERROR_OP_FAILED: return "OP_FAILED";
	case OVSTAGE_ERROR_OUT_OF_RANGE: return "OUT_OF_RANGE";
	case OVSTAGE_ERROR_INTERNAL: return "INTERNAL";
	default: return "UNKNOWN";
	}
}

/* Raises OvstageError(code, message). Returns NULL. */
static PyObject *raise_code(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
	va_end(ap);
	if (!msg)
		return NULL;
	PyObject *cls = g_error_class ? g_error_class : PyExc_RuntimeError;
	PyObject *exc = PyObject_CallFunction(cls, "iO", code, msg);
	Py_DECREF(msg);
	if (exc) {
		PyErr_SetObject(cls, exc);
		Py_DECREF(exc);
	}
	return NULL;
}

/* The thread-local detail of the last synchronous failure (ovstage_get_last_error), or a fallback. */
static PyObject *raise_last(int code, const char *what)
{
	ovx_string_t e = ovstage_get_last_error();
	if (e.ptr && e.length) {
		PyObject *detail = PyUnicode_DecodeUTF8(e.ptr, (Py_ssize_t)e.length, "replace");
		if (!detail)
			return NULL;
		raise_code(code, "%s: %U", what, detail);
		Py_DECREF(detail);
		return NULL;
	}
	return raise_code(code, "%s failed (%s)", what, status_name(code));
}

static PyObject *raise_ovx(path_dictionary_instance_t *pd, ovx_api_result_t r, const char *what)
{
	PyObject *msg;
	if (r.error.ptr && r.error.length) {
		PyObject *detail = PyUnicode_DecodeUTF8(r.error.ptr, (Py_ssize_t)r.error.length, "replace");
		msg = detail ? PyUnicode_FromFormat("%s: %U", what, detail) : NULL;
		Py_XDECREF(detail);
	} else
		msg = PyUnicode_FromFormat("%s failed", what);
	if (r.error.ptr)
		path_dictionary_release_error(pd, r.error);
	if (!msg)
		return NULL;
	PyObject *cls = g_ovx_error_class ? g_ovx_error_class : PyExc_RuntimeError;
	PyObject *exc = PyObject_CallFunction(cls, "iO", (int)r.status, msg);
	Py_DECREF(msg);
	if (exc) {
		PyErr_SetObject(cls, exc);
		Py_DECREF(exc);
	}
	return NULL;
}

/* ---- Argument helpers --------------------------------------------------------------------- */

/*
 * The signature of a METH_FASTCALL | METH_KEYWORDS function, as a table: its parameters in order,
 * how many may be given positionally (npos) and how many are required (nreq), and what each
 * converts into. parse_call (below) takes one out pointer per parameter:
 *   A_OBJ(name)          PyObject ** (borrowed; NULL when not given)
 *   A_U64(name)          uint64_t *      parse_u64 (ints only, no negatives)
 *   A_TIMEOUT            uint64_t *      parse_timeout ("timeout"; absent or None: TIMEOUT_INFINITE)
 *   A_ATTR(name)         ovx_string_or_token_t *   parse_attr (a name or token)
 *   A_ENUM(name, lo, hi) int *           parse_enum
 *   A_HANDLE(name, type) uint64_t *      get_handle: an ovstage handle object of `type` of this stage
 *                                        (or a raw int handle)
 * A stage method passes its stage (checked first: a destroyed one raises INVALID_HANDLE); other
 * functions pass NULL and have no A_HANDLE parameters. An optional parameter that is absent or None
 * keeps the caller's default (an attribute: zeroed, the empty attribute); a required one given as
 * None goes to its converter, which refuses it.
 */
enum { K_OBJ, K_U64, K_TIMEOUT, K_ATTR, K_ENUM, K_HANDLE };
typedef struct {
	const char *name;
	int kind, lo, hi;
	PyTypeObject *type; /* K_HANDLE */
} param;
#define OVS_MAX_PARAMS 12
typedef struct {
	const char *fn;
	int npos, nreq, n;
	param p[OVS_MAX_PARAMS];
	PyObject *kw[OVS_MAX_PARAMS]; /* the names, interned on first use (under the GIL) */
} signature;
#define A_OBJ(name) { name, K_OBJ, 0, 0, NULL }
#define A_U64(name) { name, K_U64, 0, 0, NULL }
#define A_TIMEOUT { "timeout", K_TIMEOUT, 0, 0, NULL }
#define A_ATTR(name) { name, K_ATTR, 0, 0, NULL }
#define A_ENUM(name, lo, hi) { name, K_ENUM, lo, hi, NULL }
#define A_HANDLE(name, type) { name, K_HANDLE, 0, 0, type }
#define SIGNATURE(fn, npos, nreq, ...)                                                                       \
	{ fn, npos, nreq, (int)(sizeof((param[]){ __VA_ARGS__ }) / sizeof(param)), { __VA_ARGS__ }, { NULL } }

/* Places fastcall arguments into out[0..s->n) by position and keyword; missing ones are NULL. */
static int match_args(signature *s, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
	for (int i = 0; i < s->n; i++)
		out[i] = i < nargs ? args[i] : NULL;
	if (nargs > s->npos) {
		PyErr_Format(PyExc_TypeError, "%s() takes at most %d positional arguments (%zd given)", s->fn, s->npos,
			     nargs);
		return -1;
	}
	Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
	if (nk && !s->kw[0])
		for (int i = s->n - 1; i >= 0; i--) /* kw[0] last: it says all are there */
			if (!(s->kw[i] = PyUnicode_InternFromString(s->p[i].name)))
				return -1;
	for (Py_ssize_t k = 0; k < nk; k++) {
		PyObject *key = PyTuple_GET_ITEM(kwnames, k);
		int found = -1;
		for (int i = 0; i < s->n && found < 0; i++) /* call sites' keywords are interned: pointers first */
			if (key == s->kw[i])
				found = i;
		for (int i = 0; i < s->n && found < 0; i++)
			if (PyUnicode_Compare(key, s->kw[i]) == 0)
				found = i;
		if (found < 0) {
			PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", s->fn, key);
			return -1;
		}
		if (out[found]) {
			PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", s->fn,
				     s->p[found].name);
			return -1;
		}
		out[found] = args[nargs + k];
	}
	for (int i = 0; i < s->nreq; i++)
		if (!out[i]) {
			PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", s->fn, s->p[i].name);
			return -1;
		}
	return 0;
}

struct StageObject;
/* Parses a call by its signature into out[i], one pointer per parameter, given as OUTS(&a, &b, ...)
 * (defined with the handles). */
static int parse_call(signature *s, struct StageObject *st, PyObject *const *args, Py_ssize_t nargs,
		      PyObject *kwnames, void *const *out, int nout);
#define OUTS(...) (void *const[]){ __VA_ARGS__ }, (int)(sizeof((void *[]){ __VA_ARGS__ }) / sizeof(void *))

/* An unsigned 64-bit integer argument: ints (and __index__ objects) only, no floats, no negatives. */
static int parse_u64(PyObject *o, const char *what, uint64_t *out)
{
	if (!o || o == Py_None) {
		PyErr_Format(PyExc_TypeError, "%s must be an int, got None", what);
		return -1;
	}
	if (PyLong_CheckExact(o)) {
		unsigned long long v = PyLong_AsUnsignedLongLong(o);
		if (v == (unsigned long long)-1 && PyErr_Occurred())
			goto range;
		*out = v;
		return 0;
	}
	if (PyFloat_Check(o) || !PyIndex_Check(o)) {
		PyErr_Format(PyExc_TypeError, "%s must be an int, got %.80s %R", what, Py_TYPE(o)->tp_name, o);
		return -1;
	}
	PyObject *i = PyNumber_Index(o);
	if (!i)
		return -1;
	unsigned long long v = PyLong_AsUnsignedLongLong(i);
	Py_DECREF(i);
	if (v == (unsigned long long)-1 && PyErr_Occurred())
		goto range;
	*out = v;
	return 0;
range:
	PyErr_Clear();
	PyErr_Format(PyExc_ValueError, "%s must be in [0, 2**64 - 1], got %R", what, o);
	return -1;
}

static int parse_u32(PyObject *o, const char *what, uint32_t *out)
{
	uint64_t v;
	if (parse_u64(o, what, &v) < 0)
		return -1;
	if (v > UINT32_MAX) {
		PyErr_Format(PyExc_ValueError, "%s must be in [0, 2**32 - 1], got %R", what, o);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

/* A small non-negative enum-like int (IntEnum members are ints). */
static int parse_enum(PyObject *o, const char *what, int lo, int hi, int *out)
{
	uint64_t v;
	if (PyBool_Check(o)) {
		PyErr_Format(PyExc_TypeError, "%s must be an int enum value, got bool", what);
		return -1;
	}
	if (parse_u64(o, what, &v) < 0)
		return -1;
	if ((int64_t)v < lo || v > (uint64_t)hi) {
		PyErr_Format(PyExc_ValueError, "%s must be in [%d, %d], got %R", what, lo, hi, o);
		return -1;
	}
	*out = (int)v;
	return 0;
}

static int parse_timeout(PyObject *o, uint64_t *out)
{
	if (!o || o == Py_None) {
		*out = OVSTAGE_TIMEOUT_INFINITE;
		return 0;
	}
	return parse_u64(o, "timeout (nanoseconds)", out);
}

static int parse_bool(PyObject *o, const char *what, bool *out)
{
	if (!PyBool_Check(o)) {
		PyErr_Format(PyExc_TypeError, "%s must be True or False, got %.80s %R", what, Py_TYPE(o)->tp_name, o);
		return -1;
	}
	*out = o == Py_True;
	return 0;
}

/* An attribute name (str) or interned token (int). The string view borrows `o`. */
static int parse_attr(PyObject *o, const char *what, ovx_string_or_token_t *out)
{
	memset(out, 0, sizeof *out);
	if (o && PyUnicode_Check(o)) {
		Py_ssize_t n;
		const char *s = PyUnicode_AsUTF8AndSize(o, &n);
		if (!s)
			return -1;
		if (n == 0) {
			PyErr_Format(PyExc_ValueError, "%s must not be empty", what);
			return -1;
		}
		out->string.ptr = s;
		out->string.length = (size_t)n;
		return 0;
	}
	if (o && (PyLong_Check(o) || (PyIndex_Check(o) && !PyFloat_Check(o))) && !PyBool_Check(o)) {
		if (parse_u64(o, what, &out->token) < 0)
			return -1;
		if (out->token == 0) {
			PyErr_Format(PyExc_ValueError, "%s: token 0 is the invalid token", what);
			return -1;
		}
		return 0;
	}
	PyErr_Format(PyExc_TypeError, "%s must be a str or an int token, got %.80s %R", what,
		     o ? Py_TYPE(o)->tp_name : "NULL", o ? o : Py_None);
	return -1;
}

/* A CUDA stream or event argument: None, an int handle, or an object with .ptr (CuPy) or
 * .cuda_stream / .cuda_event (PyTorch). */
static int parse_cuda_handle(PyObject *o, const char *what, PyObject *attr, uintptr_t *out)
{
	*out = 0;
	if (!o || o == Py_None)
		return 0;
	PyObject *v = NULL;
	if (PyLong_Check(o)) {
		v = o;
		Py_INCREF(v);
	} else {
		v = PyObject_GetAttr(o, attr);
		if (!v) {
			PyErr_Clear();
			v = PyObject_GetAttr(o, s_ptr);
		}
		if (!v) {
			PyErr_Clear();
			PyErr_Format(PyExc_TypeError, "%s must be None, an int handle or a stream/event object, got %.80s",
				     what, Py_TYPE(o)->tp_name);
			return -1;
		}
	}
	uint64_t h;
	int rc = parse_u64(v, what, &h);
	Py_DECREF(v);
	if (rc < 0)
		return -1;
	*out = (uintptr_t)h;
	return 0;
}

/* ---- Arena: memory an op borrows until it completes ----------------------------------------- */

typedef struct arena_block {
	struct arena_block *next;
	max_align_t data[];
} arena_block;

static void *arena_alloc(arena_block **a, size_t size)
{
	arena_block *b = PyMem_RawMalloc(sizeof *b + (size ? size : 1));
	if (!b) {
		PyErr_NoMemory();
		return NULL;
	}
	b->next = *a;
	*a = b;
	memset(b->data, 0, size);
	return b->data;
}

static void arena_free(arena_block *a)
{
	while (a) {
		arena_block *n = a->next;
		PyMem_RawFree(a);
		a = n;
	}
}

/* ---- Tracked objects ---------------------------------------------------------------------- */

struct StageObject;

#define TRACKED_HEAD                                                                                         \
	PyObject_HEAD struct Tracked *tprev, *tnext;                                                         \
	struct StageObject *stage;                                                                           \
	int tracked;                                                                                         \
	int tkind

typedef struct Tracked {
	TRACKED_HEAD;
} Tracked;

enum { T_OP, T_QUERY, T_READ, T_MAP, T_ORDQ, T_RGROUP, T_HIER };

typedef struct StageObject {
	PyObject_HEAD PyObject *weakreflist;
	PyObject *dict;
	ovstage_instance_t *inst;
	path_dictionary_instance_t *pd;
	Tracked *live; /* head of the list of objects holding engine resources */
	Py_ssize_t nlive;
	int closed;      /* destroy() called: the API refuses every call */
	int busy;        /* calls in flight with the GIL released */
	int initialized; /* holds an ovstage_initialize reference */
	PyObject *name;
	uint64_t pd_epoch; /* the path dictionary generation it was created in (see g_pd_epoch) */
} StageObject;

/*
 * The path dictionary is shared by all live instances: made with the first, destroyed with the
 * last. The binding counts the instances it holds and numbers the dictionary's generations: when
 * its count drops to zero the dictionary may be gone, so the next instance starts a new epoch.
 * Two stages of one epoch have shared one dictionary all along (PathDictionary falls back to such
 * a stage when its own is destroyed); instances made outside the binding only keep a dictionary
 * alive longer, so the numbering is conservative. Creates and destroys are serialised by
 * g_instances_lock (taken with the GIL released) so that a count and the engine agree.
 */
static pthread_mutex_t g_instances_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_instances;          /* guarded by g_instances_lock */
static _Atomic uint64_t g_pd_epoch = 1; /* written under g_instances_lock */

static void track(StageObject *st, Tracked *t, int kind)
{
	t->tkind = kind;
	t->tprev = NULL;
	t->tnext = st->live;
	if (st->live)
		st->live->tprev = t;
	st->live = t;
	t->tracked = 1;
	st->nlive++;
}

static void stage_maybe_finalize(StageObject *st);

static void untrack(Tracked *t)
{
	if (!t->tracked)
		return;
	StageObject *st = t->stage;
	if (t->tprev)
		t->tprev->tnext = t->tnext;
	else
		st->live = t->tnext;
	if (t->tnext)
		t->tnext->tprev = t->tprev;
	t->tprev = t->tnext = NULL;
	t->tracked = 0;
	st->nlive--;
	if (st->closed)
		stage_maybe_finalize(st);
}

static int stage_check(StageObject *st)
{
	if (!st->inst || st->closed) {
		raise_code(OVSTAGE_ERROR_INVALID_HANDLE, "the stage %R is destroyed", st->name ? st->name : Py_None);
		return -1;
	}
	return 0;
}

/* A METH_O stage method's one unsigned int argument, after the stage check. */
static int stage_u64_arg(StageObject *st, PyObject *arg, const char *what, uint64_t *out)
{
	return stage_check(st) < 0 || parse_u64(arg, what, out) < 0 ? -1 : 0;
}

/* Brackets an engine call made with the GIL released; destroy() waits for `busy` to drain. */
#define BUSY_BEGIN(st)                                                                                       \
	{                                                                                                    \
		StageObject *busy_st_ = (st);                                                                \
		busy_st_->busy++;                                                                            \
		Py_BEGIN_ALLOW_THREADS
#define BUSY_END                                                                                             \
	Py_END_ALLOW_THREADS busy_st_->busy--;                                                               \
	}

/* ---- DLTensor: an imported (or folded) DLPack tensor ---------------------------------------- */

typedef struct {
	PyObject_HEAD DLTensor t;
	void *managed;     /* DLManagedTensorVersioned* or DLManagedTensor* whose deleter we call, or NULL */
	int versioned;
	uint64_t flags;    /* DLPack flags of a versioned capsule */
	int64_t *own;      /* shape and strides of an overridden layout (2 * ndim), or NULL */
	PyObject *owner;   /* what keeps the data alive when `managed` is NULL (a source DLTensor, a Pin) */
	uintptr_t stream;  /* the consumer stream handed to a CUDA producer (0 for CPU) */
	uintptr_t event;   /* a CUDA event the data are ready after (a device read group's), or 0 */
	PyObject *stream_obj; /* the stream object `stream` came from (kept alive with the tensor), or NULL */
} DLTensorObject;

static PyTypeObject DLTensorType;

static void dltensor_dealloc(DLTensorObject *self)
{
	if (self->managed) {
		if (self->versioned) {
			DLManagedTensorVersioned *m = self->managed;
			if (m->deleter)
				m->deleter(m);
		} else {
			DLManagedTensor *m = self->managed;
			if (m->deleter)
				m->deleter(m);
		}
	}
	PyMem_Free(self->own);
	Py_XDECREF(self->owner);
	Py_XDECREF(self->stream_obj);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static int is_cuda_device(int type)
{
	return type == kDLCUDA || type == kDLCUDAManaged;
}

/* Consumes a DLPack capsule (renamed "used_..." once taken) into a new DLTensor object. */
static PyObject *dltensor_from_capsule(PyObject *cap, uintptr_t stream)
{
	if (!PyCapsule_CheckExact(cap)) {
		PyErr_Format(PyExc_TypeError, "__dlpack__() returned %.80s, not a DLPack capsule", Py_TYPE(cap)->tp_name);
		return NULL;
	}
	const char *name = PyCapsule_GetName(cap);
	if (!name && PyErr_Occurred())
		return NULL;
	DLTensorObject *o = PyObject_New(DLTensorObject, &DLTensorType);
	if (!o)
		return NULL;
	o->managed = NULL;
	o->own = NULL;
	o->owner = NULL;
	o->flags = 0;
	o->versioned = 0;
	o->stream = stream;
	o->event = 0;
	o->stream_obj = NULL;
	if (name && strcmp(name, "dltensor_versioned") == 0) {
		DLManagedTensorVersioned *m = PyCapsule_GetPointer(cap, name);
		if (!m)
			goto fail;
		if (m->version.major != 1) {
			/* Only the deleter may be touched: leave the capsule unconsumed, its destructor calls it. */
			PyErr_Format(PyExc_BufferError, "DLPack version %u.%u is not supported (this binding reads 1.x)",
				     (unsigned)m->version.major, (unsigned)m->version.minor);
			goto fail;
		}
		if (PyCapsule_SetName(cap, "used_dltensor_versioned") < 0)
			goto fail;
		o->managed = m;
		o->versioned = 1;
		o->flags = m->flags;
		o->t = m->dl_tensor;
	} else if (name && strcmp(name, "dltensor") == 0) {
		DLManagedTensor *m = PyCapsule_GetPointer(cap, name);
		if (!m)
			goto fail;
		if (PyCapsule_SetName(cap, "used_dltensor") < 0)
			goto fail;
		o->managed = m;
		o->t = m->dl_tensor;
	} else {
		PyErr_Format(PyExc_BufferError, "capsule named %s is not an unconsumed DLPack tensor "
			     "(\"dltensor\" or \"dltensor_versioned\")", name ? name : "NULL");
		goto fail;
	}
	if (o->t.ndim < 0 || o->t.ndim > OVS_MAX_NDIM || (o->t.ndim > 0 && !o->t.shape)) {
		PyErr_Format(PyExc_BufferError, "DLPack tensor has an invalid ndim %d or no shape", (int)o->t.ndim);
		Py_DECREF(o); /* consumed: the dealloc calls the producer's deleter */
		return NULL;
	}
	return (PyObject *)o;
fail:
	Py_DECREF(o);
	return NULL;
}

/* Calls obj.__dlpack__ as a consumer: versioned capsule preferred (max_version=(1, 0)), legacy
 * accepted (TypeError from an older producer); `stream` is passed only for CUDA producers. */
static PyObject *ingest_dlpack(PyObject *obj, PyObject *stream_arg, const char *what)
{
	int dev_type = kDLCPU;
	if (!PyArray_Check(obj)) {
		PyObject *dev = PyObject_CallMethodNoArgs(obj, s_dlpack_device);
		if (dev) {
			if (!PyTuple_Check(dev) || PyTuple_GET_SIZE(dev) != 2) {
				PyErr_Format(PyExc_TypeError, "%s: __dlpack_device__() must return (device_type, device_id)",
					     what);
				Py_DECREF(dev);
				return NULL;
			}
			dev_type = (int)PyLong_AsLong(PyTuple_GET_ITEM(dev, 0));
			Py_DECREF(dev);
			if (dev_type == -1 && PyErr_Occurred())
				return NULL;
		} else if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
			PyErr_Clear();
		} else {
			return NULL;
		}
	}
	PyObject *meth = PyObject_GetAttr(obj, s_dlpack);
	if (!meth) {
		if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
			PyErr_Clear();
			PyErr_Format(PyExc_TypeError,
				     "%s: %.80s object is not a tensor (no __dlpack__; pass a numpy array, a DLPack "
				     "producer or an ovstage.DLTensor)",
				     what, Py_TYPE(obj)->tp_name);
		}
		return NULL;
	}
	uintptr_t stream = 0;
	int cuda = is_cuda_device(dev_type);
	if (cuda) {
		/* The DLPack consumer rule: name the stream we will read on (an int; None would mean the
		 * legacy default too, but we say it). 0 is ambiguous in the protocol and is the ABI's
		 * "none": both become 1, the legacy default stream. -1 ("no synchronisation") is refused:
		 * the stage must be able to order its copy after the producer's work. */
		if (stream_arg && PyLong_Check(stream_arg) && !PyBool_Check(stream_arg)) {
			int ovf = 0;
			long long v = PyLong_AsLongLongAndOverflow(stream_arg, &ovf);
			if (!ovf && v < 0) {
				Py_DECREF(meth);
				PyErr_Format(PyExc_ValueError, "%s: stream must be a CUDA stream handle (1 = legacy default, 2 "
					     "= per-thread default, or a cudaStream_t), got %R", what, stream_arg);
				return NULL;
			}
		}
		if (parse_cuda_handle(stream_arg, "stream", s_cuda_stream_attr, &stream) < 0) {
			Py_DECREF(meth);
			return NULL;
		}
		if (stream == 0)
			stream = 1;
	} /* a CPU producer is called without stream= (the protocol's rule); a write's cuda_stream still
	   * goes to its cuda_sync */
	PyObject *kw = PyDict_New();
	if (!kw) {
		Py_DECREF(meth);
		return NULL;
	}
	if (cuda) {
		PyObject *sv = PyLong_FromUnsignedLongLong((unsigned long long)stream);
		if (!sv || PyDict_SetItem(kw, s_stream, sv) < 0) {
			Py_XDECREF(sv);
			Py_DECREF(kw);
			Py_DECREF(meth);
			return NULL;
		}
		Py_DECREF(sv);
	}
	PyObject *cap = NULL;
	if (PyDict_SetItem(kw, s_max_version, s_version_tuple) == 0) {
		PyObject *empty = PyTuple_New(0);
		if (empty) {
			cap = PyObject_Call(meth, empty, kw);
			if (!cap && PyErr_ExceptionMatches(PyExc_TypeError)) {
				/* A pre-1.0 producer: no max_version keyword. */
				PyErr_Clear();
				PyDict_DelItem(kw, s_max_version);
				cap = PyObject_Call(meth, empty, kw);
			}
			Py_DECREF(empty);
		}
	}
	Py_DECREF(kw);
	Py_DECREF(meth);
	if (!cap)
		return NULL;
	PyObject *t = dltensor_from_capsule(cap, stream);
	Py_DECREF(cap);
	if (t && cuda && stream_arg && stream_arg != Py_None && !PyLong_Check(stream_arg)) {
		Py_INCREF(stream_arg); /* a stream object: alive as long as the tensor that names it */
		((DLTensorObject *)t)->stream_obj = stream_arg;
	}
	return t;
}

/* A tensor argument as a DLTensor object (new reference): DLTensor passes through, anything else is
 * taken through the DLPack protocol. */
static PyObject *as_dltensor(PyObject *obj, PyObject *stream_arg, const char *what)
{
	if (Py_TYPE(obj) == &DLTensorType) {
		Py_INCREF(obj);
		return obj;
	}
	return ingest_dlpack(obj, stream_arg, what);
}

static PyObject *dltype_tuple(DLDataType d)
{
	if (g_dldatatype_class)
		return PyObject_CallFunction(g_dldatatype_class, "iii", (int)d.code, (int)d.bits, (int)d.lanes);
	return Py_BuildValue("(iii)", (int)d.code, (int)d.bits, (int)d.lanes);
}

static PyObject *dltensor_shape(DLTensorObject *self, void *c)
{
	(void)c;
	PyObject *t = PyTuple_New(self->t.ndim);
	for (int i = 0; t && i < self->t.ndim; i++)
		PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(self->t.shape[i]));
	return t;
}

static PyObject *dltensor_strides(DLTensorObject *self, void *c)
{
	(void)c;
	if (!self->t.strides)
		Py_RETURN_NONE;
	PyObject *t = PyTuple_New(self->t.ndim);
	for (int i = 0; t && i < self->t.ndim; i++)
		PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(self->t.strides[i]));
	return t;
}

static PyObject *dltensor_dtype(DLTensorObject *self, void *c)
{
	(void)c;
	return dltype_tuple(self->t.dtype);
}

static PyObject *dltensor_device(DLTensorObject *self, void *c)
{
	(void)c;
	return Py_BuildValue("(ii)", (int)self->t.device.device_type, (int)self->t.device.device_id);
}

static PyObject *dltensor_data_ptr(DLTensorObject *self, void *c)
{
	(void)c;
	return PyLong_FromVoidPtr((char *)self->t.data + self->t.byte_offset);
}

/* The DLTensor fields under their C names, as 0.2.1's ctypes DLTensor has them (data: the
 * pointer without byte_offset, 0 for NULL). */
static PyObject *dltensor_data(DLTensorObject *self, void *c)
{
	(void)c;
	return PyLong_FromVoidPtr(self->t.data);
}

static PyObject *dltensor_ndim(DLTensorObject *self, void *c)
{
	(void)c;
	return PyLong_FromLong(self->t.ndim);
}

static PyObject *dltensor_byte_offset(DLTensorObject *self, void *c)
{
	(void)c;
	return PyLong_FromUnsignedLongLong(self->t.byte_offset);
}

static PyObject *dltensor_readonly(DLTensorObject *self, void *c)
{
	(void)c;
	return PyBool_FromLong((self->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);
}

/* A CUDA DLTensor passed where a stream is named is not taken again: the stream must be the one it
 * was taken on (None: anything). */
static int same_stream(DLTensorObject *t, PyObject *stream, const char *what)
{
	if (!stream || stream == Py_None || !is_cuda_device(t->t.device.device_type))
		return 0; /* a CPU tensor has no stream (as a CPU producer is given none) */
	uintptr_t want = 0;
	if (parse_cuda_handle(stream, "stream", s_cuda_stream_attr, &want) < 0)
		return -1;
	if (want == t->stream)
		return 0;
	PyErr_Format(PyExc_ValueError, "%s: the DLTensor was taken on stream %llu, not stream=%R (a DLTensor is "
		     "not taken again)", what, (unsigned long long)t->stream, stream);
	return -1;
}

static PyObject *dltensor_from_dlpack(PyObject *cls, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	(void)cls;
	static signature sig = SIGNATURE("from_dlpack", 2, 1, A_OBJ("obj"), A_OBJ("stream"));
	PyObject *a[2];
	if (match_args(&sig, args, nargs, kwnames, a) < 0)
		return NULL;
	if (Py_TYPE(a[0]) == &DLTensorType && same_stream((DLTensorObject *)a[0], a[1], "from_dlpack") < 0)
		return NULL;
	return as_dltensor(a[0], a[1], "from_dlpack");
}

static PyObject *dltensor_repr(DLTensorObject *self)
{
	PyObject *shape = dltensor_shape(self, NULL);
	if (!shape)
		return NULL;
	PyObject *r = PyUnicode_FromFormat("DLTensor(shape=%R, dtype=(code=%d, bits=%d, lanes=%d), device=(%d, %d))",
					   shape, (int)self->t.dtype.code, (int)self->t.dtype.bits,
					   (int)self->t.dtype.lanes, (int)self->t.device.device_type,
					   (int)self->t.device.device_id);
	Py_DECREF(shape);
	return r;
}

static PyGetSetDef dltensor_getset[] = {
	{ "shape", (getter)dltensor_shape, NULL, "the shape, a tuple of ints", NULL },
	{ "shape_tuple", (getter)dltensor_shape, NULL, "the shape, a tuple of ints (alias of shape)", NULL },
	{ "strides", (getter)dltensor_strides, NULL, "the strides in elements, or None (compact)", NULL },
	{ "dtype", (getter)dltensor_dtype, NULL, "the element type, a DLDataType", NULL },
	{ "device", (getter)dltensor_device, NULL, "(device_type, device_id)", NULL },
	{ "data_ptr", (getter)dltensor_data_ptr, NULL, "address of the first element (data + byte_offset)", NULL },
	{ "data", (getter)dltensor_data, NULL, "DLTensor.data: the data pointer as an int (0 for NULL)", NULL },
	{ "ndim", (getter)dltensor_ndim, NULL, "DLTensor.ndim", NULL },
	{ "byte_offset", (getter)dltensor_byte_offset, NULL, "DLTensor.byte_offset", NULL },
	{ "readonly", (getter)dltensor_readonly, NULL, "the producer marked the tensor read-only", NULL },
	{ NULL },
};

static PyObject *numpy_view(const DLTensor *t, PyObject *base, int writable, PyObject *what);

static PyObject *dltensor_numpy(DLTensorObject *self, PyObject *unused)
{
	(void)unused;
	Py_INCREF(self);
	PyObject *what = PyUnicode_FromString("(DLTensor)");
	if (!what) {
		Py_DECREF(self);
		return NULL;
	}
	PyObject *r = numpy_view(&self->t, (PyObject *)self, !(self->flags & DLPACK_FLAG_BITMASK_READ_ONLY), what);
	Py_DECREF(what);
	return r;
}

static PyMethodDef dltensor_methods[] = {
	{ "numpy", (PyCFunction)dltensor_numpy, METH_NOARGS,
	  "numpy() -> numpy.ndarray: a zero-copy view (CPU), flat in base elements when compact" },
	{ "from_dlpack", (PyCFunction)(void (*)(void))dltensor_from_dlpack, METH_FASTCALL | METH_KEYWORDS | METH_CLASS,
	  "from_dlpack(obj, stream=None) -> DLTensor\n\nTakes obj through the DLPack protocol (zero copy): the "
	  "versioned capsule is asked for first,\na legacy one accepted; for a CUDA producer `stream` (default 1, "
	  "the legacy default stream)\nis the stream the stage will read on." },
	{ NULL },
};

static PyTypeObject DLTensorType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ovstage.DLTensor",
	.tp_basicsize = sizeof(DLTensorObject),
	.tp_dealloc = (destructor)dltensor_dealloc,
	.tp_repr = (reprfunc)dltensor_repr,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A tensor taken in through DLPack (zero copy). It owns the producer's capsule: the "
		  "producer's\ndeleter runs when this object (and every op that read it) is gone. Make one with "
		  "DLTensor.from_dlpack(obj) or make_dltensor(obj, dtype=...).",
	.tp_methods = dltensor_methods,
	.tp_getset = dltensor_getset,
};

/* ---- make_dltensor: layout overrides and the lane fold ---------------------------------------- */

static int parse_dtype(PyObject *o, DLDataType *out)
{
	memset(out, 0, sizeof *out);
	if (PyArray_DescrCheck(o) || PyType_Check(o)) {
		PyArray_Descr *d = NULL;
		if (!PyArray_DescrConverter(o, &d))
			return -1;
		int code;
		switch (d->kind) {
		case 'f': code = kDLFloat; break;
		case 'i': code = kDLInt; break;
		case 'u': code = kDLUInt; break;
		case 'b': code = kDLBool; break;
		case 'c': code = kDLComplex; break;
		default:
			PyErr_Format(PyExc_TypeError, "numpy dtype %R has no DLPack equivalent", (PyObject *)d);
			Py_DECREF(d);
			return -1;
		}
		out->code = (uint8_t)code;
		out->bits = (uint8_t)(PyDataType_ELSIZE(d) * 8);
		out->lanes = 1;
		Py_DECREF(d);
		return 0;
	}
	PyObject *c = PyObject_GetAttr(o, s_code), *b = c ? PyObject_GetAttr(o, s_bits) : NULL,
		 *l = b ? PyObject_GetAttr(o, s_lanes) : NULL;
	int rc = -1;
	if (!l) {
		PyErr_Clear();
		PyErr_Format(PyExc_TypeError, "dtype must be a DLDataType(code, bits, lanes) or a numpy dtype, got %.80s %R",
			     Py_TYPE(o)->tp_name, o);
	} else {
		int code, bits, lanes;
		if (parse_enum(c, "dtype.code", 0, 255, &code) == 0 && parse_enum(b, "dtype.bits", 0, 255, &bits) == 0 &&
		    parse_enum(l, "dtype.lanes", 0, 65535, &lanes) == 0) {
			out->code = (uint8_t)code;
			out->bits = (uint8_t)bits;
			out->lanes = (uint16_t)lanes;
			rc = 0;
		}
	}
	Py_XDECREF(c);
	Py_XDECREF(b);
	Py_XDECREF(l);
	return rc;
}

static int parse_i64_seq(PyObject *o, const char *what, int64_t *out, int max, int *n)
{
	PyObject *f = PySequence_Fast(o, what);
	if (!f) {
		PyErr_Format(PyExc_TypeError, "%s must be a sequence of ints, got %.80s", what, Py_TYPE(o)->tp_name);
		return -1;
	}
	Py_ssize_t len = PySequence_Fast_GET_SIZE(f);
	if (len > max) {
		PyErr_Format(PyExc_ValueError, "%s has %zd entries (at most %d)", what, len, max);
		Py_DECREF(f);
		return -1;
	}
	for (Py_ssize_t i = 0; i < len; i++) {
		PyObject *it = PySequence_Fast_GET_ITEM(f, i);
		uint64_t v;
		if (parse_u64(it, what, &v) < 0 || v > INT64_MAX) {
			if (!PyErr_Occurred())
				PyErr_Format(PyExc_ValueError, "%s[%zd] is too large", what, i);
			Py_DECREF(f);
			return -1;
		}
		out[i] = (int64_t)v;
	}
	*n = (int)len;
	Py_DECREF(f);
	return 0;
}

/* Bytes spanned by a tensor (max byte offset of an element + its size); compact when strides NULL. */
static int tensor_extent(const DLTensor *t, uint64_t elem, uint64_t *out)
{
	uint64_t span = 0, count = 1, run = 1;
	for (int i = t->ndim - 1; i >= 0; i--) {
		int64_t n = t->shape[i];
		if (n < 0)
			return -1;
		if (n == 0) {
			*out = 0;
			return 0;
		}
		int64_t st = t->strides ? t->strides[i] : (int64_t)run;
		if (st < 0)
			return -1;
		span += (uint64_t)(n - 1) * (uint64_t)st;
		run *= (uint64_t)n;
		count *= (uint64_t)n;
	}
	(void)count;
	*out = (span + 1) * elem;
	return 0;
}

/* The layout make_dltensor builds: the source's, then overridden (shape and strides always explicit). */
typedef struct {
	DLDataType dtype;
	int nd;
	int have_strides; /* the result keeps explicit strides (NULL strides = compact row-major) */
	int64_t shp[OVS_MAX_NDIM], str[OVS_MAX_NDIM];
} layout;

static void compact_strides(layout *l)
{
	int64_t run = 1;
	for (int i = l->nd - 1; i >= 0; i--) {
		l->str[i] = run;
		run *= l->shp[i];
	}
}

static void layout_of(const DLTensor *t, layout *l)
{
	l->dtype = t->dtype;
	l->nd = t->ndim;
	l->have_strides = t->strides != NULL;
	for (int i = 0; i < l->nd; i++) {
		l->shp[i] = t->shape[i];
		l->str[i] = t->strides ? t->strides[i] : 0;
	}
	if (!t->strides)
		compact_strides(l);
}

/* device_type= / device_id=: only a check that they name the source's device (no copies). */
static int check_device(const DLTensor *t, PyObject *device_type, PyObject *device_id)
{
	int v;
	if (device_type && device_type != Py_None) {
		if (parse_enum(device_type, "device_type", 0, 255, &v) < 0)
			return -1;
		if (v != (int)t->device.device_type) {
			PyErr_Format(PyExc_ValueError, "make_dltensor: device_type %d does not match the source device %d",
				     v, (int)t->device.device_type);
			return -1;
		}
	}
	if (device_id && device_id != Py_None) {
		if (parse_enum(device_id, "device_id", 0, INT32_MAX, &v) < 0)
			return -1;
		if (v != (int)t->device.device_id) {
			PyErr_Format(PyExc_ValueError, "make_dltensor: device_id %d does not match the source device %d", v,
				     (int)t->device.device_id);
			return -1;
		}
	}
	return 0;
}

/* The dtype a lane fold may ask for: the source's base type, whole bytes, a multiple of its lanes. */
static int check_fold_dtype(const DLDataType *src, const DLDataType *d)
{
	if (d->code != src->code || d->bits != src->bits) {
		PyErr_Format(PyExc_ValueError,
			     "make_dltensor: the lane fold keeps the base type; source is (code=%d, bits=%d), "
			     "dtype asks (code=%d, bits=%d)",
			     (int)src->code, (int)src->bits, (int)d->code, (int)d->bits);
		return -1;
	}
	if (d->bits == 0 || d->bits % 8) {
		PyErr_Format(PyExc_ValueError, "make_dltensor: bit width %d is not a positive whole number of bytes",
			     (int)d->bits);
		return -1;
	}
	if (d->lanes == 0 || d->lanes > 255 || d->lanes % src->lanes) {
		PyErr_Format(PyExc_ValueError, "make_dltensor: lanes %d is not a multiple of the source lanes %d "
			     "in [1, 255]", (int)d->lanes, (int)src->lanes);
		return -1;
	}
	return 0;
}

/* Folds complete compact trailing axes of l into d.lanes / l->dtype.lanes lanes (d checked). */
static int fold_lanes(layout *l, const DLDataType *d)
{
	int64_t factor = d->lanes / l->dtype.lanes, prod = 1, inner = 1;
	while (prod < factor) {
		if (l->nd == 0) {
			PyErr_Format(PyExc_ValueError, "make_dltensor: the trailing axes hold %lld elements, "
				     "fewer than the %lld lanes asked", (long long)prod, (long long)factor);
			return -1;
		}
		int64_t n = l->shp[l->nd - 1];
		if (l->str[l->nd - 1] != inner && n != 1) {
			PyErr_SetString(PyExc_ValueError, "make_dltensor: the axes folded into lanes must be compact");
			return -1;
		}
		prod *= n;
		inner *= n;
		l->nd--;
	}
	if (prod != factor) {
		PyErr_Format(PyExc_ValueError, "make_dltensor: trailing axes of %lld elements do not fold into "
			     "%lld lanes", (long long)prod, (long long)factor);
		return -1;
	}
	for (int i = 0; i < l->nd; i++) {
		if (l->str[i] % factor) {
			PyErr_Format(PyExc_ValueError, "make_dltensor: stride %lld of axis %d is not a whole number "
				     "of folded elements", (long long)l->str[i], i);
			return -1;
		}
		l->str[i] /= factor;
	}
	if (l->nd == 0) { /* a full fold: a one-element tensor */
		l->nd = 1;
		l->shp[0] = 1;
		l->str[0] = 1;
	}
	l->dtype = *d;
	l->have_strides = 1;
	return 0;
}

/* shape= / strides= / ndim= overrides, in that order (ndim only checks the result). */
static int apply_shape(layout *l, PyObject *shape, PyObject *strides, PyObject *ndim)
{
	int n;
	if (shape && shape != Py_None) {
		if (parse_i64_seq(shape, "shape", l->shp, OVS_MAX_NDIM, &n) < 0)
			return -1;
		l->nd = n;
		if (!strides || strides == Py_None)
			compact_strides(l);
		l->have_strides = 1;
	}
	if (strides && strides != Py_None) {
		if (parse_i64_seq(strides, "strides", l->str, OVS_MAX_NDIM, &n) < 0)
			return -1;
		if (n != l->nd) {
			PyErr_Format(PyExc_ValueError, "make_dltensor: %d strides for %d dimensions", n, l->nd);
			return -1;
		}
		l->have_strides = 1;
	}
	if (ndim && ndim != Py_None) {
		if (parse_enum(ndim, "ndim", 0, OVS_MAX_NDIM, &n) < 0)
			return -1;
		if (n != l->nd) {
			PyErr_Format(PyExc_ValueError, "make_dltensor: ndim %d does not match the shape's %d dimensions", n,
				     l->nd);
			return -1;
		}
	}
	return 0;
}

/* A DLTensor viewing src's data with layout l, which must stay inside src's bytes. Steals src. */
static PyObject *layout_view(DLTensorObject *src, const layout *l, uint64_t src_extent)
{
	DLTensorObject *o = PyObject_New(DLTensorObject, &DLTensorType);
	if (!o) {
		Py_DECREF(src);
		return NULL;
	}
	o->managed = NULL;
	o->versioned = 0;
	o->flags = src->flags;
	o->stream = src->stream;
	o->event = src->event;
	o->stream_obj = NULL; /* src (the owner) keeps it */
	o->owner = (PyObject *)src; /* keeps the capsule (and the producer's data) */
	o->own = PyMem_Malloc(sizeof(int64_t) * 2 * (size_t)(l->nd ? l->nd : 1));
	o->t = src->t;
	if (!o->own) {
		Py_DECREF(o); /* drops src too */
		return PyErr_NoMemory();
	}
	memcpy(o->own, l->shp, sizeof(int64_t) * (size_t)l->nd);
	memcpy(o->own + l->nd, l->str, sizeof(int64_t) * (size_t)l->nd);
	o->t.dtype = l->dtype;
	o->t.ndim = l->nd;
	o->t.shape = o->own;
	o->t.strides = l->have_strides ? o->own + l->nd : NULL;
	uint64_t elem = (uint64_t)o->t.dtype.bits * o->t.dtype.lanes / 8, ext = 0;
	if (tensor_extent(&o->t, elem, &ext) < 0 || ext > src_extent) {
		PyErr_Format(PyExc_ValueError, "make_dltensor: the layout spans %llu bytes, the source only %llu",
			     (unsigned long long)ext, (unsigned long long)src_extent);
		Py_DECREF(o); /* drops src too */
		return NULL;
	}
	return (PyObject *)o;
}

/*
 * Validates every override against the source, then folds and reshapes a copy of its layout. A
 * dtype with shape= only names the element type: the source's bytes are read as elements of it in
 * the shape given (0.2.1's make_dltensor(flat_float32, dtype=float3, shape=[n])); without shape=,
 * complete compact trailing axes fold into its lanes. Either way the result stays inside the
 * source's bytes (layout_view).
 */
static int make_layout(const DLTensorObject *src, PyObject *const *a, layout *l, uint64_t *src_extent)
{
	const DLTensor *t = &src->t;
	uint64_t src_elem = (uint64_t)t->dtype.bits * t->dtype.lanes;
	if (src_elem % 8 || tensor_extent(t, src_elem / 8, src_extent) < 0) {
		PyErr_SetString(PyExc_ValueError, "make_dltensor: the source tensor has sub-byte elements or negative strides");
		return -1;
	}
	if (check_device(t, a[5], a[6]) < 0)
		return -1;
	layout_of(t, l);
	if (a[1] && a[1] != Py_None) {
		DLDataType d;
		if (parse_dtype(a[1], &d) < 0 || check_fold_dtype(&t->dtype, &d) < 0)
			return -1;
		if (a[2] && a[2] != Py_None)
			l->dtype = d; /* apply_shape sets the shape, and compact strides unless strides= */
		else if (fold_lanes(l, &d) < 0)
			return -1;
	}
	return apply_shape(l, a[2], a[4], a[3]);
}

static PyObject *make_dltensor(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	(void)mod;
	static signature sig = SIGNATURE("make_dltensor", 1, 1, A_OBJ("array"), A_OBJ("dtype"), A_OBJ("shape"),
					 A_OBJ("ndim"), A_OBJ("strides"), A_OBJ("device_type"), A_OBJ("device_id"),
					 A_OBJ("stream"));
	PyObject *a[8];
	if (match_args(&sig, args, nargs, kwnames, a) < 0)
		return NULL;
	DLTensorObject *src = (DLTensorObject *)as_dltensor(a[0], a[7], "make_dltensor");
	if (!src)
		return NULL;
	layout l;
	uint64_t src_extent = 0;
	if ((Py_TYPE(a[0]) == &DLTensorType && same_stream(src, a[7], "make_dltensor") < 0) ||
	    make_layout(src, a, &l, &src_extent) < 0) {
		Py_DECREF(src);
		return NULL;
	}
	return layout_view(src, &l, src_extent);
}

/* ---- Operation ------------------------------------------------------------------------------ */

typedef struct {
	TRACKED_HEAD;
	ovstage_op_id_t op_id;
	int status;        /* enqueue status */
	int done;          /* waited and released (or a rejection reported) */
	PyObject *message; /* enqueue rejection detail, or NULL */
	const char *label; /* the call that made the op */
	arena_block *arena;
	PyObject *inputs; /* keepalives the op borrows (DLTensors, streams, events), or NULL */
} OperationObject;

static PyTypeObject OperationType;

static void op_finish(OperationObject *op)
{
	op->done = 1;
	arena_free(op->arena);
	op->arena = NULL;
	Py_CLEAR(op->inputs); /* the producers' deleters run here, under the GIL */
	untrack((Tracked *)op);
}

/* Wraps an enqueue result; takes ownership of `arena` and `inputs` (a new reference or NULL). */
static PyObject *new_operation(StageObject *st, const char *label, ovstage_enqueue_result_t e, arena_block *arena,
			       PyObject *inputs)
{
	OperationObject *op = PyObject_New(OperationObject, &OperationType);
	if (!op) {
		/* The op may be accepted: wait for it before freeing what it borrows. */
		if (e.status == OVSTAGE_OK) {
			ovstage_op_wait_result_t wr;
			BUSY_BEGIN(st)
			ovstage_wait_op(st->inst, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &wr);
			ovstage_release_op(st->inst, e.op_index);
			BUSY_END
		}
		arena_free(arena);
		Py_XDECREF(inputs);
		return NULL;
	}
	op->tracked = 0;
	op->tprev = op->tnext = NULL;
	Py_INCREF(st);
	op->stage = st;
	op->op_id = e.op_index;
	op->status = e.status;
	op->label = label;
	op->message = NULL;
	op->arena = arena;
	op->inputs = inputs;
	op->done = 0;
	if (e.status == OVSTAGE_OK) {
		track(st, (Tracked *)op, T_OP);
	} else {
		ovx_string_t m = ovstage_get_last_error();
		op->message = (m.ptr && m.length) ? PyUnicode_FromStringAndSize(m.ptr, (Py_ssize_t)m.length)
						  : PyUnicode_FromFormat("%s was rejected (%s)", label, status_name(e.status));
		if (!op->message)
			PyErr_Clear();
		arena_free(op->arena);
		op->arena = NULL;
		Py_CLEAR(op->inputs);
	}
	return (PyObject *)op;
}

#define OVS_WAIT_ERRORS 8
typedef struct {
	size_t n;
	ovstage_op_id_t ids[OVS_WAIT_ERRORS];
	char msgs[OVS_WAIT_ERRORS][512];
	ovstage_op_id_t lowest_pending;
} wait_errors;

/*
 * A bounded engine wait: one call that waits at most `slice` ns (0 polls). sliced_wait calls it
 * with the GIL released (not for a poll), so it touches no Python object.
 */
typedef int (*slice_fn)(StageObject *st, void *ctx, uint64_t slice);

/*
 * Waits up to `timeout` ns (TIMEOUT_INFINITE: no limit) in calls of fn of at most OVS_SLICE_NS,
 * so that signals are seen between them. Returns fn's first status other than TIMEOUT, TIMEOUT
 * when the time is up, or -1 with an exception: KeyboardInterrupt (or whatever a signal handler
 * raised), or, with end_on_destroy, INVALID_HANDLE once another thread's destroy() closed the
 * stage (for waits that nothing destroy() drains would end).
 */
static int sliced_wait(StageObject *st, uint64_t timeout, int end_on_destroy, slice_fn fn, void *ctx)
{
	uint64_t left = timeout;
	for (;;) {
		uint64_t slice = (timeout == OVSTAGE_TIMEOUT_INFINITE || left > OVS_SLICE_NS) ? OVS_SLICE_NS : left;
		int rc;
		if (slice == 0) { /* a poll: not worth dropping the GIL */
			rc = fn(st, ctx, 0);
		} else {
			BUSY_BEGIN(st)
			rc = fn(st, ctx, slice);
			BUSY_END
		}
		if (rc != OVSTAGE_ERROR_TIMEOUT)
			return rc;
		if (timeout != OVSTAGE_TIMEOUT_INFINITE) {
			left -= slice;
			if (left == 0)
				return rc;
		}
		if (PyErr_CheckSignals() < 0)
			return -1;
		if (end_on_destroy && st->closed) {
			raise_code(OVSTAGE_ERROR_INVALID_HANDLE, "the stage %R was destroyed while waiting",
				   st->name ? st->name : Py_None);
			return -1;
		}
	}
}

/* One wait_op call; copies the thread-local error list before returning. */
static int wait_raw(StageObject *st, ovstage_op_id_t id, uint64_t timeout, wait_errors *we)
{
	ovstage_op_wait_result_t wr = { 0 };
	int rc = ovstage_wait_op(st->inst, id, timeout, &wr);
	we->n = 0;
	we->lowest_pending = wr.lowest_pending_op_id;
	for (size_t i = 0; i < wr.error_op_id_count && i < OVS_WAIT_ERRORS; i++) {
		we->ids[i] = wr.error_op_ids[i];
		ovx_string_t m = ovstage_get_last_op_error(st->inst, wr.error_op_ids[i]);
		size_t len = m.length < sizeof we->msgs[0] - 1 ? m.length : sizeof we->msgs[0] - 1;
		if (m.ptr)
			memcpy(we->msgs[i], m.ptr, len);
		else
			len = 0;
		we->msgs[i][len] = '\0';
		we->n++;
	}
	return rc;
}

/* One wait_op call with the GIL released (the drains: no signal checks). */
static int wait_once(StageObject *st, ovstage_op_id_t id, uint64_t timeout, wait_errors *we)
{
	int rc;
	BUSY_BEGIN(st)
	rc = wait_raw(st, id, timeout, we);
	BUSY_END
	return rc;
}

typedef struct {
	ovstage_op_id_t id;
	wait_errors *we;
} wait_ctx;

static int wait_slice(StageObject *st, void *ctx, uint64_t slice)
{
	wait_ctx *c = ctx;
	return wait_raw(st, c->id, slice, c->we);
}

/* wait_op in slices (sliced_wait): the engine status, or -1 with KeyboardInterrupt. */
static int wait_sliced(StageObject *st, ovstage_op_id_t id, uint64_t timeout, wait_errors *we)
{
	wait_ctx c = { id, we };
	return sliced_wait(st, timeout, 0, wait_slice, &c);
}

/* Op failure reported by wait_op: the code is the status name the root-cause message starts with
 * when it names one, OP_FAILED otherwise. */
static int code_of_message(const char *m)
{
	static const int codes[] = { OVSTAGE_ERROR_INVALID_ARGUMENT, OVSTAGE_ERROR_INVALID_HANDLE,
				     OVSTAGE_ERROR_NOT_FOUND, OVSTAGE_ERROR_PRIM_NOT_FOUND,
				     OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION, OVSTAGE_ERROR_NOT_SUPPORTED,
				     OVSTAGE_ERROR_QUEUE_FULL, OVSTAGE_ERROR_OUT_OF_MEMORY,
				     OVSTAGE_ERROR_LAYOUT_CHANGED, OVSTAGE_ERROR_OUT_OF_RANGE, OVSTAGE_ERROR_INTERNAL };
	for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
		const char *n = status_name(codes[i]);
		size_t l = strlen(n);
		if (strncmp(m, n, l) == 0 || (strncmp(m, "OVSTAGE_ERROR_", 14) == 0 && strncmp(m + 14, n, l) == 0))
			return codes[i];
	}
	return OVSTAGE_ERROR_OP_FAILED;
}

static int op_wait(OperationObject *op, uint64_t timeout)
{
	if (op->done) {
		raise_code(OVSTAGE_ERROR_INVALID_HANDLE, "%s op %llu was already waited and released", op->label,
			   (unsigned long long)op->op_id);
		return -1;
	}
	if (op->status != OVSTAGE_OK) {
		op->done = 1;
		raise_code(op->status, "%s: %S", op->label, op->message ? op->message : Py_None);
		return -1;
	}
	StageObject *st = op->stage;
	wait_errors we;
	int rc = wait_sliced(st, op->op_id, timeout, &we);
	if (rc < 0)
		return -1;
	if (rc == OVSTAGE_ERROR_TIMEOUT) {
		raise_code(rc, "%s op %llu is still pending after %llu ns (lowest pending op %llu)", op->label,
			   (unsigned long long)op->op_id, (unsigned long long)timeout,
			   (unsigned long long)we.lowest_pending);
		return -1;
	}
	ovstage_release_op(st->inst, op->op_id);
	op_finish(op);
	if (rc != OVSTAGE_OK && !we.n) {
		raise_last(rc, op->label);
		return -1;
	}
	if (we.n) {
		/* wait_op returns the status 0.2.1 documents for some failures (PRIM_NOT_FOUND, ...) with
		 * the failure listed: that status, else the one the root-cause message names */
		const char *root = we.msgs[0][0] ? we.msgs[0] : "(no message)";
		int code = rc != OVSTAGE_OK ? rc : code_of_message(root);
		if (we.ids[0] != op->op_id)
			raise_code(code, "%s op %llu failed: its dependency op %llu failed: %s", op->label,
				   (unsigned long long)op->op_id, (unsigned long long)we.ids[0], root);
		else
			raise_code(code, "%s op %llu failed: %s", op->label, (unsigned long long)op->op_id, root);
		return -1;
	}
	return 0;
}

/* Dealloc / destroy path: wait without signals, release, forget errors. */
static void op_drain(OperationObject *op)
{
	if (!op->tracked)
		return;
	StageObject *st = op->stage;
	wait_errors we;
	while (wait_once(st, op->op_id, OVS_SLICE_NS, &we) == OVSTAGE_ERROR_TIMEOUT)
		;
	ovstage_release_op(st->inst, op->op_id);
	op_finish(op);
}

static void op_dealloc(OperationObject *op)
{
	op_drain(op);
	arena_free(op->arena);
	Py_XDECREF(op->inputs);
	Py_XDECREF(op->message);
	Py_XDECREF(op->stage);
	Py_TYPE(op)->tp_free((PyObject *)op);
}

static PyObject *op_wait_meth(OperationObject *op, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature sig = SIGNATURE("wait", 1, 0, A_TIMEOUT);
	uint64_t timeout;
	if (parse_call(&sig, NULL, args, nargs, kwnames, OUTS(&timeout)) < 0)
		return NULL;
	if (op_wait(op, timeout) < 0)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *op_error_message(OperationObject *op, PyObject *unused)
{
	(void)unused;
	if (op->message) {
		Py_INCREF(op->message);
		return op->message;
	}
	return PyUnicode_FromString("");
}

static PyObject *op_get_status(OperationObject *op, void *c)
{
	(void)c;
	return PyLong_FromLong(op->status);
}
static PyObject *op_get_id(OperationObject *op, void *c)
{
	(void)c;
	return PyLong_FromUnsignedLongLong(op->op_id);
}
static PyObject *op_get_ok(OperationObject *op, void *c)
{
	(void)c;
	return PyBool_FromLong(op->status == OVSTAGE_OK);
}
static PyObject *op_get_done(OperationObject *op, void *c)
{
	(void)c;
	return PyBool_FromLong(op->done);
}

static PyObject *op_repr(OperationObject *op)
{
	return PyUnicode_FromFormat("<ovstage.Operation %s op_id=%llu status=%s%s>", op->label,
				    (unsigned long long)op->op_id, status_name(op->status), op->done ? " done" : "");
}

static PyMethodDef op_methods[] = {
	{ "wait", (PyCFunction)(void (*)(void))op_wait_meth, METH_FASTCALL | METH_KEYWORDS,
	  "wait(timeout=TIMEOUT_INFINITE)\n\nWaits (GIL released; Ctrl-C raises KeyboardInterrupt and leaves the op "
	  "live) until the op and\nits dependencies completed, then releases the op id and the inputs it borrowed. "
	  "Raises\nOvstageError if the op was rejected at the call or failed (also through a failed dependency),\n"
	  "with code TIMEOUT if it is still pending after `timeout` ns, and with INVALID_HANDLE when waited\ntwice." },
	{ "error_message", (PyCFunction)op_error_message, METH_NOARGS,
	  "error_message() -> str: the detail of a rejection at the call ('' when accepted)." },
	{ NULL },
};

static PyGetSetDef op_getset[] = {
	{ "status", (getter)op_get_status, NULL, "enqueue status (ErrorCode value; 0 = accepted)", NULL },
	{ "op_id", (getter)op_get_id, NULL, "the op id (0 when rejected)", NULL },
	{ "ok", (getter)op_get_ok, NULL, "True when the op was accepted at the call", NULL },
	{ "done", (getter)op_get_done, NULL, "True once waited and released", NULL },
	{ NULL },
};

static PyTypeObject OperationType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ovstage.Operation",
	.tp_basicsize = sizeof(OperationObject),
	.tp_dealloc = (destructor)op_dealloc,
	.tp_repr = (reprfunc)op_repr,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "An enqueued stage operation. It keeps the inputs the op reads (tensors, index maps, masks)\n"
		  "alive until wait(); one collected unwaited waits for its op first.",
	.tp_methods = op_methods,
	.tp_getset = op_getset,
};

/* ---- Handles: Query, Read, Map, OrdinalQuery -------------------------------------------------- */

typedef struct {
	TRACKED_HEAD;
	uint64_t handle;
	PyObject *op; /* the reserving Operation, or None */
	int released;
	Py_ssize_t exports; /* Map: live array / DLPack views of its groups */
} HandleObject;

static PyTypeObject QueryType, ReadType, MapType, OrdinalQueryType, HierarchyType;

static const char *kind_name(int k)
{
	switch (k) {
	case T_QUERY: return "Query";
	case T_READ: return "Read";
	case T_MAP: return "Map";
	case T_ORDQ: return "OrdinalQuery";
	case T_RGROUP: return "ReadGroup";
	case T_HIER: return "Hierarchy";
	default: return "Operation";
	}
}

static PyObject *new_handle(StageObject *st, PyTypeObject *type, int kind, uint64_t handle, PyObject *op)
{
	HandleObject *h = PyObject_New(HandleObject, type);
	if (!h) {
		Py_XDECREF(op);
		return NULL;
	}
	h->tprev = h->tnext = NULL;
	h->tracked = 0;
	Py_INCREF(st);
	h->stage = st;
	h->handle = handle;
	h->op = op ? op : Py_None;
	if (!op)
		Py_INCREF(Py_None);
	h->exports = 0;
	h->released = handle == 0; /* a rejected reservation holds nothing */
	if (!h->released)
		track(st, (Tracked *)h, kind);
	else
		h->tkind = kind;
	return (PyObject *)h;
}

static ovstage_enqueue_result_t handle_enqueue_release(HandleObject *h, ovstage_cuda_sync_t sync)
{
	ovstage_instance_t *in = h->stage->inst;
	switch (h->tkind) {
	case T_QUERY: return ovstage_release_query(in, h->handle);
	case T_READ: return ovstage_release_read(in, h->handle);
	case T_MAP: return ovstage_unmap_attribute(in, h->handle, sync);
	case T_HIER: return ovstage_release_hierarchy(in, h->handle);
	default: return ovstage_release_ordinal_query(in, h->handle);
	}
}

static const char *release_label(int kind)
{
	switch (kind) {
	case T_QUERY: return "release_query";
	case T_READ: return "release_read";
	case T_MAP: return "unmap_attribute";
	case T_HIER: return "release_hierarchy";
	default: return "release_ordinal_query";
	}
}

static int handle_live(HandleObject *h)
{
	if (h->handle == 0 && h->op != Py_None && ((OperationObject *)h->op)->status != OVSTAGE_OK) {
		OperationObject *op = (OperationObject *)h->op;
		raise_code(op->status, "%s was rejected: %S", op->label, op->message ? op->message : Py_None);
		return -1;
	}
	if (h->released) {
		raise_code(OVSTAGE_ERROR_INVALID_HANDLE, "%s %llu was released", kind_name(h->tkind),
			   (unsigned long long)h->handle);
		return -1;
	}
	return stage_check(h->stage);
}

static PyObject *handle_release_impl(HandleObject *h, ovstage_cuda_sync_t sync, PyObject *keep)
{
	if (handle_live(h) < 0)
		return NULL;
	if (h->tkind == T_MAP && h->exports > 0) {
		return raise_code(OVSTAGE_ERROR_INVALID_ARGUMENT,
				  "Map %llu: %zd array/DLPack view(s) of its groups are still alive; delete them before "
				  "unmap (the stage takes the buffers at unmap)",
				  (unsigned long long)h->handle, h->exports);
	}
	ovstage_enqueue_result_t e = handle_enqueue_release(h, sync);
	h->released = 1;
	untrack((Tracked *)h);
	Py_XINCREF(keep);
	return new_operation(h->stage, release_label(h->tkind), e, NULL, keep);
}

/* Dealloc / destroy path: release, wait, forget errors. */
static void handle_drain(HandleObject *h)
{
	if (h->released)
		return;
	ovstage_cuda_sync_t none = { 0, 0 };
	ovstage_enqueue_result_t e = handle_enqueue_release(h, none);
	h->released = 1;
	if (e.status == OVSTAGE_OK) {
		wait_errors we;
		while (wait_once(h->stage, e.op_index, OVS_SLICE_NS, &we) == OVSTAGE_ERROR_TIMEOUT)
			;
		ovstage_release_op(h->stage->inst, e.op_index);
	}
	untrack((Tracked *)h);
}

static void warn_unreleased(PyObject *self, const char *what, unsigned long long id)
{
	PyObject *et, *ev, *tb;
	PyErr_Fetch(&et, &ev, &tb);
	if (PyErr_WarnFormat(PyExc_ResourceWarning, 1, "unreleased ovstage %s %llu collected; releasing it", what,
			     id) < 0) {
		/* Warnings are errors (-W error): report it as unraisable, with a description as the
		 * context, not `self`: this runs in its dealloc, and a hook that keeps the object it is
		 * given (pytest's does) would keep freed memory. */
		(void)self;
		PyObject *ctx = PyUnicode_FromFormat("the finalizer of an unreleased ovstage %s %llu", what, id);
		PyErr_WriteUnraisable(ctx);
		Py_XDECREF(ctx);
	}
	PyErr_Restore(et, ev, tb);
}

static void handle_dealloc(HandleObject *h)
{
	if (!h->released && h->stage && h->stage->inst) {
		if (!h->stage->closed)
			warn_unreleased((PyObject *)h, kind_name(h->tkind), h->handle);
		handle_drain(h);
	}
	Py_XDECREF(h->op);
	Py_XDECREF(h->stage);
	Py_TYPE(h)->tp_free((PyObject *)h);
}

static PyObject *handle_get_handle(HandleObject *h, void *c)
{
	(void)c;
	return PyLong_FromUnsignedLongLong(h->handle);
}
static PyObject *handle_get_op(HandleObject *h, void *c)
{
	(void)c;
	Py_INCREF(h->op);
	return h->op;
}
static PyObject *handle_get_released(HandleObject *h, void *c)
{
	(void)c;
	return PyBool_FromLong(h->released);
}
static PyObject *handle_get_stage(HandleObject *h, void *c)
{
	(void)c;
	Py_INCREF(h->stage);
	return (PyObject *)h->stage;
}
static PyObject *handle_int(HandleObject *h)
{
	return PyLong_FromUnsignedLongLong(h->handle);
}

static PyObject *handle_wait(HandleObject *h, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature sig = SIGNATURE("wait", 1, 0, A_TIMEOUT);
	uint64_t timeout;
	if (parse_call(&sig, NULL, args, nargs, kwnames, OUTS(&timeout)) < 0)
		return NULL;
	if (handle_live(h) < 0)
		return NULL;
	if (h->op != Py_None && !((OperationObject *)h->op)->done && op_wait((OperationObject *)h->op, timeout) < 0)
		return NULL;
	Py_INCREF(h);
	return (PyObject *)h;
}

static PyObject *handle_release(HandleObject *h, PyObject *unused)
{
	(void)unused;
	ovstage_cuda_sync_t none = { 0, 0 };
	return handle_release_impl(h, none, NULL);
}

static PyObject *handle_enter(HandleObject *h, PyObject *unused)
{
	(void)unused;
	Py_INCREF(h);
	return (PyObject *)h;
}

static PyObject *handle_exit(HandleObject *h, PyObject *args)
{
	PyObject *et = PyTuple_GET_SIZE(args) > 0 ? PyTuple_GET_ITEM(args, 0) : Py_None;
	if (h->released || !h->stage->inst || h->stage->closed)
		Py_RETURN_FALSE;
	PyObject *op = handle_release(h, NULL);
	if (op) {
		int rc = op_wait((OperationObject *)op, OVSTAGE_TIMEOUT_INFINITE);
		Py_DECREF(op);
		if (rc == 0)
			Py_RETURN_FALSE;
	}
	if (et != Py_None) { /* an exception is already propagating: it wins */
		PyErr_Clear();
		Py_RETURN_FALSE;
	}
	return NULL;
}

static PyObject *handle_repr(HandleObject *h)
{
	return PyUnicode_FromFormat("<ovstage.%s handle=%llu%s>", kind_name(h->tkind), (unsigned long long)h->handle,
				    h->released ? " released" : "");
}

static PyNumberMethods handle_as_number = { .nb_int = (unaryfunc)handle_int, .nb_index = (unaryfunc)handle_int };

static PyGetSetDef handle_getset[] = {
	{ "handle", (getter)handle_get_handle, NULL, "the raw handle (an int)", NULL },
	{ "op", (getter)handle_get_op, NULL, "the Operation that reserved the handle (None if made synchronously)", NULL },
	{ "released", (getter)handle_get_released, NULL, "True once released", NULL },
	{ "stage", (getter)handle_get_stage, NULL, "the stage the handle belongs to", NULL },
	{ NULL },
};

/* ---- Groups, pins and views ------------------------------------------------------------------ */

typedef struct {
	TRACKED_HEAD;
	int is_map;
	ovstage_read_group_t rg;
	ovstage_map_group_t mg;
	int released;   /* the API refuses the group's data */
	int c_released; /* the engine has the read group back */
	int unmapped;   /* map group committed by unmap_group */
	Py_ssize_t exports;
	HandleObject *map; /* map groups: their Map */
} GroupObject;

static PyTypeObject ReadGroupType, MapGroupType;

static const ovstage_data_t *group_data(GroupObject *g)
{
	return g->is_map ? &g->mg.data : &g->rg.data;
}
static const ovstage_prim_group_t *group_prims(GroupObject *g)
{
	return g->is_map ? &g->mg.prims : &g->rg.prims;
}

static void group_c_release(GroupObject *g)
{
	if (g->is_map || g->c_released)
		return;
	g->c_released = 1;
	ovstage_release_group(g->stage->inst, &g->rg);
	untrack((Tracked *)g);
}

static int group_live(GroupObject *g)
{
	if (g->released) {
		raise_code(OVSTAGE_ERROR_INVALID_HANDLE, "%s was released: its data are no longer reachable (copy "
			   "what you need before releasing)", g->is_map ? "MapGroup" : "ReadGroup");
		return -1;
	}
	if (g->is_map && (g->unmapped || g->map->released)) {
		raise_code(OVSTAGE_ERROR_INVALID_HANDLE, "MapGroup of Map %llu was unmapped: its buffers belong to "
			   "the stage now", (unsigned long long)g->map->handle);
		return -1;
	}
	return 0;
}

/* A METH_O group method's one index argument, after the liveness check. */
static int group_u64_arg(GroupObject *g, PyObject *arg, const char *what, uint64_t *out)
{
	return group_live(g) < 0 || parse_u64(arg, what, out) < 0 ? -1 : 0;
}

typedef struct {
	PyObject_HEAD GroupObject *g;
} PinObject;

static PyTypeObject PinType;

static PyObject *pin_new(GroupObject *g)
{
	PinObject *p = PyObject_New(PinObject, &PinType);
	if (!p)
		return NULL;
	Py_INCREF(g);
	p->g = g;
	g->exports++;
	if (g->is_map)
		g->map->exports++;
	return (PyObject *)p;
}

static void pin_dealloc(PinObject *p)
{
	GroupObject *g = p->g;
	g->exports--;
	if (g->is_map)
		g->map->exports--;
	if (!g->is_map && g->released && g->exports == 0)
		group_c_release(g);
	Py_DECREF(g);
	Py_TYPE(p)->tp_free((PyObject *)p);
}

static PyTypeObject PinType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ovstage._native.Pin",
	.tp_basicsize = sizeof(PinObject),
	.tp_dealloc = (destructor)pin_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Keeps a group's memory while a numpy array or DLPack consumer views it.",
};

static PyObject *new_group(StageObject *st, HandleObject *map)
{
	GroupObject *g = PyObject_New(GroupObject, map ? &MapGroupType : &ReadGroupType);
	if (!g)
		return NULL;
	g->tprev = g->tnext = NULL;
	g->tracked = 0;
	g->tkind = T_RGROUP;
	Py_INCREF(st);
	g->stage = st;
	g->is_map = map != NULL;
	memset(&g->rg, 0, sizeof g->rg);
	memset(&g->mg, 0, sizeof g->mg);
	g->released = g->c_released = g->unmapped = 0;
	g->exports = 0;
	g->map = map;
	Py_XINCREF(map);
	return (PyObject *)g;
}

static void group_dealloc(GroupObject *g)
{
	if (!g->is_map && !g->c_released && g->stage->inst) {
		if (!g->released && !g->stage->closed)
			warn_unreleased((PyObject *)g, "ReadGroup", g->rg.read_group_id);
		group_c_release(g);
	}
	Py_XDECREF(g->map);
	Py_XDECREF(g->stage);
	Py_TYPE(g)->tp_free((PyObject *)g);
}

static int tensor_index(GroupObject *g, PyObject *arg, const DLTensor **out)
{
	if (group_live(g) < 0)
		return -1;
	uint64_t i;
	if (parse_u64(arg, "tensor index", &i) < 0)
		return -1;
	const ovstage_data_t *d = group_data(g);
	if (i >= d->tensor_count || !d->tensors) {
		PyErr_Format(PyExc_IndexError, "tensor index %llu out of range (the group has %u tensors)",
			     (unsigned long long)i, (unsigned)d->tensor_count);
		return -1;
	}
	*out = &d->tensors[i];
	return 0;
}

static int npy_type_of(DLDataType d)
{
	switch (d.code) {
	case kDLFloat: return d.bits == 16 ? NPY_FLOAT16 : d.bits == 32 ? NPY_FLOAT32 : d.bits == 64 ? NPY_FLOAT64 : -1;
	case kDLInt: return d.bits == 8 ? NPY_INT8 : d.bits == 16 ? NPY_INT16 : d.bits == 32 ? NPY_INT32
			  : d.bits == 64 ? NPY_INT64 : -1;
	case kDLUInt: return d.bits == 8 ? NPY_UINT8 : d.bits == 16 ? NPY_UINT16 : d.bits == 32 ? NPY_UINT32
			   : d.bits == 64 ? NPY_UINT64 : -1;
	case kDLBool: return d.bits == 8 ? NPY_BOOL : -1;
	case kDLComplex: return d.bits == 64 ? NPY_COMPLEX64 : d.bits == 128 ? NPY_COMPLEX128 : -1;
	default: return -1;
	}
}

/* Lane-expanded shape and strides (in base elements) of a group tensor: one trailing lane axis. */
static int expanded_layout(const DLTensor *t, int64_t *shape, int64_t *strides)
{
	int nd = t->ndim, L = t->dtype.lanes ? t->dtype.lanes : 1;
	int64_t run = 1;
	for (int i = nd - 1; i >= 0; i--) {
		shape[i] = t->shape[i];
		strides[i] = (t->strides ? t->strides[i] : run) * L;
		run *= t->shape[i];
	}
	if (L > 1) {
		shape[nd] = L;
		strides[nd] = 1;
		nd++;
	}
	return nd;
}

/* A numpy view of a CPU tensor: flat in base elements when compact, else strided with a trailing
 * lane axis. `base` (stolen) keeps the memory; `what` names the tensor in errors. */
static PyObject *numpy_view(const DLTensor *t, PyObject *base, int writable, PyObject *what)
{
	if (t->device.device_type != kDLCPU && t->device.device_type != kDLCUDAHost) {
		Py_DECREF(base);
		return raise_code(OVSTAGE_ERROR_NOT_SUPPORTED, "tensor %S is on device (%d, %d): numpy views are CPU "
				  "only; use DLPack", what, (int)t->device.device_type, (int)t->device.device_id);
	}
	int type = npy_type_of(t->dtype);
	if (type < 0 || t->ndim > OVS_MAX_NDIM) {
		Py_DECREF(base);
		PyErr_Format(PyExc_TypeError, "tensor %S has dtype (code=%d, bits=%d) or ndim %d with no numpy equivalent; "
			     "use DLPack", what, (int)t->dtype.code, (int)t->dtype.bits, (int)t->ndim);
		return NULL;
	}
	int64_t shape[OVS_MAX_NDIM + 1], strides[OVS_MAX_NDIM + 1];
	int nd = expanded_layout(t, shape, strides);
	npy_intp elem = t->dtype.bits / 8, dims[OVS_MAX_NDIM + 1], bstr[OVS_MAX_NDIM + 1];
	int compact = 1;
	int64_t run = 1, total = 1;
	for (int i = nd - 1; i >= 0; i--) {
		if (shape[i] < 0 || strides[i] < 0) {
			Py_DECREF(base);
			return raise_code(OVSTAGE_ERROR_NOT_SUPPORTED, "tensor %S has a negative extent or stride", what);
		}
		if (shape[i] != 1 && strides[i] != run)
			compact = 0;
		run *= shape[i];
		total *= shape[i];
	}
	if (total == 0 || !t->data) {
		Py_DECREF(base);
		return PyArray_EMPTY(1, (npy_intp[]){ 0 }, type, 0);
	}
	int outnd;
	if (compact) {
		outnd = 1;
		dims[0] = (npy_intp)total;
		bstr[0] = elem;
	} else {
		outnd = nd;
		for (int i = 0; i < nd; i++) {
			dims[i] = (npy_intp)shape[i];
			bstr[i] = (npy_intp)(strides[i] * elem);
		}
	}
	int flags = NPY_ARRAY_ALIGNED | (writable ? NPY_ARRAY_WRITEABLE : 0);
	void *data = (char *)t->data + t->byte_offset;
	PyObject *arr = PyArray_NewFromDescr(&PyArray_Type, PyArray_DescrFromType(type), outnd, dims, bstr, data,
					     flags, NULL);
	if (!arr) {
		Py_DECREF(base);
		return NULL;
	}
	if (PyArray_SetBaseObject((PyArrayObject *)arr, base) < 0) {
		Py_DECREF(arr);
		return NULL;
	}
	return arr;
}

static PyObject *group_array(GroupObject *g, PyObject *arg)
{
	const DLTensor *t;
	if (tensor_index(g, arg, &t) < 0)
		return NULL;
	PyObject *pin = pin_new(g);
	if (!pin)
		return NULL;
	return numpy_view(t, pin, g->is_map, arg);
}

/* ---- ManagedDLTensor: a group tensor exported through DLPack ---------------------------------- */

typedef struct {
	PyObject_HEAD PyObject *pin;
	DLTensor t;
	int64_t shape[OVS_MAX_NDIM + 1], strides[OVS_MAX_NDIM + 1];
	int readonly;
	ovstage_cuda_sync_t sync;
} ManagedObject;

static PyTypeObject ManagedType;

typedef struct {
	DLManagedTensorVersioned v;
	DLManagedTensor l;
	int64_t shape[OVS_MAX_NDIM + 1], strides[OVS_MAX_NDIM + 1];
	PyObject *pin;
} export_ctx;

static void export_free(export_ctx *c)
{
	if (!Py_IsInitialized())
		return; /* the interpreter is gone: leak rather than touch it */
	PyGILState_STATE s = PyGILState_Ensure();
	Py_XDECREF(c->pin);
	PyGILState_Release(s);
	PyMem_RawFree(c);
}

static void export_deleter_v(DLManagedTensorVersioned *m)
{
	export_free(m->manager_ctx);
}
static void export_deleter_l(DLManagedTensor *m)
{
	export_free(m->manager_ctx);
}

/* A consumer that refuses a capsule (numpy given a CUDA tensor or an unsupported dtype) raises and
 * then drops it, so this can run with an exception pending: it is kept (fetched and restored, as in
 * warn_unreleased), or the refusal would turn into "SystemError: error return without exception set". */
static void export_capsule_destructor(PyObject *cap)
{
	PyObject *et, *ev, *tb;
	PyErr_Fetch(&et, &ev, &tb);
	/* An unconsumed capsule still owns its tensor. */
	if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
		DLManagedTensorVersioned *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
		if (m && m->deleter)
			m->deleter(m);
	} else if (PyCapsule_IsValid(cap, "dltensor")) {
		DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
		if (m && m->deleter)
			m->deleter(m);
	}
	PyErr_Clear(); /* anything the checks above raised is ours to drop */
	PyErr_Restore(et, ev, tb);
}

/*
 * CUDA ordering of a consumer stream after a group's cuda_sync (docs/gpu.md "Reads"), through the
 * CUDA driver API, loaded on first use (libcuda.so.1: there is no CUDA at build time, and the driver
 * is what every CUDA program has). Nothing here blocks the host: cuStreamWaitEvent only enqueues
 * the dependency. The consumer's stream belongs to the device the data are on (the DLPack rule),
 * and the handles 1 / 2 (CU_STREAM_LEGACY / CU_STREAM_PER_THREAD, the same values as DLPack's)
 * mean that device's primary context, which torch, CuPy and the stage use: that context is made
 * current around the calls (retained, pushed, popped, released), so the calling thread needs no
 * CUDA state of its own and keeps the one it has.
 */
typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_device_get_fn)(int *, int);
typedef int (*cu_ctx_retain_fn)(void **, int);
typedef int (*cu_ctx_release_fn)(int);
typedef int (*cu_ctx_push_fn)(void *);
typedef int (*cu_ctx_pop_fn)(void **);
typedef int (*cu_wait_fn)(void *, void *, unsigned);
typedef int (*cu_event_create_fn)(void **, unsigned);
typedef int (*cu_event_record_fn)(void *, void *);
typedef int (*cu_event_destroy_fn)(void *);
typedef int (*cu_error_name_fn)(int, const char **);
static struct {
	int loaded; /* 1: looked up (under the GIL); then `ok` says whether every symbol was found */
	int ok;
	int init_rc;
	cu_init_fn init;
	cu_device_get_fn device_get;
	cu_ctx_retain_fn retain;
	cu_ctx_release_fn release;
	cu_ctx_push_fn push;
	cu_ctx_pop_fn pop;
	cu_wait_fn wait;
	cu_event_create_fn create;
	cu_event_record_fn record;
	cu_event_destroy_fn destroy;
	cu_error_name_fn error_name;
} g_cu;

static void *cu_sym(void *lib, const char *a, const char *b)
{
	void *p = dlsym(lib, a);
	return p || !b ? p : dlsym(lib, b);
}

#define CU_LOAD(field, a, b)                                                                                  \
	do {                                                                                                 \
		void *p_ = cu_sym(lib, a, b);                                                                \
		memcpy(&g_cu.field, &p_, sizeof p_); /* ISO C has no object-to-function pointer cast */     \
		g_cu.ok &= p_ != NULL;                                                                       \
	} while (0)

static int cu_load(void)
{
	if (g_cu.loaded)
		return g_cu.ok;
	g_cu.loaded = 1;
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		return 0;
	g_cu.ok = 1;
	CU_LOAD(init, "cuInit", NULL);
	CU_LOAD(device_get, "cuDeviceGet", NULL);
	CU_LOAD(retain, "cuDevicePrimaryCtxRetain", NULL);
	CU_LOAD(release, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease");
	CU_LOAD(push, "cuCtxPushCurrent_v2", "cuCtxPushCurrent");
	CU_LOAD(pop, "cuCtxPopCurrent_v2", "cuCtxPopCurrent");
	CU_LOAD(wait, "cuStreamWaitEvent", NULL);
	CU_LOAD(create, "cuEventCreate", NULL);
	CU_LOAD(record, "cuEventRecord", NULL);
	CU_LOAD(destroy, "cuEventDestroy_v2", "cuEventDestroy");
	CU_LOAD(error_name, "cuGetErrorName", NULL);
	if (g_cu.ok)
		g_cu.init_rc = g_cu.init(0); /* idempotent; a failure is reported at use */
	return g_cu.ok;
}

static PyObject *cu_fail(const char *what, int rc)
{
	const char *name = NULL;
	if (g_cu.error_name)
		g_cu.error_name(rc, &name);
	PyErr_Format(PyExc_BufferError, "ordering the consumer stream after the group's data: %s failed (%s, CUresult %d)",
		     what, name ? name : "unknown", rc);
	return NULL;
}

static int cuda_order_consumer(uintptr_t consumer, int device, ovstage_cuda_sync_t sync)
{
	if (!sync.stream && !sync.wait_event)
		return 0; /* nothing outstanding */
	if (!cu_load()) {
		PyErr_SetString(PyExc_BufferError, "the group's CUDA data need ordering after their CUDA event, but the "
				"CUDA driver (libcuda.so.1 with cuStreamWaitEvent and the primary-context calls) cannot "
				"be loaded");
		return -1;
	}
	if (g_cu.init_rc) {
		cu_fail("cuInit", g_cu.init_rc);
		return -1;
	}
	int dev = 0, rc;
	void *ctx = NULL, *popped = NULL;
	if ((rc = g_cu.device_get(&dev, device)) != 0) {
		cu_fail("cuDeviceGet", rc);
		return -1;
	}
	if ((rc = g_cu.retain(&ctx, dev)) != 0) {
		cu_fail("cuDevicePrimaryCtxRetain", rc);
		return -1;
	}
	if ((rc = g_cu.push(ctx)) != 0) {
		g_cu.release(dev);
		cu_fail("cuCtxPushCurrent", rc);
		return -1;
	}
	void *cs = (void *)consumer;
	const char *what = NULL;
	if (sync.wait_event && (rc = g_cu.wait(cs, (void *)sync.wait_event, 0)) != 0)
		what = "cuStreamWaitEvent";
	if (!rc && sync.stream) { /* a stream to drain: an event recorded on it now, waited on */
		void *ev = NULL;
		if ((rc = g_cu.create(&ev, 2 /* CU_EVENT_DISABLE_TIMING */)) != 0) {
			what = "cuEventCreate";
		} else {
			if ((rc = g_cu.record(ev, (void *)sync.stream)) != 0)
				what = "cuEventRecord";
			else if ((rc = g_cu.wait(cs, ev, 0)) != 0)
				what = "cuStreamWaitEvent";
			g_cu.destroy(ev); /* destroying a pending event is allowed: its resources go when it fires */
		}
	}
	g_cu.pop(&popped);
	g_cu.release(dev);
	if (rc) {
		cu_fail(what, rc);
		return -1;
	}
	return 0;
}

static PyObject *managed_dlpack(ManagedObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature sig = SIGNATURE("__dlpack__", 1, 0, A_OBJ("stream"), A_OBJ("max_version"), A_OBJ("dl_device"),
					 A_OBJ("copy"));
	PyObject *a[4];
	if (match_args(&sig, args, nargs, kwnames, a) < 0)
		return NULL;
	int cuda = is_cuda_device(m->t.device.device_type);
	if (a[2] && a[2] != Py_None) {
		int dt = -1, di = -1;
		if (!PyArg_ParseTuple(a[2], "ii;dl_device must be (device_type, device_id)", &dt, &di))
			return NULL;
		if (dt != (int)m->t.device.device_type || di != (int)m->t.device.device_id) {
			PyErr_Format(PyExc_BufferError, "cannot export to device (%d, %d): the data are on (%d, %d) and "
				     "this exporter does not copy", dt, di, (int)m->t.device.device_type,
				     (int)m->t.device.device_id);
			return NULL;
		}
	}
	if (a[3] && a[3] == Py_True) {
		PyErr_SetString(PyExc_BufferError, "copy=True is not supported: the export is a zero-copy view");
		return NULL;
	}
	if (cuda) {
		/* The producer side of the protocol: stream None = the legacy default (1), 1 / 2 / a
		 * cudaStream_t = order that stream after the data, -1 = the consumer synchronises itself,
		 * 0 and other negatives are refused. */
		long long sv = 1;
		if (a[0] && a[0] != Py_None) {
			int ovf = 0;
			if (!PyLong_Check(a[0]) || PyBool_Check(a[0])) {
				PyErr_Format(PyExc_TypeError, "__dlpack__: stream must be an int or None, got %.80s %R",
					     Py_TYPE(a[0])->tp_name, a[0]);
				return NULL;
			}
			sv = PyLong_AsLongLongAndOverflow(a[0], &ovf);
			if (sv == -1 && PyErr_Occurred())
				return NULL;
			if (ovf > 0) { /* above LLONG_MAX: still a 64-bit handle */
				unsigned long long u = PyLong_AsUnsignedLongLong(a[0]);
				if (u == (unsigned long long)-1 && PyErr_Occurred())
					return NULL;
				sv = (long long)u;
			}
			if (ovf < 0 || sv == 0 || sv < -1) {
				PyErr_Format(PyExc_ValueError, "__dlpack__: stream=%R is not a consumer stream (0 is ambiguous "
					     "in the DLPack protocol; pass 1 (legacy default), 2 (per-thread default), a "
					     "stream handle, or -1 to synchronise yourself)", a[0]);
				return NULL;
			}
		}
		if (sv != -1 && cuda_order_consumer((uintptr_t)(unsigned long long)sv, (int)m->t.device.device_id, m->sync) < 0)
			return NULL;
	} else if (a[0] && a[0] != Py_None && !(PyLong_Check(a[0]) && PyLong_AsLong(a[0]) == -1)) {
		PyErr_Clear();
		PyErr_Format(PyExc_BufferError, "stream must be None for a CPU tensor, got %R", a[0]);
		return NULL;
	}
	int versioned = 0;
	if (a[1] && a[1] != Py_None) {
		long major = -1;
		if (!PyTuple_Check(a[1]) || PyTuple_GET_SIZE(a[1]) < 1 ||
		    ((major = PyLong_AsLong(PyTuple_GET_ITEM(a[1], 0))) == -1 && PyErr_Occurred())) {
			PyErr_Clear();
			PyErr_Format(PyExc_TypeError, "max_version must be a (major, minor) tuple, got %R", a[1]);
			return NULL;
		}
		versioned = major >= 1;
	}
	export_ctx *c = PyMem_RawCalloc(1, sizeof *c);
	if (!c)
		return PyErr_NoMemory();
	memcpy(c->shape, m->shape, sizeof c->shape);
	memcpy(c->strides, m->strides, sizeof c->strides);
	DLTensor t = m->t;
	t.shape = c->shape;
	t.strides = c->strides;
	Py_INCREF(m->pin);
	c->pin = m->pin;
	PyObject *cap;
	if (versioned) {
		c->v.version.major = 1;
		c->v.version.minor = 0;
		c->v.manager_ctx = c;
		c->v.deleter = export_deleter_v;
		c->v.flags = m->readonly ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
		c->v.dl_tensor = t;
		cap = PyCapsule_New(&c->v, "dltensor_versioned", export_capsule_destructor);
	} else {
		c->l.manager_ctx = c;
		c->l.deleter = export_deleter_l;
		c->l.dl_tensor = t;
		cap = PyCapsule_New(&c->l, "dltensor", export_capsule_destructor);
	}
	if (!cap) {
		Py_DECREF(c->pin);
		PyMem_RawFree(c);
	}
	return cap;
}

static PyObject *managed_dlpack_device(ManagedObject *m, PyObject *unused)
{
	(void)unused;
	return Py_BuildValue("(ii)", (int)m->t.device.device_type, (int)m->t.device.device_id);
}

static PyObject *managed_numpy(ManagedObject *m, PyObject *unused)
{
	(void)unused;
	PyObject *np = PyImport_ImportModule("numpy");
	if (!np)
		return NULL;
	PyObject *r = PyObject_CallMethod(np, "from_dlpack", "O", (PyObject *)m);
	Py_DECREF(np);
	return r;
}

static PyObject *managed_shape(ManagedObject *m, void *c)
{
	(void)c;
	PyObject *t = PyTuple_New(m->t.ndim);
	for (int i = 0; t && i < m->t.ndim; i++)
		PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(m->shape[i]));
	return t;
}
static PyObject *managed_dtype(ManagedObject *m, void *c)
{
	(void)c;
	return dltype_tuple(m->t.dtype);
}
static PyObject *managed_device(ManagedObject *m, void *c)
{
	(void)c;
	return managed_dlpack_device(m, NULL);
}
static PyObject *managed_readonly(ManagedObject *m, void *c)
{
	(void)c;
	return PyBool_FromLong(m->readonly);
}

static void managed_dealloc(ManagedObject *m)
{
	Py_XDECREF(m->pin);
	Py_TYPE(m)->tp_free((PyObject *)m);
}

static PyMethodDef managed_methods[] = {
	{ "__dlpack__", (PyCFunction)(void (*)(void))managed_dlpack, METH_FASTCALL | METH_KEYWORDS,
	  "__dlpack__(stream=None, max_version=None, dl_device=None, copy=None) -> capsule\n\nA versioned capsule "
	  "(read-only flag set for read groups) when max_version >= (1, 0), else a legacy one.\nFor CUDA data the "
	  "consumer stream is first ordered after the group's cuda_sync." },
	{ "__dlpack_device__", (PyCFunction)managed_dlpack_device, METH_NOARGS, "(device_type, device_id)" },
	{ "numpy", (PyCFunction)managed_numpy, METH_NOARGS, "numpy.from_dlpack(self): a zero-copy numpy view (CPU)" },
	{ NULL },
};

static PyGetSetDef managed_getset[] = {
	{ "shape", (getter)managed_shape, NULL, "exported shape (one trailing lane axis when lanes > 1)", NULL },
	{ "dtype", (getter)managed_dtype, NULL, "exported element type (lanes 1)", NULL },
	{ "device", (getter)managed_device, NULL, "(device_type, device_id)", NULL },
	{ "readonly", (getter)managed_readonly, NULL, "exported with the DLPack read-only flag", NULL },
	{ NULL },
};

static PyTypeObject ManagedType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ovstage.ManagedDLTensor",
	.tp_basicsize = sizeof(ManagedObject),
	.tp_dealloc = (destructor)managed_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A group tensor exported through DLPack: pass it to numpy/torch/cupy/warp from_dlpack.\n"
		  "It pins the group's memory until every consumer is done.",
	.tp_methods = managed_methods,
	.tp_getset = managed_getset,
};

static PyObject *group_dlpack(GroupObject *g, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature sig = SIGNATURE("dlpack", 2, 1, A_OBJ("i"), A_OBJ("readonly"));
	PyObject *a[2];
	if (match_args(&sig, args, nargs, kwnames, a) < 0)
		return NULL;
	const DLTensor *t;
	if (tensor_index(g, a[0], &t) < 0)
		return NULL;
	bool ro = !g->is_map;
	if (a[1] && a[1] != Py_None && parse_bool(a[1], "readonly", &ro) < 0)
		return NULL;
	if (!ro && !g->is_map) {
		PyErr_SetString(PyExc_ValueError, "read group data are read-only (readonly=False is for map groups)");
		return NULL;
	}
	if (t->ndim > OVS_MAX_NDIM)
		return raise_code(OVSTAGE_ERROR_NOT_SUPPORTED, "tensor has %d dimensions", (int)t->ndim);
	ManagedObject *m = PyObject_New(ManagedObject, &ManagedType);
	if (!m)
		return NULL;
	m->pin = pin_new(g);
	if (!m->pin) {
		Py_TYPE(m)->tp_free((PyObject *)m);
		return NULL;
	}
	m->t = *t;
	m->t.ndim = expanded_layout(t, m->shape, m->strides);
	m->t.shape = m->shape;
	m->t.strides = m->strides;
	m->t.dtype.lanes = 1;
	m->readonly = ro;
	m->sync = group_data(g)->cuda_sync;
	return (PyObject *)m;
}

static PyObject *group_tensor(GroupObject *g, PyObject *arg)
{
	const DLTensor *t;
	if (tensor_index(g, arg, &t) < 0)
		return NULL;
	DLTensorObject *o = PyObject_New(DLTensorObject, &DLTensorType);
	if (!o)
		return NULL;
	o->managed = NULL;
	o->versioned = 0;
	o->flags = g->is_map ? 0 : DLPACK_FLAG_BITMASK_READ_ONLY;
	o->stream = 0;
	/* A device group's data are ready after its wait_event: a write of this tensor waits on it. */
	o->event = (uintptr_t)group_data(g)->cuda_sync.wait_event;
	o->stream_obj = NULL;
	o->own = NULL;
	o->t = *t;
	o->owner = pin_new(g);
	if (!o->owner) {
		Py_DECREF(o);
		return NULL;
	}
	return (PyObject *)o;
}

static PyObject *group_prim_index(GroupObject *g, PyObject *arg)
{
	uint64_t i;
	if (group_u64_arg(g, arg, "prim index", &i) < 0)
		return NULL;
	const ovstage_prim_group_t *p = group_prims(g);
	if (i >= p->count) {
		PyErr_Format(PyExc_IndexError, "prim index %llu out of range (the group covers %u prims)",
			     (unsigned long long)i, (unsigned)p->count);
		return NULL;
	}
	return PyLong_FromUnsignedLong(p->index_map ? p->index_map[i] : p->offset + (uint32_t)i);
}

static PyObject *group_data_row_index(GroupObject *g, PyObject *arg)
{
	uint64_t i;
	if (group_u64_arg(g, arg, "element index", &i) < 0)
		return NULL;
	const ovstage_data_t *d = group_data(g);
	uint64_t n = d->index_map ? d->count : group_prims(g)->count;
	if (i >= n) {
		PyErr_Format(PyExc_IndexError, "element index %llu out of range (%llu elements)", (unsigned long long)i,
			     (unsigned long long)n);
		return NULL;
	}
	return PyLong_FromUnsignedLong(d->index_map ? d->index_map[i] : (uint32_t)i);
}

static PyObject *group_release(GroupObject *g, PyObject *unused)
{
	(void)unused;
	if (g->is_map)
		return raise_code(OVSTAGE_ERROR_INVALID_ARGUMENT, "a MapGroup is committed with Map.unmap_group(group) "
				  "or Map.unmap()");
	if (g->released)
		return raise_code(OVSTAGE_ERROR_INVALID_HANDLE, "ReadGroup %llu was already released",
				  (unsigned long long)g->rg.read_group_id);
	g->released = 1;
	if (g->exports == 0)
		group_c_release(g);
	Py_RETURN_NONE;
}

static PyObject *group_enter(GroupObject *g, PyObject *unused)
{
	(void)unused;
	Py_INCREF(g);
	return (PyObject *)g;
}

static PyObject *group_exit(GroupObject *g, PyObject *args)
{
	(void)args;
	if (!g->is_map && !g->released) {
		g->released = 1;
		if (g->exports == 0)
			group_c_release(g);
	}
	Py_RETURN_FALSE;
}

#define GROUP_GETTER(name, expr)                                                                             \
	static PyObject *group_get_##name(GroupObject *g, void *c)                                           \
	{                                                                                                    \
		(void)c;                                                                                     \
		return expr;                                                                                 \
	}
GROUP_GETTER(attribute, PyLong_FromUnsignedLongLong(g->rg.attribute))
GROUP_GETTER(ordinal, PyLong_FromUnsignedLongLong(g->rg.ordinal))
GROUP_GETTER(is_delete, PyBool_FromLong(g->rg.is_delete))
GROUP_GETTER(is_array, PyBool_FromLong(g->rg.is_array))
GROUP_GETTER(semantic, PyLong_FromLong((long)g->rg.semantic))
GROUP_GETTER(read_group_id, PyLong_FromUnsignedLongLong(g->rg.read_group_id))
GROUP_GETTER(prim_list, PyLong_FromUnsignedLongLong(group_prims(g)->list))
GROUP_GETTER(prim_offset, PyLong_FromUnsignedLong(group_prims(g)->offset))
GROUP_GETTER(prim_count, PyLong_FromUnsignedLong(group_prims(g)->count))
GROUP_GETTER(has_prim_index_map, PyBool_FromLong(group_prims(g)->index_map != NULL))
GROUP_GETTER(tensor_count, PyLong_FromUnsignedLong(group_data(g)->tensor_count))
GROUP_GETTER(data_count, PyLong_FromUnsignedLong(group_data(g)->count))
GROUP_GETTER(has_data_index_map, PyBool_FromLong(group_data(g)->index_map != NULL))
GROUP_GETTER(has_mask, PyBool_FromLong(group_data(g)->mask != NULL))
GROUP_GETTER(released, PyBool_FromLong(g->released || (g->is_map && (g->unmapped || g->map->released))))
GROUP_GETTER(cuda_sync, Py_BuildValue("(KK)", (unsigned long long)group_data(g)->cuda_sync.stream,
				       (unsigned long long)group_data(g)->cuda_sync.wait_event))

static PyObject *group_get_meta(GroupObject *g, void *c)
{
	(void)c;
	const ovstage_attribute_meta_t *m = g->is_map ? &g->mg.meta : &g->rg.meta;
	if (g_attribute_meta_class)
		return PyObject_CallFunction(g_attribute_meta_class, "KK",
					     (unsigned long long)m->attribute_write_floor_ordinal,
					     (unsigned long long)m->layout_generation);
	return Py_BuildValue("(KK)", (unsigned long long)m->attribute_write_floor_ordinal,
			     (unsigned long long)m->layout_generation);
}

static PyObject *group_mask_word(GroupObject *g, PyObject *arg)
{
	uint64_t i;
	if (group_u64_arg(g, arg, "mask word index", &i) < 0)
		return NULL;
	const ovstage_data_t *d = group_data(g);
	if (!d->mask || i >= (d->count + 63u) / 64u) {
		PyErr_Format(PyExc_IndexError, "mask word %llu out of range (%s)", (unsigned long long)i,
			     d->mask ? "past the count" : "the group has no mask");
		return NULL;
	}
	return PyLong_FromUnsignedLongLong(d->mask[i]);
}

static PyMethodDef group_methods[] = {
	{ "array", (PyCFunction)group_array, METH_O,
	  "array(i) -> numpy.ndarray\n\nA zero-copy numpy view of tensor i, flat in base elements (lanes folded into "
	  "the length;\nread-only for read groups, writable for map groups; CPU only). It stays valid after\n"
	  "release: the group's memory is given back when the last view is gone." },
	{ "dlpack", (PyCFunction)(void (*)(void))group_dlpack, METH_FASTCALL | METH_KEYWORDS,
	  "dlpack(i, readonly=None) -> ManagedDLTensor\n\nTensor i for any from_dlpack (numpy, torch, cupy, warp), "
	  "with exactly one trailing lane\naxis: (N, 3) for point3f, (N, 16) for matrix4d, (N,) for scalars." },
	{ "tensor", (PyCFunction)group_tensor, METH_O, "tensor(i) -> DLTensor: the raw lane-canonical descriptor" },
	{ "prim_index", (PyCFunction)group_prim_index, METH_O,
	  "prim_index(i) -> int: position in prim_list of the group's i-th prim" },
	{ "data_row_index", (PyCFunction)group_data_row_index, METH_O,
	  "data_row_index(i) -> int: the tensor row holding the i-th logical element" },
	{ "mask_word", (PyCFunction)group_mask_word, METH_O, "mask_word(i) -> int: word i of the validity mask" },
	{ "release", (PyCFunction)group_release, METH_NOARGS,
	  "release(): gives the read group back (at once, or when its last view goes)" },
	{ "__enter__", (PyCFunction)group_enter, METH_NOARGS, NULL },
	{ "__exit__", (PyCFunction)group_exit, METH_VARARGS, NULL },
	{ NULL },
};

static PyGetSetDef read_group_getset[] = {
	{ "attribute", (getter)group_get_attribute, NULL, "attribute token", NULL },
	{ "ordinal", (getter)group_get_ordinal, NULL, "informational ordinal of the data", NULL },
	{ "is_delete", (getter)group_get_is_delete, NULL, "tombstone group (no tensors)", NULL },
	{ "is_array", (getter)group_get_is_array, NULL, "the column is an array (ragged) column", NULL },
	{ "semantic", (getter)group_get_semantic, NULL, "recorded role (AttributeSemantic value)", NULL },
	{ "read_group_id", (getter)group_get_read_group_id, NULL, "engine id of the group", NULL },
	{ "prim_list", (getter)group_get_prim_list, NULL, "borrowed path list handle of the covered prims", NULL },
	{ "prim_offset", (getter)group_get_prim_offset, NULL, "first covered position (no prim index map)", NULL },
	{ "prim_count", (getter)group_get_prim_count, NULL, "number of covered prims", NULL },
	{ "has_prim_index_map", (getter)group_get_has_prim_index_map, NULL, "prims are list[index_map[i]]", NULL },
	{ "tensor_count", (getter)group_get_tensor_count, NULL, "number of tensors", NULL },
	{ "data_count", (getter)group_get_data_count, NULL, "logical element count of index map / mask (0 = none)", NULL },
	{ "has_data_index_map", (getter)group_get_has_data_index_map, NULL, "rows resolve through data_row_index", NULL },
	{ "has_mask", (getter)group_get_has_mask, NULL, "a validity mask is present", NULL },
	{ "meta", (getter)group_get_meta, NULL, "AttributeMeta(attribute_write_floor_ordinal, layout_generation)", NULL },
	{ "cuda_sync", (getter)group_get_cuda_sync, NULL, "(stream, wait_event) to apply before touching the data", NULL },
	{ "released", (getter)group_get_released, NULL, "True once released (or unmapped)", NULL },
	{ NULL },
};

static PyGetSetDef map_group_getset[] = {
	{ "prim_list", (getter)group_get_prim_list, NULL, "borrowed path list handle of the covered prims", NULL },
	{ "prim_offset", (getter)group_get_prim_offset, NULL, "first covered position (no prim index map)", NULL },
	{ "prim_count", (getter)group_get_prim_count, NULL, "number of covered prims", NULL },
	{ "has_prim_index_map", (getter)group_get_has_prim_index_map, NULL, "prims are list[index_map[i]]", NULL },
	{ "tensor_count", (getter)group_get_tensor_count, NULL, "number of tensors", NULL },
	{ "data_count", (getter)group_get_data_count, NULL, "logical element count of index map / mask (0 = none)", NULL },
	{ "has_data_index_map", (getter)group_get_has_data_index_map, NULL, "rows resolve through data_row_index", NULL },
	{ "meta", (getter)group_get_meta, NULL, "AttributeMeta(attribute_write_floor_ordinal, layout_generation)", NULL },
	{ "cuda_sync", (getter)group_get_cuda_sync, NULL, "(stream, wait_event)", NULL },
	{ "released", (getter)group_get_released, NULL, "True once unmapped", NULL },
	{ NULL },
};

static PyTypeObject ReadGroupType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ovstage.ReadGroup",
	.tp_basicsize = sizeof(GroupObject),
	.tp_dealloc = (destructor)group_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "One group of a read: one attribute over a subset of the query's prims (a zero-copy view of\n"
		  "the sealed data). A context manager: release() on exit.",
	.tp_methods = group_methods,
	.tp_getset = read_group_getset,
};

static PyTypeObject MapGroupType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ovstage.MapGroup",
	.tp_basicsize = sizeof(GroupObject),
	.tp_dealloc = (destructor)group_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "One writable group of a map session: fill array(i) (or dlpack(i)), then commit with\n"
		  "Map.unmap_group(group) or Map.unmap(). Views must be gone before the commit.",
	.tp_methods = group_methods,
	.tp_getset = map_group_getset,
};

/* ---- Stage: argument resolution -------------------------------------------------------------- */

static PyTypeObject StageType;

static int get_handle(StageObject *st, PyObject *o, PyTypeObject *type, const char *what, uint64_t *out,
		      HandleObject **hout)
{
	if (hout)
		*hout = NULL;
	if (Py_TYPE(o) == type || PyObject_TypeCheck(o, type)) {
		HandleObject *h = (HandleObject *)o;
		if (h->stage != st) {
			PyErr_Format(PyExc_ValueError, "%s %R belongs to another stage", what, o);
			return -1;
		}
		if (handle_live(h) < 0)
			return -1;
		*out = h->handle;
		if (hout)
			*hout = h;
		return 0;
	}
	if (PyLong_Check(o) && !PyBool_Check(o))
		return parse_u64(o, what, out);
	PyErr_Format(PyExc_TypeError, "%s must be an ovstage.%s (or a raw int handle), got %.80s %R", what, type->tp_name + 8,
		     Py_TYPE(o)->tp_name, o);
	return -1;
}

/* Parses a call by its signature: one out pointer per parameter, typed as the table says. */
static int parse_call(signature *s, StageObject *st, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
		      void *const *outs, int nout)
{
	PyObject *a[OVS_MAX_PARAMS];
	if (nout != s->n) {
		PyErr_Format(PyExc_SystemError, "%s(): %d out pointers for %d parameters", s->fn, nout, s->n);
		return -1;
	}
	if ((st && stage_check(st) < 0) || match_args(s, args, nargs, kwnames, a) < 0)
		return -1;
	int rc = 0;
	for (int i = 0; i < s->n && rc == 0; i++) {
		const param *p = &s->p[i];
		void *out = outs[i];
		PyObject *o = a[i];
		if (p->kind == K_OBJ) {
			*(PyObject **)out = o;
			continue;
		}
		if (p->kind == K_TIMEOUT) {
			rc = parse_timeout(o, out);
			continue;
		}
		if (p->kind == K_ATTR && i >= s->nreq)
			memset(out, 0, sizeof(ovx_string_or_token_t));
		if (!o || (o == Py_None && i >= s->nreq))
			continue; /* the default */
		if (p->kind == K_U64)
			rc = parse_u64(o, p->name, out);
		else if (p->kind == K_ATTR)
			rc = parse_attr(o, p->name, out);
		else if (p->kind == K_HANDLE)
			rc = get_handle(st, o, p->type, p->name, out, NULL);
		else
			rc = parse_enum(o, p->name, p->lo, p->hi, out);
	}
	return rc;
}

/* A sequence of attribute names (str) / tokens (int) as interned tokens in the arena. A lone str or
 * int counts as a one-entry sequence; None gives zero entries. */
static int parse_tokens(StageObject *st, PyObject *o, const char *what, arena_block **arena, ovx_token_t **out,
			size_t *n)
{
	*out = NULL;
	*n = 0;
	if (!o || o == Py_None)
		return 0;
	PyObject *f;
	if (PyUnicode_Check(o) || PyLong_Check(o))
		f = PyTuple_Pack(1, o);
	else
		f = PySequence_Fast(o, "");
	if (!f) {
		PyErr_Format(PyExc_TypeError, "%s must be a list of attribute names (str) or tokens (int), got %.80s", what,
			     Py_TYPE(o)->tp_name);
		return -1;
	}
	Py_ssize_t len = PySequence_Fast_GET_SIZE(f);
	ovx_token_t *t = arena_alloc(arena, sizeof *t * (size_t)(len ? len : 1));
	ovx_string_t *strs = NULL;
	size_t *where = NULL;
	size_t ns = 0;
	int rc = -1;
	if (!t)
		goto out;
	for (Py_ssize_t i = 0; i < len; i++) {
		PyObject *it = PySequence_Fast_GET_ITEM(f, i);
		ovx_string_or_token_t a;
		char label[64];
		snprintf(label, sizeof label, "%s[%zd]", what, i);
		if (parse_attr(it, label, &a) < 0)
			goto out;
		if (a.token) {
			t[i] = a.token;
		} else {
			if (!strs) {
				strs = PyMem_Malloc(sizeof *strs * (size_t)len);
				where = PyMem_Malloc(sizeof *where * (size_t)len);
				if (!strs || !where) {
					PyErr_NoMemory();
					goto out;
				}
			}
			strs[ns] = a.string;
			where[ns++] = (size_t)i;
		}
	}
	if (ns) {
		ovx_token_t *tmp = PyMem_Malloc(sizeof *tmp * ns);
		if (!tmp) {
			PyErr_NoMemory();
			goto out;
		}
		ovx_api_result_t r = path_dictionary_create_tokens_from_strings(st->pd, strs, ns, tmp);
		if (r.status != OVX_API_SUCCESS) {
			PyMem_Free(tmp);
			raise_ovx(st->pd, r, what);
			goto out;
		}
		for (size_t k = 0; k < ns; k++)
			t[where[k]] = tmp[k];
		PyMem_Free(tmp);
	}
	*out = t;
	*n = (size_t)len;
	rc = 0;
out:
	PyMem_Free(strs);
	PyMem_Free(where);
	Py_DECREF(f);
	return rc;
}

static int parse_range(PyObject *o, ovstage_ordinal_range_t *r)
{
	memset(r, 0, sizeof *r);
	if (PyLong_Check(o))
		return parse_u64(o, "ordinal_range (latest ordinal)", &r->end_ordinal);
	PyObject *e = PyObject_GetAttr(o, s_end_ordinal);
	if (!e) {
		PyErr_Clear();
		PyErr_Format(PyExc_TypeError, "ordinal_range must be an OrdinalRange (or an int: latest at that ordinal), "
			     "got %.80s", Py_TYPE(o)->tp_name);
		return -1;
	}
	int rc = parse_u64(e, "ordinal_range.end_ordinal", &r->end_ordinal);
	Py_DECREF(e);
	if (rc < 0)
		return -1;
	PyObject *s = PyObject_GetAttr(o, s_start_ordinal);
	if (!s)
		return -1;
	if (s != Py_None) {
		rc = parse_u64(s, "ordinal_range.start_ordinal", &r->start_ordinal);
		r->has_start_ordinal = true;
	}
	Py_DECREF(s);
	return rc;
}

/* An integer array argument as a contiguous numpy array of `type` (NPY_INT64 or NPY_UINT64): ints
 * or bools only (floats are refused, not truncated), negatives refused for NPY_UINT64. */
static PyArrayObject *int_array(PyObject *o, int type, const char *what)
{
	PyArrayObject *a0 = (PyArrayObject *)PyArray_FROM_O(o);
	if (!a0 || PyArray_NDIM(a0) != 1 || !strchr("iub", PyArray_DESCR(a0)->kind) ||
	    (PyArray_SIZE(a0) == 0 && PyArray_DESCR(a0)->kind == 'f')) {
		int empty_ok = a0 && PyArray_NDIM(a0) == 1 && PyArray_SIZE(a0) == 0;
		if (!empty_ok) {
			PyErr_Clear();
			PyErr_Format(PyExc_TypeError, "%s must be a 1-D sequence of non-negative ints, got %.80s %.200R", what,
				     Py_TYPE(o)->tp_name, o);
			Py_XDECREF(a0);
			return NULL;
		}
	}
	if (type == NPY_UINT64 && PyArray_DESCR(a0)->kind == 'i') {
		PyArrayObject *s = (PyArrayObject *)PyArray_FROMANY((PyObject *)a0, NPY_INT64, 1, 1, NPY_ARRAY_CARRAY);
		if (!s) {
			Py_DECREF(a0);
			return NULL;
		}
		const int64_t *v = PyArray_DATA(s);
		for (npy_intp i = 0; i < PyArray_SIZE(s); i++)
			if (v[i] < 0) {
				PyErr_Format(PyExc_ValueError, "%s[%zd] = %lld is negative", what, (Py_ssize_t)i, (long long)v[i]);
				Py_DECREF(s);
				Py_DECREF(a0);
				return NULL;
			}
		Py_DECREF(s);
	}
	PyObject *a = PyArray_FROMANY((PyObject *)a0, type, 1, 1, NPY_ARRAY_CARRAY | NPY_ARRAY_FORCECAST);
	Py_DECREF(a0);
	return (PyArrayObject *)a;
}

typedef struct {
	PyObject *tensors, *is_array, *semantic, *index_map, *mask, *count, *cuda_event, *cuda_stream;
} write_args;

/* What build_write learns of a write's CUDA tensors: the stream the stage drains, the event. */
typedef struct {
	uintptr_t user_stream; /* cuda_stream= (0: not given) */
	uintptr_t event;       /* cuda_event=, or the device read groups' ready event */
	uintptr_t stream;      /* the stream every CUDA tensor was taken on (0 until the first) */
	int user_event;        /* cuda_event= was given */
	int any_cuda;
} cuda_plan;

/* A CUDA tensor of the write: one write has one cuda_sync, so every producer must have been told
 * the same stream (t->stream: what its __dlpack__ got; 0 for a read group's tensor, which has no
 * producer stream), and that is the stream the stage drains. A tensor taken earlier on another
 * stream (DLTensor.from_dlpack / make_dltensor with their own stream=) cannot be ordered by this
 * write's stream: refused, naming both. A device read group's tensor is ready after its group's
 * event, which becomes the write's wait event. */
static int plan_cuda_tensor(cuda_plan *c, const DLTensorObject *t, const char *what)
{
	if (!c->stream)
		c->stream = c->user_stream ? c->user_stream : t->stream;
	if (t->stream && c->stream && t->stream != c->stream) {
		PyErr_Format(PyExc_ValueError, "%s: this CUDA tensor was taken on stream %llu but the write "
			     "is ordered on stream %llu%s; take every tensor of one write on its stream "
			     "(DLTensor.from_dlpack(obj, stream=...) / make_dltensor(obj, stream=...))",
			     what, (unsigned long long)t->stream, (unsigned long long)c->stream,
			     c->user_stream ? " (cuda_stream=)" : " (the first CUDA tensor's)");
		return -1;
	}
	if (t->event && t->event != c->event) {
		if (c->event && c->user_event) {
			PyErr_Format(PyExc_ValueError, "%s: this tensor of a device read group is ready after "
				     "its group's CUDA event %p, and cuda_event=%p was given too (one "
				     "write waits on one event): wait on the group's event in your stream "
				     "and pass that stream", what, (void *)(uintptr_t)t->event,
				     (void *)(uintptr_t)c->event);
			return -1;
		}
		if (c->event) {
			PyErr_Format(PyExc_ValueError, "%s: the tensors come from device read groups with "
				     "different CUDA events (%p and %p); write them separately", what,
				     (void *)(uintptr_t)c->event, (void *)(uintptr_t)t->event);
			return -1;
		}
		c->event = t->event;
	}
	c->any_cuda = 1;
	return 0;
}

/* The DLPack transport: tensors (one, or a list for per-row arrays) taken in with the write's
 * stream, out->tensors / tensor_count / cuda_sync set; *bytes grows by their extents. */
static int write_tensors(const char *label, const write_args *w, arena_block **arena, PyObject *inputs,
			 ovstage_write_data_t *out, uint64_t *bytes)
{
	if (!w->tensors || w->tensors == Py_None) {
		PyErr_Format(PyExc_TypeError, "%s: tensors is required (an array, a DLPack producer, a DLTensor or a "
			     "list of them for per-row array transport)", label);
		return -1;
	}
	int per_row = PyList_Check(w->tensors) || PyTuple_Check(w->tensors);
	Py_ssize_t n = per_row ? PySequence_Fast_GET_SIZE(w->tensors) : 1;
	if (n > (Py_ssize_t)UINT32_MAX) {
		PyErr_Format(PyExc_ValueError, "%s: too many tensors (%zd)", label, n);
		return -1;
	}
	DLTensor *ts = arena_alloc(arena, sizeof(DLTensor) * (size_t)(n ? n : 1));
	if (!ts)
		return -1;
	cuda_plan c = { 0 };
	c.user_event = w->cuda_event && w->cuda_event != Py_None;
	if (parse_cuda_handle(w->cuda_stream, "cuda_stream", s_cuda_stream_attr, &c.user_stream) < 0 ||
	    parse_cuda_handle(w->cuda_event, "cuda_event", s_cuda_event_attr, &c.event) < 0)
		return -1;
	PyObject *stream_arg = c.user_stream ? PyLong_FromUnsignedLongLong(c.user_stream) : NULL;
	if (c.user_stream && !stream_arg)
		return -1;
	int rc = 0;
	for (Py_ssize_t i = 0; i < n && rc == 0; i++) {
		PyObject *src = per_row ? PySequence_Fast_GET_ITEM(w->tensors, i) : w->tensors;
		char what[64];
		if (per_row)
			snprintf(what, sizeof what, "%s: tensors[%zd]", label, i);
		else
			snprintf(what, sizeof what, "%s: tensors", label);
		DLTensorObject *t = (DLTensorObject *)as_dltensor(src, stream_arg, what);
		rc = !t || PyList_Append(inputs, (PyObject *)t) < 0 ? -1 : 0;
		Py_XDECREF(t); /* the inputs list keeps it */
		if (rc < 0)
			break;
		ts[i] = t->t;
		uint64_t ext = 0, elem = (uint64_t)t->t.dtype.bits * t->t.dtype.lanes;
		if (elem % 8 == 0 && tensor_extent(&t->t, elem / 8, &ext) == 0)
			*bytes += ext;
		if (is_cuda_device(t->t.device.device_type))
			rc = plan_cuda_tensor(&c, t, what);
	}
	Py_XDECREF(stream_arg);
	if (rc < 0)
		return -1;
	out->tensors = ts;
	out->tensor_count = (uint32_t)n;
	/* The stage drains the stream the producers were told we read on (1, the legacy default, when
	 * no producer was asked), and waits on the event. */
	out->cuda_sync.stream = c.any_cuda ? (c.stream ? c.stream : 1) : c.user_stream;
	out->cuda_sync.wait_event = c.event;
	if (c.user_event && PyList_Append(inputs, w->cuda_event) < 0)
		return -1;
	if (w->cuda_stream && w->cuda_stream != Py_None && PyList_Append(inputs, w->cuda_stream) < 0)
		return -1;
	return 0;
}

/* The index-map transport: index_map (ints in [0, 2**32-1]) copied into the arena; count defaults
 * to its length. */
static int write_index_map(const char *label, PyObject *index_map, int has_count, arena_block **arena,
			   ovstage_write_data_t *out, uint32_t *count)
{
	PyArrayObject *m = int_array(index_map, NPY_INT64, "index_map");
	if (!m)
		return -1;
	npy_intp len = PyArray_SIZE(m);
	int rc = -1;
	uint32_t *im = NULL;
	if (len == 0 || len > (npy_intp)UINT32_MAX) {
		PyErr_Format(PyExc_ValueError, "%s: index_map must have 1 to 2**32-1 entries (has %zd)", label,
			     (Py_ssize_t)len);
		goto out;
	}
	if (!has_count)
		*count = (uint32_t)len;
	if (*count > (uint64_t)len) {
		PyErr_Format(PyExc_ValueError, "%s: count %u exceeds the %zd index_map entries", label, (unsigned)*count,
			     (Py_ssize_t)len);
		goto out;
	}
	if (!(im = arena_alloc(arena, sizeof *im * (size_t)len)))
		goto out;
	const int64_t *src = PyArray_DATA(m);
	for (npy_intp i = 0; i < len; i++) {
		if (src[i] < 0 || src[i] > (int64_t)UINT32_MAX) {
			PyErr_Format(PyExc_ValueError, "%s: index_map[%zd] = %lld is out of [0, 2**32-1]", label,
				     (Py_ssize_t)i, (long long)src[i]);
			goto out;
		}
		im[i] = (uint32_t)src[i];
	}
	out->index_map = im;
	rc = 0;
out:
	Py_DECREF(m);
	return rc;
}

/* The mask transport: a numpy bool array of count entries, or uint64 words (LSB first), as words. */
static int write_mask(const char *label, PyObject *mask, uint32_t count, arena_block **arena,
		      ovstage_write_data_t *out)
{
	size_t words = ((size_t)count + 63) / 64;
	uint64_t *mk = arena_alloc(arena, sizeof *mk * words);
	if (!mk)
		return -1;
	int bools = PyArray_Check(mask) && PyArray_TYPE((PyArrayObject *)mask) == NPY_BOOL;
	PyArrayObject *m = bools ? (PyArrayObject *)PyArray_FROMANY(mask, NPY_BOOL, 1, 1, NPY_ARRAY_CARRAY)
				 : int_array(mask, NPY_UINT64, "mask (uint64 words, LSB first)");
	if (!m)
		return -1;
	size_t have = (size_t)PyArray_SIZE(m);
	int rc = -1;
	if (bools && have < count) {
		PyErr_Format(PyExc_ValueError, "%s: a boolean mask needs %u entries, has %zu", label, (unsigned)count,
			     have);
	} else if (!bools && have < words) {
		PyErr_Format(PyExc_ValueError, "%s: count %u needs %zu mask words, got %zu", label, (unsigned)count,
			     words, have);
	} else if (bools) {
		const npy_bool *bv = PyArray_DATA(m);
		for (uint32_t i = 0; i < count; i++)
			if (bv[i])
				mk[i / 64] |= 1ull << (i % 64);
		rc = 0;
	} else {
		memcpy(mk, PyArray_DATA(m), sizeof *mk * words);
		rc = 0;
	}
	Py_DECREF(m);
	if (rc == 0)
		out->mask = mk;
	return rc;
}

/* Fills one ovstage_write_data_t; borrowed memory goes to the arena, keepalives to `inputs`. */
static int build_write(StageObject *st, const char *label, const write_args *w, arena_block **arena, PyObject *inputs,
		       ovstage_write_data_t *out, uint64_t *bytes)
{
	(void)st;
	memset(out, 0, sizeof *out);
	if (!w->is_array || w->is_array == Py_None) {
		PyErr_Format(PyExc_TypeError, "%s: is_array=True or False is required (the attribute kind is never "
			     "inferred)", label);
		return -1;
	}
	bool is_array;
	if (parse_bool(w->is_array, "is_array", &is_array) < 0)
		return -1;
	out->is_array = is_array;
	if (w->semantic && w->semantic != Py_None) {
		int sem;
		if (parse_enum(w->semantic, "semantic", 0, 65535, &sem) < 0)
			return -1;
		out->semantic = (ovstage_attribute_semantic_t)sem;
	}
	if (write_tensors(label, w, arena, inputs, out, bytes) < 0)
		return -1;
	int has_map = w->index_map && w->index_map != Py_None, has_mask = w->mask && w->mask != Py_None;
	int has_count = w->count && w->count != Py_None;
	if (has_map && has_mask) {
		PyErr_Format(PyExc_ValueError, "%s: index_map and mask are mutually exclusive", label);
		return -1;
	}
	uint32_t count = 0;
	if (has_count) {
		if (parse_u32(w->count, "count", &count) < 0)
			return -1;
		if (count == 0) {
			PyErr_Format(PyExc_ValueError, "%s: count=0 is not allowed (0 means the whole query in C; "
				     "pass count=None)", label);
			return -1;
		}
	}
	if (has_map && write_index_map(label, w->index_map, has_count, arena, out, &count) < 0)
		return -1;
	if (has_mask && !has_count) {
		PyErr_Format(PyExc_ValueError, "%s: a mask needs an explicit count (the number of logical elements)",
			     label);
		return -1;
	}
	if (has_mask && write_mask(label, w->mask, count, arena, out) < 0)
		return -1;
	out->count = count;
	return 0;
}

/* ---- Stage: lifecycle ----------------------------------------------------------------------- */

static void stage_maybe_finalize(StageObject *st)
{
	/* busy: a call of another thread is still inside the engine; destroy() (or the dealloc) retries. */
	if (!st->closed || !st->inst || st->nlive != 0 || st->busy != 0)
		return;
	ovstage_instance_t *in = st->inst;
	st->inst = NULL;
	st->pd = NULL;
	int rc;
	Py_BEGIN_ALLOW_THREADS
	pthread_mutex_lock(&g_instances_lock);
	rc = ovstage_destroy_instance(in);
	if (rc == OVSTAGE_OK && --g_instances == 0)
		atomic_fetch_add(&g_pd_epoch, 1);
	pthread_mutex_unlock(&g_instances_lock);
	if (rc == OVSTAGE_OK && st->initialized)
		ovstage_shutdown();
	Py_END_ALLOW_THREADS
	st->initialized = 0;
	if (rc != OVSTAGE_OK) {
		PyObject *et, *ev, *tb;
		PyErr_Fetch(&et, &ev, &tb);
		ovx_string_t e = ovstage_get_last_error();
		PyObject *detail = PyUnicode_DecodeUTF8(e.ptr ? e.ptr : "", (Py_ssize_t)e.length, "replace");
		if (!detail || PyErr_WarnFormat(PyExc_RuntimeWarning, 1, "ovstage: destroying the stage failed (%s): %U; it "
						"is leaked", status_name(rc), detail) < 0)
			PyErr_Clear();
		Py_XDECREF(detail);
		PyErr_Restore(et, ev, tb);
	}
}

static void stage_drain(StageObject *st)
{
	PyObject *lst = PyList_New(0);
	if (!lst) {
		PyErr_Clear();
		return;
	}
	for (Tracked *t = st->live; t; t = t->tnext)
		if (PyList_Append(lst, (PyObject *)t) < 0) {
			PyErr_Clear();
			break;
		}
	static const int order[] = { T_RGROUP, T_MAP, T_READ, T_HIER, T_ORDQ, T_QUERY, T_OP };
	for (size_t p = 0; p < sizeof order / sizeof order[0]; p++) {
		for (Py_ssize_t i = 0; i < PyList_GET_SIZE(lst); i++) {
			Tracked *t = (Tracked *)PyList_GET_ITEM(lst, i);
			if (!t->tracked || t->tkind != order[p])
				continue;
			switch (t->tkind) {
			case T_RGROUP: {
				GroupObject *g = (GroupObject *)t;
				g->released = 1; /* refused from now on; pinned ones go with their last view */
				if (g->exports == 0)
					group_c_release(g);
				break;
			}
			case T_MAP:
				if (((HandleObject *)t)->exports == 0)
					handle_drain((HandleObject *)t);
				break;
			case T_OP: op_drain((OperationObject *)t); break;
			default: handle_drain((HandleObject *)t); break;
			}
		}
	}
	Py_DECREF(lst);
}

/* StageConfig's attributes and the configuration keys they set: the standard key, then this
 * implementation's extension keys (ovstage_ext.h); 'u' uint64, 'b' bool, 's' string. */
static const struct {
	const char *attr;
	char type;
	int key;
} g_config_keys[] = {
	{ "runtime_default_hierarchy_computation_model", 'u', OVSTAGE_CONFIG_RUNTIME_DEFAULT_HIERARCHY_COMPUTATION_MODEL },
	{ "retention", 'u', OVSTAGE_CONFIG_EXT_RETENTION },
	{ "workers", 'u', OVSTAGE_CONFIG_EXT_WORKER_COUNT },
	{ "queue_capacity", 'u', OVSTAGE_CONFIG_EXT_QUEUE_CAPACITY },
	{ "max_unsealed_mb", 'u', OVSTAGE_CONFIG_EXT_MAX_UNSEALED_MB },
	{ "chunk_kb", 'u', OVSTAGE_CONFIG_EXT_CHUNK_KB },
	{ "gpu_pool_mb", 'u', OVSTAGE_CONFIG_EXT_GPU_POOL_MB },
	{ "pin_workers", 'b', OVSTAGE_CONFIG_EXT_PIN_WORKERS },
	{ "disable_gpu", 'b', OVSTAGE_CONFIG_EXT_DISABLE_GPU },
	{ "cuda_devices", 's', OVSTAGE_CONFIG_EXT_CUDA_DEVICES },
};
#define OVS_CONFIG_KEYS (sizeof g_config_keys / sizeof g_config_keys[0])

/* One configuration entry from a StageConfig attribute's value v (not None). A string value
 * borrows v's UTF-8 buffer: the caller keeps v until ovstage_initialize returns. */
static int config_entry(size_t k, PyObject *v, ovstage_config_entry_t *e)
{
	const char *attr = g_config_keys[k].attr;
	memset(e, 0, sizeof *e);
	if (g_config_keys[k].type == 'u') {
		uint64_t u;
		if (parse_u64(v, attr, &u) < 0)
			return -1;
		*e = ovstage_config_entry_uint64((ovstage_config_uint64_t)g_config_keys[k].key, u);
		return 0;
	}
	if (g_config_keys[k].type == 'b') {
		bool b;
		if (parse_bool(v, attr, &b) < 0)
			return -1;
		e->key_type = OVSTAGE_CONFIG_KEY_TYPE_BOOL;
		e->key.bool_key = (ovstage_config_bool_t)g_config_keys[k].key;
		e->value.bool_value = b;
		return 0;
	}
	if (!PyUnicode_Check(v)) {
		PyErr_Format(PyExc_TypeError, "%s must be a str or None, got %.80s", attr, Py_TYPE(v)->tp_name);
		return -1;
	}
	Py_ssize_t n;
	ovx_string_t str = { PyUnicode_AsUTF8AndSize(v, &n), 0 };
	if (!str.ptr)
		return -1;
	str.length = (size_t)n;
	*e = ovstage_config_entry_string((ovstage_config_string_t)g_config_keys[k].key, str);
	return 0;
}

/* The entries a StageConfig sets (its None attributes set nothing); held[0..*nheld) keeps the
 * values whose strings the entries borrow, for the caller to release after ovstage_initialize. */
static int config_entries(PyObject *config, ovstage_config_entry_t *entries, size_t *n, PyObject **held,
			  size_t *nheld)
{
	for (size_t k = 0; k < OVS_CONFIG_KEYS; k++) {
		PyObject *v = PyObject_GetAttrString(config, g_config_keys[k].attr);
		if (!v) {
			if (!PyErr_ExceptionMatches(PyExc_AttributeError))
				goto fail;
			PyErr_Clear();
			continue;
		}
		if (v != Py_None && config_entry(k, v, &entries[*n]) < 0) {
			Py_DECREF(v);
			goto fail;
		}
		if (v != Py_None)
			++*n;
		held[(*nheld)++] = v;
	}
	return 0;
fail:
	while (*nheld)
		Py_DECREF(held[--*nheld]);
	return -1;
}

static int stage_init(StageObject *st, PyObject *args, PyObject *kw)
{
	static char *names[] = { "name", "config", NULL };
	PyObject *name = Py_None, *config = Py_None;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:Stage", names, &name, &config))
		return -1;
	if (st->inst) {
		PyErr_SetString(PyExc_RuntimeError, "Stage.__init__ called twice");
		return -1;
	}
	const char *cname = NULL;
	if (name != Py_None) {
		if (!PyUnicode_Check(name)) {
			PyErr_Format(PyExc_TypeError, "name must be a str or None, got %.80s", Py_TYPE(name)->tp_name);
			return -1;
		}
		cname = PyUnicode_AsUTF8(name);
		if (!cname)
			return -1;
	}
	if (config != Py_None) {
		ovstage_config_entry_t entries[OVS_CONFIG_KEYS];
		PyObject *held[OVS_CONFIG_KEYS];
		size_t nheld = 0;
		ovstage_config_t cfg = { entries, 0 };
		if (config_entries(config, entries, &cfg.entry_count, held, &nheld) < 0)
			return -1;
		int rc = ovstage_initialize(&cfg);
		while (nheld)
			Py_DECREF(held[--nheld]); /* the string values: the engine has parsed them */
		if (rc != OVSTAGE_OK) {
			raise_last(rc, "ovstage_initialize");
			return -1;
		}
		st->initialized = 1;
	}
	ovstage_instance_desc_t desc = { cname };
	ovstage_instance_t *in = NULL;
	int rc;
	uint64_t epoch = 0;
	Py_BEGIN_ALLOW_THREADS
	pthread_mutex_lock(&g_instances_lock);
	rc = ovstage_create_instance(&desc, &in);
	if (rc == OVSTAGE_OK && in) {
		g_instances++;
		epoch = atomic_load(&g_pd_epoch);
	}
	pthread_mutex_unlock(&g_instances_lock);
	Py_END_ALLOW_THREADS
	if (rc != OVSTAGE_OK || !in) {
		raise_last(rc ? rc : OVSTAGE_ERROR_INTERNAL, "ovstage_create_instance");
		if (st->initialized) {
			ovstage_shutdown();
			st->initialized = 0;
		}
		return -1;
	}
	st->inst = in;
	st->pd = ovstage_get_path_dictionary(in);
	st->pd_epoch = epoch;
	st->closed = 0;
	Py_INCREF(name);
	Py_XSETREF(st->name, name);
	return 0;
}

static PyObject *stage_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	(void)args;
	(void)kw;
	StageObject *st = (StageObject *)type->tp_alloc(type, 0);
	if (!st)
		return NULL;
	st->closed = 1; /* until __init__ succeeded */
	return (PyObject *)st;
}

static void stage_dealloc(StageObject *st)
{
	if (st->weakreflist)
		PyObject_ClearWeakRefs((PyObject *)st);
	if (st->inst) {
		st->closed = 1;
		stage_drain(st);
		stage_maybe_finalize(st);
	}
	Py_CLEAR(st->dict);
	Py_CLEAR(st->name);
	Py_TYPE(st)->tp_free((PyObject *)st);
}

static PyObject *stage_destroy(StageObject *st, PyObject *unused)
{
	(void)unused;
	if (!st->inst)
		Py_RETURN_NONE;
	st->closed = 1; /* new calls are refused from here on */
	/* Drain first: a call of another thread may be waiting for something the drain ends (a seal
	 * waiting for a map session). Then wait for those calls to return, and drain what they made. */
	stage_drain(st);
	while (st->busy) {
		Py_BEGIN_ALLOW_THREADS
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
		Py_END_ALLOW_THREADS
	}
	stage_drain(st);
	stage_maybe_finalize(st);
	Py_RETURN_NONE;
}

static PyObject *stage_enter(StageObject *st, PyObject *unused)
{
	(void)unused;
	if (stage_check(st) < 0)
		return NULL;
	Py_INCREF(st);
	return (PyObject *)st;
}

static PyObject *stage_exit(StageObject *st, PyObject *args)
{
	(void)args;
	PyObject *r = stage_destroy(st, NULL);
	if (!r)
		return NULL;
	Py_DECREF(r);
	Py_RETURN_FALSE;
}

static PyObject *stage_get_version(PyObject *cls, PyObject *unused)
{
	(void)cls;
	(void)unused;
	return Py_BuildValue("(iii)", OVSTAGE_VERSION_MAJOR, OVSTAGE_VERSION_MINOR, OVSTAGE_VERSION_PATCH);
}

static PyObject *stage_get_closed(StageObject *st, void *c)
{
	(void)c;
	return PyBool_FromLong(st->closed || !st->inst);
}
static PyObject *stage_get_destroyed(StageObject *st, void *c)
{
	(void)c;
	return PyBool_FromLong(!st->inst);
}
static PyObject *stage_get_name(StageObject *st, void *c)
{
	(void)c;
	PyObject *n = st->name ? st->name : Py_None;
	Py_INCREF(n);
	return n;
}
static PyObject *stage_get_pd_epoch(StageObject *st, void *c)
{
	(void)c;
	return PyLong_FromUnsignedLongLong(st->pd_epoch);
}
/* ovstage_ext_get_instance_cuda_device: the ordinal the instance took from the active-GPU list
 * (StageConfig.cuda_devices / OVSTAGE_CUDA_DEVICES), or -1. */
static PyObject *stage_get_cuda_device(StageObject *st, void *c)
{
	(void)c;
	if (stage_check(st) < 0)
		return NULL;
	int dev = -1;
	int rc = ovstage_ext_get_instance_cuda_device(st->inst, &dev);
	if (rc != OVSTAGE_OK)
		return raise_last(rc, "cuda_device");
	return PyLong_FromLong(dev);
}
static PyObject *stage_get_live(StageObject *st, void *c)
{
	(void)c;
	return PyLong_FromSsize_t(st->nlive);
}

/* ---- Stage: ops ------------------------------------------------------------------------------ */

static PyObject *stage_wait_op(StageObject *st, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature sig = SIGNATURE("wait_op", 2, 1, A_U64("op_id"), A_TIMEOUT);
	uint64_t id, timeout;
	if (parse_call(&sig, st, args, nargs, kwnames, OUTS(&id, &timeout)) < 0)
		return NULL;
	wait_errors we;
	int rc = wait_sliced(st, id, timeout, &we);
	if (rc < 0)
		return NULL;
	PyObject *ids = PyTuple_New((Py_ssize_t)we.n);
	for (size_t i = 0; ids && i < we.n; i++)
		PyTuple_SET_ITEM(ids, (Py_ssize_t)i, PyLong_FromUnsignedLongLong(we.ids[i]));
	if (!ids)
		return NULL;
	return Py_BuildValue("(iNK)", rc, ids, (unsigned long long)we.lowest_pending);
}

/* Finds the live Operation object owning op id `id`, if any (borrowed). */
static OperationObject *find_op(StageObject *st, uint64_t id)
{
	for (Tracked *t = st->live; t; t = t->tnext)
		if (t->tkind == T_OP && ((OperationObject *)t)->op_id == id)
			return (OperationObject *)t;
	return NULL;
}

static PyObject *stage_release_op(StageObject *st, PyObject *arg)
{
	uint64_t id;
	if (stage_u64_arg(st, arg, "op_id", &id) < 0)
		return NULL;
	OperationObject *op = find_op(st, id);
	if (op) {
		/* The Operation lends the op its inputs: finish waiting before they go. */
		Py_INCREF(op);
		op_drain(op);
		Py_DECREF(op);
		return PyLong_FromLong(OVSTAGE_OK);
	}
	return PyLong_FromLong(ovstage_release_op(st->inst, id));
}

static PyObject *stage_query(StageObject *st, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature sig = SIGNATURE("query", 2, 0, A_OBJ("filter"), A_OBJ("attrs"));
	PyObject *a[2];
	if (parse_call(&sig, st, args, nargs, kwnames, OUTS(&a[0], &a[1])) < 0)
		return NULL;
	arena_block *arena = NULL;
	PyObject *inputs = PyList_New(0);
	ovstage_filter_t *filter = NULL;
	ovx_token_t *attrs = NULL;
	size_t nattrs = 0;
	if (!inputs)
		return NULL;
	if (a[0] && a[0] != Py_None) {
		PyObject *preds = PyObject_GetAttr(a[0], s_predicates);
		if (!preds) {
			PyErr_Clear();
			PyErr_Format(PyExc_TypeError, "filter must be an ovstage.Filter or None, got %.80s",
				     Py_TYPE(a[0])->tp_name);
			goto fail;
		}
		PyObject *pf = PySequence_Fast(preds, "Filter.predicates must be a sequence");
		if (!pf || PyList_Append(inputs, pf) < 0) {
			Py_DECREF(preds);
			Py_XDECREF(pf);
			goto fail;
		}
		Py_DECREF(pf);
		Py_DECREF(preds);
		Py_ssize_t np = PySequence_Fast_GET_SIZE(pf);
		filter = arena_alloc(&arena, sizeof *filter);
		ovstage_predicate_t *p = filter ? arena_alloc(&arena, sizeof *p * (size_t)(np ? np : 1)) : NULL;
		if (!p)
			goto fail;
		filter->predicates = p;
		filter->count = (size_t)np;
		for (Py_ssize_t i = 0; i < np; i++) {
			PyObject *pr = PySequence_Fast_GET_ITEM(pf, i);
			PyObject *attr = PyObject_GetAttr(pr, s_attribute), *op = attr ? PyObject_GetAttr(pr, s_op) : NULL,
				 *vals = op ? PyObject_GetAttr(pr, s_values) : NULL;
			if (!vals) {
				Py_XDECREF(attr);
				Py_XDECREF(op);
				PyErr_Clear();
				PyErr_Format(PyExc_TypeError, "filter.predicates[%zd] must be an ovstage.Predicate", i);
				goto fail;
			}
			int rc = PyList_Append(inputs, attr) | PyList_Append(inputs, vals);
			int opv = 0;
			if (rc == 0)
				rc = parse_enum(op, "Predicate.op", 0, INT_MAX, &opv); /* the engine validates it */
			p[i].op = (ovstage_filter_op_t)opv;
			/* an OR separator's attribute is not looked at (Predicate.OR has "") */
			if (rc == 0 && p[i].op != OVSTAGE_FILTER_OP_EXT_OR)
				rc = parse_attr(attr, "Predicate.attribute", &p[i].attribute);
			PyObject *vf = rc == 0 ? PySequence_Fast(vals, "Predicate.values must be a sequence of str") : NULL;
			Py_DECREF(attr);
			Py_DECREF(op);
			Py_DECREF(vals);
			if (!vf)
				goto fail;
			rc = PyList_Append(inputs, vf);
			Py_DECREF(vf);
			if (rc < 0)
				goto fail;
			Py_ssize_t nv = PySequence_Fast_GET_SIZE(vf);
			ovx_string_t *vs = arena_alloc(&arena, sizeof *vs * (size_t)(nv ? nv : 1));
			if (!vs)
				goto fail;
			for (Py_ssize_t k = 0; k < nv; k++) {
				PyObject *v = PySequence_Fast_GET_ITEM(vf, k);
				if (!PyUnicode_Check(v)) {
					PyErr_Format(PyExc_TypeError, "Predicate.values[%zd] must be a str, got %.80s", k,
						     Py_TYPE(v)->tp_name);
					goto fail;
				}
				Py_ssize_t len;
				vs[k].ptr = PyUnicode_AsUTF8AndSize(v, &len);
				if (!vs[k].ptr)
					goto fail;
				vs[k].length = (size_t)len;
			}
			p[i].values = vs;
			p[i].value_count = (size_t)nv;
		}
	}
	if (parse_tokens(st, a[1], "attrs", &arena, &attrs, &nattrs) < 0)
		goto fail;
	ovstage_query_handle_t h = 0;
	ovstage_enqueue_result_t e = ovstage_query(st->inst, filter, attrs, nattrs, &h);
	PyObject *op = new_operation(st, "query", e, arena, inputs);
	if (!op)
		return NULL;
	return new_handle(st, &QueryType, T_QUERY, e.status == OVSTAGE_OK ? h : 0, op);
fail:
	arena_free(arena);
	Py_DECREF(inputs);
	return NULL;
}

static PyObject *stage_query_from_path_list(StageObject *st, PyObject *arg)
{
	uint64_t list;
	if (stage_u64_arg(st, arg, "path_list", &list) < 0)
		return NULL;
	ovstage_query_handle_t h = 0;
	int rc = ovstage_query_from_path_list(st->inst, list, &h);
	if (rc != OVSTAGE_OK)
		return raise_last(rc, "query_from_path_list");
	return new_handle(st, &QueryType, T_QUERY, h, NULL);
}

typedef struct {
	int kind;
	uint64_t h;
	void *out;
} fetch_ctx;

static int fetch_slice(StageObject *st, void *ctx, uint64_t slice)
{
	fetch_ctx *c = ctx;
	switch (c->kind) {
	case T_QUERY: return ovstage_fetch_query_result(st->inst, c->h, slice, c->out);
	case T_READ: return ovstage_fetch_read_next(st->inst, c->h, slice, c->out);
	case T_MAP: return ovstage_fetch_map_next(st->inst, c->h, slice, c->out);
	default: return ovstage_fetch_ordinal(st->inst, c->h, slice, c->out);
	}
}

/* A fetch in slices (sliced_wait). kind: T_QUERY, T_READ, T_MAP, T_ORDQ. */
static int fetch_sliced(StageObject *st, int kind, uint64_t h, uint64_t timeout, void *out)
{
	fetch_ctx c = { kind, h, out };
	return sliced_wait(st, timeout, 0, fetch_slice, &c);
}

static PyObject *query_result_impl(StageObject *st, uint64_t h, uint64_t timeout)
{
	ovstage_query_result_t r;
	memset(&r, 0, sizeof r);
	int rc = fetch_sliced(st, T_QUERY, h, timeout, &r);
	if (rc < 0)
		return NULL;
	if (rc != OVSTAGE_OK)
		return raise_last(rc, "fetch_query_result");
	PyObject *attrs = PyTuple_New((Py_ssize_t)r.attribute_count);
	for (size_t i = 0; attrs && i < r.attribute_count; i++)
		PyTuple_SET_ITEM(attrs, (Py_ssize_t)i, PyLong_FromUnsignedLongLong(r.attributes[i]));
	ovstage_release_query_result(st->inst, &r);
	if (!attrs)
		return NULL;
	if (g_query_result_class)
		return PyObject_CallFunction(g_query_result_class, "NnK", attrs, (Py_ssize_t)r.total_prim_count,
					     (unsigned long long)r.all_handle);
	return Py_BuildValue("(NnK)", attrs, (Py_ssize_t)r.total_prim_count, (unsigned long long)r.all_handle);
}

static PyObject *stage_fetch_query_result(StageObject *st, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature sig = SIGNATURE("fetch_query_result", 2, 1, A_HANDLE("query", &QueryType), A_TIMEOUT);
	uint64_t h, timeout;
	if (parse_call(&sig, st, args, nargs, kwnames, OUTS(&h, &timeout)) < 0)
		return NULL;
	return query_result_impl(st, h, timeout);
}

static PyObject *release_handle_arg(StageObject *st, PyObject *arg, PyTypeObject *type, int kind, const char *what)
{
	if (stage_check(st) < 0)
		return NULL;
	uint64_t h;
	HandleObject *ho;
	if (get_handle(st, arg, type, what, &h, &ho) < 0)
		return NULL;
	ovstage_cuda_sync_t none = { 0, 0 };
	if (ho)
		return handle_release_impl(ho, none, NULL);
	HandleObject tmp = { .handle = h, .tkind = kind, .stage = st };
	return new_operation(st, release_label(kind), handle_enqueue_release(&tmp, none), NULL, NULL);
}

static PyObject *stage_release_query(StageObject *st, PyObject *arg)
{
	return release_handle_arg(st, arg, &QueryType, T_QUERY, "query");
}
static PyObject *stage_release_read(StageObject *st, PyObject *arg)
{
	return release_handle_arg(st, arg, &ReadType, T_READ, "read");
}
static PyObject *stage_release_ordinal_query(StageObject *st, PyObject *arg)
{
	return release_handle_arg(st, arg, &OrdinalQueryType, T_ORDQ, "ordinal_query");
}

static PyObject *stage_read_attributes(StageObject *st, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature sig = SIGNATURE("read_attributes", 3, 3, A_HANDLE("query", &QueryType), A_OBJ("attrs"),
					 A_OBJ("ordinal_range"));
	uint64_t q;
	PyObject *attr_list, *range_obj;
	ovstage_ordinal_range_t range;
	if (parse_call(&sig, st, args, nargs, kwnames, OUTS(&q, &attr_list, &range_obj)) < 0 ||
	    parse_range(range_obj, &range) < 0)
		return NULL;
	arena_block *arena = NULL;
	ovx_token_t *attrs;
	size_t n;
	if (parse_tokens(st, attr_list, "attrs", &arena, &attrs, &n) < 0) {
		arena_free(arena);
		return NULL;
	}
	ovstage_read_handle_t h = 0;
	ovstage_enqueue_result_t e = ovstage_read_attributes(st->inst, q, attrs, n, range, &h);
	PyObject *op = new_operation(st, "read_attributes", e, arena, NULL);
	if (!op)
		return NULL;
	return new_handle(st, &ReadType, T_READ, e.status == OVSTAGE_OK ? h : 0, op);
}

static PyObject *read_next_impl(StageObject *st, uint64_t h, uint64_t timeout, HandleObject *ho)
{
	GroupObject *g = (GroupObject *)new_group(st, NULL);
	if (!g)
		return NULL;
	int rc = fetch_sliced(st, T_READ, h, timeout, &g->rg);
	if (rc == OVSTAGE_OK) {
		track(st, (Tracked *)g, T_RGROUP);
		return (PyObject *)g;
	}
	g->c_released = 1; /* nothing to give back */
	Py_DECREF(g);
	if (rc < 0)
		return NULL;
	if (rc == OVSTAGE_ERROR_END_OF_ITERATION)
		Py_RETURN_NONE;
	if (rc != OVSTAGE_ERROR_TIMEOUT && ho && ho->op != Py_None && !((OperationObject *)ho->op)->done) {
		/* The read op failed when it ran: its wait carries the detail (and releases the op). */
		PyObject *et, *ev, *tb;
		raise_last(rc, "fetch_read_next");
		PyErr_Fetch(&et, &ev, &tb);
		if (op_wait((OperationObject *)ho->op, OVSTAGE_TIMEOUT_INFINITE) < 0) {
			/* Keep the fetch's code (OUT_OF_RANGE, WRITE_FLOOR_VIOLATION...), take the op's detail. */
			PyObject *et2, *ev2, *tb2;
			PyErr_Fetch(&et2, &ev2, &tb2);
			PyObject *detail = ev2 ? PyObject_GetAttrString(ev2, "message") : NULL;
			if (detail) {
				Py_XDECREF(et);
				Py_XDECREF(ev);
				Py_XDECREF(tb);
				raise_code(rc, "fetch_read_next: %S", detail);
				Py_DECREF(detail);
			} else {
				PyErr_Clear();
				PyErr_Restore(et, ev, tb);
			}
			Py_XDECREF(et2);
			Py_XDECREF(ev2);
			Py_XDECREF(tb2);
			return NULL;
		}
		PyErr_Restore(et, ev, tb);
		return NULL;
	}
	return raise_last(rc, "fetch_read_next");
}

static PyObject *stage_fetch_read_next(StageObject *st, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature sig = SIGNATURE("fetch_read_next", 2, 1, A_OBJ("read"), A_TIMEOUT);
	uint64_t h, timeout;
	PyObject *read;
	HandleObject *ho;
	if (parse_call(&sig, st, args, nargs, kwnames, OUTS(&read, &timeout)) < 0 ||
	    get_handle(st, read, &ReadType, "read", &h, &ho) < 0)
		return NULL;
	return read_next_impl(st, h, timeout, ho);
}

static PyObject *stage_release_group(StageObject *st, PyObject *arg)
{
	if (Py_TYPE(arg) != &ReadGroupType) {
		PyErr_Format(PyExc_TypeError, "group must be an ovstage.ReadGroup, got %.80s %R", Py_TYPE(arg)->tp_name, arg);
		return NULL;
	}
	if (((GroupObject *)arg)->stage != st) {
		PyErr_SetString(PyExc_ValueError, "the group belongs to another stage");
		return NULL;
	}
	return group_release((GroupObject *)arg, NULL);
}

static PyObject *stage_write_attribute(StageObject *st, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature sig = SIGNATURE("write_attribute", 4, 4, A_HANDLE("query", &QueryType), A_ATTR("attribute"),
					 A_U64("ordinal"), A_OBJ("tensors"), A_OBJ("is_array"), A_ENUM("prim_mode", 0, 1),
					 A_OBJ("semantic"), A_OBJ("index_map"), A_OBJ("mask"), A_OBJ("count"),
					 A_OBJ("cuda_event"), A_OBJ("cuda_stream"));
	uint64_t q, ordinal;
	ovx_string_or_token_t attr;
	int prim_mode = 0;
	write_args w;
	if (parse_call(&sig, st, args, nargs, kwnames, OUTS(&q, &attr, &ordinal, &w.tensors, &w.is_array, &prim_mode,
		       &w.semantic, &w.index_map, &w.mask, &w.count, &w.cuda_event, &w.cuda_stream)) < 0)
		return NULL;
	arena_block *arena = NULL;
	PyObject *inputs = PyList_New(0);
	if (!inputs)
		return NULL;
	ovstage_write_data_t d;
	uint64_t bytes = 0;
	if (build_write(st, "write_attribute", &w, &arena, inputs, &d, &bytes) < 0) {
		arena_free(arena);
		Py_DECREF(inputs);
		return NULL;
	}
	ovstage_enqueue_result_t e;
	if (bytes > OVS_GIL_COPY_BYTES) {
		BUSY_BEGIN(st)
		e = ovstage_write_attribute(st->inst, q, attr, ordinal, d, (ovstage_prim_mode_t)prim_mode);
		BUSY_END
	} else {
		e = ovstage_write_attribute(st->inst, q, attr, ordinal, d, (ovstage_prim_mode_t)prim_mode);
	}
	return new_operation(st, "write_attribute", e, arena, inputs);
}

static PyObject *stage_write_attributes(StageObject *st, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature sig = SIGNATURE("write_attributes", 3, 3, A_HANDLE("query", &QueryType), A_OBJ("writes"),
					 A_U64("ordinal"), A_ENUM("prim_mode", 0, 1));
	uint64_t q, ordinal;
	PyObject *writes;
	int prim_mode = 0;
	if (parse_call(&sig, st, args, nargs, kwnames, OUTS(&q, &writes, &ordinal, &prim_mode)) < 0)
		return NULL;
	PyObject *f = PySequence_Fast(writes, "writes must be a list of WriteDesc");
	if (!f)
		return NULL;
	Py_ssize_t n = PySequence_Fast_GET_SIZE(f);
	arena_block *arena = NULL;
	PyObject *inputs = PyList_New(0);
	ovstage_attribute_write_t *ws = inputs ? arena_alloc(&arena, sizeof *ws * (size_t)(n ? n : 1)) : NULL;
	uint64_t bytes = 0;
	if (!ws)
		goto fail;
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *wd = PySequence_Fast_GET_ITEM(f, i);
		static PyObject **const fields[] = { &s_attribute, &s_tensors, &s_is_array, &s_semantic, &s_index_map,
						     &s_mask, &s_count, &s_cuda_event, &s_cuda_stream };
		PyObject *v[9] = { 0 };
		int ok = 1;
		for (int k = 0; k < 9 && ok; k++) {
			v[k] = PyObject_GetAttr(wd, *fields[k]);
			if (!v[k])
				ok = 0;
		}
		if (!ok) {
			for (int k = 0; k < 9; k++)
				Py_XDECREF(v[k]);
			PyErr_Clear();
			PyErr_Format(PyExc_TypeError, "writes[%zd] must be an ovstage.WriteDesc, got %.80s", i,
				     Py_TYPE(wd)->tp_name);
			goto fail;
		}
		char label[64];
		snprintf(label, sizeof label, "write_attributes: writes[%zd]", i);
		write_args w = { v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8] };
		int rc = PyList_Append(inputs, v[0]); /* keeps the attribute string */
		if (rc == 0)
			rc = parse_attr(v[0], "WriteDesc.attribute", &ws[i].attribute);
		if (rc == 0)
			rc = build_write(st, label, &w, &arena, inputs, &ws[i].data, &bytes);
		for (int k = 0; k < 9; k++)
			Py_DECREF(v[k]);
		if (rc < 0)
			goto fail;
	}
	Py_DECREF(f);
	f = NULL;
	ovstage_enqueue_result_t e;
	if (bytes > OVS_GIL_COPY_BYTES) {
		BUSY_BEGIN(st)
		e = ovstage_write_attributes(st->inst, q, ws, (size_t)n, ordinal, (ovstage_prim_mode_t)prim_mode);
		BUSY_END
	} else {
		e = ovstage_write_attributes(st->inst, q, ws, (size_t)n, ordinal, (ovstage_prim_mode_t)prim_mode);
	}
	return new_operation(st, "write_attributes", e, arena, inputs);
fail:
	Py_XDECREF(f);
	arena_free(arena);
	Py_XDECREF(inputs);
	return NULL;
}

static PyObject *stage_delete_attributes(StageObject *st, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature sig = SIGNATURE("delete_attributes", 3, 3, A_HANDLE("query", &QueryType), A_OBJ("attributes"),
					 A_U64("ordinal"));
	uint64_t q, ordinal;
	PyObject *attributes;
	if (parse_call(&sig, st, args, nargs, kwnames, OUTS(&q, &attributes, &ordinal)) < 0)
		return NULL;
	PyObject *f = attributes == Py_None ? PyTuple_New(0) : PySequence_Fast(attributes, "attributes must be a list");
	if (!f)
		return NULL;
	Py_ssize_t n = PySequence_Fast_GET_SIZE(f);
	arena_block *arena = NULL;
	ovx_string_or_token_t *at = n ? arena_alloc(&arena, sizeof *at * (size_t)n) : NULL;
	if (n && !at)
		goto fail;
	for (Py_ssize_t i = 0; i < n; i++)
		if (parse_attr(PySequence_Fast_GET_ITEM(f, i), "attributes[i]", &at[i]) < 0)
			goto fail;
	ovstage_enqueue_result_t e = ovstage_delete_attributes(st->inst, q, at, (size_t)n, ordinal);
	return new_operation(st, "delete_attributes", e, arena, f);
fail:
	arena_free(arena);
	Py_DECREF(f);
	return NULL;
}

static PyObject *clone_impl(StageObject *st, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int blocking)
{
	static signature sig = SIGNATURE("clone", 3, 3, A_OBJ("source"), A_OBJ("targets"), A_U64("ordinal"));
	static signature sig_async = SIGNATURE("clone_async", 3, 3, A_OBJ("source"), A_OBJ("targets"), A_U64("ordinal"));
	uint64_t ordinal;
	PyObject *a[2];
	if (parse_call(blocking ? &sig : &sig_async, st, args, nargs, kwnames, OUTS(&a[0], &a[1], &ordinal)) < 0)
		return NULL;
	if (!PyUnicode_Check(a[0])) {
		PyErr_Format(PyExc_TypeError, "source must be a path str, got %.80s", Py_TYPE(a[0])->tp_name);
		return NULL;
	}
	if (PyUnicode_Check(a[1])) {
		PyErr_SetString(PyExc_TypeError, "targets must be a list of path strings, not one str");
		return NULL;
	}
	PyObject *f = PySequence_Fast(a[1], "targets must be a list of path strings");
	if (!f)
		return NULL;
	Py_ssize_t n = PySequence_Fast_GET_SIZE(f);
	arena_block *arena = NULL;
	ovx_string_t *tg = arena_alloc(&arena, sizeof *tg * (size_t)(n ? n : 1));
	ovx_string_t src;
	Py_ssize_t len;
	if (!tg || !(src.ptr = PyUnicode_AsUTF8AndSize(a[0], &len)))
		goto fail;
	src.length = (size_t)len;
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *s = PySequence_Fast_GET_ITEM(f, i);
		if (!PyUnicode_Check(s)) {
			PyErr_Format(PyExc_TypeError, "targets[%zd] must be a str, got %.80s", i, Py_TYPE(s)->tp_name);
			goto fail;
		}
		if (!(tg[i].ptr = PyUnicode_AsUTF8AndSize(s, &len)))
			goto fail;
		tg[i].length = (size_t)len;
	}
	ovstage_enqueue_result_t e;
	BUSY_BEGIN(st)
	e = ovstage_clone(st->inst, src, tg, (size_t)n, ordinal);
	BUSY_END
	PyObject *keep = PyTuple_Pack(2, a[0], f);
	Py_DECREF(f);
	PyObject *op = new_operation(st, "clone", e, arena, keep);
	if (!op || !blocking)
		return op;
	int rc = op_wait((OperationObject *)op, OVSTAGE_TIMEOUT_INFINITE);
	Py_DECREF(op);
	if (rc < 0)
		return NULL;
	Py_RETURN_NONE;
fail:
	arena_free(arena);
	Py_DECREF(f);
	return NULL;
}

static PyObject *stage_clone(StageObject *st, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	return clone_impl(st, args, nargs, kwnames, 1);
}
static PyObject *stage_clone_async(StageObject *st, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	return clone_impl(st, args, nargs, kwnames, 0);
}

/* ---- Hierarchy (spec 2.13): models, compute, lookups ----------------------------------------- */

static PyObject *str_view(ovx_string_t v)
{
	return PyUnicode_DecodeUTF8(v.ptr ? v.ptr : "", v.ptr ? (Py_ssize_t)v.length : 0, "replace");
}

static PyObject *stage_get_hierarchy_computation_models(StageObject *st, PyObject *unused)
{
	(void)unused;
	if (stage_check(st) < 0)
		return NULL;
	const ovstage_hierarchy_computation_model_desc_t *m = NULL;
	size_t n = 0;
	int rc = ovstage_get_hierarchy_computation_models(st->inst, &m, &n);
	if (rc != OVSTAGE_OK)
		return raise_last(rc, "get_hierarchy_computation_models");
	PyObject *lst = PyList_New((Py_ssize_t)n);
	for (size_t i = 0; lst && i < n; i++) {
		PyObject *name = str_view(m[i].name), *desc = str_view(m[i].description), *e = NULL;
		if (name && desc)
			e = g_hier_model_class ? PyObject_CallFunction(g_hier_model_class, "iOO", (int)m[i].model_id, name, desc)
					       : Py_BuildValue("(iOO)", (int)m[i].model_id, name, desc);
		Py_XDECREF(name);
		Py_XDECREF(desc);
		if (!e) {
			Py_CLEAR(lst);
			break;
		}
		PyList_SET_ITEM(lst, (Py_ssize_t)i, e);
	}
	return lst;
}

/* compute_hierarchy_async(input_ordinal, output_ordinal, model=DEFAULT_CPU) -> Operation. The model
 * is range-checked here (an out-of-range int would otherwise reach the C enum); INVALID (0) goes to
 * the engine, which rejects it with its own message. */
static PyObject *stage_compute_hierarchy_async(StageObject *st, PyObject *const *args, Py_ssize_t nargs,
					       PyObject *kwnames)
{
	static signature sig = SIGNATURE("compute_hierarchy_async", 3, 2, A_U64("input_ordinal"), A_U64("output_ordinal"),
					 A_ENUM("model", OVSTAGE_HIERARCHY_COMPUTATION_MODEL_INVALID,
						OVSTAGE_HIERARCHY_COMPUTATION_MODEL_RUNTIME_DEFAULT));
	uint64_t in_ord, out_ord;
	int model = OVSTAGE_HIERARCHY_COMPUTATION_MODEL_DEFAULT_CPU;
	if (parse_call(&sig, st, args, nargs, kwnames, OUTS(&in_ord, &out_ord, &model)) < 0)
		return NULL;
	ovstage_enqueue_result_t e;
	BUSY_BEGIN(st)
	e = ovstage_compute_hierarchy(st->inst, (ovstage_hierarchy_computation_model_id_t)model, in_ord, out_ord);
	BUSY_END
	return new_operation(st, "compute_hierarchy", e, NULL, NULL);
}

/* get_hierarchy_async(path_list, ordinal, relation) -> Hierarchy (the list is copied at the call). */
static PyObject *stage_get_hierarchy_async(StageObject *st, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature sig = SIGNATURE("get_hierarchy_async", 3, 3, A_U64("path_list"), A_U64("ordinal"),
					 A_ENUM("relation", OVSTAGE_HIERARCHY_PARENT, OVSTAGE_HIERARCHY_SIBLINGS));
	uint64_t list, ordinal;
	int relation;
	if (parse_call(&sig, st, args, nargs, kwnames, OUTS(&list, &ordinal, &relation)) < 0)
		return NULL;
	ovstage_hierarchy_handle_t h = OVSTAGE_INVALID_HIERARCHY_HANDLE;
	ovstage_enqueue_result_t e;
	BUSY_BEGIN(st)
	e = ovstage_get_hierarchy(st->inst, list, ordinal, (ovstage_hierarchy_relation_t)relation, &h);
	BUSY_END
	PyObject *op = new_operation(st, "get_hierarchy", e, NULL, NULL);
	if (!op)
		return NULL; /* new_operation waited for an accepted op; the handle is lost with the stage */
	return new_handle(st, &HierarchyType, T_HIER, e.status == OVSTAGE_OK ? h : 0, op);
}

/* Copies a fetched result into HierarchyResult(ordinal, [HierarchyItem(status, (path, ...)), ...]). */
static PyObject *hierarchy_result_copy(const ovstage_hierarchy_result_t *r)
{
	PyObject *items = PyList_New((Py_ssize_t)r->input_count);
	for (size_t i = 0; items && i < r->input_count; i++) {
		const ovstage_hierarchy_item_t *it = &r->items[i];
		if (it->path_offset > r->path_count || it->path_count > r->path_count - it->path_offset) {
			Py_CLEAR(items);
			raise_code(OVSTAGE_ERROR_INTERNAL, "hierarchy result item %zu: paths [%zu, +%zu) outside the %zu paths",
				   i, it->path_offset, it->path_count, r->path_count);
			break;
		}
		PyObject *paths = PyTuple_New((Py_ssize_t)it->path_count);
		for (size_t k = 0; paths && k < it->path_count; k++) {
			const ovx_string_or_token_t *p = &r->paths[it->path_offset + k];
			/* The engine gives the path text (token 0); a token entry is shown as its number. */
			PyObject *s = p->token ? PyUnicode_FromFormat("%llu", (unsigned long long)p->token) : str_view(p->string);
			if (!s) {
				Py_CLEAR(paths);
				break;
			}
			PyTuple_SET_ITEM(paths, (Py_ssize_t)k, s);
		}
		PyObject *item = NULL;
		if (paths)
			item = g_hier_item_class ? PyObject_CallFunction(g_hier_item_class, "iO", (int)it->status, paths)
						 : Py_BuildValue("(iO)", (int)it->status, paths);
		Py_XDECREF(paths);
		if (!item) {
			Py_CLEAR(items);
			break;
		}
		PyList_SET_ITEM(items, (Py_ssize_t)i, item);
	}
	if (!items)
		return NULL;
	PyObject *res = g_hier_result_class
				? PyObject_CallFunction(g_hier_result_class, "KN", (unsigned long long)r->ordinal, items)
				: Py_BuildValue("(KN)", (unsigned long long)r->ordinal, items);
	return res;
}

/* Non-blocking fetch, copy, release of the payload. */
static PyObject *hierarchy_fetch_impl(StageObject *st, uint64_t h)
{
	ovstage_hierarchy_result_t r;
	memset(&r, 0, sizeof r);
	int rc = ovstage_fetch_hierarchy_result(st->inst, h, &r);
	if (rc != OVSTAGE_OK)
		return raise_last(rc, "fetch_hierarchy_result");
	PyObject *res = hierarchy_result_copy(&r);
	PyObject *et, *ev, *tb;
	PyErr_Fetch(&et, &ev, &tb);
	int rrc = ovstage_release_hierarchy_result(st->inst, &r);
	PyErr_Restore(et, ev, tb);
	if (res && rrc != OVSTAGE_OK) {
		Py_DECREF(res);
		return raise_last(rrc, "release_hierarchy_result");
	}
	return res;
}

static PyObject *stage_fetch_hierarchy_result(StageObject *st, PyObject *arg)
{
	if (stage_check(st) < 0)
		return NULL;
	uint64_t h;
	if (get_handle(st, arg, &HierarchyType, "hierarchy", &h, NULL) < 0)
		return NULL;
	return hierarchy_fetch_impl(st, h);
}

static PyObject *stage_release_hierarchy(StageObject *st, PyObject *arg)
{
	return release_handle_arg(st, arg, &HierarchyType, T_HIER, "hierarchy");
}

static PyObject *stage_map_attribute(StageObject *st, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature sig = SIGNATURE("map_attribute", 3, 3, A_HANDLE("query", &QueryType), A_ATTR("attribute"),
					 A_U64("ordinal"), A_ENUM("prim_mode", 0, 1), A_OBJ("dtype"),
					 A_ENUM("semantic", 0, 65535), A_OBJ("element_sizes"), A_OBJ("read_current"));
	uint64_t q, ordinal;
	ovstage_map_desc_t desc;
	memset(&desc, 0, sizeof desc);
	int prim_mode = 0, sem = 0;
	PyObject *dtype, *element_sizes, *read_current;
	bool rmw = false;
	if (parse_call(&sig, st, args, nargs, kwnames, OUTS(&q, &desc.attribute, &ordinal, &prim_mode, &dtype, &sem,
		       &element_sizes, &read_current)) < 0 ||
	    (dtype && dtype != Py_None && parse_dtype(dtype, &desc.dtype) < 0) ||
	    (read_current && read_current != Py_None && parse_bool(read_current, "read_current", &rmw) < 0))
		return NULL;
	desc.prim_mode = (ovstage_prim_mode_t)prim_mode;
	desc.semantic = (ovstage_attribute_semantic_t)sem;
	arena_block *arena = NULL;
	size_t *sizes = NULL, nsizes = 0;
	if (element_sizes && element_sizes != Py_None) {
		PyArrayObject *m = int_array(element_sizes, NPY_UINT64, "element_sizes");
		if (!m)
			return NULL;
		nsizes = (size_t)PyArray_SIZE(m);
		sizes = arena_alloc(&arena, sizeof *sizes * (nsizes ? nsizes : 1));
		if (!sizes) {
			Py_DECREF(m);
			return NULL;
		}
		for (size_t i = 0; i < nsizes; i++)
			sizes[i] = (size_t)((const uint64_t *)PyArray_DATA(m))[i];
		Py_DECREF(m);
	}
	ovstage_map_handle_t h = 0;
	/* read_current=True: the extension's read-modify-write session (ovstage_ext.h); flags 0 is
	 * map_attribute itself */
	ovstage_enqueue_result_t e = ovstage_ext_map_attribute(st->inst, q, &desc, ordinal, sizes, nsizes,
							       rmw ? OVSTAGE_EXT_MAP_READ_CURRENT : 0, &h);
	PyObject *op = new_operation(st, "map_attribute", e, arena, NULL);
	if (!op)
		return NULL;
	return new_handle(st, &MapType, T_MAP, e.status == OVSTAGE_OK ? h : 0, op);
}

static PyObject *map_next_impl(HandleObject *m, uint64_t timeout)
{
	if (handle_live(m) < 0)
		return NULL;
	GroupObject *g = (GroupObject *)new_group(m->stage, m);
	if (!g)
		return NULL;
	int rc = fetch_sliced(m->stage, T_MAP, m->handle, timeout, &g->mg);
	if (rc == OVSTAGE_OK)
		return (PyObject *)g;
	Py_DECREF(g);
	if (rc < 0)
		return NULL;
	if (rc == OVSTAGE_ERROR_END_OF_ITERATION)
		Py_RETURN_NONE;
	return raise_last(rc, "fetch_map_next");
}

static int map_arg(StageObject *st, PyObject *o, HandleObject **out)
{
	if (Py_TYPE(o) != &MapType) {
		PyErr_Format(PyExc_TypeError, "map must be an ovstage.Map, got %.80s %R", Py_TYPE(o)->tp_name, o);
		return -1;
	}
	if (((HandleObject *)o)->stage != st) {
		PyErr_SetString(PyExc_ValueError, "the map belongs to another stage");
		return -1;
	}
	*out = (HandleObject *)o;
	return 0;
}

static PyObject *stage_fetch_map_next(StageObject *st, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature sig = SIGNATURE("fetch_map_next", 2, 1, A_OBJ("map"), A_TIMEOUT);
	PyObject *map;
	HandleObject *m;
	uint64_t timeout;
	if (parse_call(&sig, st, args, nargs, kwnames, OUTS(&map, &timeout)) < 0 || map_arg(st, map, &m) < 0)
		return NULL;
	return map_next_impl(m, timeout);
}

static int parse_sync(PyObject *ev, PyObject *stream, ovstage_cuda_sync_t *s)
{
	return parse_cuda_handle(ev, "cuda_event", s_cuda_event_attr, &s->wait_event) < 0 ||
			       parse_cuda_handle(stream, "cuda_stream", s_cuda_stream_attr, &s->stream) < 0
		       ? -1
		       : 0;
}

static PyObject *unmap_group_impl(HandleObject *m, PyObject *go, PyObject *ev, PyObject *stream)
{
	if (handle_live(m) < 0)
		return NULL;
	if (Py_TYPE(go) != &MapGroupType || ((GroupObject *)go)->map != m) {
		PyErr_Format(PyExc_TypeError, "group must be an ovstage.MapGroup fetched from this map, got %.80s %R",
			     Py_TYPE(go)->tp_name, go);
		return NULL;
	}
	GroupObject *g = (GroupObject *)go;
	if (group_live(g) < 0)
		return NULL;
	if (g->exports > 0)
		return raise_code(OVSTAGE_ERROR_INVALID_ARGUMENT, "unmap_group: %zd array/DLPack view(s) of the group are "
				  "still alive; delete them before the commit (the stage takes the buffer)", g->exports);
	ovstage_cuda_sync_t sync = { 0, 0 };
	if (parse_sync(ev, stream, &sync) < 0)
		return NULL;
	ovstage_enqueue_result_t e = ovstage_unmap_group(m->stage->inst, m->handle, &g->mg, sync);
	if (e.status == OVSTAGE_OK)
		g->unmapped = 1;
	PyObject *keep = PyTuple_Pack(3, go, ev ? ev : Py_None, stream ? stream : Py_None);
	return new_operation(m->stage, "unmap_group", e, NULL, keep);
}

static PyObject *stage_unmap_group(StageObject *st, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature sig = SIGNATURE("unmap_group", 2, 2, A_OBJ("map"), A_OBJ("group"), A_OBJ("cuda_event"),
					 A_OBJ("cuda_stream"));
	PyObject *a[4];
	HandleObject *m;
	if (parse_call(&sig, st, args, nargs, kwnames, OUTS(&a[0], &a[1], &a[2], &a[3])) < 0 || map_arg(st, a[0], &m) < 0)
		return NULL;
	return unmap_group_impl(m, a[1], a[2], a[3]);
}

static PyObject *unmap_impl(HandleObject *m, PyObject *ev, PyObject *stream)
{
	ovstage_cuda_sync_t sync = { 0, 0 };
	if (parse_sync(ev, stream, &sync) < 0)
		return NULL;
	PyObject *keep = PyTuple_Pack(2, ev ? ev : Py_None, stream ? stream : Py_None);
	if (!keep)
		return NULL;
	PyObject *r = handle_release_impl(m, sync, keep);
	Py_DECREF(keep);
	return r;
}

static PyObject *stage_unmap_attribute(StageObject *st, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature sig = SIGNATURE("unmap_attribute", 3, 1, A_OBJ("map"), A_OBJ("cuda_event"), A_OBJ("cuda_stream"));
	PyObject *a[3];
	HandleObject *m;
	if (parse_call(&sig, st, args, nargs, kwnames, OUTS(&a[0], &a[1], &a[2])) < 0 || map_arg(st, a[0], &m) < 0)
		return NULL;
	return unmap_impl(m, a[1], a[2]);
}

static PyObject *stage_advance_write_floor(StageObject *st, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature sig = SIGNATURE("advance_write_floor", 3, 1, A_U64("ordinal"), A_ENUM("scope", 0, 2),
					 A_OBJ("attributes"));
	ovstage_write_floor_desc_t d;
	memset(&d, 0, sizeof d);
	int scope = 0;
	PyObject *attributes;
	if (parse_call(&sig, st, args, nargs, kwnames, OUTS(&d.ordinal, &scope, &attributes)) < 0)
		return NULL;
	d.scope = (ovstage_scope_t)scope;
	arena_block *arena = NULL;
	ovx_token_t *attrs;
	if (parse_tokens(st, attributes, "attributes", &arena, &attrs, &d.attribute_count) < 0) {
		arena_free(arena);
		return NULL;
	}
	d.attributes = attrs;
	ovstage_write_floor_desc_t *dp = arena_alloc(&arena, sizeof *dp);
	if (!dp) {
		arena_free(arena);
		return NULL;
	}
	*dp = d;
	ovstage_enqueue_result_t e;
	BUSY_BEGIN(st)
	e = ovstage_advance_write_floor(st->inst, dp);
	BUSY_END
	return new_operation(st, "advance_write_floor", e, arena, NULL);
}

static PyObject *stage_get_oldest_preserved_ordinal(StageObject *st, PyObject *unused)
{
	(void)unused;
	if (stage_check(st) < 0)
		return NULL;
	ovstage_ordinal_query_handle_t h = 0;
	ovstage_enqueue_result_t e = ovstage_get_oldest_preserved_ordinal(st->inst, &h);
	PyObject *op = new_operation(st, "get_oldest_preserved_ordinal", e, NULL, NULL);
	if (!op)
		return NULL;
	return new_handle(st, &OrdinalQueryType, T_ORDQ, e.status == OVSTAGE_OK ? h : 0, op);
}

static PyObject *stage_get_attribute_write_floor(StageObject *st, PyObject *const *args, Py_ssize_t nargs,
						 PyObject *kwnames)
{
	static signature sig = SIGNATURE("get_attribute_write_floor", 1, 0, A_ATTR("attribute"));
	ovx_string_or_token_t attr;
	if (parse_call(&sig, st, args, nargs, kwnames, OUTS(&attr)) < 0)
		return NULL;
	ovstage_ordinal_query_handle_t h = 0;
	ovstage_enqueue_result_t e = ovstage_get_attribute_write_floor(st->inst, attr, &h);
	PyObject *op = new_operation(st, "get_attribute_write_floor", e, NULL, NULL);
	if (!op)
		return NULL;
	return new_handle(st, &OrdinalQueryType, T_ORDQ, e.status == OVSTAGE_OK ? h : 0, op);
}

typedef struct {
	ovx_string_or_token_t attr;
	uint64_t ordinal;
} floor_ctx;

static int floor_slice(StageObject *st, void *ctx, uint64_t slice)
{
	floor_ctx *c = ctx;
	return ovstage_ext_wait_write_floor(st->inst, c->attr, c->ordinal, slice);
}

/*
 * wait_write_floor(ordinal, attribute=None, timeout=TIMEOUT_INFINITE) -> bool: ovstage_ext_wait_write_floor
 * in slices (sliced_wait), ending with INVALID_HANDLE when another thread's destroy() closes the
 * stage (nothing else would end an infinite wait then). True when the floor reached `ordinal`,
 * False when the timeout passed first (like threading.Event.wait).
 */
static PyObject *stage_wait_write_floor(StageObject *st, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature sig = SIGNATURE("wait_write_floor", 3, 1, A_U64("ordinal"), A_ATTR("attribute"), A_TIMEOUT);
	floor_ctx c;
	uint64_t timeout;
	if (parse_call(&sig, st, args, nargs, kwnames, OUTS(&c.ordinal, &c.attr, &timeout)) < 0)
		return NULL;
	int rc = sliced_wait(st, timeout, 1, floor_slice, &c);
	if (rc < 0)
		return NULL;
	if (rc == OVSTAGE_ERROR_TIMEOUT)
		Py_RETURN_FALSE;
	if (rc != OVSTAGE_OK)
		return raise_last(rc, "wait_write_floor");
	Py_RETURN_TRUE;
}

static PyObject *ordinal_impl(StageObject *st, uint64_t h, uint64_t timeout)
{
	ovstage_ordinal_t v = 0;
	int rc = fetch_sliced(st, T_ORDQ, h, timeout, &v);
	if (rc < 0)
		return NULL;
	if (rc != OVSTAGE_OK)
		return raise_last(rc, "fetch_ordinal");
	return PyLong_FromUnsignedLongLong(v);
}

static PyObject *stage_fetch_ordinal(StageObject *st, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature sig = SIGNATURE("fetch_ordinal", 2, 1, A_HANDLE("ordinal_query", &OrdinalQueryType), A_TIMEOUT);
	uint64_t h, timeout;
	if (parse_call(&sig, st, args, nargs, kwnames, OUTS(&h, &timeout)) < 0)
		return NULL;
	return ordinal_impl(st, h, timeout);
}

static PyObject *stage_memory_stats(StageObject *st, PyObject *unused)
{
	(void)unused;
	if (stage_check(st) < 0)
		return NULL;
	ovstage_ext_memory_stats_t m;
	int rc = ovstage_ext_get_memory_stats(st->inst, &m);
	if (rc != OVSTAGE_OK)
		return raise_last(rc, "memory_stats");
	return Py_BuildValue("{sKsKsKsKsK}", "unsealed_bytes", (unsigned long long)m.unsealed_bytes, "unsealed_limit",
			     (unsigned long long)m.unsealed_limit, "buffer_bytes", (unsigned long long)m.buffer_bytes,
			     "pooled_bytes", (unsigned long long)m.pooled_bytes, "buffers", (unsigned long long)m.buffers);
}

/* ---- Stage: path dictionary primitives (PathDictionary in __init__.py wraps them) ---------- */

static int str_views(PyObject *seq, const char *what, PyObject **fast, ovx_string_t **out, Py_ssize_t *n)
{
	if (PyUnicode_Check(seq)) {
		PyErr_Format(PyExc_TypeError, "%s must be a list of str, not one str", what);
		return -1;
	}
	*fast = PySequence_Fast(seq, "");
	if (!*fast) {
		PyErr_Format(PyExc_TypeError, "%s must be a list of str, got %.80s", what, Py_TYPE(seq)->tp_name);
		return -1;
	}
	*n = PySequence_Fast_GET_SIZE(*fast);
	*out = PyMem_Malloc(sizeof **out * (size_t)(*n ? *n : 1));
	if (!*out) {
		Py_CLEAR(*fast);
		PyErr_NoMemory();
		return -1;
	}
	for (Py_ssize_t i = 0; i < *n; i++) {
		PyObject *s = PySequence_Fast_GET_ITEM(*fast, i);
		Py_ssize_t len;
		if (!PyUnicode_Check(s)) {
			PyErr_Format(PyExc_TypeError, "%s[%zd] must be a str, got %.80s %R", what, i, Py_TYPE(s)->tp_name, s);
			goto fail;
		}
		if (!((*out)[i].ptr = PyUnicode_AsUTF8AndSize(s, &len)))
			goto fail;
		(*out)[i].length = (size_t)len;
	}
	return 0;
fail:
	PyMem_Free(*out);
	Py_CLEAR(*fast);
	return -1;
}

static uint64_t *u64_list(PyObject *seq, const char *what, Py_ssize_t *n)
{
	PyObject *f = PyUnicode_Check(seq) ? NULL : PySequence_Fast(seq, "");
	if (!f) {
		PyErr_Clear();
		PyErr_Format(PyExc_TypeError, "%s must be a list of ints, got %.80s", what, Py_TYPE(seq)->tp_name);
		return NULL;
	}
	*n = PySequence_Fast_GET_SIZE(f);
	uint64_t *v = PyMem_Malloc(sizeof *v * (size_t)(*n ? *n : 1));
	if (!v) {
		Py_DECREF(f);
		PyErr_NoMemory();
		return NULL;
	}
	for (Py_ssize_t i = 0; i < *n; i++)
		if (parse_u64(PySequence_Fast_GET_ITEM(f, i), what, &v[i]) < 0) {
			PyMem_Free(v);
			Py_DECREF(f);
			return NULL;
		}
	Py_DECREF(f);
	return v;
}

static PyObject *u64_to_list(const uint64_t *v, size_t n)
{
	PyObject *l = PyList_New((Py_ssize_t)n);
	for (size_t i = 0; l && i < n; i++)
		PyList_SET_ITEM(l, (Py_ssize_t)i, PyLong_FromUnsignedLongLong(v[i]));
	return l;
}

static PyObject *pd_intern(StageObject *st, PyObject *seq, int paths)
{
	if (stage_check(st) < 0)
		return NULL;
	PyObject *f;
	ovx_string_t *s;
	Py_ssize_t n;
	if (str_views(seq, paths ? "paths" : "strings", &f, &s, &n) < 0)
		return NULL;
	uint64_t *out = PyMem_Malloc(sizeof *out * (size_t)(n ? n : 1));
	PyObject *r = NULL;
	if (!out) {
		PyErr_NoMemory();
	} else {
		ovx_api_result_t res = paths ? path_dictionary_create_paths_from_strings(st->pd, s, (size_t)n, out)
					     : path_dictionary_create_tokens_from_strings(st->pd, s, (size_t)n, out);
		r = res.status == OVX_API_SUCCESS ? u64_to_list(out, (size_t)n)
						  : raise_ovx(st->pd, res, paths ? "intern_path" : "intern_token");
	}
	PyMem_Free(out);
	PyMem_Free(s);
	Py_DECREF(f);
	return r;
}

static PyObject *stage_pd_intern_tokens(StageObject *st, PyObject *seq)
{
	return pd_intern(st, seq, 0);
}
static PyObject *stage_pd_intern_paths(StageObject *st, PyObject *seq)
{
	return pd_intern(st, seq, 1);
}

static PyObject *stage_pd_token_strings(StageObject *st, PyObject *seq)
{
	if (stage_check(st) < 0)
		return NULL;
	Py_ssize_t n;
	uint64_t *t = u64_list(seq, "tokens", &n);
	if (!t)
		return NULL;
	ovx_string_t *s = PyMem_Calloc((size_t)(n ? n : 1), sizeof *s);
	PyObject *r = NULL;
	if (!s) {
		PyErr_NoMemory();
	} else {
		ovx_api_result_t res = path_dictionary_get_strings_from_tokens(st->pd, t, (size_t)n, s);
		if (res.status != OVX_API_SUCCESS) {
			raise_ovx(st->pd, res, "token_to_string");
		} else {
			r = PyList_New(n);
			for (Py_ssize_t i = 0; r && i < n; i++) {
				PyObject *u = PyUnicode_DecodeUTF8(s[i].ptr ? s[i].ptr : "", (Py_ssize_t)s[i].length, "replace");
				if (!u)
					Py_CLEAR(r);
				else
					PyList_SET_ITEM(r, i, u);
			}
		}
	}
	PyMem_Free(s);
	PyMem_Free(t);
	return r;
}

static PyObject *stage_pd_path_strings(StageObject *st, PyObject *seq)
{
	if (stage_check(st) < 0)
		return NULL;
	Py_ssize_t n;
	uint64_t *p = u64_list(seq, "paths", &n);
	if (!p)
		return NULL;
	PyObject *r = PyList_New(n);
	size_t cap = 64;
	ovx_token_t *buf = PyMem_Malloc(sizeof *buf * cap);
	ovx_string_t *strs = PyMem_Malloc(sizeof *strs * cap);
	if (!buf || !strs)
		PyErr_NoMemory();
	for (Py_ssize_t i = 0; r && buf && strs && i < n; i++) {
		ovx_token_t *toks = NULL;
		size_t ntok = 0, done = 0;
		for (;;) {
			ovx_api_result_t res = path_dictionary_get_tokens_from_paths(st->pd, &p[i], 1, buf, cap, &toks,
										     &ntok, &done);
			if (res.status != OVX_API_SUCCESS) {
				raise_ovx(st->pd, res, "path_to_string");
				Py_CLEAR(r);
				break;
			}
			if (done == 1)
				break;
			cap *= 4; /* the path did not fit */
			PyMem_Free(buf);
			PyMem_Free(strs);
			buf = PyMem_Malloc(sizeof *buf * cap);
			strs = PyMem_Malloc(sizeof *strs * cap);
			if (!buf || !strs || cap > (1u << 24)) {
				PyErr_NoMemory();
				Py_CLEAR(r);
				break;
			}
		}
		if (!r)
			break;
		PyObject *u;
		if (ntok == 0) {
			u = PyUnicode_FromString("/");
		} else {
			ovx_api_result_t res = path_dictionary_get_strings_from_tokens(st->pd, toks, ntok, strs);
			if (res.status != OVX_API_SUCCESS) {
				raise_ovx(st->pd, res, "path_to_string");
				Py_CLEAR(r);
				break;
			}
			size_t len = 0;
			for (size_t k = 0; k < ntok; k++)
				len += 1 + strs[k].length;
			char *tmp = PyMem_Malloc(len + 1), *w = tmp;
			if (!tmp) {
				PyErr_NoMemory();
				Py_CLEAR(r);
				break;
			}
			for (size_t k = 0; k < ntok; k++) {
				*w++ = '/';
				memcpy(w, strs[k].ptr, strs[k].length);
				w += strs[k].length;
			}
			u = PyUnicode_DecodeUTF8(tmp, (Py_ssize_t)len, "replace");
			PyMem_Free(tmp);
		}
		if (!u) {
			Py_CLEAR(r);
			break;
		}
		PyList_SET_ITEM(r, i, u);
	}
	PyMem_Free(buf);
	PyMem_Free(strs);
	PyMem_Free(p);
	if (!buf || !strs)
		Py_CLEAR(r);
	return r;
}

static PyObject *stage_pd_create_path_list(StageObject *st, PyObject *seq)
{
	if (stage_check(st) < 0)
		return NULL;
	Py_ssize_t n;
	uint64_t *p = u64_list(seq, "paths", &n);
	if (!p)
		return NULL;
	ovx_primpath_list_t l = 0;
	ovx_api_result_t res = path_dictionary_create_path_list_from_paths(st->pd, p, (size_t)n, &l);
	PyMem_Free(p);
	if (res.status != OVX_API_SUCCESS)
		return raise_ovx(st->pd, res, "create_path_list");
	return PyLong_FromUnsignedLongLong(l);
}

static PyObject *stage_pd_create_path_list_from_strings(StageObject *st, PyObject *seq)
{
	if (stage_check(st) < 0)
		return NULL;
	PyObject *f;
	ovx_string_t *s;
	Py_ssize_t n;
	if (str_views(seq, "paths", &f, &s, &n) < 0)
		return NULL;
	ovx_primpath_list_t l = 0;
	ovx_api_result_t res = path_dictionary_create_path_list_from_strings(st->pd, s, (size_t)n, &l);
	PyMem_Free(s);
	Py_DECREF(f);
	if (res.status != OVX_API_SUCCESS)
		return raise_ovx(st->pd, res, "create_path_list_from_strings");
	return PyLong_FromUnsignedLongLong(l);
}

static PyObject *pd_list_ref(StageObject *st, PyObject *arg, int add)
{
	uint64_t l;
	if (stage_u64_arg(st, arg, "path_list", &l) < 0)
		return NULL;
	ovx_api_result_t res = add ? path_dictionary_add_path_list_reference(st->pd, l)
				   : path_dictionary_release_path_list_reference(st->pd, l);
	if (res.status != OVX_API_SUCCESS)
		return raise_ovx(st->pd, res, add ? "add_path_list_reference" : "destroy_path_list");
	Py_RETURN_NONE;
}
static PyObject *stage_pd_add_ref(StageObject *st, PyObject *arg)
{
	return pd_list_ref(st, arg, 1);
}
static PyObject *stage_pd_release(StageObject *st, PyObject *arg)
{
	return pd_list_ref(st, arg, 0);
}

static PyObject *stage_pd_path_list_count(StageObject *st, PyObject *arg)
{
	if (stage_check(st) < 0)
		return NULL;
	uint64_t l;
	size_t n = 0;
	if (parse_u64(arg, "path_list", &l) < 0)
		return NULL;
	ovx_api_result_t res = path_dictionary_get_num_paths_from_path_list(st->pd, l, &n);
	if (res.status != OVX_API_SUCCESS)
		return raise_ovx(st->pd, res, "path_list_count");
	return PyLong_FromSize_t(n);
}

static PyObject *stage_pd_get_paths(StageObject *st, PyObject *arg)
{
	if (stage_check(st) < 0)
		return NULL;
	uint64_t l;
	size_t n = 0, got = 0;
	if (parse_u64(arg, "path_list", &l) < 0)
		return NULL;
	ovx_api_result_t res = path_dictionary_get_num_paths_from_path_list(st->pd, l, &n);
	if (res.status != OVX_API_SUCCESS)
		return raise_ovx(st->pd, res, "get_paths");
	uint64_t *p = PyMem_Malloc(sizeof *p * (n ? n : 1));
	if (!p)
		return PyErr_NoMemory();
	res = path_dictionary_get_paths_from_path_list(st->pd, l, 0, n, p, &got);
	PyObject *r = res.status == OVX_API_SUCCESS ? u64_to_list(p, got) : raise_ovx(st->pd, res, "get_paths");
	PyMem_Free(p);
	return r;
}

/* ---- Handle-kind methods ------------------------------------------------------------------- */

static PyObject *read_fetch_next(HandleObject *h, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature sig = SIGNATURE("fetch_next", 1, 0, A_TIMEOUT);
	uint64_t timeout;
	if (parse_call(&sig, NULL, args, nargs, kwnames, OUTS(&timeout)) < 0 || handle_live(h) < 0)
		return NULL;
	return read_next_impl(h->stage, h->handle, timeout, h);
}

/* Iterator over a read's groups (each released when the next is fetched) or a map's groups. */
typedef struct {
	PyObject_HEAD HandleObject *h;
	uint64_t timeout;
	GroupObject *last;
} GroupIterObject;

static PyTypeObject GroupIterType;

static PyObject *groups_iter_new(HandleObject *h, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature sig = SIGNATURE("groups", 1, 0, A_TIMEOUT);
	uint64_t timeout;
	if (parse_call(&sig, NULL, args, nargs, kwnames, OUTS(&timeout)) < 0 || handle_live(h) < 0)
		return NULL;
	GroupIterObject *it = PyObject_New(GroupIterObject, &GroupIterType);
	if (!it)
		return NULL;
	Py_INCREF(h);
	it->h = h;
	it->timeout = timeout;
	it->last = NULL;
	return (PyObject *)it;
}

static void groups_iter_release_last(GroupIterObject *it)
{
	GroupObject *g = it->last;
	it->last = NULL;
	if (g) {
		if (!g->is_map && !g->released) {
			g->released = 1;
			if (g->exports == 0)
				group_c_release(g);
		}
		Py_DECREF(g);
	}
}

static PyObject *groups_iter_next(GroupIterObject *it)
{
	groups_iter_release_last(it);
	if (!it->h)
		return NULL;
	PyObject *g = it->h->tkind == T_MAP ? map_next_impl(it->h, it->timeout)
					    : (handle_live(it->h) < 0 ? NULL
								      : read_next_impl(it->h->stage, it->h->handle, it->timeout, it->h));
	if (!g || g == Py_None) {
		Py_XDECREF(g);
		Py_CLEAR(it->h);
		return NULL; /* StopIteration, or the exception */
	}
	Py_INCREF(g);
	it->last = (GroupObject *)g;
	return g;
}

static void groups_iter_dealloc(GroupIterObject *it)
{
	groups_iter_release_last(it);
	Py_XDECREF(it->h);
	Py_TYPE(it)->tp_free((PyObject *)it);
}

static PyTypeObject GroupIterType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ovstage._native.GroupIterator",
	.tp_basicsize = sizeof(GroupIterObject),
	.tp_dealloc = (destructor)groups_iter_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_iter = PyObject_SelfIter,
	.tp_iternext = (iternextfunc)groups_iter_next,
	.tp_doc = "Iterates the groups of a read (each released when the iterator advances or is dropped;\n"
		  "views taken with array()/dlpack() stay valid) or of a map (committed by unmap).",
};

static PyObject *map_fetch_next(HandleObject *h, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature sig = SIGNATURE("fetch_next", 1, 0, A_TIMEOUT);
	uint64_t timeout;
	if (parse_call(&sig, NULL, args, nargs, kwnames, OUTS(&timeout)) < 0)
		return NULL;
	return map_next_impl(h, timeout);
}

static PyObject *map_unmap_group(HandleObject *h, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature sig = SIGNATURE("unmap_group", 3, 1, A_OBJ("group"), A_OBJ("cuda_event"), A_OBJ("cuda_stream"));
	PyObject *a[3];
	if (match_args(&sig, args, nargs, kwnames, a) < 0)
		return NULL;
	return unmap_group_impl(h, a[0], a[1], a[2]);
}

static PyObject *map_unmap(HandleObject *h, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature sig = SIGNATURE("unmap", 2, 0, A_OBJ("cuda_event"), A_OBJ("cuda_stream"));
	PyObject *a[2];
	if (match_args(&sig, args, nargs, kwnames, a) < 0)
		return NULL;
	return unmap_impl(h, a[0], a[1]);
}

/* OrdinalQuery.fetch(timeout=TIMEOUT_INFINITE) and Query.result(timeout=TIMEOUT_INFINITE). */
static PyObject *handle_fetch(HandleObject *h, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature fetch = SIGNATURE("fetch", 1, 0, A_TIMEOUT), result = SIGNATURE("result", 1, 0, A_TIMEOUT);
	int query = h->tkind == T_QUERY;
	uint64_t timeout;
	if (parse_call(query ? &result : &fetch, NULL, args, nargs, kwnames, OUTS(&timeout)) < 0 || handle_live(h) < 0)
		return NULL;
	return query ? query_result_impl(h->stage, h->handle, timeout) : ordinal_impl(h->stage, h->handle, timeout);
}

/* Hierarchy.result(timeout=TIMEOUT_INFINITE): waits for the lookup's op (if not yet waited), then
 * fetches the result (the fetch itself does not block). */
static PyObject *hier_result(HandleObject *h, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	static signature sig = SIGNATURE("result", 1, 0, A_TIMEOUT);
	uint64_t timeout;
	if (parse_call(&sig, NULL, args, nargs, kwnames, OUTS(&timeout)) < 0 || handle_live(h) < 0)
		return NULL;
	if (h->op != Py_None && !((OperationObject *)h->op)->done && op_wait((OperationObject *)h->op, timeout) < 0)
		return NULL;
	return hierarchy_fetch_impl(h->stage, h->handle);
}

#define HANDLE_COMMON_METHODS                                                                                \
	{ "wait", (PyCFunction)(void (*)(void))handle_wait, METH_FASTCALL | METH_KEYWORDS,                    \
	  "wait(timeout=TIMEOUT_INFINITE) -> self: waits for the op that reserved the handle (raises "       \
	  "OvstageError if it failed)" },                                                                    \
		{ "__enter__", (PyCFunction)handle_enter, METH_NOARGS, NULL },                                \
		{ "__exit__", (PyCFunction)handle_exit, METH_VARARGS, NULL }

static PyMethodDef query_methods[] = {
	HANDLE_COMMON_METHODS,
	{ "release", (PyCFunction)handle_release, METH_NOARGS, "release() -> Operation (release_query)" },
	{ "result", (PyCFunction)(void (*)(void))handle_fetch, METH_FASTCALL | METH_KEYWORDS,
	  "result(timeout=TIMEOUT_INFINITE) -> QueryResult" },
	{ NULL },
};
static PyMethodDef read_methods[] = {
	HANDLE_COMMON_METHODS,
	{ "release", (PyCFunction)handle_release, METH_NOARGS, "release() -> Operation (release_read)" },
	{ "fetch_next", (PyCFunction)(void (*)(void))read_fetch_next, METH_FASTCALL | METH_KEYWORDS,
	  "fetch_next(timeout=TIMEOUT_INFINITE) -> ReadGroup | None (None at the end)" },
	{ "groups", (PyCFunction)(void (*)(void))groups_iter_new, METH_FASTCALL | METH_KEYWORDS,
	  "groups(timeout=TIMEOUT_INFINITE) -> iterator of ReadGroup; each group is released when the\n"
	  "iterator advances (its array/dlpack views stay valid until they are dropped)" },
	{ NULL },
};
static PyMethodDef map_methods[] = {
	HANDLE_COMMON_METHODS,
	{ "release", (PyCFunction)handle_release, METH_NOARGS, "release() -> Operation: unmap() (commits)" },
	{ "fetch_next", (PyCFunction)(void (*)(void))map_fetch_next, METH_FASTCALL | METH_KEYWORDS,
	  "fetch_next(timeout=TIMEOUT_INFINITE) -> MapGroup | None" },
	{ "groups", (PyCFunction)(void (*)(void))groups_iter_new, METH_FASTCALL | METH_KEYWORDS,
	  "groups(timeout=TIMEOUT_INFINITE) -> iterator of MapGroup" },
	{ "unmap_group", (PyCFunction)(void (*)(void))map_unmap_group, METH_FASTCALL | METH_KEYWORDS,
	  "unmap_group(group, cuda_event=None, cuda_stream=None) -> Operation: commits one group" },
	{ "unmap", (PyCFunction)(void (*)(void))map_unmap, METH_FASTCALL | METH_KEYWORDS,
	  "unmap(cuda_event=None, cuda_stream=None) -> Operation: commits the rest and ends the session" },
	{ NULL },
};
static PyMethodDef ordq_methods[] = {
	HANDLE_COMMON_METHODS,
	{ "release", (PyCFunction)handle_release, METH_NOARGS, "release() -> Operation (release_ordinal_query)" },
	{ "fetch", (PyCFunction)(void (*)(void))handle_fetch, METH_FASTCALL | METH_KEYWORDS,
	  "fetch(timeout=TIMEOUT_INFINITE) -> int" },
	{ NULL },
};

#define HANDLE_TYPE(var, name, methods, doc)                                                                 \
	static PyTypeObject var = {                                                                          \
		PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ovstage." name,                                    \
		.tp_basicsize = sizeof(HandleObject),                                                        \
		.tp_dealloc = (destructor)handle_dealloc,                                                    \
		.tp_repr = (reprfunc)handle_repr,                                                            \
		.tp_as_number = &handle_as_number,                                                           \
		.tp_flags = Py_TPFLAGS_DEFAULT,                                                              \
		.tp_doc = doc,                                                                               \
		.tp_methods = methods,                                                                       \
		.tp_getset = handle_getset,                                                                  \
	}
HANDLE_TYPE(QueryType, "Query", query_methods,
	    "A query handle (a set of prims). Context manager: released on exit; a collected unreleased one is\n"
	    "released with a ResourceWarning; use after release raises OvstageError(INVALID_HANDLE).");
HANDLE_TYPE(ReadType, "Read", read_methods,
	    "A read handle: fetch_next() / groups() deliver ReadGroups. Context manager: released on exit.");
HANDLE_TYPE(MapType, "Map", map_methods,
	    "A map (zero-copy write) session: fill the groups' arrays, then unmap() commits. Context manager:\n"
	    "unmap() on exit.");
static PyMethodDef hier_methods[] = {
	HANDLE_COMMON_METHODS,
	{ "release", (PyCFunction)handle_release, METH_NOARGS, "release() -> Operation (release_hierarchy)" },
	{ "result", (PyCFunction)(void (*)(void))hier_result, METH_FASTCALL | METH_KEYWORDS,
	  "result(timeout=TIMEOUT_INFINITE) -> HierarchyResult: waits for the lookup, then fetches it" },
	{ NULL },
};
HANDLE_TYPE(HierarchyType, "Hierarchy", hier_methods,
	    "A hierarchy lookup (get_hierarchy_async): result() gives the HierarchyResult. Context manager:\n"
	    "released on exit.");
HANDLE_TYPE(OrdinalQueryType, "OrdinalQuery", ordq_methods,
	    "An ordinal query (write floor / oldest preserved ordinal): fetch() gives the ordinal.");

/* ---- Stage type ---------------------------------------------------------------------------- */

#define FASTKW(fn) (PyCFunction)(void (*)(void))fn, METH_FASTCALL | METH_KEYWORDS

static PyMethodDef stage_methods[] = {
	{ "destroy", (PyCFunction)stage_destroy, METH_NOARGS,
	  "destroy(): waits for and releases every op and handle the binding tracks, then destroys the\n"
	  "instance (later, when the last array view of a read group is gone). Idempotent." },
	{ "__enter__", (PyCFunction)stage_enter, METH_NOARGS, NULL },
	{ "__exit__", (PyCFunction)stage_exit, METH_VARARGS, NULL },
	{ "get_version", (PyCFunction)stage_get_version, METH_NOARGS | METH_STATIC, "get_version() -> (major, minor, patch)" },
	{ "wait_op", FASTKW(stage_wait_op),
	  "wait_op(op_id, timeout=TIMEOUT_INFINITE) -> (code, error_op_ids, lowest_pending_op_id)\n\nThe raw wait: "
	  "does not release the op." },
	{ "wait_op_raw", FASTKW(stage_wait_op), "wait_op_raw(op_id, timeout) -> (code, error_op_ids, lowest_pending_op_id)" },
	{ "release_op", (PyCFunction)stage_release_op, METH_O,
	  "release_op(op_id) -> int: releases an op id (an Operation's op is waited first)" },
	{ "query", FASTKW(stage_query), "query(filter=None, attrs=None) -> Query (enqueued; None = every prim)" },
	{ "query_from_path_list", (PyCFunction)stage_query_from_path_list, METH_O,
	  "query_from_path_list(path_list) -> Query (synchronous)" },
	{ "fetch_query_result", FASTKW(stage_fetch_query_result),
	  "fetch_query_result(query, timeout=TIMEOUT_INFINITE) -> QueryResult" },
	{ "release_query", (PyCFunction)stage_release_query, METH_O, "release_query(query) -> Operation" },
	{ "read_attributes", FASTKW(stage_read_attributes),
	  "read_attributes(query, attrs, ordinal_range) -> Read\n\nattrs: names (str) or tokens (int); ordinal_range: "
	  "OrdinalRange (or an int N = latest at N)." },
	{ "fetch_read_next", FASTKW(stage_fetch_read_next),
	  "fetch_read_next(read, timeout=TIMEOUT_INFINITE) -> ReadGroup | None" },
	{ "release_group", (PyCFunction)stage_release_group, METH_O,
	  "release_group(group): the group refuses access at once; its memory goes back with its last view" },
	{ "release_read", (PyCFunction)stage_release_read, METH_O, "release_read(read) -> Operation" },
	{ "write_attribute", FASTKW(stage_write_attribute),
	  "write_attribute(query, attribute, ordinal, tensors, *, is_array, prim_mode=UPSERT, semantic=NONE,\n"
	  "                index_map=None, mask=None, count=None, cuda_event=None, cuda_stream=None) -> Operation\n\n"
	  "tensors: a numpy array, any __dlpack__ producer, a DLTensor, or a list of them (per-row array\n"
	  "transport). Zero copy: the Operation keeps the inputs until waited. CUDA producers are handed\n"
	  "stream=cuda_stream (default 1, the legacy default stream), which the stage drains before reading." },
	{ "write_attributes", FASTKW(stage_write_attributes),
	  "write_attributes(query, writes: list[WriteDesc], ordinal, *, prim_mode=UPSERT) -> Operation" },
	{ "delete_attributes", FASTKW(stage_delete_attributes),
	  "delete_attributes(query, attributes, ordinal) -> Operation (an empty list deletes whole prims)" },
	{ "clone", FASTKW(stage_clone), "clone(source, targets, ordinal): copies a subtree (blocking)" },
	{ "clone_async", FASTKW(stage_clone_async), "clone_async(source, targets, ordinal) -> Operation" },
	{ "get_hierarchy_computation_models", (PyCFunction)stage_get_hierarchy_computation_models, METH_NOARGS,
	  "get_hierarchy_computation_models() -> list[HierarchyComputationModelDesc]" },
	{ "compute_hierarchy_async", FASTKW(stage_compute_hierarchy_async),
	  "compute_hierarchy_async(input_ordinal, output_ordinal, model=HierarchyComputationModel.DEFAULT_CPU)\n"
	  "-> Operation: world matrices (omni:fabric:worldMatrix rows that exist) from omni:xform /\n"
	  "omni:resetXformStack at input_ordinal, published at output_ordinal (sealed already)" },
	{ "get_hierarchy_async", FASTKW(stage_get_hierarchy_async),
	  "get_hierarchy_async(path_list, ordinal, relation) -> Hierarchy (relation: HierarchyRelation)" },
	{ "fetch_hierarchy_result", (PyCFunction)stage_fetch_hierarchy_result, METH_O,
	  "fetch_hierarchy_result(hierarchy) -> HierarchyResult (non-blocking: OvstageError(TIMEOUT) until the\n"
	  "lookup ran)" },
	{ "release_hierarchy", (PyCFunction)stage_release_hierarchy, METH_O, "release_hierarchy(hierarchy) -> Operation" },
	{ "map_attribute", FASTKW(stage_map_attribute),
	  "map_attribute(query, attribute, ordinal, *, prim_mode=UPSERT, dtype=None, semantic=NONE,\n"
	  "              element_sizes=None, read_current=False) -> Map\n\n"
	  "read_current=True (an extension, ovstage_ext_map_attribute with OVSTAGE_EXT_MAP_READ_CURRENT): the\n"
	  "groups' buffers hold the latest sealed values (zeros for prims without one), to modify in place;\n"
	  "refused with WRITE_FLOOR_VIOLATION while the column has unsealed writes." },
	{ "fetch_map_next", FASTKW(stage_fetch_map_next), "fetch_map_next(map, timeout=TIMEOUT_INFINITE) -> MapGroup | None" },
	{ "unmap_group", FASTKW(stage_unmap_group), "unmap_group(map, group, cuda_event=None, cuda_stream=None) -> Operation" },
	{ "unmap_attribute", FASTKW(stage_unmap_attribute), "unmap_attribute(map, cuda_event=None, cuda_stream=None) -> Operation" },
	{ "advance_write_floor", FASTKW(stage_advance_write_floor),
	  "advance_write_floor(ordinal, scope=Scope.ALL, attributes=None) -> Operation" },
	{ "get_oldest_preserved_ordinal", (PyCFunction)stage_get_oldest_preserved_ordinal, METH_NOARGS,
	  "get_oldest_preserved_ordinal() -> OrdinalQuery" },
	{ "get_attribute_write_floor", FASTKW(stage_get_attribute_write_floor),
	  "get_attribute_write_floor(attribute=None) -> OrdinalQuery (None = the global floor)" },
	{ "fetch_ordinal", FASTKW(stage_fetch_ordinal), "fetch_ordinal(ordinal_query, timeout=TIMEOUT_INFINITE) -> int" },
	{ "release_ordinal_query", (PyCFunction)stage_release_ordinal_query, METH_O,
	  "release_ordinal_query(ordinal_query) -> Operation" },
	{ "wait_write_floor", FASTKW(stage_wait_write_floor),
	  "wait_write_floor(ordinal, attribute=None, timeout=TIMEOUT_INFINITE) -> bool (an extension:\n"
	  "ovstage_ext_wait_write_floor)\n\nBlocks, with the GIL released, until the write floor of `attribute` (None: the\n"
	  "global floor) reaches `ordinal`; True when it did, False when `timeout` (ns; 0 polls) passed first.\n"
	  "Ctrl-C raises KeyboardInterrupt; destroy() from another thread ends it with OvstageError(INVALID_HANDLE)." },
	{ "memory_stats", (PyCFunction)stage_memory_stats, METH_NOARGS,
	  "memory_stats() -> dict: ovstage_ext_get_memory_stats (an extension of this implementation)" },
	{ "_pd_intern_tokens", (PyCFunction)stage_pd_intern_tokens, METH_O, NULL },
	{ "_pd_intern_paths", (PyCFunction)stage_pd_intern_paths, METH_O, NULL },
	{ "_pd_token_strings", (PyCFunction)stage_pd_token_strings, METH_O, NULL },
	{ "_pd_path_strings", (PyCFunction)stage_pd_path_strings, METH_O, NULL },
	{ "_pd_create_path_list", (PyCFunction)stage_pd_create_path_list, METH_O, NULL },
	{ "_pd_create_path_list_from_strings", (PyCFunction)stage_pd_create_path_list_from_strings, METH_O, NULL },
	{ "_pd_add_path_list_reference", (PyCFunction)stage_pd_add_ref, METH_O, NULL },
	{ "_pd_release_path_list", (PyCFunction)stage_pd_release, METH_O, NULL },
	{ "_pd_path_list_count", (PyCFunction)stage_pd_path_list_count, METH_O, NULL },
	{ "_pd_get_paths", (PyCFunction)stage_pd_get_paths, METH_O, NULL },
	{ NULL },
};

static PyGetSetDef stage_getset[] = {
	{ "closed", (getter)stage_get_closed, NULL, "True once destroy() was called", NULL },
	{ "destroyed", (getter)stage_get_destroyed, NULL, "True once the instance itself is gone", NULL },
	{ "name", (getter)stage_get_name, NULL, "the debug name", NULL },
	{ "live_objects", (getter)stage_get_live, NULL, "ops, handles and groups the binding tracks", NULL },
	{ "cuda_device", (getter)stage_get_cuda_device, NULL,
	  "the CUDA device this instance took from the active-GPU list (StageConfig.cuda_devices /\n"
	  "OVSTAGE_CUDA_DEVICES), where the columns its maps create live; -1 for none (an extension)", NULL },
	{ "_pd_epoch", (getter)stage_get_pd_epoch, NULL,
	  "the generation of the shared path dictionary the stage was created in (equal: one dictionary)", NULL },
	{ NULL },
};

static PyTypeObject StageType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ovstage._native.StageBase",
	.tp_basicsize = sizeof(StageObject),
	.tp_dealloc = (destructor)stage_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = "The native stage (ovstage.Stage derives from it).",
	.tp_weaklistoffset = offsetof(StageObject, weakreflist),
	.tp_dictoffset = offsetof(StageObject, dict),
	.tp_methods = stage_methods,
	.tp_getset = stage_getset,
	.tp_init = (initproc)stage_init,
	.tp_new = stage_new,
};

/* ---- Logging -------------------------------------------------------------------------------- */

static int interpreter_alive(void)
{
#if PY_VERSION_HEX >= 0x030D0000
	return Py_IsInitialized() && !Py_IsFinalizing();
#else
	return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

static void log_trampoline(ovstage_log_severity_t sev, double ts, ovx_string_t msg, void *ud)
{
	(void)ud;
	if (!interpreter_alive())
		return;
	PyGILState_STATE s = PyGILState_Ensure();
	PyObject *cb = g_log_callback;
	if (cb) {
		Py_INCREF(cb);
		PyObject *m = PyUnicode_DecodeUTF8(msg.ptr ? msg.ptr : "", (Py_ssize_t)msg.length, "replace");
		PyObject *r = m ? PyObject_CallFunction(cb, "idN", (int)sev, ts, m) : NULL;
		if (!r)
			PyErr_WriteUnraisable(cb);
		Py_XDECREF(r);
		Py_DECREF(cb);
	}
	PyGILState_Release(s);
}

static PyObject *mod_set_log_callback(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	(void)mod;
	static signature sig = SIGNATURE("set_log_callback", 3, 1, A_OBJ("callback"), A_OBJ("severity"), A_OBJ("channel_filter"));
	PyObject *a[3];
	if (match_args(&sig, args, nargs, kwnames, a) < 0)
		return NULL;
	int sev = OVSTAGE_LOG_WARNING;
	if (a[1] && a[1] != Py_None) {
		long v = PyLong_AsLong(a[1]);
		if (v == -1 && PyErr_Occurred())
			return NULL;
		if (v < -2 || v > 3 || v == 2) {
			PyErr_Format(PyExc_ValueError, "severity must be a LogSeverity (-2, -1, 0, 1 or 3), got %R", a[1]);
			return NULL;
		}
		sev = (int)v;
	}
	ovx_string_t filt = { NULL, 0 };
	if (a[2] && a[2] != Py_None) {
		if (!PyUnicode_Check(a[2])) {
			PyErr_Format(PyExc_TypeError, "channel_filter must be a str or None, got %.80s", Py_TYPE(a[2])->tp_name);
			return NULL;
		}
		Py_ssize_t n;
		filt.ptr = PyUnicode_AsUTF8AndSize(a[2], &n);
		if (!filt.ptr)
			return NULL;
		filt.length = (size_t)n;
	}
	PyObject *cb = a[0] == Py_None ? NULL : a[0];
	if (cb && !PyCallable_Check(cb)) {
		PyErr_Format(PyExc_TypeError, "callback must be callable or None, got %.80s", Py_TYPE(cb)->tp_name);
		return NULL;
	}
	int rc;
	if (cb) {
		/* Install the new callable first: queued messages go to it (the engine's replacement rule). */
		Py_INCREF(cb);
		PyObject *old = g_log_callback;
		g_log_callback = cb;
		Py_BEGIN_ALLOW_THREADS
		rc = ovstage_set_log_callback((ovstage_log_severity_t)sev, filt.ptr ? &filt : NULL, log_trampoline, NULL);
		Py_END_ALLOW_THREADS
		if (rc != OVSTAGE_OK) {
			g_log_callback = old;
			Py_DECREF(cb);
			return raise_last(rc, "set_log_callback");
		}
		Py_XDECREF(old);
	} else {
		Py_BEGIN_ALLOW_THREADS
		rc = ovstage_set_log_callback((ovstage_log_severity_t)sev, NULL, NULL, NULL);
		Py_END_ALLOW_THREADS
		Py_CLEAR(g_log_callback);
		if (rc != OVSTAGE_OK)
			return raise_last(rc, "set_log_callback");
	}
	Py_RETURN_NONE;
}

static PyObject *mod_flush_log(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	(void)mod;
	static signature sig = SIGNATURE("flush_log", 1, 0, A_TIMEOUT);
	uint64_t timeout;
	if (parse_call(&sig, NULL, args, nargs, kwnames, OUTS(&timeout)) < 0)
		return NULL;
	int rc;
	Py_BEGIN_ALLOW_THREADS
	rc = ovstage_flush_log(timeout);
	Py_END_ALLOW_THREADS
	if (rc != OVSTAGE_OK)
		return raise_last(rc, "flush_log");
	Py_RETURN_NONE;
}

static PyObject *mod_library_version(PyObject *mod, PyObject *unused)
{
	(void)mod;
	(void)unused;
	return Py_BuildValue("(iii)", OVSTAGE_VERSION_MAJOR, OVSTAGE_VERSION_MINOR, OVSTAGE_VERSION_PATCH);
}

/* gpu_status() -> (device_count, reason): ovstage_ext_get_gpu_status (decides CPU-only mode if no
 * stage has yet). */
static PyObject *mod_gpu_status(PyObject *mod, PyObject *unused)
{
	(void)mod;
	(void)unused;
	int n = 0;
	const char *reason = NULL;
	int rc = ovstage_ext_get_gpu_status(&n, &reason);
	if (rc != OVSTAGE_OK)
		return raise_last(rc, "gpu_status");
	return Py_BuildValue("(is)", n, reason ? reason : "");
}

/* gpu_pool_stats(device) -> dict: ovstage_ext_get_gpu_pool_stats (OvstageError INVALID_ARGUMENT
 * naming the ordinal for one the process cannot use; ValueError for one beyond a C int). */
/* A CUDA device ordinal argument as a C int (false with ValueError or TypeError set). */
static bool device_arg(PyObject *arg, const char *fn, int *dev)
{
	long d = PyLong_AsLong(arg);
	if (d == -1 && PyErr_Occurred())
		return false;
	if (d < INT_MIN || d > INT_MAX) {
		PyErr_Format(PyExc_ValueError, "%s: CUDA device ordinal %ld is out of range", fn, d);
		return false;
	}
	*dev = (int)d;
	return true;
}

static PyObject *mod_gpu_pool_stats(PyObject *mod, PyObject *arg)
{
	(void)mod;
	int dev;
	if (!device_arg(arg, "gpu_pool_stats", &dev))
		return NULL;
	ovstage_ext_gpu_pool_stats_t s;
	int rc = ovstage_ext_get_gpu_pool_stats(dev, &s);
	if (rc != OVSTAGE_OK)
		return raise_last(rc, "gpu_pool_stats");
	return Py_BuildValue("{sKsKsKsKsKsKsK}", "bound_bytes", (unsigned long long)s.bound_bytes, "retained_bytes",
			     (unsigned long long)s.retained_bytes, "hits", (unsigned long long)s.hits, "misses",
			     (unsigned long long)s.misses, "releases", (unsigned long long)s.releases,
			     "cuda_reserved_bytes", (unsigned long long)s.cuda_reserved_bytes, "cuda_used_bytes",
			     (unsigned long long)s.cuda_used_bytes);
}

/* gpu_device_info(device) -> dict: ovstage_ext_get_gpu_device_info (errors as gpu_pool_stats). */
static PyObject *mod_gpu_device_info(PyObject *mod, PyObject *arg)
{
	(void)mod;
	int dev;
	if (!device_arg(arg, "gpu_device_info", &dev))
		return NULL;
	ovstage_ext_gpu_device_info_t s;
	int rc = ovstage_ext_get_gpu_device_info(dev, &s);
	if (rc != OVSTAGE_OK)
		return raise_last(rc, "gpu_device_info");
	return Py_BuildValue("{sssisisKsK}", "pci_bus_id", s.pci_bus_id, "near_workers", s.near_workers, "worker_count",
			     s.worker_count, "completions", (unsigned long long)s.completions, "pending",
			     (unsigned long long)s.pending);
}

static PyObject *mod_process_ref(PyObject *mod, PyObject *arg)
{
	(void)mod;
	int rc = PyObject_IsTrue(arg) ? ovstage_initialize(NULL) : ovstage_shutdown();
	if (rc != OVSTAGE_OK)
		return raise_last(rc, "process reference");
	Py_RETURN_NONE;
}

static PyObject *mod_register(PyObject *mod, PyObject *args)
{
	(void)mod;
	const char *name;
	PyObject *obj;
	if (!PyArg_ParseTuple(args, "sO", &name, &obj))
		return NULL;
	PyObject **slot = strcmp(name, "OvstageError") == 0	? &g_error_class
			  : strcmp(name, "OvxError") == 0	? &g_ovx_error_class
			  : strcmp(name, "QueryResult") == 0	? &g_query_result_class
			  : strcmp(name, "AttributeMeta") == 0 ? &g_attribute_meta_class
			  : strcmp(name, "DLDataType") == 0	? &g_dldatatype_class
			  : strcmp(name, "HierarchyItem") == 0 ? &g_hier_item_class
			  : strcmp(name, "HierarchyResult") == 0 ? &g_hier_result_class
			  : strcmp(name, "HierarchyComputationModelDesc") == 0 ? &g_hier_model_class
								: NULL;
	if (!slot) {
		PyErr_Format(PyExc_ValueError, "unknown registration %s", name);
		return NULL;
	}
	Py_INCREF(obj);
	Py_XSETREF(*slot, obj);
	Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
	{ "make_dltensor", FASTKW(make_dltensor),
	  "make_dltensor(array, *, dtype=None, shape=None, ndim=None, strides=None, device_type=None, device_id=None,\n"
	  "              stream=None)\n"
	  "-> DLTensor\n\nA zero-copy view of any DLPack producer with a validated layout override. dtype folds "
	  "complete\ncompact trailing axes into lanes (same base type, byte-aligned elements): Warp vec3f (N, 3) with\n"
	  "dtype=DLDataType(kDLFloat, 32, 3) gives (N,) lanes 3; a full fold of (3,) gives shape (1,).\nExplicit "
	  "shape/strides must stay within the source's bytes. stream (an extension): for a CUDA producer, the\n"
	  "stream its __dlpack__ is told the stage reads on (default 1, the legacy default); pass the write's\n"
	  "cuda_stream." },
	{ "set_log_callback", FASTKW(mod_set_log_callback), NULL },
	{ "flush_log", FASTKW(mod_flush_log), NULL },
	{ "library_version", (PyCFunction)mod_library_version, METH_NOARGS, "library_version() -> (0, 2, 1)" },
	{ "gpu_status", (PyCFunction)mod_gpu_status, METH_NOARGS,
	  "gpu_status() -> (device_count, reason): ovstage_ext_get_gpu_status (an extension)" },
	{ "gpu_pool_stats", (PyCFunction)mod_gpu_pool_stats, METH_O,
	  "gpu_pool_stats(device) -> dict: ovstage_ext_get_gpu_pool_stats (an extension)" },
	{ "gpu_device_info", (PyCFunction)mod_gpu_device_info, METH_O,
	  "gpu_device_info(device) -> dict: ovstage_ext_get_gpu_device_info (an extension)" },
	{ "_process_ref", (PyCFunction)mod_process_ref, METH_O, NULL },
	{ "_register", (PyCFunction)mod_register, METH_VARARGS, NULL },
	{ NULL },
};

static struct PyModuleDef module_def = {
	PyModuleDef_HEAD_INIT, "ovstage._native", "The native part of the ovstage Python package.", -1, module_methods,
	NULL, NULL, NULL, NULL,
};

#define INTERN(var, text)                                                                                    \
	do {                                                                                                 \
		if (!(var = PyUnicode_InternFromString(text)))                                               \
			return NULL;                                                                         \
	} while (0)

PyMODINIT_FUNC PyInit__native(void); /* the only exported symbol of ours */
PyMODINIT_FUNC PyInit__native(void)
{
	import_array();
	INTERN(s_dlpack, "__dlpack__");
	INTERN(s_dlpack_device, "__dlpack_device__");
	INTERN(s_max_version, "max_version");
	INTERN(s_stream, "stream");
	INTERN(s_attribute, "attribute");
	INTERN(s_tensors, "tensors");
	INTERN(s_is_array, "is_array");
	INTERN(s_index_map, "index_map");
	INTERN(s_mask, "mask");
	INTERN(s_count, "count");
	INTERN(s_cuda_event, "cuda_event");
	INTERN(s_cuda_stream, "cuda_stream");
	INTERN(s_semantic, "semantic");
	INTERN(s_end_ordinal, "end_ordinal");
	INTERN(s_start_ordinal, "start_ordinal");
	INTERN(s_predicates, "predicates");
	INTERN(s_op, "op");
	INTERN(s_values, "values");
	INTERN(s_code, "code");
	INTERN(s_bits, "bits");
	INTERN(s_lanes, "lanes");
	INTERN(s_ptr, "ptr");
	INTERN(s_cuda_event_attr, "cuda_event");
	INTERN(s_cuda_stream_attr, "cuda_stream");
	if (!(s_version_tuple = Py_BuildValue("(ii)", 1, 0)))
		return NULL;
	PyTypeObject *types[] = { &DLTensorType, &OperationType, &QueryType,   &ReadType,	&MapType,
				  &OrdinalQueryType, &HierarchyType, &PinType, &ReadGroupType, &MapGroupType, &ManagedType,
				  &GroupIterType, &StageType };
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
		if (PyType_Ready(types[i]) < 0)
			return NULL;
	PyObject *m = PyModule_Create(&module_def);
	if (!m)
		return NULL;
	struct {
		const char *name;
		PyTypeObject *t;
	} exported[] = { { "DLTensor", &DLTensorType }, { "Operation", &OperationType }, { "Query", &QueryType },
			 { "Read", &ReadType },		{ "Map", &MapType },		 { "OrdinalQuery", &OrdinalQueryType },
			 { "Hierarchy", &HierarchyType },
			 { "ReadGroup", &ReadGroupType }, { "MapGroup", &MapGroupType }, { "ManagedDLTensor", &ManagedType },
			 { "StageBase", &StageType } };
	for (size_t i = 0; i < sizeof exported / sizeof exported[0]; i++) {
		Py_INCREF(exported[i].t);
		if (PyModule_AddObject(m, exported[i].name, (PyObject *)exported[i].t) < 0) {
			Py_DECREF(exported[i].t);
			Py_DECREF(m);
			return NULL;
		}
	}
	PyModule_AddIntConstant(m, "DLPACK_FLAG_BITMASK_READ_ONLY", (long)DLPACK_FLAG_BITMASK_READ_ONLY);
	PyModule_AddObject(m, "TIMEOUT_INFINITE", PyLong_FromUnsignedLongLong(OVSTAGE_TIMEOUT_INFINITE));
	return m;
}
