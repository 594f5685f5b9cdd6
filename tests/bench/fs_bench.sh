#!/usr/bin/env bash
# File-system level benchmark: fstitch against fuse2fs, libfuse's
# passthrough_ll and the kernel's ext2, on the same disk, in the same run
# (design.md §7).  Writes build/bench/report.md, report.json, summary.md
# (the headline table for README.md) and plots/*.svg.
#
#   tests/bench/fs_bench.sh [--quick|--full|--small] [--runs N]
#       [--workloads LIST] [--contenders LIST] [--delays LIST] [--out DIR]
#       [--report-only]
#
# --quick (default) 3 runs, a 20k-file subset of the linux-source tree and
#         reduced counts: 2 to 3 hours with every contender and delay
# --full  3 runs, the whole tree and the paper's sizes: longer still
# --small 1 run and tiny inputs: checks that the harness works
# LIST is comma-separated.  Workloads: untar postmark replace mail meta
# sqlite.  Contenders: fstitch-su fstitch-none fuse2fs passthrough_ll
# kernel-ext2 on ext2 images; fstitch-journal fstitch-jdata (fstitch with
# -o consistency=journal and journal-data) kernel-ext3 kernel-ext3-dj (the
# kernel's ext3, data=ordered and data=journal) fuse2fs-ext3 on ext3 images.
# Delays (default 0,2,8): the disk's cache-flush latency in ms; 0 is the
# bare disk, N > 0 (and sf0: no delay) put every image under
# tests/tools/slowflush, which delays each flush by N ms.  Only the
# fsync-sensitive workloads (postmark replace mail sqlite) run on the
# delayed disks.  A smoke test of the harness: --small --runs 1 --delays 0,2
# with the contenders and workloads of interest (a minute or two).
#
# Every measurement gets a fresh image and mount, and its time runs until
# the work is durable: the workload, then the unmount, the daemon's exit and
# an fsync of the image file.  A contender that cannot run is skipped with a
# note in the report; a measurement that fails or times out is recorded as
# such, and the rest goes on.
#
# Needs root (mounts), /dev/fuse, and the packages of `.ci/deps.sh bench`.
# Environment: BUILD (build dir holding bin/, default build), BENCH_OUT,
# BENCH_REPLACE_N, BENCH_MAIL_N, BENCH_SQLITE_N, BENCH_PM_TX and
# BENCH_UNTAR_FILES (counts instead of the mode's), BENCH_CACHE (where the
# decompressed tar is kept), BENCH_TIMEOUT (seconds per measurement), META_TIMEOUT and META_SLOW
# (seconds; the one-directory phases, see wl_meta), BENCH_MKFS (mke2fs or
# fstitch-mkfs), BENCH_FSTITCH_OPTS (more fstitch-mount arguments).
# Exit status: 0 report written, 1 the harness itself failed, 64 usage.
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD

mode=quick
runs=
workloads=untar,postmark,replace,mail,meta,sqlite
delays=0,2,8
contenders=fstitch-su,fstitch-none,fstitch-journal,fstitch-jdata,fuse2fs,fuse2fs-ext3,passthrough_ll,kernel-ext2,kernel-ext3,kernel-ext3-dj
OUT=${BENCH_OUT:-$ROOT/build/bench}
report_only=0

# usage [STATUS]: the help text; on stdout for --help (status 0), on
# stderr after a bad argument (64).
usage() {
	if [ "${1:-64}" -eq 0 ]; then
		sed -n '7,26p' "$0" | sed 's/^# \{0,1\}//'
	else
		sed -n '7,26p' "$0" | sed 's/^# \{0,1\}//' >&2
	fi
	exit "${1:-64}"
}

while [ $# -gt 0 ]; do
	case $1 in
	--quick) mode=quick ;;
	--full) mode=full ;;
	--small) mode=small ;;
	--runs) runs=${2:-}; shift ;;
	--runs=*) runs=${1#*=} ;;
	--workloads) workloads=${2:-}; shift ;;
	--workloads=*) workloads=${1#*=} ;;
	--contenders) contenders=${2:-}; shift ;;
	--contenders=*) contenders=${1#*=} ;;
	--delays) delays=${2:-}; shift ;;
	--delays=*) delays=${1#*=} ;;
	--out) OUT=${2:-}; shift ;;
	--out=*) OUT=${1#*=} ;;
	--report-only) report_only=1 ;;
	-h | --help) usage 0 ;;
	*) echo "fs_bench: unknown argument '$1'" >&2; usage ;;
	esac
	shift
