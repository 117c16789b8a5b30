/*
 * filter_value.h — value predicates of query filters (an extension beyond ovstage 0.2.1, which
 * answers NOT_SUPPORTED): IN (equal to any operand) and LT / LE / GT / GE (one operand) on the
 * latest sealed value of a scalar numeric column.
 *
 * Contract
 *  - Operands are the predicate's strings: decimal or hexadecimal numbers as strtold reads them
 *    (the whole string), or true / false. A malformed or NaN operand is INVALID_ARGUMENT at the call,
 *    naming it; LT/LE/GT/GE take exactly one operand.
 *  - The column must be fixed-size with one scalar per row (lanes 1) of a signed or unsigned integer
 *    (8–64 bits), a float (32 or 64 bits) or a bool; anything else fails the query's op with
 *    NOT_SUPPORTED naming the dtype (known only when it runs). Comparisons are exact: values and
 *    operands are compared as long double (a 64-bit mantissa holds every 64-bit integer).
 *  - A prim without a sealed value in the column never matches (as HAS would not).
 *
 * Thread safety: a compiled predicate is immutable; ovs_fvalue_test may run on many threads at once.
 */
#ifndef OVSTAGE_ENGINE_FILTER_VALUE_H
#define OVSTAGE_ENGINE_FILTER_VALUE_H

#include <stdbool.h>
#include <stddef.h>

#include <ovstage/ovstage.h>

#include "model.h"

typedef struct ovs_fvalue {
	ovstage_filter_op_t op; /* IN, LT, LE, GT or GE */
	long double *vals;      /* operands (IN: sorted) */
	size_t n;               /* entries */
} ovs_fvalue;

/* Parses predicate i's operands into *out (zeroed by the caller). Sets the last error on failure. */
ovstage_api_status_t ovs_fvalue_compile(const ovstage_predicate_t *pr, size_t i, const char *name, ovs_fvalue *out);
void ovs_fvalue_fini(ovs_fvalue *v);
/* Whether a column of schema sc can be compared; else a message in err. */
bool ovs_fvalue_schema_ok(const ovs_schema *sc, const char *name, char *err, size_t errlen);
/* Whether the row's value (row bytes of a column that passed ovs_fvalue_schema_ok) satisfies v. */
bool ovs_fvalue_test(const ovs_fvalue *v, const ovs_schema *sc, const void *row);

#endif /* OVSTAGE_ENGINE_FILTER_VALUE_H */
