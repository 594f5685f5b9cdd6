# Shared bats helpers for the fstitch suites.  Load from a .bats file with
#
#	load common
#	setup() { common_setup; }
#	teardown() { common_teardown; }
#
# What is here (keep it generic; command-specific helpers live in the .bats
# file that needs them):
#
#   Paths       FSTITCH_ROOT, FSTITCH_BUILD (absolute; from $FSTITCH_BUILD,
#               default "build"), FSTITCH_BIN, FSTITCH_TOOLS, fstitch_cmd NAME
#   Scratch     SCRATCH: an empty directory per test under $BATS_TEST_TMPDIR
#   Images      make_image, make_stock_image, file_sum
#   fsck        fsck_run IMAGE: as a boot's e2fsck -p would find it (sets
#               FSCK_CLASS=clean|benign|dangerous,
#               FSCK_OUT, FSCK_WHY; the rules are tests/support/fsckclass.h's,
#               shared with the C tests), fsck_classify IMAGE (prints the class),
#               assert_fsck_clean, assert_fsck_not_dangerous
#   Mounts      track_mount, wait_for_mount, wait_for_unmount, kernel_mount,
#               kernel_umount, fuse_unmount, unmount_all (run by
#               common_teardown)
#   Daemons     fstitch_mount_start, fstitch_mount_stop, fstitch_mount_reap,
#               hold_start, hold_wait, hold_release, pg_setup, pg_last_id,
#               pg_teardown
#   Pipes       broken_pipe
#   Crashes     crash_check, assert_crash_pass, assert_crash_fail,
#               crash_final_image, crash_leftover_unmount,
#               fsck_not_dangerous, flush_point, wait_free_inodes, and the
#               daemon-level crash workload (crash_workload...)
#   Journals    images_equal_but_wtime, journal_replay_check,
#               need_kernel_ext3, kernel_ext3_read

# `run -N` and `run --separate-stderr` need 1.5; saying so silences BW02.
bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

FSTITCH_ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
FSTITCH_BUILD=${FSTITCH_BUILD:-build}
case $FSTITCH_BUILD in
/*) ;;
*) FSTITCH_BUILD=$FSTITCH_ROOT/$FSTITCH_BUILD ;;
esac
FSTITCH_BIN=$FSTITCH_BUILD/bin
FSTITCH_TOOLS=$FSTITCH_BUILD/tests/tools
export FSTITCH_ROOT FSTITCH_BUILD FSTITCH_BIN FSTITCH_TOOLS

# e2fsprogs live in /sbin, which a non-login PATH may lack.
case ":$PATH:" in
*:/usr/sbin:*) ;;
*) PATH=$PATH:/usr/sbin:/sbin ;;
esac

# fstitch_cmd NAME: print the path of the built command NAME, or fail the test
# with a message saying it was not built (a missing binary must never look
# like a pass).
fstitch_cmd() {
	local p=$FSTITCH_BIN/$1
	if [ ! -x "$p" ]; then
		echo "$1 is not built: $p missing (run make BUILD=...)" >&2
		return 1
	fi
	printf '%s\n' "$p"
}

# common_setup: per-test scratch directory in $SCRATCH, and a fresh list of
# mounts to undo in teardown.
common_setup() {
	SCRATCH=$BATS_TEST_TMPDIR/scratch
	rm -rf "$SCRATCH"
	mkdir -p "$SCRATCH"
	FSTITCH_MOUNTS=$BATS_TEST_TMPDIR/mounts
	: >"$FSTITCH_MOUNTS"
	export SCRATCH FSTITCH_MOUNTS
}

# common_teardown: unmount everything this test mounted.  Always safe to call.
common_teardown() {
	unmount_all
}

# ---------------------------------------------------------------- images

# make_image PATH SIZE [fstitch-mkfs options...]: a fresh fstitch-mkfs image
# (quiet, forced).  SIZE is anything fstitch-mkfs accepts ("16M").
make_image() {
	local img=$1 size=$2 mkfs
	shift 2
	mkfs=$(fstitch_cmd fstitch-mkfs) || return 1
	"$mkfs" -q -F "$@" "$img" "$size"
}

# fs_state IMAGE: dumpe2fs's "Filesystem state" value.
fs_state() {
	dumpe2fs -h "$1" 2>/dev/null | sed -n 's/^Filesystem state: *//p'
}

