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
  ${PROJECT_BINARY_DIR}/ovstageConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ovstage)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ovstageConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ovstageConfig.cmake ${PROJECT_BINARY_DIR}/ovstageConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ovstage)
# The system DLPack header is found by the compiler's default path on Debian (/usr/include); if it
# lives elsewhere, name it in the .pc file.
if(DLPACK_INCLUDE_DIR STREQUAL "/usr/include")
  set(OVSTAGE_PC_DLPACK_CFLAGS "")
else()
  set(OVSTAGE_PC_DLPACK_CFLAGS "-I${DLPACK_INCLUDE_DIR}")
endif()
# ${pcfiledir} is <prefix>/<libdir>/pkgconfig: one ".." per component leads back to the prefix.
string(REPLACE "/" ";" _pc_parts "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
set(OVSTAGE_PC_UP "")
foreach(_p ${_pc_parts})
  string(APPEND OVSTAGE_PC_UP "../")
endforeach()
string(REGEX REPLACE "/$" "" OVSTAGE_PC_UP "${OVSTAGE_PC_UP}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/ovstage.pc.in ${PROJECT_BINARY_DIR}/ovstage.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ovstage.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
