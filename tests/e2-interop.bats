#!/usr/bin/env bats
# The ext2 module against the rest of the world: a tree written through
# libfstitch (e2tool put) must read back identically through the Linux
# kernel and through debugfs, and pass e2fsck; a tree written by the kernel
# must read back identically through libfstitch (e2tool get).

load common

setup() {
	common_setup
	# loop mounts need root
	[ "$(id -u)" -eq 0 ] || skip "needs root (kernel loop mount)"
	E2TOOL=$FSTITCH_TOOLS/e2tool
	[ -x "$E2TOOL" ] || {
		echo "e2tool is not built: $E2TOOL missing" >&2
		return 1
	}
	TREE=$SCRATCH/tree
	make_tree "$TREE"
}

teardown() {
	common_teardown
}

# make_tree DIR: a few hundred entries covering what ext2 must store:
# nested directories, empty files, sizes on both sides of the indirect
# (12 KiB) and double-indirect (268 KiB) boundaries with 1 KiB blocks, a
# sparse file, fast and slow symlinks, hard links, odd modes, a fifo, a
# 255-byte name.
make_tree() {
	local t=$1 i j s
	mkdir -p "$t"
	for i in $(seq 0 9); do
		for j in 0 1 2; do
			mkdir -p "$t/d$i/sub$j/deeper"
			for s in 0 1 2 3 4 5; do
				head -c $(((i * 7919 + j * 104729 + s * 1299709) % 5000)) \
					/dev/urandom >"$t/d$i/sub$j/f$s"
			done
			: >"$t/d$i/sub$j/deeper/empty"
		done
	done
	for s in 1 1023 1024 1025 12287 12288 12289 274431 274432 274433 300000; do
		head -c $s /dev/urandom >"$t/size-$s"
	done
	# sparse: holes at the start, in the middle (crossing into the
	# double-indirect range) and at the end
	printf 'middle' | dd of="$t/sparse" bs=1 seek=150000 conv=notrunc status=none
	printf 'far' | dd of="$t/sparse" bs=1 seek=900000 conv=notrunc status=none
	truncate -s 2000000 "$t/sparse"
	ln -s size-1 "$t/fastlink"
	ln -s "$(printf 'x%.0s' $(seq 1 59))" "$t/fastlink59"
	ln -s "$(printf 'long/%.0s' $(seq 1 40))target" "$t/slowlink"
	ln -s d0/sub0 "$t/dirlink"
	ln "$t/size-1024" "$t/d3/hardlink-a"
	ln "$t/size-1024" "$t/d4/sub1/hardlink-b"
	ln "$t/d0/sub0/f1" "$t/d0/sub0/f1-again"
	chmod 0600 "$t/size-1"
	chmod 4751 "$t/size-1023"
	chmod 0700 "$t/d9"
	chmod 1777 "$t/d8"
	mkfifo "$t/fifo"
	: >"$t/$(printf 'n%.0s' $(seq 1 255))"
	mkdir "$t/emptydir"
	touch -d '2001-02-03 04:05:06' "$t/size-12288"
}

# listing DIR [nlink]: one line per entry: path, type, mode, size (not for
# directories, whose size differs between implementations), with "nlink"
# the link count, mtime in seconds (not for directories and symlinks), and
# the link target; lost+found left out.
listing() {
	(cd "$1" && find . -path ./lost+found -prune -o \
		-printf '%p %y %m %s %n %T@ ->%l\n' | sort) |
		awk -v nl="${2:-}" '$1 == "." { next }
			{ if ($2 == "d") $4 = "-"; if (nl != "nlink") $5 = "-"
			  sub(/\..*/, "", $6)
			  if ($2 == "l" || $2 == "d") $6 = "-"; print }'
}

# same_tree A B [nlink]: contents and metadata equal (diff cannot compare
# fifos, so the listing covers them).
same_tree() {
	diff -r --no-dereference -x lost+found -x fifo "$1" "$2"
	diff <(listing "$1" "${3:-}") <(listing "$2" "${3:-}")
}