# make_stock_image PATH SIZE [mke2fs options...]: the same with stock mke2fs,
# for tests that must not depend on fstitch-mkfs.  The type is ext2 unless
# the options name another with -t.
make_stock_image() {
	local img=$1 size=$2 type=(-t ext2) a
	shift 2
	for a in "$@"; do
		[ "$a" = -t ] && type=()
	done
	rm -f "$img"
	truncate -s "$size" "$img" && mke2fs -q -F "${type[@]}" "$@" "$img" >/dev/null
}

# file_sum FILE: print the SHA-256 of FILE (to prove something was not
# written).
file_sum() {
	sha256sum "$1" | cut -d' ' -f1
}

# ---------------------------------------------------------------- fsck

# fsck_run IMAGE: judge IMAGE after a crash (design.md §3): e2fsck -fn
# on it, and when that finds errors, e2fsck -fy on a copy and e2fsck -fn
# on the copy after it; the fsckclass tool judges the transcript of these
# runs by the rules the C tests use too (tests/support/fsckclass.h):
#   clean      e2fsck -fn IMAGE finds nothing (exit 0)
#   benign     e2fsck -fn found only leaks (an unattached inode, "-"
#              bitmap differences, counts too high), nothing soft updates
#              promise never to leave (a "+" bitmap difference; a link
#              count, i_blocks or attribute-block reference count lower
#              than the truth; an entry naming a deleted or unused inode;
#              a corrupted directory), and e2fsck -fy repaired it all
#   dangerous  anything else
# Sets FSCK_CLASS (the word), FSCK_OUT (a file with the transcript: each
# run's output after a line "--- e2fsck -fn: exit N") and FSCK_WHY (the
# reasons it is dangerous, a line each).  Returns 0 whatever the class,
# and 1 (class dangerous) when the judge itself fails; call it directly,
# not in $(...), to keep the variables.  With OUT (fsck_run IMAGE OUT),
# FSCK_OUT is that file, overwritten, rather than a new temporary one.
fsck_run() {
	local img=$1 step=check rc=0 copy= out why
	if [ -n "${2:-}" ]; then
		FSCK_OUT=$2
	else
		FSCK_OUT=$(mktemp "${BATS_TEST_TMPDIR:-/tmp}/fsck.XXXXXX")
	fi
	out=$FSCK_OUT.run
	: >"$FSCK_OUT"
	# the steps in fsckclass.h's order: check, then (exit 1 to 7) repair
	# on a copy, then (exit 0 to 3) after
	while [ -n "$step" ]; do
		# (bats runs with errexit: keep the status without tripping it)
		case $step in
		check) e2fsck -fn "$img" >"$out" 2>&1 && rc=0 || rc=$? ;;
		repair)
			copy=$(mktemp "${BATS_TEST_TMPDIR:-/tmp}/repair.XXXXXX")
			cp "$img" "$copy"
			e2fsck -fy "$copy" >"$out" 2>&1 && rc=0 || rc=$?
			;;
		after) e2fsck -fn "$copy" >"$out" 2>&1 && rc=0 || rc=$? ;;
		esac
		{
			case $step in
			check) echo "--- e2fsck -fn: exit $rc" ;;
			repair) echo "--- e2fsck -fy: exit $rc" ;;
			after) echo "--- e2fsck -fn after -fy: exit $rc" ;;
			esac
			# (a last line without its newline would swallow the next
			# header)
			sed -e '$a\' "$out"
		} >>"$FSCK_OUT"
		case $step:$rc in
		check:[1-7]) step=repair ;;
		repair:[0-3]) step=after ;;
		*) step= ;;
		esac
	done
	rm -f "$out" ${copy:+"$copy"}
	why=$("$FSTITCH_TOOLS/fsckclass" <"$FSCK_OUT" 2>&1) && rc=0 || rc=$?
	case $rc in
	0) FSCK_CLASS=clean ;;
	1) FSCK_CLASS=benign ;;
	2) FSCK_CLASS=dangerous ;;
	*)
		FSCK_CLASS=dangerous
		FSCK_WHY="fsckclass failed (exit status $rc): $why"
		echo "fsck_run: $FSCK_WHY" >&2
		return 1
		;;
	esac
	# the first line is the class
	FSCK_WHY=${why#*$'\n'}
	[ "$FSCK_WHY" != "$why" ] || FSCK_WHY=
	return 0
}

# fsck_classify IMAGE: print fsck_run's class (for $(...) and `run`).
fsck_classify() {
	fsck_run "$1"
	echo "$FSCK_CLASS"
}

