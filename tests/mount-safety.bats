#!/usr/bin/env bats
# Nothing lost around the mount: who may use a mount's control socket, a
# second mount of the same file system, the final flush after an unmount
# (waited for by default, a fuseblk mount; not with -o noblkdev), sync,
# fstab's nofail and a mount whose daemon died.

load common

setup() {
	common_setup
	MOUNT=$(fstitch_cmd fstitch-mount)
	PGCREATE=$(fstitch_cmd pgcreate)
	STAT=$(fstitch_cmd fstitch-stat)
	IMG=$SCRATCH/fs.img
	MNT=$SCRATCH/mnt
	mkdir -p "$MNT"
	make_image "$IMG" 32M
}

teardown() {
	common_teardown
	fstitch_mount_reap
	local l
	if [ -s "$BATS_TEST_TMPDIR/loops" ]; then
		while read -r l; do
			losetup -d "$l" 2>/dev/null || true
		done <"$BATS_TEST_TMPDIR/loops"
	fi
}

# loop_attach FILE: attach a loop device to FILE, print it, detach it in
# teardown.
loop_attach() {
	local l
	l=$(losetup -f --show "$1") || return 1
	echo "$l" >>"$BATS_TEST_TMPDIR/loops"
	echo "$l"
}

# as_nobody CMD...: run CMD as user nobody, with no supplementary groups.
as_nobody() {
	setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"
}

# ctl_socket DIR: the control socket of the mount at DIR.
ctl_socket() {
	getfattr --absolute-names --only-values -n user.fstitch.control "$1"
}

@test "without allow_other, another user cannot use the control socket" {
	fstitch_mount_start "$IMG" "$MNT"
	sock=$(ctl_socket "$MNT")
	[ -S "$sock" ]
	run -0 stat -c %a "$sock"
	assert_output 600
	# the owner may
	run -0 "$PGCREATE" -C "$sock"
	a=$output
	# nobody may neither create groups nor list the owner's
	run -1 as_nobody "$PGCREATE" -C "$sock"
	assert_output --partial "Permission denied"
	run ! as_nobody "$STAT" --groups -C "$sock"
	refute_output --partial "root"
	# and nothing was created on its behalf: ids go up by one a group
	run -0 "$PGCREATE" -C "$sock"
	assert_output $((a + 1))
}

@test "with allow_other, another user may use the control socket for its own groups" {
	fstitch_mount_start "$IMG" "$MNT" -o allow_other
	sock=$(ctl_socket "$MNT")
	run -0 stat -c %a "$sock"
	assert_output 666
	# (the scratch directory is private: nobody goes by the socket)
	run -0 as_nobody "$PGCREATE" -C "$sock"
	a=$output
	# the per-user checks still hold: root's group is not nobody's to close
	run -0 "$PGCREATE" -C "$sock"
	b=$output
	assert_equal "$b" $((a + 1))
	run -1 as_nobody "$(fstitch_cmd pgclose)" -C "$sock" "$b"
	assert_output --partial "belongs to another user"
}

@test "a mount whose daemon died is refused with what to do, and recovering works" {
	fstitch_mount_start "$IMG" "$MNT"
	echo before >"$MNT/f"
	# the root's attributes are now in the kernel's cache, so that stat
	# alone would not notice the daemon is gone
	stat "$MNT" >/dev/null
	kill -KILL "$FSTITCH_MOUNT_PID"
	wait "$FSTITCH_MOUNT_PID" || true
	run ! ls "$MNT"
	assert_output --partial "Transport endpoint is not connected"
	# (on top of the dead mount, a daemon in the foreground would never end)
	run -32 --separate-stderr timeout 20 "$MOUNT" -f "$IMG" "$MNT" 3>&-
	assert_equal "${stderr_lines[0]}" "fstitch-mount: '$MNT' is a dead mount: the daemon that served '$IMG' is gone (Transport endpoint is not connected)"
	assert_equal "${stderr_lines[1]}" "fstitch-mount: to recover, unmount it (fusermount3 -u $MNT, or umount $MNT as root), check the image (e2fsck -fy $IMG), then mount again"
	# nothing was stacked on top of the dead mount, and the image is as the
	# kill left it
	assert_equal "$(grep -c " $MNT " /proc/self/mountinfo)" 1
	# following the advice works
	fusermount3 -u "$MNT"
	run e2fsck -fy "$IMG"
	assert [ "$status" -lt 4 ]
	fstitch_mount_start "$IMG" "$MNT"
	run -0 ls "$MNT"
}