# e2tool ARGS...: run e2tool, and on failure show what it said.
e2tool() {
	run "$E2TOOL" "$@"
	if [ "$status" -ne 0 ]; then
		echo "e2tool $*: exit status $status" >&2
		printf '%s\n' "$output" >&2
		return 1
	fi
}

# write_through_library IMAGE: put $TREE into IMAGE's root, check e2fsck.
write_through_library() {
	e2tool "$1" put "$TREE" /
	assert_fsck_clean "$1"
}

@test "a tree written through the library on a mke2fs image reads back identically through the kernel" {
	make_stock_image "$SCRATCH/img" 16M -b 1024
	write_through_library "$SCRATCH/img"
	kernel_mount "$SCRATCH/img" "$SCRATCH/mnt" ro
	same_tree "$TREE" "$SCRATCH/mnt" nlink
	# the library kept the sparse file sparse: far fewer blocks than bytes
	blocks=$(stat -c %b "$SCRATCH/mnt/sparse")
	[ "$blocks" -lt 100 ]
	kernel_umount "$SCRATCH/mnt"
	assert_fsck_clean "$SCRATCH/img"
}

@test "a tree written through the library reads back identically through debugfs rdump" {
	make_stock_image "$SCRATCH/img" 16M -b 1024
	write_through_library "$SCRATCH/img"
	mkdir "$SCRATCH/out"
	run -0 debugfs -R "rdump / $SCRATCH/out" "$SCRATCH/img"
	# rdump writes hard links as separate files (no link counts here),
	# skips fifos, and drops the setuid, setgid and sticky bits: those are
	# checked with debugfs stat instead
	diff -r --no-dereference -x lost+found -x fifo "$TREE" "$SCRATCH/out"
	diff <(listing "$TREE" | awk '$2 != "p" { $3 = substr($3, length($3) - 2); print }') \
		<(listing "$SCRATCH/out" | awk '$2 != "p" { $3 = substr($3, length($3) - 2); print }')
	run -0 debugfs -R "stat /size-1023" "$SCRATCH/img"
	assert_output --partial "Mode:  04751"
	run -0 debugfs -R "stat /d8" "$SCRATCH/img"
	assert_output --partial "Mode:  01777"
	run -0 debugfs -R "stat /fifo" "$SCRATCH/img"
	assert_output --partial "Type: FIFO"
}

@test "a tree written through the library on a 4 KiB-block image reads back through the kernel" {
	make_stock_image "$SCRATCH/img" 32M -b 4096
	write_through_library "$SCRATCH/img"
	kernel_mount "$SCRATCH/img" "$SCRATCH/mnt" ro
	same_tree "$TREE" "$SCRATCH/mnt" nlink
}

@test "a tree written through a 32-block cache, or with ordering off, reads back identically" {
	make_stock_image "$SCRATCH/img" 16M -b 1024
	cp "$SCRATCH/img" "$SCRATCH/img2"
	# a tiny cache writes and evicts in the middle of the copy
	e2tool --cache-blocks=32 "$SCRATCH/img" put "$TREE" /
	assert_fsck_clean "$SCRATCH/img"
	kernel_mount "$SCRATCH/img" "$SCRATCH/mnt" ro
	same_tree "$TREE" "$SCRATCH/mnt" nlink
	kernel_umount "$SCRATCH/mnt"
	# consistency none changes when blocks reach disk, never what they hold
	e2tool --consistency=none "$SCRATCH/img2" put "$TREE" /
	assert_fsck_clean "$SCRATCH/img2"
	mkdir "$SCRATCH/out"
	e2tool "$SCRATCH/img2" get / "$SCRATCH/out"
	same_tree "$TREE" "$SCRATCH/out" nlink
}

@test "a tree written by the kernel reads back identically through the library" {
	make_stock_image "$SCRATCH/img" 16M -b 1024
	kernel_mount "$SCRATCH/img" "$SCRATCH/mnt"
	cp -a "$TREE/." "$SCRATCH/mnt/"
	kernel_umount "$SCRATCH/mnt"
	mkdir "$SCRATCH/out"
	before=$(file_sum "$SCRATCH/img")
	e2tool "$SCRATCH/img" get / "$SCRATCH/out"
	same_tree "$TREE" "$SCRATCH/out" nlink
	# e2tool get opens read only: not one byte of the image changed
	[ "$(file_sum "$SCRATCH/img")" = "$before" ]
	assert_fsck_clean "$SCRATCH/img"
}

