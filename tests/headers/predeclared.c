/*
 * Another header may already have declared ovstage_instance_t and ovstage_ordinal_t, and users
 * may predefine OVSTAGE_DEPRECATED / OVSTAGE_API: the public headers must accept all of that.
 */
#include <stdint.h>

typedef uint64_t ovstage_ordinal_t;
#define OVSTAGE_ORDINAL_T_DECLARED
typedef struct ovstage_instance_t ovstage_instance_t;
#define OVSTAGE_INSTANCE_T_DECLARED
#define OVSTAGE_DEPRECATED(msg)
#define OVSTAGE_API

#include <ovstage/ovstage.h>
#include <ovstage/ovalign.h>

int ovstage_test_predeclared(void);

int ovstage_test_predeclared(void)
{
    ovstage_instance_t instance = { NULL, NULL };
    ovstage_ordinal_t ordinal = 1;
    return (instance.vtable == NULL && instance.context == NULL && ordinal == 1) ? 0 : 1;
}
