#!/usr/bin/env bash
# The words agree with the build: every package scripts/install-deps.sh installs is in the README's
# package table and vice versa, and the documents that name the library's optimisation level name
# the one the Release build uses (-O3, CMake's default for Release).
set -euo pipefail
src=$1
script=$(sed -n '/^packages=(/,/^)/p' "$src/scripts/install-deps.sh" | sed 's/#.*//' | tr -s ' \t()' '\n' |
	grep -vE '^(packages=|)$' | sort -u)
readme=$(sed -n '/^| packages | for |/,/^$/p' "$src/README.md" | awk -F'|' '{print $2}' | grep -o '`[^`]*`' |
	tr -d '`' | sort -u)
if [ "$script" != "$readme" ]; then
	echo "README package table and scripts/install-deps.sh differ:" >&2
	diff <(echo "$script") <(echo "$readme") >&2 || true
	exit 1
fi
grep -q -- '-O3' "$src/scripts/test.sh" || { echo "scripts/test.sh does not say -O3" >&2; exit 1; }
if grep -n -- 'release .*(-O2)' "$src/scripts/test.sh"; then echo "scripts/test.sh says the release build is -O2" >&2; exit 1; fi
if grep -n -- 'gcc 12.2.0 `-O2`' "$src/docs/performance.md"; then echo "performance.md says the library is -O2" >&2; exit 1; fi
echo "docs test: $(echo "$script" | wc -l) packages agree; optimisation level named as -O3"
