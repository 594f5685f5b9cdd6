#!/usr/bin/env bats
# fstitch-mkfs: every image is checked with other tools (e2fsck, dumpe2fs,
# debugfs, blkid, the kernel), as e2fsprogs checks mke2fs with dumpe2fs.

load common

setup() {
	common_setup
	MKFS=$(fstitch_cmd fstitch-mkfs)
	IMG=$SCRATCH/disk.img
}

teardown() {
	common_teardown
	fstitch_mount_reap
	if [ -n "${LOOPDEV:-}" ]; then
		losetup -d "$LOOPDEV" 2>/dev/null || true
	fi
}

# sb_field IMAGE NAME: the value of one `dumpe2fs -h` line ("Block size").
sb_field() {
	dumpe2fs -h "$1" 2>/dev/null | sed -n "s/^$2:[[:space:]]*//p"
}

# assert_usage_error: the last `run --separate-stderr` printed exactly one
# line, "fstitch-mkfs: ...", to stderr and nothing to stdout.
assert_one_line_error() {
	[ "${#stderr_lines[@]}" -eq 1 ] || {
		echo "expected one line on stderr, got:" >&2
		printf '%s\n' "$stderr" >&2
		return 1
	}
	[[ ${stderr_lines[0]} == "fstitch-mkfs: "* ]] || {
		echo "message lacks the program name: $stderr" >&2
		return 1
	}
	[ -z "$output" ]
}

@test "a new image passes e2fsck -fn with nothing to report" {
	run -0 "$MKFS" "$IMG" 8M
	assert_fsck_clean "$IMG"
	run fsck_classify "$IMG"
	assert_output clean
}

@test "blkid -p identifies the image as ext2 revision 1" {
	"$MKFS" -q "$IMG" 8M
	run -0 blkid -p -o export "$IMG"
	assert_line TYPE=ext2
	assert_line VERSION=1.0
	assert_line USAGE=filesystem
	run -0 sb_field "$IMG" "Filesystem revision #"
	assert_output "1 (dynamic)"
}

@test "the feature set is exactly filetype sparse_super large_file" {
	for size in 8M 1G; do
		rm -f "$IMG"
		"$MKFS" -q "$IMG" "$size"
		run -0 sb_field "$IMG" "Filesystem features"
		assert_output "filetype sparse_super large_file"
	done
}

@test "below 512 MiB the default is 1 KiB blocks and one inode per 4 KiB, like mke2fs" {
	"$MKFS" -q "$IMG" 64M
	run -0 sb_field "$IMG" "Block size"
	assert_output 1024
	run -0 sb_field "$IMG" "Inode count"
	assert_output 16384
	run -0 sb_field "$IMG" "Inode size"
	assert_output 256
}

@test "from 512 MiB the default is 4 KiB blocks and one inode per 16 KiB, like mke2fs" {
	"$MKFS" -q "$IMG" 1G
	run -0 sb_field "$IMG" "Block size"
	assert_output 4096
	run -0 sb_field "$IMG" "Inode count"
	assert_output 65536
	assert_fsck_clean "$IMG"
}

@test "-b sets the block size and each size gives a clean file system" {
	for bs in 1024 2048 4096; do
		rm -f "$IMG"
		"$MKFS" -q -b "$bs" "$IMG" 32M
		run -0 sb_field "$IMG" "Block size"
		assert_output "$bs"
		run -0 sb_field "$IMG" "Block count"
		assert_output $((32 * 1024 * 1024 / bs))
		assert_fsck_clean "$IMG"
	done
}

@test "--block-size is the long form of -b" {
	"$MKFS" -q --block-size=4096 "$IMG" 16M
	run -0 sb_field "$IMG" "Block size"
	assert_output 4096
}

@test "-N sets the inode count" {
	# 1024 inodes of 256 bytes fill whole 1 KiB table blocks in one
	# group, so libext2fs needs no rounding.
	"$MKFS" -q -N 1024 "$IMG" 8M
	run -0 sb_field "$IMG" "Inode count"
	assert_output 1024
	assert_fsck_clean "$IMG"
}

