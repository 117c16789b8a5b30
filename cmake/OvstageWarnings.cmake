# Warnings and sanitizers, applied to every target of ours through ovstage_defaults().
add_library(ovstage_defaults INTERFACE)
target_compile_options(ovstage_defaults INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wstrict-aliasing=2 -Wno-unused-parameter
  $<$<COMPILE_LANGUAGE:C>:-Wstrict-prototypes -Wmissing-prototypes>)
if(OVSTAGE_WERROR)
  target_compile_options(ovstage_defaults INTERFACE -Werror)
endif()
target_compile_definitions(ovstage_defaults INTERFACE _GNU_SOURCE)

if(OVSTAGE_SANITIZE)
  # -fno-omit-frame-pointer for readable reports; -fno-sanitize-recover so that any UBSan finding
  # fails the test instead of scrolling past.
  set(_san -fsanitize=${OVSTAGE_SANITIZE} -fno-omit-frame-pointer)
  if(OVSTAGE_SANITIZE MATCHES "undefined")
    list(APPEND _san -fno-sanitize-recover=all)
  endif()
  target_compile_options(ovstage_defaults INTERFACE ${_san} -g)
  target_link_options(ovstage_defaults INTERFACE ${_san})
  if(OVSTAGE_SANITIZE MATCHES "thread")
    target_compile_definitions(ovstage_defaults INTERFACE OVSTAGE_TSAN=1)
  endif()
endif()
