#!/usr/bin/env bash
# Run libFuzzer targets one after the other (make fuzz).
#   FUZZ_BUILD=build/fuzz [FUZZ_TIME=s] [FUZZ_RUNS=n] tests/fuzz/run.sh TARGET...
# Each target starts from its seeds in tests/fuzz/corpus/TARGET and keeps
# what it finds in $FUZZ_BUILD/corpus/TARGET; a crash, leak or hang is
# written to $FUZZ_BUILD/crash/ and stops that target.  Runs at nice 19,
# one process per target.  Without FUZZ_TIME or FUZZ_RUNS each target runs
# 60 seconds.  The last line per target is libFuzzer's "Done" summary.
set -u
cd "$(dirname "$0")/../.."
B=${FUZZ_BUILD:-build/fuzz}
# Every input opens a file system: a small quarantine keeps ASan from
# mapping fresh memory for each one (twice the executions per second).
export ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=16}
mkdir -p "$B/crash"
status=0
for t in "$@"; do
	exe=$B/fuzz_$t
	[ -x "$exe" ] || { echo "fuzz: $exe: not built" >&2; exit 1; }
	seeds=tests/fuzz/corpus/$t
	work=$B/corpus/$t
	mkdir -p "$work"
	args=(-artifact_prefix="$B/crash/$t-" -print_final_stats=1)
	[ -f tests/fuzz/$t.dict ] && args+=(-dict=tests/fuzz/$t.dict)
	[ -f tests/fuzz/$t.options ] && read -ra opts <tests/fuzz/$t.options && args+=("${opts[@]}")
	if [ -n "${FUZZ_RUNS:-}" ]; then
		args+=(-runs="$FUZZ_RUNS")
	else
		args+=(-max_total_time="${FUZZ_TIME:-60}")
	fi
	echo "fuzz: $t: ${args[*]}"
	nice -n 19 "$exe" "${args[@]}" "$work" "$seeds" 2>"$B/$t.log"
	rc=$?
	grep -E '^(#[0-9]+.*DONE|Done|stat::number_of_executed_units|stat::peak_rss_mb)' "$B/$t.log" | tail -4
	grep -E '^#[0-9]+' "$B/$t.log" | tail -1
	if [ $rc -ne 0 ]; then
		echo "fuzz: $t: failed (status $rc), see $B/$t.log and $B/crash/"
		status=1
	fi
done
exit $status
