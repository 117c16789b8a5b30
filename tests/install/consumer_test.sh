#!/usr/bin/env bash
# Installs the build into a temporary prefix and uses it as a new user would, from outside the tree:
#  1. pkg-config, shared: `pkg-config --cflags --libs ovstage` builds the seed example; it runs with
#     an rpath onto the prefix's libdir (no LD_LIBRARY_PATH), and ovstage.pc declares DLPack.
#  2. pkg-config, static: with only libovstage.a in the prefix, `pkg-config --static --libs ovstage`
#     links (no library that is not installed, such as -ludev from hwloc's private list) and the
#     program does not load libovstage.so.
#  3. find_package(ovstage): shared and static targets; a consumer that sets its INSTALL_RPATH from
#     OVSTAGE_BINARY_DIR (what NVIDIA's examples/c/cmake helper reads) is installed and its
#     installed binary runs from anywhere without LD_LIBRARY_PATH.
#  4. libovstage-dynamic.so (the name NVIDIA's Python loader opens) is a link to the same library
#     and loads.
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset LD_LIBRARY_PATH
expect="read back ordinal 1: 1.0 2.0 3.0"
fail() { echo "install consumer test: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
libdir=$(ls -d "$tmp/prefix"/lib*/pkgconfig | head -1)
libdir=${libdir%/pkgconfig}
export PKG_CONFIG_PATH="$libdir/pkgconfig"

# 1. pkg-config, shared, with an rpath
grep -q dlpack "$libdir/pkgconfig/ovstage.pc" || fail "ovstage.pc does not declare the DLPack dependency"
cc -std=c11 "$src/examples/minimal.c" -I"$src/examples" $(pkg-config --cflags --libs ovstage) \
	-Wl,-rpath,"$(pkg-config --variable=libdir ovstage)" -o "$tmp/m_pc"
"$tmp/m_pc" | grep -q "$expect" || fail "pkg-config shared build did not run with its rpath"

# 2. pkg-config, static (only the archive installed, as a static-only package would be)
cp -a "$tmp/prefix" "$tmp/static"
rm -f "$tmp/static/${libdir#"$tmp/prefix/"}"/libovstage*.so*
static_libs=$(PKG_CONFIG_PATH="$tmp/static/${libdir#"$tmp/prefix/"}/pkgconfig" pkg-config --static --libs ovstage)
cc -std=c11 "$src/examples/minimal.c" -I"$src/examples" \
	$(PKG_CONFIG_PATH="$tmp/static/${libdir#"$tmp/prefix/"}/pkgconfig" pkg-config --cflags ovstage) \
	$static_libs -o "$tmp/m_static_pc" 2>"$tmp/static.log" ||
	{ cat "$tmp/static.log" >&2; fail "static link with: $static_libs"; }
"$tmp/m_static_pc" | grep -q "$expect" || fail "pkg-config static build did not run"
if ldd "$tmp/m_static_pc" | grep -q libovstage; then fail "the static build loads libovstage.so"; fi

# 3. find_package, with the install rpath taken from OVSTAGE_BINARY_DIR
mkdir "$tmp/proj"
cp "$src/examples/minimal.c" "$src/examples/example_utils.h" "$tmp/proj/"
cat >"$tmp/proj/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(consumer C)
find_package(ovstage REQUIRED)
if(NOT OVSTAGE_BINARY_DIR OR NOT EXISTS "${OVSTAGE_BINARY_DIR}")
  message(FATAL_ERROR "the ovstage package does not define OVSTAGE_BINARY_DIR")
endif()
add_executable(m_shared minimal.c)
target_link_libraries(m_shared PRIVATE ovstage::ovstage)
set_target_properties(m_shared PROPERTIES BUILD_RPATH "${OVSTAGE_BINARY_DIR}" INSTALL_RPATH "${OVSTAGE_BINARY_DIR}")
add_executable(m_static minimal.c)
target_link_libraries(m_static PRIVATE ovstage::ovstage_static)
install(TARGETS m_shared m_static DESTINATION bin)
CM
cmake -S "$tmp/proj" -B "$tmp/proj/b" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/proj/b" >/dev/null
"$tmp/proj/b/m_shared" | grep -q "$expect" || fail "find_package shared build did not run"
"$tmp/proj/b/m_static" | grep -q "$expect" || fail "find_package static build did not run"
cmake --install "$tmp/proj/b" --prefix "$tmp/app" >/dev/null
(cd / && "$tmp/app/bin/m_shared") | grep -q "$expect" || fail "the installed consumer does not run without LD_LIBRARY_PATH"
readelf -d "$tmp/app/bin/m_shared" | grep -qE "R(UN)?PATH.*$libdir" || fail "the installed consumer has no rpath onto $libdir"

# 4. libovstage-dynamic.so
dyn="$libdir/libovstage-dynamic.so"
[ -L "$dyn" ] || fail "$dyn is not installed as a link"
[ "$(readlink -f "$dyn")" = "$(readlink -f "$libdir/libovstage.so")" ] || fail "$dyn is not the same library as libovstage.so"
cat >"$tmp/dl.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv)
{
	void *h = dlopen(argv[1], RTLD_NOW);
	if (!h || !dlsym(h, "ovstage_create_instance")) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	return argc > 2;
}
C
cc "$tmp/dl.c" -o "$tmp/dl" -ldl
"$tmp/dl" "$dyn" || fail "dlopen($dyn) failed"

echo "install consumer test: pkg-config shared (rpath) and static, find_package shared/static with an installed rpath, libovstage-dynamic.so: all ran the seed example"
