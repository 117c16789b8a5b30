/*
 * ovstage/ovstage_instancing.h — queries over USD scene-graph instancing.
 *
 * Contract: synchronous, over the latest committed data. Returned path lists are fresh (reference
 * count 1, owned by the caller, who releases them through the path dictionary) and may be empty.
 * Prototype roots are named /__Prototype_<id>; the id is not stable across runs. Without USD
 * population support these functions return OVSTAGE_ERROR_NOT_SUPPORTED.
 */
#ifndef OVSTAGE_INSTANCING_H
#define OVSTAGE_INSTANCING_H

#include "ovstage_api/ovstage_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The instance roots that instantiate `prototype_root`. */
OVSTAGE_API ovstage_api_status_t ovstage_instancing_get_instance_roots(ovstage_instance_t* instance,
                                                                       ovx_primpath_t prototype_root,
                                                                       ovx_primpath_list_t* out_instance_roots);

/** The prototype root of an instance root; OVSTAGE_ERROR_NOT_FOUND if it is not one. */
OVSTAGE_API ovstage_api_status_t ovstage_instancing_get_prototype_root(ovstage_instance_t* instance,
                                                                       ovx_primpath_t instance_root,
                                                                       ovx_primpath_t* out_prototype_root);

/** All prototype roots. */
OVSTAGE_API ovstage_api_status_t ovstage_instancing_get_prototype_roots(ovstage_instance_t* instance,
                                                                        ovx_primpath_list_t* out_prototype_roots);

#ifdef __cplusplus
}
#endif

#endif /* OVSTAGE_INSTANCING_H */
