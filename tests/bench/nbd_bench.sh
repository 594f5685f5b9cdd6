#!/usr/bin/env bash
# fstitch over NBD (design.md §3, lib/bdev/bdev_nbd.c): atomic replace with
# fsync against patchgroups, and untar, on an nbdkit export whose cache
# flush takes a known time.  Writes nbd.md and nbd.tsv under $BENCH_OUT.
#
#   tests/bench/nbd_bench.sh [--runs N] [--delays LIST] [--replace N]
#
# The export is `nbdkit file` over an image on tests/tools/slowflush, which
# delays every fdatasync (nbdkit's flush) by DELAY ms: nbdkit 1.32 has no
# delay-flush in its delay filter.  Contenders: fstitch-mount on the NBD
# URI, and fstitch-mount on the same image file directly (same disk, no
# network): the difference is what NBD costs.  The kernel cannot be
# compared here: this kernel has no nbd driver (no /dev/nbd*, no modules),
# so nbd-client cannot attach the export.  Every measurement gets a fresh
# file system and runs until the work is durable: the workload, the
# unmount and the daemon's exit; e2fsck -fn checks the image after each.
# Defaults: 3 runs, delays 1,5 ms, 200 replaces.  Needs root, /dev/fuse,
# nbdkit.  Exit status: 0 report written, 1 the harness failed, 64 usage.
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
OUT=${BENCH_OUT:-$ROOT/build/bench}
case $OUT in /*) ;; *) OUT=$ROOT/$OUT ;; esac
RUNS=3 DELAYS=1,5 REPLACE_N=200

usage() {
	sed -n '6p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 64
}
while [ $# -gt 0 ]; do
	case $1 in
	--runs) RUNS=${2:-}; shift ;;
	--delays) DELAYS=${2:-}; shift ;;
	--replace) REPLACE_N=${2:-}; shift ;;
	*) usage ;;
	esac
	shift
done
case $RUNS$REPLACE_N in *[!0-9]* | '') usage ;; esac

for t in nbdkit fusermount3 e2fsck python3; do
	command -v "$t" >/dev/null || { echo "nbd_bench: '$t' is not installed" >&2; exit 1; }
done
BIN=$BUILD/bin
SF=$BUILD/tests/tools/slowflush
for f in "$BIN/fstitch-mount" "$BIN/fstitch-mkfs" "$BUILD/bench/pg_replace" "$SF"; do
	[ -x "$f" ] || { echo "nbd_bench: $f is not built" >&2; exit 1; }
done

WORK=$OUT/nbd.work
TSV=$OUT/nbd.tsv
rm -rf "$WORK"
mkdir -p "$WORK/back" "$WORK/disk" "$WORK/mnt"
SOCK=$WORK/nbd.sock
URI="nbd+unix:///?socket=$SOCK"
MNT=$WORK/mnt
TAR=$WORK/include.tar
(cd /usr && find include -type f | LC_ALL=C sort | tar -cf "$TAR" --no-recursion -T -)
TAR_FILES=$(tar -tf "$TAR" | wc -l)
printf 'delay_ms\tcontender\tworkload\trun\tseconds\tflushes\tflush_mean_ms\tfua_rounds\tfsck\n' >"$TSV"

log() { printf '%s nbd_bench: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

SF_PID="" NBD_PID=""
disk_up() {
	"$SF" $(($1 * 1000)) "$WORK/back" "$WORK/disk" </dev/null >>"$WORK/slowflush.log" 2>&1 3>&- &
	SF_PID=$!
	for _ in $(seq 200); do
		mountpoint -q "$WORK/disk" && return 0
		sleep 0.05
	done
	return 1
}
disk_down() {
	[ -n "$SF_PID" ] || return 0
	fusermount3 -u "$WORK/disk"
	wait "$SF_PID"
	SF_PID=
}
nbd_up() {
	rm -f "$SOCK" "$WORK/nbd.pid"
	nbdkit -f --unix "$SOCK" --pidfile "$WORK/nbd.pid" file "$1" \
		</dev/null >>"$WORK/nbdkit.log" 2>&1 3>&- &
	NBD_PID=$!
	for _ in $(seq 200); do
		[ -s "$WORK/nbd.pid" ] && return 0
		sleep 0.05
	done
	return 1
}
nbd_down() {
	[ -n "$NBD_PID" ] || return 0
	kill "$NBD_PID"
	wait "$NBD_PID"
	NBD_PID=
}
cleanup() {
	fusermount3 -u "$MNT" 2>/dev/null
	nbd_down 2>/dev/null
	disk_down 2>/dev/null
}
trap cleanup EXIT

# measure DELAY CONTENDER WORKLOAD RUN: one fresh file system, one timed run.
measure() {
	local delay=$1 ct=$2 wl=$3 run=$4 img=$WORK/disk/fs.img src pid t0 t1 fsck st
	rm -f "$img" "$WORK/stats.json"
	truncate -s 1G "$img"
	src=$img
	if [ "$ct" = nbd ]; then
		nbd_up "$img" || { log "nbdkit did not start"; return 1; }
		src=$URI
	fi
	"$BIN/fstitch-mkfs" -q "$src" || return 1
	"$BIN/fstitch-mount" -f -o statsfile="$WORK/stats.json" "$src" "$MNT" \
		</dev/null >>"$WORK/mount.log" 2>&1 3>&- &
	pid=$!
	for _ in $(seq 200); do
		mountpoint -q "$MNT" && break
		sleep 0.05
	done
	mountpoint -q "$MNT" || { log "mount failed (see $WORK/mount.log)"; return 1; }
	mkdir "$MNT/r"
	cat "$TAR" >/dev/null
	t0=$EPOCHREALTIME
	case $wl in
	replace-fsync) "$BUILD/bench/pg_replace" "$MNT/r" "$REPLACE_N" fsync 1024 >/dev/null ;;
	replace-pg) "$BUILD/bench/pg_replace" "$MNT/r" "$REPLACE_N" pg 1024 >/dev/null ;;
	untar) tar -xf "$TAR" -C "$MNT/r" ;;
	esac
	st=$?
	fusermount3 -u "$MNT"
	wait "$pid" || st=1
	t1=$EPOCHREALTIME
	nbd_down
	fsck=clean
	e2fsck -fn "$img" >/dev/null 2>&1 || fsck=damaged
	[ $st -eq 0 ] || fsck=failed
	python3 - "$WORK/stats.json" "$delay" "$ct" "$wl" "$run" "$t0" "$t1" "$fsck" >>"$TSV" <<'EOF'
import json, sys
f, delay, ct, wl, run, t0, t1, fsck = sys.argv[1:]
d = json.load(open(f))["device"]
print("\t".join([delay, ct, wl, run, "%.3f" % (float(t1) - float(t0)), str(d["flushes"]),
                 "%.3f" % d["flush_mean_ms"], str(d["fua_rounds"]), fsck]))
EOF
}

for delay in ${DELAYS//,/ }; do
	disk_up "$delay" || { log "slowflush did not mount"; exit 1; }
	for ((run = 1; run <= RUNS; run++)); do
		# interleaved, so that a slow moment of the machine hits everyone
		for wl in replace-fsync replace-pg untar; do
			for ct in nbd file; do
				log "delay ${delay}ms run $run $wl $ct"
				measure "$delay" "$ct" "$wl" "$run" || { log "measurement failed"; exit 1; }
			done
		done
	done
	disk_down
done
rm -f "$WORK/disk/fs.img" "$TAR"

python3 - "$TSV" "$REPLACE_N" "$TAR_FILES" "$RUNS" >"$OUT/nbd.md" <<'EOF'
import csv, statistics, sys
tsv, n, files, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rows = list(csv.DictReader(open(tsv), delimiter="\t"))
groups = {}
for r in rows:
    groups.setdefault((int(r["delay_ms"]), r["workload"], r["contender"]), []).append(r)
print("# fstitch over NBD\n")
print(f"nbdkit file export over an image whose flush takes DELAY ms (slowflush);"
      f" median of {runs} runs, each until the data is durable (unmount and exit"
      f" included). replace: {n} atomic replaces of a 1 KiB file; untar: {files}"
      " files of /usr/include. 'file' is fstitch on the same image without NBD.\n")
print("| delay | workload | contender | seconds | per second | flushes | mean flush ms | FUA rounds | e2fsck |")
print("|---|---|---|---|---|---|---|---|---|")
for (delay, wl, ct), rs in sorted(groups.items()):
    sec = statistics.median(float(r["seconds"]) for r in rs)
    rate = (n if wl.startswith("replace") else files) / sec
    fl = statistics.median(int(r["flushes"]) for r in rs)
    mean = statistics.median(float(r["flush_mean_ms"]) for r in rs)
    fua = statistics.median(int(r["fua_rounds"]) for r in rs)
    ok = ",".join(sorted(set(r["fsck"] for r in rs)))
    print(f"| {delay} ms | {wl} | {ct} | {sec:.2f} | {rate:.0f} | {fl:.0f} | {mean:.2f} | {fua:.0f} | {ok} |")
print()
for delay in sorted({k[0] for k in groups}):
    f = groups.get((delay, "replace-fsync", "nbd"))
    p = groups.get((delay, "replace-pg", "nbd"))
    if f and p:
        a = statistics.median(float(r["seconds"]) for r in f)
        b = statistics.median(float(r["seconds"]) for r in p)
        print(f"- {delay} ms: patchgroups {a / b:.1f}x the replaces per second of fsync over NBD")
EOF
cat "$OUT/nbd.md"