# fstab_mount_all FSTAB: `mount -a -T FSTAB` as mount(8) runs it, finding
# /sbin/mount.fuse.fstitch: in a private mount namespace, /usr/sbin gets an
# overlay holding that link, which no other process sees.
fstab_mount_all() {
	mkdir -p "$SCRATCH/ov/u" "$SCRATCH/ov/w"
	ln -sf "$MOUNT" "$SCRATCH/ov/u/mount.fuse.fstitch"
	unshare -m sh -c "$NS_DROP_COPIES"'
		mount -t overlay overlay -o "lowerdir=/usr/sbin,upperdir=$1/u,workdir=$1/w" /usr/sbin &&
		exec mount -a -T "$2"' sh "$SCRATCH/ov" "$1" 3>&-
}

@test "fstab's nofail: mount -a with a missing image succeeds, without it fails" {
	echo "$SCRATCH/missing.img $MNT fuse.fstitch defaults,nofail 0 0" >"$SCRATCH/fstab"
	run -0 fstab_mount_all "$SCRATCH/fstab"
	assert_output ""
	run ! mountpoint -q "$MNT"
	# the control: the same line without nofail is an error
	echo "$SCRATCH/missing.img $MNT fuse.fstitch defaults 0 0" >"$SCRATCH/fstab"
	run -32 fstab_mount_all "$SCRATCH/fstab"
	assert_output --partial "cannot open '$SCRATCH/missing.img': No such file or directory"
	# nofail says nothing about an image that is there but bad
	head -c 1M /dev/zero >"$SCRATCH/zero.img"
	run -8 "$MOUNT" -f -o nofail "$SCRATCH/zero.img" "$MNT" 3>&-
}

@test "fstitch-mkfs -F right after an unmount waits for the final flush, and its file system stays" {
	MKFS=$(fstitch_cmd fstitch-mkfs)
	hold_start
	# nothing is written back before the unmount, which returns before
	# the final flush (noblkdev: the unmount that waits leaves no window)
	fstitch_mount_start "$IMG" "$MNT" -o noblkdev,flush_interval=3600
	unset FSTITCH_TEST_HOLD
	echo old >"$MNT/old"
	fusermount3 -u "$MNT"
	hold_wait
	"$MKFS" -F -L fresh "$IMG" >"$SCRATCH/mkfs.out" 2>"$SCRATCH/mkfs.err" &
	mkfs=$!
	# fstitch-mkfs says it waits (an unfixed one just finishes instead)
	for ((n = 0; n < 600; n++)); do
		grep -q waiting "$SCRATCH/mkfs.err" && break
		kill -0 "$mkfs" 2>/dev/null || break
		sleep 0.05
	done
	hold_release
	wait "$FSTITCH_MOUNT_PID"
	wait "$mkfs"
	# the new file system is what is on the image, whole
	run -0 e2label "$IMG"
	assert_output fresh
	assert_fsck_clean "$IMG"
	run debugfs -R 'ls -l /' "$IMG"
	refute_output --partial old
	run -0 cat "$SCRATCH/mkfs.err"
	assert_output "fstitch-mkfs: waiting for the fstitch daemon still writing '$IMG' back after its unmount"
	# and a mounted image is refused at once rather than waited for
	fstitch_mount_start "$IMG" "$MNT"
	run -8 "$MKFS" -F "$IMG"
	assert_output --partial "is mounted"
}

@test "a loop device and its image are one file system: a second mount is refused either way" {
	L=$(loop_attach "$IMG")
	mkdir -p "$SCRATCH/b"
	fstitch_mount_start "$IMG" "$MNT"
	echo a >"$MNT/a"
	run -8 --separate-stderr timeout 20 "$MOUNT" -f "$L" "$SCRATCH/b" 3>&-
	assert_equal "$stderr" "fstitch-mount: '$L' is a loop device on '$IMG', which is in use by another fstitch-mount (mounted, or still writing back after an unmount); lock_wait=SECONDS waits for it"
	fstitch_mount_stop "$MNT"
	fstitch_mount_start "$L" "$SCRATCH/b"
	run -8 --separate-stderr timeout 20 "$MOUNT" -f "$IMG" "$MNT" 3>&-
	assert_equal "$stderr" "fstitch-mount: '$IMG' is mounted (through $L): the same file system must not be mounted twice"
	run ! mountpoint -q "$MNT"
	echo b >"$SCRATCH/b/b"
	fstitch_mount_stop "$SCRATCH/b"
	# nothing written through either mount was lost
	run -0 debugfs -R 'ls /' "$IMG"
	assert_output --partial " a "
	assert_output --partial " b "
	assert_fsck_clean "$IMG"
}

