#!/usr/bin/env bats
# The shared helpers in tests/common.bash, above all the e2fsck classifier
# that every crash test relies on: each class is shown on an image damaged
# by hand with debugfs, so that a classifier that called everything benign
# (or everything dangerous) fails here.

load common

setup() {
	common_setup
	BASE=$SCRATCH/base.img
	make_stock_image "$BASE" 8M
	printf 'hello\n' >"$SCRATCH/hello"
	debugfs -w -R "write $SCRATCH/hello f1" "$BASE" >/dev/null 2>&1
	debugfs -w -R "mkdir d" "$BASE" >/dev/null 2>&1
	debugfs -w -R "mkdir d/sub" "$BASE" >/dev/null 2>&1
}

teardown() {
	# a namespace ns_holding started lets go
	if [ -n "${NS_PID:-}" ]; then
		: >"$SCRATCH/go"
		wait "$NS_PID" || true
	fi
	common_teardown
	fstitch_mount_reap
}

# damaged NAME DEBUGFS-REQUEST...: a copy of the base image with each request
# applied; prints its path.
damaged() {
	local img=$SCRATCH/$1.img r
	shift
	cp "$BASE" "$img"
	for r in "$@"; do
		debugfs -w -R "$r" "$img" >/dev/null 2>&1
	done
	echo "$img"
}

# class_is WANT IMAGE: fsck_run gives WANT, or fail showing e2fsck's output.
class_is() {
	fsck_run "$2"
	if [ "$FSCK_CLASS" != "$1" ]; then
		echo "expected $1, got $FSCK_CLASS for $2:" >&2
		cat "$FSCK_OUT" >&2
		return 1
	fi
}

@test "fsck_run calls a fresh image clean" {
	class_is clean "$BASE"
	run -0 fsck_classify "$BASE"
	assert_output clean
	assert_fsck_clean "$BASE"
}

@test "fsck_run calls leaked blocks and inodes and wrong free counts benign" {
	class_is benign "$(damaged leak 'setb 5000 3' 'seti <20>' 'ssv free_blocks_count 10')"
}

@test "fsck_run calls a link count that is too high benign" {
	class_is benign "$(damaged links-high 'sif f1 links_count 3')"
}

@test "fsck_run calls an unattached inode, empty or holding data, benign" {
	debugfs -w -R "write /dev/null empty" "$BASE" >/dev/null 2>&1
	class_is benign "$(damaged unattached-empty 'unlink empty')"
	grep -q 'Unattached zero-length inode' "$FSCK_OUT"
	class_is benign "$(damaged unattached 'unlink f1')"
	grep -q 'Unattached inode' "$FSCK_OUT"
}

@test "fsck_run calls an entry naming a deleted or cleared inode dangerous" {
	class_is dangerous "$(damaged deleted 'sif f1 links_count 0')"
	[[ $FSCK_WHY == *"Entry 'f1' in / (2) has deleted/unused inode"* ]]
	class_is dangerous "$(damaged cleared 'clri f1')"
	[[ $FSCK_WHY == *'has deleted/unused inode'* ]]
}

@test "fsck_run calls an unconnected directory benign" {
	class_is benign "$(damaged unconnected 'unlink d/sub')"
	grep -q 'Unconnected directory inode' "$FSCK_OUT"
}

# (a directory renamed between blocks has both names, its count raised,
# until the old one is removed: design.md §4's rename rule)
@test "fsck_run calls a directory with two names benign" {
	debugfs -w -R "mkdir d2" "$BASE" >/dev/null 2>&1
	class_is benign "$(damaged twonames 'ln d/sub d2/sub' 'sif d/sub links_count 3')"
	grep -q 'is a link to directory' "$FSCK_OUT"
}

@test "fsck_run calls an i_blocks that is too high benign" {
	class_is benign "$(damaged iblocks-high 'sif f1 blocks 10')"
	grep -q 'i_blocks is 10, should be 2' "$FSCK_OUT"
}

@test "fsck_run calls a block in use but marked free dangerous" {
	local blk
	blk=$(debugfs -R "bmap f1 0" "$BASE" 2>/dev/null)
	class_is dangerous "$(damaged plus-bitmap "freeb $blk")"
	[[ $FSCK_WHY == *'Block bitmap differences:  +'* ]]
}

@test "fsck_run calls a link count that is too low dangerous" {
	class_is dangerous "$(damaged links-low 'sif d links_count 1')"
	[[ $FSCK_WHY == *'ref count is 1, should be 3'* ]]
}

@test "fsck_run calls an i_blocks that is too low dangerous" {
	class_is dangerous "$(damaged iblocks-low 'sif f1 blocks 0')"
}

@test "fsck_run calls a corrupted directory dangerous" {
	class_is dangerous "$(damaged zapped 'zap_block -f / 0')"
}

@test "fsck_run calls an image e2fsck cannot open dangerous" {
	class_is dangerous "$SCRATCH/missing.img"
	[[ $FSCK_WHY == 'e2fsck exit status 8' ]]
	run ! assert_fsck_not_dangerous "$SCRATCH/missing.img"
}

@test "fsck_run fails, and calls the image dangerous, when its judge cannot run" {
	FSTITCH_TOOLS=$SCRATCH/no-tools
	run -1 --separate-stderr fsck_run "$(damaged leak3 'setb 5000')"
	[[ $stderr == 'fsck_run: fsckclass failed (exit status 127): '*'/no-tools/fsckclass: No such file or directory' ]]
	FSTITCH_TOOLS=$SCRATCH/no-tools fsck_run "$BASE" || true
	assert_equal "$FSCK_CLASS" dangerous
}