@test "-N rounds an inode count the way mke2fs does" {
	# libext2fs fills whole inode table blocks and keeps a multiple of 8
	# per group, so the count moves a little; it must move exactly as
	# stock mke2fs moves it for the same request.
	for n in 1001 3333 20000; do
		"$MKFS" -q -F -N "$n" "$IMG" 32M
		make_stock_image "$SCRATCH/stock.img" 32M -N "$n" \
			-O ^resize_inode,^dir_index,^ext_attr
		assert_equal "$(sb_field "$IMG" "Inode count")" \
			"$(sb_field "$SCRATCH/stock.img" "Inode count")"
		assert_fsck_clean "$IMG"
	done
}

@test "-i sets the bytes per inode" {
	"$MKFS" -q -i 8192 "$IMG" 16M
	run -0 sb_field "$IMG" "Inode count"
	assert_output 2048
	"$MKFS" -q -F --bytes-per-inode=16K "$IMG" 16M
	run -0 sb_field "$IMG" "Inode count"
	assert_output 1024
}

@test "-I sets the inode size" {
	"$MKFS" -q -I 128 "$IMG" 8M
	run -0 sb_field "$IMG" "Inode size"
	assert_output 128
	assert_fsck_clean "$IMG"
}

@test "-L sets the label that dumpe2fs and blkid report" {
	"$MKFS" -q -L scratch-vol "$IMG" 8M
	run -0 sb_field "$IMG" "Filesystem volume name"
	assert_output scratch-vol
	run -0 blkid -p -s LABEL -o value "$IMG"
	assert_output scratch-vol
}

@test "a label of exactly 16 bytes is kept whole" {
	"$MKFS" -q -L 0123456789abcdef "$IMG" 8M
	run -0 sb_field "$IMG" "Filesystem volume name"
	assert_output 0123456789abcdef
}

@test "-U sets the given UUID" {
	"$MKFS" -q -U 0b5d1e7c-4a3f-4c8e-9d2b-6f1a2e3c4d5e "$IMG" 8M
	run -0 sb_field "$IMG" "Filesystem UUID"
	assert_output 0b5d1e7c-4a3f-4c8e-9d2b-6f1a2e3c4d5e
}

@test "-U clear makes the nil UUID" {
	"$MKFS" -q -U clear "$IMG" 8M
	run -0 sb_field "$IMG" "Filesystem UUID"
	assert_output "<none>"
}

@test "-U time makes a version 1 UUID" {
	"$MKFS" -q -U time "$IMG" 8M
	run -0 sb_field "$IMG" "Filesystem UUID"
	assert_output --regexp '^[0-9a-f]{8}-[0-9a-f]{4}-1[0-9a-f]{3}-'
}

@test "the default UUID is random: version 4 and different each time" {
	"$MKFS" -q "$IMG" 8M
	a=$(sb_field "$IMG" "Filesystem UUID")
	"$MKFS" -q -F -U random "$IMG" 8M
	b=$(sb_field "$IMG" "Filesystem UUID")
	[[ $a =~ ^[0-9a-f]{8}-[0-9a-f]{4}-4 ]]
	[[ $b =~ ^[0-9a-f]{8}-[0-9a-f]{4}-4 ]]
	[ "$a" != "$b" ]
}

@test "-m sets the reserved block percentage" {
	"$MKFS" -q -m 10 "$IMG" 8M
	run -0 sb_field "$IMG" "Reserved block count"
	assert_output 819
	"$MKFS" -q -F -m 0 "$IMG" 8M
	run -0 sb_field "$IMG" "Reserved block count"
	assert_output 0
	"$MKFS" -q -F --reserved-percent=2.5 "$IMG" 8M
	run -0 sb_field "$IMG" "Reserved block count"
	assert_output 204
}

@test "the default reserve is 5 percent" {
	"$MKFS" -q "$IMG" 8M
	run -0 sb_field "$IMG" "Reserved block count"
	assert_output 409
}

@test "a plain SIZE counts 1 KiB blocks, as in mke2fs" {
	"$MKFS" -q "$IMG" 6000
	run -0 sb_field "$IMG" "Block count"
	assert_output 6000
	run -0 stat -c %s "$IMG"
	assert_output $((6000 * 1024))
}

@test "with -b a plain SIZE counts blocks of that size" {
	"$MKFS" -q -b 4096 "$IMG" 3000
	run -0 sb_field "$IMG" "Block count"
	assert_output 3000
	run -0 stat -c %s "$IMG"
	assert_output $((3000 * 4096))
}

