#!/usr/bin/env bats
# ext3 images: mounted under consistency=journal unless told otherwise, a
# journal left clean at unmount (and never written under softupdates), a dirty journal
# written by the kernel replayed exactly as e2fsck replays it, and corrupt
# journals refused with the image left as it was (design.md §3, "Journal
# recovery").

load common

setup() {
	common_setup
	E2TOOL=$FSTITCH_TOOLS/e2tool
	[ -x "$E2TOOL" ] || {
		echo "e2tool is not built: $E2TOOL missing" >&2
		return 1
	}
	MNT=$SCRATCH/mnt
	mkdir -p "$MNT"
}

teardown() {
	common_teardown
	fstitch_mount_reap
}

# journal_clean IMAGE: the journal is empty (start 0) and the file system is
# not marked needs_recovery.
journal_clean() {
	local h
	h=$(dumpe2fs -h "$1" 2>/dev/null)
	grep -q '^Journal start: *0$' <<<"$h" || {
		echo "journal not empty:" >&2
		grep '^Journal' <<<"$h" >&2
		return 1
	}
	if grep '^Filesystem features' <<<"$h" | grep -q needs_recovery; then
		echo "still marked needs_recovery" >&2
		return 1
	fi
}

# needs_recovery IMAGE: marked, and the log holds at least one commit.
needs_recovery() {
	dumpe2fs -h "$1" 2>/dev/null | grep '^Filesystem features' | grep -q needs_recovery &&
		debugfs -R logdump "$1" 2>/dev/null | grep -q 'commit block'
}

# jsb_block IMAGE: the device block of the journal superblock.
jsb_block() {
	debugfs -R 'bmap <8> 0' "$1" 2>/dev/null
}

# block_size IMAGE
block_size() {
	dumpe2fs -h "$1" 2>/dev/null | awk '/^Block size:/ {print $3}'
}

# put_be32 IMAGE OFFSET VALUE: write a big-endian 32-bit value.
put_be32() {
	printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($3 >> 24 & 255)) $(($3 >> 16 & 255)) \
		$(($3 >> 8 & 255)) $(($3 & 255)))" |
		dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

