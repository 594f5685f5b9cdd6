# shellcheck shell=bash
# Helpers for tests/bench/fs_bench.sh: the contenders (set up, mounted,
# unmounted durably, torn down) and the recording of one measurement.
# Sourced, not run.  Needs: OUT, WORK, BIN, RAW set by the caller.
#
# A contender is a name plus five functions, named after it with '-' as '_':
#   ct_<name>_avail          print why it cannot run and return 1, or return 0
#   ct_<name>_mkfs  SIZE     make a fresh file system in the contender's image
#   ct_<name>_mount          mount it on $MNT (the daemon's pid in CT_PID)
#   ct_<name>_umount         unmount and wait until everything is on stable
#                            storage; this is the part of a timing that makes
#                            the work durable
#   ct_<name>_kill           tear down whatever is left, never failing
# Adding a contender is adding these five functions and its name to CONTENDERS.

# The durability point of every contender is the same: its image file has
# been fsync'ed after the unmount returned and the daemon exited.  For FUSE
# daemons the unmount returns before the daemon has flushed, so we wait for
# the daemon to exit; the kernel sends no syncfs to a plain FUSE daemon.

CT_PID=
MNT=
IMG=
BACK=
CT_LOG=
# seconds a daemon may take to flush and exit after its unmount
: "${BENCH_UMOUNT_TIMEOUT:=180}"
: "${BENCH_MKFS:=mke2fs}"