@test "SIZE suffixes K, M and G are powers of 1024 bytes" {
	"$MKFS" -q "$IMG" 12288K
	run -0 sb_field "$IMG" "Block count"
	assert_output 12288
	rm -f "$IMG"
	"$MKFS" -q "$IMG" 12m
	run -0 sb_field "$IMG" "Block count"
	assert_output 12288
	rm -f "$IMG"
	"$MKFS" -q "$IMG" 1G
	run -0 stat -c %s "$IMG"
	assert_output 1073741824
}

@test "without SIZE the whole existing file is used" {
	truncate -s 10M "$IMG"
	run -0 "$MKFS" -q "$IMG"
	run -0 sb_field "$IMG" "Block count"
	assert_output 10240
	assert_fsck_clean "$IMG"
}

@test "a SIZE larger than an existing file extends the file" {
	truncate -s 4M "$IMG"
	"$MKFS" -q "$IMG" 8M
	run -0 stat -c %s "$IMG"
	assert_output 8388608
	assert_fsck_clean "$IMG"
}

@test "a SIZE smaller than an existing file uses only that much" {
	truncate -s 16M "$IMG"
	"$MKFS" -q "$IMG" 8M
	run -0 stat -c %s "$IMG"
	assert_output 16777216
	run -0 sb_field "$IMG" "Block count"
	assert_output 8192
}

@test "a missing image without SIZE is a usage error and creates nothing" {
	run -16 --separate-stderr "$MKFS" "$IMG"
	assert_one_line_error
	assert_equal "$stderr" "fstitch-mkfs: '$IMG' does not exist; give a SIZE to create it"
	[ ! -e "$IMG" ]
}

@test "the Linux kernel mounts the image as ext2 and reads back what it wrote" {
	for bs in 1024 4096; do
		rm -f "$IMG"
		"$MKFS" -q -b "$bs" "$IMG" 16M
		kernel_mount "$IMG" "$SCRATCH/mnt"
		run -0 findmnt -n -o FSTYPE "$SCRATCH/mnt"
		assert_output ext2
		[ -d "$SCRATCH/mnt/lost+found" ]
		seq 1 20000 >"$SCRATCH/mnt/numbers"
		mkdir "$SCRATCH/mnt/dir"
		echo hello >"$SCRATCH/mnt/dir/greeting"
		kernel_umount "$SCRATCH/mnt"
		assert_fsck_clean "$IMG"
		run -0 --separate-stderr debugfs -R "cat /dir/greeting" "$IMG"
		assert_output hello
		run -0 bash -c "debugfs -R 'cat /numbers' '$IMG' 2>/dev/null | cmp - <(seq 1 20000)"
	done
}

@test "debugfs reads the root directory, lost+found and the superblock" {
	"$MKFS" -q -L dbg "$IMG" 8M
	run -0 debugfs -R "ls -p /" "$IMG"
	assert_line --partial '/2/040755/'
	assert_line --partial '/lost+found/'
	run -0 debugfs -R "stat /lost+found" "$IMG"
	assert_output --partial "Type: directory"
	# lost+found has room (mke2fs gives it at least 16 KiB) so that
	# e2fsck can reconnect files without allocating.
	run -0 debugfs -R "stat /lost+found" "$IMG"
	assert_output --regexp 'Size: (12288|16384)'
	run -0 debugfs -R "stats" "$IMG"
	assert_output --partial "Filesystem volume name:   dbg"
}

@test "refuses to overwrite an ext4 file system without -F, naming it, and leaves it unchanged" {
	make_stock_image "$IMG" 8M -t ext4 -L precious
	before=$(file_sum "$IMG")
	run -8 --separate-stderr "$MKFS" "$IMG" 8M
	assert_equal "$stderr" \
		"fstitch-mkfs: '$IMG' holds an ext4 file system (label \"precious\"); use -F to overwrite"
	assert_equal "$(file_sum "$IMG")" "$before"
}

