#!/usr/bin/env bash
# Run the benchmarks (`make bench`) and write their reports under
# $BENCH_OUT (default build/bench), one Markdown and one JSON file per
# section.  Performance is measured here only, never in `make check`.
#
#   tests/bench/run.sh [SECTION...]   run the named sections (default: all)
#   tests/bench/run.sh --list         list the sections
#   tests/bench/run.sh --full         the fs section at full size
#
# Sections:
#   engine   patch engine and cache alone (tests/bench/engine_bench.c):
#            engine.md, engine.json.  ENGINE_BENCH_ARGS adds arguments
#            (e.g. "--quick", "--sizes 10000,100000").
#   fs       file systems compared (tests/bench/fs_bench.sh): fstitch,
#            fuse2fs, passthrough_ll, kernel ext2; report.md, report.json,
#            plots/.  --quick (default), --full or --small set its size;
#            FS_BENCH_ARGS adds arguments (e.g. "--runs 1").
#
# Adding a section: write a function bench_<name> that writes its reports
# into "$OUT" and returns non-zero on failure, and add <name> to SECTIONS.
#
# Environment: BUILD (build directory holding bench/, default build),
# BENCH_OUT.  Exit status: 0 every section ran, 1 a section failed,
# 64 usage.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
OUT=${BENCH_OUT:-build/bench}
SECTIONS=(engine fs)
FS_ARGS=()

bench_engine() {
	# shellcheck disable=SC2086 # word splitting of the extra arguments
	"$BUILD/bench/engine_bench" --out "$OUT" ${ENGINE_BENCH_ARGS:-}
}

bench_fs() {
	# shellcheck disable=SC2086 # word splitting of the extra arguments
	BUILD=$BUILD BENCH_OUT=$OUT bash tests/bench/fs_bench.sh \
		"${FS_ARGS[@]}" ${FS_BENCH_ARGS:-}
}

usage() {
	echo "usage: tests/bench/run.sh [--list] [--quick|--full|--small] [SECTION...]" >&2
	exit 64
}

want=()
for a in "$@"; do
	case $a in
	--list) printf '%s\n' "${SECTIONS[@]}"; exit 0 ;;
	-h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	--quick|--full|--small) FS_ARGS+=("$a") ;;
	-*) usage ;;
	*)
		found=0
		for s in "${SECTIONS[@]}"; do [ "$s" = "$a" ] && found=1; done
		if [ $found -eq 0 ]; then
			echo "run.sh: unknown section '$a'" >&2
			usage
		fi
		want+=("$a")
		;;
	esac
done
[ ${#want[@]} -eq 0 ] && want=("${SECTIONS[@]}")

mkdir -p "$OUT"
failed=0
for s in "${want[@]}"; do
	echo "bench: $s"
	if ! "bench_$s"; then
		echo "bench: section $s failed" >&2
		failed=1
	fi
done
[ $failed -eq 0 ] && echo "bench: reports in $OUT"
exit $failed