# assert_fsck_clean IMAGE: fail, showing e2fsck's output, unless clean.
assert_fsck_clean() {
	fsck_run "$1"
	if [ "$FSCK_CLASS" != clean ]; then
		echo "e2fsck -fn $1: $FSCK_CLASS" >&2
		cat "$FSCK_OUT" >&2
		return 1
	fi
}

# assert_fsck_not_dangerous IMAGE: fail unless clean or benign.
assert_fsck_not_dangerous() {
	fsck_run "$1"
	if [ "$FSCK_CLASS" = dangerous ]; then
		echo "e2fsck -fn $1: dangerous because of:" >&2
		printf '%s\n' "$FSCK_WHY" >&2
		echo "full output:" >&2
		cat "$FSCK_OUT" >&2
		return 1
	fi
}

# ---------------------------------------------------------------- mounts

# track_mount DIR KIND: remember that DIR is mounted (KIND is "kernel" or
# "fuse") so that unmount_all undoes it even when the test fails.
track_mount() {
	printf '%s %s\n' "$2" "$1" >>"$FSTITCH_MOUNTS"
}

# wait_for_mount DIR [SECONDS]: wait (default 10 s) until DIR is a mount
# point.  Returns 1 on timeout.
wait_for_mount() {
	local dir=$1 n=$((${2:-10} * 20))
	while [ $n -gt 0 ]; do
		mountpoint -q "$dir" && return 0
		sleep 0.05
		n=$((n - 1))
	done
	echo "wait_for_mount: '$dir' not mounted after ${2:-10}s" >&2
	return 1
}

# wait_for_unmount DIR [SECONDS]: the reverse.
wait_for_unmount() {
	local dir=$1 n=$((${2:-10} * 20))
	while [ $n -gt 0 ]; do
		mountpoint -q "$dir" || return 0
		sleep 0.05
		n=$((n - 1))
	done
	echo "wait_for_unmount: '$dir' still mounted after ${2:-10}s" >&2
	return 1
}

# kernel_mount IMAGE DIR [OPTS]: loop-mount IMAGE as ext2 with the kernel
# (the ext4 driver serves ext2 here), tracked for teardown.
kernel_mount() {
	local img=$1 dir=$2 opts=${3:-}
	mkdir -p "$dir"
	mount -t ext2 -o "loop${opts:+,$opts}" "$img" "$dir" || return 1
	track_mount "$dir" kernel
}

# kernel_umount DIR
kernel_umount() {
	umount "$1"
}

# fuse_unmount DIR: unmount a FUSE mount; a dead daemon's ENOTCONN mount is
# not a mount point to mountpoint(1) but still needs the lazy form.
fuse_unmount() {
	fusermount3 -u "$1" 2>/dev/null || fusermount3 -uz "$1" 2>/dev/null || true
}

# NS_DROP_COPIES: shell code (for sh or bash) to run first thing in a new
# mount namespace (unshare -m).  The namespace starts with a copy of every
# mount on the machine, and a copy keeps its file system alive after its
# owner unmounts it: a kernel mount goes on holding its loop device (and
# what it has not written yet), a FUSE mount its daemon.  Tests running at
# the same time would see that.  This detaches the copies of loop-device
# and FUSE mounts, so that their owners' unmounts end them as before; the
# window left is the moment between unshare and this.
# shellcheck disable=SC2016 # expanded in the namespace
NS_DROP_COPIES='awk '\''$1 ~ /^\/dev\/loop/ || $3 ~ /^fuse/ { print $2 }'\'' /proc/self/mounts |
	tac | while read -r m; do umount -l "$m" 2>/dev/null || true; done'

# unmount_all: undo every tracked mount, newest first.  Never fails.
unmount_all() {
	local kind dir
	[ -n "${FSTITCH_MOUNTS:-}" ] && [ -s "$FSTITCH_MOUNTS" ] || return 0
	tac "$FSTITCH_MOUNTS" | while read -r kind dir; do
		case $kind in
		fuse) fuse_unmount "$dir" ;;
		*)
			if mountpoint -q "$dir"; then
				umount "$dir" 2>/dev/null || umount -l "$dir" 2>/dev/null
			fi
			;;
		esac
	done
	: >"$FSTITCH_MOUNTS"
	return 0
}

