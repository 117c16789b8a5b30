/*
 * ovstage/ovstage_population_predicate.h — prim and property predicates, the selection vocabulary
 * shared by USD population selectors and USD export descriptors.
 *
 * Contract:
 *  - A predicate is {kind, values, value_count}; `kind` names the live member of `values`.
 *    The values of one predicate are OR-ed; combine kinds with AND / OR / NOT.
 *  - Nested predicates are referenced, not copied: whatever a predicate points at must outlive it
 *    (population and export copy the whole graph when an operation is enqueued).
 *  - The static inline constructors below set all three fields consistently; prefer them.
 */
#ifndef OVSTAGE_POPULATION_PREDICATE_H
#define OVSTAGE_POPULATION_PREDICATE_H

#include "ovstage_api/ovstage_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ovstage_population_prim_predicate_t ovstage_population_prim_predicate_t;
typedef struct ovstage_population_property_predicate_t ovstage_population_property_predicate_t;

/** How a prim predicate matches; the comment names the `values` member it uses. */
typedef enum
{
    OVSTAGE_POPULATION_PRIM_PREDICATE_NONE = 0,                            /* no prim; no values */
    OVSTAGE_POPULATION_PRIM_PREDICATE_ALL = 1,                             /* every prim; no values */
    OVSTAGE_POPULATION_PRIM_PREDICATE_AND = 2,                             /* subpredicates: all match */
    OVSTAGE_POPULATION_PRIM_PREDICATE_OR = 3,                              /* subpredicates: any matches */
    OVSTAGE_POPULATION_PRIM_PREDICATE_NOT = 4,                             /* one subpredicate: it does not match */
    OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_PARENT = 5,                      /* one subpredicate: the parent matches */
    OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_ANCESTOR = 6,                    /* one subpredicate: a strict ancestor matches */
    OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_PROPERTY = 7,                    /* property_predicate: some property matches */
    OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_TYPE = 8,                        /* strings: exact type name */
    OVSTAGE_POPULATION_PRIM_PREDICATE_IS_A_TYPE = 9,                       /* strings: type name or a base type */
    OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_SCHEMA = 10,                     /* strings: type or applied API schema */
    OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_APPLIED_SCHEMA = 11,             /* strings: applied API schema (with :instance) */
    OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_APPLIED_SCHEMA_IN_NAMESPACE = 12, /* strings: API schema namespace at ':' */
    OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_PATH = 13,                       /* strings: exact absolute path */
    OVSTAGE_POPULATION_PRIM_PREDICATE_IS_UNDER_PATH = 14,                  /* strings: at or below a path (component boundary) */
    OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_KIND = 15,                       /* strings: model kind */
    OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_PURPOSE = 16,                    /* strings: inherited purpose */
    OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_METADATA = 17,                   /* strings: metadata path present */
} ovstage_population_prim_predicate_kind_t;

/** How a property predicate matches; the comment names the `values` member it uses. */
typedef enum
{
    OVSTAGE_POPULATION_PROPERTY_PREDICATE_NONE = 0,               /* no property; no values */
    OVSTAGE_POPULATION_PROPERTY_PREDICATE_ALL = 1,                /* every property; no values */
    OVSTAGE_POPULATION_PROPERTY_PREDICATE_AND = 2,                /* subpredicates: all match */
    OVSTAGE_POPULATION_PROPERTY_PREDICATE_OR = 3,                 /* subpredicates: any matches */
    OVSTAGE_POPULATION_PROPERTY_PREDICATE_NOT = 4,                /* one subpredicate: it does not match */
    OVSTAGE_POPULATION_PROPERTY_PREDICATE_DECLARED_BY_SCHEMA = 5, /* strings: a named schema declares the name */
    OVSTAGE_POPULATION_PROPERTY_PREDICATE_HAS_NAME = 6,           /* strings: exact property name */
    OVSTAGE_POPULATION_PROPERTY_PREDICATE_IN_NAMESPACE = 7,       /* strings: name namespace at ':' */
    OVSTAGE_POPULATION_PROPERTY_PREDICATE_HAS_METADATA = 8,       /* strings: metadata path present */
    OVSTAGE_POPULATION_PROPERTY_PREDICATE_IS_ATTRIBUTE = 9,       /* no values */
    OVSTAGE_POPULATION_PROPERTY_PREDICATE_IS_RELATIONSHIP = 10,   /* no values */
    OVSTAGE_POPULATION_PROPERTY_PREDICATE_IS_CUSTOM = 11,         /* no values */
    OVSTAGE_POPULATION_PROPERTY_PREDICATE_IS_AUTHORED = 12,       /* no values */
} ovstage_population_property_predicate_kind_t;