@test "a tree written through the library on an fstitch-mkfs image reads back through the kernel" {
	[ -x "$FSTITCH_BIN/fstitch-mkfs" ] || skip "fstitch-mkfs is not built"
	truncate -s 16M "$SCRATCH/img"
	make_image "$SCRATCH/img" 16M
	assert_fsck_clean "$SCRATCH/img"
	write_through_library "$SCRATCH/img"
	kernel_mount "$SCRATCH/img" "$SCRATCH/mnt" ro
	same_tree "$TREE" "$SCRATCH/mnt" nlink
}

@test "a tree copied into a subdirectory lists and reads back through the library" {
	make_stock_image "$SCRATCH/img" 16M -b 1024
	kernel_mount "$SCRATCH/img" "$SCRATCH/mnt"
	mkdir "$SCRATCH/mnt/in"
	kernel_umount "$SCRATCH/mnt"
	e2tool "$SCRATCH/img" put "$TREE/d1" /in
	e2tool "$SCRATCH/img" ls /in
	assert_line --regexp '^[0-9]+ 40755 3 [0-9]+ sub0$'
	e2tool "$SCRATCH/img" cat /in/sub2/f3
	cmp <("$E2TOOL" "$SCRATCH/img" cat /in/sub2/f3) "$TREE/d1/sub2/f3"
	assert_fsck_clean "$SCRATCH/img"
}

@test "e2tool refuses a missing image with status 1 and a message" {
	run --separate-stderr -1 "$E2TOOL" "$SCRATCH/nothing" ls /
	[[ $stderr == "e2tool: cannot open '$SCRATCH/nothing':"* ]]
}

# statfs_of DIR: the statfs numbers df uses, as one line (block size,
# blocks, free, available, inodes, free inodes).
statfs_of() {
	stat -f -c '%S %b %f %a %c %d' "$1"
}

@test "statfs through the mount gives the kernel's numbers for the same image" {
	local img=$SCRATCH/a.img mnt=$SCRATCH/mnt kmnt=$SCRATCH/kmnt ours kern kind i
	for kind in fstitch-mkfs mke2fs ext3; do
		rm -f "$img"
		if [ $kind = fstitch-mkfs ]; then
			make_image "$img" 256M
		elif [ $kind = mke2fs ]; then
			# with a resize inode: reserved GDT blocks count as used
			truncate -s 256M "$img"
			mke2fs -q -F -t ext2 "$img"
		else
			# the journal's blocks count as used as well
			truncate -s 256M "$img"
			mke2fs -q -F -t ext3 "$img"
		fi
		fstitch_mount_start "$img" "$mnt"
		ours=$(statfs_of "$mnt")
		# df on an empty file system: about 1% used, not the 7% its
		# inode tables and bitmaps take
		read -r _ b f _ <<<"$ours"
		[ $(((b - f) * 100 / b)) -le 2 ] || fail "$kind empty: $ours"
		fstitch_mount_stop "$mnt"
		kernel_mount "$img" "$kmnt" ro
		kern=$(statfs_of "$kmnt")
		kernel_umount "$kmnt"
		[ "$ours" = "$kern" ] || fail "$kind empty: fstitch '$ours', kernel '$kern'"
		# and with some files in it
		fstitch_mount_start "$img" "$mnt"
		mkdir "$mnt/d"
		for i in $(seq 1 50); do
			head -c $((i * 200)) /dev/urandom >"$mnt/d/f$i"
		done
		ours=$(statfs_of "$mnt")
		fstitch_mount_stop "$mnt"
		kernel_mount "$img" "$kmnt" ro
		kern=$(statfs_of "$kmnt")
		kernel_umount "$kmnt"
		[ "$ours" = "$kern" ] || fail "$kind with files: fstitch '$ours', kernel '$kern'"
	done
}

