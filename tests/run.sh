#!/usr/bin/env bash
# Run the unit tests (cmocka, TAP output) and the bats suites, and end with
# one line "N passed, N failed".  Exit status 1 if anything failed.
#   tests/run.sh [unit|bats|all]
# TEST_JOBS (default 2) programs and bats files run at once; each writes
# its own log, and the report is printed in the same order whatever the
# order they finish in.  $BUILD/test-logs/times has each one's seconds.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
what=${1:-all}
jobs_max=${TEST_JOBS:-2}
passed=0
failed=0
log=$BUILD/test-logs
res=$log/results
mkdir -p "$log"
rm -rf "$res"
mkdir -p "$res"

# e2fsck runs once or more for every crash state the crash tests check,
# thousands of times in all, and most of each run is its start: mapping
# and relocating five shared libraries.  e2fsprogs' statically linked
# build (Debian's e2fsck-static) starts in half the time and is the same
# program: where it is installed and says it is the same version as the
# e2fsck installed, the tests find it first in PATH under that name.
e2fsck_static() {
	local s d=$BUILD/test-path
	for s in /usr/sbin/e2fsck.static /sbin/e2fsck.static; do
		[ -x "$s" ] || continue
		[ "$("$s" -V 2>&1)" = "$(PATH=/usr/sbin:/sbin:$PATH e2fsck -V 2>&1)" ] || return 0
		mkdir -p "$d" && ln -sfn "$s" "$d/e2fsck" || return 0
		PATH=$PWD/$d:$PATH
		return 0
	done
}
e2fsck_static

# Scratch files (crash states and their repairs, image copies) go to a
# directory of this run's own on a tmpfs where there is one (E2T_TMPDIR:
# the C tests' e2t_tmpdir() and crash_check use it), removed when the run
# ends.  A run killed before its end cannot remove its own; the next run
# removes every such directory whose runner no longer lives, so a tmpfs,
# which is memory, does not fill up with them.
scratch_root=${TMPDIR:-/tmp}
[ -d /dev/shm ] && [ -w /dev/shm ] && scratch_root=/dev/shm
for d in "$scratch_root"/fstitch-check.*; do
	[ -d "$d" ] || continue
	kill -0 "${d##*.}" 2>/dev/null || rm -rf "$d"
done
E2T_TMPDIR=$scratch_root/fstitch-check.$$
mkdir -p "$E2T_TMPDIR" || exit 1
export E2T_TMPDIR
trap 'rm -rf "$E2T_TMPDIR"' EXIT

# Unit programs run in parts, each part an item of its own with its name
# as the program's argument (see the program's main): one program of
# several minutes would keep one of the two jobs busy long after the other
# has run out of items.
declare -A unit_parts=([test_e2_crash]="ops rounds mixed controls")

# Started first, longest first (minutes each where most take seconds):
# with one of them last, it would run on alone at the end.
slow_first=(journal-crash.bats test_e2_crash.mixed fstitch-mount.bats
	rename-order.bats test_e2_crash.rounds test_e2_crash.ops test_e2_crash.controls
	test_engine_discard mount-safety.bats examples.bats asan-test_jbd2 nbd.bats
	pgrun.bats e2-interop.bats completions.bats test_jbd2 asan-test_e2_corrupt)

# tap_counts FILE: print the file's numbers of "ok" and "not ok" lines.
tap_counts() {
	echo "$(grep -cE '^ok ' "$1") $(grep -cE '^not ok ' "$1")"
}

# Each run_* writes the item's log and then, all at once, its result file
# $res/ID: the line "PASSED FAILED", then the report to print for it.

# write_result ID PASSED FAILED LABEL LOG LINES FILTER...: write the item's
# result file: "ok   LABEL", or "FAIL LABEL (log: LOG)" and the first LINES
# lines of the log that FILTER (a grep command, given the log) keeps.
write_result() {
	local id=$1 p=$2 f=$3 label=$4 out=$5 n=$6
	shift 6
	{
		echo "$p $f"
		if [ "$f" -ne 0 ]; then
			echo "FAIL $label (log: $out)"
			"$@" "$out" | head -"$n"
		else
			echo "ok   $label"
		fi
	} >"$res/$id.new" && mv "$res/$id.new" "$res/$id"
}