@test "refuses to overwrite an existing file without SIZE too" {
	make_stock_image "$IMG" 8M
	before=$(file_sum "$IMG")
	run -8 --separate-stderr "$MKFS" "$IMG"
	assert_output ""
	assert_equal "$stderr" "fstitch-mkfs: '$IMG' holds an ext2 file system; use -F to overwrite"
	assert_equal "$(file_sum "$IMG")" "$before"
}

@test "refuses to overwrite a partition table without -F" {
	# An MBR with one Linux partition: enough for libblkid to call it "dos".
	python3 -c '
import struct, sys
m = bytearray(512)
m[446:462] = bytes([0, 0, 0, 0, 0x83, 0, 0, 0]) + struct.pack("<II", 2048, 4096)
m[510:512] = b"\x55\xaa"
sys.stdout.buffer.write(m)' >"$IMG"
	truncate -s 8M "$IMG"
	before=$(file_sum "$IMG")
	run -8 --separate-stderr "$MKFS" "$IMG"
	assert_equal "$stderr" "fstitch-mkfs: '$IMG' holds a dos partition table; use -F to overwrite"
	assert_equal "$(file_sum "$IMG")" "$before"
}

@test "-F overwrites an existing file system and leaves no trace of it" {
	make_stock_image "$IMG" 8M -t ext4 -L old
	run -0 "$MKFS" -F "$IMG"
	assert_output --partial "overwrote    an ext4 file system (label \"old\")"
	run -0 blkid -p -o export "$IMG"
	assert_line TYPE=ext2
	refute_line LABEL=old
	run -0 sb_field "$IMG" "Filesystem features"
	assert_output "filetype sparse_super large_file"
	assert_fsck_clean "$IMG"
}

@test "-F erases a partition table's signature too" {
	python3 -c '
import struct, sys
m = bytearray(512)
m[446:462] = bytes([0, 0, 0, 0, 0x83, 0, 0, 0]) + struct.pack("<II", 2048, 4096)
m[510:512] = b"\x55\xaa"
sys.stdout.buffer.write(m)' >"$IMG"
	truncate -s 8M "$IMG"
	run -0 "$MKFS" -q -F "$IMG"
	run -0 blkid -p -o export "$IMG"
	assert_line TYPE=ext2
	refute_line --partial PTTYPE
}

@test "-n writes nothing to an existing image and says what it would make" {
	truncate -s 8M "$IMG"
	before=$(file_sum "$IMG")
	run -0 "$MKFS" -n -L planned "$IMG"
	assert_line "Would make an ext2 file system on '$IMG'"
	assert_line --regexp '^  size +8\.0 MiB: 8192 blocks of 1024 bytes$'
	assert_line --regexp '^  label +planned$'
	assert_line "Dry run: nothing was written"
	assert_equal "$(file_sum "$IMG")" "$before"
}

@test "-n creates no image file" {
	run -0 "$MKFS" --dry-run "$IMG" 8M
	assert_line "Would make an ext2 file system on '$IMG' (a new image file)"
	[ ! -e "$IMG" ]
}

@test "-n predicts the geometry the real run makes" {
	run -0 "$MKFS" -n -b 2048 -N 3000 "$IMG" 40M
	planned=$output
	run -0 "$MKFS" -b 2048 -N 3000 "$IMG" 40M
	# Same lines apart from the first line, the random UUID and the dry
	# run note.
	strip() { grep -vE '^(Would make|Made|  UUID|Dry run)'; }
	assert_equal "$(strip <<<"$output")" "$(strip <<<"$planned")"
	run -0 sb_field "$IMG" "Inode count"
	assert_equal "$(grep -oE '^  inodes +[0-9]+' <<<"$planned" | grep -oE '[0-9]+$')" "$output"
}

@test "refuses a mounted image even with -F" {
	"$MKFS" -q "$IMG" 8M
	kernel_mount "$IMG" "$SCRATCH/mnt"
	run -8 --separate-stderr "$MKFS" -F "$IMG"
	assert_one_line_error
	assert_equal "$stderr" "fstitch-mkfs: '$IMG' is mounted"
}

@test "makes a file system on a block device and sizes it from the device" {
	truncate -s 20M "$SCRATCH/backing"
	LOOPDEV=$(losetup -f --show "$SCRATCH/backing")
	run -0 "$MKFS" -q "$LOOPDEV"
	run -0 sb_field "$LOOPDEV" "Block count"
	assert_output 20480
	assert_fsck_clean "$LOOPDEV"
	run -0 blkid -p -s TYPE -o value "$LOOPDEV"
	assert_output ext2
}

