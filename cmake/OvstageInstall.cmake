# Installation: headers, libovstage (shared and static), ovstage.pc, and a CMake package config.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(TARGETS ovstage ovstage_static ovstage_headers ovstage_defaults
        EXPORT ovstageTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT ovstageTargets NAMESPACE ovstage:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ovstage)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ovstageConfig.cmake.in
  ${PROJECT_BINARY_DIR}/ovstageConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ovstage
  PATH_VARS CMAKE_INSTALL_LIBDIR CMAKE_INSTALL_INCLUDEDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ovstageConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ovstageConfig.cmake ${PROJECT_BINARY_DIR}/ovstageConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ovstage)
# DLPack (headers only) is a dependency of the public headers. Debian's libdlpack-dev ships no
# pkg-config module, so ovstage.pc declares it by its include directory (dlpack_includedir, always
# in Cflags; pkg-config drops it from the output when it is a system directory such as /usr/include);
# where a dlpack.pc exists, ovstage.pc requires it instead.
pkg_check_modules(OVSTAGE_PC_DLPACK QUIET dlpack)
if(OVSTAGE_PC_DLPACK_FOUND)
  set(OVSTAGE_PC_REQUIRES "Requires: dlpack")
else()
  set(OVSTAGE_PC_REQUIRES "# Requires: (DLPack has no pkg-config module here: see dlpack_includedir)")
endif()
# hwloc's private libraries, for static links of libovstage.a: hwloc.pc lists what hwloc's own
# archive needs (-ludev among them on Debian), but a static link of ovstage links hwloc's shared
# library unless only its archive exists. Keep each -l<name> only if lib<name> can be linked here
# (a .so or .a in the linker's path), so that `pkg-config --static` never names a library that is
# not installed (libudev1 ships only libudev.so.1, not the libudev.so a link needs).
set(OVSTAGE_PC_LIBS_PRIVATE "")
foreach(_flag ${HWLOC_STATIC_LDFLAGS})
  if(_flag MATCHES "^-l(.+)$")
    set(_lib ${CMAKE_MATCH_1})
    unset(_found)
    find_library(_found NAMES ${_lib} HINTS ${HWLOC_STATIC_LIBRARY_DIRS} NO_CACHE)
    if(_found)
      list(APPEND OVSTAGE_PC_LIBS_PRIVATE "${_flag}")
    else()
      message(STATUS "ovstage.pc: leaving ${_flag} out of Libs.private (lib${_lib} is not installed for linking)")
    endif()
  elseif(_flag MATCHES "^-L")
    list(APPEND OVSTAGE_PC_LIBS_PRIVATE "${_flag}")
  endif()
endforeach()
# The CUDA backend's static runtime (the shared library has it inside; a static link needs it).
if(OVSTAGE_HAVE_CUDA)
  list(APPEND OVSTAGE_PC_LIBS_PRIVATE "-L${CUDAToolkit_LIBRARY_DIR}" "-lcudart_static" "-ldl" "-lrt")
endif()
list(APPEND OVSTAGE_PC_LIBS_PRIVATE "-lpthread")
list(REMOVE_DUPLICATES OVSTAGE_PC_LIBS_PRIVATE)
string(REPLACE ";" " " OVSTAGE_PC_LIBS_PRIVATE "${OVSTAGE_PC_LIBS_PRIVATE}")
# ${pcfiledir} is <prefix>/<libdir>/pkgconfig: one ".." per component leads back to the prefix.
string(REPLACE "/" ";" _pc_parts "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
set(OVSTAGE_PC_UP "")
foreach(_p ${_pc_parts})
  string(APPEND OVSTAGE_PC_UP "../")
endforeach()
string(REGEX REPLACE "/$" "" OVSTAGE_PC_UP "${OVSTAGE_PC_UP}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/ovstage.pc.in ${PROJECT_BINARY_DIR}/ovstage.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ovstage.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# libovstage-dynamic.so: the name NVIDIA's Python loader (and other bindings written for 0.2.1)
# opens. A link to the same library, in the build tree (beside libovstage.so) and installed.
add_custom_command(TARGET ovstage POST_BUILD
  COMMAND ${CMAKE_COMMAND} -E create_symlink $<TARGET_FILE_NAME:ovstage>
          $<TARGET_FILE_DIR:ovstage>/libovstage-dynamic.so
  VERBATIM)
install(CODE "
  set(_dir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}\")
  message(STATUS \"Installing: \${_dir}/libovstage-dynamic.so -> $<TARGET_FILE_NAME:ovstage>\")
  file(CREATE_LINK $<TARGET_FILE_NAME:ovstage> \"\${_dir}/libovstage-dynamic.so\" SYMBOLIC)
")