@test "a file system the kernel has mounted is refused, as image and as loop device" {
	K=$SCRATCH/k
	kernel_mount "$IMG" "$K"
	L=$(findmnt -n -o SOURCE "$K")
	run -8 --separate-stderr timeout 20 "$MOUNT" -f "$IMG" "$MNT" 3>&-
	assert_equal "$stderr" "fstitch-mount: '$IMG' is mounted (through $L): the same file system must not be mounted twice"
	run -8 --separate-stderr timeout 20 "$MOUNT" -f "$L" "$MNT" 3>&-
	assert_equal "$stderr" "fstitch-mount: '$L' is mounted: the same file system must not be mounted twice"
	run ! mountpoint -q "$MNT"
}

# A loop device outlives its image's name: the kernel mount that holds it
# may live on in another mount namespace after the umount here (any
# `unshare -m` copies it), and sysfs then names the backing file
# "IMG (deleted)".  A new image made under that name is another file.
@test "a loop device on a removed image claims that image, not a new one under its name" {
	K=$SCRATCH/k
	mkdir -p "$K"
	L=$(loop_attach "$IMG")
	mount -t ext2 "$L" "$K"
	track_mount "$K" kernel
	ln "$IMG" "$SCRATCH/link.img"
	rm "$IMG"
	run -0 cat "/sys/block/${L#/dev/}/loop/backing_file"
	assert_output "$IMG (deleted)"
	make_image "$IMG" 32M
	fstitch_mount_start "$IMG" "$MNT"
	echo new >"$MNT/f"
	fstitch_mount_stop "$MNT"
	# the removed image under its other name is still the kernel's
	run -8 --separate-stderr timeout 20 "$MOUNT" -f "$SCRATCH/link.img" "$MNT" 3>&-
	assert_equal "$stderr" "fstitch-mount: '$SCRATCH/link.img' is mounted (through $L): the same file system must not be mounted twice"
	run ! mountpoint -q "$MNT"
}

@test "a block device stays in use for e2fsck until the final flush after an unmount is over" {
	L=$(loop_attach "$IMG")
	hold_start
	fstitch_mount_start "$L" "$MNT" -o noblkdev,flush_interval=3600
	unset FSTITCH_TEST_HOLD
	echo data >"$MNT/f"
	fusermount3 -u "$MNT"
	hold_wait
	# the flush is due: e2fsck must not repair what it has not written
	run e2fsck -fy "$L"
	assert_equal "$status" 8
	assert_output --partial "in use"
	hold_release
	wait "$FSTITCH_MOUNT_PID"
	assert_fsck_clean "$L"
	run -0 debugfs -R 'cat /f' "$L"
	assert_line data
}

@test "by default the unmount waits for the final flush: e2fsck right after it finds the image clean" {
	hold_start
	fstitch_mount_start "$IMG" "$MNT" -o flush_interval=3600
	unset FSTITCH_TEST_HOLD
	# a fuseblk mount on a loop device fstitch-mount attached to the image
	grep -q " $MNT rw[^ ]* - fuseblk.fstitch /dev/loop" /proc/self/mountinfo
	L=$(findmnt -n -o SOURCE "$MNT")
	run -0 losetup -n -O BACK-FILE "$L"
	assert_output "$IMG"
	echo data >"$MNT/f"
	umount "$MNT" &
	um=$!
	hold_wait
	# the daemon is held before its flush: the unmount cannot be over
	kill -0 "$um"
	hold_release
	wait "$um"
	assert_fsck_clean "$IMG"
	run -0 debugfs -R 'cat /f' "$IMG"
	assert_line data
	wait "$FSTITCH_MOUNT_PID"
	# the loop device went with the mount
	run -0 losetup -j "$IMG"
	assert_output ""
}

# workload DIR: a write-heavy run into DIR: files of many sizes, one large
# file, a tree, then deletes, renames, appends and truncates over them.
# One python3 makes every change, in this order: a command for each (some
# 230 of them) took most of the tests' time.
workload() {
	python3 - "$1" <<'EOF'
import os, sys

d = sys.argv[1]
os.makedirs(d + "/tree/a/b/c", exist_ok=True)
for i in range(150):
    with open("%s/f%d" % (d, i), "wb") as f:
        f.write(os.urandom(i * 997 % 70000 + 1))
with open(d + "/big", "wb") as f:
    f.write(os.urandom(6 << 20))
for i in range(60):
    with open("%s/tree/a/b/c/n%d" % (d, i), "w") as f:
        f.write("%d\n" % i)
for i in range(0, 150, 3):
    os.unlink("%s/f%d" % (d, i))
for i in range(1, 150, 6):
    os.rename("%s/f%d" % (d, i), "%s/tree/a/r%d" % (d, i))
with open(d + "/big", "ab") as f:
    f.write(os.urandom(300 << 10))
os.truncate(d + "/f2", 5000)
EOF
}

