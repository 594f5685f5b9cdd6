#!/usr/bin/env bats
# The mount against Linux's ext2 support (the ext4 driver here), operation
# by operation: one seeded sequence of random file operations
# (tests/tools/fsrand.py) runs on an fstitch mount and on a kernel loop
# mount of the same fresh image, and every result, errno and tree must be
# the same.  The seeds are fixed and printed: a seed names one sequence,
# so a failure replays exactly.

load common

setup() {
	common_setup
	[ "$(id -u)" -eq 0 ] || skip "needs root (kernel loop mount)"
	FSRAND=$FSTITCH_ROOT/tests/tools/fsrand.py
	A=$SCRATCH/a
	B=$SCRATCH/b
}

teardown() {
	common_teardown
	fstitch_mount_reap
}

# parity TYPE SEED OPS [mke2fs options...]: make one image, copy it, mount
# the copy with the kernel (as TYPE) and the image with fstitch, and run
# OPS steps of SEED in both; then unmount both, check both with e2fsck,
# mount fstitch again and compare the trees once more (what was written
# reads back).
parity() {
	local type=$1 seed=$2 ops=$3
	shift 3
	make_stock_image "$SCRATCH/a.img" 256M -t "$type" "$@"
	cp "$SCRATCH/a.img" "$SCRATCH/b.img"
	mkdir -p "$B"
	mount -t "$type" -o loop "$SCRATCH/b.img" "$B"
	track_mount "$B" kernel
	fstitch_mount_start "$SCRATCH/a.img" "$A"
	mkdir "$A/t" "$B/t"
	echo "# fsrand.py --seed $seed --ops $ops ($type $*)" >&3
	run python3 "$FSRAND" --seed "$seed" --ops "$ops" "$A/t" "$B/t"
	echo "$output"
	assert_success
	assert_output --regexp "^seed $seed: $ops steps, [0-9]+ entries alike$"
	fstitch_mount_stop "$A"
	umount "$B"
	assert_fsck_clean "$SCRATCH/a.img"
	assert_fsck_clean "$SCRATCH/b.img"
	mount -t "$type" -o loop,ro "$SCRATCH/b.img" "$B"
	fstitch_mount_start "$SCRATCH/a.img" "$A" -o ro
	run python3 "$FSRAND" --compare "$A/t" "$B/t"
	echo "$output"
	assert_success
}

@test "fsrand: 2000 random operations give the kernel's results on ext2 with 1 KiB blocks (seed 1)" {
	parity ext2 1 2000 -b 1024 -I 256
}

@test "fsrand: the same with seed 3, and with seed 2 on 4 KiB blocks" {
	parity ext2 3 2000 -b 1024 -I 256
	fstitch_mount_stop "$A"
	umount "$B"
	rm -rf "$A" "$B"
	parity ext2 2 2000 -b 4096 -I 256
}

@test "fsrand: 2000 random operations give the kernel's results on ext3 with 128-byte inodes (seed 4)" {
	parity ext3 4 2000 -b 1024 -I 128
}

@test "fsrand.py finds a difference: a tree changed on one side only is named, with the seed" {
	mkdir -p "$A/t" "$B/t"
	echo same >"$A/t/f"
	echo same >"$B/t/f"
	run -0 python3 "$FSRAND" --compare "$A/t" "$B/t"
	assert_output "seed 1: 0 steps, 1 entries alike"
	chmod 4755 "$A/t/f"
	run -1 python3 "$FSRAND" --compare "$A/t" "$B/t"
	assert_output --regexp "^seed 1, step 0: tree: f is \[.*, 2541, .*\] in fstitch, \[.*, 420, .*\] in the reference$"
	echo other >"$B/t/f"
	chmod 4755 "$B/t/f"
	run -1 python3 "$FSRAND" --compare "$A/t" "$B/t"
	assert_output --partial "tree: f is"
	# an operation whose result differs stops the run at its step: a
	# directory in the reference only is picked, and found missing
	rm "$A/t/f" "$B/t/f"
	mkdir "$B/t/a0"
	run -1 python3 "$FSRAND" --seed 7 --ops 50 "$A/t" "$B/t"
	assert_output --regexp "^seed 7, step [0-9]+: [a-z0-9]+ .*: fstitch .*, reference .*$"
}