# run_unit ID BINARY [PART]
run_unit() {
	local id=$1 t=$2 name rc p f out
	name=${id#unit:}
	out=$log/$name.tap
	CMOCKA_MESSAGE_OUTPUT=TAP "$t" ${3:+"$3"} >"$out" 2>&1 </dev/null
	rc=$?
	read -r p f < <(tap_counts "$out")
	# A crash or a non-zero exit with no failing test counted is a failure
	# of its own, so that a dying binary can never look like a pass.
	if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1
		echo "not ok - $name exited with status $rc" >>"$out"
	fi
	write_result "$id" "$p" "$f" "unit $name" "$out" 40 grep -E '^(not ok|#)'
}

# The fuzz targets' corpora (tests/fuzz/corpus/TARGET: seeds and every
# input that once crashed or hung), replayed once each by the targets built
# without libFuzzer, under ASan and UBSan (see FUZZ_REPLAYS in the
# Makefile).  A crash or sanitizer report exits non-zero.
# run_fuzz ID BINARY
run_fuzz() {
	local id=$1 t=$2 name rc p f out
	name=${id#fuzz:}
	out=$log/fuzz-$name.tap
	"$t" "tests/fuzz/corpus/$name" >"$out" 2>&1 </dev/null
	rc=$?
	read -r p f < <(tap_counts "$out")
	if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1
		echo "not ok - fuzz-$name replay exited with status $rc" >>"$out"
	fi
	write_result "$id" "$p" "$f" "unit fuzz-$name" "$out" 40 grep -vE '^(ok |# tests/)'
}

# Each bats file runs in a mount namespace of its own (where unshare may
# make one: root).  A namespace starts with a copy of every mount of the
# one it came from, and a copy keeps a FUSE file system alive after its
# owner's umount: no FUSE_DESTROY comes, so the umount returns before the
# daemon's final flush.  The suites that make namespaces (examples.bats,
# common.bats, mount-safety.bats) run while other suites unmount and then
# read their images at once; in namespaces of their own, each copies only
# its own mounts.
# FSTITCH_RUNNER_NS names the runner's own namespace, so that common.bats
# can check that it is not the suite's.
bats_ns=()
if [ "$(id -u)" -eq 0 ] && unshare -m --propagation private true 2>/dev/null; then
	bats_ns=(unshare -m --propagation private)
	FSTITCH_RUNNER_NS=$(readlink /proc/self/ns/mnt)
	export FSTITCH_RUNNER_NS
fi

# run_bats ID FILE
run_bats() {
	local id=$1 b=$2 name p f out
	name=${id#bats:}
	out=$log/$name.tap
	FSTITCH_BUILD=$BUILD "${bats_ns[@]}" bats --tap "$b" >"$out" 2>&1 </dev/null
	read -r p f < <(tap_counts "$out")
	if ! grep -qE '^1\.\.[0-9]+' "$out"; then
		f=$((f + 1))
		echo "not ok - $name did not run" >>"$out"
	fi
	write_result "$id" "$p" "$f" "bats $name" "$out" 60 grep -vE '^ok '
}

# run_item ID: run it, and keep its wall time in seconds in $res/ID.secs
# (for $log/times).
run_item() {
	local t0=$SECONDS
	case $1 in
	unit:*) run_unit "$1" "${path[$1]}" ${part[$1]:+"${part[$1]}"} ;;
	fuzz:*) run_fuzz "$1" "${path[$1]}" ;;
	bats:*) run_bats "$1" "${path[$1]}" ;;
	esac
	echo $((SECONDS - t0)) >"$res/$1.secs"
}

# The items, in report order: ids and what each runs.
ids=()
declare -A path part
add() {
	ids+=("$1")
	path[$1]=$2
}
list_unit() {
	local t name p
	# $BUILD/asan/tests holds the tests that check also runs under the
	# sanitizers (see CHECK_ASAN in the Makefile).
	for t in "$BUILD"/tests/test_* "$BUILD"/asan/tests/test_*; do
		[ -x "$t" ] || continue
		name=${t##*/}
		case $t in "$BUILD"/asan/*) name=asan-$name ;; esac
		if [ -n "${unit_parts[$name]:-}" ]; then
			for p in ${unit_parts[$name]}; do
				add "unit:$name.$p" "$t"
				part[unit:$name.$p]=$p
			done
		else
			add "unit:$name" "$t"
		fi
	done
	for t in "$BUILD"/asan/tests/fuzz/replay_*; do
		[ -x "$t" ] || continue
		add "fuzz:${t##*/replay_}" "$t"
	done
}
list_bats() {
	local b
	for b in tests/*.bats; do
		[ -e "$b" ] || continue
		add "bats:${b##*/}" "$b"
	done
}

case $what in
unit) list_unit ;;
bats) list_bats ;;
all) list_unit; list_bats ;;
*) echo "usage: tests/run.sh [unit|bats|all]" >&2; exit 64 ;;
esac

# Start order: the slow ones first, then the report order.
declare -A early
start=()
for s in "${slow_first[@]}"; do
	for id in "${ids[@]}"; do
		if [ "${id#*:}" = "$s" ]; then
			start+=("$id")
			early[$id]=1
		fi
	done
done
for id in "${ids[@]}"; do
	[ -n "${early[$id]:-}" ] || start+=("$id")
done

# print_done [all]: report, in order, every item from the next one to
# report up to the first that has not finished; with "all", every item
# left, one with no result (its runner itself died) as a failure.
next=0
print_done() {
	local id p f
	while [ $next -lt ${#ids[@]} ]; do
		id=${ids[$next]}
		if [ -e "$res/$id" ]; then
			{
				read -r p f
				passed=$((passed + p))
				failed=$((failed + f))
				cat
			} <"$res/$id"
		elif [ "${1:-}" = all ]; then
			echo "FAIL ${id%%:*} ${id#*:} left no result"
			failed=$((failed + 1))
		else
			break
		fi
		next=$((next + 1))
	done
}

# (wait -n returns once for each item that ends)
running=0
for id in "${start[@]}"; do
	if [ $running -ge "$jobs_max" ]; then
		wait -n
		running=$((running - 1))
		print_done
	fi
	run_item "$id" &
	running=$((running + 1))
done
while [ $running -gt 0 ]; do
	wait -n
	running=$((running - 1))
	print_done
done
wait
print_done all
for id in "${ids[@]}"; do
	echo "$id $(cat "$res/$id.secs" 2>/dev/null)"
done >"$log/times"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