# check_after_umount IMG MNT EXPECT: what a user runs, `umount MNT &&
# e2fsck -fn IMG`, then the image's tree (debugfs rdump) compared with
# EXPECT, the tree read back from the mount before it: both must hold.
check_after_umount() {
	local img=$1 mnt=$2 expect=$3 out
	out=$(mktemp -d "$SCRATCH/rdump.XXXXXX")
	umount "$mnt" && e2fsck -fn "$img" >"$out.fsck" 2>&1 || {
		cat "$out.fsck" >&2
		return 1
	}
	debugfs -R "rdump / $out" "$img" >/dev/null 2>&1
	rm -rf "$out/lost+found"
	diff -r "$expect" "$out" >&2
}

@test "umount && e2fsck -fn right after a write-heavy workload: clean and complete, every time" {
	local n
	for n in 1 2 3 4; do
		# the last round writes nothing back before the unmount: all of
		# it is the final flush
		if [ $n -eq 4 ]; then
			fstitch_mount_start "$IMG" "$MNT" -o flush_interval=3600
		else
			fstitch_mount_start "$IMG" "$MNT"
		fi
		# each round also deletes the last one's files
		rm -rf "${MNT:?}/r$((n - 1))"
		workload "$MNT/r$n"
		rm -rf "$SCRATCH/expect"
		cp -a "$MNT/." "$SCRATCH/expect"
		rm -rf "$SCRATCH/expect/lost+found"
		check_after_umount "$IMG" "$MNT" "$SCRATCH/expect"
		wait "$FSTITCH_MOUNT_PID"
		run -0 losetup -j "$IMG"
		assert_output ""
	done
}

@test "with -o noblkdev the same check can see the image before its final flush" {
	hold_start
	fstitch_mount_start "$IMG" "$MNT" -o noblkdev,flush_interval=3600
	unset FSTITCH_TEST_HOLD
	grep -q " $MNT rw[^ ]* - fuse.fstitch $IMG " /proc/self/mountinfo
	workload "$MNT/r"
	cp -a "$MNT/." "$SCRATCH/expect"
	rm -rf "$SCRATCH/expect/lost+found"
	# (the hold only fixes the timing: the flush is due when e2fsck runs)
	run ! check_after_umount "$IMG" "$MNT" "$SCRATCH/expect"
	hold_wait
	# and nothing tells e2fsprogs the image is in use: no mount names it
	# any more, and a regular file has no exclusive open to fail
	run -0 e2fsck -fn "$IMG"
	refute_output --partial "mounted"
	refute_output --partial "in use"
	hold_release
	wait "$FSTITCH_MOUNT_PID"
	# once the flush is over, the image is what the mount showed
	out=$SCRATCH/after
	mkdir "$out"
	debugfs -R "rdump / $out" "$IMG" >/dev/null 2>&1
	rm -rf "$out/lost+found"
	diff -r "$SCRATCH/expect" "$out"
	assert_fsck_clean "$IMG"
}

@test "without blkdev the unmount returns before the final flush (the case the lock covers)" {
	hold_start
	fstitch_mount_start "$IMG" "$MNT" -o noblkdev,flush_interval=3600
	unset FSTITCH_TEST_HOLD
	echo data >"$MNT/f"
	umount "$MNT"
	hold_wait
	run -0 debugfs -R 'cat /f' "$IMG"
	refute_line data
	run ! flock -n "$IMG" true
	hold_release
	wait "$FSTITCH_MOUNT_PID"
	assert_fsck_clean "$IMG"
}

@test "sync -f and sync make data durable on a default mount" {
	fstitch_mount_start "$IMG" "$MNT" -o flush_interval=3600
	echo one >"$MNT/f"
	# the control: nothing is written back on its own for an hour
	run -0 debugfs -R 'cat /f' "$IMG"
	refute_line one
	sync -f "$MNT/f"
	run -0 debugfs -R 'cat /f' "$IMG"
	assert_line one
	echo two >"$MNT/g"
	sync
	run -0 debugfs -R 'cat /g' "$IMG"
	assert_line two
	# what sync wrote is a consistent file system already
	fsck_run "$IMG"
	[ "$FSCK_CLASS" != dangerous ]
}

