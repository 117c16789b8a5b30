/*
 * ovx/path_dictionary/path_dictionary.h — umbrella header of the path dictionary interface:
 * handle types, the vtable and the static inline wrappers. No ovstage header includes it; include
 * it to call the path_dictionary_* wrappers.
 */
#ifndef PATH_DICTIONARY_INTERFACE_H
#define PATH_DICTIONARY_INTERFACE_H

#include "path_dictionary_types.h"
#include "path_dictionary_vtable.h"
#include "path_dictionary_utils.h"

#endif /* PATH_DICTIONARY_INTERFACE_H */