done
case $runs in
'' | [1-9] | [1-9][0-9]) ;;
*) echo "fs_bench: bad run count '$runs'" >&2; exit 64 ;;
esac
for d in ${delays//,/ }; do
	case $d in
	sf0 | [0-9] | [1-9][0-9] | [1-9][0-9][0-9]) ;;
	*) echo "fs_bench: bad delay '$d': want milliseconds 0 to 999, or sf0" >&2; exit 64 ;;
	esac
done
[ -n "${delays//,/}" ] || { echo "fs_bench: no delay given" >&2; exit 64; }

BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
case $OUT in /*) ;; *) OUT=$ROOT/$OUT ;; esac
BIN=$BUILD/bin
RAW=$OUT/raw
WORK=$OUT/work
CACHE=${BENCH_CACHE:-$ROOT/build/bench/cache}
case $CACHE in /*) ;; *) CACHE=$ROOT/$CACHE ;; esac
HERE=$ROOT/tests/bench

# shellcheck source=tests/bench/lib.sh
. "$HERE/lib.sh"

if [ $report_only -eq 1 ]; then
	exec python3 "$HERE/report.py" "$OUT"
fi

# --- sizes per mode ---------------------------------------------------------
# PostMark follows the paper's shape (file sizes 500 B to 4 MB, 4 KB reads
# and writes) with the file count scaled so the set fits the 4 GiB image.
case $mode in
quick)
	RUNS=${runs:-3} UNTAR_FILES=20000
	PM_FILES=200 PM_MAX=1000000 PM_TX=1000
	REPLACE_N=200 MAIL_N=250 SQLITE_N=200 META_SIZES="1500 15000"
	: "${BENCH_TIMEOUT:=300}" ;;
full)
	# 3 runs: about 25 minutes on this 2-core machine (--runs 5: about
	# 40).  fuse2fs at 100k names in one directory is bounded by
	# META_TIMEOUT and measured once (see wl_meta).
	RUNS=${runs:-3} UNTAR_FILES=all
	PM_FILES=500 PM_MAX=4000000 PM_TX=1000
	REPLACE_N=1000 MAIL_N=1000 SQLITE_N=1000 META_SIZES="1000 10000 100000"
	: "${META_TIMEOUT:=120}"
	: "${BENCH_TIMEOUT:=600}" ;;
small)
	RUNS=${runs:-1} UNTAR_FILES=2000
	PM_FILES=50 PM_MAX=200000 PM_TX=200
	REPLACE_N=30 MAIL_N=30 SQLITE_N=30 META_SIZES="500 2000" E2DIR_N=20000
	: "${BENCH_TIMEOUT:=120}" ;;
esac
# Counts overridden from the environment, for a focused or smoke run
# without a new mode; params.json records what ran.
REPLACE_N=${BENCH_REPLACE_N:-$REPLACE_N}
MAIL_N=${BENCH_MAIL_N:-$MAIL_N}
SQLITE_N=${BENCH_SQLITE_N:-$SQLITE_N}
UNTAR_FILES=${BENCH_UNTAR_FILES:-$UNTAR_FILES}
PM_TX=${BENCH_PM_TX:-$PM_TX}
for v in "$REPLACE_N" "$MAIL_N" "$SQLITE_N" "$PM_TX"; do
	case $v in '' | 0* | *[!0-9]*) ;; *) continue ;; esac
	echo "fs_bench: bad count '$v' in BENCH_REPLACE_N/MAIL_N/SQLITE_N/PM_TX" >&2
	exit 64
done
case $UNTAR_FILES in
all) ;;
*[!0-9]* | '' | 0*) echo "fs_bench: bad BENCH_UNTAR_FILES '$UNTAR_FILES'" >&2; exit 64 ;;
esac
PM_MIN=500
IMG_SIZE=4G
# names in the one directory of the library-level scaling (cheap: ~2 s)
: "${E2DIR_N:=100000}"

# --- preconditions ------------------------------------------------------------

if [ "$(id -u)" -ne 0 ]; then
	echo "fs_bench: must run as root (it makes loop and FUSE mounts)" >&2
	exit 1
fi
if [ ! -c /dev/fuse ]; then
	echo "fs_bench: /dev/fuse is missing" >&2
	exit 1
fi
for t in python3 e2fsck mke2fs fusermount3 timeout; do
	command -v "$t" >/dev/null || {
		echo "fs_bench: '$t' is not installed (run: bash .ci/deps.sh bench)" >&2
		exit 1
	}
done

mkdir -p "$OUT" "$CACHE"
# passthrough_ll keeps a descriptor open per inode it has seen, and a
# linux-source tree is far more than the default 1024; every contender
# gets the same raised limit.
ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null
NOFILE=$(ulimit -n)
# Keep the previous raw results beside the new ones, not mixed with them.
if [ -d "$RAW" ]; then
	rm -rf "$RAW.prev"
	mv "$RAW" "$RAW.prev"
fi
mkdir -p "$RAW/logs" "$RAW/stats" "$RAW/final" "$WORK"

# fsops: built by make into $BUILD/bench; built here when make did not
# (for instance when lib/ does not build at the moment).
FSOPS=$BUILD/bench/fsops
if [ ! -x "$FSOPS" ] || [ "$HERE/fsops.c" -nt "$FSOPS" ]; then
	FSOPS=$OUT/fsops
	if [ ! -x "$FSOPS" ] || [ "$HERE/fsops.c" -nt "$FSOPS" ]; then
		cc -std=gnu11 -O2 -Wall -Wextra -D_GNU_SOURCE \
			-D_FILE_OFFSET_BITS=64 -o "$FSOPS" "$HERE/fsops.c" || {
			echo "fs_bench: cannot build fsops" >&2
			exit 1
		}
	fi
fi

ACTIVE=()
MAIN_PID=$BASHPID
cleanup() {
	local c
	# Subshells inherit the traps; only the harness itself tears down.
	[ "$BASHPID" = "$MAIN_PID" ] || return 0
	for c in "${ACTIVE[@]}"; do
		ct_use "$c"
		ct kill
		rm -f "$IMG"
	done
	disk_down
}
trap cleanup EXIT
trap 'exit 130' INT TERM

python3 "$HERE/report.py" --machine "$OUT" >"$RAW/machine.json" ||
	echo '{}' >"$RAW/machine.json"

for c in ${contenders//,/ }; do
	if ! declare -F "ct_$(ct_id "$c")_avail" >/dev/null; then
		echo "fs_bench: unknown contender '$c'" >&2
		exit 64
	fi
	ct_use "$c"
	if why=$(ct avail); then
		ACTIVE+=("$c")
	else
		skip_note "$c" "$why"
	fi
done
if [ ${#ACTIVE[@]} -eq 0 ]; then
	echo "fs_bench: no contender can run" >&2
	exit 1
fi

# is_fstitch NAME: the contenders that have patchgroups and engine counters
is_fstitch() { case $1 in fstitch-*) return 0 ;; esac; return 1; }
has_pg() {
	case $1 in fstitch-su | fstitch-journal | fstitch-jdata) ;; *) return 1 ;; esac
	[ -x "$BIN/pgrun" ]
}

# fstitch_stats FILE: the engine's counters after a workload, before the
# flush, when the daemon can report them (fstitch-stat); untimed.  Their
# live levels (hard patches, undo bytes held) are what the end of the
# workload left for the flush; fstitch_final has the totals after it.
fstitch_stats() {
	is_fstitch "$CT_NAME" || return 0
	[ -x "$BIN/fstitch-stat" ] || return 0
	(cd "$MNT" && "$BIN/fstitch-stat" --json) >"$1" 2>>"$CT_LOG" || rm -f "$1"
}

# fstitch_final FILE: keep the counters the daemon wrote after its final
# flush (-o statsfile) for the measurement that just ended.  The mount that
# wrote them lived exactly as long as the workload and its flush.
fstitch_final() {
	is_fstitch "$CT_NAME" || return 0
	local f=$WORK/$CT_NAME.final.json
	if [ -s "$f" ]; then
		mv "$f" "$1"
	else
		bench_log "$CT_NAME: no statsfile after the unmount (log: ${CT_LOG#"$OUT"/})"
	fi
}

# --- one measurement ----------------------------------------------------------
# timed WORKLOAD VARIANT RUN OPS CMD...: run CMD on the mounted contender with
# a timeout, then the durable unmount, and record both.  Sets M_OK.
timed() {
	local wl=$1 var=$2 run=$3 ops=$4 t0 t1 t1b t2 rc status=ok note='' flush_s=0
	shift 4
	M_OK=0
	drops_reset
	disk_flushes_start
	t0=$(now)
	timeout -k 10 "$BENCH_TIMEOUT" "$@" >>"$CT_LOG" 2>&1
	rc=$?
	t1=$(now)
	if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
		status=timeout
		note="stopped after ${BENCH_TIMEOUT}s"
	elif [ $rc -ne 0 ]; then
		status=fail
		note="workload exited with $rc (log: ${CT_LOG#"$OUT"/})"
		if tail -n 50 "$CT_LOG" | grep -q 'Too many open files'; then
			note="$note; EMFILE: the daemon ran out of file descriptors (limit $NOFILE)"
		fi
	fi
	# Engine counters of the bare disk in raw/stats and raw/final, of an
	# emulated disk in raw/stats/disk-Nms and raw/final/disk-Nms.
	local sub=
	[ "$DISK_KIND" = bare ] || sub=disk-${DISK_MS}ms/
	if [ $status = ok ]; then
		mkdir -p "$RAW/stats/$sub" "$RAW/final/$sub"
		fstitch_stats "$RAW/stats/$sub$wl-$var-$CT_NAME-$run.json"
		t1b=$(now)
		if ! ct umount; then
			status=fail
			note="durable unmount failed (log: ${CT_LOG#"$OUT"/})"
		fi
		t2=$(now)
		flush_s=$(elapsed "$t1b" "$t2")
		[ $status = ok ] && fstitch_final "$RAW/final/$sub$wl-$var-$CT_NAME-$run.json"
	else
		ct kill
	fi
	[ "$CT_NAME" = passthrough_ll ] && REC_EXTRA=",\"cache_drops\":$(drops_taken)"
	REC_EXTRA="${REC_EXTRA:-}$(disk_flushes_taken)"
	record "$wl" "$var" "$CT_NAME" "$run" "$status" \
		"$(elapsed "$t0" "$t1")" "$flush_s" "$ops" "$note"
	[ $status = ok ] && M_OK=1
	return 0
}

# fresh SIZE: a new file system, mounted.  Failures are recorded by the caller.
fresh() {
	ct mkfs "$1" && ct mount
}

# setup_fail WORKLOAD VARIANT RUN WHAT: record a measurement that could not
# start, and tear the contender down.
setup_fail() {
	record "$1" "$2" "$CT_NAME" "$3" fail 0 0 0 "$4 failed (log: ${CT_LOG#"$OUT"/})"
	ct kill
}

# add_fsck WORKLOAD VARIANT RUN: append e2fsck's verdict on the image to the
# last record of this measurement (rewrites the last line).
add_fsck() {
	local v
	v=$(ct_fsck)
	python3 - "$RAW/results.jsonl" "$v" <<'EOF'
import json, sys
path, verdict = sys.argv[1], sys.argv[2]
lines = open(path).read().splitlines()
rec = json.loads(lines[-1])
rec["fsck"] = verdict
lines[-1] = json.dumps(rec)
open(path, "w").write("\n".join(lines) + "\n")
EOF
	[ "$v" = clean ] || bench_log "$CT_NAME: e2fsck -fn reports $v (log kept as raw/logs/$CT_NAME.fsck-SECONDS-STATUS.log)"
}

# --- the linux-source tar ------------------------------------------------------

TAR=
TAR_TOP=
TAR_ENTRIES=0
TAR_BYTES=0
prepare_tar() {
	local xz
	xz=$(ls /usr/src/linux-source-*.tar.xz 2>/dev/null | sort -V | tail -1)
	if [ -z "$xz" ]; then
		bench_log "no /usr/src/linux-source-*.tar.xz (package linux-source): untar skipped"
		return 1
	fi
	local base
	base=$(basename "$xz" .xz)
	if [ ! -s "$CACHE/$base" ]; then
		bench_log "decompressing $xz once into $CACHE"
		xz -dc "$xz" >"$CACHE/$base.part" && mv "$CACHE/$base.part" "$CACHE/$base" ||
			return 1
	fi
	TAR=$CACHE/$base
	if [ "$UNTAR_FILES" != all ]; then
		local sub=$CACHE/${base%.tar}-first$UNTAR_FILES.tar
		if [ ! -s "$sub" ] || [ ! -s "$sub.info" ]; then
			python3 "$HERE/report.py" --subset-tar "$TAR" "$UNTAR_FILES" "$sub" ||
				return 1
		fi
		TAR=$sub
	elif [ ! -s "$TAR.info" ]; then
		python3 "$HERE/report.py" --subset-tar "$TAR" 0 "$TAR" || return 1
	fi
	read -r TAR_TOP TAR_ENTRIES TAR_BYTES <"$TAR.info"
	bench_log "untar input: $TAR ($TAR_ENTRIES entries, $TAR_BYTES bytes of file data)"
}

# tree_check DIR: "entries bytes" of an extracted tree
tree_check() {
	find "$1" -printf '%y %s\n' 2>/dev/null |
		awk '{ n++; if ($1 == "f") b += $2 } END { printf "%d %d", n, b }'
}

# --- workloads ----------------------------------------------------------------

wl_untar() {
	local run=$1 got
	[ -n "$TAR" ] || return 0
	fresh "$IMG_SIZE" || { setup_fail untar extract "$run" mount; return 0; }
	cat "$TAR" >/dev/null # the input comes from memory, for every contender
	timed untar extract "$run" "$TAR_ENTRIES" tar -xf "$TAR" -C "$MNT"
	[ $M_OK = 1 ] || return 0
	# Check what landed (untimed, on a fresh mount), then remount so that the
	# rm starts as cold as the extract did.
	ct mount || { setup_fail untar rm "$run" remount; return 0; }
	got=$(tree_check "$MNT/$TAR_TOP")
	ct umount
	add_fsck untar extract "$run"
	if [ "$got" != "$TAR_ENTRIES $TAR_BYTES" ]; then
		record untar rm "$CT_NAME" "$run" fail 0 0 0 \
			"extracted tree has entries/bytes $got, expected $TAR_ENTRIES $TAR_BYTES"
		return 0
	fi
	ct mount || { setup_fail untar rm "$run" remount; return 0; }
	timed untar rm "$run" "$TAR_ENTRIES" rm -rf "$MNT/$TAR_TOP"
	[ $M_OK = 1 ] || return 0
	add_fsck untar rm "$run"
}

wl_postmark() {
	local run=$1 cfg=$WORK/postmark-$CT_NAME.cfg
	fresh "$IMG_SIZE" || { setup_fail postmark default "$run" mount; return 0; }
	mkdir -p "$MNT/pm"
	sed -e "s|@DIR@|$MNT/pm|" -e "s|@FILES@|$PM_FILES|" \
		-e "s|@MIN@|$PM_MIN|" -e "s|@MAX@|$PM_MAX|" -e "s|@TX@|$PM_TX|" \
		"$HERE/postmark.cfg" >"$cfg"
	timed postmark default "$run" "$PM_TX" postmark "$cfg"
	[ $M_OK = 1 ] && add_fsck postmark default "$run"
	return 0
}

# replace_one VARIANT RUN CMD...: one atomic-replace measurement on a fresh
# file system holding the 16 files already.
replace_one() {
	local var=$1 run=$2
	shift 2
	fresh 1G || { setup_fail replace "$var" "$run" mount; return 0; }
	mkdir -p "$MNT/r" && "$FSOPS" replace "$MNT/r" 16 >>"$CT_LOG" 2>&1 &&
		ct umount && ct mount || { setup_fail replace "$var" "$run" setup; return 0; }
	timed replace "$var" "$run" "$REPLACE_N" "$@"
	[ $M_OK = 1 ] && add_fsck replace "$var" "$run"
	return 0
}

wl_replace() {
	local run=$1 n=$REPLACE_N d
	d=$MNT/r
	# The fsync version as one process, and as one process per update (the
	# fair baseline of the pgrun chain, which starts processes too).
	replace_one fsync "$run" "$FSOPS" replace "$d" "$n" -s
	replace_one fsync-proc "$run" bash -c \
		'for ((i = 0; i < $2; i++)); do "$0" replace "$1" 1 -s -i $i || exit; done' \
		"$FSOPS" "$d" "$n"
	# No fsync at all: not crash-safe, the upper bound.
	replace_one nosync "$run" "$FSOPS" replace "$d" "$n"
	# pg_replace's fsync mode on every contender: the baseline of pg-api
	# below, same program and file sizes.
	[ -x "$BUILD/bench/pg_replace" ] &&
		replace_one fsync-api "$run" "$BUILD/bench/pg_replace" "$d" "$n" fsync 1024
	has_pg "$CT_NAME" || return 0
	# fsync-proc's processes without its fsync: the chain below starts
	# them too, so fsync-proc's time over this one bounds the chain's
	# ratio to fsync-proc on this machine, however cheap pgrun is.
	replace_one nosync-proc "$run" bash -c \
		'for ((i = 0; i < $2; i++)); do "$0" replace "$1" 1 -i $i || exit; done' \
		"$FSOPS" "$d" "$n"
	# Each update in its own patchgroup, ordered after the previous one.
	replace_one pg-chain "$run" bash -c '
		cd "$2" || exit
		id=
		for ((i = 0; i < $3; i++)); do
			id=$("$0" --print-id ${id:+--after "$id"} -- \
				"$1" replace "$2" 1 -i $i) || exit
		done' "$BIN/pgrun" "$FSOPS" "$d" "$n"
	# The unmodified fsync program, its fsyncs turned into ordering points.
	replace_one pg-order "$run" bash -c \
		'cd "$2" && exec "$0" --fsync=order -- "$1" replace "$2" "$3" -s' \
		"$BIN/pgrun" "$FSOPS" "$d" "$n"
	# The C API in one process (tests/bench/pg_replace.c): per update, the
	# temporary file in one group and the rename in a group after it.
	if [ -x "$BUILD/bench/pg_replace" ]; then
		replace_one pg-api "$run" "$BUILD/bench/pg_replace" "$d" "$n" pg 1024
		# The same groups in two requests per update (pg_switch).
		replace_one pg-switch "$run" "$BUILD/bench/pg_replace" "$d" "$n" switch 1024
	fi
}

mail_one() {
	local var=$1 run=$2
	shift 2
	fresh 1G || { setup_fail mail "$var" "$run" mount; return 0; }
	mkdir -p "$MNT/mail" && "$FSOPS" mail-setup "$MNT/mail" "$MAIL_N" >>"$CT_LOG" 2>&1 &&
		ct umount && ct mount || { setup_fail mail "$var" "$run" setup; return 0; }
	timed mail "$var" "$run" "$MAIL_N" "$@"
	[ $M_OK = 1 ] && add_fsck mail "$var" "$run"
	return 0
}

wl_mail() {
	local run=$1 d
	d=$MNT/mail
	mail_one fsync "$run" "$FSOPS" mail-move "$d" "$MAIL_N" -s
	mail_one nosync "$run" "$FSOPS" mail-move "$d" "$MAIL_N"
	has_pg "$CT_NAME" || return 0
	mail_one pg-order "$run" bash -c \
		'cd "$2" && exec "$0" --fsync=order -- "$1" mail-move "$2" "$3" -s' \
		"$BIN/pgrun" "$FSOPS" "$d" "$MAIL_N"
	# The C API: each message's mark in a group after its copy's, and no
	# order between messages (fsops mail-move -p).
	mail_one pg-api "$run" "$FSOPS" mail-move "$d" "$MAIL_N" -p
}

# A sqlite3 insert loop: SQLITE_N rows, each its own transaction (sqlite's
# default rollback journal, synchronous=FULL: several fsyncs per row), as a
# small database-backed program does.  nosync: the same with
# synchronous=OFF (not crash-safe); pg-order: the fsync version under
# pgrun --fsync=order, sqlite unmodified.
SQL_FSYNC=
SQL_NOSYNC=
sqlite_sql() {
	SQL_FSYNC=$WORK/sqlite-insert.sql
	SQL_NOSYNC=$WORK/sqlite-insert-nosync.sql
	awk -v n="$SQLITE_N" 'BEGIN {
		for (i = 1; i <= n; i++)
			printf "insert into t(k, v) values(%d, \x27row %d of the insert loop, about one hundred bytes of text to store\x27);\n", i, i
	}' >"$SQL_FSYNC"
	{ echo 'pragma synchronous=off;'; cat "$SQL_FSYNC"; } >"$SQL_NOSYNC"
}

sqlite_one() {
	local var=$1 run=$2
	shift 2
	fresh 1G || { setup_fail sqlite "$var" "$run" mount; return 0; }
	mkdir -p "$MNT/db" &&
		sqlite3 "$MNT/db/t.db" 'create table t(id integer primary key, k integer, v text);' \
			>>"$CT_LOG" 2>&1 &&
		ct umount && ct mount || { setup_fail sqlite "$var" "$run" setup; return 0; }
	timed sqlite "$var" "$run" "$SQLITE_N" "$@"
	[ $M_OK = 1 ] && add_fsck sqlite "$var" "$run"
	return 0
}

wl_sqlite() {
	local run=$1 db
	command -v sqlite3 >/dev/null || return 0
	[ -n "$SQL_FSYNC" ] || sqlite_sql
	db=$MNT/db/t.db
	sqlite_one fsync "$run" sqlite3 "$db" ".read $SQL_FSYNC"
	sqlite_one nosync "$run" sqlite3 "$db" ".read $SQL_NOSYNC"
	has_pg "$CT_NAME" || return 0
	sqlite_one pg-order "$run" bash -c \
		'cd "${2%/*}" && exec "$0" --fsync=order -- sqlite3 "$2" ".read $1"' \
		"$BIN/pgrun" "$SQL_FSYNC" "$db"
}

# Create, then stat (after a remount, so lookups reach the file system),
# then unlink n entries of one directory; each phase flushed and timed.
#
# A directory of 100k names is quadratic work for a file system that scans
# its directories linearly (fuse2fs: minutes per phase).  So each phase has
# at most META_TIMEOUT seconds, and a contender whose create of the largest
# size timed out or took over META_SLOW seconds is measured at that size in
# its first run only; later runs record "skipped" with the reason.
declare -A META_ONCE=()
wl_meta() {
	local run=$1 n size why
	local BENCH_TIMEOUT=${META_TIMEOUT:-$BENCH_TIMEOUT}
	for n in $META_SIZES; do
		why=${META_ONCE[$CT_NAME-$n]:-}
		if [ -n "$why" ]; then
			record meta "create-$n" "$CT_NAME" "$run" skipped 0 0 "$n" \
				"measured in the first run only: $why"
			continue
		fi
		# 1G has 65536 inodes: not enough for 100k names
		size=1G
		[ "$n" -gt 50000 ] && size=$IMG_SIZE
		fresh "$size" || { setup_fail meta "create-$n" "$run" mount; continue; }
		mkdir -p "$MNT/d"
		timed meta "create-$n" "$run" "$n" "$FSOPS" create "$MNT/d" "$n"
		if [ "$n" -gt 50000 ]; then
			local last
			last=$(tail -n 1 "$RAW/results.jsonl")
			if [ $M_OK = 0 ]; then
				META_ONCE[$CT_NAME-$n]="run $run did not finish the create"
			elif awk -v t="$(printf '%s' "$last" | sed 's/.*"total_s":\([0-9.]*\).*/\1/')" \
				-v lim="${META_SLOW:-60}" 'BEGIN { exit !(t > lim) }'; then
				META_ONCE[$CT_NAME-$n]="its create took over ${META_SLOW:-60} s in run $run"
			fi
		fi
		[ $M_OK = 1 ] || continue
		ct mount || { setup_fail meta "stat-$n" "$run" remount; continue; }
		timed meta "stat-$n" "$run" "$n" "$FSOPS" stat "$MNT/d" "$n"
		[ $M_OK = 1 ] || continue
		ct mount || { setup_fail meta "unlink-$n" "$run" remount; continue; }
		timed meta "unlink-$n" "$run" "$n" "$FSOPS" unlink "$MNT/d" "$n"
		[ $M_OK = 1 ] && add_fsck meta "unlink-$n" "$run"
	done
}