# ---------------------------------------------------------------- fstitch-mount
# (appended by the mount engineer)
#
#   fstitch_mount_start IMAGE DIR [fstitch-mount options...]
#       Start the daemon in the foreground (-f) with fd 3 closed, wait until
#       DIR is a mount point, track it for teardown.  Sets FSTITCH_MOUNT_PID;
#       the daemon's stderr goes to FSTITCH_MOUNT_LOG.  Fails, showing the
#       log, if the daemon exits before the mount is live.  Call it directly,
#       never under `run` (the daemon must be a child of the test's shell).
#   fstitch_mount_stop DIR
#       Unmount DIR (unless its daemon already has) and wait for the
#       daemon last started on it; returns that daemon's exit status (0:
#       everything was flushed), also when it had exited already.
#   fstitch_mount_reap
#       Wait for every daemon this test started (after unmount_all; the
#       suites call it from teardown after common_teardown), letting go
#       one that hold_start holds.  A daemon still running
#       FSTITCH_DAEMON_TIMEOUT seconds (default 120) after its unmount is
#       killed and fails the test with a message naming its mount point;
#       fstitch_mount_stop bounds its wait the same way (status 124).

fstitch_mount_start() {
	local img=$1 dir=$2 bin n
	shift 2
	bin=$(fstitch_cmd fstitch-mount) || return 1
	mkdir -p "$dir"
	FSTITCH_MOUNT_LOG=$(mktemp --suffix=.log "${BATS_TEST_TMPDIR:-/tmp}/fstitch-mount.XXXXXX") ||
		return 1
	"$bin" -f "$@" "$img" "$dir" 3>&- </dev/null >>"$FSTITCH_MOUNT_LOG" 2>&1 &
	FSTITCH_MOUNT_PID=$!
	printf '%s %s\n' "$FSTITCH_MOUNT_PID" "$dir" >>"${BATS_TEST_TMPDIR:-/tmp}/fstitch-daemons"
	track_mount "$dir" fuse
	for ((n = 0; n < 400; n++)); do
		mountpoint -q "$dir" && return 0
		if ! kill -0 "$FSTITCH_MOUNT_PID" 2>/dev/null; then
			echo "fstitch_mount_start: daemon exited before mounting:" >&2
			cat "$FSTITCH_MOUNT_LOG" >&2
			return 1
		fi
		sleep 0.05
	done
	echo "fstitch_mount_start: '$dir' not mounted after 20s" >&2
	cat "$FSTITCH_MOUNT_LOG" >&2
	return 1
}

