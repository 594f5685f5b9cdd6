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
#   pgapi    the patchgroup control path alone (tests/bench/pg_calls.c):
#            microseconds per API call, per atomic replace's calls and
#            per pgrun, on a fresh fstitch mount: pgapi.md, pgapi.txt.
#            PGAPI_N sets the iterations (default 2000), PGAPI_RUNS the
#            runs whose median is reported (default 5).
#   nbd      fstitch over an NBD export with an emulated flush latency
#            (tests/bench/nbd_bench.sh): atomic replace with fsync against
#            patchgroups, and untar: nbd.md, nbd.tsv.  NBD_BENCH_ARGS adds
#            arguments (e.g. "--runs 5 --delays 1,5,8").
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
SECTIONS=(engine pgapi nbd fs)
FS_ARGS=()

bench_engine() {
	# shellcheck disable=SC2086 # word splitting of the extra arguments
	"$BUILD/bench/engine_bench" --out "$OUT" ${ENGINE_BENCH_ARGS:-}
}

bench_pgapi() {
	local w=$OUT/pgapi.work pid rc=0 i
	rm -rf "$w"
	mkdir -p "$w/mnt"
	truncate -s 256M "$w/fs.img" && mke2fs -q -F -t ext2 "$w/fs.img" || return 1
	"$BUILD/bin/fstitch-mount" -f "$w/fs.img" "$w/mnt" </dev/null >"$w/mount.log" 2>&1 3>&- &
	pid=$!
	for i in $(seq 200); do
		mountpoint -q "$w/mnt" && break
		sleep 0.05
	done
	if ! mountpoint -q "$w/mnt"; then
		kill "$pid" 2>/dev/null
		wait "$pid"
		echo "bench: pgapi: fstitch-mount did not mount (log: $w/mount.log)" >&2
		return 1
	fi
	: >"$OUT/pgapi.txt"
	for i in $(seq "${PGAPI_RUNS:-5}"); do
		"$BUILD/bench/pg_calls" "$w/mnt" "${PGAPI_N:-2000}" "$(realpath "$BUILD/bin/pgrun")" \
			>>"$OUT/pgapi.txt" || rc=1
	done
	fusermount3 -u "$w/mnt"
	wait "$pid"
	{
		echo "# Patchgroup control path"
		echo
		echo "tests/bench/pg_calls.c on a fresh fstitch mount (no file-system work):"
		echo "microseconds per operation (the median of ${PGAPI_RUNS:-5} runs, with the"
		echo "smallest and largest), and the control requests it makes as the daemon"
		echo "counted them.  pgrun-true is \`pgrun -- /bin/true\` started and waited"
		echo "for; spawn-true the same without pgrun: their difference is pgrun's own"
		echo "cost (its exec, finding the mount, its requests)."
		echo
		echo "| case | us per op (median) | min | max | requests |"
		echo "|---|---|---|---|---|"
		awk '{ sub(/^us_per_op=/, "", $2); sub(/^calls=/, "", $3)
			if (!($1 in n)) order[++k] = $1
			v[$1, ++n[$1]] = $2; calls[$1] = $3 }
		END { for (i = 1; i <= k; i++) { c = order[i]; m = n[c]
			for (a = 1; a <= m; a++) for (b = a + 1; b <= m; b++)
				if (v[c, b] + 0 < v[c, a] + 0) { t = v[c, a]; v[c, a] = v[c, b]; v[c, b] = t }
			med = m % 2 ? v[c, (m + 1) / 2] : (v[c, m / 2] + v[c, m / 2 + 1]) / 2
			printf "| %s | %.2f | %s | %s | %s |\n", c, med, v[c, 1], v[c, m], calls[c] } }' \
			"$OUT/pgapi.txt"
	} >"$OUT/pgapi.md"
	rm -rf "$w"
	return $rc
}

bench_nbd() {
	# shellcheck disable=SC2086 # word splitting of the extra arguments
	BUILD=$BUILD BENCH_OUT=$OUT bash tests/bench/nbd_bench.sh ${NBD_BENCH_ARGS:-}
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
	-h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
