/* filter_value.c — value predicates of query filters (see filter_value.h). */
#include "filter_value.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"

/* One operand: a number (the whole string) or true / false. */
static bool parse_operand(const char *s, size_t len, long double *out)
{
	if ((len == 4 && !memcmp(s, "true", 4)) || (len == 5 && !memcmp(s, "false", 5))) {
		*out = len == 4 ? 1.0L : 0.0L;
		return true;
	}
	char buf[128];
	if (!len || len >= sizeof buf || memchr(s, '\0', len))
		return false;
	memcpy(buf, s, len);
	buf[len] = '\0';
	char *end;
	errno = 0;
	long double x = strtold(buf, &end);
	return *end == '\0' && end != buf && !isnan(x) && errno != ERANGE ? (*out = x, true) : false;
}

static int cmp_ld(const void *a, const void *b)
{
	long double x = *(const long double *)a, y = *(const long double *)b;
	return x < y ? -1 : x > y;
}

ovstage_api_status_t ovs_fvalue_compile(const ovstage_predicate_t *pr, size_t i, const char *name, ovs_fvalue *out)
{
	out->op = pr->op;
	if (pr->op != OVSTAGE_FILTER_OP_IN && pr->value_count != 1)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
				   "filter.predicates[%zu]: a comparison on \"%s\" takes exactly one value (value_count "
				   "= %zu)", i, name, pr->value_count);
	out->vals = malloc((pr->value_count ? pr->value_count : 1) * sizeof *out->vals);
	if (!out->vals)
		return ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory compiling filter.predicates[%zu]", i);
	for (size_t j = 0; j < pr->value_count; j++) {
		const char *s = pr->values[j].ptr;
		size_t len = pr->values[j].length;
		if (!parse_operand(s, len, &out->vals[j])) {
			int shown = len > 100 ? 100 : (int)len;
			return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
					   "filter.predicates[%zu].values[%zu] = \"%.*s\" is not a number (nor true or "
					   "false) to compare \"%s\" with", i, j, shown, s ? s : "", name);
		}
		out->n = j + 1;
	}
	if (pr->op == OVSTAGE_FILTER_OP_IN && out->n > 1)
		qsort(out->vals, out->n, sizeof *out->vals, cmp_ld);
	return OVSTAGE_OK;
}

void ovs_fvalue_fini(ovs_fvalue *v)
{
	free(v->vals);
	v->vals = NULL;
	v->n = 0;
}

bool ovs_fvalue_schema_ok(const ovs_schema *sc, const char *name, char *err, size_t errlen)
{
	const DLDataType t = sc->dtype;
	bool ok = !sc->is_array && t.lanes == 1 &&
		  (((t.code == kDLInt || t.code == kDLUInt) && (t.bits == 8 || t.bits == 16 || t.bits == 32 || t.bits == 64)) ||
		   (t.code == kDLFloat && (t.bits == 32 || t.bits == 64)) || (t.code == kDLBool && t.bits == 8));
	if (!ok)
		ovs_err_format(err, errlen, "a value comparison on \"%s\" needs a scalar number or bool column; it has "
			       "dtype (code %u, bits %u, lanes %u%s)", name, (unsigned)t.code, (unsigned)t.bits,
			       (unsigned)t.lanes, sc->is_array ? ", array rows" : "");
	return ok;
}

/* The row's value, exactly (every integer of 64 bits fits a long double's mantissa). */
static long double row_value(const ovs_schema *sc, const void *row)
{
	const DLDataType t = sc->dtype;
	if (t.code == kDLFloat) {
		if (t.bits == 32) {
			float f;
			memcpy(&f, row, 4);
			return f;
		}
		double d;
		memcpy(&d, row, 8);
		return d;
	}
	if (t.code == kDLBool)
		return *(const uint8_t *)row != 0;
	uint64_t u = 0;
	memcpy(&u, row, t.bits / 8); /* little-endian host: the low bytes */
	if (t.code == kDLUInt)
		return (long double)u;
	if (t.bits < 64 && (u >> (t.bits - 1)) & 1) /* sign-extend */
		u |= ~(uint64_t)0 << t.bits;
	return (long double)(int64_t)u;
}

bool ovs_fvalue_test(const ovs_fvalue *v, const ovs_schema *sc, const void *row)
{
	long double x = row_value(sc, row);
	if (isnan(x))
		return false; /* NaN equals nothing and orders with nothing */
	switch (v->op) {
	case OVSTAGE_FILTER_OP_IN: {
		size_t lo = 0, hi = v->n;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (v->vals[mid] < x)
				lo = mid + 1;
			else
				hi = mid;
		}
		return lo < v->n && v->vals[lo] == x;
	}
	case OVSTAGE_FILTER_OP_LT:
		return x < v->vals[0];
	case OVSTAGE_FILTER_OP_LE:
		return x <= v->vals[0];
	case OVSTAGE_FILTER_OP_GT:
		return x > v->vals[0];
	case OVSTAGE_FILTER_OP_GE:
		return x >= v->vals[0];
	default:
		return false;
	}
}
