# Validates the string-valued options before anything depends on them: a mistyped value fails the
# configure with a message naming it and the accepted values, instead of being silently ignored.
set_property(CACHE OVSTAGE_CUDA PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${OVSTAGE_CUDA}" _ovstage_cuda)
if(NOT _ovstage_cuda MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "OVSTAGE_CUDA='${OVSTAGE_CUDA}' is not a valid value: use AUTO (build the CUDA "
                      "backend when nvcc is found), ON (require it) or OFF")
endif()
set(OVSTAGE_CUDA "${_ovstage_cuda}" CACHE STRING "CUDA backend: AUTO (use nvcc when found), ON (require it), OFF" FORCE)

# OVSTAGE_SANITIZE: empty, or a comma-separated list of sanitizers the compiler's -fsanitize= takes
# that our builds support; ThreadSanitizer cannot be combined with AddressSanitizer or LeakSanitizer.
set_property(CACHE OVSTAGE_SANITIZE PROPERTY STRINGS "" "address,undefined" "address" "undefined" "thread")
if(NOT OVSTAGE_SANITIZE STREQUAL "")
  if(OVSTAGE_SANITIZE MATCHES "(^,|,,|,$)")
    message(FATAL_ERROR "OVSTAGE_SANITIZE='${OVSTAGE_SANITIZE}' has an empty item (a stray comma)")
  endif()
  string(REPLACE "," ";" _ovstage_san "${OVSTAGE_SANITIZE}")
  foreach(_s ${_ovstage_san})
    if(NOT _s MATCHES "^(address|undefined|thread|leak)$")
      message(FATAL_ERROR "OVSTAGE_SANITIZE='${OVSTAGE_SANITIZE}': '${_s}' is not a supported sanitizer "
                          "(use a comma-separated list of address, undefined, leak, or thread alone)")
    endif()
  endforeach()
  if("thread" IN_LIST _ovstage_san AND ("address" IN_LIST _ovstage_san OR "leak" IN_LIST _ovstage_san))
    message(FATAL_ERROR "OVSTAGE_SANITIZE='${OVSTAGE_SANITIZE}': thread cannot be combined with address or leak")
  endif()
endif()
