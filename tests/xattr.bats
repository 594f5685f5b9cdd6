#!/usr/bin/env bats
# Extended attributes and POSIX ACLs through fstitch-mount, with the real
# tools, and across the kernel's own ext2 support (doc/ext2-xattr.md).

load common

setup() {
	common_setup
	IMG=$SCRATCH/fs.img
	MNT=$SCRATCH/mnt
	mkdir -p "$MNT"
}

teardown() {
	common_teardown
	fstitch_mount_reap
	[ -z "${OPEN_MNT:-}" ] || rmdir "$OPEN_MNT"
}

# dump DIR: every attribute and ACL under DIR, paths relative to it, in
# name order
dump() {
	(
		cd "$1" && find . | LC_ALL=C sort | while read -r f; do
			getfattr -h -d -m - -e hex "$f" 2>/dev/null | grep -v fstitch.control
			[ -L "$f" ] || getfacl -p "$f" 2>/dev/null
		done
	)
}

# A source tree with user and trusted attributes, access and default ACLs,
# a capability, values small and large, and many files sharing one set.
make_src() {
	local s=$1 i
	mkdir -p "$s/d/sub" "$s/plain"
	for i in $(seq 1 30); do
		echo "$i" >"$s/plain/f$i"
		setfattr -n user.shared -v same-for-all "$s/plain/f$i"
	done
	echo data >"$s/d/f"
	setfattr -n user.small -v x "$s/d/f"
	setfattr -n user.big -v "$(head -c 700 /dev/zero | tr '\0' b)" "$s/d/f"
	setfattr -n trusted.t -v secret "$s/d/f"
	setfacl -m u:1000:rw,g:1000:r "$s/d/f"
	setfacl -d -m u:1000:rwx "$s/d/sub"
	setcap cap_net_raw+ep "$s/d/f"
	ln -s f "$s/d/link"
}

@test "cp -a, rsync -aAX and tar --xattrs --acls round trips keep every attribute and ACL" {
	make_image "$IMG" 32M
	make_src "$SCRATCH/src"
	fstitch_mount_start "$IMG" "$MNT"
	run -0 --separate-stderr cp -a "$SCRATCH/src" "$MNT/cp"
	assert_equal "$stderr" ""
	run -0 rsync -aAX "$SCRATCH/src/" "$MNT/rs/"
	tar --xattrs --xattrs-include='*' --acls -cf "$SCRATCH/src.tar" -C "$SCRATCH/src" .
	mkdir "$MNT/tar"
	run -0 --separate-stderr tar --xattrs --xattrs-include='*' --acls -xf "$SCRATCH/src.tar" \
		-C "$MNT/tar"
	assert_equal "$stderr" ""
	want=$(dump "$SCRATCH/src")
	[ -n "$want" ]
	for d in cp rs tar; do
		assert_equal "$(dump "$MNT/$d")" "$want"
	done
	# and back out again, after a remount
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
	fstitch_mount_start "$IMG" "$MNT"
	for d in cp rs tar; do
		assert_equal "$(dump "$MNT/$d")" "$want"
	done
	cp -a "$MNT/cp" "$SCRATCH/back-cp"
	rsync -aAX "$MNT/rs/" "$SCRATCH/back-rs/"
	tar --xattrs --xattrs-include='*' --acls -cf "$SCRATCH/back.tar" -C "$MNT/tar" .
	mkdir "$SCRATCH/back-tar"
	tar --xattrs --xattrs-include='*' --acls -xf "$SCRATCH/back.tar" -C "$SCRATCH/back-tar"
	for d in back-cp back-rs back-tar; do
		assert_equal "$(dump "$SCRATCH/$d")" "$want"
	done
	run -0 getcap "$MNT/cp/d/f"
	assert_output --partial cap_net_raw=ep
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
}

@test "files with the same attributes share one attribute block" {
	make_image "$IMG" 32M -I 128
	fstitch_mount_start "$IMG" "$MNT"
	for i in $(seq 1 50); do
		: >"$MNT/f$i"
	done
	before=$(stat -f -c %f "$MNT")
	for i in $(seq 1 50); do
		setfattr -n user.v -v "$(head -c 200 /dev/zero | tr '\0' v)" "$MNT/f$i"
	done
	after=$(stat -f -c %f "$MNT")
	# 128-byte inodes: everything is in blocks, and the 50 files share one
	assert_equal "$((before - after))" 1
	# one file changes: it gets a block of its own
	setfattr -n user.w -v 1 "$MNT/f7"
	assert_equal "$(stat -f -c %f "$MNT")" "$((after - 1))"
	setfattr -x user.w "$MNT/f7"
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
	run -0 debugfs -R 'stat /f1' "$IMG"
	blk=$(sed -n 's/.*File ACL: \([0-9]*\).*/\1/p' <<<"$output")
	run -0 debugfs -R 'stat /f7' "$IMG"
	assert_output --partial "File ACL: $blk"
	run -0 debugfs -R "ea_list /f50" "$IMG"
	assert_output --partial "v (200)"
}