/** Which prims are in scope. */
struct ovstage_population_prim_predicate_t
{
    ovstage_population_prim_predicate_kind_t kind; /**< how the predicate matches; selects the `values` member */
    union
    {
        const ovx_string_t* strings;                                 /**< names / paths for the string kinds */
        const ovstage_population_prim_predicate_t* subpredicates;    /**< operands of AND / OR / NOT / HAS_PARENT / HAS_ANCESTOR */
        const ovstage_population_property_predicate_t* property_predicate; /**< operand of HAS_PROPERTY */
    } values;                                      /**< the operands, as `kind` says */
    size_t value_count;                            /**< number of operands */
};

/** Which properties of an in-scope prim are selected. */
struct ovstage_population_property_predicate_t
{
    ovstage_population_property_predicate_kind_t kind; /**< how the predicate matches; selects the `values` member */
    union
    {
        const ovx_string_t* strings;                                 /**< names / namespaces / paths for the string kinds */
        const ovstage_population_property_predicate_t* subpredicates; /**< operands of AND / OR / NOT */
    } values;                                           /**< the operands, as `kind` says */
    size_t value_count;                                 /**< number of operands */
};

/* ---- Constructors: prim predicates ----------------------------------------------------------- */

/* Internal helpers shared by the constructors below. */
static inline ovstage_population_prim_predicate_t ovstage_population_prim_predicate_make_strings_(
    ovstage_population_prim_predicate_kind_t kind, const ovx_string_t* values, size_t value_count)
{
    ovstage_population_prim_predicate_t p;
    p.kind = kind;
    p.values.strings = values;
    p.value_count = value_count;
    return p;
}

static inline ovstage_population_prim_predicate_t ovstage_population_prim_predicate_make_subs_(
    ovstage_population_prim_predicate_kind_t kind, const ovstage_population_prim_predicate_t* subs, size_t count)
{
    ovstage_population_prim_predicate_t p;
    p.kind = kind;
    p.values.subpredicates = subs;
    p.value_count = count;
    return p;
}

static inline ovstage_population_prim_predicate_t ovstage_population_prim_predicate_none(void)
{
    return ovstage_population_prim_predicate_make_strings_(OVSTAGE_POPULATION_PRIM_PREDICATE_NONE, NULL, 0);
}

static inline ovstage_population_prim_predicate_t ovstage_population_prim_predicate_all(void)
{
    return ovstage_population_prim_predicate_make_strings_(OVSTAGE_POPULATION_PRIM_PREDICATE_ALL, NULL, 0);
}

static inline ovstage_population_prim_predicate_t ovstage_population_prim_predicate_and(
    const ovstage_population_prim_predicate_t* subpredicates, size_t value_count)
{
    return ovstage_population_prim_predicate_make_subs_(OVSTAGE_POPULATION_PRIM_PREDICATE_AND, subpredicates,
                                                        value_count);
}

static inline ovstage_population_prim_predicate_t ovstage_population_prim_predicate_or(
    const ovstage_population_prim_predicate_t* subpredicates, size_t value_count)
{
    return ovstage_population_prim_predicate_make_subs_(OVSTAGE_POPULATION_PRIM_PREDICATE_OR, subpredicates,
                                                        value_count);
}

static inline ovstage_population_prim_predicate_t ovstage_population_prim_predicate_not(
    const ovstage_population_prim_predicate_t* subpredicate)
{
    return ovstage_population_prim_predicate_make_subs_(OVSTAGE_POPULATION_PRIM_PREDICATE_NOT, subpredicate, 1);
}

static inline ovstage_population_prim_predicate_t ovstage_population_prim_predicate_has_parent(
    const ovstage_population_prim_predicate_t* subpredicate)
{
    return ovstage_population_prim_predicate_make_subs_(OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_PARENT, subpredicate, 1);
}