@test "fsckclass judges a transcript from stdin and refuses anything else" {
	local t=$FSTITCH_TOOLS/fsckclass
	run -0 "$t" < <(printf -- '--- e2fsck -fn: exit 0\n')
	assert_output clean
	run -2 "$t" < <(printf -- '--- e2fsck -fn: exit 8\n')
	assert_output $'dangerous\ne2fsck exit status 8'
	run -65 --separate-stderr "$t" < <(printf -- 'Pass 1: Checking inodes\n')
	assert_output ''
	assert_equal "$stderr" 'fsckclass: not an e2fsck transcript: line 1: text before the first header ("--- e2fsck -fn: exit N")'
	run -64 --separate-stderr "$t" extra </dev/null
	assert_equal "$stderr" 'usage: fsckclass <TRANSCRIPT'
}

@test "assert_fsck_not_dangerous passes benign images and assert_fsck_clean does not" {
	local img
	img=$(damaged leak2 'setb 5000')
	assert_fsck_not_dangerous "$img"
	run ! assert_fsck_clean "$img"
}

@test "kernel_mount is tracked and undone by unmount_all" {
	kernel_mount "$BASE" "$SCRATCH/mnt"
	mountpoint -q "$SCRATCH/mnt"
	[ "$(cat "$SCRATCH/mnt/f1")" = hello ]
	unmount_all
	run ! mountpoint -q "$SCRATCH/mnt"
	assert_fsck_clean "$BASE"
}

# ns_holding PRE: start a mount namespace that runs the shell code PRE, says
# it is ready and stays until $SCRATCH/go appears; sets NS_PID.
ns_holding() {
	rm -f "$SCRATCH/ready" "$SCRATCH/go"
	unshare -m sh -c "$1"'
		: >"$0/ready"
		while [ ! -e "$0/go" ]; do sleep 0.05; done' "$SCRATCH" 3>&- &
	NS_PID=$!
	for ((n = 0; n < 400; n++)); do
		[ -e "$SCRATCH/ready" ] && return 0
		sleep 0.05
	done
	return 1
}

@test "NS_DROP_COPIES: a kernel mount another namespace copied still ends at its umount" {
	[ "$(id -u)" -eq 0 ] || skip "needs root (kernel loop mount)"
	# without it, the copy keeps the file system and its loop device
	kernel_mount "$BASE" "$SCRATCH/mnt"
	ns_holding :
	umount "$SCRATCH/mnt"
	run -0 losetup -n -j "$BASE"
	refute_output ""
	: >"$SCRATCH/go"
	wait "$NS_PID"
	run -0 losetup -n -j "$BASE"
	assert_output ""
	# with it, the umount here ends it
	kernel_mount "$BASE" "$SCRATCH/mnt"
	ns_holding "$NS_DROP_COPIES"
	umount "$SCRATCH/mnt"
	run -0 losetup -n -j "$BASE"
	assert_output ""
	: >"$SCRATCH/go"
	wait "$NS_PID"
	assert_fsck_clean "$BASE"
}

# tests/run.sh runs each suite in a mount namespace of its own: a suite
# that makes namespaces copies no other suite's mounts (see NS_DROP_COPIES
# for the window it would leave otherwise).
@test "under tests/run.sh the suite has a mount namespace of its own" {
	[ -n "${FSTITCH_RUNNER_NS:-}" ] || skip "not run by tests/run.sh as root"
	[ "$(readlink /proc/self/ns/mnt)" != "$FSTITCH_RUNNER_NS" ]
}

@test "fstitch_cmd fails with a message for a command that is not built" {
	run -1 --separate-stderr fstitch_cmd no-such-command
	assert_output ""
	[[ $stderr == "no-such-command is not built"* ]]
}

@test "fstitch_mount_stop gives the exit status of a daemon that has already exited" {
	fstitch_mount_start "$BASE" "$SCRATCH/mnt"
	kill -KILL "$FSTITCH_MOUNT_PID"
	# the shell has taken its status: the process is gone
	for ((n = 0; n < 200; n++)); do
		kill -0 "$FSTITCH_MOUNT_PID" 2>/dev/null || break
		sleep 0.05
	done
	run ! kill -0 "$FSTITCH_MOUNT_PID"
	fstitch_mount_stop "$SCRATCH/mnt" && rc=0 || rc=$?
	assert_equal "$rc" $((128 + 9))
	run ! mountpoint -q "$SCRATCH/mnt"
	# and a clean stop after a remount is 0, for the new daemon
	fstitch_mount_start "$BASE" "$SCRATCH/mnt"
	fstitch_mount_stop "$SCRATCH/mnt"
	# a directory nothing was mounted on is an error, not a pass
	run -1 fstitch_mount_stop "$SCRATCH/elsewhere"
	assert_output "fstitch_mount_stop: no daemon was started on '$SCRATCH/elsewhere'"
}

@test "fstitch_mount_reap kills a daemon that does not exit and fails, saying so" {
	local f=$BATS_TEST_TMPDIR/fstitch-daemons rc
	# a stand-in daemon that ignores SIGTERM and does not exit for a
	# minute (an unbounded reap waits for that, and then passes it)
	bash -c "trap '' TERM; exec sleep 60" &
	hung=$!
	printf '%s %s\n' "$hung" "$SCRATCH/gone" >>"$f"
	FSTITCH_DAEMON_TIMEOUT=1 fstitch_mount_reap 2>"$SCRATCH/err" && rc=0 || rc=$?
	cat "$SCRATCH/err"
	assert_equal "$rc" 1
	run ! kill -0 "$hung"
	run grep -c "did not exit after its unmount" "$SCRATCH/err"
	assert_output 1
	run grep -F "'$SCRATCH/gone'" "$SCRATCH/err"
	assert_success
	# and it is forgotten: a second reap has nothing left to wait for
	fstitch_mount_reap
}