bench_log() { printf '%s bench: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

now() { printf '%s' "$EPOCHREALTIME"; }

# elapsed T0 T1: seconds between two now() stamps, 6 decimals
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", b - a }'; }

# --- the disk under the images ------------------------------------------------
# Every contender's image lives in DISK_DIR: $WORK itself (the bare disk),
# or the mount of tests/tools/slowflush over $WORK/slow.back, a FUSE
# passthrough that delays each fsync/fdatasync of a file by DISK_MS and
# counts them.  fstitch and fuse2fs use the image file; the kernel
# contenders loop-mount it, and the loop driver turns the block layer's
# cache flush into an fsync of that file, so every contender pays the same
# delay per flush.  This VM's own flush is far faster than a real disk's
# (a SATA SSD without power-loss protection takes 1 to 5 ms, a rotating
# disk 8 to 15): hence the emulation, said so in the report.
DISK_DIR=
DISK_MS=0
DISK_KIND=bare
DISK_PID=
DISK_MNT=
DISK_F0=

# disk_up MS: put the images on a disk whose flush takes MS ms (0: the bare
# disk; sf0: slowflush without delay).
disk_up() {
	local ms=$1 sf=$BUILD/tests/tools/slowflush
	DISK_MS=${ms#sf}
	if [ "$ms" = 0 ]; then
		DISK_KIND=bare DISK_DIR=$WORK
		return 0
	fi
	DISK_KIND=slowflush
	if [ ! -x "$sf" ]; then
		bench_log "$sf is not built: no emulated disk"
		return 1
	fi
	DISK_MNT=$WORK/slow.mnt
	mkdir -p "$WORK/slow.back" "$DISK_MNT"
	"$sf" $((DISK_MS * 1000)) "$WORK/slow.back" "$DISK_MNT" \
		</dev/null >>"$RAW/logs/slowflush.log" 2>&1 3>&- &
	DISK_PID=$!
	local _
	for _ in $(seq 200); do
		mountpoint -q "$DISK_MNT" && { DISK_DIR=$DISK_MNT; return 0; }
		kill -0 "$DISK_PID" 2>/dev/null || break
		sleep 0.05
	done
	bench_log "slowflush did not mount (log: raw/logs/slowflush.log)"
	disk_down
	return 1
}

disk_down() {
	[ -n "$DISK_PID" ] || return 0
	fusermount3 -u "$DISK_MNT" 2>/dev/null || fusermount3 -uz "$DISK_MNT" 2>/dev/null
	wait "$DISK_PID" 2>/dev/null
	DISK_PID=
	rm -rf "$WORK/slow.back"
	DISK_DIR=$WORK
}

# disk_counters: "FLUSHES REAL_US" so far (slowflush's counters)
disk_counters() {
	local f u
	f=$(getfattr --absolute-names --only-values -n user.slowflush.flushes "$DISK_MNT" 2>/dev/null) &&
		u=$(getfattr --absolute-names --only-values -n user.slowflush.real_us "$DISK_MNT" 2>/dev/null) &&
		printf '%s %s' "$f" "$u"
}
disk_flushes_start() {
	DISK_F0=
	[ -n "$DISK_PID" ] && DISK_F0=$(disk_counters)
	return 0
}
# disk_flushes_taken: ',"flushes":N,"real_flush_s":S' for the record: the
# flushes since disk_flushes_start and the host's own time in them
disk_flushes_taken() {
	local f1 u1
	[ -n "$DISK_F0" ] || return 0
	read -r f1 u1 <<<"$(disk_counters)" || return 0
	[ -n "$u1" ] || return 0
	printf ',"flushes":%d,"real_flush_s":%s' $((f1 - ${DISK_F0% *})) \
		"$(awk -v a="${DISK_F0#* }" -v b="$u1" 'BEGIN { printf "%.6f", (b - a) / 1e6 }')"
}

ct_id() { printf '%s' "${1//-/_}"; }

# ct_use NAME: point IMG, MNT, BACK, CT_LOG at NAME's files
ct_use() {
	local id
	id=$(ct_id "$1")
	IMG=${DISK_DIR:-$WORK}/$1.img
	MNT=$WORK/$1.mnt
	BACK=$WORK/$1.back
	CT_LOG=$RAW/logs/$1.log
	mkdir -p "$MNT" "$RAW/logs"
	CT_NAME=$1
	CT_FN=$id
}

ct() {
	local op=$1
	shift
	"ct_${CT_FN}_$op" "$@"
}

# mkfs_image PATH SIZE: a stock ext2 image, flushed so that the writes of
# mkfs itself are never counted in a later timing.
mkfs_image() {
	rm -f "$1"
	truncate -s "$2" "$1" || return 1
	if [ "$BENCH_MKFS" = fstitch-mkfs ] && [ -x "$BIN/fstitch-mkfs" ]; then
		"$BIN/fstitch-mkfs" -q -F "$1" >>"$CT_LOG" 2>&1 || return 1
	else
		mke2fs -q -F -t ext2 "$1" >>"$CT_LOG" 2>&1 || return 1
	fi
	sync "$1"
}

# mkfs_ext3 PATH SIZE: a stock ext3 image (mke2fs -t ext3: a JBD2 journal,
# no extents), flushed like mkfs_image.  The journaled contenders (fstitch
# in its journal modes, the kernel's ext3, fuse2fs-ext3) all get this one.
mkfs_ext3() {
	rm -f "$1"
	truncate -s "$2" "$1" || return 1
	mke2fs -q -F -t ext3 "$1" >>"$CT_LOG" 2>&1 || return 1
	sync "$1"
}

# wait_mounted DIR PID: until DIR is a mount point, or PID died (1), or 20 s.
wait_mounted() {
	local _
	for _ in $(seq 400); do
		mountpoint -q "$1" && return 0
		if [ -n "$2" ] && ! kill -0 "$2" 2>/dev/null; then
			bench_log "$CT_NAME: daemon exited before mounting (log: $CT_LOG)"
			return 1
		fi
		sleep 0.05
	done
	bench_log "$CT_NAME: not mounted after 20 s (log: $CT_LOG)"
	return 1
}

# nap SECONDS: sleep without starting a process, for the polls inside a
# timed unmount.  sleep(1) is a fork and an exec: `sleep 0.005` took 10.6
# ms a look here, which made a FUSE contender's unmount (about 30 ms on
# the bare disk) look up to 10 ms longer than the kernel's, which has no
# daemon to wait for.  read(1)'s timeout on a pipe that no one writes to
# takes 1.2 ms for 1 ms.
nap() {
	[ -n "${NAP_FD:-}" ] || exec {NAP_FD}<> <(:)
	read -r -t "$1" -u "$NAP_FD" _ || :
}

# wait_daemon PID: wait for a daemon we started to exit, at most
# BENCH_UMOUNT_TIMEOUT seconds, then kill it (status 1).
wait_daemon() {
	local pid=$1 rc deadline
	[ -n "$pid" ] || return 0
	# Poll instead of a watchdog process: with a second background child,
	# bash's `wait PID` sometimes blocked until that child ended, long after
	# the daemon had exited (seen as flushes of exactly the timeout).
	deadline=$((SECONDS + BENCH_UMOUNT_TIMEOUT))
	while kill -0 "$pid" 2>/dev/null; do
		if [ $SECONDS -ge $deadline ]; then
			kill -9 "$pid" 2>/dev/null
			bench_log "$CT_NAME: daemon still running ${BENCH_UMOUNT_TIMEOUT}s after unmount, killed"
			wait "$pid" 2>/dev/null
			return 1
		fi
		nap 0.001
	done
	wait "$pid"
	rc=$?
	[ $rc -lt 128 ] || { bench_log "$CT_NAME: daemon killed on unmount"; return 1; }
	[ $rc -eq 0 ] || { bench_log "$CT_NAME: daemon exited with $rc"; return 1; }
	return 0
}

# fuse_start CMD...: start a FUSE daemon in the foreground mode, in the
# background of this shell, and wait until $MNT is mounted.
fuse_start() {
	"$@" </dev/null >>"$CT_LOG" 2>&1 3>&- &
	CT_PID=$!
	wait_mounted "$MNT" "$CT_PID" || { fuse_kill; return 1; }
}

# fuse_stop: the durable unmount of a FUSE contender.
# The unmount is retried while it fails with EBUSY: the kernel keeps the
# mount busy until the daemon has answered the RELEASE of every file closed
# before, and a slow daemon (fuse2fs after a 79k-file tar) can be thousands
# of RELEASEs behind when the workload exits.  That wait is the daemon's
# work, so it stays in the timing.
fuse_stop() {
	local rc=0 err deadline=$((SECONDS + BENCH_UMOUNT_TIMEOUT))
	while ! err=$(fusermount3 -u "$MNT" 2>&1); do
		case $err in
		*busy*) [ $SECONDS -lt $deadline ] && { nap 0.005; continue; } ;;
		esac
		printf '%s\n' "$err" >>"$CT_LOG"
		rc=1
		break
	done
	if [ $rc -ne 0 ]; then
		bench_log "$CT_NAME: unmount failed (log: $CT_LOG)"
		return 1
	fi
	wait_daemon "$CT_PID" || rc=1
	CT_PID=
	return $rc
}

fuse_kill() {
	fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null
	if [ -n "$CT_PID" ]; then
		kill "$CT_PID" 2>/dev/null
		sleep 0.2
		kill -9 "$CT_PID" 2>/dev/null
		wait "$CT_PID" 2>/dev/null
	fi
	CT_PID=
	return 0
}

kernel_kill() {
	local d
	for d in "$@"; do
		mountpoint -q "$d" || continue
		umount "$d" 2>/dev/null || umount -l "$d" 2>/dev/null
	done
	return 0
}

# --- fstitch, one contender per consistency mode -----------------------------

fstitch_avail() {
	if [ ! -x "$BIN/fstitch-mount" ]; then
		echo "$BIN/fstitch-mount is not built"
		return 1
	fi
	return 0
}

# Each fstitch mount writes its engine counters after the final flush
# (-o statsfile, as fstitch-stat --json prints them) to $WORK/NAME.final.json;
# the daemon removes a file left by an earlier mount when it starts.
fstitch_mount() {
	# shellcheck disable=SC2086 # BENCH_FSTITCH_OPTS is a list of words
	fuse_start "$BIN/fstitch-mount" -f -o "consistency=$1" \
		-o "statsfile=$WORK/$CT_NAME.final.json" \
		${BENCH_FSTITCH_OPTS:-} "$IMG" "$MNT"
}

ct_fstitch_su_avail() { fstitch_avail; }
ct_fstitch_su_mkfs() { mkfs_image "$IMG" "$1"; }
ct_fstitch_su_mount() { fstitch_mount softupdates; }
ct_fstitch_su_umount() { fuse_stop && sync "$IMG"; }
ct_fstitch_su_kill() { fuse_kill; }

ct_fstitch_none_avail() { fstitch_avail; }
ct_fstitch_none_mkfs() { mkfs_image "$IMG" "$1"; }
ct_fstitch_none_mount() { fstitch_mount none; }
ct_fstitch_none_umount() { fuse_stop && sync "$IMG"; }
ct_fstitch_none_kill() { fuse_kill; }

# The journal modes need an image with a journal: ext3, as mke2fs makes it.
# The mode is always named, never left to the image's default.
ct_fstitch_journal_avail() { fstitch_avail; }
ct_fstitch_journal_mkfs() { mkfs_ext3 "$IMG" "$1"; }
ct_fstitch_journal_mount() { fstitch_mount journal; }
ct_fstitch_journal_umount() { fuse_stop && sync "$IMG"; }
ct_fstitch_journal_kill() { fuse_kill; }

ct_fstitch_jdata_avail() { fstitch_avail; }
ct_fstitch_jdata_mkfs() { mkfs_ext3 "$IMG" "$1"; }
ct_fstitch_jdata_mount() { fstitch_mount journal-data; }
ct_fstitch_jdata_umount() { fuse_stop && sync "$IMG"; }
ct_fstitch_jdata_kill() { fuse_kill; }

# --- fuse2fs (e2fsprogs, libfuse2) -------------------------------------------

ct_fuse2fs_avail() {
	command -v fuse2fs >/dev/null || { echo "fuse2fs is not installed"; return 1; }
	return 0
}
ct_fuse2fs_mkfs() { mkfs_image "$IMG" "$1"; }
ct_fuse2fs_mount() { fuse_start fuse2fs "$IMG" "$MNT" -f; }
ct_fuse2fs_umount() { fuse_stop && sync "$IMG"; }
ct_fuse2fs_kill() { fuse_kill; }

# fuse2fs on the ext3 image of the journaled contenders.  fuse2fs 1.47
# mounts it but never writes the journal (it says so in its log): its
# fsync is a plain flush of the blocks, with no crash guarantee from a
# journal.  The same image, so the same allocation and block size.
ct_fuse2fs_ext3_avail() { ct_fuse2fs_avail; }
ct_fuse2fs_ext3_mkfs() { mkfs_ext3 "$IMG" "$1"; }
ct_fuse2fs_ext3_mount() { fuse_start fuse2fs "$IMG" "$MNT" -f; }
ct_fuse2fs_ext3_umount() { fuse_stop && sync "$IMG"; }
ct_fuse2fs_ext3_kill() { fuse_kill; }

# --- libfuse's passthrough_ll over a kernel ext2 loop mount -------------------
# The floor for any FUSE file system: FUSE's own cost on top of the kernel's
# file system, on an image of the same size on the same disk.

# Built at bench time into $OUT, never committed.  Set here, not in _avail,
# which runs in a command substitution.
PASSTHROUGH_LL=$OUT/passthrough_ll

ct_passthrough_ll_avail() {
	local src=/usr/share/doc/libfuse3-dev/examples/passthrough_ll.c
	[ -x "$PASSTHROUGH_LL" ] && return 0
	if [ ! -e "$src" ] && [ -e "$src.gz" ]; then
		gzip -dc "$src.gz" >"$OUT/passthrough_ll.c" || return 1
		src=$OUT/passthrough_ll.c
	fi
	if [ ! -e "$src" ]; then
		echo "libfuse3-dev example passthrough_ll.c not found"
		return 1
	fi
	# shellcheck disable=SC2046 # pkg-config prints a list of words
	if ! cc -O2 -o "$PASSTHROUGH_LL" "$src" \
		$(pkg-config --cflags --libs fuse3) >"$OUT/passthrough_ll.build.log" 2>&1; then
		echo "passthrough_ll.c does not compile (see $OUT/passthrough_ll.build.log)"
		return 1
	fi
	return 0
}
# passthrough_ll keeps an O_PATH descriptor for every inode the kernel
# remembers, and closes it only when the kernel forgets the inode.  Where
# the open-file hard limit is below the size of a workload (20000 here, and
# no CAP_SYS_RESOURCE to raise it), it would fail with EMFILE.  So while it
# runs, a watcher counts its descriptors and, past half the limit, writes 2
# to /proc/sys/vm/drop_caches: the kernel drops unused dentries and inodes,
# sends FORGETs, and passthrough_ll closes their descriptors.  This is a
# handicap for passthrough_ll (its later lookups miss the kernel's caches;
# the backing ext2's clean caches go too), counted per measurement in
# "cache_drops" and stated in the report.  Other contenders never see it.
PT_WATCH=
# where the watcher appends one line per drop: the count at that moment
PT_DROPS=
pt_watch_start() {
	local pid=$1 lim=$((${NOFILE:-1024} / 2))
	PT_DROPS=$WORK/passthrough_ll.drops
	[ -w /proc/sys/vm/drop_caches ] || return 0
	(
		trap - EXIT INT TERM
		shopt -s nullglob
		while kill -0 "$pid" 2>/dev/null; do
			fds=("/proc/$pid/fd/"*)
			if [ ${#fds[@]} -gt "$lim" ]; then
				echo 2 >/proc/sys/vm/drop_caches &&
					echo "${#fds[@]}" >>"$PT_DROPS"
			fi
			sleep 0.2
		done
	) </dev/null >/dev/null 2>&1 3>&- &
	PT_WATCH=$!
}
pt_watch_stop() {
	[ -n "$PT_WATCH" ] || return 0
	kill "$PT_WATCH" 2>/dev/null
	wait "$PT_WATCH" 2>/dev/null
	PT_WATCH=
	return 0
}
# drops_taken: the number of cache drops since the last drops_reset
drops_reset() { [ -z "$PT_DROPS" ] || rm -f "$PT_DROPS"; }
drops_taken() {
	if [ -n "$PT_DROPS" ] && [ -s "$PT_DROPS" ]; then
		wc -l <"$PT_DROPS"
	else
		echo 0
	fi
}

ct_passthrough_ll_mkfs() { mkfs_image "$IMG" "$1"; }
ct_passthrough_ll_mount() {
	mkdir -p "$BACK"
	mount -o loop -t ext2 "$IMG" "$BACK" 2>>"$CT_LOG" || return 1
	fuse_start "$PASSTHROUGH_LL" -f -o "source=$BACK" "$MNT" ||
		{ umount "$BACK"; return 1; }
	pt_watch_start "$CT_PID"
}
ct_passthrough_ll_umount() {
	fuse_stop || { pt_watch_stop; return 1; }
	pt_watch_stop
	umount "$BACK" 2>>"$CT_LOG" || return 1
	sync "$IMG"
}
ct_passthrough_ll_kill() { fuse_kill; pt_watch_stop; kernel_kill "$BACK"; }

# --- the kernel's ext2 (ext4's driver in ext2 mode), loop-mounted ------------

ct_kernel_ext2_avail() {
	grep -qw ext2 /proc/filesystems || modprobe ext2 2>/dev/null ||
		grep -qw ext4 /proc/filesystems ||
		{ echo "the kernel has no ext2 or ext4 driver"; return 1; }
	return 0
}
ct_kernel_ext2_mkfs() { mkfs_image "$IMG" "$1"; }
ct_kernel_ext2_mount() {
	mount -o loop -t ext2 "$IMG" "$MNT" 2>>"$CT_LOG"
}
ct_kernel_ext2_umount() { umount "$MNT" 2>>"$CT_LOG" && sync "$IMG"; }
ct_kernel_ext2_kill() { kernel_kill "$MNT"; }

# --- the kernel's ext3 (ext4's driver), loop-mounted ---------------------------
# data=ordered (ext3's default: file data before the metadata that exposes
# it) and data=journal (file data through the journal too), the kernel's
# twins of fstitch's journal and journal-data.

ct_kernel_ext3_avail() {
	grep -qw ext3 /proc/filesystems || modprobe ext3 2>/dev/null ||
		grep -qw ext4 /proc/filesystems ||
		{ echo "the kernel has no ext3 or ext4 driver"; return 1; }
	return 0
}
ct_kernel_ext3_mkfs() { mkfs_ext3 "$IMG" "$1"; }
ct_kernel_ext3_mount() {
	mount -o loop,data=ordered -t ext3 "$IMG" "$MNT" 2>>"$CT_LOG"
}
ct_kernel_ext3_umount() { umount "$MNT" 2>>"$CT_LOG" && sync "$IMG"; }
ct_kernel_ext3_kill() { kernel_kill "$MNT"; }

ct_kernel_ext3_dj_avail() { ct_kernel_ext3_avail; }
ct_kernel_ext3_dj_mkfs() { mkfs_ext3 "$IMG" "$1"; }
ct_kernel_ext3_dj_mount() {
	mount -o loop,data=journal -t ext3 "$IMG" "$MNT" 2>>"$CT_LOG"
}
ct_kernel_ext3_dj_umount() { umount "$MNT" 2>>"$CT_LOG" && sync "$IMG"; }
ct_kernel_ext3_dj_kill() { kernel_kill "$MNT"; }

# ct_destroy: remove the contender's image once a measurement is done.
ct_destroy() {
	ct kill
	rm -f "$IMG"
}

# ct_fsck: e2fsck -fn of the image, printed as clean|errors (with the exit
# status), so a contender that corrupts its file system is visible; the log
# of a check that found errors is kept under its own name.
ct_fsck() {
	local rc
	e2fsck -fn "$IMG" >"$RAW/logs/$CT_NAME.fsck.log" 2>&1
	rc=$?
	if [ $rc -eq 0 ]; then
		printf 'clean'
	else
		# kept: the next check of this contender rewrites the log
		cp "$RAW/logs/$CT_NAME.fsck.log" \
			"$RAW/logs/$CT_NAME.fsck-$EPOCHSECONDS-$rc.log" 2>/dev/null
		printf 'exit-%d' "$rc"
	fi
}

# --- recording ---------------------------------------------------------------

# json_str S: S as a JSON string
json_str() {
	local s=$1
	s=${s//\\/\\\\}
	s=${s//\"/\\\"}
	s=${s//$'\n'/ }
	s=${s//$'\t'/ }
	printf '"%s"' "$s"
}

loadavg() { cut -d' ' -f1 /proc/loadavg; }

# record WORKLOAD VARIANT CONTENDER RUN STATUS WORK_S FLUSH_S OPS NOTE [FSCK]
# One measurement, one line of $RAW/results.jsonl.  WORK_S is the workload
# itself, FLUSH_S the durable unmount that follows it; the time that counts
# is their sum.  OPS is the number of operations (files, updates,
# transactions) the workload did, for rates.  REC_EXTRA, when set, is
# more members (",\"name\":value") for this record only.
record() {
	local total
	total=$(awk -v a="$6" -v b="$7" 'BEGIN { printf "%.6f", a + b }')
	printf '{"workload":%s,"variant":%s,"contender":%s,"run":%s,"status":%s,"work_s":%s,"flush_s":%s,"total_s":%s,"ops":%s,"note":%s,"fsck":%s,"load":%s,"disk":"%s","flush_ms":%s%s}\n' \
		"$(json_str "$1")" "$(json_str "$2")" "$(json_str "$3")" "$4" \
		"$(json_str "$5")" "$6" "$7" "$total" "${8:-0}" \
		"$(json_str "${9:-}")" "$(json_str "${10:-}")" "$(loadavg)" \
		"$DISK_KIND" "$DISK_MS" "${REC_EXTRA:-}" >>"$RAW/results.jsonl"
	bench_log "$1/$2 $3 run $4 ($DISK_KIND ${DISK_MS}ms): $5 total ${total}s (work $6 + flush $7)${REC_EXTRA:+ $REC_EXTRA}${9:+ - $9}"
	REC_EXTRA=
}

# skip_note CONTENDER REASON: a contender that could not run at all.
skip_note() {
	printf '{"contender":%s,"reason":%s}\n' "$(json_str "$1")" \
		"$(json_str "$2")" >>"$RAW/skipped.jsonl"
	bench_log "skipping $1: $2"
}