static inline ovstage_population_prim_predicate_t ovstage_population_prim_predicate_has_ancestor(
    const ovstage_population_prim_predicate_t* subpredicate)
{
    return ovstage_population_prim_predicate_make_subs_(OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_ANCESTOR, subpredicate,
                                                        1);
}

static inline ovstage_population_prim_predicate_t ovstage_population_prim_predicate_has_property(
    const ovstage_population_property_predicate_t* property_predicate)
{
    ovstage_population_prim_predicate_t p;
    p.kind = OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_PROPERTY;
    p.values.property_predicate = property_predicate;
    p.value_count = 1;
    return p;
}

static inline ovstage_population_prim_predicate_t ovstage_population_prim_predicate_has_type(
    const ovx_string_t* values, size_t value_count)
{
    return ovstage_population_prim_predicate_make_strings_(OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_TYPE, values,
                                                           value_count);
}

static inline ovstage_population_prim_predicate_t ovstage_population_prim_predicate_is_a_type(
    const ovx_string_t* values, size_t value_count)
{
    return ovstage_population_prim_predicate_make_strings_(OVSTAGE_POPULATION_PRIM_PREDICATE_IS_A_TYPE, values,
                                                           value_count);
}

static inline ovstage_population_prim_predicate_t ovstage_population_prim_predicate_has_schema(
    const ovx_string_t* values, size_t value_count)
{
    return ovstage_population_prim_predicate_make_strings_(OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_SCHEMA, values,
                                                           value_count);
}

static inline ovstage_population_prim_predicate_t ovstage_population_prim_predicate_has_applied_schema(
    const ovx_string_t* values, size_t value_count)
{
    return ovstage_population_prim_predicate_make_strings_(OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_APPLIED_SCHEMA,
                                                           values, value_count);
}

static inline ovstage_population_prim_predicate_t ovstage_population_prim_predicate_has_applied_schema_in_namespace(
    const ovx_string_t* values, size_t value_count)
{
    return ovstage_population_prim_predicate_make_strings_(
        OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_APPLIED_SCHEMA_IN_NAMESPACE, values, value_count);
}

static inline ovstage_population_prim_predicate_t ovstage_population_prim_predicate_has_path(
    const ovx_string_t* values, size_t value_count)
{
    return ovstage_population_prim_predicate_make_strings_(OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_PATH, values,
                                                           value_count);
}

static inline ovstage_population_prim_predicate_t ovstage_population_prim_predicate_is_under_path(
    const ovx_string_t* values, size_t value_count)
{
    return ovstage_population_prim_predicate_make_strings_(OVSTAGE_POPULATION_PRIM_PREDICATE_IS_UNDER_PATH, values,
                                                           value_count);
}

static inline ovstage_population_prim_predicate_t ovstage_population_prim_predicate_has_kind(
    const ovx_string_t* values, size_t value_count)
{
    return ovstage_population_prim_predicate_make_strings_(OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_KIND, values,
                                                           value_count);
}

static inline ovstage_population_prim_predicate_t ovstage_population_prim_predicate_has_purpose(
    const ovx_string_t* values, size_t value_count)
{
    return ovstage_population_prim_predicate_make_strings_(OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_PURPOSE, values,
                                                           value_count);
}

static inline ovstage_population_prim_predicate_t ovstage_population_prim_predicate_has_metadata(
    const ovx_string_t* paths, size_t path_count)
{
    return ovstage_population_prim_predicate_make_strings_(OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_METADATA, paths,
                                                           path_count);
}

/* ---- Constructors: property predicates ------------------------------------------------------- */

static inline ovstage_population_property_predicate_t ovstage_population_property_predicate_make_strings_(
    ovstage_population_property_predicate_kind_t kind, const ovx_string_t* values, size_t value_count)
{
    ovstage_population_property_predicate_t p;
    p.kind = kind;
    p.values.strings = values;
    p.value_count = value_count;
    return p;
}

static inline ovstage_population_property_predicate_t ovstage_population_property_predicate_make_subs_(
    ovstage_population_property_predicate_kind_t kind, const ovstage_population_property_predicate_t* subs,
    size_t count)
{
    ovstage_population_property_predicate_t p;
    p.kind = kind;
    p.values.subpredicates = subs;
    p.value_count = count;
    return p;
}

