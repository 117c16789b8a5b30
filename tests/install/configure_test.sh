#!/usr/bin/env bash
# Configure rejects invalid OVSTAGE_CUDA and OVSTAGE_SANITIZE values with a message naming the value,
# and accepts the valid ones (checked up to the option validation only: each configure runs in a
# scratch build directory that is thrown away).
set -uo pipefail
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
try() { # want(ok|fail) needle args...
	local want=$1 needle=$2
	shift 2
	n=$((n + 1))
	local out
	out=$(cmake -S "$src" -B "$tmp/b$n" -DOVSTAGE_BUILD_TESTS=OFF -DOVSTAGE_BUILD_BENCH=OFF "$@" 2>&1)
	local rc=$?
	if [ "$want" = fail ]; then
		[ $rc -ne 0 ] || { echo "configure accepted $*" >&2; exit 1; }
		grep -qF -- "$needle" <<<"$out" || { echo "configure $* failed without naming '$needle':" >&2; echo "$out" >&2; exit 1; }
	else
		[ $rc -eq 0 ] || { echo "configure rejected $*:" >&2; echo "$out" >&2; exit 1; }
	fi
}
try fail "OVSTAGE_CUDA='maybe'" -DOVSTAGE_CUDA=maybe
try fail "OVSTAGE_CUDA='YES PLEASE'" "-DOVSTAGE_CUDA=YES PLEASE"
try fail "'adress' is not a supported sanitizer" -DOVSTAGE_SANITIZE=adress
try fail "thread cannot be combined" -DOVSTAGE_SANITIZE=thread,address
try fail "has an empty item" "-DOVSTAGE_SANITIZE=,"
try fail "has an empty item" -DOVSTAGE_SANITIZE=address,
try ok "" -DOVSTAGE_CUDA=off
try ok "" -DOVSTAGE_CUDA=AUTO -DOVSTAGE_SANITIZE=address,undefined
echo "configure test: $n option values checked"