# _fstitch_mount_wait PID: wait for a daemon, child or not; print nothing
# unless it hangs, return its exit status.  A daemon that is not a child of
# this shell (or was waited for already) has no status to give: 0 once it
# is gone.  Either way the wait is bounded: a daemon still there after
# FSTITCH_DAEMON_TIMEOUT seconds (default 120) is killed (TERM, then KILL
# 5 seconds later), a message says so on stderr, and the status is 124,
# so that a daemon that hangs fails the test rather than stalling the run.
_fstitch_mount_wait() {
	local pid=$1 limit=${FSTITCH_DAEMON_TIMEOUT:-120} n rc
	# (bash takes a child's status as it exits, and kill -0 then fails)
	for ((n = 0; n < limit * 20; n++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "daemon $pid still running after ${limit}s; killing it:" >&2
		ps -o pid=,stat=,wchan:32=,args= -p "$pid" >&2 || true
		kill -TERM "$pid" 2>/dev/null || true
		for ((n = 0; n < 100; n++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
		kill -KILL "$pid" 2>/dev/null || true
		# (one stuck in the kernel may outlive even that: never wait on it)
		for ((n = 0; n < 100; n++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
		kill -0 "$pid" 2>/dev/null || wait "$pid" 2>/dev/null || true
		return 124
	fi
	if wait "$pid" 2>/dev/null; then
		return 0
	else
		rc=$?
	fi
	# 127: not a child of this shell, and gone
	[ $rc -eq 127 ] && return 0
	return $rc
}

fstitch_mount_stop() {
	local dir=$1 f=${BATS_TEST_TMPDIR:-/tmp}/fstitch-daemons pid= p d rc=0
	if [ -s "$f" ]; then
		while read -r p d; do
			[ "$d" = "$dir" ] && pid=$p
		done <"$f"
	fi
	if [ -z "$pid" ]; then
		echo "fstitch_mount_stop: no daemon was started on '$dir'" >&2
		return 1
	fi
	# A daemon that stopped by itself (errors=panic, SIGTERM) has unmounted
	# already; a killed one leaves a dead mount, which still needs this.
	if ! fusermount3 -u "$dir" 2>"$f.err" &&
		awk -v d="$dir" '$2 == d { f = 1 } END { exit !f }' /proc/self/mounts; then
		cat "$f.err" >&2
		return 1
	fi
	# (a child's status waits for us even after it has exited)
	_fstitch_mount_wait "$pid" || rc=$?
	# waited for: fstitch_mount_reap must not look for it again
	awk -v p="$pid" '$1 != p' "$f" >"$f.new" && mv "$f.new" "$f"
	return $rc
}

fstitch_mount_reap() {
	local pid d f=${BATS_TEST_TMPDIR:-/tmp}/fstitch-daemons rc=0 hung=0
	# a daemon still held before its final flush (hold_start, a test that
	# failed) is let go
	if [ -n "${HOLD:-}" ] && [ -e "$HOLD/held" ]; then
		timeout 5 sh -c 'echo go >"$1"' sh "$HOLD/release" || true
	fi
	[ -s "$f" ] || return 0
	while read -r pid d; do
		if kill -0 "$pid" 2>/dev/null; then
			fuse_unmount "$d"
			# its status does not matter here, a hang does
			_fstitch_mount_wait "$pid" || rc=$?
			if [ "$rc" -eq 124 ]; then
				echo "fstitch_mount_reap: the daemon on '$d' did not exit after its unmount" >&2
				hung=1
			fi
			rc=0
		fi
	done <"$f"
	: >"$f"
	return $hung
}

# hold_start: set FSTITCH_TEST_HOLD for the next daemon started, which then
# waits before its final flush until hold_release (hold_wait: until it is
# there).  Unset it once that daemon is started.
hold_start() {
	HOLD=$SCRATCH/hold
	mkdir -p "$HOLD"
	mkfifo "$HOLD/release"
	export FSTITCH_TEST_HOLD=$HOLD
}
hold_wait() {
	local n
	for ((n = 0; n < 600; n++)); do
		[ -e "$HOLD/held" ] && return 0
		sleep 0.05
	done
	echo "the daemon never reached its final flush" >&2
	return 1
}
hold_release() {
	echo go >"$HOLD/release"
}

# pg_setup: common_setup, then what the patchgroup suites (pgrun, pgdepend)
# all start from: the commands in PGRUN, PGCREATE, PGDEPEND, PGSYNC and
# PGCLOSE, the daemon's group status tool in PGSTATUS, and a fresh 32M image
# IMG mounted at MNT, which becomes the current directory.  pg_teardown
# undoes it.  pg_last_id prints the id of the newest group on the mount.
pg_setup() {
	common_setup
	PGRUN=$(fstitch_cmd pgrun)
	PGCREATE=$(fstitch_cmd pgcreate)
	PGDEPEND=$(fstitch_cmd pgdepend)
	PGSYNC=$(fstitch_cmd pgsync)
	PGCLOSE=$(fstitch_cmd pgclose)
	PGSTATUS=$FSTITCH_TOOLS/pgstatus
	IMG=$SCRATCH/fs.img
	MNT=$SCRATCH/mnt
	make_image "$IMG" 32M
	fstitch_mount_start "$IMG" "$MNT"
	cd "$MNT"
}

pg_last_id() {
	"$PGSTATUS" --summary | tr ' ' '\n' | sed -n 's/^last_id=//p'
}

pg_teardown() {
	# Out of the mount first, or unmounting it finds it busy.
	cd /
	common_teardown
	fstitch_mount_reap
}

# ---------------------------------------------------------------- pipes
# broken_pipe CMD...: run CMD with standard output a pipe whose reader has
# already gone, as at the end of a pipeline whose reader exited first, and
# with SIGPIPE at its default whatever bats was started with.  Exits as a
# shell reports CMD: its status, or 128+N when signal N killed it.
broken_pipe() {
	python3 -c '
import os, subprocess, sys
r, w = os.pipe()
os.close(r)
st = subprocess.call(sys.argv[1:], stdout=w, restore_signals=True)
sys.exit(128 - st if st < 0 else st)' "$@"
}

# ---------------------------------------------------------------- crash states
# Crash tests record a daemon run (FSTITCH_RECORD) and check its crash
# states with fstitch-crash(1).  To be neither able to miss nor to flake,
# the recording must not depend on timing (no background flush: it is
# written only where the workload asks, and at the unmount) and the check
# takes every state the crash model gives, which depend only on the log.
#
#   crash_check REC [check options] -- CHECK...
#       fstitch-crash check of REC, every state, two at once; its output
#       and exit status (1: a state failed).
#   assert_crash_pass LABEL REC [check options] -- CHECK...
#   assert_crash_fail LABEL REC [check options] -- CHECK...
#       crash_check under bats' run, and assert that every state passed
#       (all of them checked), or that one failed (checked with
#       --fail-fast: the states up to the first that fails); the summary
#       goes to the TAP output after LABEL.
#   crash_final_image REC OUT
#       Write REC's last state (every round on disk) to OUT.
#   crash_leftover_unmount
#       Unmount whatever is still mounted below $SCRATCH (fstitch-crash
#       mounts and unmounts on its own; a test that failed half way may
#       leave a mount behind).  For teardown.
#   fsck_not_dangerous
#       A CHECK for `crash_check --fsck none --no-mount`: fsck_run's
#       judgement of the state as the crash left it, by e2tool fsck-class
#       (the same steps and rules in one process: a crash check runs it
#       once per state); fails, saying why, when it is dangerous.
#   flush_point FILE
#       Have the daemon write everything it holds, now: the first fsync of
#       a file writes all that is dirty (e2_fsync), so this makes FILE, new
#       and empty, on the mount and fsyncs it.
#   wait_free_inodes MNT N
#       Wait until MNT has N free inodes.  The daemon frees a removed inode
#       only once the kernel forgets it, and forgets come apart from the
#       requests: a workload waits for them before its next flush point.

crash_check() {
	local rec=$1 crash
	shift
	crash=$(fstitch_cmd fstitch-crash) || return 1
	export -f fsck_run fsck_not_dangerous images_equal_but_wtime journal_replay_check \
		kernel_ext3_read
	# the recording before "--", the check after it
	local opts=() tmp=${TMPDIR:-/tmp}
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		opts+=("$1")
		shift
	done
	# Its copy of each state (and e2fsck's repair of it, and the mount
	# point) on a tmpfs where there is one, as for the C tests
	# (e2t_tmpdir): e2fsck fsyncs the image it opens, so on a disk every
	# state would be written out and waited for.
	# tests/run.sh names a directory of its own there (E2T_TMPDIR).
	[ -d /dev/shm ] && [ -w /dev/shm ] && tmp=/dev/shm
	[ -z "${E2T_TMPDIR:-}" ] || tmp=$E2T_TMPDIR
	TMPDIR=$tmp "$crash" check --jobs 2 "${opts[@]}" "$rec" "$@" 3>&-
}

assert_crash_pass() {
	local label=$1
	shift
	run crash_check "$@"
	# On a failure, what the check said of each failed state is the
	# diagnosis: print it whole.
	[ "$status" -eq 0 ] ||
		fail "$(printf 'crash check exited %d:\n%s' "$status" "$output")"
	assert_line --regexp '^([0-9]+) of \1 states checked \(seed 1\), 0 failed'
	echo "# $label: ${lines[-1]}" >&3
}

assert_crash_fail() {
	local label=$1 rec=$2
	shift 2
	# One failed state is the proof: stop there.
	run -1 crash_check "$rec" --fail-fast "$@"
	assert_line --regexp '^failed states: [0-9]'
	echo "# $label: ${lines[-1]}" >&3
}

crash_final_image() {
	local crash n
	crash=$(fstitch_cmd fstitch-crash) || return 1
	n=$("$crash" states "$1" | awk '$1 == "states" { print $2 }')
	[ -n "$n" ] && "$crash" image "$1" $((n - 1)) "$2"
}

crash_leftover_unmount() {
	local m
	for m in $(awk -v s="$SCRATCH" 'index($2, s) == 1 { print $2 }' /proc/mounts); do
		fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m" 2>/dev/null || true
	done
}

fsck_not_dangerous() {
	local out rc=0
	out=$("$FSTITCH_TOOLS/e2tool" "$FSTITCH_IMAGE" fsck-class) || rc=$?
	case $rc in
	0 | 2) return 0 ;;
	# (the class, then why)
	3) printf '%s\n' "${out#*$'\n'}" ;;
	esac
	return 1
}

flush_point() {
	: >"$1" && sync "$1"
}

wait_free_inodes() {
	local n
	for ((n = 0; n < 400; n++)); do
		[ "$(stat -f -c %d "$1")" = "$2" ] && return 0
		sleep 0.05
	done
	echo "wait_free_inodes: $1 has $(stat -f -c %d "$1") free inodes after 20s, not $2" >&2
	return 1
}

# The workload of the daemon-level crash tests: metadata of every kind
# (directories, a file with an indirect block, a hard link, a symlink)
# created, renamed and removed, and a file replaced by rename.  The tree
# is in $SCRATCH/tree (and $SCRATCH/tree.tar), to compare with.
#
#   crash_workload_image IMG MNT [mke2fs options...]
#       A 4M image (CRASH_IMAGE_SIZE if set) in IMG holding the part before
#       the recording, written through a mount at MNT: the tree in x0, and v
#       holding 0.  The options go to make_stock_image (-t ext3: an image
#       with a journal).
#   crash_workload MNT
#       The recorded part, on the mount at MNT: the tree again in w1, a
#       flush point, then v replaced by rename (holding 1), w1 renamed to
#       x1 and x0 removed.  It ends once the daemon has freed what was
#       removed, so that the unmount writes the same every time.
#   crash_workload_record SOURCE MNT [fstitch-mount options...]
#       Mount SOURCE (made by crash_workload_image) at MNT with the daemon
#       recording into $SCRATCH/rec/log and no background flush or timed
#       commit, run crash_workload, unmount.
crash_workload_image() {
	make_stock_image "$1" "${CRASH_IMAGE_SIZE:-4M}" "${@:3}"
	mkdir -p "$SCRATCH/tree/a/b" "$SCRATCH/tree/c"
	seq 20 >"$SCRATCH/tree/a/f1"
	# more than 12 blocks of 1 KiB: an indirect block
	seq 8000 >"$SCRATCH/tree/a/b/big"
	ln -s ../a/f1 "$SCRATCH/tree/c/link"
	ln "$SCRATCH/tree/a/f1" "$SCRATCH/tree/c/hard"
	tar -C "$SCRATCH/tree" -cf "$SCRATCH/tree.tar" a c
	fstitch_mount_start "$1" "$2"
	mkdir "$2/x0"
	tar -xf "$SCRATCH/tree.tar" -C "$2/x0"
	echo 0 >"$2/v"
	fstitch_mount_stop "$2"
}

crash_workload() {
	local mnt=$1 free
	free=$(stat -f -c %d "$mnt")
	mkdir "$mnt/w1"
	tar -xf "$SCRATCH/tree.tar" -C "$mnt/w1"
	flush_point "$mnt/.flushed"
	echo 1 >"$mnt/v.tmp"
	mv "$mnt/v.tmp" "$mnt/v"
	mv "$mnt/w1" "$mnt/x1"
	rm -rf "$mnt/x0"
	# as many inodes in use as at the start, and .flushed
	wait_free_inodes "$mnt" $((free - 1))
}

crash_workload_record() {
	local src=$1 mnt=$2
	shift 2
	mkdir -p "$SCRATCH/rec"
	export FSTITCH_RECORD=$SCRATCH/rec/log
	fstitch_mount_start "$src" "$mnt" -o flush_interval=86400,commit=86400 "$@"
	unset FSTITCH_RECORD
	crash_workload "$mnt"
	fstitch_mount_stop "$mnt"
	[ -s "$SCRATCH/rec/log" ]
}

# ---------------------------------------------------------------- journals
# Checks of crash states of images with a journal (ext3): the state is
# replayed by fstitch and by e2fsck, which must agree byte for byte, and
# the result must be a file system e2fsck finds nothing wrong with; a state
# can also be read back through the kernel's ext3, which replays on its own.
#
#   images_equal_but_wtime A B
#       Succeeds when files A and B are byte for byte the same apart from
#       the superblock's s_wtime (bytes 1072-1075), which e2fsck stamps
#       whenever it writes the superblock; otherwise prints where they
#       differ (the first 10 bytes, as cmp -l) and fails.  A and B are left
#       as they were.  (e2tool A same-but-wtime B)
#   journal_replay_check [--benign]
#       A CHECK for `crash_check --fsck none --no-mount` (or a plain call
#       with FSTITCH_IMAGE set): two copies of the state, one replayed by
#       fstitch (e2_recover, as `e2tool COPY recover`: the journal step
#       fstitch-mount takes at a read-write mount) and one by
#       `e2fsck -E journal_only -y`;
#       both replays must succeed and give equal images (as above), and
#       then the result, judged as fsck_run judges (the same rules, in
#       e2tool), must be clean: `e2fsck -fn` reports nothing at all.  A
#       state whose replay leaves an orphan list (ext3's s_last_orphan)
#       is also opened read-write by fstitch (`e2tool COPY open`, which
#       frees the orphans as fstitch-mount does), and that must be judged
#       clean too; replay_check() in tests/tools/e2tool.c says why
#       the orphans must go before e2fsck -fn and how the replays are
#       then compared.  With
#       --benign, what fsck_run calls benign is accepted too (soft updates
#       leave leaks; a journal must not).  The state itself is not changed.
#       On failure it prints which step failed and that step's output (a
#       benign result: e2fsck's transcript; a dangerous one: why).
#       With JOURNAL_REPLAYED set to a path, the replayed image is left
#       there (for kernel_ext3_read or a look by hand).  With
#       JOURNAL_ORPHANS set to a directory, a state whose replay by
#       fstitch leaves an orphan list leaves there an empty file named by
#       its number ($FSTITCH_STATE), passed or failed: a test counts them.
#   need_kernel_ext3
#       Skip the test unless it runs as root on a kernel with ext3 (loaded
#       with ext4 if need be), which kernel_ext3_read needs.
#   kernel_ext3_read IMAGE DEST PATH...
#       Mount a copy of IMAGE read-only under the kernel's ext3, on a loop
#       device of its own (the kernel replays a journal that needs it, into
#       the copy), copy each PATH (relative to the root: a file, a symlink
#       or a directory, with cp -a) to DEST/PATH, then unmount, detach the
#       loop device and remove the copy, whether or not anything failed.
#       A PATH that does not exist is not copied (DEST shows it missing).
#       Fails, saying why, if the kernel does not mount it or a PATH cannot
#       be read.  Needs root and ext3 in the kernel.

images_equal_but_wtime() {
	"$FSTITCH_TOOLS/e2tool" "$1" same-but-wtime "$2"
}

journal_replay_check() {
	local benign=false img=${FSTITCH_IMAGE:?journal_replay_check needs FSTITCH_IMAGE}
	local rc=0 out
	[ "${1:-}" = --benign ] && benign=true
	# Crash checks run this once per state, so it is one process: e2tool
	# replay-check (both replays on copies, the comparison as
	# images_equal_but_wtime, then the judgement of fsck_run by the same
	# rules), which exits 0 for clean, 2 for benign and 3 for dangerous
	# (saying why), and 1, saying why, when a replay failed or the two
	# differ.  Its copies go to a tmpfs where there is one (e2t_tmpdir:
	# /dev/shm before $TMPDIR, as for the C tests; see crash_check), and it
	# removes them.
	out=$(TMPDIR=${BATS_TEST_TMPDIR:-${TMPDIR:-/tmp}} \
		"$FSTITCH_TOOLS/e2tool" "$img" replay-check ${JOURNAL_REPLAYED:+"$JOURNAL_REPLAYED"}) ||
		rc=$?
	[ -z "$out" ] || printf '%s\n' "$out"
	if [ -n "${JOURNAL_ORPHANS:-}" ] &&
		[[ $out == *"fstitch's replay leaves an orphan list"* ]]; then
		: >"$JOURNAL_ORPHANS/${FSTITCH_STATE:-image}"
	fi
	case $rc in
	0) return 0 ;;
	2) $benign && return 0 ;;
	esac
	return 1
}

need_kernel_ext3() {
	[ "$(id -u)" -eq 0 ] || skip "needs root (kernel loop mount)"
	grep -qw ext3 /proc/filesystems || modprobe ext4 2>/dev/null || true
	grep -qw ext3 /proc/filesystems || skip "the kernel has no ext3 support"
}

kernel_ext3_read() {
	local img=$1 dest=$2
	shift 2
	(
		dir=$(mktemp -d "${BATS_TEST_TMPDIR:-${TMPDIR:-/tmp}}/kread.XXXXXX") || exit 1
		loop=
		cleanup() {
			if mountpoint -q "$dir/mnt"; then
				umount "$dir/mnt" 2>/dev/null || umount -l "$dir/mnt"
			fi
			[ -z "$loop" ] || losetup -d "$loop" 2>/dev/null
			rm -rf "$dir"
		}
		trap cleanup EXIT
		mkdir "$dir/mnt"
		cp "$img" "$dir/copy.img" || exit 1
		loop=$(losetup -f --show "$dir/copy.img") || {
			echo "kernel_ext3_read: no loop device for '$img'"
			exit 1
		}
		if ! out=$(mount -t ext3 -o ro "$loop" "$dir/mnt" 2>&1); then
			echo "kernel_ext3_read: the kernel's ext3 does not mount '$img': $out"
			dmesg 2>/dev/null | tail -n 5
			exit 1
		fi
		for p in "$@"; do
			# not there: nothing to copy, for the caller to see
			[ -e "$dir/mnt/$p" ] || [ -L "$dir/mnt/$p" ] || continue
			mkdir -p "$dest/$(dirname "$p")"
			if ! out=$(cp -a "$dir/mnt/$p" "$dest/$p" 2>&1); then
				echo "kernel_ext3_read: cannot read '$p' of '$img': $out"
				exit 1
			fi
		done
	)
}
