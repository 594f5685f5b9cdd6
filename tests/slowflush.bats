#!/usr/bin/env bats
# tests/tools/slowflush: the benchmark's disk with a slow cache flush.  What
# the benchmark relies on is checked here without timing anything: data
# passes through, every fsync of a file is counted, and the flushes of
# every kind of contender (a plain fsync, fstitch's barriers, the kernel's
# ext2 on a loop device over the image) reach it.

load common

SF=

setup() {
	common_setup
	SF=$FSTITCH_TOOLS/slowflush
	[ -x "$SF" ] || { echo "slowflush is not built: $SF" >&2; return 1; }
	SRC=$SCRATCH/src
	DISK=$SCRATCH/disk
	mkdir -p "$SRC" "$DISK"
}

teardown() {
	common_teardown
	fstitch_mount_reap
	[ -z "${SF_PID:-}" ] || wait "$SF_PID" 2>/dev/null || true
}

# sf_start DELAY_US: slowflush of SRC on DISK, tracked for teardown
sf_start() {
	local n
	"$SF" "$1" "$SRC" "$DISK" 3>&- </dev/null >"$SCRATCH/sf.log" 2>&1 &
	SF_PID=$!
	track_mount "$DISK" fuse
	for ((n = 0; n < 200; n++)); do
		mountpoint -q "$DISK" && return 0
		kill -0 "$SF_PID" 2>/dev/null || break
		sleep 0.05
	done
	cat "$SCRATCH/sf.log" >&2
	return 1
}

flushes() {
	getfattr --absolute-names --only-values -n user.slowflush.flushes "$DISK"
}

@test "slowflush passes data through and counts each fsync, not plain writes" {
	sf_start 1000
	run -0 getfattr --absolute-names --only-values -n user.slowflush.delay_us "$DISK"
	assert_output 1000
	head -c 100000 /dev/urandom >"$SCRATCH/data"
	cp "$SCRATCH/data" "$DISK/plain"
	run -0 flushes
	assert_output 0
	dd if="$SCRATCH/data" of="$DISK/synced" bs=4096 conv=fsync status=none
	run -0 flushes
	assert_output 1
	cmp "$SCRATCH/data" "$SRC/synced"
	cmp "$SCRATCH/data" "$DISK/plain"
}

@test "fstitch-mount's barriers on an image under slowflush are counted" {
	sf_start 0
	make_image "$DISK/fs.img" 16M
	before=$(flushes)
	fstitch_mount_start "$DISK/fs.img" "$SCRATCH/mnt"
	echo hello >"$SCRATCH/mnt/f"
	fstitch_mount_stop "$SCRATCH/mnt"
	after=$(flushes)
	[ "$after" -gt "$before" ]
	assert_fsck_clean "$DISK/fs.img"
}

@test "the kernel's cache flushes on a loop device over a slowflush file reach it as fsyncs" {
	sf_start 0
	truncate -s 16M "$DISK/k.img"
	mke2fs -q -F -t ext2 "$DISK/k.img"
	kernel_mount "$DISK/k.img" "$SCRATCH/k"
	before=$(flushes)
	dd if=/dev/zero of="$SCRATCH/k/f" bs=4096 count=4 conv=fsync status=none
	after=$(flushes)
	[ "$after" -gt "$before" ]
}

@test "slowflush refuses a bad delay with exit 64" {
	run -64 --separate-stderr "$SF" 5ms "$SRC" "$DISK"
	assert_equal "$stderr" "slowflush: bad delay '5ms': want microseconds, 0 to 10000000"
	run -64 --separate-stderr "$SF" 5
	assert_equal "$stderr" "usage: slowflush DELAY_US SOURCE MOUNTPOINT"
}
