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

@test "slowflush shows a file's holes as the source holds them" {
	sf_start 0
	truncate -s 1M "$DISK/sparse"
	printf data | dd of="$DISK/sparse" bs=4096 seek=100 conv=notrunc,fsync status=none
	run -0 python3 - "$DISK/sparse" <<-'EOF'
		import os, sys
		fd = os.open(sys.argv[1], os.O_RDONLY)
		print(os.lseek(fd, 0, os.SEEK_DATA), os.lseek(fd, 409600, os.SEEK_HOLE))
	EOF
	assert_output "409600 413696"
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

# stats_vs_disk IMAGE OPTIONS: mount IMAGE on slowflush with -o OPTIONS,
# write five files with fsync and unmount; prints how many flushes the disk
# saw from the mount to the end of the unmount beyond the barriers of the
# statsfile, and how many the daemon's device made beyond them.
stats_vs_disk() {
	local before after i
	before=$(flushes)
	fstitch_mount_start "$1" "$SCRATCH/mnt" -o "$2,statsfile=$SCRATCH/s.json"
	for i in 1 2 3 4 5; do
		dd if=/dev/zero of="$SCRATCH/mnt/f$i" bs=4096 count=2 conv=fsync status=none
	done
	fstitch_mount_stop "$SCRATCH/mnt"
	after=$(flushes)
	echo "$((after - before - $(jq .io.barriers "$SCRATCH/s.json")))" \
		"$(jq '.device.flushes - .io.barriers' "$SCRATCH/s.json")"
}

@test "fstitch-mount's statsfile counts every barrier the disk saw, the last checkpoint too" {
	sf_start 0
	truncate -s 16M "$DISK/e2.img" "$DISK/j.img"
	mke2fs -q -F -t ext2 "$DISK/e2.img"
	mke2fs -q -F -t ext3 "$DISK/j.img"
	# The daemon's device flushes exactly what the counters say; the disk
	# sees one flush more, not the daemon's (the kernel's, as the image is
	# closed: strace shows two fdatasync calls for a mount and unmount,
	# slowflush counts three).  The same under the journal: the unmount's
	# commit, checkpoint, log emptying and clean marks are all counted.
	run -0 stats_vs_disk "$DISK/e2.img" consistency=softupdates
	read -r extra dev <<<"$output"
	assert_equal "$dev" 0
	[ "$extra" -le 1 ]
	run -0 stats_vs_disk "$DISK/j.img" consistency=journal
	assert_output "$extra 0"
	run -0 jq .journal.commits "$SCRATCH/s.json"
	[ "$output" -ge 5 ]
	assert_fsck_clean "$DISK/e2.img"
	assert_fsck_clean "$DISK/j.img"
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
