# Finds the Debian-packaged dependencies. Each failure names the package that provides it;
# scripts/install-deps.sh installs all of them.
find_package(PkgConfig)
if(NOT PKG_CONFIG_FOUND)
  message(FATAL_ERROR "pkg-config not found: install it with scripts/install-deps.sh (Debian package pkg-config)")
endif()

function(ovstage_require_pkg name module debian)
  pkg_check_modules(${name} IMPORTED_TARGET ${module})
  if(NOT ${name}_FOUND)
    message(FATAL_ERROR "${module} not found through pkg-config: install the Debian package '${debian}' "
                        "(scripts/install-deps.sh installs every dependency)")
  endif()
endfunction()

# Concurrency Kit is a project dependency (design brief), but no module links it today: the hot
# paths use our own C11 <stdatomic.h> code so that ThreadSanitizer sees every synchronisation (ck_pr
# is inline assembly), and ck_epoch's per-thread records did not fit API calls from arbitrary
# threads (docs/store.md explains the grace-period scheme used instead).
ovstage_require_pkg(CK ck libck-dev)
ovstage_require_pkg(HWLOC hwloc libhwloc-dev)
find_package(Threads REQUIRED)

find_path(DLPACK_INCLUDE_DIR dlpack/dlpack.h)
if(NOT DLPACK_INCLUDE_DIR)
  message(FATAL_ERROR "dlpack/dlpack.h not found: install the Debian package 'libdlpack-dev'")
endif()

if(OVSTAGE_BUILD_TESTS)
  ovstage_require_pkg(CHECK check "check libsubunit-dev")
endif()

if(OVSTAGE_BUILD_BENCH)
  find_package(TBB CONFIG QUIET)
  if(NOT TBB_FOUND)
    message(FATAL_ERROR "oneTBB not found (benchmark peer): install 'libtbb-dev', or configure with -DOVSTAGE_BUILD_BENCH=OFF")
  endif()
  find_package(OpenMP COMPONENTS C CXX)
  if(NOT OpenMP_C_FOUND)
    message(FATAL_ERROR "OpenMP not found (benchmark peer): gcc ships it (libgomp); or -DOVSTAGE_BUILD_BENCH=OFF")
  endif()
endif()

# CUDA: the GPU backend (gpu/) is built wherever nvcc exists; the jobs layer does not need it.
set(OVSTAGE_HAVE_CUDA OFF)
if(NOT OVSTAGE_CUDA STREQUAL "OFF")
  find_program(OVSTAGE_NVCC nvcc HINTS /usr/local/cuda/bin ENV CUDA_HOME PATH_SUFFIXES bin)
  if(OVSTAGE_NVCC)
    set(CMAKE_CUDA_COMPILER ${OVSTAGE_NVCC})
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # Ampere, Hopper (the H200), Blackwell, and PTX of the newest for JIT on later parts.
      set(CMAKE_CUDA_ARCHITECTURES 80-real 90-real 100-real 120)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(OVSTAGE_HAVE_CUDA ON)
    message(STATUS "ovstage: building the CUDA backend with ${OVSTAGE_NVCC} (CUDA ${CUDAToolkit_VERSION}, "
                   "architectures ${CMAKE_CUDA_ARCHITECTURES}); it runs CPU-only where no GPU or driver exists")
  elseif(OVSTAGE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "OVSTAGE_CUDA=ON but nvcc was not found (looked in PATH, /usr/local/cuda/bin, $CUDA_HOME/bin)")
  else()
    message(STATUS "ovstage: no CUDA toolkit found; building CPU-only (the CUDA backend is not built)")
  endif()
endif()