# max_size DIR: the largest size ftruncate(2) gives a new file DIR/max
# (found by halving), then the file is emptied again.
max_size() {
	python3 - "$1/max" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o644)
lo, hi = 0, 1 << 50
while lo < hi:
    m = (lo + hi + 1) // 2
    try:
        os.ftruncate(fd, m)
        lo = m
    except OSError:
        hi = m - 1
os.ftruncate(fd, 0)
print(lo)
PY
}

@test "the largest file is the kernel's at 1, 2 and 4 KiB blocks, and its end reads back" {
	local img=$SCRATCH/a.img mnt=$SCRATCH/mnt kmnt=$SCRATCH/kmnt bs kern ours
	for bs in 1024 2048 4096; do
		rm -f "$img"
		truncate -s 64M "$img"
		mke2fs -q -F -t ext2 -b $bs "$img"
		kernel_mount "$img" "$kmnt"
		kern=$(max_size "$kmnt")
		# four bytes that end at the largest size, written by the kernel
		printf 'tail' | dd of="$kmnt/big" bs=1 seek=$((kern - 4)) conv=notrunc status=none
		kernel_umount "$kmnt"
		fstitch_mount_start "$img" "$mnt"
		ours=$(max_size "$mnt")
		[ "$ours" = "$kern" ] || fail "$bs-byte blocks: largest size $ours, the kernel's $kern"
		run -0 tail -c 4 "$mnt/big"
		assert_output tail
		fstitch_mount_stop "$mnt"
		run -0 e2fsck -fn "$img"
	done
}

# flag_rules DIR: set the immutable and append-only flags with chattr(1)
# on new files and directories in DIR, try what they forbid and allow, and
# print each step with its exit status; then clear them and remove all.
flag_rules() {
	local d=$1
	(
		cd "$d" || exit
		try() {
			"$@" 2>/dev/null
			echo "$*: $?"
		}
		echo d >i
		echo d >a
		mkdir idir adir
		touch adir/old
		chattr +i i idir && chattr +a a adir || exit
		lsattr -d i a idir adir | cut -c1-8
		try sh -c 'echo x >>i'
		try sh -c 'echo x >a'
		try sh -c 'echo x >>a'
		try rm -f i
		try touch idir/n
		try touch adir/n
		try rm adir/old
		try mv adir/old adir/o2
		try mv adir/old o2
		try chmod 600 i
		try chmod 600 a
		try chown 1:1 a
		try ln a a2
		try ln i i2
		try setfattr -n user.x -v 1 i
		try setfattr -n user.x -v 1 a
		try truncate -s 0 a
		try mv i j
		try touch -d 2001-01-01 i
		try fallocate -l 1M a
		cat a
		# another user may not clear them
		try setpriv --reuid 1000 --regid 1000 --clear-groups chattr -i i
		chattr -i i idir && chattr -a a adir || exit
		lsattr -d i a idir adir | cut -c1-8
		# the directory flags (dirsync, top of a tree) fit directories
		# alone
		try chattr +D a
		try chattr +T a
		try chattr +D adir
		try chattr +T adir
		lsattr -d a adir
		rm -rf i a idir adir
	)
}

# same_as_kernel KIMG IMG OPTS CMD...: run CMD DIR in a kernel mount of
# KIMG and in fstitch-mount's of IMG (with -o OPTS unless OPTS is empty);
# $kern and $ours get what each printed, and the test fails if they differ
same_as_kernel() {
	local kimg=$1 img=$2 opts=$3
	shift 3
	kernel_mount "$kimg" "$SCRATCH/kmnt"
	kern=$("$@" "$SCRATCH/kmnt")
	kernel_umount "$SCRATCH/kmnt"
	fstitch_mount_start "$img" "$SCRATCH/mnt" ${opts:+-o "$opts"}
	ours=$("$@" "$SCRATCH/mnt")
	fstitch_mount_stop "$SCRATCH/mnt"
	[ "$ours" = "$kern" ] || fail "$(diff <(echo "$kern") <(echo "$ours"))"
}

