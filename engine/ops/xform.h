/*
 * xform.h — 4x4 row-major float64 matrices of the transform contract (USD row-vector convention:
 * a point transforms as p * M, so a child's world is local x parent world). Pure functions.
 */
#ifndef OVSTAGE_ENGINE_XFORM_H
#define OVSTAGE_ENGINE_XFORM_H

#include <string.h>

static inline void ovs_xform_identity(double m[16])
{
	memset(m, 0, 16 * sizeof *m);
	m[0] = m[5] = m[10] = m[15] = 1.0;
}

/* out = a x b (out may not alias a or b). */
static inline void ovs_xform_mul(const double a[16], const double b[16], double out[16])
{
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 4; j++)
			out[i * 4 + j] = a[i * 4 + 0] * b[0 * 4 + j] + a[i * 4 + 1] * b[1 * 4 + j] +
					 a[i * 4 + 2] * b[2 * 4 + j] + a[i * 4 + 3] * b[3 * 4 + j];
}

#endif /* OVSTAGE_ENGINE_XFORM_H */