static inline ovstage_population_property_predicate_t ovstage_population_property_predicate_none(void)
{
    return ovstage_population_property_predicate_make_strings_(OVSTAGE_POPULATION_PROPERTY_PREDICATE_NONE, NULL, 0);
}

static inline ovstage_population_property_predicate_t ovstage_population_property_predicate_all(void)
{
    return ovstage_population_property_predicate_make_strings_(OVSTAGE_POPULATION_PROPERTY_PREDICATE_ALL, NULL, 0);
}

static inline ovstage_population_property_predicate_t ovstage_population_property_predicate_and(
    const ovstage_population_property_predicate_t* subpredicates, size_t value_count)
{
    return ovstage_population_property_predicate_make_subs_(OVSTAGE_POPULATION_PROPERTY_PREDICATE_AND, subpredicates,
                                                            value_count);
}

static inline ovstage_population_property_predicate_t ovstage_population_property_predicate_or(
    const ovstage_population_property_predicate_t* subpredicates, size_t value_count)
{
    return ovstage_population_property_predicate_make_subs_(OVSTAGE_POPULATION_PROPERTY_PREDICATE_OR, subpredicates,
                                                            value_count);
}

static inline ovstage_population_property_predicate_t ovstage_population_property_predicate_not(
    const ovstage_population_property_predicate_t* subpredicate)
{
    return ovstage_population_property_predicate_make_subs_(OVSTAGE_POPULATION_PROPERTY_PREDICATE_NOT, subpredicate, 1);
}

static inline ovstage_population_property_predicate_t ovstage_population_property_predicate_declared_by_schema(
    const ovx_string_t* values, size_t value_count)
{
    return ovstage_population_property_predicate_make_strings_(
        OVSTAGE_POPULATION_PROPERTY_PREDICATE_DECLARED_BY_SCHEMA, values, value_count);
}

static inline ovstage_population_property_predicate_t ovstage_population_property_predicate_has_name(
    const ovx_string_t* values, size_t value_count)
{
    return ovstage_population_property_predicate_make_strings_(OVSTAGE_POPULATION_PROPERTY_PREDICATE_HAS_NAME, values,
                                                               value_count);
}

static inline ovstage_population_property_predicate_t ovstage_population_property_predicate_in_namespace(
    const ovx_string_t* values, size_t value_count)
{
    return ovstage_population_property_predicate_make_strings_(OVSTAGE_POPULATION_PROPERTY_PREDICATE_IN_NAMESPACE,
                                                               values, value_count);
}

static inline ovstage_population_property_predicate_t ovstage_population_property_predicate_has_metadata(
    const ovx_string_t* paths, size_t path_count)
{
    return ovstage_population_property_predicate_make_strings_(OVSTAGE_POPULATION_PROPERTY_PREDICATE_HAS_METADATA,
                                                               paths, path_count);
}

static inline ovstage_population_property_predicate_t ovstage_population_property_predicate_is_attribute(void)
{
    return ovstage_population_property_predicate_make_strings_(OVSTAGE_POPULATION_PROPERTY_PREDICATE_IS_ATTRIBUTE,
                                                               NULL, 0);
}

static inline ovstage_population_property_predicate_t ovstage_population_property_predicate_is_relationship(void)
{
    return ovstage_population_property_predicate_make_strings_(OVSTAGE_POPULATION_PROPERTY_PREDICATE_IS_RELATIONSHIP,
                                                               NULL, 0);
}

static inline ovstage_population_property_predicate_t ovstage_population_property_predicate_is_custom(void)
{
    return ovstage_population_property_predicate_make_strings_(OVSTAGE_POPULATION_PROPERTY_PREDICATE_IS_CUSTOM, NULL,
                                                               0);
}

static inline ovstage_population_property_predicate_t ovstage_population_property_predicate_is_authored(void)
{
    return ovstage_population_property_predicate_make_strings_(OVSTAGE_POPULATION_PROPERTY_PREDICATE_IS_AUTHORED,
                                                               NULL, 0);
}

#ifdef __cplusplus
}
#endif

#endif /* OVSTAGE_POPULATION_PREDICATE_H */