@test "a SIZE larger than the block device is a usage error" {
	truncate -s 8M "$SCRATCH/backing"
	LOOPDEV=$(losetup -f --show "$SCRATCH/backing")
	before=$(file_sum "$SCRATCH/backing")
	run -16 --separate-stderr "$MKFS" "$LOOPDEV" 16M
	assert_one_line_error
	assert_equal "$(file_sum "$SCRATCH/backing")" "$before"
}

@test "bad option values are a one-line usage error with exit 16 and write nothing" {
	truncate -s 8M "$IMG"
	before=$(file_sum "$IMG")
	while read -r args; do
		# shellcheck disable=SC2086
		run -16 --separate-stderr "$MKFS" $args "$IMG"
		assert_one_line_error || { echo "args: $args" >&2; return 1; }
		assert_equal "$(file_sum "$IMG")" "$before"
	done <<-'EOF'
		-b 3000
		-b 8192
		-b four
		-b 0
		-N 0
		-N lots
		-N 5000000000
		-i 512
		-i 12x
		-I 100
		-I 2048
		-I 4096 -b 2048
		-m 51
		-m -1
		-m five
		-L seventeen-bytes-x
		-U not-a-uuid
		-U 0b5d1e7c-4a3f-4c8e-9d2b
		EOF
}

@test "bad sizes are a one-line usage error with exit 16 and create nothing" {
	for size in 12Q 0 8M8 "" 1.5M 99999999999999999999 17T 20000000000; do
		run -16 --separate-stderr "$MKFS" "$IMG" "$size"
		assert_one_line_error || { echo "size: '$size'" >&2; return 1; }
		[ ! -e "$IMG" ] || { echo "size '$size' created the image" >&2; return 1; }
	done
}

@test "a size too small for ext2 is a usage error that says so and creates nothing" {
	run -16 --separate-stderr "$MKFS" "$IMG" 40K
	assert_one_line_error
	assert_equal "$stderr" \
		"fstitch-mkfs: size 40.0 KiB is too small for an ext2 file system with 1024-byte blocks"
	[ ! -e "$IMG" ]
}

@test "too many inodes for the size is a usage error" {
	run -16 --separate-stderr "$MKFS" -N 100000 "$IMG" 1M
	assert_one_line_error
	[ ! -e "$IMG" ]
}

@test "an unknown option exits 16 and names the option" {
	run -16 --separate-stderr "$MKFS" --bogus "$IMG" 8M
	assert_equal "${stderr_lines[0]}" "fstitch-mkfs: unrecognized option '--bogus'"
	[ ! -e "$IMG" ]
}

@test "a missing device argument or a third argument exits 16" {
	run -16 --separate-stderr "$MKFS"
	assert_equal "${stderr_lines[0]}" "fstitch-mkfs: no device or image file given"
	run -16 --separate-stderr "$MKFS" "$IMG" 8M extra
	assert_equal "${stderr_lines[0]}" "fstitch-mkfs: too many arguments: 'extra'"
	[ ! -e "$IMG" ]
}

@test "a directory as target is an operational error (exit 8)" {
	run -8 --separate-stderr "$MKFS" "$SCRATCH" 8M
	assert_one_line_error
	assert_equal "$stderr" "fstitch-mkfs: '$SCRATCH' is not a regular file or block device"
}

@test "an image in a missing directory is an operational error (exit 8)" {
	run -8 --separate-stderr "$MKFS" "$SCRATCH/no/such/disk.img" 8M
	assert_one_line_error
	assert_output ""
	[[ $stderr == *"cannot create '$SCRATCH/no/such/disk.img': No such file or directory" ]]
}

@test "--help exits 0 and lists the options and exit statuses" {
	run -0 "$MKFS" --help
	assert_line --partial "Usage: fstitch-mkfs [OPTION...] DEVICE|IMAGE [SIZE]"
	for opt in --block-size --inodes --bytes-per-inode --inode-size --label \
		--uuid --reserved-percent --force --dry-run --quiet --verbose --version; do
		assert_output --partial -- "$opt"
	done
	assert_output --partial "Exit status: 0 success, 8 operational error, 16 usage or syntax error."
}