@test "chattr +i and +a forbid what they forbid on Linux's ext2, and both read each other's flags" {
	local img=$SCRATCH/a.img mnt=$SCRATCH/mnt kmnt=$SCRATCH/kmnt kern ours
	truncate -s 16M "$img"
	mke2fs -q -F -t ext2 "$img"
	same_as_kernel "$img" "$img" allow_other flag_rules
	# (the steps ran: some were refused, some not)
	grep -q ': 1$' <<<"$ours"
	grep -q ': 0$' <<<"$ours"
	# flags the kernel set hold under fstitch-mount, and the other way
	kernel_mount "$img" "$kmnt"
	echo k >"$kmnt/byk"
	chattr +i "$kmnt/byk"
	kernel_umount "$kmnt"
	fstitch_mount_start "$img" "$mnt"
	run -0 lsattr "$mnt/byk"
	assert_output --regexp '^----i'
	run ! rm -f "$mnt/byk"
	echo f >"$mnt/byf"
	chattr +a "$mnt/byf"
	fstitch_mount_stop "$mnt"
	kernel_mount "$img" "$kmnt"
	run -0 lsattr "$kmnt/byf"
	assert_output --regexp '^-----a'
	run ! rm -f "$kmnt/byf"
	chattr -i "$kmnt/byk"
	chattr -a "$kmnt/byf"
	kernel_umount "$kmnt"
	run -0 e2fsck -fn "$img"
}

# punch_rules DIR: another user punches holes in set-ID files it may
# write but does not own (inside the file, past its end, and past the
# largest file of 1 KiB blocks); each punch's status and the modes after
punch_rules() {
	(
		cd "$1" || exit
		for f in in past far; do
			head -c 8192 /dev/zero >"$f" && chown 1000:1000 "$f" && chmod 6777 "$f" || exit
		done
		as() { setpriv --reuid 1001 --regid 1001 --clear-groups "$@"; }
		as fallocate -p -o 1024 -l 1024 in
		echo "in: $?"
		as fallocate -p -o 1M -l 4096 past
		echo "past: $?"
		as fallocate -p -o 64G -l 1 far
		echo "far: $?"
		stat -c '%n %a %s' in past far
	)
}

@test "a hole punched by another user drops set-ID bits where Linux's ext2 does, even past the end" {
	local img=$SCRATCH/a.img kern ours
	truncate -s 16M "$img"
	mke2fs -q -F -t ext2 -b 1024 "$img"
	cp "$img" "$img.k"
	same_as_kernel "$img.k" "$img" allow_other punch_rules
	# (Linux's ext4 drops them in file_modified() before it looks at
	# the range: every punch went, and every file lost its bits)
	assert_equal "$ours" "in: 0
past: 0
far: 0
in 777 8192
past 777 8192
far 777 8192"
	run -0 e2fsck -fn "$img"
}

# atime_moved NAME...: for each file, in the current directory, whether
# its access time is still 2001-01-01 (UTC) or moved
atime_moved() {
	stat -c '%n %X' "$@" | sed 's/ 978307200$/ atime kept/; s/ [0-9]*$/ atime moved/'
}

# inherit_rules DIR: new files, directories, symbolic links and fifos
# under a directory with each inheritable flag; then the times that
# chown(f, -1, -1), a read, a listing and the noatime flag move.
inherit_rules() {
	local d=$1 f t
	(
		cd "$d" || exit
		for f in S d A D s u c t; do
			mkdir "p$f" && chattr "+$f" "p$f" || exit
			touch "p$f/f" && mkdir "p$f/d" && ln -s f "p$f/l" && mkfifo "p$f/p" || exit
			lsattr -d "p$f" "p$f/f" "p$f/d"
		done
		echo x >c
		t=$(stat -c %z c)
		sleep 0.05
		perl -e 'chown(-1, -1, $ARGV[0]) or die' c || exit
		[ "$(stat -c %z c)" = "$t" ] && echo "chown -1 -1: ctime kept" || echo "chown -1 -1: ctime moved"
		chattr +i c && { perl -e 'chown(-1, -1, $ARGV[0]) or exit 1' c; echo "chown -1 -1 of an immutable file: $?"; }
		chattr -i c
		mkdir r && touch r/x && echo y >a && echo z >n && chattr +A n || exit
		TZ=UTC touch -a -d 2001-01-01 r a n
		ls r >/dev/null && cat a n >/dev/null
		atime_moved r a n
	)
}

