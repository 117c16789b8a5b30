#!/usr/bin/env bash
# Model-checks the snapshot grace period (verify/grace.pml) with spin: an exhaustive search of the
# real protocol in several configurations (no violation allowed, search not truncated), then each
# negative variant (a violation of the expected property required). Exits non-zero otherwise.
# Usage: verify/run.sh [--deep]   (--deep adds 3 readers x 3 seals and an SC-only run)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
model=$here/grace.pml

deep=0
case "${1:-}" in
"") ;;
--deep) deep=1 ;;
*) echo "run.sh: usage: run.sh [--deep]" >&2; exit 2 ;;
esac

for tool in spin cc; do
	command -v "$tool" >/dev/null || { echo "run.sh: $tool not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
done

# GRACE_KEEP=1 keeps the work folder (pan, trails: replay one with spin -t -p -DDEFINES grace.pml).
work=$(mktemp -d "${TMPDIR:-/tmp}/grace-model.XXXXXX")
if [ -n "${GRACE_KEEP:-}" ]; then
	echo "run.sh: work folder $work"
else
	trap 'rm -rf "$work"' EXIT
fi

# Bounds: a search deeper than DEPTH, or one needing more than MEMLIM MiB, fails (it would be
# truncated). COLLAPSE compresses stored states; SAFETY: assertions and end states only.
DEPTH=1000000
MEMLIM=1024
start=$SECONDS

# check NAME EXPECT DEFINES...: EXPECT is "none" or the property tag (P1, P2) the counterexample
# must violate. Prints one line starting with "ok" or "FAIL" (and a counterexample on failure).
check() {
	local name=$1 expect=$2
	shift 2
	local dir=$work/$name
	mkdir -p "$dir"
	cp "$model" "$dir/grace.pml"
	local t0=$SECONDS
	# The real protocol: depth-first, compressed states. A broken variant: breadth-first, so its
	# counterexample is a shortest one.
	local search=-DCOLLAPSE
	[ "$expect" = none ] || search=-DBFS
	(cd "$dir" && spin -a "$@" grace.pml >spin.log 2>&1 &&
		cc -O1 -w -DSAFETY $search -DMEMLIM=$MEMLIM -o pan pan.c >cc.log 2>&1) || {
		echo "FAIL $name: spin -a or cc failed"
		cat "$dir/spin.log" "$dir/cc.log" 2>/dev/null
		return
	}
	(cd "$dir" && ./pan -m$DEPTH -w23 -n >pan.log 2>&1) || true
	local log=$dir/pan.log
	local errors states
	errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$log" | head -1)
	states=$(awk '/states, stored/ {print $1; exit}' "$log")
	local secs=$((SECONDS - t0))
	if [ -z "$errors" ] || grep -q "max search depth too small\|reached -DMEMLIM bound\|out of memory" "$log"; then
		echo "FAIL $name ($*): search incomplete"
		tail -20 "$log"
	elif [ "$expect" = none ]; then
		if [ "$errors" -eq 0 ]; then
			echo "ok   $name ($*): no violation, $states states, ${secs}s"
		else
			echo "FAIL $name ($*): $errors violation(s); the counterexample's last steps:"
			(cd "$dir" && spin -t "$@" grace.pml >trail.txt 2>&1) || true
			sed -n '1,/text of failed assertion/p' "$dir/trail.txt" | tail -40 | sed 's/^[[:space:]]*/       /'
			fi
	else
		if [ "$errors" -eq 0 ]; then
			echo "FAIL $name ($*): the broken variant passed (expected a $expect violation)"
				return
		fi
		# Replay the trail: the failed assertion's line carries its property tag.
		local line tag
		(cd "$dir" && spin -t "$@" grace.pml >trail.txt 2>&1) || true
		line=$(sed -n 's/.*grace\.pml:\([0-9]*\), Error: assertion violated.*/\1/p' "$dir/trail.txt" | head -1)
		tag=$( [ -n "$line" ] && sed -n "${line}p" "$dir/grace.pml" | grep -o 'P[0-9]' | head -1 || true)
		if [ "$tag" = "$expect" ]; then
			echo "ok   $name ($*): caught, $expect violated at grace.pml:$line after $states states, ${secs}s"
			# the counterexample, as the model narrates it
			sed -n '1,/text of failed assertion/p' "$dir/trail.txt" | sed 's/^[[:space:]]*/       /'
		else
			echo "FAIL $name ($*): expected a $expect violation, got '${tag:-?}' (grace.pml:${line:-?})"
			sed -n '1,/text of failed assertion/p' "$dir/trail.txt" | sed 's/^[[:space:]]*/       /'
			fi
	fi
}

# run NAME EXPECT DEFINES...: check in the background, at most $jobs at a time.
jobs=${GRACE_JOBS:-$(nproc 2>/dev/null || echo 2)}
names=()
run() {
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
		wait -n || true
	done
	names+=("$1")
	mkdir -p "$work/$1"
	check "$@" >"$work/$1.result" 2>&1 &
}

# The protocol, with the C11 over-approximation of the reader's acquire loads (W1-W3); largest
# first. (Its SC executions are a subset: the SC run is only in --deep, as a cross-check.)
if [ $deep -eq 1 ]; then
	run protocol-3r-3s       none -DNR=3 -DSEALS=3
	run protocol-sc-2r-4s    none -DNR=2 -DSEALS=4 -DSC_ONLY
fi
run protocol-3r-2s           none -DNR=3 -DSEALS=2
run protocol-2r-4s           none -DNR=2 -DSEALS=4
run protocol-2r-3s-keep1     none -DNR=2 -DSEALS=3 -DKEEP=1
# Broken variants: each must be caught.
run no-recheck               P1 -DNEG_NO_RECHECK
run check-before-flip        P1 -DNEG_CHECK_BEFORE_FLIP
run publish-early            P2 -DNEG_PUBLISH_EARLY
run pin-after-leave          P1 -DNEG_PIN_AFTER_LEAVE
run cut-after-flip           P1 -DNEG_CUT_AFTER_FLIP
wait

failed=0
for n in "${names[@]}"; do
	cat "$work/$n.result"
	grep -q '^ok ' "$work/$n.result" || failed=1
done
if [ $failed -ne 0 ]; then
	echo "run.sh: FAILED ($((SECONDS - start))s)"
	exit 1
fi
echo "run.sh: the grace-period model holds and every broken variant is caught ($((SECONDS - start))s)"