@test "--version exits 0 and prints the name and version" {
	run -0 "$MKFS" --version
	assert_output --regexp '^fstitch-mkfs \(fstitch\) [0-9]+\.[0-9]+\.[0-9]+$'
}

@test "the summary states the geometry made; -q prints nothing" {
	run -0 "$MKFS" -L sum -m 10 "$IMG" 8M
	assert_line "Made an ext2 file system on '$IMG' (new image file)"
	assert_line --regexp '^  inodes +2048 of 256 bytes, one per 4096 bytes$'
	assert_line --regexp '^  reserved +819 blocks \(10\.00%\) for the super user$'
	assert_line --regexp '^  features +filetype sparse_super large_file$'
	uuid=$(sb_field "$IMG" "Filesystem UUID")
	assert_line --regexp "^  UUID +$uuid\$"
	run -0 --separate-stderr "$MKFS" -q -F "$IMG" 8M
	assert_output ""
	assert_equal "$stderr" ""
}

@test "-v adds free counts and the superblock backups are listed" {
	run -0 "$MKFS" -v "$IMG" 64M
	assert_line --regexp '^  free +[0-9]+ blocks, [0-9]+ inodes$'
	# sparse_super: copies in groups 1, 3, 5, 7 (8192-block groups,
	# first data block 1).
	assert_line --regexp '^  backups at +8193 24577 40961 57345$'
	for b in 8193 24577 40961 57345; do
		run -0 e2fsck -fn -b "$b" -B 1024 "$IMG"
	done
}

@test "mkfs -t fstitch runs fstitch-mkfs through a mkfs.fstitch symlink" {
	mkdir "$SCRATCH/sbin"
	ln -s "$MKFS" "$SCRATCH/sbin/mkfs.fstitch"
	run -0 env PATH="$SCRATCH/sbin:$PATH" mkfs -t fstitch -L viamkfs "$IMG" 8M
	assert_line "Made an ext2 file system on '$IMG' (new image file)"
	run -0 sb_field "$IMG" "Filesystem volume name"
	assert_output viamkfs
	assert_fsck_clean "$IMG"
	# The mkfs family's statuses come through mkfs(8) unchanged.
	run -8 env PATH="$SCRATCH/sbin:$PATH" mkfs -t fstitch "$IMG"
	run -16 env PATH="$SCRATCH/sbin:$PATH" mkfs -t fstitch -b 3000 "$IMG"
}

@test "errors name the program as it was called (mkfs.fstitch)" {
	ln -s "$MKFS" "$SCRATCH/mkfs.fstitch"
	run -16 --separate-stderr "$SCRATCH/mkfs.fstitch" -b 3000 "$IMG" 8M
	[[ ${stderr_lines[0]} == "mkfs.fstitch: "* ]]
}

# ---------------------------------------------------------------- journals

# journal_blocks IMAGE: the journal's length in blocks, as dumpe2fs reads it.
journal_blocks() {
	sb_field "$1" "Total journal blocks"
}

@test "-j adds a journal of mke2fs's default size: ext3 to e2fsck, dumpe2fs and blkid" {
	# mke2fs's sizes: 1024 blocks below 32768, 4096 from there
	for size in 8M 64M; do
		rm -f "$IMG"
		run -0 "$MKFS" -j "$IMG" "$size"
		assert_line "Made an ext3 file system on '$IMG' (new image file)"
		assert_line --regexp '^  features +has_journal filetype sparse_super large_file$'
		assert_fsck_clean "$IMG"
		run -0 sb_field "$IMG" "Filesystem features"
		assert_output "has_journal filetype sparse_super large_file"
		run -0 sb_field "$IMG" "Journal inode"
		assert_output 8
		run -0 sb_field "$IMG" "Journal start"
		assert_output 0
		make_stock_image "$SCRATCH/stock.img" "$size" -t ext3
		want=$(journal_blocks "$SCRATCH/stock.img")
		run -0 journal_blocks "$IMG"
		assert_output "$want"
		run -0 blkid -p -o value -s TYPE "$IMG"
		assert_output ext3
	done
	# the summary's journal line
	run -0 "$MKFS" -F -j "$IMG" 64M
	assert_line --regexp '^  journal +4\.0 MiB: 4096 blocks$'
}