@test "a killed daemon's mount: the advice names the image, and unmounting frees the loop device" {
	fstitch_mount_start "$IMG" "$MNT"
	L=$(findmnt -n -o SOURCE "$MNT")
	echo data >"$MNT/f"
	kill -KILL "$FSTITCH_MOUNT_PID"
	wait "$FSTITCH_MOUNT_PID" || true
	run -32 --separate-stderr timeout 20 "$MOUNT" -f "$IMG" "$MNT" 3>&-
	assert_equal "${stderr_lines[0]}" "fstitch-mount: '$MNT' is a dead mount: the daemon that served '$IMG' is gone (Transport endpoint is not connected)"
	assert_equal "${stderr_lines[1]}" "fstitch-mount: to recover, unmount it (fusermount3 -u $MNT, or umount $MNT as root), check the image (e2fsck -fy $IMG), then mount again"
	# while the dead mount is there, its loop device keeps the image
	# "mounted" for e2fsprogs and for another mount elsewhere
	mkdir -p "$SCRATCH/b"
	run -8 --separate-stderr timeout 20 "$MOUNT" -f "$IMG" "$SCRATCH/b" 3>&-
	assert_equal "$stderr" "fstitch-mount: '$IMG' is mounted (through $L): the same file system must not be mounted twice"
	fusermount3 -u "$MNT"
	# the mount took the loop device with it, and nothing holds the image
	run -0 losetup -j "$IMG"
	assert_output ""
	flock -n "$IMG" true
	run e2fsck -fy "$IMG"
	assert [ "$status" -lt 4 ]
	fstitch_mount_start "$IMG" "$MNT"
	run -0 ls "$MNT"
}

@test "-o noblkdev, fsname= or an NBD source make a plain FUSE mount; blkdev needs a device" {
	fstitch_mount_start "$IMG" "$MNT" -o noblkdev
	grep -q " $MNT rw[^ ]* - fuse.fstitch $IMG " /proc/self/mountinfo
	run -0 losetup -j "$IMG"
	assert_output ""
	fstitch_mount_stop "$MNT"
	fstitch_mount_start "$IMG" "$MNT" -o fsname=mydisk
	grep -q " $MNT rw[^ ]* - fuse.fstitch mydisk " /proc/self/mountinfo
	fstitch_mount_stop "$MNT"
	run -64 "$MOUNT" -f -o blkdev,fsname=mydisk "$IMG" "$MNT" 3>&-
	assert_output --partial "option 'fsname' cannot be chosen with 'blkdev'"
	# a block device is mounted on itself, with no loop device of ours
	L=$(loop_attach "$IMG")
	fstitch_mount_start "$L" "$MNT"
	grep -q " $MNT rw[^ ]* - fuseblk.fstitch $L " /proc/self/mountinfo
	assert_equal "$(losetup -n -j "$IMG" | wc -l)" 1
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$L"
}

@test "-o ro makes a read-only loop device and changes nothing" {
	before=$(file_sum "$IMG")
	fstitch_mount_start "$IMG" "$MNT" -o ro
	grep -q " $MNT ro[^ ]* - fuseblk.fstitch /dev/loop" /proc/self/mountinfo
	L=$(findmnt -n -o SOURCE "$MNT")
	run -0 losetup -n -O RO "$L"
	assert_output --regexp '^ *1$'
	run ! touch "$MNT/x"
	fstitch_mount_stop "$MNT"
	assert_equal "$(file_sum "$IMG")" "$before"
	run -0 losetup -j "$IMG"
	assert_output ""
}

@test "many mounts at once each get a loop device, and all of them go" {
	local k p pids=()
	for ((k = 0; k < 12; k++)); do
		make_image "$SCRATCH/i$k.img" 8M
		mkdir -p "$SCRATCH/m$k"
	done
	for ((k = 0; k < 12; k++)); do
		fstitch_mount_start "$SCRATCH/i$k.img" "$SCRATCH/m$k" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do
		wait "$p"
	done
	for ((k = 0; k < 12; k++)); do
		grep -q " $SCRATCH/m$k rw[^ ]* - fuseblk.fstitch /dev/loop" /proc/self/mountinfo
		echo "$k" >"$SCRATCH/m$k/f"
	done
	# twelve different loop devices
	for ((k = 0; k < 12; k++)); do
		findmnt -n -o SOURCE "$SCRATCH/m$k"
	done >"$SCRATCH/sources"
	assert_equal "$(sort -u "$SCRATCH/sources" | grep -c '^/dev/loop')" 12
	for ((k = 0; k < 12; k++)); do
		umount "$SCRATCH/m$k"
		run -0 --separate-stderr debugfs -R 'cat /f' "$SCRATCH/i$k.img"
		assert_output "$k"
		run -0 losetup -j "$SCRATCH/i$k.img"
		assert_output ""
	done
}