# diratime_rules DIR: what a listing and a read move under DIR
diratime_rules() {
	mkdir "$1/nd" && echo a >"$1/nd/a" || return
	TZ=UTC touch -a -d 2001-01-01 "$1/nd" "$1/nd/a"
	ls "$1/nd" >/dev/null && cat "$1/nd/a" >/dev/null
	(cd "$1" && atime_moved nd nd/a)
}

# flags_of IMG PATH...: each inode's flags as debugfs reads them
flags_of() {
	local img=$1 p
	shift
	for p in "$@"; do
		printf '%s ' "$p"
		debugfs -R "stat /$p" "$img" 2>/dev/null | sed -n 's/.*Flags: \(0x[0-9a-f]*\).*/\1/p'
	done
}

@test "new inodes take their directory's flags, and chown, reads and listings move times as on Linux's ext2" {
	local img=$SCRATCH/a.img kimg=$SCRATCH/k.img mnt=$SCRATCH/mnt kmnt=$SCRATCH/kmnt kern ours f
	local paths=()
	for f in S d A D s u c t; do paths+=("p$f/l" "p$f/p"); done
	truncate -s 16M "$img"
	mke2fs -q -F -t ext2 "$img"
	cp "$img" "$kimg"
	same_as_kernel "$kimg" "$img" "" inherit_rules
	# (flags were inherited, and times both kept and moved)
	grep -q "^---D-* pD/d$" <<<"$ours"
	grep -q 'atime kept' <<<"$ours"
	grep -q 'atime moved' <<<"$ours"
	grep -q 'ctime moved' <<<"$ours"
	# the symbolic links and fifos, which lsattr cannot read
	kern=$(flags_of "$kimg" "${paths[@]}")
	ours=$(flags_of "$img" "${paths[@]}")
	[ "$ours" = "$kern" ] || fail "$(diff <(echo "$kern") <(echo "$ours"))"
	grep -q '^pd/l 0x40$' <<<"$ours"
	run -0 e2fsck -fn "$img"
	# nodiratime: a listing moves no directory's access time, a read
	# still moves a file's
	kernel_mount "$kimg" "$kmnt" nodiratime
	kern=$(diratime_rules "$kmnt")
	kernel_umount "$kmnt"
	fstitch_mount_start "$img" "$mnt" -o nodiratime
	ours=$(diratime_rules "$mnt")
	fstitch_mount_stop "$mnt"
	assert_equal "$ours" "$kern"
	assert_equal "$ours" "nd atime kept
nd/a atime moved"
}

@test "each operation moves the access, modification and change times Linux's ext2 moves" {
	local img=$SCRATCH/a.img kimg=$SCRATCH/k.img kern ours
	local probe=$FSTITCH_ROOT/tests/tools/optimes.py
	truncate -s 16M "$img"
	mke2fs -q -F -t ext2 "$img"
	cp "$img" "$kimg"
	same_as_kernel "$kimg" "$img" "" "$probe"
	# (every operation ran; times moved and stayed)
	[ "$(wc -l <<<"$ours")" -eq 28 ]
	grep -q '^rename-over a/x2:c a/x:c a:mc b:mc$' <<<"$ours"
	grep -q '^write-empty b/f:-$' <<<"$ours"
	grep -q '^readlink b/l:a$' <<<"$ours"
	grep -q '^read-new a/r:a$' <<<"$ours"
	run -0 e2fsck -fn "$img"
}

# times_of DIR NAME...: each file's access and modification time in
# seconds and nanoseconds, one line per file.
times_of() {
	local dir=$1 n
	shift
	for n in "$@"; do
		TZ=UTC stat -c "$n %X %Y" "$dir/$n" | tr '\n' ' '
		# %x and %y carry the nanoseconds
		TZ=UTC stat -c '%x|%y' "$dir/$n" | sed 's/[^|]*\.\([0-9]*\) .*|.*\.\([0-9]*\) .*/\1 \2/'
	done
}