@test "-J size= sets the journal size in MiB, as mke2fs -J size= does, and -n predicts it" {
	"$MKFS" -q -J size=2 "$IMG" 16M
	run -0 journal_blocks "$IMG"
	assert_output 2048
	assert_fsck_clean "$IMG"
	rm "$IMG"
	"$MKFS" -q -b 4096 --journal-options=size=8 "$IMG" 64M
	run -0 journal_blocks "$IMG"
	assert_output 2048
	assert_fsck_clean "$IMG"
	# the same journal as mke2fs makes with the same options
	make_stock_image "$SCRATCH/stock.img" 64M -t ext3 -b 4096 -J size=8
	assert_equal "$(journal_blocks "$SCRATCH/stock.img")" 2048
	# -n predicts the journal and writes nothing
	rm "$IMG"
	truncate -s 16M "$IMG"
	before=$(file_sum "$IMG")
	run -0 "$MKFS" -n -J size=3 "$IMG"
	assert_line "Would make an ext3 file system on '$IMG'"
	assert_line --regexp '^  journal +3\.0 MiB: 3072 blocks$'
	assert_equal "$(file_sum "$IMG")" "$before"
}

@test "bad journal options and sizes are a one-line usage error with exit 16 and write nothing" {
	truncate -s 16M "$IMG"
	before=$(file_sum "$IMG")
	while IFS='|' read -r args msg; do
		# shellcheck disable=SC2086
		run -16 --separate-stderr "$MKFS" $args "$IMG"
		assert_one_line_error || { echo "args: $args" >&2; return 1; }
		assert_equal "$stderr" "fstitch-mkfs: $msg"
	done <<-'EOF'
		-J size=0|invalid journal size '0': must be at least 1 MiB
		-J size=x|invalid journal size 'x': not a number of MiB
		-J size=4M|invalid journal size '4M': not a number of MiB
		-J size=99999999999|invalid journal size '99999999999': too large
		-J size=|invalid journal option 'size=': only size=MIB is supported
		-J device=/dev/sdb1|invalid journal option 'device=/dev/sdb1': only size=MIB is supported
		-J size=4,location=1M|invalid journal option 'location=1M': only size=MIB is supported
		-b 4096 -J size=2|journal size 2 MiB is 512 blocks of 4096 bytes; a journal must have 1024 to 10240000 blocks
		-J size=9|journal size 9 MiB is too large for a file system of 16.0 MiB: a journal may take at most half of the free blocks (7 MiB here)
		EOF
	# (a run that wrote would have left a new file system, with a new UUID)
	assert_equal "$(file_sum "$IMG")" "$before"
	rm "$IMG"
	run -16 --separate-stderr "$MKFS" -j "$IMG" 1M
	assert_one_line_error
	assert_equal "$stderr" "fstitch-mkfs: size 1.0 MiB is too small for a journal: that needs a file system of at least 2048 blocks (this one has 1024 of 1024 bytes)"
	[ ! -e "$IMG" ]
	run -16 --separate-stderr "$MKFS" -b 4096 -J size=40001 "$IMG" 1G
	assert_one_line_error
	[ ! -e "$IMG" ]
}

@test "the kernel mounts a -j image as ext3, and so does fstitch-mount" {
	"$MKFS" -q -j "$IMG" 16M
	mkdir -p "$SCRATCH/mnt"
	mount -t ext3 -o loop "$IMG" "$SCRATCH/mnt"
	track_mount "$SCRATCH/mnt" kernel
	seq 1 20000 >"$SCRATCH/mnt/numbers"
	kernel_umount "$SCRATCH/mnt"
	assert_fsck_clean "$IMG"
	fstitch_mount_start "$IMG" "$SCRATCH/mnt"
	run -0 cmp "$SCRATCH/mnt/numbers" <(seq 1 20000)
	echo hello >"$SCRATCH/mnt/greeting"
	fstitch_mount_stop "$SCRATCH/mnt"
	fstitch_mount_reap
	assert_fsck_clean "$IMG"
	run -0 sb_field "$IMG" "Journal start"
	assert_output 0
	run -0 --separate-stderr debugfs -R "cat /greeting" "$IMG"
	assert_output hello
}
