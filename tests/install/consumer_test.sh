#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds the seed example outside the tree, once with
# `pkg-config --cflags --libs ovstage` alone and once with find_package(ovstage); runs both.
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
cc -std=c11 "$src/examples/minimal.c" -I"$src/examples" $(pkg-config --cflags --libs ovstage) -o "$tmp/m_pc"
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/m_pc" | grep -q "read back ordinal 1: 1.0 2.0 3.0"
mkdir "$tmp/proj"
cp "$src/examples/minimal.c" "$src/examples/example_utils.h" "$tmp/proj/"
cat > "$tmp/proj/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(consumer C)
find_package(ovstage REQUIRED)
add_executable(m_shared minimal.c)
target_link_libraries(m_shared PRIVATE ovstage::ovstage)
add_executable(m_static minimal.c)
target_link_libraries(m_static PRIVATE ovstage::ovstage_static)
CM
cmake -S "$tmp/proj" -B "$tmp/proj/b" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/proj/b" >/dev/null
"$tmp/proj/b/m_shared" | grep -q "read back ordinal 1: 1.0 2.0 3.0"
"$tmp/proj/b/m_static" | grep -q "read back ordinal 1: 1.0 2.0 3.0"
echo "install consumer test: pkg-config, find_package shared and static all ran the seed example"