# touch_all DIR: the same dates through any mount
touch_all() {
	TZ=UTC touch -d '1969-07-20 20:17:40' "$1/moon"
	TZ=UTC touch -d '1901-12-13 20:45:52' "$1/min"
	TZ=UTC touch -d '1800-01-01' "$1/early"
	TZ=UTC touch -d '2038-01-19 03:14:08' "$1/y2038"
	TZ=UTC touch -d '2040-02-29 12:00:00' "$1/y2040"
	TZ=UTC touch -d '2500-01-01' "$1/y2500"
	TZ=UTC touch -d '2021-03-04 05:06:07.123456789' "$1/subsec"
}

@test "timestamps written through the mount read back as the kernel and debugfs read them" {
	local img=$SCRATCH/a.img kimg=$SCRATCH/k.img mnt=$SCRATCH/mnt kmnt=$SCRATCH/kmnt
	local names="moon min early y2038 y2040 y2500 subsec" isize ours kern ref
	for isize in 256 128; do
		rm -f "$img" "$kimg"
		if [ $isize = 256 ]; then
			# the default, as mke2fs's
			make_image "$img" 16M
			dumpe2fs -h "$img" 2>/dev/null | grep -q '^Inode size:[[:space:]]*256$'
		else
			make_image "$img" 16M -I 128
		fi
		cp "$img" "$kimg"
		fstitch_mount_start "$img" "$mnt"
		touch_all "$mnt"
		# shellcheck disable=SC2086 # a list of names
		ours=$(times_of "$mnt" $names)
		fstitch_mount_stop "$mnt"
		# the kernel's own result for the same dates on the same image
		kernel_mount "$kimg" "$kmnt"
		touch_all "$kmnt"
		# shellcheck disable=SC2086
		ref=$(times_of "$kmnt" $names)
		kernel_umount "$kmnt"
		[ "$ours" = "$ref" ] || fail "$isize: fstitch gave
$ours
the kernel gives
$ref"
		# what fstitch wrote, read by the kernel
		kernel_mount "$img" "$kmnt" ro
		# shellcheck disable=SC2086
		kern=$(times_of "$kmnt" $names)
		kernel_umount "$kmnt"
		[ "$kern" = "$ref" ] || fail "$isize: the kernel reads
$kern
from fstitch's image, wants
$ref"
		# and by debugfs
		run -0 debugfs -R 'stat /y2040' "$img"
		assert_output --regexp 'mtime: 0x[0-9a-f]+(:[0-9a-f]+)? -- .* 20(40|38)'
		run -0 debugfs -R 'stat /moon' "$img"
		assert_output --partial 'Jul 20 20:17:40 1969'
		if [ $isize = 256 ]; then
			# room for the extra words in every new inode, as Linux
			assert_output --partial 'Size of extra inode fields: 32'
		fi
		run -0 e2fsck -fn "$img"
		eval "ref$isize=\$ref"
	done
	# in detail: what each inode size holds
	assert_equal "$ref256" "\
moon -14182940 -14182940 000000000 000000000
min -2147483648 -2147483648 000000000 000000000
early -2147483648 -2147483648 000000000 000000000
y2038 2147483648 2147483648 000000000 000000000
y2040 2214129600 2214129600 000000000 000000000
y2500 15032385535 15032385535 000000000 000000000
subsec 1614834367 1614834367 123456789 123456789"
	assert_equal "$ref128" "\
moon -14182940 -14182940 000000000 000000000
min -2147483648 -2147483648 000000000 000000000
early -2147483648 -2147483648 000000000 000000000
y2038 2147483647 2147483647 000000000 000000000
y2040 2147483647 2147483647 000000000 000000000
y2500 2147483647 2147483647 000000000 000000000
subsec 1614834367 1614834367 000000000 000000000"
	run -0 debugfs -R 'stat /y2040' "$kimg"
	assert_output --partial 'Tue Jan 19 03:14:07 2038'
}