@test "setfacl -d: new files and directories inherit the default ACL, the umask does not apply" {
	make_image "$IMG" 32M
	fstitch_mount_start "$IMG" "$MNT"
	mkdir "$MNT/d" "$MNT/plain"
	setfacl -d -m u:1000:rwx,g::rx,o::- "$MNT/d"
	(umask 077 && touch "$MNT/d/f" && mkdir "$MNT/d/sub" && touch "$MNT/plain/f")
	run -0 getfacl -cpn "$MNT/d/f"
	assert_output "$(printf 'user::rw-\nuser:1000:rwx\t#effective:rw-\ngroup::r-x\t#effective:r--\nmask::rw-\nother::---')"
	run -0 getfacl -cpn "$MNT/d/sub"
	assert_line 'default:user:1000:rwx'
	assert_line 'user:1000:rwx'
	# the mode follows the ACL; without a default ACL the umask holds
	assert_equal "$(stat -c %a "$MNT/d/f")" 660
	assert_equal "$(stat -c %a "$MNT/plain/f")" 600
	# chmod moves the ACL's mask with the group bits
	chmod 640 "$MNT/d/f"
	run -0 getfacl -cpn "$MNT/d/f"
	assert_line 'mask::r--'
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
	# still there after a remount
	fstitch_mount_start "$IMG" "$MNT"
	run -0 getfacl -cpn "$MNT/d/sub/"
	assert_line 'default:user:1000:rwx'
	fstitch_mount_stop "$MNT"
}

@test "an ACL grants and denies a non-owner user on an allow_other mount" {
	make_image "$IMG" 32M
	# a mount point the other user can reach (the test's own scratch
	# directory is private)
	OPEN_MNT=$(mktemp -d /tmp/fstitch-acl.XXXXXX)
	MNT=$OPEN_MNT
	fstitch_mount_start "$IMG" "$MNT" -o allow_other
	chmod 755 "$MNT"
	echo secret >"$MNT/f"
	chmod 600 "$MNT/f"
	as1000() { setpriv --reuid=1000 --regid=1000 --clear-groups "$@"; }
	run -1 as1000 cat "$MNT/f"
	assert_output --partial 'Permission denied'
	setfacl -m u:1000:r "$MNT/f"
	run -0 as1000 cat "$MNT/f"
	assert_output secret
	run -2 as1000 sh -c "echo x >>'$MNT/f'"
	assert_output --partial 'Permission denied'
	# the mask limits the named user
	setfacl -m m::- "$MNT/f"
	run -1 as1000 cat "$MNT/f"
	setfacl -x u:1000 "$MNT/f"
	setfacl -m m::rw "$MNT/f"
	run -1 as1000 cat "$MNT/f"
	# a directory's ACL for search and create
	mkdir -m 700 "$MNT/d"
	run -1 as1000 touch "$MNT/d/x"
	setfacl -m u:1000:rwx "$MNT/d"
	run -0 as1000 touch "$MNT/d/x"
	assert_equal "$(stat -c %u "$MNT/d/x")" 1000
	# a non-owner may not change the ACL
	run -1 as1000 setfacl -m u:1000:rwx "$MNT/f"
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
}

@test "attributes and ACLs set by the kernel read back under fstitch, and the reverse" {
	make_stock_image "$IMG" 32M -I 256
	kernel_mount "$IMG" "$SCRATCH/k"
	make_src "$SCRATCH/k/kern"
	setfattr -n user.inode -v small "$SCRATCH/k/kern/d/f"
	want_k=$(dump "$SCRATCH/k/kern")
	kernel_umount "$SCRATCH/k"
	assert_fsck_clean "$IMG"
	fstitch_mount_start "$IMG" "$MNT"
	assert_equal "$(dump "$MNT/kern")" "$want_k"
	make_src "$MNT/fst"
	setfattr -n user.more -v 1 "$MNT/kern/d/f"
	want_f=$(dump "$MNT/fst")
	want_k2=$(dump "$MNT/kern")
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
	kernel_mount "$IMG" "$SCRATCH/k"
	assert_equal "$(dump "$SCRATCH/k/fst")" "$want_f"
	assert_equal "$(dump "$SCRATCH/k/kern")" "$want_k2"
	kernel_umount "$SCRATCH/k"
	assert_fsck_clean "$IMG"
}

@test "an fstitch-mkfs image with 128-byte inodes takes attributes the kernel reads" {
	make_image "$IMG" 32M -I 128
	fstitch_mount_start "$IMG" "$MNT"
	make_src "$MNT/fst"
	want=$(dump "$MNT/fst")
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
	run -0 dumpe2fs -h "$IMG"
	assert_output --partial ext_attr
	kernel_mount "$IMG" "$SCRATCH/k"
	assert_equal "$(dump "$SCRATCH/k/fst")" "$want"
	kernel_umount "$SCRATCH/k"
}

@test "a corrupt attribute block gives EIO for that file and a log line, the rest works" {
	make_image "$IMG" 32M
	fstitch_mount_start "$IMG" "$MNT"
	echo a >"$MNT/bad"
	echo b >"$MNT/good"
	# too big for the inode: in a block
	setfattr -n user.x -v "$(head -c 300 /dev/zero | tr '\0' x)" "$MNT/bad"
	setfattr -n user.y -v 2 "$MNT/good"
	fstitch_mount_stop "$MNT"
	run -0 debugfs -R 'stat /bad' "$IMG"
	blk=$(sed -n 's/.*File ACL: \([0-9]*\).*/\1/p' <<<"$output")
	[ -n "$blk" ] && [ "$blk" -gt 0 ]
	# bad magic
	printf '\x00\x00\x02\xeb' | dd of="$IMG" bs=1 seek=$((blk * 1024)) conv=notrunc status=none
	fstitch_mount_start "$IMG" "$MNT"
	run -1 getfattr -n user.x "$MNT/bad"
	assert_output --partial 'Input/output error'
	run -0 --separate-stderr getfattr --only-values -n user.y "$MNT/good"
	assert_output 2
	assert_equal "$(cat "$MNT/bad")" a
	fstitch_mount_stop "$MNT"
	run -0 grep -c "attribute block $blk: bad magic" "$FSTITCH_MOUNT_LOG"
}
