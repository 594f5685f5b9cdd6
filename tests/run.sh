#!/usr/bin/env bash
# Run the unit tests (cmocka, TAP output) and the bats suites, and end with
# one line "N passed, N failed". Exit status 1 if anything failed.
#   tests/run.sh [unit|bats|all]
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
what=${1:-all}
passed=0
failed=0
log=$BUILD/test-logs
mkdir -p "$log"

# count_tap FILE: add the file's "ok"/"not ok" lines to the totals.
count_tap() {
	local p f
	p=$(grep -cE '^ok ' "$1")
	f=$(grep -cE '^not ok ' "$1")
	passed=$((passed + p))
	failed=$((failed + f))
}

run_unit() {
	local t name rc f0
	# $BUILD/asan/tests holds the tests that check also runs under the
	# sanitizers (see CHECK_ASAN in the Makefile).
	for t in "$BUILD"/tests/test_* "$BUILD"/asan/tests/test_*; do
		[ -x "$t" ] || continue
		name=${t##*/}
		case $t in "$BUILD"/asan/*) name=asan-$name ;; esac
		f0=$failed
		CMOCKA_MESSAGE_OUTPUT=TAP "$t" >"$log/$name.tap" 2>&1
		rc=$?
		count_tap "$log/$name.tap"
		# A crash or a non-zero exit with no failing test counted is a failure
		# of its own, so that a dying binary can never look like a pass.
		if [ $rc -ne 0 ] && [ $failed -eq $f0 ]; then
			failed=$((failed + 1))
			echo "not ok - $name exited with status $rc" >>"$log/$name.tap"
		fi
		if [ $failed -ne $f0 ]; then
			echo "FAIL unit $name (log: $log/$name.tap)"
			grep -E '^(not ok|#)' "$log/$name.tap" | head -40
		else
			echo "ok   unit $name"
		fi
	done
}

# The fuzz targets' corpora (tests/fuzz/corpus/TARGET: seeds and every
# input that once crashed or hung), replayed once each by the targets built
# without libFuzzer, under ASan and UBSan (see FUZZ_REPLAYS in the
# Makefile).  A crash or sanitizer report exits non-zero.
run_fuzz_replay() {
	local t name rc f0
	for t in "$BUILD"/asan/tests/fuzz/replay_*; do
		[ -x "$t" ] || continue
		name=${t##*/replay_}
		f0=$failed
		"$t" "tests/fuzz/corpus/$name" >"$log/fuzz-$name.tap" 2>&1
		rc=$?
		count_tap "$log/fuzz-$name.tap"
		if [ $rc -ne 0 ] && [ $failed -eq $f0 ]; then
			failed=$((failed + 1))
			echo "not ok - fuzz-$name replay exited with status $rc" >>"$log/fuzz-$name.tap"
		fi
		if [ $failed -ne $f0 ]; then
			echo "FAIL unit fuzz-$name (log: $log/fuzz-$name.tap)"
			grep -vE '^(ok |# tests/)' "$log/fuzz-$name.tap" | head -40
		else
			echo "ok   unit fuzz-$name"
		fi
	done
}

run_bats() {
	local b name f0 jobs=()
	for b in tests/*.bats; do
		[ -e "$b" ] || continue
		name=${b##*/}
		f0=$failed
		FSTITCH_BUILD=$BUILD bats --tap "$b" >"$log/$name.tap" 2>&1 </dev/null
		count_tap "$log/$name.tap"
		if ! grep -qE '^1\.\.[0-9]+' "$log/$name.tap"; then
			failed=$((failed + 1))
			echo "not ok - $name did not run" >>"$log/$name.tap"
		fi
		if [ $failed -ne $f0 ]; then
			echo "FAIL bats $name (log: $log/$name.tap)"
			grep -vE '^ok ' "$log/$name.tap" | head -60
		else
			echo "ok   bats $name"
		fi
	done
}

case $what in
unit) run_unit; run_fuzz_replay ;;
bats) run_bats ;;
all) run_unit; run_fuzz_replay; run_bats ;;
*) echo "usage: tests/run.sh [unit|bats|all]" >&2; exit 64 ;;
esac

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