# lib_meta RUN: the same directory scaling in the ext2 module alone
# (tests/bench/e2_dir_bench.c: lib/ext2/e2.h, no FUSE, no I/O while timed), on a
# fresh image with 4 KiB blocks like the mounted ones; then e2fsck -fn of
# what it left.  Output parsed by report.py from raw/e2dir-RUN.txt.
lib_meta() {
	local run=$1 img=$WORK/e2dir.img out=$RAW/e2dir-$1.txt rc
	if [ ! -x "$BUILD/bench/e2_dir_bench" ]; then
		bench_log "no $BUILD/bench/e2_dir_bench: library-level directory scaling skipped"
		return 0
	fi
	rm -f "$img"
	if ! truncate -s 1G "$img" ||
		! mke2fs -q -F -t ext2 -b 4096 -N $((E2DIR_N + 20000)) "$img" >/dev/null 2>&1; then
		bench_log "e2_dir_bench: cannot make its image"
		return 0
	fi
	timeout -k 10 "$BENCH_TIMEOUT" "$BUILD/bench/e2_dir_bench" "$img" "$E2DIR_N" \
		>"$out" 2>&1
	rc=$?
	if [ $rc -ne 0 ]; then
		bench_log "e2_dir_bench run $run failed ($rc, raw/${out##*/})"
	elif e2fsck -fn "$img" >"$RAW/logs/e2dir.fsck.log" 2>&1; then
		echo "fsck: clean" >>"$out"
	else
		echo "fsck: exit-$?" >>"$out"
	fi
	bench_log "e2_dir_bench run $run: $(grep -c 'us/op' "$out") figures"
	rm -f "$img"
}