# flip_byte IMAGE OFFSET: invert the byte at OFFSET.
flip_byte() {
	local v
	v=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
	printf "$(printf '\\x%02x' $((v ^ 255)))" |
		dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

# make_tree DIR: a few files and directories, some past the indirect
# boundary.
make_tree() {
	local i
	mkdir -p "$1/a/b" "$1/c"
	for i in $(seq 1 20); do
		head -c $((i * 1531)) /dev/urandom >"$1/a/f$i"
	done
	head -c 300000 /dev/urandom >"$1/c/big"
	echo small >"$1/a/b/s"
	ln -s a/b/s "$1/link"
}

# kernel_dirty IMAGE SRC: an ext3 image the kernel left needing recovery:
# mount it, copy SRC in, delete part of it (revoke records), force the
# transactions to commit with sync -f, and copy the backing file while the
# file system is still mounted (nothing is checkpointed yet).  Needs root
# and the kernel's ext3 support.
kernel_dirty() {
	local img=$1 src=$2 km=$SCRATCH/kmnt
	mkdir -p "$km"
	make_stock_image "$SCRATCH/k.img" 16M -t ext3 -b 1024
	mount -t ext3 -o loop "$SCRATCH/k.img" "$km" || return 1
	track_mount "$km" kernel
	cp -a "$src/." "$km/"
	head -c 200000 /dev/urandom >"$km/gone"
	mkdir "$km/gonedir"
	sync -f "$km/gone"
	rm -rf "$km/gone" "$km/gonedir"
	echo last >"$km/last"
	sync -f "$km/last"
	cp "$SCRATCH/k.img" "$img"
	umount "$km"
}

# journal_seq IMAGE: the journal's next transaction number, as dumpe2fs
# prints it.
journal_seq() {
	dumpe2fs -h "$1" 2>/dev/null | awk '/^Journal sequence:/ {print $3}'
}

@test "images from mke2fs -t ext3 mount read-write and keep the journal clean" {
	local opts mode tree=$SCRATCH/tree seq0
	make_tree "$tree"
	for opts in "" "-I 128" "-J size=2" "-b 4096" "-b 1024 -J size=4"; do
		# the default (journal) and softupdates, which never writes the journal
		for mode in default softupdates; do
			# shellcheck disable=SC2086
			make_stock_image "$SCRATCH/e3.img" 32M -t ext3 $opts
			journal_clean "$SCRATCH/e3.img"
			seq0=$(journal_seq "$SCRATCH/e3.img")
			if [ "$mode" = default ]; then
				fstitch_mount_start "$SCRATCH/e3.img" "$MNT"
			else
				fstitch_mount_start "$SCRATCH/e3.img" "$MNT" -o consistency=softupdates
			fi
			run -0 "$(fstitch_cmd fstitch-stat)" -C "$MNT" --json
			assert_equal "$(jq -r .mode.consistency <<<"$output")" \
				"$([ "$mode" = default ] && echo journal || echo softupdates)"
			cp -a "$tree/." "$MNT/"
			rm "$MNT/a/f3"
			mv "$MNT/c" "$MNT/d"
			fstitch_mount_stop "$MNT"
			run e2fsck -fn "$SCRATCH/e3.img"
			assert_success
			journal_clean "$SCRATCH/e3.img"
			# transactions went through the journal only under the default
			if [ "$mode" = default ]; then
				[ "$(journal_seq "$SCRATCH/e3.img")" != "$seq0" ]
			else
				assert_equal "$(journal_seq "$SCRATCH/e3.img")" "$seq0"
			fi
			run debugfs -R logdump "$SCRATCH/e3.img"
			assert_output --partial "Journal starts at block 0"
			refute_output --partial "commit block"
			[ "$(debugfs -R 'cat /d/big' "$SCRATCH/e3.img" 2>/dev/null | sha256sum)" = \
				"$(sha256sum <"$tree/c/big")" ] || {
				echo "/d/big differs with mke2fs options '$opts'" >&2
				return 1
			}
			# and Linux reads it back as ext3
			if [ "$(id -u)" -eq 0 ] && grep -qw ext3 /proc/filesystems; then
				mkdir -p "$SCRATCH/kmnt"
				mount -t ext3 -o loop,ro "$SCRATCH/e3.img" "$SCRATCH/kmnt"
				track_mount "$SCRATCH/kmnt" kernel
				diff -r "$tree/a/b" "$SCRATCH/kmnt/a/b"
				cmp "$tree/c/big" "$SCRATCH/kmnt/d/big"
				[ ! -e "$SCRATCH/kmnt/a/f3" ]
				umount "$SCRATCH/kmnt"
			fi
			if grep -q "journal replayed" "$FSTITCH_MOUNT_LOG"; then
				echo "a clean journal was replayed" >&2
				return 1
			fi
		done
	done
}

# log_unwritten IMAGE: how many blocks of the log (the journal's blocks
# after its superblock) the host file system holds as unwritten extents
# or holes, as filefrag shows the image file.
log_unwritten() {
	local bs
	bs=$(block_size "$1")
	python3 - "$bs" <(debugfs -R 'blocks <8>' "$1" 2>/dev/null) \
		<(filefrag -v -b"$bs" "$1") <<-'EOF'
		import re, sys
		bs, blocks, frag = int(sys.argv[1]), sys.argv[2], sys.argv[3]
		log = [int(b) for b in open(blocks).read().split()][1:]
		written = set()
		for line in open(frag):
		    m = re.match(r"\s*\d+:\s*(\d+)\.\.\s*(\d+):", line)
		    if m and "unwritten" not in line:
		        written.update(range(int(m.group(1)), int(m.group(2)) + 1))
		print(sum(1 for b in log if b not in written))
	EOF
}

@test "a log the host holds unwritten is written with zeros at the first journaled mount" {
	local n0 n1
	make_stock_image "$SCRATCH/e3.img" 32M -t ext3 -b 4096
	n0=$(log_unwritten "$SCRATCH/e3.img")
	# mke2fs preallocates the journal where the host can (ext4, xfs)
	[ "$n0" -gt 512 ] || skip "the host holds the new log as written data ($n0 blocks not)"
	# under softupdates the journal is not touched
	fstitch_mount_start "$SCRATCH/e3.img" "$MNT" -o consistency=softupdates
	echo a >"$MNT/a"
	fstitch_mount_stop "$MNT"
	assert_equal "$(log_unwritten "$SCRATCH/e3.img")" "$n0"
	fstitch_mount_start "$SCRATCH/e3.img" "$MNT"
	echo b >"$MNT/b"
	sync "$MNT/b"
	fstitch_mount_stop "$MNT"
	n1=$(log_unwritten "$SCRATCH/e3.img")
	assert_equal "$n1" 0
	run e2fsck -fn "$SCRATCH/e3.img"
	assert_success
	journal_clean "$SCRATCH/e3.img"
	[ "$(debugfs -R 'cat /b' "$SCRATCH/e3.img" 2>/dev/null)" = b ]
}

@test "a kernel's dirty journal is replayed as e2fsck -E journal_only replays it" {
	need_kernel_ext3
	local tree=$SCRATCH/tree
	make_tree "$tree"
	kernel_dirty "$SCRATCH/dirty.img" "$tree"
	needs_recovery "$SCRATCH/dirty.img"
	# the log has revoke records (the deleted file's indirect blocks)
	debugfs -R logdump "$SCRATCH/dirty.img" 2>/dev/null | grep -q 'revoke table'

	cp "$SCRATCH/dirty.img" "$SCRATCH/ours.img"
	cp "$SCRATCH/dirty.img" "$SCRATCH/e2fsck.img"
	run "$E2TOOL" "$SCRATCH/ours.img" recover
	assert_success
	assert_output --regexp '^replayed [1-9][0-9]* transactions: [1-9][0-9]* blocks written, [1-9][0-9]* revoked$'
	run e2fsck -E journal_only -y "$SCRATCH/e2fsck.img"
	assert_success
	# e2fsck stamps s_wtime (superblock byte 48) when it closes; the
	# replay itself must be identical, byte for byte.
	for f in ours e2fsck; do
		dd if=/dev/zero of="$SCRATCH/$f.img" bs=1 seek=$((1024 + 48)) count=4 \
			conv=notrunc status=none
	done
	run cmp "$SCRATCH/ours.img" "$SCRATCH/e2fsck.img"
	assert_success
	# and the replay did change the image (the comparison is not vacuous)
	run cmp -s "$SCRATCH/dirty.img" "$SCRATCH/ours.img"
	assert_failure
	journal_clean "$SCRATCH/ours.img"
}

@test "fstitch-mount replays a kernel's dirty journal and serves what it committed" {
	need_kernel_ext3
	local tree=$SCRATCH/tree
	make_tree "$tree"
	kernel_dirty "$SCRATCH/dirty.img" "$tree"
	needs_recovery "$SCRATCH/dirty.img"
	fstitch_mount_start "$SCRATCH/dirty.img" "$MNT"
	grep -q "journal replayed: [1-9][0-9]* transactions" "$FSTITCH_MOUNT_LOG"
	run diff -r "$tree/a" "$MNT/a"
	assert_success
	run diff -r "$tree/c" "$MNT/c"
	assert_success
	[ "$(cat "$MNT/last")" = last ]
	[ ! -e "$MNT/gone" ]
	echo more >"$MNT/new"
	fstitch_mount_stop "$MNT"
	journal_clean "$SCRATCH/dirty.img"
	run e2fsck -fn "$SCRATCH/dirty.img"
	assert_success
}

@test "a journal that needs recovery is refused read-only, replayed read-write" {
	make_stock_image "$SCRATCH/e3.img" 16M -t ext3
	debugfs -w -R 'feature needs_recovery' "$SCRATCH/e3.img" >/dev/null 2>&1
	local sum
	sum=$(file_sum "$SCRATCH/e3.img")
	run timeout 20 "$(fstitch_cmd fstitch-mount)" -f -o ro "$SCRATCH/e3.img" "$MNT"
	assert_failure 8
	assert_output --partial "the journal needs recovery: open read-write to replay it"
	[ "$(file_sum "$SCRATCH/e3.img")" = "$sum" ]
	fstitch_mount_start "$SCRATCH/e3.img" "$MNT"
	grep -q "journal replayed: 0 transactions" "$FSTITCH_MOUNT_LOG"
	fstitch_mount_stop "$MNT"
	journal_clean "$SCRATCH/e3.img"
	run e2fsck -fn "$SCRATCH/e3.img"
	assert_success
}

# refused IMAGE TEXT: fstitch-mount refuses IMAGE naming TEXT, and leaves
# it byte for byte as it was.
refused() {
	local sum
	sum=$(file_sum "$1")
	run timeout 20 "$(fstitch_cmd fstitch-mount)" -f "$1" "$MNT"
	assert_failure 8
	assert_output --partial "$2"
	[ "$(file_sum "$1")" = "$sum" ] || {
		echo "the refused image was changed" >&2
		return 1
	}
	if mountpoint -q "$MNT"; then
		echo "mounted although refused" >&2
		return 1
	fi
}

@test "corrupt journal superblocks and journal inodes are refused, image untouched" {
	local img=$SCRATCH/e3.img jsb bs
	make_stock_image "$img" 16M -t ext3
	jsb=$(jsb_block "$img")
	bs=$(block_size "$img")

	cp "$img" "$SCRATCH/c.img"
	put_be32 "$SCRATCH/c.img" $((jsb * bs)) 0x12345678
	refused "$SCRATCH/c.img" "bad journal superblock"

	cp "$img" "$SCRATCH/c.img"
	put_be32 "$SCRATCH/c.img" $((jsb * bs + 12)) 2048
	refused "$SCRATCH/c.img" "journal block size 2048 differs"

	cp "$img" "$SCRATCH/c.img"
	debugfs -w -R 'sif <8> block[2] 99999999' "$SCRATCH/c.img" >/dev/null 2>&1
	refused "$SCRATCH/c.img" "journal inode block points to block 99999999"

	cp "$img" "$SCRATCH/c.img"
	debugfs -w -R 'sif <8> block[IND] 3' "$SCRATCH/c.img" >/dev/null 2>&1
	refused "$SCRATCH/c.img" "journal inode indirect block points to block 3"

	cp "$img" "$SCRATCH/c.img"
	debugfs -w -R 'sif <8> block[5] 0' "$SCRATCH/c.img" >/dev/null 2>&1
	refused "$SCRATCH/c.img" "journal inode has a hole at journal block 5"

	cp "$img" "$SCRATCH/c.img"
	debugfs -w -R 'sif <8> size 4096' "$SCRATCH/c.img" >/dev/null 2>&1
	refused "$SCRATCH/c.img" "journal inode 8 has a bad size"

	cp "$img" "$SCRATCH/c.img"
	debugfs -w -R 'ssv journal_inum 0' "$SCRATCH/c.img" >/dev/null 2>&1
	refused "$SCRATCH/c.img" "external journals are not supported"

	# a read-only mount does not read the journal of a clean file system
	fstitch_mount_start "$SCRATCH/c.img" "$MNT" -o ro
	fstitch_mount_stop "$MNT"
}

@test "corrupt logs written by the kernel are refused, image untouched" {
	need_kernel_ext3
	local tree=$SCRATCH/tree jsb bs start d
	make_tree "$tree"
	kernel_dirty "$SCRATCH/dirty.img" "$tree"
	needs_recovery "$SCRATCH/dirty.img"
	jsb=$(jsb_block "$SCRATCH/dirty.img")
	bs=$(block_size "$SCRATCH/dirty.img")
	start=$(dumpe2fs -h "$SCRATCH/dirty.img" 2>/dev/null | awk '/^Journal start:/ {print $3}')
	d=$(debugfs -R "bmap <8> $start" "$SCRATCH/dirty.img" 2>/dev/null)

	# the first descriptor's first tag names a block past the end
	cp "$SCRATCH/dirty.img" "$SCRATCH/c.img"
	put_be32 "$SCRATCH/c.img" $((d * bs + 12)) 0x7fffffff
	refused "$SCRATCH/c.img" "outside the file system"

	# the log starts past the journal's end
	cp "$SCRATCH/dirty.img" "$SCRATCH/c.img"
	put_be32 "$SCRATCH/c.img" $((jsb * bs + 28)) 99999
	refused "$SCRATCH/c.img" "log start 99999 is out of range"

	# transactions in the log, but the file system is not marked
	cp "$SCRATCH/dirty.img" "$SCRATCH/c.img"
	debugfs -w -R 'feature -needs_recovery' "$SCRATCH/c.img" >/dev/null 2>&1
	refused "$SCRATCH/c.img" "not marked needs_recovery"
}

@test "a torn last commit: the transactions before it are replayed as e2fsck does" {
	need_kernel_ext3
	local tree=$SCRATCH/tree bs last c
	make_tree "$tree"
	kernel_dirty "$SCRATCH/dirty.img" "$tree"
	bs=$(block_size "$SCRATCH/dirty.img")
	# the log's last commit block, zeroed as if its write never happened
	last=$(debugfs -R logdump "$SCRATCH/dirty.img" 2>/dev/null |
		sed -n 's/.*type 2 (commit block) at block \([0-9]*\).*/\1/p' | tail -1)
	[ -n "$last" ]
	c=$(debugfs -R "bmap <8> $last" "$SCRATCH/dirty.img" 2>/dev/null)
	dd if=/dev/zero of="$SCRATCH/dirty.img" bs="$bs" seek="$c" count=1 conv=notrunc status=none
	cp "$SCRATCH/dirty.img" "$SCRATCH/ours.img"
	cp "$SCRATCH/dirty.img" "$SCRATCH/e2fsck.img"
	run "$E2TOOL" "$SCRATCH/ours.img" recover
	assert_success
	run e2fsck -E journal_only -y "$SCRATCH/e2fsck.img"
	assert_success
	for f in ours e2fsck; do
		dd if=/dev/zero of="$SCRATCH/$f.img" bs=1 seek=$((1024 + 48)) count=4 \
			conv=notrunc status=none
	done
	run cmp "$SCRATCH/ours.img" "$SCRATCH/e2fsck.img"
	assert_success
}

@test "a kernel journal with checksums (journal_checksum) replays as e2fsck's; a bad copy is refused" {
	need_kernel_ext3
	local km=$SCRATCH/kmnt tree=$SCRATCH/tree bs start d
	make_tree "$tree"
	make_stock_image "$SCRATCH/k.img" 16M -t ext3 -b 1024
	mkdir -p "$km"
	mount -t ext4 -o loop,journal_checksum "$SCRATCH/k.img" "$km" ||
		skip "the kernel does not mount ext3 with journal_checksum"
	track_mount "$km" kernel
	cp -a "$tree/." "$km/"
	sync -f "$km/link"
	cp "$SCRATCH/k.img" "$SCRATCH/dirty.img"
	umount "$km"
	needs_recovery "$SCRATCH/dirty.img"
	dumpe2fs -h "$SCRATCH/dirty.img" 2>/dev/null | grep -q '^Journal features:.*journal_checksum'

	cp "$SCRATCH/dirty.img" "$SCRATCH/ours.img"
	cp "$SCRATCH/dirty.img" "$SCRATCH/e2fsck.img"
	run "$E2TOOL" "$SCRATCH/ours.img" recover
	assert_success
	run e2fsck -E journal_only -y "$SCRATCH/e2fsck.img"
	assert_success
	for f in ours e2fsck; do
		dd if=/dev/zero of="$SCRATCH/$f.img" bs=1 seek=$((1024 + 48)) count=4 \
			conv=notrunc status=none
	done
	run cmp "$SCRATCH/ours.img" "$SCRATCH/e2fsck.img"
	assert_success

	# one bit of the first copy in the log flipped: its transaction's
	# checksum no longer matches
	bs=$(block_size "$SCRATCH/dirty.img")
	start=$(dumpe2fs -h "$SCRATCH/dirty.img" 2>/dev/null | awk '/^Journal start:/ {print $3}')
	d=$(debugfs -R "bmap <8> $((start + 1))" "$SCRATCH/dirty.img" 2>/dev/null)
	cp "$SCRATCH/dirty.img" "$SCRATCH/c.img"
	flip_byte "$SCRATCH/c.img" $((d * bs + 100))
	refused "$SCRATCH/c.img" "checksum mismatch"
}

@test "a single write several times the journal's size is cut into transactions" {
	local mode src=$SCRATCH/src n stat
	stat=$(fstitch_cmd fstitch-stat)
	# 5 MiB in one write(2); the log has 1023 blocks of 1 KiB, and even
	# one FUSE request (1 MiB) is more than a transaction can hold
	head -c $((5 * 1024 * 1024)) /dev/urandom >"$src"
	for mode in journal-data journal; do
		make_image "$SCRATCH/j.img" 32M -b 1024 -J size=1
		fstitch_mount_start "$SCRATCH/j.img" "$MNT" -o consistency=$mode,commit=3600
		dd if="$src" of="$MNT/big" bs=5M iflag=fullblock status=none
		# and again over the same blocks, then past the end
		dd if="$src" of="$MNT/big" bs=5M iflag=fullblock conv=notrunc status=none
		dd if="$src" of="$MNT/big" bs=5M iflag=fullblock oflag=append conv=notrunc \
			status=none
		sync "$MNT/big"
		n=$("$stat" -C "$MNT" --json | jq -r .journal.commits)
		echo "# $mode: $n commits" >&3
		[ "$mode" = journal ] || [ "$n" -gt 15 ]
		fstitch_mount_stop "$MNT"
		run e2fsck -fn "$SCRATCH/j.img"
		assert_success
		debugfs -R "dump /big $SCRATCH/out" "$SCRATCH/j.img" 2>/dev/null
		cmp "$SCRATCH/out" <(cat "$src" "$src")
	done
}

@test "a preallocation larger than the journal is cut into transactions" {
	local mode size len n stat
	stat=$(fstitch_cmd fstitch-stat)
	# Under journal-data the zeros of 3 MiB join the transactions; under
	# journal only the metadata does, but 260 MiB of 1 KiB blocks take
	# over 1040 indirect blocks: either is more than the 1023-block log.
	# One fallocate(2) (as posix_fallocate does it) is one request.
	for mode in journal-data:32M:3M journal:300M:260M; do
		IFS=: read -r mode size len <<<"$mode"
		make_image "$SCRATCH/j.img" "$size" -b 1024 -J size=1
		fstitch_mount_start "$SCRATCH/j.img" "$MNT" -o consistency=$mode,commit=3600
		fallocate -l "$len" "$MNT/f"
		# the journal goes on taking transactions after it
		echo after >"$MNT/g"
		sync "$MNT/g"
		n=$("$stat" -C "$MNT" --json | jq -r .journal.commits)
		echo "# $mode: $len in $n commits" >&3
		[ "$n" -gt 5 ]
		fstitch_mount_stop "$MNT"
		run e2fsck -fn "$SCRATCH/j.img"
		assert_success
		debugfs -R "dump /f $SCRATCH/out" "$SCRATCH/j.img" 2>/dev/null
		cmp "$SCRATCH/out" <(head -c "$(numfmt --from=iec "$len")" /dev/zero)
		[ "$(debugfs -R "cat /g" "$SCRATCH/j.img" 2>/dev/null)" = after ]
		rm "$SCRATCH/out"
	done
}

# spread_image IMG: a 400M ext3 image of 1 KiB blocks and 256-block groups
# (1600 of them) with the smallest log, 1024 blocks: a file of a few
# hundred MiB has blocks in more groups than the log has blocks.
spread_image() {
	make_stock_image "$1" 400M -t ext3 -b 1024 -g 256 -N 4096 -J size=1 \
		-O ^resize_inode,^dir_index,^ext_attr
}

@test "a truncate or unlink of a file in more groups than the log holds is cut into transactions" {
	local stat n0 n1 free
	stat=$(fstitch_cmd fstitch-stat)
	spread_image "$SCRATCH/j.img"
	fstitch_mount_start "$SCRATCH/j.img" "$MNT" -o commit=3600
	# 350 MiB: a bitmap block and a group descriptor block of every one
	# of some 1400 groups to free, more than the log's 1023 blocks
	fallocate -l 350M "$MNT/f"
	sync "$MNT/f"
	n0=$("$stat" -C "$MNT" --json | jq -r .journal.commits)
	truncate -s 1000 "$MNT/f"
	# the journal goes on taking transactions after it
	echo after >"$MNT/g"
	sync "$MNT/g"
	n1=$("$stat" -C "$MNT" --json | jq -r .journal.commits)
	echo "# truncate: $((n1 - n0)) commits" >&3
	[ $((n1 - n0)) -gt 5 ]
	# the same for the blocks of a file removed (freed once the kernel
	# forgets the inode)
	fallocate -l 350M "$MNT/h"
	sync "$MNT/h"
	free=$(stat -f -c %d "$MNT")
	n0=$("$stat" -C "$MNT" --json | jq -r .journal.commits)
	rm "$MNT/h"
	wait_free_inodes "$MNT" $((free + 1))
	echo again >"$MNT/g"
	sync "$MNT/g"
	n1=$("$stat" -C "$MNT" --json | jq -r .journal.commits)
	echo "# unlink: $((n1 - n0)) commits" >&3
	[ $((n1 - n0)) -gt 5 ]
	fstitch_mount_stop "$MNT"
	run e2fsck -fn "$SCRATCH/j.img"
	assert_success
	run -0 dumpe2fs -h "$SCRATCH/j.img"
	refute_line --partial "First orphan inode"
	debugfs -R "dump /f $SCRATCH/out" "$SCRATCH/j.img" 2>/dev/null
	cmp "$SCRATCH/out" <(head -c 1000 /dev/zero)
	[ "$(debugfs -R "cat /g" "$SCRATCH/j.img" 2>/dev/null)" = again ]
	run debugfs -R "stat /h" "$SCRATCH/j.img"
	assert_output --partial "File not found"
}

@test "a truncate left on the orphan list, too large for one transaction, is finished at the mount" {
	local ino
	spread_image "$SCRATCH/j.img"
	fstitch_mount_start "$SCRATCH/j.img" "$MNT"
	fallocate -l 350M "$MNT/f"
	fstitch_mount_stop "$MNT"
	# as a crash in the middle of a cut leaves it (ext3's too): the new
	# size, the blocks past it still mapped, the inode on the list
	ino=$(debugfs -R "stat /f" "$SCRATCH/j.img" 2>/dev/null |
		awk '/^Inode:/ { print $2; exit }')
	[ -n "$ino" ]
	debugfs -w -R "sif /f size 1000" "$SCRATCH/j.img"
	debugfs -w -R "ssv last_orphan $ino" "$SCRATCH/j.img"
	fstitch_mount_start "$SCRATCH/j.img" "$MNT" -o commit=3600
	run cat "$FSTITCH_MOUNT_LOG"
	assert_line --partial "orphan list processed: 0 inodes freed, 1 truncated"
	# the journal goes on taking transactions after it
	echo after >"$MNT/g"
	sync "$MNT/g"
	fstitch_mount_stop "$MNT"
	run e2fsck -fn "$SCRATCH/j.img"
	assert_success
	run -0 dumpe2fs -h "$SCRATCH/j.img"
	refute_line --partial "First orphan inode"
	[ "$(debugfs -R "cat /g" "$SCRATCH/j.img" 2>/dev/null)" = after ]
	run debugfs -R "stat /f" "$SCRATCH/j.img"
	assert_line --regexp "Size: 1000\b"
}

# kill_with_open_orphan IMAGE: mount IMAGE (its default mode, journal),
# remove a file while this shell holds it open, write to it, commit with a
# sync of another file, and kill -9 the daemon with the file still open.
kill_with_open_orphan() {
	fstitch_mount_start "$1" "$MNT"
	seq 3000 >"$MNT/o"
	echo keep >"$MNT/keep"
	exec 5<>"$MNT/o"
	rm "$MNT/o"
	seq 5000 >&5
	sync "$MNT/keep"
	kill -KILL "$FSTITCH_MOUNT_PID"
	exec 5>&-
	fstitch_mount_stop "$MNT" && rc=0 || rc=$?
	assert_equal "$rc" $((128 + 9))
}

@test "commit= bounds what a crash loses: the timer's commit reaches the disk on its own" {
	make_stock_image "$SCRATCH/e3.img" 16M -t ext3 -b 1024
	# the flusher's own interval is a day: only the commit timer can
	# put the file on disk
	fstitch_mount_start "$SCRATCH/e3.img" "$MNT" -o commit=1,flush_interval=86400
	seq 2000 >"$SCRATCH/want"
	cp "$SCRATCH/want" "$MNT/f"
	# a replay of the image as it stands has the file within seconds (30 s
	# at most here, for a loaded machine)
	local i got= t0=$SECONDS
	for ((i = 0; i < 150; i++)); do
		cp "$SCRATCH/e3.img" "$SCRATCH/now.img"
		"$E2TOOL" "$SCRATCH/now.img" recover >/dev/null 2>&1 &&
			debugfs -R "dump /f $SCRATCH/got" "$SCRATCH/now.img" >/dev/null 2>&1 &&
			cmp -s "$SCRATCH/want" "$SCRATCH/got" && got=1 && break
		sleep 0.2
	done
	echo "# on disk after $((SECONDS - t0)) s, $i polls" >&3
	[ -n "$got" ]
	# a crash now loses nothing
	kill -KILL "$FSTITCH_MOUNT_PID"
	fstitch_mount_stop "$MNT" || :
	fstitch_mount_start "$SCRATCH/e3.img" "$MNT"
	cmp "$SCRATCH/want" "$MNT/f"
	fstitch_mount_stop "$MNT"
	run e2fsck -fn "$SCRATCH/e3.img"
	assert_success
}

@test "a journaled mount keeps the file system marked clean, as Linux's ext3 does: a crash needs only a replay" {
	need_kernel_ext3
	make_stock_image "$SCRATCH/e3.img" 16M -t ext3 -b 1024
	cp "$SCRATCH/e3.img" "$SCRATCH/k.img"
	# Linux's ext3, mounted and with a commit on disk
	mkdir -p "$SCRATCH/kmnt"
	mount -t ext3 -o loop "$SCRATCH/k.img" "$SCRATCH/kmnt"
	track_mount "$SCRATCH/kmnt" kernel
	seq 1000 >"$SCRATCH/kmnt/f"
	sync "$SCRATCH/kmnt/f"
	local kern
	kern=$(fs_state "$SCRATCH/k.img")
	umount "$SCRATCH/kmnt"
	assert_equal "$kern" clean
	fstitch_mount_start "$SCRATCH/e3.img" "$MNT"
	seq 1000 >"$MNT/f"
	sync "$MNT/f"
	needs_recovery "$SCRATCH/e3.img"
	assert_equal "$(fs_state "$SCRATCH/e3.img")" "$kern"
	kill -KILL "$FSTITCH_MOUNT_PID"
	fstitch_mount_stop "$MNT" || :
	cp "$SCRATCH/e3.img" "$SCRATCH/again.img"
	# e2fsck -p, as at boot: it replays the log and checks nothing more
	run -0 e2fsck -p "$SCRATCH/e3.img"
	assert_output --partial "recovering journal"
	refute_output --partial "check forced"
	run -0 e2fsck -fn "$SCRATCH/e3.img"
	# and the next mount replays it without a warning
	fstitch_mount_start "$SCRATCH/again.img" "$MNT"
	cmp <(seq 1000) "$MNT/f"
	fstitch_mount_stop "$MNT"
	run -0 cat "$FSTITCH_MOUNT_LOG"
	assert_line --partial "journal replayed: 1 transactions"
	refute_output --partial "not cleanly unmounted"
	assert_equal "$(fs_state "$SCRATCH/again.img")" clean
	# soft updates, which can leave leaks, mark the same kind of image
	# unclean while mounted, as Linux's ext2 does
	make_stock_image "$SCRATCH/su.img" 16M -t ext3 -b 1024
	fstitch_mount_start "$SCRATCH/su.img" "$MNT" -o consistency=softupdates
	echo x >"$MNT/f"
	assert_equal "$(fs_state "$SCRATCH/su.img")" "not clean"
	fstitch_mount_stop "$MNT"
	assert_equal "$(fs_state "$SCRATCH/su.img")" clean
}

@test "kill -9 with a removed file open: the next mount frees it from the orphan list" {
	make_stock_image "$SCRATCH/e3.img" 16M -t ext3 -b 1024
	local free0
	free0=$(dumpe2fs -h "$SCRATCH/e3.img" 2>/dev/null | awk '/^Free inodes:/ {print $3}')
	kill_with_open_orphan "$SCRATCH/e3.img"
	needs_recovery "$SCRATCH/e3.img"
	# the commit put the file on the orphan list
	cp "$SCRATCH/e3.img" "$SCRATCH/replayed.img"
	run -0 "$E2TOOL" "$SCRATCH/replayed.img" recover
	run -0 dumpe2fs -h "$SCRATCH/replayed.img"
	assert_line --regexp '^First orphan inode: +[0-9]+$'
	fstitch_mount_start "$SCRATCH/e3.img" "$MNT"
	grep -q "journal replayed: [1-9][0-9]* transactions" "$FSTITCH_MOUNT_LOG"
	run -0 cat "$FSTITCH_MOUNT_LOG"
	assert_line --partial "orphan list processed: 1 inodes freed, 0 truncated"
	[ "$(cat "$MNT/keep")" = keep ]
	fstitch_mount_stop "$MNT"
	journal_clean "$SCRATCH/e3.img"
	run -0 dumpe2fs -h "$SCRATCH/e3.img"
	refute_line --partial "First orphan inode"
	assert_line --regexp "^Free inodes: +$((free0 - 1))$"
	run e2fsck -fn "$SCRATCH/e3.img"
	assert_success
}

@test "kill -9 with a removed file open, without the orphan list: its inode leaks" {
	make_stock_image "$SCRATCH/e3.img" 16M -t ext3 -b 1024
	export FSTITCH_JOURNAL_DEBUG=noorphans
	kill_with_open_orphan "$SCRATCH/e3.img"
	unset FSTITCH_JOURNAL_DEBUG
	fstitch_mount_start "$SCRATCH/e3.img" "$MNT"
	run -0 cat "$FSTITCH_MOUNT_LOG"
	refute_line --partial "orphan list"
	fstitch_mount_stop "$MNT"
	run -4 e2fsck -fn "$SCRATCH/e3.img"
	assert_line --partial "Inode bitmap differences"
}

@test "-o ro leaves the orphan list as it is, and the next read-write mount frees it" {
	make_stock_image "$SCRATCH/e3.img" 16M -t ext3 -b 1024
	local free0 sum ro_free rw_free
	free0=$(dumpe2fs -h "$SCRATCH/e3.img" 2>/dev/null | awk '/^Free inodes:/ {print $3}')
	kill_with_open_orphan "$SCRATCH/e3.img"
	# the journal replayed by another tool (a read-only mount refuses an
	# image that needs recovery); the list survives the replay
	run -0 "$E2TOOL" "$SCRATCH/e3.img" recover
	run -0 dumpe2fs -h "$SCRATCH/e3.img"
	assert_line --regexp '^First orphan inode: +[0-9]+$'
	sum=$(file_sum "$SCRATCH/e3.img")
	fstitch_mount_start "$SCRATCH/e3.img" "$MNT" -o ro
	[ "$(cat "$MNT/keep")" = keep ]
	ro_free=$(stat -f -c %f "$MNT")
	fstitch_mount_stop "$MNT"
	run -0 cat "$FSTITCH_MOUNT_LOG"
	assert_line --partial "'$SCRATCH/e3.img': orphan list left as it is (read-only): the files on it keep their blocks until a read-write mount frees them"
	refute_line --partial "orphan list processed"
	assert_equal "$(file_sum "$SCRATCH/e3.img")" "$sum"
	# the next read-write mount frees the file: its inode and blocks
	fstitch_mount_start "$SCRATCH/e3.img" "$MNT"
	rw_free=$(stat -f -c %f "$MNT")
	fstitch_mount_stop "$MNT"
	run -0 cat "$FSTITCH_MOUNT_LOG"
	assert_line --partial "orphan list processed: 1 inodes freed, 0 truncated"
	# seq 5000 is 23893 bytes: at least 23 blocks of 1 KiB come back
	[ "$rw_free" -ge $((ro_free + 23)) ]
	run -0 dumpe2fs -h "$SCRATCH/e3.img"
	refute_line --partial "First orphan inode"
	assert_line --regexp "^Free inodes: +$((free0 - 1))$"
	run e2fsck -fn "$SCRATCH/e3.img"
	assert_success
}

# kill_with_held_orphan IMAGE: as kill_with_open_orphan, but the removed
# file is held only by an O_PATH descriptor (a lookup reference, no open)
# when the daemon dies.
kill_with_held_orphan() {
	fstitch_mount_start "$1" "$MNT"
	seq 3000 >"$MNT/o"
	echo keep >"$MNT/keep"
	python3 - "$MNT" "$FSTITCH_MOUNT_PID" <<-'EOF'
		import os, signal, sys
		mnt, pid = sys.argv[1], int(sys.argv[2])
		p = os.open(mnt + "/o", os.O_PATH)
		os.unlink(mnt + "/o")
		fd = os.open(mnt + "/keep", os.O_RDONLY)
		os.fsync(fd)
		os.kill(pid, signal.SIGKILL)
	EOF
	fstitch_mount_stop "$MNT" && rc=0 || rc=$?
	assert_equal "$rc" $((128 + 9))
}

@test "kill -9 with a removed file held by an O_PATH descriptor: the next mount frees it" {
	make_stock_image "$SCRATCH/e3.img" 16M -t ext3 -b 1024
	local free0
	free0=$(dumpe2fs -h "$SCRATCH/e3.img" 2>/dev/null | awk '/^Free inodes:/ {print $3}')
	kill_with_held_orphan "$SCRATCH/e3.img"
	cp "$SCRATCH/e3.img" "$SCRATCH/replayed.img"
	run -0 "$E2TOOL" "$SCRATCH/replayed.img" recover
	run -0 dumpe2fs -h "$SCRATCH/replayed.img"
	assert_line --regexp '^First orphan inode: +[0-9]+$'
	fstitch_mount_start "$SCRATCH/e3.img" "$MNT"
	run -0 cat "$FSTITCH_MOUNT_LOG"
	assert_line --partial "orphan list processed: 1 inodes freed, 0 truncated"
	fstitch_mount_stop "$MNT"
	run -0 dumpe2fs -h "$SCRATCH/e3.img"
	refute_line --partial "First orphan inode"
	assert_line --regexp "^Free inodes: +$((free0 - 1))$"
	run e2fsck -fn "$SCRATCH/e3.img"
	assert_success
	# without the list (the none twin) the same crash leaks the inode
	make_stock_image "$SCRATCH/e3.img" 16M -t ext3 -b 1024
	FSTITCH_JOURNAL_DEBUG=noorphans kill_with_held_orphan "$SCRATCH/e3.img"
	fstitch_mount_start "$SCRATCH/e3.img" "$MNT"
	fstitch_mount_stop "$MNT"
	run -4 e2fsck -fn "$SCRATCH/e3.img"
	assert_line --partial "Inode bitmap differences"
}

# wait_free_blocks DIR N: until the file system at DIR has at least N free
# blocks (a removed file's blocks are freed with its removal, or at its
# last release if it is open).
wait_free_blocks() {
	local n
	for ((n = 0; n < 400; n++)); do
		[ "$(stat -f -c %f "$1")" -ge "$2" ] && return 0
		sleep 0.05
	done
	echo "wait_free_blocks: $1 has $(stat -f -c %f "$1") free blocks after 20s, not $2" >&2
	return 1
}

@test "a full disk under journal: a removed file's blocks take the next write, not via the log" {
	local stat src=$SCRATCH/src before after
	stat=$(fstitch_cmd fstitch-stat)
	head -c $((6 * 1024 * 1024)) /dev/urandom >"$src"
	make_image "$SCRATCH/j.img" 12M -b 1024 -J size=1
	fstitch_mount_start "$SCRATCH/j.img" "$MNT" -o consistency=journal,commit=3600
	cp "$src" "$MNT/a"
	# the rest of the disk: only the blocks a frees are left
	run dd if=/dev/zero of="$MNT/pad" bs=64k status=none
	assert_failure
	assert_output --partial 'No space left'
	sync "$MNT/pad"
	rm "$MNT/a"
	wait_free_blocks "$MNT" 6144
	before=$("$stat" -C "$MNT" --json | jq -r .journal.logged_blocks)
	# no commit in between (commit=3600): the write finds every free
	# block freed by the running transaction, which commits first
	dd if="$src" of="$MNT/b" bs=1M status=none
	sync "$MNT/b"
	after=$("$stat" -C "$MNT" --json | jq -r .journal.logged_blocks)
	echo "# $((after - before)) blocks logged for a 6144-block rewrite" >&3
	# metadata only: bitmaps, descriptors, the inode, indirect blocks
	[ $((after - before)) -lt 600 ]
	fstitch_mount_stop "$MNT"
	run e2fsck -fn "$SCRATCH/j.img"
	assert_success
	debugfs -R "dump /b $SCRATCH/out" "$SCRATCH/j.img" 2>/dev/null
	cmp "$SCRATCH/out" "$src"
}

@test "a cache full of committed blocks checkpoints them instead of growing" {
	local n=12000 peak
	# A 64 MiB log holds 16 MiB of transactions before the quarter-full
	# checkpoint; commit=3600 and flush_interval=3600 keep the timers out.
	# Only the cache's call for writable blocks can then send committed
	# blocks home: without it the dirty blocks of 12000 new inodes (about
	# 3.3 MiB here) stay in a 2 MiB cache until the unmount.
	make_image "$SCRATCH/j.img" 256M -b 1024 -J size=64
	fstitch_mount_start "$SCRATCH/j.img" "$MNT" \
		-o consistency=journal,cache=2M,commit=3600,flush_interval=3600,statsfile="$SCRATCH/s.json"
	mkdir "$MNT/d"
	(cd "$MNT/d" && for ((i = 0; i < n; i++)); do : >"f$i"; done)
	fstitch_mount_stop "$MNT"
	peak=$(jq .memory.peak_dirty_bytes "$SCRATCH/s.json")
	echo "# peak dirty data $peak bytes in a 2 MiB cache" >&3
	[ "$peak" -le $((5 * 1024 * 1024 / 2)) ]
	run e2fsck -fn "$SCRATCH/j.img"
	assert_success
	[ "$(debugfs -R "ls /d" "$SCRATCH/j.img" 2>/dev/null | grep -Eo 'f[0-9]+' | sort -u | wc -l)" -eq $n ]
}

# replace_loop DIR N [sync]: N atomic replaces of DIR/f, each a new file
# written, fsynced when asked, and renamed over f.
replace_loop() {
	local i
	for ((i = 1; i <= $2; i++)); do
		printf 'version %d\n' "$i" >"$1/f.tmp"
		[ -z "${3:-}" ] || sync "$1/f.tmp"
		mv "$1/f.tmp" "$1/f"
	done
}

@test "pgrun --fsync=order writes new files' data home before the commit, not via the log" {
	local stat pgrun n=40 t0 t1 t2 plain order
	stat=$(fstitch_cmd fstitch-stat)
	pgrun=$(fstitch_cmd pgrun)
	make_image "$SCRATCH/j.img" 16M -b 1024 -J size=4
	# no timed commit: each loop below is one transaction, committed by
	# the fsync of the directory from outside any group
	fstitch_mount_start "$SCRATCH/j.img" "$MNT" \
		-o consistency=journal,commit=3600,flush_interval=3600
	mkdir "$MNT/d"
	sync "$MNT/d"
	t0=$("$stat" -C "$MNT" --json | jq -r .journal.logged_blocks)
	replace_loop "$MNT/d" $n
	sync "$MNT/d"
	t1=$("$stat" -C "$MNT" --json | jq -r .journal.logged_blocks)
	# each fsync an ordering point: every new file's data waits for the
	# renames before it, which are in the running transaction
	export -f replace_loop
	run -0 "$pgrun" -C "$MNT" --fsync=order -- bash -c "replace_loop '$MNT/d' $n sync"
	sync "$MNT/d"
	t2=$("$stat" -C "$MNT" --json | jq -r .journal.logged_blocks)
	plain=$((t1 - t0))
	order=$((t2 - t1))
	echo "# blocks logged for $n replaces: $plain with no fsync, $order under --fsync=order" >&3
	# the same metadata; logging the data too would add a block a file
	[ "$order" -le $((plain + 4)) ]
	fstitch_mount_stop "$MNT"
	run e2fsck -fn "$SCRATCH/j.img"
	assert_success
	run debugfs -R "cat /d/f" "$SCRATCH/j.img"
	assert_output --partial "version $n"
}