# --- main ---------------------------------------------------------------------

case ",$workloads," in *,untar,*) prepare_tar || TAR= ;; esac

cat >"$RAW/params.json" <<EOF
{"mode":"$mode","runs":$RUNS,"untar_files":"$UNTAR_FILES","untar_entries":$TAR_ENTRIES,
 "untar_bytes":$TAR_BYTES,"untar_tar":"$(basename "${TAR:-none}")",
 "postmark":{"files":$PM_FILES,"min":$PM_MIN,"max":$PM_MAX,"transactions":$PM_TX,"io":4096},
 "replace_n":$REPLACE_N,"mail_n":$MAIL_N,"sqlite_n":$SQLITE_N,"delays_ms":"$delays","meta_sizes":"$META_SIZES","e2dir_n":$E2DIR_N,
 "meta_timeout_s":${META_TIMEOUT:-$BENCH_TIMEOUT},
 "image_size":"$IMG_SIZE","timeout_s":$BENCH_TIMEOUT,"mkfs":"$BENCH_MKFS",
 "workloads":"$workloads","contenders":"${ACTIVE[*]}",
 "fstitch_opts":"${BENCH_FSTITCH_OPTS:-}","nofile":$NOFILE,"started":"$(date -u +%FT%TZ)"}
EOF

bench_log "mode $mode, $RUNS runs, contenders: ${ACTIVE[*]}, workloads: $workloads, flush delays (ms): $delays"
# fsync_sensitive WORKLOAD: run on the emulated slow-flush disks too
fsync_sensitive() {
	case $1 in postmark | replace | mail | sqlite) return 0 ;; esac
	return 1
}
for wl in ${workloads//,/ }; do
	if ! declare -F "wl_$wl" >/dev/null; then
		echo "fs_bench: unknown workload '$wl'" >&2
		exit 64
	fi
done
for ((run = 1; run <= RUNS; run++)); do
	for d in ${delays//,/ }; do
		ran=0
		for wl in ${workloads//,/ }; do
			[ "$d" = 0 ] || fsync_sensitive "$wl" || continue
			if [ $ran = 0 ]; then
				disk_up "$d" || break
				ran=1
			fi
			# Rotate the contenders' order from run to run, so that a drift in
			# the machine's load does not always land on the same one.
			n=${#ACTIVE[@]}
			for ((k = 0; k < n; k++)); do
				c=${ACTIVE[$(((k + run - 1) % n))]}
				ct_use "$c"
				"wl_$wl" "$run"
				ct_destroy
			done
			[ "$wl" = meta ] && lib_meta "$run"
		done
		disk_down
	done
done
sed -i "s/}\$/,\"finished\":\"$(date -u +%FT%TZ)\"}/" "$RAW/params.json"

python3 "$HERE/report.py" "$OUT" || exit 1
bench_log "report: $OUT/report.md"
